//! The append-only file set: manifest, base and increment files, writes, fsync policy, rewrite.
//!
//! Layout (Redis 7 multi-part AOF): `<dir>/<appenddirname>/<appendfilename>.manifest` lists
//! `file <name> seq <n> type b|i` lines. A rewrite first opens a new increment file and records it
//! in the manifest (so writes made during the rewrite are never outside the manifest), writes the
//! snapshot as a new base file on a background thread, and only then installs a manifest naming
//! the new base and the new increment. A crash at any point leaves a manifest whose files hold
//! every acknowledged write.

use crate::config::Fsync;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    pub name: String,
    pub seq: u64,
    pub base: bool,
}

/// Longest manifest line (Redis's MANIFEST_MAX_LINE).
const MANIFEST_MAX_LINE: usize = 1024;

/// What is wrong with a manifest: Redis's text, the line it is at, and the line itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    pub why: &'static str,
    pub line: Option<(usize, String)>,
}

impl std::fmt::Display for ManifestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.line {
            Some((no, text)) => write!(f, "{} (at line {no}: '{text}')", self.why),
            None => f.write_str(self.why),
        }
    }
}

/// A manifest file name must name a file inside the AOF directory: no separator, no `.`/`..`
/// (Redis's pathIsBaseName, and stricter: a name that is only dots is refused too).
fn is_base_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains('/')
        && !name.contains('\\')
        && !name.contains('\0')
        && name != "."
        && name != ".."
}

/// Parses a manifest as Redis's aofLoadManifestFromFile does, refusing everything it refuses
/// (empty file, blank or too long line, fewer than three pairs, a name that is a path, a
/// missing or zero seq, a second base, incr seqs that do not increase, an unknown type) and,
/// stricter, a quoted token, a file listed twice and a manifest that lists no base or incr file.
/// History (`h`) entries are validated and dropped: they are not part of the data set.
pub fn parse_manifest(text: &str) -> Result<Vec<ManifestEntry>, ManifestError> {
    let err = |why, line: Option<(usize, &str)>| ManifestError {
        why,
        line: line.map(|(n, l)| (n, l.to_string())),
    };
    if text.is_empty() {
        return Err(err("Found an empty AOF manifest", None));
    }
    let mut out: Vec<ManifestEntry> = Vec::new();
    let mut names = std::collections::HashSet::new();
    let mut max_incr_seq = 0;
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let no = i + 1;
        if raw.starts_with('#') {
            continue;
        }
        let here = Some((no, raw.trim_end_matches(['\r', '\n'])));
        // Redis reads lines with fgets into a 1024-byte buffer and refuses any line without
        // its newline (a last line without one included).
        if raw.len() > MANIFEST_MAX_LINE || !raw.ends_with('\n') {
            return Err(err("The AOF manifest file contains too long line", here));
        }
        let line = raw.trim_matches([' ', '\t', '\r', '\n']);
        let words: Vec<&str> = line.split([' ', '\t']).filter(|w| !w.is_empty()).collect();
        if line.is_empty()
            || words.len() < 6
            || words.len() % 2 != 0
            || words.iter().any(|w| w.starts_with(['"', '\'']))
        {
            return Err(err("Invalid AOF manifest file format", here));
        }
        let (mut name, mut seq, mut kind) = (None, 0u64, None);
        for pair in words.chunks(2) {
            let (key, value) = (pair[0], pair[1]);
            if key.eq_ignore_ascii_case("file") {
                if !is_base_name(value) {
                    return Err(err("File can't be a path, just a filename", here));
                }
                name = Some(value);
            } else if key.eq_ignore_ascii_case("seq") {
                seq = value.parse().unwrap_or(0);
            } else if key.eq_ignore_ascii_case("type") {
                kind = value.bytes().next();
            }
            // Other keys are ignored, as Redis does, for forward compatibility.
        }
        let (Some(name), true, Some(kind)) = (name, seq > 0, kind) else {
            return Err(err("Invalid AOF manifest file format", here));
        };
        match kind {
            b'b' if out.iter().any(|e| e.base) => {
                return Err(err("Found duplicate base file information", here))
            }
            b'b' => {}
            b'i' if seq <= max_incr_seq => {
                return Err(err("Found a non-monotonic sequence number", here))
            }
            b'i' => max_incr_seq = seq,
            b'h' => {}
            _ => return Err(err("Unknown AOF file type", here)),
        }
        if !names.insert(name) {
            return Err(err("Found a file listed twice", here));
        }
        if kind != b'h' {
            out.push(ManifestEntry {
                name: name.to_string(),
                seq,
                base: kind == b'b',
            });
        }
    }
    if out.is_empty() {
        return Err(err("The AOF manifest lists no base or incr file", None));
    }
    Ok(out)
}

