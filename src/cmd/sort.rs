//! SORT and SORT_RO over lists, sets and sorted sets, as Redis 7.0's sort.c: BY (a pattern, or
//! a constant for no sorting), GET (`#`, `key*`, `hash*->field`), LIMIT, ASC/DESC, ALPHA, STORE.
//!
//! BY with a pattern and GET read keys no key spec names: as in Redis, they need a user that may
//! read every key. Deadbolt runs without Redis Cluster, so that refusal of BY/GET never applies.

use super::args::{int_arg, is};
use super::spec::{event, Ctx};
use super::spec::{flags::*, CommandSpec, KeySpecDoc, KEY1};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use crate::store::Value;
use bytes::Bytes;
use std::cmp::Ordering;
use std::collections::VecDeque;

const ACL: &[&str] = &["set", "sortedset", "list", "dangerous"];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::leaf("sort", -2, WRITE | DENYOOM | MOVABLE_KEYS, KEY1, ACL, sort),
    CommandSpec::leaf("sort_ro", -2, READONLY | MOVABLE_KEYS, KEY1, ACL, sort_ro),
];

const RO_ACCESS: &[&str] = &["RO", "access"];
const BY_GET_NOTE: &str = "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort";
const STORE_NOTE: &str = "For the optional STORE keyword. It is marked 'unknown' because the keyword can appear anywhere in the argument array";

/// Redis 7.0's key specifications, as COMMAND INFO prints them.
pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    (
        "sort",
        &[
            KeySpecDoc::range(RO_ACCESS, 1, 0),
            KeySpecDoc::unknown(BY_GET_NOTE, RO_ACCESS),
            KeySpecDoc::unknown(STORE_NOTE, &["OW", "update"]),
        ],
    ),
    (
        "sort_ro",
        &[
            KeySpecDoc::range(RO_ACCESS, 1, 0),
            KeySpecDoc::unknown(BY_GET_NOTE, RO_ACCESS),
        ],
    ),
];

/// Most elements one SORT may answer or store. Redis has no bound: `GET #` repeated N times
/// over a collection of M elements builds an N x M reply, which a client could use to exhaust
/// memory with one small command. Refused instead (an error, never a partial answer).
const MAX_OUTPUT: u64 = 64 << 20;
const TOO_LARGE: &str = "ERR SORT result too large (more than 67108864 elements)";

fn sort(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    sort_generic(ctx, argv, false)
}

fn sort_ro(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    sort_generic(ctx, argv, true)
}

/// The bytes C's string functions see: up to the first NUL.
fn c_str(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |n| &b[..n])
}

/// Redis's lookupKeyByPattern: `#` is the element itself; otherwise the first `*` is replaced
/// by the element and the key read as a string, or with `->field` after the `*`, as a hash
/// field. A pattern without `*` names nothing.
fn lookup_by_pattern(ctx: &mut Ctx, pattern: &[u8], elem: &Bytes) -> Option<Bytes> {
    let cpat = c_str(pattern);
    if cpat == b"#" {
        return Some(elem.clone());
    }
    let star = cpat.iter().position(|&c| c == b'*')?;
    let field = cpat[star + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|at| star + 1 + at)
        // `->` at the very end is part of the key name, not an empty field.
        .filter(|&f| f + 2 < cpat.len())
        .map(|f| &pattern[f + 2..]);
    let postfix_end = pattern.len() - field.map_or(0, |f| f.len() + 2);
    let mut key = Vec::with_capacity(star + elem.len() + (postfix_end - star - 1));
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(&pattern[star + 1..postfix_end]);
    let now = ctx.now;
    match (&ctx.db().get(&key, now)?.value, field) {
        (Value::Str(s), None) => Some(s.clone()),
        (Value::Hash(h), Some(f)) => h.get(f).map(Bytes::copy_from_slice),
        _ => None,
    }
}

