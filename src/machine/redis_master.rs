//! deadbolt as the master of stock Redis replicas (Redis 7.0's replication.c, master side).
//!
//! The stream a replica receives is the change record of every unit of work (store/change.rs)
//! written as commands by `persist::emit`, exactly as the append-only file gets it: each unit's
//! final key states (`SET key value PXAT ms`, `DEL key`, a MULTI/EXEC block when a unit changed
//! more than one thing), with a SELECT whenever the database changes, plus the unit's PUBLISH
//! calls, PINGs every `repl-ping-replica-period` seconds and `REPLCONF GETACK *` when a WAIT
//! asks. `offset` counts every byte of it (Redis's master_repl_offset); the backlog keeps the
//! last `repl-backlog-size` bytes for partial resynchronisation (PSYNC → +CONTINUE).
//!
//! A full resynchronisation encodes the dataset as an RDB (persist/rdb_file.rs) at the moment
//! SYNC/PSYNC runs: the executor is single-threaded, so the snapshot is exactly the state at
//! `offset`, and everything fed after it follows it on the connection. The reply line
//! (+FULLRESYNC / +CONTINUE) leaves as the command's reply; the RDB or the backlog's bytes and
//! the stream fed meanwhile are queued on the replica and appended to its connection at the end
//! of the pass (`flush`), after that reply. From then on the stream is appended as it is fed.

use crate::machine::output::ConnOut;
use crate::persist::emit;
use crate::protocol::Frame;
use crate::store::{ChangeRecord, Db, Value};
use bytes::Bytes;
use std::fmt::Write as _;
use std::rc::Rc;

/// Redis's `REPLCONF GETACK *` as it appears in the stream.
const GETACK: &[u8] = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";
const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

/// A replica's output beyond this is dropped with the connection, as Redis's default
/// `client-output-buffer-limit replica 256mb`: a replica that stops reading cannot make the
/// master hold the stream forever; it reconnects and resynchronises.
const OUTPUT_HARD_LIMIT: usize = 256 << 20;

/// The circular replication backlog (Redis's repl_backlog). Its memory grows with the stream
/// up to `size` (as Redis's, which allocates as it is fed), so a large `repl-backlog-size`
/// costs nothing until the stream fills it.
struct Backlog {
    buf: Vec<u8>,
    size: usize,
    /// Where the next byte goes once `buf` is full.
    idx: usize,
    /// Bytes of history held (at most `size`).
    histlen: usize,
    /// Replication offset of the first byte held (1-based, as Redis's `repl_backlog->offset`).
    first: u64,
}

impl Backlog {
    fn new(size: usize, first: u64) -> Backlog {
        Backlog {
            buf: Vec::new(),
            size: size.max(16 * 1024),
            idx: 0,
            histlen: 0,
            first,
        }
    }

    fn feed(&mut self, mut data: &[u8]) {
        if self.buf.len() < self.size {
            // Still growing: append what fits.
            let n = (self.size - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..n]);
            self.histlen += n;
            self.idx = self.buf.len() % self.size;
            data = &data[n..];
            if data.is_empty() {
                return;
            }
        }
        let size = self.size;
        if data.len() > size {
            // Only the last `size` bytes can be kept.
            let skip = data.len() - size;
            self.first += (self.histlen + skip) as u64;
            self.histlen = 0;
            data = &data[skip..];
        }
        let n = data.len();
        let room = size - self.idx;
        if n <= room {
            self.buf[self.idx..self.idx + n].copy_from_slice(data);
        } else {
            self.buf[self.idx..].copy_from_slice(&data[..room]);
            self.buf[..n - room].copy_from_slice(&data[room..]);
        }
        self.idx = (self.idx + n) % size;
        let over = (self.histlen + n).saturating_sub(size);
        self.histlen = (self.histlen + n).min(size);
        self.first += over as u64;
    }

    /// The bytes from replication offset `from` (1-based) to the end; None if not held.
    fn since(&self, from: u64) -> Option<Vec<u8>> {
        let end = self.first + self.histlen as u64;
        if from < self.first || from > end {
            return None;
        }
        let skip = (from - self.first) as usize;
        let len = self.histlen - skip;
        let ring = self.buf.len();
        if len == 0 {
            return Some(Vec::new());
        }
        let start = (self.idx + ring - self.histlen + skip) % ring;
        let mut out = Vec::with_capacity(len);
        if start + len <= ring {
            out.extend_from_slice(&self.buf[start..start + len]);
        } else {
            out.extend_from_slice(&self.buf[start..]);
            out.extend_from_slice(&self.buf[..len - (ring - start)]);
        }
        Some(out)
    }

    /// `repl-backlog-size` changed: keep the most recent history that fits.
    fn resize(&mut self, size: usize) {
        if size.max(16 * 1024) == self.size {
            return;
        }
        let mut fresh = Backlog::new(size, 0);
        let keep = self.histlen.min(fresh.size);
        let first = self.first + (self.histlen - keep) as u64;
        fresh.first = first;
        fresh.feed(&self.since(first).unwrap_or_default());
        *self = fresh;
    }
}

/// What REPLCONF told about a connection before (or after) it became a replica.
#[derive(Debug, Default, Clone)]
pub struct Conf {
    pub listening_port: i64,
    pub ip_address: Option<String>,
    pub capa_eof: bool,
    pub capa_psync2: bool,
}

/// One attached Redis replica (Redis's client with CLIENT_SLAVE).
pub struct Replica {
    pub id: u64,
    out: Rc<ConnOut>,
    /// The connection's peer address (ip only), used when REPLCONF ip-address was not sent.
    peer_ip: String,
    pub conf: Conf,
    /// Highest offset it acknowledged (REPLCONF ACK).
    pub ack_off: u64,
    /// Unix ms of its last ACK (of its attach for SYNC replicas, which never ACK).
    pub ack_ms: u64,
    /// Attached with SYNC (Redis's CLIENT_PRE_PSYNC): no ACKs expected.
    pub pre_psync: bool,
    /// Not started yet: the RDB to send first (full sync), and the stream fed since.
    start: Option<(Option<Bytes>, Vec<u8>)>,
    /// The output stream offset just past its RDB: what is unwritten before it is the
    /// transfer, not a backlog of the stream, and Redis's replica limit does not count it.
    rdb_end: u64,
}

