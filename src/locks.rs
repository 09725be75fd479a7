//! Lock insight, which no Redis has: deadbolt recognises the lock operations real clients send
//! (`SET … NX`, and the byte-exact acquire and release scripts of lua/MANIFEST.tsv, by SHA1)
//! and keeps, per key prefix: acquires, contended attempts, releases, **late releases** (a
//! compare-and-delete or Redisson unlock that found the key gone or owned by someone else: the
//! holder's lease ran out while it believed it held the lock — the GC-pause scenario of the
//! Redlock debate, happening in production), hold times and wait times (histograms), and the
//! clients currently retrying. INFO `locks` and the Prometheus endpoint (`metrics-port`) show
//! them.
//!
//! Bounded and cheap: a lock key is remembered by a 64-bit hash with its acquire time in a
//! fixed table (`HOLD_SLOTS`, holds up to `HOLD_HORIZON`), a waiting client by (client, key
//! hash) (at most `MAX_WAITING`, dropped after `WAIT_HORIZON` without a retry), and at most
//! `MAX_PREFIXES` prefixes (the rest count under `(other)`). What is past a bound is not
//! sampled, never kept.

use crate::protocol::Frame;
use std::collections::HashMap;

/// Hold times come from a direct-mapped table: a lock key's slot is picked by its hash and
/// keeps (key hash, acquire time). A later acquire of another key landing there replaces it, so
/// with more locks held at once than slots some holds go unsampled; the counters stay exact. A
/// hash-map insert per acquire cost more than the rest of the bookkeeping together (callgrind),
/// this costs a store. The table starts at `HOLD_SLOTS_MIN` slots (16 bytes each) and doubles
/// while more than half are in use, up to `HOLD_SLOTS` (128 KiB), so a server holding few locks
/// pays a few KiB.
/// 8 K slots sample the hold times of up to ~8 K locks held at once, plenty for a histogram. At
/// 64 K slots (1 MiB) the table had grown to 512 KiB under 10 k lock keys, 51 bytes a key, and
/// made a lock key cost more than in Redis.
const HOLD_SLOTS: usize = 1 << 13;
const HOLD_SLOTS_MIN: usize = 1 << 8;
const MAX_WAITING: usize = 10_000;
const MAX_PREFIXES: usize = 100;
/// A hold longer than this is not sampled (the lock most likely expired unreleased).
const HOLD_HORIZON_MS: u64 = 10 * 60 * 1000;
/// A client that has not retried for this long has given up waiting.
const WAIT_HORIZON_MS: u64 = 30 * 1000;

const NO_LEASE: u8 = u8::MAX;

/// How a known script reports its outcome.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Role {
    /// Integer = number of KEYS locked; 0 = someone else holds one (redlock's lock scripts).
    AcquireCount,
    /// nil = acquired; an integer (the holder's PTTL) = held by someone else (Redisson).
    AcquireNil,
    /// +OK = acquired; an error = held by someone else (aioredlock).
    AcquireOkOrError,
    /// 1 = released; 0 (or redsync's -1) = not the owner any more.
    ReleaseOne,
    /// 0 = released; 1 = not the owner (python-redis-lock).
    ReleaseZero,
    /// Integer = number of KEYS released; fewer = the rest were lost (redlock's unlock).
    ReleaseCount,
    /// 1 = released, 0 = a reentrant hold decremented, nil = not held by the caller (Redisson).
    ReleaseRedisson,
    /// An integer = released; +OK = the key was gone; an error = another owner (aioredlock).
    ReleaseAio,
}

/// The scripts of lua/MANIFEST.tsv that acquire or release a lock (SHA1 as clients send it in
/// EVALSHA; a unit test checks each against the file and the manifest).
/// The fourth field: the ARGV index of an acquire script's lease in ms (`NO_LEASE`: none).
const SCRIPTS: &[(&[u8; 40], Role, &str, u8)] = &[
    (
        b"149c5a8bf18676fd99e9e6e24923bd64d9b62f94",
        Role::AcquireNil,
        "redisson/rlock_trylockinnerasync.lua",
        0,
    ),
    (
        b"6866459238a13a701d42f4971f12d9f3a50e2442",
        Role::ReleaseRedisson,
        "redisson/rlock_unlockinnerasync.lua",
        NO_LEASE,
    ),
    (
        b"c3f8721cbb97f72bc19e972846bd7aaf91901658",
        Role::ReleaseOne,
        "redis-py/lua_release_script.lua",
        NO_LEASE,
    ),
    (
        b"90da91872223f85eb1376a17e3c4df21ace8c54b",
        Role::ReleaseZero,
        "python-redis-lock/unlock_script.lua",
        NO_LEASE,
    ),
    (
        b"a4aada0b36710970eedaaaeec4a6b7d8c78c4f80",
        Role::ReleaseOne,
        "pottery/release_script.lua",
        NO_LEASE,
    ),
    (
        b"c75a9bf1538efcdb1f383acc3e273c5089d57e58",
        Role::AcquireOkOrError,
        "aioredlock/set_lock_script.lua",
        1,
    ),
    (
        b"241e4ca540a1cc4ec1f32d9eb9f879e607d7e6e5",
        Role::ReleaseAio,
        "aioredlock/unset_lock_script.lua",
        NO_LEASE,
    ),
    (
        b"1b77b94aa78451d55dfa97e18819bfbfc596cb5b",
        Role::AcquireCount,
        "sesamecare-redlock/acquire_script.lua",
        2,
    ),
    (
        b"df51f6837dcfe303d334e6abea9aeae192bab216",
        Role::ReleaseCount,
        "sesamecare-redlock/release_script.lua",
        NO_LEASE,
    ),
    (
        b"96da70f7716f27d278a5218544df37fd8b0a5e4c",
        Role::AcquireCount,
        "redlock-npm-v5/acquire_script.lua",
        1,
    ),
    (
        b"e4612211c9f8f51c257e26e056b0a654b3187242",
        Role::ReleaseCount,
        "redlock-npm-v5/release_script.lua",
        NO_LEASE,
    ),
    (
        b"e5a322e2634ef59a516e8ea150cb085afafee684",
        Role::AcquireCount,
        "redlock-npm-v4/lockscript.lua",
        1,
    ),
    (
        b"0f0f23b9048b36752b5be114f357ba083449f908",
        Role::ReleaseCount,
        "redlock-npm-v4/unlockscript.lua",
        NO_LEASE,
    ),
    (
        b"7157921a7cc7cfba979acf6d63f073151df17d12",
        Role::ReleaseOne,
        "redis-semaphore/mutex_release.lua",
        NO_LEASE,
    ),
    (
        b"daf86bbf8740dd3ca86733367a016364b2110627",
        Role::ReleaseOne,
        "rslock/unlock_script.lua",
        NO_LEASE,
    ),
    (
        b"544c68b7ffd46e5d7ccc58a27204557efba43310",
        Role::ReleaseOne,
        "redlock-rs/unlock_script.lua",
        NO_LEASE,
    ),
    (
        b"e950836ed1e694540c503ef9972b8de518044d3b",
        Role::ReleaseOne,
        "redsync/deletescript.lua",
        NO_LEASE,
    ),
];

/// A log-linear (HDR-style) histogram of milliseconds: each power of two is split into `SUB`
/// equal sub-buckets, so a bucket is at most 1/`SUB` of its lower bound wide and a quantile,
/// answered as its bucket's midpoint, is within 1/(2·`SUB`) (3.2 %) of the sample it stands
/// for; below `SUB` ms each millisecond has its own bucket. Buckets are indexed by `ms - 1`,
/// so every power of two of ms closes a bucket (the Prometheus `le` bounds are exact).
/// Counts grow only up to the largest bucket used, at most `HIST_BUCKETS` (values past
/// `HIST_MAX_MS` count in the last).
#[derive(Default, Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    pub sum_ms: u64,
    pub count: u64,
}

const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
/// 2^24 ms (4.6 hours): longer holds and waits count as this long.
const HIST_MAX_BITS: u32 = 24;
const HIST_MAX_MS: u64 = 1 << HIST_MAX_BITS;
const HIST_BUCKETS: usize = (SUB as usize) * (HIST_MAX_BITS - SUB_BITS + 1) as usize;
/// The Prometheus buckets: `le` = 1, 2, 4 … 2^PROM_BOUNDS-1 ms, then +Inf.
const PROM_BOUNDS: u32 = 21;

impl Histogram {
    fn index(ms: u64) -> usize {
        let x = ms.saturating_sub(1).min(HIST_MAX_MS - 1);
        if x < SUB {
            return x as usize;
        }
        let k = 63 - x.leading_zeros();
        let sub = (x >> (k - SUB_BITS)) & (SUB - 1);
        (SUB as usize) * (k - SUB_BITS + 1) as usize + sub as usize
    }

