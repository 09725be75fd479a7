//! RDB snapshots: files deadbolt writes load into redis-server 7.0 and pass redis-check-rdb,
//! files redis-server writes load into deadbolt, save points, SHUTDOWN, FLUSHALL, BGSAVE,
//! a failing disk (MISCONF), and corrupt files stopping the start.

use crate::common;

use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// Every type, both encodings where Redis has two, TTLs, several databases.
fn fill(c: &mut Conn) {
    let many: Vec<String> = (0..600).map(|i| format!("m{i}")).collect();
    let mut cmds: Vec<Vec<String>> = vec![
        vec!["SET".into(), "s".into(), "hello".into()],
        vec!["SET".into(), "n".into(), "-12345".into()],
        vec!["SET".into(), "long".into(), "x".repeat(400)],
        vec![
            "SET".into(),
            "lock:a".into(),
            "owner".into(),
            "PX".into(),
            "600000".into(),
        ],
        vec![
            "RPUSH".into(),
            "l".into(),
            "a".into(),
            "b".into(),
            "3".into(),
        ],
        vec![
            "SADD".into(),
            "ints".into(),
            "1".into(),
            "2".into(),
            "-3".into(),
        ],
        vec!["SADD".into(), "strs".into(), "a".into(), "b".into()],
        vec![
            "ZADD".into(),
            "z".into(),
            "1.5".into(),
            "a".into(),
            "-2".into(),
            "b".into(),
        ],
        vec!["HSET".into(), "h".into(), "f".into(), "v".into()],
        vec!["PFADD".into(), "hll".into(), "a".into(), "b".into()],
        vec![
            "XADD".into(),
            "st".into(),
            "1-1".into(),
            "a".into(),
            "1".into(),
            "b".into(),
            "2".into(),
        ],
        vec![
            "XADD".into(),
            "st".into(),
            "2-0".into(),
            "a".into(),
            "3".into(),
        ],
        vec![
            "XADD".into(),
            "st".into(),
            "3-0".into(),
            "c".into(),
            "5".into(),
        ],
        vec!["XDEL".into(), "st".into(), "2-0".into()],
        vec![
            "XGROUP".into(),
            "CREATE".into(),
            "st".into(),
            "g".into(),
            "0".into(),
        ],
        vec![
            "XREADGROUP".into(),
            "GROUP".into(),
            "g".into(),
            "alice".into(),
            "COUNT".into(),
            "1".into(),
            "STREAMS".into(),
            "st".into(),
            ">".into(),
        ],
        vec![
            "XGROUP".into(),
            "CREATECONSUMER".into(),
            "st".into(),
            "g".into(),
            "bob".into(),
        ],
        vec!["SELECT".into(), "5".into()],
        vec!["SET".into(), "in5".into(), "five".into()],
        vec!["SELECT".into(), "0".into()],
    ];
    let mut big_hash = vec!["HSET".to_string(), "bigh".into()];
    let mut big_zset = vec!["ZADD".to_string(), "bigz".into()];
    let mut big_set = vec!["SADD".to_string(), "bigs".into()];
    let mut big_list = vec!["RPUSH".to_string(), "bigl".into()];
    for (i, m) in many.iter().enumerate() {
        big_hash.extend([m.clone(), i.to_string()]);
        big_zset.extend([i.to_string(), m.clone()]);
        big_set.push(m.clone());
        big_list.push(m.clone());
    }
    cmds.extend([big_hash, big_zset, big_set, big_list]);
    for cmd in cmds {
        let r = c.cmd(&cmd);
        assert!(
            !r.starts_with(b"-"),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&r)
        );
    }
}

