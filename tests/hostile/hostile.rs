//! Hostile-input regression table: malformed protocol, Lua sandbox escapes and overflows, huge
//! counts and timeouts, pathological glob patterns and transactions with rejected commands.
//!
//! Each row is sent on its own connection, after a set-up on another one, to a real
//! redis-server started by the test AND to deadbolt. The expected outcome is what Redis did in
//! this run (reply bytes, and whether it closed the connection), except for rows where Redis
//! 7.0.15 itself is unsafe (it crashes, or builds a reply of gigabytes): those run on deadbolt
//! only and carry a documented safer expectation. After every row a second, long-lived client
//! must get PONG from deadbolt within 100 ms and deadbolt's VmRSS must stay under `RSS_LIMIT`.
//!
//! A group's rows share its two servers; every failing row is listed (input, Redis's bytes,
//! deadbolt's bytes) before the group's test fails.

use crate::common;

use common::{deadbolt, redis_server, reply_len, resp_cmd, Server};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// deadbolt's resident memory after any row (it starts at about 10 MB).
const RSS_LIMIT_KB: u64 = 256 * 1024;
/// How long another client may wait for PONG after a row.
const PONG_WITHIN: Duration = Duration::from_millis(100);
/// Longest a row may take to answer before it counts as a hang.
const ROW_DEADLINE: Duration = Duration::from_secs(5);
/// Appended after a row's bytes: its reply marks the end of the row's replies.
const MARKER: &[u8] = b"*2\r\n$4\r\nECHO\r\n$18\r\n__hostile_marker__\r\n";
const MARKER_REPLY: &[u8] = b"$18\r\n__hostile_marker__\r\n";

#[derive(Clone, Copy, PartialEq, Debug)]
enum ReadMode {
    /// Send MARKER after the input; the row's output is everything before its reply (or
    /// everything until the server closes the connection).
    Marker,
    /// No marker can be used (an incomplete frame would swallow it; an unauthenticated client
    /// gets the same error for it): read until the server closes or is silent for 250 ms.
    Quiet,
    /// Send the input, then close our sending side (a client that dies mid-request).
    HalfClose,
}

#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    bytes: Vec<u8>,
    closed: bool,
    /// Neither the marker's reply nor a close came within ROW_DEADLINE.
    hung: bool,
}

type Check = fn(&Outcome) -> bool;

enum Expect {
    /// Byte-for-byte what redis-server did.
    Redis,
    /// Redis 7.0.15 is unsafe here; deadbolt must satisfy `check` (the doc says what and why).
    Safer(&'static str, Check),
}

struct Row {
    name: String,
    setup: Vec<Vec<u8>>,
    input: Vec<u8>,
    mode: ReadMode,
    expect: Expect,
    /// Replies list set members or keys in hash-table order: arrays are compared as multisets.
    unordered: bool,
}

impl Row {
    fn setup(mut self, cmds: &[&[&str]]) -> Row {
        self.setup.extend(cmds.iter().map(|c| resp_cmd(c)));
        self
    }
    fn unordered(mut self) -> Row {
        self.unordered = true;
        self
    }
    fn quiet(mut self) -> Row {
        self.mode = ReadMode::Quiet;
        self
    }
    fn half_close(mut self) -> Row {
        self.mode = ReadMode::HalfClose;
        self
    }
    fn safer(mut self, why: &'static str, check: Check) -> Row {
        self.expect = Expect::Safer(why, check);
        self
    }
}

/// A row sending raw bytes.
fn raw(name: &str, input: &[u8]) -> Row {
    Row {
        name: name.to_string(),
        setup: Vec::new(),
        input: input.to_vec(),
        mode: ReadMode::Marker,
        expect: Expect::Redis,
        unordered: false,
    }
}

/// A row sending commands (multibulk), pipelined.
fn cmds(name: &str, list: &[&[&str]]) -> Row {
    let mut input = Vec::new();
    for c in list {
        input.extend_from_slice(&resp_cmd(c));
    }
    raw(name, &input)
}

/// A row running one script with no keys.
fn eval(script: &str) -> Row {
    cmds(&format!("EVAL {script:?} 0"), &[&["EVAL", script, "0"]])
}

/// An error reply on a connection left open.
fn error_open(o: &Outcome) -> bool {
    o.bytes.first() == Some(&b'-') && !o.closed && !o.hung
}

/// An error reply, or a connection closed by an output limit: never a reply of gigabytes
/// (the RSS bound after the row holds the server to it).
fn error_or_closed(o: &Outcome) -> bool {
    !o.hung && (o.bytes.first() == Some(&b'-') || o.closed)
}

/// The replies in `bytes` with every array's elements sorted (recursively), for replies whose
/// order is the server's hash-table order. Bytes that do not parse are kept as they are.
fn sort_arrays(bytes: &[u8]) -> Vec<u8> {
    fn one(b: &[u8]) -> Vec<u8> {
        let Some(&kind) = b.first() else {
            return b.to_vec();
        };
        if !matches!(kind, b'*' | b'~') {
            return b.to_vec();
        }
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
            return b.to_vec();
        };
        let mut items = Vec::new();
        let mut pos = eol + 2;
        while pos < b.len() {
            match reply_len(b, pos) {
                Some(n) => {
                    items.push(one(&b[pos..pos + n]));
                    pos += n;
                }
                None => return b.to_vec(),
            }
        }
        items.sort();
        let mut out = b[..eol + 2].to_vec();
        for i in items {
            out.extend(i);
        }
        out
    }
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        match reply_len(bytes, pos) {
            Some(n) => {
                out.extend(one(&bytes[pos..pos + n]));
                pos += n;
            }
            None => {
                out.extend_from_slice(&bytes[pos..]);
                break;
            }
        }
    }
    out
}