    /// The smallest and largest ms bucket `i` holds (bucket 0 holds 0 and 1).
    fn range(i: usize) -> (u64, u64) {
        let i = i as u64;
        if i == 0 {
            return (0, 1);
        }
        if i < SUB {
            return (i + 1, i + 1);
        }
        let k = i / SUB + u64::from(SUB_BITS) - 1;
        let width = 1u64 << (k - u64::from(SUB_BITS));
        let lo = (SUB + i % SUB) * width;
        (lo + 1, lo + width)
    }

    fn add(&mut self, ms: u64) {
        let i = Self::index(ms);
        debug_assert!(i < HIST_BUCKETS);
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        self.sum_ms += ms;
        self.count += 1;
    }

    /// The value under which `q` of the samples fall: the (upper) midpoint of the bucket of the
    /// sample of that rank (0 when empty).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let want = ((self.count as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= want {
                let (lo, hi) = Self::range(i);
                return (lo + hi).div_ceil(2);
            }
        }
        0
    }

    /// Samples of at most `ms` ms, for `ms` a power of two (a bucket bound).
    fn at_most(&self, ms: u64) -> u64 {
        let last = Self::index(ms);
        self.counts.iter().take(last + 1).sum()
    }
}

#[derive(Default, Clone)]
pub struct PrefixStats {
    pub prefix: Box<[u8]>,
    pub acquires: u64,
    pub contended: u64,
    pub releases: u64,
    pub late_releases: u64,
    /// Clients that found the lock held and began waiting for it (a client's retries while it
    /// waits count once; `contended` counts every attempt).
    pub waits: u64,
    pub waiters: u64,
    pub hold: Histogram,
    pub wait: Histogram,
    /// The prefix's latest late release the history kept (the Prometheus endpoint names its
    /// key and client), brought up to date by the sweep.
    pub last_late: Option<LateRelease>,
}

/// The maps below are keyed by hashes already: hashing them again would only cost time.
#[derive(Default, Clone, Copy)]
struct Identity(u64);

impl std::hash::Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type ByHash = std::hash::BuildHasherDefault<Identity>;

/// The client that sent a lock operation, as a late release names it (asked only then;
/// implemented for the connection's client in cmd/lockinsight.rs, above this layer).
pub trait Who {
    fn id(&self) -> u64;
    fn addr(&self) -> std::net::SocketAddr;
    fn name(&self) -> Option<bytes::Bytes>;
}

/// A remembered acquire: key hash (0 = empty slot), acquire time << 16 | prefix, lease (ms, 0
/// when the acquire named none; at most `u32::MAX`, 49 days), and the acquiring client's id
/// (its low 32 bits: enough to find a connected client, and it keeps a slot at 24 bytes).
#[derive(Default, Clone, Copy, PartialEq, Debug)]
struct Hold {
    h: u64,
    at: u64,
    lease: u32,
    client: u32,
}

/// A held lock's remembered acquire, as LOCKS HELD shows it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Held {
    /// Unix ms.
    pub acquired_ms: u64,
    /// 0: the acquire named no lease.
    pub lease_ms: u64,
    /// The acquiring client's id (low 32 bits).
    pub client: u64,
}

impl Hold {
    fn acquired_at(&self) -> u64 {
        self.at >> 16
    }
}

/// How many acquires a later acquire of the same key replaced unreleased are remembered: the
/// previous holder's lease ran out, and its late release (if it ever comes) is matched here.
const LAPSED: usize = 64;

/// One late release as `LOCKS LATE` shows it and the log line says it.
#[derive(Clone, Debug)]
pub struct LateRelease {
    pub id: u64,
    /// Unix ms of the release.
    pub at_ms: u64,
    /// The key, its first `LATE_KEY_MAX` bytes (inline: recording a late release allocates
    /// nothing once the history is full).
    key: [u8; LATE_KEY_MAX],
    key_len: u8,
    pub client_id: u64,
    pub client_addr: std::net::SocketAddr,
    pub client_name: Option<bytes::Bytes>,
    /// The acquire this release belonged to, when it was remembered: unix ms, lease ms (0:
    /// unknown), and how long after the lease ended the release came.
    pub acquired_ms: Option<u64>,
    pub lease_ms: u64,
    pub late_ms: Option<u64>,
    /// The key's prefix (an index into the prefix table).
    prefix: u16,
}

impl LateRelease {
    fn empty() -> Self {
        LateRelease {
            id: 0,
            at_ms: 0,
            key: [0; LATE_KEY_MAX],
            key_len: 0,
            client_id: 0,
            client_addr: ([0, 0, 0, 0], 0).into(),
            client_name: None,
            acquired_ms: None,
            lease_ms: 0,
            late_ms: None,
            prefix: 0,
        }
    }
}

/// Keys in the late-release history are cut to this many bytes (SLOWLOG's string bound).
const LATE_KEY_MAX: usize = 128;
/// The history ring keeps at least this many entries whatever `lock-late-log-max-len` says
/// (LOCKS LATE lists at most that many): the sweep names each prefix's latest late release
/// from it, and 0 must not lose them.
const LATE_RING_MIN: usize = 16;
/// At most one late-release log line a second; the rest are counted in the next one.
const LOG_INTERVAL_MS: u64 = 1000;

pub struct Insight {
    /// Direct-mapped by key hash.
    holds: Vec<Hold>,
    /// Acquires replaced unreleased by a later acquire of their key (a ring, `LAPSED` long).
    lapsed: [Hold; LAPSED],
    lapsed_next: usize,
    /// The latest late releases: a ring that entry `id` occupies at `id % late_ring_cap`,
    /// written in place (recording one moves or allocates nothing once the ring is full; it
    /// fills as late releases come). LOCKS LATE lists the newest `late_max`.
    late_ring: Vec<LateRelease>,
    late_ring_cap: usize,
    late_max: usize,
    /// Ids below this were cleared (LOCKS LATE RESET).
    late_cleared: u64,
    /// Late releases recorded so far: the next one's id.
    late_next_id: u64,
    /// The first id the sweep has not yet handed to its prefix's `last_late`.
    late_settled: u64,
    /// When the last late-release line was logged (unix ms), and how many were not since.
    late_logged_ms: u64,
    late_unlogged: u64,
    /// Slots of `holds` in use.
    holds_used: usize,
    /// Hash of (client, key) → (first contended attempt, last attempt, prefix, key hash).
    waiting: HashMap<u64, (u64, u64, u16, u64), ByHash>,
    prefixes: Vec<PrefixStats>,
    index: HashMap<Box<[u8]>, u16, ahash::RandomState>,
    /// The prefix of the last lookup: lock keys of one service share theirs, and comparing a
    /// few bytes is cheaper than hashing them.
    last_prefix: Option<(Box<[u8]>, u16)>,
    /// Keys the hash of key bytes, so that clients cannot aim keys at one bucket.
    seed: u64,
    /// The bytes that end a key's prefix (`lock-prefix-delimiters`).
    delimiters: Vec<u8>,
    /// Runs of lock clients' scripts that took the native path (script/native.rs).
    pub native_script_runs: u64,
    /// One cumulative sample a second (the sweep), the latest `TIMELINE`: the page's charts.
    timeline: std::collections::VecDeque<Sample>,
    /// Whose view this is, in cluster mode (`set_view`): the page names it; empty alone.
    view: String,
    /// Whether this node takes the lock operations: a lone server or the cluster's leader.
    leading: bool,
}

/// The figures the page charts over time, as totals at one second (rates are differences).
#[derive(Clone, Copy, Default)]
struct Sample {
    acquires: u64,
    contended: u64,
    late: u64,
    held: u64,
    waiters: u64,
}

/// Seconds of samples the page's charts span (121 samples: 120 one-second rates), about 5 KiB.
const TIMELINE: usize = 121;

/// The loader's client id: it replays logged writes (the append-only file at start, the
/// leader's log on a cluster follower). They are not lock operations a client sent here, and
/// they run with the log's clock (0 on a follower), so lock insight leaves them out.
const LOADER: u64 = 0;

impl Default for Insight {
    fn default() -> Self {
        Insight {
            holds: Vec::new(),
            lapsed: [Hold::default(); LAPSED],
            lapsed_next: 0,
            late_ring: Vec::new(),
            late_ring_cap: 128,
            late_max: 128,
            late_cleared: 0,
            late_next_id: 0,
            late_settled: 0,
            late_logged_ms: 0,
            late_unlogged: 0,
            holds_used: 0,
            waiting: Default::default(),
            prefixes: Vec::new(),
            index: Default::default(),
            last_prefix: None,
            seed: fastrand::u64(..),
            delimiters: vec![b':'],
            native_script_runs: 0,
            timeline: Default::default(),
            view: String::new(),
            leading: true,
        }
    }
}

const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

fn slot(key_hash: u64, slots: usize) -> usize {
    (key_hash >> 32) as usize & (slots - 1)
}

/// One waiting entry per (client, key): the key hash mixed with the client id (odd multiplier,
/// so distinct clients of one key never collide).
fn waiter(client: u64, key_hash: u64) -> u64 {
    key_hash ^ client.wrapping_mul(MIX)
}

