//! The busy-script state shared between the executor (running a script) and the connection
//! tasks, which keep answering other clients while the executor is inside a long script.

use bytes::{Bytes, BytesMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub const BUSY: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
pub const UNKILLABLE: &[u8] = b"-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.\r\n";

#[derive(Debug, Default)]
pub struct BusyState {
    /// Run number of the script being run; 0 between scripts.
    pub running: AtomicU64,
    /// Run number of the script that passed busy-reply-threshold; 0 while none has.
    pub busy: AtomicU64,
    /// Run number SCRIPT KILL asked to stop (the hook compares it with its own).
    pub kill: AtomicU64,
    /// The running script has called a write command: SCRIPT KILL answers -UNKILLABLE.
    pub dirty: AtomicBool,
    /// SHUTDOWN NOSAVE arrived during a busy script: the hook aborts it whatever it wrote.
    pub shutdown: AtomicBool,
}

/// What a connection does with a batch while a script is busy.
pub struct BusyAnswer {
    pub replies: BytesMut,
    /// SHUTDOWN NOSAVE was among the commands: stop the server (no reply is sent for it).
    pub shutdown: bool,
}

impl BusyState {
    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire) != 0
    }

    /// SCRIPT KILL or SHUTDOWN NOSAVE while a script runs but has not reached the threshold:
    /// the connection holds it until the script is busy (then it acts) or done (then it goes to
    /// the executor), as Redis serves such commands from its hook once the threshold passes.
    pub fn must_wait(&self, batch: &[Vec<Bytes>]) -> bool {
        if self.running.load(Ordering::Acquire) == 0 || self.is_busy() {
            return false;
        }
        batch.iter().any(|argv| is_kill_or_shutdown(argv))
    }

    /// Answers a batch in the connection task while the executor runs a busy script, as Redis
    /// does from inside its script hook: SCRIPT KILL and SHUTDOWN NOSAVE act, everything else
    /// gets -BUSY. None when no script is busy (the batch goes to the executor).
    pub fn answer(&self, batch: &[Vec<Bytes>]) -> Option<BusyAnswer> {
        let run = self.busy.load(Ordering::Acquire);
        if run == 0 {
            return None;
        }
        let mut replies = BytesMut::new();
        for argv in batch {
            let first = argv.first().map(|a| a.as_ref()).unwrap_or(b"");
            let second = argv.get(1).map(|a| a.as_ref()).unwrap_or(b"");
            if first.eq_ignore_ascii_case(b"script")
                && second.eq_ignore_ascii_case(b"kill")
                && argv.len() == 2
            {
                if self.dirty.load(Ordering::Acquire) {
                    replies.extend_from_slice(UNKILLABLE);
                } else {
                    self.kill.store(run, Ordering::Release);
                    replies.extend_from_slice(b"+OK\r\n");
                }
            } else if first.eq_ignore_ascii_case(b"shutdown")
                && argv[1..].iter().any(|a| a.eq_ignore_ascii_case(b"nosave"))
            {
                self.shutdown.store(true, Ordering::Release);
                return Some(BusyAnswer {
                    replies,
                    shutdown: true,
                });
            } else {
                replies.extend_from_slice(BUSY);
            }
        }
        Some(BusyAnswer {
            replies,
            shutdown: false,
        })
    }
}

/// SCRIPT KILL or SHUTDOWN … NOSAVE: what a busy server still acts on.
pub fn is_kill_or_shutdown(argv: &[Bytes]) -> bool {
    let first = argv.first().map(|a| a.as_ref()).unwrap_or(b"");
    (first.eq_ignore_ascii_case(b"script")
        && argv.len() == 2
        && argv[1].eq_ignore_ascii_case(b"kill"))
        || (first.eq_ignore_ascii_case(b"shutdown")
            && argv[1..].iter().any(|a| a.eq_ignore_ascii_case(b"nosave")))
}
