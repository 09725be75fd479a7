//! The change record: what a unit of work (a command, an EXEC block, a script, an expiry sweep)
//! did to the data, recorded by the store itself as it happens, so no handler can forget a
//! change. The event loop takes it once per unit (`Dbs::take_changes`) and turns it into the
//! append-only log's entry — and, with replication, the replicated log's.
//!
//! The record holds effects, not commands: the keys a unit may have changed (each is later
//! written as its *final* state, with its absolute deadline), the databases it emptied and the
//! databases it swapped. Emitting swaps first, then emptied databases, then final key states
//! reproduces the unit exactly, whatever order things happened in: a swap moves a database with
//! its own record (see `Dbs::swap`), emptying commutes with moving, and a final state overrides
//! whatever came before it.
//!
//! Recording is off unless something consumes it (the log is open, or a replicated log): a
//! single node without persistence pays one branch per write. It is a superset: a handler that
//! takes a value for writing and then leaves it as it was (SADD of an existing member) still
//! records the key, which costs one redundant key state in the log, never a lost one. WATCH,
//! blocked clients and keyspace events follow the handler's own `changed` signal instead,
//! because Redis leaves them untouched by a write that changed nothing and only the handler
//! knows that.

use super::keyspace::Db;
use bytes::Bytes;
use std::ops::{Deref, DerefMut};

/// Effects of one unit of work, in the order they must be replayed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ChangeRecord {
    /// SWAPDB pairs, in the order they ran.
    pub swaps: Vec<(usize, usize)>,
    /// Databases emptied (FLUSHDB/FLUSHALL), by their index after the swaps.
    pub flushed: Vec<usize>,
    /// Keys whose final state is to be written, by database index after the swaps; each key
    /// once, in the order it was first changed.
    pub keys: Vec<(usize, Bytes)>,
    /// PUBLISH/SPUBLISH calls (shard, channel, message), kept only for a replicated log: Redis
    /// propagates them to replicas (so subscribers of any node hear them), never to the AOF.
    pub published: Vec<(bool, Bytes, Bytes)>,
    /// FUNCTION LOAD / DELETE / FLUSH / RESTORE commands that changed the function libraries,
    /// in the order they ran. Libraries are not keys: running the same commands again from
    /// the same libraries gives the same libraries, so the commands are their record (as
    /// Redis propagates them); a rewrite starts from one FUNCTION LOAD per library.
    pub functions: Vec<Vec<Bytes>>,
    /// Its key changes do not depend on each other (an expiry sweep, a cluster node's flush of
    /// the keys of the Raft groups it leads): a replicated log may split them by group into
    /// one entry each, where any other unit must stay one entry.
    pub per_key: bool,
}

impl ChangeRecord {
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
            && self.swaps.is_empty()
            && self.flushed.is_empty()
            && self.keys.is_empty()
            && self.published.is_empty()
    }

    pub fn clear(&mut self) {
        self.swaps.clear();
        self.flushed.clear();
        self.keys.clear();
        self.published.clear();
        self.functions.clear();
        self.per_key = false;
    }
}

/// Per-database part of the record (it travels with the database when SWAPDB moves it).
#[derive(Debug, Default)]
pub(super) struct DbChanges {
    pub(super) on: bool,
    pub(super) flushed: bool,
    pub(super) keys: Vec<Bytes>,
}

impl DbChanges {
    #[inline]
    pub(super) fn key(&mut self, key: &[u8]) {
        if self.on {
            self.keys.push(Bytes::copy_from_slice(key));
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        !self.flushed && self.keys.is_empty()
    }
}

/// Every database of the server, plus the part of the record no single database can hold
/// (swaps). Derefs to the slice of databases for reading and per-database writes.
#[derive(Debug, Default)]
pub struct Dbs {
    dbs: Vec<Db>,
    swaps: Vec<(usize, usize)>,
    recording: bool,
    /// Publishes are recorded too (a replicated log; the AOF leaves them out).
    recording_publishes: bool,
    published: Vec<(bool, Bytes, Bytes)>,
    functions: Vec<Vec<Bytes>>,
    /// The unit's changes are independent of each other (`ChangeRecord::per_key`).
    per_key: bool,
}

impl Dbs {
    pub fn new(n: usize) -> Dbs {
        Dbs {
            dbs: (0..n.max(1)).map(|_| Db::default()).collect(),
            ..Default::default()
        }
    }

    /// Starts or stops recording (stopping drops what was recorded).
    pub fn record_changes(&mut self, on: bool) {
        self.recording = on;
        self.per_key = false;
        self.swaps.clear();
        self.published.clear();
        self.functions.clear();
        for db in &mut self.dbs {
            db.changes = DbChanges {
                on,
                ..Default::default()
            };
        }
    }

    pub fn records_changes(&self) -> bool {
        self.recording
    }

