//! Strings by range: GETRANGE/SUBSTR, SETRANGE, LCS; and the in-place string editing that
//! SETRANGE and the bitmap family share.

use super::args::{int_arg, is};
use super::spec::{event, Ctx};
use super::spec::{flags::*, CommandSpec, KeySpecDoc, KEY1};
use super::support::read_str;
use super::support::{check_growth, edit_str};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use crate::store::Value;
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::leaf("getrange", 4, READONLY, KEY1, &["string"], getrange),
    CommandSpec::leaf("substr", 4, READONLY, KEY1, &["string"], getrange),
    CommandSpec::leaf("setrange", 4, WRITE | DENYOOM, KEY1, &["string"], setrange),
    CommandSpec::leaf(
        "lcs",
        -3,
        READONLY,
        super::spec::KeySpec {
            first: 1,
            last: 2,
            step: 1,
        },
        &["string"],
        lcs,
    ),
];

/// Redis 7.0's key specifications for these commands, as COMMAND INFO prints them.
pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    ("getrange", &[KeySpecDoc::range(&["RO", "access"], 1, 0)]),
    ("substr", &[KeySpecDoc::range(&["RO", "access"], 1, 0)]),
    ("setrange", &[KeySpecDoc::range(&["RW", "update"], 1, 0)]),
    ("lcs", &[KeySpecDoc::range(&["RO", "access"], 1, 1)]),
];

pub const TOO_BIG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// Redis's `checkStringLength`: a string of `offset + len` bytes must fit proto-max-bulk-len
/// (checked before anything is allocated).
pub fn check_string_length(ctx: &Ctx, offset: u64, len: u64) -> CmdResult<()> {
    match offset.checked_add(len) {
        Some(total) if total <= ctx.srv.config.proto_max_bulk_len as u64 => Ok(()),
        _ => Err(CmdError::err(TOO_BIG)),
    }
}

fn getrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let start = int_arg(&argv[2])?;
    let end = int_arg(&argv[3])?;
    let Some(s) = read_str(ctx, &argv[1])? else {
        return Ok(Frame::Bulk(Bytes::new()));
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Ok(Frame::Bulk(Bytes::new()));
    }
    let start = if start < 0 { len + start } else { start }.max(0);
    let end = if end < 0 { len + end } else { end }.max(0).min(len - 1);
    if start > end || len == 0 {
        return Ok(Frame::Bulk(Bytes::new()));
    }
    Ok(Frame::Bulk(s.slice(start as usize..=end as usize)))
}

fn setrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let value = &argv[3];
    let offset = int_arg(&argv[2])?;
    if offset < 0 {
        return Err(CmdError::err("ERR offset is out of range"));
    }
    let now = ctx.now;
    let existing = match ctx.db().get(key, now) {
        None => None,
        Some(e) => match &e.value {
            Value::Str(s) => Some(s.len()),
            _ => return Err(CmdError::WrongType),
        },
    };
    if value.is_empty() {
        return Ok(Frame::Integer(existing.unwrap_or(0) as i64));
    }
    check_string_length(ctx, offset as u64, value.len() as u64)?;
    let offset = offset as usize;
    let end = offset + value.len();
    let len = edit_str(ctx, key, end, |buf, _| {
        buf[offset..end].copy_from_slice(value);
        buf.len()
    })?;
    ctx.changed(event::STRING, "setrange", key);
    Ok(Frame::Integer(len as i64))
}

