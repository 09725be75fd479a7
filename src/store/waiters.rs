//! Registries of clients waiting on keys: WATCHed keys (optimistic transactions) and clients
//! blocked in BLPOP & co. Plain data keyed by client id; the executor decides what to do with it.

use super::{FastMap, FastSet};
use bytes::Bytes;
use std::collections::{BTreeSet, VecDeque};

/// (database index, key)
pub type DbKey = (usize, Bytes);

/// WATCH state: which clients watch which keys, and whose transaction a write has invalidated.
#[derive(Debug, Default)]
pub struct Watches {
    /// key → (db, client). Keyed by the bare key so a write looks it up without allocating.
    by_key: FastMap<Bytes, Vec<(usize, u64)>>,
    by_client: FastMap<u64, Vec<DbKey>>,
    /// Clients whose next EXEC must fail (Redis's CLIENT_DIRTY_CAS).
    dirty: FastSet<u64>,
}

impl Watches {
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub fn watch(&mut self, client: u64, db: usize, key: &Bytes) {
        let dk = (db, key.clone());
        let keys = self.by_client.entry(client).or_default();
        if keys.contains(&dk) {
            return;
        }
        keys.push(dk);
        self.by_key
            .entry(key.clone())
            .or_default()
            .push((db, client));
    }

    /// Keys `client` watches (for the expiry check at EXEC).
    pub fn keys_of(&self, client: u64) -> &[DbKey] {
        self.by_client.get(&client).map_or(&[], |v| v.as_slice())
    }

    pub fn watching(&self, client: u64) -> usize {
        self.keys_of(client).len()
    }

    pub fn unwatch_all(&mut self, client: u64) {
        self.dirty.remove(&client);
        let Some(keys) = self.by_client.remove(&client) else {
            return;
        };
        for (db, key) in keys {
            if let Some(list) = self.by_key.get_mut(&key) {
                list.retain(|&e| e != (db, client));
                if list.is_empty() {
                    self.by_key.remove(&key);
                }
            }
        }
    }

    pub fn touch(&mut self, db: usize, key: &[u8]) {
        if self.by_key.is_empty() {
            return;
        }
        if let Some(list) = self.by_key.get(key) {
            for &(d, c) in list {
                if d == db {
                    self.dirty.insert(c);
                }
            }
        }
    }

    /// Marks every watcher of a key in `db` for which `affected(key)` holds.
    pub fn touch_db(&mut self, db: usize, mut affected: impl FnMut(&[u8]) -> bool) {
        for (k, list) in self.by_key.iter() {
            if list.iter().any(|&(d, _)| d == db) && affected(k) {
                for &(d, c) in list {
                    if d == db {
                        self.dirty.insert(c);
                    }
                }
            }
        }
    }

    pub fn is_dirty(&self, client: u64) -> bool {
        self.dirty.contains(&client)
    }
}

/// What a blocked client waits for: data of this kind at one of its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitKind {
    List,
    ZSet,
    /// XREAD BLOCK: new entries past the client's IDs.
    Stream,
    /// XREADGROUP BLOCK: new entries past its group's last ID, or the key or group gone.
    StreamGroup,
    /// WAIT in cluster mode: parked on `REPLICAS_KEY`, re-checked whenever the commit index
    /// moves.
    Replicas,
}

/// The key WAIT parks on (a name no client command would pick by chance; one that does only
/// makes WAIT count again).
pub const REPLICAS_KEY: &[u8] = b"\x00deadbolt:wait-replicas";

#[derive(Debug)]
pub struct Blocked {
    pub db: usize,
    pub keys: Vec<Bytes>,
    /// Unix ms; 0 waits forever.
    pub deadline: u64,
    pub kind: WaitKind,
    /// The command to run again when a key is served.
    pub argv: Vec<Bytes>,
    /// How the client is answered when its deadline passes (`Unblock::Timeout` unless it was
    /// unblocked early).
    pub unblock: Unblock,
}

/// What a blocked client's deadline answers, the weakest first: a later early unblock never
/// turns a stronger one into a weaker one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unblock {
    /// Its timeout reply (a null array, WAIT's count).
    #[default]
    Timeout,
    /// CLIENT UNBLOCK ... ERROR: `-UNBLOCKED client unblocked via CLIENT UNBLOCK`.
    Error,
    /// Its command runs again, blocking again until the deadline it had (carried here; 0:
    /// none) if it finds nothing: a Redis Cluster node that stopped serving its keys' slot
    /// answers it with the redirection, as Redis's clusterRedirectBlockedClientIfNeeded.
    Rerun(u64),
    /// The node stopped being a master: `-UNBLOCKED force unblock from blocking operation,
    /// instance state changed (master -> replica?)`, then the connection closes, as Redis's
    /// disconnectAllBlockedClients.
    Demoted,
}