fn show(b: &[u8]) -> String {
    let s = format!("{:?}", bytes_lossy(b));
    if s.len() > 400 {
        format!("{}… ({} bytes)", &s[..400], b.len())
    } else {
        s
    }
}

fn bytes_lossy(b: &[u8]) -> String {
    b.iter()
        .flat_map(|&c| std::ascii::escape_default(c))
        .map(char::from)
        .collect()
}

fn show_outcome(o: &Outcome) -> String {
    format!(
        "{}{}{}",
        show(&o.bytes),
        if o.closed { " [closed]" } else { "" },
        if o.hung {
            " [no answer within 5 s]"
        } else {
            ""
        }
    )
}

// ---------------------------------------------------------------------------------------------
// Talking to a server without panicking (a crashed server is a row's failure, not the test's).

fn connect(port: u16) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Sends each command and reads one reply for each.
fn run_cmds(s: &mut TcpStream, list: &[Vec<u8>]) -> Result<Vec<u8>, String> {
    let mut got = Vec::new();
    for c in list {
        s.write_all(c).map_err(|e| format!("write: {e}"))?;
        let mut buf = Vec::new();
        let deadline = Instant::now() + ROW_DEADLINE;
        loop {
            if let Some(n) = reply_len(&buf, 0) {
                got.extend_from_slice(&buf[..n]);
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("no reply to {}", show(c)));
            }
            s.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
            let mut chunk = [0u8; 65536];
            match s.read(&mut chunk) {
                Ok(0) => return Err(format!("closed after {}", show(c))),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }
    Ok(got)
}

fn read_outcome(s: &mut TcpStream, mode: ReadMode) -> Outcome {
    let mut out = Outcome {
        bytes: Vec::new(),
        closed: false,
        hung: false,
    };
    let deadline = Instant::now() + ROW_DEADLINE;
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        if mode == ReadMode::Marker && out.bytes.ends_with(MARKER_REPLY) {
            out.bytes.truncate(out.bytes.len() - MARKER_REPLY.len());
            return out;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            out.hung = true;
            return out;
        }
        let wait = match mode {
            ReadMode::Quiet | ReadMode::HalfClose => left.min(Duration::from_millis(250)),
            ReadMode::Marker => left,
        };
        let _ = s.set_read_timeout(Some(wait));
        match s.read(&mut chunk) {
            Ok(0) => {
                out.closed = true;
                return out;
            }
            Ok(n) => out.bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                out.closed = true;
                return out;
            }
            Err(_) if mode != ReadMode::Marker => return out,
            Err(_) => {}
        }
    }
}

struct Target {
    server: Server,
    args: Vec<String>,
    redis: bool,
    password: Option<String>,
    probe: Option<TcpStream>,
}

impl Target {
    fn start(redis: bool, args: &[&str]) -> Target {
        let server = if redis {
            redis_server(args)
        } else {
            deadbolt(args)
        };
        let password = args
            .iter()
            .position(|a| *a == "--requirepass")
            .and_then(|i| args.get(i + 1))
            .map(|p| p.to_string());
        Target {
            server,
            args: args.iter().map(|a| a.to_string()).collect(),
            redis,
            password,
            probe: None,
        }
    }

    fn restart(&mut self) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        *self = Target::start(self.redis, &args);
    }

    fn auth_cmd(&self) -> Option<Vec<u8>> {
        self.password.as_ref().map(|p| resp_cmd(&["AUTH", p]))
    }

    /// A fresh, authenticated connection with the row's set-up done (databases and scripts
    /// flushed first, so rows do not see each other's data).
    fn prepare(&self, row: &Row) -> Result<(), String> {
        let mut s = connect(self.server.port).map_err(|e| format!("connect: {e}"))?;
        let mut list: Vec<Vec<u8>> = self.auth_cmd().into_iter().collect();
        list.push(resp_cmd(&["FLUSHALL"]));
        list.push(resp_cmd(&["SCRIPT", "FLUSH"]));
        list.extend(row.setup.iter().cloned());
        run_cmds(&mut s, &list).map(|_| ())
    }

    fn exchange(&self, row: &Row, authenticate: bool) -> Result<Outcome, String> {
        self.prepare(row)?;
        let mut s = connect(self.server.port).map_err(|e| format!("connect: {e}"))?;
        if authenticate {
            if let Some(auth) = self.auth_cmd() {
                run_cmds(&mut s, &[auth])?;
            }
        }
        // The server may close while a long input is still being written; what it answered
        // before closing is the outcome.
        let _ = s.write_all(&row.input);
        match row.mode {
            ReadMode::Marker => {
                let _ = s.write_all(MARKER);
            }
            ReadMode::HalfClose => {
                let _ = s.shutdown(Shutdown::Write);
            }
            ReadMode::Quiet => {}
        }
        Ok(read_outcome(&mut s, row.mode))
    }

    /// Another client gets PONG within PONG_WITHIN, and (deadbolt) VmRSS is under the bound.
    fn healthy(&mut self) -> Result<(), String> {
        if self.probe.is_none() {
            let mut s = connect(self.server.port).map_err(|e| format!("probe connect: {e}"))?;
            if let Some(auth) = self.auth_cmd() {
                run_cmds(&mut s, &[auth])?;
            }
            self.probe = Some(s);
        }
        let Some(s) = self.probe.as_mut() else {
            return Err("no probe connection".into());
        };
        let sent = Instant::now();
        s.write_all(b"*1\r\n$4\r\nPING\r\n")
            .map_err(|e| format!("probe write: {e}"))?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 256];
        while !buf.ends_with(b"\r\n") {
            let left = PONG_WITHIN.saturating_sub(sent.elapsed());
            if left.is_zero() {
                self.probe = None;
                return Err(format!(
                    "no PONG within {PONG_WITHIN:?} (got {})",
                    show(&buf)
                ));
            }
            let _ = s.set_read_timeout(Some(left));
            match s.read(&mut chunk) {
                Ok(0) => {
                    self.probe = None;
                    return Err("probe connection closed".into());
                }
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(_) => {}
            }
        }
        if buf != b"+PONG\r\n" {
            self.probe = None;
            return Err(format!("probe got {} instead of +PONG", show(&buf)));
        }
        if !self.redis {
            let rss = vm_rss_kb(self.server.pid());
            if rss > RSS_LIMIT_KB {
                return Err(format!("VmRSS {rss} kB over {RSS_LIMIT_KB} kB"));
            }
        }
        Ok(())
    }
}

