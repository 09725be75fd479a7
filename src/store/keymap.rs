//! The key → entry map of one database: entries in one index space (what SCAN, RANDOMKEY and
//! the expiry sweep walk), found through one hash index that grows without stalling the server.
//!
//! What a lookup touches, and why (`find` was 18-27 % of a pipelined SET/GET run and
//! `memcmp` another 9 %, from cache misses rather than instructions):
//! - the index is one open-addressing table of 8-byte slots, 8 to a cache line, each holding
//!   32 bits of the key's hash beside the entry's index. Linear probing at a load of at most
//!   0.7 reads ~1.5 slots, nearly always within one line. (The previous hashbrown tables kept
//!   control bytes and slots in separate arrays: two lines, behind a shard lookup.)
//! - a slot whose 32 hash bits match is almost always the key, so the full key is compared
//!   about once, and it is compared inside the entry: keys up to `INLINE` bytes (every lock
//!   name clients send in practice) are stored in the entry itself, not behind a pointer.
//! - the entry is found by index in fixed-size chunks, so adding one never moves the others and
//!   a fresh chunk is memory the process has not touched yet.
//!
//! Growth is incremental, as Redis's dict: the full table becomes `old` and a table twice its
//! size takes new keys; every insert and removal moves a few old slots across, whole probe runs
//! at a time, so a lookup that misses the new table still finds any unmoved key in the old one.
//! The new table is zeroed memory straight from the OS (an empty slot is 0), so allocating it
//! costs nothing until its pages are written.
//!
//! Removal is `swap_remove`: the last entry moves into the hole (SCAN's guarantee relies on it;
//! see keyspace.rs).

use std::cell::Cell;

/// Entries per chunk: 2 K entries of 80 bytes, one 160 KB allocation. What a keyspace holds
/// beyond its entries is at most the room left in its last chunk (and the first chunk's
/// doubling below that): with 16 K-entry chunks 10 k lock keys held 16 K entries' room, 51
/// bytes a key more than the entries themselves, and cost more than Redis's 208 bytes a key.
const CHUNK: usize = 1 << 11;

/// Longest key stored inside its entry.
pub const INLINE: usize = 27;

/// A stored key: its bytes inside the 32-byte value when they fit (no allocation, no pointer to
/// follow when comparing), else one exact-size allocation. Beside them, the key's last access
/// as Redis's 24-bit LRU clock (seconds, wrapping; OBJECT IDLETIME). The clock made the key 32
/// bytes instead of 24 (an entry 80 instead of 72): squeezed into 24 it left 19 inline bytes,
/// and a lock name of 20-22 bytes (`lock:resource:00000001`) then cost an allocation of its own,
/// +33 bytes a key; 32 holds 27.
///
/// Beside the clock, as in the header of Redis's object, how the string value is encoded when
/// its content does not say (`StrEnc`). It lives in the inline length's top two bits (a
/// length is at most 27) and in a byte of the heap form's padding, so the entry stays 80
/// bytes and stores cost nothing more.
#[derive(Clone)]
pub enum Key {
    Inline {
        lru: [u8; 3],
        /// The length, and the `StrEnc` in the top two bits.
        len: u8,
        bytes: [u8; INLINE],
    },
    Heap {
        lru: [u8; 3],
        enc: StrEnc,
        bytes: Box<[u8]>,
    },
}

/// How a string value is encoded in Redis where its content does not decide it: a string
/// stored whole is `int`, `embstr` or `raw` by its content (tryObjectEncoding), but one
/// written in place (APPEND, SETRANGE, SETBIT, BITFIELD, BITOP: dbUnshareStringValue) is
/// `raw`, and INCRBYFLOAT's result is created `embstr` even when it reads as an integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum StrEnc {
    ByContent = 0,
    Raw = 1,
    Embstr = 2,
}

/// Where `Key::Inline` keeps the `StrEnc` in its length byte.
const ENC_SHIFT: u8 = 6;
const LEN_MASK: u8 = (1 << ENC_SHIFT) - 1;
const _: () = assert!(INLINE <= LEN_MASK as usize);

