//! Lock insight end to end: a lease is let run out while its holder still believes it holds
//! the lock, another client takes the key, and the first holder's release (redis-py's
//! compare-and-delete, Redisson's unlock — the byte-exact scripts in lua/) finds it foreign:
//! INFO locks and the Prometheus endpoint count a late release, with the contention, the wait
//! and the hold they saw.

use crate::common;

use common::Conn;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn script(path: &str) -> String {
    std::fs::read_to_string(format!("{}/lua/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn field(info: &str, name: &str) -> String {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("{name} in {info}"))
        .to_string()
}

fn scrape(port: u16) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn a_release_after_the_lease_ran_out_is_counted_late() {
    let metrics = common::free_port();
    let s = common::deadbolt(&["--metrics-port", &metrics.to_string()]);
    let (mut a, mut b) = (s.conn(), s.conn());
    let key = "lock:orders:42";
    assert_eq!(
        a.cmd(&["SET", key, "token-a", "NX", "PX", "150"]),
        b"+OK\r\n"
    );
    assert_eq!(
        b.cmd(&["SET", key, "token-b", "NX", "PX", "150"]),
        b"$-1\r\n"
    );
    // A's lease runs out while A "works".
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.cmd(&["PTTL", key]) != b":-2\r\n" {
        assert!(Instant::now() < deadline, "the lease never ran out");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        b.cmd(&["SET", key, "token-b", "NX", "PX", "10000"]),
        b"+OK\r\n"
    );
    let release = script("redis-py/lua_release_script.lua");
    // A releases what it believes it holds: the key is B's now.
    assert_eq!(a.cmd(&["EVAL", &release, "1", key, "token-a"]), b":0\r\n");
    assert_eq!(b.cmd(&["EVAL", &release, "1", key, "token-b"]), b":1\r\n");

    // Redisson: a holder whose hash lock is gone unlocks (nil: not held by this thread).
    let acquire = script("redisson/rlock_trylockinnerasync.lua");
    let unlock = script("redisson/rlock_unlockinnerasync.lua");
    let lock = "jobs:nightly";
    let owner = "uuid-1:1";
    assert_eq!(
        a.cmd(&["EVAL", &acquire, "1", lock, "30000", owner]),
        b"$-1\r\n"
    );
    assert_eq!(a.cmd(&["DEL", lock]), b":1\r\n");
    let unlock_args = [
        "EVAL",
        &unlock,
        "3",
        lock,
        "redisson_lock__channel:{jobs:nightly}",
        "redisson_unlock_latch:{jobs:nightly}:x",
        "0",
        "30000",
        owner,
        "publish",
        "13500",
    ];
    assert_eq!(a.cmd(&unlock_args), b"$-1\r\n");

    let info = a.cmd_str(&["INFO", "locks"]);
    assert_eq!(field(&info, "lock_acquires"), "3", "{info}");
    assert_eq!(field(&info, "lock_contended"), "1", "{info}");
    assert_eq!(field(&info, "lock_releases"), "1", "{info}");
    assert_eq!(field(&info, "lock_late_releases"), "2", "{info}");
    let orders = info
        .lines()
        .find(|l| l.contains("prefix=lock:orders,"))
        .unwrap_or_else(|| panic!("{info}"));
    assert!(
        orders.contains("acquires=2,contended=1,releases=1,late_releases=1,waiters=0"),
        "{orders}"
    );
    // B waited about one lease (150 ms, and the polling for its end).
    let wait: u64 = orders
        .split(',')
        .find_map(|f| f.strip_prefix("wait_p50_ms="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{orders}"));
    assert!((145..1000).contains(&wait), "{orders}");
    let jobs = info
        .lines()
        .find(|l| l.contains("prefix=jobs,"))
        .unwrap_or_else(|| panic!("{info}"));
    assert!(jobs.contains("late_releases=1"), "{jobs}");

    // The endpoint renders about once a second.
    let want = "deadbolt_lock_late_releases_total{prefix=\"lock:orders\"} 1";
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = scrape(metrics);
        if text.contains(want) {
            break text;
        }
        assert!(Instant::now() < deadline, "{want} never appeared: {text}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("Content-Type: text/plain; version=0.0.4"));
    for line in [
        "deadbolt_lock_acquires_total{prefix=\"lock:orders\"} 2",
        "deadbolt_lock_contended_total{prefix=\"lock:orders\"} 1",
        "deadbolt_lock_late_releases_total{prefix=\"jobs\"} 1",
        "deadbolt_lock_wait_seconds_count{prefix=\"lock:orders\"} 1",
        "deadbolt_lock_hold_seconds_bucket{prefix=\"lock:orders\",le=\"+Inf\"} 2",
        "# TYPE deadbolt_lock_hold_seconds histogram",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    let mut other = std::net::TcpStream::connect(("127.0.0.1", metrics)).unwrap();
    other.write_all(b"GET /nope HTTP/1.1\r\n\r\n").unwrap();
    let mut reply = String::new();
    other.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 404"), "{reply}");
    let _ = Conn::connect(s.port);
}

/// With no metrics-port nothing listens, and INFO (default sections) stays Redis's list: the
/// locks section appears only when asked for, or with INFO all.
#[test]
fn locks_section_only_when_asked() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    assert!(!c.cmd_str(&["INFO"]).contains("# Locks"));
    assert!(c.cmd_str(&["INFO", "all"]).contains("# Locks"));
    assert!(c.cmd_str(&["INFO", "locks"]).starts_with("$"));
}
