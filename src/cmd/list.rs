//! Lists, including the blocking pops python-redis-lock waits in (`BLPOP lock-signal:<name>`).

use super::args::{int_arg, is};
use super::blocking::{self, parse_timeout};
use super::spec::KeySpecDoc;
use super::spec::{event, Ctx};
use super::spec::{flags::*, CommandSpec, KeySpec, KEY1};
use super::support::parse_mpop;
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use crate::store::value::own;
use crate::store::waiters::WaitKind;
use crate::store::Value;
use bytes::Bytes;
use std::collections::VecDeque;

type List = VecDeque<Bytes>;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, keys, &["list"], handler)
}

use super::spec::TWO_KEYS;
const KEYS_BEFORE_TIMEOUT: KeySpec = KeySpec {
    first: 1,
    last: -2,
    step: 1,
};
/// LMPOP/BLMPOP: keys follow numkeys; the legacy triple cannot describe them (Redis reports 0 0 0).
const MPOP_KEYS: KeySpec = KeySpec {
    first: 0,
    last: 0,
    step: 0,
};

pub static COMMANDS: &[CommandSpec] = &[
    spec("lpush", -3, WRITE | DENYOOM | FAST, KEY1, lpush),
    spec("rpush", -3, WRITE | DENYOOM | FAST, KEY1, rpush),
    spec("lpushx", -3, WRITE | DENYOOM | FAST, KEY1, lpushx),
    spec("rpushx", -3, WRITE | DENYOOM | FAST, KEY1, rpushx),
    spec("lpop", -2, WRITE | FAST, KEY1, lpop),
    spec("rpop", -2, WRITE | FAST, KEY1, rpop),
    spec("llen", 2, READONLY | FAST, KEY1, llen),
    spec("lrange", 4, READONLY, KEY1, lrange),
    spec("lindex", 3, READONLY, KEY1, lindex),
    spec("lset", 4, WRITE | DENYOOM, KEY1, lset),
    spec("lrem", 4, WRITE, KEY1, lrem),
    spec("ltrim", 4, WRITE, KEY1, ltrim),
    spec("linsert", 5, WRITE | DENYOOM, KEY1, linsert),
    spec("lpos", -3, READONLY, KEY1, lpos),
    spec("lmove", 5, WRITE | DENYOOM, TWO_KEYS, lmove),
    spec("rpoplpush", 3, WRITE | DENYOOM, TWO_KEYS, rpoplpush),
    spec("lmpop", -4, WRITE | MOVABLE_KEYS, MPOP_KEYS, lmpop),
    spec(
        "blpop",
        -3,
        WRITE | NOSCRIPT | BLOCKING,
        KEYS_BEFORE_TIMEOUT,
        blpop,
    ),
    spec(
        "brpop",
        -3,
        WRITE | NOSCRIPT | BLOCKING,
        KEYS_BEFORE_TIMEOUT,
        brpop,
    ),
    spec(
        "blmove",
        6,
        WRITE | DENYOOM | NOSCRIPT | BLOCKING,
        TWO_KEYS,
        blmove,
    ),
    spec(
        "brpoplpush",
        4,
        WRITE | DENYOOM | NOSCRIPT | BLOCKING,
        TWO_KEYS,
        brpoplpush,
    ),
    spec(
        "blmpop",
        -5,
        WRITE | BLOCKING | MOVABLE_KEYS,
        MPOP_KEYS,
        blmpop,
    ),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Left,
    Right,
}

impl End {
    fn pop_event(self) -> &'static str {
        match self {
            End::Left => "lpop",
            End::Right => "rpop",
        }
    }

    fn push_event(self) -> &'static str {
        match self {
            End::Left => "lpush",
            End::Right => "rpush",
        }
    }
}

fn parse_end(arg: &[u8]) -> CmdResult<End> {
    if is(arg, "left") {
        Ok(End::Left)
    } else if is(arg, "right") {
        Ok(End::Right)
    } else {
        Err(CmdError::Syntax)
    }
}

/// The list at `key`: None if missing, WRONGTYPE if another type.
fn list_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a mut List>> {
    ctx.value_mut(key, Value::as_list_mut)
}

fn list_ref<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a List>> {
    Ok(list_mut(ctx, key)?.map(|l| &*l))
}

