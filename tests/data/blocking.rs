//! Blocking list and sorted-set pops with several connections, each scenario run against
//! deadbolt and a real redis-server with the replies compared byte for byte.

use crate::common;

use common::{both, wait_blocked, Conn};
use std::time::{Duration, Instant};

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

#[test]
fn rename_and_multi_key_waits() {
    let t = both(|s| {
        let (mut a, mut b) = (s.conn(), s.conn());
        a.send(&["BRPOP", "k1", "k2", "0"]);
        wait_blocked(&mut b, 1);
        let mut out = vec![b.cmd(&["RPUSH", "tmp", "a", "b"])];
        out.push(b.cmd(&["RENAME", "tmp", "k2"]));
        out.push(a.read_reply());
        out.push(b.cmd(&["LRANGE", "k2", "0", "-1"]));
        out
    });
    assert_eq!(t[2], b"*2\r\n$2\r\nk2\r\n$1\r\nb\r\n");
}

#[test]
fn python_redis_lock_waiter_woken_by_the_unlock_script() {
    let script = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("lua/python-redis-lock/unlock_script.lua"),
    )
    .unwrap();
    let t = both(|s| {
        let (mut holder, mut waiter, mut watch) = (s.conn(), s.conn(), s.conn());
        let mut out = vec![holder.cmd(&["SET", "lock:prl", "id1", "NX", "EX", "60"])];
        waiter.send(&["BLPOP", "lock-signal:prl", "3"]);
        wait_blocked(&mut watch, 1);
        out.push(holder.cmd(&[
            "EVAL",
            &script,
            "2",
            "lock:prl",
            "lock-signal:prl",
            "id1",
            "1000",
        ]));
        out.push(waiter.read_reply());
        // The waiter took the signal; the script's PEXPIRE applied to the list it emptied.
        out.push(watch.cmd(&["EXISTS", "lock-signal:prl", "lock:prl"]));
        // Blocking pops are refused inside scripts, BLMPOP acts as LMPOP.
        out.push(watch.cmd(&["EVAL", "return redis.call('blpop', 'x', 0)", "0"]));
        out.push(watch.cmd(&[
            "EVAL",
            "return redis.call('blmpop', 0, 1, 'x', 'left')",
            "0",
        ]));
        out
    });
    assert_eq!(t[2], b"*2\r\n$15\r\nlock-signal:prl\r\n$1\r\n1\r\n");
}

/// `flags=` and `multi=` of every CLIENT LIST line except the caller's, sorted.
fn client_states(c: &mut Conn) -> Vec<u8> {
    let list = c.cmd_str(&["CLIENT", "LIST"]);
    let mut states: Vec<String> = list
        .lines()
        .filter(|l| l.contains("id=") && !l.contains("cmd=client|list"))
        .map(|l| {
            l.split(' ')
                .filter(|f| f.starts_with("flags=") || f.starts_with("multi="))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    states.sort();
    states.join(",").into_bytes()
}

#[test]
fn client_list_shows_blocked_and_multi_clients() {
    let t = both(|s| {
        let (mut a, mut b, mut c) = (s.conn(), s.conn(), s.conn());
        a.send(&["BLPOP", "k", "0"]);
        wait_blocked(&mut c, 1);
        b.cmd(&["MULTI"]);
        b.cmd(&["SET", "x", "1"]);
        b.cmd(&["SET", "y", "2"]);
        let during = client_states(&mut c);
        c.cmd(&["RPUSH", "k", "v"]);
        a.read_reply();
        b.cmd(&["EXEC"]);
        vec![during, client_states(&mut c)]
    });
    assert_eq!(
        String::from_utf8_lossy(&t[0]),
        "flags=b multi=-1,flags=x multi=2"
    );
}

#[test]
fn a_served_or_timed_out_blocking_pop_counts_as_one_call() {
    let t = both(|s| {
        let (mut a, mut b) = (s.conn(), s.conn());
        b.cmd(&["CONFIG", "RESETSTAT"]);
        a.send(&["BLPOP", "k", "0"]);
        wait_blocked(&mut b, 1);
        b.cmd(&["RPUSH", "k", "1"]);
        a.read_reply();
        a.cmd(&["BLPOP", "k", "0.01"]);
        let stats = b.cmd_str(&["INFO", "commandstats"]);
        let calls = |name: &str| {
            stats
                .lines()
                .find(|l| l.starts_with(&format!("cmdstat_{name}:")))
                .and_then(|l| l.split(',').next().map(str::to_string))
                .unwrap_or_default()
                .into_bytes()
        };
        vec![calls("blpop"), calls("rpush")]
    });
    assert_eq!(t[0], b"cmdstat_blpop:calls=2");
}

#[test]
fn served_blmove_with_a_wrong_type_destination_gets_wrongtype() {
    let t = both(|s| {
        let (mut a, mut b) = (s.conn(), s.conn());
        a.send(&["BLMOVE", "src", "dst", "LEFT", "LEFT", "0"]);
        wait_blocked(&mut b, 1);
        let mut out = vec![b.cmd(&["SET", "dst", "str"])];
        out.push(b.cmd(&["RPUSH", "src", "x"]));
        out.push(a.read_reply());
        out.push(b.cmd(&["LRANGE", "src", "0", "-1"]));
        wait_blocked(&mut b, 0);
        out
    });
    assert_eq!(
        t[2],
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
}

/// A waiter served because one key got data pops it even if another key it waits on became a
/// string meanwhile: Redis serves the ready key without looking at the others again.
#[test]
fn served_list_pops_pass_over_keys_that_became_another_type() {
    let t = both(|s| {
        let (mut a, mut b) = (s.conn(), s.conn());
        let mut out = Vec::new();
        for (i, wait) in [
            &["BLPOP", "x", "y", "5"][..],
            &["BRPOP", "x", "y", "5"],
            &["BLMPOP", "5", "2", "x", "y", "LEFT", "COUNT", "2"],
            &["BLMPOP", "5", "2", "x", "y", "RIGHT"],
        ]
        .into_iter()
        .enumerate()
        {
            b.cmd(&["DEL", "x", "y"]);
            a.send(wait);
            wait_blocked(&mut b, 1);
            out.push(b.cmd(&["SET", "x", "str"]));
            out.push(b.cmd(&["RPUSH", "y", &i.to_string(), "z"]));
            out.push(a.read_reply());
            wait_blocked(&mut b, 0);
            out.push(b.cmd(&["LRANGE", "y", "0", "-1"]));
            // Not blocked: the wrong-type key in front is still an error.
            out.push(b.cmd(wait));
        }
        out
    });
    assert_eq!(t[2], b"*2\r\n$1\r\ny\r\n$1\r\n0\r\n");
    assert_eq!(
        t[4],
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
}
