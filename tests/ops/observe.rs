//! MONITOR, SLOWLOG, LATENCY and CLIENT PAUSE/UNPAUSE, against a real redis-server.

use crate::common;

use common::{Conn, Server};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// `+1795318446.889218 [0 127.0.0.1:55016] "get" "k"` → (time, db, addr, rest).
fn split_monitor_line(line: &str) -> (f64, String, String, String) {
    let line = line.trim_start_matches('+').trim_end();
    let (ts, rest) = line.split_once(" [").unwrap();
    let (src, args) = rest.split_once("] ").unwrap();
    let (db, addr) = src.split_once(' ').unwrap();
    assert_eq!(ts.split_once('.').unwrap().1.len(), 6, "{line}");
    (ts.parse().unwrap(), db.into(), addr.into(), args.into())
}

/// What a monitor sees while `cmds` run on another connection (up to and including PING).
fn monitor_session(s: &Server, cmds: &[&[&[u8]]]) -> Vec<String> {
    let mut m = s.conn();
    assert_eq!(m.cmd(&["MONITOR"]), b"+OK\r\n");
    let mut c = s.conn();
    let me = c.stream.local_addr().unwrap().to_string();
    for cmd in cmds {
        c.cmd(cmd);
    }
    c.cmd(&["PING"]);
    let mut seen = Vec::new();
    loop {
        let line = String::from_utf8(m.read_reply()).unwrap();
        let (ts, db, addr, args) = split_monitor_line(&line);
        assert!((ts - now_secs()).abs() < 30.0, "{line}");
        assert_eq!(addr, me, "{line}");
        seen.push(format!("[{db}] {args}"));
        if args == "\"PING\"" {
            return seen;
        }
    }
}

#[test]
fn monitor_shows_what_redis_shows() {
    let cmds: &[&[&[u8]]] = &[
        &[b"SET", b"k", b"v"],
        &[b"get", b"k"],
        &[b"AUTH", b"x"],
        &[b"AUTH", b"u", b"p"],
        &[b"HELLO", b"2", b"AUTH", b"default", b"x"],
        &[b"CONFIG", b"GET", b"port"],
        &[b"NOSUCH", b"a"],
        &[b"GET"],
        &[b"SET", b"a", b"b", b"c"],
        &[b"SELECT", b"1"],
        &[b"SET", b"q", b"12"],
        &[b"CLIENT", b"LIST"],
        &[b"SLOWLOG", b"LEN"],
        &[b"ECHO", b"a\"b\\c"],
        &[b"SET", b"bin", b"a\x01\x7f\xc3\xa9\n\tz\r"],
    ];
    let ours = monitor_session(&common::deadbolt(&[]), cmds);
    let redis = monitor_session(&common::redis_server(&[]), cmds);
    assert_eq!(ours, redis);
    assert!(ours.contains(&"[0] \"AUTH\" \"(redacted)\" \"(redacted)\"".to_string()));
}

