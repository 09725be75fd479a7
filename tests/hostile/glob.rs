//! Issue 15, item 3: glob patterns from a client must cost polynomial time and give exactly
//! Redis's answers. The matcher is proven against a port of Redis's `stringmatchlen` in
//! src/cmd/args.rs; here the same is checked end to end through KEYS against a real redis-server,
//! and the server must stay responsive while a pathological pattern runs.

use crate::common;

use common::{deadbolt, deadbolt_and_redis, redis_server, Conn};
use std::time::{Duration, Instant};

/// The elements of a RESP2 array of bulk strings, sorted (KEYS order is the hash table's).
fn sorted_bulks(reply: &[u8]) -> Vec<Vec<u8>> {
    assert_eq!(
        reply[0],
        b'*',
        "not an array: {:?}",
        String::from_utf8_lossy(reply)
    );
    let mut out = Vec::new();
    let line_end = |from: usize| {
        from + reply[from..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("line end")
    };
    let mut at = line_end(0);
    let n: usize = std::str::from_utf8(&reply[1..at]).unwrap().parse().unwrap();
    at += 2;
    for _ in 0..n {
        assert_eq!(reply[at], b'$');
        let e = line_end(at);
        let len: usize = std::str::from_utf8(&reply[at + 1..e])
            .unwrap()
            .parse()
            .unwrap();
        out.push(reply[e + 2..e + 2 + len].to_vec());
        at = e + 2 + len + 2;
    }
    out.sort();
    out
}

/// Bytes for the keys: letters of both cases around range bounds, metacharacters (keys may
/// contain them), NUL and high bytes.
const KEY_BYTES: &[u8] = b"aAbBzZ_-]^\\*?[\x00\x7f\x80\xff";
const PAT_BYTES: &[u8] = b"*?[]^-\\aAbBzZ_\x00\x7f\x80\xff";

fn pick(rng: &mut fastrand::Rng, from: &[u8]) -> u8 {
    from[rng.usize(0..from.len())]
}

/// A pattern derived from `key` (so that many match) with random noise (so that many do not).
fn pattern_from(rng: &mut fastrand::Rng, key: &[u8]) -> Vec<u8> {
    let mut p = Vec::new();
    for &b in key {
        match rng.u8(0..10) {
            0 => p.push(b'?'),
            1 => p.push(b'*'),
            2 => p.extend_from_slice(&[b'[', b, b']']),
            3 => p.extend_from_slice(&[b'[', b'^', pick(rng, PAT_BYTES), b']']),
            4 => p.extend_from_slice(&[b'\\', b]),
            5 => {
                p.extend_from_slice(&[b'[', pick(rng, PAT_BYTES), b'-', pick(rng, PAT_BYTES), b']'])
            }
            6 => p.push(pick(rng, PAT_BYTES)),
            _ => p.push(b),
        }
        if rng.u8(0..8) == 0 {
            p.push(b'*');
        }
    }
    p
}

#[test]
fn keys_patterns_match_redis() {
    let mut rng = fastrand::Rng::with_seed(15_003);
    let mut keys: Vec<Vec<u8>> = vec![b"".to_vec(), b"*".to_vec(), b"a".to_vec()];
    for _ in 0..80 {
        let n = rng.usize(1..=7);
        keys.push((0..n).map(|_| pick(&mut rng, KEY_BYTES)).collect());
    }
    keys.sort();
    keys.dedup();
    let mut patterns: Vec<Vec<u8>> = vec![
        b"*".to_vec(),
        b"**".to_vec(),
        b"".to_vec(),
        b"[".to_vec(),
        b"[^".to_vec(),
        b"\\".to_vec(),
        b"a\\".to_vec(),
        b"[a-]".to_vec(),
        b"[z-a]".to_vec(),
        b"[a-\xff]".to_vec(),
        b"[\\]]*".to_vec(),
    ];
    for i in 0..400 {
        if i % 3 == 0 {
            let n = rng.usize(0..=8);
            patterns.push((0..n).map(|_| pick(&mut rng, PAT_BYTES)).collect());
        } else {
            let key = keys[rng.usize(0..keys.len())].clone();
            patterns.push(pattern_from(&mut rng, &key));
        }
    }
    let servers = deadbolt_and_redis(&[]);
    let mut conns: Vec<Conn> = servers.iter().map(|(_, s)| s.conn()).collect();
    for c in &mut conns {
        for k in &keys {
            assert_eq!(c.cmd(&[b"SET".as_slice(), k, b"v"]), b"+OK\r\n");
        }
    }
    let mut nonempty = 0;
    for p in &patterns {
        let want = sorted_bulks(&conns[1].cmd(&[b"KEYS".as_slice(), p]));
        let got = sorted_bulks(&conns[0].cmd(&[b"KEYS".as_slice(), p]));
        assert_eq!(got, want, "KEYS {:?}", String::from_utf8_lossy(p));
        nonempty += !want.is_empty() as usize;
    }
    // Most patterns are derived from a key: the comparison must cover real matches.
    assert!(nonempty > 150, "only {nonempty} patterns matched anything");
}

/// `a*` repeated, then `b`: Redis 6's recursive matcher (and deadbolt's before) needed
/// exponential time for it.
fn pathological(groups: usize) -> Vec<u8> {
    let mut p = b"a*".repeat(groups);
    p.push(b'b');
    p
}

#[test]
fn pathological_keys_pattern_returns_fast_like_redis() {
    for (name, server) in deadbolt_and_redis(&[]) {
        let mut c = server.conn();
        let key = vec![b'a'; 40];
        let mut hit = key.clone();
        hit.push(b'b');
        c.cmd(&[b"SET".as_slice(), &key, b"v"]);
        c.cmd(&[b"SET".as_slice(), &hit, b"v"]);
        for groups in [10, 20, 30, 200] {
            let start = Instant::now();
            let got = c.cmd(&[b"KEYS".as_slice(), &pathological(groups)]);
            let want: &[u8] = if groups <= 40 {
                b"*1\r\n$41\r\naaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\r\n"
            } else {
                b"*0\r\n"
            };
            assert_eq!(got, want, "{name} groups {groups}");
            assert!(
                start.elapsed() < Duration::from_millis(500),
                "{name}: KEYS with {groups} groups took {:?}",
                start.elapsed()
            );
        }
    }
}

#[test]
fn other_clients_answered_while_pathological_keys_runs() {
    let server = deadbolt(&[]);
    let mut c = server.conn();
    // 10k keys of 40 bytes, all of them candidates for the pattern's first 34 groups.
    for batch in 0..10 {
        let mut args: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
        for i in 0..1000 {
            args.push(format!("{}{:06}", "a".repeat(34), batch * 1000 + i).into_bytes());
            args.push(b"v".to_vec());
        }
        assert_eq!(c.cmd(&args), b"+OK\r\n");
    }
    let mut other = server.conn();
    assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n");
    for pattern in [
        pathological(20),
        pathological(40),
        b"*a*a*a*a*a*a*a*a*a*a*b".to_vec(),
    ] {
        let start = Instant::now();
        c.send(&[b"KEYS".as_slice(), &pattern]);
        other.send(&["PING"]);
        // A backtracking matcher takes minutes on these (exponential in the stars); the
        // linear one takes milliseconds. The bound is far from both, so a loaded machine
        // cannot make it flake and an exponential matcher cannot pass.
        let pong = other.try_read_reply(Duration::from_secs(3));
        assert_eq!(
            pong.as_deref(),
            Some(b"+PONG\r\n".as_slice()),
            "no PONG within 3 s of KEYS {:?}",
            String::from_utf8_lossy(&pattern)
        );
        assert_eq!(c.read_reply(), b"*0\r\n");
        assert!(start.elapsed() < Duration::from_secs(3));
    }
}

#[test]
fn pathological_psubscribe_pattern_does_not_stall_publish() {
    let server = deadbolt(&[]);
    let mut sub = server.conn();
    let mut p = pathological(25);
    p.pop();
    p.extend_from_slice(b"[b]");
    sub.send(&[b"PSUBSCRIBE".as_slice(), &p]);
    assert!(sub.read_reply().starts_with(b"*3\r\n$10\r\npsubscribe\r\n"));
    let redis = redis_server(&[]);
    let mut pubc = server.conn();
    let mut rpub = redis.conn();
    let channel = vec![b'a'; 60];
    let start = Instant::now();
    assert_eq!(
        pubc.cmd(&[b"PUBLISH".as_slice(), &channel, b"m"]),
        rpub.cmd(&[b"PUBLISH".as_slice(), &channel, b"m"])
    );
    assert!(
        start.elapsed() < Duration::from_millis(500),
        "{:?}",
        start.elapsed()
    );
}
