//! Pub/sub: exact bytes in RESP2 and RESP3, several connections, and a differential run of
//! the same script against a real redis-server.

use crate::common;

use common::{Conn, Server};

/// Sends a command on one connection, then a PING with a unique marker on every connection
/// (the acting one first), and returns what each connection received up to and including its marker reply. Every
/// connection's output is ordered, so this captures all replies and pushes the command caused
/// without sleeping.
fn step(conns: &mut [Conn], at: usize, argv: &[&str], marker: &mut u32) -> Vec<Vec<u8>> {
    conns[at].send(argv);
    let mut out = vec![Vec::new(); conns.len()];
    // The acting connection first: once its marker is back, the command has run everywhere.
    let order = std::iter::once(at).chain((0..conns.len()).filter(|&i| i != at));
    for i in order {
        let c = &mut conns[i];
        *marker += 1;
        let m = format!("marker-{marker}");
        c.send(&["PING", &m]);
        let mut got = Vec::new();
        loop {
            let r = c.read_reply();
            let end = r.windows(m.len()).any(|w| w == m.as_bytes());
            got.extend_from_slice(&r);
            if end {
                break;
            }
        }
        out[i] = got;
    }
    out
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// HELLO's client id depends on how many connections each server has seen.
fn mask_client_id(s: &str) -> String {
    match s.find("$2\r\nid\r\n:") {
        Some(at) => {
            let start = at + "$2\r\nid\r\n:".len();
            let end = start + s[start..].find('\r').unwrap_or(0);
            format!("{}N{}", &s[..start], &s[end..])
        }
        None => s.to_string(),
    }
}

/// Runs a script of (connection, command) steps and returns the transcript.
fn run_script(s: &Server, nconns: usize, script: &[(usize, &str)]) -> Vec<String> {
    let mut conns: Vec<Conn> = (0..nconns).map(|_| s.conn()).collect();
    let mut marker = 0;
    let mut transcript = Vec::new();
    for (at, line) in script {
        let argv = common::split_line(line);
        let argv: Vec<String> = argv.iter().map(|a| show(a)).collect();
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let outs = step(&mut conns, *at, &argv, &mut marker);
        for (i, o) in outs.iter().enumerate() {
            let text = mask_client_id(&show(o));
            transcript.push(format!("[{at}] {line} => conn {i}: {text}"));
        }
    }
    transcript
}

#[test]
fn resp2_subscribe_confirmations_and_unsubscribe_replies() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd_str(&["UNSUBSCRIBE"]),
        "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"
    );
    assert_eq!(
        c.cmd_str(&["PUNSUBSCRIBE"]),
        "*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n"
    );
    assert_eq!(
        c.cmd_str(&["SUNSUBSCRIBE"]),
        "*3\r\n$12\r\nsunsubscribe\r\n$-1\r\n:0\r\n"
    );
    assert_eq!(
        c.cmd_str(&["UNSUBSCRIBE", "x"]),
        "*3\r\n$11\r\nunsubscribe\r\n$1\r\nx\r\n:0\r\n"
    );
    c.send(&["SUBSCRIBE", "a", "b", "a"]);
    assert_eq!(
        show(&c.read_reply()),
        "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"
    );
    assert_eq!(
        show(&c.read_reply()),
        "*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n"
    );
    assert_eq!(
        show(&c.read_reply()),
        "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:2\r\n"
    );
    assert_eq!(
        c.cmd_str(&["PSUBSCRIBE", "p*"]),
        "*3\r\n$10\r\npsubscribe\r\n$2\r\np*\r\n:3\r\n"
    );
    // Shard subscriptions are counted on their own.
    assert_eq!(
        c.cmd_str(&["SSUBSCRIBE", "s1"]),
        "*3\r\n$10\r\nssubscribe\r\n$2\r\ns1\r\n:1\r\n"
    );
    assert_eq!(
        c.cmd_str(&["GET", "x"]),
        "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CLIENT", "LIST"]),
        "-ERR Can't execute 'client|list': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
    );
    assert_eq!(c.cmd_str(&["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    assert_eq!(
        c.cmd_str(&["PING", "hi"]),
        "*2\r\n$4\r\npong\r\n$2\r\nhi\r\n"
    );
    // Unsubscribe-all confirms each channel in subscription order with the count after it.
    c.send(&["UNSUBSCRIBE"]);
    assert_eq!(
        show(&c.read_reply()),
        "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:2\r\n"
    );
    assert_eq!(
        show(&c.read_reply()),
        "*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:1\r\n"
    );
    assert_eq!(
        c.cmd_str(&["PUNSUBSCRIBE"]),
        "*3\r\n$12\r\npunsubscribe\r\n$2\r\np*\r\n:0\r\n"
    );
    // Still subscribed to a shard channel: still in subscribed mode.
    assert_eq!(c.cmd_str(&["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    assert_eq!(
        c.cmd_str(&["SUNSUBSCRIBE"]),
        "*3\r\n$12\r\nsunsubscribe\r\n$2\r\ns1\r\n:0\r\n"
    );
    assert_eq!(c.cmd_str(&["PING"]), "+PONG\r\n");
    assert_eq!(c.cmd_str(&["GET", "x"]), "$-1\r\n");
}

#[test]
fn publish_delivers_to_channels_and_patterns_in_order() {
    let s = common::deadbolt(&[]);
    let mut sub = s.conn();
    let mut psub = s.conn();
    let mut publisher = s.conn();
    sub.cmd(&["SUBSCRIBE", "news"]);
    psub.cmd(&["PSUBSCRIBE", "n?ws"]);
    assert_eq!(publisher.cmd_str(&["PUBLISH", "other", "x"]), ":0\r\n");
    for i in 0..100 {
        let m = format!("m{i}");
        assert_eq!(publisher.cmd_str(&["PUBLISH", "news", &m]), ":2\r\n");
    }
    for i in 0..100 {
        let m = format!("m{i}");
        assert_eq!(
            show(&sub.read_reply()),
            format!(
                "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n${}\r\n{m}\r\n",
                m.len()
            )
        );
        assert_eq!(
            show(&psub.read_reply()),
            format!(
                "*4\r\n$8\r\npmessage\r\n$4\r\nn?ws\r\n$4\r\nnews\r\n${}\r\n{m}\r\n",
                m.len()
            )
        );
    }
    assert_eq!(
        publisher.cmd_str(&["PUBSUB", "NUMSUB", "news", "n?ws"]),
        "*4\r\n$4\r\nnews\r\n:1\r\n$4\r\nn?ws\r\n:0\r\n"
    );
    assert_eq!(publisher.cmd_str(&["PUBSUB", "NUMPAT"]), ":1\r\n");
    assert_eq!(
        publisher.cmd_str(&["PUBSUB", "CHANNELS"]),
        "*1\r\n$4\r\nnews\r\n"
    );
    assert_eq!(publisher.cmd_str(&["PUBSUB", "CHANNELS", "x*"]), "*0\r\n");
    let info = publisher.cmd_str(&["INFO", "stats"]);
    assert!(
        info.contains("\r\npubsub_channels:1\r\npubsub_patterns:1\r\npubsubshard_channels:0\r\n"),
        "{info}"
    );
    let list = publisher.cmd_str(&["CLIENT", "LIST"]);
    assert!(
        list.contains(" flags=P db=0 sub=1 psub=0 ssub=0 "),
        "{list}"
    );
    assert!(
        list.contains(" flags=P db=0 sub=0 psub=1 ssub=0 "),
        "{list}"
    );
    assert!(
        list.contains(" flags=N db=0 sub=0 psub=0 ssub=0 "),
        "{list}"
    );
    let pubsub_only = publisher.cmd_str(&["CLIENT", "LIST", "TYPE", "pubsub"]);
    assert_eq!(pubsub_only.matches("flags=P").count(), 2, "{pubsub_only}");
    assert!(!pubsub_only.contains("flags=N"), "{pubsub_only}");

    // A disconnected subscriber is forgotten.
    drop(sub);
    let mut n = String::new();
    for _ in 0..200 {
        n = publisher.cmd_str(&["PUBLISH", "news", "z"]);
        if n == ":1\r\n" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(n, ":1\r\n");
    assert_eq!(
        publisher.cmd_str(&["PUBSUB", "NUMSUB", "news"]),
        "*2\r\n$4\r\nnews\r\n:0\r\n"
    );
}

#[test]
fn resp3_pushes_interleave_with_replies_and_any_command_works() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    c.cmd(&["HELLO", "3"]);
    assert_eq!(
        c.cmd_str(&["SUBSCRIBE", "a"]),
        ">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"
    );
    // Publishing to itself: the push comes before the PUBLISH reply, as in Redis.
    c.send(&["PUBLISH", "a", "m"]);
    assert_eq!(
        c.read_reply(),
        b">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nm\r\n"
    );
    assert_eq!(c.read_reply(), b":1\r\n");
    assert_eq!(c.cmd_str(&["GET", "x"]), "_\r\n");
    assert_eq!(c.cmd_str(&["PING"]), "+PONG\r\n");
    let mut other = s.conn();
    assert_eq!(other.cmd_str(&["PUBLISH", "a", "from-other"]), ":1\r\n");
    assert_eq!(
        c.read_reply(),
        b">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$10\r\nfrom-other\r\n"
    );
    assert_eq!(
        c.cmd_str(&["UNSUBSCRIBE"]),
        ">3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n"
    );
    assert_eq!(
        c.cmd_str(&["UNSUBSCRIBE"]),
        ">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n"
    );
}

#[test]
fn reset_and_quit_drop_subscriptions() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    let mut p = s.conn();
    c.cmd(&["SUBSCRIBE", "a"]);
    c.cmd(&["PSUBSCRIBE", "b*"]);
    c.cmd(&["SSUBSCRIBE", "c"]);
    assert_eq!(c.cmd_str(&["RESET"]), "+RESET\r\n");
    assert_eq!(p.cmd_str(&["PUBLISH", "a", "x"]), ":0\r\n");
    assert_eq!(p.cmd_str(&["PUBLISH", "bb", "x"]), ":0\r\n");
    assert_eq!(p.cmd_str(&["SPUBLISH", "c", "x"]), ":0\r\n");
    assert_eq!(c.cmd_str(&["GET", "x"]), "$-1\r\n");
    c.cmd(&["SUBSCRIBE", "a"]);
    assert_eq!(c.cmd_str(&["QUIT"]), "+OK\r\n");
    assert!(c.is_closed(std::time::Duration::from_secs(5)));
    // QUIT is handled before the reply is written: the subscription is already gone.
    assert_eq!(
        p.cmd_str(&["PUBSUB", "NUMSUB", "a"]),
        "*2\r\n$1\r\na\r\n:0\r\n"
    );
    // CLIENT KILL drops the victim's subscriptions at once.
    let mut k = s.conn();
    let id = k.cmd_str(&["CLIENT", "ID"]);
    let id = id.trim_start_matches(':').trim_end();
    k.cmd(&["SUBSCRIBE", "a"]);
    assert_eq!(
        p.cmd_str(&["PUBSUB", "NUMSUB", "a"]),
        "*2\r\n$1\r\na\r\n:1\r\n"
    );
    assert_eq!(p.cmd_str(&["CLIENT", "KILL", "ID", id]), ":1\r\n");
    assert_eq!(
        p.cmd_str(&["PUBSUB", "NUMSUB", "a"]),
        "*2\r\n$1\r\na\r\n:0\r\n"
    );
    assert!(k.is_closed(std::time::Duration::from_secs(5)));

    // TYPE pubsub picks subscribers only; TYPE normal the others.
    let mut s1 = s.conn();
    let mut s2 = s.conn();
    s1.cmd(&["SUBSCRIBE", "a"]);
    s2.cmd(&["PSUBSCRIBE", "a*"]);
    assert_eq!(p.cmd_str(&["CLIENT", "KILL", "TYPE", "master"]), ":0\r\n");
    assert_eq!(p.cmd_str(&["CLIENT", "KILL", "TYPE", "pubsub"]), ":2\r\n");
    assert!(s1.is_closed(std::time::Duration::from_secs(5)));
    assert!(s2.is_closed(std::time::Duration::from_secs(5)));
    assert_eq!(p.cmd_str(&["PUBLISH", "a", "x"]), ":0\r\n");
    assert_eq!(p.cmd_str(&["PUBSUB", "NUMPAT"]), ":0\r\n");
}

#[test]
fn pubsub_introspection_errors_and_help() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd_str(&["PUBSUB"]),
        "-ERR wrong number of arguments for 'pubsub' command\r\n"
    );
    assert_eq!(
        c.cmd_str(&["PUBSUB", "NUMPAT", "x"]),
        "-ERR wrong number of arguments for 'pubsub|numpat' command\r\n"
    );
    assert_eq!(
        c.cmd_str(&["pubsub", "channels", "a", "b"]),
        "-ERR unknown subcommand or wrong number of arguments for 'channels'. Try PUBSUB HELP.\r\n"
    );
    assert_eq!(
        c.cmd_str(&["PUBSUB", "foo"]),
        "-ERR unknown subcommand 'foo'. Try PUBSUB HELP.\r\n"
    );
    assert_eq!(c.cmd_str(&["PUBSUB", "NUMSUB"]), "*0\r\n");
    assert_eq!(
        c.cmd_str(&["PUBLISH", "a"]),
        "-ERR wrong number of arguments for 'publish' command\r\n"
    );
    assert!(c.cmd_str(&["PUBSUB", "HELP"]).starts_with(
        "*14\r\n+PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"
    ));
}

