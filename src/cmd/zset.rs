//! Sorted sets (Redisson's fair lock keeps its waiters' timeouts in one). The structure is in
//! store/zset.rs; here are the commands with Redis 7.0's parsing order, errors and reply shapes
//! (RESP3 returns scores as doubles and WITHSCORES / counted pops as [member, score] pairs).

use super::args::{float_arg, int_arg, is};
use super::blocking::{self, parse_timeout};
use super::spec::{event, Ctx};
use super::spec::{flags::*, CommandSpec, KeySpec, KeySpecDoc, KEY1};
use super::support::{
    paired, random_count_args, random_positions, store_result, zset_mut, zset_ref,
};
use crate::error::{CmdError, CmdResult};
use crate::protocol::number::parse_f64;
use crate::protocol::Frame;
use crate::store::value::own;
use crate::store::waiters::WaitKind;
use crate::store::zset::ZSet;
use crate::store::Value;
use bytes::Bytes;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, keys, &["sortedset"], handler)
}

const KEYS_BEFORE_TIMEOUT: KeySpec = KeySpec {
    first: 1,
    last: -2,
    step: 1,
};

use super::spec::TWO_KEYS;
/// Keys that follow a numkeys argument: the legacy triple cannot describe them (0 0 0).
const NUMKEYS: KeySpec = KeySpec {
    first: 0,
    last: 0,
    step: 0,
};

pub static COMMANDS: &[CommandSpec] = &[
    spec("zadd", -4, WRITE | DENYOOM | FAST, KEY1, zadd),
    spec("zincrby", 4, WRITE | DENYOOM | FAST, KEY1, zincrby),
    spec("zrem", -3, WRITE | FAST, KEY1, zrem),
    spec("zscore", 3, READONLY | FAST, KEY1, zscore),
    spec("zmscore", -3, READONLY | FAST, KEY1, zmscore),
    spec("zcard", 2, READONLY | FAST, KEY1, zcard),
    spec("zcount", 4, READONLY | FAST, KEY1, zcount),
    spec("zrank", 3, READONLY | FAST, KEY1, zrank),
    spec("zrevrank", 3, READONLY | FAST, KEY1, zrevrank),
    spec("zrange", -4, READONLY, KEY1, zrange),
    spec("zrangebyscore", -4, READONLY, KEY1, zrangebyscore),
    spec("zrevrangebyscore", -4, READONLY, KEY1, zrevrangebyscore),
    spec("zrangebylex", -4, READONLY, KEY1, zrangebylex),
    spec("zrevrangebylex", -4, READONLY, KEY1, zrevrangebylex),
    spec("zrevrange", -4, READONLY, KEY1, zrevrange),
    spec("zremrangebyscore", 4, WRITE, KEY1, zremrangebyscore),
    spec("zremrangebyrank", 4, WRITE, KEY1, zremrangebyrank),
    spec("zpopmin", -2, WRITE | FAST, KEY1, zpopmin),
    spec("zlexcount", 4, READONLY | FAST, KEY1, zlexcount),
    spec("zremrangebylex", 4, WRITE, KEY1, zremrangebylex),
    spec("zrandmember", -2, READONLY, KEY1, zrandmember),
    spec("zscan", -3, READONLY, KEY1, zscan),
    spec("zrangestore", -5, WRITE | DENYOOM, TWO_KEYS, zrangestore),
    spec("zunion", -3, READONLY | MOVABLE_KEYS, NUMKEYS, zunion),
    spec("zinter", -3, READONLY | MOVABLE_KEYS, NUMKEYS, zinter),
    spec("zdiff", -3, READONLY | MOVABLE_KEYS, NUMKEYS, zdiff),
    spec(
        "zintercard",
        -3,
        READONLY | MOVABLE_KEYS,
        NUMKEYS,
        zintercard,
    ),
    spec(
        "zunionstore",
        -4,
        WRITE | DENYOOM | MOVABLE_KEYS,
        KEY1,
        zunionstore,
    ),
    spec(
        "zinterstore",
        -4,
        WRITE | DENYOOM | MOVABLE_KEYS,
        KEY1,
        zinterstore,
    ),
    spec(
        "zdiffstore",
        -4,
        WRITE | DENYOOM | MOVABLE_KEYS,
        KEY1,
        zdiffstore,
    ),
    spec("zmpop", -4, WRITE | MOVABLE_KEYS, NUMKEYS, zmpop),
    spec(
        "bzmpop",
        -5,
        WRITE | BLOCKING | MOVABLE_KEYS,
        NUMKEYS,
        bzmpop,
    ),
    spec("zpopmax", -2, WRITE | FAST, KEY1, zpopmax),
    spec(
        "bzpopmin",
        -3,
        WRITE | NOSCRIPT | FAST | BLOCKING,
        KEYS_BEFORE_TIMEOUT,
        bzpopmin,
    ),
    spec(
        "bzpopmax",
        -3,
        WRITE | NOSCRIPT | FAST | BLOCKING,
        KEYS_BEFORE_TIMEOUT,
        bzpopmax,
    ),
];

const RO: &[&str] = &["RO", "access"];
const RW_DELETE: &[&str] = &["RW", "access", "delete"];
const OW: &[&str] = &["OW", "update"];
const STORE_SPECS: &[KeySpecDoc] = &[
    KeySpecDoc::range(OW, 1, 0),
    KeySpecDoc::keynum(RO, 2, 0, 1, 1),
];
const NUMKEYS_RO: &[KeySpecDoc] = &[KeySpecDoc::keynum(RO, 1, 0, 1, 1)];

