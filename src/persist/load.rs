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
}

pub enum Step {
    /// Apply these commands (one unit: a single command or a whole MULTI block).
    Apply(Vec<Vec<Bytes>>),
    Done,
}

impl Loader {
    pub fn new(files: Vec<PathBuf>, truncated_ok: bool) -> Loader {
        Loader {
            files,
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

    fn offset(&self) -> usize {
        self.file_len - self.buf.len()
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
        LoadError::Fatal(format!("Bad file format reading the append only file {path} at offset {at}: {why}. Make a backup of your AOF file, then use redis-check-aof --fix <filename.manifest>"))
    }

    /// A torn tail: allowed (and cut off) only at the end of the last file with aof-load-truncated.
    fn truncated(&mut self, at: usize, why: &str) -> Result<(), LoadError> {
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
