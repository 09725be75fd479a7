//! Redis's own replication protocol, so that stock Redis servers and deadbolt replicate each
//! other (a single node; cluster mode replicates through Raft). `master`: deadbolt as the
//! master of `redis-server --replicaof` replicas (SYNC/PSYNC, REPLCONF, the backlog).

pub mod master;
