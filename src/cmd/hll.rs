//! HyperLogLog: PFADD PFCOUNT PFMERGE over plain string values, in Redis 7.0's exact byte
//! representation (hyperloglog.c), so a HLL moved between Redis and deadbolt (GET/SET, DUMP,
//! replication of the value) reads the same and counts the same.
//!
//! Layout: "HYLL", encoding byte (0 dense, 1 sparse), 3 unused bytes, the cached cardinality
//! (8 bytes little endian, MSB of the last byte set = stale), then the registers: dense is
//! 16384 6-bit registers packed LSB first; sparse is ZERO (00xxxxxx), XZERO (01xxxxxx
//! xxxxxxxx) and VAL (1vvvvvxx) run-length opcodes.
//!
//! Values are client-settable strings, so every walk over them is bounds checked: a read one
//! byte past the end sees 0, as Redis's reads of the sds terminator do. The reference is the
//! redis-server 7.0.15 we compare against, which carries the CVE-2025-32023 fix: a sparse run
//! reaching past register 16383 makes the value corrupt even where 7.0.15's source would stop
//! at it and accept the registers before (hllMerge, hllSparseToDense).

use super::args::is;
use super::spec::{event, Ctx};
use super::spec::{flags::*, CommandSpec, KeySpec, KeySpecDoc, KEY1};
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
    CommandSpec::leaf(name, arity, flags, keys, &["hyperloglog"], handler)
}

const ALL_FROM_1: KeySpec = KeySpec {
    first: 1,
    last: -1,
    step: 1,
};

pub static COMMANDS: &[CommandSpec] = &[
    spec("pfadd", -2, WRITE | DENYOOM | FAST, KEY1, pfadd),
    // A write in effect (it stores the cached cardinality) but flagged read-only, as in Redis.
    spec("pfcount", -2, READONLY | MAY_REPLICATE, ALL_FROM_1, pfcount),
    spec("pfmerge", -2, WRITE | DENYOOM, ALL_FROM_1, pfmerge),
    CommandSpec::leaf(
        "pfdebug",
        3,
        WRITE | DENYOOM | ADMIN,
        KeySpec {
            first: 2,
            last: 2,
            step: 1,
        },
        &["hyperloglog", "admin", "dangerous"],
        pfdebug,
    ),
    CommandSpec::leaf(
        "pfselftest",
        1,
        ADMIN,
        super::spec::NO_KEYS,
        &["hyperloglog", "admin", "slow", "dangerous"],
        pfselftest,
    ),
];

/// Redis 7.0's key specifications for these commands, as COMMAND INFO prints them.
pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    ("pfadd", &[KeySpecDoc::range(&["RW", "insert"], 1, 0)]),
    (
        "pfcount",
        &[KeySpecDoc {
            notes: Some(
                "RW because it may change the internal representation of the key, and propagate to replicas",
            ),
            flags: &["RW", "access"],
            begin_index: 1,
            lastkey: -1,
            keystep: 1,
            keynum: None,
            keyword: None,
            limit: 0,
        }],
    ),
    (
        "pfmerge",
        &[
            KeySpecDoc::range(&["RW", "access", "insert"], 1, 0),
            KeySpecDoc::range(&["RO", "access"], 2, -1),
        ],
    ),
    ("pfdebug", &[KeySpecDoc::range(&["RW", "access"], 2, 0)]),
];

const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

/// Redis's `hll-sparse-max-bytes` default: a sparse HLL that would grow past this many bytes
/// is converted to dense. (Not a directive here yet.)
pub const SPARSE_MAX_BYTES: usize = 3000;

const P: u32 = 14;
const Q: usize = 64 - P as usize;
const REGISTERS: usize = 1 << P;
const HDR: usize = 16;
const DENSE_SIZE: usize = HDR + (REGISTERS * 6).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const CARD_MSB: usize = 15;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;
/// Redis's HLL_ALPHA_INF, 0.5 / ln 2 (0.721347520444481703680 rounded to a double).
const ALPHA_INF: f64 = 0.7213475204444817;

/// A sparse representation that does not describe exactly 16384 registers (Redis's -1 /
/// C_ERR from the sparse walkers).
#[derive(Debug, PartialEq)]
pub struct Corrupt;