impl Replica {
    /// Output not written yet, the RDB transfer left out (Redis's limit counts the stream).
    fn stream_backlog(&self) -> usize {
        let (_, written) = self.out.offsets();
        let rdb_left = self.rdb_end.saturating_sub(written) as usize;
        self.out.len().saturating_sub(rdb_left)
    }

    /// It has been given its RDB (or backlog) and gets the stream as it is fed.
    pub fn online(&self) -> bool {
        self.start.is_none()
    }

    pub fn ip(&self) -> &str {
        self.conf.ip_address.as_deref().unwrap_or(&self.peer_ip)
    }
}

/// How a SYNC/PSYNC is answered (`Master::sync`).
pub enum Synced {
    /// +FULLRESYNC <replid> <offset> (None: SYNC, which gets no line before the RDB).
    Full(Option<String>),
    /// +CONTINUE [<replid>].
    Partial(String),
}

/// The master side of Redis replication (module comment).
#[derive(Default)]
pub struct Master {
    /// Bytes of stream ever produced (Redis's master_repl_offset).
    pub offset: u64,
    backlog: Option<Backlog>,
    pub replicas: Vec<Replica>,
    /// REPLCONF settings of connections that are not replicas yet, by client id.
    confs: Vec<(u64, Conf)>,
    /// The database the stream last selected (None: the next unit starts with SELECT).
    selected: Option<usize>,
    /// One unit's bytes, reused.
    buf: Vec<u8>,
    /// A WAIT is parked: REPLCONF GETACK goes to the replicas at the end of the pass.
    pub get_ack: bool,
    /// Unix seconds since when no replica is attached (the backlog's time to live).
    no_replicas_since: u64,
    /// Seconds counted by the replication cron (PING every `repl-ping-replica-period`).
    cron_loops: u64,
    last_cron_s: u64,
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
    /// The unit's write commands as Redis propagates them (`note`), with their database.
    unit_cmds: Vec<(usize, Vec<Bytes>)>,
    /// The unit ran a write this file does not know how to propagate as a command.
    unit_opaque: bool,
    /// Keys expired so far in every database (a change means the unit expired some).
    expired_seen: u64,
    /// Keys the unit changed that Redis propagates nothing for (an XREADGROUP re-reading a
    /// consumer's history), with their database.
    unit_silent: Vec<(usize, Bytes)>,
    /// Streams whose group got a consumer from the XREADGROUP running (`consumer_created`).
    created_consumers: Vec<Bytes>,
}

impl Master {
    /// The stream is being produced (a backlog exists): units must be fed.
    #[inline]
    pub fn active(&self) -> bool {
        self.backlog.is_some()
    }

    pub fn is_replica(&self, id: u64) -> bool {
        self.replicas.iter().any(|r| r.id == id)
    }

    /// A write command changed the data (dispatch, after its handler ran in database `db`):
    /// kept in the form Redis 7.0 propagates it, when it has one this file knows.
    /// `reply`: what it answered (SPOP is propagated as the SREM of what it popped).
    pub fn note(
        &mut self,
        name: &str,
        db: usize,
        argv: &[Bytes],
        dbs: &[Db],
        reply: Option<&Frame>,
    ) {
        let created = std::mem::take(&mut self.created_consumers);
        if self.unit_opaque {
            return;
        }
        if name == "xreadgroup" {
            let exact =
                reply.and_then(|reply| xreadgroup_propagated(argv, &dbs[db], reply, &created));
            match exact {
                Some((cmds, keys)) => {
                    self.unit_cmds.extend(cmds.into_iter().map(|c| (db, c)));
                    self.unit_silent.extend(keys.into_iter().map(|k| (db, k)));
                }
                None => self.unit_opaque = true,
            }
            return;
        }
        match propagated(name, argv, &dbs[db], reply) {
            Some(cmd) => self.unit_cmds.push((db, cmd)),
            None => self.unit_opaque = true,
        }
    }

    /// XREADGROUP created consumer `key`'s reader in a group (Redis propagates that as XGROUP
    /// CREATECONSUMER when it reads with NOACK); read by the `note` that follows.
    pub fn consumer_created(&mut self, key: &Bytes) {
        if self.active() {
            self.created_consumers.push(key.clone());
        }
    }

    /// One unit of work: its commands as Redis propagates them when every change it made is
    /// exactly theirs (`as_commands`), its keys' final states (as the AOF writes them)
    /// otherwise, then its PUBLISH calls.
    pub fn feed_unit(&mut self, dbs: &[Db], r: &ChangeRecord) {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let expired: u64 = dbs.iter().map(|d| d.expired_total).sum();
        let expired_in_unit = expired != self.expired_seen;
        self.expired_seen = expired;
        let cmds = std::mem::take(&mut self.unit_cmds);
        let opaque = std::mem::take(&mut self.unit_opaque);
        let silent = std::mem::take(&mut self.unit_silent);
        let exact = !opaque && self.as_commands(&mut buf, dbs, r, &cmds, &silent, expired_in_unit);
        self.unit_silent = silent;
        self.unit_silent.clear();
        if exact {
            self.publishes(&mut buf, r);
            self.feed(&buf);
            self.buf = buf;
            self.unit_cmds = cmds;
            self.unit_cmds.clear();
            return;
        }
        self.unit_cmds = cmds;
        self.unit_cmds.clear();
        // `emit::unit` wraps a unit of several changes in MULTI/EXEC; a single key that is not
        // a string is written as several commands too (DEL, then HSET/RPUSH/…, PEXPIREAT):
        // a replica must apply those at once as well (a Redisson lock is a hash), or a read
        // or a promotion between them would find the key missing.
        let one_key = r.functions.len() + r.swaps.len() + r.flushed.len() + r.keys.len() == 1;
        let several = one_key
            && r.keys.first().is_some_and(|(db, key)| {
                (dbs[*db].peek(key)).is_some_and(|e| !matches!(e.value, Value::Str(_)))
            });
        // A transaction starts in the database of its first command, selected before MULTI
        // as Redis does.
        let all_flushed = !r.flushed.is_empty() && r.flushed.len() == dbs.len();
        let first_db = match (r.flushed.first(), r.keys.first()) {
            (Some(&db), _) if !all_flushed => Some(db),
            (None, Some((db, _))) => Some(*db),
            _ => None,
        };
        if let Some(db) = first_db.filter(|_| r.functions.is_empty() && r.swaps.is_empty()) {
            if self.selected != Some(db) {
                emit::command(&mut buf, &[b"SELECT", db.to_string().as_bytes()]);
                self.selected = Some(db);
            }
        }
        if several {
            emit::command(&mut buf, &[b"MULTI"]);
        }
        emit::unit(&mut buf, &mut self.selected, dbs, r);
        if several {
            emit::command(&mut buf, &[b"EXEC"]);
        }
        self.publishes(&mut buf, r);
        self.feed(&buf);
        self.buf = buf;
    }