/// Scripts: MONITOR shows the EVAL / EVALSHA / EVAL_RO line first, then the commands the script
/// ran tagged `lua`, as Redis does; a script that never ran (NOSCRIPT, a compile error, a bad
/// numkeys) still has its line.
#[test]
fn monitor_shows_scripts_as_redis_does() {
    fn session(s: &Server) -> Vec<String> {
        let mut m = s.conn();
        assert_eq!(m.cmd(&["MONITOR"]), b"+OK\r\n");
        let mut c = s.conn();
        let body = "redis.call('set', KEYS[1], ARGV[1]); return redis.call('get', KEYS[1])";
        c.cmd(&["EVAL", body, "1", "k", "v"]);
        let sha =
            String::from_utf8(c.cmd(&["SCRIPT", "LOAD", "return redis.call('get', KEYS[1])"]))
                .unwrap();
        let sha = sha.lines().nth(1).unwrap().to_string();
        c.cmd(&["EVALSHA", &sha, "1", "k"]);
        c.cmd(&["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "k"]);
        c.cmd(&["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"]);
        c.cmd(&["EVAL", "return (", "0"]);
        c.cmd(&["EVAL", "return 1", "5"]);
        // Lock clients' scripts, which deadbolt runs natively (src/script/native.rs): their
        // calls appear as Lua's would, spelled as the script spells them.
        let lua = |f: &str| {
            std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("lua")
                    .join(f),
            )
            .unwrap()
        };
        c.cmd(&["SET", "lock", "tok"]);
        c.cmd(&[
            "EVAL",
            &lua("redis-py/lua_release_script.lua"),
            "1",
            "lock",
            "tok",
        ]);
        c.cmd(&["SET", "lock", "tok"]);
        c.cmd(&["EVAL", &lua("redsync/deletescript.lua"), "1", "lock", "tok"]);
        let acquire = lua("redisson/rlock_trylockinnerasync.lua");
        c.cmd(&["EVAL", &acquire, "1", "rlock", "30000", "me:1"]);
        c.cmd(&["EVAL", &acquire, "1", "rlock", "30000", "other:1"]);
        c.cmd(&["PING"]);
        let mut seen = Vec::new();
        loop {
            let line = String::from_utf8(m.read_reply()).unwrap();
            let (_, db, addr, args) = split_monitor_line(&line);
            let who = if addr == "lua" { "lua" } else { "client" };
            seen.push(format!("[{db} {who}] {args}"));
            if args == "\"PING\"" {
                return seen;
            }
        }
    }
    let ours = session(&common::deadbolt(&[]));
    let redis = session(&common::redis_server(&[]));
    assert_eq!(ours, redis);
    assert!(ours[0].starts_with("[0 client] \"EVAL\""), "{ours:?}");
    assert_eq!(ours[1], "[0 lua] \"set\" \"k\" \"v\"", "{ours:?}");
}

#[test]
fn a_monitor_sees_its_own_commands_after_their_replies() {
    for s in [common::deadbolt(&[]), common::redis_server(&[])] {
        let mut m = s.conn();
        assert_eq!(m.cmd(&["MONITOR"]), b"+OK\r\n");
        assert_eq!(m.cmd(&["PING"]), b"+PONG\r\n");
        let line = String::from_utf8(m.read_reply()).unwrap();
        assert!(line.ends_with("] \"PING\"\r\n"), "{line}");
        assert_eq!(
            m.cmd(&["GET", "k"]),
            b"-ERR Replica can't interact with the keyspace\r\n"
        );
        // A second MONITOR gets no reply at all.
        m.send(&["MONITOR"]);
        assert_eq!(m.cmd(&["ECHO", "x"]), b"$1\r\nx\r\n");
        let line = String::from_utf8(m.read_reply()).unwrap();
        assert!(line.ends_with("] \"ECHO\" \"x\"\r\n"), "{line}");
    }
}

#[test]
fn redis_cli_monitor() {
    let s = common::deadbolt(&[]);
    let mut child = Command::new("redis-cli")
        .args(["-p", &s.port.to_string(), "monitor"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-cli");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "OK\n");
    let mut c = s.conn();
    let me = c.stream.local_addr().unwrap().to_string();
    c.cmd(&["SET", "lock:a", "token", "NX", "PX", "30000"]);
    line.clear();
    out.read_line(&mut line).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let (ts, db, addr, args) = split_monitor_line(&line);
    assert!((ts - now_secs()).abs() < 30.0, "{line}");
    assert_eq!((db.as_str(), addr.as_str()), ("0", me.as_str()));
    assert_eq!(args, r#""SET" "lock:a" "token" "NX" "PX" "30000""#);
}

// ---- SLOWLOG ------------------------------------------------------------------------------------

#[derive(Debug, PartialEq)]
enum V {
    Int(i64),
    Bulk(Vec<u8>),
    Arr(Vec<V>),
}

fn parse(b: &[u8], at: &mut usize) -> V {
    let end = *at + b[*at..].windows(2).position(|w| w == b"\r\n").unwrap();
    let head = std::str::from_utf8(&b[*at + 1..end]).unwrap();
    let kind = b[*at];
    *at = end + 2;
    match kind {
        b':' => V::Int(head.parse().unwrap()),
        b'$' => {
            let n: usize = head.parse().unwrap();
            let v = b[*at..*at + n].to_vec();
            *at += n + 2;
            V::Bulk(v)
        }
        b'*' => V::Arr(
            (0..head.parse::<usize>().unwrap())
                .map(|_| parse(b, at))
                .collect(),
        ),
        _ => panic!("unexpected reply {:?}", String::from_utf8_lossy(b)),
    }
}

/// SLOWLOG GET without what legitimately differs (time, duration, client port).
fn slowlog(c: &mut Conn) -> Vec<(i64, Vec<Vec<u8>>, Vec<u8>)> {
    let reply = c.cmd(&["SLOWLOG", "GET", "-1"]);
    let V::Arr(entries) = parse(&reply, &mut 0) else {
        panic!()
    };
    entries
        .into_iter()
        .map(|e| {
            let V::Arr(f) = e else { panic!() };
            let [V::Int(id), V::Int(ts), V::Int(usec), V::Arr(args), V::Bulk(peer), V::Bulk(name)] =
                &f[..]
            else {
                panic!("{f:?}")
            };
            assert!((*ts as f64 - now_secs()).abs() < 30.0);
            assert!(*usec >= 0);
            assert!(peer.starts_with(b"127.0.0.1:"));
            let args = args
                .iter()
                .map(|a| match a {
                    V::Bulk(b) => b.clone(),
                    _ => panic!(),
                })
                .collect();
            (*id, args, name.clone())
        })
        .collect()
}

#[test]
fn slowlog_matches_redis() {
    let long = "x".repeat(200);
    let mut many: Vec<String> = vec!["DEL".into()];
    many.extend((0..40).map(|i| format!("k{i}")));
    let script: Vec<Vec<String>> = vec![
        vec![
            "CONFIG".into(),
            "SET".into(),
            "slowlog-log-slower-than".into(),
            "0".into(),
        ],
        vec!["CLIENT".into(), "SETNAME".into(), "locker".into()],
        vec!["SET".into(), "k".into(), "v".into()],
        vec!["AUTH".into(), "user".into(), "secret".into()],
        vec!["ECHO".into(), long],
        many,
    ];
    let mut got = Vec::new();
    for s in [common::deadbolt(&[]), common::redis_server(&[])] {
        let mut c = s.conn();
        for cmd in &script {
            c.cmd(cmd);
        }
        let log = slowlog(&mut c);
        assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), b":7\r\n");
        assert_eq!(c.cmd(&["SLOWLOG", "GET", "0"]), b"*0\r\n");
        assert_eq!(c.cmd(&["SLOWLOG", "RESET"]), b"+OK\r\n");
        // RESET is logged itself, then LEN counts it.
        assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), b":1\r\n");
        let mut rest = Vec::new();
        for cmd in [
            &["SLOWLOG", "GET", "-2"][..],
            &["SLOWLOG", "GET", "x"],
            &["SLOWLOG", "GET", "1", "2"],
            &["SLOWLOG", "LEN", "x"],
            &["SLOWLOG"],
            &["SLOWLOG", "NOPE"],
            &["SLOWLOG", "HELP"],
            &["CONFIG", "SET", "slowlog-log-slower-than", "-2"],
            &["CONFIG", "SET", "slowlog-log-slower-than", "abc"],
            &["CONFIG", "SET", "slowlog-max-len", "-1"],
            // (One name per CONFIG GET: Redis orders pattern matches by its hash seed.)
            &["CONFIG", "GET", "slowlog-max-len"],
            &["CONFIG", "GET", "slowlog-log-slower-than"],
            &[
                "CONFIG",
                "SET",
                "slowlog-max-len",
                "2",
                "slowlog-log-slower-than",
                "-1",
            ],
            &["PING"],
            &["SLOWLOG", "LEN"],
            &["CONFIG", "SET", "slowlog-log-slower-than", "0"],
            &["PING"],
            &["SLOWLOG", "LEN"],
        ] {
            rest.push((cmd, c.cmd_str(cmd)));
        }
        got.push((log, rest));
    }
    let (ours, redis) = (&got[0], &got[1]);
    assert_eq!(ours.0, redis.0);
    for ((cmd, a), (_, b)) in ours.1.iter().zip(&redis.1) {
        assert_eq!(a, b, "{cmd:?}");
    }
    // The entries themselves: newest first, passwords redacted, long values and argument lists
    // cut as Redis does.
    let log = &ours.0;
    assert_eq!(
        log[2].1,
        vec![
            b"AUTH".to_vec(),
            b"(redacted)".to_vec(),
            b"(redacted)".to_vec()
        ]
    );
    assert_eq!(log[2].2, b"locker");
    assert_eq!(
        log[1].1[1],
        [&"x".repeat(128)[..], "... (72 more bytes)"]
            .concat()
            .into_bytes()
    );
    assert_eq!(log[0].1.len(), 32);
    assert_eq!(log[0].1[31], b"... (10 more arguments)");
}

