//! Redis's DUMP payload: one value in RDB form, then the RDB version (2 bytes, little endian)
//! and a CRC64 (Jones polynomial, as Redis's crc64.c) of everything before it (8 bytes, little
//! endian). Values move between Redis 7.0 and deadbolt in both directions.
//!
//! `dump` writes the encoding Redis 7.0 would use for the same data under the live thresholds
//! (encoding.rs): listpacks and intsets within them, hash tables and skiplists past them, a
//! quicklist of listpacks for lists, strings over 20 bytes LZF-compressed by a port of Redis's
//! compressor (so the bytes are Redis's own for data built the same way).
//!
//! `restore` reads every type Redis 7.0 writes (and the older list, zset, zipmap, ziplist and
//! quicklist types it still loads). The payload comes from a client: every length is checked against the
//! bytes that remain before anything is allocated for it, LZF output is bounded by what its
//! input can expand to, and listpacks, ziplists and intsets are validated entry by entry (Redis
//! does that only with `sanitize-dump-payload yes`). Anything malformed is `Bad`, never a panic.

use super::hash::HashValue;
use super::value::{SetValue, Value};
use super::zset::ZSet;
use crate::protocol::number::{fmt_g17, parse_i64};
use bytes::Bytes;
use std::collections::VecDeque;

/// Redis 7.0's RDB_VERSION.
pub const RDB_VERSION: u16 = 10;

const T_STRING: u8 = 0;
const T_LIST: u8 = 1;
const T_SET: u8 = 2;
const T_ZSET: u8 = 3;
const T_HASH: u8 = 4;
const T_ZSET_2: u8 = 5;
const T_HASH_ZIPMAP: u8 = 9;
const T_LIST_ZIPLIST: u8 = 10;
const T_SET_INTSET: u8 = 11;
const T_ZSET_ZIPLIST: u8 = 12;
const T_HASH_ZIPLIST: u8 = 13;
const T_LIST_QUICKLIST: u8 = 14;
const T_HASH_LISTPACK: u8 = 16;
const T_ZSET_LISTPACK: u8 = 17;
const T_LIST_QUICKLIST_2: u8 = 18;
const T_STREAM_LISTPACKS: u8 = 15;
const T_STREAM_LISTPACKS_2: u8 = 19;
/// Redis's STREAM_ITEM_FLAG_DELETED / _SAMEFIELDS.
const STREAM_DELETED: i64 = 1;
const STREAM_SAMEFIELDS: i64 = 2;

const NODE_PLAIN: u64 = 1;
const NODE_PACKED: u64 = 2;

/// The payload is malformed (Redis: "Bad data format").
#[derive(Debug, PartialEq, Eq)]
pub struct Bad;

type Res<T> = Result<T, Bad>;

// ---------------------------------------------------------------------------------------------
// CRC64 (crc64.c: reflected Jones polynomial, initial value 0, no final xor).