impl Key {
    pub fn new(key: &[u8]) -> Key {
        if key.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..key.len()].copy_from_slice(key);
            Key::Inline {
                lru: [0; 3],
                len: key.len() as u8,
                bytes,
            }
        } else {
            Key::Heap {
                lru: [0; 3],
                enc: StrEnc::ByContent,
                bytes: key.into(),
            }
        }
    }

    /// The LRU clock of the last access (24 bits).
    #[inline]
    pub fn lru(&self) -> u32 {
        let (Key::Inline { lru, .. } | Key::Heap { lru, .. }) = self;
        u32::from_le_bytes([lru[0], lru[1], lru[2], 0])
    }

    #[inline]
    pub fn set_lru(&mut self, clock: u32) {
        let b = clock.to_le_bytes();
        let (Key::Inline { lru, .. } | Key::Heap { lru, .. }) = self;
        *lru = [b[0], b[1], b[2]];
    }

    /// How the key's string value is encoded where its content does not decide it.
    #[inline]
    pub fn str_enc(&self) -> StrEnc {
        match self {
            Key::Inline { len, .. } => match len >> ENC_SHIFT {
                1 => StrEnc::Raw,
                2 => StrEnc::Embstr,
                _ => StrEnc::ByContent,
            },
            Key::Heap { enc, .. } => *enc,
        }
    }

    #[inline]
    pub fn set_str_enc(&mut self, to: StrEnc) {
        match self {
            Key::Inline { len, .. } => *len = (*len & LEN_MASK) | ((to as u8) << ENC_SHIFT),
            Key::Heap { enc, .. } => *enc = to,
        }
    }
}

impl AsRef<[u8]> for Key {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes, .. } => &bytes[..(*len & LEN_MASK) as usize],
            Key::Heap { bytes, .. } => bytes,
        }
    }
}

impl std::ops::Deref for Key {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_ref()
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_ref().fmt(f)
    }
}

/// The index's largest load before it grows (linear probing stays near one probe below it).
const MAX_LOAD_NUM: usize = 7;
const MAX_LOAD_DEN: usize = 10;
/// Old slots moved to the new table per insert or removal while growing. Growth must end before
/// the new table (twice the old one) reaches its own limit: 0.7·C more inserts, against C old
/// slots to move, so anything above 1.43 keeps up; more finishes sooner and frees the old table.
const MIGRATE_STEP: usize = 16;

/// Below this many keys the map stays in the core's own caches and `prefetch` (a second hash
/// and probe per key) costs more than it saves. In-process (`prefetch_pays`, ns per lookup
/// without / with: 10 k keys 24-31 / 35-54, 100 k 53-104 / 48-62, 2 M 114-133 / 53) it only
/// paid from ~64 K keys, but in the server the kernel's network path and the reply buffers
/// share those caches: pipelined GET over 10 k keys (index, 72-byte entries and values, ~1.5
/// MB, more than the 1 MB L2) cost 0.90-1.03 us of server CPU per request with it against
/// 1.09-1.16 without (pinned, alternated, 7 rounds).
const PREFETCH_FROM: usize = 8 * 1024;

/// A key's hash as the index uses it: 32 bits stored in the slot, whose low bits also choose
/// the slot where the search starts.
#[derive(Clone, Copy)]
pub struct Hashed {
    tag: u32,
}

/// Whether two keys are equal, without a libc call for the short keys locks use: two pairs of
/// overlapping word loads cover 8 to 32 bytes.
#[inline]
fn same_key(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| u64::from_ne_bytes(s[at..at + 8].try_into().unwrap_or([0; 8]));
    match n {
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        17..=32 => {
            word(a, 0) == word(b, 0)
                && word(a, 8) == word(b, 8)
                && word(a, n - 16) == word(b, n - 16)
                && word(a, n - 8) == word(b, n - 8)
        }
        _ => a == b,
    }
}

/// A slot: `tag << 32 | (index + 1)`; 0 is empty.
#[inline]
fn slot(tag: u32, idx: usize) -> u64 {
    ((tag as u64) << 32) | (idx as u64 + 1)
}

#[inline]
fn slot_tag(s: u64) -> u32 {
    (s >> 32) as u32
}

#[inline]
fn slot_idx(s: u64) -> usize {
    (s as u32) as usize - 1
}