/// The same multi-connection script against deadbolt and redis-server, byte for byte. Avoids
/// what Redis leaves to hash order (several channels in one unsubscribe-all, several patterns
/// matching one message, PUBSUB CHANNELS listing several).
#[test]
fn differential_against_redis_server() {
    let script: &[(usize, &str)] = &[
        (0, "UNSUBSCRIBE"),
        (0, "PUNSUBSCRIBE a b"),
        (0, "SUBSCRIBE news news alerts"),
        (1, "PSUBSCRIBE n*"),
        (2, "PUBLISH news hello"),
        (2, "PUBLISH alerts fire"),
        (2, "PUBLISH nothing x"),
        (2, "PUBSUB NUMSUB news alerts n* missing"),
        (2, "PUBSUB NUMPAT"),
        (2, "PUBSUB CHANNELS al*"),
        (0, "GET k"),
        (0, "PING"),
        (0, "PING payload"),
        (0, "SET k v"),
        (0, "UNSUBSCRIBE alerts"),
        (0, "PSUBSCRIBE x*"),
        (2, "PUBLISH xy 1"),
        (0, "PUNSUBSCRIBE"),
        (0, "UNSUBSCRIBE"),
        (0, "GET k"),
        (3, "HELLO 3"),
        (3, "SUBSCRIBE news"),
        (3, "PSUBSCRIBE ne*"),
        (3, "PUBLISH news self"),
        (2, "PUBLISH news other"),
        (3, "GET k"),
        (3, "SSUBSCRIBE shard1"),
        (2, "SPUBLISH shard1 s-msg"),
        (2, "PUBSUB SHARDCHANNELS"),
        (2, "PUBSUB SHARDNUMSUB shard1 nope"),
        (3, "SUNSUBSCRIBE shard1 nope"),
        (3, "PUNSUBSCRIBE ne*"),
        (3, "UNSUBSCRIBE"),
        (3, "UNSUBSCRIBE"),
        (1, "SSUBSCRIBE s"),
        (1, "PUNSUBSCRIBE"),
        (1, "PING"),
        (1, "HELLO 3"),
        (1, "RESET"),
        (1, "PING"),
        (2, "SUBSCRIBE"),
        (2, "PSUBSCRIBE"),
        (2, "PUBSUB"),
        (2, "PUBSUB NUMPAT extra"),
        (2, "PUBSUB HELP"),
        (2, "pubsub Channels a b"),
        // Keyspace events to the client that made the change come before its reply.
        (3, "CONFIG SET notify-keyspace-events KEA"),
        (3, "PSUBSCRIBE __keyspace@0__:*"),
        (3, "SET k2 v PX 100000"),
        (0, "SUBSCRIBE __keyevent@0__:del"),
        (3, "DEL k2 k"),
        (3, "PUNSUBSCRIBE"),
        (3, "SUBSCRIBE a b c"),
        (3, "UNSUBSCRIBE b"),
        (3, "UNSUBSCRIBE c"),
        (3, "UNSUBSCRIBE"),
        (3, "CONFIG SET notify-keyspace-events \"\""),
    ];
    let ours = run_script(&common::deadbolt(&[]), 4, script);
    let redis = run_script(&common::redis_server(&[]), 4, script);
    for (a, b) in ours.iter().zip(&redis) {
        assert_eq!(a, b);
    }
    assert_eq!(ours.len(), redis.len());
}

