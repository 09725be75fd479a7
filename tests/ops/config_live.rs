//! CONFIG SET takes effect: one row per name CONFIG SET accepts (aliases included), each probing
//! the running server for the change through behaviour, never through CONFIG GET (expiry speed
//! for hz, the kernel's keepalive timer for tcp-keepalive, a refused client for maxclients, a
//! refused start for aof-load-truncated...), against redis-server where Redis has the directive.
//! The list of names comes from the server itself (CONFIG GET *, then CONFIG SET of each to its
//! own value): a directive it lets change without a row fails
//! `every_name_the_server_lets_change_has_a_row`.

use crate::common;

use common::{Conn, Server};
use deadbolt::config::{COMPAT, DIRECTIVES};
use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::time::{Duration, Instant};

type Probe = fn();

/// (directive, a value CONFIG SET must accept, the probe that watches it take effect).
const ROWS: &[(&str, &str, Probe)] = &[
    ("protected-mode", "no", protected_mode),
    ("tcp-keepalive", "37", tcp_keepalive),
    ("timeout", "100", timeout),
    ("maxclients", "50", maxclients),
    ("proto-max-bulk-len", "1mb", proto_max_bulk_len),
    (
        "client-query-buffer-limit",
        "1mb",
        client_query_buffer_limit,
    ),
    ("loglevel", "debug", loglevel),
    ("requirepass", "pw", requirepass),
    ("acllog-max-len", "1", acllog_max_len),
    ("acl-pubsub-default", "allchannels", acl_pubsub_default),
    ("hz", "1000", hz),
    ("busy-poll-us", "1000000", busy_poll_us),
    ("busy-reply-threshold", "100", busy_reply_threshold),
    ("lua-time-limit", "100", lua_time_limit),
    ("appendonly", "yes", appendonly),
    ("appendfsync", "always", appendfsync),
    ("auto-aof-rewrite-percentage", "0", auto_aof_rewrite),
    ("auto-aof-rewrite-min-size", "1kb", auto_aof_rewrite),
    ("aof-load-truncated", "no", aof_load_truncated),
    ("save", "", save),
    (
        "client-output-buffer-limit",
        "pubsub 256kb 0 0",
        client_output_buffer_limit,
    ),
    ("notify-keyspace-events", "E$", notify_keyspace_events),
    ("lua-memory-limit", "2mb", lua_memory_limit),
    ("maxmemory", "1", maxmemory),
    ("maxmemory-policy", "noeviction", maxmemory_policy),
    ("slowlog-log-slower-than", "0", slowlog),
    ("slowlog-max-len", "2", slowlog),
    ("lock-late-log-max-len", "1", lock_late_log_max_len),
    ("lock-prefix-delimiters", ":/", lock_prefix_delimiters),
    ("masterauth", "pw", masterauth),
    ("bind", "127.0.0.1", bind),
    // Last: port 0 closes the plain listener (the test's connections stay open).
    ("port", "0", port),
];

/// The names CONFIG SET accepts, asked of the server: every name CONFIG GET * lists, set to
/// the value it shows. Immutable and protected ones are refused with Redis's reasons.
fn settable_names() -> Vec<String> {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    let all = bulk_array(&c.cmd(&["CONFIG", "GET", "*"]));
    assert!(all.len() >= 2 && all.len() % 2 == 0, "{all:?}");
    let mut settable = Vec::new();
    for pair in all.chunks(2) {
        let (name, value) = (&pair[0], &pair[1]);
        let reply = c.cmd_str(&["CONFIG", "SET", name, value]);
        let refused = |why: &str| {
            reply
                == format!(
                    "-ERR CONFIG SET failed (possibly related to argument '{name}') - {why}\r\n"
                )
        };
        if reply == "+OK\r\n" {
            settable.push(name.clone());
        } else {
            assert!(
                refused("can't set immutable config") || refused("can't set protected config"),
                "CONFIG SET {name} to its own value {value:?}: {reply}"
            );
        }
    }
    settable
}

/// An array of bulk strings (CONFIG GET's RESP2 reply).
fn bulk_array(reply: &[u8]) -> Vec<String> {
    let text = String::from_utf8(reply.to_vec()).unwrap();
    let mut lines = text.split("\r\n");
    let n: usize = lines
        .next()
        .and_then(|l| l.strip_prefix('*'))
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("not an array: {text}"));
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len: usize = lines
            .next()
            .and_then(|l| l.strip_prefix('$'))
            .and_then(|l| l.parse().ok())
            .unwrap_or_else(|| panic!("not a bulk string: {text}"));
        let item = lines.next().unwrap_or_default().to_string();
        assert_eq!(item.len(), len, "values here hold no CR LF: {text}");
        out.push(item);
    }
    out
}

#[test]
fn every_name_the_server_lets_change_has_a_row() {
    let settable = settable_names();
    // Redis's directives kept for compatibility have no effect to probe: their notice is
    // tested in tests/ops/redis_conf.rs.
    let compat = |name: &str| {
        COMPAT
            .iter()
            .any(|d| d.name == name || d.aliases.contains(&name))
    };
    for name in settable.iter().filter(|n| !compat(n)) {
        let rows = ROWS.iter().filter(|r| r.0 == name).count();
        assert_eq!(
            rows, 1,
            "CONFIG SET accepts {name}: add one row to ROWS with a probe of its effect"
        );
    }
    for (name, _, _) in ROWS {
        assert!(
            settable.iter().any(|n| n == name),
            "{name} has a row but CONFIG SET refuses it"
        );
    }
    // The table agrees: every settable directive and alias is listed, nothing else.
    let from_table: usize = DIRECTIVES
        .iter()
        .chain(COMPAT)
        // Hidden directives (key-load-delay …) are not listed by CONFIG GET *.
        .filter(|d| d.mutable() && !deadbolt::config::compat::HIDDEN.contains(&d.name))
        .map(|d| 1 + d.aliases.len())
        .sum();
    assert_eq!(settable.len(), from_table, "{settable:?}");
}

