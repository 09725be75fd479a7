//! DEBUG compared byte for byte with redis-server 7.0.15 (`enable-debug-command yes`).

use crate::common;
use common::*;
use std::time::{Duration, Instant};

const DEBUG_ON: &[&str] = &["--enable-debug-command", "yes"];

fn show(t: &[Vec<u8>]) -> Vec<String> {
    t.iter()
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .collect()
}

/// One key of every type, a TTL, a float score, an integer-looking member and stream entries.
const DATASET: &[&[&str]] = &[
    &["SET", "s", "hello"],
    &["SET", "n", "12345"],
    &["SET", "ttl", "v", "EX", "1000"],
    &["RPUSH", "l", "a", "b", "3", "a"],
    &["SADD", "st", "x", "y", "1", "2"],
    &["SADD", "ints", "1", "2", "300"],
    &[
        "ZADD", "z", "1.5", "a", "2", "b", "inf", "c", "-3", "d", "0.1", "e", "7", "10",
    ],
    &["HSET", "h", "f", "v", "f2", "v2", "3", "4"],
    &["XADD", "x", "1-1", "a", "b", "c", "d"],
    &["XADD", "x", "5-0", "e", "f"],
];

#[test]
fn digest_and_digest_value_equal_redis() {
    let ours = both_with(DEBUG_ON, |s| {
        let mut c = s.conn();
        let mut out = vec![c.cmd(&["DEBUG", "DIGEST"])];
        for cmd in DATASET {
            c.cmd(cmd);
        }
        out.push(c.cmd(&["DEBUG", "DIGEST"]));
        out.push(c.cmd(&[
            "DEBUG",
            "DIGEST-VALUE",
            "s",
            "n",
            "ttl",
            "l",
            "st",
            "ints",
            "z",
            "h",
            "x",
            "missing",
        ]));
        out.push(c.cmd(&["DEBUG", "DIGEST-VALUE"]));
        // Order matters for a list, not for a set or a hash.
        c.cmd(&["RPUSH", "l", "z"]);
        c.cmd(&["SREM", "st", "x"]);
        c.cmd(&["SADD", "st", "x"]);
        out.push(c.cmd(&["DEBUG", "DIGEST"]));
        c.cmd(&["PERSIST", "ttl"]);
        out.push(c.cmd(&["DEBUG", "DIGEST"]));
        out
    });
    assert_eq!(
        show(&ours)[0],
        "+0000000000000000000000000000000000000000\r\n"
    );
    assert_ne!(ours[1], ours[0]);
    assert_ne!(ours[4], ours[5], "a TTL is part of the digest");
}

#[test]
fn protocol_every_type_in_resp2_and_resp3() {
    const TYPES: &[&str] = &[
        "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "push",
        "verbatim", "true", "false", "nosuch",
    ];
    both_with(DEBUG_ON, |s| {
        let mut out = Vec::new();
        for proto in ["2", "3"] {
            let mut c = s.conn();
            c.cmd(&["HELLO", proto]);
            for t in TYPES {
                out.push(c.cmd(&["DEBUG", "PROTOCOL", t]));
                if *t == "push" && proto == "3" {
                    // The push came first; the reply follows it.
                    out.push(c.read_reply());
                }
            }
        }
        out
    });
}

#[test]
fn help_and_errors_as_redis() {
    both_with(DEBUG_ON, |s| {
        let mut c = s.conn();
        [
            &["DEBUG", "HELP"][..],
            &["DEBUG", "help", "x"],
            &["DEBUG", "nosuch"],
            &["DEBUG", "jmap"],
            &["DEBUG", "object"],
            &["DEBUG", "object", "missing"],
            &["DEBUG", "digest", "x"],
            &["DEBUG", "reload", "bogus"],
            &["DEBUG", "quicklist-packed-threshold", "5gb"],
            &["DEBUG", "quicklist-packed-threshold", "abc"],
            &["DEBUG", "quicklist-packed-threshold", "1b"],
            &["DEBUG", "quicklist-packed-threshold", "0"],
            &["DEBUG", "set-active-expire"],
            &["DEBUG", "set-active-expire", "1"],
            &["DEBUG", "pause-cron", "1"],
            &["DEBUG", "pause-cron", "0"],
            &["DEBUG", "set-disable-deny-scripts", "0"],
            &["DEBUG", "populate", "-1"],
            &["DEBUG", "populate", "abc"],
            &["DEBUG", "populate", "3"],
            &["DEBUG", "populate", "2", "p", "12"],
            &["DEBUG", "populate", "1", "q", "3"],
            &["MGET", "key:0", "key:2", "key:3", "p:1", "q:0"],
            &["DEBUG", "digest"],
            &["DEBUG", "error", "MYERR some\ntext"],
            &["DEBUG", "listpack", "key:0"],
            &["DEBUG", "log", "hello"],
        ]
        .iter()
        .map(|cmd| c.cmd(cmd))
        .collect()
    });
}

