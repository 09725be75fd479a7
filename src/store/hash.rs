//! Hash values. Small hashes (Redis's listpack encoding: at most 128 fields of at most 64 bytes)
//! are packed into one exact-size allocation, each entry `[field len][field][value len][value]`
//! with one-byte lengths, in insertion order. A Redisson lock is a one-field hash, so this is
//! what most lock hashes are: one 48-byte allocation instead of a vector of two `Bytes` headers
//! plus their two buffers. Bigger hashes become an IndexMap.

use bytes::Bytes;
use indexmap::IndexMap;

/// Redis's hash-max-listpack-entries / hash-max-listpack-value defaults.
pub const SMALL_MAX_ENTRIES: usize = 128;
pub const SMALL_MAX_VALUE: usize = 64;
// A packed length is one byte.
const _: () = assert!(SMALL_MAX_VALUE <= u8::MAX as usize);

type Table = IndexMap<Bytes, Bytes, ahash::RandomState>;

#[derive(Debug, Clone)]
pub enum HashValue {
    Small(Packed),
    Large(Box<Big>),
}

/// What a hash has held at its largest: Redis converts a listpack to a hash table once the
/// entries or a field's or value's length pass the limits, and never converts back, so OBJECT
/// ENCODING and DUMP judge a hash by this (store/encoding.rs), not by what is left in it.
#[derive(Debug, Clone, Copy, Default)]
pub struct History {
    pub peak_len: u32,
    pub longest: u32,
}

/// The table, with its history (8 bytes a big hash; a small hash's history is its content).
#[derive(Debug, Clone)]
pub struct Big {
    map: Table,
    history: History,
}

impl std::ops::Deref for Big {
    type Target = Table;
    fn deref(&self) -> &Table {
        &self.map
    }
}

impl std::ops::DerefMut for Big {
    fn deref_mut(&mut self) -> &mut Table {
        &mut self.map
    }
}

impl Default for HashValue {
    fn default() -> Self {
        HashValue::Small(Packed::default())
    }
}

/// The compact encoding: fields and values back to back, each after its one-byte length.
#[derive(Debug, Clone, Default)]
pub struct Packed(Box<[u8]>);

/// Where an entry lies in a `Packed`: the whole entry, and its value.
struct Found {
    entry: std::ops::Range<usize>,
    value: std::ops::Range<usize>,
}

impl Packed {
    fn iter(&self) -> PackedIter<'_> {
        PackedIter(&self.0)
    }

    fn find(&self, field: &[u8]) -> Option<Found> {
        let b = &self.0;
        let mut at = 0;
        while at < b.len() {
            let flen = b[at] as usize;
            let f = at + 1..at + 1 + flen;
            let vlen = b[f.end] as usize;
            let v = f.end + 1..f.end + 1 + vlen;
            if b[f.clone()] == *field {
                return Some(Found {
                    entry: at..v.end,
                    value: v,
                });
            }
            at = v.end;
        }
        None
    }

    /// Replaces `range` with `with`, keeping the allocation exactly as long as the content.
    fn splice(&mut self, range: std::ops::Range<usize>, with: &[&[u8]]) {
        let added: usize = with.iter().map(|w| w.len()).sum();
        let mut v = Vec::with_capacity(self.0.len() - range.len() + added);
        v.extend_from_slice(&self.0[..range.start]);
        for w in with {
            v.extend_from_slice(w);
        }
        v.extend_from_slice(&self.0[range.end..]);
        self.0 = v.into_boxed_slice();
    }
}

pub struct PackedIter<'a>(&'a [u8]);

impl<'a> Iterator for PackedIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let b = self.0;
        let (&flen, rest) = b.split_first()?;
        let (field, rest) = rest.split_at(flen as usize);
        let (&vlen, rest) = rest.split_first()?;
        let (value, rest) = rest.split_at(vlen as usize);
        self.0 = rest;
        Some((field, value))
    }
}

pub enum Iter<'a> {
    Small(PackedIter<'a>),
    Large(indexmap::map::Iter<'a, Bytes, Bytes>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(it) => it.next(),
            Iter::Large(it) => it.next().map(|(k, v)| (&k[..], &v[..])),
        }
    }
}

fn fits_small(field: &[u8], value: &[u8]) -> bool {
    field.len() <= SMALL_MAX_VALUE && value.len() <= SMALL_MAX_VALUE
}

impl HashValue {
    /// A small hash's packed bytes (for a prefetch); empty for a table.
    #[inline]
    pub fn packed_bytes(&self) -> &[u8] {
        match self {
            HashValue::Small(p) => &p.0,
            HashValue::Large(_) => &[],
        }
    }

    pub fn len(&self) -> usize {
        match self {
            HashValue::Small(p) => p.iter().count(),
            HashValue::Large(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            HashValue::Small(p) => p.0.is_empty(),
            HashValue::Large(m) => m.is_empty(),
        }
    }

    /// Still in the compact, ordered encoding (HSCAN answers it in one call, as Redis does).
    pub fn is_small(&self) -> bool {
        matches!(self, HashValue::Small(_))
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            HashValue::Small(p) => p.find(field).map(|f| &p.0[f.value]),
            HashValue::Large(m) => m.get(field).map(|v| &v[..]),
        }
    }

    pub fn contains_key(&self, field: &[u8]) -> bool {
        match self {
            HashValue::Small(p) => p.find(field).is_some(),
            HashValue::Large(m) => m.contains_key(field),
        }
    }

