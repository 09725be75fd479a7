//! Edge cases where deadbolt once answered differently from Redis 7.0.15 (blocking timeouts
//! under a millisecond or past i64, CLIENT PAUSE and DEBUG SLEEP with huge arguments, the order
//! multi-key waiters are served in, a handful of replies), each run on deadbolt and on a real
//! redis-server with the reply bytes compared; and one deadbolt-only row: a client that reads
//! none of its large replies under an address-space limit loses its connection, never the
//! server.

use crate::common;

use common::{both, both_with, wait_blocked, Conn};
use std::time::{Duration, Instant};

/// The reply to `args`, or a marker when none comes within `wait` (so a hang fails the
/// comparison instead of the whole test run).
fn answer_within(c: &mut Conn, args: &[&str], wait: Duration) -> Vec<u8> {
    c.send(args);
    c.try_read_reply(wait)
        .unwrap_or_else(|| format!("no reply within {wait:?} to {args:?}").into_bytes())
}

fn show(replies: &[Vec<u8>]) -> Vec<String> {
    replies
        .iter()
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .collect()
}

#[test]
fn blocking_timeouts_under_a_millisecond_wait_one_millisecond() {
    let t = both(|s| {
        let mut c = s.conn();
        let cmds: &[&[&str]] = &[
            &["BLPOP", "nolist", "0.0001"],
            &["BRPOP", "nolist", "other", "0.0009"],
            &["BZMPOP", "1e-300", "1", "z", "MIN"],
            &["BRPOPLPUSH", "nolist", "d", "0.0005"],
            &["BLMOVE", "nolist", "d", "LEFT", "RIGHT", "0.0001"],
            &["BLMPOP", "1e-4000", "1", "nolist", "LEFT"],
            &["BZPOPMIN", "z", "0.0001"],
            &["BZPOPMAX", "z", "0.00000001"],
            &["XREAD", "BLOCK", "1", "STREAMS", "nostream", "$"],
            &["WAIT", "1", "1"],
        ];
        cmds.iter()
            .map(|a| answer_within(&mut c, a, Duration::from_secs(3)))
            .collect()
    });
    for r in &t[..9] {
        assert_eq!(r, b"*-1\r\n");
    }
    assert_eq!(t[9], b":0\r\n");
}

/// Every blocking command's timeout errors: negative, NaN, infinite, past i64, unparsable.
#[test]
fn blocking_timeout_errors_like_redis() {
    let float_cmds: &[&[&str]] = &[
        &["BLPOP", "l"],
        &["BRPOP", "l"],
        &["BRPOPLPUSH", "l", "d"],
        &["BLMOVE", "l", "d", "LEFT", "LEFT"],
        &["BZPOPMIN", "z"],
        &["BZPOPMAX", "z"],
    ];
    let bad_floats = [
        "-1", "-inf", "inf", "nan", "1e300", "9.3e15", "1e5000", "1e-5000", "abc", "", " 1", "1 ",
        "0x", "1e", "--1",
    ];
    let t = both(|s| {
        let mut c = s.conn();
        let mut out = Vec::new();
        for t in bad_floats {
            for cmd in float_cmds {
                let mut a = cmd.to_vec();
                a.push(t);
                out.push(answer_within(&mut c, &a, Duration::from_secs(3)));
            }
            out.push(answer_within(
                &mut c,
                &["BLMPOP", t, "1", "l", "LEFT"],
                Duration::from_secs(3),
            ));
            out.push(answer_within(
                &mut c,
                &["BZMPOP", t, "1", "z", "MIN"],
                Duration::from_secs(3),
            ));
        }
        for t in ["-1", "abc", "1.5", "9223372036854775808", "", "+1"] {
            out.push(answer_within(
                &mut c,
                &["XREAD", "BLOCK", t, "STREAMS", "s", "$"],
                Duration::from_secs(3),
            ));
            out.push(answer_within(
                &mut c,
                &[
                    "XREADGROUP",
                    "GROUP",
                    "g",
                    "c",
                    "BLOCK",
                    t,
                    "STREAMS",
                    "s",
                    ">",
                ],
                Duration::from_secs(3),
            ));
            out.push(answer_within(
                &mut c,
                &["WAIT", "1", t],
                Duration::from_secs(3),
            ));
            out.push(answer_within(
                &mut c,
                &["CLIENT", "PAUSE", t],
                Duration::from_secs(3),
            ));
        }
        // CLIENT PAUSE looks at its mode before its timeout.
        out.push(c.cmd(&["CLIENT", "PAUSE", "abc", "sometimes"]));
        out
    });
    for r in &t {
        assert!(r.starts_with(b"-"), "{}", String::from_utf8_lossy(r));
    }
}

/// A timeout so large that Redis's deadline wraps past i64 waits for ever there (its timeout
/// table is keyed by the unsigned deadline); data already present is served at once, and data
/// that arrives later wakes the waiter.
#[test]
fn timeouts_past_i64_wait_for_ever_and_serve_data() {
    let t = both(|s| {
        let (mut a, mut b) = (s.conn(), s.conn());
        let mut out = vec![b.cmd(&["XADD", "x", "1-1", "f", "v"])];
        out.push(a.cmd(&["XREAD", "BLOCK", "9223372036854775807", "STREAMS", "x", "0"]));
        a.send(&["XREAD", "BLOCK", "9223372036854775807", "STREAMS", "x", "$"]);
        wait_blocked(&mut b, 1);
        out.push(b.cmd(&["XADD", "x", "2-1", "f", "w"]));
        out.push(a.read_reply());
        a.send(&["BLPOP", "l", "9223372036854775"]);
        wait_blocked(&mut b, 1);
        out.push(b.cmd(&["RPUSH", "l", "x"]));
        out.push(a.read_reply());
        a.send(&["BZMPOP", "9223372036854775", "1", "z", "MAX"]);
        wait_blocked(&mut b, 1);
        out.push(b.cmd(&["ZADD", "z", "1", "m"]));
        out.push(a.read_reply());
        out
    });
    assert_eq!(
        t[1],
        b"*1\r\n*2\r\n$1\r\nx\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
}

/// `CLIENT PAUSE 9223372036854775807`: Redis's end time wraps into the past, so it answers OK
/// and pauses no one (it cannot shorten a pause in force either).
#[test]
fn client_pause_past_i64_pauses_no_one() {
    let t = both(|s| {
        let (mut a, mut b) = (s.conn(), s.conn());
        let wait = Duration::from_secs(3);
        let mut out = vec![a.cmd(&["CLIENT", "PAUSE", "9223372036854775807"])];
        out.push(answer_within(&mut b, &["PING"], wait));
        out.push(answer_within(&mut b, &["SET", "k", "v"], wait));
        out.push(a.cmd(&["CLIENT", "PAUSE", "9223372036854775807", "WRITE"]));
        out.push(answer_within(&mut b, &["SET", "k", "w"], wait));
        out.push(a.cmd(&["CLIENT", "PAUSE", "0"]));
        out.push(answer_within(&mut b, &["SET", "k", "x"], wait));
        // A real pause stays in force; the huge one does not end or shorten it.
        out.push(a.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]));
        out.push(a.cmd(&["CLIENT", "PAUSE", "9223372036854775807", "WRITE"]));
        b.send(&["SET", "k", "y"]);
        out.push(
            b.try_read_reply(Duration::from_millis(300))
                .unwrap_or_else(|| b"held".to_vec()),
        );
        out.push(a.cmd(&["CLIENT", "UNPAUSE"]));
        out.push(b.read_reply());
        out.push(b.cmd(&["GET", "k"]));
        out
    });
    assert_eq!(t[1], b"+PONG\r\n");
    assert_eq!(t[9], b"held");
    assert_eq!(t[12], b"$1\r\ny\r\n");
}

