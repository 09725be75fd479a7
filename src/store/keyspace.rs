//! One database: keys, values and deadlines. Expiry is lazy (every lookup drops a dead key) and
//! active (`active_expire_step`, as Redis's active expire cycle: sample random keys, remove the
//! dead ones, go on while more than a quarter of a sample was dead), plus an incremental sweep
//! that visits every index in turn, so even a dead key that sampling keeps missing is reclaimed
//! within one full pass. There is no second index of deadlines: a lock key costs one map entry.
//!
//! Keys live in a `KeyMap` (keymap.rs: one index space, hash tables that grow without stalling
//! the server) removed with `swap_remove`. SCAN walks indices from the end to the start: a
//! removal moves the *last* (already visited) entry into the hole, and insertions land at the
//! end (already visited), so every key present for the whole scan is returned, as Redis
//! promises, and RANDOMKEY is one random index.

use super::change::DbChanges;
use super::keymap::KeyMap;
use super::value::Value;
use bytes::Bytes;

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

/// A stored key: inside the map entry up to `keymap::INLINE` bytes (see keymap.rs).
type Key = super::keymap::Key;
pub use super::keymap::StrEnc;

/// What one key's entry takes in the map (its key and `Entry`), for MEMORY STATS and INFO.
pub const ENTRY_BYTES: usize = std::mem::size_of::<Key>() + std::mem::size_of::<Entry>();

#[derive(Debug, Default)]
pub struct Db {
    map: KeyMap<Key, Entry>,
    /// Keys with a deadline (INFO keyspace `expires=`; no sampling when there are none).
    volatile: usize,
    /// Where the incremental sweep goes on (it walks indices downwards, like SCAN).
    sweep_at: usize,
    /// Keys removed by expiry since the caller last drained them (for notifications and stats).
    pub expired: Vec<Bytes>,
    /// Total keys expired, for INFO `expired_keys`.
    pub expired_total: u64,
    /// Keys created since the caller last drained them, for the `new` keyspace event (Redis
    /// fires it from dbAdd). Recorded only while `record_created` is set, so a lock server
    /// with the event off pays nothing per new key.
    pub created: Vec<Bytes>,
    record_created: bool,
    /// This database's part of the change record (change.rs): every write path below records
    /// the key it changes, so no caller can forget to.
    pub(super) changes: DbChanges,
    /// Redis's LRU clock as of the last `now` this database saw (a lookup or an expiry cycle),
    /// stamped on keys that are written without a lookup first.
    lru_now: u32,
    /// INFO keyspace `avg_ttl` (ms): Redis's estimate, a moving average of the TTLs that active
    /// expiry samples; 0 while no key has a deadline.
    pub avg_ttl: u64,
    /// What a lookup does with a key whose deadline has passed.
    pub expiry: Expiry,
}

/// How lookups treat a key whose deadline has passed. A Redis replica leaves expiry to its
/// master, whose DEL arrives in the stream: its clients read such a key as absent, and the
/// master's own commands still find it (Redis's expireIfNeeded for a replica).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// A master: the key is removed (and announced) on lookup.
    #[default]
    Remove,
    /// A replica's clients: the key reads as absent and stays.
    Hide,
    /// A replica applying its master's stream: the key is live until the master deletes it.
    Keep,
}

/// Redis's LRU clock: seconds, 24 bits, wrapping (about every 194 days).
pub const LRU_CLOCK_MAX: u32 = (1 << 24) - 1;

pub fn lru_clock(now_ms: u64) -> u32 {
    ((now_ms / 1000) & LRU_CLOCK_MAX as u64) as u32
}

/// Redis's `estimateObjectIdleTime` in seconds: from the key's clock to `clock`, wrapping.
pub fn idle_seconds(key_lru: u32, clock: u32) -> u64 {
    if clock >= key_lru {
        (clock - key_lru) as u64
    } else {
        (clock + (LRU_CLOCK_MAX - key_lru)) as u64
    }
}

impl Db {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The database's share of INFO's `used_memory_overhead` (its index and unused slots).
    pub fn overhead_bytes(&self) -> usize {
        self.map.overhead_bytes()
    }

    pub fn expires_count(&self) -> usize {
        self.volatile
    }

