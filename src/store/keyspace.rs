//! One database: keys, values and deadlines. Expiry is lazy (every lookup drops a dead key) and
//! active (`active_expire_step`, as Redis's active expire cycle: sample random keys, remove the
//! dead ones, go on while more than a quarter of a sample was dead), plus an incremental sweep
//! that visits every index in turn, so even a dead key that sampling keeps missing is reclaimed
//! within one full pass. There is no second index of deadlines: a lock key costs one map entry.
//!
//! Keys live in `SHARDS` `IndexMap`s chosen by hash, removed with `swap_remove`. A hash table
//! grows all at once, rehashing every key it holds: one map of 1.8 M keys stalled the server
//! for 245 ms (Redis rehashes incrementally; its worst stall in the same run was 5 ms). A shard
//! holds about 1/128 of the keys, and the shards grow one after the other (`shard_of`), so a
//! growth step costs about 1/128 of that.
//!
//! SCAN walks the shards from the last to the first and each shard's indices from the end to
//! the start: a removal moves the *last* (already visited) entry of its shard into the hole, and
//! insertions land at the end of their shard (visited already, or visited later), so every key
//! present for the whole scan is returned, as Redis promises. RANDOMKEY is a random index of a
//! random non-empty shard.

use super::value::Value;
use bytes::Bytes;
use indexmap::map::RawEntryApiV1;
use indexmap::IndexMap;

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

/// A stored key: exactly its bytes, 16 bytes in the map entry (a `Bytes` would take 32 and a
/// shared header once cloned).
type Key = Box<[u8]>;

type Shard = IndexMap<Key, Entry, ahash::RandomState>;

const SHARDS: usize = 128;

/// A position in the database: shard and index in it.
type At = (usize, usize);

/// Bits of the SCAN cursor that hold the index within a shard.
const CURSOR_INDEX_BITS: u32 = 40;

/// The shard of a hash, from bits 40..52: hashbrown uses neither them for the bucket (low
/// bits) nor for the tag (top 7), so each shard's table stays as spread. Shard `s` takes a
/// share of the keys proportional to 2^(s/SHARDS): with equal shares every shard would reach
/// its growth point at about the same moment (128 growths of a few ms each in a row, 26 ms of
/// latency measured at 1.8 M keys); spread over one octave they come one at a time.
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
    table[(hash >> 40) as usize % SLOTS] as usize
}

#[derive(Debug)]
pub struct Db {
    /// All built with `hasher`; every lookup hashes once here and hands the hash to the shard.
    shards: Vec<Shard>,
    hasher: ahash::RandomState,
    len: usize,
    /// Keys with a deadline (INFO keyspace `expires=`; no sampling when there are none).
    volatile: usize,
    /// Where the incremental sweep goes on: a shard and the index below which it continues
    /// (it walks like SCAN).
    sweep_at: At,
    /// Keys removed by expiry since the caller last drained them (for notifications and stats).
    pub expired: Vec<Bytes>,
    /// Total keys expired, for INFO `expired_keys`.
    pub expired_total: u64,
}

impl Default for Db {
    fn default() -> Db {
        let hasher = ahash::RandomState::new();
        Db {
            shards: (0..SHARDS)
                .map(|_| IndexMap::with_hasher(hasher.clone()))
                .collect(),
            hasher,
            len: 0,
            volatile: 0,
            sweep_at: (0, 0),
            expired: Vec::new(),
            expired_total: 0,
        }
    }
}

impl Db {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn expires_count(&self) -> usize {
        self.volatile
    }

    /// The key's hash and shard.
    #[inline]
    fn locate(&self, key: &[u8]) -> (u64, usize) {
        let hash = self.hasher.hash_one(key);
        (hash, shard_of(hash))
    }

    #[inline]
    fn entry(&self, at: At) -> &Entry {
        &self.shards[at.0][at.1]
    }

    #[inline]
    fn entry_mut(&mut self, at: At) -> &mut Entry {
        &mut self.shards[at.0][at.1]
    }

    fn find(&self, key: &[u8]) -> Option<At> {
        let (hash, shard) = self.locate(key);
        let idx = self.shards[shard]
            .raw_entry_v1()
            .index_from_hash(hash, |k| &k[..] == key)?;
        Some((shard, idx))
    }

