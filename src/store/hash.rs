//! Hash values. Small hashes (Redis's listpack encoding: at most 128 fields of at most 64 bytes)
//! are a plain vector of pairs: insertion order, no hash table, one allocation. A Redisson lock
//! is a one-field hash, so this is what most lock hashes are. Bigger ones become an IndexMap.

use bytes::Bytes;
use indexmap::IndexMap;

/// Redis's hash-max-listpack-entries / hash-max-listpack-value defaults.
pub const SMALL_MAX_ENTRIES: usize = 128;
pub const SMALL_MAX_VALUE: usize = 64;

type Table = IndexMap<Bytes, Bytes, ahash::RandomState>;

#[derive(Debug, Clone)]
pub enum HashValue {
    Small(Vec<(Bytes, Bytes)>),
    Large(Box<Table>),
}

impl Default for HashValue {
    fn default() -> Self {
        HashValue::Small(Vec::with_capacity(1))
    }
}

pub enum Iter<'a> {
    Small(std::slice::Iter<'a, (Bytes, Bytes)>),
    Large(indexmap::map::Iter<'a, Bytes, Bytes>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a Bytes, &'a Bytes);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(it) => it.next().map(|(k, v)| (k, v)),
            Iter::Large(it) => it.next(),
        }
    }
}

impl HashValue {
    pub fn len(&self) -> usize {
        match self {
            HashValue::Small(v) => v.len(),
            HashValue::Large(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Still in the compact, ordered encoding (HSCAN answers it in one call, as Redis does).
    pub fn is_small(&self) -> bool {
        matches!(self, HashValue::Small(_))
    }

    pub fn get(&self, field: &[u8]) -> Option<&Bytes> {
        match self {
            HashValue::Small(v) => v.iter().find(|(k, _)| k[..] == *field).map(|(_, v)| v),
            HashValue::Large(m) => m.get(field),
        }
    }

    pub fn get_mut(&mut self, field: &[u8]) -> Option<&mut Bytes> {
        match self {
            HashValue::Small(v) => v.iter_mut().find(|(k, _)| k[..] == *field).map(|(_, v)| v),
            HashValue::Large(m) => m.get_mut(field),
        }
    }

    pub fn contains_key(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Sets a field; true if it was new.
    pub fn insert(&mut self, field: Bytes, value: Bytes) -> bool {
        if let Some(v) = self.get_mut(&field) {
            *v = value;
            self.convert_if_needed();
            return false;
        }
        match self {
            HashValue::Small(v) => v.push((field, value)),
            HashValue::Large(m) => {
                m.insert(field, value);
            }
        }
        self.convert_if_needed();
        true
    }

    /// Sets a field's value in place (e.g. HINCRBY), converting if the value outgrew the compact
    /// encoding.
    pub fn set_existing(&mut self, field: &[u8], value: Bytes) {
        if let Some(v) = self.get_mut(field) {
            *v = value;
        }
        self.convert_if_needed();
    }

    fn convert_if_needed(&mut self) {
        if let HashValue::Small(v) = self {
            let too_big = v.len() > SMALL_MAX_ENTRIES
                || v.iter()
                    .any(|(k, val)| k.len() > SMALL_MAX_VALUE || val.len() > SMALL_MAX_VALUE);
            if too_big {
                let table: Table = v.drain(..).collect();
                *self = HashValue::Large(Box::new(table));
            }
        }
    }

    /// Removes a field; the compact encoding keeps the others' order (as a listpack does).
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            HashValue::Small(v) => match v.iter().position(|(k, _)| k[..] == *field) {
                Some(i) => {
                    v.remove(i);
                    true
                }
                None => false,
            },
            HashValue::Large(m) => m.swap_remove(field).is_some(),
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        match self {
            HashValue::Small(v) => Iter::Small(v.iter()),
            HashValue::Large(m) => Iter::Large(m.iter()),
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &Bytes> {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &Bytes> {
        self.iter().map(|(_, v)| v)
    }

    pub fn get_index(&self, i: usize) -> Option<(&Bytes, &Bytes)> {
        match self {
            HashValue::Small(v) => v.get(i).map(|(k, v)| (k, v)),
            HashValue::Large(m) => m.get_index(i),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn small_keeps_order_and_converts_when_big() {
        let mut h = HashValue::default();
        assert!(h.insert(b("a"), b("1")));
        assert!(h.insert(b("b"), b("2")));
        assert!(!h.insert(b("a"), b("3")));
        assert!(h.is_small());
        assert_eq!(h.keys().cloned().collect::<Vec<_>>(), vec![b("a"), b("b")]);
        assert!(h.remove(b"a"));
        assert!(!h.remove(b"a"));
        assert_eq!(h.get(b"b"), Some(&b("2")));
        h.insert(b("long"), Bytes::from(vec![b'x'; 65]));
        assert!(!h.is_small());
        assert_eq!(h.len(), 2);
        for i in 0..200 {
            h.insert(b(&format!("f{i}")), b("v"));
        }
        assert_eq!(h.len(), 202);
        let mut small = HashValue::default();
        for i in 0..=SMALL_MAX_ENTRIES {
            small.insert(b(&format!("f{i}")), b("v"));
        }
        assert!(!small.is_small(), "more than 128 fields converts");
    }
}