    /// Whether PUBLISH calls join the record (while recording): a replicated log's choice.
    pub fn record_publishes(&mut self, on: bool) {
        self.recording_publishes = on;
        self.published.clear();
    }

    /// A PUBLISH/SPUBLISH the unit made, for replicas' subscribers.
    pub fn published(&mut self, shard: bool, channel: &[u8], msg: &[u8]) {
        if self.recording && self.recording_publishes {
            self.published.push((
                shard,
                Bytes::copy_from_slice(channel),
                Bytes::copy_from_slice(msg),
            ));
        }
    }

    /// A FUNCTION command changed the libraries (see `ChangeRecord::functions`).
    pub fn functions_changed(&mut self, argv: &[Bytes]) {
        if self.recording {
            self.functions.push(argv.to_vec());
        }
    }

    /// The unit running changes keys independently of each other (an expiry sweep, a
    /// cluster node's flush of its groups' keys): see `ChangeRecord::per_key`.
    pub fn changes_per_key(&mut self) {
        self.per_key = self.recording;
    }

    /// SWAPDB: the databases trade places, each with its own record.
    pub fn swap(&mut self, a: usize, b: usize) {
        self.dbs.swap(a, b);
        if self.recording {
            self.swaps.push((a, b));
        }
    }

    /// Takes the record of the unit that just ended into `out` (cleared first); false when
    /// the unit changed nothing.
    #[inline]
    pub fn take_changes(&mut self, out: &mut ChangeRecord) -> bool {
        if !self.recording {
            return false;
        }
        self.take_recorded(out)
    }

    fn take_recorded(&mut self, out: &mut ChangeRecord) -> bool {
        out.clear();
        out.swaps.append(&mut self.swaps);
        out.published.append(&mut self.published);
        out.functions.append(&mut self.functions);
        out.per_key = std::mem::take(&mut self.per_key);
        for (i, db) in self.dbs.iter_mut().enumerate() {
            let ch = &mut db.changes;
            if ch.is_empty() {
                continue;
            }
            if std::mem::take(&mut ch.flushed) {
                out.flushed.push(i);
            }
            if ch.keys.len() > 1 {
                // Each key once, at its first change (units touch few keys; large ones, such
                // as a script writing thousands, pay one sort).
                let mut seen = super::FastSet::default();
                ch.keys.retain(|k| seen.insert(k.clone()));
            }
            out.keys.extend(ch.keys.drain(..).map(|k| (i, k)));
        }
        !out.is_empty()
    }

    /// Moves every key's deadline `ms` later in every database (a new leader's EXTEND, so a
    /// lock the old leader granted cannot expire early on a clock up to `ms` ahead of the
    /// old one's); returns how many keys moved. Each is recorded as changed.
    pub fn shift_deadlines(&mut self, ms: u64) -> usize {
        self.dbs.iter_mut().map(|db| db.shift_deadlines(ms)).sum()
    }

    /// `shift_deadlines` of the keys `ours` accepts, in every database (one Raft group's
    /// EXTEND, where a node runs several: the keys of that group's slots).
    pub fn shift_deadlines_of(&mut self, ms: u64, ours: impl Fn(&[u8]) -> bool) -> usize {
        self.dbs
            .iter_mut()
            .map(|db| db.shift_deadlines_of(ms, &ours))
            .sum()
    }

