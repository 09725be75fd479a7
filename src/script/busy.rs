//! Answering other clients while a script is busy: the event loop, lent to the script's hook
//! (`Host::while_busy`), reads their requests and answers them here, as Redis's
//! `processCommand` does from inside its script hook.

use crate::cmd::registry::table;

use crate::cmd::spec::{flags, CommandSpec};
use crate::config::users::Users;
pub use crate::machine::busy::{BusyMarks, BusyState, ScriptStop};
use crate::machine::client::{Client, ClientShared};
use crate::machine::State;
use bytes::{Bytes, BytesMut};
use std::rc::Rc;

pub const BUSY: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
/// EXEC refused by a busy script: Redis's `execCommandAbort` with the -BUSY text.
pub const EXECABORT_BUSY: &[u8] = b"-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
/// The same while a library function (FCALL) is busy: Redis's `shared.slowscripterr`.
pub const BUSY_FUNCTION: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";
pub const EXECABORT_BUSY_FUNCTION: &[u8] = b"-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";
pub const UNKILLABLE: &[u8] = b"-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.\r\n";

/// What a connection does with a batch while a script is busy.
pub struct BusyAnswer {
    pub replies: BytesMut,
    /// SHUTDOWN NOSAVE was among the commands: stop the server (no reply is sent for it).
    pub shutdown: bool,
    /// QUIT: close the connection once `replies` are written.
    pub close: bool,
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

fn is_kill(argv: &[Bytes]) -> bool {
    argv.get(1).is_some_and(|a| a.eq_ignore_ascii_case(b"kill"))
}

impl BusyState {
    /// FUNCTION STATS while a function is busy: its name, command and running time.
    fn stats_reply(&self, out: &mut BytesMut, resp3: bool) {
        let running = self
            .running_function
            .borrow()
            .clone()
            .map(|f| (f.name, f.argv, f.started.elapsed().as_millis() as u64));
        let (libs, funcs) = self.function_counts.get();
        let frame = crate::cmd::functions::stats_frame(running, libs, funcs);
        crate::protocol::encode::encode(&frame, resp3, out);
    }

    /// The running script turned busy with these users configured (see `users`).
    pub fn set_users(&self, users: &Users) {
        *self.users.borrow_mut() = Some(Rc::new(users.clone()));
    }

    fn users(&self) -> Rc<Users> {
        self.users.borrow().clone().unwrap_or_default()
    }