    /// Writes the unit as Redis 7.0 would propagate it, if that is exactly what it did: its
    /// recorded commands (several in MULTI/EXEC) when they name every key and database it
    /// changed and nothing else, no key expired under them and no library or SWAPDB is
    /// involved; or a unit that only expired keys, as one DEL each (Redis's expiry). False:
    /// the unit is written as its final states instead.
    fn as_commands(
        &mut self,
        buf: &mut Vec<u8>,
        dbs: &[Db],
        r: &ChangeRecord,
        cmds: &[(usize, Vec<Bytes>)],
        silent: &[(usize, Bytes)],
        expired_in_unit: bool,
    ) -> bool {
        if !r.functions.is_empty() || !r.swaps.is_empty() {
            return false;
        }
        let quiet = |db: usize, key: &[u8]| silent.iter().any(|(d, k)| *d == db && &k[..] == key);
        if cmds.is_empty() && !silent.is_empty() {
            // Only changes Redis does not propagate: nothing goes out.
            return !expired_in_unit
                && r.flushed.is_empty()
                && r.keys.iter().all(|(db, k)| quiet(*db, k));
        }
        if cmds.is_empty() {
            let only_expiry = expired_in_unit
                && r.flushed.is_empty()
                && r.keys.iter().all(|(db, k)| dbs[*db].peek(k).is_none());
            if !only_expiry || r.keys.is_empty() {
                return false;
            }
            for (db, key) in &r.keys {
                self.select(buf, *db);
                emit::command(buf, &[b"DEL", key]);
            }
            return true;
        }
        if expired_in_unit {
            return false;
        }
        let flushall = cmds
            .iter()
            .any(|(_, c)| c[0].eq_ignore_ascii_case(b"flushall"));
        let flushed_db = |db: usize| {
            flushall
                || cmds
                    .iter()
                    .any(|(d, c)| *d == db && c[0].eq_ignore_ascii_case(b"flushdb"))
        };
        if !r.flushed.iter().all(|db| flushed_db(*db)) {
            return false;
        }
        let named = |db: usize, key: &[u8]| {
            cmds.iter()
                .any(|(d, c)| *d == db && keys_of(c).any(|k| &k[..] == key))
        };
        if !r
            .keys
            .iter()
            .all(|(db, k)| named(*db, k) || flushed_db(*db) || quiet(*db, k))
        {
            return false;
        }
        // Every recorded command's keys were changed by this unit.
        let changed = |db: usize, key: &[u8]| r.keys.iter().any(|(d, k)| *d == db && &k[..] == key);
        if !cmds.iter().all(|(d, c)| keys_of(c).all(|k| changed(*d, k))) {
            return false;
        }
        let wrapped = cmds.len() > 1;
        if wrapped {
            self.select(buf, cmds[0].0);
            emit::command(buf, &[b"MULTI"]);
        }
        for (db, c) in cmds {
            self.select(buf, *db);
            let args: Vec<&[u8]> = c.iter().map(|a| &a[..]).collect();
            emit::command(buf, &args);
        }
        if wrapped {
            emit::command(buf, &[b"EXEC"]);
        }
        true
    }

    /// The unit's PUBLISH calls; a stream that has selected no database yet selects one
    /// first, as Redis propagates PUBLISH with the client's database.
    fn publishes(&mut self, buf: &mut Vec<u8>, r: &ChangeRecord) {
        if !r.published.is_empty() && self.selected.is_none() {
            self.select(buf, 0);
        }
        emit::publishes(buf, r);
    }

    fn select(&mut self, buf: &mut Vec<u8>, db: usize) {
        if self.selected != Some(db) {
            emit::command(buf, &[b"SELECT", db.to_string().as_bytes()]);
            self.selected = Some(db);
        }
    }

    /// Appends bytes to the stream: the backlog, and every replica's output (or its queue
    /// while it has not started).
    fn feed(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let Some(b) = self.backlog.as_mut() else {
            return;
        };
        b.feed(data);
        self.offset += data.len() as u64;
        for r in &mut self.replicas {
            match r.start.as_mut() {
                Some((_, queued)) => queued.extend_from_slice(data),
                None => r.out.extend(data),
            }
        }
    }

    /// REPLCONF's settings of connection `id` (a replica's or one about to be).
    pub fn conf_mut(&mut self, id: u64) -> &mut Conf {
        if let Some(i) = self.replicas.iter().position(|r| r.id == id) {
            return &mut self.replicas[i].conf;
        }
        match self.confs.iter().position(|c| c.0 == id) {
            Some(i) => &mut self.confs[i].1,
            None => {
                self.confs.push((id, Conf::default()));
                &mut self.confs.last_mut().expect("just pushed").1
            }
        }
    }

    /// REPLCONF ACK from replica `id`; false if `id` is not a replica (Redis ignores it then).
    pub fn ack(&mut self, id: u64, offset: u64, now_ms: u64) -> bool {
        match self.replicas.iter_mut().find(|r| r.id == id) {
            Some(r) => {
                r.ack_off = r.ack_off.max(offset);
                r.ack_ms = now_ms;
                true
            }
            None => false,
        }
    }