/// Clients blocked on keys, served first-come first-served per key.
#[derive(Debug, Default)]
pub struct Waiters {
    /// key → (db, client), oldest first; keyed by the bare key so writes look up without allocating.
    by_key: FastMap<Bytes, VecDeque<(usize, u64)>>,
    clients: FastMap<u64, Blocked>,
    deadlines: BTreeSet<(u64, u64)>,
    /// Keys written since the last serve, in the order they became ready (Redis's ready_keys).
    ready: Vec<DbKey>,
    ready_set: FastSet<DbKey>,
}

impl Waiters {
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    /// Blocked clients with a deadline (INFO clients_in_timeout_table).
    pub fn with_timeout(&self) -> usize {
        self.deadlines.len()
    }

    pub fn is_blocked(&self, client: u64) -> bool {
        self.clients.contains_key(&client)
    }

    pub fn block(&mut self, client: u64, b: Blocked) {
        self.unblock(client);
        for k in &b.keys {
            let q = self.by_key.entry(k.clone()).or_default();
            if !q.contains(&(b.db, client)) {
                q.push_back((b.db, client));
            }
        }
        if b.deadline != 0 {
            self.deadlines.insert((b.deadline, client));
        }
        self.clients.insert(client, b);
    }

    pub fn unblock(&mut self, client: u64) -> Option<Blocked> {
        let b = self.clients.remove(&client)?;
        for k in &b.keys {
            if let Some(q) = self.by_key.get_mut(k) {
                q.retain(|&e| e != (b.db, client));
                if q.is_empty() {
                    self.by_key.remove(k);
                }
            }
        }
        if b.deadline != 0 {
            self.deadlines.remove(&(b.deadline, client));
        }
        Some(b)
    }

    /// CLIENT UNBLOCK: the client times out at the next turn of the loop (with an error
    /// instead of its timeout reply if `error`). False if it is not blocked.
    pub fn unblock_now(&mut self, client: u64, error: bool) -> bool {
        let how = if error {
            Unblock::Error
        } else {
            Unblock::Timeout
        };
        self.answer_now(client, how)
    }

    /// The client is answered `how` at the next turn of the loop (or more strongly, if it was
    /// asked so before). False if it is not blocked.
    pub fn answer_now(&mut self, client: u64, how: Unblock) -> bool {
        let Some(b) = self.clients.get_mut(&client) else {
            return false;
        };
        if matches!(how, Unblock::Rerun(_)) && b.deadline == 1 {
            // Already answered early this turn (CLIENT UNBLOCK, a demotion): that stands,
            // as Redis answered it before any redirection.
            return true;
        }
        let how = match (how, b.unblock) {
            (Unblock::Rerun(_), Unblock::Rerun(d)) => Unblock::Rerun(d),
            (Unblock::Rerun(_), _) => Unblock::Rerun(b.deadline),
            (h, _) => h,
        };
        if b.deadline != 0 {
            self.deadlines.remove(&(b.deadline, client));
        }
        // 1, not 0 (which means "forever"): before any clock reading.
        b.deadline = 1;
        b.unblock = b.unblock.max(how);
        self.deadlines.insert((1, client));
        true
    }

    /// What `client` is blocked on, if it is.
    pub fn blocked(&self, client: u64) -> Option<&Blocked> {
        self.clients.get(&client)
    }

    /// A key was written: if anyone waits on it, queue it for serving.
    pub fn signal(&mut self, db: usize, key: &[u8]) {
        if self.by_key.is_empty() {
            return;
        }
        let Some(q) = self.by_key.get(key) else {
            return;
        };
        if q.iter().any(|&(d, _)| d == db) {
            let dk = (db, Bytes::copy_from_slice(key));
            if self.ready_set.insert(dk.clone()) {
                self.ready.push(dk);
            }
        }
    }