// ---- LATENCY -------------------------------------------------------------------------------------

#[test]
fn latency_matches_redis_where_implemented() {
    let (ours, redis) = (common::deadbolt(&[]), common::redis_server(&[]));
    let (mut a, mut b) = (ours.conn(), redis.conn());
    for cmd in [
        &["LATENCY", "LATEST"][..],
        &["LATENCY", "HISTORY", "command"],
        &["LATENCY", "RESET"],
        &["LATENCY", "RESET", "command", "fork"],
        &["LATENCY", "LATEST", "x"],
        &["LATENCY", "FOO"],
        &["LATENCY"],
        &["LATENCY", "HELP"],
    ] {
        assert_eq!(a.cmd_str(cmd), b.cmd_str(cmd), "{cmd:?}");
    }
}

// ---- CLIENT PAUSE ----------------------------------------------------------------------------

#[test]
fn client_pause_errors_match_redis() {
    let (ours, redis) = (common::deadbolt(&[]), common::redis_server(&[]));
    let (mut a, mut b) = (ours.conn(), redis.conn());
    for cmd in [
        &["CLIENT", "PAUSE", "abc"][..],
        &["CLIENT", "PAUSE", "-1"],
        &["CLIENT", "PAUSE", "1.5"],
        &["CLIENT", "PAUSE", "10", "foo"],
        &["CLIENT", "PAUSE", "10", "write", "extra"],
        &["CLIENT", "PAUSE"],
        &["CLIENT", "UNPAUSE", "x"],
        &["CLIENT", "UNPAUSE"],
        &["CLIENT", "PAUSE", "0"],
        &["PING"],
    ] {
        assert_eq!(a.cmd_str(cmd), b.cmd_str(cmd), "{cmd:?}");
    }
}