/// C's strtod over the bytes up to a NUL, as SORT scores elements: the whole text must be
/// read, without overflow or underflow, and not be NaN.
fn sort_score(b: &[u8]) -> Option<f64> {
    let text = c_str(b);
    // Plain decimal integers (ids, counters, timestamps: what sorted lists mostly hold) of up to
    // 15 digits are exact in a double, so their value is strtod's without calling it.
    let (neg, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if !digits.is_empty() && digits.len() <= 15 && digits.iter().all(u8::is_ascii_digit) {
        let v = digits
            .iter()
            .fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0')) as f64;
        return Some(if neg { -v } else { v });
    }
    let mut stack = [0u8; 64];
    let mut heap = Vec::new();
    let buf: &[u8] = if text.len() < stack.len() {
        stack[..text.len()].copy_from_slice(text);
        &stack[..=text.len()]
    } else {
        heap.reserve_exact(text.len() + 1);
        heap.extend_from_slice(text);
        heap.push(0);
        &heap
    };
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `buf` is NUL-terminated (the byte after `text`) and outlives the call; errno is
    // this thread's.
    let (v, consumed_all, range) = unsafe {
        *libc::__errno_location() = 0;
        let v = libc::strtod(buf.as_ptr().cast(), &mut end);
        (v, *end == 0, *libc::__errno_location() == libc::ERANGE)
    };
    (consumed_all && !range && !v.is_nan()).then_some(v)
}

/// Redis's compareStringObjects: bytes, then length.
fn binary_cmp(a: &[u8], b: &[u8]) -> Ordering {
    a.cmp(b)
}

/// strcoll in the C locale (the one deadbolt always uses): strcmp, which stops at a NUL.
fn collate_cmp(a: &[u8], b: &[u8]) -> Ordering {
    c_str(a).cmp(c_str(b))
}

/// The LIMIT range of an unsorted list or sorted set, in its own order (reversed for DESC);
/// `start`/`end` then index the returned elements.
fn ranged(all: Vec<Bytes>, desc: bool, start: &mut i64, end: &mut i64) -> Vec<Bytes> {
    if *end < *start {
        return Vec::new();
    }
    let (s, n) = (*start as usize, (*end - *start + 1) as usize);
    *end -= *start;
    *start = 0;
    if desc {
        all.into_iter().rev().skip(s).take(n).collect()
    } else {
        all.into_iter().skip(s).take(n).collect()
    }
}

struct Item<E> {
    elem: E,
    score: f64,
    by: Option<Bytes>,
}

/// The LIMIT window `[start, end]` (end < start: empty) of `len` elements, as Redis clamps it.
fn limit_window(len: i64, limit_start: i64, limit_count: i64) -> (i64, i64) {
    let mut start = limit_start.clamp(0, len);
    let count = limit_count.clamp(-1, len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    (start, end)
}

/// Puts `items[start..=end]` in SORT's order (Redis's sortCompare). Numeric order is total up
/// to identical elements (equal scores fall back to the bytes), so only the window is sorted,
/// as Redis's pqsort does; the text orders can tie distinct elements (BY values, strcoll's NUL),
/// so they sort everything with a stable sort, as before.
fn order<E: AsRef<[u8]>>(
    items: &mut [Item<E>],
    alpha: bool,
    desc: bool,
    by_pattern: bool,
    store: bool,
    start: i64,
    end: i64,
) {
    if !alpha {
        if end < start {
            return;
        }
        let numeric = |a: &Item<E>, b: &Item<E>| {
            let cmp = a
                .score
                .partial_cmp(&b.score)
                .unwrap_or(Ordering::Equal)
                .then_with(|| binary_cmp(a.elem.as_ref(), b.elem.as_ref()));
            if desc {
                cmp.reverse()
            } else {
                cmp
            }
        };
        let (start, end) = (start as usize, end as usize);
        if end + 1 < items.len() {
            items.select_nth_unstable_by(end, numeric);
        }
        let head = &mut items[..=end];
        if start > 0 {
            head.select_nth_unstable_by(start, numeric);
        }
        head[start..].sort_unstable_by(numeric);
        return;
    }
    let text_cmp = if store { binary_cmp } else { collate_cmp };
    items.sort_by(|a, b| {
        let cmp = if by_pattern {
            match (&a.by, &b.by) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Less,
                (Some(_), None) => Ordering::Greater,
                (Some(x), Some(y)) => text_cmp(x, y),
            }
        } else {
            text_cmp(a.elem.as_ref(), b.elem.as_ref())
        };
        if desc {
            cmp.reverse()
        } else {
            cmp
        }
    });
}

const CONVERSION_ERROR: &str = "ERR One or more scores can't be converted into double";

fn sort_generic(ctx: &mut Ctx, argv: &[Bytes], readonly: bool) -> CmdResult {
    let mut desc = false;
    let mut alpha = false;
    let (mut limit_start, mut limit_count) = (0i64, -1i64);
    let mut dontsort = false;
    let mut sortby: Option<&Bytes> = None;
    let mut storekey: Option<&Bytes> = None;
    let mut gets: Vec<&Bytes> = Vec::new();
    let full_key_access = super::dispatch::unrestricted_key_access(ctx.client, argv);
    let mut j = 2;
    while j < argv.len() {
        let left = argv.len() - j - 1;
        let a = &argv[j][..];
        if is(a, "asc") {
            desc = false;
        } else if is(a, "desc") {
            desc = true;
        } else if is(a, "alpha") {
            alpha = true;
        } else if is(a, "limit") && left >= 2 {
            limit_start = int_arg(&argv[j + 1])?;
            limit_count = int_arg(&argv[j + 2])?;
            j += 2;
        } else if !readonly && is(a, "store") && left >= 1 {
            storekey = Some(&argv[j + 1]);
            j += 1;
        } else if is(a, "by") && left >= 1 {
            sortby = Some(&argv[j + 1]);
            // A pattern without `*` names one constant key for every element: nothing to sort.
            dontsort = !c_str(&argv[j + 1]).contains(&b'*');
            if !dontsort && !full_key_access {
                return Err(CmdError::err(
                    "ERR BY option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            j += 1;
        } else if is(a, "get") && left >= 1 {
            if !full_key_access {
                return Err(CmdError::err(
                    "ERR GET option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            gets.push(&argv[j + 1]);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }

    let now = ctx.now;
    // The common case, a list sorted by its own elements with nothing to look up: ordered in
    // place through references, so only the answered window is copied.
    if sortby.is_none() && gets.is_empty() {
        if let Some(Value::List(l)) = ctx.db().get(&argv[1], now).map(|e| &e.value) {
            let (start, end) = limit_window(l.len() as i64, limit_start, limit_count);
            let mut items = Vec::with_capacity(l.len());
            for elem in l {
                let mut score = 0.0;
                if !alpha {
                    score = sort_score(elem).ok_or_else(|| CmdError::err(CONVERSION_ERROR))?;
                }
                items.push(Item {
                    elem,
                    score,
                    by: None,
                });
            }
            order(
                &mut items,
                alpha,
                desc,
                false,
                storekey.is_some(),
                start,
                end,
            );
            if end - start + 1 > MAX_OUTPUT as i64 {
                return Err(CmdError::err(TOO_LARGE));
            }
            let window = if end < start {
                &items[..0]
            } else {
                &items[start as usize..=end as usize]
            };
            let Some(dest) = storekey else {
                return Ok(Frame::Array(
                    window
                        .iter()
                        .map(|it| Frame::Bulk(it.elem.clone()))
                        .collect(),
                ));
            };
            let list: VecDeque<Bytes> = window
                .iter()
                .map(|it| Bytes::copy_from_slice(it.elem))
                .collect();
            return Ok(store_result(ctx, dest, list));
        }
    }
    enum Source {
        List(VecDeque<Bytes>),
        Set(Vec<Bytes>),
        ZSet(Vec<Bytes>),
    }
    // Owned copies (reference counts only) so BY/GET can read other keys while sorting.
    let source = match ctx.db().get(&argv[1], now).map(|e| &e.value) {
        None => Source::List(VecDeque::new()),
        Some(Value::List(l)) => Source::List(l.clone()),
        Some(Value::Set(s)) => Source::Set(super::support::ordered(s)),
        Some(Value::ZSet(z)) => Source::ZSet(z.iter_from(0).map(|(m, _)| m.clone()).collect()),
        Some(_) => return Err(CmdError::WrongType),
    };
    // An unsorted set would be answered in hash order; a stored or scripted result must not
    // depend on it, so Redis sorts those alphabetically.
    if dontsort && matches!(source, Source::Set(_)) && (storekey.is_some() || ctx.in_script) {
        dontsort = false;
        alpha = true;
        sortby = None;
    }
    let len = match &source {
        Source::List(l) => l.len(),
        Source::Set(s) | Source::ZSet(s) => s.len(),
    } as i64;
    let (mut start, mut end) = limit_window(len, limit_start, limit_count);

    // Lists and sorted sets keep their own order when not sorted: only the LIMIT range is
    // loaded, walked from the tail for DESC.
    let elems: Vec<Bytes> = match source {
        Source::List(l) if dontsort => ranged(l.into(), desc, &mut start, &mut end),
        Source::ZSet(z) if dontsort => ranged(z, desc, &mut start, &mut end),
        Source::List(l) => l.into(),
        Source::Set(s) | Source::ZSet(s) => s,
    };

    let mut items: Vec<Item<Bytes>> = elems
        .into_iter()
        .map(|elem| Item {
            elem,
            score: 0.0,
            by: None,
        })
        .collect();
    let mut conversion_error = false;
    if !dontsort {
        for it in &mut items {
            let byval = match sortby {
                Some(p) => match lookup_by_pattern(ctx, p, &it.elem) {
                    Some(v) => v,
                    None => continue,
                },
                None => it.elem.clone(),
            };
            if alpha {
                if sortby.is_some() {
                    it.by = Some(byval);
                }
            } else {
                match sort_score(&byval) {
                    Some(v) => it.score = v,
                    None => conversion_error = true,
                }
            }
        }
        order(
            &mut items,
            alpha,
            desc,
            sortby.is_some(),
            storekey.is_some(),
            start,
            end,
        );
    }

    let rows = (end - start + 1).max(0) as u64;
    let outputlen = if gets.is_empty() {
        rows
    } else {
        rows.saturating_mul(gets.len() as u64)
    };
    if conversion_error {
        return Err(CmdError::err(CONVERSION_ERROR));
    }
    if outputlen > MAX_OUTPUT {
        return Err(CmdError::err(TOO_LARGE));
    }
    let range = if rows == 0 {
        &items[..0]
    } else {
        &items[start as usize..=end as usize]
    };
    let Some(dest) = storekey else {
        let mut out = Vec::with_capacity(outputlen as usize);
        for it in range {
            if gets.is_empty() {
                out.push(Frame::Bulk(it.elem.clone()));
            }
            for g in &gets {
                out.push(Frame::opt_bulk(lookup_by_pattern(ctx, g, &it.elem)));
            }
        }
        return Ok(Frame::Array(out));
    };
    let mut list = VecDeque::with_capacity(outputlen as usize);
    for it in range {
        if gets.is_empty() {
            list.push_back(Bytes::copy_from_slice(&it.elem));
        }
        for g in &gets {
            list.push_back(lookup_by_pattern(ctx, g, &it.elem).unwrap_or_default());
        }
    }
    Ok(store_result(ctx, dest, list))
}

/// STORE: the list replaces `dest`, or an empty result deletes it; answers its length.
fn store_result(ctx: &mut Ctx, dest: &Bytes, list: VecDeque<Bytes>) -> Frame {
    let len = list.len() as i64;
    if len > 0 {
        ctx.db().set(dest, Value::List(list), 0);
        ctx.changed(event::LIST, "sortstore", dest);
    } else {
        super::support::delete_dest(ctx, dest);
    }
    Frame::Integer(len)
}
