//! An operator's redis.conf starts deadbolt: Debian's own /etc/redis/redis.conf (ports and
//! paths changed) daemonizes with its pid file; every Redis 7.0 directive deadbolt keeps only
//! for compatibility reads and sets as on redis-server and says once in the log why it has no
//! effect; the ones whose loss would cost data or security stop the start with the reason;
//! `supervised systemd` tells systemd READY=1 only once the log is loaded.

use crate::common;

use common::{Conn, TempDir};
use deadbolt::config::COMPAT;
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "{what} within {timeout:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn debians_stock_redis_conf_starts_a_daemon() {
    let stock = std::path::Path::new("/etc/redis/redis.conf");
    assert!(
        stock.exists(),
        "Debian's redis-server package provides /etc/redis/redis.conf (scripts/test installs it)"
    );
    let dir = TempDir::new("stock-conf");
    let conf = dir.0.join("redis.conf");
    std::fs::copy(stock, &conf).unwrap();
    let (log, pidfile) = (dir.0.join("deadbolt.log"), dir.0.join("deadbolt.pid"));
    let port = common::free_port();
    // The file says daemonize yes: the command returns once the child is on its own.
    let status = std::process::Command::new(common::deadbolt_bin())
        .arg(&conf)
        .args(["--port", &port.to_string(), "--dir"])
        .arg(&dir.0)
        .arg("--logfile")
        .arg(&log)
        .arg("--pidfile")
        .arg(&pidfile)
        .status()
        .unwrap();
    assert!(status.success(), "{status:?}");
    wait_for("the pid file", Duration::from_secs(10), || {
        std::fs::read_to_string(&pidfile).is_ok_and(|s| s.trim().parse::<i32>().is_ok())
    });
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut c = Conn::connect(port);
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "daemonize"]),
        b"*2\r\n$9\r\ndaemonize\r\n$3\r\nyes\r\n"
    );
    assert_eq!(
        c.cmd(&["SET", "lock", "me", "NX", "PX", "1000"]),
        b"+OK\r\n"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("Accepted without effect: ")
            && text.contains("activerehashing")
            && text.contains("WARNING no persistence: appendonly is no")
            && text.contains("Ready to accept connections"),
        "{text}"
    );
    assert!(
        !text.contains("FATAL"),
        "the stock file should start cleanly: {text}"
    );
    c.send(&["SHUTDOWN"]);
    assert!(c.is_closed(Duration::from_secs(10)));
    wait_for("the daemon to exit", Duration::from_secs(10), || {
        !alive(pid)
    });
    assert!(!pidfile.exists(), "the pid file is removed on exit");
}

/// CONFIG GET of every such directive (and alias) answers what redis-server 7.0 answers, and
/// CONFIG SET of its own value is refused or taken as Redis does.
#[test]
fn compatibility_directives_read_and_set_as_on_redis() {
    // Redis's defaults are compared, so this server keeps its own (no I/O threads from
    // DEADBOLT_TEST_IO_THREADS): `io-threads` named here turns the knob off.
    let ours = common::deadbolt(&["--io-threads", "1"]);
    let redis = common::redis_server(&[]);
    let (mut a, mut b) = (ours.conn(), redis.conn());
    let mut compared = 0;
    for d in COMPAT {
        for name in std::iter::once(d.name).chain(d.aliases.iter().copied()) {
            let get = ["CONFIG", "GET", name];
            let theirs = b.cmd_str(&get);
            assert_eq!(a.cmd_str(&get), theirs, "CONFIG GET {name}");
            let value = theirs.lines().nth(4).unwrap_or_default().to_string();
            let set = ["CONFIG", "SET", name, &value];
            assert_eq!(
                a.cmd_str(&set),
                b.cmd_str(&set),
                "CONFIG SET {name} {value:?}"
            );
            compared += 1;
        }
    }
    assert!(compared > 140, "{compared}");
    // A change is taken and the log says why it does nothing.
    assert_eq!(
        a.cmd(&["CONFIG", "SET", "hash-max-listpack-entries", "64"]),
        b"+OK\r\n"
    );
    assert_eq!(
        a.cmd_str(&["CONFIG", "GET", "hash-max-ziplist-entries"]),
        "*2\r\n$24\r\nhash-max-ziplist-entries\r\n$2\r\n64\r\n"
    );
    assert_eq!(
        a.cmd(&["CONFIG", "SET", "activerehashing", "no"]),
        b"+OK\r\n"
    );
    ours.wait_log(
        "Accepted without effect: activerehashing. Why: they tune Redis internals",
        Duration::from_secs(5),
    );
    // Values are checked as Redis checks them.
    for (name, value) in [
        ("activerehashing", "maybe"),
        ("repl-timeout", "soon"),
        ("latency-tracking-info-percentiles", "abc"),
        ("latency-tracking-info-percentiles", "101"),
        ("oom-score-adj-values", "1 2"),
        ("oom-score-adj-values", "1 2 x"),
        ("oom-score-adj-values", "1 2 9999"),
        ("repl-diskless-load", "bad"),
    ] {
        let set = ["CONFIG", "SET", name, value];
        assert_eq!(a.cmd_str(&set), b.cmd_str(&set), "{name} {value}");
    }
}

