//! MULTI/EXEC/WATCH with several connections, each scenario run against deadbolt and a real
//! redis-server with the replies compared byte for byte.

use crate::common;

use common::{both, both_with, Server};
use std::time::Duration;

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
        // INCR and DECRBY that fail on the value (text, overflow, a hash) write nothing.
        out.extend(cas(
            s,
            "t",
            &[&["SET", "t", "text"]],
            &[&["INCR", "t"], &["DECR", "t"]],
        ));
        out.extend(cas(
            s,
            "big",
            &[&["SET", "big", "9223372036854775807"]],
            &[&["INCR", "big"], &["INCRBY", "big", "5"]],
        ));
        out.extend(cas(
            s,
            "hh",
            &[&["HSET", "hh", "f", "1"]],
            &[&["INCR", "hh"], &["DECRBY", "hh", "2"]],
        ));
        out
    });
    assert_eq!(t.iter().filter(|r| r == &b"*1\r\n+OK\r\n").count(), 5);
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

/// MULTI, the command under test, a valid SET, EXEC, then GET from another connection: every
/// refusal before queuing (Redis's rejectCommand) flags the transaction and EXEC answers
/// EXECABORT with nothing applied; a command's own error (nested MULTI, WATCH inside MULTI)
/// does not.
fn queue_after(a: &mut common::Conn, b: &mut common::Conn, cmd: &[&str]) -> Vec<Vec<u8>> {
    let key = "tx:k";
    let out = vec![
        a.cmd(&["MULTI"]),
        a.cmd(cmd),
        a.cmd(&["SET", key, "applied"]),
        a.cmd(&["EXEC"]),
        b.cmd(&["GET", key]),
        b.cmd(&["DEL", key]),
    ];
    out
}

#[test]
fn queuing_refusals_flag_the_transaction_as_redis() {
    let nokeys = ["--user", "nokeys", "on", "nopass", "+@all"];
    let t = both_with(&nokeys, |s| {
        let (mut a, mut b) = (s.conn(), s.conn());
        let mut out = vec![];
        for cmd in [
            &["NOSUCHCOMMAND", "x"][..],
            &["CONFIG", "NOSUCHSUB"],
            &["CONFIG"],
            &["GET"],
            &["SET", "x"],
            &["SHUTDOWN"],
            // The command's own errors: not flagged, EXEC runs the SET.
            &["MULTI"],
            &["WATCH", "w"],
        ] {
            out.extend(queue_after(&mut a, &mut b, cmd));
        }
        // ACL NOPERM (a user with no key patterns).
        out.push(a.cmd(&["AUTH", "nokeys", "x"]));
        out.extend(queue_after(&mut a, &mut b, &["GET", "other"]));
        out.extend(queue_after(&mut a, &mut b, &["PUBLISH", "ch", "m"]));
        for c in [
            &["SUBSCRIBE", "ch"][..],
            &["PSUBSCRIBE", "ch*"],
            &["SSUBSCRIBE", "ch"],
            &["SPUBLISH", "ch", "m"],
            &["PUBLISH", "ch", "m"],
            &["UNSUBSCRIBE", "ch"],
        ] {
            out.push(a.cmd(c));
        }
        out.push(a.cmd(&["AUTH", "default", "x"]));
        // OOM: inside MULTI every command but EXEC/DISCARD/QUIT/RESET is refused, reads too.
        out.push(b.cmd(&["CONFIG", "SET", "maxmemory", "1"]));
        out.push(a.cmd(&["MULTI"]));
        out.push(a.cmd(&["GET", "tx:k"]));
        out.push(a.cmd(&["EXEC"]));
        out.push(a.cmd(&["MULTI"]));
        out.push(a.cmd(&["DISCARD"]));
        out.push(b.cmd(&["CONFIG", "SET", "maxmemory", "0"]));
        out.push(b.cmd(&["EXISTS", "tx:k"]));
        out
    });
    let aborts = t
        .iter()
        .filter(|r| {
            r.as_slice() == b"-EXECABORT Transaction discarded because of previous errors.\r\n"
        })
        .count();
    assert_eq!(aborts, 9, "{t:?}");
}

#[test]
fn lock_restart_delay_refusal_flags_the_transaction() {
    // deadbolt's TRYAGAIN window is refused where Redis refuses MISCONF writes: before queuing,
    // flagging the transaction, so a client never sees half of a transaction applied.
    let s = common::deadbolt(&["--lock-restart-delay", "60000"]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
    let r = c.cmd_str(&["SET", "lock:x", "me", "NX", "PX", "1000"]);
    assert!(r.starts_with("-TRYAGAIN Writes are refused for "), "{r}");
    assert_eq!(c.cmd(&["GET", "lock:x"]), b"+QUEUED\r\n");
    assert_eq!(
        c.cmd(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    // Reads still run in a transaction.
    assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["GET", "lock:x"]), b"+QUEUED\r\n");
    assert_eq!(c.cmd(&["EXEC"]), b"*1\r\n$-1\r\n");
}

#[test]
fn exec_rechecks_acls_and_waits_for_a_write_pause() {
    let nokeys = ["--user", "nokeys", "on", "nopass", "+@all"];
    let t = both_with(&nokeys, |s| {
        let (mut a, mut b) = (s.conn(), s.conn());
        let mut out = vec![];
        // An AUTH queued in the transaction changes the user for the commands after it.
        for c in [
            &["MULTI"][..],
            &["SET", "k", "before"],
            &["AUTH", "nokeys", "x"],
            &["SET", "k", "after"],
            &["PING"],
            &["EXEC"],
            &["AUTH", "default", "x"],
            &["GET", "k"],
        ] {
            out.push(a.cmd(c));
        }
        // A write pause that starts after queuing holds EXEC back, as it contains a write.
        out.push(a.cmd(&["MULTI"]));
        out.push(a.cmd(&["SET", "k", "paused"]));
        out.push(b.cmd(&["CLIENT", "PAUSE", "300", "WRITE"]));
        let started = std::time::Instant::now();
        out.push(a.cmd(&["EXEC"]));
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(250), "{waited:?}");
        out.push(a.cmd(&["GET", "k"]));
        out
    });
    assert!(String::from_utf8_lossy(&t[5]).contains("ACLs rules changed"));
}
