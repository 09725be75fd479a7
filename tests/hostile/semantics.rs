//! Semantics a client can push to the edge: INCRBYFLOAT's long double values survive an
//! append-only-file restart as the exact text the client was answered (Redis propagates SET /
//! HSET with the formatted value for the same reason).

use crate::common;

use std::time::{Duration, Instant};

fn wait_loaded(s: &common::Server) {
    let mut c = s.conn();
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.cmd_str(&["INFO", "persistence"]).contains("loading:1") {
        assert!(Instant::now() < deadline, "still loading");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn incrbyfloat_values_survive_an_aof_restart_verbatim() {
    let dir = std::env::temp_dir().join(format!(
        "deadbolt-hostile-sem-{}-{}",
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let args = ["--dir", d, "--appendonly", "yes", "--appendfsync", "always"];
    let answered = {
        let s = common::deadbolt(&args);
        wait_loaded(&s);
        let mut c = s.conn();
        c.cmd(&["SET", "f", "1000"]);
        let f = c.cmd(&["INCRBYFLOAT", "f", "1.6"]);
        assert_eq!(f, b"$22\r\n1001.59999999999999998\r\n");
        c.cmd(&["INCRBYFLOAT", "big", "1e308"]);
        let big = c.cmd(&["INCRBYFLOAT", "big", "1e308"]);
        assert_eq!(
            big.len(),
            "$309\r\n".len() + 309 + 2,
            "{}",
            String::from_utf8_lossy(&big)
        );
        c.cmd(&["HINCRBYFLOAT", "h", "v", "0.1"]);
        let h = c.cmd(&["HINCRBYFLOAT", "h", "v", "0.2"]);
        assert_eq!(h, b"$3\r\n0.3\r\n");
        (f, big, h)
    };
    let s = common::deadbolt(&args);
    wait_loaded(&s);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["GET", "f"]), answered.0);
    assert_eq!(c.cmd(&["GET", "big"]), answered.1);
    assert_eq!(c.cmd(&["HGET", "h", "v"]), answered.2);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A write refused with LOADING while queuing flags the transaction (Redis's rejectCommand):
/// EXEC answers EXECABORT, never a partial transaction.
#[test]
fn loading_refusal_during_multi_aborts_exec() {
    let dir = std::env::temp_dir().join(format!(
        "deadbolt-hostile-loading-{}-{}",
        std::process::id(),
        fastrand::u32(..)
    ));
    let aofdir = dir.join("appendonlydir");
    std::fs::create_dir_all(&aofdir).unwrap();
    std::fs::write(
        aofdir.join("appendonly.aof.manifest"),
        "file appendonly.aof.1.incr.aof seq 1 type i\n",
    )
    .unwrap();
    let mut data = Vec::new();
    for i in 0..300_000 {
        data.extend(common::resp_cmd(&["SET", &format!("key:{i}"), "value"]));
    }
    std::fs::write(aofdir.join("appendonly.aof.1.incr.aof"), &data).unwrap();
    let s = common::deadbolt(&["--dir", dir.to_str().unwrap(), "--appendonly", "yes"]);
    let mut c = s.conn();
    let mut saw_loading = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
        let set = c.cmd_str(&["SET", "tx", "applied"]);
        let exec = c.cmd_str(&["EXEC"]);
        if set == "-LOADING Redis is loading the dataset in memory\r\n" {
            saw_loading = true;
            assert_eq!(
                exec,
                "-EXECABORT Transaction discarded because of previous errors.\r\n"
            );
        } else {
            assert_eq!(set, "+QUEUED\r\n");
            assert_eq!(exec, "*1\r\n+OK\r\n");
            break;
        }
        assert!(Instant::now() < deadline, "still loading");
    }
    assert!(saw_loading, "the log loaded before any client could ask");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
