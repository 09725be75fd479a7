//! Keyspace notifications: `notify-keyspace-events` from the command line and CONFIG SET,
//! the channels and payloads of events, and `expired` fired by active expiry.

use crate::common;

use common::Conn;
use std::time::{Duration, Instant};

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn msg(channel: &str, payload: &str) -> String {
    format!(
        "*3\r\n$7\r\nmessage\r\n${}\r\n{channel}\r\n${}\r\n{payload}\r\n",
        channel.len(),
        payload.len()
    )
}

#[test]
fn config_get_set_renders_like_redis() {
    let s = common::deadbolt(&[]);
    let r = common::redis_server(&[]);
    let mut transcripts = Vec::new();
    for server in [&s, &r] {
        let mut c = server.conn();
        let mut transcript = Vec::new();
        for v in [
            "KEA",
            "xmKgn$lshzetd",
            "n",
            "gn",
            "g$lshzxet",
            "g$lshzxetd",
            "E",
            "Kq",
            "",
        ] {
            transcript.push(show(&c.cmd(&[
                "CONFIG",
                "SET",
                "notify-keyspace-events",
                v,
            ])));
            transcript.push(show(&c.cmd(&["CONFIG", "GET", "notify-keyspace-events"])));
        }
        for v in [
            "pubsub 1 2",
            "foo 1 2 3",
            "master 1 2 3",
            "pubsub 1x 2 3",
            "pubsub 1 2 -3",
            "pubsub 1kb 2mb 3 replica 1 2 3",
            "normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60",
        ] {
            transcript.push(show(&c.cmd(&[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                v,
            ])));
            transcript.push(show(&c.cmd(&[
                "CONFIG",
                "GET",
                "client-output-buffer-limit",
            ])));
        }
        transcripts.push(transcript.join(""));
    }
    let (ours, redis) = (transcripts[0].clone(), transcripts[1].clone());
    assert_eq!(ours, redis);
    assert!(ours.contains("$3\r\nAKE\r\n"), "{ours}");
    assert!(ours.contains("pubsub 1024 2097152 3"), "{ours}");
}

#[test]
fn directives_from_the_command_line() {
    let s = common::deadbolt(&[
        "--notify-keyspace-events",
        "Eg",
        "--client-output-buffer-limit",
        "pubsub 1mb 512kb 10",
    ]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "notify-keyspace-events"]),
        "*2\r\n$22\r\nnotify-keyspace-events\r\n$2\r\ngE\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "client-output-buffer-limit"]),
        "*2\r\n$26\r\nclient-output-buffer-limit\r\n$65\r\nnormal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 524288 10\r\n"
    );
}

#[test]
fn events_are_published_only_for_enabled_classes() {
    let s = common::deadbolt(&[]);
    let mut sub = s.conn();
    let mut c = s.conn();
    sub.cmd(&["PSUBSCRIBE", "__key*__:*"]);
    // Off by default.
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "K$"]);
    c.cmd(&["DEL", "k"]); // generic class: not enabled
    c.cmd(&["SET", "k", "v"]);
    assert_eq!(
        show(&sub.read_reply()),
        "*4\r\n$8\r\npmessage\r\n$10\r\n__key*__:*\r\n$16\r\n__keyspace@0__:k\r\n$3\r\nset\r\n"
    );
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Eg"]);
    c.cmd(&["SELECT", "3"]);
    c.cmd(&["SET", "k", "v"]); // string class: off now
    c.cmd(&["DEL", "k"]);
    assert_eq!(
        show(&sub.read_reply()),
        "*4\r\n$8\r\npmessage\r\n$10\r\n__key*__:*\r\n$18\r\n__keyevent@3__:del\r\n$1\r\nk\r\n"
    );
    assert_eq!(sub.try_read_reply(Duration::from_millis(100)), None);
}