    /// SYNC (`psync` None) or PSYNC replid offset from connection `id`. `repl_id` is the
    /// server's replication id (replaced when the backlog is created, as Redis does);
    /// `rdb` encodes the dataset when a full resync is needed.
    #[allow(clippy::too_many_arguments)]
    pub fn sync(
        &mut self,
        id: u64,
        out: Rc<ConnOut>,
        peer_ip: String,
        psync: Option<(&[u8], i64)>,
        repl_id: &mut String,
        backlog_size: usize,
        now_ms: u64,
        (expired_total, rdb): (u64, impl FnOnce() -> Vec<u8>),
    ) -> Synced {
        // Keys expired before now are no part of the next unit.
        self.expired_seen = expired_total;
        let conf = match self.confs.iter().position(|c| c.0 == id) {
            Some(i) => self.confs.swap_remove(i).1,
            None => Conf::default(),
        };
        let name = replica_name(&conf, &peer_ip);
        tracing::info!("Replica {name} asks for synchronization");
        let mut replica = Replica {
            id,
            out,
            peer_ip,
            conf,
            ack_off: 0,
            ack_ms: now_ms,
            pre_psync: psync.is_none(),
            start: None,
            rdb_end: 0,
        };
        if let Some((asked, from)) = psync {
            match self.partial(asked, from, repl_id) {
                Ok(bytes) => {
                    tracing::info!("Partial resynchronization request from {name} accepted. Sending {} bytes of backlog starting from offset {from}.", bytes.len());
                    self.sync_partial_ok += 1;
                    let line = if replica.conf.capa_psync2 {
                        format!("CONTINUE {repl_id}")
                    } else {
                        "CONTINUE".to_owned()
                    };
                    replica.start = Some((None, bytes));
                    self.replicas.push(replica);
                    return Synced::Partial(line);
                }
                Err(why) => {
                    tracing::info!("{why}");
                    if asked.first() != Some(&b'?') {
                        self.sync_partial_err += 1;
                    }
                }
            }
        }
        self.sync_full += 1;
        if self.backlog.is_none() {
            *repl_id = crate::machine::random_hex40();
            self.backlog = Some(Backlog::new(backlog_size, self.offset + 1));
            tracing::info!(
                "Replication backlog created, my new replication IDs are '{repl_id}' and '0000000000000000000000000000000000000000'"
            );
        }
        // The replica starts from the snapshot: the next unit selects its database again.
        self.selected = None;
        tracing::info!("Starting BGSAVE for SYNC with target: replicas sockets");
        replica.start = Some((Some(Bytes::from(rdb())), Vec::new()));
        let pre_psync = replica.pre_psync;
        self.replicas.push(replica);
        Synced::Full((!pre_psync).then(|| format!("FULLRESYNC {repl_id} {}", self.offset)))
    }

    /// Redis's masterTryPartialResynchronization: the backlog's bytes from `from` on, or why
    /// a full resync is needed.
    fn partial(&self, asked: &[u8], from: i64, repl_id: &str) -> Result<Vec<u8>, String> {
        if !asked.eq_ignore_ascii_case(repl_id.as_bytes()) {
            return Err(if asked.first() == Some(&b'?') {
                "Full resync requested by replica".to_owned()
            } else {
                format!("Partial resynchronization not accepted: Replication ID mismatch (Replica asked for '{}', my replication IDs are '{repl_id}' and '0000000000000000000000000000000000000000')", String::from_utf8_lossy(asked))
            });
        }
        let bytes = u64::try_from(from)
            .ok()
            .and_then(|f| self.backlog.as_ref().and_then(|b| b.since(f)));
        bytes.ok_or_else(|| format!("Unable to partial resync with replica for lack of backlog (Replica request was: {from})."))
    }

    /// End of a pass (before the loop writes): replicas attached during it get their RDB or
    /// backlog bytes and the stream since, after the reply that announced them; a WAIT's
    /// GETACK goes out.
    pub fn flush(&mut self) {
        if self.get_ack {
            self.get_ack = false;
            if !self.replicas.is_empty() {
                self.feed(GETACK);
            }
        }
        for r in &mut self.replicas {
            let Some((rdb, queued)) = r.start.take() else {
                continue;
            };
            if let Some(rdb) = rdb {
                r.out.extend(format!("${}\r\n", rdb.len()).as_bytes());
                r.out.put(rdb);
                r.rdb_end = r.out.offsets().0;
                tracing::info!(
                    "Synchronization with replica {} succeeded",
                    replica_name(&r.conf, &r.peer_ip)
                );
            }
            if !queued.is_empty() {
                r.out.put(Bytes::from(queued));
            }
        }
    }

    /// Connection `id` is gone: it is no replica any more.
    pub fn forget(&mut self, id: u64) {
        if self.confs.is_empty() && self.replicas.is_empty() {
            return;
        }
        self.confs.retain(|c| c.0 != id);
        let before = self.replicas.len();
        self.replicas.retain(|r| r.id != id);
        if self.replicas.len() != before {
            tracing::info!("Connection with replica client id #{id} lost.");
            if self.replicas.is_empty() {
                self.no_replicas_since = crate::clock::unix_ms() / 1000;
            }
        }
    }

    /// Once a second (Redis's replicationCron): PING the replicas every `ping_period`
    /// seconds; returns the replicas to disconnect (silent longer than `timeout_s`, or output
    /// over the replica limit); frees the backlog after `backlog_ttl_s` without replicas
    /// (true: the stream stopped, the replication id is replaced).
    pub fn cron(
        &mut self,
        now_ms: u64,
        ping_period: u64,
        timeout_s: u64,
        backlog_ttl_s: u64,
        backlog_size: usize,
        repl_id: &mut String,
    ) -> (Vec<u64>, bool) {
        let now_s = now_ms / 1000;
        if now_s == self.last_cron_s || !self.active() {
            return (Vec::new(), false);
        }
        self.last_cron_s = now_s;
        self.cron_loops += 1;
        if let Some(b) = self.backlog.as_mut() {
            b.resize(backlog_size);
        }
        if !self.replicas.is_empty() && self.cron_loops % ping_period.max(1) == 0 {
            self.feed(PING);
        }
        let mut drop = Vec::new();
        for r in &self.replicas {
            let silent = !r.pre_psync
                && r.start.is_none()
                && now_ms.saturating_sub(r.ack_ms) / 1000 > timeout_s.max(1);
            if silent {
                tracing::warn!(
                    "Disconnecting timedout replica (streaming sync): {}",
                    replica_name(&r.conf, &r.peer_ip)
                );
                drop.push(r.id);
            } else if r.stream_backlog() > OUTPUT_HARD_LIMIT {
                tracing::warn!(
                    "Client id={} closed for overcoming of output buffer limits.",
                    r.id
                );
                drop.push(r.id);
            }
        }
        let mut freed = false;
        if self.replicas.is_empty()
            && backlog_ttl_s != 0
            && now_s.saturating_sub(self.no_replicas_since) > backlog_ttl_s
        {
            *repl_id = crate::machine::random_hex40();
            self.backlog = None;
            self.selected = None;
            freed = true;
            tracing::info!("Replication backlog freed after {backlog_ttl_s} seconds without connected replicas.");
        }
        (drop, freed)
    }

