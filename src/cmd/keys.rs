//! Generic keyspace commands: DEL, EXISTS, expiry, TYPE, KEYS, SCAN, RENAME, RANDOMKEY, DBSIZE,
//! FLUSHDB/FLUSHALL, SWAPDB, TOUCH.

use super::args::{glob_match, int_arg, is};
use super::spec::KeySpecDoc;
use super::spec::{event, Ctx};
use super::spec::{flags::*, CommandSpec, KeySpec, ALL_KEYS, KEY1, NO_KEYS};
use super::support::{parse_cursor, parse_scan_opts};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use bytes::Bytes;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, keys, &["keyspace"], handler)
}

/// A keyless command Redis also files under @dangerous (KEYS, FLUSHDB, FLUSHALL, SWAPDB).
const fn dangerous(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(
        name,
        arity,
        flags,
        NO_KEYS,
        &["keyspace", "dangerous"],
        handler,
    )
}

use super::spec::TWO_KEYS;

pub static COMMANDS: &[CommandSpec] = &[
    spec("del", -2, WRITE, ALL_KEYS, del),
    spec("unlink", -2, WRITE | FAST, ALL_KEYS, unlink),
    spec("exists", -2, READONLY | FAST, ALL_KEYS, exists),
    spec("touch", -2, READONLY | FAST, ALL_KEYS, touch),
    spec("expire", -3, WRITE | FAST, KEY1, expire),
    spec("pexpire", -3, WRITE | FAST, KEY1, pexpire),
    spec("expireat", -3, WRITE | FAST, KEY1, expireat),
    spec("pexpireat", -3, WRITE | FAST, KEY1, pexpireat),
    spec("ttl", 2, READONLY | FAST, KEY1, ttl),
    spec("pttl", 2, READONLY | FAST, KEY1, pttl),
    spec("expiretime", 2, READONLY | FAST, KEY1, expiretime),
    spec("pexpiretime", 2, READONLY | FAST, KEY1, pexpiretime),
    spec("persist", 2, WRITE | FAST, KEY1, persist),
    spec("type", 2, READONLY | FAST, KEY1, type_cmd),
    dangerous("keys", 2, READONLY, keys),
    spec("scan", -2, READONLY, NO_KEYS, scan),
    spec("rename", 3, WRITE, TWO_KEYS, rename),
    spec("renamenx", 3, WRITE | FAST, TWO_KEYS, renamenx),
    spec("randomkey", 1, READONLY, NO_KEYS, randomkey),
    spec("dbsize", 1, READONLY | FAST, NO_KEYS, dbsize),
    dangerous("flushdb", -1, WRITE, flushdb),
    dangerous("flushall", -1, WRITE, flushall),
    dangerous("swapdb", 3, WRITE | FAST, swapdb),
    CommandSpec::leaf(
        "copy",
        -3,
        WRITE | DENYOOM,
        TWO_KEYS,
        &["keyspace", "write", "slow"],
        copy,
    ),
    CommandSpec::leaf(
        "move",
        3,
        WRITE | FAST,
        KEY1,
        &["keyspace", "write", "fast"],
        move_cmd,
    ),
];

fn del(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    let mut n = 0;
    for k in &argv[1..] {
        if ctx.db().remove(k, now).is_some() {
            ctx.changed(event::GENERIC, "del", k);
            n += 1;
        }
    }
    Ok(Frame::Integer(n))
}

/// DEL whose large values are freed on another thread (Redis's dbAsyncDelete).
fn unlink(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    let lim = super::support::limits(ctx);
    let mut n = 0;
    for k in &argv[1..] {
        if let Some(e) = ctx.db().remove(k, now) {
            crate::store::lazyfree::free_value(e.value, &lim);
            ctx.changed(event::GENERIC, "del", k);
            n += 1;
        }
    }
    Ok(Frame::Integer(n))
}