/// The subscriber's transcript for the same writes on deadbolt and redis-server.
#[test]
fn differential_keyspace_events() {
    let cmds: &[&[&str]] = &[
        &["SET", "a", "1"],
        &["SET", "b", "2", "PX", "100000"],
        &["EXPIRE", "a", "100"],
        &["PERSIST", "a"],
        &["INCR", "a"],
        &["APPEND", "a", "x"],
        &["HSET", "h", "f", "v"],
        &["HDEL", "h", "f"],
        &["DEL", "a", "b", "nope"],
        &["SET", "c", "1", "PX", "1"],
    ];
    let run = |server: &common::Server| -> String {
        let mut sub = server.conn();
        let mut c = server.conn();
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
        sub.cmd(&["PSUBSCRIBE", "__key*"]);
        for argv in cmds {
            c.cmd(argv);
        }
        // The last key expires by itself (active expiry); wait for its event, then mark the end.
        let mut out = String::new();
        loop {
            let r = show(&sub.read_reply());
            out.push_str(&r);
            if r.contains("$7\r\nexpired\r\n") {
                break;
            }
        }
        c.cmd(&["PUBLISH", "__keyspace@0__:end", "end"]);
        out.push_str(&show(&sub.read_reply()));
        out
    };
    let ours = run(&common::deadbolt(&[]));
    let redis = run(&common::redis_server(&[]));
    assert_eq!(ours, redis);
}

/// A lock key reaching its PX deadline produces `__keyevent@0__:expired` without anybody
/// touching the key: a waiter can wake at the expiry instead of polling.
#[test]
fn expired_event_from_active_expiry() {
    let s = common::deadbolt(&["--notify-keyspace-events", "Ex"]);
    let mut waiter = s.conn();
    let mut owner = s.conn();
    assert_eq!(
        waiter.cmd_str(&["SUBSCRIBE", "__keyevent@0__:expired"]),
        "*3\r\n$9\r\nsubscribe\r\n$22\r\n__keyevent@0__:expired\r\n:1\r\n"
    );
    let started = Instant::now();
    assert_eq!(
        owner.cmd_str(&["SET", "lock:res", "token", "NX", "PX", "150"]),
        "+OK\r\n"
    );
    let r = waiter.read_reply();
    let waited = started.elapsed();
    assert_eq!(show(&r), msg("__keyevent@0__:expired", "lock:res"));
    assert!(waited >= Duration::from_millis(150), "{waited:?}");
    // hz 10: the key is found within about one cron period of its deadline.
    assert!(waited < Duration::from_millis(1500), "{waited:?}");
    assert_eq!(owner.cmd_str(&["EXISTS", "lock:res"]), ":0\r\n");
    let info = owner.cmd_str(&["INFO", "stats"]);
    assert!(info.contains("\r\nexpired_keys:1\r\n"), "{info}");
}

/// Lazy expiry announces the key before the event of the command that found it expired.
#[test]
fn lazy_expiry_event_comes_before_the_commands_own_event() {
    let s = common::deadbolt(&["--notify-keyspace-events", "KEA", "--hz", "1"]);
    let mut sub = s.conn();
    let mut c: Conn = s.conn();
    sub.cmd(&["PSUBSCRIBE", "__keyevent@0__:*"]);
    c.cmd(&["SET", "k", "v", "PX", "1"]);
    for ev in ["set", "expire"] {
        let r = show(&sub.read_reply());
        assert!(r.contains(&format!("__keyevent@0__:{ev}\r\n")), "{r}");
    }
    std::thread::sleep(Duration::from_millis(5)); // past the 1 ms deadline, before the 1 s cron
    c.cmd(&["SET", "k", "w"]);
    let r = show(&sub.read_reply());
    assert!(r.contains("__keyevent@0__:expired\r\n"), "{r}");
    let r = show(&sub.read_reply());
    assert!(r.contains("__keyevent@0__:set\r\n"), "{r}");
}

/// A RESP3 client subscribed to its own keyspace gets the `expired` push for a key its read
/// found expired before the read's reply, as from Redis.
#[test]
fn differential_lazy_expired_push_to_self_before_the_reply() {
    let run = |server: &common::Server| -> Vec<u8> {
        let mut c = server.conn();
        c.cmd(&["HELLO", "3"]);
        // No active expiry in the way: the key is only found expired by the GET (redis:
        // active expiry off; deadbolt: hz 1, whose next cron is a second after start-up).
        c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Ex"]);
        c.cmd(&["SUBSCRIBE", "__keyevent@0__:expired"]);
        c.cmd(&["SET", "k", "v", "PX", "1"]);
        std::thread::sleep(Duration::from_millis(5));
        c.send(&["GET", "k"]);
        let mut out = c.read_reply();
        out.extend(c.read_reply());
        out
    };
    let ours = run(&common::deadbolt(&["--hz", "1"]));
    let redis = run(&common::redis_server(&["--enable-debug-command", "yes"]));
    assert_eq!(show(&ours), show(&redis));
    assert_eq!(
        show(&ours),
        ">3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:expired\r\n$1\r\nk\r\n_\r\n"
    );
}