    /// This server starts following a master: every Redis replica's connection is closed
    /// (deadbolt does not chain replication, so they cannot go on from its stream; Redis
    /// would keep them until the new master's data arrives, then drop them too).
    pub fn disconnect_all(&mut self) {
        for r in &self.replicas {
            tracing::info!(
                "Connection with replica {} lost: this server now follows a master and deadbolt does not chain replication.",
                replica_name(&r.conf, &r.peer_ip)
            );
            r.out.kill();
        }
        *self = Master::default();
    }

    /// Replicas that acknowledged `offset` (WAIT).
    pub fn acked(&self, offset: u64) -> i64 {
        self.replicas
            .iter()
            .filter(|r| r.start.is_none() && r.ack_off >= offset)
            .count() as i64
    }

    /// Replicas heard from within `max_lag_s` seconds (min-replicas-to-write).
    pub fn good(&self, now_ms: u64, max_lag_s: u64) -> u64 {
        self.replicas
            .iter()
            .filter(|r| now_ms.saturating_sub(r.ack_ms) / 1000 <= max_lag_s)
            .count() as u64
    }

    /// INFO replication's master lines from `connected_slaves` to `repl_backlog_histlen`.
    pub fn info(&self, repl_id: &str, backlog_size: u64, now_ms: u64, out: &mut String) {
        let _ = write!(out, "connected_slaves:{}\r\n", self.replicas.len());
        for (i, r) in self.replicas.iter().enumerate() {
            let state = if r.start.is_some() {
                "wait_bgsave"
            } else {
                "online"
            };
            let lag = now_ms.saturating_sub(r.ack_ms) / 1000;
            let _ = write!(
                out,
                "slave{i}:ip={},port={},state={state},offset={},lag={lag}\r\n",
                r.ip(),
                r.conf.listening_port,
                r.ack_off
            );
        }
        let (active, first, histlen) = match self.backlog.as_ref() {
            Some(b) => (1, b.first, b.histlen),
            None => (0, 0, 0),
        };
        let _ = write!(
            out,
            "master_failover_state:no-failover\r\nmaster_replid:{repl_id}\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:{}\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:{active}\r\nrepl_backlog_size:{backlog_size}\r\nrepl_backlog_first_byte_offset:{first}\r\nrepl_backlog_histlen:{histlen}\r\n",
            self.offset
        );
    }
}

/// Commands propagated as they were run: deterministic, their effect fixed by their
/// arguments and the data (the replica holds the same data).
const VERBATIM: &[&str] = &[
    "setnx", "mset", "msetnx", "append", "incr", "decr", "incrby", "decrby", "del", "unlink",
    "persist", "hset", "hsetnx", "hmset", "hdel", "hincrby", "sadd", "srem", "lpush", "rpush",
    "lpushx", "rpushx", "lpop", "rpop", "zadd", "zrem", "zincrby", "setrange", "flushdb",
    "flushall",
];

/// A write command as Redis 7.0 propagates it, read after it ran in `db` (the rewrites of
/// t_string.c and expire.c: relative and absolute expiries as `PXAT`/`PEXPIREAT` of the
/// deadline set, GETDEL as DEL, INCRBYFLOAT as SET … KEEPTTL). None: not one this file knows.
fn propagated(name: &str, argv: &[Bytes], db: &Db, reply: Option<&Frame>) -> Option<Vec<Bytes>> {
    let is = |a: &Bytes, s: &str| a.eq_ignore_ascii_case(s.as_bytes());
    let key = argv.get(1)?;
    let deadline = || db.peek(key).map(|e| e.expires_at);
    let at = |ms: u64| Bytes::from(ms.to_string());
    let word = Bytes::from_static;
    match name {
        "set" => {
            let expiring = (argv[3..].iter())
                .any(|a| is(a, "ex") || is(a, "px") || is(a, "exat") || is(a, "pxat"));
            if !expiring {
                return Some(argv.to_vec());
            }
            let ms = deadline().filter(|&d| d != 0)?;
            Some(vec![
                word(b"SET"),
                key.clone(),
                argv[2].clone(),
                word(b"PXAT"),
                at(ms),
            ])
        }
        "setex" | "psetex" => {
            let ms = deadline().filter(|&d| d != 0)?;
            let value = argv.get(3)?.clone();
            Some(vec![
                word(b"SET"),
                key.clone(),
                value,
                word(b"PXAT"),
                at(ms),
            ])
        }
        "expire" | "pexpire" | "expireat" | "pexpireat" => match deadline() {
            Some(0) => None,
            Some(ms) => Some(vec![word(b"PEXPIREAT"), key.clone(), at(ms)]),
            // A deadline in the past deletes the key.
            None => Some(vec![word(b"DEL"), key.clone()]),
        },
        "getex" => {
            if argv[2..].iter().any(|a| is(a, "persist")) {
                return Some(vec![word(b"PERSIST"), key.clone()]);
            }
            match deadline() {
                Some(0) => None,
                Some(ms) => Some(vec![word(b"PEXPIREAT"), key.clone(), at(ms)]),
                None => Some(vec![word(b"DEL"), key.clone()]),
            }
        }
        "getdel" => Some(vec![word(b"DEL"), key.clone()]),
        // A relative TTL as the deadline it set, marked ABSTTL.
        "restore" => {
            let absolute = argv[4..].iter().any(|a| is(a, "absttl"));
            if absolute || argv.get(2).is_some_and(|t| &t[..] == b"0") {
                return Some(argv.to_vec());
            }
            let ms = deadline().filter(|&d| d != 0)?;
            let mut cmd = argv.to_vec();
            cmd[2] = at(ms);
            cmd.push(word(b"ABSTTL"));
            Some(cmd)
        }
        // The pops of one key: as LPOP/RPOP/ZPOPMIN/ZPOPMAX of the key and the count popped.
        "lmpop" | "blmpop" | "zmpop" | "bzmpop" => {
            let Frame::Array(parts) = reply? else {
                return None;
            };
            let (Some(Frame::Bulk(popped)), Some(Frame::Array(items))) =
                (parts.first(), parts.get(1))
            else {
                return None;
            };
            let skip = if name.starts_with('b') { 2 } else { 1 };
            let numkeys =
                usize::try_from(crate::protocol::number::parse_i64(argv.get(skip)?)?).ok()?;
            let dir = argv.get(skip + 1 + numkeys)?;
            let cmd: &'static [u8] =
                match (name.ends_with("zmpop"), is(dir, "left") || is(dir, "min")) {
                    (false, true) => b"LPOP",
                    (false, false) => b"RPOP",
                    (true, true) => b"ZPOPMIN",
                    (true, false) => b"ZPOPMAX",
                };
            Some(vec![word(cmd), popped.clone(), at(items.len() as u64)])
        }
        // What it popped: one SREM, or DEL when the set is gone (Redis batches over 1024).
        "spop" => {
            let items = match reply? {
                Frame::Bulk(m) if argv.len() == 2 => {
                    return Some(vec![word(b"SREM"), key.clone(), m.clone()])
                }
                Frame::Array(items) | Frame::Set(items) if argv.len() == 3 => items,
                _ => return None,
            };
            if items.is_empty() {
                return None;
            }
            if db.peek(key).is_none() {
                return Some(vec![word(b"DEL"), key.clone()]);
            }
            if items.len() > 1024 {
                return None;
            }
            let mut cmd = vec![word(b"SREM"), key.clone()];
            for it in items {
                let Frame::Bulk(m) = it else { return None };
                cmd.push(m.clone());
            }
            Some(cmd)
        }
        "incrbyfloat" => match db.peek(key).map(|e| &e.value) {
            Some(Value::Str(v)) => {
                Some(vec![word(b"SET"), key.clone(), v.clone(), word(b"KEEPTTL")])
            }
            _ => None,
        },
        "xadd" => xadd_propagated(argv, db, reply?),
        // Every XGROUP subcommand that writes goes as it was run (t_stream.c xgroupCommand).
        _ if argv[0].eq_ignore_ascii_case(b"xgroup") => Some(argv.to_vec()),
        _ if VERBATIM.contains(&name) => Some(argv.to_vec()),
        _ => None,
    }
}

