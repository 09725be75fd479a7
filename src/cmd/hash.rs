//! Hashes (Redisson keeps its reentrant lock state in one: field = client id, value = count).

use super::args::int_arg;
use super::spec::{event, Ctx};
use super::spec::{flags::*, CommandSpec, KeySpecDoc, KEY1};
use super::support::{parse_cursor, parse_scan_opts};
use crate::error::{CmdError, CmdResult};
use crate::protocol::number::{parse_i64, LongDouble};
use crate::protocol::Frame;
use crate::store::value::HashValue;
use crate::store::Value;
use bytes::Bytes;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, KEY1, &["hash"], handler)
}

pub static COMMANDS: &[CommandSpec] = &[
    spec("hset", -4, WRITE | DENYOOM | FAST, hset),
    spec("hmset", -4, WRITE | DENYOOM | FAST, hmset),
    spec("hsetnx", 4, WRITE | DENYOOM | FAST, hsetnx),
    spec("hget", 3, READONLY | FAST, hget),
    spec("hmget", -3, READONLY | FAST, hmget),
    spec("hdel", -3, WRITE | FAST, hdel),
    spec("hexists", 3, READONLY | FAST, hexists),
    spec("hlen", 2, READONLY | FAST, hlen),
    spec("hstrlen", 3, READONLY | FAST, hstrlen),
    spec("hkeys", 2, READONLY, hkeys),
    spec("hvals", 2, READONLY, hvals),
    spec("hgetall", 2, READONLY, hgetall),
    spec("hincrby", 4, WRITE | DENYOOM | FAST, hincrby),
    spec("hincrbyfloat", 4, WRITE | DENYOOM | FAST, hincrbyfloat),
    spec("hscan", -3, READONLY, hscan),
    spec("hrandfield", -2, READONLY, hrandfield),
];

const RO_ACCESS: &[KeySpecDoc] = &[KeySpecDoc::range(&["RO", "access"], 1, 0)];
const RO: &[KeySpecDoc] = &[KeySpecDoc::range(&["RO"], 1, 0)];
const RW_UPDATE: &[KeySpecDoc] = &[KeySpecDoc::range(&["RW", "update"], 1, 0)];
const RW_ACCESS_UPDATE: &[KeySpecDoc] = &[KeySpecDoc::range(&["RW", "access", "update"], 1, 0)];

/// Redis 7.0's key specifications of the family, as COMMAND INFO prints them.
pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    ("hset", RW_UPDATE),
    ("hmset", RW_UPDATE),
    ("hsetnx", &[KeySpecDoc::range(&["RW", "insert"], 1, 0)]),
    ("hget", RO_ACCESS),
    ("hmget", RO_ACCESS),
    ("hdel", &[KeySpecDoc::range(&["RW", "delete"], 1, 0)]),
    ("hexists", RO),
    ("hlen", RO),
    ("hstrlen", RO),
    ("hkeys", RO_ACCESS),
    ("hvals", RO_ACCESS),
    ("hgetall", RO_ACCESS),
    ("hincrby", RW_ACCESS_UPDATE),
    ("hincrbyfloat", RW_ACCESS_UPDATE),
    ("hscan", RO_ACCESS),
    ("hrandfield", RO_ACCESS),
];

/// The hash at `key` for reading: None if missing, WRONGTYPE if another type.
fn read_hash<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a HashValue>> {
    let now = ctx.now;
    match ctx.db().get(key, now) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Hash(h) => Ok(Some(h)),
            _ => Err(CmdError::WrongType),
        },
    }
}

/// The hash at `key` for writing, created empty if missing.
fn write_hash<'a>(ctx: &'a mut Ctx, key: &Bytes) -> CmdResult<&'a mut HashValue> {
    let now = ctx.now;
    let db = ctx.db();
    match db.get(key, now) {
        Some(e) if !matches!(e.value, Value::Hash(_)) => return Err(CmdError::WrongType),
        Some(_) => {}
        None => db.set(key, Value::Hash(HashValue::default()), 0),
    }
    match db.get_mut(key, now).map(|e| &mut e.value) {
        Some(Value::Hash(h)) => Ok(h),
        _ => Err(CmdError::WrongType),
    }
}

fn hset_generic(ctx: &mut Ctx, argv: &[Bytes], name: &str) -> CmdResult<i64> {
    if argv.len() % 2 == 1 {
        return Err(CmdError::WrongArity(name.into()));
    }
    let h = write_hash(ctx, &argv[1])?;
    let mut created = 0;
    for pair in argv[2..].chunks(2) {
        if h.insert(&pair[0], &pair[1]) {
            created += 1;
        }
    }
    Ok(created)
}

