//! deadbolt as a replica of a Redis master (`REPLICAOF host port`): what the command side sees
//! of the master link (ROLE, INFO replication, the READONLY and MASTERDOWN refusals). The link
//! itself runs off the executor (redisrepl/replica.rs) and publishes its progress here through
//! atomics; the executor applies what it receives.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Redis's `repl_state` as ROLE names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum LinkState {
    /// Not connected; a connection is to be attempted.
    Connect = 0,
    /// The TCP connection is being made.
    Connecting = 1,
    /// PING, AUTH, REPLCONF, PSYNC exchanged.
    Handshake = 2,
    /// The RDB payload is being received.
    Sync = 3,
    /// Following the command stream.
    Connected = 4,
}

impl LinkState {
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Handshake => "handshake",
            LinkState::Sync => "sync",
            LinkState::Connected => "connected",
        }
    }

    fn from_u8(v: u8) -> LinkState {
        match v {
            1 => LinkState::Connecting,
            2 => LinkState::Handshake,
            3 => LinkState::Sync,
            4 => LinkState::Connected,
            _ => LinkState::Connect,
        }
    }
}

/// Shared between the link thread (which writes everything but `applied`) and the executor.
#[derive(Debug, Default)]
pub struct LinkShared {
    state: AtomicU8,
    /// Unix ms of the last byte from the master (INFO master_last_io_seconds_ago).
    pub last_io_ms: AtomicU64,
    /// Unix ms the link went down (0: it never was up since REPLICAOF).
    pub down_since_ms: AtomicU64,
    /// Bytes of the stream read (slave_read_repl_offset).
    pub read_offset: AtomicU64,
    /// Bytes of the stream applied by the executor (slave_repl_offset, REPLCONF ACK).
    pub applied: AtomicU64,
    /// The RDB transfer: its size (0 while unknown: the EOF-marked form) and bytes read.
    pub sync_total: AtomicU64,
    pub sync_read: AtomicU64,
    /// Set by the executor: the link ends (REPLICAOF NO ONE, another master, shutdown).
    pub stop: AtomicBool,
    /// Set by the executor once it loaded a full synchronisation's dataset (the link sends
    /// its first REPLCONF ACK then, as Redis after loading).
    pub loaded: AtomicBool,
    /// Set by the executor: the received dataset could not be loaded; the link reconnects
    /// and asks for a full resynchronisation.
    pub resync: AtomicBool,
}

impl LinkShared {
    pub fn state(&self) -> LinkState {
        LinkState::from_u8(self.state.load(Ordering::Acquire))
    }

    pub fn set_state(&self, s: LinkState) {
        self.state.store(s as u8, Ordering::Release);
    }
}

/// The master this server follows.
#[derive(Debug)]
pub struct MasterOf {
    pub host: String,
    pub port: u16,
    /// Which link's messages count: each REPLICAOF starts a new one.
    pub gen: u64,
    pub link: Arc<LinkShared>,
    /// The stream offset at the last full synchronisation (the replica's backlog starts after
    /// it, as INFO's repl_backlog_first_byte_offset).
    pub synced_at: Option<u64>,
    /// Following since start-up without a history to continue (Redis then has no cached
    /// master, and INFO's replica offsets read 1 until the first synchronisation).
    pub uncached: bool,
}

/// The replica side's replication history (INFO master_replid2, second_repl_offset,
/// master_repl_offset once promoted).
#[derive(Debug, Default)]
pub struct ReplicaHistory {
    /// The master followed now or last (None: never a replica since start).
    pub master: Option<MasterOf>,
    /// The stream offset applied (the master's offset, kept through promotion).
    pub offset: u64,
    /// Where the replica's backlog starts (the offset of its first synchronisation, or of the
    /// first partial one); a promoted replica keeps it (INFO repl_backlog_*).
    pub backlog_from: Option<u64>,
    /// After a promotion: the previous replication id and the first offset it no longer
    /// covers (Redis's shiftReplicationId).
    pub replid2: Option<(String, u64)>,
}

impl ReplicaHistory {
    /// True while following a master (Redis's `server.masterhost`).
    pub fn following(&self) -> bool {
        self.master.is_some()
    }

    /// Whether the link is up (`master_link_status:up`).
    pub fn link_up(&self) -> bool {
        self.master
            .as_ref()
            .is_some_and(|m| m.link.state() == LinkState::Connected)
    }
}
