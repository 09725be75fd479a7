//! Freeing large values off the executor thread, as Redis's lazyfree.c: UNLINK and FLUSHDB /
//! FLUSHALL ASYNC hand a value whose freeing takes more than `THRESHOLD` allocations to one
//! background thread, so the command returns at once whatever the value's size. INFO's
//! `lazyfree_pending_objects` and `lazyfreed_objects` count them as Redis does.

use super::encoding::{self, Limits};
use super::value::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};

/// Redis's LAZYFREE_THRESHOLD.
pub const THRESHOLD: usize = 64;

static PENDING: AtomicU64 = AtomicU64::new(0);
static FREED: AtomicU64 = AtomicU64::new(0);

/// What the background thread drops: a value, or a whole database's entries.
type Garbage = (Box<dyn Send>, u64);

fn worker() -> Option<Sender<Garbage>> {
    static TX: OnceLock<Option<Mutex<Sender<Garbage>>>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = channel::<Garbage>();
        std::thread::Builder::new()
            .name("lazyfree".into())
            .spawn(move || {
                for (garbage, objects) in rx {
                    drop(garbage);
                    PENDING.fetch_sub(objects, Ordering::Relaxed);
                    FREED.fetch_add(objects, Ordering::Relaxed);
                }
            })
            .ok()
            .map(|_| Mutex::new(tx))
    })
    .as_ref()
    .and_then(|m| m.lock().ok().map(|tx| tx.clone()))
}

/// Redis's lazyfreeGetFreeEffort: about how many allocations freeing `v` takes.
pub fn free_effort(v: &Value, lim: &Limits) -> usize {
    match v {
        Value::List(l) => {
            super::rdb::quicklist_nodes(l.iter().map(|b| &b[..]), lim.list_fill).len()
        }
        Value::Set(s) if !encoding::set_is_intset(s, lim) => s.len(),
        Value::ZSet(z) if !encoding::zset_is_listpack(z, lim) => z.len(),
        Value::Hash(h) if !encoding::hash_is_listpack(h, lim) => h.len(),
        Value::Stream(s) => {
            // Every node is an allocation; each group and its pending entries too, the first
            // group's PEL standing for all (Redis's estimate).
            let groups = s.groups.len();
            let pel = s.groups.values().next().map_or(0, |g| g.pel.len());
            s.rax_nodes() + groups * (1 + pel)
        }
        _ => 1,
    }
}

/// Frees `v` in the background when that is worth it (Redis's freeObjAsync), else here.
pub fn free_value(v: Value, lim: &Limits) {
    if free_effort(&v, lim) > THRESHOLD {
        if let Some(tx) = worker() {
            PENDING.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = tx.send((Box::new(v), 1)) {
                PENDING.fetch_sub(1, Ordering::Relaxed);
                drop(e);
            }
        }
    }
}

/// Frees a database's entries in the background (Redis's emptyDbAsync), counting `keys`.
pub fn free_all(garbage: Box<dyn Send>, keys: u64) {
    if keys == 0 {
        return;
    }
    match worker() {
        Some(tx) => {
            PENDING.fetch_add(keys, Ordering::Relaxed);
            if let Err(e) = tx.send((garbage, keys)) {
                PENDING.fetch_sub(keys, Ordering::Relaxed);
                drop(e);
            }
        }
        None => drop(garbage),
    }
}

/// INFO's (lazyfree_pending_objects, lazyfreed_objects).
pub fn counts() -> (u64, u64) {
    (
        PENDING.load(Ordering::Relaxed),
        FREED.load(Ordering::Relaxed),
    )
}

/// CONFIG RESETSTAT (lazyfreeResetStats).
pub fn reset_stats() {
    FREED.store(0, Ordering::Relaxed);
}
