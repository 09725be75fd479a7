//! One database: keys, values and deadlines. Expiry is lazy (every lookup drops a dead key) and
//! active (`expire_due` removes keys from an ordered deadline index, a bounded number per call).
//!
//! Keys live in an `IndexMap` removed with `swap_remove`. SCAN walks indices from the end to the
//! start: a removal moves the *last* (already visited) entry into the hole, and insertions land
//! at the end (already visited), so every key present for the whole scan is returned, as Redis
//! promises, and RANDOMKEY is one random index.

use super::value::Value;
use bytes::Bytes;
use indexmap::IndexMap;
use std::collections::BTreeSet;

#[derive(Debug)]
pub struct Entry {
    pub value: Value,
    /// Absolute Unix time in ms; 0 means no expiry.
    pub expires_at: u64,
}

impl Entry {
    #[inline]
    pub fn is_expired(&self, now: u64) -> bool {
        // Redis: a key is expired when now > when.
        self.expires_at != 0 && now > self.expires_at
    }
}

#[derive(Debug, Default)]
pub struct Db {
    map: IndexMap<Bytes, Entry, ahash::RandomState>,
    deadlines: BTreeSet<(u64, Bytes)>,
    /// Keys removed by expiry since the caller last drained them (for notifications and stats).
    pub expired: Vec<Bytes>,
    /// Total keys expired, for INFO `expired_keys`.
    pub expired_total: u64,
}

impl Db {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn expires_count(&self) -> usize {
        self.deadlines.len()
    }

    fn expire_now(&mut self, idx: usize) {
        if let Some((key, entry)) = self.map.swap_remove_index(idx) {
            self.deadlines.remove(&(entry.expires_at, key.clone()));
            self.expired_total += 1;
            self.expired.push(key);
        }
    }

    /// Index of a live key, dropping it first if its deadline has passed.
    fn live_index(&mut self, key: &[u8], now: u64) -> Option<usize> {
        let idx = self.map.get_index_of(key)?;
        if self.map[idx].is_expired(now) {
            self.expire_now(idx);
            return None;
        }
        Some(idx)
    }

    /// The entry as stored, expired or not, without touching it (for the persistence log).
    pub fn peek(&self, key: &[u8]) -> Option<&Entry> {
        self.map.get(key)
    }

    pub fn get(&mut self, key: &[u8], now: u64) -> Option<&Entry> {
        let idx = self.live_index(key, now)?;
        Some(&self.map[idx])
    }

    pub fn get_mut(&mut self, key: &[u8], now: u64) -> Option<&mut Entry> {
        let idx = self.live_index(key, now)?;
        Some(&mut self.map[idx])
    }

    pub fn contains(&mut self, key: &[u8], now: u64) -> bool {
        self.live_index(key, now).is_some()
    }

    /// Stores `value` under `key` with the given deadline (0: none), replacing any old entry.
    pub fn set(&mut self, key: Bytes, value: Value, expires_at: u64) {
        match self.map.get_index_of(&key[..]) {
            Some(idx) => {
                let old = self.map[idx].expires_at;
                if old != expires_at {
                    let k = self
                        .map
                        .get_index(idx)
                        .map(|(k, _)| k.clone())
                        .unwrap_or_else(|| key.clone());
                    if old != 0 {
                        self.deadlines.remove(&(old, k.clone()));
                    }
                    if expires_at != 0 {
                        self.deadlines.insert((expires_at, k));
                    }
                }
                let e = &mut self.map[idx];
                e.value = value;
                e.expires_at = expires_at;
            }
            None => {
                if expires_at != 0 {
                    self.deadlines.insert((expires_at, key.clone()));
                }
                self.map.insert(key, Entry { value, expires_at });
            }
        }
    }

    /// Changes the deadline of a live key (0 removes it). Returns false if the key is missing.
    pub fn set_expire(&mut self, key: &[u8], expires_at: u64, now: u64) -> bool {
        let Some(idx) = self.live_index(key, now) else {
            return false;
        };
        let (k, e) = self.map.get_index_mut(idx).expect("index is live");
        if e.expires_at != expires_at {
            if e.expires_at != 0 {
                self.deadlines.remove(&(e.expires_at, k.clone()));
            }
            if expires_at != 0 {
                self.deadlines.insert((expires_at, k.clone()));
            }
            e.expires_at = expires_at;
        }
        true
    }

