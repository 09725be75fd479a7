//! The operator state MONITOR, SLOWLOG and CLIENT PAUSE keep (their commands: cmd/observe.rs).

use bytes::Bytes;
use std::collections::VecDeque;

#[derive(Default)]
pub struct OpsState {
    /// Ids of MONITOR clients, in the order they started.
    pub monitors: Vec<u64>,
    /// Monitor lines for the client whose command is running: written after its own reply.
    pub self_feed: Vec<u8>,
    /// Newest first.
    pub slowlog: VecDeque<SlowEntry>,
    pub slowlog_next_id: u64,
    pub pause: Pause,
    /// ACL LOG, newest first (cmd/acl.rs).
    pub acl_log: VecDeque<AclLogEntry>,
}

/// One ACL LOG entry (Redis 7.0's ACLLogEntry): similar denials within a minute are counted in
/// one entry.
pub struct AclLogEntry {
    pub count: u64,
    /// `command`, `key`, `channel` or `auth`.
    pub reason: &'static str,
    /// `toplevel`, `multi` or `lua`.
    pub context: &'static str,
    pub object: Bytes,
    pub username: Bytes,
    /// Unix ms of the last occurrence.
    pub ctime_ms: u64,
    /// The CLIENT LIST line of the last client that caused it.
    pub client_info: String,
}

#[derive(Default)]
pub struct Pause {
    /// Unix ms when the pause ends; 0 when not paused.
    pub until_ms: u64,
    /// CLIENT PAUSE ... ALL (otherwise WRITE).
    pub all: bool,
    /// Clients whose next command waits for the end of the pause (in arrival order).
    pub waiting: Vec<u64>,
    /// The pause ended: the executor resumes `waiting` after the current batch.
    pub ended: bool,
}

pub struct SlowEntry {
    pub id: u64,
    pub unix_secs: u64,
    pub usec: u64,
    pub argv: Vec<Bytes>,
    pub peer: String,
    pub name: Bytes,
}
