//! `LogStore`: raft-rs's `Storage` over its `MemStorage` (the in-memory cache raft reads from)
//! plus the durable files of one node, in one directory:
//! - `raft.log`: records `u32 len | u32 crc32 | Entry` (protobuf), appended and fsynced once per
//!   round (group commit). A record whose index is ≤ the last one replayed overwrites the log
//!   from there (a new leader's entries replace an old term's). A torn last record is dropped.
//!   Zeros follow the last record: a helper thread (`Ahead`) writes and fsyncs them ahead of the
//!   log's end, so a round's fdatasync writes only its records and a cache flush. Appending to
//!   a file that grows makes every fdatasync also write the inode and the allocation metadata
//!   (ext4 without a journal: two more synchronous I/Os), on the follower's ack path and the
//!   leader's: twice the median fdatasync time and a long tail on this VM's disk under load.
//! - `raft.state`: HardState, ConfState and the members' addresses, replaced atomically.
//! - `snapshot.aof` + `snapshot.meta`: the compacted state (AOF base format, opaque here) and its
//!   index, term, ConfState and addresses.

use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};

use crate::persist::aof::write_atomically;

const LOG: &str = "raft.log";
const STATE: &str = "raft.state";
const SNAP_DATA: &str = "snapshot.aof";
const SNAP_META: &str = "snapshot.meta";
const SNAP_NEXT: &str = "snapshot.aof.next";

/// Record header: length and checksum of the protobuf body. An all-zero header is the zeroed
/// space after the last record (a record's body is never empty).
const HEADER: usize = 8;
/// Zeroed space kept ahead of the log's end: asked for when less than `AHEAD_LOW` is left, in
/// steps of `AHEAD_STEP` (at a few MB/s of log, a step every second or so, off the loop thread).
const AHEAD_LOW: u64 = 1 << 20;
const AHEAD_STEP: u64 = 2 << 20;

/// Node id → "host port peerport", carried by conf-change contexts and kept beside the
/// ConfState so that a restarted or snapshot-installed node still knows where everyone is.
pub type Addrs = BTreeMap<u64, String>;

