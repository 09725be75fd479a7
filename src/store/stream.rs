//! Streams (Redis 7.0's t_stream.c data layer): entries ordered by ID in nodes of up to
//! `stream-node-max-entries` entries, each node one compact byte buffer (Redis's listpack
//! layout, delta-encoded against the node's first ID, with the first entry's field names kept
//! once per node), plus consumer groups with their pending entries lists.
//!
//! Node boundaries follow Redis's exactly (a new node starts when the tail node's listpack
//! would reach `stream-node-max-bytes` or holds `stream-node-max-entries` entries), because
//! approximate trimming (`MAXLEN ~`, `MINID ~`) removes whole nodes and its result is visible:
//! each node keeps the byte size Redis's listpack would have, computed, not stored.

use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};

/// A stream entry ID: milliseconds and sequence, ordered as Redis compares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> Self {
        StreamId { ms, seq }
    }

    pub fn is_zero(&self) -> bool {
        self.ms == 0 && self.seq == 0
    }

    /// The successor (Redis's streamIncrID); None past the last possible ID.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId::new(self.ms + 1, 0))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The predecessor (Redis's streamDecrID); None before 0-0.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId::new(self.ms - 1, u64::MAX))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    /// `<ms>-<seq>`, as every reply prints an ID.
    pub fn to_bytes(&self) -> Bytes {
        let mut v = Vec::with_capacity(41);
        v.extend_from_slice(itoa::Buffer::new().format(self.ms).as_bytes());
        v.push(b'-');
        v.extend_from_slice(itoa::Buffer::new().format(self.seq).as_bytes());
        Bytes::from(v)
    }
}

/// Redis's STREAM_LISTPACK_MAX_SIZE: the cap on a node's bytes and on one entry's payload.
pub const LISTPACK_MAX_SIZE: u64 = 1 << 30;

/// A delivered, not yet acknowledged entry of a group.
#[derive(Debug, Clone)]
pub struct Nack {
    /// Unix ms of the last delivery.
    pub delivery_time: u64,
    pub delivery_count: u64,
    pub consumer: Bytes,
}

#[derive(Debug, Clone, Default)]
pub struct Consumer {
    pub seen_time: u64,
    pub pel: BTreeSet<StreamId>,
}

/// Redis's SCG_INVALID_ENTRIES_READ.
pub const INVALID_ENTRIES_READ: i64 = -1;

#[derive(Debug, Clone)]
pub struct Group {
    pub last_id: StreamId,
    /// -1 when unknown.
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Bytes, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Self {
        Group {
            last_id,
            entries_read,
            pel: BTreeMap::new(),
            consumers: BTreeMap::new(),
        }
    }

    /// Drops a pending entry from the group's and its consumer's lists.
    pub fn remove_nack(&mut self, id: StreamId) -> Option<Nack> {
        let n = self.pel.remove(&id)?;
        if let Some(c) = self.consumers.get_mut(&n.consumer) {
            c.pel.remove(&id);
        }
        Some(n)
    }

    /// Creates `name` (seen now) if missing; true if it was created.
    pub fn create_consumer(&mut self, name: &[u8], now: u64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        self.consumers.insert(
            super::value::own(name),
            Consumer {
                seen_time: now,
                pel: BTreeSet::new(),
            },
        );
        true
    }
}

const FLAG_DELETED: u8 = 1;
const FLAG_SAMEFIELDS: u8 = 2;

/// One node: its entries in one buffer. Layout: the master fields (varint count, then each
/// varint length + bytes), then per entry: flags byte, varint ms delta, zigzag varint seq
/// delta, [varint field count, fields when not SAMEFIELDS], then each [field,] value as varint
/// length + bytes.
#[derive(Debug, Clone)]
struct Node {
    data: Vec<u8>,
    /// Where the first entry starts.
    master_end: u32,
    live: u32,
    deleted: u32,
    /// Bytes of Redis's listpack for this node other than the header, the EOF byte and the
    /// live/deleted counters (their encoded size depends on their value).
    lp_rest: u64,
}

impl Node {
    fn lp_bytes(&self) -> u64 {
        7 + lp_int(self.live as i64) + lp_int(self.deleted as i64) + self.lp_rest
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(data: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = data[*at];
        *at += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return v;
        }
        shift += 7;
    }
}

fn get_slice<'a>(data: &'a [u8], at: &mut usize) -> &'a [u8] {
    let n = get_varint(data, at) as usize;
    let s = &data[*at..*at + n];
    *at += n;
    s
}

