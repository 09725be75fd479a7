//! The key → entry map of one database: entries in one index space (what SCAN, RANDOMKEY and
//! the expiry sweep walk), found through hash tables that never stall the server as they grow.
//!
//! An `IndexMap` grows its one table all at once, and its rehash reads every entry's stored hash
//! at random: loading 2 M lock keys saw a 260 ms worst latency (Redis rehashes incrementally;
//! 5-22 ms in the same test here). Here:
//! - the slots are `SHARDS` tables chosen by hash, growing one at a time (`shard_of`), and a
//!   slot holds 32 bits of the key's hash beside the entry's index, so a rehash reads only the
//!   table it rebuilds (the same load: 4.6-18 ms worst);
//! - entries live in fixed-size chunks, so adding one never moves the others, and a fresh chunk
//!   is memory the process has not touched yet (RSS per lock key 159 B, Redis 190 B).
//!
//! Removal is `swap_remove`: the last entry moves into the hole (SCAN's guarantee relies on it;
//! see keyspace.rs).

use hashbrown::HashTable;

const SHARDS: usize = 64;
/// Entries per chunk: 16 K entries of 64 bytes, one 1 MiB allocation.
const CHUNK: usize = 1 << 14;

/// A table slot: the upper 32 bits of the key's hash and the entry's index.
#[derive(Clone, Copy)]
struct Slot {
    hash: u32,
    idx: u32,
}

/// What hashbrown sees of a slot's hash: its 32 bits in both halves, so the bucket (low bits)
/// and the tag (top 7 bits) come from different bits for any table under 2^25 buckets.
#[inline]
fn widen(h: u32) -> u64 {
    ((h as u64) << 32) | h as u64
}

#[inline]
fn slot_hash(s: &Slot) -> u64 {
    widen(s.hash)
}

/// The shard of a hash, from its low 12 bits (the slot hash is the high 32). Shard `s` takes a
/// share of the keys proportional to 2^(s/SHARDS): with equal shares every table would reach
/// its growth point at about the same moment (64 rehashes back to back: 13-23 ms at 1.8 M keys);
/// spread over one octave they come one at a time.
fn shard_of(hash: u64) -> usize {
    const SLOTS: usize = 1 << 12;
    static TABLE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let weight = |s: usize| (s as f64 / SHARDS as f64).exp2();
        let total: f64 = (0..SHARDS).map(weight).sum();
        let mut table = Vec::with_capacity(SLOTS);
        let mut upto = 0.0;
        for s in 0..SHARDS {
            upto += weight(s) / total * SLOTS as f64;
            while (table.len() as f64) < upto.round() && table.len() < SLOTS {
                table.push(s as u8);
            }
        }
        table.resize(SLOTS, (SHARDS - 1) as u8);
        table
    });
    table[hash as usize % SLOTS] as usize
}

/// A key's hash split into its shard and its slot hash (high 32 bits).
#[derive(Clone, Copy)]
pub struct Hashed {
    shard: usize,
    hash: u32,
}

pub struct KeyMap<K, V> {
    /// Every chunk but the last holds exactly `CHUNK` entries. The first grows by doubling up
    /// to `CHUNK` (a database of a few keys holds a few slots); the next ones are allocated
    /// whole, untouched until filled.
    chunks: Vec<Vec<(K, V)>>,
    /// The last full-size chunk emptied by removals, kept so that a size going back and forth
    /// across a chunk boundary does not allocate each time.
    spare: Option<Vec<(K, V)>>,
    len: usize,
    tables: Vec<HashTable<Slot>>,
    hasher: ahash::RandomState,
}

impl<K, V> std::fmt::Debug for KeyMap<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyMap").field("len", &self.len).finish()
    }
}

impl<K, V> Default for KeyMap<K, V> {
    fn default() -> Self {
        KeyMap {
            chunks: Vec::new(),
            spare: None,
            len: 0,
            tables: (0..SHARDS).map(|_| HashTable::new()).collect(),
            hasher: ahash::RandomState::new(),
        }
    }
}