/// The log line for a refused manifest: what is wrong and how to recover.
fn manifest_refused(path: &Path, e: &ManifestError) -> String {
    format!(
        "*** FATAL AOF MANIFEST FILE ERROR *** {}: {e}. Nothing was loaded or changed. To recover: fix the manifest by hand (one line per file: 'file <name> seq <n> type b|i', a name inside the AOF directory, at most one base, incr seqs increasing, every listed file present) or restore the AOF directory from a backup; removing the manifest starts an EMPTY data set",
        path.display()
    )
}

pub fn render_manifest(entries: &[ManifestEntry]) -> String {
    let mut s = String::new();
    for e in entries {
        s.push_str(&format!(
            "file {} seq {} type {}\n",
            e.name,
            e.seq,
            if e.base { "b" } else { "i" }
        ));
    }
    s
}

/// Writes `data` to `path` atomically: temporary file, fsync, rename, fsync of the directory.
/// On failure the temporary file is removed (a full disk must not stay full because of it).
pub fn write_atomically(path: &Path, data: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let written = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()
    })();
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Some(dir) = path.parent() {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// BGREWRITEAOF with `appendonly no`, as Redis 7.0 does it: `snapshot` becomes the only file
/// of the AOF directory's manifest (a new base, its seq one past the last base), and the files
/// the old manifest named are removed. Written before returning: with the AOF off nothing
/// appends meanwhile, and a lock server's dataset is small. A damaged manifest is left alone.
pub fn rewrite_while_off(dir: &Path, filename: &str, snapshot: &[u8]) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let old = read_manifest(dir, filename)
        .map_err(io::Error::other)?
        .unwrap_or_default();
    let seq = old
        .iter()
        .filter(|e| e.base)
        .map(|e| e.seq)
        .max()
        .unwrap_or(0)
        + 1;
    let base_name = format!("{filename}.{seq}.base.aof");
    let base_path = dir.join(&base_name);
    write_atomically(&base_path, snapshot)?;
    let manifest = [ManifestEntry {
        name: base_name.clone(),
        seq,
        base: true,
    }];
    let mpath = Aof::manifest_path(dir, filename);
    if let Err(e) = write_atomically(&mpath, render_manifest(&manifest).as_bytes()) {
        let _ = std::fs::remove_file(&base_path);
        return Err(e);
    }
    for e in old.iter().filter(|e| e.name != base_name) {
        let _ = std::fs::remove_file(dir.join(&e.name));
    }
    Ok(())
}

/// A finished background rewrite: the base file is durable and named.
pub struct RewriteDone {
    pub result: io::Result<()>,
    pub base_name: String,
    pub base_size: u64,
    pub seq: u64,
}

/// What the `everysec` fsync thread reports to the executor (Redis's aof_bio_fsync_status).
#[derive(Default)]
struct FsyncStatus {
    /// The last background fsync failed; writes are refused until one succeeds.
    failed: AtomicBool,
    /// An fsync job is queued or running.
    in_flight: AtomicBool,
    /// strerror of the last failure.
    error: Mutex<String>,
}

