//! Loading the append-only file set at start-up, a bounded amount per executor round so that
//! clients connecting meanwhile get `-LOADING` instead of hanging.

use crate::protocol::{DecodeLimits, Decoder};
use bytes::{Bytes, BytesMut};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub enum LoadError {
    /// Unreadable or corrupt in the middle: start-up stops with this message.
    Fatal(String),
}

pub struct Loader {
    files: Vec<PathBuf>,
    /// Reading one in-memory unit stream (a replicated entry or snapshot), not files: a torn
    /// tail is then an error, never cut off (there is no file to truncate).
    in_memory: bool,
    index: usize,
    opened: bool,
    buf: BytesMut,
    file_len: usize,
    decoder: Decoder,
    /// Commands of a MULTI block waiting for its EXEC, and where the block started.
    multi: Option<(usize, Vec<Vec<Bytes>>)>,
    pub truncated_ok: bool,
    pub commands: u64,
    pub started: Instant,
    /// Bytes of the files already read to the end, and of all of them (INFO's loading_*).
    done_bytes: u64,
    total_bytes: u64,
    /// When loading started, in Unix seconds (INFO's loading_start_time).
    pub started_unix: u64,
    /// When progress was last logged.
    pub progress_logged: Instant,
}

pub enum Step {
    /// Apply these commands (one unit: a single command or a whole MULTI block).
    Apply(Vec<Vec<Bytes>>),
    Done,
}

