//! Strings: GET/SET and friends, counters, APPEND/STRLEN.

use super::args::{int_arg, is};
use super::spec::KeySpecDoc;
use super::spec::{event, Ctx};
use super::spec::{flags::*, CommandSpec, KeySpec, KEY1};
use super::support::read_str;
use crate::error::{CmdError, CmdResult};
use crate::protocol::number::{parse_i64, LongDouble};
use crate::protocol::Frame;
use crate::store::value::own;
use crate::store::Value;
use bytes::Bytes;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, keys, &["string"], handler)
}

pub static COMMANDS: &[CommandSpec] = &[
    spec("get", 2, READONLY | FAST, KEY1, get),
    spec("set", -3, WRITE | DENYOOM, KEY1, set),
    spec("setnx", 3, WRITE | DENYOOM | FAST, KEY1, setnx),
    spec("setex", 4, WRITE | DENYOOM, KEY1, setex),
    spec("psetex", 4, WRITE | DENYOOM, KEY1, psetex),
    spec("getset", 3, WRITE | DENYOOM | FAST, KEY1, getset),
    spec("getdel", 2, WRITE | FAST, KEY1, getdel),
    spec("getex", -2, WRITE | FAST, KEY1, getex),
    spec(
        "mget",
        -2,
        READONLY | FAST,
        KeySpec {
            first: 1,
            last: -1,
            step: 1,
        },
        mget,
    ),
    spec(
        "mset",
        -3,
        WRITE | DENYOOM,
        KeySpec {
            first: 1,
            last: -1,
            step: 2,
        },
        mset,
    ),
    spec(
        "msetnx",
        -3,
        WRITE | DENYOOM,
        KeySpec {
            first: 1,
            last: -1,
            step: 2,
        },
        msetnx,
    ),
    spec("incr", 2, WRITE | DENYOOM | FAST, KEY1, incr),
    spec("decr", 2, WRITE | DENYOOM | FAST, KEY1, decr),
    spec("incrby", 3, WRITE | DENYOOM | FAST, KEY1, incrby),
    spec("decrby", 3, WRITE | DENYOOM | FAST, KEY1, decrby),
    spec("incrbyfloat", 3, WRITE | DENYOOM | FAST, KEY1, incrbyfloat),
    spec("append", 3, WRITE | DENYOOM | FAST, KEY1, append),
    spec("strlen", 2, READONLY | FAST, KEY1, strlen),
];

fn get(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Frame::opt_bulk(read_str(ctx, &argv[1])?))
}

/// Which expiry option a SET/GETEX carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpireOpt {
    None,
    Ex,
    Px,
    ExAt,
    PxAt,
    KeepTtl,
    Persist,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    Always,
    Nx,
    Xx,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SetOptions<'a> {
    pub cond: Cond,
    pub get: bool,
    pub expire: ExpireOpt,
    pub expire_arg: Option<&'a [u8]>,
}