#[test]
fn every_change_takes_effect() {
    let mut failed = Vec::new();
    let mut probed: Vec<usize> = Vec::new();
    for (name, _, probe) in ROWS {
        // Rows sharing a probe run it once.
        let key = *probe as usize;
        if probed.contains(&key) {
            continue;
        }
        probed.push(key);
        let started = Instant::now();
        if std::panic::catch_unwind(probe).is_err() {
            failed.push(*name);
        }
        eprintln!("{name}: {:?}", started.elapsed());
    }
    assert!(failed.is_empty(), "no effect seen for: {failed:?}");
}

/// CONFIG SET of each row's value answers as Redis does, and CONFIG GET then shows what
/// Redis shows (directives Redis has).
#[test]
fn set_then_get_matches_redis() {
    let dir = tempdir("getset");
    let dir_s = dir.to_str().unwrap();
    let ours = common::deadbolt(&["--dir", dir_s]);
    let redis = common::redis_server(&["--dir", dir_s]);
    let (mut a, mut b) = (ours.conn(), redis.conn());
    for (name, value, _) in ROWS {
        let theirs = b.cmd(&["CONFIG", "GET", name]);
        if theirs == b"*0\r\n" {
            continue; // ours only
        }
        let set = ["CONFIG", "SET", name, value];
        assert_eq!(a.cmd_str(&set), b.cmd_str(&set), "{name} {value}");
        let get = ["CONFIG", "GET", name];
        assert_eq!(a.cmd_str(&get), b.cmd_str(&get), "{name}");
        if *name == "requirepass" {
            for c in [&mut a, &mut b] {
                assert_eq!(c.cmd(&["AUTH", value]), b"+OK\r\n");
            }
        }
    }
    // hz is clamped to 1..500 and INFO shows both fields as Redis does.
    for v in ["0", "1000", "100"] {
        let set = ["CONFIG", "SET", "hz", v];
        assert_eq!(a.cmd_str(&set), b.cmd_str(&set));
        assert_eq!(hz_fields(&mut a), hz_fields(&mut b), "hz {v}");
    }
    // Refusals: protected and immutable directives, values, duplicates, precedence.
    for args in [
        &["dir", "/tmp"][..],
        &["databases", "2"],
        &["databases", "2", "nosuch", "1"],
        &["nosuch", "1", "databases", "2"],
        &["appendfilename", "x.aof"],
        &["tcp-backlog", "10"],
        &["HZ", "abc"],
        &["lua-time-limit", "abc"],
        &["hz", "10", "HZ", "20"],
        &["hz", "abc", "timeout", "x"],
        &["maxclients", "0"],
        &["tcp-keepalive", "-1"],
        &["client-output-buffer-limit", "x"],
        &["appendonly", "maybe"],
        &["maxclients", "100000000"],
        // One refused value per kind of parser the settable rows use.
        &["notify-keyspace-events", "Kq"],
        &["proto-max-bulk-len", "1000"],
        &["client-query-buffer-limit", "1000"],
        &["slowlog-max-len", "-1"],
        &["slowlog-log-slower-than", "-2"],
        &["maxmemory", "-1"],
        &["loglevel", "bogus"],
        &["appendfsync", "sometimes"],
        &["maxmemory-policy", "bogus"],
        &["protected-mode", "maybe"],
        &["auto-aof-rewrite-min-size", "x"],
        &["timeout", "2147483648"],
        &["client-output-buffer-limit", "master 1 2 3"],
        &["client-output-buffer-limit", "normal 1 2 -3"],
    ] {
        let mut cmd = vec!["CONFIG", "SET"];
        cmd.extend_from_slice(args);
        assert_eq!(a.cmd_str(&cmd), b.cmd_str(&cmd), "{args:?}");
    }
    // A refused change changed nothing.
    for name in ["hz", "timeout", "maxclients", "lua-time-limit"] {
        let get = ["CONFIG", "GET", name];
        assert_eq!(a.cmd_str(&get), b.cmd_str(&get), "{name}");
    }
    assert_eq!(
        info_field(&mut a, "clients", "maxclients"),
        info_field(&mut b, "clients", "maxclients")
    );
    drop((ours, redis));
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- helpers ---------------------------------------------------------------------------------

fn tempdir(tag: &str) -> std::path::PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("deadbolt-live-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn ok(c: &mut Conn, args: &[&str]) {
    assert_eq!(c.cmd_str(args), "+OK\r\n", "{args:?}");
}

fn set(c: &mut Conn, name: &str, value: &str) {
    ok(c, &["CONFIG", "SET", name, value]);
}

/// One `field:value` line of INFO.
fn info_field(c: &mut Conn, section: &str, field: &str) -> String {
    let info = c.cmd_str(&["INFO", section]);
    info.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("INFO {section} has no {field}: {info}"))
        .to_string()
}

fn hz_fields(c: &mut Conn) -> (String, String) {
    (
        info_field(c, "server", "hz"),
        info_field(c, "server", "configured_hz"),
    )
}

fn expired_keys(c: &mut Conn) -> u64 {
    info_field(c, "stats", "expired_keys").parse().unwrap()
}

/// Polls `f` until it holds; panics with `what` after `limit`.
fn wait_until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Sets `n` keys that expire at once and are never touched again: only the cron's active
/// expiry removes them.
fn set_expiring(c: &mut Conn, tag: &str, n: usize) {
    let mut req = Vec::new();
    for i in 0..n {
        req.extend(common::resp_cmd(&[
            "SET",
            &format!("{tag}{i}"),
            "v",
            "PX",
            "1",
        ]));
    }
    c.send_raw(&req);
    for _ in 0..n {
        assert_eq!(c.read_reply(), b"+OK\r\n");
    }
}

/// A cron round ran since the call: a key that expired meanwhile was removed by it.
fn wait_cron_round(c: &mut Conn) {
    let before = expired_keys(c);
    set_expiring(c, "cron-witness:", 1);
    wait_until(Duration::from_secs(5), "a cron round", || {
        expired_keys(c) > before
    });
}

