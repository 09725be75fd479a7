//! RDB snapshots (SAVE, BGSAVE, save points, SHUTDOWN SAVE) in Redis 7.0's file format, and
//! loading one at start-up when the append-only file is off: a `dump.rdb` written by Redis 7.0
//! loads into deadbolt and one written by deadbolt loads into Redis (each value is encoded as
//! DUMP encodes it, `store/rdb.rs`).
//!
//! The snapshot is built on the executor thread, from the data as it is at that instant (the
//! same cost as an AOF rewrite's base), and written, fsynced and renamed into place by a
//! background thread, so a crash leaves the previous file whole.

use crate::store::encoding::Limits;
use crate::store::rdb::{crc64, put_entry, put_rdb_len, put_rdb_string, Reader};
use crate::store::{Dbs, Value};
use bytes::Bytes;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

const OP_FUNCTION2: u8 = 0xF5;
const OP_FUNCTION: u8 = 0xF6;
const OP_MODULE_AUX: u8 = 0xF7;
const OP_IDLE: u8 = 0xF8;
const OP_FREQ: u8 = 0xF9;
const OP_AUX: u8 = 0xFA;
const OP_RESIZEDB: u8 = 0xFB;
const OP_EXPIRETIME_MS: u8 = 0xFC;
const OP_EXPIRETIME: u8 = 0xFD;
const OP_SELECTDB: u8 = 0xFE;
const OP_EOF: u8 = 0xFF;

/// The whole dataset as an RDB file (rdbSaveRio), leaving out keys already dead at `now`.
/// The dataset and the function libraries' code as an RDB file (rdbSaveRio): the libraries
/// first (`RDB_OPCODE_FUNCTION2`, as Redis's rdbSaveFunctions), then every database, leaving
/// out keys already dead at `now`. SAVE, BGSAVE and a Redis replica's full resync write this.
pub fn encode(
    dbs: &Dbs,
    now: u64,
    lim: &Limits,
    checksum: bool,
    (redis_ver, used_mem): (&str, usize),
    functions: &[bytes::Bytes],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 << 16);
    out.extend_from_slice(b"REDIS0010");
    let mut num = itoa::Buffer::new();
    for (k, v) in [
        ("redis-ver", redis_ver.to_string()),
        ("redis-bits", "64".to_string()),
        ("ctime", num.format(now / 1000).to_string()),
        ("used-mem", num.format(used_mem).to_string()),
        ("aof-base", "0".to_string()),
    ] {
        out.push(OP_AUX);
        put_rdb_string(&mut out, k.as_bytes(), false);
        put_rdb_string(&mut out, v.as_bytes(), false);
    }
    for code in functions {
        out.push(OP_FUNCTION2);
        put_rdb_string(&mut out, code, false);
    }
    for (i, db) in dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        out.push(OP_SELECTDB);
        put_rdb_len(&mut out, i as u64);
        out.push(OP_RESIZEDB);
        put_rdb_len(&mut out, db.len() as u64);
        put_rdb_len(&mut out, db.expires_count() as u64);
        for (key, e) in db.iter() {
            if e.is_expired(now) {
                continue;
            }
            if e.expires_at != 0 {
                out.push(OP_EXPIRETIME_MS);
                out.extend_from_slice(&(e.expires_at as i64).to_le_bytes());
            }
            put_entry(&mut out, key, &e.value, lim);
        }
    }
    out.push(OP_EOF);
    let crc = if checksum { crc64(0, &out) } else { 0 };
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// What a loaded file held, for the start-up log.
#[derive(Debug, Default)]
pub struct Loaded {
    pub version: String,
    pub ctime: Option<u64>,
    pub used_mem: Option<u64>,
    pub keys: u64,
    pub expired: u64,
    /// The function libraries' code (`RDB_OPCODE_FUNCTION2`), in the file's order; the caller
    /// loads them (FUNCTION LOAD), as Redis's rdbFunctionLoad.
    pub functions: Vec<Bytes>,
}