    /// Removes the entry at `at` (the shard's last entry takes its index).
    fn take(&mut self, at: At) -> Option<(Key, Entry)> {
        let (key, entry) = self.shards[at.0].swap_remove_index(at.1)?;
        self.len -= 1;
        Some((key, entry))
    }

    fn expire_now(&mut self, at: At) {
        if let Some((key, entry)) = self.take(at) {
            if entry.expires_at != 0 {
                self.volatile -= 1;
            }
            self.expired_total += 1;
            self.expired.push(Bytes::from(key));
        }
    }

    /// Position of a live key, dropping it first if its deadline has passed.
    fn live_index(&mut self, key: &[u8], now: u64) -> Option<At> {
        let at = self.find(key)?;
        if self.entry(at).is_expired(now) {
            self.expire_now(at);
            return None;
        }
        Some(at)
    }

    /// The entry as stored, expired or not, without touching it (for the persistence log).
    pub fn peek(&self, key: &[u8]) -> Option<&Entry> {
        self.find(key).map(|at| self.entry(at))
    }

    pub fn get(&mut self, key: &[u8], now: u64) -> Option<&Entry> {
        let at = self.live_index(key, now)?;
        Some(self.entry(at))
    }

    pub fn get_mut(&mut self, key: &[u8], now: u64) -> Option<&mut Entry> {
        let at = self.live_index(key, now)?;
        Some(self.entry_mut(at))
    }

    pub fn contains(&mut self, key: &[u8], now: u64) -> bool {
        self.live_index(key, now).is_some()
    }

    /// Stores `value` under `key` with the given deadline (0: none), replacing any old entry.
    pub fn set(&mut self, key: &[u8], value: Value, expires_at: u64) {
        let (hash, shard) = self.locate(key);
        let old = match self.shards[shard]
            .raw_entry_mut_v1()
            .from_hash(hash, |k| &k[..] == key)
        {
            indexmap::map::raw_entry_v1::RawEntryMut::Occupied(mut o) => {
                let e = o.get_mut();
                let old = e.expires_at;
                e.value = value;
                e.expires_at = expires_at;
                Some(old)
            }
            indexmap::map::raw_entry_v1::RawEntryMut::Vacant(v) => {
                v.insert_hashed_nocheck(hash, Key::from(key), Entry { value, expires_at });
                self.len += 1;
                None
            }
        };
        self.count_deadline_change(old.unwrap_or(0), expires_at);
    }

    fn count_deadline_change(&mut self, old: u64, new: u64) {
        match (old != 0, new != 0) {
            (false, true) => self.volatile += 1,
            (true, false) => self.volatile -= 1,
            _ => {}
        }
    }

    /// Changes the deadline of a live key (0 removes it). Returns false if the key is missing.
    pub fn set_expire(&mut self, key: &[u8], expires_at: u64, now: u64) -> bool {
        let Some(at) = self.live_index(key, now) else {
            return false;
        };
        let e = self.entry_mut(at);
        let old = std::mem::replace(&mut e.expires_at, expires_at);
        self.count_deadline_change(old, expires_at);
        true
    }

    pub fn remove(&mut self, key: &[u8], now: u64) -> Option<Entry> {
        let at = self.live_index(key, now)?;
        let (_, e) = self.take(at)?;
        self.count_deadline_change(e.expires_at, 0);
        Some(e)
    }

    pub fn clear(&mut self) {
        *self = Db {
            expired: std::mem::take(&mut self.expired),
            expired_total: self.expired_total,
            ..Db::default()
        };
    }

    /// A random position: a random index of a random non-empty shard (shards are filled
    /// evenly by the hash, so this is close to uniform over keys).
    fn random_at(&self) -> Option<At> {
        if self.len == 0 {
            return None;
        }
        let start = fastrand::usize(..SHARDS);
        (0..SHARDS)
            .map(|i| (start + i) % SHARDS)
            .find(|&s| !self.shards[s].is_empty())
            .map(|s| (s, fastrand::usize(..self.shards[s].len())))
    }