/// Redis's `parseExtendedStringArgumentsOrReply` for SET (`for_getex` false) and GETEX.
pub fn parse_set_options<'a>(opts: &'a [Bytes], for_getex: bool) -> CmdResult<SetOptions<'a>> {
    let mut o = SetOptions {
        cond: Cond::Always,
        get: false,
        expire: ExpireOpt::None,
        expire_arg: None,
    };
    let mut i = 0;
    while i < opts.len() {
        let a = &opts[i][..];
        let next = opts.get(i + 1).map(|b| &b[..]);
        let no_expire_but = |allowed: ExpireOpt| o.expire == ExpireOpt::None || o.expire == allowed;
        if !for_getex && is(a, "nx") && o.cond != Cond::Xx {
            o.cond = Cond::Nx;
        } else if !for_getex && is(a, "xx") && o.cond != Cond::Nx {
            o.cond = Cond::Xx;
        } else if !for_getex && is(a, "get") {
            o.get = true;
        } else if !for_getex && is(a, "keepttl") && no_expire_but(ExpireOpt::KeepTtl) {
            o.expire = ExpireOpt::KeepTtl;
        } else if for_getex && is(a, "persist") && no_expire_but(ExpireOpt::Persist) {
            o.expire = ExpireOpt::Persist;
        } else if let (Some(kind), Some(v)) = (timed_option(a), next) {
            if !no_expire_but(kind) {
                return Err(CmdError::Syntax);
            }
            o.expire = kind;
            o.expire_arg = Some(v);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

fn timed_option(a: &[u8]) -> Option<ExpireOpt> {
    if is(a, "ex") {
        Some(ExpireOpt::Ex)
    } else if is(a, "px") {
        Some(ExpireOpt::Px)
    } else if is(a, "exat") {
        Some(ExpireOpt::ExAt)
    } else if is(a, "pxat") {
        Some(ExpireOpt::PxAt)
    } else {
        None
    }
}

/// Redis's `getExpireMillisecondsOrReply`: the absolute deadline in ms for an EX/PX/EXAT/PXAT
/// argument, with `invalid expire time in '<cmd>' command` for zero, negative or overflowing
/// values.
pub fn deadline_ms(kind: ExpireOpt, arg: &[u8], now: u64, cmd: &'static str) -> CmdResult<u64> {
    let v = int_arg(arg)?;
    let seconds = matches!(kind, ExpireOpt::Ex | ExpireOpt::ExAt);
    if v <= 0 || (seconds && v > i64::MAX / 1000) {
        return Err(CmdError::InvalidExpire(cmd));
    }
    let mut ms = if seconds { v * 1000 } else { v };
    if matches!(kind, ExpireOpt::Ex | ExpireOpt::Px) {
        ms = ms
            .checked_add(now as i64)
            .ok_or(CmdError::InvalidExpire(cmd))?;
    }
    Ok(ms as u64)
}

/// The generic SET used by SET, SETNX, SETEX, PSETEX. Returns None when the NX/XX condition
/// stopped it; `Some(old)` otherwise (old value only fetched for GET).
fn set_generic(
    ctx: &mut Ctx,
    key: &Bytes,
    val: &Bytes,
    o: &SetOptions,
    cmd: &'static str,
) -> CmdResult<(bool, Option<Bytes>)> {
    let deadline = match (o.expire, o.expire_arg) {
        (ExpireOpt::Ex | ExpireOpt::Px | ExpireOpt::ExAt | ExpireOpt::PxAt, Some(arg)) => {
            Some(deadline_ms(o.expire, arg, ctx.now, cmd)?)
        }
        _ => None,
    };
    let now = ctx.now;
    let db = ctx.db();
    if !o.get && o.cond != Cond::Xx && o.expire != ExpireOpt::KeepTtl {
        // Nothing of the old entry is needed: one lookup.
        let stored = db.put(
            key,
            || Value::Str(own(val)),
            deadline.unwrap_or(0),
            now,
            o.cond == Cond::Nx,
        );
        if stored {
            ctx.changed(event::STRING, "set", key);
            if deadline.is_some() {
                ctx.notify(event::GENERIC, "expire", key);
            }
        }
        return Ok((stored, None));
    }
    let (found, old, old_deadline) = match db.get(key, now) {
        None => (false, None, 0),
        Some(e) => {
            let old = match (&e.value, o.get) {
                (Value::Str(s), true) => Some(s.clone()),
                (_, true) => return Err(CmdError::WrongType),
                _ => None,
            };
            (true, old, e.expires_at)
        }
    };
    if (o.cond == Cond::Nx && found) || (o.cond == Cond::Xx && !found) {
        return Ok((false, old));
    }
    let expires_at = match deadline {
        Some(d) => d,
        None if o.expire == ExpireOpt::KeepTtl => old_deadline,
        None => 0,
    };
    db.set(key, Value::Str(own(val)), expires_at);
    ctx.changed(event::STRING, "set", key);
    if deadline.is_some() {
        ctx.notify(event::GENERIC, "expire", key);
    }
    Ok((true, old))
}

fn set(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let o = parse_set_options(&argv[3..], false)?;
    let (done, old) = set_generic(ctx, &argv[1], &argv[2], &o, "set")?;
    if o.get {
        return Ok(Frame::opt_bulk(old));
    }
    if o.cond == Cond::Nx && !ctx.in_script {
        let lease = if done { lease_ms(&o, ctx.now) } else { 0 };
        ctx.srv
            .locks
            .on_set_nx(ctx.client.id, &argv[1], done, ctx.now, lease);
    }
    Ok(if done { Frame::ok() } else { Frame::Null })
}

fn setnx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let o = SetOptions {
        cond: Cond::Nx,
        get: false,
        expire: ExpireOpt::None,
        expire_arg: None,
    };
    let (done, _) = set_generic(ctx, &argv[1], &argv[2], &o, "setnx")?;
    if !ctx.in_script {
        ctx.srv
            .locks
            .on_set_nx(ctx.client.id, &argv[1], done, ctx.now, 0);
    }
    Ok(Frame::Integer(done as i64))
}

/// A lock's lease as its SET NX gave it (ms from `now`; 0: none), for lock insight.
fn lease_ms(o: &SetOptions, now: u64) -> u64 {
    // Digits only (SET has validated the argument already): a loop, not str parsing.
    let Some(n) = o.expire_arg.and_then(|a| {
        a.iter().try_fold(0u64, |n, &b| {
            b.is_ascii_digit()
                .then(|| n.checked_mul(10)?.checked_add(u64::from(b - b'0')))?
        })
    }) else {
        return 0;
    };
    match o.expire {
        ExpireOpt::Px => n,
        ExpireOpt::Ex => n.saturating_mul(1000),
        ExpireOpt::PxAt => n.saturating_sub(now),
        ExpireOpt::ExAt => n.saturating_mul(1000).saturating_sub(now),
        _ => 0,
    }
}

/// SETEX / PSETEX: SET with a mandatory relative TTL given before the value.
fn set_with_ttl(ctx: &mut Ctx, argv: &[Bytes], expire: ExpireOpt, cmd: &'static str) -> CmdResult {
    let o = SetOptions {
        cond: Cond::Always,
        get: false,
        expire,
        expire_arg: Some(&argv[2]),
    };
    set_generic(ctx, &argv[1], &argv[3], &o, cmd)?;
    Ok(Frame::ok())
}

fn setex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    set_with_ttl(ctx, argv, ExpireOpt::Ex, "setex")
}

