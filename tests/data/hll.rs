//! HyperLogLog: seeded random differentials against a real redis-server (replies and the
//! exact stored bytes, across the sparse -> dense promotion), hostile corrupt values,
//! keyspace events, WATCH and an AOF restart.

use crate::common;

use common::{Conn, Server};
use std::time::{Duration, Instant};

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace("\r\n", "\\r\\n")
}

/// Sends every command before reading any reply (one round trip for a batch).
fn pipeline(c: &mut Conn, cmds: &[Vec<Vec<u8>>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for chunk in cmds.chunks(200) {
        for cmd in chunk {
            c.send(cmd);
        }
        for _ in chunk {
            out.push(c.read_reply());
        }
    }
    out
}

fn args(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

/// Runs the same commands on both servers and fails on the first reply that differs.
fn same(a: &mut Conn, b: &mut Conn, cmds: &[Vec<Vec<u8>>], what: &str) {
    let ra = pipeline(a, cmds);
    let rb = pipeline(b, cmds);
    for (i, (x, y)) in ra.iter().zip(&rb).enumerate() {
        assert!(
            x == y,
            "{what}: command {i} {:?}\n deadbolt: {}\n redis:    {}",
            cmds[i]
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>(),
            show(&x[..x.len().min(300)]),
            show(&y[..y.len().min(300)])
        );
    }
}

fn element(rng: &mut fastrand::Rng) -> Vec<u8> {
    let len = rng.usize(0..24);
    if rng.bool() {
        format!("e{}", rng.u32(0..20_000)).into_bytes()
    } else {
        (0..len).map(|_| rng.u8(..)).collect()
    }
}

#[test]
fn random_operations_match_redis_bytes() {
    let db = common::deadbolt(&[]);
    let redis = common::redis_server(&[]);
    let (mut a, mut b) = (db.conn(), redis.conn());
    let keys: [&[u8]; 4] = [b"h0", b"h1", b"h2", b"h3"];
    for seed in 0..12u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut cmds = vec![args(&[b"FLUSHALL"])];
        for _ in 0..60 {
            let k = keys[rng.usize(..keys.len())];
            match rng.u8(0..10) {
                0..=5 => {
                    let n = if rng.u8(0..8) == 0 {
                        rng.usize(200..1500)
                    } else {
                        rng.usize(0..20)
                    };
                    let mut c = args(&[b"PFADD", k]);
                    c.extend((0..n).map(|_| element(&mut rng)));
                    cmds.push(c);
                }
                6 => cmds.push(args(&[b"PFCOUNT", k])),
                7 => {
                    let mut c = args(&[b"PFCOUNT"]);
                    c.extend((0..rng.usize(2..5)).map(|_| keys[rng.usize(..4)].to_vec()));
                    cmds.push(c);
                }
                _ => {
                    let mut c = args(&[b"PFMERGE", k]);
                    c.extend((0..rng.usize(0..4)).map(|_| keys[rng.usize(..4)].to_vec()));
                    cmds.push(c);
                }
            }
            cmds.push(args(&[b"GET", k]));
        }
        for k in keys {
            cmds.push(args(&[b"PFCOUNT", k]));
            cmds.push(args(&[b"GET", k]));
        }
        same(&mut a, &mut b, &cmds, &format!("seed {seed}"));
    }
}

/// One element at a time, STRLEN after each: any difference in where the sparse form grows,
/// merges runs or turns dense (hll-sparse-max-bytes 3000) shows as a different length.
#[test]
fn sparse_growth_and_promotion_match_redis_step_by_step() {
    let db = common::deadbolt(&[]);
    let redis = common::redis_server(&[]);
    let (mut a, mut b) = (db.conn(), redis.conn());
    for seed in 0..3u64 {
        let mut rng = fastrand::Rng::with_seed(100 + seed);
        let mut cmds = vec![args(&[b"DEL", b"g"])];
        for _ in 0..2600 {
            cmds.push(args(&[b"PFADD", b"g", &rng.u64(..).to_le_bytes()]));
            cmds.push(args(&[b"STRLEN", b"g"]));
        }
        cmds.push(args(&[b"GET", b"g"]));
        cmds.push(args(&[b"PFCOUNT", b"g"]));
        same(&mut a, &mut b, &cmds, &format!("growth seed {seed}"));
    }
}

/// Valid HLLs with random bytes flipped, cut or appended, written with SET and then used:
/// deadbolt answers what Redis answers (INVALIDOBJ, WRONGTYPE or a count) and stores the
/// same bytes, and never crashes.
/// A sparse value whose last opcode is an XZERO cut to its first byte. Redis reads the byte
/// after the string for its second half: the sds terminator, but once a PFADD has split that
/// XZERO, a stale byte of the split sequence that outlives the command. deadbolt reads 0
/// there every time, so from the second write on the two may differ (never out of bounds).
fn ends_in_cut_xzero(v: &[u8]) -> bool {
    if v.len() < 16 || v[4] != 1 {
        return false;
    }
    let mut p = 16;
    while p < v.len() {
        if v[p] & 0xc0 == 0x40 {
            if p + 1 == v.len() {
                return true;
            }
            p += 2;
        } else {
            p += 1;
        }
    }
    false
}

#[test]
fn corrupted_values_match_redis_and_never_crash() {
    let db = common::deadbolt(&[]);
    let redis = common::redis_server(&[]);
    let (mut a, mut b) = (db.conn(), redis.conn());
    // Base values taken from Redis itself: an empty, a small and a larger sparse HLL.
    let mut bases = Vec::new();
    for n in [0usize, 5, 150, 600] {
        let mut c = args(&[b"PFADD", b"base"]);
        c.extend((0..n).map(|i| format!("b{i}").into_bytes()));
        b.cmd(&[b"DEL".to_vec(), b"base".to_vec()]);
        b.cmd(&c);
        let got = b.cmd(&[b"GET", b"base" as &[u8]]);
        let start = got.iter().position(|&c| c == b'\n').unwrap() + 1;
        bases.push(got[start..got.len() - 2].to_vec());
    }
    let mut rng = fastrand::Rng::with_seed(7);
    let mut ran = 0;
    for round in 0..2000 {
        let mut v = bases[rng.usize(..bases.len())].clone();
        match rng.u8(0..4) {
            0 => {
                let cut = rng.usize(16..=v.len());
                v.truncate(cut);
            }
            1 => {
                for _ in 0..rng.usize(1..4) {
                    let i = rng.usize(16..v.len());
                    v[i] = rng.u8(..);
                }
            }
            2 => v.extend((0..rng.usize(1..6)).map(|_| rng.u8(..))),
            _ => {
                let i = rng.usize(16..v.len());
                v.remove(i);
            }
        }
        if ends_in_cut_xzero(&v) {
            continue;
        }
        let mut add = args(&[b"PFADD", b"c"]);
        add.extend((0..rng.usize(1..40)).map(|i| format!("x{round}-{i}").into_bytes()));
        let cmds = vec![
            args(&[b"SET", b"c", &v]),
            args(&[b"SET", b"ok", &bases[2]]),
            args(&[b"PFCOUNT", b"c"]),
            args(&[b"GET", b"c"]),
            args(&[b"PFCOUNT", b"c", b"ok"]),
            args(&[b"PFMERGE", b"m", b"ok", b"c"]),
            args(&[b"GET", b"m"]),
            add,
            args(&[b"GET", b"c"]),
            args(&[b"PFCOUNT", b"c"]),
            args(&[b"PFMERGE", b"c", b"ok"]),
            args(&[b"GET", b"c"]),
            args(&[b"DEL", b"m"]),
        ];
        same(&mut a, &mut b, &cmds, &format!("corrupt round {round}"));
        ran += 1;
    }
    assert!(ran > 1500, "only {ran} rounds compared");
    assert_eq!(a.cmd(&["PING"]), b"+PONG\r\n");
}

fn subscriber(s: &Server) -> Conn {
    let mut sub = s.conn();
    sub.cmd(&["SUBSCRIBE", "__keyevent@0__:pfadd"]);
    sub.cmd(&["PSUBSCRIBE", "__keyspace@0__:*"]);
    sub
}

/// Reads pushed messages until `want` arrive or the deadline passes.
fn events(sub: &mut Conn, want: usize) -> Vec<String> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < want && Instant::now() < deadline {
        if let Some(r) = sub.try_read_reply(Duration::from_millis(50)) {
            got.push(show(&r));
        }
    }
    // Anything further (an event that should not have fired) is a failure too.
    if let Some(r) = sub.try_read_reply(Duration::from_millis(100)) {
        got.push(show(&r));
    }
    got
}