/// `new` (class n, not part of A) fires for every key created, before the command's own event,
/// as Redis's dbAdd does; the subscriber's transcript is compared with redis-server's.
#[test]
fn differential_new_key_events() {
    let cmds: &[&[&str]] = &[
        &["SET", "a", "1"],
        &["SET", "a", "2"],
        &["MSET", "m1", "x", "a", "3", "m2", "y"],
        &["MSETNX", "n1", "x", "n2", "y"],
        &["SETNX", "a", "4"],
        &["SETNX", "s1", "4"],
        &["SETEX", "s2", "100", "v"],
        &["SET", "s3", "v", "GET"],
        &["INCR", "i"],
        &["INCRBYFLOAT", "f", "1.5"],
        &["APPEND", "ap", "x"],
        &["LPUSH", "l", "x"],
        &["RPUSH", "l", "y"],
        &["LMOVE", "l", "l2", "LEFT", "RIGHT"],
        &["HSET", "h", "f", "v"],
        &["HINCRBYFLOAT", "h2", "f", "2.5"],
        &["HSETNX", "h3", "f", "v"],
        &["SADD", "st", "x"],
        &["ZADD", "z", "1", "x"],
        &["ZINCRBY", "z2", "1", "x"],
        &["RENAME", "a", "r1"],
        &["RENAME", "r1", "s1"],
        &["RENAMENX", "s1", "r2"],
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'v') return redis.call('lpush', KEYS[2], 'x')",
            "2",
            "e1",
            "e2",
        ],
        &["MULTI"],
        &["SET", "t1", "v"],
        &["SET", "t1", "w"],
        &["HSET", "t2", "f", "v"],
        &["EXEC"],
        &["SELECT", "2"],
        &["SET", "d2", "v"],
        &["SET", "past", "v", "PXAT", "1"],
        &["GETSET", "gs", "v"],
        // EXPIRE options: a refused change is silent, a past time deletes with `del`.
        &["EXPIRE", "d2", "200", "LT", "XX"],
        &["EXPIRE", "d2", "200", "NX"],
        &["EXPIRE", "d2", "300", "LT"],
        &["EXPIRE", "d2", "100", "XX", "LT"],
        &["EXPIRE", "gs", "-1"],
        &["PEXPIREAT", "d2", "1", "LT"],
    ];
    let run = |server: &common::Server| -> String {
        let mut sub = server.conn();
        let mut c = server.conn();
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEn$glshzx"]);
        sub.cmd(&["PSUBSCRIBE", "__key*"]);
        sub.cmd(&["SUBSCRIBE", "end"]);
        for argv in cmds {
            c.cmd(argv);
        }
        // A blocked BLMOVE served by a push creates its destination.
        let mut w = server.conn();
        w.cmd(&["SELECT", "2"]);
        w.send(&["BLMOVE", "bsrc", "bdst", "LEFT", "RIGHT", "5"]);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !c.cmd_str(&["CLIENT", "LIST"]).contains("cmd=blmove") {
            assert!(Instant::now() < deadline, "BLMOVE never blocked");
            std::thread::sleep(Duration::from_millis(5));
        }
        c.cmd(&["LPUSH", "bsrc", "x"]);
        assert_eq!(show(&w.read_reply()), "$1\r\nx\r\n");
        c.cmd(&["PUBLISH", "end", "end"]);
        let mut out = String::new();
        loop {
            let r = show(&sub.read_reply());
            if r.contains("$3\r\nend\r\n$3\r\nend\r\n") {
                break;
            }
            // One line per message: channel and payload.
            let parts: Vec<&str> = r.split("\r\n").collect();
            out.push_str(&format!("{} {}\n", parts[6], parts[8]));
        }
        out
    };
    let ours = run(&common::deadbolt(&[]));
    let redis = run(&common::redis_server(&[]));
    assert_eq!(ours, redis);
    assert!(ours.contains("__keyevent@0__:new l\n"), "{ours}");
    assert!(ours.contains("__keyevent@2__:new bdst\n"), "{ours}");
    // A does not include n.
    let s = common::deadbolt(&["--notify-keyspace-events", "KEA"]);
    let (mut sub, mut c) = (s.conn(), s.conn());
    sub.cmd(&["SUBSCRIBE", "__keyevent@0__:new", "__keyevent@0__:set"]);
    sub.read_reply();
    c.cmd(&["SET", "k", "v"]);
    assert_eq!(show(&sub.read_reply()), msg("__keyevent@0__:set", "k"));
}