fn psetex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    set_with_ttl(ctx, argv, ExpireOpt::Px, "psetex")
}

fn getset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let old = read_str(ctx, &argv[1])?;
    ctx.db().set(&argv[1], Value::Str(own(&argv[2])), 0);
    ctx.changed(event::STRING, "set", &argv[1]);
    Ok(Frame::opt_bulk(old))
}

fn getdel(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let old = read_str(ctx, &argv[1])?;
    if old.is_some() {
        let now = ctx.now;
        ctx.db().remove(&argv[1], now);
        ctx.changed(event::GENERIC, "del", &argv[1]);
    }
    Ok(Frame::opt_bulk(old))
}

fn getex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let o = parse_set_options(&argv[2..], true)?;
    let key = &argv[1];
    let Some(val) = read_str(ctx, key)? else {
        return Ok(Frame::Null);
    };
    let now = ctx.now;
    match (o.expire, o.expire_arg) {
        (ExpireOpt::Persist, _) if ctx.db().get(key, now).is_some_and(|e| e.expires_at != 0) => {
            ctx.db().set_expire(key, 0, now);
            ctx.changed(event::GENERIC, "persist", key);
        }
        (kind, Some(arg)) => {
            let at = deadline_ms(kind, arg, now, "getex")?;
            if matches!(kind, ExpireOpt::ExAt | ExpireOpt::PxAt) && at <= now {
                ctx.db().remove(key, now);
                ctx.changed(event::GENERIC, "del", key);
            } else {
                ctx.db().set_expire(key, at, now);
                ctx.changed(event::GENERIC, "expire", key);
            }
        }
        _ => {}
    }
    Ok(Frame::Bulk(val))
}

