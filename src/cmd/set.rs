//! Sets: SADD, SREM, SISMEMBER, SMISMEMBER, SMEMBERS, SCARD, SPOP, SRANDMEMBER, SSCAN, SMOVE,
//! and the algebra of t_set.c: SINTER SINTERCARD SINTERSTORE SUNION SUNIONSTORE SDIFF SDIFFSTORE.

use super::args::{glob_match, int_arg, is};
use super::spec::{event, Ctx};
use super::spec::{flags::*, CommandSpec, KeySpec, KeySpecDoc, ALL_KEYS, KEY1, NO_KEYS};
use super::support::{ordered, shown, INTSET_MAX_ENTRIES};
use super::support::{parse_cursor, parse_scan_opts};
use crate::error::{CmdError, CmdResult};
use crate::protocol::number::parse_i64;
use crate::protocol::Frame;
use crate::store::value::{own, SetValue};
use crate::store::Value;
use bytes::Bytes;

use super::args::MAX_RANDOM_REPEATS;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: super::spec::Handler,
) -> CommandSpec {
    keyed(name, arity, flags, KEY1, handler)
}

const fn keyed(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, keys, &["set"], handler)
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
    keyed(
        "smove",
        4,
        WRITE | FAST,
        KeySpec {
            first: 1,
            last: 2,
            step: 1,
        },
        smove,
    ),
    keyed("sinter", -2, READONLY, ALL_KEYS, sinter),
    keyed(
        "sintercard",
        -3,
        READONLY | MOVABLE_KEYS,
        NO_KEYS,
        sintercard,
    ),
    keyed("sinterstore", -3, WRITE | DENYOOM, ALL_KEYS, sinterstore),
    keyed("sunion", -2, READONLY, ALL_KEYS, sunion),
    keyed("sunionstore", -3, WRITE | DENYOOM, ALL_KEYS, sunionstore),
    keyed("sdiff", -2, READONLY, ALL_KEYS, sdiff),
    keyed("sdiffstore", -3, WRITE | DENYOOM, ALL_KEYS, sdiffstore),
];

const RO_ACCESS: &[&str] = &["RO", "access"];
const RO_ONLY: &[&str] = &["RO"];
const RW_DELETE_ACCESS: &[&str] = &["RW", "access", "delete"];
const ALL_RO: &[KeySpecDoc] = &[KeySpecDoc::range(RO_ACCESS, 1, -1)];
const ONE_RO: &[KeySpecDoc] = &[KeySpecDoc::range(RO_ACCESS, 1, 0)];
const STORE_OW: &[KeySpecDoc] = &[
    KeySpecDoc::range(&["OW", "update"], 1, 0),
    KeySpecDoc::range(RO_ACCESS, 2, -1),
];

/// Redis 7.0's key specifications for the set commands, as COMMAND INFO prints them.
pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    ("sadd", &[KeySpecDoc::range(&["RW", "insert"], 1, 0)]),
    ("srem", &[KeySpecDoc::range(&["RW", "delete"], 1, 0)]),
    ("sismember", &[KeySpecDoc::range(RO_ONLY, 1, 0)]),
    ("smismember", ONE_RO),
    ("smembers", ONE_RO),
    ("scard", &[KeySpecDoc::range(RO_ONLY, 1, 0)]),
    ("spop", &[KeySpecDoc::range(RW_DELETE_ACCESS, 1, 0)]),
    ("srandmember", ONE_RO),
    ("sscan", ONE_RO),
    (
        "smove",
        &[
            KeySpecDoc::range(RW_DELETE_ACCESS, 1, 0),
            KeySpecDoc::range(&["RW", "insert"], 2, 0),
        ],
    ),
    ("sinter", ALL_RO),
    ("sintercard", &[KeySpecDoc::keynum(RO_ACCESS, 1, 0, 1, 1)]),
    (
        "sinterstore",
        &[
            KeySpecDoc::range(&["RW", "update"], 1, 0),
            KeySpecDoc::range(RO_ACCESS, 2, -1),
        ],
    ),
    ("sunion", ALL_RO),
    ("sunionstore", STORE_OW),
    ("sdiff", ALL_RO),
    ("sdiffstore", STORE_OW),
];