/// An open-addressing table with linear probing. Never full (the load limit), so every probe
/// run ends at an empty slot.
#[derive(Default)]
struct Table {
    slots: Box<[u64]>,
    len: usize,
}

impl Table {
    fn with_slots(n: usize) -> Table {
        debug_assert!(n.is_power_of_two());
        Table {
            // alloc_zeroed: fresh pages from the OS are zero already, so this is not a memset.
            slots: vec![0u64; n].into_boxed_slice(),
            len: 0,
        }
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    /// The position of the slot with `tag` for which `eq` holds of its entry index.
    #[inline]
    fn find(&self, tag: u32, mut eq: impl FnMut(usize) -> bool) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mask = self.mask();
        let mut i = tag as usize & mask;
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if slot_tag(s) == tag && eq(slot_idx(s)) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds a slot (the caller keeps the load under the limit).
    #[inline]
    fn insert(&mut self, s: u64) {
        let mask = self.mask();
        let mut i = slot_tag(s) as usize & mask;
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = s;
        self.len += 1;
    }

    /// Empties the slot at `pos`, moving later slots of its probe run back so that every run
    /// still ends at the first empty slot after its start (no tombstones to skip or clean).
    fn remove_at(&mut self, pos: usize) {
        let mask = self.mask();
        let mut hole = pos;
        let mut j = (pos + 1) & mask;
        loop {
            let s = self.slots[j];
            if s == 0 {
                break;
            }
            let home = slot_tag(s) as usize & mask;
            // The slot at j may fill the hole if the hole lies between its home and j.
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = s;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole] = 0;
        self.len -= 1;
    }
}

/// The table being emptied into the current one while the index grows.
struct Growing {
    old: Table,
    /// Next old slot to move. Always at an empty slot or at the start of a probe run, so every
    /// run not yet moved is intact and lookups in `old` stay correct.
    pos: usize,
    /// Old slots not yet visited.
    left: usize,
}

/// An entry: the key first, so that a lookup's comparison and the start of the value are in the
/// entry's first cache line for most alignments of the 80-byte stride.
#[repr(C)]
struct Pair<K, V> {
    key: K,
    value: V,
}

pub struct KeyMap<K, V> {
    /// Every chunk but the last holds exactly `CHUNK` entries. The first grows by doubling up
    /// to `CHUNK` (a database of a few keys holds a few slots); the next ones are allocated
    /// whole, untouched until filled.
    chunks: Vec<Vec<Pair<K, V>>>,
    /// The last full-size chunk emptied by removals, kept so that a size going back and forth
    /// across a chunk boundary does not allocate each time.
    spare: Option<Vec<Pair<K, V>>>,
    len: usize,
    index: Table,
    growing: Option<Growing>,
    hasher: ahash::RandomState,
    /// The entry the last lookup found, and the address of the key bytes it was asked with.
    /// Commands look one key up several times with the same argument (SET: the NX/GET check,
    /// then the store), and comparing one key costs a fraction of hashing and probing again.
    /// The address only filters (a lookup with other bytes costs two comparisons, not a key
    /// comparison); a hit is always checked against the entry's key, so an address reused for
    /// other bytes or an index made stale by a change is just a miss.
    last: Cell<(usize, usize)>,
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
            index: Table::default(),
            growing: None,
            hasher: ahash::RandomState::new(),
            last: Cell::new((usize::MAX, 0)),
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

    /// Bytes the map spends beyond its entries' contents (Redis's dict overhead, which INFO
    /// counts in `used_memory_overhead`): the index tables, and entry slots allocated but unused.
    pub fn overhead_bytes(&self) -> usize {
        let slots = self.index.slots.len() + self.growing.as_ref().map_or(0, |g| g.old.slots.len());
        let capacity: usize = self.chunks.iter().map(Vec::capacity).sum::<usize>()
            + self.spare.as_ref().map_or(0, Vec::capacity);
        slots * std::mem::size_of::<u64>()
            + (capacity - self.len.min(capacity)) * std::mem::size_of::<Pair<K, V>>()
    }