/// MurmurHash64A as modified by Redis to be endian neutral.
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4a7935bd1e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in chunks.by_ref() {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        let mut k = u64::from_le_bytes(a);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, &b) in rest.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// Redis's hllPatLen: (register index, length of the 000..1 pattern).
fn pat_len(ele: &[u8]) -> (usize, u8) {
    // Redis passes the length as a C int; elements are at most proto-max-bulk-len.
    let hash = murmur64a(ele, 0xadc83b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Redis's isHLLObjectOrReply, once the value is known to be a string.
pub fn is_hll(s: &[u8]) -> bool {
    s.len() >= HDR
        && &s[..4] == b"HYLL"
        && s[4] <= SPARSE
        && (s[4] != DENSE || s.len() == DENSE_SIZE)
}

/// An empty sparse HLL, as createHLLObject builds it: one XZERO covering all registers.
fn new_hll() -> Vec<u8> {
    let mut v = vec![0u8; HDR + 2];
    v[..4].copy_from_slice(b"HYLL");
    v[4] = SPARSE;
    let l = XZERO_MAX_LEN - 1;
    v[HDR] = (l >> 8) as u8 | 0x40;
    v[HDR + 1] = (l & 0xff) as u8;
    v
}

fn invalidate_cache(v: &mut [u8]) {
    v[CARD_MSB] |= 0x80;
}

// ---- dense ------------------------------------------------------------------------------------

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = regs.get(byte).copied().unwrap_or(0) as u32;
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u32;
    (((b0 >> fb) | (b1 << (8 - fb))) & 63) as u8
}

fn dense_set(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let v = val as u32;
    if let Some(b) = regs.get_mut(byte) {
        *b &= !((63u32 << fb) as u8);
        *b |= (v << fb) as u8;
    }
    // The last register lies wholly in the last byte: nothing spills past it.
    if let Some(b) = regs.get_mut(byte + 1) {
        *b &= !((63u32 >> (8 - fb)) as u8);
        *b |= (v >> (8 - fb)) as u8;
    }
}

/// Sets register `i` to `count` if that raises it (Redis's hllDenseSet).
fn dense_raise(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(regs, i) {
        dense_set(regs, i, count);
        true
    } else {
        false
    }
}

// ---- sparse -----------------------------------------------------------------------------------
//
// One known divergence, on corrupt values only: an XZERO cut to its first byte by the end of
// the string. Redis reads the byte after the string as its second half; after a PFADD splits
// such an XZERO, that byte is a stale byte of the split sequence that outlives the command.
// Here the byte past the end always reads 0 (never out of bounds), so from then on the two
// may store different bytes for that value.

enum Op {
    /// Run of zero registers.
    Zero(usize),
    /// (value, run length).
    Val(u8, usize),
}

/// The opcode at `p` and its size in bytes (an XZERO in the last byte reads a 0 after it).
fn op_at(v: &[u8], p: usize) -> (Op, usize) {
    let b = v[p];
    if b & 0xc0 == 0 {
        (Op::Zero((b & 0x3f) as usize + 1), 1)
    } else if b & 0x80 == 0 {
        let lo = v.get(p + 1).copied().unwrap_or(0) as usize;
        (Op::Zero((((b & 0x3f) as usize) << 8 | lo) + 1), 2)
    } else {
        (Op::Val(((b >> 2) & 0x1f) + 1, (b & 3) as usize + 1), 1)
    }
}

fn val_op(val: u8, len: usize) -> u8 {
    ((val - 1) << 2) | (len as u8 - 1) | 0x80
}

fn is_val(b: u8) -> bool {
    b & 0x80 != 0
}

/// Appends ZERO or XZERO opcodes for `len` (1..=16384) zero registers.
fn push_zeros(seq: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        let l = len - 1;
        seq.push((l >> 8) as u8 | 0x40);
        seq.push((l & 0xff) as u8);
    } else {
        seq.push((len - 1) as u8);
    }
}