const RW_UPDATE: &[KeySpecDoc] = &[KeySpecDoc::range(&["RW", "update"], 1, 0)];
const RW_ACCESS_UPDATE: &[KeySpecDoc] = &[KeySpecDoc::range(&["RW", "access", "update"], 1, 0)];
const RW_DELETE1: &[KeySpecDoc] = &[KeySpecDoc::range(&["RW", "delete"], 1, 0)];
const RO1: &[KeySpecDoc] = &[KeySpecDoc::range(RO, 1, 0)];
const POP1: &[KeySpecDoc] = &[KeySpecDoc::range(RW_DELETE, 1, 0)];
const BPOP: &[KeySpecDoc] = &[KeySpecDoc::range(RW_DELETE, 1, -2)];

/// Redis 7.0's key specifications of the family, as COMMAND INFO prints them.
pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    ("zadd", RW_UPDATE),
    ("zincrby", RW_ACCESS_UPDATE),
    ("zrem", RW_DELETE1),
    ("zscore", RO1),
    ("zmscore", RO1),
    ("zcard", &[KeySpecDoc::range(&["RO"], 1, 0)]),
    ("zcount", RO1),
    ("zrank", RO1),
    ("zrevrank", RO1),
    ("zrange", RO1),
    ("zrangebyscore", RO1),
    ("zrevrangebyscore", RO1),
    ("zrangebylex", RO1),
    ("zrevrangebylex", RO1),
    ("zrevrange", RO1),
    ("zremrangebyscore", RW_DELETE1),
    ("zremrangebyrank", RW_DELETE1),
    ("zpopmin", POP1),
    ("zpopmax", POP1),
    ("bzpopmin", BPOP),
    ("bzpopmax", BPOP),
    ("zlexcount", &[KeySpecDoc::range(RO, 1, 0)]),
    (
        "zremrangebylex",
        &[KeySpecDoc::range(&["RW", "delete"], 1, 0)],
    ),
    ("zrandmember", &[KeySpecDoc::range(RO, 1, 0)]),
    ("zscan", &[KeySpecDoc::range(RO, 1, 0)]),
    (
        "zrangestore",
        &[KeySpecDoc::range(OW, 1, 0), KeySpecDoc::range(RO, 2, 0)],
    ),
    ("zunion", NUMKEYS_RO),
    ("zinter", NUMKEYS_RO),
    ("zdiff", NUMKEYS_RO),
    ("zintercard", NUMKEYS_RO),
    ("zunionstore", STORE_SPECS),
    ("zinterstore", STORE_SPECS),
    ("zdiffstore", STORE_SPECS),
    ("zmpop", &[KeySpecDoc::keynum(RW_DELETE, 1, 0, 1, 1)]),
    ("bzmpop", &[KeySpecDoc::keynum(RW_DELETE, 2, 0, 1, 1)]),
];

const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";

#[derive(Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

