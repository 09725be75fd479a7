//! Loading the append-only file set at start-up, a bounded amount per executor round so that
//! clients connecting meanwhile get `-LOADING` instead of hanging.
//!
//! The files are read with a strict parser of their own format (Redis's
//! `loadSingleAppendOnlyFile`): `*<n>\r\n` then `n` times `$<len>\r\n<len bytes>\r\n`, and `#`
//! annotation lines between commands. The only damage tolerated is a torn tail: the last file
//! ending inside a command (or inside a MULTI block) with nothing complete after that point,
//! which `aof-load-truncated yes` cuts off. Anything else is refused with the offset, so a
//! damaged byte in the middle never silently drops what follows it.

use bytes::Bytes;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub enum LoadError {
    /// Unreadable or corrupt in the middle: start-up stops with this message.
    Fatal(String),
}

/// Longest annotation line (Redis's AOF_ANNOTATION_LINE_MAX_LEN).
const ANNOTATION_MAX: usize = 1024;
/// Longest `*<n>` / `$<len>` number accepted (more digits cannot be a real count).
const MAX_DIGITS: usize = 18;

/// What the bytes at one offset hold.
#[derive(Debug, PartialEq)]
enum Parsed {
    /// A whole command and the offset after it.
    Command(Vec<Bytes>, usize),
    /// A `#` annotation line and the offset after it.
    Annotation(usize),
    /// A valid beginning of a command that the data ends inside.
    Incomplete,
    /// Not the file format; the reason.
    Bad(&'static str),
}

/// Reads `<digits>\r\n` at `at`: Ok((value, offset after)), Err(None) when the data ends inside
/// it, Err(Some(why)) when it is malformed.
fn number(data: &[u8], at: usize) -> Result<(usize, usize), Option<&'static str>> {
    let mut i = at;
    let mut v: usize = 0;
    while i < data.len() && data[i].is_ascii_digit() {
        if i - at >= MAX_DIGITS {
            return Err(Some("a length with too many digits"));
        }
        v = v * 10 + (data[i] - b'0') as usize;
        i += 1;
    }
    if i == data.len() {
        return Err(None);
    }
    if i == at {
        return Err(Some("a length that is not a number"));
    }
    if data[i] != b'\r' {
        return Err(Some("a length not followed by CRLF"));
    }
    match data.get(i + 1) {
        None => Err(None),
        Some(b'\n') => Ok((v, i + 2)),
        Some(_) => Err(Some("a length not followed by CRLF")),
    }
}

/// Parses what starts at `at` (which is below `data.len()`).
fn parse_at(data: &Bytes, at: usize) -> Parsed {
    let d: &[u8] = data;
    if d[at] == b'#' {
        let window = &d[at..d.len().min(at + ANNOTATION_MAX)];
        return match window.iter().position(|&b| b == b'\n') {
            Some(nl) => Parsed::Annotation(at + nl + 1),
            None if window.len() < ANNOTATION_MAX => Parsed::Incomplete,
            None => Parsed::Bad("an annotation line longer than 1024 bytes"),
        };
    }
    if d[at] != b'*' {
        return Parsed::Bad("a command that does not start with '*'");
    }
    let (argc, mut i) = match number(d, at + 1) {
        Ok(v) => v,
        Err(None) => return Parsed::Incomplete,
        Err(Some(why)) => return Parsed::Bad(why),
    };
    if argc == 0 {
        return Parsed::Bad("a command with no arguments");
    }
    let mut args = Vec::with_capacity(argc.min(16));
    for _ in 0..argc {
        match d.get(i) {
            None => return Parsed::Incomplete,
            Some(b'$') => {}
            Some(_) => return Parsed::Bad("an argument that does not start with '$'"),
        }
        let (len, from) = match number(d, i + 1) {
            Ok(v) => v,
            Err(None) => return Parsed::Incomplete,
            Err(Some(why)) => return Parsed::Bad(why),
        };
        let Some(end) = from.checked_add(len) else {
            return Parsed::Bad("an argument length out of range");
        };
        // The CRLF after the bytes is checked as far as the data goes.
        match (d.get(end), d.get(end + 1)) {
            (None, _) => return Parsed::Incomplete,
            (Some(b'\r'), None) => return Parsed::Incomplete,
            (Some(b'\r'), Some(b'\n')) => {}
            _ => return Parsed::Bad("an argument not followed by CRLF"),
        }
        args.push(data.slice(from..end));
        i = end + 2;
    }
    Parsed::Command(args, i)
}

