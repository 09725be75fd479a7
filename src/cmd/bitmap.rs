//! Bitmaps: SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD BITFIELD_RO, over string values
//! (bit 0 is the most significant bit of the first byte), as Redis 7.0's bitops.c.

use super::args::{int_arg, is};
use super::spec::{event, Ctx};
use super::spec::{flags::*, CommandSpec, KeySpec, KeySpecDoc, KEY1};
use super::support::edit_str;
use super::support::read_str;
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use crate::store::Value;
use bytes::Bytes;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, keys, &["bitmap"], handler)
}

pub static COMMANDS: &[CommandSpec] = &[
    spec("setbit", 4, WRITE | DENYOOM, KEY1, setbit),
    spec("getbit", 3, READONLY | FAST, KEY1, getbit),
    spec("bitcount", -2, READONLY, KEY1, bitcount),
    spec("bitpos", -3, READONLY, KEY1, bitpos),
    spec(
        "bitop",
        -4,
        WRITE | DENYOOM,
        KeySpec {
            first: 2,
            last: -1,
            step: 1,
        },
        bitop,
    ),
    spec("bitfield", -2, WRITE | DENYOOM, KEY1, bitfield),
    spec("bitfield_ro", -2, READONLY | FAST, KEY1, bitfield_ro),
];

const RO: &[&str] = &["RO", "access"];

/// Redis 7.0's key specifications for these commands, as COMMAND INFO prints them.
pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    (
        "setbit",
        &[KeySpecDoc::range(&["RW", "access", "update"], 1, 0)],
    ),
    ("getbit", &[KeySpecDoc::range(RO, 1, 0)]),
    ("bitcount", &[KeySpecDoc::range(RO, 1, 0)]),
    ("bitpos", &[KeySpecDoc::range(RO, 1, 0)]),
    (
        "bitop",
        &[
            KeySpecDoc::range(&["OW", "update"], 2, 0),
            KeySpecDoc::range(RO, 3, -1),
        ],
    ),
    (
        "bitfield",
        &[KeySpecDoc {
            notes: Some("This command allows both access and modification of the key"),
            flags: &["RW", "access", "update", "variable_flags"],
            begin_index: 1,
            lastkey: 0,
            keystep: 1,
            keynum: None,
            keyword: None,
            limit: 0,
        }],
    ),
    ("bitfield_ro", &[KeySpecDoc::range(RO, 1, 0)]),
];

const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";

/// Redis's getBitOffsetFromArgument: a bit offset below proto-max-bulk-len * 8, so no string
/// a client can make us grow exceeds proto-max-bulk-len. With `bits` > 0 a `#N` offset means
/// N * bits (multiplied with C's wrap-around, as Redis does).
fn bit_offset(ctx: &Ctx, arg: &[u8], bits: u32) -> CmdResult<u64> {
    let hash = bits > 0 && arg.first() == Some(&b'#');
    let digits = if hash { &arg[1..] } else { arg };
    let mut v = crate::protocol::number::parse_i64(digits).ok_or(CmdError::err(BAD_OFFSET))?;
    if hash {
        v = v.wrapping_mul(bits as i64);
    }
    if v < 0 || (v >> 3) as u64 >= ctx.srv.config.proto_max_bulk_len as u64 {
        return Err(CmdError::err(BAD_OFFSET));
    }
    Ok(v as u64)
}

fn setbit(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let offset = bit_offset(ctx, &argv[2], 0)?;
    let bad_bit = || CmdError::err("ERR bit is not an integer or out of range");
    let on = int_arg(&argv[3]).map_err(|_| bad_bit())?;
    if on & !1 != 0 {
        return Err(bad_bit());
    }
    let byte = (offset >> 3) as usize;
    let mask = 1u8 << (7 - (offset & 7));
    let (old, dirty) = edit_str(ctx, key, byte + 1, |buf, grew| {
        let old = buf[byte] & mask != 0;
        if on == 1 {
            buf[byte] |= mask;
        } else {
            buf[byte] &= !mask;
        }
        (old, grew || old != (on == 1))
    })?;
    if dirty {
        ctx.changed(event::STRING, "setbit", key);
    }
    Ok(Frame::Integer(old as i64))
}