// ---- probes ----------------------------------------------------------------------------------

fn hz() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    set(&mut c, "hz", "1");
    // A round removes every expired key (well within its budget): when these go, a round has
    // just run and the next is a second away.
    set_expiring(&mut c, "a", 100);
    wait_until(Duration::from_secs(3), "a round at hz 1", || {
        expired_keys(&mut c) == 100
    });
    set_expiring(&mut c, "b", 100);
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_millis(300) {
        assert_eq!(
            expired_keys(&mut c),
            100,
            "a cron round ran within 300 ms at hz 1"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Raising hz re-arms the timer: the keys go now, not when the old period ends (~700 ms).
    let raised = Instant::now();
    set(&mut c, "hz", "500");
    wait_until(
        Duration::from_millis(450),
        "a round right after hz 500",
        || expired_keys(&mut c) == 200,
    );
    eprintln!("hz 500: round {:?} after CONFIG SET", raised.elapsed());
    assert_eq!(hz_fields(&mut c), ("500".into(), "500".into()));
}

/// The keepalive timer the kernel runs for the server side of the connection from
/// `client_port`, in seconds (None: no keepalive timer).
fn keepalive_timer(server_port: u16, client_port: u16) -> Option<u64> {
    let out = std::process::Command::new("ss")
        .args([
            "-tnoH",
            "state",
            "established",
            &format!("( sport = :{server_port} and dport = :{client_port} )"),
        ])
        .output()
        .expect("ss (iproute2) is needed to read the keepalive timer");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!text.trim().is_empty(), "ss found no such connection");
    let timer = text.split("timer:(keepalive,").nth(1)?;
    let spec = timer.split(',').next()?;
    // "36sec", "4min59sec", "1min"
    let mut secs = 0;
    let mut num = String::new();
    let mut rest = spec;
    while !rest.is_empty() {
        let c = rest.chars().next()?;
        if c.is_ascii_digit() {
            num.push(c);
            rest = &rest[1..];
        } else if let Some(r) = rest.strip_prefix("min") {
            secs += num.parse::<u64>().ok()? * 60;
            num.clear();
            rest = r;
        } else if let Some(r) = rest.strip_prefix("sec") {
            secs += num.parse::<u64>().ok()?;
            num.clear();
            rest = r;
        } else if let Some(r) = rest.strip_prefix("ms") {
            num.clear();
            rest = r;
        } else {
            return None;
        }
    }
    Some(secs)
}