    #[inline]
    pub fn hash(&self, key: &[u8]) -> Hashed {
        // The high half: ahash's fallback mixes its last multiply into the high bits best.
        Hashed {
            tag: (self.hasher.hash_one(key) >> 32) as u32,
        }
    }

    #[inline]
    fn at(&self, idx: usize) -> &Pair<K, V> {
        &self.chunks[idx / CHUNK][idx % CHUNK]
    }

    #[inline]
    fn at_mut(&mut self, idx: usize) -> &mut Pair<K, V> {
        &mut self.chunks[idx / CHUNK][idx % CHUNK]
    }

    /// The key and value at `idx` (below `len`).
    pub fn get_index(&self, idx: usize) -> Option<(&K, &V)> {
        (idx < self.len).then(|| {
            let p = self.at(idx);
            (&p.key, &p.value)
        })
    }

    pub fn value(&self, idx: usize) -> &V {
        &self.at(idx).value
    }

    pub fn value_mut(&mut self, idx: usize) -> &mut V {
        &mut self.at_mut(idx).value
    }

    /// The stored key at `idx`, for what is kept beside its bytes (its access clock); its
    /// bytes must not change (the index hashed them).
    pub fn key_mut(&mut self, idx: usize) -> &mut K {
        &mut self.at_mut(idx).key
    }

    /// The index of `key`. An empty map answers without hashing, as Redis's `dictFind` does:
    /// a pipelined DEL or GET of keys that are gone costs the hash otherwise.
    #[inline]
    pub fn index_of(&self, key: &[u8]) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        self.lookup(key).ok()
    }

    /// The index of `key`, or its hash for `insert_new` when it is not in the map.
    #[inline]
    pub fn lookup(&self, key: &[u8]) -> Result<usize, Hashed> {
        let (last, addr) = self.last.get();
        if addr == key.as_ptr() as usize
            && last < self.len
            && same_key(self.at(last).key.as_ref(), key)
        {
            return Ok(last);
        }
        let h = self.hash(key);
        match self.find(h, key) {
            Some(idx) => {
                self.last.set((idx, key.as_ptr() as usize));
                Ok(idx)
            }
            None => Err(h),
        }
    }

    #[inline]
    pub fn find(&self, h: Hashed, key: &[u8]) -> Option<usize> {
        let eq = |idx: usize| same_key(self.at(idx).key.as_ref(), key);
        if let Some(pos) = self.index.find(h.tag, eq) {
            return Some(slot_idx(self.index.slots[pos]));
        }
        let g = self.growing.as_ref()?;
        g.old.find(h.tag, eq).map(|pos| slot_idx(g.old.slots[pos]))
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
            .push(Pair { key, value });
        self.len += 1;
        self.make_room();
        self.index.insert(slot(h.tag, idx));
        idx
    }

    /// Ensures the current table can take one more slot under the load limit, starting a
    /// growth (or, if one is somehow still under way, finishing it first).
    fn make_room(&mut self) {
        self.migrate(MIGRATE_STEP);
        let cap = self.index.slots.len();
        if (self.index.len + 1) * MAX_LOAD_DEN <= cap * MAX_LOAD_NUM {
            return;
        }
        if self.growing.is_some() {
            self.migrate(usize::MAX);
        }
        if cap < 64 {
            // Small tables are rebuilt at once: a few hundred bytes.
            let mut bigger = Table::with_slots((cap * 2).max(8));
            for &s in self.index.slots.iter().filter(|&&s| s != 0) {
                bigger.insert(s);
            }
            self.index = bigger;
            return;
        }
        let old = std::mem::replace(&mut self.index, Table::with_slots(cap * 2));
        // Start at an empty slot (one exists: the load limit), so no probe run is split.
        let pos = old.slots.iter().position(|&s| s == 0).unwrap_or(0);
        self.growing = Some(Growing {
            old,
            pos,
            left: cap,
        });
    }