fn zadd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut f = AddFlags::default();
    let mut i = 2;
    while i < argv.len() {
        let a = &argv[i];
        if is(a, "nx") {
            f.nx = true;
        } else if is(a, "xx") {
            f.xx = true;
        } else if is(a, "ch") {
            f.ch = true;
        } else if is(a, "incr") {
            f.incr = true;
        } else if is(a, "gt") {
            f.gt = true;
        } else if is(a, "lt") {
            f.lt = true;
        } else {
            break;
        }
        i += 1;
    }
    let pairs = &argv[i..];
    if pairs.is_empty() || pairs.len() % 2 == 1 {
        return Err(CmdError::Syntax);
    }
    if f.nx && f.xx {
        return Err(CmdError::err(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if ((f.gt || f.lt) && f.nx) || (f.gt && f.lt) {
        return Err(CmdError::err(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && pairs.len() > 2 {
        return Err(CmdError::err(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let scores = pairs
        .chunks(2)
        .map(|p| float_arg(&p[0]))
        .collect::<CmdResult<Vec<f64>>>()?;
    let key = &argv[1];
    let now = ctx.now;
    if zset_ref(ctx, key)?.is_none() {
        if f.xx {
            return Ok(if f.incr {
                Frame::Null
            } else {
                Frame::Integer(0)
            });
        }
        ctx.db().set(key, Value::ZSet(Box::new(ZSet::new())), 0);
    }
    let Some(Value::ZSet(z)) = ctx.db().get_mut(key, now).map(|e| &mut e.value) else {
        return Err(CmdError::WrongType);
    };
    let (mut added, mut updated) = (0i64, 0i64);
    let mut last: Option<f64> = None;
    let mut failed = false;
    for (pair, &score) in pairs.chunks(2).zip(&scores) {
        let member = &pair[1];
        match z.score(member) {
            Some(cur) => {
                if f.nx {
                    continue;
                }
                let new = if f.incr { cur + score } else { score };
                if new.is_nan() {
                    failed = true;
                    break;
                }
                if (f.gt && new <= cur) || (f.lt && new >= cur) {
                    continue;
                }
                last = Some(new);
                if new != cur {
                    z.insert(own(member), new);
                    updated += 1;
                }
            }
            None => {
                if f.xx {
                    continue;
                }
                z.insert(own(member), score);
                last = Some(score);
                added += 1;
            }
        }
    }
    if added + updated > 0 {
        ctx.changed(event::ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    // A key created for members that were all refused must not stay behind empty.
    ctx.drop_if_empty(key, false);
    if failed {
        return Err(CmdError::err(NAN_SCORE));
    }
    Ok(if f.incr {
        last.map_or(Frame::Null, Frame::Double)
    } else {
        Frame::Integer(if f.ch { added + updated } else { added })
    })
}

fn zincrby(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let delta = float_arg(&argv[2])?;
    let key = &argv[1];
    let now = ctx.now;
    if zset_ref(ctx, key)?.is_none() {
        ctx.db().set(key, Value::ZSet(Box::new(ZSet::new())), 0);
    }
    let Some(Value::ZSet(z)) = ctx.db().get_mut(key, now).map(|e| &mut e.value) else {
        return Err(CmdError::WrongType);
    };
    let new = z.score(&argv[3]).unwrap_or(0.0) + delta;
    if new.is_nan() {
        ctx.drop_if_empty(key, false);
        return Err(CmdError::err(NAN_SCORE));
    }
    z.insert(own(&argv[3]), new);
    ctx.changed(event::ZSET, "zincr", key);
    Ok(Frame::Double(new))
}

fn zrem(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(z) = zset_mut(ctx, &argv[1])? else {
        return Ok(Frame::Integer(0));
    };
    let n = argv[2..].iter().filter(|m| z.remove(m).is_some()).count();
    if n > 0 {
        ctx.changed(event::ZSET, "zrem", &argv[1]);
        ctx.drop_if_empty(&argv[1], true);
    }
    Ok(Frame::Integer(n as i64))
}

fn zscore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let s = zset_ref(ctx, &argv[1])?.and_then(|z| z.score(&argv[2]));
    Ok(s.map_or(Frame::Null, Frame::Double))
}

fn zmscore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let z = zset_ref(ctx, &argv[1])?;
    Ok(Frame::Array(
        argv[2..]
            .iter()
            .map(|m| {
                z.and_then(|z| z.score(m))
                    .map_or(Frame::Null, Frame::Double)
            })
            .collect(),
    ))
}

fn zcard(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Integer(
        zset_ref(ctx, &argv[1])?.map_or(0, |z| z.len()) as i64,
    ))
}

fn rank_generic(ctx: &mut Ctx, argv: &[Bytes], rev: bool) -> CmdResult {
    let Some(z) = zset_ref(ctx, &argv[1])? else {
        return Ok(Frame::Null);
    };
    let len = z.len();
    Ok(z.rank(&argv[2]).map_or(Frame::Null, |r| {
        Frame::Integer(if rev { len - 1 - r } else { r } as i64)
    }))
}

fn zrank(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    rank_generic(ctx, argv, false)
}

fn zrevrank(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    rank_generic(ctx, argv, true)
}

/// A score interval (Redis's zrangespec).
#[derive(Clone, Copy)]
struct ScoreRange {
    min: f64,
    max: f64,
    minex: bool,
    maxex: bool,
}

fn parse_score_bound(b: &[u8]) -> Option<(f64, bool)> {
    match b.first() {
        Some(b'(') => strtod_whole(&b[1..]).map(|v| (v, true)),
        _ => strtod_whole(b).map(|v| (v, false)),
    }
}

/// Redis's `zslParseRange` test, `strtod` then `eptr[0] == '\0'`: leading white space is
/// skipped, and an empty bound is 0 (strtod converts nothing and stops at the end), so
/// `ZCOUNT z ( 10` counts (0, 10]; white space alone or after the number is refused.
fn strtod_whole(b: &[u8]) -> Option<f64> {
    if b.is_empty() {
        return Some(0.0);
    }
    let start = b
        .iter()
        .position(|c| !matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r'))?;
    parse_f64(&b[start..])
}

fn parse_score_range(min: &[u8], max: &[u8]) -> CmdResult<ScoreRange> {
    let err = || CmdError::err("ERR min or max is not a float");
    let (min, minex) = parse_score_bound(min).ok_or_else(err)?;
    let (max, maxex) = parse_score_bound(max).ok_or_else(err)?;
    Ok(ScoreRange {
        min,
        max,
        minex,
        maxex,
    })
}

impl ScoreRange {
    fn below_min(&self, s: f64) -> bool {
        if self.minex {
            s <= self.min
        } else {
            s < self.min
        }
    }

    fn within_max(&self, s: f64) -> bool {
        if self.maxex {
            s < self.max
        } else {
            s <= self.max
        }
    }

    fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.minex || self.maxex))
    }
}

/// A lexicographic bound: `-`, `+`, `[x` (inclusive) or `(x` (exclusive).
#[derive(Clone)]
enum Lex {
    Min,
    Max,
    Incl(Bytes),
    Excl(Bytes),
}

fn parse_lex(b: &Bytes) -> Option<Lex> {
    match b.first() {
        Some(b'-') if b.len() == 1 => Some(Lex::Min),
        Some(b'+') if b.len() == 1 => Some(Lex::Max),
        Some(b'[') => Some(Lex::Incl(b.slice(1..))),
        Some(b'(') => Some(Lex::Excl(b.slice(1..))),
        _ => None,
    }
}

struct LexRange {
    min: Lex,
    max: Lex,
}

fn parse_lex_range(min: &Bytes, max: &Bytes) -> CmdResult<LexRange> {
    match (parse_lex(min), parse_lex(max)) {
        (Some(min), Some(max)) => Ok(LexRange { min, max }),
        _ => Err(CmdError::err("ERR min or max not valid string range item")),
    }
}

impl LexRange {
    fn below_min(&self, m: &[u8]) -> bool {
        match &self.min {
            Lex::Min => false,
            Lex::Max => true,
            Lex::Incl(v) => m < &v[..],
            Lex::Excl(v) => m <= &v[..],
        }
    }

    fn within_max(&self, m: &[u8]) -> bool {
        match &self.max {
            Lex::Min => false,
            Lex::Max => true,
            Lex::Incl(v) => m <= &v[..],
            Lex::Excl(v) => m < &v[..],
        }
    }
}

enum RangeBy {
    Rank,
    Score,
    Lex,
}

/// Renders (member, score) pairs: flat in RESP2, [member, score] pairs in RESP3 with scores.
fn scored(items: Vec<(Bytes, f64)>, withscores: bool, resp3: bool) -> Frame {
    if !withscores {
        return Frame::Array(items.into_iter().map(|(m, _)| Frame::Bulk(m)).collect());
    }
    if resp3 {
        Frame::Array(
            items
                .into_iter()
                .map(|(m, s)| Frame::Array(vec![Frame::Bulk(m), Frame::Double(s)]))
                .collect(),
        )
    } else {
        let mut out = Vec::with_capacity(items.len() * 2);
        for (m, s) in items {
            out.push(Frame::Bulk(m));
            out.push(Frame::Double(s));
        }
        Frame::Array(out)
    }
}

/// Redis's zrangeGenericCommand: ZRANGE and its legacy forms. `opts` starts after min/max.
fn zrange_generic<'a>(
    ctx: &mut Ctx,
    key: &Bytes,
    min: &'a Bytes,
    max: &'a Bytes,
    opts: &[Bytes],
    by: Option<RangeBy>,
    rev: Option<bool>,
) -> CmdResult {
    let (items, withscores) = range_query(ctx, key, min, max, opts, by, rev, false)?;
    let resp3 = ctx.client.resp3();
    Ok(scored(items.unwrap_or_default(), withscores, resp3))
}

/// (member, score) pairs in reply order.
type Scored = Vec<(Bytes, f64)>;

/// Parses ZRANGE's options and runs the query: (None if the key is missing, WITHSCORES). With
/// `store` (ZRANGESTORE) WITHSCORES is not an option.
#[allow(clippy::too_many_arguments)]
fn range_query<'a>(
    ctx: &mut Ctx,
    key: &Bytes,
    mut min: &'a Bytes,
    mut max: &'a Bytes,
    opts: &[Bytes],
    mut by: Option<RangeBy>,
    mut rev: Option<bool>,
    store: bool,
) -> CmdResult<(Option<Scored>, bool)> {
    let mut withscores = false;
    let mut limit: Option<(i64, i64)> = None;
    let mut j = 0;
    while j < opts.len() {
        let a = &opts[j];
        let left = opts.len() - j - 1;
        if !store && is(a, "withscores") {
            withscores = true;
        } else if is(a, "limit") && left >= 2 {
            let offset = int_arg(&opts[j + 1])?;
            let count = int_arg(&opts[j + 2])?;
            limit = Some((offset, count));
            j += 2;
        } else if rev.is_none() && is(a, "rev") {
            rev = Some(true);
        } else if by.is_none() && is(a, "bylex") {
            by = Some(RangeBy::Lex);
        } else if by.is_none() && is(a, "byscore") {
            by = Some(RangeBy::Score);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    let by = by.unwrap_or(RangeBy::Rank);
    if limit.is_some() && matches!(by, RangeBy::Rank) {
        return Err(CmdError::err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && matches!(by, RangeBy::Lex) {
        return Err(CmdError::err(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    if rev && !matches!(by, RangeBy::Rank) {
        std::mem::swap(&mut min, &mut max);
    }
    let (offset, count) = limit.unwrap_or((0, -1));
    let items = match by {
        RangeBy::Rank => {
            let start = int_arg(min)?;
            let end = int_arg(max)?;
            zset_ref(ctx, key)?.map(|z| rank_range(z, start, end, rev))
        }
        RangeBy::Score => {
            let range = parse_score_range(min, max)?;
            zset_ref(ctx, key)?.map(|z| score_range(z, &range, rev, offset, count))
        }
        RangeBy::Lex => {
            let range = parse_lex_range(min, max)?;
            zset_ref(ctx, key)?.map(|z| lex_range(z, &range, rev, offset, count))
        }
    };
    Ok((items, withscores))
}

fn rank_range(z: &ZSet, start: i64, end: i64, rev: bool) -> Vec<(Bytes, f64)> {
    let Some((s, e)) = super::args::clamp_range(start, end, z.len()) else {
        return vec![];
    };
    let n = e - s + 1;
    if rev {
        z.iter_rev_from(z.len() - 1 - s)
            .take(n)
            .map(|(m, sc)| (m.clone(), sc))
            .collect()
    } else {
        z.iter_from(s)
            .take(n)
            .map(|(m, sc)| (m.clone(), sc))
            .collect()
    }
}

/// Applies LIMIT: a negative offset yields nothing, a negative count means all.
fn limited<'a>(
    it: impl Iterator<Item = (&'a Bytes, f64)>,
    offset: i64,
    count: i64,
) -> Vec<(Bytes, f64)> {
    if offset < 0 {
        return vec![];
    }
    let take = if count < 0 {
        usize::MAX
    } else {
        count as usize
    };
    it.skip(offset as usize)
        .take(take)
        .map(|(m, s)| (m.clone(), s))
        .collect()
}

fn score_range(z: &ZSet, r: &ScoreRange, rev: bool, offset: i64, count: i64) -> Vec<(Bytes, f64)> {
    if r.is_empty() {
        return vec![];
    }
    if rev {
        let end = z.count_before(|s, _| r.within_max(s));
        if end == 0 {
            return vec![];
        }
        limited(
            z.iter_rev_from(end - 1)
                .take_while(|(_, s)| !r.below_min(*s)),
            offset,
            count,
        )
    } else {
        let start = z.count_before(|s, _| r.below_min(s));
        limited(
            z.iter_from(start).take_while(|(_, s)| r.within_max(*s)),
            offset,
            count,
        )
    }
}

/// Whether Redis would hold this set as a listpack (zset-max-listpack-entries/-value
/// defaults). Lex ranges over members of different scores and ZSCAN answer by encoding.
fn listpack_like(z: &ZSet) -> bool {
    z.len() <= SMALL_ENTRIES && z.iter_from(0).all(|(m, _)| m.len() <= SMALL_VALUE)
}

fn lex_range(z: &ZSet, r: &LexRange, rev: bool, offset: i64, count: i64) -> Vec<(Bytes, f64)> {
    if listpack_like(z) {
        return listpack_lex_range(z, r, rev, offset, count);
    }
    if rev {
        let end = z.count_before(|_, m| r.within_max(m));
        if end == 0 {
            return vec![];
        }
        limited(
            z.iter_rev_from(end - 1)
                .take_while(|(m, _)| !r.below_min(m)),
            offset,
            count,
        )
    } else {
        let start = z.count_before(|_, m| r.below_min(m));
        limited(
            z.iter_from(start).take_while(|(m, _)| r.within_max(m)),
            offset,
            count,
        )
    }
}

/// A lex range the way Redis walks a listpack (zzlFirstInLexRange / zzlLastInLexRange and
/// genericZrangebylexCommand). Lex ranges are only meaningful when all scores are equal; when
/// they are not, Redis's answer for a small set is still this linear walk, which a bisection
/// would not reproduce: the first member at or past the start bound opens the range (or,
/// outside it, makes it empty), OFFSET skips members without looking at them, and the range
/// ends at the first member past the other bound.
fn listpack_lex_range(
    z: &ZSet,
    r: &LexRange,
    rev: bool,
    offset: i64,
    count: i64,
) -> Vec<(Bytes, f64)> {
    let len = z.len();
    let (Some((last, _)), Some((first, _))) = (z.at(len.wrapping_sub(1)), z.at(0)) else {
        return vec![];
    };
    // zzlIsInLexRange: the last member must reach the minimum, the first the maximum.
    if r.below_min(last) || !r.within_max(first) {
        return vec![];
    }
    let opens = |m: &[u8]| {
        if rev {
            r.within_max(m)
        } else {
            !r.below_min(m)
        }
    };
    let inside = |m: &[u8]| {
        if rev {
            !r.below_min(m)
        } else {
            r.within_max(m)
        }
    };
    let walk: Box<dyn Iterator<Item = (&Bytes, f64)>> = if rev {
        Box::new(z.iter_rev_from(len - 1))
    } else {
        Box::new(z.iter_from(0))
    };
    let mut walk = walk.skip_while(|(m, _)| !opens(m)).peekable();
    match walk.peek() {
        Some((m, _)) if inside(m) => {}
        _ => return vec![],
    }
    if offset < 0 {
        return vec![];
    }
    let take = if count < 0 {
        usize::MAX
    } else {
        count as usize
    };
    walk.skip(offset as usize)
        .take(take)
        .take_while(|(m, _)| inside(m))
        .map(|(m, s)| (m.clone(), s))
        .collect()
}

fn zrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zrange_generic(ctx, &argv[1], &argv[2], &argv[3], &argv[4..], None, None)
}

/// ZRANGEBYSCORE & co.: ZRANGE with the BY/REV choice fixed by the command name.
fn legacy_range(ctx: &mut Ctx, argv: &[Bytes], by: RangeBy, rev: bool) -> CmdResult {
    zrange_generic(
        ctx,
        &argv[1],
        &argv[2],
        &argv[3],
        &argv[4..],
        Some(by),
        Some(rev),
    )
}

fn zrangebyscore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    legacy_range(ctx, argv, RangeBy::Score, false)
}

fn zrevrangebyscore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    legacy_range(ctx, argv, RangeBy::Score, true)
}

fn zrangebylex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    legacy_range(ctx, argv, RangeBy::Lex, false)
}

fn zrevrangebylex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    legacy_range(ctx, argv, RangeBy::Lex, true)
}

fn zrevrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    legacy_range(ctx, argv, RangeBy::Rank, true)
}

fn zcount(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let r = parse_score_range(&argv[2], &argv[3])?;
    let Some(z) = zset_ref(ctx, &argv[1])? else {
        return Ok(Frame::Integer(0));
    };
    if r.is_empty() {
        return Ok(Frame::Integer(0));
    }
    let lo = z.count_before(|s, _| r.below_min(s));
    let hi = z.count_before(|s, _| r.within_max(s));
    Ok(Frame::Integer(hi.saturating_sub(lo) as i64))
}

fn remove_members(
    ctx: &mut Ctx,
    key: &Bytes,
    members: Vec<(Bytes, f64)>,
    ev: &'static str,
) -> CmdResult {
    let n = members.len();
    if n > 0 {
        if let Some(z) = zset_mut(ctx, key)? {
            for (m, _) in members {
                z.remove(&m);
            }
        }
        ctx.changed(event::ZSET, ev, key);
        ctx.drop_if_empty(key, true);
    }
    Ok(Frame::Integer(n as i64))
}

fn zremrangebyscore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let r = parse_score_range(&argv[2], &argv[3])?;
    let Some(z) = zset_ref(ctx, &argv[1])? else {
        return Ok(Frame::Integer(0));
    };
    let members = score_range(z, &r, false, 0, -1);
    remove_members(ctx, &argv[1], members, "zremrangebyscore")
}

fn zremrangebyrank(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let start = int_arg(&argv[2])?;
    let end = int_arg(&argv[3])?;
    let Some(z) = zset_ref(ctx, &argv[1])? else {
        return Ok(Frame::Integer(0));
    };
    let members = rank_range(z, start, end, false);
    remove_members(ctx, &argv[1], members, "zremrangebyrank")
}

/// Pops up to `count` lowest (or highest) members; emits the event and deletes an emptied key.
fn pop_members(ctx: &mut Ctx, key: &[u8], max: bool, count: usize) -> CmdResult<Vec<(Bytes, f64)>> {
    let Some(z) = zset_mut(ctx, key)? else {
        return Ok(vec![]);
    };
    let n = count.min(z.len());
    let items: Vec<(Bytes, f64)> = if max {
        z.iter_rev_from(z.len().saturating_sub(1))
            .take(n)
            .map(|(m, s)| (m.clone(), s))
            .collect()
    } else {
        z.iter_from(0)
            .take(n)
            .map(|(m, s)| (m.clone(), s))
            .collect()
    };
    for (m, _) in &items {
        z.remove(m);
    }
    if !items.is_empty() {
        ctx.changed(event::ZSET, if max { "zpopmax" } else { "zpopmin" }, key);
        ctx.drop_if_empty(key, true);
    }
    Ok(items)
}

fn zpop_generic(ctx: &mut Ctx, argv: &[Bytes], max: bool) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match argv.get(2) {
        None => None,
        Some(c) => match int_arg(c) {
            Ok(n) if n >= 0 => Some(n as usize),
            _ => return Err(CmdError::err("ERR value is out of range, must be positive")),
        },
    };
    let items = pop_members(ctx, &argv[1], max, count.unwrap_or(1))?;
    // Only a counted pop nests [member, score] pairs in RESP3.
    let nested = count.is_some() && ctx.client.resp3();
    Ok(scored(items, true, nested))
}

fn zpopmin(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zpop_generic(ctx, argv, false)
}

fn zpopmax(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    zpop_generic(ctx, argv, true)
}

/// Whether `key` holds a non-empty sorted set. `served`: a blocked pop run again because a key
/// it waits on got data; a key of another type is then passed over instead of failing the
/// waiter with WRONGTYPE (the same rule as list.rs's `ready`).
fn ready(ctx: &mut Ctx, key: &[u8], served: bool) -> CmdResult<bool> {
    match zset_ref(ctx, key) {
        Ok(z) => Ok(z.is_some_and(|z| !z.is_empty())),
        Err(_) if served => Ok(false),
        Err(e) => Err(e),
    }
}

fn bzpop_generic(ctx: &mut Ctx, argv: &[Bytes], max: bool) -> CmdResult {
    let keys = &argv[1..argv.len() - 1];
    let timeout = parse_timeout(&argv[argv.len() - 1], ctx.now)?;
    // Served again after a key got data: other keys' types are not looked at (see zmpop_from).
    let served = ctx.client.block_deadline.is_some();
    for key in blocking::serve_order(ctx, keys) {
        if ready(ctx, key, served)? {
            if let Some((m, s)) = pop_members(ctx, key, max, 1)?.into_iter().next() {
                return Ok(Frame::Array(vec![
                    Frame::Bulk(key.clone()),
                    Frame::Bulk(m),
                    Frame::Double(s),
                ]));
            }
        }
    }
    if !blocking::may_block(ctx) {
        return Ok(Frame::NullArray);
    }
    blocking::block(ctx, keys, timeout, WaitKind::ZSet, argv)
}

fn bzpopmin(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    bzpop_generic(ctx, argv, false)
}

fn bzpopmax(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    bzpop_generic(ctx, argv, true)
}

fn zlexcount(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let r = parse_lex_range(&argv[2], &argv[3])?;
    let Some(z) = zset_ref(ctx, &argv[1])? else {
        return Ok(Frame::Integer(0));
    };
    if listpack_like(z) {
        return Ok(Frame::Integer(
            listpack_lex_range(z, &r, false, 0, -1).len() as i64,
        ));
    }
    let lo = z.count_before(|_, m| r.below_min(m));
    let hi = z.count_before(|_, m| r.within_max(m));
    Ok(Frame::Integer(hi.saturating_sub(lo) as i64))
}

fn zremrangebylex(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let r = parse_lex_range(&argv[2], &argv[3])?;
    let Some(z) = zset_ref(ctx, &argv[1])? else {
        return Ok(Frame::Integer(0));
    };
    let members = lex_range(z, &r, false, 0, -1);
    remove_members(ctx, &argv[1], members, "zremrangebylex")
}

fn zrandmember(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let args = random_count_args(argv, "withscores")?;
    let resp3 = ctx.client.resp3();
    let Some(z) = zset_ref(ctx, &argv[1])? else {
        return Ok(match args {
            None => Frame::Null,
            Some(_) => Frame::Array(vec![]),
        });
    };
    let Some((count, with)) = args else {
        let m = z
            .at(fastrand::usize(..z.len().max(1)))
            .map(|(m, _)| m.clone());
        return Ok(Frame::opt_bulk(m));
    };
    let len = z.len();
    let picks: Box<dyn Iterator<Item = usize>> = if count >= len as i64 {
        // The whole set, as Redis's zset iterator walks it: from the highest rank down.
        Box::new((0..len).rev())
    } else {
        random_positions(len, count)
    };
    let items = picks
        .filter_map(|i| z.at(i))
        .map(|(m, s)| (Frame::Bulk(m.clone()), Frame::Double(s)))
        .collect();
    Ok(paired(items, with, resp3))
}

/// Redis's zset-max-listpack-entries / zset-max-listpack-value defaults: a set within both is
/// what Redis keeps as one listpack, which ZSCAN returns whole, in order, in one call.
const SMALL_ENTRIES: usize = 128;
const SMALL_VALUE: usize = 64;

/// A score as ZSCAN shows it: from a listpack (`small`), as Redis stored it there (d2string:
/// integral values as integers); from a skiplist, printed with %.17Lg.
fn score_text(s: f64, small: bool) -> String {
    if small && s.fract() == 0.0 && s.abs() < 9.2e18 {
        (s as i64).to_string()
    } else {
        crate::protocol::number::fmt_g17(s)
    }
}

fn zscan(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let cursor = super::support::parse_cursor(&argv[2])?;
    // Redis's order: cursor, then the key (an empty scan, WRONGTYPE), then the options.
    let Some(z) = zset_ref(ctx, &argv[1])? else {
        return Ok(Frame::Array(vec![
            Frame::bulk_static("0"),
            Frame::Array(vec![]),
        ]));
    };
    let o = super::support::parse_scan_opts(&argv[3..], false)?;
    let matches = |m: &[u8]| {
        o.pattern
            .is_none_or(|p| super::args::glob_match(p, m, false))
    };
    let small = listpack_like(z);
    let mut items = Vec::new();
    let mut push = |m: &Bytes, s: f64| {
        if matches(m) {
            items.push(Frame::Bulk(m.clone()));
            items.push(Frame::Bulk(Bytes::from(score_text(s, small))));
        }
    };
    let next = if small {
        z.iter_from(0).for_each(|(m, s)| push(m, s));
        0
    } else {
        // A downward walk over arena slots: a member keeps its slot while it lives, so one
        // present for the whole scan is returned (see ZSet::slot).
        let mut next = if cursor == 0 {
            z.slots()
        } else {
            (cursor.min(z.slots() as u64)) as usize
        };
        // Free slots count too, up to ten times COUNT (Redis's maxiterations for sparse
        // tables): a set that shrank a lot answers short pages instead of one long walk.
        let (mut seen, mut steps) = (0, 0usize);
        let max_steps = o.count.saturating_mul(10);
        while next > 0 && seen < o.count && steps < max_steps {
            next -= 1;
            steps += 1;
            if let Some((m, s)) = z.slot(next) {
                push(m, s);
                seen += 1;
            }
        }
        next
    };
    let mut b = itoa::Buffer::new();
    Ok(Frame::Array(vec![
        Frame::Bulk(Bytes::copy_from_slice(b.format(next).as_bytes())),
        Frame::Array(items),
    ]))
}

fn zrangestore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (items, _) = range_query(
        ctx,
        &argv[2],
        &argv[3],
        &argv[4],
        &argv[5..],
        None,
        None,
        true,
    )?;
    let mut z = ZSet::new();
    for (m, s) in items.unwrap_or_default() {
        z.insert(m, s);
    }
    store_result(ctx, &argv[1], z, "zrangestore")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Redis's zunionInterAggregate.
    fn apply(self, target: &mut f64, val: f64) {
        match self {
            Aggregate::Sum => {
                *target += val;
                // The sum of +inf and -inf is defined as zero.
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if val < *target {
                    *target = val;
                }
            }
            Aggregate::Max => {
                if val > *target {
                    *target = val;
                }
            }
        }
    }
}

/// An input of ZUNION & co.: a sorted set, a plain set (every member scores 1), or nothing.
enum Src<'a> {
    Missing,
    Z(&'a ZSet),
    S(&'a crate::store::value::SetValue),
}

impl Src<'_> {
    fn len(&self) -> usize {
        match self {
            Src::Missing => 0,
            Src::Z(z) => z.len(),
            Src::S(s) => s.len(),
        }
    }

    fn iter(&self) -> Box<dyn Iterator<Item = (&Bytes, f64)> + '_> {
        match self {
            Src::Missing => Box::new(std::iter::empty()),
            Src::Z(z) => Box::new(z.iter_from(0)),
            Src::S(s) => Box::new(s.iter().map(|m| (m, 1.0))),
        }
    }

    fn find(&self, m: &[u8]) -> Option<f64> {
        match self {
            Src::Missing => None,
            Src::Z(z) => z.score(m),
            Src::S(s) => s.contains(m).then_some(1.0),
        }
    }
}

