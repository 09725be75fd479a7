//! One client cannot take the service down: malformed, binary, half-sent and oversized requests
//! (before and after AUTH), protected mode and -BUSY inside MULTI. Every scenario runs on
//! deadbolt and on a real redis-server, and the reply bytes (and whether the connection was
//! closed) must be equal; meanwhile another client keeps getting PONG within 100 ms and
//! deadbolt's resident memory stays bounded.

use crate::common;

use common::{Conn, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Redis's PROTO_INLINE_MAX_SIZE: more than this many bytes without a line end is refused.
const INLINE_MAX: usize = 64 * 1024;
const BUSY: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Another client is still served promptly.
fn assert_pong_within_100ms(bystander: &mut Conn, what: &str) {
    let started = Instant::now();
    bystander.send_raw(b"*1\r\n$4\r\nPING\r\n");
    let reply = bystander.try_read_reply(Duration::from_millis(100));
    assert_eq!(
        reply.as_deref(),
        Some(&b"+PONG\r\n"[..]),
        "{what}: no PONG within 100 ms (after {:?})",
        started.elapsed()
    );
}

/// Everything the server sends within `quiet` of silence (or until it closes), and whether it
/// closed the connection.
fn drain(s: &mut TcpStream, quiet: Duration) -> (Vec<u8>, bool) {
    s.set_read_timeout(Some(quiet)).unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return (out, true),
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (out, true),
            Err(_) => return (out, false),
        }
    }
}

/// Sends `steps` one after another (each fully written, then the replies read) on a fresh
/// connection; per step, what came back and whether the server had closed.
fn run_steps(port: u16, steps: &[&[u8]], quiet: Duration) -> Vec<(Vec<u8>, bool)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    let mut out = Vec::new();
    for step in steps {
        if s.write_all(step).is_err() {
            out.push((Vec::new(), true));
            break;
        }
        let got = drain(&mut s, quiet);
        let closed = got.1;
        out.push(got);
        if closed {
            break;
        }
    }
    out
}

struct Pair {
    ours: Server,
    redis: Server,
    bystander: Conn,
    rss_before: u64,
}

impl Pair {
    fn new(extra: &[&str]) -> Pair {
        let ours = common::deadbolt(extra);
        let redis = common::redis_server(extra);
        let mut bystander = ours.conn();
        if extra.contains(&"--requirepass") {
            assert_eq!(bystander.cmd(&["AUTH", "pw"]), b"+OK\r\n");
        }
        let rss_before = rss_kb(ours.pid());
        Pair {
            ours,
            redis,
            bystander,
            rss_before,
        }
    }