#[test]
fn write_pause_holds_writes_until_unpause() {
    for s in [common::deadbolt(&[]), common::redis_server(&[])] {
        let mut admin = s.conn();
        let mut c = s.conn();
        assert_eq!(c.cmd(&["SET", "k", "v1"]), b"+OK\r\n");
        assert_eq!(
            admin.cmd(&["CLIENT", "PAUSE", "20000", "WRITE"]),
            b"+OK\r\n"
        );
        // Reads go on; a pipelined write waits, and so does everything after it.
        c.send_raw(
            &[
                common::resp_cmd(&["GET", "k"]),
                common::resp_cmd(&["SET", "k", "v2"]),
                common::resp_cmd(&["GET", "k"]),
            ]
            .concat(),
        );
        assert_eq!(c.read_reply(), b"$2\r\nv1\r\n");
        assert_eq!(c.try_read_reply(Duration::from_millis(300)), None);
        let mut other = s.conn();
        assert_eq!(other.cmd(&["GET", "k"]), b"$2\r\nv1\r\n");
        assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), b"+OK\r\n");
        assert_eq!(c.read_reply(), b"+OK\r\n");
        assert_eq!(c.read_reply(), b"$2\r\nv2\r\n");
    }
}

#[test]
fn all_pause_ends_by_itself() {
    for s in [common::deadbolt(&[]), common::redis_server(&[])] {
        let mut admin = s.conn();
        let mut c = s.conn();
        assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "400", "ALL"]), b"+OK\r\n");
        let started = Instant::now();
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
            "{waited:?}"
        );
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    }
}
