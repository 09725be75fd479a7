//! A connection's output chain (machine/output.rs): large replies referenced and small ones
//! copied leave in the order they were produced, through partial writes to a client that reads
//! late; `client-output-buffer-limit` counts the whole chain, as Redis counts its reply list.

use crate::common;

use common::{resp_cmd, Conn};
use std::time::Duration;

/// A value whose bytes say where they are, so a reply cut or shifted anywhere shows.
fn patterned(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| b'a' + ((i / 7 + seed as usize) % 26) as u8)
        .collect()
}

fn bulk(v: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", v.len()).into_bytes();
    out.extend_from_slice(v);
    out.extend_from_slice(b"\r\n");
    out
}

/// 1 MiB values and small replies interleaved in one pipeline, all sent before a byte is read
/// (the socket fills, so the server writes its chain in pieces): every reply arrives whole
/// and in order.
fn interleaved_pipeline(c: &mut Conn) {
    let big = [patterned(1 << 20, 1), patterned((1 << 20) + 13, 2)];
    c.cmd(&[b"SET".as_slice(), b"big:0", &big[0]]);
    c.cmd(&[b"SET".as_slice(), b"big:1", &big[1]]);
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..24 {
        let k = format!("big:{}", i % 2);
        req.extend_from_slice(&resp_cmd(&["GET", &k]));
        want.extend_from_slice(&bulk(&big[i % 2]));
        // Small replies of several sizes between the large ones (copied into blocks).
        let small = "x".repeat(i * 700);
        req.extend_from_slice(&resp_cmd(&["ECHO", &small]));
        want.extend_from_slice(&bulk(small.as_bytes()));
        req.extend_from_slice(&resp_cmd(&["PING"]));
        want.extend_from_slice(b"+PONG\r\n");
    }
    c.send_raw(&req);
    let mut got = Vec::new();
    while got.len() < want.len() {
        got.extend_from_slice(&c.read_reply());
    }
    assert!(got == want, "replies out of order or damaged");
}

#[test]
fn large_and_small_replies_leave_whole_and_in_order() {
    for (name, s) in common::deadbolt_and_redis(&[]) {
        eprintln!("{name}");
        let mut c = s.conn();
        interleaved_pipeline(&mut c);
        // The connection serves on after its chain drained.
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n", "{name}");
    }
}

/// Under `appendfsync always` every write's reply waits for the pass's fsync, and large
/// values referenced by the chain wait behind the same gate: a pipeline of writes and GETs of
/// 1 MiB values answers every reply whole and in order.
#[test]
fn large_replies_keep_their_place_behind_an_fsync_hold() {
    let dir = common::TempDir::new("output-fsync-hold");
    let d = dir.0.to_str().unwrap();
    let s = common::deadbolt(&["--dir", d, "--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    let big = patterned((1 << 20) + 5, 3);
    c.cmd(&[b"SET".as_slice(), b"big", &big]);
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 1..=16 {
        req.extend_from_slice(&resp_cmd(&["INCR", "n"]));
        want.extend_from_slice(format!(":{i}\r\n").as_bytes());
        req.extend_from_slice(&resp_cmd(&["GET", "big"]));
        want.extend_from_slice(&bulk(&big));
        req.extend_from_slice(&resp_cmd(&["APPEND", "log", "x"]));
        want.extend_from_slice(format!(":{i}\r\n").as_bytes());
    }
    c.send_raw(&req);
    let mut got = Vec::new();
    while got.len() < want.len() {
        got.extend_from_slice(&c.read_reply());
    }
    assert!(
        got == want,
        "replies out of order or damaged behind the hold"
    );
    assert_eq!(c.cmd(&["GET", "n"]), b"$2\r\n16\r\n");
}

#[test]
fn the_output_limit_counts_the_whole_chain() {
    for (name, s) in common::deadbolt_and_redis(&["--client-output-buffer-limit", "normal 4mb 0 0"])
    {
        let mut setup = s.conn();
        let v = patterned(1 << 20, 3);
        setup.cmd(&[b"SET".as_slice(), b"big", &v]);
        // A reader within the limit is served.
        let mut reader = s.conn();
        assert_eq!(reader.cmd(&["GET", "big"]), bulk(&v), "{name}");
        // One that asks for 32 MiB and reads nothing goes, as Redis closes it.
        let mut lazy = s.conn();
        let mut req = Vec::new();
        for _ in 0..32 {
            req.extend_from_slice(&resp_cmd(&["GET", "big"]));
        }
        lazy.send_raw(&req);
        let mut watcher = s.conn();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let list = watcher.cmd_str(&["CLIENT", "LIST"]);
            if list.lines().filter(|l| l.starts_with("id=")).count() == 3 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{name}: the client past its output limit is still listed:\n{list}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let (_, closed) = lazy.drain(Duration::from_secs(5));
        assert!(closed, "{name}: the connection was closed");
        assert_eq!(setup.cmd(&["PING"]), b"+PONG\r\n", "{name}");
    }
}