fn corrupt(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

pub struct LogStore {
    mem: MemLog,
    dir: PathBuf,
    log: Arc<File>,
    /// Where the next record goes: the end of the last one (zeros may follow).
    end: u64,
    ahead: Ahead,
    writer: Writer,
    /// Ready numbers handed to `writer` (the last one), and the last reported durable.
    submitted: u64,
    reported: u64,
    /// Encoded records not yet written: one write and one fsync per round.
    pending: Vec<u8>,
    /// raft.state must be rewritten before this round's persisted messages leave.
    state_dirty: bool,
    /// The last snapshot in the form a lagging follower is sent (`join_wire`: the members'
    /// addresses, then the state from `snap_at` on), built once per snapshot: raft asks for it
    /// on every retry, and handing it out is a reference count.
    snap: Snapshot,
    snap_at: usize,
    /// A compaction's snapshot being written to disk by a helper thread (the loop goes on).
    snap_write: Option<SnapWrite>,
    pub(crate) addrs: Addrs,
    /// raft asked for a snapshot this store could not give (see `snapshot`).
    wanted: std::cell::Cell<bool>,
}

impl LogStore {
    /// Opens (or creates) the files in `dir`. With nothing on disk and `bootstrap` non-empty, the
    /// node starts from a snapshot at index 1 whose ConfState holds those voters, as TiKV does:
    /// the log never names the initial voters, so a node that joins later learns them only from
    /// a snapshot's ConfState.
    pub fn open(dir: &Path, bootstrap: &Addrs) -> io::Result<LogStore> {
        std::fs::create_dir_all(dir)?;
        let mut mem = MemLog::default();
        let mut meta = SnapshotMetadata::default();
        let mut data = Vec::new();
        let mut addrs = Addrs::new();
        let meta_path = dir.join(SNAP_META);
        if meta_path.exists() {
            (meta, data, addrs) = read_snapshot(dir)?;
        } else if !bootstrap.is_empty() && !dir.join(STATE).exists() {
            meta.index = 1;
            meta.term = 1;
            meta.set_conf_state(ConfState::from((
                bootstrap.keys().copied(),
                Vec::<u64>::new(),
            )));
            addrs = bootstrap.clone();
            write_snapshot(dir, &meta, &data, &addrs)?;
        }
        let wire = join_wire(&addrs, &data);
        let snap_at = wire.len() - data.len();
        drop(data);
        let snap = snapshot(meta, wire);
        if snap.get_metadata().index > 0 {
            mem.apply_snapshot(snap.get_metadata()).map_err(corrupt)?;
        }
        let snap_index = snap.get_metadata().index;
        let log_path = dir.join(LOG);
        let mut log = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&log_path)?;
        let (entries, end) = replay(&mut log, &log_path)?;
        let log = Arc::new(log);
        let ahead = Ahead::start(log.clone(), end)?;
        let writer = Writer::start(ahead.shared.clone())?;
        // The log may have just been created: its name must survive a power loss too.
        File::open(dir)?.sync_all()?;
        {
            let core = &mut mem;
            let mut last = snap_index;
            for e in entries {
                // Entries up to the snapshot survive a crash between writing the snapshot and
                // rewriting the log; the snapshot already holds them.
                if e.index <= snap_index {
                    continue;
                }
                if e.index > last + 1 {
                    return Err(corrupt(format!(
                        "raft.log: entry {} does not follow entry {last}",
                        e.index
                    )));
                }
                // An index at or below `last` is a later leader's entry: append cuts the log
                // there, as raft did when it first received it.
                last = e.index;
                core.append(&[e]).map_err(corrupt)?;
            }
        }
        let state_path = dir.join(STATE);
        if state_path.exists() {
            let (mut hs, cs, a) = decode_state(&std::fs::read(&state_path)?)?;
            let last = mem.last_index();
            // The log is fsynced before the state in every round, so this is damage, and raft
            // would panic on it.
            if hs.commit > last {
                return Err(corrupt(format!(
                    "raft.state commits {} but raft.log ends at {last}",
                    hs.commit
                )));
            }
            // Every state write after a snapshot (compaction writes one first, installation
            // one right after) carries a commit ≥ its index: a lower commit means the crash fell
            // between installing a snapshot and writing the state, and the snapshot's
            // membership is the newer one.
            let state_is_newer = hs.commit >= snap_index;
            hs.commit = hs.commit.max(snap_index);
            hs.term = hs.term.max(snap.get_metadata().term);
            mem.hs = hs;
            if state_is_newer && cs != ConfState::default() {
                mem.cs = cs;
                addrs = a;
            }
        }
        Ok(LogStore {
            mem,
            dir: dir.to_path_buf(),
            log,
            end,
            ahead,
            writer,
            submitted: 0,
            reported: 0,
            pending: Vec::new(),
            state_dirty: false,
            snap,
            snap_at,
            snap_write: None,
            addrs,
            wanted: Default::default(),
        })
    }

    pub fn hard_state(&self) -> HardState {
        self.mem.hs.clone()
    }

    pub fn conf_state(&self) -> ConfState {
        self.mem.cs.clone()
    }

    pub fn snapshot_index(&self) -> u64 {
        self.snap.get_metadata().index
    }

    /// True once since raft last asked for a snapshot newer than the stored one.
    pub fn take_snapshot_wanted(&self) -> bool {
        self.wanted.replace(false)
    }

    pub fn snapshot_data(&self) -> &[u8] {
        &self.snap.data[self.snap_at..]
    }

    /// What a snapshot's wire form starts with (the members' addresses): a snapshot is built
    /// behind it, so handing it to raft copies nothing.
    pub fn wire_prefix(&self) -> Vec<u8> {
        join_wire(&self.addrs, &[])
    }

    /// Memory the log's entries take (compaction by size).
    pub fn log_bytes(&self) -> u64 {
        self.mem.bytes
    }

    /// Bytes of the last snapshot's state.
    pub fn snapshot_bytes(&self) -> u64 {
        (self.snap.data.len() - self.snap_at) as u64
    }

    /// When the first entry after the snapshot was appended (within a second; None: there is
    /// none): compaction by age.
    pub fn unsnapshotted_since(&self) -> Option<Instant> {
        let after = self.snapshot_index() + 1;
        if after > self.mem.last_index() {
            return None;
        }
        self.mem.appended_at(after)
    }

    /// A compaction's snapshot is still being written.
    pub fn compacting(&self) -> bool {
        self.snap_write.is_some()
    }

    /// Buffers entries for the next `sync`; raft reads them from memory at once.
    pub fn append(&mut self, entries: &[Entry]) -> io::Result<()> {
        for e in entries {
            encode_record(&mut self.pending, e)?;
        }
        self.mem.append(entries).map_err(corrupt)
    }

    /// Term and vote must be durable before this node's votes and acks leave, so a change marks
    /// the file for rewrite. A commit-only change is kept in memory and written with the next
    /// rewrite: the state machine is rebuilt from the snapshot on start, and raft re-learns the
    /// commit index from the leader, so a stale commit on disk only delays applying; writing it
    /// every round would add two fsyncs to each one.
    pub fn set_hard_state(&mut self, hs: &HardState) {
        let old = &self.mem.hs;
        if old.term != hs.term || old.vote != hs.vote {
            self.state_dirty = true;
        }
        self.mem.hs = hs.clone();
    }

    pub fn set_commit(&mut self, commit: u64) {
        self.mem.hs.commit = commit;
    }

    pub fn set_conf_state(&mut self, cs: ConfState) {
        self.mem.cs = cs;
        self.state_dirty = true;
    }

    pub fn set_addr(&mut self, id: u64, addr: Option<String>) {
        match addr {
            Some(a) => self.addrs.insert(id, a),
            None => self.addrs.remove(&id),
        };
        self.state_dirty = true;
    }

    /// Hands the buffered records to the writer thread as ready `number` (a leader's round,
    /// see `Cluster::on_round`); `take_durable` reports it once written and fsynced. raft.state,
    /// when it must change, is written here after the writes before it are durable (its commit
    /// must never be ahead of the log on disk).
    pub fn submit(&mut self, number: u64) -> io::Result<()> {
        if self.state_dirty {
            self.drain()?;
            self.sync()?;
        }
        let at = self.end;
        let data = std::mem::take(&mut self.pending);
        self.end = at + data.len() as u64;
        self.submitted = number;
        self.writer.push(Job {
            file: self.log.clone(),
            at,
            data,
            number,
        });
        Ok(())
    }

    /// The ready number of the last write handed to the writer.
    pub fn submitted(&self) -> u64 {
        self.submitted
    }

    /// Writes handed to the writer and not yet durable.
    pub fn in_flight(&self) -> bool {
        self.submitted > self.reported
    }

    /// The highest ready number made durable since the last call; Err if a write failed.
    pub fn take_durable(&mut self) -> io::Result<Option<u64>> {
        let done = self.writer.done()?;
        if done > self.reported {
            self.reported = done;
            return Ok(Some(done));
        }
        Ok(None)
    }

    /// Waits until every write handed to the writer is durable (before a synchronous write,
    /// whose order must follow theirs).
    pub fn drain(&mut self) -> io::Result<()> {
        if self.submitted > self.writer.done()? {
            self.writer.wait(self.submitted)?;
        }
        Ok(())
    }

    /// Called when the writer makes a write durable (the loop's waker).
    pub fn set_waker(&mut self, wake: Box<dyn Fn() + Send>) {
        self.writer.set_waker(wake);
    }

    /// Makes the round durable: the buffered records (one write, one fdatasync) and, if term,
    /// vote or configuration changed, raft.state. Persisted messages may leave after this.
    pub fn sync(&mut self) -> io::Result<()> {
        self.drain()?;
        if !self.pending.is_empty() {
            let at = self.end;
            let end = at + self.pending.len() as u64;
            self.ahead.claim(end);
            self.log.write_all_at(&self.pending, at)?;
            self.log.sync_data()?;
            self.pending.clear();
            self.end = end;
            self.ahead.want(end);
        }
        if self.state_dirty {
            let data = encode_state(&self.hard_state(), &self.conf_state(), &self.addrs)?;
            write_atomically(&self.dir.join(STATE), &data)?;
            self.state_dirty = false;
        }
        Ok(())
    }

    /// Installs a snapshot received from the leader: files first (so a crash leaves either the
    /// old state or the new one), then the in-memory log is replaced and raft.log emptied.
    pub fn install_snapshot(&mut self, wire: &Snapshot) -> io::Result<()> {
        self.drain()?;
        // A compaction's files being written would race with these; its snapshot is older.
        if let Some(w) = self.snap_write.take() {
            let _ = w.join();
        }
        let (addrs, data) = split_wire(&wire.data)?;
        write_snapshot(&self.dir, wire.get_metadata(), data, &addrs)?;
        self.snap_at = wire.data.len() - data.len();
        self.mem
            .apply_snapshot(wire.get_metadata())
            .map_err(corrupt)?;
        self.snap = wire.clone();
        self.addrs = addrs;
        self.pending.clear();
        self.rewrite_log(&[])?;
        self.state_dirty = true;
        self.sync()
    }

    /// Compacts the log up to `index` (applied, ≤ commit): `wire` is `wire_prefix` followed
    /// by the state after applying it. raft is handed the new snapshot at once; its files are written by a helper thread
    /// (hundreds of MB for a large dataset: seconds of fsync the loop must not wait for), and
    /// once they are durable `finish_compaction` rewrites raft.log without the entries they
    /// cover. The entries from `keep` on stay in memory (a follower briefly behind catches up
    /// from them rather than from the whole snapshot): the newest at or before `index`, at
    /// most `retain` bytes and `retain_entries` of them. False: not started (nothing new to
    /// cover, the previous snapshot is still being written, or the membership changed since
    /// the prefix was taken).
    pub fn compact(
        &mut self,
        index: u64,
        wire: Vec<u8>,
        retain: u64,
        retain_entries: u64,
    ) -> io::Result<bool> {
        let prefix = self.wire_prefix();
        if index <= self.snapshot_index() || self.snap_write.is_some() || !wire.starts_with(&prefix)
        {
            return Ok(false);
        }
        self.drain()?;
        let term = self.mem.term(index).map_err(corrupt)?;
        let mut meta = SnapshotMetadata {
            index,
            term,
            ..Default::default()
        };
        meta.set_conf_state(self.conf_state());
        // The state is written with a commit ≥ `index` before the snapshot can exist (see
        // `open`), and the buffered records reach the file before it is rewritten.
        self.state_dirty = true;
        self.sync()?;
        self.snap_at = prefix.len();
        let old = std::mem::replace(&mut self.snap, snapshot(meta, wire));
        let keep = self.mem.keep_from(index, retain, retain_entries);
        let dropped = self.mem.compact_to(keep).map_err(corrupt)?;
        let (dir, snap, at, addrs) = (
            self.dir.clone(),
            self.snap.clone(),
            self.snap_at,
            self.addrs.clone(),
        );
        let thread = std::thread::Builder::new()
            .name("raft-snapshot".into())
            .spawn(move || {
                // Freed here rather than on the loop (a million entries: ~0.2 s).
                drop((old, dropped));
                write_snapshot(&dir, snap.get_metadata(), &snap.data[at..], &addrs)
            })?;
        self.snap_write = Some(SnapWrite {
            index,
            thread: Some(thread),
        });
        Ok(true)
    }

    /// Once a compaction's snapshot is durable: raft.log is rewritten with only the entries
    /// after it. A failed write leaves the old snapshot and the whole log on disk (a restart
    /// recovers from them) and is logged; the next compaction tries again.
    /// `wait`: even if the write is still under way (tests; a loop never waits).
    pub fn finish_compaction(&mut self, wait: bool) -> io::Result<()> {
        if !wait && !self.snap_write.as_ref().is_some_and(SnapWrite::finished) {
            return Ok(());
        }
        let Some(w) = self.snap_write.take() else {
            return Ok(());
        };
        let index = w.index;
        if let Err(e) = w.join() {
            tracing::warn!("Cannot write the cluster snapshot at {index}: {e}");
            return Ok(());
        }
        let started = Instant::now();
        self.drain()?;
        self.sync()?;
        let last = self.mem.last_index();
        let tail = if last > index {
            self.mem
                .entries(index + 1, last + 1, None)
                .map_err(corrupt)?
        } else {
            Vec::new()
        };
        self.rewrite_log(&tail)?;
        // On the loop (its appends must follow the rewrite): worth watching on a slow disk.
        tracing::info!(
            "Cluster log rewritten after the snapshot at {index}: {} entries kept, in {} ms",
            tail.len(),
            started.elapsed().as_millis()
        );
        Ok(())
    }

    fn rewrite_log(&mut self, tail: &[Entry]) -> io::Result<()> {
        let mut buf = Vec::new();
        for e in tail {
            encode_record(&mut buf, e)?;
        }
        let path = self.dir.join(LOG);
        write_atomically(&path, &buf)?;
        self.log = Arc::new(OpenOptions::new().write(true).read(true).open(&path)?);
        self.end = buf.len() as u64;
        self.ahead.switch(self.log.clone(), self.end);
        Ok(())
    }
}