/// Subscribers wait for messages: the idle `timeout` closes other clients, not them.
#[test]
fn subscribers_are_exempt_from_the_idle_timeout() {
    let s = common::deadbolt(&["--timeout", "1"]);
    let mut sub = s.conn();
    let mut idle = s.conn();
    sub.cmd(&["SUBSCRIBE", "a"]);
    idle.cmd(&["PING"]);
    // The idle client goes after about a second; the subscriber is still there afterwards.
    assert!(idle.is_closed(std::time::Duration::from_secs(5)));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut p = s.conn();
    assert_eq!(p.cmd_str(&["PUBLISH", "a", "still-here"]), ":1\r\n");
    assert_eq!(
        show(&sub.read_reply()),
        "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$10\r\nstill-here\r\n"
    );
}

/// Redisson's wait: subscribe to the lock's channel, try, sleep until the holder's release
/// publishes, try again. (The release is a script in Redisson; here its two effects are sent
/// directly, so this covers the pub/sub side of the pattern.)
#[test]
fn lock_waiter_wakes_on_the_release_message() {
    let s = common::deadbolt(&[]);
    let mut holder = s.conn();
    let mut waiter = s.conn();
    let mut waiter_cmds = s.conn();
    assert_eq!(
        holder.cmd_str(&["SET", "{lock}", "holder", "NX", "PX", "30000"]),
        "+OK\r\n"
    );
    waiter.cmd(&["SUBSCRIBE", "redisson_lock__channel:{lock}"]);
    assert_eq!(
        waiter_cmds.cmd_str(&["SET", "{lock}", "waiter", "NX", "PX", "30000"]),
        "$-1\r\n"
    );
    assert_eq!(holder.cmd_str(&["DEL", "{lock}"]), ":1\r\n");
    assert_eq!(
        holder.cmd_str(&["PUBLISH", "redisson_lock__channel:{lock}", "0"]),
        ":1\r\n"
    );
    assert_eq!(
        show(&waiter.read_reply()),
        "*3\r\n$7\r\nmessage\r\n$29\r\nredisson_lock__channel:{lock}\r\n$1\r\n0\r\n"
    );
    assert_eq!(
        waiter_cmds.cmd_str(&["SET", "{lock}", "waiter", "NX", "PX", "30000"]),
        "+OK\r\n"
    );
}