const CRC64_TABLE: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    for &b in data {
        crc = CRC64_TABLE[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// Whether `payload` ends with a version this server reads and a matching checksum (Redis's
/// verifyDumpPayload); the RDB body if so.
pub fn verify(payload: &[u8]) -> Option<&[u8]> {
    let len = payload.len();
    if len < 10 {
        return None;
    }
    let footer = &payload[len - 10..];
    let ver = u16::from_le_bytes([footer[0], footer[1]]);
    if ver > RDB_VERSION {
        return None;
    }
    let crc = crc64(0, &payload[..len - 8]);
    if crc.to_le_bytes() != footer[2..] {
        return None;
    }
    Some(&payload[..len - 10])
}

// ---------------------------------------------------------------------------------------------
// Writing.

fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
    } else if n <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// rdbEncodeInteger: a string that is an integer fitting 32 bits is stored as one.
fn put_int(out: &mut Vec<u8>, v: i64) -> bool {
    if let Ok(v) = i8::try_from(v) {
        out.extend_from_slice(&[0xc0, v as u8]);
    } else if let Ok(v) = i16::try_from(v) {
        out.push(0xc1);
        out.extend_from_slice(&v.to_le_bytes());
    } else if let Ok(v) = i32::try_from(v) {
        out.push(0xc2);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// rdbSaveRawString: an integer when it is one, LZF-compressed past 20 bytes when that saves
/// at least 4 bytes (and `compress`, Redis's `rdbcompression`), else verbatim.
fn put_string(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    if s.len() <= 11 {
        if let Some(v) = parse_i64(s) {
            if put_int(out, v) {
                return;
            }
        }
    }
    if compress && s.len() > 20 {
        if let Some(c) = lzf_compress(s, s.len() - 4) {
            out.push(0xc3);
            put_len(out, c.len() as u64);
            put_len(out, s.len() as u64);
            out.extend_from_slice(&c);
            return;
        }
    }
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// lzf_compress (lzf_c.c with Redis's settings: HLOG 16, VERY_FAST, hash table zeroed), byte
/// for byte, so a DUMP equals Redis's. None when the output would not fit `out_len` bytes.
pub fn lzf_compress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    const HLOG: u32 = 16;
    const MAX_LIT: usize = 1 << 5;
    const MAX_OFF: usize = 1 << 13;
    const MAX_REF: usize = (1 << 8) + (1 << 3);
    let in_len = input.len();
    if in_len == 0 || out_len == 0 || in_len < 3 {
        return None;
    }
    let frst = |p: usize| ((input[p] as u32) << 8) | input[p + 1] as u32;
    let next = |v: u32, p: usize| (v << 8) | input[p + 2] as u32;
    let idx = |h: u32| {
        ((h >> (3 * 8 - HLOG)).wrapping_sub(h.wrapping_mul(5)) & ((1 << HLOG) - 1)) as usize
    };
    // Positions + 1 (0: empty slot).
    let mut htab = vec![0u32; 1 << HLOG];
    let mut out = vec![0u8; out_len + 4];
    let (mut ip, mut op) = (0usize, 1usize);
    let mut lit: usize = 0;
    let mut hval = frst(ip);
    while ip < in_len - 2 {
        hval = next(hval, ip);
        let slot = idx(hval);
        let r = htab[slot].checked_sub(1).map(|r| r as usize);
        htab[slot] = ip as u32 + 1;
        let found = r.filter(|&r| {
            r > 0
                && r < ip
                && ip - r - 1 < MAX_OFF
                && input[r + 2] == input[ip + 2]
                && input[r] == input[ip]
                && input[r + 1] == input[ip + 1]
        });
        if let Some(r) = found {
            let off = ip - r - 1;
            let mut len = 2usize;
            let maxlen = (in_len - ip - len).min(MAX_REF);
            if op + 4 >= out_len && op - (lit == 0) as usize + 4 >= out_len {
                return None;
            }
            out[op - lit - 1] = (lit as u8).wrapping_sub(1);
            op -= (lit == 0) as usize;
            let mut mismatch = false;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if input[r + len] != input[ip + len] {
                        mismatch = true;
                        break;
                    }
                }
            }
            if !mismatch {
                loop {
                    len += 1;
                    if !(len < maxlen && input[r + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2;
            ip += 1;
            if len < 7 {
                out[op] = ((off >> 8) + (len << 5)) as u8;
                op += 1;
            } else {
                out[op] = ((off >> 8) + (7 << 5)) as u8;
                out[op + 1] = (len - 7) as u8;
                op += 2;
            }
            out[op] = off as u8;
            op += 1;
            lit = 0;
            op += 1;
            ip += len + 1;
            if ip >= in_len - 2 {
                break;
            }
            ip -= 2;
            hval = frst(ip);
            hval = next(hval, ip);
            htab[idx(hval)] = ip as u32 + 1;
            ip += 1;
            hval = next(hval, ip);
            htab[idx(hval)] = ip as u32 + 1;
            ip += 1;
        } else {
            if op >= out_len {
                return None;
            }
            lit += 1;
            out[op] = input[ip];
            op += 1;
            ip += 1;
            if lit == MAX_LIT {
                out[op - lit - 1] = (lit - 1) as u8;
                lit = 0;
                op += 1;
            }
        }
    }
    if op + 3 > out_len {
        return None;
    }
    while ip < in_len {
        lit += 1;
        out[op] = input[ip];
        op += 1;
        ip += 1;
        if lit == MAX_LIT {
            out[op - lit - 1] = (lit - 1) as u8;
            lit = 0;
            op += 1;
        }
    }
    out[op - lit - 1] = (lit as u8).wrapping_sub(1);
    op -= (lit == 0) as usize;
    out.truncate(op);
    Some(out)
}

/// Listpack encoding of an integer entry (lpEncodeIntegerGetType).
fn lp_put_int(out: &mut Vec<u8>, v: i64) -> usize {
    let start = out.len();
    if (0..=127).contains(&v) {
        out.push(v as u8);
    } else if (-4096..=4095).contains(&v) {
        let u = if v < 0 { (1i64 << 13) + v } else { v } as u16;
        out.extend_from_slice(&[0xc0 | (u >> 8) as u8, u as u8]);
    } else if let Ok(v) = i16::try_from(v) {
        out.push(0xf1);
        out.extend_from_slice(&v.to_le_bytes());
    } else if (-8_388_608..=8_388_607).contains(&v) {
        out.push(0xf2);
        out.extend_from_slice(&v.to_le_bytes()[..3]);
    } else if let Ok(v) = i32::try_from(v) {
        out.push(0xf3);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        out.push(0xf4);
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.len() - start
}

fn lp_put_backlen(out: &mut Vec<u8>, l: usize) {
    let l = l as u64;
    match l {
        0..=127 => out.push(l as u8),
        128..16383 => out.extend_from_slice(&[(l >> 7) as u8, (l & 127) as u8 | 128]),
        16383..2097151 => out.extend_from_slice(&[
            (l >> 14) as u8,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]),
        2097151..268435455 => out.extend_from_slice(&[
            (l >> 21) as u8,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]),
        _ => out.extend_from_slice(&[
            (l >> 28) as u8,
            ((l >> 21) & 127) as u8 | 128,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]),
    }
}

/// A listpack being built (lpNew + lpAppend): strings that are canonical integers become
/// integer entries, as lpAppend does.
struct Lp {
    buf: Vec<u8>,
    count: usize,
}

impl Lp {
    fn new() -> Lp {
        Lp {
            buf: vec![0; 6],
            count: 0,
        }
    }

    /// The bytes `s` would add (entry and backlen).
    fn entry_size(s: &[u8]) -> usize {
        let mut tmp = Vec::new();
        Lp::encode(&mut tmp, s);
        tmp.len()
    }

    fn encode(out: &mut Vec<u8>, s: &[u8]) {
        let n = match parse_i64(s) {
            Some(v) => lp_put_int(out, v),
            None => {
                let start = out.len();
                let len = s.len();
                if len < 64 {
                    out.push(0x80 | len as u8);
                } else if len < 4096 {
                    out.extend_from_slice(&[0xe0 | (len >> 8) as u8, len as u8]);
                } else {
                    out.push(0xf0);
                    out.extend_from_slice(&(len as u32).to_le_bytes());
                }
                out.extend_from_slice(s);
                out.len() - start
            }
        };
        lp_put_backlen(out, n);
    }

    fn push(&mut self, s: &[u8]) {
        Lp::encode(&mut self.buf, s);
        self.count += 1;
    }

    fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xff);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let n = self.count.min(u16::MAX as usize) as u16;
        self.buf[4..6].copy_from_slice(&n.to_le_bytes());
        self.buf
    }
}

/// A score as a listpack holds it (zzlInsertAt stores d2string's text).
fn d2string(s: f64) -> Vec<u8> {
    if s.is_nan() {
        return b"nan".to_vec();
    }
    if s.is_infinite() {
        return if s < 0.0 {
            b"-inf".to_vec()
        } else {
            b"inf".to_vec()
        };
    }
    if s == 0.0 {
        return if s.is_sign_negative() {
            b"-0".to_vec()
        } else {
            b"0".to_vec()
        };
    }
    let lim = (i64::MAX / 2) as f64;
    if (-lim..=lim).contains(&s) && s == (s as i64) as f64 {
        return (s as i64).to_string().into_bytes();
    }
    fmt_g17(s).into_bytes()
}

pub fn zset_listpack(z: &ZSet) -> Vec<u8> {
    let mut lp = Lp::new();
    for (m, s) in z.iter_from(0) {
        lp.push(m);
        lp.push(&d2string(s));
    }
    lp.finish()
}

pub fn hash_listpack(h: &HashValue) -> Vec<u8> {
    let mut lp = Lp::new();
    for (f, v) in h.iter() {
        lp.push(f);
        lp.push(v);
    }
    lp.finish()
}

/// An all-integer set as an intset: the narrowest width that holds every member, sorted.
pub fn intset_bytes(s: &SetValue) -> Vec<u8> {
    let mut ints: Vec<i64> = s.iter().filter_map(|m| parse_i64(m)).collect();
    ints.sort_unstable();
    let width: usize = if ints.iter().all(|&v| i16::try_from(v).is_ok()) {
        2
    } else if ints.iter().all(|&v| i32::try_from(v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * ints.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(ints.len() as u32).to_le_bytes());
    for v in ints {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

/// Redis's quicklist `packed_threshold` (process-wide, as in Redis): an element of at least
/// this many bytes is a plain node of its own. DEBUG QUICKLIST-PACKED-THRESHOLD sets it.
static PACKED_THRESHOLD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1 << 30);

/// quicklistisSetPackedThreshold: 0 restores 1 GB; up to 4 GB less 1 MB. False if refused.
pub fn set_packed_threshold(sz: u64) -> bool {
    if sz > (1 << 32) - (1 << 20) {
        return false;
    }
    let sz = if sz == 0 { 1 << 30 } else { sz };
    PACKED_THRESHOLD.store(sz, std::sync::atomic::Ordering::Relaxed);
    true
}

/// Whether an element this long is a plain node (isLargeElement).
pub fn is_large_element(len: usize) -> bool {
    len as u64 >= PACKED_THRESHOLD.load(std::sync::atomic::Ordering::Relaxed)
}

/// Splits a list into quicklist nodes as Redis's pushes at the tail do
/// (_quicklistNodeAllowInsert: the node's listpack bytes plus the element's length plus 8 within
/// the size level of a negative fill, else within 8 KB and under a positive fill's count).
/// Returns each node's (entries, listpack bytes).
pub fn quicklist_nodes<'a>(
    items: impl Iterator<Item = &'a [u8]>,
    fill: i64,
) -> Vec<(usize, usize)> {
    const LEVELS: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
    const SAFETY: usize = 8192;
    let mut nodes = Vec::new();
    let (mut bytes, mut count) = (0usize, 0usize);
    for it in items {
        if is_large_element(it.len()) {
            // A plain node: the element alone, its size the element's.
            if count > 0 {
                nodes.push((count, bytes));
            }
            nodes.push((1, it.len()));
            (bytes, count) = (0, 0);
            continue;
        }
        let allowed = count > 0 && {
            let new_sz = bytes + it.len() + 8;
            let level = usize::try_from(-fill - 1).ok().and_then(|i| LEVELS.get(i));
            if level.is_some_and(|&l| new_sz <= l) {
                true
            } else if new_sz > SAFETY {
                false
            } else {
                (count as i64) < fill
            }
        };
        if !allowed {
            if count > 0 {
                nodes.push((count, bytes));
            }
            bytes = 7;
            count = 0;
        }
        bytes += Lp::entry_size(it);
        count += 1;
    }
    if count > 0 {
        nodes.push((count, bytes));
    }
    nodes
}

/// The DUMP payload of `v` (createDumpPayload).
pub fn dump(v: &Value, lim: &super::encoding::Limits) -> Vec<u8> {
    let mut out = Vec::new();
    let t = put_value(&mut out, v, lim);
    out.insert(0, t);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// One key of an RDB file (rdbSaveKeyValuePair, without its expiry): type, key, value.
pub fn put_entry(out: &mut Vec<u8>, key: &[u8], v: &Value, lim: &super::encoding::Limits) {
    let at = out.len();
    out.push(0);
    put_string(out, key, lim.compress);
    out[at] = put_value(out, v, lim);
}

/// An RDB string (length-prefixed, an integer encoding or LZF where Redis would use one).
pub fn put_rdb_string(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    put_string(out, s, compress);
}

/// An RDB length.
pub fn put_rdb_len(out: &mut Vec<u8>, n: u64) {
    put_len(out, n);
}

/// Appends `v` in RDB form (rdbSaveObject) and returns its type byte (rdbSaveObjectType).
fn put_value(out: &mut Vec<u8>, v: &Value, lim: &super::encoding::Limits) -> u8 {
    use super::encoding::{hash_is_listpack, set_is_intset, zset_is_listpack};
    let t;
    match v {
        Value::Stream(st) => {
            put_stream(out, st);
            t = T_STREAM_LISTPACKS_2;
        }
        Value::Str(s) => {
            t = T_STRING;
            put_string(out, s, lim.compress);
        }
        Value::List(l) => {
            t = T_LIST_QUICKLIST_2;
            let nodes = quicklist_nodes(l.iter().map(|b| &b[..]), lim.list_fill);
            put_len(out, nodes.len() as u64);
            let mut items = l.iter();
            for (count, _) in nodes {
                let mut lp = Lp::new();
                let mut plain = None;
                for it in items.by_ref().take(count) {
                    if count == 1 && is_large_element(it.len()) {
                        plain = Some(it);
                    } else {
                        lp.push(it);
                    }
                }
                match plain {
                    Some(it) => {
                        put_len(out, NODE_PLAIN);
                        put_string(out, it, lim.compress);
                    }
                    None => {
                        put_len(out, NODE_PACKED);
                        put_string(out, &lp.finish(), lim.compress);
                    }
                }
            }
        }
        Value::Set(s) => {
            if set_is_intset(s, lim) {
                t = T_SET_INTSET;
                put_string(out, &intset_bytes(s), lim.compress);
            } else {
                t = T_SET;
                put_len(out, s.len() as u64);
                for m in s.iter() {
                    put_string(out, m, lim.compress);
                }
            }
        }
        Value::ZSet(z) => {
            if zset_is_listpack(z, lim) {
                t = T_ZSET_LISTPACK;
                put_string(out, &zset_listpack(z), lim.compress);
            } else {
                // rdbSaveObject walks the skiplist from the tail.
                t = T_ZSET_2;
                put_len(out, z.len() as u64);
                if !z.is_empty() {
                    for (m, s) in z.iter_rev_from(z.len() - 1) {
                        put_string(out, m, lim.compress);
                        out.extend_from_slice(&s.to_le_bytes());
                    }
                }
            }
        }
        Value::Hash(h) => {
            if hash_is_listpack(h, lim) {
                t = T_HASH_LISTPACK;
                put_string(out, &hash_listpack(h), lim.compress);
            } else {
                t = T_HASH;
                put_len(out, h.len() as u64);
                for (f, v) in h.iter() {
                    put_string(out, f, lim.compress);
                    put_string(out, v, lim.compress);
                }
            }
        }
    }
    t
}

/// A stream as rdbSaveObject writes RDB_TYPE_STREAM_LISTPACKS_2. Each live entry is its own
/// node (a listpack whose master entry holds its fields, then the entry with SAMEFIELDS): a
/// layout Redis loads as it loads its own, though Redis packs up to 100 entries per node.
fn put_stream(out: &mut Vec<u8>, st: &super::stream::Stream) {
    use super::stream::StreamId;
    let raw_id = |id: StreamId| {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&id.ms.to_be_bytes());
        b[8..].copy_from_slice(&id.seq.to_be_bytes());
        b
    };
    let mut nodes: Vec<(StreamId, Vec<u8>)> = Vec::new();
    let mut num = itoa::Buffer::new();
    st.range(StreamId::MIN, StreamId::MAX, false, |id, fields| {
        let mut lp = Lp::new();
        lp.push(b"1");
        lp.push(b"0");
        lp.push(num.format(fields.len()).as_bytes());
        for (f, _) in &fields {
            lp.push(f);
        }
        lp.push(b"0");
        lp.push(num.format(STREAM_SAMEFIELDS).as_bytes());
        lp.push(b"0");
        lp.push(b"0");
        for (_, v) in &fields {
            lp.push(v);
        }
        lp.push(num.format(fields.len() + 3).as_bytes());
        nodes.push((id, lp.finish()));
        true
    });
    put_len(out, nodes.len() as u64);
    for (id, lp) in &nodes {
        put_string(out, &raw_id(*id), false);
        put_string(out, lp, false);
    }
    for v in [
        st.length,
        st.last_id.ms,
        st.last_id.seq,
        st.first_id.ms,
        st.first_id.seq,
        st.max_deleted.ms,
        st.max_deleted.seq,
        st.entries_added,
    ] {
        put_len(out, v);
    }
    put_len(out, st.groups.len() as u64);
    for (name, g) in &st.groups {
        put_string(out, name, false);
        put_len(out, g.last_id.ms);
        put_len(out, g.last_id.seq);
        // -1 (entries read unknown) is written as its u64, as Redis's rdbSaveLen does.
        put_len(out, g.entries_read as u64);
        put_len(out, g.pel.len() as u64);
        for (id, nack) in &g.pel {
            out.extend_from_slice(&raw_id(*id));
            out.extend_from_slice(&(nack.delivery_time as i64).to_le_bytes());
            put_len(out, nack.delivery_count);
        }
        put_len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            put_string(out, cname, false);
            out.extend_from_slice(&(c.seen_time as i64).to_le_bytes());
            put_len(out, c.pel.len() as u64);
            for id in &c.pel {
                out.extend_from_slice(&raw_id(*id));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reading.

/// Most bytes all the LZF-compressed strings of one payload may inflate to.
const INFLATE_BUDGET: usize = 1 << 30;
/// Most bytes one LZF back-reference (3 bytes) produces is 264: the largest expansion.
const LZF_MAX_RATIO: usize = 88;

struct Rd<'a> {
    b: &'a [u8],
    at: usize,
    inflated: usize,
}

enum Len {
    Plain(u64),
    /// 0xC0 | n: an integer string (0..2) or an LZF string (3).
    Special(u8),
}

impl<'a> Rd<'a> {
    fn remaining(&self) -> usize {
        self.b.len() - self.at
    }

    fn byte(&mut self) -> Res<u8> {
        let v = *self.b.get(self.at).ok_or(Bad)?;
        self.at += 1;
        Ok(v)
    }

    fn take(&mut self, n: u64) -> Res<&'a [u8]> {
        if n > self.remaining() as u64 {
            return Err(Bad);
        }
        let s = &self.b[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(s)
    }

    fn len_or_special(&mut self) -> Res<Len> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => Len::Plain((first & 0x3f) as u64),
            1 => Len::Plain((((first & 0x3f) as u64) << 8) | self.byte()? as u64),
            2 => match first {
                0x80 => Len::Plain(
                    u32::from_be_bytes(self.take(4)?.try_into().map_err(|_| Bad)?) as u64,
                ),
                0x81 => Len::Plain(u64::from_be_bytes(
                    self.take(8)?.try_into().map_err(|_| Bad)?,
                )),
                _ => return Err(Bad),
            },
            _ => Len::Special(first & 0x3f),
        })
    }

    fn len(&mut self) -> Res<u64> {
        match self.len_or_special()? {
            Len::Plain(n) => Ok(n),
            Len::Special(_) => Err(Bad),
        }
    }

    /// A count of items that each take at least one byte: never more than the bytes left.
    fn count(&mut self) -> Res<usize> {
        let n = self.len()?;
        if n == 0 || n > self.remaining() as u64 {
            return Err(Bad);
        }
        Ok(n as usize)
    }

    fn string(&mut self) -> Res<Bytes> {
        match self.len_or_special()? {
            Len::Plain(n) => Ok(Bytes::copy_from_slice(self.take(n)?)),
            Len::Special(0) => Ok(itoa_bytes(self.byte()? as i8 as i64)),
            Len::Special(1) => {
                let b = self.take(2)?;
                Ok(itoa_bytes(i16::from_le_bytes([b[0], b[1]]) as i64))
            }
            Len::Special(2) => {
                let b = self.take(4)?;
                Ok(itoa_bytes(
                    i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64
                ))
            }
            Len::Special(3) => {
                let clen = self.len()?;
                let ulen = self.len()?;
                let data = self.take(clen)?;
                if ulen == 0
                    || ulen > (clen as usize).saturating_mul(LZF_MAX_RATIO) as u64
                    || self.inflated as u64 + ulen > INFLATE_BUDGET as u64
                {
                    return Err(Bad);
                }
                self.inflated += ulen as usize;
                Ok(Bytes::from(lzf_decompress(data, ulen as usize)?))
            }
            Len::Special(_) => Err(Bad),
        }
    }

    fn binary_double(&mut self) -> Res<f64> {
        let b = self.take(8)?;
        Ok(f64::from_le_bytes(b.try_into().map_err(|_| Bad)?))
    }

    /// rdbLoadDoubleValue: a length byte (253 nan, 254 inf, 255 -inf) and that many ASCII bytes.
    fn text_double(&mut self) -> Res<f64> {
        match self.byte()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => {
                let s = std::str::from_utf8(self.take(n as u64)?).map_err(|_| Bad)?;
                parse_c_double(s)
            }
        }
    }
}

/// strtod over the whole text, as rdbLoadDoubleValue's sscanf would read Redis's own output.
fn parse_c_double(s: &str) -> Res<f64> {
    let t = s.trim();
    match t.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" => return Ok(f64::INFINITY),
        "-inf" | "-infinity" => return Ok(f64::NEG_INFINITY),
        "nan" | "-nan" => return Ok(f64::NAN),
        _ => {}
    }
    t.parse::<f64>().map_err(|_| Bad)
}

fn itoa_bytes(v: i64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(v).as_bytes())
}

/// lzf_decompress into exactly `ulen` bytes (Redis fails the load otherwise).
pub fn lzf_decompress(input: &[u8], ulen: usize) -> Res<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(ulen);
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            if ip + n > input.len() || out.len() + n > ulen {
                return Err(Bad);
            }
            out.extend_from_slice(&input[ip..ip + n]);
            ip += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(ip).ok_or(Bad)? as usize;
                ip += 1;
            }
            let low = *input.get(ip).ok_or(Bad)? as usize;
            ip += 1;
            let back = ((ctrl & 0x1f) << 8) + low + 1;
            len += 2;
            if back > out.len() || out.len() + len > ulen {
                return Err(Bad);
            }
            let start = out.len() - back;
            for i in 0..len {
                let b = out[start + i];
                out.push(b);
            }
        }
    }
    if out.len() != ulen {
        return Err(Bad);
    }
    Ok(out)
}