    /// The same steps on both servers: equal replies, equal closing; deadbolt still serves
    /// others and did not grow.
    fn same(&mut self, what: &str, steps: &[&[u8]]) -> Vec<(Vec<u8>, bool)> {
        let quiet = Duration::from_millis(150);
        let ours = run_steps(self.ours.port, steps, quiet);
        let theirs = run_steps(self.redis.port, steps, quiet);
        let show = |v: &Vec<(Vec<u8>, bool)>| {
            v.iter()
                .map(|(b, c)| {
                    format!(
                        "{:?}{}",
                        String::from_utf8_lossy(b),
                        if *c { " <closed>" } else { "" }
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            show(&ours),
            show(&theirs),
            "{what}: deadbolt vs redis-server"
        );
        assert_eq!(ours, theirs, "{what}: raw bytes");
        assert_pong_within_100ms(&mut self.bystander, what);
        self.assert_bounded(what);
        ours
    }

    fn assert_bounded(&self, what: &str) {
        let now = rss_kb(self.ours.pid());
        assert!(
            now < self.rss_before + 100 * 1024,
            "{what}: deadbolt RSS grew from {} kB to {now} kB",
            self.rss_before
        );
    }
}

fn filler(already: usize) -> Vec<u8> {
    // Exactly one byte past the limit: both servers read all of it before refusing, so the
    // error is not lost to a reset from unread data.
    vec![b'a'; INLINE_MAX + 1 - already]
}

// ---- item 1: NUL bytes ----

#[test]
fn nul_in_inline_request_waits_then_too_big_like_redis() {
    let mut p = Pair::new(&[]);
    for (what, first) in [
        ("lone NUL", &b"\x00\r\n"[..]),
        ("NUL after GET k", b"GET k\x00\r\n"),
        ("NUL then more lines", b"GET k\x00\r\nPING\r\nPING\r\n"),
    ] {
        let fill = filler(first.len());
        let got = p.same(what, &[first, &fill]);
        assert_eq!(got[0], (Vec::new(), false), "{what}: waits, open");
        assert_eq!(
            got[1],
            (
                b"-ERR Protocol error: too big inline request\r\n".to_vec(),
                true
            ),
            "{what}"
        );
    }
    // Commands before the NUL are answered.
    let got = p.same("PING before NUL", &[b"PING\r\nGET k\x00\r\n"]);
    assert_eq!(got[0], (b"+PONG\r\n".to_vec(), false));
}

#[test]
fn nul_in_multibulk_length_lines_waits_then_too_big_like_redis() {
    let mut p = Pair::new(&[]);
    let first: &[u8] = b"*1\x00\r\n";
    let got = p.same("NUL in count", &[first, &filler(first.len())]);
    assert_eq!(
        got[1],
        (
            b"-ERR Protocol error: too big mbulk count string\r\n".to_vec(),
            true
        )
    );
    // The bulk-count check counts from the `$` line, as Redis's qb_pos does.
    let first: &[u8] = b"*1\r\n$4\x00\r\nPING\r\n";
    let got = p.same("NUL in bulk length", &[first, &filler(first.len() - 4)]);
    assert_eq!(
        got[1],
        (
            b"-ERR Protocol error: too big bulk count string\r\n".to_vec(),
            true
        )
    );
    // A NUL inside a payload is data.
    let got = p.same("NUL in payload", &[b"*2\r\n$4\r\nECHO\r\n$3\r\na\x00b\r\n"]);
    assert_eq!(got[0], (b"$3\r\na\x00b\r\n".to_vec(), false));
}

#[test]
fn nul_flood_before_auth_does_not_grow_memory() {
    let mut p = Pair::new(&["--requirepass", "pw"]);
    // 4 MB of NULs with newlines: each connection is refused at 64 KB.
    let flood = b"\x00\r\n".repeat(4 << 20 >> 2);
    for i in 0..3 {
        let mut s = TcpStream::connect(("127.0.0.1", p.ours.port)).unwrap();
        let _ = s.write_all(&flood);
        let (got, closed) = drain(&mut s, Duration::from_millis(500));
        assert!(closed, "connection {i} closed");
        assert_eq!(got, b"-ERR Protocol error: too big inline request\r\n");
        assert_pong_within_100ms(&mut p.bystander, "NUL flood");
    }
    p.assert_bounded("NUL flood");
}

// ---- item 9: limits before authentication ----

#[test]
fn unauthenticated_clients_get_redis_limits() {
    let mut p = Pair::new(&["--requirepass", "pw"]);
    let got = p.same("11 arguments", &[b"*11\r\n"]);
    assert_eq!(
        got[0],
        (
            b"-ERR Protocol error: unauthenticated multibulk length\r\n".to_vec(),
            true
        )
    );
    let got = p.same("400 MB bulk", &[b"*1\r\n$400000000\r\n"]);
    assert_eq!(
        got[0],
        (
            b"-ERR Protocol error: unauthenticated bulk length\r\n".to_vec(),
            true
        )
    );
    // At the limits: accepted (the unknown command is answered, not refused).
    let mut at_limit = b"*10\r\n".to_vec();
    for _ in 0..10 {
        at_limit.extend_from_slice(b"$16384\r\n");
        at_limit.extend_from_slice(&[b'x'; 16384]);
        at_limit.extend_from_slice(b"\r\n");
    }
    p.same("10 x 16 KB", &[&at_limit]);
    // Invalid lengths are reported as such first.
    p.same("negative bulk", &[b"*1\r\n$-3\r\n"]);
    p.same("count over INT_MAX", &[b"*2147483648\r\n"]);
    // Empty requests are fine.
    p.same("*-1 and *0", &[b"*-1\r\n*0\r\n*1\r\n$4\r\nPING\r\n"]);
    // AUTH in the same packet lifts the limits for what follows it, as in Redis.
    let mut pipelined = b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*2\r\n$4\r\nECHO\r\n$20000\r\n".to_vec();
    pipelined.extend_from_slice(&[b'e'; 20000]);
    pipelined.extend_from_slice(b"\r\n*11\r\n$4\r\nECHO\r\n");
    pipelined.extend_from_slice(&b"$1\r\na\r\n".repeat(10));
    let got = p.same("AUTH then big", &[&pipelined]);
    assert!(got[0].0.starts_with(b"+OK\r\n$20000\r\n"));
    // Wrong password: still limited.
    p.same(
        "WRONGPASS then big",
        &[b"*2\r\n$4\r\nAUTH\r\n$2\r\nno\r\n*1\r\n$20000\r\n"],
    );
    // RESET logs the client out again: the limits are back for the next request.
    p.same(
        "AUTH, RESET, then 11 arguments",
        &[b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*1\r\n$5\r\nRESET\r\n*11\r\n"],
    );
}

#[test]
fn unauthenticated_big_bulks_do_not_grow_memory() {
    let mut p = Pair::new(&["--requirepass", "pw"]);
    let data = vec![b'z'; 8 << 20];
    for i in 0..3 {
        let mut s = TcpStream::connect(("127.0.0.1", p.ours.port)).unwrap();
        let _ = s.write_all(b"*1\r\n$400000000\r\n");
        let _ = s.write_all(&data);
        let (got, closed) = drain(&mut s, Duration::from_millis(500));
        assert!(closed, "connection {i} closed");
        assert_eq!(got, b"-ERR Protocol error: unauthenticated bulk length\r\n");
        assert_pong_within_100ms(&mut p.bystander, "big bulk before AUTH");
    }
    p.assert_bounded("big bulks before AUTH");
}

#[test]
fn no_password_means_no_unauthenticated_limits() {
    let mut p = Pair::new(&[]);
    let mut req = b"*12\r\n$4\r\nECHO\r\n$20000\r\n".to_vec();
    req.extend_from_slice(&[b'q'; 20000]);
    req.extend_from_slice(b"\r\n");
    req.extend_from_slice(&b"$1\r\nb\r\n".repeat(10));
    p.same("12 args, 20 KB, no password", &[&req]);
}

// ---- further malformed input ----

#[test]
fn malformed_multibulk_like_redis() {
    let mut p = Pair::new(&[]);
    let cases: &[(&str, &[&[u8]])] = &[
        ("non-digit count", &[b"*abc\r\n"]),
        ("empty count", &[b"*\r\n"]),
        ("plus count", &[b"*+1\r\n$4\r\nPING\r\n"]),
        ("leading zero count", &[b"*01\r\n$4\r\nPING\r\n"]),
        ("count overflow", &[b"*99999999999999999999\r\n"]),
        (
            "negative counts skipped",
            &[b"*-1\r\n*-5\r\n*0\r\nPING\r\n"],
        ),
        ("bulk -1 in request", &[b"*1\r\n$-1\r\n"]),
        ("bulk non-digit", &[b"*1\r\n$x\r\n"]),
        ("bulk overflow", &[b"*1\r\n$99999999999999999999\r\n"]),
        ("bulk over proto-max-bulk-len", &[b"*1\r\n$536870913\r\n"]),
        ("expected $", &[b"*1\r\nfoo\r\n"]),
        ("expected $, got binary", &[b"*1\r\n\xff\r\n"]),
        ("expected $, got CR", &[b"*1\r\n\r\n"]),
        ("CR without LF in count", &[b"*1\rX$4\rYPING\r\n"]),
        ("CR CR LF in count", &[b"*1\r\r\n$4\r\nPING\r\n"]),
        (
            "payload trailer unchecked",
            &[b"*1\r\n$4\r\nPINGXX*1\r\n$4\r\nPING\r\n"],
        ),
        (
            "half-sent count",
            &[b"*2", b"\r\n$4\r\nECHO\r\n$2\r\nhi\r\n"],
        ),
        (
            "half-sent bulk",
            &[b"*2\r\n$4\r\nECHO\r\n$5\r\nhel", b"lo\r\n"],
        ),
        (
            "half-sent length line",
            &[b"*1\r\n$4", b"\r", b"\nPING\r\n"],
        ),
        ("foo without line end waits", &[b"*1\r\nfoo"]),
        (
            "huge declared count, few args",
            &[b"*2147483647\r\n$1\r\na\r\n$1\r\nb\r\n"],
        ),
        (
            "huge declared bulk, few bytes",
            &[b"*1\r\n$536870912\r\nabc"],
        ),
    ];
    for (what, steps) in cases {
        p.same(what, steps);
    }
    // Too long a count line.
    let mut count = b"*".to_vec();
    count.extend_from_slice(&filler(1));
    p.same("64 KB count line", &[&count]);
    // One byte at a time.
    let req = b"*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n";
    let bytes: Vec<&[u8]> = req.chunks(1).collect();
    let mut s = TcpStream::connect(("127.0.0.1", p.ours.port)).unwrap();
    for b in &bytes {
        s.write_all(b).unwrap();
    }
    let (got, _) = drain(&mut s, Duration::from_millis(150));
    assert_eq!(got, b"$5\r\nhello\r\n");
}

#[test]
fn malformed_inline_like_redis() {
    let mut p = Pair::new(&[]);
    let cases: &[(&str, &[u8])] = &[
        ("unbalanced double quote", b"ECHO \"abc\r\n"),
        ("unbalanced single quote", b"ECHO 'abc\r\n"),
        ("closing quote then letter", b"ECHO \"a\"b\r\n"),
        ("closing single quote then letter", b"ECHO 'a'b\r\n"),
        ("closing quote then vertical tab", b"ECHO \"a\"\x0bb\r\n"),
        ("escaped quote", b"ECHO 'a\\'b'\r\n"),
        ("hex escapes", b"ECHO \"\\x41\\x4\\xZZ\\n\"\r\n"),
        ("backslash at the end", b"ECHO \"abc\\\r\n"),
        ("vertical tab inside a word", b"ECHO a\x0bb\r\n"),
        ("leading vertical tab and form feed", b"\x0bECHO\x0cx\r\n"),
        ("CR inside the line", b"ECHO a\rb\r\n"),
        ("empty lines", b"\r\n\n  \r\n\t\r\nPING\r\n"),
        ("LF only", b"PING\nPING\n"),
        ("empty quotes", b"ECHO \"\"\r\n"),
        ("quote in a word", b"ECHO ab\"c d\"\r\n"),
        ("binary word", b"ECHO \xff\xfe\r\n"),
        ("dollar line inline", b"$4\r\nPING\r\n"),
        ("unknown command, long args", b"NOPE aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb cccccccccccccccccccccc\r\n"),
        ("unknown command, CR LF escapes", b"\"NO\\r\\nPE\" \"a\\r\\nb\"\r\n"),
    ];
    for (what, bytes) in cases {
        p.same(what, &[bytes]);
    }
    p.same("64 KB without line end", &[&filler(0)]);
}

#[test]
fn unknown_command_echoes_binary_like_redis() {
    let mut p = Pair::new(&[]);
    p.same(
        "binary name and NUL arg",
        &[b"*3\r\n$3\r\nfo\xff\r\n$3\r\na\x00b\r\n$2\r\n\xc3\x28\r\n"],
    );
}

// ---- item 10: protected mode ----

#[test]
fn protected_mode_admits_only_127_0_0_1_like_redis() {
    let ours = common::deadbolt(&["--bind", "127.0.0.1"]);
    let redis = common::redis_server(&["--bind", "127.0.0.1"]);
    let from = |src: &str, port: u16| -> (Vec<u8>, bool) {
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let src: std::net::SocketAddr = format!("{src}:0").parse().unwrap();
        sock.bind(&src.into()).unwrap();
        let dst: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        sock.connect(&dst.into()).unwrap();
        let mut s: TcpStream = sock.into();
        s.write_all(b"PING\r\n").unwrap();
        drain(&mut s, Duration::from_millis(300))
    };
    for src in ["127.0.0.2", "127.1.2.3"] {
        let (got, closed) = from(src, ours.port);
        assert_eq!((got.clone(), closed), from(src, redis.port), "{src}");
        assert!(
            got.starts_with(b"-DENIED Redis is running in protected mode"),
            "{src}"
        );
        assert!(closed, "{src}");
    }
    assert_eq!(from("127.0.0.1", ours.port), (b"+PONG\r\n".to_vec(), false));
}

// ---- item 11: -BUSY inside MULTI ----

/// Starts a runaway script on both servers and waits until they answer -BUSY.
fn start_busy(srv: &Server) -> Conn {
    let mut a = srv.conn();
    a.send(&["EVAL", "while true do end", "0"]);
    let mut probe = srv.conn();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = probe.cmd(&["PING"]);
        if r == BUSY {
            return a;
        }
        assert!(Instant::now() < deadline, "script never became busy");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill_script(srv: &Server, a: &mut Conn) {
    kill_with(&mut srv.conn(), a);
}

/// SCRIPT KILL from `k` (authenticated beforehand where a password is set).
fn kill_with(k: &mut Conn, a: &mut Conn) {
    assert_eq!(k.cmd(&["SCRIPT", "KILL"]), b"+OK\r\n");
    let r = a.read_reply();
    assert!(r.starts_with(b"-ERR Script killed by user"), "{r:?}");
}

#[test]
fn busy_inside_multi_flags_the_transaction_like_redis() {
    let mut results = Vec::new();
    for (name, srv) in common::deadbolt_and_redis(&["--busy-reply-threshold", "100"]) {
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut b = srv.conn();
        let mut c = srv.conn();
        let mut d = srv.conn();
        let mut e = srv.conn();
        out.push(b.cmd(&["MULTI"]));
        out.push(b.cmd(&["SET", "k1", "v1"]));
        out.push(d.cmd(&["MULTI"]));
        out.push(e.cmd(&["WATCH", "w"]));
        let mut a = start_busy(&srv);
        // Refused while queuing: the transaction is flagged.
        out.push(b.cmd(&["SET", "k2", "v2"]));
        out.push(b.cmd(&["NOSUCHCMD", "x"]));
        // Allowed through a busy script: MULTI nests, WATCH refused, SCRIPT KILL queued.
        out.push(b.cmd(&["MULTI"]));
        out.push(b.cmd(&["WATCH", "x"]));
        out.push(b.cmd(&["SHUTDOWN", "NOSAVE"]));
        // A client entering MULTI while busy, then EXEC while busy: EXECABORT (BUSY).
        out.push(c.cmd(&["MULTI"]));
        out.push(c.cmd(&["SET", "k3", "v3"]));
        out.push(c.cmd(&["UNWATCH"]));
        out.push(c.cmd(&["EXEC"]));
        out.push(c.cmd(&["EXEC"]));
        out.push(c.cmd(&["DISCARD"]));
        // DISCARD while busy ends the transaction.
        out.push(d.cmd(&["DISCARD"]));
        out.push(d.cmd(&["GET", "k1"]));
        // UNWATCH outside MULTI, and QUIT.
        out.push(e.cmd(&["UNWATCH"]));
        out.push(e.cmd(&["QUIT"]));
        assert!(e.is_closed(Duration::from_secs(2)), "{name}: QUIT closes");
        kill_script(&srv, &mut a);
        out.push(b.cmd(&["SET", "k4", "v4"]));
        out.push(b.cmd(&["EXEC"]));
        out.push(d.cmd(&["EXEC"]));
        // Nothing of the flagged transaction was applied.
        out.push(a.cmd(&["MGET", "k1", "k2", "k3", "k4"]));
        // c left MULTI with its EXECABORT: its commands run now.
        out.push(c.cmd(&["SET", "k5", "v5"]));
        // Queued SCRIPT KILL inside a transaction runs at EXEC.
        out.push(b.cmd(&["MULTI"]));
        let mut a = start_busy(&srv);
        out.push(b.cmd(&["SCRIPT", "KILL"]));
        kill_script(&srv, &mut a);
        out.push(b.cmd(&["EXEC"]));
        results.push((name, out));
    }
    let show = |v: &Vec<Vec<u8>>| {
        v.iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(show(&results[0].1), show(&results[1].1));
    assert_eq!(results[0].1[4], BUSY);
}

// ---- the TLS path (server/connection.rs) ----

mod tls {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    use rustls::{pki_types::ServerName, ClientConfig, RootCertStore};
    use std::path::PathBuf;
    use std::sync::Arc;

    /// deadbolt with a TLS port (certificates made here), its TLS port and a client config.
    pub struct TlsServer {
        pub srv: Server,
        pub port: u16,
        cfg: Arc<ClientConfig>,
        dir: PathBuf,
    }

    impl Drop for TlsServer {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    impl TlsServer {
        pub fn start(tag: &str, extra: &[&str]) -> TlsServer {
            let dir =
                std::env::temp_dir().join(format!("deadbolt-hostile-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
            ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            ca.distinguished_name.push(DnType::CommonName, "hostile CA");
            let ca_key = KeyPair::generate().unwrap();
            let ca_cert = ca.self_signed(&ca_key).unwrap();
            let leaf = CertificateParams::new(vec!["localhost".into()]).unwrap();
            let key = KeyPair::generate().unwrap();
            let cert = leaf.signed_by(&key, &ca_cert, &ca_key).unwrap();
            let path = |n: &str| dir.join(n).display().to_string();
            std::fs::write(path("ca.pem"), ca_cert.pem()).unwrap();
            std::fs::write(path("server.pem"), cert.pem()).unwrap();
            std::fs::write(path("server.key"), key.serialize_pem()).unwrap();
            let port = common::free_port();
            let p = port.to_string();
            let (c, k, a) = (path("server.pem"), path("server.key"), path("ca.pem"));
            let mut args = vec![
                "--tls-port",
                &p,
                "--tls-cert-file",
                &c,
                "--tls-key-file",
                &k,
                "--tls-ca-cert-file",
                &a,
                "--tls-auth-clients",
                "no",
            ];
            args.extend_from_slice(extra);
            let srv = common::deadbolt(&args);
            srv.wait_log(
                &format!("Listening for TLS on 127.0.0.1:{port}"),
                Duration::from_secs(5),
            );
            let mut roots = RootCertStore::empty();
            roots.add(ca_cert.der().clone()).unwrap();
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let cfg = ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
            TlsServer {
                srv,
                port,
                cfg: Arc::new(cfg),
                dir,
            }
        }

        pub fn connect(&self) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
            let conn = rustls::ClientConnection::new(
                self.cfg.clone(),
                ServerName::try_from("localhost").unwrap(),
            )
            .unwrap();
            let sock = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
            sock.set_nodelay(true).unwrap();
            rustls::StreamOwned::new(conn, sock)
        }

        /// Like `run_steps`, over TLS.
        pub fn steps(&self, steps: &[&[u8]]) -> Vec<(Vec<u8>, bool)> {
            let mut s = self.connect();
            let mut out = Vec::new();
            for step in steps {
                if s.write_all(step).and_then(|_| s.flush()).is_err() {
                    out.push((Vec::new(), true));
                    break;
                }
                let got = drain_tls(&mut s, Duration::from_millis(200));
                let closed = got.1;
                out.push(got);
                if closed {
                    break;
                }
            }
            out
        }
    }

    pub fn drain_tls(
        s: &mut rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
        quiet: Duration,
    ) -> (Vec<u8>, bool) {
        s.sock.set_read_timeout(Some(quiet)).unwrap();
        let mut out = Vec::new();
        let mut chunk = [0u8; 65536];
        loop {
            match s.read(&mut chunk) {
                Ok(0) => return (out, true),
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return (out, false)
                }
                // A close without close_notify, or a reset: closed.
                Err(_) => return (out, true),
            }
        }
    }

    /// TLS replies must equal redis-server's plain-TCP ones.
    fn same_as_redis(t: &TlsServer, redis: &Server, what: &str, steps: &[&[u8]]) {
        let ours = t.steps(steps);
        let theirs = run_steps(redis.port, steps, Duration::from_millis(150));
        assert_eq!(ours, theirs, "{what}: deadbolt over TLS vs redis-server");
    }

    #[test]
    fn tls_path_has_the_same_protocol_limits() {
        let t = TlsServer::start("limits", &["--requirepass", "pw"]);
        let redis = common::redis_server(&["--requirepass", "pw"]);
        let mut bystander = t.srv.conn();
        assert_eq!(bystander.cmd(&["AUTH", "pw"]), b"+OK\r\n");
        let rss_before = rss_kb(t.srv.pid());
        same_as_redis(&t, &redis, "11 arguments", &[b"*11\r\n"]);
        same_as_redis(&t, &redis, "400 MB bulk", &[b"*1\r\n$400000000\r\n"]);
        let mut pipelined =
            b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*2\r\n$4\r\nECHO\r\n$20000\r\n".to_vec();
        pipelined.extend_from_slice(&[b'e'; 20000]);
        pipelined.extend_from_slice(b"\r\n");
        same_as_redis(&t, &redis, "AUTH then big", &[&pipelined]);
        let first: &[u8] = b"GET k\x00\r\n";
        same_as_redis(&t, &redis, "NUL", &[first, &filler(first.len())]);
        same_as_redis(&t, &redis, "unbalanced", &[b"ECHO \"abc\r\n"]);
        assert_pong_within_100ms(&mut bystander, "TLS");
        assert!(rss_kb(t.srv.pid()) < rss_before + 100 * 1024);
    }

    #[test]
    fn tls_busy_inside_multi_flags_the_transaction() {
        let t = TlsServer::start("busy", &["--busy-reply-threshold", "100"]);
        let mut b = t.connect();
        let cmd = |s: &mut rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
                   args: &[&str]| {
            s.write_all(&common::resp_cmd(args)).unwrap();
            s.flush().unwrap();
            drain_tls(s, Duration::from_millis(300)).0
        };
        assert_eq!(cmd(&mut b, &["MULTI"]), b"+OK\r\n");
        assert_eq!(cmd(&mut b, &["SET", "k1", "v1"]), b"+QUEUED\r\n");
        let mut a = start_busy(&t.srv);
        assert_eq!(cmd(&mut b, &["SET", "k2", "v2"]), BUSY);
        assert_eq!(
            cmd(&mut b, &["MULTI"]),
            b"-ERR MULTI calls can not be nested\r\n"
        );
        let mut c = t.connect();
        assert_eq!(cmd(&mut c, &["EXEC"]), &b"-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"[..]);
        assert_eq!(cmd(&mut c, &["QUIT"]), b"+OK\r\n");
        kill_script(&t.srv, &mut a);
        assert_eq!(cmd(&mut b, &["SET", "k3", "v3"]), b"+QUEUED\r\n");
        assert_eq!(
            cmd(&mut b, &["EXEC"]),
            b"-EXECABORT Transaction discarded because of previous errors.\r\n"
        );
        assert_eq!(
            a.cmd(&["MGET", "k1", "k2", "k3"]),
            b"*3\r\n$-1\r\n$-1\r\n$-1\r\n"
        );
    }

    #[test]
    fn tls_unauthenticated_pipeline_during_a_busy_script() {
        let t = TlsServer::start(
            "busyauth",
            &["--busy-reply-threshold", "100", "--requirepass", "pw"],
        );
        let mut a = t.srv.conn();
        assert_eq!(a.cmd(&["AUTH", "pw"]), b"+OK\r\n");
        let mut k = t.srv.conn();
        assert_eq!(k.cmd(&["AUTH", "pw"]), b"+OK\r\n");
        a.send(&["EVAL", "while true do end", "0"]);
        t.srv
            .wait_log("Slow script detected", Duration::from_secs(10));
        let mut s = t.connect();
        s.write_all(b"PING\r\nPING\r\nAUTH pw\r\nPING\r\n").unwrap();
        s.flush().unwrap();
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while out.iter().filter(|&&b| b == b'\n').count() < 4 && Instant::now() < deadline {
            out.extend_from_slice(&drain_tls(&mut s, Duration::from_millis(50)).0);
        }
        // As redis-server answers (see unauthenticated_pipeline_during_a_busy_script_like_redis):
        // NOAUTH comes before -BUSY, and AUTH goes through a busy script.
        let mut want = b"-NOAUTH Authentication required.\r\n".repeat(2);
        want.extend_from_slice(b"+OK\r\n");
        want.extend_from_slice(BUSY);
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&want)
        );
        kill_with(&mut k, &mut a);
        // The AUTH given during the script holds afterwards.
        s.write_all(b"PING\r\n").unwrap();
        s.flush().unwrap();
        assert_eq!(
            drain_tls(&mut s, Duration::from_millis(300)).0,
            b"+PONG\r\n"
        );
    }
}

#[test]
fn unauthenticated_pipeline_during_a_busy_script_like_redis() {
    let extra = ["--busy-reply-threshold", "100", "--requirepass", "pw"];
    let mut got = Vec::new();
    for (name, srv) in common::deadbolt_and_redis(&extra) {
        let mut a = srv.conn();
        assert_eq!(a.cmd(&["AUTH", "pw"]), b"+OK\r\n", "{name}");
        let mut k = srv.conn();
        assert_eq!(k.cmd(&["AUTH", "pw"]), b"+OK\r\n", "{name}");
        a.send(&["EVAL", "while true do end", "0"]);
        srv.wait_log("Slow script detected", Duration::from_secs(10));
        let pipeline: &[u8] =
            b"PING\r\n*1\r\n$4\r\nPING\r\nAUTH pw\r\nPING\r\nMULTI\r\nGET\r\nEXEC\r\n";
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.write_all(pipeline).unwrap();
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while out.iter().filter(|&&b| b == b'\n').count() < 7 && Instant::now() < deadline {
            out.extend_from_slice(&drain(&mut s, Duration::from_millis(50)).0);
        }
        kill_with(&mut k, &mut a);
        // The AUTH given during the script holds afterwards.
        s.write_all(b"PING\r\n").unwrap();
        out.extend_from_slice(&drain(&mut s, Duration::from_millis(200)).0);
        got.push(String::from_utf8_lossy(&out).into_owned());
    }
    assert_eq!(got[0], got[1]);
    assert!(got[0].starts_with("-NOAUTH Authentication required.\r\n-NOAUTH"));
}

/// A client that never lets its socket run dry (a bulk loader streaming pipelined writes while
/// another thread reads the replies) gets one read budget per pass of the loop, like every
/// other client: a bystander's PING is answered after at most a pass. (The loop once listed
/// such a client twice per pass, so its turns doubled every pass and a PING waited seconds.)
#[test]
fn a_client_streaming_without_pause_leaves_others_their_turn() {
    let server = common::deadbolt(&[]);
    let port = server.port;
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut reader = stream.try_clone().unwrap();
    // The drainer wakes to look at `stop` even when nothing more comes (the writer may stop
    // right after the drainer read the last reply).
    reader
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (sent, stop) = (sent.clone(), stop.clone());
        let mut stream = stream;
        std::thread::spawn(move || {
            let mut chunk = Vec::new();
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                chunk.clear();
                for _ in 0..4000 {
                    // 200 k distinct keys: the stream goes on, the keyspace stays bounded.
                    let key = format!("load:{:012}", i % 200_000);
                    chunk.extend_from_slice(&common::resp_cmd(&["SET", &key, "v", "PX", "60000"]));
                    i += 1;
                }
                stream.write_all(&chunk).unwrap();
                sent.fetch_add(4000, std::sync::atomic::Ordering::Relaxed);
            }
        })
    };
    let drainer = {
        let (sent, stop) = (sent.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut got = 0u64;
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let done = stop.load(std::sync::atomic::Ordering::Relaxed);
                if done && got >= sent.load(std::sync::atomic::Ordering::Relaxed) {
                    return got;
                }
                let n = match reader.read(&mut buf) {
                    Ok(n) => n,
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        continue;
                    }
                    Err(e) => panic!("reading the streaming client's replies: {e}"),
                };
                assert!(n > 0, "the server closed the streaming client");
                got += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
            }
        })
    };
    let mut bystander = Conn::connect(port);
    let started = Instant::now();
    let (mut worst, mut pings) = (Duration::ZERO, 0);
    while started.elapsed() < Duration::from_secs(4) {
        let t = Instant::now();
        assert_eq!(bystander.cmd(&["PING"]), b"+PONG\r\n");
        worst = worst.max(t.elapsed());
        pings += 1;
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    let replies = drainer.join().unwrap();
    assert!(replies > 20_000, "the loader barely ran: {replies} replies");
    assert!(
        worst < Duration::from_millis(500),
        "a PING waited {worst:?} behind the streaming client ({pings} PINGs, {replies} SETs)"
    );
}

/// Replies wait for the end of the pass that produced them, as Redis writes its clients in
/// `beforeSleep`; a script in the same pass that turns busy must not keep them: its hook
/// writes them before it answers anyone -BUSY, as Redis's `processEventsWhileBlocked` does.
/// A's PING and B's endless script arrive while DEBUG SLEEP holds the loop, so one pass meets
/// both, A first; A's PONG must come within the busy threshold, not when the script ends.
#[test]
fn a_reply_held_for_the_end_of_its_pass_leaves_when_a_script_in_it_turns_busy() {
    for (name, srv) in common::deadbolt_and_redis(&[
        "--busy-reply-threshold",
        "100",
        "--enable-debug-command",
        "local",
    ]) {
        let mut sleeper = srv.conn();
        let mut a = srv.conn();
        let mut b = srv.conn();
        sleeper.send(&["DEBUG", "SLEEP", "0.5"]);
        a.send(&["PING"]);
        b.send(&["EVAL", "while true do end", "0"]);
        assert_eq!(sleeper.read_reply(), b"+OK\r\n", "{name}");
        let slept = Instant::now();
        // Without the hook's write A waits for the script's end: never, until SCRIPT KILL.
        let pong = a.try_read_reply(Duration::from_secs(3));
        assert_eq!(pong.as_deref(), Some(&b"+PONG\r\n"[..]), "{name}");
        assert!(
            slept.elapsed() < Duration::from_secs(2),
            "{name}: PONG {:?} after the sleep",
            slept.elapsed()
        );
        let mut killer = srv.conn();
        assert_eq!(killer.cmd(&["SCRIPT", "KILL"]), b"+OK\r\n", "{name}");
        let killed = String::from_utf8_lossy(&b.read_reply()).into_owned();
        assert!(
            killed.starts_with("-ERR Script killed by user with SCRIPT KILL"),
            "{name}: {killed:?}"
        );
        assert_eq!(a.cmd(&["PING"]), b"+PONG\r\n", "{name}");
    }
}
