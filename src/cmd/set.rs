//! Sets (basic): SADD, SREM, SISMEMBER, SMISMEMBER, SMEMBERS, SCARD, SPOP, SRANDMEMBER, SSCAN.

use super::args::{glob_match, int_arg};
use super::keys::{parse_cursor, parse_scan_opts};
use super::table::{flags::*, CommandSpec, KEY1};
use super::{event, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::protocol::number::parse_i64;
use crate::protocol::Frame;
use crate::store::value::{own, SetValue};
use crate::store::Value;
use bytes::Bytes;

/// Redis keeps all-integer sets up to this size as a sorted intset (set-max-intset-entries).
const INTSET_MAX_ENTRIES: usize = 512;

/// Largest negative SRANDMEMBER count answered (a reply of this many elements is ~1 GB).
const MAX_RANDOM_REPEATS: usize = 64 << 20;

const fn spec(name: &'static str, arity: i32, flags: u32, handler: super::Handler) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, KEY1, &["set"], handler)
}

pub static COMMANDS: &[CommandSpec] = &[
    spec("sadd", -3, WRITE | DENYOOM | FAST, sadd),
    spec("srem", -3, WRITE | FAST, srem),
    spec("sismember", 3, READONLY | FAST, sismember),
    spec("smismember", -3, READONLY | FAST, smismember),
    spec("smembers", 2, READONLY, smembers),
    spec("scard", 2, READONLY | FAST, scard),
    spec("spop", -2, WRITE | FAST, spop),
    spec("srandmember", -2, READONLY, srandmember),
    spec("sscan", -3, READONLY, sscan),
];

fn set_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a mut SetValue>> {
    ctx.value_mut(key, Value::as_set_mut)
}

fn set_ref<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a SetValue>> {
    Ok(set_mut(ctx, key)?.map(|s| &*s))
}

/// Members in the order Redis shows them where that order is defined: a small all-integer set
/// is an intset, sorted numerically. Other sets are hash tables with no promised order.
fn ordered(s: &SetValue) -> Vec<Bytes> {
    if s.len() <= INTSET_MAX_ENTRIES {
        let ints: Option<Vec<(i64, &Bytes)>> =
            s.iter().map(|m| parse_i64(m).map(|i| (i, m))).collect();
        if let Some(mut ints) = ints {
            ints.sort_unstable_by_key(|(i, _)| *i);
            return ints.into_iter().map(|(_, m)| m.clone()).collect();
        }
    }
    s.iter().cloned().collect()
}

fn sadd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let now = ctx.now;
    if set_ref(ctx, key)?.is_none() {
        ctx.db().set(key, Value::Set(Box::default()), 0);
    }
    let Some(Value::Set(s)) = ctx.db().get_mut(key, now).map(|e| &mut e.value) else {
        return Err(CmdError::WrongType);
    };
    let mut added = 0;
    for m in &argv[2..] {
        if !s.contains(&m[..]) {
            s.insert(own(m));
            added += 1;
        }
    }
    if added > 0 {
        ctx.changed(event::SET, "sadd", key);
    }
    Ok(Frame::Integer(added))
}

fn srem(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(s) = set_mut(ctx, &argv[1])? else {
        return Ok(Frame::Integer(0));
    };
    let n = argv[2..].iter().filter(|m| s.swap_remove(&m[..])).count();
    if n > 0 {
        ctx.changed(event::SET, "srem", &argv[1]);
        ctx.drop_if_empty(&argv[1], true);
    }
    Ok(Frame::Integer(n as i64))
}

fn sismember(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let found = set_ref(ctx, &argv[1])?.is_some_and(|s| s.contains(&argv[2][..]));
    Ok(Frame::Integer(found as i64))
}

fn smismember(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let s = set_ref(ctx, &argv[1])?;
    Ok(Frame::Array(
        argv[2..]
            .iter()
            .map(|m| Frame::Integer(s.is_some_and(|s| s.contains(&m[..])) as i64))
            .collect(),
    ))
}

fn smembers(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let items = set_ref(ctx, &argv[1])?.map(ordered).unwrap_or_default();
    Ok(Frame::Set(items.into_iter().map(Frame::Bulk).collect()))
}

