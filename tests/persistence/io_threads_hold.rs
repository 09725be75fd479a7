//! `appendfsync always` with I/O threads: no reply leaves before the fsync that makes its
//! write durable has returned, however many clients' replies the threads write in that pass.
//! The fsync is held by the test (tests/disk_faults/fsync_shim.c stalls fsync while a file
//! exists), so "before" is observable rather than a race.

use crate::common::{self, resp_cmd, Conn, TempDir};
use std::process::Command;
use std::time::Duration;

#[test]
fn no_reply_leaves_before_its_fsync_with_threads() {
    let dir = TempDir::new("io-threads-fsync-hold");
    let stall = dir.0.join("stall-fsync");
    let data = dir.0.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut cmd = Command::new(common::deadbolt_bin());
    cmd.args(["--port", "0", "--bind", "127.0.0.1", "--dir"])
        .arg(&data)
        .args([
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
        ])
        .args(["--io-threads", "4", "--io-threads-do-reads", "yes"])
        .env("LD_PRELOAD", super::disk_faults::shim())
        .env("FSYNC_SHIM_STALL_IF", &stall);
    let s = common::start_command(cmd);
    common::wait_loaded(&s);
    let mut clients: Vec<Conn> = (0..48).map(|_| s.conn()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        let k = format!("warm:{i}");
        assert_eq!(c.cmd(&["SET", k.as_str(), "1"]), b"+OK\r\n");
    }
    let mut admin = s.conn();
    let threaded = |admin: &mut Conn| {
        let info = admin.cmd_str(&["INFO", "stats"]);
        info.lines()
            .find_map(|l| l.strip_prefix("io_threaded_writes_processed:"))
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let before = threaded(&mut admin);
    for round in 0..3 {
        std::fs::write(&stall, b"").unwrap();
        // Each client pipelines writes whose replies name their order.
        for (i, c) in clients.iter_mut().enumerate() {
            let key = format!("n:{i}");
            let mut req = Vec::new();
            for _ in 0..4 {
                req.extend_from_slice(&resp_cmd(&["INCR", key.as_str()]));
            }
            c.send_raw(&req);
        }
        // While the fsync does not return, nobody hears back.
        for (i, c) in clients.iter_mut().enumerate() {
            let early = c.try_read_reply(Duration::from_millis(if i == 0 { 500 } else { 5 }));
            assert!(
                early.is_none(),
                "round {round}: client {i} got {early:?} before the fsync returned"
            );
        }
        std::fs::remove_file(&stall).unwrap();
        for (i, c) in clients.iter_mut().enumerate() {
            for j in 1..=4 {
                let want = format!(":{}\r\n", round * 4 + j);
                assert_eq!(
                    String::from_utf8_lossy(&c.read_reply()),
                    want,
                    "client {i}, round {round}"
                );
            }
        }
    }
    assert!(
        threaded(&mut admin) > before,
        "the replies never went through the I/O threads"
    );
}