/// Redis's hllSparseToDense (a no-op on a dense value).
fn sparse_to_dense(v: &mut Vec<u8>) -> Result<(), Corrupt> {
    if v[4] == DENSE {
        return Ok(());
    }
    let mut d = vec![0u8; DENSE_SIZE];
    d[..HDR].copy_from_slice(&v[..HDR]);
    d[4] = DENSE;
    let mut idx = 0usize;
    let mut p = HDR;
    while p < v.len() {
        let (op, size) = op_at(v, p);
        match op {
            Op::Zero(n) => idx += n,
            Op::Val(val, n) => {
                if idx + n > REGISTERS {
                    return Err(Corrupt);
                }
                for i in idx..idx + n {
                    dense_set(&mut d[HDR..], i, val);
                }
                idx += n;
            }
        }
        p += size;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    *v = d;
    Ok(())
}

/// Redis's hllSparseSet: raises register `index` to `count`, splitting the opcode that covers
/// it, merging equal neighbours, and promoting to dense when the value does not fit a VAL
/// opcode or the string would outgrow `max_bytes`. Ok(true) if a register changed.
fn sparse_set(v: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) -> Result<bool, Corrupt> {
    if count > VAL_MAX_VALUE {
        return promote(v, index, count);
    }
    // Step 1: find the opcode covering `index`.
    let end = v.len();
    let (mut p, mut first, mut span, mut size) = (HDR, 0usize, 0usize, 1usize);
    let mut prev = None;
    let mut op = Op::Zero(0);
    while p < end {
        let (o, s) = op_at(v, p);
        span = match o {
            Op::Zero(n) | Op::Val(_, n) => n,
        };
        op = o;
        size = s;
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += s;
        first += span;
    }
    if span == 0 || p >= end {
        return Err(Corrupt);
    }
    // Step 2: the trivial in-place updates, else the replacement sequence.
    let mut seq = Vec::with_capacity(5);
    let last = first + span - 1;
    match op {
        Op::Val(old, _) if old >= count => return Ok(false),
        Op::Val(_, 1) => {
            v[p] = val_op(count, 1);
        }
        Op::Zero(1) if size == 1 => {
            v[p] = val_op(count, 1);
        }
        Op::Zero(_) => {
            if index != first {
                push_zeros(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                push_zeros(&mut seq, last - index);
            }
        }
        Op::Val(cur, _) => {
            if index != first {
                seq.push(val_op(cur, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(cur, last - index));
            }
        }
    }
    // Step 3: splice the sequence in place of the opcode.
    if !seq.is_empty() {
        let new_len = end + seq.len() - size;
        if seq.len() > size && new_len > max_bytes {
            return promote(v, index, count);
        }
        // An XZERO cut off by the end of the string occupies one byte but counts as two, as
        // in Redis, whose length arithmetic then drops the sequence's last byte.
        let tail = (p + size).min(end);
        v.splice(p..tail, seq);
        v.truncate(new_len);
    }
    // Step 4: merge adjacent VAL opcodes of equal value, up to 5 opcodes from `prev`.
    let mut p = prev.unwrap_or(HDR);
    let mut scan = 5;
    while p < v.len() && scan > 0 {
        scan -= 1;
        let b = v[p];
        if b & 0xc0 == 0x40 {
            p += 2;
            continue;
        } else if b & 0xc0 == 0 {
            p += 1;
            continue;
        }
        if p + 1 < v.len() && is_val(v[p + 1]) {
            let (v1, l1) = (((b >> 2) & 0x1f) + 1, (b & 3) as usize + 1);
            let b2 = v[p + 1];
            let (v2, l2) = (((b2 >> 2) & 0x1f) + 1, (b2 & 3) as usize + 1);
            if v1 == v2 && l1 + l2 <= VAL_MAX_LEN {
                v[p + 1] = val_op(v1, l1 + l2);
                v.remove(p);
                continue;
            }
        }
        p += 1;
    }
    invalidate_cache(v);
    Ok(true)
}

fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    sparse_to_dense(v)?;
    Ok(dense_raise(&mut v[HDR..], index, count))
}

/// Redis's hllAdd on a value that passed `is_hll`.
fn add(v: &mut Vec<u8>, ele: &[u8], max_bytes: usize) -> Result<bool, Corrupt> {
    let (index, count) = pat_len(ele);
    if v[4] == DENSE {
        Ok(dense_raise(&mut v[HDR..], index, count))
    } else {
        sparse_set(v, index, count, max_bytes)
    }
}

/// Raises `max[i]` to each register of `v` (Redis's hllMerge).
fn merge(max: &mut [u8; REGISTERS], v: &[u8]) -> Result<(), Corrupt> {
    if v[4] == DENSE {
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(&v[HDR..], i));
        }
        return Ok(());
    }
    let mut i = 0usize;
    let mut p = HDR;
    while p < v.len() {
        let (op, size) = op_at(v, p);
        match op {
            Op::Zero(n) => i += n,
            Op::Val(val, n) => {
                if i + n > REGISTERS {
                    return Err(Corrupt);
                }
                for m in &mut max[i..i + n] {
                    *m = (*m).max(val);
                }
                i += n;
            }
        }
        p += size;
    }
    if i != REGISTERS {
        return Err(Corrupt);
    }
    Ok(())
}