fn hset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let n = hset_generic(ctx, argv, "hset")?;
    ctx.changed(event::HASH, "hset", &argv[1]);
    Ok(Frame::Integer(n))
}

fn hmset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    hset_generic(ctx, argv, "hmset")?;
    ctx.changed(event::HASH, "hset", &argv[1]);
    Ok(Frame::ok())
}

fn hsetnx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let h = write_hash(ctx, &argv[1])?;
    if h.contains_key(&argv[2][..]) {
        return Ok(Frame::Integer(0));
    }
    h.insert(&argv[2], &argv[3]);
    ctx.changed(event::HASH, "hset", &argv[1]);
    Ok(Frame::Integer(1))
}

fn hget(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let v = read_hash(ctx, &argv[1])?.and_then(|h| h.get(&argv[2][..]).map(Bytes::copy_from_slice));
    Ok(Frame::opt_bulk(v))
}

fn hmget(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let h = read_hash(ctx, &argv[1])?;
    Ok(Frame::Array(
        argv[2..]
            .iter()
            .map(|f| Frame::opt_bulk(h.and_then(|h| h.get(&f[..]).map(Bytes::copy_from_slice))))
            .collect(),
    ))
}

fn hdel(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    let db = ctx.db();
    let (removed, empty) = match db.get_mut(&argv[1], now).map(|e| &mut e.value) {
        None => return Ok(Frame::Integer(0)),
        Some(Value::Hash(h)) => {
            let n = argv[2..].iter().filter(|f| h.remove(f)).count();
            (n, h.is_empty())
        }
        Some(_) => return Err(CmdError::WrongType),
    };
    if removed > 0 {
        ctx.changed(event::HASH, "hdel", &argv[1]);
    }
    if empty {
        ctx.db().remove(&argv[1], now);
        ctx.notify(event::GENERIC, "del", &argv[1]);
    }
    Ok(Frame::Integer(removed as i64))
}

fn hexists(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let found = read_hash(ctx, &argv[1])?.is_some_and(|h| h.contains_key(&argv[2][..]));
    Ok(Frame::Integer(found as i64))
}

fn hlen(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Integer(
        read_hash(ctx, &argv[1])?.map_or(0, |h| h.len()) as i64,
    ))
}

fn hstrlen(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let n = read_hash(ctx, &argv[1])?
        .and_then(|h| h.get(&argv[2][..]).map(|v| v.len()))
        .unwrap_or(0);
    Ok(Frame::Integer(n as i64))
}

fn hkeys(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let h = read_hash(ctx, &argv[1])?;
    Ok(Frame::Array(
        h.map(|h| h.keys().map(Frame::bulk_from).collect())
            .unwrap_or_default(),
    ))
}

fn hvals(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let h = read_hash(ctx, &argv[1])?;
    Ok(Frame::Array(
        h.map(|h| h.values().map(Frame::bulk_from).collect())
            .unwrap_or_default(),
    ))
}

fn hgetall(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let h = read_hash(ctx, &argv[1])?;
    Ok(Frame::Map(
        h.map(|h| {
            h.iter()
                .map(|(k, v)| (Frame::bulk_from(k), Frame::bulk_from(v)))
                .collect()
        })
        .unwrap_or_default(),
    ))
}

fn hincrby(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let delta = int_arg(&argv[3])?;
    let h = write_hash(ctx, &argv[1])?;
    let current = match h.get(&argv[2][..]) {
        Some(v) => parse_i64(v).ok_or(CmdError::err("ERR hash value is not an integer"))?,
        None => 0,
    };
    let new = current.checked_add(delta).ok_or(CmdError::Overflow)?;
    let mut b = itoa::Buffer::new();
    h.insert(&argv[2], b.format(new).as_bytes());
    ctx.changed(event::HASH, "hincrby", &argv[1]);
    Ok(Frame::Integer(new))
}

/// Redis's hincrbyfloatCommand: long double arithmetic (protocol/number.rs), an infinite
/// increment refused before the key is looked at.
fn hincrbyfloat(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let delta = LongDouble::parse(&argv[3]).ok_or(CmdError::NotFloat)?;
    if delta.is_infinite() {
        return Err(CmdError::err("ERR value is NaN or Infinity"));
    }
    let h = write_hash(ctx, &argv[1])?;
    let current = match h.get(&argv[2][..]) {
        Some(v) => LongDouble::parse(v).ok_or(CmdError::err("ERR hash value is not a float"))?,
        None => LongDouble::ZERO,
    };
    let text = current
        .add_human(&delta)
        .ok_or(CmdError::err("ERR increment would produce NaN or Infinity"))?;
    h.insert(&argv[2], &text);
    ctx.changed(event::HASH, "hincrbyfloat", &argv[1]);
    Ok(Frame::Bulk(Bytes::from(text)))
}