#[test]
fn keyspace_events_match_redis() {
    let mut transcripts = Vec::new();
    for (name, s) in common::deadbolt_and_redis(&["--notify-keyspace-events", "KEAn"]) {
        let mut c = s.conn();
        let mut sub = subscriber(&s);
        // PFADD that changes (new key: `new` first), PFADD that changes nothing, PFCOUNT
        // storing its cache (no event), PFMERGE (announced as `pfadd`), failing commands.
        c.cmd(&["PFADD", "k", "a", "b"]);
        c.cmd(&["PFADD", "k", "a"]);
        c.cmd(&["PFCOUNT", "k"]);
        c.cmd(&["PFMERGE", "dest", "k"]);
        let bad: &[u8] = b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x00";
        c.cmd(&[b"SET" as &[u8], b"bad", bad]);
        c.cmd(&["PFADD", "bad", "a"]);
        // new + pfadd on k (keyspace + keyevent), the same for dest, new + set on bad
        // (keyspace only).
        transcripts.push((name, events(&mut sub, 8)));
    }
    assert_eq!(transcripts[0].1, transcripts[1].1, "{transcripts:?}");
    assert_eq!(transcripts[0].1.len(), 8, "{transcripts:?}");
    assert!(
        transcripts[0].1[0].ends_with("new\\r\\n"),
        "{transcripts:?}"
    );
    assert!(transcripts[0].1[2].contains("__keyevent@0__:pfadd"));
}