/// XADD as Redis 7.0 propagates it (t_stream.c xaddCommand): the ID argument as the ID added
/// (`*` and `ms-*` resolved), an approximate trim (`~`) as the exact one it came to (`=` the
/// length for MAXLEN, the first entry for MINID). None with LIMIT (Redis's rewrite would keep
/// LIMIT after `=`, which a replica refuses) or an emptied stream.
fn xadd_propagated(argv: &[Bytes], db: &Db, reply: &Frame) -> Option<Vec<Bytes>> {
    let is = |a: &Bytes, s: &str| a.eq_ignore_ascii_case(s.as_bytes());
    let Frame::Bulk(added) = reply else {
        return None;
    };
    let mut cmd = argv.to_vec();
    let mut i = 2;
    let mut approx = None;
    loop {
        let a = argv.get(i)?;
        if is(a, "nomkstream") {
            i += 1;
        } else if is(a, "maxlen") || is(a, "minid") {
            let marked = argv
                .get(i + 1)
                .is_some_and(|m| &m[..] == b"~" || &m[..] == b"=");
            if marked && &argv[i + 1][..] == b"~" {
                approx = Some((i + 1, is(a, "maxlen")));
            }
            i += if marked { 3 } else { 2 };
        } else if is(a, "limit") {
            return None;
        } else {
            break;
        }
    }
    cmd[i] = added.clone();
    if let Some((at, maxlen)) = approx {
        let Value::Stream(s) = &db.peek(argv.get(1)?)?.value else {
            return None;
        };
        cmd[at] = Bytes::from_static(b"=");
        cmd[at + 1] = if maxlen {
            Bytes::from(s.length.to_string())
        } else {
            s.edge_id(true)?.to_bytes()
        };
    }
    Some(cmd)
}