fn same(a: &Outcome, b: &Outcome, unordered: bool) -> bool {
    if unordered {
        a.closed == b.closed && a.hung == b.hung && sort_arrays(&a.bytes) == sort_arrays(&b.bytes)
    } else {
        a == b
    }
}

fn vm_rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Runs a group's rows on deadbolt (with `deadbolt_args`) and, when `redis_args` is given, on
/// redis-server; panics listing every failing row. `authenticate`: rows run authenticated
/// (with the group's password) or not.
fn run_group(
    group: &str,
    deadbolt_args: &[&str],
    redis_args: Option<&[&str]>,
    authenticate: bool,
    rows: Vec<Row>,
) {
    let started = Instant::now();
    let mut db = Target::start(false, deadbolt_args);
    let mut redis = redis_args.map(|a| Target::start(true, a));
    let mut failures = Vec::new();
    for row in &rows {
        let mut fail = |why: String| {
            failures.push(format!(
                "[{group}] {}\n    input: {}\n    {why}",
                row.name,
                show(&row.input)
            ))
        };
        let want = match (&row.expect, redis.as_mut()) {
            (Expect::Redis, Some(r)) => {
                let got = r.exchange(row, authenticate);
                if let Err(e) = r.healthy() {
                    // The reference itself broke: restart it so later rows still compare.
                    fail(format!(
                        "redis-server unhealthy after the row ({e}): mark it Safer"
                    ));
                    r.restart();
                    continue;
                }
                match got {
                    Ok(o) => Some(o),
                    Err(e) => {
                        fail(format!("redis-server: {e}"));
                        continue;
                    }
                }
            }
            (Expect::Redis, None) => {
                fail("a Redis row in a group without redis-server".into());
                continue;
            }
            (Expect::Safer(..), _) => None,
        };
        let got = db.exchange(row, authenticate);
        let health = db.healthy();
        match (&got, &row.expect, &want) {
            (Err(e), _, _) => fail(format!("deadbolt: {e}")),
            (Ok(o), Expect::Redis, Some(w)) if !same(o, w, row.unordered) => fail(format!(
                "redis:    {}\n    deadbolt: {}",
                show_outcome(w),
                show_outcome(o)
            )),
            (Ok(o), Expect::Safer(why, check), _) if !check(o) => fail(format!(
                "deadbolt: {}\n    expected (Redis 7.0.15 is unsafe here): {why}",
                show_outcome(o)
            )),
            _ => {}
        }
        if let Err(e) = health {
            fail(format!("deadbolt unhealthy after the row: {e}"));
            db.restart();
        }
    }
    eprintln!(
        "[{group}] {} rows in {:?}, {} failing",
        rows.len(),
        started.elapsed(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Rows

fn protocol_rows() -> Vec<Row> {
    let long_count = {
        let mut v = b"*".to_vec();
        v.extend(std::iter::repeat_n(b'1', 70_000));
        v
    };
    let long_bulk_len = {
        let mut v = b"*1\r\n$".to_vec();
        v.extend(std::iter::repeat_n(b'1', 70_000));
        v
    };
    let long_inline = vec![b'a'; 70_000];
    let near_limit_inline = {
        let mut v = b"ECHO ".to_vec();
        v.extend(std::iter::repeat_n(b'x', 60_000));
        v.extend_from_slice(b"\r\n");
        v
    };
    vec![
        // The repros.
        raw("inline NUL line", b"\x00\r\n").quiet(),
        raw("inline GET k NUL", b"GET k\x00\r\n")
            .setup(&[&["SET", "k", "v"]])
            .quiet(),
        // Multibulk counts.
        raw("negative count then PING", b"*-1\r\n*1\r\n$4\r\nPING\r\n"),
        raw("zero count then PING", b"*0\r\n*1\r\n$4\r\nPING\r\n"),
        raw("count not a number", b"*abc\r\n"),
        raw("count with sign and space", b"*+1 \r\n$4\r\nPING\r\n"),
        raw("count over INT_MAX", b"*2147483648\r\n"),
        raw("count INT_MAX, no arguments sent", b"*2147483647\r\n").quiet(),
        raw("count 1048577, no arguments sent", b"*1048577\r\n").quiet(),
        raw("count line of 70000 digits", &long_count).quiet(),
        // Bulk lengths.
        raw("bulk length -1", b"*1\r\n$-1\r\n"),
        raw("bulk length not a number", b"*1\r\n$abc\r\n"),
        raw(
            "bulk length over proto-max-bulk-len",
            b"*1\r\n$536870913\r\n",
        ),
        raw("bulk length i64 max", b"*1\r\n$9223372036854775807\r\n"),
        raw("bulk length line of 70000 digits", &long_bulk_len).quiet(),
        raw(
            "bulk 400 MB declared, 3 bytes sent",
            b"*1\r\n$400000000\r\nabc",
        )
        .quiet(),
        raw("expected $ got x", b"*1\r\nx3\r\nabc\r\n"),
        raw(
            "payload followed by two non-CRLF bytes",
            b"*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n",
        ),
        raw(
            "bulk payload containing CRLF",
            b"*2\r\n$4\r\nECHO\r\n$4\r\n\r\n\r\n\r\n",
        ),
        // Half-sent frames, then the client goes away.
        raw("half frame: count only, then close", b"*2\r\n").half_close(),
        raw(
            "half frame: one of two arguments, then close",
            b"*2\r\n$3\r\nGET\r\n",
        )
        .half_close(),
        raw(
            "half frame: bulk payload cut, then close",
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nabc",
        )
        .half_close(),
        raw("half inline line, then close", b"SET k v").half_close(),
        // Inline.
        raw("inline of 70000 bytes without newline", &long_inline).quiet(),
        raw("inline of 60000 bytes", &near_limit_inline),
        raw("inline unbalanced double quote", b"SET k \"unbalanced\r\n"),
        raw("inline quote followed by a letter", b"ECHO \"a\"b\r\n"),
        raw("inline single quote unbalanced", b"ECHO 'abc\r\n"),
        raw(
            "inline hex and C escapes",
            b"ECHO \"\\x41\\x4a\\n\\t\\a\\b\\\\\\\"\"\r\n",
        ),
        raw("inline bad hex escape", b"ECHO \"\\xZZ\\x4\"\r\n"),
        raw("inline escaped single quote", b"ECHO 'it\\'s'\r\n"),
        raw("inline NUL inside a word", b"ECHO a\x00b c\r\n").quiet(),
        raw("inline NUL inside quotes", b"ECHO \"a\x00b\"\r\n").quiet(),
        raw("inline vertical tab and form feed", b"ECHO\x0ba\x0cb\r\n"),
        raw(
            "inline blank lines and tabs",
            b"\r\n\n\t \r\nECHO \t x \r\n",
        ),
        raw("inline bare LF terminator", b"ECHO lf\n"),
        raw("inline CR without LF inside", b"ECHO a\rb\r\n"),
        raw("inline high bytes", b"ECHO \xff\xfe\x80\r\n"),
        raw("inline trailing backslash in quotes", b"ECHO \"abc\\\"\r\n"),
        raw(
            "inline then multibulk pipelined",
            b"PING\r\n*1\r\n$4\r\nPING\r\nPING\r\n",
        ),
    ]
}

fn unauthenticated_rows() -> Vec<Row> {
    let bulk_20000 = {
        let mut v = b"*2\r\n$4\r\nECHO\r\n$20000\r\n".to_vec();
        v.extend(std::iter::repeat_n(b'x', 20_000));
        v.extend_from_slice(b"\r\n");
        v
    };
    vec![
        // The repro: an unauthenticated client declares 400 MB.
        raw("unauthenticated $400000000", b"*1\r\n$400000000\r\n").quiet(),
        raw("unauthenticated count 11", b"*11\r\n").quiet(),
        raw("unauthenticated count 2000000", b"*2000000\r\n").quiet(),
        raw("unauthenticated bulk 16385", b"*1\r\n$16385\r\n").quiet(),
        raw("unauthenticated 20000-byte argument", &bulk_20000).quiet(),
        raw("unauthenticated inline of 70000 bytes", &vec![b'a'; 70_000]).quiet(),
        raw("unauthenticated GET", &resp_cmd(&["GET", "k"])).quiet(),
        raw(
            "unauthenticated wrong AUTH then GET",
            &[resp_cmd(&["AUTH", "wrong"]), resp_cmd(&["GET", "k"])].concat(),
        )
        .quiet(),
        raw(
            "unauthenticated EVAL",
            &resp_cmd(&["EVAL", "return 1", "0"]),
        )
        .quiet(),
    ]
}

fn lua_rows() -> Vec<Row> {
    let release = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
    vec![
        // The repros.
        eval("return unpack({}, -1, 2147483647)"),
        eval("return load('return 1')"),
        cmds(
            "redis = nil, then a lock-release script",
            &[
                &["EVAL", "redis = nil", "0"],
                &["EVAL", release, "1", "lock", "token"],
                &["GET", "lock"],
            ],
        )
        .setup(&[&["SET", "lock", "token"]]),
        // unpack / select / string / table bounds.
        eval("return unpack({1, 2, 3}, 1, 1e8)"),
        eval("return unpack({1, 2, 3}, -2147483648, -2147483640)"),
        eval("return select(-1, 1, 2)"),
        eval("return select(2147483647)"),
        eval("return select('#', unpack({}, 1, 200))"),
        eval("return string.rep('x', -1)"),
        eval("return #string.rep('x', 2^31)"),
        eval("return #string.rep('x', 2^32 + 1)"),
        eval("return string.format('%99999999d', 1)"),
        eval("return string.format('%s %s', 1)"),
        eval("return string.format('%.99f', 1.5)"),
        eval("return string.sub('abc', -2147483648, 2147483647)"),
        eval("return {string.byte('abc', -2147483648, 2147483647)}"),
        eval("return string.char(256)"),
        eval("return table.concat({1, 2}, ',', 1, 2147483647)"),
        eval("return tonumber('0x', 99)"),
        eval("return math.random(0)"),
        // struct / cmsgpack / cjson / bit.
        eval("return struct.pack('>i99999', 1)"),
        eval("return struct.unpack('c0', '')"),
        eval("return struct.unpack('i17', string.rep('\\0', 20))"),
        eval("return struct.unpack('>I2', 'a')"),
        eval("return cmsgpack.unpack('\\221\\255\\255\\255\\255')"),
        eval("return cmsgpack.unpack('\\223\\255\\255\\255\\255')"),
        eval("return cmsgpack.pack(1, 2, 3, {a = {b = {c = {}}}})"),
        eval("return cjson.decode(string.rep('[', 2000))"),
        eval("return cjson.decode('{\"a\":')"),
        eval("local t = {} t[1] = t return cjson.encode(t)"),
        eval("return cjson.encode({[1] = 1, [100000] = 2})"),
        eval("return bit.tohex(1, -2147483648)"),
        eval("return bit.lshift(1, 64)"),
        eval("return bit.band()"),
        // Globals and the sandbox.
        eval("x = 1"),
        eval("redis.call = nil"),
        eval("rawset(_G, 'y', 1)"),
        eval("setmetatable(_G, nil)"),
        eval("return loadstring('return 1')()"),
        eval("return setfenv(1, {})"),
        eval("return getfenv(0)"),
        eval("return debug.getinfo(1)"),
        eval("return os.time()"),
        eval("return os.exit()"),
        eval("return io.open('/etc/passwd')"),
        eval("return newproxy(true)"),
        eval("return require('os')"),
        eval("return dofile('/etc/passwd')"),
        eval("getmetatable('').__index = {}"),
        // Coroutines, recursion, error objects, huge returns.
        eval("return coroutine.wrap(function() coroutine.yield(1) end)()"),
        eval("local co = coroutine.create(function() return redis.call('ping') end) return {coroutine.resume(co)}"),
        eval("local co = coroutine.create(function() coroutine.yield() end) coroutine.resume(co) return coroutine.status(co)"),
        eval("local function f(n) return f(n + 1) + 1 end return f(1)"),
        eval("local function f() return pcall(f) end return f()"),
        eval("error({err = 'CUSTOM table err'})"),
        eval("error(nil)"),
        eval("return {err = 'x'}"),
        eval("return redis.error_reply('My\\r\\nError')"),
        eval("return pcall(error, {foo = 1})"),
        eval("local t = {} for i = 1, 100000 do t[i] = i end return t"),
        eval("local t = {} local c = t for i = 1, 1000 do c[1] = {} c = c[1] end return t"),
        eval("return redis.call('eval', 'return 1', 0)"),
        eval("return redis.call()"),
        eval("return redis.sha1hex()"),
        // Redis 7.0.15 crashes (SIGSEGV, see lua-semantics.md §1.4).
        eval("error({})").safer(
            "an error reply (Redis 7.0.15 dies with SIGSEGV on a table without `err`)",
            error_open,
        ),
        eval("error(setmetatable({}, {__index = function() error('x') end}))").safer(
            "an error reply (the error object's lookups fail; Redis 7.0.15 crashes on objects without `err`)",
            error_open,
        ),
    ]
}

fn count_rows() -> Vec<Row> {
    let data: &[&[&str]] = &[
        &["RPUSH", "list", "a", "b", "c", "a"],
        &["SADD", "set", "a", "b", "c"],
        &["ZADD", "zset", "1", "a", "2", "b", "3", "c"],
        &["HSET", "hash", "f1", "v1", "f2", "v2"],
        &["SET", "str", "hello"],
    ];
    let max = "9223372036854775807";
    let min = "-9223372036854775808";
    let c = |name: &str, list: &[&[&str]]| cmds(name, list).setup(data);
    vec![
        c("LRANGE 0 i64 max", &[&["LRANGE", "list", "0", max]]),
        c("LRANGE i64 min i64 max", &[&["LRANGE", "list", min, max]]),
        c("LINDEX i64 min", &[&["LINDEX", "list", min]]),
        c("LSET i64 max", &[&["LSET", "list", max, "x"]]),
        c("LTRIM extremes", &[&["LTRIM", "list", max, min], &["LLEN", "list"]]),
        c("LPOS MAXLEN i64 max", &[&["LPOS", "list", "a", "MAXLEN", max]]),
        c("LPOS RANK i64 min", &[&["LPOS", "list", "a", "RANK", min]]).safer(
            "an error or a reply, on an open connection (Redis 7.0.15 negates LONG_MIN: undefined behaviour; it answers :3)",
            |o| !o.closed && !o.hung,
        ),
        c("LPOS COUNT -1", &[&["LPOS", "list", "a", "COUNT", "-1"]]),
        c("LPOP count i64 max", &[&["LPOP", "list", max]]),
        c("ZRANGE 0 i64 max", &[&["ZRANGE", "zset", "0", max, "WITHSCORES"]]),
        c(
            "ZRANGE BYSCORE LIMIT 0 i64 max",
            &[&["ZRANGE", "zset", "-inf", "+inf", "BYSCORE", "LIMIT", "0", max]],
        ),
        c(
            "ZRANGEBYSCORE LIMIT i64 min",
            &[&["ZRANGEBYSCORE", "zset", "-inf", "+inf", "LIMIT", min, "1"]],
        ),
        c("ZADD nan score", &[&["ZADD", "zset", "nan", "x"]]),
        c("ZINCRBY to inf then -inf", &[&["ZINCRBY", "zset", "inf", "a"], &["ZINCRBY", "zset", "-inf", "a"]]),
        c("SCAN COUNT i64 max", &[&["SCAN", "0", "COUNT", max]]).unordered(),
        c("SCAN COUNT 0", &[&["SCAN", "0", "COUNT", "0"]]),
        c("SCAN cursor u64 overflow", &[&["SCAN", "18446744073709551616"]]),
        c("SSCAN COUNT -1", &[&["SSCAN", "set", "0", "COUNT", "-1"]]),
        c("SRANDMEMBER i64 min", &[&["SRANDMEMBER", "set", min]]),
        c("SRANDMEMBER i64 max", &[&["SRANDMEMBER", "set", max]]).unordered(),
        c("SPOP i64 max", &[&["SPOP", "set", max]]).unordered(),
        c("SPOP -1", &[&["SPOP", "set", "-1"]]),
        c("BLPOP timeout i64 max", &[&["BLPOP", "list", max]]),
        c("BLPOP timeout 1e300", &[&["BLPOP", "nolist", "1e300"]]),
        c("BLPOP timeout -1", &[&["BLPOP", "nolist", "-1"]]),
        c("BLPOP timeout nan", &[&["BLPOP", "nolist", "nan"]]),
        c("BZPOPMIN timeout inf", &[&["BZPOPMIN", "nozset", "inf"]]),
        c("SETEX i64 max", &[&["SETEX", "k", max, "v"]]),
        c("SETEX 0", &[&["SETEX", "k", "0", "v"]]),
        c("SET EX i64 max", &[&["SET", "k", "v", "EX", max]]),
        c("SET PX i64 max", &[&["SET", "k", "v", "PX", max]]),
        c("SET EXAT i64 max", &[&["SET", "k", "v", "EXAT", max]]),
        c("EXPIRE i64 max", &[&["EXPIRE", "str", max]]),
        c("EXPIRE i64 min", &[&["EXPIRE", "str", min], &["EXISTS", "str"]]),
        c("PEXPIREAT i64 max", &[&["PEXPIREAT", "str", max]]),
        c("GETEX EX i64 max", &[&["GETEX", "str", "EX", max]]),
        // The repros.
        c("EXPIRE 200 LT XX without TTL", &[&["EXPIRE", "str", "200", "LT", "XX"], &["TTL", "str"]]),
        c(
            "INCRBYFLOAT 1000.5 then 1.1",
            &[&["INCRBYFLOAT", "f", "1000.5"], &["INCRBYFLOAT", "f", "1.1"]],
        ),
        c(
            "INCRBYFLOAT 1e308 twice",
            &[&["INCRBYFLOAT", "f", "1e308"], &["INCRBYFLOAT", "f", "1e308"], &["GET", "f"]],
        ),
        c("INCRBY overflow", &[&["SET", "n", max], &["INCRBY", "n", "1"]]),
        c("DECRBY i64 min", &[&["DECRBY", "n", min]]),
        c("INCRBY on 20-digit value", &[&["SET", "n", "99999999999999999999"], &["INCR", "n"]]),
        c("HINCRBYFLOAT to inf", &[&["HINCRBYFLOAT", "hash", "x", "1e308"], &["HINCRBYFLOAT", "hash", "x", "1e308"]]),
        c("INCRBYFLOAT nan", &[&["INCRBYFLOAT", "f", "nan"]]),
        // Redis 7.0.15 builds a reply of 2^31 elements (tens of GB).
        c("SRANDMEMBER -2147483647", &[&["SRANDMEMBER", "set", "-2147483647"]]).safer(
            "an error, or the client closed by its output limit, with RSS bounded (Redis 7.0.15 builds a 2^31-element reply)",
            error_or_closed,
        ),
        c("ZRANDMEMBER -2147483647", &[&["ZRANDMEMBER", "zset", "-2147483647"]]).safer(
            "an error, or the client closed by its output limit, with RSS bounded (Redis 7.0.15 builds a 2^31-element reply)",
            error_or_closed,
        ),
        c("HRANDFIELD -2147483647", &[&["HRANDFIELD", "hash", "-2147483647"]]).safer(
            "an error, or the client closed by its output limit, with RSS bounded (Redis 7.0.15 builds a 2^31-element reply)",
            error_or_closed,
        ),
    ]
}

fn pattern_rows() -> Vec<Row> {
    let key40 = "a".repeat(40);
    let twenty = format!("{}b", "a*".repeat(20));
    let stars = format!("{}b", "*".repeat(10_000));
    let mut rows = vec![
        // The repro: exponential backtracking without Redis's early exit.
        cmds("KEYS 20 a* groups vs 40-byte key", &[&["KEYS", &twenty]]),
        cmds(
            "SCAN MATCH 20 a* groups",
            &[&["SCAN", "0", "MATCH", &twenty, "COUNT", "1000"]],
        ),
        cmds("KEYS 10000 stars", &[&["KEYS", &stars]]),
        cmds("KEYS [", &[&["KEYS", "["]]),
        cmds("KEYS [^", &[&["KEYS", "[^"]]),
        cmds("KEYS backslash", &[&["KEYS", "\\"]]),
        cmds("KEYS [\\]", &[&["KEYS", "[\\]"]]),
        cmds("KEYS [z-a]*", &[&["KEYS", "[z-a]*"]]),
        cmds("KEYS ?* many", &[&["KEYS", &"?*".repeat(30)]]),
        cmds(
            "PSUBSCRIBE pathological pattern, PING while subscribed",
            &[&["PSUBSCRIBE", &twenty], &["PING", "in-subscribe"]],
        )
        .quiet(),
        cmds("PSUBSCRIBE 10000 stars", &[&["PSUBSCRIBE", &stars]]).quiet(),
        cmds("PUBSUB NUMPAT", &[&["PUBSUB", "NUMPAT"]]),
    ];
    for r in rows.iter_mut() {
        *r = std::mem::replace(r, raw("", b"")).unordered().setup(&[
            &["SET", &key40, "1"],
            &["SET", "[", "1"],
            &["SET", "\\", "1"],
        ]);
    }
    rows
}

fn multi_rows() -> Vec<Row> {
    vec![
        cmds(
            "MULTI, unknown command, EXEC",
            &[
                &["MULTI"],
                &["NOSUCHCMD"],
                &["SET", "k", "v"],
                &["EXEC"],
                &["GET", "k"],
            ],
        ),
        cmds(
            "MULTI, wrong arity, EXEC",
            &[
                &["MULTI"],
                &["GET"],
                &["SET", "k", "v"],
                &["EXEC"],
                &["GET", "k"],
            ],
        ),
        cmds("MULTI nested", &[&["MULTI"], &["MULTI"], &["EXEC"]]),
        cmds("EXEC without MULTI", &[&["EXEC"]]),
        cmds("DISCARD without MULTI", &[&["DISCARD"]]),
        cmds(
            "WATCH inside MULTI",
            &[&["MULTI"], &["WATCH", "k"], &["EXEC"]],
        ),
        cmds(
            "MULTI with BLPOP does not block",
            &[&["MULTI"], &["BLPOP", "nolist", "0"], &["EXEC"]],
        ),
        cmds(
            "MULTI, EVAL that errors, EXEC",
            &[
                &["MULTI"],
                &["SET", "k", "1"],
                &[
                    "EVAL",
                    "return redis.call('incr', KEYS[1]) .. nil",
                    "1",
                    "k",
                ],
                &["INCR", "k"],
                &["EXEC"],
            ],
        ),
        cmds(
            "MULTI, SUBSCRIBE, EXEC",
            &[&["MULTI"], &["SUBSCRIBE", "ch"], &["EXEC"]],
        ),
        cmds(
            "MULTI, rejected AUTH-less command in queue, EXEC",
            &[&["MULTI"], &["SELECT", "99"], &["EXEC"]],
        ),
        cmds(
            "MULTI with huge count argument",
            &[
                &["MULTI"],
                &["LRANGE", "l", "0", "9223372036854775807"],
                &["EXEC"],
            ],
        ),
    ]
}

fn maxmemory_rows() -> Vec<Row> {
    vec![
        // The repro: a script write while over maxmemory.
        eval("return redis.call('set', 'k', 'v')"),
        eval("return redis.pcall('set', 'k', 'v')"),
        eval("return redis.call('get', 'k')"),
        eval("redis.call('del', 'nokey') return 1"),
        cmds("SET over maxmemory", &[&["SET", "k", "v"]]),
        cmds(
            "EVAL_RO read",
            &[&["EVAL_RO", "return redis.call('get', 'k')", "0"]],
        ),
        cmds(
            "MULTI SET EXEC over maxmemory",
            &[&["MULTI"], &["SET", "k", "v"], &["EXEC"]],
        ),
    ]
}

/// Rows where Redis has no equivalent setting (deadbolt's `lua-memory-limit`) or is unsafe:
/// deadbolt only.
fn lua_memory_rows() -> Vec<Row> {
    // SHA1 of "return 'kept'".
    let kept = "831718c21eb8cace8e6f31e7782a9d8e38ed5600";
    fn oom_then_kept(o: &Outcome) -> bool {
        o.bytes.starts_with(b"-") && o.bytes.ends_with(b"$4\r\nkept\r\n") && !o.closed
    }
    vec![
        // The repro: a script loaded before a Lua OOM still runs after it.
        cmds(
            "Lua OOM, then EVALSHA of a script loaded before",
            &[
                &["EVAL", "local t = {} for i = 1, 1e8 do t[i] = i end return 1", "0"],
                &["EVALSHA", kept, "0"],
            ],
        )
        .setup(&[&["SCRIPT", "LOAD", "return 'kept'"]])
        .safer(
            "an error for the script over lua-memory-limit, then $4 kept for EVALSHA (Redis has no Lua memory limit)",
            oom_then_kept,
        ),
        cmds(
            "string.rep 2^30, then EVALSHA",
            &[
                &["EVAL", "return #string.rep('x', 2^30)", "0"],
                &["EVALSHA", kept, "0"],
            ],
        )
        .setup(&[&["SCRIPT", "LOAD", "return 'kept'"]])
        .safer(
            "an error (a 1 GB string is over lua-memory-limit; Redis would build it), then $4 kept",
            oom_then_kept,
        ),
        cmds(
            "string concatenation doubling, then EVALSHA",
            &[
                &["EVAL", "local s = 'x' for i = 1, 40 do s = s .. s end return #s", "0"],
                &["EVALSHA", kept, "0"],
            ],
        )
        .setup(&[&["SCRIPT", "LOAD", "return 'kept'"]])
        .safer("an error, then $4 kept", oom_then_kept),
        cmds(
            "cjson.decode of a huge array, then EVALSHA",
            &[
                &[
                    "EVAL",
                    "return #cjson.decode('[' .. string.rep('1,', 3e6) .. '1]')",
                    "0",
                ],
                &["EVALSHA", kept, "0"],
            ],
        )
        .setup(&[&["SCRIPT", "LOAD", "return 'kept'"]])
        .safer("an error, then $4 kept", oom_then_kept),
    ]
}

// ---------------------------------------------------------------------------------------------
// Groups: one test each, so they run in parallel on their own servers.

/// Scripts past 100 ms make other clients' commands -BUSY (the MULTI + BUSY row needs it).
const BUSY_100MS: &[&str] = &["--busy-reply-threshold", "100"];

#[test]
fn hostile_protocol() {
    run_group(
        "protocol",
        BUSY_100MS,
        Some(BUSY_100MS),
        true,
        protocol_rows(),
    );
}

#[test]
fn hostile_unauthenticated() {
    let args = &["--requirepass", "secret"];
    run_group(
        "unauthenticated",
        args,
        Some(args),
        false,
        unauthenticated_rows(),
    );
}

#[test]
fn hostile_lua() {
    run_group("lua", BUSY_100MS, Some(BUSY_100MS), true, lua_rows());
}

#[test]
fn hostile_counts_and_patterns() {
    let mut rows = count_rows();
    rows.extend(pattern_rows());
    run_group("counts+patterns", BUSY_100MS, Some(BUSY_100MS), true, rows);
}

#[test]
fn hostile_multi() {
    run_group("multi", BUSY_100MS, Some(BUSY_100MS), true, multi_rows());
}

#[test]
fn hostile_maxmemory() {
    let args = &["--maxmemory", "1"];
    run_group("maxmemory", args, Some(args), true, maxmemory_rows());
}

#[test]
fn hostile_lua_memory_limit() {
    run_group(
        "lua-memory-limit",
        &["--lua-memory-limit", "16mb"],
        None,
        true,
        lua_memory_rows(),
    );
}

/// The repro: MULTI, then a command rejected with -BUSY while another client's script
/// runs, then EXEC after SCRIPT KILL. Redis flags the transaction (the rejected command makes
/// EXEC abort); deadbolt must give the same bytes.
#[test]
fn hostile_multi_busy_exec() {
    fn run(port: u16) -> Result<Vec<u8>, String> {
        let c = |s: &mut TcpStream, a: &[&str]| run_cmds(s, &[resp_cmd(a)]);
        let mut tx = connect(port).map_err(|e| e.to_string())?;
        let mut script = connect(port).map_err(|e| e.to_string())?;
        let mut other = connect(port).map_err(|e| e.to_string())?;
        c(&mut other, &["FLUSHALL"])?;
        let mut out = c(&mut tx, &["MULTI"])?;
        script
            .write_all(&resp_cmd(&[
                "EVAL",
                "local i = 0 while true do i = i + 1 end",
                "0",
            ]))
            .map_err(|e| e.to_string())?;
        // Busy once another client is refused.
        let deadline = Instant::now() + ROW_DEADLINE;
        loop {
            let r = c(&mut other, &["PING"])?;
            if r.starts_with(b"-BUSY") {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("never busy: {}", show(&r)));
            }
        }
        out.extend(c(&mut tx, &["SET", "k", "v"])?);
        out.extend(c(&mut other, &["SCRIPT", "KILL"])?);
        let mut killed = Vec::new();
        let mut chunk = [0u8; 4096];
        script
            .set_read_timeout(Some(ROW_DEADLINE))
            .map_err(|e| e.to_string())?;
        while reply_len(&killed, 0).is_none() {
            match script.read(&mut chunk) {
                Ok(0) | Err(_) => return Err("script connection closed".into()),
                Ok(n) => killed.extend_from_slice(&chunk[..n]),
            }
        }
        out.extend(killed);
        out.extend(c(&mut tx, &["EXEC"])?);
        out.extend(c(&mut tx, &["GET", "k"])?);
        Ok(out)
    }
    let redis = redis_server(BUSY_100MS);
    let db = deadbolt(BUSY_100MS);
    let want = run(redis.port).expect("redis-server");
    let got = run(db.port);
    let got = got.unwrap_or_else(|e| format!("<{e}>").into_bytes());
    assert!(
        got == want,
        "MULTI + BUSY + EXEC\n    redis:    {}\n    deadbolt: {}",
        show(&want),
        show(&got)
    );
}