    /// Answers a batch in the event loop while the executor runs a busy script, as Redis's
    /// `processCommand` does from inside its script hook, in its order: unknown command and
    /// arity errors, NOAUTH (`auth_required`), commands not allowed in MULTI, then -BUSY for
    /// every command without `allow_busy`. A refusal inside MULTI flags the transaction and a
    /// refused EXEC discards it with -EXECABORT, as `rejectCommand` does. Of the `allow_busy`
    /// commands, SCRIPT KILL, SHUTDOWN, QUIT, MULTI, DISCARD, UNWATCH and AUTH act here, and
    /// inside MULTI the others are queued; HELLO, RESET and WATCH outside MULTI need the
    /// executor and get -BUSY (WATCH cannot be registered later: the script's writes after it
    /// would be missed). None when no script is busy (the batch goes to the
    /// executor). SHUTDOWN NOSAVE sets `stop` (`Shared`'s, which the main thread reads too).
    pub fn answer(
        &self,
        batch: &[Vec<Bytes>],
        client: &ClientShared,
        mut auth_required: bool,
        stop: &ScriptStop,
    ) -> Option<BusyAnswer> {
        let run = self.busy.get();
        if run == 0 {
            return None;
        }
        let mut replies = BytesMut::new();
        let mut in_multi = client.in_multi.get();
        // Taken out and put back before returning (the executor's `apply_busy_marks` takes
        // them the same way; both run on the executor thread, never interleaved).
        let mut marks = client.busy_marks.take();
        let mut close = false;
        let function = self.function.get();
        let (busy, execabort) = if function {
            (BUSY_FUNCTION, EXECABORT_BUSY_FUNCTION)
        } else {
            (BUSY, EXECABORT_BUSY)
        };
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
                    replies.extend_from_slice(execabort);
                    marks.discard_transaction();
                    in_multi = false;
                } else {
                    replies.extend_from_slice(busy);
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
                replies.extend_from_slice(busy);
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
                        client.authenticated.set(true);
                        auth_required = false;
                    }
                    _ => {
                        let tried = Bytes::copy_from_slice(user.unwrap_or(b"default"));
                        marks.failed_auth.push((argv[0].clone(), tried));
                        replies.extend_from_slice(
                            b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
                        )
                    }
                }
            } else if first.eq_ignore_ascii_case(b"unwatch") {
                replies.extend_from_slice(b"+OK\r\n");
                marks.unwatch = true;
            } else if first.eq_ignore_ascii_case(b"script")
                || (first.eq_ignore_ascii_case(b"function") && is_kill(argv))
            {
                // SCRIPT KILL / FUNCTION KILL (Redis's scriptKill): each stops only its own
                // kind, and neither a script that wrote.
                let eval_kill = first.eq_ignore_ascii_case(b"script");
                if self.dirty.get() {
                    replies.extend_from_slice(UNKILLABLE);
                } else if eval_kill && function {
                    replies.extend_from_slice(BUSY_FUNCTION);
                } else if !eval_kill && !function {
                    replies.extend_from_slice(BUSY);
                } else {
                    self.kill.set(run);
                    replies.extend_from_slice(b"+OK\r\n");
                }
            } else if first.eq_ignore_ascii_case(b"function") {
                // FUNCTION STATS: refused while EVAL is busy, as Redis.
                if function {
                    self.stats_reply(&mut replies, client.resp3.get());
                } else {
                    replies.extend_from_slice(BUSY);
                }
            } else if first.eq_ignore_ascii_case(b"shutdown")
                && argv[1..].iter().any(|a| a.eq_ignore_ascii_case(b"nosave"))
            {
                stop.shutdown
                    .store(true, std::sync::atomic::Ordering::Release);
                client.in_multi.set(in_multi);
                client.busy_marked.set(!marks.is_empty());
                client.busy_marks.set(marks);
                return Some(BusyAnswer {
                    replies,
                    shutdown: true,
                    close: false,
                });
            } else {
                // SHUTDOWN without NOSAVE answers -BUSY itself; HELLO and WATCH need the
                // executor (see above).
                replies.extend_from_slice(busy);
            }
        }
        client.in_multi.set(in_multi);
        client.busy_marked.set(!marks.is_empty());
        client.busy_marks.set(marks);
        Some(BusyAnswer {
            replies,
            shutdown: false,
            close,
        })
    }
}

/// Applies what a busy script's answers did to `client`'s transaction (Redis changed the client
/// there and then; here the executor was inside the script): a refused EXEC or a DISCARD ends
/// the transaction and its WATCHes, UNWATCH drops the WATCHes, MULTI begins a transaction, a
/// refusal while queuing flags it for EXECABORT, the commands answered +QUEUED join it, and a
/// successful AUTH logs the client in, and a refused one goes to ACL LOG.
pub fn apply_busy_marks(srv: &mut State, client: &mut Client) {
    if !client.shared.busy_marked.get() {
        return;
    }
    client.shared.busy_marked.set(false);
    let marks = client.shared.busy_marks.take();
    if marks.discard {
        client.multi = None;
        client.multi_dirty = false;
    }
    if marks.discard || marks.unwatch {
        srv.watches.unwatch_all(client.id);
    }
    for (cmd, tried) in &marks.failed_auth {
        // Logged as Redis logs a refused AUTH, once the executor has the log again.
        let context = if client.multi.is_some() {
            "multi"
        } else {
            "toplevel"
        };
        crate::cmd::support::add_log_entry(srv, client, "auth", context, cmd.clone(), Some(tried));
    }
    if let Some(name) = &marks.auth {
        if let Some(u) = srv.config.users.get(name.as_bytes()) {
            client.authenticated = true;
            client.user = u.name.clone();
            client.perms = srv.config.users.perms(&u.name);
        }
    }
    if marks.enter && client.multi.is_none() {
        client.multi = Some(Vec::new());
        client.multi_dirty = false;
    }
    if let Some(queue) = client.multi.as_mut() {
        client.multi_dirty |= marks.dirty;
        for argv in marks.queued {
            // Resolved when answered; the table does not change while the server runs.
            if let Ok(id) = crate::cmd::dispatch::resolve(&argv) {
                queue.push((id, argv));
            }
        }
    }
}