/// Pushes `values` to `end`; creates the list unless `only_existing`. Returns the new length.
fn push(ctx: &mut Ctx, key: &Bytes, values: &[Bytes], end: End, only_existing: bool) -> CmdResult {
    let l = match list_mut(ctx, key)? {
        Some(l) => l,
        None if only_existing => return Ok(Frame::Integer(0)),
        None => {
            let now = ctx.now;
            let db = ctx.db();
            db.set(key, Value::List(List::new()), 0);
            match db.get_mut(key, now).map(|e| &mut e.value) {
                Some(Value::List(l)) => l,
                _ => return Err(CmdError::WrongType),
            }
        }
    };
    for v in values {
        match end {
            End::Left => l.push_front(own(v)),
            End::Right => l.push_back(own(v)),
        }
    }
    let len = l.len() as i64;
    ctx.changed(event::LIST, end.push_event(), key);
    Ok(Frame::Integer(len))
}

fn lpush(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    push(ctx, &argv[1], &argv[2..], End::Left, false)
}

fn rpush(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    push(ctx, &argv[1], &argv[2..], End::Right, false)
}

fn lpushx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    push(ctx, &argv[1], &argv[2..], End::Left, true)
}

fn rpushx(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    push(ctx, &argv[1], &argv[2..], End::Right, true)
}

/// Pops up to `count` elements from an existing list (None: the key is missing).
fn pop_n(ctx: &mut Ctx, key: &[u8], end: End, count: usize) -> CmdResult<Option<Vec<Bytes>>> {
    let Some(l) = list_mut(ctx, key)? else {
        return Ok(None);
    };
    let n = count.min(l.len());
    let items: Vec<Bytes> = match end {
        End::Left => l.drain(..n).collect(),
        End::Right => {
            let start = l.len() - n;
            l.drain(start..).rev().collect()
        }
    };
    if !items.is_empty() {
        ctx.changed(event::LIST, end.pop_event(), key);
        ctx.drop_if_empty(key, true);
    }
    Ok(Some(items))
}

fn positive_count(arg: &[u8]) -> CmdResult<usize> {
    match int_arg(arg) {
        Ok(n) if n >= 0 => Ok(n as usize),
        _ => Err(CmdError::err("ERR value is out of range, must be positive")),
    }
}

fn pop_generic(ctx: &mut Ctx, argv: &[Bytes], end: End) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::WrongArity(
            String::from_utf8_lossy(&argv[0]).to_lowercase(),
        ));
    }
    let count = argv.get(2).map(|c| positive_count(c)).transpose()?;
    match count {
        None => {
            let items = pop_n(ctx, &argv[1], end, 1)?;
            Ok(Frame::opt_bulk(items.and_then(|v| v.into_iter().next())))
        }
        Some(n) => match pop_n(ctx, &argv[1], end, n)? {
            None => Ok(Frame::NullArray),
            Some(items) => Ok(Frame::Array(items.into_iter().map(Frame::Bulk).collect())),
        },
    }
}

fn lpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    pop_generic(ctx, argv, End::Left)
}

fn rpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    pop_generic(ctx, argv, End::Right)
}

fn llen(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Integer(
        list_ref(ctx, &argv[1])?.map_or(0, |l| l.len()) as i64,
    ))
}

fn lrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let start = int_arg(&argv[2])?;
    let end = int_arg(&argv[3])?;
    let Some(l) = list_ref(ctx, &argv[1])? else {
        return Ok(Frame::Array(vec![]));
    };
    Ok(Frame::Array(
        match super::args::clamp_range(start, end, l.len()) {
            None => vec![],
            Some((s, e)) => l.range(s..=e).map(|v| Frame::Bulk(v.clone())).collect(),
        },
    ))
}

fn index_of(index: i64, len: usize) -> Option<usize> {
    let i = if index < 0 { len as i64 + index } else { index };
    (i >= 0 && i < len as i64).then_some(i as usize)
}

fn lindex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    // Redis looks the key up before parsing the index: a missing key is null even for "abc".
    let Some(l) = list_ref(ctx, &argv[1])? else {
        return Ok(Frame::Null);
    };
    let index = int_arg(&argv[2])?;
    Ok(Frame::opt_bulk(
        index_of(index, l.len()).and_then(|i| l.get(i).cloned()),
    ))
}

fn lset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if list_ref(ctx, &argv[1])?.is_none() {
        return Err(CmdError::NoSuchKey);
    }
    let index = int_arg(&argv[2])?;
    let l = list_mut(ctx, &argv[1])?.ok_or(CmdError::NoSuchKey)?;
    let i = index_of(index, l.len()).ok_or(CmdError::err("ERR index out of range"))?;
    l[i] = own(&argv[3]);
    ctx.changed(event::LIST, "lset", &argv[1]);
    Ok(Frame::ok())
}