/// Whether `b` holds the byte `d`, a word (8 bytes) a step: lock keys' tails are a dozen
/// digits or a UUID, where a byte loop or the library's memchr cost several instructions a
/// byte (callgrind: 76 per key of `lock:<12 digits>`).
fn has_byte(b: &[u8], d: u8) -> bool {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    // A word has a zero byte iff this is non-zero (exact, no false positive).
    let zero_in = |w: u64| w.wrapping_sub(LO) & !w & HI != 0;
    let word = |c: &[u8]| u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
    let pattern = LO.wrapping_mul(u64::from(d));
    if b.len() < 8 {
        return b.contains(&d);
    }
    let mut chunks = b.chunks_exact(8);
    if chunks.by_ref().any(|c| zero_in(word(c) ^ pattern)) {
        return true;
    }
    // The last 8 bytes, overlapping the chunks already seen, cover the remainder.
    !chunks.remainder().is_empty() && zero_in(word(&b[b.len() - 8..]) ^ pattern)
}

/// Prefixes longer than this are cut (a Prometheus label, an INFO field).
const MAX_PREFIX_LEN: usize = 64;

/// A lock key's prefix: up to its last delimiter (`lock:orders:42` → `lock:orders`); a key
/// without one is its own prefix less trailing digits (`orders` → `orders`, `job42` → `job`),
/// and one of digits only has none (`(none)`). At most `MAX_PREFIX_LEN` bytes.
fn prefix_of<'a>(key: &'a [u8], delimiters: &[u8]) -> &'a [u8] {
    let p = match key.iter().rposition(|b| delimiters.contains(b)) {
        Some(i) => &key[..i],
        None => {
            let digits = key.iter().rev().take_while(|b| b.is_ascii_digit()).count();
            &key[..key.len() - digits]
        }
    };
    &p[..p.len().min(MAX_PREFIX_LEN)]
}

impl Insight {
    fn prefix_id(&mut self, key: &[u8]) -> u16 {
        if let Some((last, id)) = &self.last_prefix {
            // The same prefix as last time: the key continues it with a delimiter and has none
            // after (with one delimiter `contains` on bytes is a memchr, cheaper than scanning
            // back for it).
            let n = last.len();
            let d = &self.delimiters;
            let none_in = |b: &[u8]| match d.as_slice() {
                [one] => !has_byte(b, *one),
                _ => !b.iter().any(|c| d.contains(c)),
            };
            if key.len() > n && d.contains(&key[n]) && key[..n] == **last && none_in(&key[n + 1..])
            {
                return *id;
            }
        }
        let p = prefix_of(key, &self.delimiters);
        let id = self.prefix_slow(p);
        self.last_prefix = Some((p.into(), id));
        id
    }

    fn prefix_slow(&mut self, p: &[u8]) -> u16 {
        if let Some(&i) = self.index.get(p) {
            return i;
        }
        if self.prefixes.len() >= MAX_PREFIXES {
            return self.other();
        }
        let id = self.prefixes.len() as u16;
        self.prefixes.push(PrefixStats {
            prefix: p.into(),
            ..Default::default()
        });
        self.index.insert(p.into(), id);
        id
    }

    /// The `(other)` row that prefixes beyond the bound share (made once, past the bound).
    fn other(&mut self) -> u16 {
        const OTHER: &[u8] = b"(other)";
        if let Some(&i) = self.index.get(OTHER) {
            return i;
        }
        let id = self.prefixes.len() as u16;
        self.prefixes.push(PrefixStats {
            prefix: OTHER.into(),
            ..Default::default()
        });
        self.index.insert(OTHER.into(), id);
        id
    }

    /// A seeded multiply-rotate hash, 8 bytes a step: lock keys are short, and a general
    /// purpose keyed hash cost more than the rest of the bookkeeping (callgrind).
    fn hash(&self, key: &[u8]) -> u64 {
        let step = |h: u64, w: u64| (h ^ w).wrapping_mul(MIX).rotate_left(29);
        let mut h = self.seed ^ key.len() as u64;
        let mut chunks = key.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h = step(h, u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            h = step(h, u64::from_le_bytes(w));
        }
        let h = (h ^ (h >> 32)).wrapping_mul(MIX);
        h ^ (h >> 29)
    }

    fn acquired(&mut self, client: u64, key: &[u8], now: u64, lease: u64) {
        let p = self.prefix_id(key);
        let h = self.hash(key);
        self.prefixes[p as usize].acquires += 1;
        let waited = if self.waiting.is_empty() {
            None
        } else {
            self.waiting.remove(&waiter(client, h))
        };
        if let Some((first, _, _, _)) = waited {
            let s = &mut self.prefixes[p as usize];
            s.wait.add(now.saturating_sub(first));
            s.waiters = s.waiters.saturating_sub(1);
        }
        if self.holds_used * 2 >= self.holds.len() && self.holds.len() < HOLD_SLOTS {
            self.grow_holds();
        }
        let slots = self.holds.len();
        let entry = &mut self.holds[slot(h, slots)];
        if entry.h == 0 {
            self.holds_used += 1;
        } else if entry.h == h | 1 {
            // The key is acquired again unreleased: the previous holder's lease ran out.
            self.lapsed[self.lapsed_next % LAPSED] = *entry;
            self.lapsed_next = self.lapsed_next.wrapping_add(1);
        }
        *entry = Hold {
            h: h | 1,
            at: (now << 16) | u64::from(p),
            lease: lease.min(u64::from(u32::MAX)) as u32,
            client: client as u32,
        };
    }

    fn grow_holds(&mut self) {
        let slots = (self.holds.len() * 2).clamp(HOLD_SLOTS_MIN, HOLD_SLOTS);
        let old = std::mem::replace(&mut self.holds, vec![Hold::default(); slots]);
        self.holds_used = 0;
        for hold in old.into_iter().filter(|e| e.h != 0) {
            let entry = &mut self.holds[slot(hold.h, slots)];
            if entry.h == 0 {
                self.holds_used += 1;
            }
            *entry = hold;
        }
    }

    fn contended(&mut self, client: u64, key: &[u8], now: u64) {
        let p = self.prefix_id(key);
        let h = self.hash(key);
        self.prefixes[p as usize].contended += 1;
        let w = waiter(client, h);
        if let Some(w) = self.waiting.get_mut(&w) {
            w.1 = now;
        } else if self.waiting.len() < MAX_WAITING {
            self.waiting.insert(w, (now, now, p, h | 1));
            let s = &mut self.prefixes[p as usize];
            s.waiters += 1;
            s.waits += 1;
        }
    }

    fn released(&mut self, key: &[u8], now: u64) {
        let p = self.prefix_id(key);
        let h = self.hash(key);
        let s = &mut self.prefixes[p as usize];
        s.releases += 1;
        let slots = self.holds.len();
        if let Some(entry) = self.holds.get_mut(slot(h, slots.max(1))) {
            if entry.h == h | 1 {
                let at = entry.acquired_at();
                if now.saturating_sub(at) < HOLD_HORIZON_MS {
                    s.hold.add(now.saturating_sub(at));
                }
                *entry = Hold::default();
                self.holds_used -= 1;
            }
        }
    }

    /// A release found the key gone or another owner's. The acquire it belonged to is the
    /// key's remembered hold when that one's lease has run out (nobody took the key since), or
    /// else the latest acquire of the key that a later one replaced unreleased. A hold whose
    /// lease still runs stays: it is the current holder's, whose release samples it. The late
    /// hold counts in the hold histogram; the release goes into the history and the log.
    fn late(&mut self, client: &impl Who, key: &[u8], n: u64, now: u64) {
        let p = self.prefix_id(key);
        let h = self.hash(key) | 1;
        self.prefixes[p as usize].late_releases += n;
        let slots = self.holds.len();
        let mut found = None;
        if let Some(entry) = self.holds.get_mut(slot(h, slots.max(1))) {
            let ran_out = entry.lease != 0 && entry.acquired_at() + u64::from(entry.lease) <= now;
            if entry.h == h && ran_out {
                found = Some(std::mem::take(entry));
                self.holds_used -= 1;
            }
        }
        if found.is_none() && self.lapsed_next != 0 {
            // Newest first.
            for i in 1..=LAPSED.min(self.lapsed_next) {
                let e = &mut self.lapsed[self.lapsed_next.wrapping_sub(i) % LAPSED];
                if e.h == h {
                    found = Some(std::mem::take(e));
                    break;
                }
            }
        }
        if let Some(held) = found {
            let ms = now.saturating_sub(held.acquired_at());
            if ms < HOLD_HORIZON_MS {
                self.prefixes[p as usize].hold.add(ms);
            }
        }
        self.record_late(client, key, p, found, now);
    }