fn getbit(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let offset = bit_offset(ctx, &argv[2], 0)?;
    let Some(s) = read_str(ctx, &argv[1])? else {
        return Ok(Frame::Integer(0));
    };
    let byte = (offset >> 3) as usize;
    let bit = s
        .get(byte)
        .is_some_and(|b| b & (1 << (7 - (offset & 7))) != 0);
    Ok(Frame::Integer(bit as i64))
}

/// Set bits in `s`, a machine word at a time.
fn popcount(s: &[u8]) -> u64 {
    let mut words = s.chunks_exact(8);
    let mut n: u64 = 0;
    for w in words.by_ref() {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        n += u64::from_ne_bytes(a).count_ones() as u64;
    }
    n + words
        .remainder()
        .iter()
        .map(|b| b.count_ones() as u64)
        .sum::<u64>()
}

/// Redis's redisBitpos: the position of the first bit equal to `bit`; when there is none,
/// -1 looking for 1, and `8 * len` looking for 0 (the string is taken as zero-padded).
fn first_bit(s: &[u8], bit: bool) -> i64 {
    let skip: u8 = if bit { 0 } else { 0xff };
    let skip_word = u64::from_ne_bytes([skip; 8]);
    let mut i = 0;
    for w in s.chunks_exact(8) {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        if u64::from_ne_bytes(a) != skip_word {
            break;
        }
        i += 8;
    }
    while i < s.len() && s[i] == skip {
        i += 1;
    }
    match s.get(i) {
        None if bit => -1,
        None => (s.len() * 8) as i64,
        Some(&b) => {
            let lead = if bit { b } else { !b }.leading_zeros();
            (i * 8) as i64 + lead as i64
        }
    }
}

