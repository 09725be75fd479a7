//! Commands that recreate a key's state, for the log and for rewrites.

use crate::store::stream::{Group, JournalOp, Nack, Stream, StreamId};
use crate::store::{ChangeRecord, Db, Entry, FastMap, Value};
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};

fn put_array_header(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn put_bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(itoa::Buffer::new().format(b.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Appends one command as a RESP multibulk request.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    put_array_header(out, args.len());
    for a in args {
        put_bulk(out, a);
    }
}

/// One unit of work's effects (store/change.rs) as an atomic block of commands: swaps, then
/// emptied databases, then each changed key's final state, wrapped in MULTI/EXEC when there is
/// more than one command's worth. `selected` is the database the log's reader has selected.
pub fn unit(out: &mut Vec<u8>, selected: &mut Option<usize>, dbs: &[Db], r: &ChangeRecord) {
    unit_synced(out, selected, dbs, r, None);
}

/// A log's side of stream journals (store/stream.rs `Journal`): for each stream key it wrote,
/// in which database, with which token and deadline. A stream whose journal starts from the
/// token the log last wrote it with is written as its appends and trims.
#[derive(Debug, Default)]
pub struct StreamSync {
    written: FastMap<Bytes, Vec<(usize, u64, u64)>>,
    /// Streams the last unit wrote, whose journals `settle` restarts from the new token.
    settle: Vec<(usize, Bytes, u64)>,
}

/// Tokens are unique in the process, across logs (a log reopened starts with no streams).
static TOKENS: AtomicU64 = AtomicU64::new(1);

impl StreamSync {
    fn forget(&mut self, db: usize, key: &[u8]) {
        if let Some(v) = self.written.get_mut(key) {
            v.retain(|w| w.0 != db);
            if v.is_empty() {
                self.written.remove(key);
            }
        }
    }

    fn last(&self, db: usize, key: &[u8]) -> Option<(u64, u64)> {
        self.written
            .get(key)?
            .iter()
            .find(|w| w.0 == db)
            .map(|w| (w.1, w.2))
    }
}

/// After `unit_synced`: the streams it wrote keep journaling from the state it wrote.
pub fn settle(dbs: &mut [Db], sync: &mut StreamSync) {
    for (db, key, token) in sync.settle.drain(..) {
        if let Some(Value::Stream(s)) = dbs[db].peek_mut(&key).map(|e| &mut e.value) {
            s.journal.settle(token);
        }
    }
}

/// `unit`, writing a stream changed only by appends and head trims since this log last wrote
/// it as those (XADD ..., XTRIM ... MINID) instead of its whole state.
pub fn unit_synced(
    out: &mut Vec<u8>,
    selected: &mut Option<usize>,
    dbs: &[Db],
    r: &ChangeRecord,
    mut sync: Option<&mut StreamSync>,
) {
    if let Some(sy) = sync.as_deref_mut() {
        // Databases moved or emptied: start over (whole states) rather than follow them.
        if !r.swaps.is_empty() || !r.flushed.is_empty() {
            sy.written.clear();
        }
    }
    let wrapped = r.functions.len() + r.swaps.len() + r.flushed.len() + r.keys.len() > 1;
    if wrapped {
        command(out, &[b"MULTI"]);
    }
    // Libraries are independent of the databases: their commands may come first.
    for argv in &r.functions {
        let args: Vec<&[u8]> = argv.iter().map(|a| &a[..]).collect();
        command(out, &args);
    }
    let mut x = itoa::Buffer::new();
    let mut y = itoa::Buffer::new();
    for (a, b) in &r.swaps {
        command(
            out,
            &[b"SWAPDB", x.format(*a).as_bytes(), y.format(*b).as_bytes()],
        );
    }
    if !r.flushed.is_empty() && r.flushed.len() == dbs.len() {
        command(out, &[b"FLUSHALL"]);
    } else {
        for db in &r.flushed {
            select(out, selected, *db);
            command(out, &[b"FLUSHDB"]);
        }
    }
    for (db, key) in &r.keys {
        select(out, selected, *db);
        let entry = dbs[*db].peek(key);
        match (sync.as_deref_mut(), entry) {
            (Some(sy), Some(e)) if matches!(e.value, Value::Stream(_)) => {
                stream_key(out, sy, *db, key, e)
            }
            (Some(sy), _) => {
                if !sy.written.is_empty() {
                    sy.forget(*db, key);
                }
                key_state(out, key, entry);
            }
            (None, _) => key_state(out, key, entry),
        }
    }
    if wrapped {
        command(out, &[b"EXEC"]);
    }
}

/// The unit's PUBLISH/SPUBLISH calls, after its block: a replica delivers them to its own
/// subscribers once the unit's effects are applied (the AOF never carries them).
pub fn publishes(out: &mut Vec<u8>, r: &ChangeRecord) {
    for (shard, channel, msg) in &r.published {
        let name: &[u8] = if *shard { b"SPUBLISH" } else { b"PUBLISH" };
        command(out, &[name, channel, msg]);
    }
}

fn select(out: &mut Vec<u8>, selected: &mut Option<usize>, db: usize) {
    if *selected != Some(db) {
        command(out, &[b"SELECT", itoa::Buffer::new().format(db).as_bytes()]);
        *selected = Some(db);
    }
}

/// Fields per HSET/RPUSH/SADD/ZADD command when a big value is written (bounds one command's size).
const BATCH: usize = 64;

/// Writes `cmd key <items…>` commands, at most BATCH items (of `per_item` arguments) each.
fn batched(out: &mut Vec<u8>, cmd: &[u8], key: &[u8], per_item: usize, items: &[Vec<&[u8]>]) {
    for chunk in items.chunks(BATCH) {
        put_array_header(out, 2 + chunk.len() * per_item);
        put_bulk(out, cmd);
        put_bulk(out, key);
        for item in chunk {
            for a in item {
                put_bulk(out, a);
            }
        }
    }
}

/// Commands that make `key` hold exactly `entry` (or be absent).
pub fn key_state(out: &mut Vec<u8>, key: &[u8], entry: Option<&Entry>) {
    let Some(entry) = entry else {
        command(out, &[b"DEL", key]);
        return;
    };
    let mut ms = itoa::Buffer::new();
    let deadline = ms.format(entry.expires_at).as_bytes().to_vec();
    if let Value::Str(v) = &entry.value {
        if entry.expires_at != 0 {
            command(out, &[b"SET", key, v, b"PXAT", &deadline]);
        } else {
            command(out, &[b"SET", key, v]);
        }
        return;
    }
    command(out, &[b"DEL", key]);
    match &entry.value {
        Value::Str(_) => {}
        Value::Hash(h) => {
            let items: Vec<Vec<&[u8]>> = h.iter().map(|(f, v)| vec![f, v]).collect();
            batched(out, b"HSET", key, 2, &items);
        }
        Value::List(l) => {
            let items: Vec<Vec<&[u8]>> = l.iter().map(|v| vec![&v[..]]).collect();
            batched(out, b"RPUSH", key, 1, &items);
        }
        Value::Set(set) => {
            let items: Vec<Vec<&[u8]>> = set.iter().map(|v| vec![&v[..]]).collect();
            batched(out, b"SADD", key, 1, &items);
        }
        Value::ZSet(z) => {
            // %.17g round-trips every f64 exactly (and prints inf/-inf as ZADD accepts them).
            let scores: Vec<(Vec<u8>, &[u8])> = z
                .iter_from(0)
                .map(|(m, s)| (crate::protocol::number::fmt_g17(s).into_bytes(), &m[..]))
                .collect();
            let items: Vec<Vec<&[u8]>> = scores.iter().map(|(s, m)| vec![&s[..], *m]).collect();
            batched(out, b"ZADD", key, 2, &items);
        }
        Value::Stream(s) => stream_state(out, key, s),
    }
    if entry.expires_at != 0 {
        command(out, &[b"PEXPIREAT", key, &deadline]);
    }
}

/// A stream key changed by the unit: its appends and trims when its journal starts from what
/// this log last wrote of it, its whole state otherwise.
fn stream_key(out: &mut Vec<u8>, sy: &mut StreamSync, db: usize, key: &Bytes, e: &Entry) {
    let Value::Stream(s) = &e.value else {
        return key_state(out, key, Some(e));
    };
    match sy.last(db, key) {
        Some((token, deadline)) if s.journal.applies_to(token) && groups_delta_ok(s) => {
            for op in &s.journal.ops {
                match op {
                    JournalOp::Add(id, fields) => {
                        put_array_header(out, 3 + fields.len());
                        put_bulk(out, b"XADD");
                        put_bulk(out, key);
                        put_bulk(out, &id.to_bytes());
                        for f in fields {
                            put_bulk(out, f);
                        }
                    }
                    JournalOp::Trim(Some(first)) => {
                        command(out, &[b"XTRIM", key, b"MINID", &first.to_bytes()])
                    }
                    JournalOp::Trim(None) => command(out, &[b"XTRIM", key, b"MAXLEN", b"0"]),
                    JournalOp::Del(ids) => {
                        put_array_header(out, 2 + ids.len());
                        put_bulk(out, b"XDEL");
                        put_bulk(out, key);
                        for id in ids {
                            put_bulk(out, &id.to_bytes());
                        }
                    }
                }
            }
            groups_delta(out, key, s);
            if e.expires_at != deadline {
                if e.expires_at == 0 {
                    command(out, &[b"PERSIST", key]);
                } else {
                    let mut ms = itoa::Buffer::new();
                    command(
                        out,
                        &[b"PEXPIREAT", key, ms.format(e.expires_at).as_bytes()],
                    );
                }
            }
        }
        _ => key_state(out, key, Some(e)),
    }
    let token = TOKENS.fetch_add(1, Ordering::Relaxed);
    sy.forget(db, key);
    sy.written
        .entry(key.clone())
        .or_default()
        .push((db, token, e.expires_at));
    sy.settle.push((db, key.clone(), token));
}

/// A stream as Redis's AOF rewrite writes it (rewriteStreamObject): its entries as XADDs with
/// their IDs (an empty stream through `XADD MAXLEN 0`), XSETID for the last ID, entries-added
/// and max-deleted ID, then each group (XGROUP CREATE ... ENTRIESREAD), its pending entries
/// (XCLAIM ... TIME RETRYCOUNT JUSTID FORCE, which keeps delivery time and count) and its
/// consumers without pending entries (XGROUP CREATECONSUMER).
///
/// Unlike Redis's rewrite, which loses a pending entry whose stream entry was deleted (XCLAIM
/// skips a missing entry) and with it a consumer left with no other, such entries are added
/// back for the XCLAIMs and removed after them: above the first live entry by XDEL (they were
/// deleted: the max-deleted ID XSETID then sets covers them), below it by XTRIM MINID (they may
/// have been trimmed, which leaves the max-deleted ID alone). XSETID comes last.
fn stream_state(out: &mut Vec<u8>, key: &[u8], s: &Stream) {
    let ghosts: std::collections::BTreeSet<StreamId> = s
        .groups
        .values()
        .flat_map(|g| g.pel.keys())
        .filter(|id| !s.exists(**id))
        .copied()
        .collect();
    let xadd = |out: &mut Vec<u8>, id: StreamId, fields: &[(Bytes, Bytes)]| {
        put_array_header(out, 3 + fields.len() * 2);
        put_bulk(out, b"XADD");
        put_bulk(out, key);
        put_bulk(out, &id.to_bytes());
        for (f, v) in fields {
            put_bulk(out, f);
            put_bulk(out, v);
        }
    };
    let ghost_fields = [(Bytes::from_static(b"x"), Bytes::from_static(b"y"))];
    if s.length > 0 || !ghosts.is_empty() {
        let mut pending = ghosts.iter().peekable();
        s.range(StreamId::MIN, StreamId::MAX, false, |id, fields| {
            while let Some(g) = pending.next_if(|g| **g < id) {
                xadd(out, *g, &ghost_fields);
            }
            xadd(out, id, &fields);
            true
        });
        for g in pending {
            xadd(out, *g, &ghost_fields);
        }
    } else {
        command(out, &[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]);
    }
    let mut n = itoa::Buffer::new();
    for (name, g) in &s.groups {
        group_state(out, key, name, g);
    }
    if !ghosts.is_empty() {
        let first = s.edge_id(true);
        for g in &ghosts {
            if first.is_some_and(|f| *g > f) {
                command(out, &[b"XDEL", key, &g.to_bytes()]);
            }
        }
        match first {
            Some(f) if ghosts.iter().any(|g| *g < f) => {
                command(out, &[b"XTRIM", key, b"MINID", &f.to_bytes()])
            }
            Some(_) => {}
            None => command(out, &[b"XTRIM", key, b"MAXLEN", b"0"]),
        }
    }
    command(
        out,
        &[
            b"XSETID",
            key,
            &s.last_id.to_bytes(),
            b"ENTRIESADDED",
            n.format(s.entries_added).as_bytes(),
            b"MAXDELETEDID",
            &s.max_deleted.to_bytes(),
        ],
    );
}

/// A group whole: XGROUP CREATE with its last ID and entries-read, its pending entries
/// (XCLAIM ... FORCE keeps their consumer, delivery time and count) and its consumers without
/// any (XGROUP CREATECONSUMER).
fn group_state(out: &mut Vec<u8>, key: &[u8], name: &[u8], g: &Group) {
    let mut n = itoa::Buffer::new();
    command(
        out,
        &[
            b"XGROUP",
            b"CREATE",
            key,
            name,
            &g.last_id.to_bytes(),
            b"ENTRIESREAD",
            n.format(g.entries_read).as_bytes(),
        ],
    );
    for (cname, c) in &g.consumers {
        if c.pel.is_empty() {
            command(out, &[b"XGROUP", b"CREATECONSUMER", key, name, cname]);
            continue;
        }
        for id in &c.pel {
            if let Some(nack) = g.pel.get(id) {
                xclaim(out, key, name, *id, nack);
            }
        }
    }
}

fn xclaim(out: &mut Vec<u8>, key: &[u8], group: &[u8], id: StreamId, nack: &Nack) {
    let mut t = itoa::Buffer::new();
    let mut r = itoa::Buffer::new();
    command(
        out,
        &[
            b"XCLAIM",
            key,
            group,
            &nack.consumer,
            b"0",
            &id.to_bytes(),
            b"TIME",
            t.format(nack.delivery_time).as_bytes(),
            b"RETRYCOUNT",
            r.format(nack.delivery_count).as_bytes(),
            b"JUSTID",
            b"FORCE",
        ],
    );
}

/// Whether the journal's group changes can be written as such: every group it touched is
/// still there, and every pending entry it would XCLAIM still has its stream entry (XCLAIM
/// skips a missing one; the whole state adds it back).
fn groups_delta_ok(s: &Stream) -> bool {
    s.journal.groups.iter().all(|(name, t)| {
        let Some(g) = s.groups.get(name) else {
            return false;
        };
        if t.created {
            g.pel.keys().all(|id| s.exists(*id))
        } else {
            t.ids
                .iter()
                .all(|id| !g.pel.contains_key(id) || s.exists(*id))
        }
    })
}

/// The journal's group changes: a new group whole; for one the log has, its last ID and
/// entries-read (XGROUP SETID), its touched consumers created or deleted, and each touched
/// pending entry's final state (XCLAIM ... FORCE, or XACK when it is gone).
fn groups_delta(out: &mut Vec<u8>, key: &[u8], s: &Stream) {
    for (name, t) in &s.journal.groups {
        let Some(g) = s.groups.get(name) else {
            continue;
        };
        if t.created {
            group_state(out, key, name, g);
            continue;
        }
        let mut n = itoa::Buffer::new();
        command(
            out,
            &[
                b"XGROUP",
                b"SETID",
                key,
                name,
                &g.last_id.to_bytes(),
                b"ENTRIESREAD",
                n.format(g.entries_read).as_bytes(),
            ],
        );
        for c in &t.consumers {
            if !g.consumers.contains_key(c) {
                command(out, &[b"XGROUP", b"DELCONSUMER", key, name, c]);
            }
        }
        for c in &t.consumers {
            if g.consumers.contains_key(c) {
                command(out, &[b"XGROUP", b"CREATECONSUMER", key, name, c]);
            }
        }
        for id in &t.ids {
            match g.pel.get(id) {
                Some(nack) => xclaim(out, key, name, *id, nack),
                None => command(out, &[b"XACK", key, name, &id.to_bytes()]),
            }
        }
    }
}