    /// Sets a field (copying field and value); true if it was new. Like a listpack, the
    /// compact encoding becomes a table once a field or value is over 64 bytes or there are
    /// more than 128 fields, and never goes back.
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        if let HashValue::Small(p) = self {
            let found = p.find(field);
            if fits_small(field, value) && (found.is_some() || p.iter().count() < SMALL_MAX_ENTRIES)
            {
                // Lengths fit a byte: `fits_small` checked them.
                let (flen, vlen) = ([field.len() as u8], [value.len() as u8]);
                let new = found.is_none();
                match found {
                    Some(f) => p.splice(f.value.start - 1..f.value.end, &[&vlen, value]),
                    None => {
                        let end = p.0.len();
                        p.splice(end..end, &[&flen, field, &vlen, value]);
                    }
                }
                return new;
            }
            self.convert();
        }
        let HashValue::Large(m) = self else {
            return false; // converted just above
        };
        let new = m
            .map
            .insert(Bytes::copy_from_slice(field), Bytes::copy_from_slice(value))
            .is_none();
        let h = &mut m.history;
        h.peak_len = h.peak_len.max(m.map.len().min(u32::MAX as usize) as u32);
        let longest = field.len().max(value.len()).min(u32::MAX as usize) as u32;
        h.longest = h.longest.max(longest);
        new
    }

    /// The most entries and the longest field or value this hash has held.
    pub fn history(&self) -> History {
        match self {
            HashValue::Small(p) => History {
                peak_len: p.iter().count() as u32,
                longest: p
                    .iter()
                    .map(|(f, v)| f.len().max(v.len()))
                    .max()
                    .unwrap_or(0) as u32,
            },
            HashValue::Large(m) => m.history,
        }
    }

    fn convert(&mut self) {
        let history = self.history();
        if let HashValue::Small(p) = self {
            let map: Table = p
                .iter()
                .map(|(k, v)| (Bytes::copy_from_slice(k), Bytes::copy_from_slice(v)))
                .collect();
            *self = HashValue::Large(Box::new(Big { map, history }));
        }
    }

    /// Removes a field; the compact encoding keeps the others' order (as a listpack does).
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            HashValue::Small(p) => match p.find(field) {
                Some(f) => {
                    p.splice(f.entry, &[]);
                    true
                }
                None => false,
            },
            HashValue::Large(m) => m.swap_remove(field).is_some(),
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        match self {
            HashValue::Small(p) => Iter::Small(p.iter()),
            HashValue::Large(m) => Iter::Large(m.iter()),
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &[u8]> {
        self.iter().map(|(_, v)| v)
    }

    pub fn get_index(&self, i: usize) -> Option<(&[u8], &[u8])> {
        match self {
            HashValue::Small(p) => p.iter().nth(i),
            HashValue::Large(m) => m.get_index(i).map(|(k, v)| (&k[..], &v[..])),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_keeps_order_and_converts_when_big() {
        let mut h = HashValue::default();
        assert!(h.insert(b"a", b"1"));
        assert!(h.insert(b"b", b"2"));
        assert!(!h.insert(b"a", b"3"));
        assert!(h.is_small());
        assert_eq!(h.keys().collect::<Vec<_>>(), vec![&b"a"[..], b"b"]);
        assert!(h.remove(b"a"));
        assert!(!h.remove(b"a"));
        assert_eq!(h.get(b"b"), Some(&b"2"[..]));
        h.insert(b"long", &[b'x'; 65]);
        assert!(!h.is_small());
        assert_eq!(h.len(), 2);
        for i in 0..200 {
            h.insert(format!("f{i}").as_bytes(), b"v");
        }
        assert_eq!(h.len(), 202);
        let mut small = HashValue::default();
        for i in 0..=SMALL_MAX_ENTRIES {
            small.insert(format!("f{i}").as_bytes(), b"v");
        }
        assert!(!small.is_small(), "more than 128 fields converts");
    }

    #[test]
    fn packed_values_change_length_in_place() {
        let mut h = HashValue::default();
        h.insert(b"uuid:1", b"1");
        h.insert(b"", b"");
        h.insert(b"z", b"last");
        assert!(!h.insert(b"uuid:1", b"12345"));
        assert!(!h.insert(b"", &[b'e'; 64]));
        assert!(h.is_small(), "64 bytes still fit");
        let all: Vec<_> = h.iter().collect();
        assert_eq!(
            all,
            vec![
                (&b"uuid:1"[..], &b"12345"[..]),
                (&b""[..], &[b'e'; 64][..]),
                (&b"z"[..], &b"last"[..])
            ]
        );
        assert_eq!(h.get_index(2), Some((&b"z"[..], &b"last"[..])));
        assert!(h.remove(b""));
        assert_eq!(h.len(), 2);
        assert!(h.contains_key(b"z") && !h.contains_key(b""));
        assert!(h.remove(b"uuid:1") && h.remove(b"z"));
        assert!(h.is_empty());
        let mut full = HashValue::default();
        for i in 0..SMALL_MAX_ENTRIES {
            full.insert(format!("f{i}").as_bytes(), b"v");
        }
        assert!(full.is_small(), "128 fields stay compact");
        assert!(!full.insert(b"f0", b"w"));
        assert!(full.is_small(), "replacing a field adds none");
    }
}
