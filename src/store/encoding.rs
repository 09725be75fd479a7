//! Which of Redis 7.0's encodings a value would have (OBJECT ENCODING, DUMP, MEMORY USAGE).
//!
//! deadbolt keeps its own layouts (store/hash.rs, zset.rs), so the encoding is derived from the
//! content and the live thresholds (`hash-max-listpack-entries` etc.), as Redis would have
//! chosen it for the same data. Redis never converts back (a hash that once held a long value
//! stays a hashtable after the value is deleted): hashes and sorted sets keep the most entries
//! and the longest element they have held for that (a small hash's history is its content),
//! and sets the most members and whether one was ever not an integer.

use super::hash::HashValue;
use super::value::{SetValue, Value};
use super::zset::ZSet;
use crate::protocol::number::parse_i64;

/// Redis's encoding thresholds, read from the configuration by the caller.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub hash_entries: u64,
    pub hash_value: u64,
    pub zset_entries: u64,
    pub zset_value: u64,
    pub set_intset_entries: u64,
    /// `list-max-listpack-size`: > 0 entries per quicklist node, -1..-5 bytes (4 KB..64 KB).
    pub list_fill: i64,
    /// `rdbcompression`: DUMP compresses strings with LZF.
    pub compress: bool,
}

impl Default for Limits {
    /// Redis 7.0's defaults.
    fn default() -> Self {
        Limits {
            hash_entries: 512,
            hash_value: 64,
            zset_entries: 128,
            zset_value: 64,
            set_intset_entries: 512,
            list_fill: -2,
            compress: true,
        }
    }
}

/// Redis's OBJ_ENCODING_EMBSTR_SIZE_LIMIT.
pub const EMBSTR_MAX: usize = 44;

/// The name OBJECT ENCODING prints.
pub fn name(v: &Value, lim: &Limits) -> &'static str {
    match v {
        Value::Str(s) => str_encoding(s),
        Value::Stream(_) => "stream",
        Value::List(_) => "quicklist",
        Value::Set(s) => {
            if set_is_intset(s, lim) {
                "intset"
            } else {
                "hashtable"
            }
        }
        Value::ZSet(z) => {
            if zset_is_listpack(z, lim) {
                "listpack"
            } else {
                "skiplist"
            }
        }
        Value::Hash(h) => {
            if hash_is_listpack(h, lim) {
                "listpack"
            } else {
                "hashtable"
            }
        }
    }
}

/// The name OBJECT ENCODING prints for a value whose key records `enc` (keymap::StrEnc).
pub fn name_as(v: &Value, enc: super::keymap::StrEnc, lim: &Limits) -> &'static str {
    use super::keymap::StrEnc;
    match (v, enc) {
        (Value::Str(_), StrEnc::Raw) => "raw",
        // createStringObject: embstr up to 44 bytes.
        (Value::Str(s), StrEnc::Embstr) if s.len() <= EMBSTR_MAX => "embstr",
        (Value::Str(_), StrEnc::Embstr) => "raw",
        _ => name(v, lim),
    }
}

/// int (an integer that fits a long, canonical, at most 20 bytes: tryObjectEncoding), embstr
/// (up to 44 bytes) or raw. HyperLogLogs are raw from birth (createRawStringObject).
pub fn str_encoding(s: &[u8]) -> &'static str {
    if s.len() <= 20 && parse_i64(s).is_some() {
        "int"
    } else if s.len() <= EMBSTR_MAX && !s.starts_with(b"HYLL") {
        "embstr"
    } else {
        "raw"
    }
}

/// Judged by the set's history (Redis never converts a hash table back to an intset).
pub fn set_is_intset(s: &SetValue, lim: &Limits) -> bool {
    let (peak, non_integer) = s.history();
    !non_integer && peak as u64 <= lim.set_intset_entries
}

/// Judged by the most members and the longest member the set has held (Redis never converts
/// a skiplist back).
pub fn zset_is_listpack(z: &ZSet, lim: &Limits) -> bool {
    let (peak, longest) = z.history();
    peak as u64 <= lim.zset_entries && longest as u64 <= lim.zset_value
}

/// Judged by the hash's history, as sorted sets are.
pub fn hash_is_listpack(h: &HashValue, lim: &Limits) -> bool {
    let hist = h.history();
    hist.peak_len as u64 <= lim.hash_entries && hist.longest as u64 <= lim.hash_value
}

/// The size jemalloc (Redis's allocator) gives a request of `n` bytes: its size classes, four
/// per doubling, 16-byte quantum.
pub fn jemalloc_size(n: usize) -> usize {
    if n <= 8 {
        return 8;
    }
    if n <= 16 {
        return 16;
    }
    let k = usize::BITS - 1 - (n - 1).leading_zeros(); // 2^k < n <= 2^(k+1)
    let spacing = (1usize << k.saturating_sub(2)).max(16);
    n.div_ceil(spacing) * spacing
}