    /// Drops the record of a unit that must leave no trace (cut short by shutdown).
    pub fn discard_changes(&mut self) {
        self.per_key = false;
        self.swaps.clear();
        self.published.clear();
        self.functions.clear();
        for db in &mut self.dbs {
            db.changes.flushed = false;
            db.changes.keys.clear();
        }
    }
}

impl Deref for Dbs {
    type Target = [Db];
    fn deref(&self) -> &[Db] {
        &self.dbs
    }
}

impl DerefMut for Dbs {
    fn deref_mut(&mut self) -> &mut [Db] {
        &mut self.dbs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Value;

    fn s(v: &str) -> Value {
        Value::Str(Bytes::copy_from_slice(v.as_bytes()))
    }

    fn taken(dbs: &mut Dbs) -> ChangeRecord {
        let mut r = ChangeRecord::default();
        dbs.take_changes(&mut r);
        r
    }

    #[test]
    fn nothing_is_recorded_while_off() {
        let mut dbs = Dbs::new(2);
        dbs[0].set(b"a", s("1"), 0);
        dbs.swap(0, 1);
        assert!(taken(&mut dbs).is_empty());
    }

    #[test]
    fn every_write_path_records_its_key_once() {
        let mut dbs = Dbs::new(2);
        dbs.record_changes(true);
        dbs[0].set(b"a", s("1"), 0);
        dbs[0].set(b"a", s("2"), 0);
        dbs[0].set(b"b", s("1"), 0);
        dbs[0].set(b"c", s("1"), 0);
        let _ = dbs[0].get_mut(b"b", 0);
        dbs[0].set_expire(b"c", 50, 0);
        dbs[1].set(b"d", s("1"), 10);
        // Expiry is a change too (replayed as a deletion).
        assert!(dbs[1].get(b"d", 11).is_none());
        let r = taken(&mut dbs);
        let keys: Vec<_> = r.keys.iter().map(|(d, k)| (*d, &k[..])).collect();
        assert_eq!(keys, [(0, &b"a"[..]), (0, b"b"), (0, b"c"), (1, b"d")]);
        assert!(taken(&mut dbs).is_empty(), "taking clears the record");
    }

    #[test]
    fn reads_record_nothing() {
        let mut dbs = Dbs::new(1);
        dbs[0].set(b"a", s("1"), 0);
        dbs.record_changes(true);
        let _ = dbs[0].get(b"a", 0);
        let _ = dbs[0].contains(b"a", 0);
        let _ = dbs[0].peek(b"a");
        assert!(taken(&mut dbs).is_empty());
    }

    #[test]
    fn swaps_carry_each_database_record_along() {
        let mut dbs = Dbs::new(3);
        dbs.record_changes(true);
        dbs[0].set(b"a", s("1"), 0);
        dbs.swap(0, 2);
        dbs[0].clear();
        let r = taken(&mut dbs);
        assert_eq!(r.swaps, vec![(0, 2)]);
        assert_eq!(r.flushed, vec![0]);
        // `a` was written in the database that now sits at index 2.
        assert_eq!(r.keys, vec![(2, Bytes::from_static(b"a"))]);
    }

    #[test]
    fn shifting_deadlines_moves_each_one_and_records_it() {
        let mut dbs = Dbs::new(2);
        dbs[0].set(b"lock", s("a"), 1_000);
        dbs[0].set(b"plain", s("b"), 0);
        dbs[1].set(b"far", s("c"), u64::MAX - 10);
        dbs[1].set(b"top", s("d"), u64::MAX);
        dbs.record_changes(true);
        assert_eq!(dbs.shift_deadlines(0), 0);
        assert!(taken(&mut dbs).is_empty(), "a zero shift changes nothing");
        assert_eq!(dbs.shift_deadlines(500), 2);
        assert_eq!(dbs[0].peek(b"lock").map(|e| e.expires_at), Some(1_500));
        assert_eq!(dbs[0].peek(b"plain").map(|e| e.expires_at), Some(0));
        assert_eq!(dbs[1].peek(b"far").map(|e| e.expires_at), Some(u64::MAX));
        assert_eq!(dbs[1].peek(b"top").map(|e| e.expires_at), Some(u64::MAX));
        assert_eq!(dbs[0].expires_count(), 1);
        assert_eq!(dbs[1].expires_count(), 2);
        // The key is alive where it would have died, and dies after the new deadline.
        assert!(dbs[0].get(b"lock", 1_200).is_some());
        let r = taken(&mut dbs);
        assert_eq!(
            r.keys,
            vec![
                (0, Bytes::from_static(b"lock")),
                (1, Bytes::from_static(b"far"))
            ]
        );
        assert!(dbs[0].get(b"lock", 1_501).is_none());
    }

    #[test]
    fn a_unit_of_independent_changes_says_so_once() {
        let mut dbs = Dbs::new(1);
        dbs.changes_per_key();
        dbs[0].set(b"a", s("1"), 0);
        let r = taken(&mut dbs);
        assert!(r.is_empty() && !r.per_key, "not recording: nothing");
        dbs.record_changes(true);
        dbs.changes_per_key();
        dbs[0].set(b"a", s("2"), 0);
        dbs[0].set(b"b", s("2"), 0);
        let r = taken(&mut dbs);
        assert!(r.per_key);
        assert_eq!(r.keys.len(), 2);
        dbs[0].set(b"c", s("3"), 0);
        assert!(!taken(&mut dbs).per_key, "the next unit is one entry again");
        dbs.changes_per_key();
        dbs.discard_changes();
        dbs[0].set(b"d", s("4"), 0);
        assert!(!taken(&mut dbs).per_key);
        // Only the deadlines `ours` accepts move, in every database.
        dbs[0].set_expire(b"a", 1_000, 0);
        dbs[0].set_expire(b"b", 1_000, 0);
        taken(&mut dbs);
        assert_eq!(dbs.shift_deadlines_of(100, |k| k == b"a"), 1);
        assert_eq!(dbs[0].peek(b"a").map(|e| e.expires_at), Some(1_100));
        assert_eq!(dbs[0].peek(b"b").map(|e| e.expires_at), Some(1_000));
        assert_eq!(taken(&mut dbs).keys, vec![(0, Bytes::from_static(b"a"))]);
    }

    #[test]
    fn discarded_units_leave_nothing() {
        let mut dbs = Dbs::new(1);
        dbs.record_changes(true);
        dbs[0].set(b"a", s("1"), 0);
        dbs.swap(0, 0);
        dbs.discard_changes();
        assert!(taken(&mut dbs).is_empty());
    }
}