fn hscan(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let cursor = parse_cursor(&argv[2])?;
    // Redis's order: cursor, then the key (an empty scan, WRONGTYPE), then the options.
    let Some(h) = read_hash(ctx, &argv[1])? else {
        return Ok(Frame::Array(vec![
            Frame::bulk_static("0"),
            Frame::Array(vec![]),
        ]));
    };
    let o = parse_scan_opts(&argv[3..], false)?;
    let matches = |k: &[u8]| {
        o.pattern
            .is_none_or(|p| super::args::glob_match(p, k, false))
    };
    let mut items = Vec::new();
    let next = if h.is_small() {
        for (k, v) in h.iter().filter(|(k, _)| matches(k)) {
            items.push(Frame::bulk_from(k));
            items.push(Frame::bulk_from(v));
        }
        0
    } else {
        // Downward index walk: see store/keyspace.rs for why this never misses a field.
        let mut next = if cursor == 0 {
            h.len()
        } else {
            (cursor as usize).min(h.len())
        };
        let mut seen = 0;
        while next > 0 && seen < o.count {
            next -= 1;
            if let Some((k, v)) = h.get_index(next) {
                if matches(k) {
                    items.push(Frame::bulk_from(k));
                    items.push(Frame::bulk_from(v));
                }
            }
            seen += 1;
        }
        next as u64
    };
    let mut b = itoa::Buffer::new();
    Ok(Frame::Array(vec![
        Frame::Bulk(Bytes::copy_from_slice(b.format(next).as_bytes())),
        Frame::Array(items),
    ]))
}

/// HRANDFIELD key [count [WITHVALUES]]: see cmd/zset.rs for the count rules (bounded negative
/// counts, distinct fields for positive ones, the whole hash in order when count >= its size).
fn hrandfield(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let args = super::support::random_count_args(argv, "withvalues")?;
    let resp3 = ctx.client.resp3();
    let Some(h) = read_hash(ctx, &argv[1])? else {
        return Ok(match args {
            None => Frame::Null,
            Some(_) => Frame::Array(vec![]),
        });
    };
    let len = h.len();
    let Some((count, with)) = args else {
        let i = fastrand::usize(..len.max(1));
        let f = if h.is_small() {
            h.iter().nth(i)
        } else {
            h.get_index(i)
        };
        return Ok(Frame::opt_bulk(f.map(|(f, _)| Bytes::copy_from_slice(f))));
    };
    if count > 0 && h.is_small() {
        // Distinct picks from a compact hash (no positional access): one walk in storage order,
        // up to the last pick, as Redis answers a listpack (lpRandomPairsUnique).
        let mut picks: Vec<usize> = super::support::random_positions(len, count).collect();
        picks.sort_unstable();
        let mut items = Vec::with_capacity(picks.len());
        let mut want = picks.iter().copied().peekable();
        for (i, (f, v)) in h.iter().enumerate() {
            let Some(&next) = want.peek() else { break };
            if next == i {
                items.push((Frame::bulk_from(f), Frame::bulk_from(v)));
                want.next();
            }
        }
        return Ok(super::support::paired(items, with, resp3));
    }
    // Repeats allowed from a compact hash (no positional access): index it once.
    let entries: Vec<(&[u8], &[u8])> = if h.is_small() {
        h.iter().collect()
    } else {
        Vec::new()
    };
    let at = |i: usize| {
        if h.is_small() {
            entries.get(i).copied()
        } else {
            h.get_index(i)
        }
    };
    let items = super::support::random_positions(len, count)
        .filter_map(at)
        .map(|(f, v)| (Frame::bulk_from(f), Frame::bulk_from(v)))
        .collect();
    Ok(super::support::paired(items, with, resp3))
}

/// Redis 7.0's command tips for the hash commands.
pub static TIPS: &[(&str, &[&str])] = &[
    ("hrandfield", &["nondeterministic_output"]),
    ("hscan", &["nondeterministic_output"]),
    ("hkeys", &["nondeterministic_output_order"]),
    ("hvals", &["nondeterministic_output_order"]),
    ("hgetall", &["nondeterministic_output_order"]),
];