fn tcp_keepalive() {
    let s = common::deadbolt(&[]);
    let mut old = s.conn();
    assert_eq!(old.cmd(&["PING"]), b"+PONG\r\n");
    set(&mut old, "tcp-keepalive", "37");
    let mut new = s.conn();
    assert_eq!(new.cmd(&["PING"]), b"+PONG\r\n");
    let port = |c: &Conn| c.stream.local_addr().unwrap().port();
    let mut t = None;
    wait_until(
        Duration::from_secs(3),
        "the new socket's keepalive timer",
        || {
            t = keepalive_timer(s.port, port(&new));
            t.is_some()
        },
    );
    let t = t.unwrap_or_default();
    assert!((30..=37).contains(&t), "new socket: keepalive timer {t}s");
    // Sockets accepted before keep theirs, as in Redis.
    // (Right after traffic the kernel may show another timer, the ACK's, for a moment.)
    let mut t = None;
    wait_until(
        Duration::from_secs(3),
        "the old socket's keepalive timer",
        || {
            t = keepalive_timer(s.port, port(&old));
            t.is_some()
        },
    );
    let t = t.unwrap_or_default();
    assert!(t > 200, "old socket: keepalive timer {t}s");
    // TLS connections get it at accept too (before their handshake).
    let tls = tls_port_server();
    let mut c = tls.0.conn();
    set(&mut c, "tcp-keepalive", "37");
    let raw = TcpStream::connect(("127.0.0.1", tls.1)).unwrap();
    let raw_port = raw.local_addr().unwrap().port();
    let mut t = None;
    wait_until(
        Duration::from_secs(3),
        "the TLS socket's keepalive timer",
        || {
            t = keepalive_timer(tls.1, raw_port);
            t.is_some()
        },
    );
    let t = t.unwrap_or_default();
    assert!(
        (30..=37).contains(&t),
        "new TLS socket: keepalive timer {t}s"
    );
    drop(raw);
    let (tls, _, dir) = tls;
    drop(tls);
    let _ = std::fs::remove_dir_all(dir);

    set(&mut old, "tcp-keepalive", "0");
    let mut off = s.conn();
    assert_eq!(off.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(keepalive_timer(s.port, port(&off)), None);
}

/// A deadbolt with a TLS port (self-signed certificate, no client certificates) and that port.
fn tls_port_server() -> (Server, u16, std::path::PathBuf) {
    let dir = tempdir("tls");
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    std::fs::write(dir.join("server.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), cert.key_pair.serialize_pem()).unwrap();
    let port = common::free_port();
    let port_s = port.to_string();
    let cert_file = dir.join("server.pem");
    let key_file = dir.join("server.key");
    let s = common::deadbolt(&[
        "--tls-port",
        &port_s,
        "--tls-cert-file",
        cert_file.to_str().unwrap(),
        "--tls-key-file",
        key_file.to_str().unwrap(),
        "--tls-auth-clients",
        "no",
    ]);
    s.wait_log("Ready to accept connections tls", Duration::from_secs(5));
    (s, port, dir)
}

/// Whether a new connection to `addr` answers PING (false: refused).
fn pings(addr: (&str, u16)) -> bool {
    match TcpStream::connect(addr) {
        Err(_) => false,
        Ok(mut t) => {
            t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            t.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
            let mut buf = [0u8; 64];
            let n = t.read(&mut buf).unwrap_or(0);
            &buf[..n] == b"+PONG\r\n"
        }
    }
}

/// The plain listener moves to the new port at once; a port in use is refused with Redis's
/// error and the old port kept.
fn port() {
    for (who, s) in common::deadbolt_and_redis(&[]) {
        let mut c = s.conn();
        let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let busy_port = busy.local_addr().unwrap().port().to_string();
        assert_eq!(
            c.cmd_str(&["CONFIG", "SET", "port", &busy_port]),
            "-ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.\r\n",
            "{who}"
        );
        assert!(pings(("127.0.0.1", s.port)), "{who}: old port lost");
        let new_port = common::free_port();
        set(&mut c, "port", &new_port.to_string());
        assert!(pings(("127.0.0.1", new_port)), "{who}: new port");
        assert!(!pings(("127.0.0.1", s.port)), "{who}: old port still open");
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n", "{who}");
    }
}

/// The listener moves to the new addresses at once.
fn bind() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    set(&mut c, "bind", "127.0.0.2");
    assert!(pings(("127.0.0.2", s.port)), "new address");
    assert!(!pings(("127.0.0.1", s.port)), "old address still open");
    set(&mut c, "bind", "127.0.0.1 -::1");
    assert!(pings(("127.0.0.1", s.port)), "back");
    assert_eq!(
        c.cmd_str(&["CONFIG", "SET", "bind", "192.0.2.1"]),
        "-ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.\r\n"
    );
    assert!(pings(("127.0.0.1", s.port)), "old address restored");
}

fn timeout() {
    let s = common::deadbolt(&[]);
    let mut idle = s.conn();
    assert_eq!(idle.cmd(&["PING"]), b"+PONG\r\n");
    let mut c = s.conn();
    set(&mut c, "timeout", "1");
    // An open client idle for more than a second is closed by the cron.
    assert!(idle.is_closed(Duration::from_secs(5)), "idle client kept");
}

fn maxclients() {
    for (who, s) in common::deadbolt_and_redis(&[]) {
        let mut c = s.conn();
        set(&mut c, "maxclients", "2");
        let mut second = s.conn();
        assert_eq!(second.cmd(&["PING"]), b"+PONG\r\n", "{who}");
        let mut third = s.conn();
        assert_eq!(
            third.read_to_close(),
            b"-ERR max number of clients reached\r\n",
            "{who}"
        );
        // Lowering it below the clients connected keeps them.
        set(&mut c, "maxclients", "1");
        assert_eq!(second.cmd(&["PING"]), b"+PONG\r\n", "{who}");
        set(&mut c, "maxclients", "10");
        assert_eq!(s.conn().cmd(&["PING"]), b"+PONG\r\n", "{who}");
        // noeviction is the only policy deadbolt keeps; setting it keeps writes refused over
        // maxmemory (see `maxmemory`).
    }
}

fn proto_max_bulk_len() {
    let mut got = Vec::new();
    for (_, s) in common::deadbolt_and_redis(&[]) {
        let mut open = s.conn();
        assert_eq!(open.cmd(&["PING"]), b"+PONG\r\n");
        set(&mut s.conn(), "proto-max-bulk-len", "1mb");
        open.send_raw(b"*2\r\n$4\r\nECHO\r\n$2000000\r\n");
        got.push(open.read_to_close());
    }
    assert_eq!(got[0], b"-ERR Protocol error: invalid bulk length\r\n");
    assert_eq!(got[0], got[1]);
}

fn client_query_buffer_limit() {
    for (who, s) in common::deadbolt_and_redis(&[]) {
        let mut open = s.conn();
        assert_eq!(open.cmd(&["PING"]), b"+PONG\r\n");
        let mut c = s.conn();
        set(&mut c, "client-query-buffer-limit", "1mb");
        // A request still arriving, already over the limit: the client is closed.
        open.send_raw(b"*2\r\n$4\r\nECHO\r\n$3000000\r\n");
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..24 {
            if open.stream.write_all(&chunk).is_err() {
                break;
            }
        }
        assert!(open.is_closed(Duration::from_secs(5)), "{who}: kept");
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    }
}

fn loglevel() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    let protocol_errors = || {
        s.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("Protocol error"))
            .count()
    };
    let mut bad = s.conn();
    bad.send_raw(b"*1\r\n$x\r\n");
    assert!(bad.is_closed(Duration::from_secs(5)));
    set(&mut c, "loglevel", "debug");
    let mut bad = s.conn();
    bad.send_raw(b"*1\r\n$x\r\n");
    assert!(bad.is_closed(Duration::from_secs(5)));
    s.wait_log("Protocol error", Duration::from_secs(5));
    assert_eq!(protocol_errors(), 1, "logged at notice: {:?}", s.log);
    set(&mut c, "loglevel", "notice");
}

fn requirepass() {
    let mut got = Vec::new();
    for (_, s) in common::deadbolt_and_redis(&[]) {
        let mut old = s.conn();
        set(&mut old, "requirepass", "pw");
        let mut new = s.conn();
        let mut replies = vec![new.cmd(&["PING"]), new.cmd(&["AUTH", "pw"])];
        replies.push(new.cmd(&["PING"]));
        // A client connected before stays authenticated, as in Redis.
        replies.push(old.cmd(&["PING"]));
        got.push(replies);
    }
    assert_eq!(got[0][0], b"-NOAUTH Authentication required.\r\n");
    assert_eq!(got[0], got[1]);
}

/// The log keeps the new number of entries from the next denial on, as in Redis.
fn acllog_max_len() {
    let mut got = Vec::new();
    for (_, s) in common::deadbolt_and_redis(&[]) {
        let mut c = s.conn();
        for user in ["u1", "u2", "u3"] {
            c.cmd(&["AUTH", user, "x"]);
        }
        set(&mut c, "acllog-max-len", "1");
        let entries = |c: &mut Conn| {
            let r = c.cmd_str(&["ACL", "LOG"]);
            r.lines().next().unwrap_or_default().to_string()
        };
        let before = entries(&mut c);
        c.cmd(&["AUTH", "u4", "x"]);
        let after = entries(&mut c);
        got.push((before, after));
    }
    assert_eq!(got[0], got[1]);
    assert_eq!(got[0], ("*3".to_string(), "*1".to_string()));
}