/// zmalloc_size of an sds string of `len` bytes (header by length, plus the NUL).
pub fn sds_size(len: usize) -> usize {
    let hdr = match len {
        0..32 => 1,
        32..256 => 3,
        256..65536 => 5,
        _ => 9,
    };
    jemalloc_size(hdr + len + 1)
}

/// Redis's sizeof(robj), sizeof(dictEntry), sizeof(dict), sizeof(quicklist),
/// sizeof(quicklistNode), sizeof(zset) + sizeof(zskiplist), the skiplist header node.
const ROBJ: usize = 16;
const DICT_ENTRY: usize = 24;
const DICT: usize = 56;
const QUICKLIST: usize = 40;
const QUICKLIST_NODE: usize = 40;
const ZSET_HEAD: usize = 16 + 32;
const ZSL_HEADER: usize = 640;
/// An average skiplist node: 32 bytes and 16 a level, levels drawn with p = 1/4 (mean 4/3),
/// so 48 + 16/3.
const ZSL_NODE: usize = 53;

/// Slots of a dict holding `n` entries grown one insert at a time (a power of two, at least 4).
fn dict_slots(n: usize) -> usize {
    n.next_power_of_two().max(4)
}

/// Redis's objectComputeSize: the value's bytes as Redis 7.0 would allocate them, sampling at
/// most `samples` elements of a large collection (0: all), plus the key and its dict entry
/// (MEMORY USAGE).
pub fn memory_usage(key: &[u8], v: &Value, lim: &Limits, samples: usize) -> usize {
    let samples = if samples == 0 { usize::MAX } else { samples };
    let avg = |sum: usize, taken: usize, total: usize| {
        if taken == 0 {
            0
        } else {
            (sum as f64 / taken as f64 * total as f64) as usize
        }
    };
    let value = match v {
        // The stream's own estimate of what Redis's radix tree of listpacks would take.
        Value::Stream(st) => st.approx_size(),
        Value::Str(s) => match str_encoding(s) {
            "int" => ROBJ,
            "embstr" => jemalloc_size(ROBJ + 3 + s.len() + 1),
            _ => sds_size(s.len()) + ROBJ,
        },
        Value::List(l) => {
            let nodes = super::rdb::quicklist_nodes(l.iter().map(|b| &b[..]), lim.list_fill);
            let taken: Vec<usize> = nodes.iter().take(samples).map(|n| n.1).collect();
            let sum: usize = taken
                .iter()
                .map(|&b| QUICKLIST_NODE + jemalloc_size(b))
                .sum();
            ROBJ + QUICKLIST + avg(sum, taken.len(), nodes.len())
        }
        Value::Set(s) => {
            if set_is_intset(s, lim) {
                ROBJ + jemalloc_size(super::rdb::intset_bytes(s).len())
            } else {
                let sum: usize = s
                    .iter()
                    .take(samples)
                    .map(|m| DICT_ENTRY + sds_size(m.len()))
                    .sum();
                ROBJ + DICT + 8 * dict_slots(s.len()) + avg(sum, s.len().min(samples), s.len())
            }
        }
        Value::ZSet(z) => {
            if zset_is_listpack(z, lim) {
                ROBJ + jemalloc_size(super::rdb::zset_listpack(z).len())
            } else {
                let sum: usize = z
                    .iter_from(0)
                    .take(samples)
                    .map(|(m, _)| sds_size(m.len()) + DICT_ENTRY + ZSL_NODE)
                    .sum();
                ROBJ + ZSET_HEAD
                    + DICT
                    + 8 * dict_slots(z.len())
                    + ZSL_HEADER
                    + avg(sum, z.len().min(samples), z.len())
            }
        }
        Value::Hash(h) => {
            if hash_is_listpack(h, lim) {
                ROBJ + jemalloc_size(super::rdb::hash_listpack(h).len())
            } else {
                let sum: usize = h
                    .iter()
                    .take(samples)
                    .map(|(f, v)| sds_size(f.len()) + sds_size(v.len()) + DICT_ENTRY)
                    .sum();
                let n = h.len();
                ROBJ + DICT + 8 * dict_slots(n) + avg(sum, n.min(samples), n)
            }
        }
    };
    value + sds_size(key.len()) + DICT_ENTRY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jemalloc_classes() {
        let classes = [
            (1, 8),
            (9, 16),
            (17, 32),
            (33, 48),
            (65, 80),
            (129, 160),
            (257, 320),
            (513, 640),
            (4097, 5120),
            (544, 640),
        ];
        for (n, c) in classes {
            assert_eq!(jemalloc_size(n), c, "{n}");
        }
    }

    #[test]
    fn string_encodings() {
        assert_eq!(str_encoding(b"123"), "int");
        assert_eq!(str_encoding(b"-9223372036854775808"), "int");
        assert_eq!(str_encoding(b"9223372036854775808"), "embstr");
        assert_eq!(str_encoding(b"0123"), "embstr");
        assert_eq!(str_encoding(&[b'a'; 44]), "embstr");
        assert_eq!(str_encoding(&[b'a'; 45]), "raw");
    }
}
