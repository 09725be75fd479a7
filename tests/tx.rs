//! MULTI/EXEC/WATCH with several connections, each scenario run against deadbolt and a real
//! redis-server with the replies compared byte for byte.

mod common;

use common::Server;
use std::time::Duration;

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

/// WATCH `key` on `a`, run `interfere` on `b`, then MULTI / SET / EXEC on `a`: the EXEC reply.
fn cas(s: &Server, key: &str, setup: &[&[&str]], interfere: &[&[&str]]) -> Vec<Vec<u8>> {
    let (mut a, mut b) = (s.conn(), s.conn());
    let mut out = vec![];
    for c in setup {
        out.push(b.cmd(c));
    }
    out.push(a.cmd(&["WATCH", key]));
    for c in interfere {
        out.push(b.cmd(c));
    }
    out.push(a.cmd(&["MULTI"]));
    out.push(a.cmd(&["SET", key, "mine"]));
    out.push(a.cmd(&["EXEC"]));
    out.push(a.cmd(&["GET", key]));
    out
}

#[test]
fn watch_is_broken_by_another_clients_write() {
    let t = both(|s| {
        let mut out = cas(s, "k", &[&["SET", "k", "0"]], &[&["SET", "k", "theirs"]]);
        out.extend(cas(s, "l", &[], &[&["RPUSH", "l", "x"], &["DEL", "l"]]));
        out.extend(cas(
            s,
            "z",
            &[&["ZADD", "z", "1", "a"]],
            &[&["ZINCRBY", "z", "1", "a"]],
        ));
        out.extend(cas(
            s,
            "h",
            &[&["HSET", "h", "f", "v"]],
            &[&["EXPIRE", "h", "100"]],
        ));
        out
    });
    assert_eq!(t.iter().filter(|r| r == &b"*-1\r\n").count(), 4);
}

#[test]
fn watch_is_kept_when_nothing_changes_or_writes_fail() {
    let t = both(|s| {
        let mut out = cas(
            s,
            "k",
            &[&["SET", "k", "0"]],
            &[&["GET", "k"], &["SET", "other", "1"]],
        );
        // Writes that change nothing do not touch the key.
        out.extend(cas(
            s,
            "m",
            &[&["SADD", "m", "a"]],
            &[
                &["SADD", "m", "a"],
                &["SREM", "m", "zz"],
                &["LPUSHX", "nokey", "x"],
            ],
        ));
        out
    });
    assert_eq!(t.iter().filter(|r| r == &b"*1\r\n+OK\r\n").count(), 2);
}

#[test]
fn watch_is_broken_by_expiry_flushdb_flushall_and_swapdb() {
    let t = both(|s| {
        let mut out = cas(s, "k", &[&["SET", "k", "v", "PX", "30"]], &[]);
        // The key expired between WATCH and EXEC without anyone touching it.
        let (mut a, mut b) = (s.conn(), s.conn());
        out.push(b.cmd(&["SET", "e", "v", "PX", "50"]));
        out.push(a.cmd(&["WATCH", "e"]));
        std::thread::sleep(Duration::from_millis(120));
        out.push(a.cmd(&["MULTI"]));
        out.push(a.cmd(&["PING"]));
        out.push(a.cmd(&["EXEC"]));
        // Already expired when watched: its later removal is not a change.
        out.push(b.cmd(&["SET", "gone", "v", "PX", "1"]));
        std::thread::sleep(Duration::from_millis(20));
        out.push(a.cmd(&["WATCH", "gone"]));
        out.push(a.cmd(&["MULTI"]));
        out.push(a.cmd(&["PING"]));
        out.push(a.cmd(&["EXEC"]));
        out.extend(cas(s, "f", &[&["SET", "f", "1"]], &[&["FLUSHDB"]]));
        // FLUSHDB only breaks watches of keys that existed.
        out.extend(cas(s, "missing", &[], &[&["SET", "x", "1"], &["FLUSHDB"]]));
        out.extend(cas(s, "g", &[&["SET", "g", "1"]], &[&["FLUSHALL"]]));
        out.extend(cas(
            s,
            "w",
            &[&["SELECT", "1"], &["SET", "w", "in-db1"]],
            &[&["SWAPDB", "0", "1"]],
        ));
        out
    });
    assert!(t.iter().filter(|r| r == &b"*-1\r\n").count() >= 4);
}

#[test]
fn own_writes_and_exec_semantics() {
    let t = both(|s| {
        let mut a = s.conn();
        let mut out = vec![];
        for c in [
            &["WATCH", "k"][..],
            &["SET", "k", "1"],
            &["MULTI"],
            &["GET", "k"],
            &["EXEC"],
            // Runtime errors inside EXEC do not stop the rest.
            &["MULTI"],
            &["SET", "a", "x"],
            &["INCR", "a"],
            &["LPUSH", "a", "y"],
            &["SET", "b", "y"],
            &["EXEC"],
            &["MGET", "a", "b"],
            // A queuing error (arity) aborts.
            &["MULTI"],
            &["SET", "c"],
            &["SET", "d", "1"],
            &["EXEC"],
            &["EXISTS", "d"],
            // DISCARD forgets the queue and the watches.
            &["WATCH", "k"],
            &["MULTI"],
            &["SET", "d", "1"],
            &["DISCARD"],
            &["EXISTS", "d"],
            // RESET leaves MULTI.
            &["MULTI"],
            &["SET", "d", "2"],
            &["RESET"],
            &["EXEC"],
            // Refused inside MULTI.
            &["MULTI"],
            &["SHUTDOWN"],
            &["EXEC"],
            // Blocking commands do not block inside EXEC.
            &["MULTI"],
            &["BLPOP", "empty", "0"],
            &["BZPOPMIN", "empty", "0"],
            &["EXEC"],
        ] {
            out.push(a.cmd(c));
        }
        out
    });
    assert_eq!(t[4], b"*-1\r\n");
    assert_eq!(
        t[10],
        b"*4\r\n+OK\r\n-ERR value is not an integer or out of range\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n+OK\r\n"
    );
}

#[test]
fn resp3_exec_replies() {
    let t = both(|s| {
        let mut a = s.conn();
        let mut out = vec![];
        a.cmd(&["HELLO", "3"]);
        for c in [
            &["ZADD", "z", "1", "a", "2", "b"][..],
            &["MULTI"],
            &["ZSCORE", "z", "a"],
            &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
            &["SMEMBERS", "nokey"],
            &["LPOP", "nokey", "1"],
            &["EXEC"],
            &["WATCH", "z"],
            &["ZADD", "z", "3", "c"],
            &["MULTI"],
            &["EXEC"],
        ] {
            out.push(a.cmd(c));
        }
        out
    });
    assert_eq!(t[10], b"_\r\n");
}

#[test]
fn disconnecting_watcher_and_queued_client_leave_no_state() {
    let s = common::deadbolt(&[]);
    {
        let mut a = s.conn();
        a.cmd(&["WATCH", "k"]);
        a.cmd(&["MULTI"]);
        a.cmd(&["SET", "k", "1"]);
    }
    let mut b = s.conn();
    assert_eq!(b.cmd(&["SET", "k", "2"]), b"+OK\r\n");
    assert_eq!(b.cmd(&["GET", "k"]), b"$1\r\n2\r\n");
}