/// Ignoring these would lose data or weaken security: the start stops and says why.
#[test]
fn directives_that_cannot_be_ignored_stop_the_start() {
    for (name, value) in [
        ("unixsocket", "/run/redis/redis.sock"),
        ("cluster-enabled", "yes"),
        ("tls-protocols", "TLSv1.3"),
    ] {
        let out = std::process::Command::new(common::deadbolt_bin())
            .args(["--test-config", &format!("--{name}"), value])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{name} {value} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(name) && err.contains("not supported by deadbolt: "),
            "{name}: {err}"
        );
    }
    // A lone server follows a Redis master named by `replicaof` (redisrepl); a cluster node
    // replicates through Raft and refuses it.
    for name in ["replicaof", "slaveof"] {
        let out = std::process::Command::new(common::deadbolt_bin())
            .args(["--test-config", &format!("--{name}"), "10.0.0.1 6379"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {out:?}");
    }
    // Their defaults are fine (a stock file may spell them out).
    let out = std::process::Command::new(common::deadbolt_bin())
        .args([
            "--test-config",
            "--min-replicas-to-write",
            "0",
            "--cluster-enabled",
            "no",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// systemd hears READY=1 once the append-only file is loaded (not when the port opens), and
/// STOPPING=1 when the server shuts down.
#[test]
fn systemd_is_told_ready_after_loading_and_stopping() {
    let dir = TempDir::new("sd-notify");
    {
        let s = common::deadbolt_with_aof(&dir.0, "everysec", &[]);
        let mut c = s.conn();
        assert_eq!(c.cmd(&["SET", "kept", "1"]), b"+OK\r\n");
        c.send(&["SHUTDOWN"]);
        assert!(c.is_closed(Duration::from_secs(10)));
    }
    let sock_path = dir.0.join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut cmd = std::process::Command::new(common::deadbolt_bin());
    cmd.env("NOTIFY_SOCKET", &sock_path).args([
        "--port",
        "0",
        "--bind",
        "127.0.0.1",
        "--supervised",
        "systemd",
        "--appendonly",
        "yes",
        "--dir",
        dir.0.to_str().unwrap(),
    ]);
    let s = common::start_command(cmd);
    let mut buf = [0u8; 256];
    let n = sock.recv(&mut buf).expect("READY=1 from the server");
    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(msg.contains("READY=1"), "{msg}");
    // By then the log is loaded.
    let mut c = s.conn();
    assert_eq!(c.cmd(&["GET", "kept"]), b"$1\r\n1\r\n");
    assert!(c
        .cmd_str(&["INFO", "server"])
        .contains("process_supervised:systemd"));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(s.pid() as i32, libc::SIGTERM) };
    let n = sock.recv(&mut buf).expect("STOPPING=1 from the server");
    assert!(String::from_utf8_lossy(&buf[..n]).contains("STOPPING=1"));
}