fn put_slice(out: &mut Vec<u8>, s: &[u8]) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// Size of a listpack element's back-length for an element of `l` bytes.
fn lp_backlen(l: u64) -> u64 {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Bytes of an integer element in a listpack (encoding, data and back-length).
fn lp_int(v: i64) -> u64 {
    let l = match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8388608..=8388607 => 4,
        -2147483648..=2147483647 => 5,
        _ => 9,
    };
    l + lp_backlen(l)
}

/// Bytes of a string element: listpack stores strings that read as integers as integers.
fn lp_str(s: &[u8]) -> u64 {
    if let Some(v) = lp_string_to_int(s) {
        return lp_int(v);
    }
    let n = s.len() as u64;
    let l = if n < 64 {
        1 + n
    } else if n < 4096 {
        2 + n
    } else {
        5 + n
    };
    l + lp_backlen(l)
}

/// Redis's lpStringToInt64 (string2ll's rules: no '+', no leading zeros, at most 20 chars).
fn lp_string_to_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() >= 21 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !(b'1'..=b'9').contains(&digits[0]) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    if neg {
        if v > (i64::MAX as u64) + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// One decoded entry header inside a node.
#[derive(Debug, Clone, Copy)]
struct RawEntry {
    /// Offset of the flags byte.
    at: usize,
    /// Offset of what follows the ID.
    body: usize,
    /// Offset after the whole entry.
    end: usize,
    flags: u8,
    id: StreamId,
    nfields: usize,
}

fn decode_entry(data: &[u8], at: usize, master: StreamId, master_fields: usize) -> RawEntry {
    let mut p = at;
    let flags = data[p];
    p += 1;
    let ms = master.ms.wrapping_add(get_varint(data, &mut p));
    let z = get_varint(data, &mut p);
    let sd = ((z >> 1) as i64) ^ -((z & 1) as i64);
    let seq = master.seq.wrapping_add(sd as u64);
    let body = p;
    let nfields;
    if flags & FLAG_SAMEFIELDS != 0 {
        nfields = master_fields;
        for _ in 0..nfields {
            get_slice(data, &mut p);
        }
    } else {
        nfields = get_varint(data, &mut p) as usize;
        for _ in 0..nfields * 2 {
            get_slice(data, &mut p);
        }
    }
    RawEntry {
        at,
        body,
        end: p,
        flags,
        id: StreamId::new(ms, seq),
        nfields,
    }
}

fn master_fields(data: &[u8]) -> (usize, usize) {
    let mut p = 0;
    let n = get_varint(data, &mut p) as usize;
    let start = p;
    for _ in 0..n {
        get_slice(data, &mut p);
    }
    let _ = start;
    (n, p)
}

/// An entry as read out of the stream: its ID and field/value pairs.
pub type Fields = Vec<(Bytes, Bytes)>;

fn entry_fields(data: &[u8], e: &RawEntry) -> Fields {
    let mut out = Vec::with_capacity(e.nfields);
    let mut p = e.body;
    if e.flags & FLAG_SAMEFIELDS != 0 {
        let mut mp = 0;
        get_varint(data, &mut mp);
        for _ in 0..e.nfields {
            let f = get_slice(data, &mut mp);
            let v = get_slice(data, &mut p);
            out.push((Bytes::copy_from_slice(f), Bytes::copy_from_slice(v)));
        }
    } else {
        get_varint(data, &mut p);
        for _ in 0..e.nfields {
            let f = get_slice(data, &mut p);
            let v = get_slice(data, &mut p);
            out.push((Bytes::copy_from_slice(f), Bytes::copy_from_slice(v)));
        }
    }
    out
}

/// Entries of one node in order (tombstones included).
fn node_entries(node: &Node, master: StreamId) -> impl Iterator<Item = RawEntry> + '_ {
    let (nf, _) = master_fields(&node.data);
    let mut at = node.master_end as usize;
    std::iter::from_fn(move || {
        if at >= node.data.len() {
            return None;
        }
        let e = decode_entry(&node.data, at, master, nf);
        at = e.end;
        Some(e)
    })
}

/// How XADD / XTRIM trim.
#[derive(Debug, Clone, Copy)]
pub enum Trim {
    MaxLen(u64),
    MinId(StreamId),
}