    /// Queues every waited-on key of `db` (after SWAPDB).
    pub fn signal_db(&mut self, db: usize) {
        let keys: Vec<DbKey> = self
            .by_key
            .iter()
            .filter(|(_, q)| q.iter().any(|&(d, _)| d == db))
            .map(|(k, _)| (db, k.clone()))
            .collect();
        for dk in keys {
            if self.ready_set.insert(dk.clone()) {
                self.ready.push(dk);
            }
        }
    }

    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    pub fn take_ready(&mut self) -> Vec<DbKey> {
        self.ready_set.clear();
        std::mem::take(&mut self.ready)
    }

    /// Clients waiting on a key, oldest first, with what they wait for.
    pub fn queue(&self, dk: &DbKey) -> Vec<(u64, WaitKind)> {
        self.by_key.get(&dk.1).map_or_else(Vec::new, |q| {
            q.iter()
                .filter(|&&(d, _)| d == dk.0)
                .filter_map(|(_, c)| self.clients.get(c).map(|b| (*c, b.kind)))
                .collect()
        })
    }

    /// The command a blocked client will run again.
    pub fn argv_of(&self, client: u64) -> Option<&[Bytes]> {
        self.clients.get(&client).map(|b| b.argv.as_slice())
    }

    pub fn next_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|(d, _)| *d)
    }

    /// Clients whose deadline is before `now`, removed from the registry, with their state.
    pub fn take_timed_out(&mut self, now: u64) -> Vec<u64> {
        let mut out = Vec::new();
        while let Some(&(d, c)) = self.deadlines.first() {
            if d > now {
                break;
            }
            out.push(c);
            self.deadlines.pop_first();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(keys: &[&str], deadline: u64) -> Blocked {
        Blocked {
            db: 0,
            keys: keys
                .iter()
                .map(|k| Bytes::copy_from_slice(k.as_bytes()))
                .collect(),
            deadline,
            kind: WaitKind::List,
            argv: vec![],
            unblock: Unblock::Timeout,
        }
    }

    #[test]
    fn fifo_ready_and_timeouts() {
        let mut w = Waiters::default();
        w.block(1, blocked(&["a", "b"], 100));
        w.block(2, blocked(&["a"], 0));
        w.signal(0, b"zzz");
        assert!(!w.has_ready());
        w.signal(0, b"a");
        w.signal(0, b"a");
        let ready = w.take_ready();
        assert_eq!(ready.len(), 1);
        assert_eq!(
            w.queue(&ready[0]).iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(w.next_deadline(), Some(100));
        assert!(w.take_timed_out(99).is_empty());
        assert_eq!(w.take_timed_out(100), vec![1]);
        assert!(w.unblock(1).is_some());
        assert_eq!(w.len(), 1);
        assert!(w.unblock(2).is_some());
        assert!(w.is_empty());
        w.signal(0, b"a");
        assert!(!w.has_ready());
    }

    #[test]
    fn an_early_answer_of_the_turn_stands_against_a_rerun() {
        let mut w = Waiters::default();
        w.block(1, blocked(&["a"], 500));
        w.block(2, blocked(&["a"], 0));
        w.block(3, blocked(&["a"], 700));
        // CLIENT UNBLOCK (with and without ERROR), then a redirection in the same turn.
        assert!(w.unblock_now(1, true));
        assert!(w.answer_now(1, Unblock::Rerun(0)));
        assert_eq!(w.blocked(1).map(|b| b.unblock), Some(Unblock::Error));
        assert!(w.unblock_now(2, false));
        assert!(w.answer_now(2, Unblock::Rerun(0)));
        assert_eq!(w.blocked(2).map(|b| b.unblock), Some(Unblock::Timeout));
        // A rerun alone keeps the deadline the client had; a demotion after it wins.
        assert!(w.answer_now(3, Unblock::Rerun(0)));
        assert_eq!(w.blocked(3).map(|b| b.unblock), Some(Unblock::Rerun(700)));
        assert!(w.answer_now(3, Unblock::Demoted));
        assert_eq!(w.blocked(3).map(|b| b.unblock), Some(Unblock::Demoted));
        assert_eq!(w.take_timed_out(1), vec![1, 2, 3]);
    }

    #[test]
    fn watch_touch_and_unwatch() {
        let mut w = Watches::default();
        let k = Bytes::from_static(b"k");
        w.watch(7, 0, &k);
        w.watch(7, 0, &k);
        assert_eq!(w.watching(7), 1);
        w.touch(1, b"k");
        assert!(!w.is_dirty(7));
        w.touch(0, b"k");
        assert!(w.is_dirty(7));
        w.unwatch_all(7);
        assert!(!w.is_dirty(7));
        assert!(w.is_empty());
    }
}