/// What both servers must answer the same after loading (TTL rounded to minutes).
fn observe(c: &mut Conn) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for cmd in [
        &["DBSIZE"][..],
        &["GET", "s"],
        &["GET", "n"],
        &["STRLEN", "long"],
        &["LRANGE", "l", "0", "-1"],
        &["SMEMBERS", "ints"],
        &["SCARD", "strs"],
        &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        &["HGETALL", "h"],
        &["PFCOUNT", "hll"],
        &["HLEN", "bigh"],
        &["HGET", "bigh", "m599"],
        &["ZSCORE", "bigz", "m300"],
        &["SCARD", "bigs"],
        &["LINDEX", "bigl", "599"],
        &["OBJECT", "ENCODING", "bigh"],
        &["OBJECT", "ENCODING", "h"],
        &["OBJECT", "ENCODING", "ints"],
        &["XRANGE", "st", "-", "+"],
        &["XINFO", "GROUPS", "st"],
        &["XPENDING", "st", "g"],
    ] {
        out.push(c.cmd(cmd));
    }
    let ttl = c.cmd_str(&["PTTL", "lock:a"]);
    let ms: i64 = ttl.trim_start_matches(':').trim().parse().unwrap();
    assert!((590_000..=600_000).contains(&ms), "{ttl}");
    c.cmd(&["SELECT", "5"]);
    out.push(c.cmd(&["GET", "in5"]));
    c.cmd(&["SELECT", "0"]);
    out
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !f() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn rdb_server(dir: &TempDir, extra: &[&str]) -> Server {
    let mut args = vec!["--dir", dir.0.to_str().unwrap()];
    args.extend_from_slice(extra);
    deadbolt(&args)
}

