//! What a running script shares with the event loop answering other clients meanwhile (the
//! answering itself, which needs the command table, is script/busy.rs).
//!
//! The script runs on the executor thread and the loop that answers while it is busy is the
//! executor's own loop, lent to the script's hook (`Host::while_busy`): the two never run at
//! once, so `BusyState` is plain cells behind an `Rc`. Only the stop flag is also touched by
//! another thread (the main thread's signal and shutdown handling): it is `ScriptStop`, in
//! `Shared`.

use crate::config::users::Users;
use bytes::Bytes;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// The part of a running script's state another thread touches; lives in `Shared`.
#[derive(Debug, Default)]
pub struct ScriptStop {
    /// Stop the running script at its next hook, whatever it wrote: set by SHUTDOWN NOSAVE
    /// during a busy script (the executor, in its lent loop) and by the main thread on a
    /// signal or a shutdown request; read by the executor (the hook, the end of a unit, the
    /// loop) and by the main thread (to log the request).
    pub shutdown: AtomicBool,
}

/// See the module comment: written by the script engine on the executor thread, read by the
/// busy-answering path in the executor's lent loop (`exec::net`); no other thread sees it.
#[derive(Debug, Default)]
pub struct BusyState {
    /// Runs started so far (the last run number handed out).
    pub runs: Cell<u64>,
    /// Run number of the script that passed busy-reply-threshold; 0 while none has.
    pub busy: Cell<u64>,
    /// Run number SCRIPT KILL asked to stop (the hook compares it with its own).
    pub kill: Cell<u64>,
    /// The running script has called a write command: SCRIPT KILL answers -UNKILLABLE.
    pub dirty: Cell<bool>,
    /// The busy script is a library function (FCALL): the -BUSY text names FUNCTION KILL,
    /// and SCRIPT KILL / FUNCTION KILL each refuse the other's kind, as Redis's scriptKill.
    pub function: Cell<bool>,
    /// The busy function, for FUNCTION STATS (set when it turns busy).
    pub running_function: RefCell<Option<RunningFunction>>,
    /// Libraries and functions loaded, for FUNCTION STATS while busy.
    pub function_counts: Cell<(usize, usize)>,
    /// The configured users, for AUTH while a script is busy: taken when the script turns
    /// busy (nothing can change them until it ends) and dropped when it ends.
    pub(crate) users: RefCell<Option<Rc<Users>>>,
}

/// FUNCTION STATS's `running_script`.
#[derive(Debug, Clone)]
pub struct RunningFunction {
    pub name: Bytes,
    pub argv: Vec<Bytes>,
    pub started: Instant,
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