fn lrem(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let count = int_arg(&argv[2])?;
    let target = &argv[3];
    let Some(l) = list_mut(ctx, &argv[1])? else {
        return Ok(Frame::Integer(0));
    };
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs() as usize
    };
    let mut removed = 0usize;
    if count >= 0 {
        l.retain(|v| {
            if removed < limit && v == target {
                removed += 1;
                false
            } else {
                true
            }
        });
    } else {
        let mut i = l.len();
        while i > 0 && removed < limit {
            i -= 1;
            if l[i] == target {
                l.remove(i);
                removed += 1;
            }
        }
    }
    if removed > 0 {
        ctx.changed(event::LIST, "lrem", &argv[1]);
        ctx.drop_if_empty(&argv[1], true);
    }
    Ok(Frame::Integer(removed as i64))
}

fn ltrim(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let start = int_arg(&argv[2])?;
    let end = int_arg(&argv[3])?;
    let Some(l) = list_mut(ctx, &argv[1])? else {
        return Ok(Frame::ok());
    };
    match super::args::clamp_range(start, end, l.len()) {
        None => l.clear(),
        Some((s, e)) => {
            l.truncate(e + 1);
            l.drain(..s);
        }
    }
    ctx.changed(event::LIST, "ltrim", &argv[1]);
    ctx.drop_if_empty(&argv[1], true);
    Ok(Frame::ok())
}

fn linsert(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let after = if is(&argv[2], "after") {
        true
    } else if is(&argv[2], "before") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let Some(l) = list_mut(ctx, &argv[1])? else {
        return Ok(Frame::Integer(0));
    };
    let Some(pos) = l.iter().position(|v| v == &argv[3]) else {
        return Ok(Frame::Integer(-1));
    };
    l.insert(if after { pos + 1 } else { pos }, own(&argv[4]));
    let len = l.len() as i64;
    ctx.changed(event::LIST, "linsert", &argv[1]);
    Ok(Frame::Integer(len))
}