/// LOCKS LATE keeps at most this many late releases (ours: no Redis to compare with).
fn lock_late_log_max_len() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    set(&mut c, "lock-late-log-max-len", "1");
    let release = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/lua/redis-py/lua_release_script.lua"
    ))
    .unwrap();
    for key in ["lock:a", "lock:b"] {
        assert_eq!(c.cmd(&["EVAL", &release, "1", key, "t"]), b":0\r\n");
    }
    let late = c.cmd_str(&["LOCKS", "LATE", "-1"]);
    assert!(late.starts_with("*1\r\n"), "{late}");
    assert!(late.contains("lock:b"), "{late}");
}

/// Lock keys seen after the change are grouped by the new delimiters (the cron applies it).
fn lock_prefix_delimiters() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    set(&mut c, "lock-prefix-delimiters", ":/");
    wait_until(Duration::from_secs(5), "the new prefix rule", || {
        let key = format!("svc/orders/{}", fastrand::u32(..));
        c.cmd(&["SET", &key, "t", "NX", "PX", "1000"]);
        c.cmd_str(&["INFO", "locks"]).contains("prefix=svc/orders,")
    });
}

/// The next connection to a master proves the new password: a replica of a master with
/// `requirepass` gets its link up (on redis-server too).
fn masterauth() {
    let master = common::redis_server(&["--requirepass", "pw"]);
    for (who, s) in common::deadbolt_and_redis(&[]) {
        let mut c = s.conn();
        set(&mut c, "masterauth", "pw");
        ok(
            &mut c,
            &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
        );
        wait_until(Duration::from_secs(10), who, || {
            c.cmd_str(&["INFO", "replication"])
                .contains("master_link_status:up")
        });
        ok(&mut c, &["REPLICAOF", "NO", "ONE"]);
    }
}

/// Users created (or reset) afterwards may use every channel; existing ones keep theirs.
fn acl_pubsub_default() {
    let mut got = Vec::new();
    for (_, s) in common::deadbolt_and_redis(&[]) {
        let mut c = s.conn();
        ok(&mut c, &["ACL", "SETUSER", "old", "on", "nopass", "+@all"]);
        set(&mut c, "acl-pubsub-default", "allchannels");
        ok(&mut c, &["ACL", "SETUSER", "new", "on", "nopass", "+@all"]);
        let mut replies = Vec::new();
        for user in ["old", "new"] {
            let mut u = s.conn();
            u.cmd(&["AUTH", user, "x"]);
            replies.push(u.cmd(&["PUBLISH", "ch", "m"]));
        }
        got.push(replies);
    }
    assert_eq!(got[0][1], b":0\r\n");
    assert_eq!(got[0], got[1]);
}

fn own_address() -> Option<IpAddr> {
    let out = std::process::Command::new("hostname")
        .arg("-I")
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|w| w.parse::<IpAddr>().ok())
        .find(|a| a.is_ipv4() && !a.is_loopback())
}

fn protected_mode() {
    let ip = own_address()
        .expect("protected-mode needs a non-loopback IPv4 address of this machine (hostname -I)");
    let ip_s = ip.to_string();
    let s = common::deadbolt(&["--bind", "127.0.0.1", &ip_s]);
    let needle = format!("Listening on {ip}:");
    s.wait_log(&needle, Duration::from_secs(5));
    let port: u16 = {
        let log = s.log.lock().unwrap();
        let line = log.iter().find(|l| l.contains(&needle)).unwrap();
        line.split(&needle).nth(1).unwrap().trim().parse().unwrap()
    };
    let remote_ping = || {
        let mut t = TcpStream::connect((ip, port)).unwrap();
        t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        t.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        let mut buf = [0u8; 512];
        let n = t.read(&mut buf).unwrap_or(0);
        buf[..n].to_vec()
    };
    assert!(remote_ping().starts_with(b"-DENIED"));
    let mut c = s.conn();
    set(&mut c, "protected-mode", "no");
    assert_eq!(remote_ping(), b"+PONG\r\n");
}

/// Voluntary context switches of the executor thread so far (it sleeps in epoll_wait).
fn executor_sleeps(pid: u32) -> u64 {
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim() == "executor" {
            let status = std::fs::read_to_string(path.join("status")).unwrap();
            return status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
        }
    }
    panic!("no executor thread in /proc/{pid}/task");
}

fn busy_poll_us() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    // Requests 300 µs apart, as a client doing a little work between them: at 0 the loop
    // falls asleep in each gap; polling for up to 1 s it stays up through them.
    let round_trips = |c: &mut Conn, n: usize| {
        for _ in 0..n {
            assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
            let gap = Instant::now();
            while gap.elapsed() < Duration::from_micros(300) {
                std::hint::spin_loop();
            }
        }
    };
    round_trips(&mut c, 50);
    let before = executor_sleeps(s.pid());
    round_trips(&mut c, 300);
    let sleeping = executor_sleeps(s.pid()) - before;
    set(&mut c, "busy-poll-us", "1000000");
    // The spin starts once the recent gaps show it pays.
    round_trips(&mut c, 200);
    let before = executor_sleeps(s.pid());
    round_trips(&mut c, 300);
    let spinning = executor_sleeps(s.pid()) - before;
    set(&mut c, "busy-poll-us", "0");
    eprintln!("busy-poll-us: executor slept {sleeping} times at 0, {spinning} polling");
    assert!(
        sleeping >= 150 && spinning * 2 < sleeping,
        "executor slept {sleeping} times for 300 requests at 0, {spinning} while polling"
    );
}

/// A script that runs for about 400 ms.
const SLOW_SCRIPT: &str = "local t = redis.call('TIME') local s = t[1] * 1000000 + t[2] \
     while true do local n = redis.call('TIME') \
     if n[1] * 1000000 + n[2] - s > 400000 then break end end return 1";