    /// Writes the late release into its ring slot in place; logs it when the last line is a
    /// second old.
    fn record_late(&mut self, client: &impl Who, key: &[u8], p: u16, held: Option<Hold>, now: u64) {
        let id = self.late_next_id;
        self.late_next_id += 1;
        let cap = self.late_ring_cap;
        let at = (id % cap as u64) as usize;
        if at == self.late_ring.len() {
            self.late_ring.push(LateRelease::empty());
        }
        let e = &mut self.late_ring[at];
        let n = key.len().min(LATE_KEY_MAX);
        e.key[..n].copy_from_slice(&key[..n]);
        e.key_len = n as u8;
        e.id = id;
        e.at_ms = now;
        e.prefix = p;
        e.client_id = client.id();
        e.client_addr = client.addr();
        e.client_name = client.name();
        e.acquired_ms = held.map(|e| e.acquired_at());
        e.lease_ms = held.map_or(0, |e| u64::from(e.lease));
        e.late_ms = held
            .filter(|e| e.lease != 0)
            .map(|e| now.saturating_sub(e.acquired_at() + u64::from(e.lease)));
        if now.saturating_sub(self.late_logged_ms) >= LOG_INTERVAL_MS {
            self.late_logged_ms = now;
            let unlogged = std::mem::take(&mut self.late_unlogged);
            tracing::info!("{}", e.log_line(unlogged));
        } else {
            self.late_unlogged += 1;
        }
    }

    /// The late-release history LOCKS LATE lists: newest first, at most `lock-late-log-max-len`.
    pub fn late_log(&self) -> impl Iterator<Item = &LateRelease> {
        let cap = self.late_ring_cap as u64;
        let first = self
            .late_next_id
            .saturating_sub(cap.min(self.late_max as u64))
            .max(self.late_cleared);
        (first..self.late_next_id)
            .rev()
            .map(move |id| &self.late_ring[(id % cap) as usize])
    }

    /// LOCKS LATE RESET.
    pub fn clear_late_log(&mut self) {
        self.late_cleared = self.late_next_id;
    }

    /// Hands each prefix its latest late release still in the ring (the sweep: once a second,
    /// not once a release).
    fn settle_late(&mut self) {
        let cap = self.late_ring_cap as u64;
        let first = self.late_settled.max(self.late_next_id.saturating_sub(cap));
        for id in (first..self.late_next_id).rev() {
            let e = &self.late_ring[(id % cap) as usize];
            if let Some(s) = self.prefixes.get_mut(usize::from(e.prefix)) {
                if s.last_late.as_ref().is_none_or(|l| l.id < e.id) {
                    s.last_late = Some(e.clone());
                }
            }
        }
        self.late_settled = self.late_next_id;
    }

    /// The remembered, unreleased acquire of `key` (within the sampling horizon), if any. A
    /// key whose acquire was not seen, or whose slot a later lock took, has none.
    pub fn held(&self, key: &[u8], now: u64) -> Option<Held> {
        let h = self.hash(key) | 1;
        let e = self.holds.get(slot(h, self.holds.len().max(1)))?;
        (e.h == h && now.saturating_sub(e.acquired_at()) < HOLD_HORIZON_MS).then(|| Held {
            acquired_ms: e.acquired_at(),
            lease_ms: u64::from(e.lease),
            client: u64::from(e.client),
        })
    }

    /// How many distinct clients wait for each of `keys` (retrying within `WAIT_HORIZON_MS`):
    /// one pass over the bounded waiting table.
    pub fn waiting_for(&self, keys: &[&[u8]]) -> Vec<u64> {
        let mut index: HashMap<u64, Vec<usize>, ByHash> = Default::default();
        for (i, k) in keys.iter().enumerate() {
            index.entry(self.hash(k) | 1).or_default().push(i);
        }
        let mut counts = vec![0; keys.len()];
        for (_, _, _, h) in self.waiting.values() {
            for &i in index.get(h).into_iter().flatten() {
                counts[i] += 1;
            }
        }
        counts
    }

    /// CONFIG SET `lock-prefix-delimiters` takes effect here (the cron): keys seen from now on
    /// are grouped by the new rule; the prefixes already counted stay.
    pub fn set_delimiters(&mut self, d: &[u8]) {
        if self.delimiters != d {
            self.delimiters = d.to_vec();
            self.last_prefix = None;
        }
    }

    /// CONFIG SET `lock-late-log-max-len` takes effect here (the cron's sweep, LOCKS LATE).
    pub fn set_late_max(&mut self, n: usize) {
        self.late_max = n;
        let cap = n.max(LATE_RING_MIN);
        if cap == self.late_ring_cap {
            return;
        }
        // Rebuilt in the new size, keeping the newest entries (a rare CONFIG SET).
        self.settle_late();
        let keep = self
            .late_next_id
            .saturating_sub(cap.min(self.late_ring_cap) as u64)
            .max(self.late_cleared);
        let len = (self.late_next_id as usize).min(cap);
        let old = std::mem::replace(&mut self.late_ring, vec![LateRelease::empty(); len]);
        let old_cap = self.late_ring_cap as u64;
        self.late_ring_cap = cap;
        for id in keep..self.late_next_id {
            self.late_ring[(id % cap as u64) as usize] = old[(id % old_cap) as usize].clone();
        }
        // Slots the old ring did not fill hold nothing to list.
        self.late_cleared = keep;
    }

    /// `SET key value NX …` or SETNX from a client (not from a script: the script's own
    /// outcome counts instead).
    /// `lease`: the SET's expire in ms (0: none).
    pub fn on_set_nx(&mut self, client: u64, key: &[u8], acquired: bool, now: u64, lease: u64) {
        if client == LOADER {
            return;
        }
        if acquired {
            self.acquired(client, key, now, lease)
        } else {
            self.contended(client, key, now)
        }
    }