fn lpos(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut rank: i64 = 1;
    let mut count: Option<i64> = None;
    let mut maxlen: i64 = 0;
    let mut i = 3;
    while i < argv.len() {
        let opt = &argv[i];
        let Some(val) = argv.get(i + 1) else {
            return Err(CmdError::Syntax);
        };
        if is(opt, "rank") {
            rank = int_arg(val)?;
            if rank == 0 {
                return Err(CmdError::err("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
            }
        } else if is(opt, "count") {
            let c = int_arg(val)?;
            if c < 0 {
                return Err(CmdError::err("ERR COUNT can't be negative"));
            }
            count = Some(c);
        } else if is(opt, "maxlen") {
            maxlen = int_arg(val)?;
            if maxlen < 0 {
                return Err(CmdError::err("ERR MAXLEN can't be negative"));
            }
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let Some(l) = list_ref(ctx, &argv[1])? else {
        return Ok(if count.is_some() {
            Frame::Array(vec![])
        } else {
            Frame::Null
        });
    };
    let target = &argv[2];
    let want = match count {
        Some(0) => usize::MAX,
        Some(c) => c as usize,
        None => 1,
    };
    // Redis negates the rank with wrapping arithmetic; i64::MIN stays "skip almost forever".
    let skip = rank.unsigned_abs().saturating_sub(1);
    let limit = if maxlen == 0 {
        usize::MAX
    } else {
        maxlen as usize
    };
    let mut found = Vec::new();
    let mut matches = 0u64;
    let len = l.len();
    let mut visit = |idx: usize, v: &Bytes| {
        if v == target {
            matches += 1;
            if matches > skip {
                found.push(idx);
            }
        }
        found.len() < want
    };
    if rank > 0 {
        for (idx, v) in l.iter().enumerate().take(limit) {
            if !visit(idx, v) {
                break;
            }
        }
    } else {
        for (k, v) in l.iter().rev().enumerate().take(limit) {
            if !visit(len - 1 - k, v) {
                break;
            }
        }
    }
    Ok(match count {
        Some(_) => Frame::Array(
            found
                .into_iter()
                .map(|i| Frame::Integer(i as i64))
                .collect(),
        ),
        None => found
            .first()
            .map_or(Frame::Null, |&i| Frame::Integer(i as i64)),
    })
}

/// LMOVE's core: pops from `src` and pushes to `dst`. Ok(None) when `src` is missing or empty.
fn do_move(
    ctx: &mut Ctx,
    src: &Bytes,
    dst: &Bytes,
    from: End,
    to: End,
) -> CmdResult<Option<Bytes>> {
    let now = ctx.now;
    if list_ref(ctx, src)?.is_none_or(|l| l.is_empty()) {
        return Ok(None);
    }
    if src != dst {
        list_ref(ctx, dst)?; // type check before changing anything
    }
    let Some(l) = list_mut(ctx, src)? else {
        return Ok(None);
    };
    let Some(v) = (match from {
        End::Left => l.pop_front(),
        End::Right => l.pop_back(),
    }) else {
        return Ok(None);
    };
    if src == dst {
        match to {
            End::Left => l.push_front(v.clone()),
            End::Right => l.push_back(v.clone()),
        }
        // Redis announces the push before the pop, for a rotation too.
        ctx.changed(event::LIST, to.push_event(), dst);
        ctx.changed(event::LIST, from.pop_event(), src);
        return Ok(Some(v));
    }
    let db = ctx.db();
    if db.get(dst, now).is_none() {
        db.set(dst, Value::List(List::new()), 0);
    }
    if let Some(Value::List(d)) = db.get_mut(dst, now).map(|e| &mut e.value) {
        match to {
            End::Left => d.push_front(v.clone()),
            End::Right => d.push_back(v.clone()),
        }
    }
    ctx.changed(event::LIST, to.push_event(), dst);
    ctx.changed(event::LIST, from.pop_event(), src);
    ctx.drop_if_empty(src, true);
    Ok(Some(v))
}

fn lmove(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let from = parse_end(&argv[3])?;
    let to = parse_end(&argv[4])?;
    Ok(Frame::opt_bulk(do_move(ctx, &argv[1], &argv[2], from, to)?))
}

fn rpoplpush(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Frame::opt_bulk(do_move(
        ctx,
        &argv[1],
        &argv[2],
        End::Right,
        End::Left,
    )?))
}

fn blmove_generic(ctx: &mut Ctx, argv: &[Bytes], from: End, to: End, timeout: &[u8]) -> CmdResult {
    let timeout = parse_timeout(timeout, ctx.now)?;
    if let Some(v) = do_move(ctx, &argv[1], &argv[2], from, to)? {
        return Ok(Frame::Bulk(v));
    }
    if !blocking::may_block(ctx) {
        return Ok(Frame::Null);
    }
    blocking::block(ctx, &argv[1..2], timeout, WaitKind::List, argv)
}

fn blmove(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let from = parse_end(&argv[3])?;
    let to = parse_end(&argv[4])?;
    blmove_generic(ctx, argv, from, to, &argv[5])
}

fn brpoplpush(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    blmove_generic(ctx, argv, End::Right, End::Left, &argv[3])
}

/// Whether `key` holds a non-empty list. `served`: a blocked pop run again because a key it
/// waits on got data. Redis then pops from that key without looking at the others again, so a
/// key that became another type meanwhile is passed over instead of failing the waiter with
/// WRONGTYPE (the same rule as BZPOPMIN/BZMPOP in zset.rs).
fn ready(ctx: &mut Ctx, key: &[u8], served: bool) -> CmdResult<bool> {
    match list_ref(ctx, key) {
        Ok(l) => Ok(l.is_some_and(|l| !l.is_empty())),
        Err(_) if served => Ok(false),
        Err(e) => Err(e),
    }
}

/// BLPOP/BRPOP: the first non-empty list among `keys` in argument order.
fn bpop_generic(ctx: &mut Ctx, argv: &[Bytes], end: End) -> CmdResult {
    let keys = &argv[1..argv.len() - 1];
    let timeout = parse_timeout(&argv[argv.len() - 1], ctx.now)?;
    let served = ctx.client.block_deadline.is_some();
    for key in blocking::serve_order(ctx, keys) {
        if ready(ctx, key, served)? {
            let v = pop_n(ctx, key, end, 1)?.and_then(|v| v.into_iter().next());
            if let Some(v) = v {
                return Ok(Frame::Array(vec![Frame::Bulk(key.clone()), Frame::Bulk(v)]));
            }
        }
    }
    if !blocking::may_block(ctx) {
        return Ok(Frame::NullArray);
    }
    blocking::block(ctx, keys, timeout, WaitKind::List, argv)
}

fn blpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    bpop_generic(ctx, argv, End::Left)
}

fn brpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    bpop_generic(ctx, argv, End::Right)
}

fn parse_lmpop(argv: &[Bytes], at: usize) -> CmdResult<(&[Bytes], End, usize)> {
    parse_mpop(argv, at, |a| parse_end(a).ok())
}

/// Pops from the first non-empty list: `[key, [elements]]`, or None.
fn mpop(
    ctx: &mut Ctx,
    keys: &[Bytes],
    end: End,
    count: usize,
    served: bool,
) -> CmdResult<Option<Frame>> {
    for key in blocking::serve_order(ctx, keys) {
        if ready(ctx, key, served)? {
            if let Some(items) = pop_n(ctx, key, end, count)? {
                return Ok(Some(Frame::Array(vec![
                    Frame::Bulk(key.clone()),
                    Frame::Array(items.into_iter().map(Frame::Bulk).collect()),
                ])));
            }
        }
    }
    Ok(None)
}

fn lmpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (keys, end, count) = parse_lmpop(argv, 1)?;
    Ok(mpop(ctx, keys, end, count, false)?.unwrap_or(Frame::NullArray))
}