/// DEBUG SLEEP converts `seconds * 1e6` to a long long: inf, 1e308 and NaN give LLONG_MIN on
/// x86-64 and nanosleep refuses a negative time, so Redis returns at once, as from a text
/// strtod reads nothing of.
#[test]
fn debug_sleep_with_huge_or_odd_arguments_returns_at_once() {
    let t = both_with(&["--enable-debug-command", "yes"], |s| {
        let mut c = s.conn();
        [
            "1e308", "inf", "-inf", "nan", "1e13", "-1", "-0.5", "abc", "", "0.001x",
        ]
        .iter()
        .map(|a| answer_within(&mut c, &["DEBUG", "SLEEP", a], Duration::from_secs(5)))
        .collect()
    });
    for r in &t {
        assert_eq!(r, b"+OK\r\n");
    }
}

/// `BLPOP a c 0`, then one transaction (or script) pushes to `c` then to `a`: Redis serves the
/// waiter from the key that became ready first.
#[test]
fn multi_key_waiters_are_served_in_the_order_keys_became_ready() {
    let t = both(|s| {
        let (mut a, mut b) = (s.conn(), s.conn());
        let mut out = Vec::new();
        let rounds: &[(&[&str], &[&[&str]])] = &[
            (
                &["BLPOP", "a", "c", "0"],
                &[
                    &["MULTI"],
                    &["RPUSH", "c", "1"],
                    &["RPUSH", "a", "x"],
                    &["EXEC"],
                ],
            ),
            (
                &["BLPOP", "a", "c", "0"],
                &[&[
                    "EVAL",
                    "redis.call('rpush','c','2'); redis.call('rpush','a','y')",
                    "0",
                ]],
            ),
            (
                &["BLMPOP", "0", "2", "a", "c", "LEFT", "COUNT", "5"],
                &[
                    &["MULTI"],
                    &["RPUSH", "c", "3"],
                    &["RPUSH", "a", "z"],
                    &["EXEC"],
                ],
            ),
            (
                &["BRPOP", "a", "c", "0"],
                &[
                    &["MULTI"],
                    &["RPUSH", "c", "4"],
                    &["RPUSH", "a", "w"],
                    &["EXEC"],
                ],
            ),
            (
                &["BZPOPMIN", "za", "zc", "0"],
                &[
                    &["MULTI"],
                    &["ZADD", "zc", "1", "m"],
                    &["ZADD", "za", "1", "n"],
                    &["EXEC"],
                ],
            ),
            (
                &["BZMPOP", "0", "2", "za", "zc", "MAX"],
                &[&[
                    "EVAL",
                    "redis.call('zadd','zc','2','o'); redis.call('zadd','za','2','p')",
                    "0",
                ]],
            ),
        ];
        for (block, writes) in rounds {
            out.push(b.cmd(&["DEL", "a", "c", "za", "zc"]));
            a.send(block);
            wait_blocked(&mut b, 1);
            for w in *writes {
                out.push(b.cmd(w));
            }
            out.push(a.read_reply());
            out.push(b.cmd(&["LRANGE", "a", "0", "-1"]));
            out.push(b.cmd(&["LRANGE", "c", "0", "-1"]));
            out.push(b.cmd(&["ZRANGE", "za", "0", "-1"]));
            out.push(b.cmd(&["ZRANGE", "zc", "0", "-1"]));
        }
        out
    });
    let text = show(&t);
    assert!(text.contains(&"*2\r\n$1\r\nc\r\n$1\r\n1\r\n".to_string()));
    assert!(text.contains(&"*2\r\n$1\r\nc\r\n$1\r\n2\r\n".to_string()));
}

#[test]
fn client_kill_of_an_unknown_user() {
    let t = both(|s| {
        let mut c = s.conn();
        vec![
            c.cmd(&["CLIENT", "KILL", "USER", "nosuch"]),
            c.cmd(&["CLIENT", "KILL", "USER", "no\r\nsuch"]),
            c.cmd(&["CLIENT", "KILL", "USER", "default"]),
            c.cmd(&["CLIENT", "KILL", "USER", "nosuch", "SKIPME", "maybe"]),
        ]
    });
    assert_eq!(t[0], b"-ERR No such user 'nosuch'\r\n");
}

#[test]
fn lua_big_number_replies() {
    let t = both(|s| {
        let mut c = s.conn();
        let mut out = Vec::new();
        for proto in ["2", "3"] {
            out.push(c.cmd(&["HELLO", proto]).into_iter().take(1).collect());
            for script in [
                "return {big_number='123'}",
                "return {big_number='1\\r\\n2'}",
                "return {big_number=''}",
                "return {1, {big_number='-99999999999999999999'}}",
                "return {big_number=5}",
            ] {
                out.push(c.cmd(&["EVAL", script, "0"]));
            }
        }
        out
    });
    assert_eq!(t[7], b"(123\r\n");
    assert_eq!(t[8], b"(1  2\r\n");
}

#[test]
fn cjson_sparse_arrays_with_keys_past_int() {
    let t = both(|s| {
        let mut c = s.conn();
        [
            "return cjson.encode({[1]=1,[2^31]=2})",
            "return cjson.encode({[2^31]=2})",
            "return cjson.encode({[1]=1,[2^31-1]=2})",
            "return cjson.encode({[1]=1,[1e300]=2})",
            "return cjson.encode({[1]=1,[2]=2,[3]=3,[2^32]=4})",
            "return cjson.encode({[1]=1,[20]=2})",
            "return cjson.encode({[1]=1,[10]=2})",
        ]
        .iter()
        .map(|s| c.cmd(&["EVAL", s, "0"]))
        .collect()
    });
    assert_eq!(t[0], b"$22\r\n{\"1\":1,\"2147483648\":2}\r\n");
}