/// Register-value histogram of a HLL value (Redis's hllDenseRegHisto / hllSparseRegHisto).
fn histogram(v: &[u8]) -> Result<[u64; 64], Corrupt> {
    let mut h = [0u64; 64];
    if v[4] == DENSE {
        for i in 0..REGISTERS {
            h[dense_get(&v[HDR..], i) as usize] += 1;
        }
        return Ok(h);
    }
    let mut idx = 0usize;
    let mut p = HDR;
    while p < v.len() {
        let (op, size) = op_at(v, p);
        match op {
            Op::Zero(n) => {
                idx += n;
                h[0] += n as u64;
            }
            Op::Val(val, n) => {
                idx += n;
                h[val as usize] += n as u64;
            }
        }
        p += size;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    Ok(h)
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let zp = z;
        z += x * y;
        y += y;
        if zp == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let zp = z;
        y *= 0.5;
        // Redis writes pow(1 - x, 2), which C compilers emit as this multiplication.
        z -= (1.0 - x) * (1.0 - x) * y;
        if zp == z {
            return z / 3.0;
        }
    }
}

/// Ertl's improved estimator over a register histogram (Redis 7.0's hllCount).
fn estimate(h: &[u64; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - h[Q + 1] as f64) / m);
    for j in (1..=Q).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    let e = (ALPHA_INF * m * m / z).round();
    // Registers no real count produces (a client-written dense value of 63s) make z 0: C's
    // llroundl then returns LONG_MIN for the infinite quotient, which Redis replies as is.
    if e.is_nan() || !(-9223372036854775808.0..9223372036854775808.0).contains(&e) {
        1 << 63
    } else {
        e as i64 as u64
    }
}

fn cached_card(v: &[u8]) -> Option<u64> {
    if v[CARD_MSB] & 0x80 != 0 {
        return None;
    }
    let mut a = [0u8; 8];
    a.copy_from_slice(&v[8..16]);
    Some(u64::from_le_bytes(a))
}

// ---- commands ---------------------------------------------------------------------------------

/// The HLL string at `key` (None if missing), checked as Redis's isHLLObjectOrReply does.
/// `read` counts keyspace hits/misses (lookupKeyRead) where Redis does.
fn load(ctx: &mut Ctx, key: &[u8], read: bool) -> CmdResult<Option<Bytes>> {
    let now = ctx.now;
    let found = match ctx.db().get(key, now) {
        None => None,
        Some(e) => match &e.value {
            Value::Str(s) => Some(s.clone()),
            _ => return Err(CmdError::WrongType),
        },
    };
    if read {
        if found.is_some() {
            ctx.srv.stats.keyspace_hits += 1;
        } else {
            ctx.srv.stats.keyspace_misses += 1;
        }
    }
    match found {
        Some(s) if !is_hll(&s) => Err(CmdError::err(NOT_HLL)),
        f => Ok(f),
    }
}