fn snapshot(meta: SnapshotMetadata, data: Vec<u8>) -> Snapshot {
    let mut s = Snapshot {
        data: data.into(),
        ..Default::default()
    };
    s.set_metadata(meta);
    s
}

/// A compaction's snapshot files being written beside the loop (`LogStore::compact`).
struct SnapWrite {
    index: u64,
    thread: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl SnapWrite {
    fn finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    fn join(mut self) -> io::Result<()> {
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("the snapshot writer panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for SnapWrite {
    /// The files must not change after their owner is gone (a node reopening them).
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn encode_record(buf: &mut Vec<u8>, e: &Entry) -> io::Result<()> {
    let body = e.write_to_bytes().map_err(corrupt)?;
    let len = u32::try_from(body.len()).map_err(|_| corrupt("raft entry over 4 GiB"))?;
    buf.extend_from_slice(&len.to_le_bytes());
    buf.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    buf.extend_from_slice(&body);
    Ok(())
}

/// Reads every record of raft.log, and where the next one goes. The records end at an all-zero
/// header (the zeroed space `Ahead` keeps) or at the end of the file. A record cut short or
/// failing its checksum with only zeros after it may be a write the crash interrupted (never
/// fsynced, never acknowledged): its bytes are zeroed (or the file cut there). The same damage
/// followed by anything else is corruption, an error.
///
/// A torn write only ever leaves bytes unwritten, and unwritten bytes read as zeros (the space
/// is zeroed ahead, or lies past the old end of the file). So the last record is refused, not
/// dropped, when it cannot be torn: its data is whole under another length (a damaged length
/// field), or its body lies inside the file and holds no zero byte (a damaged checksum or a
/// damaged body byte; an entry's protobuf holds no zero byte unless its payload does). What
/// remains ambiguous, and is dropped as torn: damage that turns a byte of the last record's
/// body into zero, or damage to a last record whose payload holds a zero byte.
fn replay(log: &mut File, path: &Path) -> io::Result<(Vec<Entry>, u64)> {
    let mut data = Vec::new();
    log.read_to_end(&mut data)?;
    let mut out = Vec::new();
    let mut at = 0;
    let zero_from = |from: usize| data.get(from..).is_none_or(|r| r.iter().all(|&b| b == 0));
    while at < data.len() {
        let rest = &data[at..];
        if rest.len() >= HEADER && rest[..HEADER].iter().all(|&b| b == 0) {
            if !zero_from(at) {
                return Err(corrupt(format!(
                    "{}: data after the end of the log at byte {at}",
                    path.display()
                )));
            }
            break;
        }
        let body = (rest.len() >= HEADER).then(|| {
            let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
            (len, crc)
        });
        let whole = body.and_then(|(len, crc)| {
            let end = HEADER.checked_add(len)?;
            let b = rest.get(HEADER..end)?;
            Some((b, crc, end))
        });
        match whole {
            Some((b, crc, end)) if crc32fast::hash(b) == crc && !b.is_empty() => {
                let e = Entry::parse_from_bytes(b)
                    .map_err(|e| corrupt(format!("{}: record at {at}: {e}", path.display())))?;
                out.push(e);
                at += end;
            }
            Some((_, _, end)) if !zero_from(at + end) => {
                return Err(corrupt(format!(
                    "{}: checksum mismatch in the record at byte {at}",
                    path.display()
                )));
            }
            Some((b, _, _)) if !b.contains(&0) => {
                return Err(corrupt(format!(
                    "{}: checksum mismatch in the last record at byte {at}, which holds no \
                     unwritten (zero) byte: damage, not a torn write",
                    path.display()
                )));
            }
            _ => {
                if let Some(len) = (rest.len() >= HEADER)
                    .then(|| intact_shorter(rest))
                    .flatten()
                {
                    return Err(corrupt(format!(
                        "{}: damaged length field in the record at byte {at} (its data and \
                         checksum are intact at length {len}): damage, not a torn write",
                        path.display()
                    )));
                }
                tracing::warn!(
                    "{}: dropping a torn last record at byte {at}",
                    path.display()
                );
                // Zeroed rather than cut, so the space stays allocated; a shorter record
                // written there later must not be followed by the torn one's bytes.
                let last = data.iter().rposition(|&b| b != 0).map_or(at, |p| p + 1);
                log.write_all_at(&vec![0; last - at], at as u64)?;
                log.sync_all()?;
                break;
            }
        }
    }
    Ok((out, at as u64))
}

/// For a record (`rest` from its header on) whose checksum fails: the length at which its body
/// does match the checksum and parses as an entry, if there is one other than the header's.
/// A torn write leaves the header as written and zeros where the body was not written, so a
/// record whose data is whole under another length had its length field damaged after it
/// was written (and possibly fsynced and acknowledged): it must be refused, not dropped as a
/// torn tail. Only lengths up to a few bytes past the last non-zero byte are tried (a body
/// may end in zeros: an EXTEND entry's context): a chance match of a torn record's checksum
/// needs a 32-bit collision and a valid entry.
fn intact_shorter(rest: &[u8]) -> Option<usize> {
    const ZERO_TAIL: usize = 16;
    let claimed = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
    let body = &rest[HEADER..];
    let nonzero = body.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
    let upto = body.len().min(nonzero + ZERO_TAIL);
    let mut h = crc32fast::Hasher::new();
    for (i, &b) in body[..upto].iter().enumerate() {
        h.update(&[b]);
        let len = i + 1;
        if len != claimed
            && h.clone().finalize() == crc
            && Entry::parse_from_bytes(&body[..len]).is_ok()
        {
            return Some(len);
        }
    }
    None
}

/// Zeroed, allocated space ahead of the log's end, written by a helper thread so the loop's
/// fdatasync never grows the file (see the module doc). The loop `claim`s each write's end
/// before making it, and the helper only ever writes beyond the highest claim, so zeros never
/// land on records.
struct Ahead {
    shared: Arc<(Mutex<AheadState>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct AheadState {
    file: Arc<File>,
    /// Bumped when the log file is replaced: a job for the old one is not counted.
    generation: u64,
    /// Zeroed (and fsynced) or written by the loop up to here.
    ready: u64,
    /// Zeros wanted up to here.
    want: u64,
    /// The helper is writing zeros from this offset (the loop must not write past it).
    busy_from: Option<u64>,
    stop: bool,
}

fn lock_ahead(m: &Mutex<AheadState>) -> MutexGuard<'_, AheadState> {
    // Nothing panics while holding it; if something did, the numbers are still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Ahead {
    fn start(file: Arc<File>, end: u64) -> io::Result<Ahead> {
        let ready = file.metadata()?.len().max(end);
        let shared = Arc::new((
            Mutex::new(AheadState {
                file,
                generation: 0,
                ready,
                want: end + AHEAD_STEP,
                busy_from: None,
                stop: false,
            }),
            Condvar::new(),
        ));
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("raft-log-ahead".into())
            .spawn(move || run_ahead(&s))?;
        Ok(Ahead {
            shared,
            thread: Some(thread),
        })
    }

    fn claim(&self, end: u64) {
        ahead_claim(&self.shared, end);
    }

    fn want(&self, end: u64) {
        ahead_want(&self.shared, end);
    }

    /// The log file was replaced by one that ends at `end`.
    fn switch(&self, file: Arc<File>, end: u64) {
        let (m, cv) = &*self.shared;
        let mut st = lock_ahead(m);
        st.file = file;
        st.generation += 1;
        st.ready = end;
        st.want = end + AHEAD_STEP;
        cv.notify_all();
    }
}

/// A write up to `end` is about to be made: waits (rarely: only when the log outran the
/// helper) for a zeroing job under way beyond the log's end to finish.
fn ahead_claim(shared: &(Mutex<AheadState>, Condvar), end: u64) {
    let (m, cv) = shared;
    let mut st = lock_ahead(m);
    while st.busy_from.is_some_and(|from| end > from) {
        st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
    }
    st.ready = st.ready.max(end);
}

/// The log now ends at `end`: asks for more zeros when few are left.
fn ahead_want(shared: &(Mutex<AheadState>, Condvar), end: u64) {
    let (m, cv) = shared;
    let mut st = lock_ahead(m);
    if st.ready < end + AHEAD_LOW && st.want < end + AHEAD_STEP {
        st.want = end + AHEAD_STEP;
        cv.notify_all();
    }
}

/// A leader's log writes, made durable by a helper thread while the loop goes on: the leader's
/// own fsync is one of the three a commit can count on, and with it on the loop thread every
/// round's replies and the followers' acks waited for its tail (p99 5 ms, max 26 ms measured on
/// a loaded VM) even when both followers had answered.
struct Writer {
    shared: Arc<(Mutex<WriterState>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Job {
    file: Arc<File>,
    at: u64,
    data: Vec<u8>,
    number: u64,
}

struct WriterState {
    jobs: std::collections::VecDeque<Job>,
    /// The highest ready number whose records are durable.
    done: u64,
    failed: Option<String>,
    stop: bool,
    wake: Option<Box<dyn Fn() + Send>>,
}

fn lock_writer(m: &Mutex<WriterState>) -> MutexGuard<'_, WriterState> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Writer {
    fn start(ahead: Arc<(Mutex<AheadState>, Condvar)>) -> io::Result<Writer> {
        let shared = Arc::new((
            Mutex::new(WriterState {
                jobs: Default::default(),
                done: 0,
                failed: None,
                stop: false,
                wake: None,
            }),
            Condvar::new(),
        ));
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("raft-log-write".into())
            .spawn(move || run_writer(&s, &ahead))?;
        Ok(Writer {
            shared,
            thread: Some(thread),
        })
    }

    fn push(&self, job: Job) {
        let (m, cv) = &*self.shared;
        lock_writer(m).jobs.push_back(job);
        cv.notify_all();
    }

    fn done(&self) -> io::Result<u64> {
        let st = lock_writer(&self.shared.0);
        match &st.failed {
            Some(e) => Err(io::Error::other(e.clone())),
            None => Ok(st.done),
        }
    }

    fn wait(&self, number: u64) -> io::Result<()> {
        let (m, cv) = &*self.shared;
        let mut st = lock_writer(m);
        while st.done < number && st.failed.is_none() {
            st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        match &st.failed {
            Some(e) => Err(io::Error::other(e.clone())),
            None => Ok(()),
        }
    }

    fn set_waker(&self, wake: Box<dyn Fn() + Send>) {
        lock_writer(&self.shared.0).wake = Some(wake);
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let (m, cv) = &*self.shared;
        lock_writer(m).stop = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run_writer(shared: &(Mutex<WriterState>, Condvar), ahead: &(Mutex<AheadState>, Condvar)) {
    let (m, cv) = shared;
    loop {
        let jobs: Vec<Job> = {
            let mut st = lock_writer(m);
            while !st.stop && st.jobs.is_empty() {
                st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            // Jobs queued at stop are finished first: their rounds were acknowledged to raft
            // as submitted, and the files must not change after the owner is gone.
            if st.jobs.is_empty() {
                return;
            }
            st.jobs.drain(..).collect()
        };
        // Every job queued meanwhile goes in one fdatasync (group commit across rounds).
        let mut result = Ok(());
        let mut end = 0;
        for j in jobs.iter().filter(|j| !j.data.is_empty()) {
            end = j.at + j.data.len() as u64;
            ahead_claim(ahead, end);
            result = result.and_then(|_| j.file.write_all_at(&j.data, j.at));
        }
        if let Some(last) = jobs.iter().rev().find(|j| !j.data.is_empty()) {
            result = result.and_then(|_| last.file.sync_data());
            ahead_want(ahead, end);
        }
        let number = jobs.iter().map(|j| j.number).max().unwrap_or(0);
        let mut st = lock_writer(m);
        match result {
            Ok(()) => st.done = st.done.max(number),
            Err(e) => st.failed = Some(format!("raft.log: {e}")),
        }
        cv.notify_all();
        if let Some(wake) = &st.wake {
            wake();
        }
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        let (m, cv) = &*self.shared;
        lock_ahead(m).stop = true;
        cv.notify_all();
        // A job under way is a few MB at most; the file must not change after its owner is
        // gone (a node reopening it, a test reading it).
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run_ahead(shared: &(Mutex<AheadState>, Condvar)) {
    let (m, cv) = shared;
    let zeros = vec![0u8; 256 << 10];
    loop {
        let (file, generation, from, to) = {
            let mut st = lock_ahead(m);
            while !st.stop && st.want <= st.ready {
                st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if st.stop {
                return;
            }
            st.busy_from = Some(st.ready);
            (st.file.clone(), st.generation, st.ready, st.want)
        };
        let mut at = from;
        let mut result = Ok(());
        while at < to && result.is_ok() {
            let n = (to - at).min(zeros.len() as u64) as usize;
            result = file.write_all_at(&zeros[..n], at);
            at += n as u64;
        }
        let result = result.and_then(|_| file.sync_data());
        let mut st = lock_ahead(m);
        st.busy_from = None;
        match result {
            Ok(()) if st.generation == generation => st.ready = st.ready.max(to),
            Ok(()) => {}
            Err(e) => {
                // The loop's own writes still grow the file: only slower. Not asked again
                // until the log's end passes what was wanted.
                tracing::warn!("raft.log: cannot zero space ahead of the log: {e}");
                st.want = st.ready;
            }
        }
        cv.notify_all();
    }
}

/// The indexes recorded in `dir`'s raft.log, in file order.
#[cfg(test)]
pub(super) fn log_indexes(dir: &Path) -> Vec<u64> {
    let path = dir.join(LOG);
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("raft.log");
    replay(&mut f, &path)
        .expect("replay")
        .0
        .iter()
        .map(|e| e.index)
        .collect()
}

/// Length-prefixed protobuf parts, then the addresses as `id addr` lines, then a crc32 of it all.
fn encode_parts(parts: &[Vec<u8>], addrs: &Addrs) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    for b in parts {
        let len = u32::try_from(b.len()).map_err(|_| corrupt("state over 4 GiB"))?;
        buf.extend_from_slice(&len.to_le_bytes());
        buf.extend_from_slice(b);
    }
    for (id, a) in addrs {
        buf.extend_from_slice(format!("{id} {a}\n").as_bytes());
    }
    let crc = crc32fast::hash(&buf);
    buf.extend_from_slice(&crc.to_le_bytes());
    Ok(buf)
}

/// Splits what `encode_parts` wrote into `n` protobuf bodies and the addresses.
fn decode_parts(data: &[u8], n: usize, what: &str) -> io::Result<(Vec<Vec<u8>>, Addrs)> {
    let bad = || corrupt(format!("{what}: damaged"));
    let split = data.len().checked_sub(4).ok_or_else(bad)?;
    let (body, crc) = data.split_at(split);
    if crc32fast::hash(body).to_le_bytes() != crc {
        return Err(bad());
    }
    let mut rest = body;
    let mut parts = Vec::new();
    for _ in 0..n {
        let len_bytes: [u8; 4] = rest
            .get(..4)
            .ok_or_else(bad)?
            .try_into()
            .map_err(|_| bad())?;
        let len = u32::from_le_bytes(len_bytes) as usize;
        let end = 4usize.checked_add(len).ok_or_else(bad)?;
        parts.push(rest.get(4..end).ok_or_else(bad)?.to_vec());
        rest = &rest[end..];
    }
    let text = std::str::from_utf8(rest).map_err(|_| bad())?;
    Ok((parts, parse_addrs(text).ok_or_else(bad)?))
}

fn encode_state(hs: &HardState, cs: &ConfState, addrs: &Addrs) -> io::Result<Vec<u8>> {
    let enc = |m: &dyn protobuf::Message| m.write_to_bytes().map_err(corrupt);
    encode_parts(&[enc(hs)?, enc(cs)?], addrs)
}

fn decode_state(data: &[u8]) -> io::Result<(HardState, ConfState, Addrs)> {
    let (parts, addrs) = decode_parts(data, 2, STATE)?;
    let hs = HardState::parse_from_bytes(&parts[0]).map_err(corrupt)?;
    let cs = ConfState::parse_from_bytes(&parts[1]).map_err(corrupt)?;
    Ok((hs, cs, addrs))
}

/// The data goes to `snapshot.aof.next` first, then the metadata (with the data's checksum)
/// replaces snapshot.meta atomically, then the data is renamed into place. Whatever point a
/// crash interrupts, `read_snapshot` finds a data file that matches the metadata.
fn write_snapshot(
    dir: &Path,
    meta: &SnapshotMetadata,
    data: &[u8],
    addrs: &Addrs,
) -> io::Result<()> {
    let next = dir.join(SNAP_NEXT);
    {
        let mut f = File::create(&next)?;
        f.write_all(data)?;
        f.sync_all()?;
    }
    let meta = meta.write_to_bytes().map_err(corrupt)?;
    let crc = crc32fast::hash(data).to_le_bytes().to_vec();
    write_atomically(&dir.join(SNAP_META), &encode_parts(&[meta, crc], addrs)?)?;
    std::fs::rename(&next, dir.join(SNAP_DATA))?;
    File::open(dir)?.sync_all()
}

/// A snapshot as sent to a peer: `u32 len | "id addr\n" lines | AOF data`.
fn join_wire(addrs: &Addrs, data: &[u8]) -> Vec<u8> {
    let text: String = addrs.iter().map(|(id, a)| format!("{id} {a}\n")).collect();
    let mut out = Vec::with_capacity(4 + text.len() + data.len());
    out.extend_from_slice(&(text.len() as u32).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(data);
    out
}

fn split_wire(wire: &[u8]) -> io::Result<(Addrs, &[u8])> {
    let bad = || corrupt("snapshot from the leader: damaged member list");
    let len: [u8; 4] = wire
        .get(..4)
        .ok_or_else(bad)?
        .try_into()
        .map_err(|_| bad())?;
    let end = 4usize
        .checked_add(u32::from_le_bytes(len) as usize)
        .ok_or_else(bad)?;
    let text = std::str::from_utf8(wire.get(4..end).ok_or_else(bad)?).map_err(|_| bad())?;
    Ok((parse_addrs(text).ok_or_else(bad)?, &wire[end..]))
}

fn parse_addrs(text: &str) -> Option<Addrs> {
    let mut addrs = Addrs::new();
    for line in text.lines() {
        let (id, a) = line.split_once(' ')?;
        addrs.insert(id.parse().ok()?, a.to_string());
    }
    Some(addrs)
}

fn read_snapshot(dir: &Path) -> io::Result<(SnapshotMetadata, Vec<u8>, Addrs)> {
    let (parts, addrs) = decode_parts(&std::fs::read(dir.join(SNAP_META))?, 2, SNAP_META)?;
    let meta = SnapshotMetadata::parse_from_bytes(&parts[0]).map_err(corrupt)?;
    let crc = parts[1].as_slice();
    let mut data = std::fs::read(dir.join(SNAP_DATA)).unwrap_or_default();
    if crc32fast::hash(&data).to_le_bytes() != crc {
        // The crash fell between the metadata and the rename: finish the rename.
        let mismatch = || {
            corrupt(format!(
                "{}: does not match the checksum in {SNAP_META} (damaged)",
                dir.join(SNAP_DATA).display()
            ))
        };
        data = std::fs::read(dir.join(SNAP_NEXT)).map_err(|_| mismatch())?;
        if crc32fast::hash(&data).to_le_bytes() != crc {
            return Err(mismatch());
        }
        std::fs::rename(dir.join(SNAP_NEXT), dir.join(SNAP_DATA))?;
    }
    Ok((meta, data, addrs))
}

impl Storage for LogStore {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState {
            hard_state: self.mem.hs.clone(),
            conf_state: self.mem.cs.clone(),
        })
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        self.mem.entries(low, high, max_size.into())
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        self.mem.term(idx)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.mem.first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.mem.last_index())
    }

    /// The last compaction's snapshot, data included (MemStorage's own carries no data), with
    /// the members' addresses in front: a node that joins learns where the others are from it.
    /// raft-rs refuses to install a snapshot whose ConfState lacks the receiver (a node added
    /// after it was taken), so for that one the owner is asked for a fresh snapshot and raft
    /// retries later.
    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<Snapshot> {
        let meta = self.snap.get_metadata();
        let cs = meta.get_conf_state();
        let names_to = cs.voters.contains(&to) || cs.learners.contains(&to);
        if meta.index >= request_index && meta.index > 0 && names_to {
            Ok(self.snap.clone())
        } else {
            self.wanted.set(true);
            Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ))
        }
    }
}

/// The log in memory, what raft reads: the entries after the compaction point, their summed
/// sizes (compaction by size) and coarse append times (compaction by age). `entries` costs
/// O(entries returned): raft-rs's `MemStorage` copies the whole tail from `low` before cutting
/// it to one message, O(tail) per append message, which for a follower far behind is the
/// whole log on every message.
#[derive(Default)]
struct MemLog {
    hs: HardState,
    cs: ConfState,
    /// Index and term of the entry just before `entries[0]` (a snapshot's, or the point the
    /// log was compacted to).
    base: (u64, u64),
    entries: VecDeque<Entry>,
    /// Sum of `entry_bytes` over `entries`.
    bytes: u64,
    /// (first index appended, when), at most one mark per `MARK_EVERY`: the age of the oldest
    /// entry kept, to within that.
    marks: VecDeque<(u64, Instant)>,
}

/// Appends closer together than this share one age mark, so marks stay few at any rate.
const MARK_EVERY: Duration = Duration::from_secs(1);

/// What an entry costs in memory, for compaction by size: its payload plus the struct.
fn entry_bytes(e: &Entry) -> u64 {
    (e.data.len() + e.context.len() + std::mem::size_of::<Entry>()) as u64
}

impl MemLog {
    fn first_index(&self) -> u64 {
        self.base.0 + 1
    }

    fn last_index(&self) -> u64 {
        self.base.0 + self.entries.len() as u64
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx == self.base.0 {
            return Ok(self.base.1);
        }
        if idx < self.base.0 {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        match self.entries.get((idx - self.base.0 - 1) as usize) {
            Some(e) => Ok(e.term),
            None => Err(raft::Error::Store(StorageError::Unavailable)),
        }
    }

    /// Entries `[low, high)`, cut as raft-rs's `limit_size` cuts them: the first always, then
    /// while the encoded sizes sum to at most `max_size`. Only the entries returned are read.
    fn entries(&self, low: u64, high: u64, max_size: Option<u64>) -> raft::Result<Vec<Entry>> {
        if low < self.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > self.last_index() + 1 || low > high {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let max = max_size.unwrap_or(u64::MAX);
        let from = (low - self.base.0 - 1) as usize;
        let n = (high - low) as usize;
        let mut out = Vec::with_capacity(n.min(1024));
        let mut size = 0u64;
        for e in self.entries.range(from..from + n) {
            #[cfg(test)]
            VISITED.with(|v| v.set(v.get() + 1));
            size += u64::from(e.compute_size());
            if !out.is_empty() && size > max {
                break;
            }
            out.push(e.clone());
        }
        Ok(out)
    }

    /// Appends `ents`, replacing any entries from `ents[0].index` on (a new leader's).
    fn append(&mut self, ents: &[Entry]) -> raft::Result<()> {
        let Some(first) = ents.first() else {
            return Ok(());
        };
        if first.index < self.first_index() || first.index > self.last_index() + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let keep = (first.index - self.first_index()) as usize;
        for e in self.entries.drain(keep..) {
            self.bytes -= entry_bytes(&e);
        }
        while self.marks.back().is_some_and(|&(i, _)| i >= first.index) {
            self.marks.pop_back();
        }
        for e in ents {
            self.bytes += entry_bytes(e);
            self.entries.push_back(e.clone());
        }
        let now = Instant::now();
        if self
            .marks
            .back()
            .is_none_or(|&(_, t)| now.duration_since(t) >= MARK_EVERY)
        {
            self.marks.push_back((first.index, now));
        }
        Ok(())
    }

    /// Drops the entries before `keep` (the log then starts at `keep`, ≤ last + 1).
    /// Returns them: hundreds of thousands of entries take a while to free, which the caller
    /// may do off the loop.
    fn compact_to(&mut self, keep: u64) -> raft::Result<VecDeque<Entry>> {
        if keep <= self.first_index() {
            return Ok(VecDeque::new());
        }
        if keep > self.last_index() + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let term = self.term(keep - 1)?;
        let n = (keep - self.first_index()) as usize;
        // split_off copies the (short) rest, not the entries dropped.
        let rest = self.entries.split_off(n);
        let dropped = std::mem::replace(&mut self.entries, rest);
        for e in &dropped {
            self.bytes -= entry_bytes(e);
        }
        self.base = (keep - 1, term);
        // The oldest mark at or before `keep` still dates the first entry kept (an upper bound
        // of its age); the ones before it go.
        while self.marks.len() > 1 && self.marks[1].0 <= keep {
            self.marks.pop_front();
        }
        if self.entries.is_empty() {
            self.marks.clear();
        }
        Ok(dropped)
    }

    /// The log is replaced by a snapshot (MemStorage's `apply_snapshot`).
    fn apply_snapshot(&mut self, meta: &SnapshotMetadata) -> raft::Result<()> {
        if self.first_index() > meta.index {
            return Err(raft::Error::Store(StorageError::SnapshotOutOfDate));
        }
        self.base = (meta.index, meta.term);
        self.hs.term = self.hs.term.max(meta.term);
        self.hs.commit = meta.index;
        self.entries.clear();
        self.bytes = 0;
        self.marks.clear();
        self.cs = meta.get_conf_state().clone();
        Ok(())
    }

    /// When entry `idx` was appended (at the latest; None: the log is empty).
    fn appended_at(&self, idx: u64) -> Option<Instant> {
        if self.entries.is_empty() {
            return None;
        }
        let p = self.marks.partition_point(|&(i, _)| i <= idx);
        self.marks.get(p.saturating_sub(1)).map(|&(_, t)| t)
    }

    /// The first index to keep when compacting to `index` so that the entries kept at or
    /// before it are at most `count` and take at most `retain` bytes (walks only those).
    fn keep_from(&self, index: u64, retain: u64, count: u64) -> u64 {
        let first = self.first_index();
        let index = index.min(self.last_index());
        let mut keep = index + 1;
        let mut bytes = 0;
        while keep > first && index + 1 - keep < count {
            let e = &self.entries[(keep - 1 - first) as usize];
            bytes += entry_bytes(e);
            if bytes > retain {
                break;
            }
            keep -= 1;
        }
        keep
    }
}

#[cfg(test)]
thread_local! {
    /// Entries `MemLog::entries` looked at (its cost is asserted, not timed).
    static VISITED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
mod mem_tests {
    use super::*;

    fn log(n: u64, size: usize) -> MemLog {
        let mut m = MemLog::default();
        let ents: Vec<Entry> = (1..=n)
            .map(|i| Entry {
                index: i,
                term: 1,
                data: vec![b'x'; size].into(),
                ..Default::default()
            })
            .collect();
        m.append(&ents).expect("append");
        m
    }

    fn visited() -> u64 {
        VISITED.with(|v| v.replace(0))
    }

    #[test]
    fn entries_cut_as_raft_cuts_them_and_read_only_what_they_return() {
        let m = log(100_000, 100);
        for max in [0u64, 1, 99, 1000, 4096, 256 << 10] {
            visited();
            let got = m.entries(10, 100_001, Some(max)).expect("entries");
            // raft-rs's own cut of the whole tail is the reference.
            let mut want: Vec<Entry> = m.entries.range(9..).cloned().collect();
            raft::util::limit_size(&mut want, Some(max));
            assert_eq!(got, want, "max {max}");
            assert!(!got.is_empty(), "at least one entry");
            let size: u64 = got.iter().map(|e| u64::from(e.compute_size())).sum();
            assert!(got.len() == 1 || size <= max, "{size} bytes over {max}");
            // The entries returned and the one that did not fit: never the tail.
            assert!(visited() <= got.len() as u64 + 1, "max {max}");
        }
        assert_eq!(m.entries(5, 9, None).expect("range").len(), 4);
        assert_eq!(
            m.entries(7, 7, Some(0)).expect("empty"),
            Vec::<Entry>::new()
        );
        assert!(m.entries(5, 100_002, None).is_err(), "past the end");
    }

    #[test]
    fn compaction_keeps_terms_bytes_and_a_bounded_window() {
        let mut m = log(1000, 100);
        let per = entry_bytes(&m.entries[0]);
        assert_eq!(m.bytes, 1000 * per);
        // 10 entries' worth kept behind index 900.
        let keep = m.keep_from(900, 10 * per, u64::MAX);
        assert_eq!(keep, 891);
        assert_eq!(m.keep_from(900, u64::MAX, 3), 898);
        assert_eq!(m.keep_from(900, 0, u64::MAX), 901);
        m.compact_to(keep).expect("compact");
        assert_eq!(m.first_index(), 891);
        assert_eq!(m.term(890).expect("base term"), 1);
        assert!(matches!(
            m.term(889),
            Err(raft::Error::Store(StorageError::Compacted))
        ));
        assert!(m.entries(890, 900, None).is_err());
        assert_eq!(m.bytes, 110 * per);
        assert!(m.appended_at(891).is_some());
        // A new leader's entries replace the tail and its bytes.
        let e = Entry {
            index: 950,
            term: 2,
            ..Default::default()
        };
        m.append(std::slice::from_ref(&e)).expect("overwrite");
        assert_eq!(m.last_index(), 950);
        assert_eq!(m.bytes, 59 * per + entry_bytes(&e));
        assert!(m.append(&[Entry { index: 10, ..e }]).is_err(), "compacted");
    }
}

#[cfg(test)]
mod replay_tests {
    use super::*;

    fn entry(index: u64) -> Entry {
        Entry {
            index,
            term: 3,
            data: format!("*3\r\n$3\r\nSET\r\n$7\r\nlock:{index:02}\r\n$5\r\ntoken\r\n")
                .into_bytes()
                .into(),
            ..Default::default()
        }
    }

    /// Replays `data` written to a fresh file: the entries' indexes, or the error.
    fn replay_bytes(path: &Path, data: &[u8]) -> io::Result<Vec<u64>> {
        std::fs::write(path, data)?;
        let mut f = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(replay(&mut f, path)?.0.iter().map(|e| e.index).collect())
    }

    /// Every byte of a log replaced by a few values: the log is refused, or replays every
    /// entry. The one ambiguous case (a byte of the last record's body turned into zero, which
    /// a torn write also leaves) may drop that record; a torn write of the last record at any
    /// point still replays the records before it.
    #[test]
    fn every_damaged_byte_is_refused_or_harmless_and_torn_tails_still_drop() {
        let path = std::env::temp_dir().join(format!("deadbolt-replay-{}", std::process::id()));
        let mut records = Vec::new();
        let mut starts = Vec::new();
        for i in 1..=6 {
            starts.push(records.len());
            encode_record(&mut records, &entry(i)).expect("encode");
        }
        let last = *starts.last().expect("records");
        let mut good = records.clone();
        good.extend(std::iter::repeat_n(0u8, 4096));
        let all: Vec<u64> = (1..=6).collect();
        assert_eq!(replay_bytes(&path, &good).expect("good"), all);
        let (mut refused, mut dropped) = (0, 0);
        for at in 0..records.len() + 64 {
            for v in [good[at] ^ 0x01, good[at] ^ 0xff, 0x00, 0x7f] {
                if v == good[at] {
                    continue;
                }
                let mut bad = good.clone();
                bad[at] = v;
                match replay_bytes(&path, &bad) {
                    Err(_) => refused += 1,
                    Ok(got) if got == all => {}
                    Ok(got) => {
                        let ambiguous = at >= last + HEADER && at < records.len() && v == 0;
                        assert!(
                            ambiguous && got == all[..5],
                            "byte {at} set to {v:#x}: replayed {got:?} without refusing"
                        );
                        dropped += 1;
                    }
                }
            }
        }
        assert!(
            refused > 0 && dropped > 0,
            "{refused} refused, {dropped} dropped"
        );
        for cut in last..records.len() {
            let mut torn = records[..cut].to_vec();
            torn.extend(std::iter::repeat_n(0u8, 4096));
            assert_eq!(
                replay_bytes(&path, &torn).expect("torn tail"),
                all[..5],
                "torn at {cut}"
            );
            assert_eq!(
                replay_bytes(&path, &records[..cut]).expect("torn at eof"),
                all[..5]
            );
        }
        let _ = std::fs::remove_file(&path);
    }
}
