//! The lock clients' own scripts, run without the Lua VM (EVALSHA of redis-py's
//! release was 0.83-1.0x Redis's throughput at 1.0-1.2x its CPU, nearly all of it in the
//! interpreter: ~10 700 instructions a call for one GET and one DEL).
//!
//! A script is recognised when its body is byte-for-byte one of the files in `lua/` (the
//! scripts clients send, each pinned by its SHA1 in lua/MANIFEST.tsv), so nothing a user writes
//! is ever taken for one. Its commands then go through `dispatch::script_call` exactly as its
//! `redis.call`s would (same stats, keyspace events, change record, MONITOR lines tagged `lua`,
//! tracking, WATCH), and it answers what the script returns.
//!
//! Only the runs whose every call is known to succeed are taken here: `run` first checks,
//! without touching anything, that no call the script would make can fail (a key of another
//! type, a field that is not an integer, a read-only run, an ACL-restricted caller, a replica),
//! and otherwise answers None so that Lua runs the script and raises the error with its
//! `script: <sha>, on @user_script:<line>.` suffix exactly as Redis does.

use crate::cmd::dispatch::script_call;
use crate::cmd::Ctx;
use crate::protocol::Frame;
use crate::store::Value;
use bytes::Bytes;

/// What a recognised script does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Program {
    /// `GET KEYS[1]`; when it equals `ARGV[1]`, `DEL KEYS[1]`. Replies: `missing` when the key
    /// does not exist, `other` when it holds another value, and after the delete either 1 or
    /// DEL's own reply.
    CompareDel {
        missing: i64,
        other: i64,
        deleted: Deleted,
        /// The command names as the script spells them (MONITOR shows them so).
        names: Names,
    },
    /// Redisson's RLock acquire: when the hash `KEYS[1]` is absent or has the field `ARGV[2]`,
    /// `HINCRBY KEYS[1] ARGV[2] 1` and `PEXPIRE KEYS[1] ARGV[1]`, reply nil; else `PTTL KEYS[1]`.
    RedissonAcquire,
    /// Redisson's RLock unlock: the unlock latch `KEYS[3]` answers a repeated unlock; else the
    /// owner `ARGV[3]`'s count in the hash `KEYS[1]` goes down by one, and at zero the lock is
    /// deleted and `ARGV[1]` published on `KEYS[2]` (with the command `ARGV[4]`) to wake
    /// waiters. The latch records the outcome for `ARGV[5]` ms.
    RedissonUnlock,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Names {
    Lower,
    Upper,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Deleted {
    One,
    DelReply,
}

/// The compare-and-delete family: one program, several clients' texts.
const RELEASE_ONE: Program = Program::CompareDel {
    missing: 0,
    other: 0,
    deleted: Deleted::One,
    names: Names::Lower,
};
const RELEASE_DEL: Program = Program::CompareDel {
    missing: 0,
    other: 0,
    deleted: Deleted::DelReply,
    names: Names::Lower,
};
const RELEASE_DEL_UPPER: Program = Program::CompareDel {
    missing: 0,
    other: 0,
    deleted: Deleted::DelReply,
    names: Names::Upper,
};

const KNOWN: &[(&str, Program)] = &[
    (
        include_str!("../../lua/redis-py/lua_release_script.lua"),
        RELEASE_ONE,
    ),
    (
        include_str!("../../lua/redlock-rs/unlock_script.lua"),
        RELEASE_DEL,
    ),
    (
        include_str!("../../lua/rslock/unlock_script.lua"),
        RELEASE_DEL_UPPER,
    ),
    (
        include_str!("../../lua/pottery/release_script.lua"),
        RELEASE_DEL,
    ),
    (
        include_str!("../../lua/redis-semaphore/mutex_release.lua"),
        RELEASE_DEL,
    ),
    (
        include_str!("../../lua/redsync/deletescript.lua"),
        Program::CompareDel {
            missing: -1,
            other: 0,
            deleted: Deleted::DelReply,
            names: Names::Upper,
        },
    ),
    (
        include_str!("../../lua/redisson/rlock_trylockinnerasync.lua"),
        Program::RedissonAcquire,
    ),
    (
        include_str!("../../lua/redisson/rlock_unlockinnerasync.lua"),
        Program::RedissonUnlock,
    ),
];

/// The largest integer a Lua number (a double) holds exactly.
const LUA_EXACT: i64 = 1 << 53;

/// PEXPIRE's argument: an integer whose deadline does not overflow.
fn pexpire_ok(arg: &[u8], now: u64) -> bool {
    matches!(crate::cmd::args::int_arg(arg), Ok(ms) if ms <= i64::MAX - now as i64)
}

/// SET's `PX` argument: a positive integer whose deadline does not overflow.
fn set_px_ok(arg: &[u8], now: u64) -> bool {
    matches!(crate::cmd::args::int_arg(arg), Ok(ms) if ms > 0 && ms <= i64::MAX - now as i64)
}

/// HINCRBY by `delta` of the field, if the hash has it: Redis's string2ll, and no overflow.
fn hincrby_ok(hash: &crate::store::value::HashValue, field: &[u8], delta: i64) -> bool {
    match hash.get(field) {
        None => true,
        Some(v) => {
            crate::protocol::number::parse_i64(v).is_some_and(|n| n.checked_add(delta).is_some())
        }
    }
}

/// The program of a script body, if it is exactly one of the known texts.
pub fn recognise(body: &[u8]) -> Option<Program> {
    KNOWN
        .iter()
        .find(|(text, _)| text.as_bytes() == body)
        .map(|&(_, p)| p)
}

/// Runs `program` as its script would run, or None when Lua must run it (see the module
/// comment). `ctx` is the caller's context; the calls run in a script context over it.
pub fn run(
    program: Program,
    ctx: &mut Ctx,
    keys: &[Bytes],
    args: &[Bytes],
    ro: bool,
) -> Option<Frame> {
    // Read-only runs refuse the writes; a restricted user's calls are checked one by one; a
    // replica refuses writes: each would make a call fail, which Lua reports.
    if ro
        || ctx.client.perms.is_some()
        || crate::cmd::support::refuses_writes(ctx.srv, ctx.host.cluster())
    {
        return None;
    }
    let (key, arg) = match (keys.first(), args.first()) {
        (Some(k), Some(a)) => (k, a),
        _ => return None,
    };
    let now = ctx.now;
    let db = &ctx.srv.dbs[ctx.client.db];
    let live = db.peek(key).filter(|e| !e.is_expired(now));
    // Redisson's unlock answered by its latch alone (a repeated unlock): the latch's number.
    let mut latched = None;
    match program {
        Program::CompareDel { .. } => {
            if live.is_some_and(|e| !matches!(e.value, Value::Str(_))) {
                return None;
            }
        }
        Program::RedissonAcquire => {
            let field = args.get(1)?;
            match live.map(|e| &e.value) {
                None => {}
                Some(Value::Hash(h)) if hincrby_ok(h, field, 1) => {}
                Some(_) => return None,
            }
            if !pexpire_ok(arg, now) {
                return None;
            }
        }
        Program::RedissonUnlock => {
            // KEYS: lock, channel, latch; ARGV: message, lease, owner, publish command, latch ms.
            if keys.len() < 3 || args.len() < 5 {
                return None;
            }
            let (latch, field, latch_ms) = (&keys[2], &args[2], &args[4]);
            match db
                .peek(latch)
                .filter(|e| !e.is_expired(now))
                .map(|e| &e.value)
            {
                // `tonumber(val)`: the integers the script itself writes, not Lua's other forms.
                Some(Value::Str(v)) => match crate::protocol::number::parse_i64(v) {
                    Some(n) if n.abs() <= LUA_EXACT => latched = Some(n),
                    _ => return None,
                },
                Some(_) => return None,
                // No latch: the unlock itself, whose calls must all succeed.
                None => {
                    match live.map(|e| &e.value) {
                        None => {}
                        Some(Value::Hash(h)) if hincrby_ok(h, field, -1) => {}
                        Some(_) => return None,
                    }
                    if !args[3].eq_ignore_ascii_case(b"publish")
                        || !pexpire_ok(&args[1], now)
                        || !set_px_ok(latch_ms, now)
                    {
                        return None;
                    }
                }
            }
        }
    }
    // A script's first deny-oom call is refused while over maxmemory. Of these calls only
    // HINCRBY is deny-oom (the first write of Redisson's acquire and unlock): left to Lua.
    let max = ctx.srv.config.maxmemory;
    if max != 0
        && latched.is_none()
        && matches!(program, Program::RedissonAcquire | Program::RedissonUnlock)
        && crate::alloc::used_memory() as u64 > max
    {
        return None;
    }
    let mut sctx = Ctx {
        srv: &mut *ctx.srv,
        host: &mut *ctx.host,
        client: &mut *ctx.client,
        now,
        in_script: true,
    };
    let reply = match program {
        Program::CompareDel {
            missing,
            other,
            deleted,
            names,
        } => {
            let (get, del): (&'static [u8], &'static [u8]) = match names {
                Names::Lower => (b"get", b"del"),
                Names::Upper => (b"GET", b"DEL"),
            };
            let token = call(&mut sctx, &[name(get), key.clone()]);
            match token {
                Frame::Null => Frame::Integer(missing),
                Frame::Bulk(t) if t == arg => {
                    let del = call(&mut sctx, &[name(del), key.clone()]);
                    match deleted {
                        Deleted::One => Frame::Integer(1),
                        Deleted::DelReply => del,
                    }
                }
                Frame::Bulk(_) => Frame::Integer(other),
                // Ruled out above; answered as Lua would see it, never silently.
                f => return Some(f),
            }
        }
        Program::RedissonAcquire => {
            let field = &args[1];
            let take = call(&mut sctx, &[name(b"exists"), key.clone()]) == Frame::Integer(0)
                || call(&mut sctx, &[name(b"hexists"), key.clone(), field.clone()])
                    == Frame::Integer(1);
            if take {
                let one = name(b"1");
                call(
                    &mut sctx,
                    &[name(b"hincrby"), key.clone(), field.clone(), one],
                );
                call(&mut sctx, &[name(b"pexpire"), key.clone(), arg.clone()]);
                Frame::Null
            } else {
                call(&mut sctx, &[name(b"pttl"), key.clone()])
            }
        }
        Program::RedissonUnlock => {
            let (channel, latch) = (&keys[1], &keys[2]);
            let (message, lease, field, publish, latch_ms) =
                (&args[0], &args[1], &args[2], &args[3], &args[4]);
            call(&mut sctx, &[name(b"get"), latch.clone()]);
            if let Some(n) = latched {
                Frame::Integer(n)
            } else if call(&mut sctx, &[name(b"hexists"), key.clone(), field.clone()])
                == Frame::Integer(0)
            {
                Frame::Null
            } else {
                let counter = call(
                    &mut sctx,
                    &[name(b"hincrby"), key.clone(), field.clone(), name(b"-1")],
                );
                let px = name(b"px");
                if matches!(counter, Frame::Integer(n) if n > 0) {
                    call(&mut sctx, &[name(b"pexpire"), key.clone(), lease.clone()]);
                    let set = [
                        name(b"set"),
                        latch.clone(),
                        name(b"0"),
                        px,
                        latch_ms.clone(),
                    ];
                    call(&mut sctx, &set);
                    Frame::Integer(0)
                } else {
                    call(&mut sctx, &[name(b"del"), key.clone()]);
                    call(
                        &mut sctx,
                        &[publish.clone(), channel.clone(), message.clone()],
                    );
                    let set = [
                        name(b"set"),
                        latch.clone(),
                        name(b"1"),
                        px,
                        latch_ms.clone(),
                    ];
                    call(&mut sctx, &set);
                    Frame::Integer(1)
                }
            }
        }
    };
    sctx.srv.locks.native_script_runs += 1;
    Some(reply)
}

/// One `redis.call` of the script, through the same path. The arguments are the request's
/// own, as for any command from the network (handlers copy what they keep).
fn call(ctx: &mut Ctx, argv: &[Bytes]) -> Frame {
    script_call(ctx, argv, false, false).0
}

fn name(s: &'static [u8]) -> Bytes {
    Bytes::from_static(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every recognised text is a file of lua/ listed in its manifest with the SHA1 clients
    /// send, so a recognised body is a client's script and nothing else.
    #[test]
    fn known_texts_are_the_manifest_scripts() {
        let manifest = include_str!("../../lua/MANIFEST.tsv");
        for (text, _) in KNOWN {
            let sha = crate::script::sha1hex(text.as_bytes());
            let sha = std::str::from_utf8(&sha).unwrap_or("");
            assert!(
                manifest.lines().any(|l| l.split('\t').nth(4) == Some(sha)),
                "{sha} is not in lua/MANIFEST.tsv"
            );
            assert!(recognise(text.as_bytes()).is_some());
        }
        assert_eq!(recognise(b"return 1"), None);
    }
}
