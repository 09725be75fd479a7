//! Commands that recreate a key's state, for the log and for rewrites.

use crate::store::{ChangeRecord, Db, Entry, Value};

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
    let wrapped = r.swaps.len() + r.flushed.len() + r.keys.len() > 1;
    if wrapped {
        command(out, &[b"MULTI"]);
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
        key_state(out, key, dbs[*db].peek(key));
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

/// A stream as Redis's AOF rewrite writes it (rewriteStreamObject): its entries as XADDs with
/// their IDs (an empty stream through `XADD MAXLEN 0`), XSETID for the last ID, entries-added
/// and max-deleted ID, then each group (XGROUP CREATE ... ENTRIESREAD), its pending entries
/// (XCLAIM ... TIME RETRYCOUNT JUSTID FORCE, which keeps delivery time and count) and its
/// consumers without pending entries (XGROUP CREATECONSUMER).
fn stream_state(out: &mut Vec<u8>, key: &[u8], s: &crate::store::stream::Stream) {
    use crate::store::stream::StreamId;
    if s.length > 0 {
        s.range(StreamId::MIN, StreamId::MAX, false, |id, fields| {
            put_array_header(out, 3 + fields.len() * 2);
            put_bulk(out, b"XADD");
            put_bulk(out, key);
            put_bulk(out, &id.to_bytes());
            for (f, v) in &fields {
                put_bulk(out, f);
                put_bulk(out, v);
            }
            true
        });
    } else {
        command(out, &[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]);
    }
    let mut n = itoa::Buffer::new();
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
    for (name, g) in &s.groups {
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
                let Some(nack) = g.pel.get(id) else {
                    continue;
                };
                let mut t = itoa::Buffer::new();
                let mut r = itoa::Buffer::new();
                command(
                    out,
                    &[
                        b"XCLAIM",
                        key,
                        name,
                        cname,
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
        }
    }
}