#[test]
fn stringmatch_test_returns() {
    let s = deadbolt(DEBUG_ON);
    assert_eq!(
        s.conn().cmd_str(&["DEBUG", "STRINGMATCH-TEST"]),
        "+Apparently Redis did not crash: test passed\r\n"
    );
}

#[test]
fn refused_unless_enabled_as_redis() {
    both(|s| vec![s.conn().cmd(&["DEBUG", "DIGEST"])]);
}

/// DEBUG OBJECT's line, the value's address masked (it differs between any two processes).
#[test]
fn object_fields_as_redis() {
    both_with(DEBUG_ON, |s| {
        let mut c = s.conn();
        for cmd in DATASET {
            c.cmd(cmd);
        }
        ["s", "n", "l", "z", "h", "ints", "st"]
            .iter()
            .map(|k| {
                let line = c.cmd_str(&["DEBUG", "OBJECT", k]);
                let (head, rest) = line.split_once(" refcount:").unwrap_or((&line, ""));
                assert!(head.starts_with("+Value at:0x"), "{line}");
                // lru is the clock in seconds: it may tick between the two servers; the idle
                // time is a second or so on a loaded machine, on either server.
                let rest: Vec<String> = rest
                    .split(' ')
                    .filter(|f| !f.starts_with("lru:"))
                    .map(|f| match f.strip_prefix("lru_seconds_idle:") {
                        Some(idle) => {
                            let (n, tail) = idle.split_at(idle.trim_end().len());
                            assert!(n.parse::<u64>().is_ok_and(|n| n < 5), "{line}");
                            format!("lru_seconds_idle:<small>{tail}")
                        }
                        None => f.to_string(),
                    })
                    .collect();
                format!("refcount:{}", rest.join(" ")).into_bytes()
            })
            .collect()
    });
}