/// An EXEC refused before it runs (ACL, arity) discards the transaction and says why.
#[test]
fn exec_refused_before_running_answers_execabort() {
    let t = both(|s| {
        let mut admin = s.conn();
        let mut out = vec![
            admin.cmd(&[
                "ACL",
                "SETUSER",
                "notx",
                "on",
                "nopass",
                "+@all",
                "-@transaction",
                "~*",
            ]),
            admin.cmd(&[
                "ACL", "SETUSER", "noexec", "on", "nopass", "+@all", "-exec", "~*",
            ]),
        ];
        let mut c = s.conn();
        for line in [
            &["AUTH", "notx", "x"][..],
            &["MULTI"],
            &["SET", "a", "1"],
            &["EXEC"],
            &["DISCARD"],
            &["AUTH", "noexec", "x"],
            &["MULTI"],
            &["SET", "a", "2"],
            &["EXEC"],
            &["DISCARD"],
            &["GET", "a"],
            &["EXEC"],
            &["AUTH", "default", "x"],
            &["MULTI"],
            &["SET", "a", "3"],
            &["EXEC", "extra"],
            &["DISCARD"],
            &["EXEC", "extra"],
            &["GET", "a"],
        ] {
            out.push(c.cmd(line));
        }
        // A refused EXEC also drops the WATCHes.
        out.push(c.cmd(&["WATCH", "a"]));
        out.push(c.cmd(&["EXEC", "extra"]));
        out.push(admin.cmd(&["SET", "a", "4"]));
        out.push(c.cmd(&["MULTI"]));
        out.push(c.cmd(&["GET", "a"]));
        out.push(c.cmd(&["EXEC"]));
        out
    });
    assert_eq!(
        t[5],
        b"-EXECABORT Transaction discarded because of: NOPERM this user has no permissions to run the 'exec' command\r\n"
    );
}

#[test]
fn string_metatable_has_no_metatable_field() {
    let t = both(|s| {
        let mut c = s.conn();
        [
            "return getmetatable('').__metatable",
            "return type(getmetatable(''))",
            "local r = {} for k in pairs(getmetatable('')) do r[#r+1] = k end return r",
            "return getmetatable('').__index.upper('x')",
            "return ('x'):rep(3)",
            "getmetatable('').__index = {} return 1",
        ]
        .iter()
        .map(|s| c.cmd(&["EVAL", s, "0"]))
        .collect()
    });
    assert_eq!(t[0], b"$-1\r\n");
}

/// RESTORE's relative TTL plus the clock wraps past i64 in Redis: the deadline is in the past,
/// the key is not kept.
#[test]
fn restore_with_a_ttl_past_i64_keeps_no_key() {
    let t = both(|s| {
        let mut c = s.conn();
        c.cmd(&["SET", "src", "value"]);
        let payload = c.cmd(&["DUMP", "src"]);
        // The bulk reply's body.
        let start = payload.iter().position(|&b| b == b'\n').unwrap() + 1;
        let payload = payload[start..payload.len() - 2].to_vec();
        let mut out = Vec::new();
        for (ttl, replace) in [
            ("9223372036854775806", false),
            ("9223372036854775807", false),
            ("9223372036854775806", true),
        ] {
            if replace {
                out.push(c.cmd(&["SET", "k", "old"]));
            }
            let mut args: Vec<&[u8]> = vec![b"RESTORE", b"k", ttl.as_bytes(), &payload];
            if replace {
                args.push(b"REPLACE");
            }
            out.push(c.cmd(&args));
            out.push(c.cmd(&["EXISTS", "k"]));
            out.push(c.cmd(&["PTTL", "k"]));
        }
        let args: [&[u8]; 4] = [b"RESTORE", b"k", b"100000", &payload];
        out.push(c.cmd(&args));
        out.push(c.cmd(&["EXISTS", "k"]));
        out
    });
    assert_eq!(t[1], b":0\r\n");
}

