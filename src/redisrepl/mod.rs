//! Replication with stock Redis servers over Redis's own protocol (PSYNC, the RDB transfer,
//! the command stream), the way a Redis user moves a live service between Redis and
//! deadbolt. Outside cluster mode only: a cluster replicates through Raft.

pub mod replica;