/// XREADGROUP as Redis 7.0 propagates it (t_stream.c streamReplyWithRange), read from its
/// reply and the groups after it ran: per stream served, in order, XGROUP CREATECONSUMER for a
/// consumer NOACK created, then for each entry delivered into the PEL `XCLAIM key group
/// consumer 0 id TIME ms RETRYCOUNT n FORCE JUSTID LASTID id`, or with NOACK one `XGROUP SETID
/// key group last ENTRIESREAD n` when the group's last ID moved. A re-read of history (an ID
/// other than `>`) propagates nothing (its keys come back as silent). None: not exact.
#[allow(clippy::type_complexity)]
fn xreadgroup_propagated(
    argv: &[Bytes],
    db: &Db,
    reply: &Frame,
    created: &[Bytes],
) -> Option<(Vec<Vec<Bytes>>, Vec<Bytes>)> {
    use crate::store::stream::StreamId;
    let is = |a: &Bytes, s: &str| a.eq_ignore_ascii_case(s.as_bytes());
    let word = Bytes::from_static;
    let num = |n: u64| Bytes::from(n.to_string());
    let (group, consumer) = (argv.get(2)?, argv.get(3)?);
    let mut i = 4;
    let mut noack = false;
    while !is(argv.get(i)?, "streams") {
        if is(&argv[i], "noack") {
            noack = true;
        } else {
            i += 1;
        }
        i += 1;
    }
    let names = &argv[i + 1..];
    let (keys, ids) = names.split_at(names.len() / 2);
    let served: Vec<(&Bytes, &Frame)> = match reply {
        Frame::Array(parts) => (parts.iter())
            .map(|p| match p {
                Frame::Array(kv) if kv.len() == 2 => match &kv[0] {
                    Frame::Bulk(k) => Some((k, &kv[1])),
                    _ => None,
                },
                _ => None,
            })
            .collect::<Option<_>>()?,
        Frame::Map(kvs) => (kvs.iter())
            .map(|(k, v)| match k {
                Frame::Bulk(k) => Some((k, v)),
                _ => None,
            })
            .collect::<Option<_>>()?,
        _ => return None,
    };
    let parse_id = |b: &[u8]| -> Option<StreamId> {
        let s = std::str::from_utf8(b).ok()?;
        let (ms, seq) = s.split_once('-')?;
        Some(StreamId {
            ms: ms.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    };
    let mut out = Vec::new();
    let mut silent = Vec::new();
    for (key, entries) in served {
        let at = keys.iter().position(|k| k == key)?;
        let new_entries = &ids[at][..] == b">";
        let Frame::Array(entries) = entries else {
            return None;
        };
        let Value::Stream(s) = &db.peek(key)?.value else {
            return None;
        };
        let g = s.groups.get(group)?;
        if noack && created.contains(key) {
            out.push(vec![
                word(b"XGROUP"),
                word(b"CREATECONSUMER"),
                key.clone(),
                group.clone(),
                consumer.clone(),
            ]);
        }
        if !new_entries {
            silent.push(key.clone());
            continue;
        }
        if noack {
            if !entries.is_empty() {
                out.push(vec![
                    word(b"XGROUP"),
                    word(b"SETID"),
                    key.clone(),
                    group.clone(),
                    g.last_id.to_bytes(),
                    word(b"ENTRIESREAD"),
                    Bytes::from(g.entries_read.to_string()),
                ]);
            }
            continue;
        }
        for e in entries {
            let Frame::Array(parts) = e else { return None };
            let Some(Frame::Bulk(id)) = parts.first() else {
                return None;
            };
            let nack = g.pel.get(&parse_id(id)?)?;
            out.push(vec![
                word(b"XCLAIM"),
                key.clone(),
                group.clone(),
                nack.consumer.clone(),
                word(b"0"),
                id.clone(),
                word(b"TIME"),
                num(nack.delivery_time),
                word(b"RETRYCOUNT"),
                num(nack.delivery_count),
                word(b"FORCE"),
                word(b"JUSTID"),
                word(b"LASTID"),
                // Delivered in order past the group's last ID, each moved it to itself.
                id.clone(),
            ]);
        }
    }
    Some((out, silent))
}

/// The keys a propagated command names (`propagated`'s forms).
fn keys_of(cmd: &[Bytes]) -> impl Iterator<Item = &Bytes> {
    let is = |s: &str| cmd[0].eq_ignore_ascii_case(s.as_bytes());
    let (step, take) = if is("mset") || is("msetnx") {
        (2, usize::MAX)
    } else if is("del") || is("unlink") {
        (1, usize::MAX)
    } else if is("flushall") || is("flushdb") {
        (1, 0)
    } else {
        (1, 1)
    };
    // XGROUP SETID / CREATECONSUMER name the key after the subcommand.
    let skip = if is("xgroup") { 2 } else { 1 };
    cmd.iter().skip(skip).step_by(step).take(take)
}

/// Redis's replicationGetSlaveName: `ip:port` (the announced or peer ip, the listening port).
fn replica_name(conf: &Conf, peer_ip: &str) -> String {
    let ip = conf.ip_address.as_deref().unwrap_or(peer_ip);
    if conf.listening_port != 0 {
        format!("{ip}:{}", conf.listening_port)
    } else {
        format!("{ip}:<unknown-replica-port>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the stream carries for one unit, through the backlog.
    fn fed(dbs: &[Db], keys: &[&'static [u8]]) -> String {
        let mut m = Master {
            backlog: Some(Backlog::new(1 << 20, 1)),
            ..Default::default()
        };
        let r = ChangeRecord {
            keys: keys.iter().map(|k| (0, Bytes::from_static(k))).collect(),
            ..Default::default()
        };
        m.feed_unit(dbs, &r);
        String::from_utf8(m.backlog.as_ref().unwrap().since(1).unwrap()).unwrap()
    }

    #[test]
    fn a_unit_is_applied_at_once_by_the_replica() {
        let mut dbs = vec![Db::default()];
        let mut h = crate::store::hash::HashValue::default();
        h.insert(b"client:1", b"1");
        dbs[0].set(b"rlock", Value::Hash(h), 5_000);
        dbs[0].set(b"lock", Value::Str(Bytes::from_static(b"t")), 7_000);
        let cmd = |args: &[&[u8]]| {
            let mut v = Vec::new();
            emit::command(&mut v, args);
            String::from_utf8(v).unwrap()
        };
        // A hash (a Redisson lock) is DEL + HSET + PEXPIREAT: one transaction.
        let want = [
            cmd(&[b"SELECT", b"0"]),
            cmd(&[b"MULTI"]),
            cmd(&[b"DEL", b"rlock"]),
            cmd(&[b"HSET", b"rlock", b"client:1", b"1"]),
            cmd(&[b"PEXPIREAT", b"rlock", b"5000"]),
            cmd(&[b"EXEC"]),
        ];
        assert_eq!(fed(&dbs, &[b"rlock"]), want.concat());
        // A string lock is one command; a released one is DEL.
        let want = [
            cmd(&[b"SELECT", b"0"]),
            cmd(&[b"SET", b"lock", b"t", b"PXAT", b"7000"]),
        ];
        assert_eq!(fed(&dbs, &[b"lock"]), want.concat());
        let want = [cmd(&[b"SELECT", b"0"]), cmd(&[b"DEL", b"gone"])];
        assert_eq!(fed(&dbs, &[b"gone"]), want.concat());
        // Several keys: one transaction, its database selected before MULTI (as Redis).
        let want = [
            cmd(&[b"SELECT", b"0"]),
            cmd(&[b"MULTI"]),
            cmd(&[b"SET", b"lock", b"t", b"PXAT", b"7000"]),
            cmd(&[b"DEL", b"gone"]),
            cmd(&[b"EXEC"]),
        ];
        assert_eq!(fed(&dbs, &[b"lock", b"gone"]), want.concat());
    }

    #[test]
    fn writes_go_as_redis_propagates_them_when_they_are_the_whole_unit() {
        let b = |s: &'static str| Bytes::from_static(s.as_bytes());
        let mut dbs = vec![Db::default()];
        dbs[0].set(b"lock", Value::Str(b("t")), 9_000);
        dbs[0].set(b"n", Value::Str(b("2")), 0);
        let mut m = Master {
            backlog: Some(Backlog::new(1 << 20, 1)),
            ..Default::default()
        };
        let unit = |keys: &[&'static str]| ChangeRecord {
            keys: keys.iter().map(|k| (0, b(k))).collect(),
            ..Default::default()
        };
        let text = |m: &Master, from: u64| {
            String::from_utf8(m.backlog.as_ref().unwrap().since(from).unwrap()).unwrap()
        };
        // PEXPIRE as PEXPIREAT of the deadline it set; INCR as itself.
        m.note(
            "pexpire",
            0,
            &[b("PEXPIRE"), b("lock"), b("5000")],
            &dbs,
            None,
        );
        m.note("incr", 0, &[b("INCR"), b("n")], &dbs, None);
        m.feed_unit(&dbs, &unit(&["lock", "n"]));
        assert_eq!(
            text(&m, 1),
            "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*1\r\n$5\r\nMULTI\r\n*3\r\n$9\r\nPEXPIREAT\r\n$4\r\nlock\r\n$4\r\n9000\r\n*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n*1\r\n$4\r\nEXEC\r\n"
        );
        // A change no recorded command names (a key a script's unknown command wrote): the
        // unit's states.
        let at = m.offset + 1;
        m.note("incr", 0, &[b("INCR"), b("n")], &dbs, None);
        m.feed_unit(&dbs, &unit(&["n", "lock"]));
        assert!(text(&m, at).contains("PXAT"), "{}", text(&m, at));
        // A write of an unknown form makes the whole unit states.
        let at = m.offset + 1;
        m.note("sinterstore", 0, &[b("SINTERSTORE"), b("n")], &dbs, None);
        m.note("incr", 0, &[b("INCR"), b("n")], &dbs, None);
        m.feed_unit(&dbs, &unit(&["n"]));
        assert_eq!(text(&m, at), "*3\r\n$3\r\nSET\r\n$1\r\nn\r\n$1\r\n2\r\n");
        // A key expired under the command: states (the replica has not deleted it yet).
        let at = m.offset + 1;
        dbs[0].expired_total += 1;
        m.note("incr", 0, &[b("INCR"), b("n")], &dbs, None);
        m.feed_unit(&dbs, &unit(&["n"]));
        assert_eq!(text(&m, at), "*3\r\n$3\r\nSET\r\n$1\r\nn\r\n$1\r\n2\r\n");
        // A PUBLISH on a stream that has selected nothing yet selects first.
        let mut fresh = Master {
            backlog: Some(Backlog::new(1 << 20, 1)),
            ..Default::default()
        };
        let publish = ChangeRecord {
            published: vec![(false, b("ch"), b("hi"))],
            ..Default::default()
        };
        fresh.feed_unit(&dbs, &publish);
        assert_eq!(
            text(&fresh, 1),
            "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$7\r\nPUBLISH\r\n$2\r\nch\r\n$2\r\nhi\r\n"
        );
        // Keys that only expired: one DEL each, outside a transaction.
        let at = m.offset + 1;
        dbs[0].expired_total += 2;
        m.feed_unit(&dbs, &unit(&["x", "y"]));
        assert_eq!(
            text(&m, at),
            "*2\r\n$3\r\nDEL\r\n$1\r\nx\r\n*2\r\n$3\r\nDEL\r\n$1\r\ny\r\n"
        );
    }

    #[test]
    fn pops_and_expiries_take_redis_forms() {
        let b = |s: &'static str| Bytes::from_static(s.as_bytes());
        let mut db = Db::default();
        db.set(b"s", Value::Str(b("x")), 0);
        db.set(b"k", Value::Str(b("v")), 8_000);
        let show = |c: Option<Vec<Bytes>>| {
            c.map(|c| {
                c.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
        };
        let got = |argv: &[&'static str], reply: Option<&Frame>| {
            let argv: Vec<Bytes> = argv.iter().map(|a| b(a)).collect();
            show(propagated(
                &argv[0]
                    .to_ascii_lowercase()
                    .iter()
                    .map(|&c| c as char)
                    .collect::<String>(),
                &argv,
                &db,
                reply,
            ))
        };
        assert_eq!(
            got(&["SPOP", "s"], Some(&Frame::Bulk(b("m")))).as_deref(),
            Some("SREM s m")
        );
        let two = Frame::Array(vec![Frame::Bulk(b("m")), Frame::Bulk(b("n"))]);
        assert_eq!(
            got(&["SPOP", "s", "2"], Some(&two)).as_deref(),
            Some("SREM s m n")
        );
        assert_eq!(
            got(&["SPOP", "gone", "5"], Some(&two)).as_deref(),
            Some("DEL gone")
        );
        let popped = Frame::Array(vec![Frame::Bulk(b("s")), two]);
        let zmpop = got(
            &["ZMPOP", "2", "a", "s", "MAX", "COUNT", "9"],
            Some(&popped),
        );
        assert_eq!(zmpop.as_deref(), Some("ZPOPMAX s 2"));
        let blmpop = got(&["BLMPOP", "0", "1", "s", "LEFT"], Some(&popped));
        assert_eq!(blmpop.as_deref(), Some("LPOP s 2"));
        assert_eq!(
            got(&["SET", "k", "v", "px", "5"], None).as_deref(),
            Some("SET k v PXAT 8000")
        );
        assert_eq!(
            got(&["EXPIRE", "k", "5", "NX"], None).as_deref(),
            Some("PEXPIREAT k 8000")
        );
        assert_eq!(
            got(&["EXPIRE", "gone", "-1"], None).as_deref(),
            Some("DEL gone")
        );
        assert_eq!(
            got(&["GETEX", "k", "PERSIST"], None).as_deref(),
            Some("PERSIST k")
        );
        assert_eq!(got(&["SINTERSTORE", "k", "a"], None), None);
    }

    #[test]
    fn backlog_keeps_the_last_bytes_and_serves_offsets() {
        let mut b = Backlog::new(16 * 1024, 1);
        let data: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        b.feed(&data[..10_000]);
        assert_eq!(b.since(1).unwrap(), &data[..10_000]);
        assert_eq!(b.since(10_001).unwrap(), Vec::<u8>::new());
        assert!(b.since(10_002).is_none());
        b.feed(&data[10_000..]);
        assert_eq!(b.histlen, 16 * 1024);
        assert_eq!(b.first, 40_001 - 16 * 1024);
        assert!(b.since(b.first - 1).is_none());
        assert_eq!(b.since(30_001).unwrap(), &data[30_000..]);
        b.resize(20_000);
        assert_eq!(b.since(30_001).unwrap(), &data[30_000..]);
        b.feed(&data[..5]);
        assert_eq!(&b.since(40_001).unwrap()[..], &data[..5]);
        // One feed larger than the backlog.
        let mut c = Backlog::new(16 * 1024, 1);
        c.feed(&data[..10]);
        c.feed(&data[10..]);
        assert_eq!(c.first, 40_001 - 16 * 1024);
        assert_eq!(c.since(c.first).unwrap(), &data[40_000 - 16 * 1024..]);
    }
}
