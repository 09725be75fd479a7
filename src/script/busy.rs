//! The busy-script state shared between the executor (running a script) and the connection
//! tasks, which keep answering other clients while the executor is inside a long script.

use crate::cmd::acl::Users;
use crate::cmd::table::{flags, CommandSpec, Table};
use crate::exec::client::ClientShared;
use bytes::{Bytes, BytesMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

pub const BUSY: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
/// EXEC refused by a busy script: Redis's `execCommandAbort` with the -BUSY text.
pub const EXECABORT_BUSY: &[u8] = b"-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
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
    /// The configured users (published with the config), for AUTH while a script is busy.
    users: RwLock<Option<Arc<Users>>>,
}

/// What a connection does with a batch while a script is busy.
pub struct BusyAnswer {
    pub replies: BytesMut,
    /// SHUTDOWN NOSAVE was among the commands: stop the server (no reply is sent for it).
    pub shutdown: bool,
    /// QUIT: close the connection once `replies` are written.
    pub close: bool,
}

/// What a busy answer did to the client's transaction state, for the executor to apply before
/// the client's next batch runs (`exec::client::apply_busy_marks`), in this order: discard,
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
}

impl BusyMarks {
    /// EXEC refused or DISCARD: what the transaction had gathered goes; an AUTH stays.
    fn discard_transaction(&mut self) {
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
    }
}

/// The command table, for answering without the executor (built on the first busy answer).
fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(Table::build)
}

/// Redis's `commandCheckExistence` and `commandCheckArity`: the command's spec, or the error
/// line Redis gives (these come before the -BUSY check in `processCommand`).
fn resolve(argv: &[Bytes]) -> Result<&'static CommandSpec, Vec<u8>> {
    let t = table();
    crate::cmd::dispatch::resolve_in(t, argv)
        .map(|id| t.entries[id].spec)
        .map_err(|e| e.to_bytes())
}

fn error_line(out: &mut BytesMut, text: &[u8]) {
    out.extend_from_slice(b"-");
    out.extend_from_slice(text);
    out.extend_from_slice(b"\r\n");
}

impl BusyState {
    /// Called with every configuration the server adopts (`Shared::apply`).
    pub fn set_users(&self, users: &Users) {
        let mut u = match self.users.write() {
            Ok(u) => u,
            Err(poisoned) => poisoned.into_inner(),
        };
        *u = Some(Arc::new(users.clone()));
    }

    fn users(&self) -> Arc<Users> {
        let u = match self.users.read() {
            Ok(u) => u,
            Err(poisoned) => poisoned.into_inner(),
        };
        u.clone().unwrap_or_default()
    }

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