/// Redis's lcsCommand: the dynamic-programming table of LCS lengths, walked back from the end
/// to rebuild the subsequence and its matching ranges (emitted last match first).
fn lcs(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let a = lcs_operand(ctx, &argv[1]);
    let b = lcs_operand(ctx, &argv[2]);
    let (Some(a), Some(b)) = (a, b) else {
        return Err(CmdError::err(
            "ERR The specified keys must contain string values",
        ));
    };
    let (mut get_len, mut get_idx, mut with_match_len) = (false, false, false);
    let mut min_match_len: i64 = 0;
    let mut j = 3;
    while j < argv.len() {
        let opt = &argv[j][..];
        if is(opt, "idx") {
            get_idx = true;
        } else if is(opt, "len") {
            get_len = true;
        } else if is(opt, "withmatchlen") {
            with_match_len = true;
        } else if is(opt, "minmatchlen") && j + 1 < argv.len() {
            min_match_len = int_arg(&argv[j + 1])?.max(0);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if get_len && get_idx {
        return Err(CmdError::err(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return Err(CmdError::err("ERR String too long for LCS"));
    }
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    let bytes = cells * 4;
    if bytes > ctx.srv.config.proto_max_bulk_len as u64 {
        return Err(CmdError::err(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let failed =
        || CmdError::err("ERR Insufficient memory, failed allocating transient memory for LCS");
    check_growth(ctx, bytes as usize).map_err(|_| failed())?;
    let mut table: Vec<u32> = Vec::new();
    table
        .try_reserve_exact(cells as usize)
        .map_err(|_| failed())?;
    table.resize(cells as usize, 0);
    let w = blen + 1;
    for i in 1..=alen {
        let (prev, cur) = table[(i - 1) * w..(i + 1) * w].split_at_mut(w);
        let ai = a[i - 1];
        for j in 1..=blen {
            cur[j] = if ai == b[j - 1] {
                prev[j - 1] + 1
            } else {
                prev[j].max(cur[j - 1])
            };
        }
    }
    let at = |i: usize, j: usize| table[i * w + j];
    let total = at(alen, blen);
    let mut result = vec![0u8; total as usize];
    let mut matches = Vec::new();
    let mut idx = total as usize;
    // `arange_start == alen` means no range is open, as in Redis.
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (alen, 0usize, 0usize, 0usize);
    let (mut i, mut j) = (alen, blen);
    let compute = get_idx || !get_len;
    while compute && i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            if a_start == alen {
                a_start = i - 1;
                a_end = i - 1;
                b_start = j - 1;
                b_end = j - 1;
            } else if a_start == i && b_start == j {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if at(i - 1, j) > at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != alen {
                emit = true;
            }
        }
        let match_len = a_end.wrapping_sub(a_start).wrapping_add(1) as u32;
        if emit {
            if get_idx && (min_match_len == 0 || match_len as i64 >= min_match_len) {
                let mut m = vec![
                    Frame::Array(vec![
                        Frame::Integer(a_start as i64),
                        Frame::Integer(a_end as i64),
                    ]),
                    Frame::Array(vec![
                        Frame::Integer(b_start as i64),
                        Frame::Integer(b_end as i64),
                    ]),
                ];
                if with_match_len {
                    m.push(Frame::Integer(match_len as i64));
                }
                matches.push(Frame::Array(m));
            }
            a_start = alen;
        }
    }
    Ok(if get_idx {
        Frame::Map(vec![
            (Frame::bulk_static("matches"), Frame::Array(matches)),
            (Frame::bulk_static("len"), Frame::Integer(total as i64)),
        ])
    } else if get_len {
        Frame::Integer(total as i64)
    } else {
        Frame::Bulk(Bytes::from(result))
    })
}

/// An LCS operand: the string (empty when missing), None for another type. Counts hits/misses
/// as Redis's lookupKeyRead does, whatever the type.
fn lcs_operand(ctx: &mut Ctx, key: &[u8]) -> Option<Bytes> {
    let now = ctx.now;
    let (found, s) = match ctx.db().get(key, now) {
        None => (false, Some(Bytes::new())),
        Some(e) => match &e.value {
            Value::Str(s) => (true, Some(s.clone())),
            _ => (true, None),
        },
    };
    if found {
        ctx.srv.stats.keyspace_hits += 1;
    } else {
        ctx.srv.stats.keyspace_misses += 1;
    }
    s
}