/// A client that asks for a large value three times and reads none of it, under an
/// address-space limit with room for less than one copy of it: the replies reference the
/// stored value instead of copying it (Redis copies into its reply list; the server used to
/// copy once per reply and, before that, abort on the failed allocation), so the server keeps
/// serving everyone, its resident memory does not grow by a copy, and the greedy client, once
/// it reads, gets all three replies whole.
#[test]
fn unread_large_replies_under_a_memory_cap_are_not_copied() {
    const SIZE: usize = 128 << 20;
    let mut cmd = std::process::Command::new(common::deadbolt_bin());
    cmd.args(["--port", "0", "--bind", "127.0.0.1"]);
    // mimalloc otherwise reserves a 1 GiB arena ahead of need, and the address space would
    // not follow what is allocated: the limit below would leave that much more room.
    cmd.env("MIMALLOC_ARENA_RESERVE", "0");
    let s = common::start_command(cmd);
    let mut admin = s.conn();
    admin.cmd(&["SETRANGE", "big", &(SIZE - 1).to_string(), "x"]);
    let status_kb = |field: &str| -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", s.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect(field)
    };
    let vm_kb = status_kb("VmSize:");
    let rss_before = status_kb("VmRSS:");
    // Less room than one copy of the value.
    let cap = vm_kb * 1024 + (SIZE as u64) * 3 / 4;
    let limit = libc::rlimit {
        rlim_cur: cap,
        rlim_max: cap,
    };
    // SAFETY: sets a resource limit of the child process this test started; `limit` is a
    // valid rlimit and the old value is not asked for (null).
    let rc = unsafe {
        libc::prlimit(
            s.pid() as libc::pid_t,
            libc::RLIMIT_AS,
            &limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
    let mut greedy = s.conn();
    for i in 1..=3u32 {
        greedy
            .try_send_raw(&common::resp_cmd(&["GET", "big"]))
            .expect("greedy client still connected");
        // Waits until the GET ran (and its reply was queued) before the next one.
        let want = format!("cmdstat_get:calls={i},");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !admin.cmd_str(&["INFO", "commandstats"]).contains(&want) {
            assert!(Instant::now() < deadline, "GET {i} never ran");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
    let mut other = s.conn();
    assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(
        other.cmd(&["STRLEN", "big"]),
        format!(":{SIZE}\r\n").as_bytes()
    );
    let grown_kb = status_kb("VmRSS:").saturating_sub(rss_before);
    assert!(
        grown_kb < (SIZE as u64 / 1024) / 2,
        "resident memory grew by {grown_kb} kB for three unread replies of a stored value"
    );
    assert!(
        !s.log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("no memory for its output buffer")),
        "a client was closed for want of memory"
    );
    // The greedy client reads its three replies, each whole.
    use std::io::Read;
    greedy
        .stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let header = format!("${SIZE}\r\n");
    let mut body = vec![0u8; SIZE + 2];
    for _ in 0..3 {
        let mut h = vec![0u8; header.len()];
        greedy.stream.read_exact(&mut h).unwrap();
        assert_eq!(h, header.as_bytes());
        greedy.stream.read_exact(&mut body).unwrap();
        assert_eq!(&body[SIZE - 1..], b"x\r\n");
        assert!(body[..SIZE - 1].iter().all(|&b| b == 0));
    }
}

/// CLIENT REPLY OFF / SKIP silence replies, not subscription confirmations: a client waiting
/// for them must get every one, as from Redis (RESP2 arrays, RESP3 pushes).
#[test]
fn subscription_confirmations_are_sent_whatever_the_reply_mode() {
    let wait = Duration::from_secs(3);
    both(|s| {
        let mut out = Vec::new();
        let mut c = s.conn();
        c.send(&["CLIENT", "REPLY", "OFF"]);
        c.send(&["SUBSCRIBE", "a", "b"]);
        c.send(&["UNSUBSCRIBE", "a"]);
        c.send(&["PSUBSCRIBE", "x*"]);
        c.send(&["PUNSUBSCRIBE", "x*"]);
        for _ in 0..5 {
            out.push(
                c.try_read_reply(wait)
                    .expect("a confirmation under REPLY OFF"),
            );
        }
        let mut c = s.conn();
        c.send(&["HELLO", "3"]);
        c.try_read_reply(wait).expect("HELLO");
        c.send(&["CLIENT", "REPLY", "SKIP"]);
        c.send(&["SUBSCRIBE", "a"]);
        c.send(&["PING"]);
        for _ in 0..2 {
            out.push(
                c.try_read_reply(wait)
                    .expect("a push or the PONG under SKIP"),
            );
        }
        out
    });
}

/// A tracking client woken in BLMOVE is invalidated for the key its own BLMOVE wrote, after
/// its reply, as Redis does (the woken command runs as that client, not as the pusher).
#[test]
fn a_woken_tracking_client_is_invalidated_for_its_own_write() {
    let wait = Duration::from_secs(3);
    both(|s| {
        let mut a = s.conn();
        let mut b = s.conn();
        a.send(&["HELLO", "3"]);
        a.try_read_reply(wait).expect("HELLO");
        let mut out = vec![a.cmd(&["CLIENT", "TRACKING", "on"]), a.cmd(&["GET", "dst"])];
        a.send(&["BLMOVE", "src", "dst", "LEFT", "LEFT", "0"]);
        wait_blocked(&mut b, 1);
        out.push(b.cmd(&["RPUSH", "src", "x"]));
        for _ in 0..2 {
            out.push(
                a.try_read_reply(wait)
                    .expect("the reply, then the invalidation"),
            );
        }
        out
    });
}

/// The `db0:` line of INFO keyspace (empty when the database holds no key).
fn keyspace_line(c: &mut Conn) -> Vec<u8> {
    let info = c.cmd_str(&["INFO", "keyspace"]);
    info.lines()
        .find(|l| l.starts_with("db0:"))
        .unwrap_or("")
        .split(",avg_ttl")
        .next()
        .unwrap_or("")
        .as_bytes()
        .to_vec()
}

/// DBSIZE and INFO keyspace count expired keys until something reclaims them (Redis's
/// "lazy expire" test); KEYS skips them without reclaiming.
#[test]
fn dbsize_counts_expired_keys_until_reclaimed() {
    let t = both_with(&["--enable-debug-command", "yes"], |s| {
        let mut c = s.conn();
        let mut out = vec![c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"])];
        for k in ["k1", "k2", "k3"] {
            out.push(c.cmd(&["PSETEX", k, "50", "v"]));
        }
        out.push(c.cmd(&["SET", "kept", "v"]));
        out.push(c.cmd(&["DBSIZE"]));
        let deadline = Instant::now() + Duration::from_millis(60);
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        out.push(c.cmd(&["DBSIZE"]));
        out.push(keyspace_line(&mut c));
        out.push(c.cmd(&["KEYS", "*"]));
        out.push(c.cmd(&["DBSIZE"]));
        out.push(c.cmd(&["MGET", "k1", "k2", "k3"]));
        out.push(c.cmd(&["DBSIZE"]));
        out.push(keyspace_line(&mut c));
        out.push(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]));
        out
    });
    assert_eq!(t[6], b":4\r\n");
    assert_eq!(t[9], b":4\r\n");
    assert_eq!(t[11], b":1\r\n");
}

/// CONFIG GET dir answers the absolute path (Redis chdirs into it and answers getcwd()).
#[test]
fn config_get_dir_is_absolute() {
    let t = both_with(&["--dir", "."], |s| {
        let mut c = s.conn();
        vec![c.cmd(&["CONFIG", "GET", "dir"])]
    });
    let here = std::fs::canonicalize(".").expect("cwd");
    assert!(
        String::from_utf8_lossy(&t[0]).contains(&*here.to_string_lossy()),
        "{:?}",
        show(&t)
    );
}

/// FLUSHALL / FLUSHDB empty the tracking table, even of keys remembered for clients that have
/// since turned tracking off, and send each tracking client one null invalidation.
#[test]
fn flush_empties_the_tracking_table() {
    let total_keys = |c: &mut Conn| -> Vec<u8> {
        let info = c.cmd_str(&["INFO", "stats"]);
        info.lines()
            .find(|l| l.starts_with("tracking_total_keys:"))
            .unwrap_or("none")
            .as_bytes()
            .to_vec()
    };
    let t = both(|s| {
        let mut c = s.conn();
        let mut other = s.conn();
        let mut out = vec![c.cmd(&["SET", "a", "1"]), c.cmd(&["SET", "b", "1"])];
        out.push(c.cmd(&["CLIENT", "TRACKING", "on"]));
        out.push(c.cmd(&["GET", "a"]));
        out.push(c.cmd(&["GET", "b"]));
        out.push(c.cmd(&["CLIENT", "TRACKING", "off"]));
        out.push(total_keys(&mut other));
        out.push(other.cmd(&["FLUSHALL"]));
        out.push(total_keys(&mut other));
        out.push(c.cmd(&["HELLO", "3"]).into_iter().take(1).collect());
        out.push(c.cmd(&["CLIENT", "TRACKING", "on"]));
        out.push(c.cmd(&["GET", "a"]));
        out.push(total_keys(&mut other));
        out.push(other.cmd(&["FLUSHDB"]));
        out.push(answer_within(&mut c, &["PING"], Duration::from_secs(3)));
        out.push(total_keys(&mut other));
        out
    });
    assert_eq!(t[6], b"tracking_total_keys:2");
    assert_eq!(t[8], b"tracking_total_keys:0");
    assert_eq!(t[14], b">2\r\n$10\r\ninvalidate\r\n_\r\n");
}

/// INFO commandstats: an unknown subcommand is charged to no command, a wrong arity to the
/// subcommand it names, a refused DEBUG is a rejected call (not a failed one) and, queued in
/// MULTI, aborts the EXEC.
#[test]
fn refusals_in_commandstats() {
    let t = both(|s| {
        let mut c = s.conn();
        let mut out = vec![
            c.cmd(&["CONFIG", "nosuch"]),
            c.cmd(&["OBJECT", "nosuch", "x"]),
            c.cmd(&["CONFIG", "GET"]),
            c.cmd(&["CONFIG"]),
            c.cmd(&["DEBUG", "SLEEP", "0"]),
            c.cmd(&["MULTI"]),
            c.cmd(&["DEBUG", "SLEEP", "0"]),
            c.cmd(&["EXEC"]),
        ];
        let stats = c.cmd_str(&["INFO", "commandstats"]);
        let mut lines: Vec<&str> = stats
            .lines()
            .filter(|l| {
                l.starts_with("cmdstat_")
                    && !l.starts_with("cmdstat_multi")
                    && !l.starts_with("cmdstat_info")
            })
            .collect();
        lines.sort_unstable();
        out.extend(lines.iter().map(|l| {
            // calls and rejections; the time varies.
            let (name, rest) = l.split_once(':').unwrap_or((l, ""));
            let calls = rest.split(',').next().unwrap_or("");
            let tail = rest.rsplitn(3, ',').take(2).collect::<Vec<_>>().join(",");
            format!("{name}:{calls},{tail}").into_bytes()
        }));
        out.push(c.cmd(&["INFO", "errorstats"]));
        out
    });
    assert!(
        show(&t)
            .iter()
            .any(|l| l.starts_with("cmdstat_debug:calls=0,")),
        "{:?}",
        show(&t)
    );
}

/// INFO keyspace `avg_ttl`: active expiry's estimate of the keys' TTL, 0 without deadlines.
#[test]
fn keyspace_avg_ttl_is_estimated() {
    let avg_ttl = |c: &mut Conn| -> u64 {
        let info = c.cmd_str(&["INFO", "keyspace"]);
        info.split("avg_ttl=")
            .nth(1)
            .and_then(|v| v.trim_end().parse().ok())
            .unwrap_or(0)
    };
    let t = both(|s| {
        let mut c = s.conn();
        let mut out = vec![c.cmd(&["SET", "persistent", "v"])];
        out.push(format!("{}", avg_ttl(&mut c)).into_bytes());
        for i in 0..50 {
            c.cmd(&["SET", &format!("k{i}"), "v", "EX", "1000"]);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut seen = 0;
        while seen == 0 && Instant::now() < deadline {
            seen = avg_ttl(&mut c);
            std::thread::sleep(Duration::from_millis(10));
        }
        out.push(format!("estimated: {}", (990_000..=1_000_000).contains(&seen)).into_bytes());
        out.push(c.cmd(&["FLUSHALL"]));
        out.push(c.cmd(&["SET", "persistent", "v"]));
        out.push(format!("{}", avg_ttl(&mut c)).into_bytes());
        out
    });
    assert_eq!(t[2], b"estimated: true");
}

/// BGREWRITEAOF with `appendonly no` rewrites as Redis 7.0 does: the dataset becomes the only
/// (base) file of the AOF directory's manifest, which a restart with `appendonly yes` loads.
/// (Redis's base is RDB-encoded, deadbolt's a command file: the manifest is compared with
/// the suffix normalised.)
#[test]
fn bgrewriteaof_with_the_aof_off_writes_a_base() {
    type Start = fn(&[&str]) -> common::Server;
    let run = |start: Start, name: &str| -> Vec<Vec<u8>> {
        let dir = common::TempDir::new(name);
        let d = dir.0.to_str().expect("utf-8 temp dir");
        let manifest = dir.0.join("appendonlydir").join("appendonly.aof.manifest");
        let mut out = Vec::new();
        {
            let s = start(&["--dir", d]);
            let mut c = s.conn();
            out.push(c.cmd(&["SET", "lock", "holder"]));
            out.push(c.cmd(&["BGREWRITEAOF"]));
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut text = String::new();
            while Instant::now() < deadline {
                text = std::fs::read_to_string(&manifest).unwrap_or_default();
                if !text.is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            out.push(text.replace(".base.rdb", ".base.aof").into_bytes());
            // The rewrite has finished before the reply (deadbolt) or the manifest (Redis).
            let deadline = Instant::now() + Duration::from_secs(10);
            while c
                .cmd_str(&["INFO", "persistence"])
                .contains("aof_rewrite_in_progress:1")
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let s = start(&["--dir", d, "--appendonly", "yes"]);
        let mut c = s.conn();
        // Redis may still be loading when it accepts the connection.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = c.cmd(&["GET", "lock"]);
        while got.starts_with(b"-LOADING") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            got = c.cmd(&["GET", "lock"]);
        }
        out.push(got);
        out
    };
    let ours = run(common::deadbolt, "rewrite-off-deadbolt");
    let theirs = run(common::redis_server, "rewrite-off-redis");
    assert_eq!(show(&ours), show(&theirs));
    assert_eq!(
        ours[1],
        b"+Background append only file rewriting started\r\n"
    );
    assert_eq!(ours[3], b"$6\r\nholder\r\n");
}

/// Redis's "EVAL does not leak in the Lua stack": after 10,000 runs of one script the Lua heap
/// (INFO used_memory_lua, counted in whole KB as Redis does) stays under 100 KB: the runs'
/// garbage is collected in steps as they go.
#[test]
fn lua_heap_stays_small_over_many_evals() {
    let lua_memory = |c: &mut Conn| -> u64 {
        let info = c.cmd_str(&["INFO", "memory"]);
        info.split("used_memory_lua:")
            .nth(1)
            .and_then(|v| v.lines().next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(u64::MAX)
    };
    let t = both(|s| {
        let mut c = s.conn();
        let mut out = vec![c.cmd(&["SCRIPT", "FLUSH"]), c.cmd(&["SET", "x", "0"])];
        let script = "return redis.call('incr',KEYS[1])";
        for _ in 0..10_000 {
            c.send(&["EVAL", script, "1", "x"]);
        }
        for _ in 0..10_000 {
            c.read_reply();
        }
        let used = lua_memory(&mut c);
        out.push(format!("under 100 KB: {}", used < 1024 * 100).into_bytes());
        out.push(format!("whole KB: {}", used % 1024 == 0).into_bytes());
        out.push(c.cmd(&["GET", "x"]));
        out
    });
    assert_eq!(t[2], b"under 100 KB: true");
    assert_eq!(t[4], b"$5\r\n10000\r\n");
}

/// INFO stats: reads and writes are counted per read and write event (one each per command
/// of a client that waits for each reply), and the instantaneous network rates are sampled.
#[test]
fn info_counts_reads_writes_and_network_rates() {
    let field = |info: &str, name: &str| -> f64 {
        info.split(&format!("\r\n{name}:"))
            .nth(1)
            .and_then(|v| v.split("\r\n").next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1.0)
    };
    let t = both(|s| {
        let mut c = s.conn();
        let before = c.cmd_str(&["INFO", "stats"]);
        for _ in 0..5 {
            c.cmd(&["PING"]);
        }
        let after = c.cmd_str(&["INFO", "stats"]);
        let mut out = Vec::new();
        for name in ["total_reads_processed", "total_writes_processed"] {
            let delta = field(&after, name) - field(&before, name);
            out.push(format!("{name} +{delta}").into_bytes());
        }
        // Traffic while the 100 ms samples are taken shows in both rates.
        let value = "x".repeat(10_000);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut rates = (0.0, 0.0);
        while Instant::now() < deadline && (rates.0 <= 0.0 || rates.1 <= 0.0) {
            c.cmd(&["SET", "k", &value]);
            c.cmd(&["GET", "k"]);
            let info = c.cmd_str(&["INFO", "stats"]);
            rates = (
                field(&info, "instantaneous_input_kbps"),
                field(&info, "instantaneous_output_kbps"),
            );
        }
        out.push(format!("rates seen: {}", rates.0 > 0.0 && rates.1 > 0.0).into_bytes());
        out
    });
    assert_eq!(t[0], b"total_reads_processed +6");
    assert_eq!(t[2], b"rates seen: true");
}

/// The caller's own line in CLIENT INFO and CLIENT LIST: `qbuf` is its request's length and
/// `argv-mem` its arguments' bytes, as Redis counts them; the other fields' shapes match.
#[test]
fn client_info_counts_the_callers_request() {
    let t = both(|s| {
        let mut c = s.conn();
        let mut out = Vec::new();
        for args in [
            &["CLIENT", "INFO"][..],
            &["CLIENT", "LIST"],
            &["CLIENT", "LIST", "TYPE", "normal"],
        ] {
            let r = c.cmd(args);
            let text = String::from_utf8_lossy(&r).into_owned();
            let fields: Vec<String> = text
                .split_whitespace()
                .filter(|f| f.starts_with("qbuf=") || f.starts_with("argv-mem="))
                .map(str::to_owned)
                .collect();
            out.push(fields.join(" ").into_bytes());
            let shape: Vec<String> = text
                .split_whitespace()
                .filter_map(|f| f.split_once('=').map(|(k, _)| k.to_owned()))
                .collect();
            out.push(shape.join(" ").into_bytes());
        }
        out
    });
    assert_eq!(show(&t)[0], "qbuf=26 argv-mem=10");
}

/// OBJECT ENCODING of strings written in place (APPEND, SETRANGE, SETBIT, BITFIELD, BITOP:
/// `raw` whatever the content), INCRBYFLOAT's `embstr`, and the encoding kept through RENAME,
/// COPY and MOVE and dropped by the next whole write.
#[test]
fn string_encodings_follow_how_the_value_was_written() {
    let script: &[&[&str]] = &[
        &["SET", "k", "1234"],
        &["SETRANGE", "k", "0", "2"],
        &["OBJECT", "ENCODING", "k"],
        &["OBJECT", "REFCOUNT", "k"],
        &["SET", "k", "1234"],
        &["SETRANGE", "k", "0", ""],
        &["OBJECT", "ENCODING", "k"],
        &["APPEND", "k", "5"],
        &["OBJECT", "ENCODING", "k"],
        &["INCR", "k"],
        &["OBJECT", "ENCODING", "k"],
        &["DEL", "k"],
        &["APPEND", "k", "77"],
        &["OBJECT", "ENCODING", "k"],
        &["SET", "k", "12"],
        &["SETBIT", "k", "100", "0"],
        &["OBJECT", "ENCODING", "k"],
        &["SET", "b", "1"],
        &["BITOP", "OR", "d", "b", "b"],
        &["OBJECT", "ENCODING", "d"],
        &["SET", "k", "5"],
        &["BITFIELD", "k", "GET", "u8", "0"],
        &["OBJECT", "ENCODING", "k"],
        &["BITFIELD", "k", "SET", "u8", "0", "51"],
        &["OBJECT", "ENCODING", "k"],
        &["SET", "k", "5"],
        &["INCRBYFLOAT", "k", "1"],
        &["OBJECT", "ENCODING", "k"],
        &["SET", "k", "5"],
        &["APPEND", "k", "1"],
        &["EXPIRE", "k", "100"],
        &["OBJECT", "ENCODING", "k"],
        &["RENAME", "k", "k2"],
        &["OBJECT", "ENCODING", "k2"],
        &["COPY", "k2", "k3"],
        &["OBJECT", "ENCODING", "k3"],
        &["MOVE", "k3", "3"],
        &["SELECT", "3"],
        &["OBJECT", "ENCODING", "k3"],
        &["SELECT", "0"],
        &["GETSET", "k2", "7"],
        &["OBJECT", "ENCODING", "k2"],
        &["SETRANGE", "new", "0", "12"],
        &["OBJECT", "ENCODING", "new"],
        &["SET", "long", "1"],
        &[
            "APPEND",
            "long",
            "000000000000000000000000000000000000000000000000000",
        ],
        &["OBJECT", "ENCODING", "long"],
    ];
    let t = both(|s| {
        let mut c = s.conn();
        script.iter().map(|a| c.cmd(a)).collect()
    });
    assert_eq!(t[2], b"$3\r\nraw\r\n");
    assert_eq!(t[6], b"$3\r\nint\r\n");
}

/// CONFIG SET reports the first refused value in argument order and keeps every value;
/// `maxmemory-clients` takes memory values and percentages up to 100; hidden directives
/// answer by name, never for a pattern.
#[test]
fn config_set_errors_and_hidden_directives_as_redis() {
    let t = both(|s| {
        let mut c = s.conn();
        let mut out = Vec::new();
        for args in [
            &["CONFIG", "SET", "maxmemory", "10000002"][..],
            &[
                "CONFIG",
                "SET",
                "maxmemory",
                "10000001",
                "maxmemory-clients",
                "200%",
                "client-query-buffer-limit",
                "invalid",
            ],
            &["CONFIG", "GET", "maxmemory"],
            &["CONFIG", "SET", "maxmemory-clients", "10%"],
            &["CONFIG", "GET", "maxmemory-clients"],
            &["CONFIG", "SET", "maxmemory-clients", "1mb"],
            &["CONFIG", "GET", "maxmemory-clients"],
            &["CONFIG", "SET", "maxmemory-clients", "x%"],
            &["CONFIG", "SET", "maxmemory-clients", "0", "maxmemory", "0"],
            &["CONFIG", "GET", "key-load-delay"],
            &["CONFIG", "GET", "KEY-LOAD-DELAY"],
            &["CONFIG", "GET", "key-load-del*"],
            &["CONFIG", "GET", "rdb-key-save-delay"],
            &["CONFIG", "GET", "Maxmemory"],
            &["CONFIG", "GET", "maxmemory", "maxmemory"],
        ] {
            out.push(c.cmd(args));
        }
        out
    });
    assert!(
        show(&t)[1].contains("'maxmemory-clients'"),
        "{}",
        show(&t)[1]
    );
}

/// PFSELFTEST runs Redis's self test of the HyperLogLog registers and estimator (seconds).
#[test]
fn pfselftest_passes_as_on_redis() {
    let t = both(|s| {
        let mut c = s.conn();
        vec![
            answer_within(&mut c, &["PFSELFTEST"], Duration::from_secs(120)),
            c.cmd(&["PFSELFTEST", "extra"]),
        ]
    });
    assert_eq!(t[0], b"+OK\r\n");
}

/// redis.acl_check_cmd answers for the script's user: the command, its subcommand and its
/// keys, and refuses unknown commands and bad arguments with Redis's errors.
#[test]
fn lua_acl_check_cmd_follows_the_users_rules() {
    let t = both(|s| {
        let mut admin = s.conn();
        let mut out = vec![admin.cmd(&[
            "ACL",
            "SETUSER",
            "bob",
            "on",
            ">123",
            "+@scripting",
            "+set",
            "~x*",
            "+client|info",
        ])];
        let mut c = s.conn();
        out.push(c.cmd(&["AUTH", "bob", "123"]));
        for (script, keys) in [
            ("return redis.acl_check_cmd('set','xx',1)", &["1", "xx"][..]),
            (
                "return redis.acl_check_cmd('hset','xx','f',1)",
                &["1", "xx"],
            ),
            ("return redis.acl_check_cmd('set','yy',1)", &["0"]),
            ("return redis.acl_check_cmd('invalid-cmd','arg')", &["0"]),
            ("return redis.acl_check_cmd('config','nosuch')", &["0"]),
            ("return redis.acl_check_cmd('config')", &["0"]),
            ("return redis.acl_check_cmd('client','info')", &["0"]),
            ("return redis.acl_check_cmd('client','list')", &["0"]),
            ("return redis.acl_check_cmd('set',{})", &["0"]),
            ("return redis.acl_check_cmd()", &["0"]),
            ("return redis.acl_check_cmd('set', 1.5, 2)", &["0"]),
            // Shorter than the command's arity: its key spec points past the arguments.
            ("return redis.acl_check_cmd('bitfield')", &["0"]),
            ("return redis.acl_check_cmd('sort')", &["0"]),
        ] {
            let mut args = vec!["EVAL", script];
            args.extend_from_slice(keys);
            out.push(c.cmd(&args));
        }
        out
    });
    assert_eq!(t[2], b":1\r\n");
    assert_eq!(t[3], b"$-1\r\n");
    // SET without its key: Redis's setGetKeys reads argv[1] past the end (undefined), so only
    // deadbolt is asked: it answers, and keeps serving.
    let s = common::deadbolt(&[]);
    let mut admin = s.conn();
    admin.cmd(&[
        "ACL",
        "SETUSER",
        "bob",
        "on",
        ">123",
        "+@scripting",
        "+set",
        "~x*",
    ]);
    let mut c = s.conn();
    c.cmd(&["AUTH", "bob", "123"]);
    let r = c.cmd(&["EVAL", "return redis.acl_check_cmd('set')", "0"]);
    assert!(
        r == b":1\r\n" || r == b"$-1\r\n",
        "{}",
        String::from_utf8_lossy(&r)
    );
    assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
}

/// UNLINK frees a large value on another thread and FLUSHALL/FLUSHDB ASYNC every key:
/// INFO's `lazyfreed_objects` counts them as Redis does (a small value is freed at once).
#[test]
fn lazy_freeing_is_counted_as_redis() {
    let lazyfreed = |c: &mut Conn| -> Vec<u8> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let info = String::from_utf8_lossy(&c.cmd(&["INFO", "memory"])).into_owned();
            let field = |name: &str| {
                info.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .unwrap_or("?")
                    .to_owned()
            };
            if field("lazyfree_pending_objects:") == "0" || Instant::now() > deadline {
                return field("lazyfreed_objects:").into_bytes();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let t = both_with(&["--enable-debug-command", "yes"], |s| {
        let mut c = s.conn();
        let mut out = vec![
            c.cmd(&["CONFIG", "RESETSTAT"]),
            c.cmd(&["CONFIG", "SET", "stream-node-max-entries", "5"]),
        ];
        for j in 0..300 {
            c.cmd(&["XADD", "stream", "*", "foo", &j.to_string()]);
        }
        out.push(c.cmd(&["XGROUP", "CREATE", "stream", "g", "0"]));
        out.push(c.cmd(&["UNLINK", "stream"]));
        out.push(lazyfreed(&mut c));
        out.push(c.cmd(&["CONFIG", "RESETSTAT"]));
        c.cmd(&["XADD", "s", "*", "a", "b"]);
        c.cmd(&["RPUSH", "l", "a", "b"]);
        let members: Vec<String> = (0..100).map(|i| format!("m{i}")).collect();
        let mut sadd = vec!["SADD", "big"];
        sadd.extend(members.iter().map(String::as_str));
        c.cmd(&sadd);
        out.push(c.cmd(&["UNLINK", "s", "l", "nosuch"]));
        out.push(lazyfreed(&mut c));
        out.push(c.cmd(&["UNLINK", "big"]));
        out.push(lazyfreed(&mut c));
        out.push(c.cmd(&["DEBUG", "POPULATE", "1000"]));
        out.push(c.cmd(&["FLUSHALL", "ASYNC"]));
        out.push(lazyfreed(&mut c));
        c.cmd(&["SET", "x", "y"]);
        out.push(c.cmd(&["FLUSHDB"]));
        out.push(lazyfreed(&mut c));
        out
    });
    assert_eq!(t[4], b"1");
    assert_eq!(t[9], b"1");
    assert_eq!(t[12], b"1001");
}

/// A smaller tracking-table-max-keys applies before the next command, even one queued in
/// MULTI: the invalidation reaches the tracking client before QUEUED (Redis's processCommand).
#[test]
fn tracking_table_limit_applies_before_a_queued_command() {
    let t = both_with(&["--enable-debug-command", "yes"], |s| {
        let mut c = s.conn();
        let mut rd = s.conn();
        let mut out = vec![
            c.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "2"]),
            c.cmd(&["DEBUG", "PAUSE-CRON", "1"]),
        ];
        rd.cmd(&["HELLO", "3"]);
        out.push(rd.cmd(&["CLIENT", "TRACKING", "on"]));
        out.push(rd.cmd(&["MGET", "1{tag}", "2{tag}"]));
        out.push(rd.cmd(&["MULTI"]));
        out.push(c.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1"]));
        rd.send(&["PING"]);
        let first = rd.read_reply();
        // Which of the two keys is forgotten is arbitrary (Redis picks at random).
        let first = String::from_utf8_lossy(&first).replace("1{tag}", "K{tag}");
        out.push(first.replace("2{tag}", "K{tag}").into_bytes());
        out.push(rd.read_reply());
        out.push(rd.cmd(&["EXEC"]));
        out.push(c.cmd(&["DEBUG", "PAUSE-CRON", "0"]));
        out
    });
    assert!(
        show(&t)[6].starts_with(">2\r\n$10\r\ninvalidate"),
        "{}",
        show(&t)[6]
    );
    assert_eq!(t[7], b"+QUEUED\r\n");
}

/// With `appendonly no`, BGREWRITEAOF writes the AOF directory and DEBUG LOADAOF loads it back
/// (keys written since are gone, TTLs kept), as on Redis.
#[test]
fn loadaof_without_appendonly_loads_what_bgrewriteaof_wrote() {
    let run = |s: &common::Server| -> Vec<Vec<u8>> {
        let mut c = s.conn();
        let mut out = Vec::new();
        for args in [
            &["SET", "x", "10"][..],
            &["EXPIRE", "x", "1000"],
            &["BGREWRITEAOF"],
        ] {
            out.push(c.cmd(args));
        }
        // The rewrite is over when INFO says so.
        let deadline = Instant::now() + Duration::from_secs(10);
        while String::from_utf8_lossy(&c.cmd(&["INFO", "persistence"]))
            .contains("aof_rewrite_in_progress:1")
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        for args in [
            &["SET", "y", "1"][..],
            &["DEBUG", "LOADAOF"],
            &["GET", "y"],
            &["GET", "x"],
            &["DBSIZE"],
        ] {
            out.push(c.cmd(args));
        }
        let ttl = c.cmd(&["TTL", "x"]);
        out.push(format!("ttl kept: {}", ttl == b":1000\r\n" || ttl == b":999\r\n").into_bytes());
        out
    };
    let (d1, d2) = (
        common::TempDir::new("loadaof-ours"),
        common::TempDir::new("loadaof-redis"),
    );
    let extra = |d: &common::TempDir| {
        vec![
            "--enable-debug-command".to_string(),
            "yes".to_string(),
            "--dir".to_string(),
            d.0.to_string_lossy().into_owned(),
        ]
    };
    let (e1, e2) = (extra(&d1), extra(&d2));
    let ours = run(&common::deadbolt(
        &e1.iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    let theirs = run(&common::redis_server(
        &e2.iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    assert_eq!(show(&ours), show(&theirs));
    assert_eq!(ours[4], b"+OK\r\n");
    assert_eq!(ours[5], b"$-1\r\n");
}

/// Deadlines near i64::MAX: EXPIRETIME rounds them as Redis prints them, and the active-expiry
/// cron that samples the key (several times a cycle, summing TTLs for `avg_ttl`) keeps serving.
#[test]
fn deadlines_near_i64_max_round_and_survive_the_expiry_cron() {
    let t = both(|s| {
        let mut c = s.conn();
        let mut out = Vec::new();
        for k in ["e", "s", "foo"] {
            out.push(c.cmd(&["SET", k, "v"]));
        }
        out.push(c.cmd(&["PEXPIREAT", "foo", "9223372036854775807"]));
        out.push(c.cmd(&["EXPIRETIME", "foo"]));
        out.push(c.cmd(&["PEXPIRETIME", "foo"]));
        out.push(c.cmd(&["PEXPIREAT", "e", "9223372036854770000"]));
        out.push(c.cmd(&["PEXPIREAT", "s", "9223372036854770000"]));
        // Several expiry cycles (hz 10) sample the three keys.
        let until = Instant::now() + Duration::from_millis(400);
        while Instant::now() < until {
            out.push(c.cmd(&["PING"]));
        }
        out.dedup();
        out.push(c.cmd(&["EXPIRETIME", "e"]));
        out.push(c.cmd(&["DBSIZE"]));
        out
    });
    assert_eq!(show(&t).last().map(String::as_str), Some(":3\r\n"));
}

/// SCAN deletes the expired keys it meets, as Redis's (expireIfNeeded): DBSIZE and
/// `expired_keys` change, and the keys are not returned.
#[test]
fn scan_deletes_the_expired_keys_it_meets() {
    both_with(&["--enable-debug-command", "yes"], |s| {
        let mut c = s.conn();
        let mut out = vec![c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"])];
        out.push(c.cmd(&["SET", "foo1", "bar", "PX", "1"]));
        out.push(c.cmd(&["SET", "foo2", "bar", "PX", "1"]));
        out.push(c.cmd(&["SET", "keep", "v"]));
        std::thread::sleep(Duration::from_millis(5));
        out.push(c.cmd(&["DBSIZE"]));
        out.push(c.cmd(&["SCAN", "0", "COUNT", "100"]));
        out.push(c.cmd(&["DBSIZE"]));
        let info = String::from_utf8_lossy(&c.cmd(&["INFO", "stats"])).into_owned();
        let expired = info.lines().find(|l| l.starts_with("expired_keys:"));
        out.push(expired.unwrap_or("").as_bytes().to_vec());
        out
    });
}
