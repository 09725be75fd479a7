//! Issue 15, item 5: SIGTERM is honoured within a bounded time whatever a client sent. A busy
//! script is stopped by its hook and the server shuts down as SHUTDOWN NOSAVE does; an executor
//! stuck where no hook reaches (a long C call; DEBUG SLEEP inside EXEC stands for it) is left
//! behind after `SHUTDOWN_BOUND`. Either way every acknowledged write is in the log after a
//! restart, and the partial writes of the unit that was cut short are not.

use crate::common;

use common::TempDir;

use common::Server;
use deadbolt::SHUTDOWN_BOUND;
use std::path::Path;
use std::time::{Duration, Instant};

fn start(dir: &Path, fsync: &str) -> Server {
    common::deadbolt_with_aof(
        dir,
        fsync,
        &[
            "--busy-reply-threshold",
            "100",
            "--enable-debug-command",
            "yes",
        ],
    )
}

fn signal(s: &Server, sig: i32) {
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(s.pid() as i32, sig) };
}

/// Acknowledged writes: single commands, a pipeline, a transaction. Returns the keys.
fn write_acknowledged(s: &Server) -> Vec<String> {
    let mut c = s.conn();
    let mut keys = Vec::new();
    for i in 0..50 {
        let k = format!("ack:{i}");
        assert_eq!(c.cmd(&["SET", &k, "v", "PX", "600000"]), b"+OK\r\n");
        keys.push(k);
    }
    let mut pipeline = Vec::new();
    for i in 50..100 {
        let k = format!("ack:{i}");
        pipeline.extend_from_slice(&common::resp_cmd(&["SET", &k, "v"]));
        keys.push(k);
    }
    c.send_raw(&pipeline);
    for _ in 50..100 {
        assert_eq!(c.read_reply(), b"+OK\r\n");
    }
    assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "ack:tx", "v"]), b"+QUEUED\r\n");
    assert_eq!(c.cmd(&["EXEC"]), b"*1\r\n+OK\r\n");
    keys.push("ack:tx".into());
    keys
}

/// After a restart on `dir`: every key in `present` exists, `partial` does not.
fn assert_restart(dir: &Path, fsync: &str, present: &[String]) {
    let s = start(dir, fsync);
    let mut c = s.conn();
    for k in present {
        assert_eq!(c.cmd(&["EXISTS", k]), b":1\r\n", "acknowledged {k} lost");
    }
    assert_eq!(
        c.cmd(&["EXISTS", "partial"]),
        b":0\r\n",
        "the aborted script's write was logged"
    );
}

#[test]
fn sigterm_stops_a_busy_script_and_keeps_every_acknowledged_write() {
    for fsync in ["everysec", "always"] {
        let dir = TempDir::new("sigterm-busy");
        let mut s = start(&dir.0, fsync);
        let keys = write_acknowledged(&s);
        let mut a = s.conn();
        a.send(&[
            "EVAL",
            "redis.call('set','partial','1') while true do end",
            "0",
        ]);
        s.wait_log("Slow script detected", Duration::from_secs(10));
        let t = Instant::now();
        signal(&s, libc::SIGTERM);
        let status = s
            .wait_exit(SHUTDOWN_BOUND + Duration::from_secs(2))
            .expect("exits after SIGTERM during a busy script");
        // The hook stopped the script: a clean shutdown, well before the watchdog.
        assert!(status.success(), "{fsync}: {status:?}");
        assert!(t.elapsed() < SHUTDOWN_BOUND, "{fsync}: {:?}", t.elapsed());
        assert!(a.is_closed(Duration::from_secs(2)));
        for line in [
            "Received SIGTERM scheduling shutdown...",
            "User requested shutdown...",
            "Calling fsync() on the AOF file.",
            "ready to exit, bye bye...",
        ] {
            s.wait_log(line, Duration::from_secs(1));
        }
        assert!(!s
            .log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("did not complete")));
        drop(s);
        assert_restart(&dir.0, fsync, &keys);
    }
}

/// MULTI, a write, DEBUG SLEEP 30, EXEC: the executor is stuck inside a unit that has written.
fn stuck_transaction(c: &mut common::Conn) {
    for argv in [
        &["MULTI"][..],
        &["SET", "partial", "1"],
        &["DEBUG", "SLEEP", "30"],
    ] {
        c.send(argv);
    }
    for expected in ["+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n"] {
        assert_eq!(c.read_reply(), expected.as_bytes());
    }
    c.send(&["EXEC"]);
}

#[test]
fn sigterm_while_the_executor_is_stuck_exits_within_the_bound() {
    let dir = TempDir::new("sigterm-stuck");
    let mut s = start(&dir.0, "everysec");
    let mut keys = write_acknowledged(&s);
    // A write racing the script into the same round: if it is acknowledged it must survive.
    let mut c = s.conn();
    let mut a = s.conn();
    c.send(&["SET", "raced", "v"]);
    // A unit that writes, then blocks the executor where no hook reaches (DEBUG SLEEP stands
    // for any long C call: since Lua's pattern matcher runs the busy hook, no script stays deaf).
    stuck_transaction(&mut a);
    if c.try_read_reply(Duration::from_millis(500)).as_deref() == Some(b"+OK\r\n") {
        keys.push("raced".into());
    }
    // The executor is stuck: nobody is answered.
    let mut other = s.conn();
    other.send(&["PING"]);
    assert_eq!(other.try_read_reply(Duration::from_millis(300)), None);
    let t = Instant::now();
    signal(&s, libc::SIGTERM);
    let status = s
        .wait_exit(SHUTDOWN_BOUND + Duration::from_secs(3))
        .expect("exits within the bound although the executor is stuck");
    assert!(t.elapsed() >= SHUTDOWN_BOUND - Duration::from_millis(100));
    assert_eq!(status.code(), Some(1), "not a clean shutdown: {status:?}");
    for line in [
        "Received SIGTERM scheduling shutdown...",
        "User requested shutdown...",
        "Shutdown did not complete within 5 seconds",
        "ready to exit, bye bye...",
    ] {
        s.wait_log(line, Duration::from_secs(1));
    }
    drop(s);
    assert_restart(&dir.0, "everysec", &keys);
}

#[test]
fn a_second_sigint_exits_at_once() {
    let dir = TempDir::new("sigint-insist");
    let mut s = start(&dir.0, "everysec");
    let keys = write_acknowledged(&s);
    let mut a = s.conn();
    stuck_transaction(&mut a);
    let mut other = s.conn();
    other.send(&["PING"]);
    assert_eq!(other.try_read_reply(Duration::from_millis(300)), None);
    signal(&s, libc::SIGINT);
    s.wait_log("User requested shutdown...", Duration::from_secs(2));
    let t = Instant::now();
    signal(&s, libc::SIGINT);
    let status = s
        .wait_exit(Duration::from_secs(2))
        .expect("a second SIGINT exits at once");
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(status.code(), Some(1));
    s.wait_log(
        "Received SIGINT scheduling shutdown...",
        Duration::from_secs(1),
    );
    s.wait_log("You insist... exiting now.", Duration::from_secs(1));
    drop(s);
    assert_restart(&dir.0, "everysec", &keys);
}