#[test]
fn deadbolt_snapshots_load_into_redis_and_pass_redis_check_rdb() {
    let dir = TempDir::new("rdb-out");
    let ours = rdb_server(&dir, &[]);
    let mut c = ours.conn();
    fill(&mut c);
    let expected = observe(&mut c);
    assert_eq!(c.cmd_str(&["SAVE"]), "+OK\r\n");
    let file = dir.0.join("dump.rdb");
    let check = Command::new("redis-check-rdb").arg(&file).output().unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(text.contains("RDB looks OK"), "{text}");
    assert!(text.contains("keys read"), "{text}");
    let redis = redis_server(&["--dir", dir.0.to_str().unwrap(), "--dbfilename", "dump.rdb"]);
    let got = observe(&mut redis.conn());
    let show = |v: &Vec<Vec<u8>>| {
        v.iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(show(&got), show(&expected));
}

#[test]
fn redis_snapshots_load_into_deadbolt() {
    let dir = TempDir::new("rdb-in");
    let d = dir.0.to_str().unwrap();
    let expected = {
        let redis = redis_server(&[
            "--dir",
            d,
            "--dbfilename",
            "dump.rdb",
            "--enable-debug-command",
            "yes",
        ]);
        let mut c = redis.conn();
        fill(&mut c);
        let out = observe(&mut c);
        // An expired key is skipped on load: Redis's active expiry is held off, so the file
        // has it.
        assert_eq!(c.cmd_str(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK\r\n");
        c.cmd(&["SET", "gone", "x", "PX", "50"]);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(c.cmd_str(&["SAVE"]), "+OK\r\n");
        out
    };
    let ours = rdb_server(&dir, &[]);
    ours.wait_log(
        "Done loading RDB, keys loaded: 16, keys expired: 1.",
        Duration::from_secs(10),
    );
    let mut c = ours.conn();
    // A loaded key's access clock is the load's, as a Redis object's is its creation's (not
    // the epoch, which would make it look idle for months).
    let key = c.cmd_str(&["RANDOMKEY"]);
    let key = key.lines().nth(1).unwrap_or("").to_string();
    let idle = c.cmd_str(&["OBJECT", "IDLETIME", &key]);
    let idle: i64 = idle
        .trim_start_matches(':')
        .trim_end()
        .parse()
        .unwrap_or(-1);
    assert!((0..=10).contains(&idle), "{key}: idle {idle}");
    assert_eq!(observe(&mut c), expected);
    let info = c.cmd_str(&["INFO", "persistence"]);
    assert!(info.contains("rdb_last_load_keys_loaded:16\r\n"), "{info}");
}

#[test]
fn save_points_bgsave_and_shutdown_keep_the_data_across_restarts() {
    let dir = TempDir::new("rdb-points");
    {
        let mut s = rdb_server(&dir, &["--save", "1 1"]);
        let mut c = s.conn();
        c.cmd(&["SET", "by-point", "1"]);
        wait_until("a save point fires", || {
            c.cmd_str(&["INFO", "persistence"])
                .contains("rdb_changes_since_last_save:0\r\n")
        });
        s.kill9();
    }
    {
        let s = rdb_server(&dir, &[]);
        let mut c = s.conn();
        assert_eq!(c.cmd_str(&["GET", "by-point"]), "$1\r\n1\r\n");
        // BGSAVE, then a crash.
        c.cmd(&["SET", "by-bgsave", "2"]);
        assert_eq!(c.cmd_str(&["BGSAVE"]), "+Background saving started\r\n");
        wait_until("BGSAVE ends", || {
            c.cmd_str(&["INFO", "persistence"])
                .contains("rdb_bgsave_in_progress:0\r\n")
        });
        let info = c.cmd_str(&["INFO", "persistence"]);
        assert!(info.contains("rdb_last_bgsave_status:ok\r\n"), "{info}");
        let mut s = s;
        s.kill9();
    }
    {
        let mut s = rdb_server(&dir, &["--save", "3600 1"]);
        let mut c = s.conn();
        assert_eq!(c.cmd_str(&["GET", "by-bgsave"]), "$1\r\n2\r\n");
        // SHUTDOWN with save points saves; SHUTDOWN NOSAVE would not.
        c.cmd(&["SET", "by-shutdown", "3"]);
        c.send(&["SHUTDOWN"]);
        assert!(s.wait_exit(Duration::from_secs(10)).is_some());
    }
    {
        let mut s = rdb_server(&dir, &[]);
        let mut c = s.conn();
        assert_eq!(c.cmd_str(&["GET", "by-shutdown"]), "$1\r\n3\r\n");
        c.cmd(&["SET", "lost", "4"]);
        c.send(&["SHUTDOWN", "NOSAVE"]);
        assert!(s.wait_exit(Duration::from_secs(10)).is_some());
    }
    {
        let mut s = rdb_server(&dir, &["--save", "3600 1"]);
        let mut c = s.conn();
        assert_eq!(c.cmd_str(&["GET", "lost"]), "$-1\r\n");
        // FLUSHALL with save points saves the empty dataset at once.
        assert_eq!(c.cmd_str(&["FLUSHALL"]), "+OK\r\n");
        s.kill9();
    }
    let s = rdb_server(&dir, &[]);
    assert_eq!(s.conn().cmd_str(&["DBSIZE"]), ":0\r\n");
}

#[test]
fn a_failing_disk_refuses_writes_while_save_points_are_set() {
    let dir = TempDir::new("rdb-misconf");
    let sub = dir.0.join("data");
    std::fs::create_dir_all(&sub).unwrap();
    let s = deadbolt(&["--dir", sub.to_str().unwrap(), "--save", "3600 1"]);
    let mut c = s.conn();
    std::fs::remove_dir_all(&sub).unwrap();
    assert_eq!(c.cmd_str(&["SAVE"]), "-ERR\r\n");
    c.cmd(&["BGSAVE"]);
    wait_until("BGSAVE fails", || {
        c.cmd_str(&["INFO", "persistence"])
            .contains("rdb_last_bgsave_status:err\r\n")
    });
    let refused = c.cmd_str(&["SET", "k", "v"]);
    assert!(
        refused.starts_with("-MISCONF Redis is configured to save RDB snapshots"),
        "{refused}"
    );
    assert!(c.cmd_str(&["GET", "k"]).starts_with("$-1"));
    // SHUTDOWN cannot save: it stays up unless forced.
    assert_eq!(
        c.cmd_str(&["SHUTDOWN"]),
        "-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
    );
    // The disk comes back: the next save succeeds and writes are accepted again.
    std::fs::create_dir_all(&sub).unwrap();
    assert_eq!(c.cmd_str(&["BGSAVE"]), "+Background saving started\r\n");
    wait_until("BGSAVE succeeds", || {
        c.cmd_str(&["INFO", "persistence"])
            .contains("rdb_last_bgsave_status:ok\r\n")
    });
    assert_eq!(c.cmd_str(&["SET", "k", "v"]), "+OK\r\n");
}

#[test]
fn corrupt_snapshots_stop_the_start_with_the_reason() {
    let dir = TempDir::new("rdb-bad");
    {
        let s = rdb_server(&dir, &[]);
        let mut c = s.conn();
        fill(&mut c);
        assert_eq!(c.cmd_str(&["SAVE"]), "+OK\r\n");
    }
    let file = dir.0.join("dump.rdb");
    let good = std::fs::read(&file).unwrap();
    for (what, bytes, needle) in [
        (
            "checksum",
            {
                let mut b = good.clone();
                let n = b.len();
                b[n - 1] ^= 0xff;
                b
            },
            "Wrong RDB checksum",
        ),
        (
            "truncated",
            good[..good.len() / 2].to_vec(),
            "Fatal error loading the DB",
        ),
        ("signature", b"NOTREDIS".to_vec(), "Wrong signature"),
    ] {
        std::fs::write(&file, &bytes).unwrap();
        let out = Command::new(deadbolt_bin())
            .args([
                "--port",
                "0",
                "--bind",
                "127.0.0.1",
                "--dir",
                dir.0.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{what}");
        let text = all_output(&out);
        assert!(text.contains(needle), "{what}: {text}");
    }
}

#[test]
fn save_and_bgsave_replies_as_redis() {
    let dir = TempDir::new("rdb-replies");
    let d = dir.0.to_str().unwrap();
    both_with(&["--dir", d], |s| {
        let mut c = s.conn();
        let mut t = vec![
            c.cmd(&["BGSAVE", "NOW"]),
            c.cmd(&["BGSAVE", "SCHEDULE", "x"]),
            c.cmd(&["SAVE", "x"]),
            c.cmd(&["MULTI"]),
            c.cmd(&["SAVE"]),
            c.cmd(&["EXEC"]),
            c.cmd(&["MULTI"]),
            c.cmd(&["BGSAVE"]),
            c.cmd(&["EXEC"]),
        ];
        // The scheduled save runs once the transaction is over.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let done = |c: &mut Conn| {
            let info = c.cmd_str(&["INFO", "persistence"]);
            info.contains("rdb_saves:1\r\n") && info.contains("rdb_bgsave_in_progress:0\r\n")
        };
        while !done(&mut c) {
            assert!(
                std::time::Instant::now() < deadline,
                "the scheduled BGSAVE never ran"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        t.push(c.cmd(&["SAVE"]));
        let before = c.cmd_str(&["LASTSAVE"]);
        assert!(before.starts_with(':'));
        t.push(c.cmd(&["SET", "x", "1"]));
        let info = c.cmd_str(&["INFO", "persistence"]);
        let line = info
            .lines()
            .find(|l| l.starts_with("rdb_changes_since_last_save"))
            .unwrap()
            .to_string();
        t.push(line.into_bytes());
        t
    });
}

/// A stream with a consumer group moves between deadbolt and redis-server by DUMP/RESTORE,
/// both ways (the same encoding the snapshot uses).
#[test]
fn streams_dump_and_restore_across_servers() {
    let ours = deadbolt(&[]);
    let redis = redis_server(&[]);
    let (mut a, mut b) = (ours.conn(), redis.conn());
    for c in [&mut a, &mut b] {
        fill(c);
    }
    let bulk = |r: Vec<u8>| {
        let at = r.iter().position(|&x| x == b'\n').unwrap() + 1;
        r[at..r.len() - 2].to_vec()
    };
    let from_ours = bulk(a.cmd(&["DUMP", "st"]));
    let from_redis = bulk(b.cmd(&["DUMP", "st"]));
    let restore = |c: &mut Conn, payload: &[u8]| c.cmd(&[&b"RESTORE"[..], b"moved", b"0", payload]);
    assert_eq!(restore(&mut b, &from_ours), b"+OK\r\n");
    assert_eq!(restore(&mut a, &from_redis), b"+OK\r\n");
    for cmd in [
        &["XRANGE", "moved", "-", "+"][..],
        &["XINFO", "GROUPS", "moved"],
        &["XPENDING", "moved", "g"],
        &["XLEN", "moved"],
    ] {
        assert_eq!(a.cmd(cmd), b.cmd(cmd), "{cmd:?}");
    }
    // A damaged stream payload is refused, not loaded half.
    let mut bad = from_ours.clone();
    let n = bad.len();
    bad[n - 20] ^= 0x55;
    let crc = {
        // Re-seal the checksum so only the body is wrong.
        let body = &bad[..n - 8];
        let sum = redis_crc64(body);
        sum.to_le_bytes()
    };
    bad[n - 8..].copy_from_slice(&crc);
    let r =
        String::from_utf8_lossy(&a.cmd(&[&b"RESTORE"[..], b"damaged", b"0", &bad])).into_owned();
    // (A flipped byte inside a string value can still be a valid stream.)
    assert!(
        r.starts_with("-ERR Bad data format") || r == "+OK\r\n",
        "{r}"
    );
}

/// Redis's crc64 (Jones, reflected), for re-sealing a payload in a test.
fn redis_crc64(data: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &b in data {
        crc ^= b as u64;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                crc >> 1
            };
        }
    }
    crc
}

const LIBRARY: &str =
    "#!lua name=locklib\nredis.register_function('hello', function() return 'hello' end)";

/// Function libraries travel in RDB files as Redis writes them: deadbolt's SAVE loads into
/// redis-server and back into deadbolt after a restart, and redis-server's file into deadbolt.
#[test]
fn function_libraries_travel_in_rdb_files_both_ways() {
    let dir = TempDir::new("rdb-functions");
    let d = dir.0.to_str().unwrap();
    {
        let ours = rdb_server(&dir, &[]);
        let mut c = ours.conn();
        assert_eq!(
            c.cmd_str(&["FUNCTION", "LOAD", LIBRARY]),
            "$7\r\nlocklib\r\n"
        );
        c.cmd(&["SET", "k", "v"]);
        assert_eq!(c.cmd_str(&["SAVE"]), "+OK\r\n");
    }
    let check = Command::new("redis-check-rdb")
        .arg(dir.0.join("dump.rdb"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(text.contains("RDB looks OK"), "{text}");
    for name in ["redis-server", "deadbolt"] {
        let s = if name == "deadbolt" {
            rdb_server(&dir, &[])
        } else {
            redis_server(&["--dir", d, "--dbfilename", "dump.rdb"])
        };
        let mut c = s.conn();
        assert_eq!(
            c.cmd_str(&["FCALL", "hello", "0"]),
            "$5\r\nhello\r\n",
            "{name}"
        );
        assert_eq!(c.cmd_str(&["GET", "k"]), "$1\r\nv\r\n", "{name}");
        if name == "redis-server" {
            // Redis writes the file deadbolt loads next.
            assert_eq!(c.cmd_str(&["FUNCTION", "DELETE", "locklib"]), "+OK\r\n");
            let other = LIBRARY
                .replace("locklib", "fromredis")
                .replace("register_function('hello'", "register_function('hi'");
            assert_eq!(
                c.cmd_str(&["FUNCTION", "LOAD", &other]),
                "$9\r\nfromredis\r\n"
            );
            assert_eq!(c.cmd_str(&["SAVE"]), "+OK\r\n");
            drop(c);
            drop(s);
            let ours = rdb_server(&dir, &[]);
            let mut c = ours.conn();
            assert_eq!(c.cmd_str(&["FCALL", "hi", "0"]), "$5\r\nhello\r\n");
            assert!(c
                .cmd_str(&["FCALL", "hello", "0"])
                .starts_with("-ERR Function not found"));
            assert_eq!(c.cmd_str(&["FUNCTION", "DELETE", "fromredis"]), "+OK\r\n");
            assert_eq!(
                c.cmd_str(&["FUNCTION", "LOAD", LIBRARY]),
                "$7\r\nlocklib\r\n"
            );
            assert_eq!(c.cmd_str(&["SAVE"]), "+OK\r\n");
        }
    }
}

/// DEBUG RELOAD with libraries, as Redis's functions test: NOFLUSH finds the library twice and
/// fails, NOFLUSH MERGE replaces it, a plain RELOAD keeps it.
#[test]
fn debug_reload_loads_function_libraries_as_redis() {
    let dirs = [TempDir::new("reload-ours"), TempDir::new("reload-redis")];
    let transcripts: Vec<Vec<String>> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            let args = [
                "--enable-debug-command",
                "yes",
                "--dir",
                dir.0.to_str().unwrap(),
            ];
            let s = if i == 0 {
                deadbolt(&args)
            } else {
                redis_server(&args)
            };
            let mut c = s.conn();
            let mut out = vec![c.cmd_str(&["FUNCTION", "LOAD", LIBRARY])];
            for reload in [
                &["DEBUG", "RELOAD"][..],
                &["DEBUG", "RELOAD", "NOFLUSH"],
                &["DEBUG", "RELOAD", "NOFLUSH", "MERGE"],
            ] {
                let r = c.cmd_str(reload);
                // Redis adds ", check server logs." to the error.
                out.push(
                    r.split(", check")
                        .next()
                        .unwrap_or("")
                        .trim_end()
                        .to_string(),
                );
                out.push(c.cmd_str(&["FCALL", "hello", "0"]));
            }
            out.push(c.cmd_str(&["FUNCTION", "LIST"]).len().to_string());
            out
        })
        .collect();
    assert_eq!(transcripts[0], transcripts[1]);
    assert!(transcripts[0][3].starts_with("-ERR Error trying to load the RDB dump"));
}