fn mget(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    let db = ctx.db();
    let out = argv[1..]
        .iter()
        .map(|k| match db.get(k, now) {
            Some(e) => match &e.value {
                Value::Str(s) => Frame::Bulk(s.clone()),
                _ => Frame::Null,
            },
            None => Frame::Null,
        })
        .collect();
    Ok(Frame::Array(out))
}

fn mset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() % 2 == 0 {
        return Err(CmdError::WrongArity("mset".into()));
    }
    for pair in argv[1..].chunks(2) {
        ctx.db().set(&pair[0], Value::Str(own(&pair[1])), 0);
        ctx.changed(event::STRING, "set", &pair[0]);
    }
    Ok(Frame::ok())
}

fn msetnx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() % 2 == 0 {
        return Err(CmdError::WrongArity("msetnx".into()));
    }
    let now = ctx.now;
    let db = ctx.db();
    if argv[1..].chunks(2).any(|p| db.contains(&p[0], now)) {
        return Ok(Frame::Integer(0));
    }
    for pair in argv[1..].chunks(2) {
        ctx.db().set(&pair[0], Value::Str(own(&pair[1])), 0);
        ctx.changed(event::STRING, "set", &pair[0]);
    }
    Ok(Frame::Integer(1))
}

/// Adds `delta` to the integer at `key` (missing counts as 0), keeping its TTL.
pub fn incr_by(ctx: &mut Ctx, key: &Bytes, delta: i64) -> CmdResult {
    let now = ctx.now;
    let db = ctx.db();
    // One lookup; the new text shared (0..9999, as Redis) or in a small block of its own.
    let updated = db.modify(key, now, |e| {
        let Value::Str(s) = &e.value else {
            return Err(CmdError::WrongType);
        };
        let current = parse_i64(s).ok_or(CmdError::NotInteger)?;
        let new = current.checked_add(delta).ok_or(CmdError::Overflow)?;
        e.value = Value::Str(crate::store::value::integer_text(new));
        Ok(new)
    });
    let new = match updated {
        Some(r) => r?,
        None => {
            db.set(key, Value::Str(crate::store::value::integer_text(delta)), 0);
            delta
        }
    };
    ctx.changed(event::STRING, "incrby", key);
    Ok(Frame::Integer(new))
}

fn incr(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    incr_by(ctx, &argv[1], 1)
}

fn decr(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    incr_by(ctx, &argv[1], -1)
}

fn incrby(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let d = int_arg(&argv[2])?;
    incr_by(ctx, &argv[1], d)
}

fn decrby(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let d = int_arg(&argv[2])?;
    if d == i64::MIN {
        return Err(CmdError::err("ERR decrement would overflow"));
    }
    incr_by(ctx, &argv[1], -d)
}

/// Redis's incrbyfloatCommand: long double arithmetic, printed human-friendly; the stored
/// text is what the persistence log records, as Redis propagates SET with it.
fn incrbyfloat(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    let key = &argv[1];
    let current = match ctx.db().get(key, now) {
        None => LongDouble::ZERO,
        Some(e) => match &e.value {
            Value::Str(s) => LongDouble::parse(s).ok_or(CmdError::NotFloat)?,
            _ => return Err(CmdError::WrongType),
        },
    };
    let delta = LongDouble::parse(&argv[2]).ok_or(CmdError::NotFloat)?;
    let text = current
        .add_human(&delta)
        .ok_or(CmdError::err("ERR increment would produce NaN or Infinity"))?;
    let text = Bytes::from(text);
    let db = ctx.db();
    match db.get_mut(key, now) {
        Some(e) => e.value = Value::Str(text.clone()),
        None => db.set(key, Value::Str(text.clone()), 0),
    }
    // createStringObjectFromLongDouble: embstr (or raw past 44 bytes), never int.
    db.set_str_enc(key, crate::store::keyspace::StrEnc::Embstr);
    ctx.changed(event::STRING, "incrbyfloat", key);
    Ok(Frame::Bulk(text))
}