fn exists(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    let db = ctx.db();
    // LOOKUP_NOTOUCH, as Redis: EXISTS, TYPE and TTL do not count as accesses.
    let n = argv[1..]
        .iter()
        .filter(|k| db.get_untouched(k, now).is_some())
        .count();
    Ok(Frame::Integer(n as i64))
}

/// EXISTS that counts as an access: the keys' idle times start again (OBJECT IDLETIME).
fn touch(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    let db = ctx.db();
    let n = argv[1..].iter().filter(|k| db.contains(k, now)).count();
    Ok(Frame::Integer(n as i64))
}

/// EXPIRE's NX / XX / GT / LT. XX combines with GT or LT, and each given condition must hold,
/// as in Redis's `expireGenericCommand`.
#[derive(Clone, Copy, Default)]
struct ExpireCond {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl ExpireCond {
    /// Whether the new deadline `when` (ms) may replace `current` (0: the key has none, an
    /// infinite TTL: GT never beats it, LT always does).
    fn allows(self, current: u64, when: i64) -> bool {
        let has_ttl = current != 0;
        !(self.nx && has_ttl
            || self.xx && !has_ttl
            || self.gt && (!has_ttl || when <= current as i64)
            || self.lt && has_ttl && when >= current as i64)
    }
}

fn parse_expire_cond(opts: &[Bytes]) -> CmdResult<ExpireCond> {
    let mut c = ExpireCond::default();
    for o in opts {
        if is(o, "nx") {
            c.nx = true;
        } else if is(o, "xx") {
            c.xx = true;
        } else if is(o, "gt") {
            c.gt = true;
        } else if is(o, "lt") {
            c.lt = true;
        } else {
            // Redis prints the option as a C string: up to its first NUL.
            let shown = o.split(|&b| b == 0).next().unwrap_or_default();
            return Err(CmdError::erf(format!(
                "Unsupported option {}",
                String::from_utf8_lossy(shown)
            )));
        }
    }
    if c.nx && (c.xx || c.gt || c.lt) {
        return Err(CmdError::err(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if c.gt && c.lt {
        return Err(CmdError::err(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    Ok(c)
}

/// Redis's `expireGenericCommand`. `base` is 0 for the *AT forms and now for relative ones.
fn expire_generic(
    ctx: &mut Ctx,
    argv: &[Bytes],
    base: u64,
    seconds: bool,
    name: &'static str,
) -> CmdResult {
    let cond = parse_expire_cond(&argv[3..])?;
    let mut when = int_arg(&argv[2])?;
    if seconds {
        if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
            return Err(CmdError::InvalidExpire(name));
        }
        when *= 1000;
    }
    if when > i64::MAX - base as i64 {
        return Err(CmdError::InvalidExpire(name));
    }
    when += base as i64;
    let now = ctx.now;
    let db = ctx.db();
    let Some(e) = db.get(&argv[1], now) else {
        return Ok(Frame::Integer(0));
    };
    let refused = !cond.allows(e.expires_at, when);
    if refused {
        return Ok(Frame::Integer(0));
    }
    if when <= now as i64 {
        db.remove(&argv[1], now);
        ctx.changed(event::GENERIC, "del", &argv[1]);
    } else {
        db.set_expire(&argv[1], when as u64, now);
        ctx.changed(event::GENERIC, "expire", &argv[1]);
    }
    Ok(Frame::Integer(1))
}

fn expire(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    expire_generic(ctx, argv, now, true, "expire")
}

fn pexpire(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    expire_generic(ctx, argv, now, false, "pexpire")
}

fn expireat(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    expire_generic(ctx, argv, 0, true, "expireat")
}

fn pexpireat(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    expire_generic(ctx, argv, 0, false, "pexpireat")
}

/// Redis's `ttlGenericCommand`.
fn ttl_generic(ctx: &mut Ctx, key: &[u8], ms: bool, absolute: bool) -> CmdResult {
    let now = ctx.now;
    let Some(e) = ctx.db().get_untouched(key, now) else {
        return Ok(Frame::Integer(-2));
    };
    if e.expires_at == 0 {
        return Ok(Frame::Integer(-1));
    }
    let t = if absolute {
        e.expires_at as i64
    } else {
        (e.expires_at as i64 - now as i64).max(0)
    };
    // Rounded to seconds without overflow: a deadline near i64::MAX (PEXPIREAT accepts it)
    // reads as Redis prints it.
    let secs = ((i128::from(t) + 500) / 1000) as i64;
    Ok(Frame::Integer(if ms { t } else { secs }))
}

fn ttl(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    ttl_generic(ctx, &argv[1], false, false)
}

fn pttl(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    ttl_generic(ctx, &argv[1], true, false)
}

fn expiretime(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    ttl_generic(ctx, &argv[1], false, true)
}

fn pexpiretime(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    ttl_generic(ctx, &argv[1], true, true)
}

fn persist(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    let db = ctx.db();
    let had = matches!(db.get(&argv[1], now), Some(e) if e.expires_at != 0);
    if had {
        db.set_expire(&argv[1], 0, now);
        ctx.changed(event::GENERIC, "persist", &argv[1]);
    }
    Ok(Frame::Integer(had as i64))
}

fn type_cmd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    let name = ctx
        .db()
        .get_untouched(&argv[1], now)
        .map(|e| e.value.type_name())
        .unwrap_or("none");
    Ok(Frame::simple(name))
}

fn keys(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    let pattern = &argv[1];
    let all = &pattern[..] == b"*";
    // Expired keys are skipped, not deleted, as Redis's KEYS does (keyIsExpired).
    let out = ctx
        .db()
        .iter()
        .filter(|(k, e)| !e.is_expired(now) && (all || glob_match(pattern, k, false)))
        .map(|(k, _)| Frame::Bulk(Bytes::copy_from_slice(k)))
        .collect();
    Ok(Frame::Array(out))
}

fn scan(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let cursor = parse_cursor(&argv[1])?;
    let o = parse_scan_opts(&argv[2..], true)?;
    let now = ctx.now;
    let mut keys = Vec::new();
    let next = ctx.db().scan_expiring(cursor, o.count, now, |k, e| {
        if let Some(p) = o.pattern {
            if !glob_match(p, k, false) {
                return;
            }
        }
        if let Some(t) = o.type_name {
            if !t.eq_ignore_ascii_case(e.value.type_name().as_bytes()) {
                return;
            }
        }
        keys.push(Frame::Bulk(Bytes::copy_from_slice(k)));
    });
    let mut b = itoa::Buffer::new();
    Ok(Frame::Array(vec![
        Frame::Bulk(Bytes::copy_from_slice(b.format(next).as_bytes())),
        Frame::Array(keys),
    ]))
}

fn rename_generic(ctx: &mut Ctx, argv: &[Bytes], nx: bool) -> CmdResult {
    let now = ctx.now;
    let db = ctx.db();
    if !db.contains(&argv[1], now) {
        return Err(CmdError::NoSuchKey);
    }
    if argv[1] == argv[2] {
        return Ok(if nx { Frame::Integer(0) } else { Frame::ok() });
    }
    if nx && db.contains(&argv[2], now) {
        return Ok(Frame::Integer(0));
    }
    let enc = db.str_enc(&argv[1]);
    let Some(entry) = db.remove(&argv[1], now) else {
        return Err(CmdError::NoSuchKey);
    };
    // Redis deletes the destination and adds the key anew (dbDelete + dbAdd): `new` fires
    // even when the destination existed.
    db.remove(&argv[2], now);
    db.set(&argv[2], entry.value, entry.expires_at);
    // The same object under its new name, encoding included.
    db.set_str_enc(&argv[2], enc);
    ctx.changed(event::GENERIC, "rename_from", &argv[1]);
    ctx.changed(event::GENERIC, "rename_to", &argv[2]);
    Ok(if nx { Frame::Integer(1) } else { Frame::ok() })
}

fn rename(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    rename_generic(ctx, argv, false)
}

fn renamenx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    rename_generic(ctx, argv, true)
}

fn randomkey(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    Ok(Frame::opt_bulk(ctx.db().random_key(now)))
}

/// Counts every stored key, expired ones not yet reclaimed included, as Redis's dictSize does.
fn dbsize(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Integer(ctx.db().len() as i64))
}

fn flush_mode_ok(argv: &[Bytes]) -> CmdResult<()> {
    match argv.len() {
        1 => Ok(()),
        2 if is(&argv[1], "async") || is(&argv[1], "sync") => Ok(()),
        _ => Err(CmdError::Syntax),
    }
}

/// FLUSHDB/FLUSHALL ASYNC (or `lazyfree-lazy-user-flush yes` without SYNC): the emptied
/// databases' entries are freed on another thread (Redis's emptyDbAsync).
fn flush_async(ctx: &Ctx, argv: &[Bytes]) -> bool {
    match argv.get(1) {
        Some(a) => is(a, "async"),
        None => ctx.srv.config.compat_value("lazyfree-lazy-user-flush") == "yes",
    }
}

/// FLUSHDB / FLUSHALL on a cluster node running several Raft groups empties database `db` of
/// what the node masters, as a Redis Cluster master flushes its own slots: the keys of the
/// groups it serves as leader (each group logs their deletion as its own entry,
/// `ChangeRecord::per_key`); the other groups' keys stay, for their leaders to flush.
fn flush_served(ctx: &mut Ctx, db: usize, lazy: bool) {
    let host = &*ctx.host;
    let keys: Vec<Bytes> = ctx.srv.dbs[db]
        .iter()
        .filter(|(k, _)| host.cluster_serves_key(k))
        .map(|(k, _)| Bytes::copy_from_slice(k))
        .collect();
    ctx.srv.dbs.changes_per_key();
    ctx.srv.changes_since_save += keys.len() as u64;
    let n = keys.len() as u64;
    let mut old = Vec::with_capacity(keys.len());
    for k in &keys {
        // At time 0 no key is expired: a dead one goes too, without an `expired` event.
        if let Some(e) = ctx.srv.dbs[db].remove(k, 0) {
            old.push(e);
        }
    }
    if lazy {
        crate::store::lazyfree::free_all(Box::new(old), n);
    }
}

fn flushdb(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    flush_mode_ok(argv)?;
    let db = ctx.client.db;
    ctx.srv.signal_flushed_db(Some(db));
    if ctx.host.cluster_groups_split() {
        let lazy = flush_async(ctx, argv);
        flush_served(ctx, db, lazy);
        return Ok(Frame::ok());
    }
    ctx.srv.changes_since_save += ctx.db().len() as u64;
    if flush_async(ctx, argv) {
        let (old, keys) = ctx.db().clear_taking();
        crate::store::lazyfree::free_all(old, keys);
    } else {
        ctx.db().clear();
    }
    Ok(Frame::ok())
}

fn flushall(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    flush_mode_ok(argv)?;
    ctx.srv.signal_flushed_db(None);
    let lazy = flush_async(ctx, argv);
    if ctx.host.cluster_groups_split() {
        for db in 0..ctx.srv.dbs.len() {
            flush_served(ctx, db, lazy);
        }
        return Ok(Frame::ok());
    }
    for db in ctx.srv.dbs.iter_mut() {
        ctx.srv.changes_since_save += db.len() as u64;
        if lazy {
            let (old, keys) = db.clear_taking();
            crate::store::lazyfree::free_all(old, keys);
        } else {
            db.clear();
        }
    }
    // As Redis's flushallCommand: with save points, the emptied dataset is saved at once, so a
    // restart cannot bring the keys back from an older snapshot.
    if !ctx.srv.config.save_points.is_empty()
        && !ctx.in_script
        && ctx.host.rdb_save(ctx.srv, false).is_ok()
    {
        ctx.srv.changes_since_save = 0;
    }
    Ok(Frame::ok())
}

fn swapdb(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    super::slots::only_db0(ctx, "SWAPDB")?;
    // Databases swap whole, across every Raft group's keys: one group's log cannot carry it.
    if ctx.host.cluster_groups_split() {
        return Err(CmdError::err("ERR SWAPDB is not allowed in cluster mode"));
    }
    // Each index must be a C int (getIntFromObjectOrReply), or Redis names which is invalid.
    let index = |arg: &Bytes, which: &'static str| {
        int_arg(arg)
            .ok()
            .filter(|n| i32::try_from(*n).is_ok())
            .ok_or_else(|| CmdError::err(which))
    };
    let a = index(&argv[1], "ERR invalid first DB index")?;
    let b = index(&argv[2], "ERR invalid second DB index")?;
    let n = ctx.srv.dbs.len() as i64;
    if a < 0 || a >= n || b < 0 || b >= n {
        return Err(CmdError::err("ERR DB index is out of range"));
    }
    ctx.srv.dbs.swap(a as usize, b as usize);
    ctx.srv.signal_swapped_dbs(a as usize, b as usize);
    Ok(Frame::ok())
}

/// A database index argument as Redis reads it (getIntFromObjectOrReply, then selectDb).
pub(super) fn db_index(ctx: &Ctx, arg: &[u8]) -> CmdResult<usize> {
    let id = int_arg(arg)?;
    if i32::try_from(id).is_err() {
        return Err(CmdError::err(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    if id < 0 || id as usize >= ctx.srv.dbs.len() {
        return Err(CmdError::err("ERR DB index is out of range"));
    }
    Ok(id as usize)
}

const SAME_OBJECT: &str = "ERR source and destination objects are the same";

/// COPY source destination [DB db] [REPLACE], as Redis's copyCommand: options first, then
/// the same-object check, then the source, then the destination.
fn copy(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let src = ctx.client.db;
    let mut dst = src;
    let mut replace = false;
    let mut i = 3;
    while i < argv.len() {
        if is(&argv[i], "replace") {
            replace = true;
        } else if is(&argv[i], "db") && i + 1 < argv.len() {
            dst = db_index(ctx, &argv[i + 1])?;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if src != 0 || dst != 0 {
        super::slots::only_db0(ctx, "Copying to another database")?;
    }
    let (key, newkey) = (&argv[1], &argv[2]);
    if src == dst && key == newkey {
        return Err(CmdError::err(SAME_OBJECT));
    }
    let now = ctx.now;
    let Some(e) = ctx.srv.dbs[src].get(key, now) else {
        return Ok(Frame::Integer(0));
    };
    let (value, expires_at) = (e.value.clone(), e.expires_at);
    let enc = ctx.srv.dbs[src].str_enc(key);
    let target = &mut ctx.srv.dbs[dst];
    if target.contains(newkey, now) {
        if !replace {
            return Ok(Frame::Integer(0));
        }
        // dbDelete + dbAdd: `new` fires for the replaced key too.
        target.remove(newkey, now);
    }
    target.set(newkey, value, expires_at);
    // dupStringObject keeps the encoding.
    target.set_str_enc(newkey, enc);
    ctx.srv.signal_modified_key(dst, newkey);
    ctx.srv
        .notify_keyspace_event(event::GENERIC, "copy_to", newkey, dst);
    Ok(Frame::Integer(1))
}

/// MOVE key db: the index is checked before the key, as in Redis's moveCommand.
fn move_cmd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    super::slots::only_db0(ctx, "MOVE")?;
    let src = ctx.client.db;
    let dst = db_index(ctx, &argv[2])?;
    if src == dst {
        return Err(CmdError::err(SAME_OBJECT));
    }
    let key = &argv[1];
    let now = ctx.now;
    if !ctx.srv.dbs[src].contains(key, now) || ctx.srv.dbs[dst].contains(key, now) {
        return Ok(Frame::Integer(0));
    }
    let enc = ctx.srv.dbs[src].str_enc(key);
    let Some(e) = ctx.srv.dbs[src].remove(key, now) else {
        return Ok(Frame::Integer(0));
    };
    ctx.srv.dbs[dst].set(key, e.value, e.expires_at);
    ctx.srv.dbs[dst].set_str_enc(key, enc);
    ctx.srv.signal_modified_key(src, key);
    ctx.srv.signal_modified_key(dst, key);
    ctx.srv
        .notify_keyspace_event(event::GENERIC, "move_from", key, src);
    ctx.srv
        .notify_keyspace_event(event::GENERIC, "move_to", key, dst);
    Ok(Frame::Integer(1))
}

/// Redis 7.0's key specifications of the family (its commands.c), as COMMAND INFO prints them;
/// subcommands by their `parent|sub` name.
pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    (
        "copy",
        &[
            KeySpecDoc::range(&["RO", "access"], 1, 0),
            KeySpecDoc::range(&["OW", "update"], 2, 0),
        ],
    ),
    (
        "move",
        &[KeySpecDoc::range(&["RW", "access", "update"], 1, 0)],
    ),
    ("del", &[KeySpecDoc::range(&["RM", "delete"], 1, -1)]),
    ("unlink", &[KeySpecDoc::range(&["RM", "delete"], 1, -1)]),
    ("exists", &[KeySpecDoc::range(&["RO"], 1, -1)]),
    ("touch", &[KeySpecDoc::range(&["RO"], 1, -1)]),
    ("expire", &[KeySpecDoc::range(&["RW", "update"], 1, 0)]),
    ("pexpire", &[KeySpecDoc::range(&["RW", "update"], 1, 0)]),
    ("expireat", &[KeySpecDoc::range(&["RW", "update"], 1, 0)]),
    ("pexpireat", &[KeySpecDoc::range(&["RW", "update"], 1, 0)]),
    ("ttl", &[KeySpecDoc::range(&["RO", "access"], 1, 0)]),
    ("pttl", &[KeySpecDoc::range(&["RO", "access"], 1, 0)]),
    ("expiretime", &[KeySpecDoc::range(&["RO", "access"], 1, 0)]),
    ("pexpiretime", &[KeySpecDoc::range(&["RO", "access"], 1, 0)]),
    ("persist", &[KeySpecDoc::range(&["RW", "update"], 1, 0)]),
    ("type", &[KeySpecDoc::range(&["RO"], 1, 0)]),
    (
        "rename",
        &[
            KeySpecDoc::range(&["RW", "access", "delete"], 1, 0),
            KeySpecDoc::range(&["OW", "update"], 2, 0),
        ],
    ),
    (
        "renamenx",
        &[
            KeySpecDoc::range(&["RW", "access", "delete"], 1, 0),
            KeySpecDoc::range(&["OW", "insert"], 2, 0),
        ],
    ),
];

/// Redis 7.0's command tips of the family (its commands.c).
pub static TIPS: &[(&str, &[&str])] = &[
    (
        "del",
        &["request_policy:multi_shard", "response_policy:agg_sum"],
    ),
    (
        "unlink",
        &["request_policy:multi_shard", "response_policy:agg_sum"],
    ),
    (
        "exists",
        &["request_policy:multi_shard", "response_policy:agg_sum"],
    ),
    (
        "touch",
        &["request_policy:multi_shard", "response_policy:agg_sum"],
    ),
    ("ttl", &["nondeterministic_output"]),
    ("pttl", &["nondeterministic_output"]),
    (
        "keys",
        &["request_policy:all_shards", "nondeterministic_output_order"],
    ),
    (
        "scan",
        &["nondeterministic_output", "request_policy:special"],
    ),
    (
        "randomkey",
        &["request_policy:all_shards", "nondeterministic_output"],
    ),
    (
        "dbsize",
        &["request_policy:all_shards", "response_policy:agg_sum"],
    ),
    (
        "flushdb",
        &["request_policy:all_shards", "response_policy:all_succeeded"],
    ),
    (
        "flushall",
        &["request_policy:all_shards", "response_policy:all_succeeded"],
    ),
];