/// The HLL at `key` moved out of the keyspace (no copy when nothing else holds the buffer:
/// Redis edits the string in place); every path must `store` it back.
fn take(ctx: &mut Ctx, key: &[u8]) -> CmdResult<Option<Vec<u8>>> {
    let now = ctx.now;
    // Checked through a borrow, not `load`'s clone: a second reference would make `bytes`
    // allocate a shared header for the buffer on every PFADD only to free it again below.
    match ctx.db().get(key, now).map(|e| &e.value) {
        None => return Ok(None),
        Some(Value::Str(s)) if is_hll(s) => {}
        Some(Value::Str(_)) => return Err(CmdError::err(NOT_HLL)),
        Some(_) => return Err(CmdError::WrongType),
    }
    Ok(match ctx.db().get_mut(key, now).map(|e| &mut e.value) {
        Some(Value::Str(s)) => Some(Vec::from(std::mem::take(s))),
        _ => None,
    })
}

/// Writes a HLL back, keeping the key's TTL (Redis edits the string in place).
fn store(ctx: &mut Ctx, key: &[u8], mut v: Vec<u8>) {
    // A Vec with spare capacity becomes a Bytes that keeps the whole buffer plus a separate
    // header: a sparse HLL of 20 items took 258 bytes a key against Redis's 168.
    v.shrink_to_fit();
    let now = ctx.now;
    let db = ctx.db();
    match db.get_mut(key, now).map(|e| &mut e.value) {
        Some(Value::Str(s)) => *s = Bytes::from(v),
        _ => db.set(key, Value::Str(Bytes::from(v)), 0),
    }
}

/// A change Redis makes without an event (the cardinality cache; a PFADD cut short by a
/// corrupt value): WATCH sees it (the store has recorded it for the log).
fn changed_quietly(ctx: &mut Ctx, key: &[u8]) {
    let db = ctx.client.db;
    ctx.srv.signal_modified_key(db, key);
}

fn pfadd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let (mut v, mut updated) = match take(ctx, key)? {
        None => (new_hll(), true),
        Some(v) => (v, false),
    };
    for ele in &argv[2..] {
        match add(&mut v, ele, SPARSE_MAX_BYTES) {
            Ok(changed) => updated |= changed,
            Err(Corrupt) => {
                // Registers raised before the corrupt part stay raised, as in Redis.
                store(ctx, key, v);
                changed_quietly(ctx, key);
                return Err(CmdError::err(CORRUPT));
            }
        }
    }
    if updated {
        invalidate_cache(&mut v);
    }
    store(ctx, key, v);
    if updated {
        ctx.changed(event::STRING, "pfadd", key);
    }
    Ok(Frame::Integer(updated as i64))
}

fn pfcount(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 2 {
        let mut max = Box::new([0u8; REGISTERS]);
        for key in &argv[1..] {
            if let Some(s) = load(ctx, key, true)? {
                merge(&mut max, &s).map_err(|_| CmdError::err(CORRUPT))?;
            }
        }
        let mut h = [0u64; 64];
        for &r in max.iter() {
            h[r as usize] += 1;
        }
        return Ok(Frame::Integer(estimate(&h) as i64));
    }
    let key = &argv[1];
    let Some(s) = load(ctx, key, true)? else {
        return Ok(Frame::Integer(0));
    };
    if let Some(card) = cached_card(&s) {
        return Ok(Frame::Integer(card as i64));
    }
    let card = estimate(&histogram(&s).map_err(|_| CmdError::err(CORRUPT))?);
    let mut v = Vec::from(s);
    v[8..16].copy_from_slice(&card.to_le_bytes());
    store(ctx, key, v);
    changed_quietly(ctx, key);
    Ok(Frame::Integer(card as i64))
}