#[test]
fn pfcount_storing_its_cache_breaks_watch_like_redis() {
    for (name, s) in common::deadbolt_and_redis(&[]) {
        let mut c = s.conn();
        let mut other = s.conn();
        c.cmd(&["PFADD", "w", "a", "b", "c"]);
        // Stale cache: the other client's PFCOUNT writes it, which is a modification.
        assert_eq!(c.cmd(&["WATCH", "w"]), b"+OK\r\n");
        assert_eq!(other.cmd(&["PFCOUNT", "w"]), b":3\r\n");
        c.cmd(&["MULTI"]);
        c.cmd(&["PING"]);
        assert_eq!(c.cmd(&["EXEC"]), b"*-1\r\n", "{name}");
        // Fresh cache: nothing is written, the transaction runs.
        assert_eq!(c.cmd(&["WATCH", "w"]), b"+OK\r\n");
        assert_eq!(other.cmd(&["PFCOUNT", "w"]), b":3\r\n");
        c.cmd(&["MULTI"]);
        c.cmd(&["PING"]);
        assert_eq!(c.cmd(&["EXEC"]), b"*1\r\n+PONG\r\n", "{name}");
        // A PFADD that changes no register touches nothing either.
        assert_eq!(c.cmd(&["WATCH", "w"]), b"+OK\r\n");
        assert_eq!(other.cmd(&["PFADD", "w", "a"]), b":0\r\n");
        c.cmd(&["MULTI"]);
        c.cmd(&["PING"]);
        assert_eq!(c.cmd(&["EXEC"]), b"*1\r\n+PONG\r\n", "{name}");
    }
}

