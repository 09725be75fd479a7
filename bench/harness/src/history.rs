//! What clients were told, with monotonic times: the input of every checker.

use std::sync::OnceLock;
use std::time::Instant;

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Microseconds since the run's epoch (monotonic, shared by all threads).
pub fn now_us() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Res {
    /// Acknowledged: the operation took effect (an acquire: the lock is ours).
    Ok,
    /// A definite answer that the lock is held by someone else (not a failure).
    Busy,
    /// A definite failure: the operation did not take effect (error reply, nothing sent).
    Fail,
    /// Timed out or connection lost after sending: it may or may not have taken effect.
    Unknown,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Acquire,
    Release,
    Read,
    Write,
}

#[derive(Clone, Debug)]
pub struct Op {
    pub client: usize,
    pub kind: Kind,
    pub key: usize,
    pub start: u64,
    pub end: u64,
    pub res: Res,
    /// Read: the value returned; Write: the value written.
    pub value: u64,
    /// Acquire/Release: the lock token.
    pub token: u64,
    /// Acquire: the lease asked for.
    pub ttl_ms: u64,
}

impl Op {
    pub fn json(&self) -> String {
        format!(
            "{{\"client\":{},\"op\":\"{:?}\",\"key\":{},\"start_us\":{},\"end_us\":{},\"res\":\"{:?}\",\"value\":{},\"token\":{},\"ttl_ms\":{}}}",
            self.client, self.kind, self.key, self.start, self.end, self.res, self.value, self.token, self.ttl_ms
        )
    }
}