fn pfmerge(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut max = Box::new([0u8; REGISTERS]);
    let mut use_dense = false;
    for key in &argv[1..] {
        if let Some(s) = load(ctx, key, true)? {
            use_dense |= s[4] == DENSE;
            merge(&mut max, &s).map_err(|_| CmdError::err(CORRUPT))?;
        }
    }
    let dest = &argv[1];
    // The destination was validated above as one of the sources.
    let mut v = match load(ctx, dest, false)? {
        None => new_hll(),
        Some(s) => Vec::from(s),
    };
    if use_dense && sparse_to_dense(&mut v).is_err() {
        return Err(CmdError::err(CORRUPT));
    }
    for (i, &m) in max.iter().enumerate() {
        if m == 0 {
            continue;
        }
        if v[4] == DENSE {
            dense_raise(&mut v[HDR..], i, m);
        } else {
            // Redis ignores a corrupt destination here (it was merged above without error).
            let _ = sparse_set(&mut v, i, m, SPARSE_MAX_BYTES);
        }
    }
    invalidate_cache(&mut v);
    store(ctx, dest, v);
    // Redis announces a merge as `pfadd` ("semantically a mass-add of elements").
    ctx.changed(event::STRING, "pfadd", dest);
    Ok(Frame::ok())
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key: Redis's HLL introspection. The key is looked
/// up and checked before the subcommand is.
fn pfdebug(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[2];
    let Some(s) = load(ctx, key, false)? else {
        return Err(CmdError::err("ERR The specified key does not exist"));
    };
    let sub = &argv[1];
    if is(sub, "getreg") || is(sub, "todense") {
        let converted = s[4] == SPARSE;
        let mut v = Vec::from(s);
        if converted {
            sparse_to_dense(&mut v).map_err(|_| CmdError::err(CORRUPT))?;
        }
        let regs: Vec<Frame> = if is(sub, "getreg") {
            (0..REGISTERS)
                .map(|i| Frame::Integer(dense_get(&v[HDR..], i) as i64))
                .collect()
        } else {
            Vec::new()
        };
        if converted {
            // Redis propagates this without signalling the key; the store records it for
            // the log.
            store(ctx, key, v);
        }
        return Ok(if is(sub, "getreg") {
            Frame::Array(regs)
        } else {
            Frame::Integer(converted as i64)
        });
    }
    if is(sub, "decode") {
        if s[4] != SPARSE {
            return Err(CmdError::err("ERR HLL encoding is not sparse"));
        }
        let mut out = String::new();
        let mut p = HDR;
        let mut ops = 0;
        while p < s.len() {
            // Every opcode covers at least one register, so a sound value has at most 16384;
            // past that, a client-written string would make a reply ~4x its size (Redis
            // builds it whole): answer that the value is corrupt instead.
            ops += 1;
            if ops > REGISTERS {
                return Err(CmdError::err(CORRUPT));
            }
            let (op, size) = op_at(&s, p);
            match op {
                Op::Zero(n) if size == 1 => out.push_str(&format!("z:{n} ")),
                Op::Zero(n) => out.push_str(&format!("Z:{n} ")),
                Op::Val(val, n) => out.push_str(&format!("v:{val},{n} ")),
            }
            p += size;
        }
        return Ok(Frame::Bulk(Bytes::from(out.trim_matches(' ').to_string())));
    }
    if is(sub, "encoding") {
        return Ok(Frame::simple(if s[4] == DENSE {
            "dense"
        } else {
            "sparse"
        }));
    }
    // Redis prints the name with %s (up to a NUL byte) and turns CR and LF into spaces so a
    // client's bytes cannot end the error line. (Bytes that are not UTF-8 print as U+FFFD:
    // CmdError holds text.)
    let name = sub.split(|&b| b == 0).next().unwrap_or(&[]);
    let name = String::from_utf8_lossy(name).replace(['\r', '\n'], " ");
    Err(CmdError::erf(format!(
        "Unknown PFDEBUG subcommand '{name}'"
    )))
}

/// PFSELFTEST: Redis's pfselftestCommand. Random values written to and read back from every
/// dense register (1000 rounds), then 10,000,000 distinct elements added to a dense and a
/// sparse HLL at once, checking at each power of ten that the small one is still sparse, that
/// both count the same and that the count is within six standard errors. Like Redis it holds
/// the server for the few seconds this takes (it is an admin command).
fn pfselftest(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    const TEST_CYCLES: usize = 1000;
    let failed = |text: String| Err(CmdError::erf(format!("TESTFAILED {text}")));
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..4].copy_from_slice(b"HYLL");
    dense[4] = DENSE;
    let mut expected = vec![0u8; REGISTERS];
    for _ in 0..TEST_CYCLES {
        for (i, e) in expected.iter_mut().enumerate() {
            *e = fastrand::u8(..) & 63;
            dense_set(&mut dense[HDR..], i, *e);
        }
        for (i, e) in expected.iter().enumerate() {
            let got = dense_get(&dense[HDR..], i);
            if got != *e {
                return failed(format!("Register {i} should be {e} but is {got}"));
            }
        }
    }
    dense[HDR..].fill(0);
    let mut sparse = new_hll();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    let seed = fastrand::u64(..);
    let count = |v: &[u8]| histogram(v).map(|h| estimate(&h));
    for j in 1..=10_000_000u64 {
        // The element is the 8 bytes of the integer as the machine stores it.
        let ele = (j ^ seed).to_ne_bytes();
        let (index, n) = pat_len(&ele);
        dense_raise(&mut dense[HDR..], index, n);
        if add(&mut sparse, &ele, SPARSE_MAX_BYTES).is_err() {
            return failed("sparse HLL corrupt".into());
        }
        if j != checkpoint {
            continue;
        }
        if (j as usize) < SPARSE_MAX_BYTES / 2 && sparse[4] != SPARSE {
            return failed("sparse encoding not used".into());
        }
        let (Ok(d), Ok(sp)) = (count(&dense), count(&sparse)) else {
            return failed("dense/sparse disagree".into());
        };
        if d != sp {
            return failed("dense/sparse disagree".into());
        }
        let abserr = (checkpoint as i64 - d as i64).unsigned_abs();
        let maxerr = if j == 10 {
            1
        } else {
            (relerr * 6.0 * checkpoint as f64).ceil() as u64
        };
        if abserr > maxerr {
            return failed(format!("Too big error. card:{checkpoint} abserr:{abserr}"));
        }
        checkpoint *= 10;
    }
    Ok(Frame::ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sparse(ops: &[u8]) -> Vec<u8> {
        let mut v = new_hll();
        v.truncate(HDR);
        v.extend_from_slice(ops);
        v
    }

    #[test]
    fn murmur_matches_reference_vectors() {
        // The empty input hashes to the seed mixed alone; a change of one byte changes it.
        assert_ne!(murmur64a(b"a", 0xadc83b19), murmur64a(b"b", 0xadc83b19));
        assert_eq!(murmur64a(b"", 0), 0);
    }

    #[test]
    fn dense_registers_round_trip() {
        let mut regs = vec![0u8; DENSE_SIZE - HDR];
        for i in 0..REGISTERS {
            dense_set(&mut regs, i, (i * 7 % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i * 7 % 64) as u8, "register {i}");
        }
    }

    #[test]
    fn empty_hll_counts_zero() {
        let v = new_hll();
        assert!(is_hll(&v));
        assert_eq!(estimate(&histogram(&v).unwrap()), 0);
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut s = new_hll();
        let mut d = new_hll();
        sparse_to_dense(&mut d).unwrap();
        for i in 0..5000u32 {
            let e = i.to_string();
            add(&mut s, e.as_bytes(), usize::MAX).unwrap();
            add(&mut d, e.as_bytes(), usize::MAX).unwrap();
        }
        assert_eq!(s[4], SPARSE);
        assert_eq!(
            estimate(&histogram(&s).unwrap()),
            estimate(&histogram(&d).unwrap())
        );
        sparse_to_dense(&mut s).unwrap();
        assert_eq!(s[HDR..], d[HDR..]);
    }

    #[test]
    fn corrupt_sparse_never_panics() {
        let cases: &[&[u8]] = &[
            &[],
            &[0x40],                         // XZERO cut off by the end
            &[0x7f, 0xff],                   // XZERO of 16384 ...
            &[0x7f, 0xff, 0x7f, 0xff, 0x80], // ... and registers beyond the last
            &[0x00],
            &[0xff, 0xff, 0xff],
            &[0x3f; 300],
        ];
        for ops in cases {
            for n in 0..ops.len() + 1 {
                let v = sparse(&ops[..n]);
                let _ = histogram(&v);
                let mut max = [0u8; REGISTERS];
                let _ = merge(&mut max, &v);
                let mut w = v.clone();
                let _ = sparse_to_dense(&mut w);
                for i in 0..200u32 {
                    let mut w = v.clone();
                    let _ = add(&mut w, &i.to_le_bytes(), 40);
                    assert!(w.len() >= HDR);
                }
            }
        }
    }
}