/// One listpack's entries, validated whole (header size and count, each entry's backlen, the
/// terminator).
fn listpack_entries(lp: &[u8]) -> Res<Vec<Bytes>> {
    if lp.len() < 7 {
        return Err(Bad);
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    let declared = u16::from_le_bytes([lp[4], lp[5]]) as usize;
    if total != lp.len() || lp[lp.len() - 1] != 0xff {
        return Err(Bad);
    }
    let body = &lp[..lp.len() - 1];
    let mut at = 6;
    let mut out = Vec::new();
    while at < body.len() {
        let start = at;
        let need = |n: usize| -> Res<&[u8]> { body.get(at..at + n).ok_or(Bad) };
        let b = body[at];
        let (item, size): (Bytes, usize) = if b & 0x80 == 0 {
            (itoa_bytes((b & 0x7f) as i64), 1)
        } else if b & 0xc0 == 0x80 {
            let n = (b & 0x3f) as usize;
            (
                Bytes::copy_from_slice(need(1 + n)?.get(1..).ok_or(Bad)?),
                1 + n,
            )
        } else if b & 0xe0 == 0xc0 {
            let h = need(2)?;
            let u = (((h[0] & 0x1f) as i64) << 8) | h[1] as i64;
            let v = if u >= 1 << 12 { u - (1 << 13) } else { u };
            (itoa_bytes(v), 2)
        } else if b & 0xf0 == 0xe0 {
            let h = need(2)?;
            let n = (((h[0] & 0x0f) as usize) << 8) | h[1] as usize;
            (Bytes::copy_from_slice(&need(2 + n)?[2..]), 2 + n)
        } else {
            match b {
                0xf0 => {
                    let h = need(5)?;
                    let n = u32::from_le_bytes([h[1], h[2], h[3], h[4]]) as usize;
                    if n > body.len() {
                        return Err(Bad);
                    }
                    (Bytes::copy_from_slice(&need(5 + n)?[5..]), 5 + n)
                }
                0xf1 => {
                    let h = need(3)?;
                    (itoa_bytes(i16::from_le_bytes([h[1], h[2]]) as i64), 3)
                }
                0xf2 => {
                    let h = need(4)?;
                    let v = (i32::from_le_bytes([0, h[1], h[2], h[3]]) >> 8) as i64;
                    (itoa_bytes(v), 4)
                }
                0xf3 => {
                    let h = need(5)?;
                    (
                        itoa_bytes(i32::from_le_bytes([h[1], h[2], h[3], h[4]]) as i64),
                        5,
                    )
                }
                0xf4 => {
                    let h = need(9)?;
                    let v = i64::from_le_bytes(h[1..9].try_into().map_err(|_| Bad)?);
                    (itoa_bytes(v), 9)
                }
                _ => return Err(Bad),
            }
        };
        at = start + size;
        let mut expect = Vec::with_capacity(5);
        lp_put_backlen(&mut expect, size);
        if body.get(at..at + expect.len()) != Some(&expect[..]) {
            return Err(Bad);
        }
        at += expect.len();
        out.push(item);
    }
    if declared != u16::MAX as usize && declared != out.len() {
        return Err(Bad);
    }
    Ok(out)
}

/// One ziplist's entries (the RDB types before 7.0), validated whole.
fn ziplist_entries(zl: &[u8]) -> Res<Vec<Bytes>> {
    if zl.len() < 11 {
        return Err(Bad);
    }
    let total = u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]) as usize;
    let declared = u16::from_le_bytes([zl[8], zl[9]]) as usize;
    if total != zl.len() || zl[zl.len() - 1] != 0xff {
        return Err(Bad);
    }
    let body = &zl[..zl.len() - 1];
    let mut at = 10;
    let mut out = Vec::new();
    let mut prev_size = 0usize;
    while at < body.len() {
        let start = at;
        let get = |from: usize, n: usize| -> Res<&[u8]> { body.get(from..from + n).ok_or(Bad) };
        let prevlen = if body[at] < 254 {
            at += 1;
            body[at - 1] as usize
        } else if body[at] == 254 {
            let h = get(at + 1, 4)?;
            at += 5;
            u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize
        } else {
            return Err(Bad);
        };
        if prevlen != prev_size {
            return Err(Bad);
        }
        let e = *body.get(at).ok_or(Bad)?;
        let item = match e >> 6 {
            0 => {
                let n = (e & 0x3f) as usize;
                let s = get(at + 1, n)?;
                at += 1 + n;
                Bytes::copy_from_slice(s)
            }
            1 => {
                let h = get(at, 2)?;
                let n = (((h[0] & 0x3f) as usize) << 8) | h[1] as usize;
                let s = get(at + 2, n)?;
                at += 2 + n;
                Bytes::copy_from_slice(s)
            }
            2 => {
                if e != 0x80 {
                    return Err(Bad);
                }
                let h = get(at + 1, 4)?;
                let n = u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize;
                if n > body.len() {
                    return Err(Bad);
                }
                let s = get(at + 5, n)?;
                at += 5 + n;
                Bytes::copy_from_slice(s)
            }
            _ => {
                let (v, n) = match e {
                    0xc0 => {
                        let h = get(at + 1, 2)?;
                        (i16::from_le_bytes([h[0], h[1]]) as i64, 2)
                    }
                    0xd0 => {
                        let h = get(at + 1, 4)?;
                        (i32::from_le_bytes([h[0], h[1], h[2], h[3]]) as i64, 4)
                    }
                    0xe0 => {
                        let h = get(at + 1, 8)?;
                        (i64::from_le_bytes(h.try_into().map_err(|_| Bad)?), 8)
                    }
                    0xf0 => {
                        let h = get(at + 1, 3)?;
                        ((i32::from_le_bytes([0, h[0], h[1], h[2]]) >> 8) as i64, 3)
                    }
                    0xfe => (get(at + 1, 1)?[0] as i8 as i64, 1),
                    0xf1..=0xfd => ((e & 0x0f) as i64 - 1, 0),
                    _ => return Err(Bad),
                };
                at += 1 + n;
                itoa_bytes(v)
            }
        };
        prev_size = at - start;
        out.push(item);
    }
    if declared != u16::MAX as usize && declared != out.len() {
        return Err(Bad);
    }
    Ok(out)
}