    /// Moves at least `budget` old slots (visited, empty or not) into the current table, and
    /// then on to the end of the probe run under way.
    fn migrate(&mut self, mut budget: usize) {
        let Some(g) = self.growing.as_mut() else {
            return;
        };
        let mask = g.old.mask();
        while g.left > 0 {
            let s = g.old.slots[g.pos];
            if s == 0 {
                if budget == 0 || g.old.len == 0 {
                    break;
                }
            } else {
                self.index.insert(s);
                g.old.slots[g.pos] = 0;
                g.old.len -= 1;
            }
            budget = budget.saturating_sub(1);
            g.pos = (g.pos + 1) & mask;
            g.left -= 1;
        }
        if g.left == 0 || g.old.len == 0 {
            self.growing = None;
        }
    }

    /// The table and position of the slot that points at entry `idx`.
    fn slot_of(&self, idx: usize) -> Option<(bool, usize)> {
        let h = self.hash(self.at(idx).key.as_ref());
        if let Some(pos) = self.index.find(h.tag, |i| i == idx) {
            return Some((false, pos));
        }
        let g = self.growing.as_ref()?;
        g.old.find(h.tag, |i| i == idx).map(|pos| (true, pos))
    }

    fn table_mut(&mut self, old: bool) -> &mut Table {
        match (old, self.growing.as_mut()) {
            (true, Some(g)) => &mut g.old,
            _ => &mut self.index,
        }
    }

    /// Removes the entry at `idx`; the last entry takes its index.
    pub fn swap_remove(&mut self, idx: usize) -> Option<(K, V)> {
        if idx >= self.len {
            return None;
        }
        if let Some((old, pos)) = self.slot_of(idx) {
            self.table_mut(old).remove_at(pos);
        }
        let last = self.len - 1;
        if idx != last {
            if let Some((old, pos)) = self.slot_of(last) {
                let t = self.table_mut(old);
                t.slots[pos] = slot(slot_tag(t.slots[pos]), idx);
            }
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
        self.migrate(MIGRATE_STEP);
        Some((removed.key, removed.value))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.chunks.iter().flatten().map(|p| (&p.key, &p.value))
    }

    /// Starts loading what looking up `keys` will read, for a batch of requests about to run
    /// (pipelined clients send 16 or more at once): first the index line of every key, then,
    /// reading those, the entry each one most likely points at, then, reading those, the lines
    /// of the bytes `value_bytes` names in each entry's value (a string's bytes, a small hash's
    /// packed fields; empty for none), up to `VALUE_PREFETCH` × 64 bytes of them. The misses of
    /// the whole batch then overlap instead of coming one after another, three or more per
    /// request. (Without the third pass a pipelined GET over 10 k keys spent 8 % of the
    /// server's CPU on the `lock incq` of the value's reference count: the first touch of its
    /// line. With only the first line, a 36-byte value that crosses into the next line missed
    /// there instead: 78 % of the reply copy's samples, 1.5-2.5 % of the server's CPU.)
    pub fn prefetch<'a>(
        &self,
        keys: impl Iterator<Item = &'a [u8]>,
        value_bytes: impl Fn(&V) -> &[u8],
    ) {
        const BATCH: usize = 32;
        if self.len < PREFETCH_FROM || self.index.slots.is_empty() {
            return;
        }
        let mut tags = [0u32; BATCH];
        let mut n = 0;
        for key in keys.take(BATCH) {
            let tag = self.hash(key).tag;
            tags[n] = tag;
            n += 1;
            prefetch_line(&self.index.slots[tag as usize & self.index.mask()]);
        }
        let mut found = [0usize; BATCH];
        let mut entries = 0;
        for &tag in &tags[..n] {
            // The first slot with a matching tag: a key that moved on in its probe run or is
            // still in the old table is simply not prefetched.
            let mask = self.index.mask();
            let mut i = tag as usize & mask;
            loop {
                let s = self.index.slots[i];
                if s == 0 {
                    break;
                }
                if slot_tag(s) == tag {
                    let idx = slot_idx(s);
                    if idx < self.len {
                        let p: *const Pair<K, V> = self.at(idx);
                        prefetch_line(p);
                        prefetch_line(p.wrapping_byte_add(64));
                        found[entries] = idx;
                        entries += 1;
                    }
                    break;
                }
                i = (i + 1) & mask;
            }
        }
        for &idx in &found[..entries] {
            let bytes = value_bytes(&self.at(idx).value);
            let start = bytes.as_ptr() as usize;
            let end = start.wrapping_add(bytes.len().min(VALUE_PREFETCH * LINE));
            let mut line = start & !(LINE - 1);
            while line < end {
                prefetch_line(line as *const u8);
                line += LINE;
            }
        }
    }