#[test]
fn hll_values_survive_an_aof_restart() {
    let dir = std::env::temp_dir().join(format!(
        "deadbolt-hll-aof-{}-{}",
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap().to_string();
    let opts = [
        "--dir",
        &d,
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ];
    let mut s = common::deadbolt(&opts);
    let mut c = s.conn();
    let mut add = vec!["PFADD".to_string(), "dense".to_string()];
    add.extend((0..3000).map(|i| format!("d{i}")));
    c.cmd(&add);
    c.cmd(&["PFADD", "sparse", "a", "b", "c"]);
    c.cmd(&["PFCOUNT", "sparse"]); // stores the cache: logged too
    c.cmd(&["PFMERGE", "merged", "sparse", "dense"]);
    let before: Vec<Vec<u8>> = ["dense", "sparse", "merged"]
        .iter()
        .map(|k| c.cmd(&["GET", k]))
        .collect();
    assert!(before[1].windows(4).any(|w| w == b"HYLL"));
    s.kill9();
    let s = common::deadbolt(&opts);
    let mut c = s.conn();
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.cmd_str(&["INFO", "persistence"]).contains("loading:1") {
        assert!(Instant::now() < deadline, "still loading");
        std::thread::sleep(Duration::from_millis(10));
    }
    let after: Vec<Vec<u8>> = ["dense", "sparse", "merged"]
        .iter()
        .map(|k| c.cmd(&["GET", k]))
        .collect();
    assert_eq!(before, after);
    assert_eq!(c.cmd(&["PFCOUNT", "sparse"]), b":3\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Multi-megabyte client-written "sparse" values: every command stays bounded (each walk
/// stops at the register it needs or passes the string once) and answers as Redis does.
#[test]
fn huge_corrupt_sparse_values_match_redis() {
    let db = common::deadbolt(&[]);
    let redis = common::redis_server(&[]);
    let (mut a, mut b) = (db.conn(), redis.conn());
    let mut hdr = b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80".to_vec();
    let ones = [hdr.clone(), vec![0u8; 2 << 20]].concat();
    let xzeros = [hdr.clone(), [0x7f, 0xff].repeat(1 << 20)].concat();
    hdr.extend([0x7f, 0xfe]);
    let nearly = [hdr, vec![0x80; 3 << 20]].concat();
    let start = Instant::now();
    for v in [ones, xzeros, nearly] {
        let mut add = args(&[b"PFADD", b"big"]);
        add.extend((0..300).map(|i| format!("h{i}").into_bytes()));
        let cmds = vec![
            args(&[b"SET", b"big", &v]),
            add,
            args(&[b"STRLEN", b"big"]),
            args(&[b"PFCOUNT", b"big"]),
            args(&[b"PFCOUNT", b"big", b"none"]),
            args(&[b"PFMERGE", b"out", b"big"]),
            args(&[b"EXISTS", b"out"]),
            args(&[
                b"EVAL",
                b"return redis.sha1hex(redis.call('get','big'))",
                b"0",
            ]),
        ];
        same(&mut a, &mut b, &cmds, "huge value");
    }
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
}

/// PFDEBUG DECODE of a client-written multi-megabyte "sparse" value answers INVALIDOBJ
/// instead of building a reply several times its size (Redis would build it whole); values
/// of at most 16384 opcodes, as every sound HLL is, decode as in Redis (corpus).
#[test]
fn pfdebug_decode_of_a_huge_value_is_bounded() {
    let db = common::deadbolt(&[]);
    let mut c = db.conn();
    let v = [
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80".to_vec(),
        vec![0u8; 4 << 20],
    ]
    .concat();
    assert_eq!(c.cmd(&[b"SET" as &[u8], b"big", &v]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&["PFDEBUG", "DECODE", "big"]),
        b"-INVALIDOBJ Corrupted HLL object detected\r\n"
    );
    let ok = [
        b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80".to_vec(),
        vec![0u8; 16384],
    ]
    .concat();
    c.cmd(&[b"SET" as &[u8], b"ok", &ok]);
    let r = c.cmd(&["PFDEBUG", "DECODE", "ok"]);
    assert!(r.starts_with(b"$65535\r\nz:1 z:1 "), "{}", show(&r[..40]));
}

/// PFDEBUG echoes an unknown subcommand: CR and LF become spaces and a NUL ends it, as in
/// redis-server, so a client cannot inject a reply line.
#[test]
fn pfdebug_unknown_subcommand_cannot_inject_lines() {
    for (name, s) in common::deadbolt_and_redis(&[]) {
        let mut c = s.conn();
        c.cmd(&["PFADD", "k", "a"]);
        assert_eq!(
            c.cmd(&["PFDEBUG", "a\r\nb", "k"]),
            b"-ERR Unknown PFDEBUG subcommand 'a  b'\r\n",
            "{name}"
        );
        assert_eq!(
            c.cmd(&["PFDEBUG", "a\0b", "k"]),
            b"-ERR Unknown PFDEBUG subcommand 'a'\r\n",
            "{name}"
        );
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n", "{name}");
    }
}