/// What changed in a stream since the log last wrote it, while that is only appends and
/// head trims (a producer's XADD, with or without MAXLEN/MINID): then the log writes those
/// (persist/emit.rs) instead of the whole stream, whose size a write would otherwise cost.
/// Anything else (XDEL, groups, XSETID...) breaks it and the log writes the whole state.
#[derive(Debug, Clone, Default)]
pub struct Journal {
    /// The log's token for the state the ops start from (0: none): valid only while the log's
    /// last write of this key carried the same token (a moved or replaced value never does).
    pub base: u64,
    pub ops: Vec<JournalOp>,
    /// Groups changed since (consumer side: XREADGROUP, XACK, XCLAIM...): the log writes
    /// their final state for what was touched.
    pub groups: BTreeMap<Bytes, GroupTouch>,
    pub broken: bool,
}

/// What changed in one group since the log last wrote the stream.
#[derive(Debug, Clone, Default)]
pub struct GroupTouch {
    /// The group did not exist then: the log writes it whole.
    pub created: bool,
    pub ids: BTreeSet<StreamId>,
    pub consumers: BTreeSet<Bytes>,
}

/// Pending-entry changes a journal keeps before giving up.
const JOURNAL_MAX_TOUCHED: usize = 1024;

#[derive(Debug, Clone)]
pub enum JournalOp {
    Add(StreamId, Vec<Bytes>),
    /// Entries before the first live one are gone (None: all of them).
    Trim(Option<StreamId>),
    /// XDEL of these (each was live).
    Del(Vec<StreamId>),
}

/// Ops kept before a journal gives up (a unit appending more writes the whole state).
const JOURNAL_MAX_OPS: usize = 64;

impl Journal {
    pub fn break_off(&mut self) {
        self.broken = true;
        self.ops = Vec::new();
        self.groups = BTreeMap::new();
    }

    /// The record of `group` (which `existed` before this change), None once broken.
    pub fn group(&mut self, group: &[u8], existed: bool) -> Option<&mut GroupTouch> {
        if self.broken {
            return None;
        }
        let touched: usize = self
            .groups
            .values()
            .map(|g| g.ids.len() + g.consumers.len())
            .sum();
        if touched >= JOURNAL_MAX_TOUCHED {
            self.break_off();
            return None;
        }
        if !self.groups.contains_key(group) {
            self.groups.insert(
                Bytes::copy_from_slice(group),
                GroupTouch {
                    created: !existed,
                    ..Default::default()
                },
            );
        }
        self.groups.get_mut(group)
    }

    fn push(&mut self, op: JournalOp) {
        if self.broken {
            return;
        }
        if self.ops.len() >= JOURNAL_MAX_OPS {
            self.break_off();
            return;
        }
        self.ops.push(op);
    }

    pub fn added(&mut self, id: StreamId, fields: Vec<Bytes>) {
        self.push(JournalOp::Add(id, fields));
    }

    pub fn deleted(&mut self, ids: Vec<StreamId>) {
        self.push(JournalOp::Del(ids));
    }

    pub fn trimmed(&mut self, first: Option<StreamId>) {
        self.push(JournalOp::Trim(first));
    }

    /// The log wrote this stream with `token`: later ops start from there.
    pub fn settle(&mut self, token: u64) {
        self.base = token;
        self.ops.clear();
        self.groups.clear();
        self.broken = false;
    }

    /// Whether the ops turn the state the log wrote with `token` into the current one.
    pub fn applies_to(&self, token: u64) -> bool {
        !self.broken && self.base != 0 && self.base == token
    }
}

#[derive(Debug, Clone, Default)]
pub struct Stream {
    nodes: BTreeMap<StreamId, Node>,
    pub length: u64,
    pub last_id: StreamId,
    pub first_id: StreamId,
    pub max_deleted: StreamId,
    pub entries_added: u64,
    pub groups: BTreeMap<Bytes, Group>,
    /// Not part of the stream's value: the log's bookkeeping.
    pub journal: Journal,
}

/// Why an append failed.
#[derive(Debug, PartialEq, Eq)]
pub enum AppendError {
    /// The ID is not greater than the last one (or the sequence would overflow).
    NotGreater,
    TooLarge,
}

impl Stream {
    pub fn new() -> Self {
        Stream::default()
    }

