//! Shared test harness: start the real `deadbolt` binary (port 0, port read from its log) or a
//! real `redis-server`, and talk raw RESP to either.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    pub port: u16,
    /// Every line the server logged so far.
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub fn conn(&self) -> Conn {
        Conn::connect(self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGKILL and waits (crash tests).
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the process to exit by itself; its exit status.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Blocks until a log line containing `needle` appears (or panics after `timeout`).
    pub fn wait_log(&self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.log.lock().unwrap().iter().any(|l| l.contains(needle)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!(
            "log line containing {needle:?} did not appear; log: {:?}",
            self.log.lock().unwrap()
        );
    }
}

pub fn deadbolt_bin() -> &'static str {
    env!("CARGO_BIN_EXE_deadbolt")
}

/// `--io-threads N --io-threads-do-reads yes` when `DEADBOLT_TEST_IO_THREADS=N` is set, else
/// nothing: scripts/test runs the integration tests a second time with I/O threads, and every
/// helper that starts deadbolt (and every test that builds its own command line) adds these.
pub fn io_threads_args() -> Vec<String> {
    match std::env::var("DEADBOLT_TEST_IO_THREADS") {
        Ok(n) if !n.is_empty() && n != "1" => vec![
            "--io-threads".into(),
            n,
            "--io-threads-do-reads".into(),
            "yes".into(),
        ],
        _ => Vec::new(),
    }
}

/// Starts deadbolt on a free port with extra `--directive value` arguments.
pub fn deadbolt(extra: &[&str]) -> Server {
    let mut cmd = Command::new(deadbolt_bin());
    cmd.args(["--port", "0", "--bind", "127.0.0.1"]).args(extra);
    start(cmd, |line| {
        line.split("Listening on 127.0.0.1:")
            .nth(1)
            .and_then(|p| p.trim().parse().ok())
    })
}

/// A finished process's standard output then standard error: where a fatal error was said
/// (once: in the log, which is standard output unless `logfile` is set).
pub fn all_output(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Starts a prepared deadbolt command (its own environment, arguments with `--port 0`),
/// reading the port from its log.
pub fn start_command(cmd: Command) -> Server {
    start(cmd, |line| {
        line.split("Listening on 127.0.0.1:")
            .nth(1)
            .and_then(|p| p.trim().parse().ok())
    })
}

/// Starts deadbolt with a config file followed by extra arguments.
pub fn deadbolt_with_file(file: &std::path::Path, extra: &[&str]) -> Server {
    let mut cmd = Command::new(deadbolt_bin());
    cmd.arg(file)
        .args(["--port", "0", "--bind", "127.0.0.1"])
        .args(extra);
    start(cmd, |line| {
        line.split("Listening on 127.0.0.1:")
            .nth(1)
            .and_then(|p| p.trim().parse().ok())
    })
}

// The child is owned by the returned Server, whose Drop kills and reaps it.
#[allow(clippy::zombie_processes)]
fn start(mut cmd: Command, port_of: impl Fn(&str) -> Option<u16> + Send + 'static) -> Server {
    // A test that chose its own `io-threads` keeps it.
    if cmd.get_program() == deadbolt_bin() && !cmd.get_args().any(|a| a == "--io-threads") {
        cmd.args(io_threads_args());
    }
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    let mut child = cmd.spawn().expect("spawn deadbolt");
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let log = log.clone();
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line.clone());
                log.lock().unwrap().push(line);
            }
        });
    }
    drop(tx);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Some(port) = port_of(&line) {
                    // Keep draining the channel so log threads never block.
                    std::thread::spawn(move || while rx.recv().is_ok() {});
                    return Server { child, port, log };
                }
            }
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "server did not report its port; log: {:?}",
                    log.lock().unwrap()
                );
            }
        }
    }
}

/// A free TCP port on 127.0.0.1 for a server a test starts with a fixed port (cluster nodes and their peer ports,
/// redis-server). Taken below the kernel's ephemeral range (32768 and up by default): a port
/// the kernel handed out for `bind(0)` and that was then closed can be given again to any
/// outgoing connection's source (a cluster node dialling its peers) before the server binds it,
/// and a node then failed with "Address already in use". Each process walks its own stretch of
/// 20000..32000 (tests of one binary are threads of it: the counter keeps them apart), and a
/// port still bound by something else is skipped.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        (std::process::id() * 97) % SPAN,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..SPAN {
        let port = (LOW + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {LOW}..{}", LOW + SPAN)
}