    /// A script ran: if it is a known lock script, its reply says what happened.
    pub fn on_script(
        &mut self,
        who: &impl Who,
        sha: &[u8; 40],
        keys: &[bytes::Bytes],
        args: &[bytes::Bytes],
        reply: &Frame,
        now: u64,
    ) {
        // Every EVAL passes here: the first 8 bytes as one word tell the scripts apart, the
        // whole SHA1 is compared only for the one that matches them.
        let word =
            |s: &[u8; 40]| u64::from_ne_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]);
        let head = word(sha);
        let Some(&(_, role, _, lease_arg)) = SCRIPTS
            .iter()
            .find(|(s, _, _, _)| word(s) == head && *s == sha)
        else {
            return;
        };
        let Some(key) = keys.first() else {
            return;
        };
        let client = who.id();
        if client == LOADER {
            return;
        }
        // Digits only, as the clients send a lease (0: none, or not a number).
        let lease = || {
            args.get(usize::from(lease_arg))
                .and_then(|a| {
                    a.iter().try_fold(0u64, |n, &b| {
                        b.is_ascii_digit()
                            .then(|| n.checked_mul(10)?.checked_add(u64::from(b - b'0')))?
                    })
                })
                .unwrap_or(0)
        };
        match (role, reply) {
            (Role::AcquireCount, Frame::Integer(n)) if *n > 0 => {
                for k in keys {
                    self.acquired(client, k, now, lease());
                }
            }
            (Role::AcquireCount, Frame::Integer(0)) => self.contended(client, key, now),
            (Role::AcquireNil, Frame::Null | Frame::NullArray) => {
                self.acquired(client, key, now, lease())
            }
            (Role::AcquireNil, Frame::Integer(_)) => self.contended(client, key, now),
            (Role::AcquireOkOrError, Frame::Simple(_)) => self.acquired(client, key, now, lease()),
            (Role::AcquireOkOrError, Frame::Error(_)) => self.contended(client, key, now),
            (Role::ReleaseOne, Frame::Integer(1)) | (Role::ReleaseZero, Frame::Integer(0)) => {
                self.released(key, now)
            }
            (Role::ReleaseOne, Frame::Integer(_)) | (Role::ReleaseZero, Frame::Integer(_)) => {
                self.late(who, key, 1, now)
            }
            (Role::ReleaseCount, Frame::Integer(n)) => {
                let released = (*n).clamp(0, keys.len() as i64) as usize;
                // Which keys were lost is not in the reply: the first ones count as released.
                for k in &keys[..released] {
                    self.released(k, now);
                }
                if released < keys.len() {
                    self.late(who, key, (keys.len() - released) as u64, now);
                }
            }
            (Role::ReleaseRedisson, Frame::Integer(1)) => self.released(key, now),
            (Role::ReleaseRedisson, Frame::Null | Frame::NullArray) => self.late(who, key, 1, now),
            (Role::ReleaseAio, Frame::Integer(_)) => self.released(key, now),
            (Role::ReleaseAio, Frame::Simple(_) | Frame::Error(_)) => self.late(who, key, 1, now),
            _ => {}
        }
    }

    /// Forgets waiters that stopped retrying and holds past the horizon, and takes the charts'
    /// sample (cron, about once a second).
    pub fn sweep(&mut self, now: u64) {
        let prefixes = &mut self.prefixes;
        self.waiting.retain(|_, (_, last, p, _)| {
            let keep = now.saturating_sub(*last) < WAIT_HORIZON_MS;
            if !keep {
                if let Some(s) = prefixes.get_mut(*p as usize) {
                    s.waiters = s.waiters.saturating_sub(1);
                }
            }
            keep
        });
        // One pass: holds past the horizon go, the running ones are counted for the charts.
        let mut held = 0;
        for entry in self.holds.iter_mut().filter(|e| e.h != 0) {
            let at = entry.acquired_at();
            if now.saturating_sub(at) >= HOLD_HORIZON_MS {
                *entry = Hold::default();
                self.holds_used -= 1;
            } else if entry.lease == 0 || at + u64::from(entry.lease) > now {
                held += 1;
            }
        }
        let sum = |f: fn(&PrefixStats) -> u64| self.prefixes.iter().map(f).sum::<u64>();
        let sample = Sample {
            acquires: sum(|s| s.acquires),
            contended: sum(|s| s.contended),
            late: sum(|s| s.late_releases),
            held,
            waiters: self.waiting.len() as u64,
        };
        self.settle_late();
        if self.timeline.len() >= TIMELINE {
            self.timeline.pop_front();
        }
        self.timeline.push_back(sample);
    }

    /// In cluster mode: whether this node leads (takes the lock operations) and a line naming
    /// the view for the page. Lock insight counts what clients send to the node that executes
    /// it, the leader; a follower applies the leader's log without counting it.
    pub fn set_view(&mut self, leading: bool, view: String) {
        self.leading = leading;
        self.view = view;
    }

    #[cfg(test)]
    fn prefixes(&self) -> &[PrefixStats] {
        &self.prefixes
    }

    /// Lock keys whose acquire is remembered and not released yet (within the horizon).
    #[cfg(test)]
    fn held_count(&self, now: u64) -> usize {
        self.holds
            .iter()
            .filter(|e| e.h != 0 && now.saturating_sub(e.acquired_at()) < HOLD_HORIZON_MS)
            .count()
    }

    /// INFO's `locks` section.
    pub fn info(&self, out: &mut String) {
        use std::fmt::Write;
        let sum = |f: fn(&PrefixStats) -> u64| self.prefixes.iter().map(f).sum::<u64>();
        let _ = write!(
            out,
            "# Locks\r\nlock_waiters:{}\r\nlock_acquires:{}\r\nlock_contended:{}\r\nlock_releases:{}\r\nlock_late_releases:{}\r\nlock_scripts_native:{}\r\n",
            self.waiting.len(),
            sum(|s| s.acquires),
            sum(|s| s.contended),
            sum(|s| s.releases),
            sum(|s| s.late_releases),
            self.native_script_runs,
        );
        for (i, s) in self.prefixes.iter().enumerate() {
            let _ = write!(
                out,
                "lock_prefix{i}:prefix={},acquires={},contended={},releases={},late_releases={},waiters={},hold_p50_ms={},hold_p99_ms={},wait_p50_ms={},wait_p99_ms={},waits={}\r\n",
                label(&s.prefix),
                s.acquires,
                s.contended,
                s.releases,
                s.late_releases,
                s.waiters,
                s.hold.quantile(0.5),
                s.hold.quantile(0.99),
                s.wait.quantile(0.5),
                s.wait.quantile(0.99),
                s.waits,
            );
        }
    }

    /// Per prefix: locks held now and the age of the oldest (ms): remembered acquires whose
    /// lease still runs (or that named none), one pass over the bounded hold table.
    fn held_by_prefix(&self, now: u64) -> Vec<(u64, u64)> {
        let mut held = vec![(0u64, 0u64); self.prefixes.len()];
        for e in self.holds.iter().filter(|e| e.h != 0) {
            let at = e.acquired_at();
            let running = e.lease == 0 || at + u64::from(e.lease) > now;
            if let Some(h) = held.get_mut((e.at & 0xffff) as usize) {
                if running && now.saturating_sub(at) < HOLD_HORIZON_MS {
                    h.0 += 1;
                    h.1 = h.1.max(now.saturating_sub(at));
                }
            }
        }
        held
    }

    /// The Prometheus text exposition of the same figures (`metrics-port`).
    pub fn prometheus(&self, out: &mut String, now: u64) {
        use std::fmt::Write;
        let _ = writeln!(
            out,
            "# HELP deadbolt_lock_view_leader 1 when this node takes lock operations (a lone server or the cluster's leader): its lock series are the cluster's; 0 on a follower, whose series count only what it led before.\n# TYPE deadbolt_lock_view_leader gauge\ndeadbolt_lock_view_leader {}",
            u8::from(self.leading)
        );
        let held = self.held_by_prefix(now);
        for (name, help, pick) in [
            (
                "deadbolt_lock_held",
                "Locks held now (acquired, not released, lease running), as far as sampled.",
                (|h: (u64, u64)| h.0 as f64) as fn((u64, u64)) -> f64,
            ),
            (
                "deadbolt_lock_oldest_held_seconds",
                "Age of the oldest lock held now (0: none held).",
                |h: (u64, u64)| h.1 as f64 / 1000.0,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (s, h) in self.prefixes.iter().zip(&held) {
                let _ = writeln!(
                    out,
                    "{name}{{prefix=\"{}\"}} {}",
                    escape(&s.prefix),
                    pick(*h)
                );
            }
        }
        let counters: [Series; 6] = [
            ("deadbolt_lock_acquires_total", "Successful lock acquisitions.", |s| s.acquires),
            ("deadbolt_lock_contended_total", "Acquire attempts that found the lock held.", |s| s.contended),
            ("deadbolt_lock_waits_total", "Clients that found the lock held and began waiting (retries count once).", |s| s.waits),
            ("deadbolt_lock_releases_total", "Releases by the lock's owner.", |s| s.releases),
            ("deadbolt_lock_late_releases_total", "Releases that found the lock gone or owned by someone else: the holder's lease ran out before it released (alert on any increase).", |s| s.late_releases),
            ("deadbolt_lock_waiters", "Clients retrying to acquire a held lock (no retry for 30 s: given up).", |s| s.waiters),
        ];
        for (name, help, f) in counters {
            let kind = if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for s in &self.prefixes {
                let _ = writeln!(out, "{name}{{prefix=\"{}\"}} {}", escape(&s.prefix), f(s));
            }
        }
        for (name, help, value) in [
            (
                "deadbolt_lock_last_late_release_late_seconds",
                "The latest late release of the prefix: how long after its lease ran out it came (NaN: its acquire was not seen), labelled with its key and client.",
                (|e: &LateRelease| e.late_ms.map_or(f64::NAN, |ms| ms as f64 / 1000.0))
                    as fn(&LateRelease) -> f64,
            ),
            (
                "deadbolt_lock_last_late_release_timestamp_seconds",
                "The latest late release of the prefix: when it came (Unix time), labelled with its key and client.",
                |e: &LateRelease| e.at_ms as f64 / 1000.0,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for s in &self.prefixes {
                let Some(e) = &s.last_late else { continue };
                let _ = writeln!(
                    out,
                    "{name}{{prefix=\"{}\",key=\"{}\",client_id=\"{}\",client_addr=\"{}\",client_name=\"{}\"}} {}",
                    escape(&s.prefix),
                    prom(e.key()),
                    e.client_id,
                    prom(e.client_addr.to_string().as_bytes()),
                    prom(e.client_name.as_deref().unwrap_or_default()),
                    value(e),
                );
            }
        }
        for (name, help, pick) in [
            (
                "deadbolt_lock_hold_seconds",
                "How long locks were held, acquire to release by the owner.",
                (|s: &PrefixStats| &s.hold) as fn(&PrefixStats) -> &Histogram,
            ),
            (
                "deadbolt_lock_wait_seconds",
                "How long a client retried before it acquired a held lock.",
                |s: &PrefixStats| &s.wait,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
            for s in &self.prefixes {
                let h = pick(s);
                let p = escape(&s.prefix);
                for b in 0..PROM_BOUNDS {
                    let ms = 1u64 << b;
                    let _ = writeln!(
                        out,
                        "{name}_bucket{{prefix=\"{p}\",le=\"{}\"}} {}",
                        ms as f64 / 1000.0,
                        h.at_most(ms)
                    );
                }
                let _ = writeln!(
                    out,
                    "{name}_bucket{{prefix=\"{p}\",le=\"+Inf\"}} {}",
                    h.count
                );
                let _ = writeln!(
                    out,
                    "{name}_sum{{prefix=\"{p}\"}} {}",
                    h.sum_ms as f64 / 1000.0
                );
                let _ = writeln!(out, "{name}_count{{prefix=\"{p}\"}} {}", h.count);
            }
        }
    }
}

impl LateRelease {
    pub fn key(&self) -> &[u8] {
        &self.key[..usize::from(self.key_len)]
    }

    /// The notice-level log line: which key, which client, how late, and the acquire.
    pub fn log_line(&self, unlogged: u64) -> String {
        use std::fmt::Write;
        let mut l = format!(
            "Lock released late: key '{}' by client id={} addr={} name={}",
            printable(self.key()),
            self.client_id,
            self.client_addr,
            printable(self.client_name.as_deref().unwrap_or_default()),
        );
        match (self.acquired_ms, self.late_ms) {
            (Some(at), Some(late)) => {
                let _ = write!(
                    l,
                    ", {late} ms after its lease of {} ms ran out (acquired at unix ms {at}, held {} ms)",
                    self.lease_ms,
                    self.at_ms.saturating_sub(at),
                );
            }
            (Some(at), None) => {
                let _ = write!(
                    l,
                    ", lease unknown (acquired at unix ms {at}, held {} ms)",
                    self.at_ms.saturating_sub(at)
                );
            }
            _ => l.push_str(", its acquire was not seen (lease and lateness unknown)"),
        }
        if unlogged > 0 {
            let _ = write!(
                l,
                "; {unlogged} more late releases since the last such line (LOCKS LATE lists them)"
            );
        }
        l
    }
}

/// Bytes of a key or client name as a log line shows them (as CLIENT LIST's printable form).
fn printable(b: &[u8]) -> String {
    b.iter()
        .map(|&c| {
            if c.is_ascii_graphic() || c == b' ' {
                (c as char).to_string()
            } else {
                format!("\\x{c:02x}")
            }
        })
        .collect()
}

impl Insight {
    /// The page at `/` on `metrics-port`: which node's view it is, per prefix the held locks,
    /// the oldest hold, waiters, counters and percentiles, the last minutes as charts (inline
    /// SVG), the hold and wait distributions, then the latest late releases. Readable without
    /// JavaScript (server-rendered HTML, inline CSS, a `<noscript>` refresh every 2 s); live
    /// with it: an inline script fetches the page every second and swaps its `#live` part in
    /// place. No external assets.
    pub fn html(&self, out: &mut String, now: u64) {
        use std::fmt::Write;
        out.push_str(concat!(
            "<!doctype html><html><head><meta charset=\"utf-8\">",
            "<noscript><meta http-equiv=\"refresh\" content=\"2\"></noscript>",
            "<title>deadbolt lock insight</title><style>",
            "body{font:14px system-ui,sans-serif;margin:1.5em;background:#fff;color:#222}",
            "table{border-collapse:collapse;margin-bottom:1.5em}",
            "th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eee}",
            "td.k{text-align:left;font-family:monospace}.late{color:#b00;font-weight:bold}",
            ".charts{display:flex;flex-wrap:wrap;gap:1em;margin-bottom:1.5em}",
            ".chart{border:1px solid #ccc;padding:4px 8px}.chart b{font-weight:600}",
            "#status{color:#666}#status.ok{color:#070}p.view{background:#eef;padding:6px 10px}",
            "</style></head><body><h1>deadbolt lock insight</h1>",
            "<p id=\"status\">Server-rendered; reloads every 2 s.</p>",
        ));
        let _ = write!(out, "<div id=\"live\" data-rendered=\"{now}\">");
        if !self.view.is_empty() {
            let _ = write!(out, "<p class=\"view\">{}</p>", html_escape(&self.view));
        }
        let held = self.held_by_prefix(now);
        let (n_held, n_late): (u64, u64) = (
            held.iter().map(|h| h.0).sum(),
            self.prefixes.iter().map(|s| s.late_releases).sum(),
        );
        let _ = write!(
            out,
            "<p>At unix ms {now}: <b>{n_held}</b> locks held, <b>{}</b> clients waiting, <b{}>{n_late}</b> late releases since start.</p>",
            self.waiting.len(),
            if n_late > 0 { " class=\"late\"" } else { "" },
        );
        out.push_str("<h2>Locks by prefix</h2><table><tr><th>prefix</th><th>held</th><th>oldest held (ms)</th><th>waiters</th><th>acquires</th><th>contended</th><th>waits</th><th>releases</th><th>late releases</th><th>hold p50 / p90 / p99 (ms)</th><th>wait p50 / p90 / p99 (ms)</th></tr>");
        for (s, h) in self.prefixes.iter().zip(&held) {
            let late = if s.late_releases > 0 {
                " class=\"late\""
            } else {
                ""
            };
            let _ = write!(
                out,
                "<tr><td class=\"k\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td{late}>{}</td><td>{} / {} / {}</td><td>{} / {} / {}</td></tr>",
                html_escape(&label(&s.prefix)),
                h.0,
                h.1,
                s.waiters,
                s.acquires,
                s.contended,
                s.waits,
                s.releases,
                s.late_releases,
                s.hold.quantile(0.5),
                s.hold.quantile(0.9),
                s.hold.quantile(0.99),
                s.wait.quantile(0.5),
                s.wait.quantile(0.9),
                s.wait.quantile(0.99),
            );
        }
        out.push_str("</table><h2>Latest late releases</h2><table><tr><th>when (unix ms)</th><th>key</th><th>client id</th><th>client addr</th><th>client name</th><th>lease (ms)</th><th>late (ms)</th><th>held (ms)</th></tr>");
        let opt = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
        for e in self.late_log().take(50) {
            let _ = write!(
                out,
                "<tr><td>{}</td><td class=\"k\">{}</td><td>{}</td><td class=\"k\">{}</td><td class=\"k\">{}</td><td>{}</td><td class=\"late\">{}</td><td>{}</td></tr>",
                e.at_ms,
                html_escape(&printable(e.key())),
                e.client_id,
                html_escape(&e.client_addr.to_string()),
                html_escape(&printable(e.client_name.as_deref().unwrap_or_default())),
                if e.lease_ms == 0 { "?".to_string() } else { e.lease_ms.to_string() },
                opt(e.late_ms),
                opt(e.acquired_ms.map(|a| e.at_ms.saturating_sub(a))),
            );
        }
        out.push_str("</table>");
        self.charts(out);
        self.distributions(out);
        out.push_str("<p>Held locks by name: <code>LOCKS HELD 0 MATCH pattern</code>. Late releases: <code>LOCKS LATE</code>. Metrics: <a href=\"/metrics\">/metrics</a>.</p></div>");
        out.push_str(concat!(
            "<script>(function(){var st=document.getElementById('status');",
            "function tick(){fetch('/',{cache:'no-store'}).then(function(r){return r.text()})",
            ".then(function(t){var d=new DOMParser().parseFromString(t,'text/html');",
            "var n=d.getElementById('live'),o=document.getElementById('live');if(!n||!o)return;",
            "o.replaceWith(n);st.className='ok';st.textContent='Live: updated '+",
            "new Date().toLocaleTimeString()+' from the server view of unix ms '+n.dataset.rendered+'.'})",
            ".catch(function(e){st.className='late';st.textContent='Live update failed ('+e+'); retrying.'})}",
            "tick();setInterval(tick,1000)})();</script></body></html>\n",
        ));
    }

    /// The last `TIMELINE` seconds, one sparkline a series: rates from the cumulative samples
    /// the sweep takes each second, gauges as sampled.
    fn charts(&self, out: &mut String) {
        use std::fmt::Write;
        let rate = |f: fn(&Sample) -> u64| -> Vec<u64> {
            let t = &self.timeline;
            (1..t.len())
                .map(|i| f(&t[i]).saturating_sub(f(&t[i - 1])))
                .collect()
        };
        let gauge = |f: fn(&Sample) -> u64| -> Vec<u64> { self.timeline.iter().map(f).collect() };
        let series = [
            ("late releases / s", rate(|s| s.late), true),
            ("contended attempts / s", rate(|s| s.contended), false),
            ("acquires / s", rate(|s| s.acquires), false),
            ("locks held", gauge(|s| s.held), false),
            ("clients waiting", gauge(|s| s.waiters), false),
        ];
        let _ = write!(
            out,
            "<h2>Last {} s</h2><div class=\"charts\">",
            self.timeline.len().saturating_sub(1)
        );
        const W: usize = 240;
        const H: u64 = 48;
        for (name, v, red) in series {
            let max = v.iter().copied().max().unwrap_or(0);
            let last = v.last().copied().unwrap_or(0);
            let _ = write!(
                out,
                "<div class=\"chart\"><b>{name}</b>: {last} now, {max} at most<br><svg width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\"><rect width=\"{W}\" height=\"{H}\" fill=\"#fafafa\"/><polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"",
                if red { "#b00" } else { "#36c" }
            );
            let step = W as f64 / (TIMELINE - 1) as f64;
            let x0 = (TIMELINE - v.len().max(1)) as f64 * step;
            for (i, y) in v.iter().enumerate() {
                let y = H - 2 - y * (H - 4) / max.max(1);
                let _ = write!(out, "{:.1},{y} ", x0 + i as f64 * step);
            }
            out.push_str("\"/></svg></div>");
        }
        out.push_str("</div>");
    }

    /// Per prefix with samples (the first `DIST_PREFIXES`), the hold and wait histograms as
    /// bars over power-of-two bounds (the Prometheus buckets).
    fn distributions(&self, out: &mut String) {
        use std::fmt::Write;
        const DIST_PREFIXES: usize = 20;
        const BAR: u64 = 10;
        const H: u64 = 48;
        let shown: Vec<_> = self
            .prefixes
            .iter()
            .filter(|s| s.hold.count + s.wait.count > 0)
            .take(DIST_PREFIXES)
            .collect();
        if shown.is_empty() {
            return;
        }
        out.push_str("<h2>Hold and wait distributions</h2><p>Bars: samples per power-of-two bound, 1 ms … 2<sup>20</sup> ms, then longer.</p><div class=\"charts\">");
        for s in shown {
            for (what, h) in [("hold", &s.hold), ("wait", &s.wait)] {
                if h.count == 0 {
                    continue;
                }
                let mut bins = Vec::with_capacity(PROM_BOUNDS as usize + 1);
                let mut below = 0;
                for b in 0..PROM_BOUNDS {
                    let n = h.at_most(1 << b);
                    bins.push(n - below);
                    below = n;
                }
                bins.push(h.count - below);
                let max = bins.iter().copied().max().unwrap_or(0).max(1);
                let w = BAR * bins.len() as u64;
                let _ = write!(
                    out,
                    "<div class=\"chart\"><b>{}</b> {what}: n={}, p50 {} ms, p99 {} ms<br><svg width=\"{w}\" height=\"{H}\" viewBox=\"0 0 {w} {H}\"><rect width=\"{w}\" height=\"{H}\" fill=\"#fafafa\"/>",
                    html_escape(&label(&s.prefix)),
                    h.count,
                    h.quantile(0.5),
                    h.quantile(0.99),
                );
                for (i, n) in bins.iter().enumerate().filter(|(_, n)| **n > 0) {
                    let bh = (n * (H - 2) / max).max(1);
                    let _ = write!(
                        out,
                        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{bh}\" fill=\"#36c\"><title>{n}</title></rect>",
                        i as u64 * BAR + 1,
                        H - bh,
                        BAR - 2,
                    );
                }
                out.push_str("</svg></div>");
            }
        }
        out.push_str("</div>");
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A Prometheus series of one figure per prefix: name, help text, the figure.
type Series = (&'static str, &'static str, fn(&PrefixStats) -> u64);

/// A prefix as INFO shows it: `(none)` for the empty prefix (see `prefix_of`); bytes that would break the
/// `key=value,…` line become '_'.
fn label(p: &[u8]) -> String {
    if p.is_empty() {
        return "(none)".into();
    }
    p.iter()
        .map(|&b| match b {
            b',' | b'=' | b'\r' | b'\n' => '_',
            b if b.is_ascii_graphic() => b as char,
            _ => '_',
        })
        .collect()
}

/// Bytes as a Prometheus label value.
fn prom(b: &[u8]) -> String {
    printable(b).replace('\\', "\\\\").replace('"', "\\\"")
}

/// A prefix as a Prometheus label value.
fn escape(p: &[u8]) -> String {
    let l = label(p);
    l.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Who for u64 {
        fn id(&self) -> u64 {
            *self
        }
        fn addr(&self) -> std::net::SocketAddr {
            ([127, 0, 0, 1], 1).into()
        }
        fn name(&self) -> Option<bytes::Bytes> {
            None
        }
    }

    #[test]
    fn every_known_script_is_the_manifests_file() {
        let root = env!("CARGO_MANIFEST_DIR");
        let manifest =
            std::fs::read_to_string(format!("{root}/lua/MANIFEST.tsv")).expect("manifest");
        for (sha, _, file, lease_arg) in SCRIPTS {
            let body = std::fs::read(format!("{root}/lua/{file}")).expect(file);
            if *lease_arg != NO_LEASE {
                let text = String::from_utf8_lossy(&body);
                let argv = format!("ARGV[{}]", lease_arg + 1);
                assert!(
                    text.lines()
                        .any(|l| l.contains(&argv) && l.to_lowercase().contains("px")
                            || l.contains(&argv) && l.contains("pexpire")),
                    "{file}: the lease is {argv}"
                );
            }
            assert_eq!(
                sha1_smol::Sha1::from(&body).digest().to_string().as_bytes(),
                *sha,
                "{file}"
            );
            let sha = std::str::from_utf8(*sha).unwrap();
            assert!(
                manifest
                    .lines()
                    .any(|l| l.starts_with(file) && l.contains(sha)),
                "{file} {sha} in MANIFEST.tsv"
            );
        }
    }

    #[test]
    fn a_release_after_the_lease_ran_out_is_late() {
        let mut i = Insight::default();
        let release = b"c3f8721cbb97f72bc19e972846bd7aaf91901658";
        let keys = [bytes::Bytes::from_static(b"lock:orders:1")];
        i.on_set_nx(7, b"lock:orders:1", true, 1000, 0);
        i.on_set_nx(8, b"lock:orders:1", false, 1001, 0);
        i.on_script(&7u64, release, &keys, &[], &Frame::Integer(1), 1250);
        i.on_set_nx(8, b"lock:orders:1", true, 1300, 0);
        // Client 8's lease runs out; someone else took the key; 8's release finds it foreign.
        i.on_script(&8u64, release, &keys, &[], &Frame::Integer(0), 9000);
        let s = &i.prefixes()[0];
        assert_eq!(&*s.prefix, b"lock:orders");
        assert_eq!(
            (s.acquires, s.contended, s.releases, s.late_releases),
            (2, 1, 1, 1)
        );
        assert_eq!((s.hold.count, s.hold.quantile(0.5)), (1, 253));
        assert_eq!((s.wait.count, s.wait.quantile(0.5)), (1, 297));
        assert_eq!(s.waiters, 0);
        // Client 8's hold is still there: the key's holder now is whoever took it.
        assert_eq!(i.held_count(9000), 1);
        let mut text = String::new();
        i.info(&mut text);
        assert!(text.contains("lock_late_releases:1\r\n"), "{text}");
        assert!(text.contains("lock_prefix0:prefix=lock:orders,acquires=2,contended=1,releases=1,late_releases=1,waiters=0,hold_p50_ms=253"), "{text}");
    }

    #[test]
    fn a_late_release_finds_its_acquire_and_is_recorded() {
        let mut i = Insight::default();
        let release = b"c3f8721cbb97f72bc19e972846bd7aaf91901658";
        let keys = [bytes::Bytes::from_static(b"lock:a:1")];
        // 7 takes the key for 200 ms; it runs out; 8 takes it; 7's release comes 100 ms late.
        i.on_set_nx(7, b"lock:a:1", true, 1000, 200);
        i.on_set_nx(8, b"lock:a:1", true, 1250, 5000);
        i.on_script(&7u64, release, &keys, &[], &Frame::Integer(0), 1300);
        let e = i.late_log().next().expect("recorded").clone();
        assert_eq!(
            (e.client_id, e.acquired_ms, e.lease_ms, e.late_ms, e.at_ms),
            (7, Some(1000), 200, Some(100), 1300)
        );
        assert_eq!(e.key(), b"lock:a:1");
        assert_eq!(
            e.log_line(0),
            "Lock released late: key 'lock:a:1' by client id=7 addr=127.0.0.1:1 name=, 100 ms after its lease of 200 ms ran out (acquired at unix ms 1000, held 300 ms)"
        );
        // The late hold is sampled; 8's hold stays for its own release.
        assert_eq!(i.prefixes()[0].hold.count, 1);
        assert_eq!(i.held_count(1300), 1);
        i.on_script(&8u64, release, &keys, &[], &Frame::Integer(1), 1400);
        assert_eq!(i.prefixes()[0].hold.count, 2);
        // A lease that ran out with nobody taking the key: the key's own hold is the late one.
        i.on_set_nx(9, b"lock:a:1", true, 2000, 100);
        i.on_script(&9u64, release, &keys, &[], &Frame::Integer(0), 2150);
        let e = i.late_log().next().unwrap().clone();
        assert_eq!((e.client_id, e.late_ms, e.id), (9, Some(50), 1));
        assert_eq!(i.held_count(2150), 0);
        // A release whose acquire was never seen: recorded with what is known.
        i.on_script(&9u64, release, &keys, &[], &Frame::Integer(0), 2160);
        let e = i.late_log().next().unwrap().clone();
        assert_eq!((e.acquired_ms, e.late_ms), (None, None));
        // Bounded by its directive; the next log line says how many went unlogged.
        i.set_late_max(2);
        assert_eq!(i.late_log().map(|e| e.id).collect::<Vec<_>>(), [2, 1]);
        assert_eq!(i.late_unlogged, 2);
        assert!(e
            .log_line(2)
            .ends_with("; 2 more late releases since the last such line (LOCKS LATE lists them)"));
        let s = &i.prefixes()[0];
        assert_eq!(s.late_releases, 3);
        // The sweep names the prefix's latest.
        i.sweep(2200);
        assert_eq!(i.prefixes()[0].last_late.as_ref().map(|e| e.id), Some(2));
        i.clear_late_log();
        assert_eq!(i.late_log().count(), 0);
        assert_eq!(i.prefixes()[0].last_late.as_ref().map(|e| e.id), Some(2));
    }

    /// The history ring wraps in place, lists the newest `lock-late-log-max-len` first, keeps
    /// its newest entries when resized, and with 0 lists none while the sweep still names each
    /// prefix's latest.
    #[test]
    fn the_late_history_ring() {
        let mut i = Insight::default();
        let release = b"c3f8721cbb97f72bc19e972846bd7aaf91901658";
        let late = |i: &mut Insight, key: &str, now: u64| {
            let keys = [bytes::Bytes::copy_from_slice(key.as_bytes())];
            i.on_script(&1u64, release, &keys, &[], &Frame::Integer(0), now);
        };
        let ids = |i: &Insight| i.late_log().map(|e| e.id).collect::<Vec<_>>();
        for n in 0..300u64 {
            late(&mut i, &format!("a:{n}"), n);
        }
        assert_eq!(i.late_ring.len(), 128);
        assert_eq!(ids(&i), (172..300).rev().collect::<Vec<_>>());
        assert_eq!(
            i.late_log().next().map(|e| e.key().to_vec()),
            Some(b"a:299".to_vec())
        );
        i.set_late_max(1000);
        assert_eq!(ids(&i), (172..300).rev().collect::<Vec<_>>());
        for n in 300..400u64 {
            late(&mut i, &format!("a:{n}"), n);
        }
        assert_eq!(ids(&i), (172..400).rev().collect::<Vec<_>>());
        i.set_late_max(3);
        assert_eq!(ids(&i), [399, 398, 397]);
        assert_eq!(
            i.late_log().nth(2).map(|e| e.key().to_vec()),
            Some(b"a:397".to_vec())
        );
        i.set_late_max(0);
        assert_eq!(ids(&i), Vec::<u64>::new());
        late(&mut i, "b:1", 500);
        late(&mut i, "a:1", 501);
        i.sweep(502);
        let last = |i: &Insight, p: usize| i.prefixes()[p].last_late.as_ref().map(|e| e.id);
        assert_eq!((last(&i, 0), last(&i, 1)), (Some(401), Some(400)));
        assert_eq!(ids(&i), Vec::<u64>::new());
        i.set_late_max(10);
        assert_eq!(ids(&i), (392..402).rev().collect::<Vec<_>>());
    }

    /// Every quantile is within 5 % (3.2 % by construction) of the sample of its rank, from
    /// 1 ms to the histogram's top; the buckets tile the range with no gap or overlap.
    #[test]
    fn histogram_quantiles_within_five_percent() {
        let mut next = 1;
        for i in 0..HIST_BUCKETS {
            let (lo, hi) = Histogram::range(i);
            assert_eq!(lo, next.min(lo), "bucket {i}");
            assert!(
                lo <= hi && (i == 0 || lo == next),
                "bucket {i}: {lo}..{hi}, {next}"
            );
            assert_eq!(Histogram::index(lo), i);
            assert_eq!(Histogram::index(hi), i);
            next = hi + 1;
        }
        assert_eq!(next, HIST_MAX_MS + 1);
        assert_eq!(Histogram::index(u64::MAX), HIST_BUCKETS - 1);
        let within = |got: u64, want: u64| {
            let err = (got as f64 - want as f64).abs() / want.max(1) as f64;
            assert!(err <= 0.05, "{got} for {want}: {:.1} %", err * 100.0);
            err
        };
        let mut worst: f64 = 0.0;
        for ms in (1..100_000).chain((100_000..HIST_MAX_MS).step_by(997)) {
            let mut h = Histogram::default();
            h.add(ms);
            worst = worst.max(within(h.quantile(0.5), ms));
        }
        assert!(worst <= 1.0 / 32.0 + 1e-9, "{worst}");
        // Mixed samples: p50 and p99 against the exact order statistics.
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..200 {
            let mut h = Histogram::default();
            let mut v: Vec<u64> = (0..rng.usize(1..500))
                .map(|_| 1 + (rng.f64().powi(3) * 600_000.0) as u64)
                .collect();
            for &ms in &v {
                h.add(ms);
            }
            v.sort_unstable();
            for q in [0.5, 0.9, 0.99] {
                let rank = ((v.len() as f64 * q).ceil() as usize).max(1);
                within(h.quantile(q), v[rank - 1]);
            }
            assert_eq!(
                h.at_most(1 << 20),
                v.iter().filter(|&&x| x <= 1 << 20).count() as u64
            );
            assert_eq!(
                h.at_most(1024),
                v.iter().filter(|&&x| x <= 1024).count() as u64
            );
        }
        // A 40 ms hold reads as 40 ms, not 64.
        let mut h = Histogram::default();
        h.add(40);
        assert_eq!(h.quantile(0.99), 40);
    }

    #[test]
    fn has_byte_finds_a_byte_anywhere() {
        let mut rng = fastrand::Rng::with_seed(3);
        for len in 0..40 {
            for _ in 0..200 {
                let b: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
                for d in [b':', 0, 0x80, 0xff, rng.u8(..)] {
                    assert_eq!(has_byte(&b, d), b.contains(&d), "{b:?} {d}");
                }
            }
            let mut b = vec![b'7'; len];
            assert!(!has_byte(&b, b':'));
            for i in 0..len {
                b[i] = b':';
                assert!(has_byte(&b, b':'), "at {i} of {len}");
                b[i] = b'7';
            }
        }
    }

    #[test]
    fn prefixes_of_names_with_and_without_delimiters() {
        let colon = b":";
        assert_eq!(prefix_of(b"lock:orders:42", colon), b"lock:orders");
        assert_eq!(prefix_of(b"orders", colon), b"orders");
        assert_eq!(prefix_of(b"job42", colon), b"job");
        assert_eq!(prefix_of(b"42", colon), b"");
        assert_eq!(prefix_of(b"locks/orders/7", colon), b"locks/orders/");
        assert_eq!(prefix_of(b"locks/orders/7", b":/."), b"locks/orders");
        assert_eq!(prefix_of(&[b'k'; 200], colon).len(), MAX_PREFIX_LEN);
        let mut i = Insight::default();
        for key in [
            "orders", "orders", "lock:a:1", "lock:a:2", "orders", "jobs/x",
        ] {
            i.on_set_nx(1, key.as_bytes(), true, 0, 0);
        }
        i.set_delimiters(b":/");
        i.on_set_nx(1, b"jobs/y", true, 0, 0);
        let mut text = String::new();
        i.info(&mut text);
        for want in [
            "prefix=orders,acquires=3,",
            "prefix=lock:a,acquires=2,",
            "prefix=jobs/x,acquires=1,",
            "prefix=jobs,acquires=1,",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        assert!(!text.contains("(none)"), "{text}");
    }

    #[test]
    fn redisson_outcomes() {
        let mut i = Insight::default();
        let acquire = b"149c5a8bf18676fd99e9e6e24923bd64d9b62f94";
        let unlock = b"6866459238a13a701d42f4971f12d9f3a50e2442";
        let keys = [bytes::Bytes::from_static(b"myLock")];
        i.on_script(&1u64, acquire, &keys, &[], &Frame::Null, 0);
        i.on_script(&2u64, acquire, &keys, &[], &Frame::Integer(29_000), 5);
        i.on_script(&1u64, unlock, &keys, &[], &Frame::Integer(0), 10);
        i.on_script(&1u64, unlock, &keys, &[], &Frame::Integer(1), 20);
        i.on_script(&2u64, unlock, &keys, &[], &Frame::Null, 30);
        let s = &i.prefixes()[0];
        assert_eq!(
            (s.acquires, s.contended, s.releases, s.late_releases),
            (1, 1, 1, 1)
        );
        assert_eq!(s.waiters, 1);
        i.sweep(31_000);
        assert_eq!(i.prefixes()[0].waiters, 0);
    }

    #[test]
    fn bounded_prefixes_and_holds() {
        let mut i = Insight::default();
        for n in 0..(MAX_PREFIXES as u64 + 50) {
            i.on_set_nx(1, format!("p{n}:k").as_bytes(), true, n, 0);
        }
        assert_eq!(i.prefixes().len(), MAX_PREFIXES + 1);
        assert_eq!(&*i.prefixes()[MAX_PREFIXES].prefix, b"(other)");
        assert_eq!(i.prefixes()[MAX_PREFIXES].acquires, 50);
        // The hold table is fixed: many more keys than slots only replace samples.
        for n in 0..(HOLD_SLOTS as u64 * 4) {
            i.on_set_nx(1, format!("k:{n}").as_bytes(), true, 1000, 0);
        }
        let held = i.held_count(1000);
        assert!(held <= HOLD_SLOTS && held > HOLD_SLOTS / 2, "{held}");
        assert_eq!(i.holds.len(), HOLD_SLOTS);
        assert_eq!(i.held_count(1000 + HOLD_HORIZON_MS), 0);
        i.sweep(1000 + HOLD_HORIZON_MS);
        assert_eq!(i.holds_used, 0);
        // A few locks, a small table.
        let mut k = Insight::default();
        for n in 0..50u64 {
            k.on_set_nx(1, format!("k:{n}").as_bytes(), true, 0, 0);
        }
        assert_eq!(k.holds.len(), HOLD_SLOTS_MIN);
        assert_eq!(k.held_count(0), k.holds_used);
    }
}