/// A zipmap's fields and values (hashes written before Redis 2.6), validated whole.
fn zipmap_entries(zm: &[u8]) -> Res<Vec<Bytes>> {
    let declared = *zm.first().ok_or(Bad)? as usize;
    let get = |from: usize, n: usize| -> Res<&[u8]> {
        zm.get(from..from.checked_add(n).ok_or(Bad)?).ok_or(Bad)
    };
    // A length: one byte below 254, else 254 and four bytes.
    let len = |at: usize| -> Res<(usize, usize)> {
        match *zm.get(at).ok_or(Bad)? {
            n @ 0..=253 => Ok((n as usize, 1)),
            254 => {
                let b = get(at + 1, 4)?;
                Ok((u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 5))
            }
            _ => Err(Bad),
        }
    };
    let mut out = Vec::new();
    let mut at = 1;
    loop {
        if *zm.get(at).ok_or(Bad)? == 0xff {
            at += 1;
            break;
        }
        let (klen, n) = len(at)?;
        out.push(Bytes::copy_from_slice(get(at + n, klen)?));
        at += n + klen;
        let (vlen, n) = len(at)?;
        let free = *zm.get(at + n).ok_or(Bad)? as usize;
        out.push(Bytes::copy_from_slice(get(at + n + 1, vlen)?));
        at += n + 1 + vlen + free;
    }
    if at != zm.len() || (declared < 254 && declared * 2 != out.len()) {
        return Err(Bad);
    }
    Ok(out)
}