    pub fn remove(&mut self, key: &[u8], now: u64) -> Option<Entry> {
        let idx = self.live_index(key, now)?;
        let (k, e) = self.map.swap_remove_index(idx)?;
        if e.expires_at != 0 {
            self.deadlines.remove(&(e.expires_at, k));
        }
        Some(e)
    }

    pub fn clear(&mut self) {
        self.map = IndexMap::default();
        self.deadlines.clear();
    }

    /// Removes up to `budget` keys whose deadline has passed. Returns how many were removed.
    pub fn expire_due(&mut self, now: u64, budget: usize) -> usize {
        let mut n = 0;
        while n < budget {
            let Some((when, key)) = self.deadlines.first().cloned() else {
                break;
            };
            if when >= now {
                break;
            }
            self.deadlines.pop_first();
            if let Some((k, _)) = self.map.swap_remove_entry(&key[..]) {
                self.expired_total += 1;
                self.expired.push(k);
            }
            n += 1;
        }
        n
    }

    /// A random live key (expired ones met on the way are dropped).
    pub fn random_key(&mut self, now: u64) -> Option<Bytes> {
        for _ in 0..100 {
            if self.map.is_empty() {
                return None;
            }
            let idx = fastrand::usize(..self.map.len());
            if self.map[idx].is_expired(now) {
                self.expire_now(idx);
                continue;
            }
            return self.map.get_index(idx).map(|(k, _)| k.clone());
        }
        // Mostly dead keys: fall back to the first live one.
        self.map
            .iter()
            .find(|(_, e)| !e.is_expired(now))
            .map(|(k, _)| k.clone())
    }

    /// One SCAN step. `cursor` 0 starts; the returned cursor 0 ends. Visits indices downwards.
    pub fn scan(
        &self,
        cursor: u64,
        count: usize,
        now: u64,
        mut visit: impl FnMut(&Bytes, &Entry),
    ) -> u64 {
        let mut next = if cursor == 0 {
            self.map.len()
        } else {
            (cursor as usize).min(self.map.len())
        };
        let mut seen = 0;
        while next > 0 && seen < count.max(1) {
            next -= 1;
            let (k, e) = self.map.get_index(next).expect("index below len");
            if !e.is_expired(now) {
                visit(k, e);
            }
            seen += 1;
        }
        next as u64
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Bytes, &Entry)> {
        self.map.iter()
    }

    /// Drops every expired key (used before whole-keyspace listings such as KEYS).
    pub fn purge_expired(&mut self, now: u64) {
        self.expire_due(now.saturating_add(1), usize::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::Str(Bytes::copy_from_slice(v.as_bytes()))
    }

    #[test]
    fn lazy_and_active_expiry() {
        let mut db = Db::default();
        db.set(Bytes::from_static(b"a"), s("1"), 100);
        db.set(Bytes::from_static(b"b"), s("2"), 200);
        db.set(Bytes::from_static(b"c"), s("3"), 0);
        assert!(db.get(b"a", 100).is_some(), "alive at its deadline");
        assert!(db.get(b"a", 101).is_none());
        assert_eq!(db.len(), 2);
        assert_eq!(db.expire_due(201, 10), 1);
        assert_eq!(db.len(), 1);
        assert_eq!(db.expires_count(), 0);
        assert_eq!(db.expired_total, 2);
    }

    #[test]
    fn scan_returns_every_stable_key_despite_removals() {
        let mut db = Db::default();
        for i in 0..1000 {
            db.set(Bytes::from(format!("k{i}")), s("v"), 0);
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            let mut batch = Vec::new();
            cursor = db.scan(cursor, 10, 0, |k, _| batch.push(k.clone()));
            seen.extend(batch);
            // Remove a key that is even-numbered and not yet seen, and add a new one.
            db.remove(format!("k{}", round * 2).as_bytes(), 0);
            db.set(Bytes::from(format!("new{round}")), s("v"), 0);
            round += 1;
            if cursor == 0 {
                break;
            }
        }
        for i in 0..1000 {
            let k = format!("k{i}");
            if i % 2 == 1 || i / 2 >= round {
                assert!(seen.contains(k.as_bytes()), "missed {k}");
            }
        }
    }

    #[test]
    fn set_replaces_deadline() {
        let mut db = Db::default();
        db.set(Bytes::from_static(b"a"), s("1"), 100);
        db.set(Bytes::from_static(b"a"), s("2"), 0);
        assert_eq!(db.expires_count(), 0);
        assert!(db.get(b"a", 1000).is_some());
        assert!(db.set_expire(b"a", 50, 0));
        assert_eq!(db.expire_due(60, 10), 1);
        assert!(db.is_empty());
    }
}