    /// The position before `at` in walking order (shards downwards, indices downwards),
    /// skipping empty shards; None past the first. `at.1` may be the shard's length (start).
    fn step_down(&self, at: At) -> Option<At> {
        let (mut shard, mut idx) = at;
        idx = idx.min(self.shards[shard].len());
        loop {
            if idx > 0 {
                return Some((shard, idx - 1));
            }
            if shard == 0 {
                return None;
            }
            shard -= 1;
            idx = self.shards[shard].len();
        }
    }

    /// One step of active expiry: tests `samples` random keys and removes the dead ones, then
    /// sweeps the next `sweep` indices. True when more than a quarter of the sample was dead
    /// (Redis's rule for going on with another step).
    pub fn active_expire_step(&mut self, now: u64, samples: usize, sweep: usize) -> bool {
        if self.volatile == 0 {
            return false;
        }
        let mut dead = 0;
        let mut tested = 0;
        while tested < samples {
            let Some(at) = self.random_at() else {
                break;
            };
            if self.entry(at).is_expired(now) {
                self.expire_now(at);
                dead += 1;
            }
            tested += 1;
        }
        for _ in 0..sweep {
            if self.len == 0 {
                break;
            }
            // From the top again once past the bottom.
            let at = match self.step_down(self.sweep_at) {
                Some(at) => at,
                None => match self.step_down((SHARDS - 1, usize::MAX)) {
                    Some(at) => at,
                    None => break,
                },
            };
            self.sweep_at = at;
            if self.entry(at).is_expired(now) {
                // The shard's last entry moves into the hole: it was visited when the sweep
                // began on this shard.
                self.expire_now(at);
            }
        }
        tested > 0 && dead * 4 > tested
    }

    /// A random live key (expired ones met on the way are dropped).
    pub fn random_key(&mut self, now: u64) -> Option<Bytes> {
        for _ in 0..100 {
            let at = self.random_at()?;
            if self.entry(at).is_expired(now) {
                self.expire_now(at);
                continue;
            }
            let (k, _) = self.shards[at.0].get_index(at.1)?;
            return Some(Bytes::copy_from_slice(k));
        }
        // Mostly dead keys: fall back to the first live one.
        self.iter()
            .find(|(_, e)| !e.is_expired(now))
            .map(|(k, _)| Bytes::copy_from_slice(k))
    }