fn intset_entries(is: &[u8]) -> Res<Vec<Bytes>> {
    if is.len() < 8 {
        return Err(Bad);
    }
    let width = u32::from_le_bytes([is[0], is[1], is[2], is[3]]) as usize;
    let n = u32::from_le_bytes([is[4], is[5], is[6], is[7]]) as usize;
    if !matches!(width, 2 | 4 | 8) || (is.len() - 8) != n.checked_mul(width).ok_or(Bad)? {
        return Err(Bad);
    }
    let mut out = Vec::with_capacity(n);
    let mut last: Option<i64> = None;
    for c in is[8..].chunks_exact(width) {
        let v = match width {
            2 => i16::from_le_bytes([c[0], c[1]]) as i64,
            4 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64,
            _ => i64::from_le_bytes(c.try_into().map_err(|_| Bad)?),
        };
        // An intset is sorted without duplicates (intsetValidateIntegrity).
        if last.is_some_and(|l| l >= v) {
            return Err(Bad);
        }
        last = Some(v);
        out.push(itoa_bytes(v));
    }
    Ok(out)
}

fn pairs_to_hash(items: Vec<Bytes>) -> Res<Value> {
    if items.is_empty() || items.len() % 2 != 0 {
        return Err(Bad);
    }
    let mut h = HashValue::default();
    for p in items.chunks_exact(2) {
        if !h.insert(&p[0], &p[1]) {
            return Err(Bad);
        }
    }
    Ok(Value::Hash(h))
}