fn append(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let reply = append_inner(ctx, argv)?;
    ctx.changed(event::STRING, "append", &argv[1]);
    Ok(reply)
}

fn append_inner(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    let max = ctx.srv.config.proto_max_bulk_len as usize;
    let db = ctx.db();
    match db.get_mut(&argv[1], now) {
        None => {
            db.set(&argv[1], Value::Str(own(&argv[2])), 0);
            Ok(Frame::Integer(argv[2].len() as i64))
        }
        Some(e) => match &mut e.value {
            Value::Str(s) => {
                if s.len() + argv[2].len() > max {
                    return Err(CmdError::err(
                        "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
                    ));
                }
                let v = appended(std::mem::take(s), &argv[2]);
                let n = v.len();
                *s = v;
                // Appended in place: `raw` whatever the content, as Redis's APPEND leaves it.
                db.set_str_enc(&argv[1], crate::store::keyspace::StrEnc::Raw);
                Ok(Frame::Integer(n as i64))
            }
            _ => Err(CmdError::WrongType),
        },
    }
}

/// Redis's SDS_MAX_PREALLOC: a growing string keeps up to this much spare room.
const MAX_PREALLOC: usize = 1024 * 1024;

/// `s` followed by `tail`, in place when `s` is the only handle on its buffer, with room to
/// spare as Redis's `sdsMakeRoomFor` leaves (double below 1 MB, 1 MB more above). Copying the
/// whole string on every APPEND made each one O(length): 10000 one-byte APPENDs to a 100 MB
/// string held the executor for ~2 minutes, where Redis takes milliseconds.
fn appended(s: Bytes, tail: &[u8]) -> Bytes {
    let mut v: Vec<u8> = match s.try_into_mut() {
        Ok(unique) => unique.into(),
        Err(shared) => shared.to_vec(),
    };
    let len = v.len() + tail.len();
    if v.capacity() < len {
        let room = if len < MAX_PREALLOC {
            len * 2
        } else {
            len + MAX_PREALLOC
        };
        v.reserve_exact(room - v.len());
    }
    v.extend_from_slice(tail);
    Bytes::from(v)
}

fn strlen(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    match ctx.db().get(&argv[1], now) {
        None => Ok(Frame::Integer(0)),
        Some(e) => match &e.value {
            Value::Str(s) => Ok(Frame::Integer(s.len() as i64)),
            _ => Err(CmdError::WrongType),
        },
    }
}

