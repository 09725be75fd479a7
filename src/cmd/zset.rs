//! Sorted sets (Redisson's fair lock keeps its waiters' timeouts in one). The structure is in
//! store/zset.rs; here are the commands with Redis 7.0's parsing order, errors and reply shapes
//! (RESP3 returns scores as doubles and WITHSCORES / counted pops as [member, score] pairs).

use super::args::{int_arg, is};
use super::table::{flags::*, CommandSpec, KeySpec, KEY1};
use super::{event, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::exec::blocking::{self, parse_timeout};
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
    handler: super::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, keys, &["sortedset"], handler)
}

const KEYS_BEFORE_TIMEOUT: KeySpec = KeySpec {
    first: 1,
    last: -2,
    step: 1,
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

fn zset_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a mut ZSet>> {
    ctx.value_mut(key, Value::as_zset_mut)
}

fn zset_ref<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a ZSet>> {
    Ok(zset_mut(ctx, key)?.map(|z| &*z))
}

fn score_arg(b: &[u8]) -> CmdResult<f64> {
    parse_f64(b).ok_or(CmdError::NotFloat)
}

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
        .map(|p| score_arg(&p[0]))
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
    let delta = score_arg(&argv[2])?;
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
    mut min: &'a Bytes,
    mut max: &'a Bytes,
    opts: &[Bytes],
    mut by: Option<RangeBy>,
    mut rev: Option<bool>,
) -> CmdResult {
    let mut withscores = false;
    let mut limit: Option<(i64, i64)> = None;
    let mut j = 0;
    while j < opts.len() {
        let a = &opts[j];
        let left = opts.len() - j - 1;
        if is(a, "withscores") {
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
    let resp3 = ctx.client.resp3();
    match by {
        RangeBy::Rank => {
            let start = int_arg(min)?;
            let end = int_arg(max)?;
            let Some(z) = zset_ref(ctx, key)? else {
                return Ok(Frame::Array(vec![]));
            };
            Ok(scored(rank_range(z, start, end, rev), withscores, resp3))
        }
        RangeBy::Score => {
            let range = parse_score_range(min, max)?;
            let Some(z) = zset_ref(ctx, key)? else {
                return Ok(Frame::Array(vec![]));
            };
            let items = score_range(z, &range, rev, offset, count);
            Ok(scored(items, withscores, resp3))
        }
        RangeBy::Lex => {
            let range = parse_lex_range(min, max)?;
            let Some(z) = zset_ref(ctx, key)? else {
                return Ok(Frame::Array(vec![]));
            };
            let items = lex_range(z, &range, rev, offset, count);
            Ok(scored(items, false, resp3))
        }
    }
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

fn lex_range(z: &ZSet, r: &LexRange, rev: bool, offset: i64, count: i64) -> Vec<(Bytes, f64)> {
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

fn bzpop_generic(ctx: &mut Ctx, argv: &[Bytes], max: bool) -> CmdResult {
    let keys = &argv[1..argv.len() - 1];
    let timeout = parse_timeout(&argv[argv.len() - 1], ctx.now)?;
    for key in keys {
        if zset_ref(ctx, key)?.is_some_and(|z| !z.is_empty()) {
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