    /// One SCAN step. `cursor` 0 starts; the returned cursor 0 ends. The cursor holds the shard
    /// (high bits) and the index below which its walk goes on.
    pub fn scan(
        &self,
        cursor: u64,
        count: usize,
        now: u64,
        mut visit: impl FnMut(&[u8], &Entry),
    ) -> u64 {
        let mut at = if cursor == 0 {
            (SHARDS - 1, usize::MAX)
        } else {
            (
                ((cursor >> CURSOR_INDEX_BITS) as usize).min(SHARDS - 1),
                (cursor & ((1 << CURSOR_INDEX_BITS) - 1)) as usize,
            )
        };
        let mut seen = 0;
        while seen < count.max(1) {
            let Some(next) = self.step_down(at) else {
                return 0;
            };
            at = next;
            let (k, e) = self.shards[at.0].get_index(at.1).expect("index below len");
            if !e.is_expired(now) {
                visit(k, e);
            }
            seen += 1;
        }
        match self.step_down(at) {
            None => 0,
            // Resume at `at`: the walk continues below it.
            Some(_) => ((at.0 as u64) << CURSOR_INDEX_BITS) | at.1 as u64,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.shards
            .iter()
            .flat_map(|s| s.iter().map(|(k, e)| (&k[..], e)))
    }

    /// Drops every expired key (before whole-keyspace listings such as KEYS, which Redis also
    /// expires as it walks them).
    pub fn purge_expired(&mut self, now: u64) {
        let mut at = (SHARDS - 1, usize::MAX);
        while let Some(next) = self.step_down(at) {
            at = next;
            if self.entry(at).is_expired(now) {
                self.expire_now(at);
            }
        }
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
        db.set(b"a", s("1"), 100);
        db.set(b"b", s("2"), 200);
        db.set(b"c", s("3"), 0);
        assert!(db.get(b"a", 100).is_some(), "alive at its deadline");
        assert!(db.get(b"a", 101).is_none());
        assert_eq!(db.len(), 2);
        // One sweep over both remaining keys finds the dead one.
        db.active_expire_step(201, 0, 2);
        assert_eq!(db.len(), 1);
        assert_eq!(db.expires_count(), 0);
        assert_eq!(db.expired_total, 2);
    }

    #[test]
    fn scan_returns_every_stable_key_despite_removals() {
        let mut db = Db::default();
        for i in 0..1000 {
            db.set(format!("k{i}").as_bytes(), s("v"), 0);
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            let mut batch = Vec::new();
            cursor = db.scan(cursor, 10, 0, |k, _| batch.push(k.to_vec()));
            seen.extend(batch);
            // Remove a key that is even-numbered and not yet seen, and add a new one.
            db.remove(format!("k{}", round * 2).as_bytes(), 0);
            db.set(format!("new{round}").as_bytes(), s("v"), 0);
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
        db.set(b"a", s("1"), 100);
        db.set(b"a", s("2"), 0);
        assert_eq!(db.expires_count(), 0);
        assert!(db.get(b"a", 1000).is_some());
        assert!(db.set_expire(b"a", 50, 0));
        assert_eq!(db.expires_count(), 1);
        assert!(
            db.active_expire_step(60, 10, 0),
            "every sampled key was dead"
        );
        assert!(db.is_empty());
        assert_eq!(db.expires_count(), 0);
    }

    #[test]
    fn active_expiry_reclaims_everything_dead_and_nothing_alive() {
        let mut db = Db::default();
        for i in 0..10_000u64 {
            // A third never expires, a third is dead at t=1000, a third later.
            let deadline = match i % 3 {
                0 => 0,
                1 => 500,
                _ => 5000,
            };
            db.set(format!("k{i}").as_bytes(), s("v"), deadline);
        }
        assert_eq!(db.expires_count(), 6666);
        // Sampling stops once under a quarter of a sample is dead; the sweep finishes the job.
        let mut steps = 0;
        while db.len() > 6667 {
            db.active_expire_step(1000, 20, 64);
            steps += 1;
            assert!(steps < 1000, "sweep never finished");
        }
        assert_eq!(db.len(), 6667);
        assert_eq!(db.expires_count(), 3333);
        assert_eq!(db.expired_total, 3333);
        assert!(db.iter().all(|(_, e)| !e.is_expired(1000)));
    }

    #[test]
    fn agrees_with_a_plain_map_under_random_operations() {
        let mut db = Db::default();
        let mut model: std::collections::HashMap<Vec<u8>, u64> = Default::default();
        let mut rng = fastrand::Rng::with_seed(7);
        let now = 1000;
        for _ in 0..20_000 {
            let key = format!("k{}", rng.usize(..3000)).into_bytes();
            match rng.u8(..4) {
                0 | 1 => {
                    // Live (0), dead at `now` (999) or with no deadline.
                    let deadline = [0, 999, 5000][rng.usize(..3)];
                    db.set(&key, s("v"), deadline);
                    model.insert(key, deadline);
                }
                2 => {
                    let live = model.get(&key).is_some_and(|&d| d == 0 || d >= now);
                    assert_eq!(db.remove(&key, now).is_some(), live);
                    model.remove(&key);
                }
                _ => {
                    let live = model.get(&key).is_some_and(|&d| d == 0 || d >= now);
                    assert_eq!(db.contains(&key, now), live);
                    if !live {
                        model.remove(&key);
                    }
                }
            }
            assert_eq!(db.len(), model.len());
            assert_eq!(
                db.expires_count(),
                model.values().filter(|&&d| d != 0).count()
            );
        }
        // SCAN sees every live key exactly as the model has them.
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        loop {
            cursor = db.scan(cursor, 7, now, |k, _| {
                assert!(seen.insert(k.to_vec()), "{k:?} twice without changes");
            });
            if cursor == 0 {
                break;
            }
        }
        let live: std::collections::HashSet<Vec<u8>> = model
            .iter()
            .filter(|(_, &d)| d == 0 || d >= now)
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(seen, live);
        db.purge_expired(now);
        assert_eq!(db.len(), live.len());
        assert_eq!(db.iter().count(), live.len());
    }
}