/// Redis's zunionInterDiffGenericCommand: ZUNION ZINTER ZDIFF, their STORE forms and
/// ZINTERCARD. `at` is the numkeys argument.
fn set_op(
    ctx: &mut Ctx,
    name: &str,
    argv: &[Bytes],
    dest: Option<&Bytes>,
    at: usize,
    op: SetOp,
    card_only: bool,
) -> CmdResult {
    let setnum = int_arg(&argv[at])?;
    if setnum < 1 {
        return Err(CmdError::erf(format!(
            "at least 1 input key is needed for '{name}' command"
        )));
    }
    if setnum as u64 > (argv.len() - at - 1) as u64 {
        return Err(CmdError::Syntax);
    }
    let setnum = setnum as usize;
    let keys = &argv[at + 1..at + 1 + setnum];
    // Types are checked (and expired keys dropped) before the options are parsed, as in Redis.
    let now = ctx.now;
    for k in keys {
        match ctx.db().get(k, now).map(|e| &e.value) {
            None | Some(Value::ZSet(_)) | Some(Value::Set(_)) => {}
            Some(_) => return Err(CmdError::WrongType),
        }
    }
    let mut weights = vec![1.0f64; setnum];
    let mut aggregate = Aggregate::Sum;
    let mut withscores = false;
    let mut limit: u64 = 0;
    let mut j = at + 1 + setnum;
    while j < argv.len() {
        let remaining = argv.len() - j;
        let a = &argv[j];
        if op != SetOp::Diff && !card_only && remaining > setnum && is(a, "weights") {
            j += 1;
            for w in weights.iter_mut() {
                *w = parse_f64(&argv[j])
                    .ok_or_else(|| CmdError::err("ERR weight value is not a float"))?;
                j += 1;
            }
        } else if op != SetOp::Diff && !card_only && remaining >= 2 && is(a, "aggregate") {
            let v = &argv[j + 1];
            aggregate = if is(v, "sum") {
                Aggregate::Sum
            } else if is(v, "min") {
                Aggregate::Min
            } else if is(v, "max") {
                Aggregate::Max
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if dest.is_none() && !card_only && is(a, "withscores") {
            withscores = true;
            j += 1;
        } else if card_only && remaining >= 2 && is(a, "limit") {
            limit = match int_arg(&argv[j + 1]) {
                Ok(n) if n >= 0 => n as u64,
                _ => return Err(CmdError::err("ERR LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let db: &crate::store::Db = ctx.db();
    let mut srcs: Vec<(Src, f64)> = keys
        .iter()
        .zip(&weights)
        .map(|(k, &w)| {
            let s = match db.peek(k).map(|e| &e.value) {
                Some(Value::ZSet(z)) => Src::Z(z),
                Some(Value::Set(s)) => Src::S(s),
                _ => Src::Missing,
            };
            (s, w)
        })
        .collect();
    if op != SetOp::Diff {
        // Smallest first, as Redis orders them.
        srcs.sort_by_key(|(s, _)| s.len());
    }
    // Collected unordered: a stored result is a ZSet, a replied one is sorted as it is (a
    // weight can make a -0 score, which Redis replies as such and stores as 0).
    let mut out: Scored = Vec::new();
    let mut cardinality: u64 = 0;
    match op {
        SetOp::Inter => {
            let (first, w0) = &srcs[0];
            for (m, s) in first.iter() {
                let mut score = w0 * s;
                if score.is_nan() {
                    score = 0.0;
                }
                let mut all = true;
                for (src, w) in &srcs[1..] {
                    match src.find(m) {
                        Some(v) => aggregate.apply(&mut score, v * w),
                        None => {
                            all = false;
                            break;
                        }
                    }
                }
                if !all {
                    continue;
                }
                if card_only {
                    cardinality += 1;
                    if limit > 0 && cardinality >= limit {
                        break;
                    }
                } else {
                    out.push((m.clone(), score));
                }
            }
        }
        SetOp::Union => {
            let mut acc: crate::store::FastMap<Bytes, f64> = Default::default();
            for (src, w) in &srcs {
                for (m, s) in src.iter() {
                    let mut score = w * s;
                    if score.is_nan() {
                        score = 0.0;
                    }
                    match acc.get_mut(m) {
                        Some(t) => aggregate.apply(t, score),
                        None => {
                            acc.insert(m.clone(), score);
                        }
                    }
                }
            }
            out.extend(acc);
        }
        SetOp::Diff => {
            let (first, _) = &srcs[0];
            for (m, s) in first.iter() {
                if srcs[1..].iter().all(|(o, _)| o.find(m).is_none()) {
                    out.push((m.clone(), s));
                }
            }
        }
    }
    if let Some(dest) = dest {
        let ev = match op {
            SetOp::Union => "zunionstore",
            SetOp::Inter => "zinterstore",
            SetOp::Diff => "zdiffstore",
        };
        let mut z = ZSet::new();
        for (m, s) in out {
            z.insert(m, s);
        }
        return store_result(ctx, dest, z, ev);
    }
    if card_only {
        return Ok(Frame::Integer(cardinality as i64));
    }
    // Members are distinct and no score is NaN (the aggregates turn NaN into 0 or skip it).
    out.sort_unstable_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
    Ok(scored(out, withscores, ctx.client.resp3()))
}

fn zunion(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    set_op(ctx, "zunion", argv, None, 1, SetOp::Union, false)
}

fn zinter(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    set_op(ctx, "zinter", argv, None, 1, SetOp::Inter, false)
}

fn zdiff(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    set_op(ctx, "zdiff", argv, None, 1, SetOp::Diff, false)
}

fn zintercard(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    set_op(ctx, "zintercard", argv, None, 1, SetOp::Inter, true)
}

fn zunionstore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    set_op(
        ctx,
        "zunionstore",
        argv,
        Some(&argv[1]),
        2,
        SetOp::Union,
        false,
    )
}

fn zinterstore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    set_op(
        ctx,
        "zinterstore",
        argv,
        Some(&argv[1]),
        2,
        SetOp::Inter,
        false,
    )
}

fn zdiffstore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    set_op(
        ctx,
        "zdiffstore",
        argv,
        Some(&argv[1]),
        2,
        SetOp::Diff,
        false,
    )
}

/// Parses ZMPOP/BZMPOP's `numkeys key... MIN|MAX [COUNT n]` from `argv[at]`: (keys, max, count).
fn parse_zmpop(argv: &[Bytes], at: usize) -> CmdResult<(&[Bytes], bool, usize)> {
    super::support::parse_mpop(argv, at, |a| {
        if is(a, "min") {
            Some(false)
        } else if is(a, "max") {
            Some(true)
        } else {
            None
        }
    })
}

/// Pops from the first existing key (which must be a sorted set): `[key, [[member, score]...]]`.
/// `served`: a BZMPOP run again because a key it waits on got data. Redis then pops from that
/// key without looking at the others again, so a key that became another type meanwhile is
/// passed over instead of failing the waiter with WRONGTYPE.
fn zmpop_from(
    ctx: &mut Ctx,
    keys: &[Bytes],
    max: bool,
    count: usize,
    served: bool,
) -> CmdResult<Option<Frame>> {
    for key in blocking::serve_order(ctx, keys) {
        if !ready(ctx, key, served)? {
            continue;
        }
        let items = pop_members(ctx, key, max, count)?;
        return Ok(Some(Frame::Array(vec![
            Frame::Bulk(key.clone()),
            scored(items, true, true),
        ])));
    }
    Ok(None)
}

fn zmpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (keys, max, count) = parse_zmpop(argv, 1)?;
    Ok(zmpop_from(ctx, keys, max, count, false)?.unwrap_or(Frame::NullArray))
}

fn bzmpop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (keys, max, count) = parse_zmpop(argv, 2)?;
    let timeout = parse_timeout(&argv[1], ctx.now)?;
    let served = ctx.client.block_deadline.is_some();
    if let Some(f) = zmpop_from(ctx, keys, max, count, served)? {
        return Ok(f);
    }
    if !blocking::may_block(ctx) {
        return Ok(Frame::NullArray);
    }
    blocking::block(ctx, keys, timeout, WaitKind::ZSet, argv)
}

/// Redis 7.0's command tips for the sorted-set commands.
pub static TIPS: &[(&str, &[&str])] = &[
    ("zrandmember", &["nondeterministic_output"]),
    ("zscan", &["nondeterministic_output"]),
];
