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

/// Large values nested in arrays and maps (MGET, LRANGE, HMGET, HGETALL, XRANGE, EXEC, a
/// script's table, RESP2 and RESP3) are referenced by the chain, not copied: each reply
/// arrives with exactly the bytes redis-server sends, pipelined without reading first so the
/// chain is written in pieces, and around the 16 KiB threshold (one byte under, at, over).
#[test]
fn large_values_inside_arrays_arrive_exactly() {
    const BIG: usize = 16 * 1024;
    let vals = [
        patterned(BIG - 1, 4),
        patterned(BIG, 5),
        patterned(1 << 20, 6),
        patterned((1 << 20) + 13, 7),
        b"small".to_vec(),
    ];
    let scenario = |s: &common::Server| -> Vec<Vec<u8>> {
        let mut c = s.conn();
        let mut setup: Vec<&[u8]> = vec![b"RPUSH", b"list"];
        for (i, v) in vals.iter().enumerate() {
            let k = format!("v:{i}");
            c.cmd(&[b"SET".as_slice(), k.as_bytes(), v]);
            setup.push(v);
            let f = format!("f{i}");
            c.cmd(&[b"HSET".as_slice(), b"hash", f.as_bytes(), v]);
            let id = format!("{}-1", i + 1);
            c.cmd(&[b"XADD".as_slice(), b"stream", id.as_bytes(), b"field", v]);
        }
        c.cmd(&setup);
        c.cmd(&[b"HSET".as_slice(), b"one", b"f", &vals[3]]);
        let body =
            "return {redis.call('GET', KEYS[1]), {ARGV[1], redis.call('LRANGE', KEYS[2], 0, -1)}}";
        let cmds: Vec<Vec<&str>> = vec![
            vec!["MGET", "v:0", "v:1", "nokey", "v:2", "v:3", "v:4"],
            vec!["LRANGE", "list", "0", "-1"],
            vec!["HMGET", "hash", "f3", "f0", "f2", "nofield", "f1"],
            vec!["HGETALL", "one"],
            vec!["XRANGE", "stream", "-", "+"],
            vec!["MULTI"],
            vec!["GET", "v:3"],
            vec!["MGET", "v:2", "v:4"],
            vec!["EXEC"],
            vec!["EVAL", body, "2", "v:2", "list", "tail"],
            vec!["HELLO", "3"],
            vec!["HGETALL", "one"],
            vec!["XRANGE", "stream", "2-1", "3-1"],
            vec!["MGET", "v:3", "v:1"],
        ];
        let mut req = Vec::new();
        for cmd in &cmds {
            req.extend_from_slice(&resp_cmd(cmd));
        }
        c.send_raw(&req);
        let mut got: Vec<Vec<u8>> = cmds.iter().map(|_| c.read_reply()).collect();
        // HELLO's reply names the server: not compared.
        got.remove(10);
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
        got
    };
    let ours = scenario(&common::deadbolt(&[]));
    let theirs = scenario(&common::redis_server(&[]));
    assert_eq!(ours.len(), theirs.len());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert!(
            a == b,
            "reply {i} differs: deadbolt {} bytes {:?}..., redis-server {} bytes {:?}...",
            a.len(),
            String::from_utf8_lossy(&a[..a.len().min(80)]),
            b.len(),
            String::from_utf8_lossy(&b[..b.len().min(80)])
        );
    }
    // And they are what they should be: MGET's, written out by hand.
    let mut mget = b"*6\r\n".to_vec();
    for v in [&vals[0], &vals[1]] {
        mget.extend_from_slice(&bulk(v));
    }
    mget.extend_from_slice(b"$-1\r\n");
    for v in [&vals[2], &vals[3], &vals[4]] {
        mget.extend_from_slice(&bulk(v));
    }
    assert!(ours[0] == mget, "MGET's reply is not the stored bytes");
}