    fn expire_now(&mut self, idx: usize) {
        if let Some((key, entry)) = self.map.swap_remove(idx) {
            if entry.expires_at != 0 {
                self.volatile -= 1;
            }
            self.changes.key(&key);
            self.expired_total += 1;
            self.expired.push(Bytes::copy_from_slice(&key));
        }
    }

    /// Index of a live key, dropping it first if its deadline has passed; the access is
    /// recorded on the key (Redis's lookupKey without LOOKUP_NOTOUCH).
    fn live_index(&mut self, key: &[u8], now: u64) -> Option<usize> {
        let idx = self.live_index_untouched(key, now)?;
        self.map.key_mut(idx).set_lru(self.lru_now);
        Some(idx)
    }

    /// `live_index` without recording an access (LOOKUP_NOTOUCH: EXISTS, TYPE, TTL, OBJECT).
    #[inline]
    fn live_index_untouched(&mut self, key: &[u8], now: u64) -> Option<usize> {
        self.lru_now = lru_clock(now);
        let idx = self.map.index_of(key)?;
        if self.map.value(idx).is_expired(now) {
            match self.expiry {
                Expiry::Remove => self.expire_now(idx),
                Expiry::Hide => return None,
                Expiry::Keep => return Some(idx),
            }
            return None;
        }
        Some(idx)
    }

    /// The time keys written without a lookup are stamped with, for writers that look nothing up
    /// first (loading a snapshot): Redis gives a loaded object the clock of its creation.
    pub fn note_time(&mut self, now: u64) {
        self.lru_now = lru_clock(now);
    }

    /// A live key's entry without recording an access (see `live_index_untouched`).
    pub fn get_untouched(&mut self, key: &[u8], now: u64) -> Option<&Entry> {
        let idx = self.live_index_untouched(key, now)?;
        Some(self.map.value(idx))
    }

    /// A stored key's LRU clock, expired or not, without accessing it (DEBUG OBJECT's `lru`).
    pub fn lru_of(&self, key: &[u8]) -> Option<u32> {
        let idx = self.map.index_of(key)?;
        self.map.get_index(idx).map(|(k, _)| k.lru())
    }

    /// Seconds since a live key was last accessed (OBJECT IDLETIME), without accessing it.
    pub fn idle_seconds(&mut self, key: &[u8], now: u64) -> Option<u64> {
        let idx = self.live_index_untouched(key, now)?;
        let lru = self.map.get_index(idx).map_or(0, |(k, _)| k.lru());
        Some(idle_seconds(lru, lru_clock(now)))
    }

    /// Sets a live key's last access to `idle` seconds ago (RESTORE … IDLETIME, as Redis's
    /// objectSetLRUOrLFU). True if the key exists.
    pub fn set_idle(&mut self, key: &[u8], idle: u64, now: u64) -> bool {
        let Some(idx) = self.live_index_untouched(key, now) else {
            return false;
        };
        let clock = lru_clock(now) as i64;
        let mut abs = clock - idle.min(i64::MAX as u64) as i64;
        if abs < 0 {
            abs += LRU_CLOCK_MAX as i64;
        }
        // Still negative for an idle time beyond the clock's range: C keeps the low 24 bits.
        self.map
            .key_mut(idx)
            .set_lru((abs as u64 & LRU_CLOCK_MAX as u64) as u32);
        true
    }

    /// The entry as stored, expired or not, without touching it (for the persistence log).
    pub fn peek(&self, key: &[u8]) -> Option<&Entry> {
        let idx = self.map.index_of(key)?;
        Some(self.map.value(idx))
    }