    /// Answers a batch in the connection task while the executor runs a busy script, as Redis's
    /// `processCommand` does from inside its script hook, in its order: unknown command and
    /// arity errors, NOAUTH (`auth_required`), commands not allowed in MULTI, then -BUSY for
    /// every command without `allow_busy`. A refusal inside MULTI flags the transaction and a
    /// refused EXEC discards it with -EXECABORT, as `rejectCommand` does. Of the `allow_busy`
    /// commands, SCRIPT KILL, SHUTDOWN, QUIT, MULTI, DISCARD, UNWATCH and AUTH act here, and
    /// inside MULTI the others are queued; HELLO, RESET and WATCH outside MULTI need the
    /// executor and get -BUSY (WATCH cannot be registered later: the script's writes after it
    /// would be missed). None when no script is busy (the batch goes to the
    /// executor).
    pub fn answer(
        &self,
        batch: &[Vec<Bytes>],
        client: &ClientShared,
        mut auth_required: bool,
    ) -> Option<BusyAnswer> {
        let run = self.busy.load(Ordering::Acquire);
        if run == 0 {
            return None;
        }
        let mut replies = BytesMut::new();
        let mut in_multi = client.in_multi.load(Ordering::Relaxed);
        let mut marks = match client.busy_marks.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut close = false;
        for argv in batch {
            if argv.is_empty() {
                continue;
            }
            let spec = match resolve(argv) {
                Ok(spec) => spec,
                Err(text) => {
                    error_line(&mut replies, &text);
                    marks.dirty |= in_multi;
                    continue;
                }
            };
            if auth_required && !spec.has(flags::NO_AUTH) {
                replies.extend_from_slice(b"-NOAUTH Authentication required.\r\n");
                marks.dirty |= in_multi;
                continue;
            }
            if in_multi && spec.has(flags::NO_MULTI) {
                replies.extend_from_slice(b"-ERR Command not allowed inside a transaction\r\n");
                marks.dirty = true;
                continue;
            }
            let first = &argv[0];
            if !spec.has(flags::ALLOW_BUSY) {
                if first.eq_ignore_ascii_case(b"exec") {
                    replies.extend_from_slice(EXECABORT_BUSY);
                    marks.discard_transaction();
                    in_multi = false;
                } else {
                    replies.extend_from_slice(BUSY);
                    marks.dirty |= in_multi;
                }
                continue;
            }
            if first.eq_ignore_ascii_case(b"quit") {
                replies.extend_from_slice(b"+OK\r\n");
                close = true;
                break;
            }
            if first.eq_ignore_ascii_case(b"multi") {
                if in_multi {
                    replies.extend_from_slice(b"-ERR MULTI calls can not be nested\r\n");
                } else {
                    replies.extend_from_slice(b"+OK\r\n");
                    marks.enter = true;
                    marks.dirty = false;
                    in_multi = true;
                }
                continue;
            }
            if first.eq_ignore_ascii_case(b"discard") {
                if in_multi {
                    replies.extend_from_slice(b"+OK\r\n");
                    marks.discard_transaction();
                    in_multi = false;
                } else {
                    replies.extend_from_slice(b"-ERR DISCARD without MULTI\r\n");
                }
                continue;
            }
            if first.eq_ignore_ascii_case(b"watch") && in_multi {
                replies.extend_from_slice(b"-ERR WATCH inside MULTI is not allowed\r\n");
                continue;
            }
            if first.eq_ignore_ascii_case(b"reset") {
                // Runs outside any transaction in Redis, but needs the executor.
                replies.extend_from_slice(BUSY);
                marks.dirty |= in_multi;
                continue;
            }
            if in_multi {
                replies.extend_from_slice(b"+QUEUED\r\n");
                marks.queued.push(argv.clone());
                continue;
            }
            if first.eq_ignore_ascii_case(b"auth") {
                // connection.rs `auth`/`check_auth`, against the published users.
                let (user, pass) = match argv.len() {
                    2 => (None, &argv[1]),
                    3 => (Some(&argv[1][..]), &argv[2]),
                    _ => {
                        replies.extend_from_slice(b"-ERR syntax error\r\n");
                        continue;
                    }
                };
                let users = self.users();
                if user.is_none() && users.default_user().nopass {
                    replies.extend_from_slice(b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n");
                    continue;
                }
                match users.get(user.unwrap_or(b"default")) {
                    Some(u) if u.enabled && u.password_ok(pass) => {
                        replies.extend_from_slice(b"+OK\r\n");
                        marks.auth = Some(u.name.clone());
                        client.authenticated.store(true, Ordering::Relaxed);
                        auth_required = false;
                    }
                    _ => replies.extend_from_slice(
                        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
                    ),
                }
            } else if first.eq_ignore_ascii_case(b"unwatch") {
                replies.extend_from_slice(b"+OK\r\n");
                marks.unwatch = true;
            } else if first.eq_ignore_ascii_case(b"script") {
                // SCRIPT KILL (the only SCRIPT subcommand allowed while busy).
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
                client.in_multi.store(in_multi, Ordering::Relaxed);
                client
                    .busy_marked
                    .store(!marks.is_empty(), Ordering::Release);
                return Some(BusyAnswer {
                    replies,
                    shutdown: true,
                    close: false,
                });
            } else {
                // SHUTDOWN without NOSAVE answers -BUSY itself; HELLO and WATCH need the
                // executor (see above).
                replies.extend_from_slice(BUSY);
            }
        }
        client.in_multi.store(in_multi, Ordering::Relaxed);
        // Under the lock, so the executor's take and this flag cannot cross.
        client
            .busy_marked
            .store(!marks.is_empty(), Ordering::Release);
        Some(BusyAnswer {
            replies,
            shutdown: false,
            close,
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
