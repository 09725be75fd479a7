//! The append-only file: crash recovery, absolute deadlines, torn and corrupt logs, rewrites,
//! loading, and the lock-restart-delay safety window.

use crate::common;

use common::TempDir;

use common::{resp_cmd, Server};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn start(dir: &Path, fsync: &str, extra: &[&str]) -> Server {
    common::deadbolt_with_aof(dir, fsync, extra)
}

fn int(reply: Vec<u8>) -> i64 {
    String::from_utf8(reply)
        .unwrap()
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap()
}

fn incr_file(dir: &Path) -> PathBuf {
    let aofdir = dir.join("appendonlydir");
    let manifest = std::fs::read_to_string(aofdir.join("appendonly.aof.manifest")).unwrap();
    let name = manifest
        .lines()
        .rfind(|l| l.ends_with("type i"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_string();
    aofdir.join(name)
}

#[test]
fn acknowledged_writes_survive_kill_with_their_deadlines() {
    let dir = TempDir::new("aof-basic");
    let mut s = start(&dir.0, "always", &[]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd(&["SET", "lock:a", "owner-1", "NX", "PX", "60000"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["HINCRBY", "redisson", "uuid:1", "2"]), b":2\r\n");
    assert_eq!(c.cmd(&["PEXPIRE", "redisson", "45000"]), b":1\r\n");
    assert_eq!(c.cmd(&["SET", "gone", "x"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["DEL", "gone"]), b":1\r\n");
    assert_eq!(c.cmd(&["SELECT", "3"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "in3", "v"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SELECT", "0"]), b"+OK\r\n");
    let deadline_a = int(c.cmd(&["PEXPIRETIME", "lock:a"]));
    let deadline_h = int(c.cmd(&["PEXPIRETIME", "redisson"]));
    s.kill9();
    let s = start(&dir.0, "always", &[]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["GET", "lock:a"]), b"$7\r\nowner-1\r\n");
    assert_eq!(
        int(c.cmd(&["PEXPIRETIME", "lock:a"])),
        deadline_a,
        "original deadline, not a fresh TTL"
    );
    assert_eq!(c.cmd(&["HGET", "redisson", "uuid:1"]), b"$1\r\n2\r\n");
    assert_eq!(int(c.cmd(&["PEXPIRETIME", "redisson"])), deadline_h);
    assert_eq!(c.cmd(&["EXISTS", "gone"]), b":0\r\n");
    assert_eq!(c.cmd(&["SELECT", "3"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["GET", "in3"]), b"$1\r\nv\r\n");
    let info = c.cmd_str(&["INFO", "persistence"]);
    assert!(
        info.contains("aof_enabled:1\r\n") && info.contains("aof_last_write_status:ok\r\n"),
        "{info}"
    );
}

#[test]
fn locks_that_expired_during_downtime_stay_expired() {
    let dir = TempDir::new("aof-expired");
    let mut s = start(&dir.0, "always", &[]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["SET", "short", "v", "PX", "150"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "long", "v", "PX", "60000"]), b"+OK\r\n");
    s.kill9();
    // Downtime longer than the short lease: replaying must not grant it a fresh 150 ms.
    std::thread::sleep(Duration::from_millis(250));
    let s = start(&dir.0, "always", &[]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["EXISTS", "short"]), b":0\r\n");
    assert_eq!(c.cmd(&["EXISTS", "long"]), b":1\r\n");
}

#[test]
fn scripts_and_multi_effects_are_logged_atomically_as_units() {
    // A unit touching several keys is one MULTI/EXEC block in the log; cutting the log inside
    // the block drops the whole unit on load.
    let dir = TempDir::new("aof-units");
    let mut s = start(&dir.0, "always", &[]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["MSET", "a", "1", "b", "2"]), b"+OK\r\n");
    s.kill9();
    let text = std::fs::read(incr_file(&dir.0)).unwrap();
    let text = String::from_utf8_lossy(&text);
    assert!(
        text.contains("*1\r\n$5\r\nMULTI\r\n") && text.ends_with("*1\r\n$4\r\nEXEC\r\n"),
        "{text:?}"
    );
    // Tear the last EXEC off: neither key may appear.
    let path = incr_file(&dir.0);
    let data = std::fs::read(&path).unwrap();
    std::fs::write(&path, &data[..data.len() - 5]).unwrap();
    let s = start(&dir.0, "always", &[]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["EXISTS", "a", "b"]), b":0\r\n");
}

#[test]
fn torn_tail_is_truncated_and_loaded() {
    let dir = TempDir::new("aof-torn");
    let mut s = start(&dir.0, "always", &[]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["SET", "kept", "v"]), b"+OK\r\n");
    s.kill9();
    let path = incr_file(&dir.0);
    let good_len = std::fs::metadata(&path).unwrap().len();
    let mut data = std::fs::read(&path).unwrap();
    data.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$4\r\ntorn\r\n$5\r\nval");
    std::fs::write(&path, &data).unwrap();
    // aof-load-truncated no: refuses to start, naming the offset.
    let out = std::process::Command::new(common::deadbolt_bin())
        .args([
            "--port",
            "0",
            "--dir",
            dir.0.to_str().unwrap(),
            "--appendonly",
            "yes",
            "--aof-load-truncated",
            "no",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    // Said once, in the log (standard output here), as Redis does.
    let err = common::all_output(&out);
    assert!(
        err.contains(&format!("at offset {good_len}")) && err.contains("aof-load-truncated"),
        "{err}"
    );
    // Default (yes): loads what is whole and cuts the torn tail off.
    let s = start(&dir.0, "always", &[]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["GET", "kept"]), b"$1\r\nv\r\n");
    assert_eq!(c.cmd(&["EXISTS", "torn"]), b":0\r\n");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good_len);
    assert_eq!(c.cmd(&["SET", "after", "v"]), b"+OK\r\n");
}

#[test]
fn corrupt_middle_stops_startup_with_the_offset() {
    let dir = TempDir::new("aof-corrupt");
    let mut s = start(&dir.0, "always", &[]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["SET", "a", "1"]), b"+OK\r\n");
    s.kill9();
    let path = incr_file(&dir.0);
    let mut data = std::fs::read(&path).unwrap();
    let at = data.len();
    data.extend_from_slice(b"garbage here\r\n");
    data.extend_from_slice(&resp_cmd(&["SET", "b", "2"]));
    std::fs::write(&path, &data).unwrap();
    let out = std::process::Command::new(common::deadbolt_bin())
        .args([
            "--port",
            "0",
            "--dir",
            dir.0.to_str().unwrap(),
            "--appendonly",
            "yes",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    // Said once, in the log (standard output here), as Redis does.
    let err = common::all_output(&out);
    assert!(err.contains(&format!("at offset {at}")), "{err}");
}

#[test]
fn rewrite_under_load_loses_nothing_and_bounds_the_file() {
    let dir = TempDir::new("aof-rewrite");
    let mut s = start(&dir.0, "everysec", &[]);
    let mut c = s.conn();
    // The same 200 keys overwritten many times: the log grows, the dataset does not.
    for round in 0..25 {
        let mut req = Vec::new();
        for k in 0..200 {
            req.extend(resp_cmd(&[
                "SET",
                &format!("k{k}"),
                &format!("v{round}"),
                "PX",
                "600000",
            ]));
        }
        c.send_raw(&req);
        for _ in 0..200 {
            assert_eq!(c.read_reply(), b"+OK\r\n");
        }
        if round == 12 {
            assert_eq!(
                c.cmd(&["BGREWRITEAOF"]),
                b"+Background append only file rewriting started\r\n"
            );
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while c
        .cmd_str(&["INFO", "persistence"])
        .contains("aof_rewrite_in_progress:1")
    {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    // A second rewrite compacts everything written during the first.
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        b"+Background append only file rewriting started\r\n"
    );
    while c
        .cmd_str(&["INFO", "persistence"])
        .contains("aof_rewrite_in_progress:1")
    {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    let info = c.cmd_str(&["INFO", "persistence"]);
    assert!(
        info.contains("aof_rewrites:2\r\n") && info.contains("aof_last_bgrewrite_status:ok"),
        "{info}"
    );
    let total: u64 = std::fs::read_dir(dir.0.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(total < 40_000, "log not compacted: {total} bytes");
    s.kill9();
    let s = start(&dir.0, "everysec", &[]);
    let mut c = s.conn();
    for k in 0..200 {
        assert_eq!(c.cmd(&["GET", &format!("k{k}")]), b"$3\r\nv24\r\n");
    }
}

#[test]
fn clients_get_loading_while_the_log_loads() {
    let dir = TempDir::new("aof-loading");
    let aofdir = dir.0.join("appendonlydir");
    std::fs::create_dir_all(&aofdir).unwrap();
    std::fs::write(
        aofdir.join("appendonly.aof.manifest"),
        "file appendonly.aof.1.incr.aof seq 1 type i\n",
    )
    .unwrap();
    let mut data = Vec::new();
    for i in 0..300_000 {
        data.extend(resp_cmd(&["SET", &format!("key:{i}"), "value"]));
    }
    std::fs::write(aofdir.join("appendonly.aof.1.incr.aof"), &data).unwrap();
    let s = common::deadbolt(&["--dir", dir.0.to_str().unwrap(), "--appendonly", "yes"]);
    let mut c = s.conn();
    let mut saw_loading = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = c.cmd_str(&["DBSIZE"]);
        if r == "-LOADING Redis is loading the dataset in memory\r\n" {
            saw_loading = true;
        } else {
            assert_eq!(r, ":300000\r\n");
            break;
        }
        assert!(Instant::now() < deadline);
    }
    assert!(saw_loading, "the log loaded before any client could ask");
}

#[test]
fn lock_restart_delay_refuses_writes_after_an_amnesiac_start() {
    // No persistence: this node may have forgotten granted locks, so it refuses to grant any
    // for the configured window.
    let s = common::deadbolt(&["--lock-restart-delay", "400"]);
    let mut c = s.conn();
    let started = Instant::now();
    let r = c.cmd_str(&["SET", "lock:x", "me", "NX", "PX", "1000"]);
    assert!(r.starts_with("-TRYAGAIN Writes are refused for "), "{r}");
    assert_eq!(c.cmd(&["GET", "lock:x"]), b"$-1\r\n", "reads work");
    while started.elapsed() < Duration::from_millis(450) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        c.cmd(&["SET", "lock:x", "me", "NX", "PX", "1000"]),
        b"+OK\r\n"
    );
    // With appendfsync always nothing acknowledged can be lost: no delay.
    let dir = TempDir::new("aof-delay");
    let s = start(&dir.0, "always", &["--lock-restart-delay", "60000"]);
    assert_eq!(s.conn().cmd(&["SET", "k", "v"]), b"+OK\r\n");
}

/// The delay refuses new client writes only: the log's own writes, acknowledged before the
/// restart, are all loaded (they were once refused with TRYAGAIN and silently dropped).
#[test]
fn lock_restart_delay_never_refuses_the_logs_own_writes() {
    let dir = TempDir::new("aof-delay-load");
    {
        let s = start(&dir.0, "everysec", &[]);
        let mut c = s.conn();
        assert_eq!(c.cmd(&["SET", "lock:a", "me", "PX", "600000"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["SET", "plain", "v"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
        c.cmd(&["SET", "m1", "1"]);
        c.cmd(&["SET", "m2", "2"]);
        assert_eq!(c.cmd(&["EXEC"]), b"*2\r\n+OK\r\n+OK\r\n");
        c.send(&["SHUTDOWN"]);
        assert!(c.is_closed(Duration::from_secs(10)));
    }
    let s = start(&dir.0, "everysec", &["--lock-restart-delay", "60000"]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["DBSIZE"]), b":4\r\n");
    assert_eq!(c.cmd(&["GET", "lock:a"]), b"$2\r\nme\r\n");
    assert_eq!(
        c.cmd(&["MGET", "plain", "m1", "m2"]),
        b"*3\r\n$1\r\nv\r\n$1\r\n1\r\n$1\r\n2\r\n"
    );
    // ...while the window still refuses clients.
    let r = c.cmd_str(&["SET", "lock:b", "me", "NX", "PX", "1000"]);
    assert!(r.starts_with("-TRYAGAIN Writes are refused for "), "{r}");
}

#[test]
fn crash_test_every_acknowledged_lock_survives_sigkill() {
    let dir = TempDir::new("aof-crash");
    // (key, owner, deadline if it could be read before the kill)
    let mut acknowledged: Vec<(String, String, Option<i64>)> = Vec::new();
    let mut refused: Vec<String> = Vec::new();
    let rounds = 5;
    for round in 0..rounds {
        let mut s = start(&dir.0, "always", &[]);
        // Everything acknowledged in earlier rounds is there, with its owner and deadline.
        let mut check = s.conn();
        for (key, owner, deadline) in &acknowledged {
            assert_eq!(
                check.cmd_str(&["GET", key]),
                format!("${}\r\n{owner}\r\n", owner.len()),
                "round {round}: {key}"
            );
            if let Some(d) = deadline {
                assert_eq!(
                    int(check.cmd(&["PEXPIRETIME", key])),
                    *d,
                    "round {round}: {key}"
                );
            }
        }
        for key in &refused {
            let owner = check.cmd_str(&["GET", key]);
            assert!(
                !owner.contains("intruder"),
                "refused acquisition reappeared: {key} {owner}"
            );
        }
        // Writers at full speed on several connections; the kill lands at a random moment.
        let port = s.port;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut writers = Vec::new();
        for w in 0..4 {
            let stop = stop.clone();
            writers.push(std::thread::spawn(move || {
                let mut c = common::Conn::connect(port);
                let mut acked = Vec::new();
                let mut refused = Vec::new();
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let key = format!("lock:{round}:{w}:{i}");
                    let owner = format!("owner-{round}-{w}-{i}");
                    if c.stream
                        .write_all(&resp_cmd(&["SET", &key, &owner, "NX", "PX", "600000"]))
                        .is_err()
                    {
                        break;
                    }
                    match c.try_read_reply(Duration::from_secs(5)) {
                        Some(r) if r == b"+OK\r\n" => {
                            acked.push((key.clone(), owner.clone(), None));
                            // A second client trying the same lock must be refused, and stay refused.
                            if c.stream
                                .write_all(&resp_cmd(&[
                                    "SET", &key, "intruder", "NX", "PX", "600000",
                                ]))
                                .is_err()
                            {
                                break;
                            }
                            match c.try_read_reply(Duration::from_secs(5)) {
                                Some(r) if r == b"$-1\r\n" => refused.push(key.clone()),
                                Some(r) => panic!(
                                    "second acquisition not refused: {:?}",
                                    String::from_utf8_lossy(&r)
                                ),
                                None => {}
                            }
                            if c.stream
                                .write_all(&resp_cmd(&["PEXPIRETIME", &key]))
                                .is_err()
                            {
                                break;
                            }
                            match c.try_read_reply(Duration::from_secs(5)) {
                                Some(r) => {
                                    if let Some(last) = acked.last_mut() {
                                        last.2 = Some(int(r));
                                    }
                                }
                                None => break,
                            }
                        }
                        _ => break,
                    }
                    i += 1;
                }
                (acked, refused)
            }));
        }
        std::thread::sleep(Duration::from_millis(fastrand::u64(100..400)));
        s.kill9();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in writers {
            let (a, r) = w.join().unwrap();
            acknowledged.extend(a);
            refused.extend(r);
        }
    }
    let s = start(&dir.0, "always", &[]);
    let mut check = s.conn();
    for (key, owner, deadline) in &acknowledged {
        assert_eq!(
            check.cmd_str(&["GET", key]),
            format!("${}\r\n{owner}\r\n", owner.len())
        );
        if let Some(d) = deadline {
            assert_eq!(int(check.cmd(&["PEXPIRETIME", key])), *d);
        }
    }
    assert!(
        acknowledged.len() > 100,
        "too few acquisitions to mean anything: {}",
        acknowledged.len()
    );
    println!("crash test: {rounds} SIGKILL rounds, {} acknowledged locks all recovered, {} refused acquisitions never reappeared", acknowledged.len(), refused.len());
}

#[test]
fn every_type_survives_restart_and_rewrite() {
    let dir = TempDir::new("aof-types");
    let mut s = start(&dir.0, "always", &[]);
    let mut c = s.conn();
    let setup: &[&[&str]] = &[
        &["RPUSH", "queue", "a", "b", "c"],
        &["LPOP", "queue"],
        &["ZADD", "timeouts", "1.5", "x", "-inf", "y", "0.1", "z"],
        &["SADD", "members", "m1", "m2"],
        &["HSET", "h", "f", "v"],
        &["PEXPIRE", "queue", "600000"],
        &["MULTI"],
        &["SET", "t1", "1"],
        &["INCR", "t1"],
        &["EXEC"],
    ];
    for cmd in setup {
        let r = c.cmd_str(cmd);
        assert!(!r.starts_with('-'), "{cmd:?}: {r}");
    }
    let check = |c: &mut common::Conn| {
        assert_eq!(
            c.cmd(&["LRANGE", "queue", "0", "-1"]),
            b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n"
        );
        assert_eq!(
            c.cmd(&["ZRANGE", "timeouts", "0", "-1", "WITHSCORES"]),
            b"*6\r\n$1\r\ny\r\n$4\r\n-inf\r\n$1\r\nz\r\n$19\r\n0.10000000000000001\r\n$1\r\nx\r\n$3\r\n1.5\r\n"
        );
        assert_eq!(c.cmd(&["SCARD", "members"]), b":2\r\n");
        assert_eq!(c.cmd(&["GET", "t1"]), b"$1\r\n2\r\n");
        assert!(int(c.cmd(&["PTTL", "queue"])) > 500_000);
    };
    check(&mut c);
    s.kill9();
    let s = start(&dir.0, "always", &[]);
    let mut c = s.conn();
    check(&mut c);
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        b"+Background append only file rewriting started\r\n"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while c
        .cmd_str(&["INFO", "persistence"])
        .contains("aof_rewrite_in_progress:1")
    {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(s);
    let s = start(&dir.0, "always", &[]);
    check(&mut s.conn());
}

/// Everything a client can read back about every key of every database, in an order that does
/// not depend on the server's iteration order.
fn dataset(c: &mut common::Conn) -> Vec<String> {
    let mut out = Vec::new();
    for db in 0..16 {
        c.cmd(&["SELECT", &db.to_string()]);
        let listing = String::from_utf8_lossy(&c.cmd(&["KEYS", "*"])).into_owned();
        let mut names: Vec<String> = listing
            .split("\r\n")
            .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
            .map(str::to_string)
            .collect();
        names.sort();
        for k in names {
            let ty = c.cmd_str(&["TYPE", &k]);
            let read: Vec<&str> = match ty.trim() {
                "+string" => vec!["GET", &k],
                "+list" => vec!["LRANGE", &k, "0", "-1"],
                "+zset" => vec!["ZRANGE", &k, "0", "-1", "WITHSCORES"],
                "+set" => vec!["SORT", &k, "ALPHA"],
                "+hash" => vec!["HGETALL", &k],
                other => panic!("{k}: {other}"),
            };
            let mut value = c.cmd_str(&read);
            if ty.trim() == "+hash" {
                // Field order is the server's: compare as a sorted set of lines.
                let mut lines: Vec<&str> = value.split("\r\n").collect();
                lines.sort();
                value = lines.join("|");
            }
            let at = c.cmd_str(&["PEXPIRETIME", &k]);
            out.push(format!("{db} {k} {} {value:?} {}", ty.trim(), at.trim()));
        }
    }
    c.cmd(&["SELECT", "0"]);
    out
}

/// The store records every change itself (store/change.rs): whatever a command, a transaction
/// or a script does, the log replays to the very same dataset, including what no handler
/// announces (SWAPDB, FLUSHDB, keys expired by a lookup, a BITFIELD cut short).
#[test]
fn every_write_replays_to_the_same_dataset() {
    let dir = TempDir::new("aof-record");
    let mut s = start(&dir.0, "always", &[]);
    let mut c = s.conn();
    let far = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 3_600_000)
        .to_string();
    let script: &[&[&str]] = &[
        &["SET", "s", "v", "PXAT", &far],
        &["SET", "gone", "x", "PX", "1"],
        &["APPEND", "s", "w"],
        &["SETRANGE", "r", "3", "abc"],
        &["INCRBYFLOAT", "f", "1.5"],
        &["SETBIT", "b", "100", "1"],
        &[
            "BITFIELD", "bf", "SET", "u8", "0", "255", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "1",
        ],
        &[
            "BITFIELD", "bf2", "OVERFLOW", "FAIL", "INCRBY", "u2", "100", "9",
        ],
        &["PFADD", "hll", "a", "b", "c"],
        &["PFCOUNT", "hll"],
        &["RPUSH", "l", "1", "2", "3", "4"],
        &["LPOP", "l"],
        &["LMOVE", "l", "l2", "LEFT", "RIGHT"],
        &["LTRIM", "l", "0", "0"],
        &["HSET", "h", "a", "1", "b", "2"],
        &["HINCRBYFLOAT", "h", "a", "0.25"],
        &["HDEL", "h", "b"],
        &["SADD", "st", "x", "y", "z"],
        &["SREM", "st", "y"],
        &["SMOVE", "st", "st2", "x"],
        &["SINTERSTORE", "st3", "st", "st2"],
        &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
        &["ZINCRBY", "z", "5", "a"],
        &["ZPOPMIN", "z"],
        &["ZUNIONSTORE", "zu", "1", "z"],
        &["GEOADD", "g", "13.361389", "38.115556", "Palermo"],
        &["SORT", "l2", "STORE", "sorted"],
        &["RENAME", "r", "r2"],
        &["EXPIRE", "h", "1000"],
        &["PERSIST", "h"],
        &["PEXPIREAT", "st2", &far],
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'x'); redis.call('del', KEYS[2]); return 1",
            "2",
            "fromlua",
            "s",
        ],
        &["MULTI"],
        &["SET", "t", "1"],
        &["INCRBY", "t", "41"],
        &["SELECT", "3"],
        &["SET", "in3", "three"],
        &["EXEC"],
        &["SELECT", "5"],
        &["SET", "in5", "five"],
        &["SWAPDB", "5", "6"],
        &["SET", "in5", "after-swap"],
        &["SELECT", "7"],
        &["SET", "flushed", "x"],
        &["FLUSHDB"],
        &["SET", "after-flush", "y"],
        &["SELECT", "0"],
    ];
    for cmd in script {
        let r = c.cmd_str(cmd);
        assert!(!r.starts_with('-'), "{cmd:?}: {r}");
    }
    // `gone` expires on this lookup: its deletion is a change too.
    let deadline = Instant::now() + Duration::from_secs(5);
    while c.cmd(&["EXISTS", "gone"]) != b":0\r\n" {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(2));
    }
    let before = dataset(&mut c);
    assert!(before.len() > 20, "{before:#?}");
    assert!(
        before.iter().any(|l| l.starts_with("6 in5 ")),
        "{before:#?}"
    );
    s.kill9();
    let s = start(&dir.0, "always", &[]);
    let mut c = s.conn();
    assert_eq!(dataset(&mut c), before);
}