fn busy_reply_threshold() {
    busy_reply_after("busy-reply-threshold");
}

/// Redis 7's old name for busy-reply-threshold, still accepted by both.
fn lua_time_limit() {
    busy_reply_after("lua-time-limit");
}

fn busy_reply_after(name: &str) {
    let mut got = Vec::new();
    for (_, s) in common::deadbolt_and_redis(&[]) {
        let mut c = s.conn();
        let mut other = s.conn();
        let mut replies = Vec::new();
        // Under the default threshold a request waits for the script and is answered.
        c.send(&["EVAL", SLOW_SCRIPT, "0"]);
        replies.push(other.cmd(&["PING"]));
        assert_eq!(c.read_reply(), b":1\r\n");
        set(&mut c, name, "100");
        c.send(&["EVAL", SLOW_SCRIPT, "0"]);
        // Past 100 ms of the script, requests get -BUSY; a PING answered before the script
        // started is retried, one answered after it ended means the change did nothing.
        loop {
            let r = other.cmd(&["PING"]);
            if r != b"+PONG\r\n" {
                replies.push(r);
                break;
            }
            assert!(
                c.try_read_reply(Duration::ZERO).is_none(),
                "the script ended without a -BUSY reply"
            );
        }
        assert_eq!(c.read_reply(), b":1\r\n");
        got.push(replies);
    }
    assert_eq!(got[0][0], b"+PONG\r\n");
    assert_eq!(
        got[0][1],
        b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert_eq!(got[0], got[1]);
}

fn aof_files(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join("appendonlydir"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn appendonly() {
    let dir = tempdir("aof-on");
    let s = common::deadbolt(&["--dir", dir.to_str().unwrap()]);
    let mut c = s.conn();
    ok(&mut c, &["SET", "before", "1"]);
    set(&mut c, "appendonly", "yes");
    assert_eq!(info_field(&mut c, "persistence", "aof_enabled"), "1");
    wait_until(Duration::from_secs(10), "the first rewrite", || {
        info_field(&mut c, "persistence", "aof_rewrite_in_progress") == "0"
    });
    ok(&mut c, &["SET", "after", "2"]);
    let files = aof_files(&dir);
    assert!(files.iter().any(|f| f.ends_with(".manifest")), "{files:?}");
    let logged: Vec<u8> = files
        .iter()
        .flat_map(|f| std::fs::read(dir.join("appendonlydir").join(f)).unwrap_or_default())
        .collect();
    let has = |k: &[u8]| logged.windows(k.len()).any(|w| w == k);
    assert!(has(b"before") && has(b"after"), "the log holds the dataset");
    set(&mut c, "appendonly", "no");
    assert_eq!(info_field(&mut c, "persistence", "aof_enabled"), "0");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);

    // When the log can't be opened, CONFIG SET fails as Redis's and nothing changes.
    let mut got = Vec::new();
    for who in ["deadbolt", "redis"] {
        let dir = tempdir("aof-bad");
        std::fs::write(dir.join("appendonlydir"), b"not a directory").unwrap();
        let args = ["--dir", dir.to_str().unwrap()];
        let s: Server = if who == "deadbolt" {
            common::deadbolt(&args)
        } else {
            common::redis_server(&args)
        };
        let mut c = s.conn();
        got.push((
            c.cmd_str(&["CONFIG", "SET", "appendonly", "yes"]),
            c.cmd_str(&["CONFIG", "GET", "appendonly"]),
            info_field(&mut c, "persistence", "aof_enabled"),
        ));
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(
        got[0].0,
        "-ERR CONFIG SET failed (possibly related to argument 'appendonly') - Unable to turn on AOF. Check server logs.\r\n"
    );
    assert_eq!(got[0], got[1]);
}

/// fsync/fdatasync calls of `pid`, counted from strace's trace (None where strace can't
/// attach to it).
struct Fsyncs {
    child: std::process::Child,
    count: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Fsyncs {
    fn attach(pid: u32) -> Option<Fsyncs> {
        use std::io::BufRead;
        let mut child = std::process::Command::new("strace")
            .args(["-f", "-e", "trace=fsync,fdatasync", "-p", &pid.to_string()])
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .ok()?;
        let err = child.stderr.take()?;
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        let counter = count.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                if line.contains("attached") {
                    let _ = tx.send(());
                }
                if line.contains("fsync(") || line.contains("fdatasync(") {
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
        });
        let mut trace = Fsyncs { child, count };
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(()) => Some(trace),
            Err(_) => {
                let _ = trace.child.kill();
                None
            }
        }
    }

    fn count(&self) -> usize {
        self.count.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Fsyncs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn appendfsync() {
    let dir = tempdir("fsync");
    let s = common::deadbolt(&[
        "--dir",
        dir.to_str().unwrap(),
        "--appendonly",
        "yes",
        "--appendfsync",
        "no",
    ]);
    let mut c = s.conn();
    ok(&mut c, &["SET", "warm", "1"]);
    // No INFO field counts fsyncs; the system calls are the observable effect, so a machine
    // where strace can't attach fails this row rather than skipping it.
    let trace = Fsyncs::attach(s.pid())
        .expect("appendfsync: strace (ptrace) is needed to count the server's fsyncs");
    for i in 0..10 {
        ok(&mut c, &["SET", &format!("k{i}"), "v"]);
    }
    set(&mut c, "appendfsync", "always");
    // The running log fsyncs each write before its reply.
    for i in 0..10 {
        ok(&mut c, &["SET", &format!("k{i}"), "v"]);
    }
    wait_until(Duration::from_secs(5), "an fsync per write", || {
        trace.count() >= 10
    });
    let at_always = trace.count();
    assert!(at_always <= 12, "{at_always} fsyncs at appendfsync no?");
    drop(trace);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

fn auto_aof_rewrite() {
    let dir = tempdir("autorw");
    let s = common::deadbolt(&["--dir", dir.to_str().unwrap(), "--appendonly", "yes"]);
    let mut c = s.conn();
    let rewrites = |c: &mut Conn| -> u64 {
        info_field(c, "persistence", "aof_rewrites")
            .parse()
            .unwrap()
    };
    let big = "x".repeat(100_000);
    ok(&mut c, &["SET", "a", &big]);
    wait_cron_round(&mut c);
    assert_eq!(rewrites(&mut c), 0, "under the default 64mb minimum");
    set(&mut c, "auto-aof-rewrite-min-size", "1kb");
    wait_until(Duration::from_secs(5), "a rewrite over min-size", || {
        rewrites(&mut c) == 1 && info_field(&mut c, "persistence", "aof_rewrite_in_progress") == "0"
    });
    set(&mut c, "auto-aof-rewrite-percentage", "0");
    for k in ["b", "c", "d"] {
        ok(&mut c, &["SET", k, &big]);
    }
    wait_cron_round(&mut c);
    assert_eq!(rewrites(&mut c), 1, "percentage 0 turns it off");
    set(&mut c, "auto-aof-rewrite-percentage", "100");
    wait_until(Duration::from_secs(5), "a rewrite at 100% growth", || {
        rewrites(&mut c) == 2
    });
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Only read when the log is loaded, at start-up: CONFIG SET says so in the log, and CONFIG
/// REWRITE carries the value to the next start, which then refuses a torn log.
fn aof_load_truncated() {
    let dir = tempdir("truncated");
    let conf = dir.join("deadbolt.conf");
    std::fs::write(
        &conf,
        format!(
            "dir {}\nappendonly yes\nappendfsync always\n",
            dir.display()
        ),
    )
    .unwrap();
    let mut s = common::deadbolt_with_file(&conf, &[]);
    let mut c = s.conn();
    set(&mut c, "aof-load-truncated", "no");
    s.wait_log(
        "CONFIG SET aof-load-truncated: the new value applies when the append-only file is next loaded",
        Duration::from_secs(5),
    );
    ok(&mut c, &["CONFIG", "REWRITE"]);
    ok(&mut c, &["SET", "kept", "v"]);
    s.kill9();
    let incr = aof_files(&dir)
        .into_iter()
        .find(|f| f.ends_with(".incr.aof"))
        .expect("an increment file");
    let path = dir.join("appendonlydir").join(incr);
    let mut data = std::fs::read(&path).unwrap();
    data.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$4\r\ntorn\r\n$5\r\nval");
    std::fs::write(&path, &data).unwrap();
    let mut next = std::process::Command::new(common::deadbolt_bin())
        .arg(&conf)
        .args(["--port", "0", "--bind", "127.0.0.1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while next.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = next.kill();
            let out = next.wait_with_output().unwrap();
            panic!(
                "started on a torn log with aof-load-truncated no rewritten: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = next.wait_with_output().unwrap();
    assert!(!out.status.success());
    let log = [out.stdout, out.stderr].concat();
    let log = String::from_utf8_lossy(&log);
    assert!(
        log.contains("Unexpected end of file reading the append only file")
            && log.contains("aof-load-truncated"),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn save() {
    let dir = common::TempDir::new("save-live");
    let d = dir.0.to_str().unwrap();
    let mut got = Vec::new();
    for (who, s) in common::deadbolt_and_redis(&["--dir", d, "--dbfilename", "live.rdb"]) {
        let mut c = s.conn();
        got.push((
            c.cmd_str(&["CONFIG", "SET", "save", "x"]),
            c.cmd_str(&["CONFIG", "SET", "save", "0 1"]),
            c.cmd_str(&["CONFIG", "SET", "save", "100 1 1"]),
            c.cmd_str(&["CONFIG", "SET", "save", ""]),
            c.cmd_str(&["CONFIG", "GET", "save"]),
            c.cmd_str(&["CONFIG", "SET", "save", "1 1 3600 1000"]),
            c.cmd_str(&["CONFIG", "GET", "save"]),
        ));
        // The point takes effect: a change is snapshotted within about a second.
        c.cmd(&["SET", "k", "v"]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let info = c.cmd_str(&["INFO", "persistence"]);
            if info.contains("rdb_changes_since_last_save:0\r\n")
                && !info.contains("rdb_saves:0\r\n")
            {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{who}: {info}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(dir.0.join("live.rdb").exists(), "{who}");
        c.cmd(&["CONFIG", "SET", "save", ""]);
        std::fs::remove_file(dir.0.join("live.rdb")).unwrap();
    }
    assert_eq!(got[0], got[1]);
}

fn client_output_buffer_limit() {
    for (who, s) in common::deadbolt_and_redis(&[]) {
        let mut sub = s.conn();
        sub.cmd(&["SUBSCRIBE", "ch"]);
        let mut c = s.conn();
        set(&mut c, "client-output-buffer-limit", "pubsub 256kb 0 0");
        // 25 MB the subscriber does not read: under the default 32 MB hard limit, far over
        // the new one once the socket buffers are full.
        let msg = "m".repeat(64 * 1024);
        for _ in 0..400 {
            c.cmd(&["PUBLISH", "ch", &msg]);
            if info_field(&mut c, "clients", "connected_clients") == "1" {
                break;
            }
        }
        assert_eq!(
            info_field(&mut c, "clients", "connected_clients"),
            "1",
            "{who}: the subscriber over the new limit was kept"
        );
        assert!(sub.is_closed(Duration::from_secs(5)), "{who}");
        if who == "deadbolt" {
            // Accepted, but there is nothing for it to limit: the log says so.
            set(&mut c, "client-output-buffer-limit", "replica 1mb 1mb 10");
            s.wait_log(
                "client-output-buffer-limit: the replica class has no effect: deadbolt has no replicas",
                Duration::from_secs(5),
            );
        }
    }
}

fn notify_keyspace_events() {
    let mut got = Vec::new();
    for (who, s) in common::deadbolt_and_redis(&[]) {
        let mut sub = s.conn();
        sub.cmd(&["SUBSCRIBE", "__keyevent@0__:set"]);
        let mut c = s.conn();
        ok(&mut c, &["SET", "quiet", "1"]);
        set(&mut c, "notify-keyspace-events", "E$");
        ok(&mut c, &["SET", "k", "v"]);
        set(&mut c, "notify-keyspace-events", "");
        ok(&mut c, &["SET", "quiet", "2"]);
        // The event of the SET between the two changes, then PING's reply: nothing else.
        got.push((sub.read_reply(), sub.cmd(&["PING"])));
        if who == "deadbolt" {
            // Classes deadbolt never raises are accepted; the log says they never fire.
            set(&mut c, "notify-keyspace-events", "Em");
            s.wait_log(
                "notify-keyspace-events: class 'm' never fires",
                Duration::from_secs(5),
            );
        }
    }
    assert_eq!(
        got[0].0,
        b"*3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@0__:set\r\n$1\r\nk\r\n"
    );
    assert_eq!(got[0], got[1]);
    // From the command line (or a file) too, at start-up.
    let s = common::deadbolt(&["--notify-keyspace-events", "KEA"]);
    for letter in ['e', 'd'] {
        s.wait_log(
            &format!("notify-keyspace-events: class '{letter}' never fires"),
            Duration::from_secs(5),
        );
    }
}

const LUA_HOG: &str =
    "local t = {} for i = 1, 200000 do t[i] = string.rep('x', 20) .. i end return #t";

fn lua_memory_limit() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["EVAL", LUA_HOG, "0"]), b":200000\r\n");
    set(&mut c, "lua-memory-limit", "2mb");
    let refused = c.cmd_str(&["EVAL", LUA_HOG, "0"]);
    assert!(refused.starts_with('-'), "{refused}");
    set(&mut c, "lua-memory-limit", "256mb");
    assert_eq!(c.cmd(&["EVAL", LUA_HOG, "0"]), b":200000\r\n");
}

fn maxmemory() {
    let mut got = Vec::new();
    for (_, s) in common::deadbolt_and_redis(&[]) {
        let mut c = s.conn();
        ok(&mut c, &["SET", "k", "v"]);
        set(&mut c, "maxmemory", "1");
        let replies = (
            c.cmd_str(&["SET", "k2", "v"]),
            c.cmd_str(&["GET", "k"]),
            c.cmd_str(&["DEL", "k"]),
        );
        set(&mut c, "maxmemory", "0");
        got.push((replies, c.cmd_str(&["SET", "k2", "v"])));
    }
    assert_eq!(
        got[0].0 .0,
        "-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    );
    assert_eq!(got[0], got[1]);
}

/// noeviction is the only policy (keys are locks), so setting it changes nothing: the row
/// watches what it guarantees instead. Every evicting policy is refused, and over maxmemory a
/// write gets -OOM with every key kept, as Redis's noeviction.
fn maxmemory_policy() {
    let mut got = Vec::new();
    for (who, s) in common::deadbolt_and_redis(&[]) {
        let mut c = s.conn();
        for i in 0..10 {
            ok(
                &mut c,
                &["SET", &format!("lock:{i}"), "token", "PX", "600000"],
            );
        }
        set(&mut c, "maxmemory-policy", "noeviction");
        set(&mut c, "maxmemory", "1");
        got.push((
            c.cmd_str(&["SET", "lock:new", "token"]),
            c.cmd_str(&["DBSIZE"]),
            c.cmd_str(&["GET", "lock:0"]),
        ));
        if who == "deadbolt" {
            for policy in ["allkeys-lru", "volatile-ttl", "allkeys-random"] {
                assert_eq!(
                    c.cmd_str(&["CONFIG", "SET", "maxmemory-policy", policy]),
                    format!(
                        "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - deadbolt never evicts keys (they are locks): '{policy}' is not supported, only noeviction\r\n"
                    )
                );
            }
            assert_eq!(c.cmd_str(&["DBSIZE"]), ":10\r\n");
        }
    }
    assert_eq!(
        got[0].0,
        "-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    );
    assert_eq!(got[0], got[1]);
}

fn slowlog() {
    let mut got = Vec::new();
    for (_, s) in common::deadbolt_and_redis(&[]) {
        let mut c = s.conn();
        let mut lens = Vec::new();
        set(&mut c, "slowlog-log-slower-than", "0");
        ok(&mut c, &["SLOWLOG", "RESET"]);
        c.cmd(&["PING"]);
        lens.push(c.cmd_str(&["SLOWLOG", "LEN"]));
        set(&mut c, "slowlog-max-len", "2");
        for _ in 0..5 {
            c.cmd(&["PING"]);
        }
        lens.push(c.cmd_str(&["SLOWLOG", "LEN"]));
        set(&mut c, "slowlog-log-slower-than", "-1");
        ok(&mut c, &["SLOWLOG", "RESET"]);
        c.cmd(&["PING"]);
        lens.push(c.cmd_str(&["SLOWLOG", "LEN"]));
        got.push(lens);
    }
    assert_eq!(got[0], [":2\r\n", ":2\r\n", ":0\r\n"]);
    assert_eq!(got[0], got[1]);
}

/// A refused CONFIG SET port (the old addresses are bound again) keeps the TLS listener: a
/// TLS client still completes its handshake and gets PONG.
#[test]
fn a_refused_port_change_keeps_the_tls_listener() {
    let (s, tls_port, dir) = tls_port_server();
    let mut c = s.conn();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_port = busy.local_addr().unwrap().port().to_string();
    assert!(c
        .cmd_str(&["CONFIG", "SET", "port", &busy_port])
        .starts_with("-ERR CONFIG SET failed"));
    let out = std::process::Command::new("redis-cli")
        .args(["--tls", "--insecure", "-p", &tls_port.to_string(), "PING"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "PONG",
        "{out:?}"
    );
    assert!(pings(("127.0.0.1", s.port)));
    drop(s);
    let _ = std::fs::remove_dir_all(dir);
}