/// deadbolt and redis-server started with the same extra arguments, named, for tests that
/// assert the same behaviour on both.
pub fn deadbolt_and_redis(extra: &[&str]) -> Vec<(&'static str, Server)> {
    vec![
        ("deadbolt", deadbolt(extra)),
        ("redis-server", redis_server(extra)),
    ]
}

/// Starts a real redis-server (no persistence) for differential tests. Panics with a clear
/// message if it is not installed: `.ci/run` installs it.
pub fn redis_server(extra: &[&str]) -> Server {
    for _ in 0..5 {
        let port = free_port();
        // A directory of its own unless the test names one (redis-server applies `dir` by
        // chdir, so a relative one given later would be taken from this one): a redis-server
        // loads the dump.rdb it finds at start, replication id and offset included, and a
        // replica writes the one it receives there.
        let dir = std::env::temp_dir().join(format!("deadbolt-test-redis-{port}"));
        let own_dir = !extra.contains(&"--dir");
        if own_dir {
            let _ = std::fs::remove_dir_all(&dir);
            let _ = std::fs::create_dir_all(&dir);
        }
        let dir_args = [
            "--dir".to_string(),
            if own_dir {
                dir.to_string_lossy().into_owned()
            } else {
                ".".to_string()
            },
        ];
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
        ])
        .args(dir_args)
        .args(extra);
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null());
        let mut child = cmd.spawn().expect(
            "redis-server is required for differential tests (apt-get install redis-server)",
        );
        let log = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    log.lock().unwrap().push(line);
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            if let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) {
                // The port was free when picked, but another server (a deadbolt on port 0) may
                // have taken it since: make sure it is this child that answers. A connection
                // that is reset or stays silent is not this child's answer either: another
                // port is tried (a reset here once failed a whole test).
                stream.set_nodelay(true).unwrap();
                let mut c = Conn {
                    stream,
                    buf: Vec::new(),
                    tls: None,
                };
                let answer = c
                    .try_send_raw(&resp_cmd(&["INFO", "server"]))
                    .ok()
                    .and_then(|_| c.try_read_reply(Duration::from_secs(5)));
                let Some(answer) = answer else {
                    break;
                };
                let info = String::from_utf8_lossy(&answer).into_owned();
                // (A server started with a password cannot be asked; its own start is then
                // trusted. Without one, a NOAUTH is another test's server on the same port:
                // trusting it had a test talk to a server that test then killed.)
                let has_password = extra.iter().any(|a| a.contains("requirepass"));
                if (has_password && info.starts_with("-NOAUTH"))
                    || info.contains(&format!("process_id:{}\r\n", child.id()))
                {
                    return Server { child, port, log };
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("could not start redis-server");
}

/// Encodes a command as a RESP multibulk request.
pub fn resp_cmd<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

pub struct Conn {
    /// The socket (under TLS too: read timeouts set on it apply to the session's reads).
    pub stream: TcpStream,
    buf: Vec<u8>,
    /// A TLS session over `stream` (`connect_tls`); None for plain TCP.
    tls: Option<Box<rustls::ClientConnection>>,
}

impl Conn {
    pub fn connect(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Conn {
            stream,
            buf: Vec::new(),
            tls: None,
        }
    }

    /// A TLS connection to `port`, trusting what `cfg` trusts, for the name "localhost"; the
    /// handshake is done before it returns.
    pub fn connect_tls(port: u16, cfg: Arc<rustls::ClientConfig>) -> Conn {
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let session = rustls::ClientConnection::new(cfg, name).expect("TLS session");
        let mut c = Conn::connect(port);
        c.tls = Some(Box::new(session));
        let Conn { stream, tls, .. } = &mut c;
        let session = tls.as_mut().unwrap();
        while session.is_handshaking() {
            session.complete_io(stream).expect("TLS handshake");
        }
        c
    }

    /// Reads what arrives next (through the TLS session if there is one).
    /// One read; a signal delivered to the test process meanwhile (EINTR) is not an answer.
    fn read_some(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let read = match &mut self.tls {
                None => self.stream.read(buf),
                Some(t) => rustls::Stream::new(&mut **t, &mut self.stream).read(buf),
            };
            match read {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => return other,
            }
        }
    }

    /// Writes all of `bytes`; an error when the server closed meanwhile.
    pub fn try_send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match &mut self.tls {
            None => self.stream.write_all(bytes),
            Some(t) => {
                let mut s = rustls::Stream::new(&mut **t, &mut self.stream);
                s.write_all(bytes)?;
                s.flush()
            }
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.try_send_raw(bytes).expect("write");
    }

    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        self.send_raw(&resp_cmd(args));
    }

    /// Sends a command and returns its raw reply bytes.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        self.send(args);
        self.read_reply()
    }

    /// Same as `cmd`, as a lossy string (for readable assertions).
    pub fn cmd_str<A: AsRef<[u8]>>(&mut self, args: &[A]) -> String {
        String::from_utf8_lossy(&self.cmd(args)).into_owned()
    }

    /// Reads exactly one complete RESP2/RESP3 reply.
    pub fn read_reply(&mut self) -> Vec<u8> {
        loop {
            if let Some(n) = reply_len(&self.buf, 0) {
                return self.buf.drain(..n).collect();
            }
            let mut chunk = [0u8; 65536];
            let n = self.read_some(&mut chunk).expect("read reply");
            if n == 0 {
                panic!(
                    "connection closed; partial reply: {:?}",
                    String::from_utf8_lossy(&self.buf)
                );
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Like `read_reply`, but None if nothing complete arrives within `wait`.
    pub fn try_read_reply(&mut self, wait: Duration) -> Option<Vec<u8>> {
        self.stream.set_read_timeout(Some(wait)).unwrap();
        let r = loop {
            if let Some(n) = reply_len(&self.buf, 0) {
                break Some(self.buf.drain(..n).collect());
            }
            let mut chunk = [0u8; 65536];
            match self.read_some(&mut chunk) {
                Ok(0) | Err(_) => break None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        };
        self.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        r
    }

    /// True if the server closed the connection (reads EOF) within `wait`.
    pub fn is_closed(&mut self, wait: Duration) -> bool {
        self.stream.set_read_timeout(Some(wait)).unwrap();
        let mut chunk = [0u8; 1024];
        let closed = loop {
            match self.read_some(&mut chunk) {
                Ok(0) => break true,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                // TLS: the socket ended without close_notify (plain TCP never says this).
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break true,
                Err(_) => break false,
            }
        };
        self.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        closed
    }

    /// Everything that arrives until the server closes the connection (true) or `quiet`
    /// passes without a byte (false), what was already read included.
    pub fn drain(&mut self, quiet: Duration) -> (Vec<u8>, bool) {
        let closed = self.is_closed(quiet);
        (std::mem::take(&mut self.buf), closed)
    }

    /// Reads everything until the server closes the connection.
    pub fn read_to_close(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        let mut chunk = [0u8; 65536];
        loop {
            match self.read_some(&mut chunk) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(_) => break,
            }
        }
        out
    }
}

fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| from + p)
}