fn pairs_to_zset(items: Vec<Bytes>) -> Res<Value> {
    if items.is_empty() || items.len() % 2 != 0 {
        return Err(Bad);
    }
    let mut z = ZSet::new();
    let mut it = items.into_iter();
    while let (Some(m), Some(s)) = (it.next(), it.next()) {
        let score = std::str::from_utf8(&s)
            .map_err(|_| Bad)
            .and_then(parse_c_double)?;
        zadd(&mut z, m, score)?;
    }
    Ok(Value::ZSet(Box::new(z)))
}

fn zadd(z: &mut ZSet, m: Bytes, score: f64) -> Res<()> {
    if score.is_nan() || z.insert(m, score).is_some() {
        return Err(Bad);
    }
    Ok(())
}

fn members_to_set(items: Vec<Bytes>) -> Res<Value> {
    if items.is_empty() {
        return Err(Bad);
    }
    let mut s = SetValue::default();
    for m in items {
        if !s.insert(m) {
            return Err(Bad);
        }
    }
    Ok(Value::Set(Box::new(s)))
}

/// The value in a verified payload body (`verify`), as rdbLoadObject would build it.
pub fn restore(body: &[u8]) -> Res<Value> {
    let mut r = Rd {
        b: body,
        at: 0,
        inflated: 0,
    };
    let t = r.byte()?;
    value_of(&mut r, t)
}

/// An RDB file being read (persist/rdb_file.rs): the checks of a DUMP payload, and the
/// opcodes between values are the caller's.
pub struct Reader<'a>(Rd<'a>);

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Reader<'a> {
        Reader(Rd {
            b,
            at: 0,
            inflated: 0,
        })
    }

    pub fn position(&self) -> usize {
        self.0.at
    }

    pub fn byte(&mut self) -> Result<u8, Bad> {
        self.0.byte()
    }

    pub fn take(&mut self, n: u64) -> Result<&'a [u8], Bad> {
        self.0.take(n)
    }

    pub fn length(&mut self) -> Result<u64, Bad> {
        self.0.len()
    }

    pub fn string(&mut self) -> Result<Bytes, Bad> {
        self.0.string()
    }

    /// The value of type `t` (each value has the LZF budget of one payload).
    pub fn value(&mut self, t: u8) -> Result<Value, Bad> {
        self.0.inflated = 0;
        value_of(&mut self.0, t)
    }
}

/// rdbLoadObject for type `t`.
fn value_of(r: &mut Rd, t: u8) -> Res<Value> {
    let v = match t {
        T_STRING => Value::Str(r.string()?),
        T_LIST => {
            let n = r.count()?;
            let mut l = VecDeque::with_capacity(n);
            for _ in 0..n {
                l.push_back(r.string()?);
            }
            Value::List(l)
        }
        T_LIST_ZIPLIST => {
            let items = ziplist_entries(&r.string()?)?;
            if items.is_empty() {
                return Err(Bad);
            }
            Value::List(items.into())
        }
        T_LIST_QUICKLIST | T_LIST_QUICKLIST_2 => {
            let n = r.count()?;
            let mut l = VecDeque::new();
            for _ in 0..n {
                let container = if t == T_LIST_QUICKLIST_2 {
                    r.len()?
                } else {
                    NODE_PACKED
                };
                let blob = r.string()?;
                match container {
                    NODE_PLAIN => l.push_back(blob),
                    NODE_PACKED => {
                        // Empty nodes are skipped, as Redis does; an empty list fails below.
                        let items = if t == T_LIST_QUICKLIST_2 {
                            listpack_entries(&blob)?
                        } else {
                            ziplist_entries(&blob)?
                        };
                        l.extend(items);
                    }
                    _ => return Err(Bad),
                }
            }
            if l.is_empty() {
                return Err(Bad);
            }
            Value::List(l)
        }
        T_SET => {
            let n = r.count()?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(r.string()?);
            }
            members_to_set(items)?
        }
        T_SET_INTSET => members_to_set(intset_entries(&r.string()?)?)?,
        T_ZSET | T_ZSET_2 => {
            let n = r.count()?;
            let mut z = ZSet::new();
            for _ in 0..n {
                let m = r.string()?;
                let s = if t == T_ZSET_2 {
                    r.binary_double()?
                } else {
                    r.text_double()?
                };
                zadd(&mut z, m, s)?;
            }
            Value::ZSet(Box::new(z))
        }
        T_ZSET_ZIPLIST => pairs_to_zset(ziplist_entries(&r.string()?)?)?,
        T_ZSET_LISTPACK => pairs_to_zset(listpack_entries(&r.string()?)?)?,
        T_HASH => {
            let n = r.count()?;
            let mut h = HashValue::default();
            for _ in 0..n {
                let f = r.string()?;
                let v = r.string()?;
                if !h.insert(&f, &v) {
                    return Err(Bad);
                }
            }
            Value::Hash(h)
        }
        T_HASH_ZIPLIST => pairs_to_hash(ziplist_entries(&r.string()?)?)?,
        T_HASH_ZIPMAP => pairs_to_hash(zipmap_entries(&r.string()?)?)?,
        T_HASH_LISTPACK => pairs_to_hash(listpack_entries(&r.string()?)?)?,
        T_STREAM_LISTPACKS | T_STREAM_LISTPACKS_2 => {
            Value::Stream(Box::new(read_stream(r, t == T_STREAM_LISTPACKS_2)?))
        }
        _ => return Err(Bad),
    };
    Ok(v)
}

