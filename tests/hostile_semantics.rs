//! Semantics a client can push to the edge: INCRBYFLOAT's long double values survive an
//! append-only-file restart as the exact text the client was answered (Redis propagates SET /
//! HSET with the formatted value for the same reason).

mod common;

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
