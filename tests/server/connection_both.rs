//! Connection-level behaviour over plain TCP and over TLS: one event loop serves both with one
//! code path (exec/net.rs), so every scenario here runs as a table over the two transports and
//! the TLS outcome must equal the plain one, which is compared with redis-server's where Redis
//! can be asked (it has no TLS port here).

use crate::common;

use common::{Conn, TlsServer};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Via {
    Tcp,
    Tls,
}

const BOTH: [Via; 2] = [Via::Tcp, Via::Tls];

fn open(s: &TlsServer, via: Via) -> Conn {
    match via {
        Via::Tcp => s.conn(),
        Via::Tls => s.conn_tls(),
    }
}

/// What the server sends after `data`, and whether it then closed (else it went quiet).
/// What the server answers to `data` before it closes, which every case here expects it to do
/// (true), or falls silent for 5 s (false). A quiet 300 ms was too short once: under the full
/// suite's load the TLS case (1.5 MB to read and decrypt, in a debug build) took longer to close.
fn exchange(c: &mut Conn, data: &[u8]) -> (String, bool) {
    // The server may close while a large request is still being written.
    let _ = c.try_send_raw(data);
    let (got, closed) = c.drain(Duration::from_secs(5));
    (String::from_utf8_lossy(&got).into_owned(), closed)
}

const BUSY: &str =
    "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";

#[test]
fn protocol_errors_and_query_limits_close_alike() {
    let limits = [
        "--client-query-buffer-limit",
        "1mb",
        "--proto-max-bulk-len",
        "1mb",
    ];
    let ours = common::deadbolt_tls(&limits);
    let redis = common::redis_server(&limits);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "bulk over proto-max-bulk-len",
            b"*1\r\n$1048577\r\n".to_vec(),
        ),
        ("negative bulk length", b"*1\r\n$-5\r\n".to_vec()),
        ("huge multibulk count", b"*2147483648\r\n".to_vec()),
        ("not a bulk", b"*1\r\nxfoo\r\n".to_vec()),
        ("unbalanced quotes", b"SET \"a b\r\n".to_vec()),
        ("inline request over 64k", vec![b'A'; 70_000]),
        (
            "replies before the bad request still come",
            b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n*1\r\n$-5\r\n".to_vec(),
        ),
    ];
    for (name, data) in &cases {
        let theirs = exchange(&mut Conn::connect(redis.port), data);
        assert!(theirs.1, "{name}: redis-server kept the connection open");
        for via in BOTH {
            let got = exchange(&mut open(&ours, via), data);
            assert_eq!(got, theirs, "{name} over {via:?}");
        }
    }
    // Everyone else is still served, on both ports.
    for via in BOTH {
        assert_eq!(open(&ours, via).cmd_str(&["PING"]), "+PONG\r\n", "{via:?}");
    }
}

#[test]
fn a_query_buffer_past_its_limit_drops_the_client_alike() {
    let limits = ["--client-query-buffer-limit", "1mb"];
    let ours = common::deadbolt_tls(&limits);
    let redis = common::redis_server(&limits);
    // A 2 MiB argument is allowed by proto-max-bulk-len but cannot fit the 1 MiB query buffer:
    // Redis closes without a word.
    let mut data = b"*2\r\n$4\r\nECHO\r\n$2097152\r\n".to_vec();
    data.extend(std::iter::repeat_n(b'y', 1536 * 1024));
    let theirs = exchange(&mut Conn::connect(redis.port), &data);
    assert_eq!(theirs, (String::new(), true));
    for via in BOTH {
        assert_eq!(exchange(&mut open(&ours, via), &data), theirs, "{via:?}");
        assert_eq!(open(&ours, via).cmd_str(&["PING"]), "+PONG\r\n", "{via:?}");
    }
}

#[test]
fn many_requests_in_one_write_are_all_answered_in_order() {
    let s = common::deadbolt_tls(&[]);
    const N: usize = 5000;
    for via in BOTH {
        let mut c = open(&s, via);
        let key = format!("n:{via:?}");
        let mut pipeline = Vec::new();
        for _ in 0..N {
            pipeline.extend(common::resp_cmd(&["INCR", &key]));
        }
        // A big value in the middle: replies larger than one TLS record.
        let big = "v".repeat(100_000);
        pipeline.extend(common::resp_cmd(&["SET", "big", &big]));
        pipeline.extend(common::resp_cmd(&["GET", "big"]));
        pipeline.extend(common::resp_cmd(&["GET", &key]));
        c.send_raw(&pipeline);
        for i in 1..=N {
            assert_eq!(c.read_reply(), format!(":{i}\r\n").into_bytes(), "{via:?}");
        }
        assert_eq!(c.read_reply(), b"+OK\r\n", "{via:?}");
        assert_eq!(
            c.read_reply(),
            format!("${}\r\n{big}\r\n", big.len()).into_bytes(),
            "{via:?}"
        );
        assert_eq!(
            c.read_reply(),
            format!("${}\r\n{N}\r\n", N.to_string().len()).into_bytes()
        );
    }
}