/// Redis 7.0's key specifications of the family (its commands.c), as COMMAND INFO prints them;
/// subcommands by their `parent|sub` name.
pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    ("get", &[KeySpecDoc::range(&["RO", "access"], 1, 0)]),
    (
        "set",
        &[KeySpecDoc {
            notes: Some("RW and ACCESS due to the optional `GET` argument"),
            flags: &["RW", "access", "update", "variable_flags"],
            begin_index: 1,
            lastkey: 0,
            keystep: 1,
            keynum: None,
            keyword: None,
            limit: 0,
        }],
    ),
    ("setnx", &[KeySpecDoc::range(&["OW", "insert"], 1, 0)]),
    ("setex", &[KeySpecDoc::range(&["OW", "update"], 1, 0)]),
    ("psetex", &[KeySpecDoc::range(&["OW", "update"], 1, 0)]),
    (
        "getset",
        &[KeySpecDoc::range(&["RW", "access", "update"], 1, 0)],
    ),
    (
        "getdel",
        &[KeySpecDoc::range(&["RW", "access", "delete"], 1, 0)],
    ),
    (
        "getex",
        &[KeySpecDoc {
            notes: Some("RW and UPDATE because it changes the TTL"),
            flags: &["RW", "access", "update"],
            begin_index: 1,
            lastkey: 0,
            keystep: 1,
            keynum: None,
            keyword: None,
            limit: 0,
        }],
    ),
    ("mget", &[KeySpecDoc::range(&["RO", "access"], 1, -1)]),
    (
        "mset",
        &[KeySpecDoc {
            notes: None,
            flags: &["OW", "update"],
            begin_index: 1,
            lastkey: -1,
            keystep: 2,
            keynum: None,
            keyword: None,
            limit: 0,
        }],
    ),
    (
        "msetnx",
        &[KeySpecDoc {
            notes: None,
            flags: &["OW", "insert"],
            begin_index: 1,
            lastkey: -1,
            keystep: 2,
            keynum: None,
            keyword: None,
            limit: 0,
        }],
    ),
    (
        "incr",
        &[KeySpecDoc::range(&["RW", "access", "update"], 1, 0)],
    ),
    (
        "decr",
        &[KeySpecDoc::range(&["RW", "access", "update"], 1, 0)],
    ),
    (
        "incrby",
        &[KeySpecDoc::range(&["RW", "access", "update"], 1, 0)],
    ),
    (
        "decrby",
        &[KeySpecDoc::range(&["RW", "access", "update"], 1, 0)],
    ),
    (
        "incrbyfloat",
        &[KeySpecDoc::range(&["RW", "access", "update"], 1, 0)],
    ),
    ("append", &[KeySpecDoc::range(&["RW", "insert"], 1, 0)]),
    ("strlen", &[KeySpecDoc::range(&["RO"], 1, 0)]),
];

/// Redis 7.0's command tips of the family (its commands.c).
pub static TIPS: &[(&str, &[&str])] = &[
    ("mget", &["request_policy:multi_shard"]),
    (
        "mset",
        &[
            "request_policy:multi_shard",
            "response_policy:all_succeeded",
        ],
    ),
    (
        "msetnx",
        &["request_policy:multi_shard", "response_policy:agg_min"],
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn b(v: &[&str]) -> Vec<Bytes> {
        v.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    #[test]
    fn set_option_rules() {
        let ok = |v: &[&str]| parse_set_options(&b(v), false).is_ok();
        assert!(ok(&["NX", "PX", "100"]));
        assert!(ok(&["px", "100", "nx", "get"]));
        assert!(ok(&["EX", "1", "EX", "2"]));
        assert!(ok(&["KEEPTTL", "XX"]));
        assert!(!ok(&["NX", "XX"]));
        assert!(!ok(&["EX", "1", "PX", "2"]));
        assert!(!ok(&["KEEPTTL", "EX", "1"]));
        assert!(!ok(&["EX"]));
        assert!(!ok(&["PERSIST"]));
        assert!(parse_set_options(&b(&["PERSIST"]), true).is_ok());
        assert!(parse_set_options(&b(&["NX"]), true).is_err());
    }

    #[test]
    fn deadlines() {
        assert_eq!(deadline_ms(ExpireOpt::Px, b"100", 1000, "set"), Ok(1100));
        assert_eq!(deadline_ms(ExpireOpt::Ex, b"2", 1000, "set"), Ok(3000));
        assert_eq!(deadline_ms(ExpireOpt::PxAt, b"5", 1000, "set"), Ok(5));
        assert_eq!(
            deadline_ms(ExpireOpt::Ex, b"0", 1000, "set"),
            Err(CmdError::InvalidExpire("set"))
        );
        assert_eq!(
            deadline_ms(ExpireOpt::Ex, b"-1", 1000, "set"),
            Err(CmdError::InvalidExpire("set"))
        );
        assert_eq!(
            deadline_ms(ExpireOpt::Ex, b"x", 1000, "set"),
            Err(CmdError::NotInteger)
        );
        assert_eq!(
            deadline_ms(ExpireOpt::Ex, b"9223372036854775807", 1000, "set"),
            Err(CmdError::InvalidExpire("set"))
        );
    }
}