/// Reads an RDB file, handing each live key to `add(db, key, value, expires_at)` (keys dead at
/// `now` are counted, not added). Err: why the file cannot be loaded, as Redis says it.
pub fn decode(
    bytes: &[u8],
    now: u64,
    databases: usize,
    mut add: impl FnMut(usize, Bytes, Value, u64),
) -> Result<Loaded, String> {
    let bad = |what: &str, at: usize| {
        format!("Short read or OOM loading DB ({what} at byte {at}). Unrecoverable error, aborting now.")
    };
    if bytes.len() < 9 || &bytes[..5] != b"REDIS" {
        return Err("Wrong signature trying to load DB from file".into());
    }
    let version: u32 = std::str::from_utf8(&bytes[5..9])
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or("Wrong signature trying to load DB from file")?;
    if !(1..=10).contains(&version) {
        return Err(format!("Can't handle RDB format version {version}"));
    }
    let mut r = Reader::new(&bytes[9..]);
    let at = |r: &Reader| r.position() + 9;
    let mut info = Loaded::default();
    let mut db = 0usize;
    let mut expires_at = 0u64;
    loop {
        let op = r.byte().map_err(|_| bad("opcode", at(&r)))?;
        match op {
            OP_EOF => break,
            OP_AUX => {
                let k = r.string().map_err(|_| bad("aux field", at(&r)))?;
                let v = r.string().map_err(|_| bad("aux value", at(&r)))?;
                let text = String::from_utf8_lossy(&v).into_owned();
                match &k[..] {
                    b"redis-ver" => info.version = text,
                    b"ctime" => info.ctime = text.parse().ok(),
                    b"used-mem" => info.used_mem = text.parse().ok(),
                    _ => {}
                }
            }
            OP_SELECTDB => {
                let n = r.length().map_err(|_| bad("database", at(&r)))? as usize;
                if n >= databases {
                    return Err(format!(
                        "FATAL: Data file was created with a Redis server configured to handle more than {databases} databases. Exiting"
                    ));
                }
                db = n;
            }
            OP_RESIZEDB => {
                r.length().map_err(|_| bad("resizedb", at(&r)))?;
                r.length().map_err(|_| bad("resizedb", at(&r)))?;
            }
            OP_EXPIRETIME_MS => {
                let b = r.take(8).map_err(|_| bad("expiry", at(&r)))?;
                let ms = i64::from_le_bytes(b.try_into().map_err(|_| bad("expiry", 0))?);
                // A deadline at or before the epoch is long past.
                expires_at = ms.max(1) as u64;
            }
            OP_EXPIRETIME => {
                let b = r.take(4).map_err(|_| bad("expiry", at(&r)))?;
                let s = i32::from_le_bytes(b.try_into().map_err(|_| bad("expiry", 0))?);
                expires_at = (s as i64 * 1000).max(1) as u64;
            }
            OP_IDLE => {
                // LRU idle time: deadbolt keeps no access times.
                r.length().map_err(|_| bad("idle", at(&r)))?;
            }
            OP_FREQ => {
                r.byte().map_err(|_| bad("freq", at(&r)))?;
            }
            OP_FUNCTION2 => {
                let code = r.string().map_err(|_| bad("function library", at(&r)))?;
                info.functions.push(code);
            }
            OP_FUNCTION => {
                // The format of Redis 7.0's release candidates: name, engine, an optional
                // description and the body, joined into today's payload as rdbFunctionLoad does.
                let fail = |what: &str| format!("Failed loading library, Failed loading {what}");
                let name = r.string().map_err(|_| fail("library name"))?;
                let engine = r.string().map_err(|_| fail("engine name"))?;
                let has_desc = r
                    .length()
                    .map_err(|_| fail("library description indicator"))?;
                if has_desc != 0 {
                    r.string().map_err(|_| fail("library description"))?;
                }
                let blob = r.string().map_err(|_| fail("library blob"))?;
                let mut code = Vec::with_capacity(blob.len() + name.len() + engine.len() + 10);
                code.extend_from_slice(b"#!");
                code.extend_from_slice(&engine);
                code.extend_from_slice(b" name=");
                code.extend_from_slice(&name);
                code.push(b'\n');
                code.extend_from_slice(&blob);
                info.functions.push(Bytes::from(code));
            }
            OP_MODULE_AUX => {
                return Err("The RDB file holds module data, which deadbolt cannot load".into());
            }
            t => {
                let key = r.string().map_err(|_| bad("key", at(&r)))?;
                let value = r.value(t).map_err(|_| {
                    format!(
                        "Bad data format loading key '{}' (RDB type {t}) at byte {}",
                        String::from_utf8_lossy(&key),
                        at(&r)
                    )
                })?;
                if expires_at != 0 && expires_at < now {
                    info.expired += 1;
                } else {
                    add(db, key, value, expires_at);
                    info.keys += 1;
                }
                expires_at = 0;
            }
        }
    }
    let end = at(&r);
    if version >= 5 {
        let sum = bytes
            .get(end..end + 8)
            .ok_or("Short read loading the RDB checksum")?;
        let expected = u64::from_le_bytes(sum.try_into().map_err(|_| "Short read")?);
        if expected != 0 && expected != crc64(0, &bytes[..end]) {
            return Err("Wrong RDB checksum. Aborting now.".into());
        }
    }
    Ok(info)
}