impl Loader {
    pub fn new(files: Vec<PathBuf>, truncated_ok: bool) -> Loader {
        let total_bytes = files
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len())
            .sum();
        Loader {
            done_bytes: 0,
            total_bytes,
            started_unix: crate::clock::unix_ms() / 1000,
            progress_logged: Instant::now(),
            files,
            in_memory: false,
            index: 0,
            opened: false,
            buf: BytesMut::new(),
            file_len: 0,
            decoder: Decoder::new(),
            multi: None,
            truncated_ok,
            commands: 0,
            started: Instant::now(),
        }
    }

    /// A loader over one in-memory stream in the append-only file's format (a replicated
    /// entry, or a snapshot being installed), grouping MULTI/EXEC blocks into units exactly
    /// as a file is grouped, so a follower applies an entry as start-up applies a unit.
    pub fn from_bytes(data: Bytes) -> Loader {
        let file_len = data.len();
        Loader {
            done_bytes: 0,
            total_bytes: file_len as u64,
            started_unix: 0,
            progress_logged: Instant::now(),
            files: Vec::new(),
            in_memory: true,
            index: 0,
            opened: true,
            // Bytes -> BytesMut reuses the allocation when `data` is its only handle.
            buf: BytesMut::from(data),
            file_len,
            decoder: Decoder::new(),
            multi: None,
            truncated_ok: false,
            commands: 0,
            started: Instant::now(),
        }
    }

    fn offset(&self) -> usize {
        self.file_len - self.buf.len()
    }

    /// (bytes read so far, bytes in all the files): Redis's loading_loaded_bytes and
    /// loading_total_bytes.
    pub fn progress(&self) -> (u64, u64) {
        let current = if self.opened { self.offset() as u64 } else { 0 };
        let loaded = self.done_bytes + current;
        (loaded, self.total_bytes.max(loaded))
    }

    /// Reads files[index] into memory; false when every file is done.
    fn open_current(&mut self) -> Result<bool, LoadError> {
        let Some(path) = self.files.get(self.index) else {
            return Ok(false);
        };
        let data = match std::fs::read(path) {
            Ok(d) => d,
            // An increment file listed but never created (crash right after the manifest write).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                return Err(LoadError::Fatal(format!(
                    "Fatal error: can't open the append log file {} for reading: {e}",
                    path.display()
                )))
            }
        };
        self.file_len = data.len();
        self.buf = BytesMut::from(&data[..]);
        self.decoder = Decoder::new();
        self.multi = None;
        self.opened = true;
        Ok(true)
    }

    fn next_file(&mut self) {
        self.done_bytes += self.file_len as u64;
        self.index += 1;
        self.opened = false;
        self.buf.clear();
    }

    /// The next unit to apply, or Done.
    pub fn next_unit(&mut self) -> Result<Step, LoadError> {
        loop {
            if !self.opened && !self.open_current()? {
                return Ok(Step::Done);
            }
            if self.buf.is_empty() {
                if let Some((start, _)) = self.multi.take() {
                    self.truncated(start, "MULTI without EXEC")?;
                }
                self.next_file();
                continue;
            }
            let at = self.offset();
            if self.buf[0] != b'*' {
                return Err(self.corrupt(at, "Bad file format reading the append only file"));
            }
            let limits = DecodeLimits {
                max_bulk_len: i64::MAX,
            };
            match self.decoder.decode(&mut self.buf, &limits) {
                Ok(Some(args)) => {
                    if args.is_empty() {
                        continue;
                    }
                    if args[0].eq_ignore_ascii_case(b"multi") {
                        self.multi = Some((at, Vec::new()));
                        continue;
                    }
                    if args[0].eq_ignore_ascii_case(b"exec") {
                        if let Some((_, cmds)) = self.multi.take() {
                            self.commands += cmds.len() as u64;
                            return Ok(Step::Apply(cmds));
                        }
                        return Err(self.corrupt(at, "EXEC without MULTI"));
                    }
                    if let Some((_, cmds)) = &mut self.multi {
                        cmds.push(args);
                        continue;
                    }
                    self.commands += 1;
                    return Ok(Step::Apply(vec![args]));
                }
                Ok(None) => {
                    // Bytes left that do not form a whole command: a torn write at the tail.
                    let start = self.multi.take().map(|(s, _)| s).unwrap_or(at);
                    self.truncated(start, "unexpected end of file")?;
                    self.next_file();
                }
                Err(e) => return Err(self.corrupt(at, &format!("{e}"))),
            }
        }
    }

    fn corrupt(&self, at: usize, why: &str) -> LoadError {
        let path = self
            .files
            .get(self.index)
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        if self.in_memory {
            return LoadError::Fatal(format!(
                "Bad format in a replicated entry at offset {at}: {why}"
            ));
        }
        LoadError::Fatal(format!("Bad file format reading the append only file {path} at offset {at}: {why}. Make a backup of your AOF file, then use redis-check-aof --fix <filename.manifest>"))
    }

    /// A torn tail: allowed (and cut off) only at the end of the last file with aof-load-truncated.
    fn truncated(&mut self, at: usize, why: &str) -> Result<(), LoadError> {
        if self.in_memory {
            return Err(LoadError::Fatal(format!(
                "Unexpected end of a replicated entry at offset {at} ({why})"
            )));
        }
        let last = self.index + 1 == self.files.len();
        let path = self.files[self.index].clone();
        if !(last && self.truncated_ok) {
            return Err(LoadError::Fatal(format!(
                "Unexpected end of file reading the append only file {} at offset {at} ({why}). You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
                path.display()
            )));
        }
        tracing::warn!(
            "!!! Warning: short read while loading the AOF file {}!!! ({why})",
            path.display()
        );
        tracing::warn!(
            "!!! Truncating the AOF {} at offset {at} !!!",
            path.display()
        );
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| LoadError::Fatal(format!("Error truncating the AOF file: {e}")))?;
        f.set_len(at as u64)
            .map_err(|e| LoadError::Fatal(format!("Error truncating the AOF file: {e}")))?;
        let _ = f.sync_all();
        tracing::warn!(
            "AOF {} loaded anyway because aof-load-truncated is enabled",
            path.display()
        );
        Ok(())
    }

    pub fn budget() -> Duration {
        Duration::from_millis(20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persist::emit;
    use crate::store::{ChangeRecord, Dbs, Value};

    fn s(v: &str) -> Value {
        Value::Str(Bytes::copy_from_slice(v.as_bytes()))
    }

    /// What `Server::end_unit` would log for three units: a lone SET in db 0, a two-key unit
    /// (MULTI/EXEC) in db 1, and a deletion with a deadline-bearing key.
    fn three_units() -> Vec<u8> {
        let mut dbs = Dbs::new(2);
        dbs.record_changes(true);
        let mut out = Vec::new();
        let mut selected = None;
        let mut r = ChangeRecord::default();
        dbs[0].set(b"lock", s("tok"), 0);
        assert!(dbs.take_changes(&mut r));
        emit::unit(&mut out, &mut selected, &dbs, &r);
        dbs[1].set(b"a", s("1"), 0);
        dbs[1].set(b"b", s("2"), 5000);
        assert!(dbs.take_changes(&mut r));
        emit::unit(&mut out, &mut selected, &dbs, &r);
        dbs[1].remove(b"a", 0);
        assert!(dbs.take_changes(&mut r));
        emit::unit(&mut out, &mut selected, &dbs, &r);
        out
    }

    fn units(data: Vec<u8>) -> Result<Vec<Vec<Vec<String>>>, LoadError> {
        let mut l = Loader::from_bytes(Bytes::from(data));
        let mut got = Vec::new();
        // Bounded: every unit consumes input.
        for _ in 0..100 {
            match l.next_unit()? {
                Step::Apply(cmds) => got.push(
                    cmds.iter()
                        .map(|c| {
                            c.iter()
                                .map(|a| String::from_utf8_lossy(a).into_owned())
                                .collect()
                        })
                        .collect(),
                ),
                Step::Done => return Ok(got),
            }
        }
        panic!("the loader never finished");
    }

    fn cmd(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn in_memory_units_come_back_grouped_and_in_order() {
        let got = units(three_units()).expect("well-formed entries load");
        assert_eq!(
            got,
            vec![
                // A SELECT is a unit of its own, as in a file.
                vec![cmd(&["SELECT", "0"])],
                vec![cmd(&["SET", "lock", "tok"])],
                vec![
                    cmd(&["SELECT", "1"]),
                    cmd(&["SET", "a", "1"]),
                    cmd(&["SET", "b", "2", "PXAT", "5000"]),
                ],
                vec![cmd(&["DEL", "a"])],
            ]
        );
        assert!(units(Vec::new()).expect("empty input").is_empty());
    }

    #[test]
    fn torn_in_memory_input_is_rejected_not_cut() {
        let whole = three_units();
        // Every proper prefix that ends inside a command or inside the MULTI block is an
        // error; a prefix ending exactly between units is simply fewer units.
        let mut errors = 0;
        for cut in 1..whole.len() {
            match units(whole[..cut].to_vec()) {
                Err(LoadError::Fatal(msg)) => {
                    assert!(msg.contains("replicated entry"), "{msg}");
                    errors += 1;
                }
                Ok(got) => assert!(got.len() < 4, "cut at {cut} lost nothing?"),
            }
        }
        assert!(errors > whole.len() / 2);
        // Not RESP at all, and EXEC without MULTI.
        assert!(units(b"hello\r\n".to_vec()).is_err());
        assert!(units(b"*1\r\n$4\r\nEXEC\r\n".to_vec()).is_err());
    }
}