/// BIT/BYTE unit keyword of BITCOUNT and BITPOS.
fn is_bit_unit(arg: &[u8]) -> CmdResult<bool> {
    if is(arg, "bit") {
        Ok(true)
    } else if is(arg, "byte") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Masks for the bits of the first and last byte that lie outside a bit range (Redis's
/// first_byte_neg_mask / last_byte_neg_mask), and the range converted to bytes.
fn bit_range_to_bytes(start: i64, end: i64) -> (i64, i64, u8, u8) {
    let first = !((1u32 << (8 - (start & 7))) - 1) as u8;
    let last = ((1u32 << (7 - (end & 7))) - 1) as u8;
    (start >> 3, end >> 3, first, last)
}

fn bitcount(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(s) = read_str(ctx, &argv[1])? else {
        return Ok(Frame::Integer(0));
    };
    let (mut start, mut end);
    let (mut first_mask, mut last_mask) = (0u8, 0u8);
    match argv.len() {
        4 | 5 => {
            let mut total = s.len() as i64;
            start = int_arg(&argv[2])?;
            end = int_arg(&argv[3])?;
            if start < 0 && end < 0 && start > end {
                return Ok(Frame::Integer(0));
            }
            let in_bits = argv.len() == 5 && is_bit_unit(&argv[4])?;
            if in_bits {
                total <<= 3;
            }
            if start < 0 {
                start += total;
            }
            if end < 0 {
                end += total;
            }
            start = start.max(0);
            end = end.max(0);
            if end >= total {
                end = total - 1;
            }
            if in_bits && start <= end {
                (start, end, first_mask, last_mask) = bit_range_to_bytes(start, end);
            }
        }
        2 => {
            start = 0;
            end = s.len() as i64 - 1;
        }
        _ => return Err(CmdError::Syntax),
    }
    if start > end {
        return Ok(Frame::Integer(0));
    }
    let (start, end) = (start as usize, end as usize);
    let mut count = popcount(&s[start..=end]) as i64;
    count -= (s[start] & first_mask).count_ones() as i64;
    count -= (s[end] & last_mask).count_ones() as i64;
    Ok(Frame::Integer(count))
}

fn bitpos(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let bit = int_arg(&argv[2])?;
    if bit != 0 && bit != 1 {
        return Err(CmdError::err("ERR The bit argument must be 1 or 0."));
    }
    let bit = bit == 1;
    // A missing key is an endless run of zeros.
    let Some(s) = read_str(ctx, &argv[1])? else {
        return Ok(Frame::Integer(if bit { -1 } else { 0 }));
    };
    let (mut start, mut end);
    let (mut first_mask, mut last_mask) = (0u8, 0u8);
    let mut end_given = false;
    match argv.len() {
        4..=6 => {
            let mut total = s.len() as i64;
            start = int_arg(&argv[3])?;
            let in_bits = argv.len() == 6 && is_bit_unit(&argv[5])?;
            if argv.len() >= 5 {
                end = int_arg(&argv[4])?;
                end_given = true;
            } else if in_bits {
                end = (total << 3) + 7;
            } else {
                end = total - 1;
            }
            if in_bits {
                total <<= 3;
            }
            if start < 0 {
                start += total;
            }
            if end < 0 {
                end += total;
            }
            start = start.max(0);
            end = end.max(0);
            if end >= total {
                end = total - 1;
            }
            if in_bits && start <= end {
                (start, end, first_mask, last_mask) = bit_range_to_bytes(start, end);
            }
        }
        3 => {
            start = 0;
            end = s.len() as i64 - 1;
        }
        _ => return Err(CmdError::Syntax),
    }
    if start > end {
        return Ok(Frame::Integer(-1));
    }
    let (mut start, end) = (start as usize, end as usize);
    let mut bytes = end - start + 1;
    let pos = 'found: {
        if first_mask != 0 {
            let mut b = if bit {
                s[start] & !first_mask
            } else {
                s[start] | first_mask
            };
            if last_mask != 0 && bytes == 1 {
                b = if bit { b & !last_mask } else { b | last_mask };
            }
            let pos = first_bit(&[b], bit);
            if bytes == 1 || (pos != -1 && pos != 8) {
                break 'found pos;
            }
            start += 1;
            bytes -= 1;
        }
        // A last byte with bits outside the range is looked at on its own, masked.
        let whole = bytes - (last_mask != 0) as usize;
        if whole > 0 {
            let pos = first_bit(&s[start..start + whole], bit);
            if bytes == whole || (pos != -1 && pos != (whole as i64) << 3) {
                break 'found pos;
            }
            start += whole;
            bytes -= whole;
        }
        let b = if bit {
            s[end] & !last_mask
        } else {
            s[end] | last_mask
        };
        first_bit(&[b], bit)
    };
    // Looking for a 0 inside an explicit range that has none: the padding beyond the range
    // does not count.
    if end_given && !bit && pos == (bytes as i64) << 3 {
        return Ok(Frame::Integer(-1));
    }
    Ok(Frame::Integer(if pos == -1 {
        -1
    } else {
        pos + ((start as i64) << 3)
    }))
}

fn bitop(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    #[derive(PartialEq, Clone, Copy)]
    enum Op {
        And,
        Or,
        Xor,
        Not,
    }
    let name = &argv[1][..];
    let op = if is(name, "and") {
        Op::And
    } else if is(name, "or") {
        Op::Or
    } else if is(name, "xor") {
        Op::Xor
    } else if is(name, "not") {
        Op::Not
    } else {
        return Err(CmdError::Syntax);
    };
    if op == Op::Not && argv.len() != 4 {
        return Err(CmdError::err(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    let mut srcs: Vec<Bytes> = Vec::with_capacity(argv.len().min(1024));
    for k in &argv[3..] {
        srcs.push(read_str(ctx, k)?.unwrap_or_default());
    }
    let dest = &argv[2];
    let max_len = srcs.iter().map(|s| s.len()).max().unwrap_or(0);
    if max_len == 0 {
        super::support::delete_dest(ctx, dest);
        return Ok(Frame::Integer(0));
    }
    super::support::check_growth(ctx, max_len)?;
    let mut res: Vec<u8> = Vec::new();
    res.try_reserve_exact(max_len)
        .map_err(|_| CmdError::err("OOM command not allowed when used memory > 'maxmemory'."))?;
    res.extend_from_slice(&srcs[0]);
    res.resize(max_len, 0);
    for s in &srcs[1..] {
        let (head, tail) = res.split_at_mut(s.len());
        match op {
            Op::And => {
                head.iter_mut().zip(&s[..]).for_each(|(r, b)| *r &= b);
                // Missing bytes of a shorter source are zeros.
                tail.fill(0);
            }
            Op::Or => head.iter_mut().zip(&s[..]).for_each(|(r, b)| *r |= b),
            Op::Xor => head.iter_mut().zip(&s[..]).for_each(|(r, b)| *r ^= b),
            Op::Not => {}
        }
    }
    if op == Op::Not {
        res.iter_mut().for_each(|r| *r = !*r);
    }
    ctx.db().set(dest, Value::Str(Bytes::from(res)), 0);
    // Redis creates the result as a raw string (createObject), whatever its content.
    ctx.db()
        .set_str_enc(dest, crate::store::keyspace::StrEnc::Raw);
    ctx.changed(event::STRING, "set", dest);
    Ok(Frame::Integer(max_len as i64))
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum FieldOp {
    Get,
    Set,
    IncrBy,
}

#[derive(Clone, Copy, Debug)]
struct Field {
    op: FieldOp,
    offset: u64,
    value: i64,
    overflow: Overflow,
    bits: u32,
    signed: bool,
}

/// Redis's getBitfieldTypeFromArgument: `i1`..`i64` or `u1`..`u63` (a u64 could not be
/// returned as a RESP integer). The width is read as C reads it, up to a NUL.
fn field_type(arg: &[u8]) -> CmdResult<(bool, u32)> {
    let err = || {
        CmdError::err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")
    };
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(err()),
    };
    let digits = &arg[1..];
    let digits = &digits[..digits.iter().position(|&c| c == 0).unwrap_or(digits.len())];
    let bits = crate::protocol::number::parse_i64(digits).ok_or_else(err)?;
    if bits < 1 || (signed && bits > 64) || (!signed && bits > 63) {
        return Err(err());
    }
    Ok((signed, bits as u32))
}

fn parse_fields(ctx: &Ctx, argv: &[Bytes]) -> CmdResult<Vec<Field>> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < argv.len() {
        let remaining = argv.len() - j - 1;
        let sub = &argv[j][..];
        let op = if is(sub, "get") && remaining >= 2 {
            FieldOp::Get
        } else if is(sub, "set") && remaining >= 3 {
            FieldOp::Set
        } else if is(sub, "incrby") && remaining >= 3 {
            FieldOp::IncrBy
        } else if is(sub, "overflow") && remaining >= 1 {
            let kind = &argv[j + 1][..];
            overflow = if is(kind, "wrap") {
                Overflow::Wrap
            } else if is(kind, "sat") {
                Overflow::Sat
            } else if is(kind, "fail") {
                Overflow::Fail
            } else {
                return Err(CmdError::err("ERR Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let (signed, bits) = field_type(&argv[j + 1])?;
        let offset = bit_offset(ctx, &argv[j + 2], bits)?;
        let value = if op == FieldOp::Get {
            0
        } else {
            int_arg(&argv[j + 3])?
        };
        fields.push(Field {
            op,
            offset,
            value,
            overflow,
            bits,
            signed,
        });
        j += if op == FieldOp::Get { 3 } else { 4 };
    }
    Ok(fields)
}

/// `bits` bits at bit `offset`, most significant first; bytes past the end read as zero.
fn get_unsigned(p: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v: u64 = 0;
    for k in 0..bits as u64 {
        let o = offset + k;
        let bit = p
            .get((o >> 3) as usize)
            .map_or(0, |b| (b >> (7 - (o & 7))) & 1);
        v = (v << 1) | bit as u64;
    }
    v
}

fn get_signed(p: &[u8], offset: u64, bits: u32) -> i64 {
    let mut v = get_unsigned(p, offset, bits) as i64;
    if bits < 64 && v & (1i64 << (bits - 1)) != 0 {
        v |= -1i64 << bits;
    }
    v
}

/// Writes the low `bits` bits of `value` at bit `offset` (the buffer covers them).
fn set_bits(p: &mut [u8], offset: u64, bits: u32, value: u64) {
    for k in 0..bits as u64 {
        let o = offset + k;
        let bit = (value >> (bits as u64 - 1 - k)) & 1;
        let mask = 1u8 << (7 - (o & 7));
        let byte = &mut p[(o >> 3) as usize];
        if bit == 1 {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

/// Redis's checkUnsignedBitfieldOverflow: Some(value to store) when `value + incr` leaves the
/// `bits`-wide unsigned range (wrapped or saturated per `ow`; FAIL stores nothing).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<u64> {
    let max: u64 = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    let wrap = || {
        let res = value.wrapping_add(incr as u64);
        if bits == 64 {
            res
        } else {
            res & !(u64::MAX << bits)
        }
    };
    if value > max || (incr > 0 && incr > max_incr) {
        Some(match ow {
            Overflow::Wrap => wrap(),
            _ => max,
        })
    } else if incr < 0 && incr < min_incr {
        Some(match ow {
            Overflow::Wrap => wrap(),
            _ => 0,
        })
    } else {
        None
    }
}

/// Redis's checkSignedBitfieldOverflow, same contract for a `bits`-wide signed field.
fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<i64> {
    let max: i64 = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrap = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & (1u64 << (bits - 1)) != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    if value > max || (bits != 64 && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr)
    {
        Some(match ow {
            Overflow::Wrap => wrap(),
            _ => max,
        })
    } else if value < min
        || (bits != 64 && incr < min_incr)
        || (value < 0 && incr < 0 && incr < min_incr)
    {
        Some(match ow {
            Overflow::Wrap => wrap(),
            _ => min,
        })
    } else {
        None
    }
}

/// Runs one SET/INCRBY on `buf`: the reply (Null when OVERFLOW FAIL refused it) and whether
/// the stored bits changed.
fn write_field(buf: &mut [u8], f: &Field) -> (Frame, bool) {
    if f.signed {
        let old = get_signed(buf, f.offset, f.bits);
        let (over, new, reply) = if f.op == FieldOp::IncrBy {
            let over = signed_overflow(old, f.value, f.bits, f.overflow);
            let new = over.unwrap_or(old.wrapping_add(f.value));
            (over.is_some(), new, new)
        } else {
            let over = signed_overflow(f.value, 0, f.bits, f.overflow);
            (over.is_some(), over.unwrap_or(f.value), old)
        };
        if over && f.overflow == Overflow::Fail {
            return (Frame::Null, false);
        }
        set_bits(buf, f.offset, f.bits, new as u64);
        (Frame::Integer(reply), old != new)
    } else {
        let old = get_unsigned(buf, f.offset, f.bits);
        let (over, new, reply) = if f.op == FieldOp::IncrBy {
            let over = unsigned_overflow(old, f.value, f.bits, f.overflow);
            let new = over.unwrap_or(old.wrapping_add(f.value as u64));
            (over.is_some(), new, new)
        } else {
            let over = unsigned_overflow(f.value as u64, 0, f.bits, f.overflow);
            (over.is_some(), over.unwrap_or(f.value as u64), old)
        };
        if over && f.overflow == Overflow::Fail {
            return (Frame::Null, false);
        }
        set_bits(buf, f.offset, f.bits, new);
        (Frame::Integer(reply as i64), old != new)
    }
}

fn read_field(buf: &[u8], f: &Field) -> Frame {
    if f.signed {
        Frame::Integer(get_signed(buf, f.offset, f.bits))
    } else {
        Frame::Integer(get_unsigned(buf, f.offset, f.bits) as i64)
    }
}

fn bitfield_generic(ctx: &mut Ctx, argv: &[Bytes], read_only_cmd: bool) -> CmdResult {
    let key = &argv[1];
    let fields = parse_fields(ctx, argv)?;
    let highest = fields
        .iter()
        .filter(|f| f.op != FieldOp::Get)
        .map(|f| f.offset + f.bits as u64 - 1)
        .max();
    let Some(highest) = highest else {
        let s = read_str(ctx, key)?.unwrap_or_default();
        return Ok(Frame::Array(
            fields.iter().map(|f| read_field(&s, f)).collect(),
        ));
    };
    if read_only_cmd {
        return Err(CmdError::err(
            "ERR BITFIELD_RO only supports the GET subcommand",
        ));
    }
    // A key that OVERFLOW FAIL created but left unwritten is kept without an event, as in
    // Redis (the store records it for the log all the same).
    let (replies, changes, _created) =
        edit_str(ctx, key, (highest >> 3) as usize + 1, |buf, grew| {
            let mut changes = 0;
            let replies: Vec<Frame> = fields
                .iter()
                .map(|f| {
                    if f.op == FieldOp::Get {
                        return read_field(buf, f);
                    }
                    let (reply, changed) = write_field(buf, f);
                    if !matches!(reply, Frame::Null) && (grew || changed) {
                        changes += 1;
                    }
                    reply
                })
                .collect();
            (replies, changes, grew)
        })?;
    if changes > 0 {
        ctx.changed(event::STRING, "setbit", key);
    }
    Ok(Frame::Array(replies))
}

fn bitfield(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    bitfield_generic(ctx, argv, false)
}

fn bitfield_ro(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    bitfield_generic(ctx, argv, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bit_matches_redis_bitpos() {
        assert_eq!(first_bit(&[], true), -1);
        assert_eq!(first_bit(&[], false), 0);
        assert_eq!(first_bit(&[0xff; 20], false), 160);
        assert_eq!(first_bit(&[0; 20], true), -1);
        let mut v = vec![0u8; 37];
        v[33] = 0x10;
        assert_eq!(first_bit(&v, true), 33 * 8 + 3);
        let mut v = vec![0xffu8; 37];
        v[9] = 0xfe;
        assert_eq!(first_bit(&v, false), 9 * 8 + 7);
    }

    #[test]
    fn popcount_counts_every_byte() {
        let v: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let slow: u64 = v.iter().map(|b| b.count_ones() as u64).sum();
        assert_eq!(popcount(&v), slow);
        assert_eq!(
            popcount(&v[3..17]),
            v[3..17].iter().map(|b| b.count_ones() as u64).sum()
        );
    }

    #[test]
    fn bit_fields_round_trip() {
        let mut buf = vec![0u8; 16];
        set_bits(&mut buf, 7, 5, 23);
        assert_eq!(&buf[..2], &[0b0000_0001, 0b0111_0000]);
        assert_eq!(get_unsigned(&buf, 7, 5), 23);
        set_bits(&mut buf, 64, 64, u64::MAX);
        assert_eq!(get_signed(&buf, 64, 64), -1);
        assert_eq!(get_signed(&buf, 64, 4), -1);
        assert_eq!(get_unsigned(&buf, 120, 16), 0xff00);
    }

    #[test]
    fn overflow_rules() {
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Wrap), Some(4));
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Sat), Some(255));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Sat), Some(0));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Wrap), Some(251));
        assert_eq!(unsigned_overflow(5, 10, 8, Overflow::Wrap), None);
        assert_eq!(signed_overflow(127, 1, 8, Overflow::Wrap), Some(-128));
        assert_eq!(signed_overflow(-128, -1, 8, Overflow::Sat), Some(-128));
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Wrap),
            Some(i64::MIN)
        );
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Sat),
            Some(i64::MAX)
        );
        assert_eq!(
            signed_overflow(i64::MIN, -1, 64, Overflow::Sat),
            Some(i64::MIN)
        );
        assert_eq!(signed_overflow(3, -5, 4, Overflow::Fail), None);
    }
}
