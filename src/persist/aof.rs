//! The append-only file set: manifest, base and increment files, writes, fsync policy, rewrite.
//!
//! Layout (Redis 7 multi-part AOF): `<dir>/<appenddirname>/<appendfilename>.manifest` lists
//! `file <name> seq <n> type b|i` lines. A rewrite first opens a new increment file and records it
//! in the manifest (so writes made during the rewrite are never outside the manifest), writes the
//! snapshot as a new base file on a background thread, and only then installs a manifest naming
//! the new base and the new increment. A crash at any point leaves a manifest whose files hold
//! every acknowledged write.

use super::Fsync;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    pub name: String,
    pub seq: u64,
    pub base: bool,
}

pub fn parse_manifest(text: &str) -> Result<Vec<ManifestEntry>, String> {
    let mut out = Vec::new();
    for (no, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let mut name = None;
        let mut seq = None;
        let mut kind = None;
        for pair in words.chunks(2) {
            match pair {
                ["file", v] => name = Some(v.to_string()),
                ["seq", v] => seq = v.parse::<u64>().ok(),
                ["type", v] => kind = Some(*v),
                _ => {
                    return Err(format!(
                        "Invalid AOF manifest file format at line {}",
                        no + 1
                    ))
                }
            }
        }
        match (name, seq, kind) {
            (Some(name), Some(seq), Some("b")) => out.push(ManifestEntry {
                name,
                seq,
                base: true,
            }),
            (Some(name), Some(seq), Some("i")) => out.push(ManifestEntry {
                name,
                seq,
                base: false,
            }),
            // History entries of Redis's own rewrites are not needed for loading.
            (Some(_), Some(_), Some("h")) => {}
            _ => {
                return Err(format!(
                    "Invalid AOF manifest file format at line {}",
                    no + 1
                ))
            }
        }
    }
    Ok(out)
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
pub fn write_atomically(path: &Path, data: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
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

pub struct Aof {
    pub dir: PathBuf,
    pub filename: String,
    pub fsync: Fsync,
    manifest: Vec<ManifestEntry>,
    incr: File,
    /// Bytes logged but not yet written to the file.
    pub pending: Vec<u8>,
    /// Written but not yet fsynced (for `always`: replies wait for this to be empty).
    unsynced: bool,
    last_fsync: Instant,
    everysec: Option<mpsc::Sender<File>>,
    pub last_write_ok: bool,
    pub last_write_error: Option<String>,
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
}

impl Aof {
    pub fn manifest_path(dir: &Path, filename: &str) -> PathBuf {
        dir.join(format!("{filename}.manifest"))
    }

    /// The files to load, in order (base first), or an empty list for a fresh start.
    pub fn files_to_load(dir: &Path, filename: &str) -> Result<Vec<PathBuf>, String> {
        let mpath = Aof::manifest_path(dir, filename);
        let text = match std::fs::read_to_string(&mpath) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(format!(
                    "Can't open the AOF manifest {}: {e}",
                    mpath.display()
                ))
            }
        };
        let entries = parse_manifest(&text)?;
        let mut files: Vec<&ManifestEntry> = entries.iter().filter(|e| e.base).collect();
        files.extend(entries.iter().filter(|e| !e.base));
        Ok(files.into_iter().map(|e| dir.join(&e.name)).collect())
    }

    /// Opens (or creates) the file set for appending after loading.
    pub fn open(dir: PathBuf, filename: String, fsync: Fsync) -> io::Result<Aof> {
        std::fs::create_dir_all(&dir)?;
        let mpath = Aof::manifest_path(&dir, &filename);
        let mut manifest = match std::fs::read_to_string(&mpath) {
            Ok(t) => parse_manifest(&t).map_err(io::Error::other)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        if !manifest.iter().any(|e| !e.base) {
            let seq = manifest.iter().map(|e| e.seq).max().unwrap_or(0) + 1;
            manifest.push(ManifestEntry {
                name: format!("{filename}.{seq}.incr.aof"),
                seq,
                base: false,
            });
            write_atomically(&mpath, render_manifest(&manifest).as_bytes())?;
        }
        let last = manifest
            .iter()
            .rfind(|e| !e.base)
            .cloned()
            .ok_or_else(|| io::Error::other("no increment file"))?;
        let incr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(&last.name))?;
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
            pending: Vec::with_capacity(64 * 1024),
            unsynced: false,
            last_fsync: Instant::now(),
            everysec: None,
            last_write_ok: true,
            last_write_error: None,
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
        };
        aof.start_fsync_thread();
        Ok(aof)
    }

    /// `everysec` fsyncs on a background thread so the executor never waits for the disk.
    fn start_fsync_thread(&mut self) {
        let (tx, rx) = mpsc::channel::<File>();
        let spawned = std::thread::Builder::new()
            .name("aof-fsync".into())
            .spawn(move || {
                while let Ok(f) = rx.recv() {
                    if let Err(e) = f.sync_data() {
                        tracing::warn!("Error syncing the append only file: {e}");
                    }
                }
            });
        if spawned.is_ok() {
            self.everysec = Some(tx);
        }
    }

    pub fn needs_sync_before_reply(&self) -> bool {
        self.fsync == Fsync::Always && (!self.pending.is_empty() || self.unsynced)
    }

    /// Writes what was logged; for `always` also fsyncs (group commit: one fsync for every unit
    /// of the executor's current round). Returns false if the write failed: then replies to
    /// writes must not claim durability.
    pub fn flush(&mut self) -> bool {
        if !self.pending.is_empty() {
            match self.incr.write_all(&self.pending) {
                Ok(()) => {
                    self.current_size += self.pending.len() as u64;
                    self.pending.clear();
                    self.unsynced = true;
                    if !self.last_write_ok {
                        tracing::warn!("AOF write error looks solved. Redis can write again.");
                    }
                    self.last_write_ok = true;
                    self.last_write_error = None;
                }
                Err(e) => {
                    if self.last_write_ok {
                        tracing::warn!("Error writing to the AOF file: {e}");
                    }
                    self.last_write_ok = false;
                    self.last_write_error = Some(e.to_string());
                    return false;
                }
            }
        }
        if self.unsynced {
            match self.fsync {
                Fsync::Always => {
                    if let Err(e) = self.incr.sync_data() {
                        tracing::warn!("Can't persist AOF for fsync error when the AOF fsync policy is 'always': {e}");
                        self.last_write_ok = false;
                        self.last_write_error = Some(e.to_string());
                        return false;
                    }
                    self.unsynced = false;
                    self.last_fsync = Instant::now();
                }
                Fsync::EverySec if self.last_fsync.elapsed() >= Duration::from_secs(1) => {
                    if let (Some(tx), Ok(f)) = (&self.everysec, self.incr.try_clone()) {
                        let _ = tx.send(f);
                    }
                    self.unsynced = false;
                    self.last_fsync = Instant::now();
                }
                _ => {}
            }
        }
        true
    }

    /// Starts a rewrite: a new increment file (recorded in the manifest at once) and a
    /// background thread that writes `snapshot` as the new base.
    pub fn start_rewrite(&mut self, snapshot: Vec<u8>) -> io::Result<()> {
        self.flush();
        let _ = self.incr.sync_data();
        let seq = self.manifest.iter().map(|e| e.seq).max().unwrap_or(0) + 1;
        let incr_name = format!("{}.{seq}.incr.aof", self.filename);
        let new_incr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(&incr_name))?;
        let mut manifest = self.manifest.clone();
        manifest.push(ManifestEntry {
            name: incr_name,
            seq,
            base: false,
        });
        write_atomically(
            &Aof::manifest_path(&self.dir, &self.filename),
            render_manifest(&manifest).as_bytes(),
        )?;
        self.manifest = manifest;
        self.incr = new_incr;
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

    /// Called from the executor's periodic work: installs a finished rewrite.
    fn rewrite_failed(&mut self) {
        self.last_rewrite_ok = false;
        self.rewrite_failures_in_a_row += 1;
    }

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
            tracing::warn!("Background AOF rewrite failed: {e}");
            self.rewrite_failed();
            return;
        }
        // Everything older than the increment opened at the start of this rewrite is now in the base.
        let old: Vec<ManifestEntry> = self
            .manifest
            .iter()
            .filter(|e| e.seq < done.seq)
            .cloned()
            .collect();
        let mut manifest = vec![ManifestEntry {
            name: done.base_name,
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
            tracing::warn!("Can't install the rewritten AOF manifest: {e}");
            self.rewrite_failed();
            return;
        }
        self.manifest = manifest;
        for e in old {
            let _ = std::fs::remove_file(self.dir.join(&e.name));
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