pub struct Aof {
    pub dir: PathBuf,
    pub filename: String,
    pub fsync: Fsync,
    manifest: Vec<ManifestEntry>,
    incr: File,
    /// Length of the increment file up to the last whole write: a short write is cut back to
    /// it, so the file never holds a fragment followed by a full copy of the same bytes.
    incr_len: u64,
    /// Bytes logged but not yet written to the file.
    pub pending: Vec<u8>,
    /// Written but not yet fsynced (for `always`: replies wait for this to be empty).
    unsynced: bool,
    last_fsync: Instant,
    everysec: Option<mpsc::Sender<File>>,
    bio: Arc<FsyncStatus>,
    last_write_ok: bool,
    last_write_error: String,
    /// Size of the base file after the last rewrite and of everything logged since.
    pub base_size: u64,
    pub current_size: u64,
    pub rewrite: Option<mpsc::Receiver<RewriteDone>>,
    pub rewrite_started: Option<Instant>,
    pub last_rewrite_secs: i64,
    pub last_rewrite_ok: bool,
    /// Rewrites failed since the last one that worked (INFO `aof_rewrites_consecutive_failures`).
    pub rewrite_failures_in_a_row: u64,
    /// Streams this log wrote, so appends to them are written as appends (emit.rs).
    pub streams: super::emit::StreamSync,
    pub rewrites: u64,
    /// The database SELECTed in the log so far.
    pub selected_db: Option<usize>,
    /// The background fsync was failing at the last cron.
    fsync_failed_seen: bool,
    /// A failed fsync was followed by a good one: rewrite the log (`take_rewrite_after_fsync_error`).
    rewrite_after_fsync_error: bool,
}

/// Reads and validates the manifest: Ok(None) when there is none (a fresh start).
fn read_manifest(dir: &Path, filename: &str) -> Result<Option<Vec<ManifestEntry>>, String> {
    let mpath = Aof::manifest_path(dir, filename);
    let bytes = match std::fs::read(&mpath) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "Fatal error: can't open the AOF manifest file {} for reading: {}",
                mpath.display(),
                super::strerror(&e)
            ))
        }
    };
    let text = String::from_utf8(bytes).map_err(|_| {
        manifest_refused(
            &mpath,
            &ManifestError {
                why: "Invalid AOF manifest file format",
                line: None,
            },
        )
    })?;
    parse_manifest(&text)
        .map(Some)
        .map_err(|e| manifest_refused(&mpath, &e))
}

/// Removes what a crash in the middle of a rewrite can leave in the AOF directory: temporary
/// files of `write_atomically` (`<filename>.*.tmp`) and a base file of this naming scheme
/// (`<filename>.<seq>.base.aof`) that the manifest does not name. Neither holds anything the
/// manifest's files do not; on a nearly full disk they would keep its space.
fn remove_leftovers(dir: &Path, filename: &str, manifest: &[ManifestEntry]) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("{filename}.");
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix(&prefix) else {
            continue;
        };
        let orphan_base = rest
            .strip_suffix(".base.aof")
            .is_some_and(|seq| !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit()))
            && !manifest.iter().any(|m| m.name == name);
        if name.ends_with(".tmp") || orphan_base {
            tracing::info!("Removing {name}, left in the AOF directory by an interrupted rewrite");
            let _ = std::fs::remove_file(e.path());
        }
    }
}

impl Aof {
    pub fn manifest_path(dir: &Path, filename: &str) -> PathBuf {
        dir.join(format!("{filename}.manifest"))
    }

    /// The files to load, in order (base first), or an empty list for a fresh start. A
    /// damaged manifest, or one naming a file that is not there, is refused (Redis exits).
    pub fn files_to_load(dir: &Path, filename: &str) -> Result<Vec<PathBuf>, String> {
        let Some(entries) = read_manifest(dir, filename)? else {
            return Ok(Vec::new());
        };
        let mut files: Vec<&ManifestEntry> = entries.iter().filter(|e| e.base).collect();
        files.extend(entries.iter().filter(|e| !e.base));
        let mut out = Vec::with_capacity(files.len());
        for e in files {
            let path = dir.join(&e.name);
            if let Err(err) = std::fs::metadata(&path) {
                return Err(format!(
                    "The append log file {} listed in the manifest {} as the {} file can't be read: {}. Nothing was loaded or changed. To recover: put the file back (restore it from a backup), or, accepting the loss of its writes, remove its line from the manifest",
                    path.display(),
                    Aof::manifest_path(dir, filename).display(),
                    if e.base { "base" } else { "incr" },
                    super::strerror(&err)
                ));
            }
            out.push(path);
        }
        Ok(out)
    }