/// Elements at or over QUICKLIST-PACKED-THRESHOLD are plain nodes: DEBUG OBJECT's node counts
/// and DUMP's bytes as Redis's.
#[test]
fn packed_threshold_makes_plain_nodes_as_redis() {
    both_with(DEBUG_ON, |s| {
        let mut c = s.conn();
        let big = "x".repeat(20);
        let mut out = vec![c.cmd(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "10b"])];
        c.cmd(&["RPUSH", "l", "a", "b", &big, "c", &big, &big, "d"]);
        let line = c.cmd_str(&["DEBUG", "OBJECT", "l"]);
        let fields = line.split_once(" encoding:").map_or("", |(_, r)| r);
        let fields: Vec<&str> = fields
            .split(' ')
            .filter(|f| !f.starts_with("lru"))
            .collect();
        out.push(fields.join(" ").into_bytes());
        out.push(c.cmd(&["DUMP", "l"]));
        out.push(c.cmd(&["LRANGE", "l", "0", "-1"]));
        out.push(c.cmd(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"]));
        out
    });
}

/// SCRIPT: with SET-DISABLE-DENY-SCRIPTS a script may call a `noscript` command.
#[test]
fn disable_deny_scripts_as_redis() {
    both_with(DEBUG_ON, |s| {
        let mut c = s.conn();
        let eval = [
            "EVAL",
            "return redis.call('debug', 'protocol', 'attrib')",
            "0",
        ];
        let mut out = vec![c.cmd(&eval)];
        c.cmd(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]);
        out.push(c.cmd(&eval));
        out.push(c.cmd(&[
            "EVAL",
            "redis.setresp(3); return redis.call('debug', 'protocol', 'bignum')",
            "0",
        ]));
        c.cmd(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0"]);
        out.push(c.cmd(&eval));
        out
    });
}

/// Keys that expired stay stored while active expiry is off, and go once it is back on.
#[test]
fn set_active_expire_stops_and_resumes_active_expiry() {
    for (name, s) in deadbolt_and_redis(DEBUG_ON) {
        let mut c = s.conn();
        assert_eq!(c.cmd_str(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK\r\n");
        c.cmd(&["SET", "k", "v", "PX", "5"]);
        // Longer than several cron periods (hz 10): active expiry would have removed it.
        std::thread::sleep(Duration::from_millis(400));
        // DEBUG OBJECT finds the stored value without expiring it (Redis's dictFind).
        assert!(
            c.cmd_str(&["DEBUG", "OBJECT", "k"])
                .starts_with("+Value at:"),
            "{name}"
        );
        c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
        let deadline = Instant::now() + Duration::from_secs(5);
        while c.cmd_str(&["DEBUG", "OBJECT", "k"]) != "-ERR no such key\r\n" {
            assert!(Instant::now() < deadline, "{name}: not expired");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Runs `scenario` on deadbolt and redis-server, each with its own data directory and the
/// extra arguments; asserts equal transcripts.
fn both_in_dirs(extra: &[&str], scenario: impl Fn(&mut Conn) -> Vec<Vec<u8>>) {
    let mut got = Vec::new();
    for which in ["deadbolt", "redis"] {
        let dir = TempDir::new(&format!("debugcmd-{which}"));
        let mut args = vec!["--dir", dir.0.to_str().unwrap()];
        args.extend_from_slice(DEBUG_ON);
        args.extend_from_slice(extra);
        let s = if which == "deadbolt" {
            deadbolt(&args)
        } else {
            redis_server(&args)
        };
        wait_loaded(&s);
        let mut c = s.conn();
        got.push(show(&scenario(&mut c)));
    }
    assert_eq!(got[0], got[1], "deadbolt vs redis-server");
}

#[test]
fn reload_with_its_options_as_redis() {
    both_in_dirs(&[], |c| {
        for cmd in DATASET {
            c.cmd(cmd);
        }
        let mut out = vec![c.cmd(&["DEBUG", "DIGEST"])];
        out.push(c.cmd(&["DEBUG", "RELOAD"]));
        out.push(c.cmd(&["DEBUG", "DIGEST"]));
        out.push(c.cmd(&["DBSIZE"]));
        // NOSAVE: back to the file saved above.
        c.cmd(&["SET", "later", "1"]);
        c.cmd(&["DEL", "s"]);
        out.push(c.cmd(&["DEBUG", "RELOAD", "NOSAVE"]));
        out.push(c.cmd(&["DEBUG", "DIGEST"]));
        out.push(c.cmd(&["EXISTS", "later", "s"]));
        // NOSAVE NOFLUSH MERGE: the file's keys added to what is there.
        c.cmd(&["SET", "later", "1"]);
        c.cmd(&["SET", "s", "changed"]);
        out.push(c.cmd(&["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"]));
        out.push(c.cmd(&["MGET", "later", "s"]));
        out.push(c.cmd(&["TTL", "ttl"]));
        out
    });
}

#[test]
fn loadaof_reloads_the_log_as_redis() {
    both_in_dirs(&["--appendonly", "yes"], |c| {
        for cmd in DATASET {
            c.cmd(cmd);
        }
        c.cmd(&["INCR", "n"]);
        c.cmd(&["LPOP", "l"]);
        let mut out = vec![c.cmd(&["DEBUG", "DIGEST"])];
        out.push(c.cmd(&["DEBUG", "LOADAOF"]));
        out.push(c.cmd(&["DEBUG", "DIGEST"]));
        out.push(c.cmd(&["DBSIZE"]));
        // Writes after a LOADAOF are logged once: a second load gives the same data.
        c.cmd(&["SET", "after", "1"]);
        out.push(c.cmd(&["DEBUG", "LOADAOF"]));
        out.push(c.cmd(&["DEBUG", "DIGEST"]));
        out.push(c.cmd(&["GET", "after"]));
        out
    });
}

/// CHANGE-REPL-ID draws a new `master_replid`; the run id stays.
#[test]
fn change_repl_id_as_redis() {
    for (name, s) in deadbolt_and_redis(DEBUG_ON) {
        let mut c = s.conn();
        let field = |c: &mut Conn, section: &str, f: &str| {
            let info = c.cmd_str(&["INFO", section]);
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("{f}:")))
                .unwrap_or_else(|| panic!("{name}: no {f}"))
                .to_string()
        };
        let (run, repl) = (
            field(&mut c, "server", "run_id"),
            field(&mut c, "replication", "master_replid"),
        );
        assert_ne!(run, repl, "{name}");
        assert_eq!(c.cmd_str(&["DEBUG", "CHANGE-REPL-ID"]), "+OK\r\n", "{name}");
        let repl2 = field(&mut c, "replication", "master_replid");
        assert_ne!(repl2, repl, "{name}");
        assert_eq!(repl2.len(), 40, "{name}");
        assert_eq!(field(&mut c, "server", "run_id"), run, "{name}");
    }
}

/// With active expiry off, a read finds its key expired: the tracking invalidation for it
/// follows that command's reply (a client waiting for it after the reply got it only after its
/// next command).
#[test]
fn lazy_expiry_invalidation_follows_the_reply_as_redis() {
    both_with(DEBUG_ON, |s| {
        let mut c = s.conn();
        for cmd in [
            &["HELLO", "3"][..],
            &["CLIENT", "TRACKING", "on"],
            &["DEBUG", "SET-ACTIVE-EXPIRE", "0"],
            &["MSET", "x", "1", "y", "2"],
            &["PEXPIRE", "y", "50"],
            &["GET", "y"],
        ] {
            c.cmd(cmd);
        }
        // Time has to pass (no event to await): well past the 50 ms deadline.
        std::thread::sleep(Duration::from_millis(150));
        let mut out = vec![c.cmd(&["MGET", "x", "y"])];
        out.push(
            c.try_read_reply(Duration::from_secs(2))
                .unwrap_or_else(|| b"(no push)".to_vec()),
        );
        out.push(c.cmd(&["PING"]));
        out
    });
}