/// Redis 7.0's command tips for the set commands.
pub static TIPS: &[(&str, &[&str])] = &[
    ("smembers", &["nondeterministic_output_order"]),
    ("spop", &["nondeterministic_output"]),
    ("srandmember", &["nondeterministic_output"]),
    ("sscan", &["nondeterministic_output"]),
    ("sinter", &["nondeterministic_output_order"]),
    ("sunion", &["nondeterministic_output_order"]),
    ("sdiff", &["nondeterministic_output_order"]),
];

fn set_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a mut SetValue>> {
    ctx.value_mut(key, Value::as_set_mut)
}

fn set_ref<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a SetValue>> {
    Ok(set_mut(ctx, key)?.map(|s| &*s))
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
    // Redis's order: cursor, then the key (an empty scan, WRONGTYPE), then the options.
    let Some(s) = set_ref(ctx, &argv[1])? else {
        return Ok(Frame::Array(vec![
            Frame::bulk_static("0"),
            Frame::Array(vec![]),
        ]));
    };
    let o = parse_scan_opts(&argv[3..], false)?;
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

/// The sets at `keys`, in argument order, None for a missing key. Every key is type-checked
/// before any work, as Redis does: a WRONGTYPE anywhere wins over a missing key earlier.
fn load_sets<'a>(ctx: &'a mut Ctx, keys: &[Bytes]) -> CmdResult<Vec<Option<&'a SetValue>>> {
    let mut live = Vec::with_capacity(keys.len().min(1024));
    for k in keys {
        // Expires the key if due, so the peek below sees only live entries.
        live.push(set_ref(ctx, k)?.is_some());
    }
    let db: &'a crate::store::Db = ctx.db();
    Ok(keys
        .iter()
        .zip(live)
        .map(|(k, live)| match db.peek(k).map(|e| &e.value) {
            Some(Value::Set(s)) if live => Some(&**s),
            _ => None,
        })
        .collect())
}

/// Members of every set, visiting the smallest set first (sinterGenericCommand). With a
/// `limit` > 0, stops after that many members.
fn intersect(sets: &[Option<&SetValue>], limit: usize) -> Vec<Bytes> {
    let Some(mut sets) = sets.iter().copied().collect::<Option<Vec<&SetValue>>>() else {
        return Vec::new();
    };
    sets.sort_by_key(|s| s.len());
    let Some((first, rest)) = sets.split_first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for m in first.iter() {
        if rest
            .iter()
            .all(|s| std::ptr::eq(*s, *first) || s.contains(m))
        {
            out.push(m.clone());
            if limit > 0 && out.len() >= limit {
                break;
            }
        }
    }
    out
}

fn union(sets: &[Option<&SetValue>]) -> SetValue {
    let mut out = SetValue::default();
    for s in sets.iter().flatten() {
        out.extend(s.iter().cloned());
    }
    out
}

/// The first set minus all the others, with Redis's choice between walking the first set
/// (work ~ |first| x sets) and copying then removing (work ~ all members).
fn difference(sets: &[Option<&SetValue>]) -> SetValue {
    let mut out = SetValue::default();
    let Some((Some(first), rest)) = sets.split_first() else {
        return out;
    };
    let mut others: Vec<&SetValue> = rest.iter().flatten().copied().collect();
    if others.iter().any(|s| std::ptr::eq(*s, *first)) {
        return out;
    }
    let walk_first = (others.len() + 1) * first.len() / 2;
    let walk_all = first.len() + others.iter().map(|s| s.len()).sum::<usize>();
    if walk_first <= walk_all {
        // Largest first: a member is most likely to be found early.
        others.sort_by_key(|s| std::cmp::Reverse(s.len()));
        out.extend(
            first
                .iter()
                .filter(|m| !others.iter().any(|s| s.contains(*m)))
                .cloned(),
        );
    } else {
        out.extend(first.iter().cloned());
        for s in others {
            if out.is_empty() {
                break;
            }
            for m in s.iter() {
                out.swap_remove(m);
            }
        }
    }
    out
}

