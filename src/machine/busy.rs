//! What a running script shares with the threads that answer other clients meanwhile (the
//! answering itself, which needs the command table, is script/busy.rs).

use crate::config::users::Users;
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

#[derive(Debug, Default)]
pub struct BusyState {
    /// Run number of the script being run; 0 between scripts.
    pub running: AtomicU64,
    /// Runs started so far (the last run number handed out).
    pub runs: AtomicU64,
    /// Run number of the script that passed busy-reply-threshold; 0 while none has.
    pub busy: AtomicU64,
    /// Run number SCRIPT KILL asked to stop (the hook compares it with its own).
    pub kill: AtomicU64,
    /// The running script has called a write command: SCRIPT KILL answers -UNKILLABLE.
    pub dirty: AtomicBool,
    /// SHUTDOWN NOSAVE arrived during a busy script: the hook aborts it whatever it wrote.
    pub shutdown: AtomicBool,
    /// The busy script is a library function (FCALL): the -BUSY text names FUNCTION KILL,
    /// and SCRIPT KILL / FUNCTION KILL each refuse the other's kind, as Redis's scriptKill.
    pub function: AtomicBool,
    /// The busy function, for FUNCTION STATS (set when it turns busy).
    pub running_function: Mutex<Option<RunningFunction>>,
    /// Libraries (high 32 bits) and functions (low) loaded, for FUNCTION STATS while busy.
    pub function_counts: AtomicU64,
    /// The configured users (published with the config), for AUTH while a script is busy.
    pub(crate) users: RwLock<Option<Arc<Users>>>,
}

/// FUNCTION STATS's `running_script`.
#[derive(Debug, Clone)]
pub struct RunningFunction {
    pub name: Bytes,
    pub argv: Vec<Bytes>,
    pub started: Instant,
}

impl BusyState {
    pub fn set_running_function(&self, f: Option<RunningFunction>) {
        match self.running_function.lock() {
            Ok(mut g) => *g = f,
            Err(poisoned) => *poisoned.into_inner() = f,
        }
    }

    pub fn running_function(&self) -> Option<RunningFunction> {
        match self.running_function.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

/// What a busy answer did to the client's transaction state, for the executor to apply before
/// the client's next batch runs (`script::busy::apply_busy_marks`), in this order: discard,
/// unwatch, AUTH, enter MULTI, then flag and queue.
#[derive(Debug, Default)]
pub struct BusyMarks {
    /// EXEC was refused (Redis's `execCommandAbort`) or DISCARD ran: the transaction ends and
    /// every WATCH is dropped.
    pub discard: bool,
    /// UNWATCH ran.
    pub unwatch: bool,
    /// MULTI ran: a transaction begins.
    pub enter: bool,
    /// A command was refused while queuing (Redis's `flagTransaction`): EXEC must abort.
    pub dirty: bool,
    /// Commands Redis lets through a busy script and queues inside MULTI (+QUEUED).
    pub queued: Vec<Vec<Bytes>>,
    /// AUTH succeeded as this user.
    pub auth: Option<String>,
    /// AUTH refused: (the command as typed, the user tried), for ACL LOG, in order.
    pub failed_auth: Vec<(Bytes, Bytes)>,
}

impl BusyMarks {
    /// EXEC refused or DISCARD: what the transaction had gathered goes; an AUTH stays.
    pub fn discard_transaction(&mut self) {
        self.discard = true;
        self.enter = false;
        self.dirty = false;
        self.queued.clear();
    }

    pub fn is_empty(&self) -> bool {
        !self.discard
            && !self.unwatch
            && !self.enter
            && !self.dirty
            && self.queued.is_empty()
            && self.auth.is_none()
            && self.failed_auth.is_empty()
    }
}