    /// Opens (or creates) the file set for appending after loading.
    pub fn open(dir: PathBuf, filename: String, fsync: Fsync) -> io::Result<Aof> {
        std::fs::create_dir_all(&dir)?;
        let mpath = Aof::manifest_path(&dir, &filename);
        let mut manifest = read_manifest(&dir, &filename)
            .map_err(io::Error::other)?
            .unwrap_or_default();
        if !manifest.iter().any(|e| !e.base) {
            let seq = manifest.iter().map(|e| e.seq).max().unwrap_or(0) + 1;
            let name = format!("{filename}.{seq}.incr.aof");
            // The file exists before the manifest names it: a listed file is never missing.
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(&name))?
                .sync_all()?;
            manifest.push(ManifestEntry {
                name,
                seq,
                base: false,
            });
            write_atomically(&mpath, render_manifest(&manifest).as_bytes())?;
        }
        remove_leftovers(&dir, &filename, &manifest);
        let last = manifest
            .iter()
            .rfind(|e| !e.base)
            .cloned()
            .ok_or_else(|| io::Error::other("no increment file"))?;
        let incr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(&last.name))?;
        let incr_len = incr.metadata()?.len();
        let size_of = |e: &ManifestEntry| {
            std::fs::metadata(dir.join(&e.name))
                .map(|m| m.len())
                .unwrap_or(0)
        };
        let base_size = manifest.iter().filter(|e| e.base).map(size_of).sum();
        let current_size = manifest.iter().map(size_of).sum();
        let mut aof = Aof {
            dir,
            filename,
            fsync,
            manifest,
            incr,
            incr_len,
            pending: Vec::with_capacity(64 * 1024),
            unsynced: false,
            last_fsync: Instant::now(),
            everysec: None,
            bio: Arc::default(),
            last_write_ok: true,
            last_write_error: String::new(),
            base_size,
            current_size,
            rewrite: None,
            rewrite_started: None,
            last_rewrite_secs: -1,
            last_rewrite_ok: true,
            rewrite_failures_in_a_row: 0,
            streams: Default::default(),
            rewrites: 0,
            selected_db: None,
            fsync_failed_seen: false,
            rewrite_after_fsync_error: false,
        };
        aof.start_fsync_thread();
        Ok(aof)
    }

    /// `everysec` fsyncs on a background thread so the executor never waits for the disk; the
    /// outcome of each fsync is reported back (Redis's bio AOF fsync job).
    fn start_fsync_thread(&mut self) {
        let (tx, rx) = mpsc::channel::<File>();
        let bio = self.bio.clone();
        let spawned = std::thread::Builder::new()
            .name("aof-fsync".into())
            .spawn(move || {
                while let Ok(f) = rx.recv() {
                    match f.sync_data() {
                        Ok(()) => {
                            if bio.failed.swap(false, Ordering::AcqRel) {
                                tracing::warn!("AOF fsync succeeded again: writes are accepted.");
                            }
                        }
                        Err(e) => {
                            if let Ok(mut m) = bio.error.lock() {
                                *m = super::strerror(&e);
                            }
                            if !bio.failed.swap(true, Ordering::AcqRel) {
                                tracing::warn!("Fail to fsync the AOF file: {}. Writes are refused (MISCONF) until an fsync succeeds; it is retried every second.", super::strerror(&e));
                            }
                        }
                    }
                    bio.in_flight.store(false, Ordering::Release);
                }
            });
        if spawned.is_ok() {
            self.everysec = Some(tx);
        }
    }

    /// Why writes are refused (Redis's MISCONF): the last write failed, or the last background
    /// fsync did. None when the log is healthy.
    pub fn write_error(&self) -> Option<String> {
        if !self.last_write_ok {
            return Some(self.last_write_error.clone());
        }
        if self.bio.failed.load(Ordering::Acquire) {
            return Some(self.bio.error.lock().map(|m| m.clone()).unwrap_or_default());
        }
        None
    }

    /// INFO's aof_last_write_status.
    pub fn write_ok(&self) -> bool {
        self.last_write_ok && !self.bio.failed.load(Ordering::Acquire)
    }

    pub fn needs_sync_before_reply(&self) -> bool {
        self.fsync == Fsync::Always && (!self.pending.is_empty() || self.unsynced)
    }

    /// Writes `pending` to the increment file. A short write (disk full) is cut back with
    /// ftruncate to the last whole length, as Redis's flushAppendOnlyFile does, so the retry
    /// appends the whole buffer after whole units; if the cut fails too, the written part is
    /// kept and dropped from `pending`, so the retry completes it instead of repeating it.
    fn write_pending(&mut self) -> io::Result<()> {
        let mut written = 0;
        let mut failure = None;
        while written < self.pending.len() {
            match self.incr.write(&self.pending[written..]) {
                Ok(0) => {
                    failure = Some(io::Error::from(io::ErrorKind::WriteZero));
                    break;
                }
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let Some(e) = failure else {
            self.incr_len += written as u64;
            self.current_size += written as u64;
            self.pending.clear();
            return Ok(());
        };
        if written > 0 {
            let quiet = !self.last_write_ok;
            if !quiet {
                tracing::warn!(
                    "Short write while writing to the AOF file: (nwritten={written}, expected={})",
                    self.pending.len()
                );
            }
            match self.incr.set_len(self.incr_len) {
                Ok(()) => {}
                Err(te) => {
                    if !quiet {
                        tracing::warn!("Could not remove short write from the append-only file: ftruncate: {}. The written part is kept and the rest is appended when the disk has room again.", super::strerror(&te));
                    }
                    self.pending.drain(..written);
                    self.incr_len += written as u64;
                    self.current_size += written as u64;
                }
            }
        }
        Err(e)
    }

    /// Writes what was logged; for `always` also fsyncs (group commit: one fsync for every unit
    /// of the executor's current round); for `everysec` hands an fsync to the background thread
    /// once a second, and retries one every second after it failed. Returns false if the write
    /// or the `always` fsync failed: then replies to writes must not claim durability.
    pub fn flush(&mut self) -> bool {
        if !self.pending.is_empty() {
            match self.write_pending() {
                Ok(()) => {
                    self.unsynced = true;
                    if !self.last_write_ok {
                        tracing::warn!("AOF write error looks solved, Redis can write again.");
                    }
                    self.last_write_ok = true;
                }
                Err(e) => {
                    if self.last_write_ok {
                        tracing::warn!("Error writing to the AOF file: {e}");
                    }
                    self.last_write_ok = false;
                    self.last_write_error = super::strerror(&e);
                    return false;
                }
            }
        }
        let retry = self.bio.failed.load(Ordering::Acquire);
        if self.unsynced || retry {
            match self.fsync {
                Fsync::Always => {
                    if let Err(e) = self.incr.sync_data() {
                        tracing::warn!("Can't persist AOF for fsync error when the AOF fsync policy is 'always': {e}");
                        self.last_write_ok = false;
                        self.last_write_error = super::strerror(&e);
                        return false;
                    }
                    if self.bio.failed.swap(false, Ordering::AcqRel) {
                        self.rewrite_after_fsync_error = true;
                    }
                    self.unsynced = false;
                    self.last_fsync = Instant::now();
                }
                Fsync::EverySec
                    if self.last_fsync.elapsed() >= Duration::from_secs(1)
                        && !self.bio.in_flight.load(Ordering::Acquire) =>
                {
                    if let (Some(tx), Ok(f)) = (&self.everysec, self.incr.try_clone()) {
                        self.bio.in_flight.store(true, Ordering::Release);
                        if tx.send(f).is_err() {
                            self.bio.in_flight.store(false, Ordering::Release);
                        }
                    }
                    self.unsynced = false;
                    self.last_fsync = Instant::now();
                }
                _ => {}
            }
        }
        true
    }

    /// True once after a failed fsync was followed by a successful one: the kernel may have
    /// dropped pages of the failed range, so the log should be rewritten from memory.
    pub fn take_rewrite_after_fsync_error(&mut self) -> bool {
        std::mem::take(&mut self.rewrite_after_fsync_error)
    }

    /// Periodic work: retries a failed write or fsync (Redis tries once a second) and installs
    /// a finished rewrite. Returns false when a retried write or `always` fsync failed.
    pub fn cron(&mut self) -> bool {
        self.poll_rewrite();
        let failed = self.bio.failed.load(Ordering::Acquire);
        if self.fsync_failed_seen && !failed {
            self.rewrite_after_fsync_error = true;
        }
        self.fsync_failed_seen = failed;
        if !self.last_write_ok || self.unsynced || self.bio.failed.load(Ordering::Acquire) {
            return self.flush();
        }
        true
    }

    /// Starts a rewrite: a new increment file (recorded in the manifest at once) and a
    /// background thread that writes `snapshot` as the new base.
    pub fn start_rewrite(&mut self, snapshot: Vec<u8>) -> io::Result<()> {
        if !self.flush() {
            return Err(io::Error::other(format!(
                "the AOF can't be written: {}",
                self.last_write_error
            )));
        }
        self.incr.sync_data()?;
        let seq = self.manifest.iter().map(|e| e.seq).max().unwrap_or(0) + 1;
        let incr_name = format!("{}.{seq}.incr.aof", self.filename);
        let incr_path = self.dir.join(&incr_name);
        let new_incr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&incr_path)?;
        let mut manifest = self.manifest.clone();
        manifest.push(ManifestEntry {
            name: incr_name,
            seq,
            base: false,
        });
        if let Err(e) = write_atomically(
            &Aof::manifest_path(&self.dir, &self.filename),
            render_manifest(&manifest).as_bytes(),
        ) {
            // Not in the manifest: nothing refers to the new file.
            let _ = std::fs::remove_file(&incr_path);
            return Err(e);
        }
        self.manifest = manifest;
        self.incr = new_incr;
        self.incr_len = 0;
        self.selected_db = None;
        let base_name = format!("{}.{seq}.base.aof", self.filename);
        let path = self.dir.join(&base_name);
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("aof-rewrite".into())
            .spawn(move || {
                let result = write_atomically(&path, &snapshot);
                let _ = tx.send(RewriteDone {
                    result,
                    base_name,
                    base_size: snapshot.len() as u64,
                    seq,
                });
            })?;
        self.rewrite = Some(rx);
        self.rewrite_started = Some(Instant::now());
        Ok(())
    }

    fn rewrite_failed(&mut self) {
        self.last_rewrite_ok = false;
        self.rewrite_failures_in_a_row += 1;
    }

    /// Installs a finished rewrite; a failed one leaves the manifest as it was and removes the
    /// new base (its temporary file is already gone), so a full disk gets its space back.
    pub fn poll_rewrite(&mut self) {
        let Some(rx) = &self.rewrite else { return };
        let done = match rx.try_recv() {
            Ok(d) => d,
            Err(mpsc::TryRecvError::Empty) => return,
            Err(mpsc::TryRecvError::Disconnected) => {
                self.rewrite = None;
                self.rewrite_failed();
                return;
            }
        };
        self.rewrite = None;
        self.last_rewrite_secs = self
            .rewrite_started
            .take()
            .map(|t| t.elapsed().as_secs() as i64)
            .unwrap_or(-1);
        if let Err(e) = done.result {
            tracing::warn!("Background AOF rewrite failed: {}. The manifest is unchanged and the partial base file was removed; writes go on to the increment file.", super::strerror(&e));
            let _ = std::fs::remove_file(self.dir.join(&done.base_name));
            self.rewrite_failed();
            return;
        }
        // Everything older than the increment opened at the start of this rewrite is now in the base.
        let old: Vec<ManifestEntry> = self
            .manifest
            .iter()
            .filter(|e| e.seq < done.seq || e.base)
            .cloned()
            .collect();
        let mut manifest = vec![ManifestEntry {
            name: done.base_name.clone(),
            seq: done.seq,
            base: true,
        }];
        manifest.extend(
            self.manifest
                .iter()
                .filter(|e| !e.base && e.seq >= done.seq)
                .cloned(),
        );
        if let Err(e) = write_atomically(
            &Aof::manifest_path(&self.dir, &self.filename),
            render_manifest(&manifest).as_bytes(),
        ) {
            tracing::warn!("Can't install the rewritten AOF manifest: {}. The manifest is unchanged and the new base file was removed.", super::strerror(&e));
            let _ = std::fs::remove_file(self.dir.join(&done.base_name));
            self.rewrite_failed();
            return;
        }
        self.manifest = manifest;
        for e in old {
            // Names were validated as plain file names when the manifest was read: this never
            // reaches outside the AOF directory.
            if is_base_name(&e.name) && e.name != done.base_name {
                let _ = std::fs::remove_file(self.dir.join(&e.name));
            }
        }
        let incr_size: u64 = self
            .manifest
            .iter()
            .filter(|e| !e.base)
            .map(|e| {
                std::fs::metadata(self.dir.join(&e.name))
                    .map(|m| m.len())
                    .unwrap_or(0)
            })
            .sum();
        self.base_size = done.base_size;
        self.current_size = done.base_size + incr_size;
        self.last_rewrite_ok = true;
        self.rewrite_failures_in_a_row = 0;
        self.rewrites += 1;
        tracing::info!("Background AOF rewrite finished successfully");
    }

    pub fn rewrite_in_progress(&self) -> bool {
        self.rewrite.is_some()
    }

    /// Redis's auto-aof-rewrite rule: the log grew by `percentage`% over the last base and is
    /// at least `min_size` bytes.
    pub fn should_auto_rewrite(&self, percentage: u64, min_size: u64) -> bool {
        if percentage == 0 || self.rewrite_in_progress() || self.current_size < min_size {
            return false;
        }
        let base = self.base_size.max(1);
        let growth = (self.current_size.saturating_sub(base)) * 100 / base;
        growth >= percentage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trip() {
        let m = vec![
            ManifestEntry {
                name: "a.1.base.aof".into(),
                seq: 1,
                base: true,
            },
            ManifestEntry {
                name: "a.2.incr.aof".into(),
                seq: 2,
                base: false,
            },
        ];
        assert_eq!(parse_manifest(&render_manifest(&m)).unwrap(), m);
        assert!(parse_manifest("file x seq y type i\n").is_err());
        assert!(parse_manifest("garbage\n").is_err());
    }

    #[test]
    fn damaged_manifests_are_refused_as_redis_refuses_them() {
        let why = |t: &str| parse_manifest(t).unwrap_err().why;
        assert_eq!(why(""), "Found an empty AOF manifest");
        assert_eq!(
            why("# only a comment\n"),
            "The AOF manifest lists no base or incr file"
        );
        assert_eq!(why("\n"), "Invalid AOF manifest file format");
        assert_eq!(why("file a seq 1\n"), "Invalid AOF manifest file format");
        assert_eq!(
            why("file a seq 0 type i\n"),
            "Invalid AOF manifest file format"
        );
        assert_eq!(
            why("file a seq 1 type i"),
            "The AOF manifest file contains too long line"
        );
        for name in ["../../victim.aof", "/etc/passwd", "a/b", "..", "."] {
            assert_eq!(
                why(&format!("file {name} seq 1 type i\n")),
                "File can't be a path, just a filename",
                "{name}"
            );
        }
        assert_eq!(
            why("file a seq 1 type b\nfile b seq 2 type b\n"),
            "Found duplicate base file information"
        );
        assert_eq!(
            why("file a seq 2 type i\nfile b seq 2 type i\n"),
            "Found a non-monotonic sequence number"
        );
        assert_eq!(why("file a seq 1 type x\n"), "Unknown AOF file type");
        assert_eq!(
            why("file a seq 1 type i\nfile a seq 2 type i\n"),
            "Found a file listed twice"
        );
        // History entries and unknown keys are accepted, as Redis accepts them.
        let m =
            parse_manifest("file h seq 1 type h\nfile a seq 2 type b x y\nfile i seq 3 type i\n")
                .unwrap();
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn auto_rewrite_rule() {
        let dir = std::env::temp_dir().join(format!("deadbolt-aof-unit-{}", std::process::id()));
        let mut aof = Aof::open(dir.clone(), "appendonly.aof".into(), Fsync::No).unwrap();
        aof.base_size = 100;
        aof.current_size = 150;
        assert!(!aof.should_auto_rewrite(100, 10));
        aof.current_size = 200;
        assert!(aof.should_auto_rewrite(100, 10));
        assert!(!aof.should_auto_rewrite(100, 1000));
        assert!(!aof.should_auto_rewrite(0, 10));
        let _ = std::fs::remove_dir_all(dir);
    }
}