/// Whether a whole command starts somewhere after `from` at the beginning of a line: then the
/// data ending inside the command at `from` is damage in the middle, not a torn tail.
fn complete_command_after(data: &Bytes, from: usize) -> Option<usize> {
    (from + 1..data.len())
        .filter(|&p| data[p] == b'*' && data[p - 1] == b'\n')
        .find(|&p| matches!(parse_at(data, p), Parsed::Command(..)))
}

pub struct Loader {
    files: Vec<PathBuf>,
    /// Reading one in-memory unit stream (a replicated entry or snapshot), not files: a torn
    /// tail is then an error, never cut off (there is no file to truncate).
    in_memory: bool,
    index: usize,
    opened: bool,
    data: Bytes,
    pos: usize,
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
    /// Whether a command is one the server knows (the command table lives above this layer;
    /// `knowing` sets it). Every command is checked as it is read, inside MULTI too.
    known: fn(&[Bytes]) -> bool,
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
            data: Bytes::new(),
            pos: 0,
            multi: None,
            truncated_ok,
            commands: 0,
            started: Instant::now(),
            known: |_| true,
        }
    }

    /// A loader over one in-memory stream in the append-only file's format (a replicated
    /// entry, or a snapshot being installed), grouping MULTI/EXEC blocks into units exactly
    /// as a file is grouped, so a follower applies an entry as start-up applies a unit.
    pub fn from_bytes(data: Bytes) -> Loader {
        Loader {
            done_bytes: 0,
            total_bytes: data.len() as u64,
            started_unix: 0,
            progress_logged: Instant::now(),
            files: Vec::new(),
            in_memory: true,
            index: 0,
            opened: true,
            data,
            pos: 0,
            multi: None,
            truncated_ok: false,
            commands: 0,
            started: Instant::now(),
            known: |_| true,
        }
    }

    /// Refuses, as damage, any command `known` does not accept (Redis looks each command up
    /// as it loads it).
    pub fn knowing(mut self, known: fn(&[Bytes]) -> bool) -> Loader {
        self.known = known;
        self
    }

    /// (bytes read so far, bytes in all the files): Redis's loading_loaded_bytes and
    /// loading_total_bytes.
    pub fn progress(&self) -> (u64, u64) {
        let current = if self.opened { self.pos as u64 } else { 0 };
        let loaded = self.done_bytes + current;
        (loaded, self.total_bytes.max(loaded))
    }

    /// Where the unit last returned ends, for messages: "<file> at offset <n>".
    pub fn position(&self) -> String {
        let path = self
            .files
            .get(self.index)
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        format!("{path} at offset {}", self.pos)
    }

    /// Reads files[index] into memory; false when every file is done.
    fn open_current(&mut self) -> Result<bool, LoadError> {
        let Some(path) = self.files.get(self.index) else {
            return Ok(false);
        };
        // Every file the manifest lists must exist (checked before loading starts, and again
        // here): a missing one is a lost part of the log, never an empty one.
        let data = std::fs::read(path).map_err(|e| {
            LoadError::Fatal(format!(
                "Fatal error: can't open the append log file {} for reading: {e}",
                path.display()
            ))
        })?;
        self.data = Bytes::from(data);
        self.pos = 0;
        self.multi = None;
        self.opened = true;
        Ok(true)
    }

    fn next_file(&mut self) {
        self.done_bytes += self.data.len() as u64;
        self.index += 1;
        self.opened = false;
        self.data = Bytes::new();
        self.pos = 0;
    }

    /// The next unit to apply, or Done.
    pub fn next_unit(&mut self) -> Result<Step, LoadError> {
        loop {
            if !self.opened && !self.open_current()? {
                return Ok(Step::Done);
            }
            if self.pos >= self.data.len() {
                if let Some((start, _)) = self.multi.take() {
                    self.truncated(start, "MULTI without EXEC")?;
                }
                self.next_file();
                continue;
            }
            let at = self.pos;
            match parse_at(&self.data, at) {
                Parsed::Annotation(next) => self.pos = next,
                Parsed::Command(args, next) => {
                    self.pos = next;
                    // Resolved as it is read, inside a MULTI block too (Redis looks each
                    // command up before queueing it): a damaged EXEC must not turn its block
                    // into an unterminated one that would be cut off as a torn tail.
                    if !(self.known)(&args) {
                        let name = String::from_utf8_lossy(&args[0]).into_owned();
                        return Err(
                            self.corrupt(at, &format!("Unknown command '{}'", name.escape_debug()))
                        );
                    }
                    if args[0].eq_ignore_ascii_case(b"multi") {
                        if self.multi.is_some() {
                            return Err(self.corrupt(at, "MULTI inside a MULTI block"));
                        }
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
                Parsed::Incomplete => {
                    if let Some(next) = complete_command_after(&self.data, at) {
                        return Err(self.corrupt(
                            at,
                            &format!("a command runs past the end of the file, but a complete command follows it at offset {next}: this is damage in the middle of the file, not a torn tail, and truncating here would drop everything after it"),
                        ));
                    }
                    // A torn write at the tail: the unit it belongs to is dropped whole.
                    let start = self.multi.take().map(|(s, _)| s).unwrap_or(at);
                    self.truncated(start, "unexpected end of file")?;
                    self.next_file();
                }
                Parsed::Bad(why) => return Err(self.corrupt(at, why)),
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
        LoadError::Fatal(format!("Bad file format reading the append only file {path} at offset {at}: {why}. Nothing was changed on disk. To recover: make a backup of the AOF directory, then repair the command at that offset by hand or restore the directory from a backup (redis-check-aof --fix <filename.manifest> would cut the file at this offset and lose every write after it)"))
    }

    /// A torn tail: allowed (and cut off) only at the end of the last file with
    /// aof-load-truncated; anywhere else the file is refused and left as it is.
    fn truncated(&mut self, at: usize, why: &str) -> Result<(), LoadError> {
        if self.in_memory {
            return Err(LoadError::Fatal(format!(
                "Unexpected end of a replicated entry at offset {at} ({why})"
            )));
        }
        let last = self.index + 1 == self.files.len();
        let path = self.files[self.index].clone();
        if !last {
            return Err(LoadError::Fatal(format!(
                "Unexpected end of file reading the append only file {} at offset {at} ({why}), and it is not the last file of the manifest: later files hold writes made after it, so it is not cut. Nothing was changed on disk. To recover: restore the AOF directory from a backup, or repair the end of this file by hand.",
                path.display()
            )));
        }
        if !self.truncated_ok {
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
        f.sync_all()
            .map_err(|e| LoadError::Fatal(format!("Error truncating the AOF file: {e}")))?;
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

#[cfg(test)]
mod strict {
    use super::*;

    fn b(s: &[u8]) -> Bytes {
        Bytes::copy_from_slice(s)
    }

    #[test]
    fn parser_accepts_exactly_the_format() {
        let d = b(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
        assert_eq!(
            parse_at(&d, 0),
            Parsed::Command(vec![b(b"GET"), b(b"k")], d.len())
        );
        // Every proper prefix is incomplete, never bad.
        for cut in 1..d.len() {
            assert_eq!(parse_at(&d.slice(..cut), 0), Parsed::Incomplete, "{cut}");
        }
        // A NUL, a stray byte or a missing LF anywhere in a header is bad, not incomplete.
        for (i, &c) in d.iter().enumerate() {
            if c == b'*' || c == b'$' || c.is_ascii_alphabetic() {
                continue;
            }
            let mut v = d.to_vec();
            v[i] = 0;
            assert!(
                matches!(parse_at(&Bytes::from(v), 0), Parsed::Bad(_)),
                "NUL at {i}"
            );
        }
        assert!(matches!(parse_at(&b(b"*0\r\n"), 0), Parsed::Bad(_)));
        assert!(matches!(parse_at(&b(b"*-1\r\n"), 0), Parsed::Bad(_)));
        assert!(matches!(parse_at(&b(b"SET a b\r\n"), 0), Parsed::Bad(_)));
        assert_eq!(parse_at(&b(b"#TS:1\r\n*1"), 0), Parsed::Annotation(7));
    }

    fn file_with(data: &[u8], name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("deadbolt-load-unit-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f.aof");
        std::fs::write(&p, data).unwrap();
        p
    }

    fn load_all(files: Vec<PathBuf>) -> Result<usize, String> {
        // The commands these files hold; the server checks against its command table.
        let mut l = Loader::new(files, true).knowing(|a| {
            ["set", "multi", "exec", "select"]
                .iter()
                .any(|c| a[0].eq_ignore_ascii_case(c.as_bytes()))
        });
        let mut n = 0;
        loop {
            match l.next_unit() {
                Ok(Step::Apply(_)) => n += 1,
                Ok(Step::Done) => return Ok(n),
                Err(LoadError::Fatal(m)) => return Err(m),
            }
        }
    }

    const SET: &[u8] = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";

    #[test]
    fn only_a_torn_tail_is_cut() {
        // A NUL before the CRLF of a header in the middle: refused, the file left whole.
        let mut data = [SET, SET, SET].concat();
        data[SET.len() + 1] = 0;
        let p = file_with(&data, "nul");
        let e = load_all(vec![p.clone()]).unwrap_err();
        assert!(e.contains("Bad file format"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), data);
        // A length made larger in the middle runs to the end of the file, but complete
        // commands follow: refused, not cut.
        let long: &[u8] = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$999\r\nv\r\n";
        let data = [SET, long, SET].concat();
        let p = file_with(&data, "len");
        let e = load_all(vec![p.clone()]).unwrap_err();
        assert!(e.contains("not a torn tail"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), data);
        // A real torn tail in the last file is cut at the last whole unit.
        let data = [SET, SET, &SET[..10]].concat();
        let p = file_with(&data, "torn");
        assert_eq!(load_all(vec![p.clone()]), Ok(2));
        assert_eq!(std::fs::read(&p).unwrap().len(), 2 * SET.len());
        // A MULTI block torn anywhere goes as a whole.
        let multi = b"*1\r\n$5\r\nMULTI\r\n";
        let data = [SET, multi, SET, SET].concat();
        let p = file_with(&data, "multi");
        assert_eq!(load_all(vec![p.clone()]), Ok(1));
        assert_eq!(std::fs::read(&p).unwrap().len(), SET.len());
        // A torn file that is not the last one is refused and left as it is.
        let first = file_with(&[SET, &SET[..5]].concat(), "first");
        let second = first.with_file_name("g.aof");
        std::fs::write(&second, SET).unwrap();
        let e = load_all(vec![first.clone(), second]).unwrap_err();
        assert!(e.contains("not the last file"), "{e}");
        assert_eq!(std::fs::read(&first).unwrap().len(), SET.len() + 5);
        // A damaged EXEC (an unknown command) is refused, not read as a block torn at the end
        // of the file that would be cut off with the unit after it.
        let exe7 = b"*1\r\n$4\r\nEXE7\r\n";
        let data = [SET, multi, SET, exe7, SET].concat();
        let p = file_with(&data, "exec");
        let e = load_all(vec![p.clone()]).unwrap_err();
        assert!(e.contains("Unknown command 'EXE7'"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), data);
        // MULTI inside MULTI is refused, not a silent drop of the first block's commands.
        let p = file_with(&[multi, SET, multi, SET].concat(), "nested");
        assert!(load_all(vec![p]).unwrap_err().contains("MULTI inside"));
    }
}