    /// Nodes (Redis's radix tree keys).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Appends an entry (Redis's streamAppendItem). `id`: None generates one from `now`;
    /// `seq_given` false takes the ms of `id` and generates the sequence.
    pub fn append(
        &mut self,
        fields: &[Bytes],
        id: Option<StreamId>,
        seq_given: bool,
        now: u64,
        node_max_bytes: u64,
        node_max_entries: u64,
    ) -> Result<StreamId, AppendError> {
        let id = match id {
            Some(id) if seq_given => id,
            Some(id) => {
                if self.last_id.ms == id.ms {
                    if self.last_id.seq == u64::MAX {
                        // Redis returns C_ERR here without setting errno, so XADD reports the
                        // size error.
                        return Err(AppendError::TooLarge);
                    }
                    StreamId::new(id.ms, self.last_id.seq + 1)
                } else {
                    id
                }
            }
            None => {
                if now > self.last_id.ms {
                    StreamId::new(now, 0)
                } else {
                    self.last_id.incr().unwrap_or(StreamId::MIN)
                }
            }
        };
        if id <= self.last_id {
            return Err(AppendError::NotGreater);
        }
        let total: u64 = fields.iter().map(|f| f.len() as u64).sum();
        if total > LISTPACK_MAX_SIZE {
            return Err(AppendError::TooLarge);
        }
        let numfields = fields.len() / 2;
        let max_bytes = if node_max_bytes == 0 || node_max_bytes > LISTPACK_MAX_SIZE {
            LISTPACK_MAX_SIZE
        } else {
            node_max_bytes
        };
        let mut new_node = true;
        if let Some((_, tail)) = self.nodes.iter_mut().next_back() {
            new_node = tail.lp_bytes() + total >= max_bytes
                || (node_max_entries != 0 && (tail.live + tail.deleted) as u64 >= node_max_entries);
            if new_node {
                tail.data.shrink_to_fit();
            }
        }
        if new_node {
            let mut data = Vec::with_capacity(64);
            put_varint(&mut data, numfields as u64);
            let mut lp_rest = lp_int(numfields as i64) + lp_int(0);
            for f in fields.iter().step_by(2) {
                put_slice(&mut data, f);
                lp_rest += lp_str(f);
            }
            let master_end = data.len() as u32;
            self.nodes.insert(
                id,
                Node {
                    data,
                    master_end,
                    live: 0,
                    deleted: 0,
                    lp_rest,
                },
            );
        }
        let Some((&master, node)) = self.nodes.iter_mut().next_back() else {
            return Err(AppendError::TooLarge);
        };
        let mut flags = 0u8;
        {
            let (nf, _) = master_fields(&node.data);
            if nf == numfields {
                let mut p = 0;
                get_varint(&node.data, &mut p);
                let same = fields
                    .iter()
                    .step_by(2)
                    .all(|f| get_slice(&node.data, &mut p) == &f[..]);
                if same {
                    flags |= FLAG_SAMEFIELDS;
                }
            }
        }
        let ms_delta = id.ms.wrapping_sub(master.ms);
        let seq_delta = id.seq.wrapping_sub(master.seq) as i64;
        let d = &mut node.data;
        d.push(flags);
        put_varint(d, ms_delta);
        put_varint(d, ((seq_delta << 1) ^ (seq_delta >> 63)) as u64);
        let mut lp = lp_int(flags as i64) + lp_int(ms_delta as i64) + lp_int(seq_delta);
        let mut lp_count = numfields as i64 + 3;
        if flags & FLAG_SAMEFIELDS == 0 {
            put_varint(d, numfields as u64);
            lp += lp_int(numfields as i64);
            lp_count += numfields as i64 + 1;
            for f in fields {
                put_slice(d, f);
                lp += lp_str(f);
            }
        } else {
            for v in fields.iter().skip(1).step_by(2) {
                put_slice(d, v);
                lp += lp_str(v);
            }
        }
        lp += lp_int(lp_count);
        node.lp_rest += lp;
        node.live += 1;
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
        Ok(id)
    }