/// The STORE variants' ending: `dest` gets the result (replacing any value and TTL) with
/// `event`, or is deleted (`del`) when the result is empty.
fn store_result(ctx: &mut Ctx, dest: &[u8], result: SetValue, event: &'static str) -> CmdResult {
    let n = result.len();
    if n == 0 {
        super::support::delete_dest(ctx, dest);
        return Ok(Frame::Integer(0));
    }
    ctx.db().set(dest, Value::Set(Box::new(result)), 0);
    ctx.changed(event::SET, event, dest);
    Ok(Frame::Integer(n as i64))
}

fn set_reply(members: Vec<Bytes>) -> CmdResult {
    Ok(Frame::Set(
        shown(members).into_iter().map(Frame::Bulk).collect(),
    ))
}

fn sinter(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let sets = load_sets(ctx, &argv[1..])?;
    set_reply(intersect(&sets, 0))
}

fn sinterstore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let sets = load_sets(ctx, &argv[2..])?;
    let result: SetValue = intersect(&sets, 0).into_iter().collect();
    store_result(ctx, &argv[1], result, "sinterstore")
}

fn sintercard(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    const BAD_NUMKEYS: &str = "ERR numkeys should be greater than 0";
    let numkeys = match parse_i64(&argv[1]) {
        Some(n) if n >= 1 => n as u64,
        _ => return Err(CmdError::err(BAD_NUMKEYS)),
    };
    if numkeys > (argv.len() - 2) as u64 {
        return Err(CmdError::err(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let keys_end = 2 + numkeys as usize;
    let mut limit = 0usize;
    let mut j = keys_end;
    while j < argv.len() {
        if is(&argv[j], "limit") && j + 1 < argv.len() {
            j += 1;
            limit = match parse_i64(&argv[j]) {
                Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
                _ => return Err(CmdError::err("ERR LIMIT can't be negative")),
            };
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let sets = load_sets(ctx, &argv[2..keys_end])?;
    Ok(Frame::Integer(intersect(&sets, limit).len() as i64))
}

fn sunion(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let sets = load_sets(ctx, &argv[1..])?;
    set_reply(union(&sets).into_iter().collect())
}

fn sunionstore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let sets = load_sets(ctx, &argv[2..])?;
    let result = union(&sets);
    store_result(ctx, &argv[1], result, "sunionstore")
}

fn sdiff(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let sets = load_sets(ctx, &argv[1..])?;
    set_reply(difference(&sets).into_iter().collect())
}

fn sdiffstore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let sets = load_sets(ctx, &argv[2..])?;
    let result = difference(&sets);
    store_result(ctx, &argv[1], result, "sdiffstore")
}

fn smove(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (src, dst, member) = (&argv[1], &argv[2], &argv[3]);
    let now = ctx.now;
    // A missing source answers 0 before the destination's type is looked at.
    if ctx.db().get(src, now).is_none() {
        return Ok(Frame::Integer(0));
    }
    set_ref(ctx, src)?;
    set_ref(ctx, dst)?;
    if src == dst {
        let found = set_ref(ctx, src)?.is_some_and(|s| s.contains(&member[..]));
        return Ok(Frame::Integer(found as i64));
    }
    let removed = set_mut(ctx, src)?.is_some_and(|s| s.swap_remove(&member[..]));
    if !removed {
        return Ok(Frame::Integer(0));
    }
    ctx.changed(event::SET, "srem", src);
    ctx.drop_if_empty(src, true);
    if set_ref(ctx, dst)?.is_none() {
        ctx.db().set(dst, Value::Set(Box::default()), 0);
    }
    if set_mut(ctx, dst)?.is_some_and(|s| s.insert(own(member))) {
        ctx.changed(event::SET, "sadd", dst);
    }
    Ok(Frame::Integer(1))
}