fn scard(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Integer(
        set_ref(ctx, &argv[1])?.map_or(0, |s| s.len()) as i64,
    ))
}

fn spop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
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
    let Some(s) = set_mut(ctx, &argv[1])? else {
        return Ok(match count {
            None => Frame::Null,
            Some(_) => Frame::Set(vec![]),
        });
    };
    let n = count.unwrap_or(1).min(s.len());
    let mut popped = Vec::with_capacity(n);
    if count.is_some() && n == s.len() {
        // The whole set goes, in the order SMEMBERS shows it (what Redis replies).
        popped = ordered(s);
        s.clear();
    }
    while popped.len() < n {
        let i = fastrand::usize(..s.len());
        if let Some(m) = s.swap_remove_index(i) {
            popped.push(m);
        }
    }
    if !popped.is_empty() {
        ctx.changed(event::SET, "spop", &argv[1]);
        ctx.drop_if_empty(&argv[1], true);
    }
    Ok(match count {
        None => Frame::opt_bulk(popped.pop()),
        Some(_) => Frame::Set(popped.into_iter().map(Frame::Bulk).collect()),
    })
}

fn srandmember(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match argv.get(2) {
        None => None,
        Some(c) => {
            let n = int_arg(c)?;
            if n == i64::MIN {
                return Err(CmdError::err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"));
            }
            Some(n)
        }
    };
    let Some(s) = set_ref(ctx, &argv[1])? else {
        return Ok(match count {
            None => Frame::Null,
            Some(_) => Frame::Array(vec![]),
        });
    };
    let Some(count) = count else {
        let i = fastrand::usize(..s.len().max(1));
        return Ok(Frame::opt_bulk(s.get_index(i).cloned()));
    };
    let len = s.len();
    if count < 0 {
        // Repeats allowed: exactly |count| picks. Redis would build any size of reply; we refuse
        // counts whose reply could not fit in memory instead of aborting the process.
        let n = count.unsigned_abs() as usize;
        if n > MAX_RANDOM_REPEATS {
            return Err(CmdError::err("ERR value is out of range"));
        }
        let mut out = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            if let Some(m) = s.get_index(fastrand::usize(..len)) {
                out.push(Frame::Bulk(m.clone()));
            }
        }
        return Ok(Frame::Array(out));
    }
    let n = (count as usize).min(len);
    if n == len {
        return Ok(Frame::Array(
            ordered(s).into_iter().map(Frame::Bulk).collect(),
        ));
    }
    // Distinct picks: a partial Fisher-Yates over the indices.
    let mut idx: Vec<usize> = (0..len).collect();
    for i in 0..n {
        let j = fastrand::usize(i..len);
        idx.swap(i, j);
    }
    Ok(Frame::Array(
        idx[..n]
            .iter()
            .filter_map(|&i| s.get_index(i).map(|m| Frame::Bulk(m.clone())))
            .collect(),
    ))
}

fn sscan(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let cursor = parse_cursor(&argv[2])?;
    let o = parse_scan_opts(&argv[3..], false)?;
    let Some(s) = set_ref(ctx, &argv[1])? else {
        return Ok(Frame::Array(vec![
            Frame::bulk_static("0"),
            Frame::Array(vec![]),
        ]));
    };
    let matches = |m: &[u8]| o.pattern.is_none_or(|p| glob_match(p, m, false));
    let mut items = Vec::new();
    let next = if s.len() <= INTSET_MAX_ENTRIES && s.iter().all(|m| parse_i64(m).is_some()) {
        // An intset is returned whole in one call, like Redis does for compact encodings.
        for m in ordered(s).into_iter().filter(|m| matches(m)) {
            items.push(Frame::Bulk(m));
        }
        0
    } else {
        // Downward index walk: see store/keyspace.rs for why this never misses a member.
        let mut next = if cursor == 0 {
            s.len()
        } else {
            (cursor as usize).min(s.len())
        };
        let mut seen = 0;
        while next > 0 && seen < o.count {
            next -= 1;
            if let Some(m) = s.get_index(next) {
                if matches(m) {
                    items.push(Frame::Bulk(m.clone()));
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