/// A background save being written, and the outcome of the last one (INFO persistence).
#[derive(Default)]
pub struct RdbState {
    /// The save being written: its outcome, when it started (monotonic, Unix seconds).
    pub writing: Option<(mpsc::Receiver<std::io::Result<()>>, Instant, u64)>,
    pub last_ok: bool,
    pub last_secs: i64,
    /// Unix seconds of the last successful save (LASTSAVE).
    pub last_save_unix: u64,
    pub saves: u64,
    /// BGSAVE SCHEDULE while another background write ran.
    pub scheduled: bool,
    /// Unix seconds of the last attempt, for the save points' retry delay.
    pub last_try_unix: u64,
    /// Keys loaded and keys found expired when the file was loaded at start-up (INFO).
    pub loaded: (u64, u64),
    /// The newest save: a background save renames its file into place only if it is still the
    /// newest when it gets there (under the lock), so an older snapshot abandoned by FLUSHALL
    /// or SHUTDOWN can never replace a newer one.
    newest: Arc<Mutex<u64>>,
}

impl RdbState {
    pub fn new(now_unix: u64) -> RdbState {
        RdbState {
            last_ok: true,
            last_secs: -1,
            last_save_unix: now_unix,
            ..Default::default()
        }
    }

    pub fn in_progress(&self) -> bool {
        self.writing.is_some()
    }

    /// Writes `data` to `path` on another thread (a temporary file, fsync, then a rename over
    /// the old file if no newer save started meanwhile).
    pub fn start(&mut self, path: PathBuf, data: Vec<u8>, now_unix: u64) {
        let (tx, rx) = mpsc::channel();
        self.last_try_unix = now_unix;
        let generation = self.next_generation();
        let newest = self.newest.clone();
        let spawned = std::thread::Builder::new()
            .name("rdb-save".into())
            .spawn(move || {
                let tmp = temp_path(&path, generation);
                let result = write_synced(&tmp, &data).and_then(|()| {
                    let newest = newest.lock().unwrap_or_else(|e| e.into_inner());
                    if *newest != generation {
                        let _ = std::fs::remove_file(&tmp);
                        return Err(std::io::Error::other(
                            "a newer save replaced this one before it finished",
                        ));
                    }
                    install(&tmp, &path)
                });
                if result.is_err() {
                    let _ = std::fs::remove_file(&tmp);
                }
                let _ = tx.send(result);
            });
        match spawned {
            Ok(_) => self.writing = Some((rx, Instant::now(), now_unix)),
            Err(e) => {
                tracing::warn!("Can't save in background: {e}");
                self.last_ok = false;
            }
        }
    }

    /// SAVE on the calling thread; a background save still running is abandoned (it will not
    /// rename its file over this one).
    pub fn save_now(&mut self, path: &Path, data: &[u8], now_unix: u64) -> std::io::Result<()> {
        let generation = self.next_generation();
        self.writing = None;
        let started = Instant::now();
        let tmp = temp_path(path, generation);
        let result = write_synced(&tmp, data).and_then(|()| {
            let newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
            debug_assert_eq!(*newest, generation);
            install(&tmp, path)
        });
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        self.last_secs = started.elapsed().as_secs() as i64;
        self.last_try_unix = now_unix;
        self.finish(result, now_unix).map(|_| ())
    }

    fn next_generation(&mut self) -> u64 {
        let mut newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        *newest += 1;
        *newest
    }

    /// The background save ended: Some(Ok(started unix)) or Some(Err) once.
    pub fn poll(&mut self) -> Option<std::io::Result<u64>> {
        let (rx, started, at) = self.writing.as_ref()?;
        let result = match rx.try_recv() {
            Ok(r) => r,
            Err(mpsc::TryRecvError::Empty) => return None,
            Err(mpsc::TryRecvError::Disconnected) => Err(std::io::Error::other(
                "the saving thread ended without a result",
            )),
        };
        let (secs, at) = (started.elapsed().as_secs() as i64, *at);
        self.writing = None;
        self.last_secs = secs;
        Some(self.finish(result, at))
    }

    /// Records a finished save (foreground or background).
    fn finish(&mut self, result: std::io::Result<()>, at: u64) -> std::io::Result<u64> {
        match result {
            Ok(()) => {
                self.last_ok = true;
                self.last_save_unix = at;
                self.saves += 1;
                Ok(at)
            }
            Err(e) => {
                self.last_ok = false;
                Err(e)
            }
        }
    }
}

/// `temp-<generation>-<pid>.rdb` beside the file, as Redis's `temp-<pid>.rdb`.
fn temp_path(path: &Path, generation: u64) -> PathBuf {
    path.with_file_name(format!("temp-{generation}-{}.rdb", std::process::id()))
}

fn write_synced(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(path)?;
    f.write_all(data)?;
    f.sync_all()
}

/// Renames the written file into place and makes the rename durable.
fn install(tmp: &Path, path: &Path) -> std::io::Result<()> {
    std::fs::rename(tmp, path)?;
    if let Some(dir) = path.parent() {
        if let Ok(d) = std::fs::File::open(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        }) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// `dir/dbfilename`.
pub fn path(dir: &str, dbfilename: &str) -> PathBuf {
    Path::new(dir).join(dbfilename)
}