    /// Live entries with `start <= id <= end`, forward or reversed, at most `count` (0: all),
    /// handed to `f` until it returns false.
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        mut f: impl FnMut(StreamId, Fields) -> bool,
    ) {
        if start > end {
            return;
        }
        if !rev {
            // The node holding `start` begins at or before it.
            let first = self
                .nodes
                .range(..=start)
                .next_back()
                .map(|(k, _)| *k)
                .unwrap_or(start);
            for (&master, node) in self.nodes.range(first..=end) {
                for e in node_entries(node, master) {
                    if e.id > end {
                        return;
                    }
                    if e.id < start || e.flags & FLAG_DELETED != 0 {
                        continue;
                    }
                    if !f(e.id, entry_fields(&node.data, &e)) {
                        return;
                    }
                }
            }
        } else {
            for (&master, node) in self.nodes.range(..=end).rev() {
                let entries: Vec<RawEntry> = node_entries(node, master).collect();
                for e in entries.iter().rev() {
                    if e.id < start {
                        return;
                    }
                    if e.id > end || e.flags & FLAG_DELETED != 0 {
                        continue;
                    }
                    if !f(e.id, entry_fields(&node.data, e)) {
                        return;
                    }
                }
            }
        }
    }

    /// The entry at `id`, if live.
    pub fn get(&self, id: StreamId) -> Option<Fields> {
        let mut out = None;
        self.range(id, id, false, |_, fields| {
            out = Some(fields);
            false
        });
        out
    }

    pub fn exists(&self, id: StreamId) -> bool {
        let (master, node) = match self.nodes.range(..=id).next_back() {
            Some((m, n)) => (*m, n),
            None => return false,
        };
        node_entries(node, master).any(|e| e.id == id && e.flags & FLAG_DELETED == 0)
    }

    /// The first or last live ID; None when empty.
    pub fn edge_id(&self, first: bool) -> Option<StreamId> {
        let mut out = None;
        self.range(StreamId::MIN, StreamId::MAX, !first, |id, _| {
            out = Some(id);
            false
        });
        out
    }

    /// Marks `id` deleted (Redis's streamDeleteItem); true if it was live. Keeps first_id and
    /// max_deleted as XDEL does.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&master, node)) = self.nodes.range_mut(..=id).next_back() else {
            return false;
        };
        let found = node_entries(node, master)
            .find(|e| e.id == id && e.flags & FLAG_DELETED == 0)
            .map(|e| e.at);
        let Some(at) = found else {
            return false;
        };
        if node.live == 1 {
            self.nodes.remove(&master);
        } else {
            node.data[at] |= FLAG_DELETED;
            node.live -= 1;
            node.deleted += 1;
        }
        self.length -= 1;
        true
    }

    /// Redis's streamTrim: removes entries from the head; returns how many. `limit` 0: none.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut deleted: u64 = 0;
        loop {
            if let Trim::MaxLen(max) = how {
                if self.length <= max {
                    break;
                }
            }
            let Some((&master, node)) = self.nodes.iter_mut().next() else {
                break;
            };
            let entries = node.live as u64;
            if limit != 0 && deleted + entries > limit {
                break;
            }
            let remove_node = match how {
                Trim::MaxLen(max) => self.length - entries >= max,
                Trim::MinId(min) => {
                    let last = node_entries(node, master).last().map(|e| e.id);
                    last.is_some_and(|l| l < min)
                }
            };
            if remove_node {
                self.nodes.remove(&master);
                self.length -= entries;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            let mut marks = Vec::new();
            let mut length = self.length;
            for e in node_entries(node, master) {
                let stop = match how {
                    Trim::MaxLen(max) => length <= max,
                    Trim::MinId(min) => e.id >= min,
                };
                if stop {
                    break;
                }
                if e.flags & FLAG_DELETED == 0 {
                    marks.push(e.at);
                    length -= 1;
                }
            }
            for at in &marks {
                node.data[*at] |= FLAG_DELETED;
            }
            let n = marks.len() as u32;
            node.live -= n;
            node.deleted += n;
            self.length = length;
            deleted += n as u64;
            break;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.first_id = self.edge_id(true).unwrap_or(StreamId::MAX);
        }
        deleted
    }

    /// The ID of the first entry, tombstones included (what approximate trims report).
    pub fn first_raw_id(&self) -> StreamId {
        self.nodes
            .iter()
            .next()
            .and_then(|(&m, n)| node_entries(n, m).next().map(|e| e.id))
            .unwrap_or(StreamId::MIN)
    }

    /// Whether a tombstone may lie in `start..=end` (Redis's streamRangeHasTombstones).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.length == 0 || self.max_deleted.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted {
            return false;
        }
        start <= self.max_deleted && self.max_deleted <= end
    }

    /// Redis's streamEstimateDistanceFromFirstEverEntry; None when it cannot be known.
    pub fn estimate_distance(&self, id: StreamId) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last_id {
            return Some(self.entries_added as i64);
        }
        if id == self.last_id {
            return Some(self.entries_added as i64);
        } else if id > self.last_id {
            return None;
        }
        if self.max_deleted.is_zero() || self.max_deleted < self.first_id {
            if id < self.first_id {
                return Some((self.entries_added - self.length) as i64);
            } else if id == self.first_id {
                return Some((self.entries_added - self.length + 1) as i64);
            }
        }
        None
    }

    /// A group's lag (Redis's streamReplyWithCGLag); None when unknown.
    pub fn lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != INVALID_ENTRIES_READ
            && !self.range_has_tombstones(g.last_id, StreamId::MAX)
        {
            return Some(self.entries_added as i64 - g.entries_read);
        }
        self.estimate_distance(g.last_id)
            .map(|r| self.entries_added as i64 - r)
    }

    /// Radix-tree nodes of Redis's rax holding the node keys: a compressed trie over the 16-byte
    /// big-endian keys (a close model of rax's count, which also depends on insertion history).
    pub fn rax_nodes(&self) -> usize {
        let keys: Vec<[u8; 16]> = self
            .nodes
            .keys()
            .map(|k| {
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&k.ms.to_be_bytes());
                b[8..].copy_from_slice(&k.seq.to_be_bytes());
                b
            })
            .collect();
        // A node at `depth` whose keys share a prefix past it is a compressed node over a
        // branching (or key) node.
        fn count(keys: &[[u8; 16]], depth: usize) -> usize {
            let mut d = depth;
            while d < 16 && keys.iter().all(|k| k[d] == keys[0][d]) {
                d += 1;
            }
            (d > depth) as usize + branch(keys, d)
        }
        fn branch(keys: &[[u8; 16]], d: usize) -> usize {
            if d == 16 {
                return 1;
            }
            let mut n = 1;
            let mut i = 0;
            while i < keys.len() {
                let mut j = i + 1;
                while j < keys.len() && keys[j][d] == keys[i][d] {
                    j += 1;
                }
                n += count(&keys[i..j], d + 1);
                i = j;
            }
            n
        }
        if keys.is_empty() {
            return 1;
        }
        count(&keys, 0)
    }

    /// A rough estimate of what the stream takes (MEMORY USAGE).
    pub fn approx_size(&self) -> usize {
        self.nodes
            .values()
            .map(|n| n.data.capacity() + 64)
            .sum::<usize>()
            + self
                .groups
                .values()
                .map(|g| g.pel.len() * 96 + g.consumers.len() * 96)
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn append_range_delete_trim() {
        let mut s = Stream::new();
        for i in 1..=250u64 {
            let f = if i % 3 == 0 {
                vec![b("other"), b(&i.to_string())]
            } else {
                vec![b("a"), b(&i.to_string()), b("b"), b("x")]
            };
            s.append(&f, Some(StreamId::new(i, 0)), true, 0, 4096, 100)
                .unwrap();
        }
        assert_eq!(s.length, 250);
        assert_eq!(s.node_count(), 3);
        let mut got = Vec::new();
        s.range(
            StreamId::new(99, 0),
            StreamId::new(102, 0),
            false,
            |id, f| {
                got.push((id.ms, f.len()));
                true
            },
        );
        assert_eq!(got, vec![(99, 1), (100, 2), (101, 2), (102, 1)]);
        got.clear();
        s.range(
            StreamId::new(99, 0),
            StreamId::new(102, 0),
            true,
            |id, _| {
                got.push((id.ms, 0));
                true
            },
        );
        assert_eq!(
            got.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![102, 101, 100, 99]
        );
        assert!(s.delete(StreamId::new(100, 0)));
        assert!(!s.delete(StreamId::new(100, 0)));
        assert!(!s.exists(StreamId::new(100, 0)));
        assert_eq!(s.get(StreamId::new(101, 0)).unwrap()[0].1, b("101"));
        assert_eq!(s.trim(Trim::MaxLen(200), true, 0), 0);
        assert_eq!(s.trim(Trim::MaxLen(100), true, 0), 99);
        assert_eq!(s.length, 150);
        assert_eq!(s.trim(Trim::MinId(StreamId::new(210, 0)), false, 0), 109);
        assert_eq!(s.first_id, StreamId::new(210, 0));
        assert_eq!(s.length, 41);
    }

    #[test]
    fn listpack_sizes() {
        assert_eq!(lp_str(b"12"), 2);
        assert_eq!(lp_str(b"012"), 5);
        assert_eq!(lp_str(b"abc"), 5);
        assert_eq!(lp_int(1000), 3);
        assert_eq!(lp_string_to_int(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(lp_string_to_int(b"9223372036854775808"), None);
    }
}