#[test]
fn idle_timeout_closes_idle_clients_but_not_subscribers() {
    let s = common::deadbolt_tls(&["--timeout", "1"]);
    let mut idle: Vec<(Via, Conn)> = BOTH.iter().map(|v| (*v, open(&s, *v))).collect();
    let mut subs: Vec<(Via, Conn)> = BOTH
        .iter()
        .map(|v| {
            let mut c = open(&s, *v);
            c.cmd(&["SUBSCRIBE", "ch"]);
            (*v, c)
        })
        .collect();
    for (via, c) in &mut idle {
        assert_eq!(c.cmd_str(&["PING"]), "+PONG\r\n", "{via:?}");
    }
    let started = Instant::now();
    for (via, c) in &mut idle {
        // Closed after one idle second (the cron looks ten times a second).
        assert!(c.is_closed(Duration::from_secs(5)), "{via:?} not closed");
        assert!(
            started.elapsed() >= Duration::from_millis(900),
            "{via:?} closed early"
        );
    }
    for (via, c) in &mut subs {
        assert_eq!(
            c.cmd_str(&["PING"]),
            "*2\r\n$4\r\npong\r\n$0\r\n\r\n",
            "{via:?}: a subscriber is exempt"
        );
    }
}

/// Sends an endless script on `runner`, then waits (polling `bystander`) until the server
/// answers -BUSY.
fn wait_busy(runner: &mut Conn, bystander: &mut Conn, body: &str) {
    runner.send(&["EVAL", body, "0"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = bystander.cmd_str(&["PING"]);
        if r == BUSY {
            return;
        }
        assert_eq!(r, "+PONG\r\n");
        assert!(Instant::now() < deadline, "the script never turned busy");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The transcript of a busy script killed by SCRIPT KILL: what the bystander, a client that
/// connects while the script is busy (`fresh`) and the runner read.
fn busy_then_kill(
    runner: &mut Conn,
    bystander: &mut Conn,
    fresh: &dyn Fn() -> Conn,
) -> Vec<String> {
    let body = "local i = 0\nwhile true do i = i + 1 end";
    wait_busy(runner, bystander, body);
    let mut t = vec![
        bystander.cmd_str(&["GET", "x"]),
        // Accepted (and, over TLS, its handshake done) by the busy script's hook.
        fresh().cmd_str(&["PING"]),
        // Several requests in one write while busy: each is answered.
        {
            bystander.send_raw(
                &[
                    common::resp_cmd(&["PING"]),
                    common::resp_cmd(&["SET", "x", "1"]),
                ]
                .concat(),
            );
            let a = String::from_utf8(bystander.read_reply()).unwrap();
            a + &String::from_utf8(bystander.read_reply()).unwrap()
        },
        bystander.cmd_str(&["SCRIPT", "KILL"]),
    ];
    t.push(String::from_utf8(runner.read_reply()).unwrap());
    t.push(bystander.cmd_str(&["PING"]));
    t.push(runner.cmd_str(&["PING"]));
    t
}

#[test]
fn busy_script_answers_and_script_kill_over_both() {
    let redis = common::redis_server(&["--busy-reply-threshold", "200"]);
    let want = busy_then_kill(&mut redis.conn(), &mut redis.conn(), &|| redis.conn());
    assert_eq!(want[..2], [BUSY, BUSY]);
    let s = common::deadbolt_tls(&["--busy-reply-threshold", "200"]);
    for runner in BOTH {
        for bystander in BOTH {
            let got = busy_then_kill(&mut open(&s, runner), &mut open(&s, bystander), &|| {
                open(&s, bystander)
            });
            assert_eq!(
                got, want,
                "script over {runner:?}, bystander over {bystander:?}"
            );
        }
    }
}

#[test]
fn shutdown_nosave_during_a_busy_script_over_tls() {
    let mut s = common::deadbolt_tls(&["--busy-reply-threshold", "200"]);
    let mut runner = s.conn();
    let mut b = s.conn_tls();
    wait_busy(
        &mut runner,
        &mut b,
        "redis.call('set','w','1') while true do end",
    );
    assert!(b.cmd_str(&["SCRIPT", "KILL"]).starts_with("-UNKILLABLE "));
    b.send(&["SHUTDOWN", "NOSAVE"]);
    assert!(b.is_closed(Duration::from_secs(10)));
    assert!(runner.is_closed(Duration::from_secs(10)));
    assert!(s.server.wait_exit(Duration::from_secs(10)).is_some());
}

#[test]
fn pubsub_delivery_in_order_over_both() {
    let s = common::deadbolt_tls(&[]);
    let mut publisher = s.conn();
    for via in BOTH {
        let mut sub = open(&s, via);
        let ch = format!("ch:{via:?}");
        assert_eq!(
            sub.cmd_str(&["SUBSCRIBE", &ch]),
            format!("*3\r\n$9\r\nsubscribe\r\n${}\r\n{ch}\r\n:1\r\n", ch.len())
        );
        let sizes = [1usize, 100, 20_000, 70_000, 3];
        let mut sent = Vec::new();
        for i in 0..200 {
            let msg = format!("{i}:{}", "m".repeat(sizes[i % sizes.len()]));
            assert_eq!(publisher.cmd(&["PUBLISH", &ch, &msg]), b":1\r\n");
            sent.push(msg);
        }
        for msg in &sent {
            let want = format!(
                "*3\r\n$7\r\nmessage\r\n${}\r\n{ch}\r\n${}\r\n{msg}\r\n",
                ch.len(),
                msg.len()
            );
            assert_eq!(sub.read_reply(), want.into_bytes(), "{via:?}");
        }
    }
}

#[test]
fn slow_subscriber_is_disconnected_over_both() {
    let s = common::deadbolt_tls(&[]);
    let mut admin = s.conn();
    assert_eq!(
        admin.cmd_str(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 256kb 0 0"
        ]),
        "+OK\r\n"
    );
    let payload = "z".repeat(64 << 10);
    for via in BOTH {
        let mut slow = open(&s, via);
        let ch = format!("slow:{via:?}");
        slow.cmd(&["SUBSCRIBE", &ch]);
        // It never reads: socket buffers, then the output buffer fill up, then it must go.
        let mut dropped = false;
        for _ in 0..2000 {
            match admin.cmd(&["PUBLISH", &ch, &payload]).as_slice() {
                b":1\r\n" => {}
                b":0\r\n" => {
                    dropped = true;
                    break;
                }
                other => panic!(
                    "{via:?}: PUBLISH replied {:?}",
                    String::from_utf8_lossy(other)
                ),
            }
        }
        assert!(
            dropped,
            "{via:?}: the slow subscriber was never disconnected"
        );
        assert!(slow.is_closed(Duration::from_secs(10)), "{via:?}");
    }
    s.server.wait_log(
        "scheduled to be closed ASAP for overcoming of output buffer limits",
        Duration::from_secs(5),
    );
    assert_eq!(admin.cmd_str(&["PING"]), "+PONG\r\n");
}

#[test]
fn maxclients_refuses_alike() {
    const FULL: &[u8] = b"-ERR max number of clients reached\r\n";
    let redis = common::redis_server(&["--maxclients", "2"]);
    let s = common::deadbolt_tls(&["--maxclients", "2"]);
    // Redis's refusal, for the bytes (its own check connection may still be going away).
    let theirs = {
        let _a = redis.conn();
        let _b = redis.conn();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let (got, closed) = redis.conn().drain(Duration::from_millis(300));
            if closed {
                break got;
            }
            assert!(Instant::now() < deadline, "redis-server never refused");
        }
    };
    assert_eq!(theirs, FULL);
    // One client on each transport fills the server; a third is refused on either.
    let mut held: Vec<Conn> = BOTH.iter().map(|v| open(&s, *v)).collect();
    for c in &mut held {
        assert_eq!(c.cmd_str(&["PING"]), "+PONG\r\n");
    }
    for via in BOTH {
        let (got, closed) = open(&s, via).drain(Duration::from_secs(2));
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(FULL),
            "{via:?}"
        );
        assert!(closed, "{via:?}");
    }
    // A place freed is a place taken, on either transport.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut c = open(&s, Via::Tls);
        c.send(&["PING"]);
        let (got, _) = c.drain(Duration::from_millis(300));
        if got == b"+PONG\r\n" {
            break;
        }
        assert_eq!(got, FULL);
        assert!(Instant::now() < deadline, "the freed place was never given");
    }
}
