//! Blocking list and sorted-set pops with several connections, each scenario run against
//! deadbolt and a real redis-server with the replies compared byte for byte.

mod common;

use common::{Conn, Server};
use std::time::{Duration, Instant};

/// Waits until the server reports `n` blocked clients (the event that a BLPOP has parked).
fn wait_blocked(c: &mut Conn, n: usize) {
    let want = format!("blocked_clients:{n}\r\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let info = c.cmd_str(&["INFO", "clients"]);
        if info.contains(&want) {
            return;
        }
        assert!(Instant::now() < deadline, "never reached {want:?}: {info}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Runs `scenario` against both servers and asserts the transcripts are equal; returns ours.
fn both(scenario: impl Fn(&Server) -> Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let ours = common::deadbolt(&[]);
    let theirs = common::redis_server(&[]);
    let a = scenario(&ours);
    let b = scenario(&theirs);
    let show = |t: &Vec<Vec<u8>>| {
        t.iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(show(&a), show(&b), "deadbolt vs redis-server");
    a
}

#[test]
fn python_redis_lock_blpop_woken_by_lpush() {
    let t = both(|s| {
        let (mut a, mut b) = (s.conn(), s.conn());
        a.send(&["BLPOP", "lock-signal:x", "5"]);
        wait_blocked(&mut b, 1);
        let pushed = b.cmd(&["LPUSH", "lock-signal:x", "1"]);
        let woke = a.read_reply();
        let left = b.cmd(&["LLEN", "lock-signal:x"]);
        wait_blocked(&mut b, 0);
        vec![pushed, woke, left]
    });
    assert_eq!(t[1], b"*2\r\n$13\r\nlock-signal:x\r\n$1\r\n1\r\n");
}

#[test]
fn waiters_are_served_first_come_first_served() {
    let t = both(|s| {
        let (mut a, mut b, mut c) = (s.conn(), s.conn(), s.conn());
        a.send(&["BRPOP", "q", "other", "0"]);
        wait_blocked(&mut c, 1);
        b.send(&["BLPOP", "other", "q", "0"]);
        wait_blocked(&mut c, 2);
        let r1 = c.cmd(&["RPUSH", "q", "first"]);
        let a_got = a.read_reply();
        let r2 = c.cmd(&["RPUSH", "q", "second", "third"]);
        let b_got = b.read_reply();
        let rest = c.cmd(&["LRANGE", "q", "0", "-1"]);
        vec![r1, a_got, r2, b_got, rest]
    });
    assert_eq!(t[1], b"*2\r\n$1\r\nq\r\n$5\r\nfirst\r\n");
    assert_eq!(t[3], b"*2\r\n$1\r\nq\r\n$6\r\nsecond\r\n");
}

#[test]
fn timeout_replies_null_in_resp2_and_resp3() {
    let t = both(|s| {
        let mut a = s.conn();
        let started = Instant::now();
        let r2 = a.cmd(&["BLPOP", "nothing", "0.1"]);
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(100), "{waited:?}");
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        a.cmd(&["HELLO", "3"]);
        let r3 = a.cmd(&["BLPOP", "nothing", "0.05"]);
        let z3 = a.cmd(&["BZPOPMIN", "nothing", "0.05"]);
        let m3 = a.cmd(&["BLMOVE", "nothing", "d", "LEFT", "LEFT", "0.05"]);
        a.cmd(&["HELLO", "2"]);
        let m2 = a.cmd(&["BRPOPLPUSH", "nothing", "d", "0.05"]);
        let mp = a.cmd(&["BLMPOP", "0.05", "1", "nothing", "LEFT"]);
        vec![r2, r3, z3, m3, m2, mp]
    });
    assert_eq!(t[0], b"*-1\r\n");
    assert_eq!(t[1], b"_\r\n");
}

#[test]
fn timer_fires_at_the_deadline_not_at_the_next_cron_tick() {
    // hz 1: the periodic tick is once a second; a 150 ms timeout must still end near 150 ms.
    let s = common::deadbolt(&["--hz", "1"]);
    let mut a = s.conn();
    for _ in 0..3 {
        let started = Instant::now();
        assert_eq!(a.cmd(&["BLPOP", "nothing", "0.15"]), b"*-1\r\n");
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(150) && waited < Duration::from_millis(600),
            "{waited:?}"
        );
    }
}

#[test]
fn pipelined_commands_after_a_blocked_pop_are_answered_after_it_in_order() {
    let t = both(|s| {
        let (mut a, mut b) = (s.conn(), s.conn());
        let mut pipeline = common::resp_cmd(&["SET", "before", "1"]);
        pipeline.extend(common::resp_cmd(&["BLPOP", "k", "0"]));
        pipeline.extend(common::resp_cmd(&["PING"]));
        pipeline.extend(common::resp_cmd(&["LLEN", "k"]));
        pipeline.extend(common::resp_cmd(&["BLPOP", "k", "0"]));
        pipeline.extend(common::resp_cmd(&["GET", "before"]));
        a.send_raw(&pipeline);
        let set = a.read_reply(); // answered before blocking
        wait_blocked(&mut b, 1);
        let pushed = b.cmd(&["RPUSH", "k", "x"]);
        let first = a.read_reply();
        let ping = a.read_reply();
        let llen = a.read_reply();
        wait_blocked(&mut b, 1); // the second BLPOP parked again
        let pushed2 = b.cmd(&["RPUSH", "k", "y"]);
        let second = a.read_reply();
        let get = a.read_reply();
        vec![set, pushed, first, ping, llen, pushed2, second, get]
    });
    assert_eq!(t[3], b"+PONG\r\n");
    assert_eq!(t[7], b"$1\r\n1\r\n");
}

#[test]
fn disconnect_releases_the_waiter() {
    let t = both(|s| {
        let mut b = s.conn();
        {
            let mut a = s.conn();
            a.send(&["BLPOP", "k", "0"]);
            wait_blocked(&mut b, 1);
        }
        wait_blocked(&mut b, 0);
        vec![b.cmd(&["RPUSH", "k", "kept"]), b.cmd(&["LLEN", "k"])]
    });
    assert_eq!(t[1], b":1\r\n");
}

#[test]
fn pushes_inside_exec_serve_waiters_after_the_transaction() {
    let t = both(|s| {
        let (mut a, mut b) = (s.conn(), s.conn());
        a.send(&["BLPOP", "k", "0"]);
        wait_blocked(&mut b, 1);
        let mut out = vec![b.cmd(&["MULTI"])];
        out.push(b.cmd(&["LPUSH", "k", "a"]));
        out.push(b.cmd(&["LPUSH", "k", "b"]));
        out.push(b.cmd(&["LLEN", "k"]));
        out.push(b.cmd(&["EXEC"]));
        out.push(a.read_reply());
        out.push(b.cmd(&["LRANGE", "k", "0", "-1"]));
        out
    });
    // Served after EXEC: the waiter sees the list as the whole transaction left it.
    assert_eq!(t[4], b"*3\r\n:1\r\n:2\r\n:2\r\n");
    assert_eq!(t[5], b"*2\r\n$1\r\nk\r\n$1\r\nb\r\n");
}

#[test]
fn blmove_chain_and_wrong_type_keys() {
    let t = both(|s| {
        let (mut a, mut b, mut c) = (s.conn(), s.conn(), s.conn());
        a.send(&["BLMOVE", "src", "mid", "LEFT", "RIGHT", "0"]);
        wait_blocked(&mut c, 1);
        b.send(&["BLPOP", "mid", "0"]);
        wait_blocked(&mut c, 2);
        // A string at a waited key serves nobody; the list that replaces it does.
        let mut out = vec![c.cmd(&["SET", "src", "str"])];
        out.push(c.cmd(&["DEL", "src"]));
        out.push(c.cmd(&["RPUSH", "src", "1", "2"]));
        out.push(a.read_reply());
        out.push(b.read_reply());
        out.push(c.cmd(&["LRANGE", "src", "0", "-1"]));
        out.push(c.cmd(&["EXISTS", "mid"]));
        out
    });
    assert_eq!(t[3], b"$1\r\n1\r\n");
    assert_eq!(t[4], b"*2\r\n$3\r\nmid\r\n$1\r\n1\r\n");
}

#[test]
fn bzpopmin_and_bzpopmax_woken_by_zadd() {
    let t = both(|s| {
        let (mut a, mut b, mut c) = (s.conn(), s.conn(), s.conn());
        a.send(&["BZPOPMIN", "z", "1000"]);
        wait_blocked(&mut c, 1);
        b.send(&["HELLO", "3"]);
        b.read_reply();
        b.send(&["BZPOPMAX", "z", "0"]);
        wait_blocked(&mut c, 2);
        let mut out = vec![c.cmd(&["LPUSH", "z", "not-a-zset"])];
        out.push(c.cmd(&["DEL", "z"]));
        out.push(c.cmd(&["ZADD", "z", "1.5", "low", "2", "mid", "3", "high"]));
        out.push(a.read_reply());
        out.push(b.read_reply());
        out.push(c.cmd(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]));
        out
    });
    assert_eq!(t[3], b"*3\r\n$1\r\nz\r\n$3\r\nlow\r\n$3\r\n1.5\r\n");
    assert_eq!(t[4], b"*3\r\n$1\r\nz\r\n$4\r\nhigh\r\n,3\r\n");
}

#[test]
fn blmpop_with_count_and_swapdb_wakes_waiters() {
    let t = both(|s| {
        let (mut a, mut b) = (s.conn(), s.conn());
        a.send(&["BLMPOP", "0", "2", "x", "y", "RIGHT", "COUNT", "2"]);
        wait_blocked(&mut b, 1);
        let mut out = vec![b.cmd(&["SELECT", "1"])];
        out.push(b.cmd(&["RPUSH", "y", "1", "2", "3"]));
        out.push(b.cmd(&["SWAPDB", "0", "1"]));
        out.push(a.read_reply());
        out.push(b.cmd(&["LRANGE", "y", "0", "-1"]));
        out
    });
    assert_eq!(t[3], b"*2\r\n$1\r\ny\r\n*2\r\n$1\r\n3\r\n$1\r\n2\r\n");
}

#[test]
fn info_and_client_state_while_blocked() {
    let s = common::deadbolt(&["--timeout", "1"]);
    let (mut a, mut b) = (s.conn(), s.conn());
    a.send(&["BLPOP", "k", "0"]);
    wait_blocked(&mut b, 1);
    assert!(b
        .cmd_str(&["INFO", "clients"])
        .contains("clients_in_timeout_table:0\r\n"));
    // Blocked clients are exempt from the idle timeout (1 s here); `b` stays active meanwhile.
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(450));
        assert_eq!(b.cmd(&["PING"]), b"+PONG\r\n");
    }
    assert_eq!(b.cmd(&["RPUSH", "k", "v"]), b":1\r\n");
    assert_eq!(a.read_reply(), b"*2\r\n$1\r\nk\r\n$1\r\nv\r\n");
    let mut c = s.conn();
    c.send(&["BLPOP", "k", "100"]);
    wait_blocked(&mut b, 1);
    assert!(b
        .cmd_str(&["INFO", "clients"])
        .contains("clients_in_timeout_table:1\r\n"));
}
