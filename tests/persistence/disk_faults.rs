//! The disk-fault suite: the append-only file under damaged bytes, damaged manifests, a full
//! disk, failing fsync and kill -9 during a rewrite, each row compared with what redis-server
//! 7.0.15 does on the same files (deadbolt does the same or something safer), and every
//! acknowledged write checked after the restart.
//!
//! Bounded form (this file, a few minutes on two cores). `scripts/disk-faults` runs the long
//! form through the same tests with larger counts (DISK_FAULTS_OFFSETS=all, more kills).
//! The ENOSPC rows mount a small tmpfs and so need root: without it they fail saying so.

use crate::common;

use common::{resp_cmd, Conn, TempDir};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

const MANIFEST: &str = "appendonly.aof.manifest";

/// A process whose log is collected line by line.
struct Proc {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
    /// The threads reading its output: they end when it exits (and closes its pipes).
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    fn spawn(mut cmd: Command) -> Proc {
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null());
        let mut child = cmd.spawn().expect("spawn server");
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut readers = Vec::new();
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let log = log.clone();
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    log.lock().unwrap().push(line);
                }
            }));
        }
        Proc {
            child,
            log,
            readers,
        }
    }

    /// After the process exited: every line it wrote is in `log`.
    fn drain(&mut self) {
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
    }

    fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    fn logged(&self, needle: &str) -> Option<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .find(|l| l.contains(needle))
            .cloned()
    }

    /// Ok(port) once the server is ready after loading; Err(exit code) if it exited first.
    fn ready(&mut self, port: Option<u16>) -> Result<u16, i32> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                self.drain();
                return Err(st.code().unwrap_or(-1));
            }
            if self.logged("Ready to accept connections").is_some() {
                if let Some(p) = port {
                    return Ok(p);
                }
                let line = self.logged("Listening on 127.0.0.1:").unwrap();
                return Ok(line
                    .split("Listening on 127.0.0.1:")
                    .nth(1)
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap());
            }
            assert!(
                Instant::now() < deadline,
                "server neither ready nor exited: {}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(st)) = self.child.try_wait() {
                self.drain();
                return Some(st.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn deadbolt_cmd(dir: &Path, fsync: &str) -> Command {
    let mut cmd = Command::new(common::deadbolt_bin());
    cmd.args(["--port", "0", "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(["--appendonly", "yes", "--appendfsync", fsync])
        .args(["--aof-load-truncated", "yes", "--save", ""])
        .args(common::io_threads_args());
    cmd
}

fn redis_cmd(dir: &Path, port: u16) -> Command {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(["--appendonly", "yes", "--aof-load-truncated", "yes"])
        .args(["--save", "", "--daemonize", "no"]);
    cmd
}

/// A ready deadbolt on `dir` and a connection to it.
fn start_deadbolt(dir: &Path, fsync: &str) -> (Proc, Conn) {
    start_deadbolt_with(deadbolt_cmd(dir, fsync))
}

fn start_deadbolt_with(cmd: Command) -> (Proc, Conn) {
    let mut p = Proc::spawn(cmd);
    match p.ready(None) {
        Ok(port) => (p, Conn::connect(port)),
        Err(code) => panic!("deadbolt exited ({code}): {}", p.log_text()),
    }
}

/// The elements of an array reply of bulk strings.
fn bulks(reply: &[u8]) -> Vec<Vec<u8>> {
    assert!(
        reply.starts_with(b"*"),
        "{}",
        String::from_utf8_lossy(reply)
    );
    let mut out = Vec::new();
    let mut at = reply.iter().position(|&b| b == b'\n').unwrap() + 1;
    while at < reply.len() {
        let eol = at + reply[at..].iter().position(|&b| b == b'\n').unwrap();
        let len: usize = std::str::from_utf8(&reply[at + 1..eol - 1])
            .unwrap()
            .parse()
            .unwrap();
        out.push(reply[eol + 1..eol + 1 + len].to_vec());
        at = eol + 1 + len + 2;
    }
    out
}

/// (db, key) of every key in the 16 databases (damage to a SELECT moves keys to another).
fn key_set(c: &mut Conn) -> BTreeSet<(u8, Vec<u8>)> {
    let mut keys = BTreeSet::new();
    for db in 0..16u8 {
        assert_eq!(c.cmd(&["SELECT", &db.to_string()]), b"+OK\r\n");
        for k in bulks(&c.cmd(&["KEYS", "*"])) {
            keys.insert((db, k));
        }
    }
    keys
}

#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Refused(i32, String),
    Loaded(BTreeSet<(u8, Vec<u8>)>),
}

fn classify_deadbolt(dir: &Path) -> Outcome {
    let mut p = Proc::spawn(deadbolt_cmd(dir, "no"));
    match p.ready(None) {
        Ok(port) => Outcome::Loaded(key_set(&mut Conn::connect(port))),
        Err(code) => Outcome::Refused(code, p.log_text()),
    }
}

fn classify_redis(dir: &Path) -> Outcome {
    for _ in 0..5 {
        let port = common::free_port();
        let mut p = Proc::spawn(redis_cmd(dir, port));
        match p.ready(Some(port)) {
            Ok(port) => return Outcome::Loaded(key_set(&mut Conn::connect(port))),
            // Another process took the port between the check and the bind: not a refusal.
            Err(_) if p.log_text().contains("Address already in use") => continue,
            Err(code) => return Outcome::Refused(code, p.log_text()),
        }
    }
    panic!("redis-server found no free port");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// A sample AOF set written by deadbolt: a base (after BGREWRITEAOF) and an incr file, a few
/// hundred keys in dbs 0 and 1, single commands and MULTI blocks (MSET, transactions).
struct Sample {
    /// The `appendonlydir` of the sample.
    aof: PathBuf,
    /// (file name, length) of the base then the incr file.
    files: Vec<(String, usize)>,
    keys: BTreeSet<(u8, Vec<u8>)>,
}

fn wait_info(c: &mut Conn, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = c.cmd_str(&["INFO", "persistence"]);
        if info.contains(needle) {
            return;
        }
        assert!(Instant::now() < deadline, "no {needle:?} in {info}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn manifest_entries(aof: &Path) -> Vec<(String, char)> {
    std::fs::read_to_string(aof.join(MANIFEST))
        .unwrap()
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[1].to_string(), w[5].chars().next().unwrap())
        })
        .collect()
}

fn sample() -> &'static Sample {
    static SAMPLE: OnceLock<Sample> = OnceLock::new();
    SAMPLE.get_or_init(|| {
        // Under the target's temp dir, one per process (a static is never dropped): samples
        // of runs that are over (no such process any more) are removed first.
        let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
        for e in std::fs::read_dir(root).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("disk-faults-sample-") {
                if !Path::new("/proc").join(pid).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let dir = root.join(format!("disk-faults-sample-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (mut p, mut c) = start_deadbolt(&dir, "always");
        let far = (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            + 86_400_000)
            .to_string();
        for i in 0..150 {
            let k = format!("base:{i}");
            if i % 3 == 0 {
                assert_eq!(c.cmd(&["SET", &k, "owner", "PXAT", &far]), b"+OK\r\n");
            } else {
                assert_eq!(c.cmd(&["SET", &k, &format!("v{i}")]), b"+OK\r\n");
            }
        }
        assert_eq!(c.cmd(&["HSET", "base:h", "f", "1", "g", "2"]), b":2\r\n");
        assert!(c.cmd_str(&["BGREWRITEAOF"]).starts_with('+'));
        wait_info(&mut c, "aof_rewrites:1\r\n");
        wait_info(&mut c, "aof_rewrite_in_progress:0\r\n");
        for i in 0..100 {
            let k = format!("incr:{i}");
            match i % 4 {
                0 => assert_eq!(c.cmd(&["SET", &k, "x", "PXAT", &far]), b"+OK\r\n"),
                1 => assert_eq!(
                    c.cmd(&["MSET", &k, "a", &format!("{k}:b"), "b"]),
                    b"+OK\r\n"
                ),
                2 => {
                    assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
                    c.cmd(&["SELECT", "1"]);
                    c.cmd(&["SET", &k, "in1"]);
                    c.cmd(&["RPUSH", &format!("{k}:l"), "a", "b"]);
                    c.cmd(&["SELECT", "0"]);
                    assert!(c.cmd_str(&["EXEC"]).starts_with('*'));
                }
                _ => assert_eq!(c.cmd(&["SADD", &k, "m1", "m2"]), b":2\r\n"),
            }
        }
        let keys = key_set(&mut c);
        drop(c);
        p.kill9();
        let aof = dir.join("appendonlydir");
        let entries = manifest_entries(&aof);
        assert_eq!(
            entries.iter().map(|e| e.1).collect::<String>(),
            "bi",
            "{entries:?}"
        );
        let files = entries
            .iter()
            .map(|(n, _)| {
                let len = std::fs::metadata(aof.join(n)).unwrap().len() as usize;
                (n.clone(), len)
            })
            .collect();
        assert!(keys.len() > 250, "{}", keys.len());
        Sample { aof, files, keys }
    })
}

/// Offsets to damage in a file of `len` bytes: all of them with DISK_FAULTS_OFFSETS=all,
/// offsets A to B-1 with `range:A-B`, otherwise the first 4 and the last 32 bytes (the first headers; the last unit, where
/// damage makes a torn tail) and that many more (default 24) chosen at random, seeded.
fn offsets(len: usize, seed: u64) -> Vec<usize> {
    let want = std::env::var("DISK_FAULTS_OFFSETS").unwrap_or_else(|_| "24".into());
    if want == "all" {
        return (0..len).collect();
    }
    if let Some((a, b)) = want.strip_prefix("range:").and_then(|r| r.split_once('-')) {
        let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
        return (a.min(len)..b.min(len)).collect();
    }
    let n: usize = want.parse().expect("DISK_FAULTS_OFFSETS: a number or all");
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut v: BTreeSet<usize> = (0..4.min(len)).chain(len.saturating_sub(32)..len).collect();
    let fixed = v.len();
    while v.len() < (fixed + n).min(len) {
        v.insert(rng.usize(..len));
    }
    v.into_iter().collect()
}

/// Replacement bytes: NUL, LF, '*', '$', a digit, 0xff.
const VALUES: [u8; 6] = [0, b'\n', b'*', b'$', b'7', 0xff];

/// Largest unit the sample's files hold: a torn tail cut off can never be longer.
const MAX_UNIT: usize = 512;

#[derive(Default, Debug)]
struct Tally {
    variants: usize,
    both_refuse: usize,
    deadbolt_refuses_redis_not_run: usize,
    deadbolt_refuses_redis_loads: usize,
    same_keys: usize,
    deadbolt_more_keys: usize,
    redis_refuses_deadbolt_loads: usize,
    deadbolt_truncated_tail: usize,
    /// Why deadbolt refused where Redis loaded, with counts.
    stricter: std::collections::BTreeMap<String, usize>,
    /// Why Redis refused where deadbolt loaded, with counts.
    redis_only_refusals: std::collections::BTreeMap<String, usize>,
}

/// The reason in a refusal log: the text after "offset N: " or "answered", shortened.
fn reason(log: &str) -> String {
    let line = log
        .lines()
        .find(|l| l.contains("Bad ") || l.contains("Unexpected end") || l.contains("Unknown"))
        .unwrap_or("");
    let tail = line
        .split_once("offset ")
        .and_then(|(_, t)| t.split_once(": "))
        .map(|(_, t)| t)
        .or_else(|| line.split_once("was answered ").map(|(_, t)| t))
        .unwrap_or(line);
    tail.chars().take(48).collect()
}

#[test]
fn byte_damage_is_refused_or_loads_at_least_what_redis_loads() {
    let s = sample();
    let seed: u64 = std::env::var("DISK_FAULTS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed);
    let mut jobs = Vec::new();
    for (fi, (name, len)) in s.files.iter().enumerate() {
        for at in offsets(*len, seed + fi as u64) {
            for v in VALUES {
                jobs.push((fi, name.clone(), at, v));
            }
        }
    }
    let total = jobs.len();
    let jobs = Arc::new(Mutex::new(jobs));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let threads: usize = std::env::var("DISK_FAULTS_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (jobs, tally) = (jobs.clone(), tally.clone());
            std::thread::spawn(move || loop {
                let Some((fi, name, at, v)) = jobs.lock().unwrap().pop() else {
                    return;
                };
                damage_one(s, fi, &name, at, v, &tally);
                // The long form takes a while: a tally every 10 % of the cases.
                let left = jobs.lock().unwrap().len();
                if total >= 5000 && left % (total / 10) == 0 {
                    println!(
                        "byte damage progress: {} of {total} cases, {:?}",
                        total - left,
                        tally.lock().unwrap()
                    );
                }
            })
        })
        .collect();
    for w in workers {
        w.join()
            .expect("a damage case failed (see its panic above)");
    }
    let t = tally.lock().unwrap();
    println!("byte damage (seed {seed:#x}): {t:?}");
    assert!(t.variants > 0);
    // The suite means something only if it met both refusals and loads (a range of offsets,
    // for a rerun of part of the long form, may meet only some).
    let ranged = std::env::var("DISK_FAULTS_OFFSETS").is_ok_and(|v| v.starts_with("range:"));
    assert!(
        ranged
            || (t.both_refuse + t.deadbolt_refuses_redis_not_run > 0
                && t.same_keys > 0
                && t.deadbolt_truncated_tail > 0),
        "{t:?}"
    );
}

fn damage_one(s: &Sample, fi: usize, name: &str, at: usize, v: u8, tally: &Mutex<Tally>) {
    let orig = std::fs::read(s.aof.join(name)).unwrap();
    if orig[at] == v {
        return;
    }
    let tmp = TempDir::new("disk-faults-byte");
    let (d_dir, r_dir) = (tmp.0.join("d"), tmp.0.join("r"));
    for dir in [&d_dir, &r_dir] {
        let aof = dir.join("appendonlydir");
        copy_dir(&s.aof, &aof);
        let mut data = orig.clone();
        data[at] = v;
        std::fs::write(aof.join(name), &data).unwrap();
    }
    let d = classify_deadbolt(&d_dir);
    // A refusal meets the assertion whatever Redis does; the long form skips Redis there
    // (DISK_FAULTS_COMPARE_REFUSALS=0) to cover every offset in less time.
    let compare = std::env::var("DISK_FAULTS_COMPARE_REFUSALS").map_or(true, |v| v != "0");
    let r = if compare || matches!(d, Outcome::Loaded(_)) {
        classify_redis(&r_dir)
    } else {
        Outcome::Refused(-1, "not run".into())
    };
    let case = format!("file {name} offset {at} byte {v:#04x}");
    let mut t = tally.lock().unwrap();
    t.variants += 1;
    match (&d, &r) {
        (Outcome::Refused(code, log), _) => {
            assert_ne!(*code, 0, "{case}: refused with exit code 0");
            assert!(
                log.contains("Bad file format")
                    || log.contains("Unexpected end of file")
                    || log.contains("Bad command in the append only file")
                    || log.contains("Unknown command"),
                "{case}: refusal without a clear line: {log}"
            );
            if r == Outcome::Refused(-1, "not run".into()) {
                t.deadbolt_refuses_redis_not_run += 1;
            } else if matches!(r, Outcome::Refused(..)) {
                t.both_refuse += 1;
            } else {
                t.deadbolt_refuses_redis_loads += 1;
                *t.stricter.entry(reason(log)).or_default() += 1;
            }
        }
        (Outcome::Loaded(dk), Outcome::Loaded(rk)) => {
            assert!(
                dk.is_superset(rk),
                "{case}: deadbolt loaded {} keys without refusing, Redis {}; missing: {:?}",
                dk.len(),
                rk.len(),
                rk.difference(dk).take(5).collect::<Vec<_>>()
            );
            if dk == rk {
                t.same_keys += 1;
            } else {
                t.deadbolt_more_keys += 1;
            }
        }
        (Outcome::Loaded(_), Outcome::Refused(_, log)) => {
            t.redis_refuses_deadbolt_loads += 1;
            // Redis's last words, without its pid and time prefix.
            let last = log.lines().last().unwrap_or("");
            let last = last.split_once(" # ").map_or(last, |(_, l)| l);
            *t.redis_only_refusals
                .entry(last.chars().take(60).collect())
                .or_default() += 1;
        }
    }
    if let Outcome::Loaded(dk) = &d {
        // Never a cut in the middle: only the last file may lose bytes, at most one unit at
        // its tail (it may then grow: what the server logged after loading, such as the
        // deletion of keys whose damaged deadline had passed).
        for (gi, (gname, glen)) in s.files.iter().enumerate() {
            let mut before = std::fs::read(s.aof.join(gname)).unwrap();
            if gi == fi {
                before[at] = v;
            }
            let now = std::fs::read(d_dir.join("appendonlydir").join(gname)).unwrap();
            let kept = before
                .iter()
                .zip(now.iter())
                .take_while(|(a, b)| a == b)
                .count();
            if kept < *glen {
                assert_eq!(
                    gi,
                    s.files.len() - 1,
                    "{case}: {gname} was changed at {kept}"
                );
                assert!(
                    glen - kept <= MAX_UNIT,
                    "{case}: {gname} cut from {glen} to {kept}"
                );
                t.deadbolt_truncated_tail += 1;
            }
        }
        // Damage in a key's bytes can rename a key; it can never lose more than the units the
        // damage is in: every key of the undamaged sample but a handful is there.
        // (Where Redis loaded, the superset check above is the measure. Names are compared
        // across databases: damage to a SELECT moves keys, in Redis as in deadbolt.)
        let names: BTreeSet<&Vec<u8>> = dk.iter().map(|(_, k)| k).collect();
        let lost = if matches!(r, Outcome::Loaded(_)) {
            0
        } else {
            s.keys.iter().filter(|(_, k)| !names.contains(k)).count()
        };
        assert!(lost <= 8, "{case}: {lost} keys of the sample lost");
    }
}

/// Each damaged manifest: (name, damage applied to the sample's `appendonlydir`, the reason
/// deadbolt's log must give).
type Damage = fn(&Path, &[(String, usize)]);

fn manifest_damages() -> Vec<(&'static str, Damage, &'static str)> {
    fn write(aof: &Path, text: &str) {
        std::fs::write(aof.join(MANIFEST), text).unwrap();
    }
    vec![
        (
            "missing incr file",
            |aof, f| std::fs::remove_file(aof.join(&f[1].0)).unwrap(),
            "can't be read",
        ),
        (
            "missing base file",
            |aof, f| std::fs::remove_file(aof.join(&f[0].0)).unwrap(),
            "can't be read",
        ),
        (
            "empty manifest",
            |aof, _| write(aof, ""),
            "Found an empty AOF manifest",
        ),
        (
            "manifest with only a comment",
            |aof, _| write(aof, "# nothing\n"),
            "lists no base or incr file",
        ),
        (
            "incr named ../victim.aof",
            |aof, f| {
                std::fs::write(
                    aof.parent().unwrap().join("victim.aof"),
                    b"*3\r\n$3\r\nSET\r\n$6\r\nvictim\r\n$1\r\n1\r\n",
                )
                .unwrap();
                write(
                    aof,
                    &format!(
                        "file {} seq 1 type b\nfile ../victim.aof seq 2 type i\n",
                        f[0].0
                    ),
                )
            },
            "File can't be a path, just a filename",
        ),
        (
            "base named by an absolute path",
            |aof, f| {
                let abs = aof.join(&f[0].0);
                write(
                    aof,
                    &format!(
                        "file {} seq 1 type b\nfile {} seq 2 type i\n",
                        abs.display(),
                        f[1].0
                    ),
                )
            },
            "File can't be a path, just a filename",
        ),
        (
            "duplicate base",
            |aof, f| {
                write(
                    aof,
                    &format!(
                        "file {b} seq 1 type b\nfile {b}x seq 1 type b\nfile {i} seq 2 type i\n",
                        b = f[0].0,
                        i = f[1].0
                    ),
                )
            },
            "Found duplicate base file information",
        ),
        (
            "non-monotonic incr seq",
            |aof, f| {
                std::fs::write(aof.join("extra.incr.aof"), b"").unwrap();
                write(
                    aof,
                    &format!(
                        "file {} seq 1 type b\nfile {} seq 5 type i\nfile extra.incr.aof seq 3 type i\n",
                        f[0].0, f[1].0
                    ),
                )
            },
            "Found a non-monotonic sequence number",
        ),
        (
            "unknown type",
            |aof, f| {
                write(
                    aof,
                    &format!(
                        "file {} seq 1 type b\nfile {} seq 2 type x\n",
                        f[0].0, f[1].0
                    ),
                )
            },
            "Unknown AOF file type",
        ),
        (
            "blank line",
            |aof, f| {
                write(
                    aof,
                    &format!(
                        "file {} seq 1 type b\n\nfile {} seq 2 type i\n",
                        f[0].0, f[1].0
                    ),
                )
            },
            "Invalid AOF manifest file format",
        ),
        (
            "seq missing",
            |aof, f| {
                write(
                    aof,
                    &format!("file {} seq 1 type b\nfile {} type i x y\n", f[0].0, f[1].0),
                )
            },
            "Invalid AOF manifest file format",
        ),
        (
            "last line without newline",
            |aof, f| {
                write(
                    aof,
                    &format!("file {} seq 1 type b\nfile {} seq 2 type i", f[0].0, f[1].0),
                )
            },
            "too long line",
        ),
        (
            "same incr listed twice",
            |aof, f| {
                write(
                    aof,
                    &format!(
                        "file {b} seq 1 type b\nfile {i} seq 2 type i\nfile {i} seq 3 type i\n",
                        b = f[0].0,
                        i = f[1].0
                    ),
                )
            },
            "Found a file listed twice",
        ),
    ]
}

#[test]
fn every_damaged_manifest_is_refused_with_a_clear_line() {
    let s = sample();
    let mut table = Vec::new();
    for (name, damage, reason) in manifest_damages() {
        let tmp = TempDir::new("disk-faults-manifest");
        let (d_dir, r_dir) = (tmp.0.join("d"), tmp.0.join("r"));
        for dir in [&d_dir, &r_dir] {
            let aof = dir.join("appendonlydir");
            copy_dir(&s.aof, &aof);
            damage(&aof, &s.files);
        }
        let before: Vec<_> = std::fs::read_dir(d_dir.join("appendonlydir"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        match classify_deadbolt(&d_dir) {
            Outcome::Refused(code, log) => {
                assert_ne!(code, 0, "{name}");
                assert!(log.contains(reason), "{name}: no {reason:?} in: {log}");
                assert!(
                    log.contains("To recover"),
                    "{name}: no recovery hint: {log}"
                );
            }
            Outcome::Loaded(k) => panic!("{name}: deadbolt loaded {} keys", k.len()),
        }
        // Nothing was deleted or created.
        let after: Vec<_> = std::fs::read_dir(d_dir.join("appendonlydir"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(before, after, "{name}");
        // A file named outside the AOF directory is neither read into the data set nor removed.
        if name.contains("victim") {
            assert_eq!(
                std::fs::read(d_dir.join("victim.aof")).unwrap(),
                b"*3\r\n$3\r\nSET\r\n$6\r\nvictim\r\n$1\r\n1\r\n"
            );
        }
        let redis = match classify_redis(&r_dir) {
            Outcome::Refused(..) => "refuses".to_string(),
            Outcome::Loaded(k) => format!("loads {} keys", k.len()),
        };
        table.push(format!("{name}: deadbolt refuses, redis {redis}"));
    }
    println!("damaged manifests:\n  {}", table.join("\n  "));
}

/// A tmpfs of `kb` KiB mounted for one test, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(kb: usize) -> Tmpfs {
        let dir = std::env::temp_dir().join(format!(
            "deadbolt-tmpfs-{}-{}",
            std::process::id(),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kb}k"), "tmpfs"])
            .arg(&dir)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "the ENOSPC rows need a small tmpfs: run the disk-fault suite as root (mount -t tmpfs failed: {})",
            common::all_output(&out)
        );
        Tmpfs(dir)
    }

    /// Fills the file system but `room` bytes with a filler file.
    fn fill_leaving(&self, room: u64) {
        let filler = self.0.join("filler");
        let _ = std::fs::remove_file(&filler);
        let free = free_bytes(&self.0);
        let f = std::fs::File::create(&filler).unwrap();
        let size = free.saturating_sub(room);
        // Written, not sparse: tmpfs counts pages written.
        use std::io::Write;
        let mut w = std::io::BufWriter::new(f);
        let chunk = vec![0u8; 4096];
        let mut left = size;
        while left > 0 {
            let n = left.min(4096) as usize;
            if w.write_all(&chunk[..n]).is_err() {
                break;
            }
            left -= n as u64;
        }
        let _ = w.flush();
    }

    fn free_space(&self) {
        let _ = std::fs::remove_file(self.0.join("filler"));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn free_bytes(p: &Path) -> u64 {
    let out = Command::new("df")
        .args(["-B1", "--output=avail"])
        .arg(p)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Sends SETs of `value` until one is refused or the connection drops; the keys acknowledged.
fn write_until_refused(c: &mut Conn, prefix: &str, value: &str, max: usize) -> Vec<String> {
    let mut acked = Vec::new();
    for i in 0..max {
        let k = format!("{prefix}:{i}");
        if c.try_send_raw(&resp_cmd(&["SET", &k, value])).is_err() {
            break;
        }
        match c.try_read_reply(Duration::from_secs(10)) {
            Some(r) if r == b"+OK\r\n" => acked.push(k),
            Some(r) => {
                let r = String::from_utf8_lossy(&r).into_owned();
                assert!(r.starts_with("-MISCONF"), "{r}");
                break;
            }
            None => break,
        }
    }
    acked
}

fn assert_all_present(c: &mut Conn, keys: &[String], what: &str) {
    for k in keys {
        assert_eq!(
            c.cmd(&["EXISTS", k]),
            b":1\r\n",
            "{what}: acknowledged {k} lost"
        );
    }
}

/// ENOSPC while writing: `always` exits (as Redis) without acknowledging the write that could
/// not be made durable; `everysec` and `no` answer MISCONF and accept writes again once the
/// disk has room. Then restart: every acknowledged write is there and the file loads.
#[test]
fn disk_full_during_writes_loses_no_acknowledged_write() {
    let value = "v".repeat(3000);
    let mut short_writes = 0;
    for fsync in ["always", "everysec", "no"] {
        let fs = Tmpfs::mount(2048);
        let (mut p, mut c) = start_deadbolt(&fs.0, fsync);
        let mut acked = write_until_refused(&mut c, "pre", &value, 20);
        assert_eq!(acked.len(), 20, "{fsync}");
        fs.fill_leaving(20_000);
        acked.extend(write_until_refused(&mut c, "full", &value, 2000));
        if fsync == "always" {
            // Redis: "Can't recover from AOF write error when the AOF fsync policy is 'always'.
            // Exiting..."
            let code = p.wait_exit(Duration::from_secs(10));
            assert_eq!(code, Some(1), "{fsync}: {}", p.log_text());
            assert!(p.logged("Exiting").is_some(), "{}", p.log_text());
            fs.free_space();
        } else {
            assert_eq!(
                c.cmd_str(&["SET", "refused", "x"]),
                "-MISCONF Errors writing to the AOF file: No space left on device\r\n",
                "{fsync}"
            );
            let info = c.cmd_str(&["INFO", "persistence"]);
            assert!(info.contains("aof_last_write_status:err"), "{info}");
            fs.free_space();
            // The retry (once a second) clears the error.
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                let r = c.cmd_str(&["SET", "after", "x"]);
                if r == "+OK\r\n" {
                    acked.push("after".into());
                    break;
                }
                assert!(Instant::now() < deadline, "{fsync}: still {r}");
                std::thread::sleep(Duration::from_millis(50));
            }
            acked.extend(write_until_refused(&mut c, "later", &value, 30));
            p.kill9();
        }
        short_writes += p.logged("Short write").is_some() as usize;
        let (_p, mut c) = start_deadbolt(&fs.0, fsync);
        assert_all_present(&mut c, &acked, fsync);
        println!(
            "ENOSPC during writes, {fsync}: {} acknowledged writes all present after restart",
            acked.len()
        );
    }
    // The disk filled in the middle of a write at least once: the cut-back path ran.
    assert!(short_writes > 0, "no short write met");
}

/// ENOSPC while a rewrite writes its base: the rewrite fails (aof_last_bgrewrite_status:err),
/// its temporary and base files are gone, the manifest is unchanged, and writes go on under
/// every policy; after a restart every acknowledged write is there.
#[test]
fn disk_full_during_a_rewrite_fails_the_rewrite_only() {
    let value = "r".repeat(2000);
    for fsync in ["always", "everysec", "no"] {
        let fs = Tmpfs::mount(4096);
        let (_p, mut c) = start_deadbolt(&fs.0, fsync);
        let mut acked = write_until_refused(&mut c, "data", &value, 400);
        assert_eq!(acked.len(), 400);
        // Room for more increments but not for an 800 KB base.
        fs.fill_leaving(300_000);
        let aof = fs.0.join("appendonlydir");
        assert!(c.cmd_str(&["BGREWRITEAOF"]).starts_with('+'));
        wait_info(&mut c, "aof_last_bgrewrite_status:err");
        wait_info(&mut c, "aof_rewrite_in_progress:0");
        let files: Vec<String> = std::fs::read_dir(&aof)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            files
                .iter()
                .all(|f| !f.contains("base") && !f.ends_with(".tmp")),
            "{fsync}: left behind: {files:?}"
        );
        acked.extend(write_until_refused(&mut c, "after", "small", 50));
        assert_eq!(
            acked.len(),
            450,
            "{fsync}: writes refused after the failed rewrite"
        );
        let info = c.cmd_str(&["INFO", "persistence"]);
        assert!(info.contains("aof_last_write_status:ok"), "{info}");
        fs.free_space();
        drop(_p);
        let (_p, mut c) = start_deadbolt(&fs.0, fsync);
        assert_all_present(&mut c, &acked, fsync);
    }
}

pub(crate) fn shim() -> &'static Path {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fsync_shim.so");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/disk_faults/fsync_shim.c");
        let st = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&out)
            .arg(&src)
            .arg("-ldl")
            .status()
            .expect("the fsync shim needs a C compiler (cc)");
        assert!(st.success(), "building {}", src.display());
        out
    })
}

/// fsync failing with EIO under everysec: MISCONF with Redis's exact text within about two
/// seconds, INFO aof_last_write_status:err, PING refused as Redis refuses it; once fsync works
/// again deadbolt accepts writes (Redis 7.0.15 stays refused until restart) and rewrites the
/// log from memory, so nothing the kernel may have dropped stays lost.
#[test]
fn fsync_eio_under_everysec_refuses_writes_until_fsync_works() {
    let dir = TempDir::new("disk-faults-eio");
    let flag = dir.0.join("fail-fsync");
    let mut cmd = deadbolt_cmd(&dir.0, "everysec");
    cmd.env("LD_PRELOAD", shim())
        .env("FSYNC_SHIM_FAIL_IF", &flag);
    let (mut p, mut c) = start_deadbolt_with(cmd);
    let mut acked = write_until_refused(&mut c, "before", "v", 50);
    assert_eq!(acked.len(), 50);
    std::fs::write(&flag, b"").unwrap();
    let failed_at = Instant::now();
    let mut refused = None;
    for i in 0.. {
        let k = format!("during:{i}");
        let r = c.cmd_str(&["SET", &k, "v"]);
        if r == "+OK\r\n" {
            acked.push(k);
        } else {
            refused = Some(r);
            break;
        }
        assert!(failed_at.elapsed() < Duration::from_secs(5), "no MISCONF");
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = failed_at.elapsed();
    let misconf = "-MISCONF Errors writing to the AOF file: Input/output error\r\n";
    assert_eq!(refused.as_deref(), Some(misconf));
    assert!(took < Duration::from_millis(2500), "MISCONF after {took:?}");
    println!(
        "EIO under everysec: MISCONF {} ms after fsync began failing",
        took.as_millis()
    );
    assert_eq!(c.cmd_str(&["PING"]), misconf);
    assert!(c
        .cmd_str(&["INFO", "persistence"])
        .contains("aof_last_write_status:err"));
    assert_eq!(
        c.cmd_str(&["GET", "before:0"]),
        "$1\r\nv\r\n",
        "reads are served"
    );
    // Redis gives the same text.
    let rdir = TempDir::new("disk-faults-eio-redis");
    let rflag = rdir.0.join("fail-fsync");
    let port = common::free_port();
    let mut rcmd = redis_cmd(&rdir.0, port);
    rcmd.args(["--appendfsync", "everysec"])
        .env("LD_PRELOAD", shim())
        .env("FSYNC_SHIM_FAIL_IF", &rflag);
    let mut rp = Proc::spawn(rcmd);
    rp.ready(Some(port)).expect("redis-server with the shim");
    let mut rc = Conn::connect(port);
    assert_eq!(rc.cmd(&["SET", "a", "1"]), b"+OK\r\n");
    std::fs::write(&rflag, b"").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let redis_refusal = loop {
        let r = rc.cmd_str(&["SET", "a", "1"]);
        if r != "+OK\r\n" || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(redis_refusal, misconf);
    drop(rp);
    // The disk recovers: a retried fsync succeeds, writes are accepted again.
    std::fs::remove_file(&flag).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = c.cmd_str(&["SET", "recovered", "v"]);
        if r == "+OK\r\n" {
            acked.push("recovered".into());
            break;
        }
        assert!(Instant::now() < deadline, "still refused: {r}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(c
        .cmd_str(&["INFO", "persistence"])
        .contains("aof_last_write_status:ok"));
    wait_info(&mut c, "aof_rewrites:1\r\n");
    wait_info(&mut c, "aof_rewrite_in_progress:0");
    acked.extend(write_until_refused(&mut c, "after", "v", 50));
    p.kill9();
    let (_p, mut c) = start_deadbolt(&dir.0, "everysec");
    assert_all_present(&mut c, &acked, "EIO");
}

/// kill -9 at random moments of a rewrite under load, then restart: every acknowledged write
/// is there (DISK_FAULTS_KILLS rounds, default 6).
#[test]
fn kill9_during_a_rewrite_under_load_loses_no_acknowledged_write() {
    let rounds: usize = std::env::var("DISK_FAULTS_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let dir = TempDir::new("disk-faults-kill9");
    let mut all_acked: Vec<String> = Vec::new();
    {
        let (_p, mut c) = start_deadbolt(&dir.0, "everysec");
        let v = "x".repeat(200);
        for chunk in 0..20 {
            let mut batch = Vec::new();
            for i in 0..500 {
                batch.extend(resp_cmd(&["SET", &format!("seed:{chunk}:{i}"), &v]));
            }
            c.send_raw(&batch);
            for i in 0..500 {
                assert_eq!(c.read_reply(), b"+OK\r\n");
                all_acked.push(format!("seed:{chunk}:{i}"));
            }
        }
    }
    let mut rng = fastrand::Rng::with_seed(7);
    for round in 0..rounds {
        let (mut p, mut c) = start_deadbolt(&dir.0, "everysec");
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let port = c.stream.peer_addr().unwrap().port();
        let writer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut w = Conn::connect(port);
                let mut acked = Vec::new();
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let k = format!("load:{round}:{i}");
                    if w.try_send_raw(&resp_cmd(&["SET", &k, "v"])).is_err() {
                        break;
                    }
                    match w.try_read_reply(Duration::from_secs(5)) {
                        Some(r) if r == b"+OK\r\n" => acked.push(k),
                        _ => break,
                    }
                    i += 1;
                }
                acked
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(c.cmd_str(&["BGREWRITEAOF"]).starts_with('+'));
        std::thread::sleep(Duration::from_millis(rng.u64(0..120)));
        p.kill9();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let acked = writer.join().unwrap();
        all_acked.extend(acked);
    }
    let (_p, mut c) = start_deadbolt(&dir.0, "everysec");
    assert_all_present(&mut c, &all_acked, "kill -9 during rewrite");
    // What interrupted rewrites left (temporary files, bases no manifest names) is gone.
    let aof = dir.0.join("appendonlydir");
    let named: Vec<String> = manifest_entries(&aof).into_iter().map(|e| e.0).collect();
    for e in std::fs::read_dir(&aof).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            name == MANIFEST || named.contains(&name) || name.contains(".incr."),
            "left behind: {name}"
        );
    }
    println!(
        "kill -9 during rewrite: {rounds} rounds, {} acknowledged writes all present",
        all_acked.len()
    );
}

/// fsync failing with EIO under `always`: the write whose fsync failed is never acknowledged
/// and the server exits with status 1, as Redis ("Can't persist AOF for fsync error when the
/// AOF fsync policy is 'always'"); after a restart every acknowledged write is there.
#[test]
fn fsync_eio_under_always_exits_without_acknowledging() {
    let dir = TempDir::new("disk-faults-eio-always");
    let flag = dir.0.join("fail-fsync");
    let mut cmd = deadbolt_cmd(&dir.0, "always");
    cmd.env("LD_PRELOAD", shim())
        .env("FSYNC_SHIM_FAIL_IF", &flag);
    let (mut p, mut c) = start_deadbolt_with(cmd);
    let acked = write_until_refused(&mut c, "before", "v", 20);
    assert_eq!(acked.len(), 20);
    std::fs::write(&flag, b"").unwrap();
    assert_eq!(
        write_until_refused(&mut c, "during", "v", 5),
        Vec::<String>::new()
    );
    assert_eq!(p.wait_exit(Duration::from_secs(10)), Some(1));
    assert!(p.logged("fsync error").is_some(), "{}", p.log_text());
    std::fs::remove_file(&flag).unwrap();
    let (_p, mut c) = start_deadbolt(&dir.0, "always");
    assert_all_present(&mut c, &acked, "EIO under always");
}