    /// Starts loading the index lines that point at the last `n` entries, for a batch that
    /// removes up to `n` keys: `swap_remove` moves the last entry into each hole and must find
    /// and rewrite the slot that points at it, a cache miss of its own in a large map after the
    /// removed key's (the entries at the end are read in order and stay cached; their slots are
    /// anywhere in the index).
    pub fn prefetch_tail(&self, n: usize) {
        if self.len < PREFETCH_FROM || self.index.slots.is_empty() {
            return;
        }
        let mask = self.index.mask();
        for idx in (self.len.saturating_sub(n.min(32))..self.len).rev() {
            let tag = self.hash(self.at(idx).key.as_ref()).tag;
            prefetch_line(&self.index.slots[tag as usize & mask]);
        }
    }
}

/// A cache line's size on the machines we run on.
const LINE: usize = 64;

/// How much of a value `prefetch` loads, in lines' worth of bytes from its start (the lines they
/// touch, 4 or 5): a lock owner or a small hash takes one or two; the rest of a large value is
/// read later, in its copy.
const VALUE_PREFETCH: usize = 4;

/// Asks the CPU to start loading the cache line at `p`.
#[inline]
fn prefetch_line<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults and has no effect on memory, whatever the
    // address (the one past an entry's end included).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    type Map = KeyMap<Key, u64>;

    fn key(i: u64) -> Key {
        // Every fifth key is longer than `INLINE`, so both representations are exercised.
        if i % 5 == 0 {
            Key::new(format!("a-long-key-stored-on-the-heap:{i}").as_bytes())
        } else {
            Key::new(format!("k{i}").as_bytes())
        }
    }

    /// The prefetches are hints, but they index the map: any count, an empty map, a map
    /// growing, or one just below the size they start at must not reach past its end.
    #[test]
    fn prefetches_stay_inside_the_map() {
        let mut m = Map::default();
        m.prefetch_tail(3);
        for i in 0..(PREFETCH_FROM as u64 + 100) {
            let k = key(i);
            let h = m.hash(&k);
            m.insert_new(h, k, i);
            if i % 997 == 0 || m.growing.is_some() && i % 31 == 0 {
                for n in [0, 1, 5, 32, 1000] {
                    m.prefetch_tail(n);
                }
                let probe = [key(i), key(i + 1)];
                m.prefetch(probe.iter().map(|k| k.as_ref()), |v| {
                    // SAFETY: the value's own 8 bytes, borrowed from the map for the call.
                    unsafe { std::slice::from_raw_parts(v as *const u64 as *const u8, 8) }
                });
            }
        }
        while !m.is_empty() {
            m.prefetch_tail(usize::MAX);
            m.swap_remove(m.len() - 1);
        }
    }

    #[test]
    fn keys_fit_in_32_bytes_and_entries_in_80() {
        assert_eq!(std::mem::size_of::<Key>(), 32);
        // 80 bytes: a lock key's entry spans two adjacent lines, which the prefetcher pairs.
        assert_eq!(std::mem::size_of::<Pair<Key, crate::store::Entry>>(), 80);
        let short = Key::new(&[7; INLINE]);
        assert!(matches!(short, Key::Inline { .. }));
        assert_eq!(&*short, &[7; INLINE][..]);
        let mut long = Key::new(&[7; INLINE + 1]);
        assert!(matches!(long, Key::Heap { .. }));
        assert_eq!(&*long, &[7; INLINE + 1][..]);
        assert_eq!(&*Key::new(b""), b"");
        // The access clock sits beside the bytes without touching them.
        let mut short = short;
        for k in [&mut short, &mut long] {
            let before = k.to_vec();
            k.set_lru(0x00ab_cdef);
            assert_eq!(k.lru(), 0x00ab_cdef);
            k.set_lru(0xffff_ffff);
            assert_eq!(k.lru(), 0x00ff_ffff);
            assert_eq!(k.to_vec(), before);
            // So does the string encoding, and neither disturbs the other.
            for enc in [StrEnc::Raw, StrEnc::Embstr, StrEnc::ByContent, StrEnc::Raw] {
                k.set_str_enc(enc);
                assert_eq!(k.str_enc(), enc);
                assert_eq!(k.to_vec(), before);
                assert_eq!(k.lru(), 0x00ff_ffff);
            }
        }
    }

    #[test]
    fn same_key_sees_every_differing_byte_at_every_length() {
        for n in 0..70usize {
            let a: Vec<u8> = (0..n as u8).collect();
            assert!(same_key(&a, &a.clone()));
            for at in 0..n {
                let mut b = a.clone();
                b[at] ^= 0x80;
                assert!(!same_key(&a, &b), "len {n}, byte {at}");
            }
            assert!(!same_key(&a, &a[..n.saturating_sub(1)]) || n == 0);
        }
    }

    /// Every slot of both tables points at an entry whose key hashes to the slot's tag and
    /// can be found from its home, and every entry has exactly one slot.
    fn check_index(m: &Map) {
        let mut seen = vec![false; m.len()];
        let tables = std::iter::once(&m.index).chain(m.growing.as_ref().map(|g| &g.old));
        for t in tables {
            assert_eq!(t.slots.iter().filter(|&&s| s != 0).count(), t.len);
            for &s in t.slots.iter().filter(|&&s| s != 0) {
                let idx = slot_idx(s);
                assert!(
                    !std::mem::replace(&mut seen[idx], true),
                    "two slots for {idx}"
                );
                let (k, _) = m.get_index(idx).expect("slot points below len");
                assert_eq!(m.hash(k).tag, slot_tag(s));
                assert!(t.find(slot_tag(s), |i| i == idx).is_some(), "unreachable");
            }
        }
        assert!(seen.into_iter().all(|s| s), "an entry without a slot");
    }

    #[test]
    fn agrees_with_a_plain_map_across_chunks_and_growth() {
        let mut m = Map::default();
        let mut model: std::collections::HashMap<Vec<u8>, u64> = Default::default();
        let mut rng = fastrand::Rng::with_seed(11);
        let mut grew_while_busy = 0;
        // More entries than a chunk, so removals move entries across chunk boundaries; phases
        // that mostly insert and mostly remove, so the index grows while keys come and go.
        for step in 0..300_000u64 {
            let phase = (step / 50_000) % 3;
            let k = key(rng.u64(..60_000));
            let h = m.hash(&k);
            let found = m.find(h, &k);
            // The remembered entry must never answer for another key, nor miss a present one,
            // even asked twice from one buffer whose bytes changed in between.
            assert_eq!(m.lookup(&k).ok(), found);
            assert_eq!(m.index_of(&k), found);
            let mut buf = k.to_vec();
            assert_eq!(m.index_of(&buf), found);
            buf[0] ^= 1;
            assert_eq!(m.index_of(&buf), m.find(m.hash(&buf), &buf));
            match found {
                Some(idx) if phase == 2 || rng.u8(..4) == 0 => {
                    let (rk, rv) = m.swap_remove(idx).expect("found");
                    assert_eq!(&*rk, &*k);
                    assert_eq!(model.remove(&*k), Some(rv));
                }
                Some(idx) => {
                    *m.value_mut(idx) = step;
                    model.insert(k.to_vec(), step);
                }
                None => {
                    assert!(!model.contains_key(&*k));
                    if phase != 2 {
                        let idx = m.insert_new(h, k.clone(), step);
                        assert_eq!(m.get_index(idx).map(|(_, v)| *v), Some(step));
                        model.insert(k.to_vec(), step);
                    }
                }
            }
            assert_eq!(m.len(), model.len());
            if step % 1000 == 0 {
                // A hint only: it must never disturb the map, during growth included.
                m.prefetch([&*k, b"absent".as_slice()].into_iter(), |_| &[]);
            }
            if m.growing.is_some() {
                grew_while_busy += 1;
                if grew_while_busy % 5000 == 1 {
                    check_index(&m);
                }
            }
            if step % 20_000 == 0 {
                check_index(&m);
            }
        }
        assert!(grew_while_busy > 1000, "the test must run during growth");
        assert!(m.len() > CHUNK, "the test must span chunks");
        check_index(&m);
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
        assert_eq!(m.index.len, 0);
        assert!(m.growing.is_none());
        check_index(&m);
    }

    #[test]
    fn probes_stay_short_as_the_map_grows() {
        // The index's promise: about one slot read per lookup, at any size.
        let mut m = Map::default();
        for i in 0..200_000u64 {
            let k = Key::new(format!("lock:{i:012}").as_bytes());
            let h = m.hash(&k);
            assert!(m.find(h, &k).is_none());
            m.insert_new(h, k, i);
        }
        let t = &m.index;
        let mask = t.mask();
        let mut total = 0;
        for (pos, &s) in t.slots.iter().enumerate().filter(|(_, &s)| s != 0) {
            total += ((pos.wrapping_sub(slot_tag(s) as usize)) & mask) + 1;
        }
        let avg = total as f64 / t.len as f64;
        assert!(avg < 2.5, "average probe length {avg}");
    }

    /// `cargo test --release --lib prefetch_pays -- --ignored --nocapture`: time per lookup of
    /// 16-key batches in a 2 M-key map (or `PREFETCH_KEYS`), with and without `prefetch` first.
    #[test]
    #[ignore]
    fn prefetch_pays() {
        let n: u64 = std::env::var("PREFETCH_KEYS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2_000_000);
        let mut m = Map::default();
        for i in 0..n {
            let k = Key::new(format!("lock:{i:012}").as_bytes());
            let h = m.hash(&k);
            m.insert_new(h, k, i);
        }
        let mut rng = fastrand::Rng::with_seed(3);
        let batches: Vec<Vec<Vec<u8>>> = (0..50_000)
            .map(|_| {
                (0..16)
                    .map(|_| format!("lock:{:012}", rng.u64(..n)).into_bytes())
                    .collect()
            })
            .collect();
        for round in 0..4 {
            for with in [round % 2 == 0, round % 2 != 0] {
                if with && m.len() < PREFETCH_FROM {
                    println!("below PREFETCH_FROM: prefetch is a no-op");
                }
                let t = std::time::Instant::now();
                let mut sum = 0u64;
                for b in &batches {
                    if with {
                        m.prefetch(b.iter().map(|k| k.as_slice()), |_| &[]);
                    }
                    for k in b {
                        sum += m.index_of(k).map_or(0, |i| *m.value(i));
                    }
                }
                let ns = t.elapsed().as_nanos() as f64 / (batches.len() * 16) as f64;
                println!("prefetch {with:5}: {ns:.1} ns per lookup ({sum})");
            }
        }
    }

    /// `cargo test --release --lib worst_insert -- --ignored --nocapture`: the slowest single
    /// insert while a map grows to 10 M keys (or `GROWTH_KEYS`), the index's growths included.
    #[test]
    #[ignore]
    fn worst_insert_while_growing() {
        let n: u64 = std::env::var("GROWTH_KEYS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000_000);
        // The server's allocator settings (immediate purge, no transparent huge pages).
        crate::alloc::configure();
        let mut m = Map::default();
        let (mut worst, mut worst_at, mut total) = (std::time::Duration::ZERO, 0, 0.0);
        // On a shared machine most slow inserts are preemptions (a page fault is a chance to be
        // descheduled for a 4 ms tick); compare the count with the machine quiet.
        let mut slow = 0;
        for i in 0..n {
            let k = Key::new(format!("lock:{i:012}").as_bytes());
            let t = std::time::Instant::now();
            let h = m.hash(&k);
            m.insert_new(h, k, i);
            let d = t.elapsed();
            total += d.as_secs_f64();
            if d > worst {
                (worst, worst_at) = (d, i);
            }
            if d > std::time::Duration::from_millis(1) {
                slow += 1;
                if std::env::var_os("GROWTH_VERBOSE").is_some() {
                    println!("insert {i}: {d:?}, index {} slots", m.index.slots.len());
                }
            }
        }
        println!(
            "{n} inserts: mean {:.0} ns, worst {worst:?} at key {worst_at}, {slow} over 1 ms",
            total * 1e9 / n as f64
        );
    }
}