fn blmpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (keys, end, count) = parse_lmpop(argv, 2)?;
    let timeout = parse_timeout(&argv[1], ctx.now)?;
    let served = ctx.client.block_deadline.is_some();
    if let Some(f) = mpop(ctx, keys, end, count, served)? {
        return Ok(f);
    }
    if !blocking::may_block(ctx) {
        return Ok(Frame::NullArray);
    }
    blocking::block(ctx, keys, timeout, WaitKind::List, argv)
}

/// Redis 7.0's key specifications of the family (its commands.c), as COMMAND INFO prints them;
/// subcommands by their `parent|sub` name.
pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    ("lpush", &[KeySpecDoc::range(&["RW", "insert"], 1, 0)]),
    ("rpush", &[KeySpecDoc::range(&["RW", "insert"], 1, 0)]),
    ("lpushx", &[KeySpecDoc::range(&["RW", "insert"], 1, 0)]),
    ("rpushx", &[KeySpecDoc::range(&["RW", "insert"], 1, 0)]),
    (
        "lpop",
        &[KeySpecDoc::range(&["RW", "access", "delete"], 1, 0)],
    ),
    (
        "rpop",
        &[KeySpecDoc::range(&["RW", "access", "delete"], 1, 0)],
    ),
    ("llen", &[KeySpecDoc::range(&["RO"], 1, 0)]),
    ("lrange", &[KeySpecDoc::range(&["RO", "access"], 1, 0)]),
    ("lindex", &[KeySpecDoc::range(&["RO", "access"], 1, 0)]),
    ("lset", &[KeySpecDoc::range(&["RW", "update"], 1, 0)]),
    ("lrem", &[KeySpecDoc::range(&["RW", "delete"], 1, 0)]),
    ("ltrim", &[KeySpecDoc::range(&["RW", "delete"], 1, 0)]),
    ("linsert", &[KeySpecDoc::range(&["RW", "insert"], 1, 0)]),
    ("lpos", &[KeySpecDoc::range(&["RO", "access"], 1, 0)]),
    (
        "lmove",
        &[
            KeySpecDoc::range(&["RW", "access", "delete"], 1, 0),
            KeySpecDoc::range(&["RW", "insert"], 2, 0),
        ],
    ),
    (
        "rpoplpush",
        &[
            KeySpecDoc::range(&["RW", "access", "delete"], 1, 0),
            KeySpecDoc::range(&["RW", "insert"], 2, 0),
        ],
    ),
    (
        "lmpop",
        &[KeySpecDoc::keynum(&["RW", "access", "delete"], 1, 0, 1, 1)],
    ),
    (
        "blpop",
        &[KeySpecDoc::range(&["RW", "access", "delete"], 1, -2)],
    ),
    (
        "brpop",
        &[KeySpecDoc::range(&["RW", "access", "delete"], 1, -2)],
    ),
    (
        "blmove",
        &[
            KeySpecDoc::range(&["RW", "access", "delete"], 1, 0),
            KeySpecDoc::range(&["RW", "insert"], 2, 0),
        ],
    ),
    (
        "brpoplpush",
        &[
            KeySpecDoc::range(&["RW", "access", "delete"], 1, 0),
            KeySpecDoc::range(&["RW", "insert"], 2, 0),
        ],
    ),
    (
        "blmpop",
        &[KeySpecDoc::keynum(&["RW", "access", "delete"], 2, 0, 1, 1)],
    ),
];