/// Length of the complete RESP value starting at `at`, or None if incomplete.
pub fn reply_len(buf: &[u8], at: usize) -> Option<usize> {
    let kind = *buf.get(at)?;
    let eol = line_end(buf, at + 1)?;
    let after = eol + 2;
    // A line reply may hold any bytes (an error can echo the client's); only lengths are text.
    if matches!(kind, b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(') {
        return Some(after - at);
    }
    let header = std::str::from_utf8(&buf[at + 1..eol]).ok()?;
    match kind {
        b'$' | b'=' | b'!' => {
            let n: i64 = header.parse().ok()?;
            if n < 0 {
                return Some(after - at);
            }
            let end = after + n as usize + 2;
            (buf.len() >= end).then_some(end - at)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n: i64 = header.parse().ok()?;
            if n < 0 {
                return Some(after - at);
            }
            let items = if kind == b'%' || kind == b'|' {
                n * 2
            } else {
                n
            };
            let mut pos = after;
            for _ in 0..items {
                pos += reply_len(buf, pos)?;
            }
            Some(pos - at)
        }
        _ => panic!(
            "unexpected RESP type byte {:?} in {:?}",
            kind as char,
            String::from_utf8_lossy(buf)
        ),
    }
}

/// Runs (redis-cli line, expected reply) cases in order on one connection; `None` runs the
/// command without checking its reply (set-up steps such as HELLO).
pub fn assert_replies(c: &mut Conn, cases: &[(&str, Option<&str>)]) {
    for (line, want) in cases {
        let got = c.cmd(&split_line(line));
        if let Some(want) = want {
            assert_eq!(String::from_utf8_lossy(&got), *want, "`{line}`");
        }
    }
}

/// Splits a redis-cli style line into arguments (quotes and escapes as redis-cli).
pub fn split_line(line: &str) -> Vec<Vec<u8>> {
    deadbolt::protocol::decode::split_args(line.as_bytes()).expect("balanced quotes in test line")
}

/// A directory under the system temp dir for one test's files (the append-only file), removed
/// when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "deadbolt-{name}-{}-{}",
            std::process::id(),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// deadbolt with its append-only file in `dir` (`appendfsync` as given), once the log is loaded.
pub fn deadbolt_with_aof(dir: &std::path::Path, fsync: &str, extra: &[&str]) -> Server {
    let d = dir.to_str().unwrap();
    let mut args = vec!["--dir", d, "--appendonly", "yes", "--appendfsync", fsync];
    args.extend_from_slice(extra);
    let s = deadbolt(&args);
    wait_loaded(&s);
    s
}

/// Waits (polling INFO, with a deadline) until the server has loaded its append-only file.
pub fn wait_loaded(s: &Server) {
    let mut c = s.conn();
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.cmd_str(&["INFO", "persistence"]).contains("loading:1") {
        assert!(Instant::now() < deadline, "still loading");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// WATCH invalidation compared with Redis: for each case, on deadbolt and on redis-server, a
/// second client runs `setup`, the first WATCHes `key`, the case runs from the second client,
/// then MULTI, PING, EXEC. Asserts both servers give the same EXEC replies and returns, per
/// case, whether EXEC was aborted (the case touched the key).
pub fn watch_aborts_like_redis(setup: &[&[&str]], key: &str, cases: &[&[&str]]) -> Vec<bool> {
    let mut results = Vec::new();
    for (_, server) in deadbolt_and_redis(&[]) {
        let mut w = server.conn();
        let mut other = server.conn();
        let mut replies = Vec::new();
        for case in cases {
            for s in setup {
                other.cmd(s);
            }
            w.cmd(&["WATCH", key]);
            other.cmd(case);
            w.cmd(&["MULTI"]);
            w.cmd(&["PING"]);
            replies.push(String::from_utf8_lossy(&w.cmd(&["EXEC"])).into_owned());
        }
        results.push(replies);
    }
    assert_eq!(results[0], results[1], "EXEC replies, deadbolt vs redis");
    results[0].iter().map(|r| r == "*-1\r\n").collect()
}

/// Waits until the server reports `n` blocked clients (the event that a blocking pop has parked).
pub fn wait_blocked(c: &mut Conn, n: usize) {
    let want = format!("blocked_clients:{n}\r\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let info = c.cmd_str(&["INFO", "clients"]);
        if info.contains(&want) {
            return;
        }
        assert!(Instant::now() < deadline, "never reached {want:?}: {info}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Runs `scenario` against deadbolt and redis-server (both started with `extra`) and asserts
/// the transcripts are equal; returns ours.
pub fn both_with(extra: &[&str], scenario: impl Fn(&Server) -> Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let ours = deadbolt(extra);
    let theirs = redis_server(extra);
    let a = scenario(&ours);
    let b = scenario(&theirs);
    let show = |t: &Vec<Vec<u8>>| {
        t.iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(show(&a), show(&b), "deadbolt vs redis-server");
    a
}

/// `both_with` without extra arguments.
pub fn both(scenario: impl Fn(&Server) -> Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    both_with(&[], scenario)
}

/// Reads `__keyevent@0__:*` messages until the `set` event for `marker`; returns the messages.
pub fn events_until(sub: &mut Conn, marker: &str) -> Vec<String> {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(msg) = sub.try_read_reply(left) else {
            panic!("no event for {marker}; got {out:?}");
        };
        let text = String::from_utf8_lossy(&msg).into_owned();
        let done =
            text.contains("__keyevent@0__:set\r\n") && text.ends_with(&format!("\r\n{marker}\r\n"));
        out.push(text);
        if done {
            return out;
        }
    }
}

/// Runs `script` (ending with `SET end 1`) on deadbolt and redis-server, both with
/// `--notify-keyspace-events KEAn`, captures the `__keyevent@0__:*` messages up to the `set`
/// of `end`, asserts both servers sent the same ones and returns deadbolt's.
pub fn keyevents_like_redis(script: &[&[&str]]) -> Vec<String> {
    let mut seen = Vec::new();
    for (_, server) in deadbolt_and_redis(&["--notify-keyspace-events", "KEAn"]) {
        let mut sub = server.conn();
        sub.cmd(&["PSUBSCRIBE", "__keyevent@0__:*"]);
        let mut c = server.conn();
        for cmd in script {
            c.cmd(cmd);
        }
        seen.push(events_until(&mut sub, "end"));
    }
    let (ours, redis) = (&seen[0], &seen[1]);
    assert_eq!(ours, redis);
    seen.swap_remove(0)
}

/// The event name of one `__keyevent@0__:*` pmessage (the channel, after the pattern that
/// also starts with the prefix).
pub fn keyevent_name(m: &str) -> &str {
    m.rsplit("__keyevent@0__:")
        .next()
        .unwrap()
        .split('\r')
        .next()
        .unwrap()
}

/// Runs `script` in order on one connection to deadbolt and one to redis-server (fresh, no
/// extra arguments); returns the two transcripts of raw replies, deadbolt's first.
pub fn transcripts_on_both<C: AsRef<[A]>, A: AsRef<[u8]>>(script: &[C]) -> [Vec<Vec<u8>>; 2] {
    let mut runs = deadbolt_and_redis(&[]).into_iter().map(|(_, server)| {
        let mut c = server.conn();
        script
            .iter()
            .map(|cmd| c.cmd(cmd.as_ref()))
            .collect::<Vec<_>>()
    });
    [runs.next().unwrap(), runs.next().unwrap()]
}

/// deadbolt with a TLS port besides its plain one (certificates made here with rcgen), for
/// tests that run the same scenario over both transports.
pub struct TlsServer {
    pub server: Server,
    pub tls_port: u16,
    /// A client configuration that trusts the server's CA.
    pub client: Arc<rustls::ClientConfig>,
    dir: std::path::PathBuf,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts deadbolt with `tls-port` (no client certificates) and extra arguments.
pub fn deadbolt_tls(extra: &[&str]) -> TlsServer {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "deadbolt-tls-common-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "test CA");
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let leaf = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &ca_cert, &ca_key).unwrap();
    let path = |n: &str| dir.join(n).display().to_string();
    std::fs::write(path("server.pem"), cert.pem()).unwrap();
    std::fs::write(path("server.key"), key.serialize_pem()).unwrap();
    let tls_port = free_port();
    let (p, c, k) = (tls_port.to_string(), path("server.pem"), path("server.key"));
    let mut args = vec![
        "--tls-port",
        &p,
        "--tls-cert-file",
        &c,
        "--tls-key-file",
        &k,
        "--tls-auth-clients",
        "no",
    ];
    args.extend_from_slice(extra);
    let server = deadbolt(&args);
    server.wait_log(
        &format!("Listening for TLS on 127.0.0.1:{tls_port}"),
        Duration::from_secs(5),
    );
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca_cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsServer {
        server,
        tls_port,
        client: Arc::new(client),
        dir,
    }
}

impl TlsServer {
    /// A plain TCP connection.
    pub fn conn(&self) -> Conn {
        self.server.conn()
    }

    /// A TLS connection, handshake done.
    pub fn conn_tls(&self) -> Conn {
        Conn::connect_tls(self.tls_port, self.client.clone())
    }
}

/// Client and peer ports for `n` cluster nodes on 127.0.0.1 (ids 1..=n), and the
/// `cluster-peers` value that names them.
pub fn cluster_ports(n: u64) -> (Vec<(u16, u16)>, String) {
    let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
    let peers = ports
        .iter()
        .enumerate()
        .map(|(i, (p, pp))| format!("{}@127.0.0.1:{p}:{pp}", i + 1))
        .collect::<Vec<_>>()
        .join(" ");
    (ports, peers)
}

/// The arguments that start cluster node `id` on `port`, loopback only, its data in `dir`,
/// with the peer list and the shared secret every node of the cluster proves.
pub fn cluster_node_args(
    port: u16,
    dir: &std::path::Path,
    id: u64,
    peers: &str,
    secret: &str,
) -> Vec<String> {
    let dir = dir.to_str().expect("a UTF-8 test dir");
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--dir",
        dir,
        "--cluster-node-id",
        &id.to_string(),
        "--cluster-peers",
        peers,
        "--cluster-secret",
        secret,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}