/// rdbLoadObject for RDB_TYPE_STREAM_LISTPACKS(_2): the nodes' live entries, the counters, the
/// groups with their pending entries and consumers, each checked against what it refers to.
fn read_stream(r: &mut Rd, v2: bool) -> Res<super::stream::Stream> {
    use super::stream::{Consumer, Group, Nack, Stream, StreamId};
    let int = |b: &Bytes| parse_i64(b).ok_or(Bad);
    let id_of = |b: &[u8]| -> Res<StreamId> {
        if b.len() != 16 {
            return Err(Bad);
        }
        Ok(StreamId::new(
            u64::from_be_bytes(b[..8].try_into().map_err(|_| Bad)?),
            u64::from_be_bytes(b[8..].try_into().map_err(|_| Bad)?),
        ))
    };
    let mut st = Stream::new();
    let nodes = r.len()?;
    if nodes > r.remaining() as u64 {
        return Err(Bad);
    }
    let mut flat: Vec<Bytes> = Vec::new();
    for _ in 0..nodes {
        let master = id_of(&r.string()?)?;
        let lp = listpack_entries(&r.string()?)?;
        // count, deleted, number of master fields, the fields, the master's terminator.
        let nf = usize::try_from(int(lp.get(2).ok_or(Bad)?)?).map_err(|_| Bad)?;
        // Lengths come from the payload: every sum is checked.
        let fields = lp.get(3..nf.checked_add(3).ok_or(Bad)?).ok_or(Bad)?;
        let mut at = nf + 4;
        if lp.len() < at {
            return Err(Bad);
        }
        while at < lp.len() {
            let flags = int(lp.get(at).ok_or(Bad)?)?;
            let ms = int(lp.get(at + 1).ok_or(Bad)?)?;
            let seq = int(lp.get(at + 2).ok_or(Bad)?)?;
            at += 3;
            let id = StreamId::new(
                master.ms.checked_add(ms as u64).ok_or(Bad)?,
                master.seq.wrapping_add(seq as u64),
            );
            flat.clear();
            if flags & STREAM_SAMEFIELDS != 0 {
                let values = lp.get(at..at.checked_add(nf).ok_or(Bad)?).ok_or(Bad)?;
                for (f, v) in fields.iter().zip(values) {
                    flat.push(f.clone());
                    flat.push(v.clone());
                }
                at += nf;
            } else {
                let n = usize::try_from(int(lp.get(at).ok_or(Bad)?)?).map_err(|_| Bad)?;
                let end = n
                    .checked_mul(2)
                    .and_then(|p| p.checked_add(at + 1))
                    .ok_or(Bad)?;
                let pairs = lp.get(at + 1..end).ok_or(Bad)?;
                flat.extend(pairs.iter().cloned());
                at = end;
            }
            // lp-count closes the entry.
            lp.get(at).ok_or(Bad)?;
            at += 1;
            if flags & STREAM_DELETED == 0 {
                if flat.is_empty() {
                    return Err(Bad);
                }
                // Redis's default node limits: the layout in memory, not the data.
                st.append(&flat, Some(id), true, 0, 4096, 100)
                    .map_err(|_| Bad)?;
            }
        }
    }
    let length = r.len()?;
    if length != st.length {
        return Err(Bad);
    }
    st.last_id = StreamId::new(r.len()?, r.len()?);
    if v2 {
        st.first_id = StreamId::new(r.len()?, r.len()?);
        st.max_deleted = StreamId::new(r.len()?, r.len()?);
        st.entries_added = r.len()?;
    } else {
        st.first_id = st.edge_id(true).unwrap_or_default();
        st.max_deleted = StreamId::default();
        st.entries_added = st.length;
    }
    let groups = r.len()?;
    if groups > r.remaining() as u64 {
        return Err(Bad);
    }
    for _ in 0..groups {
        let name = r.string()?;
        let last_id = StreamId::new(r.len()?, r.len()?);
        let entries_read = if v2 {
            r.len()? as i64
        } else {
            st.estimate_distance(last_id).unwrap_or(-1)
        };
        let mut g = Group::new(last_id, entries_read);
        let pel = r.len()?;
        if pel > r.remaining() as u64 / 17 {
            return Err(Bad);
        }
        for _ in 0..pel {
            let id = id_of(r.take(16)?)?;
            let time = i64::from_le_bytes(r.take(8)?.try_into().map_err(|_| Bad)?);
            let count = r.len()?;
            g.pel.insert(
                id,
                Nack {
                    delivery_time: time.max(0) as u64,
                    delivery_count: count,
                    consumer: Bytes::new(),
                },
            );
        }
        let consumers = r.len()?;
        if consumers > r.remaining() as u64 {
            return Err(Bad);
        }
        for _ in 0..consumers {
            let cname = r.string()?;
            let seen = i64::from_le_bytes(r.take(8)?.try_into().map_err(|_| Bad)?);
            let mut c = Consumer {
                seen_time: seen.max(0) as u64,
                ..Default::default()
            };
            let n = r.len()?;
            if n > r.remaining() as u64 / 16 {
                return Err(Bad);
            }
            for _ in 0..n {
                let id = id_of(r.take(16)?)?;
                // A consumer's entry must be pending in the group, and owned once.
                let nack = g.pel.get_mut(&id).ok_or(Bad)?;
                if !nack.consumer.is_empty() {
                    return Err(Bad);
                }
                nack.consumer = cname.clone();
                c.pel.insert(id);
            }
            if g.consumers.insert(cname, c).is_some() {
                return Err(Bad);
            }
        }
        if g.pel.values().any(|n| n.consumer.is_empty()) || st.groups.insert(name, g).is_some() {
            return Err(Bad);
        }
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::encoding::Limits;

    #[test]
    fn crc64_matches_redis_test_vector() {
        // crc64.c's own test: crc64(0, "123456789") == 0xe9c6d914c4b8d9ca.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn redis_string_payloads_restore() {
        // DUMP of SET k hello / SET k 12345 on redis-server 7.0.15.
        let hello = b"\x00\x05hello\n\x00cr\xdfve4 \n";
        let Value::Str(s) = restore(verify(hello).unwrap()).unwrap() else {
            panic!()
        };
        assert_eq!(&s[..], b"hello");
        assert_eq!(
            dump(
                &Value::Str(Bytes::from_static(b"hello")),
                &Limits::default()
            ),
            hello
        );
    }

    /// The types a 7.0 server no longer writes but still loads: a ziplist hash, a plain list, a
    /// zset with text scores, a ziplist quicklist.
    #[test]
    fn older_types_restore() {
        let zl: Vec<u8> = [
            &[24, 0, 0, 0, 19, 0, 0, 0, 4, 0][..],
            &[0x00, 0x01, b'a'],
            &[0x03, 0xf2],
            &[0x02, 0x02, b'b', b'b'],
            &[0x04, 0xc0, 0x78, 0xec],
            &[0xff],
        ]
        .concat();
        let mut body = vec![T_HASH_ZIPLIST, zl.len() as u8];
        body.extend_from_slice(&zl);
        let Value::Hash(h) = restore(&body).unwrap() else {
            panic!()
        };
        assert_eq!(h.get(b"a"), Some(&b"1"[..]));
        assert_eq!(h.get(b"bb"), Some(&b"-5000"[..]));
        let mut ql = vec![T_LIST_QUICKLIST, 1, zl.len() as u8];
        ql.extend_from_slice(&zl);
        let Value::List(l) = restore(&ql).unwrap() else {
            panic!()
        };
        assert_eq!(l, ["a", "1", "bb", "-5000"].map(Bytes::from));
        // A ziplist whose prevlen lies is refused.
        let mut bad = body.clone();
        bad[2 + 13] = 0x07;
        assert!(restore(&bad).is_err());
        let Value::List(l) = restore(&[T_LIST, 2, 1, b'x', 0xc0, 7]).unwrap() else {
            panic!()
        };
        assert_eq!(l, ["x", "7"].map(Bytes::from));
        let Value::ZSet(z) =
            restore(&[T_ZSET, 2, 1, b'm', 3, b'1', b'.', b'5', 1, b'n', 254]).unwrap()
        else {
            panic!()
        };
        assert_eq!(z.score(b"m"), Some(1.5));
        assert_eq!(z.score(b"n"), Some(f64::INFINITY));
        assert!(restore(&[T_ZSET, 1, 1, b'm', 253]).is_err(), "NaN score");
        // A zipmap {f: "vv"} with one byte of free space after the value.
        let zm = [1, 1, b'f', 2, 1, b'v', b'v', 0, 0xff];
        let mut body = vec![T_HASH_ZIPMAP, zm.len() as u8];
        body.extend_from_slice(&zm);
        let Value::Hash(h) = restore(&body).unwrap() else {
            panic!()
        };
        assert_eq!(h.get(b"f"), Some(&b"vv"[..]));
        body[5] = 9; // a value longer than the map
        assert!(restore(&body).is_err());
    }

    #[test]
    fn lzf_round_trip_of_a_backreference() {
        // "aaaaaaaaaa": a literal 'a' then a back-reference of 9 bytes at distance 1.
        let c = [0x00, b'a', 0xe0, 0x00, 0x00];
        assert_eq!(lzf_decompress(&c, 10).unwrap(), vec![b'a'; 10]);
        assert!(lzf_decompress(&c, 11).is_err());
        assert!(lzf_decompress(&[0xe0, 0x00, 0x00], 9).is_err());
    }

    #[test]
    fn mutated_payloads_never_panic() {
        let lim = Limits::default();
        let mut h = HashValue::default();
        h.insert(b"f", b"v");
        h.insert(b"n", b"123456");
        let mut z = ZSet::new();
        z.insert(Bytes::from_static(b"m"), 1.5);
        z.insert(Bytes::from_static(b"n"), -3.0);
        let mut s = SetValue::default();
        s.insert(Bytes::from_static(b"7"));
        s.insert(Bytes::from_static(b"-70000"));
        let mut st = super::super::stream::Stream::new();
        for i in 1..=20u64 {
            let fields = [Bytes::from_static(b"f"), Bytes::from(format!("v{i}"))];
            let id = super::super::stream::StreamId::new(i, 0);
            st.append(&fields, Some(id), true, 0, 4096, 100).unwrap();
        }
        let mut g = super::super::stream::Group::new(super::super::stream::StreamId::new(3, 0), 3);
        g.create_consumer(b"alice", 5);
        for i in 1..=3u64 {
            let id = super::super::stream::StreamId::new(i, 0);
            g.pel.insert(
                id,
                super::super::stream::Nack {
                    delivery_time: 9,
                    delivery_count: i,
                    consumer: Bytes::from_static(b"alice"),
                },
            );
            if let Some(c) = g.consumers.get_mut(&b"alice"[..]) {
                c.pel.insert(id);
            }
        }
        st.groups.insert(Bytes::from_static(b"g"), g);
        let values = [
            Value::Stream(Box::new(st)),
            Value::Str(Bytes::from_static(b"some string value")),
            Value::Hash(h),
            Value::ZSet(Box::new(z)),
            Value::Set(Box::new(s)),
            Value::List(
                (0..50)
                    .map(|i| Bytes::from(format!("item{i}")))
                    .collect::<VecDeque<_>>(),
            ),
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        for v in &values {
            let p = dump(v, &lim);
            assert!(restore(verify(&p).unwrap()).is_ok());
            for _ in 0..3000 {
                let mut body = p[..p.len() - 10].to_vec();
                match rng.u8(0..3) {
                    0 => {
                        let i = rng.usize(0..body.len());
                        body[i] = rng.u8(..);
                    }
                    1 => body.truncate(rng.usize(0..body.len())),
                    _ => {
                        let i = rng.usize(0..body.len());
                        body.insert(i, rng.u8(..));
                    }
                }
                let _ = restore(&body);
            }
        }
    }
}