impl<K: AsRef<[u8]>, V> KeyMap<K, V> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn hash(&self, key: &[u8]) -> Hashed {
        let h = self.hasher.hash_one(key);
        Hashed {
            shard: shard_of(h),
            hash: (h >> 32) as u32,
        }
    }

    #[inline]
    fn at(&self, idx: usize) -> &(K, V) {
        &self.chunks[idx / CHUNK][idx % CHUNK]
    }

    #[inline]
    fn at_mut(&mut self, idx: usize) -> &mut (K, V) {
        &mut self.chunks[idx / CHUNK][idx % CHUNK]
    }

    /// The key and value at `idx` (below `len`).
    pub fn get_index(&self, idx: usize) -> Option<(&K, &V)> {
        (idx < self.len).then(|| {
            let (k, v) = self.at(idx);
            (k, v)
        })
    }

    pub fn value(&self, idx: usize) -> &V {
        &self.at(idx).1
    }

    pub fn value_mut(&mut self, idx: usize) -> &mut V {
        &mut self.at_mut(idx).1
    }

    /// The index of `key`, hashing it.
    pub fn index_of(&self, key: &[u8]) -> Option<usize> {
        self.find(self.hash(key), key)
    }

    pub fn find(&self, h: Hashed, key: &[u8]) -> Option<usize> {
        self.tables[h.shard]
            .find(widen(h.hash), |s| {
                s.hash == h.hash && self.at(s.idx as usize).0.as_ref() == key
            })
            .map(|s| s.idx as usize)
    }

    /// Adds an entry for a key that is not in the map (the caller looked); its index.
    pub fn insert_new(&mut self, h: Hashed, key: K, value: V) -> usize {
        let idx = self.len;
        match self.chunks.last_mut() {
            None => self.chunks.push(Vec::with_capacity(16)),
            Some(c) if c.len() == CHUNK => {
                let next = self
                    .spare
                    .take()
                    .unwrap_or_else(|| Vec::with_capacity(CHUNK));
                self.chunks.push(next);
            }
            // The first chunk doubles on its way to `CHUNK`, never past it.
            Some(c) if c.len() == c.capacity() => c.reserve_exact(c.len().min(CHUNK - c.len())),
            Some(_) => {}
        }
        self.chunks
            .last_mut()
            .expect("a chunk with room was just ensured")
            .push((key, value));
        self.len += 1;
        self.tables[h.shard].insert_unique(
            widen(h.hash),
            Slot {
                hash: h.hash,
                idx: idx as u32,
            },
            slot_hash,
        );
        idx
    }

    /// Points the slot of the entry at `from` to `to`.
    fn repoint(&mut self, from: usize, to: usize) {
        let h = self.hash(self.at(from).0.as_ref());
        if let Some(s) = self.tables[h.shard].find_mut(widen(h.hash), |s| s.idx as usize == from) {
            s.idx = to as u32;
        }
    }

    /// Removes the entry at `idx`; the last entry takes its index.
    pub fn swap_remove(&mut self, idx: usize) -> Option<(K, V)> {
        if idx >= self.len {
            return None;
        }
        let h = self.hash(self.at(idx).0.as_ref());
        if let Ok(slot) = self.tables[h.shard].find_entry(widen(h.hash), |s| s.idx as usize == idx)
        {
            slot.remove();
        }
        let last = self.len - 1;
        if idx != last {
            self.repoint(last, idx);
        }
        let chunk = self.chunks.last_mut().expect("len > 0 means a chunk");
        let mut removed = chunk.pop().expect("the last chunk holds the last entry");
        if chunk.is_empty() && self.chunks.len() > 1 {
            self.spare = self.chunks.pop();
        }
        self.len -= 1;
        if idx != last {
            std::mem::swap(&mut removed, self.at_mut(idx));
        }
        Some(removed)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.chunks.iter().flatten().map(|(k, v)| (k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Map = KeyMap<Box<[u8]>, u64>;

    fn key(i: u64) -> Box<[u8]> {
        format!("k{i}").into_bytes().into_boxed_slice()
    }

    #[test]
    fn agrees_with_a_plain_map_across_chunks() {
        let mut m = Map::default();
        let mut model: std::collections::HashMap<Box<[u8]>, u64> = Default::default();
        let mut rng = fastrand::Rng::with_seed(11);
        // More entries than a chunk, so removals move entries across chunk boundaries.
        for step in 0..200_000u64 {
            let k = key(rng.u64(..40_000));
            let h = m.hash(&k);
            match m.find(h, &k) {
                Some(idx) if rng.bool() => {
                    let (rk, rv) = m.swap_remove(idx).expect("found");
                    assert_eq!(rk, k);
                    assert_eq!(model.remove(&k), Some(rv));
                }
                Some(idx) => {
                    *m.value_mut(idx) = step;
                    model.insert(k, step);
                }
                None => {
                    assert!(!model.contains_key(&k));
                    let idx = m.insert_new(h, k.clone(), step);
                    assert_eq!(m.get_index(idx).map(|(_, v)| *v), Some(step));
                    model.insert(k, step);
                }
            }
            assert_eq!(m.len(), model.len());
        }
        assert!(m.len() > CHUNK, "the test must span chunks");
        for (k, v) in &model {
            let idx = m.find(m.hash(k), k).expect("every model key is found");
            assert_eq!(m.value(idx), v);
        }
        assert_eq!(m.iter().count(), model.len());
        // Emptying it leaves the first chunk and one spare.
        while !m.is_empty() {
            m.swap_remove(rng.usize(..m.len()));
        }
        assert_eq!(m.chunks.len(), 1);
        assert!(m.chunks[0].is_empty());
        assert!(m.spare.is_some());
        assert!(m.tables.iter().all(|t| t.is_empty()));
    }
}