    /// The entry as stored, for the log's own bookkeeping in it (a stream's journal): not a
    /// change of the data, so not recorded.
    pub fn peek_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let idx = self.map.index_of(key)?;
        Some(self.map.value_mut(idx))
    }

    pub fn get(&mut self, key: &[u8], now: u64) -> Option<&Entry> {
        let idx = self.live_index(key, now)?;
        Some(self.map.value(idx))
    }

    /// The entry for writing: the key counts as changed (see change.rs). What is written is
    /// encoded by its content unless the writer says otherwise (`set_str_enc`).
    pub fn get_mut(&mut self, key: &[u8], now: u64) -> Option<&mut Entry> {
        let idx = self.live_index(key, now)?;
        self.map.key_mut(idx).set_str_enc(StrEnc::ByContent);
        self.changes.key(key);
        Some(self.map.value_mut(idx))
    }

    /// Records how a stored key's string is encoded where its content does not decide it
    /// (see keymap::StrEnc), until the value is next written.
    pub fn set_str_enc(&mut self, key: &[u8], to: StrEnc) {
        if let Some(idx) = self.map.index_of(key) {
            self.map.key_mut(idx).set_str_enc(to);
        }
    }

    /// How a stored key's string is encoded where its content does not decide it.
    pub fn str_enc(&self, key: &[u8]) -> StrEnc {
        self.map
            .index_of(key)
            .and_then(|idx| self.map.get_index(idx))
            .map_or(StrEnc::ByContent, |(k, _)| k.str_enc())
    }

    /// `f` on the live entry for `key`, found once; the key counts as changed only when `f`
    /// succeeds (a command that fails on the value, as INCR on text, changed nothing).
    pub fn modify<T, E>(
        &mut self,
        key: &[u8],
        now: u64,
        f: impl FnOnce(&mut Entry) -> Result<T, E>,
    ) -> Option<Result<T, E>> {
        let idx = self.live_index(key, now)?;
        self.map.key_mut(idx).set_str_enc(StrEnc::ByContent);
        let r = f(self.map.value_mut(idx));
        if r.is_ok() {
            self.changes.key(key);
        }
        Some(r)
    }

    pub fn contains(&mut self, key: &[u8], now: u64) -> bool {
        self.live_index(key, now).is_some()
    }

    /// Stores `value` under `key` with the given deadline (0: none), replacing any old entry.
    pub fn set(&mut self, key: &[u8], value: Value, expires_at: u64) {
        self.changes.key(key);
        let old = match self.map.lookup(key) {
            Ok(idx) => {
                let k = self.map.key_mut(idx);
                k.set_lru(self.lru_now);
                k.set_str_enc(StrEnc::ByContent);
                let e = self.map.value_mut(idx);
                let old = e.expires_at;
                e.value = value;
                e.expires_at = expires_at;
                Some(old)
            }
            Err(h) => {
                self.insert_at(h, key, value, expires_at);
                None
            }
        };
        self.count_deadline_change(old.unwrap_or(0), expires_at);
    }

    fn insert_at(&mut self, h: super::keymap::Hashed, key: &[u8], value: Value, expires_at: u64) {
        let mut stored = Key::new(key);
        stored.set_lru(self.lru_now);
        self.map.insert_new(h, stored, Entry { value, expires_at });
        if self.record_created {
            self.created.push(Bytes::copy_from_slice(key));
        }
    }

    /// SET without GET or KEEPTTL, with one lookup where `get` then `set` made two: stores
    /// `value()` under `key` unless `only_if_absent` (NX) and the key is live; false when it
    /// stored nothing. An expired entry is dropped first, as the lookup would have.
    pub fn put(
        &mut self,
        key: &[u8],
        value: impl FnOnce() -> Value,
        expires_at: u64,
        now: u64,
        only_if_absent: bool,
    ) -> bool {
        self.lru_now = lru_clock(now);
        let h = match self.map.lookup(key) {
            Ok(idx) if !self.map.value(idx).is_expired(now) || self.expiry == Expiry::Keep => {
                self.map.key_mut(idx).set_lru(self.lru_now);
                if only_if_absent {
                    return false;
                }
                self.changes.key(key);
                self.map.key_mut(idx).set_str_enc(StrEnc::ByContent);
                let e = self.map.value_mut(idx);
                let old = std::mem::replace(&mut e.expires_at, expires_at);
                e.value = value();
                self.count_deadline_change(old, expires_at);
                return true;
            }
            Ok(idx) => {
                self.expire_now(idx);
                self.set(key, value(), expires_at);
                return true;
            }
            Err(h) => h,
        };
        self.changes.key(key);
        self.insert_at(h, key, value(), expires_at);
        self.count_deadline_change(0, expires_at);
        true
    }

    pub fn records_created(&self) -> bool {
        self.record_created
    }

    /// Starts or stops recording created keys (the `n` class of `notify-keyspace-events`).
    pub fn record_created(&mut self, on: bool) {
        self.record_created = on;
        if !on {
            self.created = Vec::new();
        }
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
        let Some(idx) = self.live_index(key, now) else {
            return false;
        };
        self.changes.key(key);
        let e = self.map.value_mut(idx);
        let old = std::mem::replace(&mut e.expires_at, expires_at);
        self.count_deadline_change(old, expires_at);
        true
    }

    pub fn remove(&mut self, key: &[u8], now: u64) -> Option<Entry> {
        let idx = self.live_index(key, now)?;
        self.changes.key(key);
        let (_, e) = self.map.swap_remove(idx)?;
        self.count_deadline_change(e.expires_at, 0);
        Some(e)
    }

    /// `clear`, handing back the old entries and their count (FLUSHDB ASYNC frees them on
    /// another thread, store/lazyfree.rs).
    pub fn clear_taking(&mut self) -> (Box<dyn Send>, u64) {
        let n = self.map.len() as u64;
        let old = std::mem::take(&mut self.map);
        self.clear();
        (Box::new(old), n)
    }

    pub fn clear(&mut self) {
        if self.changes.on {
            self.changes.flushed = true;
        }
        self.map = KeyMap::default();
        self.volatile = 0;
        self.sweep_at = 0;
        self.avg_ttl = 0;
    }

    /// One step of active expiry: tests `samples` random keys and removes the dead ones, then
    /// sweeps the next `sweep` indices. True when more than a quarter of the sample was dead
    /// (Redis's rule for going on with another step).
    pub fn active_expire_step(&mut self, now: u64, samples: usize, sweep: usize) -> bool {
        self.active_expire_step_of(now, samples, sweep, |_| true)
    }

    /// `active_expire_step` over the keys `ours` accepts: a dead key it refuses stays (and
    /// counts as neither dead nor sampled for the TTL estimate), for whoever may delete it (a
    /// cluster node expires only the keys of the Raft groups it leads; another group's leader
    /// logs their deletion).
    pub fn active_expire_step_of(
        &mut self,
        now: u64,
        samples: usize,
        sweep: usize,
        mut ours: impl FnMut(&[u8]) -> bool,
    ) -> bool {
        // The cron's tick keeps the clock for keys written without a lookup (Redis's
        // serverCron updates `server.lruclock`).
        self.lru_now = lru_clock(now);
        if self.volatile == 0 {
            self.avg_ttl = 0;
            return false;
        }
        let mut dead = 0;
        let mut tested = 0;
        let (mut ttl_sum, mut ttl_samples) = (0u64, 0u64);
        while tested < samples && !self.map.is_empty() {
            let idx = fastrand::usize(..self.map.len());
            let expires_at = self.map.value(idx).expires_at;
            let (key, entry) = self.map.get_index(idx).expect("index below len");
            if !ours(&key[..]) {
                // Not this caller's to expire, nor to estimate.
            } else if entry.is_expired(now) {
                self.expire_now(idx);
                dead += 1;
            } else if expires_at > now {
                // Deadlines can be near u64::MAX (PEXPIREAT takes any i64): the sum saturates.
                ttl_sum = ttl_sum.saturating_add(expires_at - now);
                ttl_samples += 1;
            }
            tested += 1;
        }
        if let Some(avg) = ttl_sum.checked_div(ttl_samples) {
            // Redis's activeExpireCycle: the first estimate is taken whole, then each new
            // sample's average weighs 1/50.
            if self.avg_ttl == 0 {
                self.avg_ttl = avg;
            }
            self.avg_ttl = (self.avg_ttl / 50) * 49 + avg / 50;
        }
        for _ in 0..sweep {
            if self.map.is_empty() {
                break;
            }
            if self.sweep_at == 0 || self.sweep_at > self.map.len() {
                self.sweep_at = self.map.len();
            }
            self.sweep_at -= 1;
            let (key, entry) = self.map.get_index(self.sweep_at).expect("index below len");
            if entry.is_expired(now) && ours(&key[..]) {
                // The last entry moves into the hole: it was visited when the sweep began.
                self.expire_now(self.sweep_at);
            }
        }
        tested > 0 && dead * 4 > tested
    }

    /// A random live key (expired ones met on the way are dropped, or only passed over where
    /// lookups hide them: their deletion is someone else's to log).
    pub fn random_key(&mut self, now: u64) -> Option<Bytes> {
        for _ in 0..100 {
            if self.map.is_empty() {
                return None;
            }
            let idx = fastrand::usize(..self.map.len());
            if self.map.value(idx).is_expired(now) {
                if self.expiry != Expiry::Hide {
                    self.expire_now(idx);
                }
                continue;
            }
            return self
                .map
                .get_index(idx)
                .map(|(k, _)| Bytes::copy_from_slice(k));
        }
        // Mostly dead keys: fall back to the first live one.
        self.map
            .iter()
            .find(|(_, e)| !e.is_expired(now))
            .map(|(k, _)| Bytes::copy_from_slice(k))
    }

    /// The positions one SCAN step visits, downwards from `cursor` (0: the top): up to `count`
    /// of them; the range's start is the next cursor (0 ends).
    fn scan_window(&self, cursor: u64, count: usize) -> std::ops::Range<usize> {
        let top = if cursor == 0 {
            self.map.len()
        } else {
            (cursor as usize).min(self.map.len())
        };
        top.saturating_sub(count.max(1))..top
    }

    /// One SCAN step. `cursor` 0 starts; the returned cursor 0 ends. Visits up to `count`
    /// positions below `cursor`, downwards, skipping keys expired at `now`.
    pub fn scan(
        &self,
        cursor: u64,
        count: usize,
        now: u64,
        mut visit: impl FnMut(&[u8], &Entry),
    ) -> u64 {
        let window = self.scan_window(cursor, count);
        let next = window.start as u64;
        for at in window.rev() {
            let (k, e) = self.map.get_index(at).expect("index below len");
            if !e.is_expired(now) {
                visit(k, e);
            }
        }
        next
    }

    /// The SCAN command's step: `scan`, except that a key found expired is deleted as Redis's
    /// SCAN deletes it (expireIfNeeded), unless this keyspace leaves expiry to a master; its
    /// position then holds a key already visited, which SCAN's contract allows to repeat.
    pub fn scan_expiring(
        &mut self,
        cursor: u64,
        count: usize,
        now: u64,
        mut visit: impl FnMut(&[u8], &Entry),
    ) -> u64 {
        let window = self.scan_window(cursor, count);
        let next = window.start as u64;
        for at in window.rev() {
            let expired = self.map.value(at).is_expired(now);
            match (expired, self.expiry) {
                (true, Expiry::Remove) => self.expire_now(at),
                (true, Expiry::Hide) => {}
                _ => {
                    let (k, e) = self.map.get_index(at).expect("index below len");
                    visit(k, e);
                }
            }
        }
        next
    }

    /// Starts loading what looking these keys up will read, before a batch of requests runs
    /// (see `KeyMap::prefetch`).
    pub fn prefetch<'a>(&self, keys: impl Iterator<Item = &'a [u8]>) {
        self.map.prefetch(keys, |e| e.value.own_bytes());
    }

    /// Before a batch that removes up to `n` keys (see `KeyMap::prefetch_tail`).
    pub fn prefetch_removals(&self, n: usize) {
        self.map.prefetch_tail(n);
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.map.iter().map(|(k, e)| (&k[..], e))
    }

    /// Moves every deadline `ms` later (saturating; keys without one are untouched), and
    /// returns how many moved. Each key that moved counts as changed (change.rs). The count of
    /// keys with a deadline cannot change: a nonzero deadline stays nonzero.
    pub fn shift_deadlines(&mut self, ms: u64) -> usize {
        self.shift_deadlines_of(ms, |_| true)
    }

    /// `shift_deadlines` of the keys `ours` accepts (a Raft group's EXTEND moves the deadlines
    /// of its own slots' keys alone).
    pub fn shift_deadlines_of(&mut self, ms: u64, mut ours: impl FnMut(&[u8]) -> bool) -> usize {
        if ms == 0 || self.volatile == 0 {
            return 0;
        }
        let mut moved = 0;
        for idx in 0..self.map.len() {
            let at = self.map.value(idx).expires_at;
            let shifted = at.saturating_add(ms);
            if at == 0 || shifted == at {
                continue;
            }
            if let Some((key, _)) = self.map.get_index(idx) {
                if !ours(&key[..]) {
                    continue;
                }
                self.changes.key(key);
            }
            self.map.value_mut(idx).expires_at = shifted;
            moved += 1;
        }
        moved
    }

    /// Drops every expired key.
    #[cfg(test)]
    pub fn purge_expired(&mut self, now: u64) {
        let mut idx = self.map.len();
        while idx > 0 {
            idx -= 1;
            if self.map.value(idx).is_expired(now) {
                self.expire_now(idx);
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
    fn active_expiry_of_some_keys_leaves_the_others_dead_keys() {
        let mut db = Db::default();
        for i in 0..50 {
            db.set(format!("mine{i}").as_bytes(), s("1"), 100);
            db.set(format!("theirs{i}").as_bytes(), s("1"), 100);
        }
        db.set(b"mine-live", s("1"), 1_000);
        let mine = |k: &[u8]| k.starts_with(b"mine");
        // Sampling alone, then one full sweep: every dead key of mine goes, none of theirs.
        db.active_expire_step_of(101, 20, 0, mine);
        db.active_expire_step_of(101, 0, 200, mine);
        assert_eq!(db.len(), 51);
        assert_eq!(db.expired_total, 50);
        assert!(db.peek(b"mine-live").is_some());
        assert!((0..50).all(|i| db.peek(format!("theirs{i}").as_bytes()).is_some()));
        // Nothing refused is sampled as dead: the step does not ask for another.
        assert!(!db.active_expire_step_of(101, 20, 0, mine));
        assert_eq!(db.expires_count(), 51);
    }

    #[test]
    fn randomkey_where_dead_keys_are_hidden_deletes_none() {
        let mut db = Db::default();
        db.set(b"dead", s("1"), 100);
        db.set(b"live", s("1"), 0);
        db.expiry = Expiry::Hide;
        for _ in 0..20 {
            assert_eq!(db.random_key(101).as_deref(), Some(&b"live"[..]));
        }
        assert_eq!(db.len(), 2);
        // Where they are removed, one of 64 draws meets it (all but surely).
        db.expiry = Expiry::Remove;
        for _ in 0..64 {
            assert_eq!(db.random_key(101).as_deref(), Some(&b"live"[..]));
        }
        assert_eq!(db.len(), 1);
    }

    #[test]
    fn shifting_some_deadlines_leaves_the_others() {
        let mut db = Db::default();
        db.set(b"mine", s("1"), 1_000);
        db.set(b"theirs", s("1"), 1_000);
        db.set(b"mine-plain", s("1"), 0);
        assert_eq!(db.shift_deadlines_of(500, |k| k.starts_with(b"mine")), 1);
        assert_eq!(db.peek(b"mine").map(|e| e.expires_at), Some(1_500));
        assert_eq!(db.peek(b"theirs").map(|e| e.expires_at), Some(1_000));
        assert_eq!(db.peek(b"mine-plain").map(|e| e.expires_at), Some(0));
        assert_eq!(db.expires_count(), 2);
    }

    #[test]
    fn a_replica_hides_dead_keys_and_its_master_still_finds_them() {
        let mut db = Db::default();
        db.set(b"lock", s("t"), 100);
        db.expiry = Expiry::Hide;
        assert!(
            db.get(b"lock", 101).is_none(),
            "a client reads it as absent"
        );
        assert_eq!((db.len(), db.expired_total), (1, 0), "but it stays");
        db.expiry = Expiry::Keep;
        assert!(
            db.get(b"lock", 101).is_some(),
            "the master's commands find it"
        );
        assert!(!db.put(b"lock", || s("u"), 500, 101, true), "NX sees it");
        db.expiry = Expiry::Remove;
        assert!(db.get(b"lock", 101).is_none());
        assert_eq!((db.len(), db.expired_total), (0, 1), "a master removes it");
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
