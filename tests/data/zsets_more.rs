//! Sorted-set and hash commands whose behaviour a byte-for-byte corpus cannot pin
//! down (tests/corpus/zsets_more.txt has the rest): random replies (ZRANDMEMBER, HRANDFIELD)
//! checked by their invariants on both servers, ZSCAN's guarantee on a big set, keyspace
//! events, WATCH, BZMPOP blocking and wake-ups, and what reaches the append-only file.

use crate::common;

use common::TempDir;

use common::{both, wait_blocked, Conn, Server};
use std::collections::HashSet;

/// A parsed reply: enough of RESP2/RESP3 for these commands.
#[derive(Debug, Clone, PartialEq)]
enum R {
    Bulk(Vec<u8>),
    Double(String),
    Int(i64),
    Null,
    Err(String),
    Arr(Vec<R>),
}

fn parse(b: &[u8]) -> R {
    fn line(b: &[u8], at: usize) -> (&[u8], usize) {
        let end = at + b[at..].windows(2).position(|w| w == b"\r\n").unwrap();
        (&b[at + 1..end], end + 2)
    }
    fn one(b: &[u8], at: usize) -> (R, usize) {
        let (text, next) = line(b, at);
        let s = String::from_utf8_lossy(text).into_owned();
        match b[at] {
            b'$' => {
                let n: i64 = s.parse().unwrap();
                if n < 0 {
                    return (R::Null, next);
                }
                let n = n as usize;
                (R::Bulk(b[next..next + n].to_vec()), next + n + 2)
            }
            b',' => (R::Double(s), next),
            b':' => (R::Int(s.parse().unwrap()), next),
            b'_' => (R::Null, next),
            b'-' => (R::Err(s), next),
            b'*' => {
                let n: i64 = s.parse().unwrap();
                if n < 0 {
                    return (R::Null, next);
                }
                let mut items = Vec::new();
                let mut pos = next;
                for _ in 0..n {
                    let (r, p) = one(b, pos);
                    items.push(r);
                    pos = p;
                }
                (R::Arr(items), pos)
            }
            other => panic!("unexpected reply type {:?}", other as char),
        }
    }
    let (r, end) = one(b, 0);
    assert_eq!(
        end,
        b.len(),
        "trailing bytes in {:?}",
        String::from_utf8_lossy(b)
    );
    r
}

fn arr(r: R) -> Vec<R> {
    match r {
        R::Arr(v) => v,
        other => panic!("not an array: {other:?}"),
    }
}

fn bulk(r: &R) -> Vec<u8> {
    match r {
        R::Bulk(b) => b.clone(),
        other => panic!("not a bulk string: {other:?}"),
    }
}

/// Checks one counted random reply against the data it samples: its length, that members
/// (and their scores or values) belong, and uniqueness for positive counts. `pairs`: the reply
/// carries scores/values (flat in RESP2, [m, v] arrays in RESP3).
fn check_random(reply: R, count: i64, data: &[(Vec<u8>, R)], pairs: bool, resp3: bool, what: &str) {
    let items = arr(reply);
    let picked: Vec<(Vec<u8>, Option<R>)> = if !pairs {
        items.iter().map(|r| (bulk(r), None)).collect()
    } else if resp3 {
        items
            .into_iter()
            .map(|p| {
                let p = arr(p);
                assert_eq!(p.len(), 2, "{what}: pair {p:?}");
                (bulk(&p[0]), Some(p[1].clone()))
            })
            .collect()
    } else {
        assert_eq!(items.len() % 2, 0, "{what}: odd flat reply");
        items
            .chunks(2)
            .map(|c| (bulk(&c[0]), Some(c[1].clone())))
            .collect()
    };
    let want = if count < 0 {
        count.unsigned_abs() as usize
    } else {
        (count as usize).min(data.len())
    };
    assert_eq!(picked.len(), want, "{what}: length");
    for (m, v) in &picked {
        let found = data.iter().find(|(dm, _)| dm == m);
        let Some((_, dv)) = found else {
            panic!("{what}: {m:?} is not in the data");
        };
        if let Some(v) = v {
            assert_eq!(v, dv, "{what}: value of {m:?}");
        }
    }
    if count > 0 {
        let distinct: HashSet<&Vec<u8>> = picked.iter().map(|(m, _)| m).collect();
        assert_eq!(distinct.len(), picked.len(), "{what}: repeats");
    }
}

/// ZRANDMEMBER and HRANDFIELD on both servers, small (compact) and big (hash table) values,
/// every count form, RESP2 and RESP3: the replies satisfy the same invariants.
#[test]
fn random_replies_keep_their_invariants_on_both_servers() {
    for (name, server) in common::deadbolt_and_redis(&[]) {
        let mut c = server.conn();
        for (key, n) in [("zsmall", 5usize), ("zbig", 300)] {
            let mut args = vec!["ZADD".to_string(), key.to_string()];
            for i in 0..n {
                args.push(format!("{}.5", i));
                args.push(format!("m{i}"));
            }
            c.cmd(&args);
        }
        for (key, n) in [("hsmall", 5usize), ("hbig", 300)] {
            let mut args = vec!["HSET".to_string(), key.to_string()];
            for i in 0..n {
                args.push(format!("f{i}"));
                args.push(format!("v{i}"));
            }
            c.cmd(&args);
        }
        for resp3 in [false, true] {
            c.cmd(&["HELLO", if resp3 { "3" } else { "2" }]);
            for (key, n) in [("zsmall", 5usize), ("zbig", 300)] {
                let zdata: Vec<(Vec<u8>, R)> = (0..n)
                    .map(|i| {
                        let s = format!("{i}.5");
                        let v = if resp3 {
                            R::Double(s)
                        } else {
                            R::Bulk(s.into_bytes())
                        };
                        (format!("m{i}").into_bytes(), v)
                    })
                    .collect();
                let single = parse(&c.cmd(&["ZRANDMEMBER", key]));
                assert!(zdata.iter().any(|(m, _)| *m == bulk(&single)), "{name}");
                for count in [1i64, 3, 4, 5, 6, 100, 299, 300, 1000, -1, -3, -7, -1000] {
                    let cs = count.to_string();
                    let what = format!("{name} resp3={resp3} ZRANDMEMBER {key} {count}");
                    let r = parse(&c.cmd(&["ZRANDMEMBER", key, &cs]));
                    check_random(r, count, &zdata, false, resp3, &what);
                    let r = parse(&c.cmd(&["ZRANDMEMBER", key, &cs, "WITHSCORES"]));
                    check_random(r, count, &zdata, true, resp3, &(what + " WITHSCORES"));
                }
            }
            for (key, n) in [("hsmall", 5usize), ("hbig", 300)] {
                let hdata: Vec<(Vec<u8>, R)> = (0..n)
                    .map(|i| {
                        (
                            format!("f{i}").into_bytes(),
                            R::Bulk(format!("v{i}").into_bytes()),
                        )
                    })
                    .collect();
                let single = parse(&c.cmd(&["HRANDFIELD", key]));
                assert!(hdata.iter().any(|(f, _)| *f == bulk(&single)), "{name}");
                for count in [1i64, 3, 4, 5, 6, 100, 299, 300, 1000, -1, -3, -7, -1000] {
                    let cs = count.to_string();
                    let what = format!("{name} resp3={resp3} HRANDFIELD {key} {count}");
                    let r = parse(&c.cmd(&["HRANDFIELD", key, &cs]));
                    check_random(r, count, &hdata, false, resp3, &what);
                    let r = parse(&c.cmd(&["HRANDFIELD", key, &cs, "WITHVALUES"]));
                    check_random(r, count, &hdata, true, resp3, &(what + " WITHVALUES"));
                }
            }
        }
        // Positive counts are spread over the set, not a fixed prefix.
        c.cmd(&["HELLO", "2"]);
        let mut seen = HashSet::new();
        for _ in 0..50 {
            for m in arr(parse(&c.cmd(&["ZRANDMEMBER", "zbig", "10"]))) {
                seen.insert(bulk(&m));
            }
        }
        assert!(
            seen.len() > 100,
            "{name}: only {} distinct members",
            seen.len()
        );
    }
}

/// Huge negative counts: Redis 7.0.15 would build a reply of 2^31 elements (tens of GB); we
/// answer "value is out of range" above 1M picks (see MAX_RANDOM_REPEATS in cmd/zset.rs). The bounds Redis
/// itself enforces (i64::MIN, and |count| > i64::MAX/2 with WITHSCORES) give its exact texts.
#[test]
fn huge_random_counts_are_refused_without_allocating() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    c.cmd(&["ZADD", "z", "1", "a"]);
    c.cmd(&["HSET", "h", "f", "v"]);
    let range = b"-ERR value is out of range\r\n".to_vec();
    for (cmd, key, with) in [
        ("ZRANDMEMBER", "z", "WITHSCORES"),
        ("HRANDFIELD", "h", "WITHVALUES"),
    ] {
        assert_eq!(c.cmd(&[cmd, key, "-2147483647"]), range);
        assert_eq!(c.cmd(&[cmd, key, "-67108864"]), range);
        assert_eq!(c.cmd(&[cmd, key, "-1048577"]), range);
        assert_eq!(c.cmd(&[cmd, key, "-1048577", with]), range);
        assert_eq!(arr(parse(&c.cmd(&[cmd, key, "-1000", with]))).len(), 2000);
        assert_eq!(
            c.cmd(&[cmd, key, "-9223372036854775808"]),
            b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"
        );
        // Positive counts are bounded by the data, whatever the client asks.
        assert_eq!(
            arr(parse(&c.cmd(&[cmd, key, "9223372036854775807"]))).len(),
            1
        );
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    }
}

/// ZSCAN over a big set (not the compact one-call form) returns every member that stays in
/// the set for the whole scan, with its score, while others are added and removed.
#[test]
fn zscan_on_a_big_set_misses_no_stable_member() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    let mut args = vec!["ZADD".to_string(), "z".to_string()];
    for i in 0..1000 {
        args.push(i.to_string());
        args.push(format!("m{i}"));
    }
    c.cmd(&args);
    let mut cursor = "0".to_string();
    let mut seen = std::collections::HashMap::new();
    let mut rounds = 0;
    loop {
        let r = arr(parse(&c.cmd(&["ZSCAN", "z", &cursor, "COUNT", "7"])));
        cursor = String::from_utf8(bulk(&r[0])).unwrap();
        let items = arr(r[1].clone());
        assert!(items.len() <= 14, "COUNT 7 gave {} items", items.len());
        for p in items.chunks(2) {
            seen.insert(bulk(&p[0]), bulk(&p[1]));
        }
        // Churn: members m900.. leave, new ones arrive, stable ones change score.
        if rounds < 100 {
            c.cmd(&["ZREM", "z", &format!("m{}", 900 + rounds)]);
            c.cmd(&["ZADD", "z", "5", &format!("new{rounds}")]);
            c.cmd(&["ZINCRBY", "z", "0", &format!("m{}", rounds * 3)]);
        }
        rounds += 1;
        assert!(rounds < 1000, "scan does not end");
        if cursor == "0" {
            break;
        }
    }
    // A set that shrank a lot (its arena keeps the free slots) still ends, in short pages.
    let mut args = vec!["ZREM".to_string(), "z".to_string()];
    args.extend((1..800).map(|i| format!("m{i}")));
    c.cmd(&args);
    let mut cursor = "0".to_string();
    let mut found = Vec::new();
    for _ in 0..1000 {
        let r = arr(parse(&c.cmd(&["ZSCAN", "z", &cursor, "COUNT", "5"])));
        cursor = String::from_utf8(bulk(&r[0])).unwrap();
        found.extend(arr(r[1].clone()).chunks(2).map(|p| bulk(&p[0])));
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(cursor, "0");
    found.sort();
    found.dedup();
    // m0, m800..m899 and new0..new99: the big-set path, as 201 > 128.
    assert_eq!(found.len(), 201, "{found:?}");
    assert!(found.contains(&b"m0".to_vec()), "{found:?}");
    for i in 0..900 {
        let score = seen.get(format!("m{i}").as_bytes());
        assert_eq!(
            score.map(|s| s.as_slice()),
            Some(i.to_string().as_bytes()),
            "m{i}"
        );
    }
}

/// A full ZSCAN of a big set gives the same (member, score text) pairs on both servers,
/// including scores whose text differs between Redis's listpack and skiplist encodings.
#[test]
fn zscan_of_a_big_set_matches_redis_as_a_set() {
    let mut results = Vec::new();
    for (name, server) in common::deadbolt_and_redis(&[]) {
        let mut c = server.conn();
        let mut args = vec!["ZADD".to_string(), "z".to_string()];
        let scores = ["0.1", "1e17", "-1e20", "inf", "-inf", "3", "2.5", "1e-300"];
        for i in 0..200 {
            args.push(scores[i % scores.len()].to_string());
            args.push(format!("m{i}"));
        }
        c.cmd(&args);
        let mut cursor = "0".to_string();
        let mut pairs = Vec::new();
        for _ in 0..1000 {
            let r = arr(parse(&c.cmd(&["ZSCAN", "z", &cursor])));
            cursor = String::from_utf8(bulk(&r[0])).unwrap();
            for p in arr(r[1].clone()).chunks(2) {
                pairs.push((bulk(&p[0]), bulk(&p[1])));
            }
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(cursor, "0", "{name}: scan does not end");
        pairs.sort();
        pairs.dedup();
        assert_eq!(pairs.len(), 200, "{name}");
        results.push(pairs);
    }
    assert_eq!(results[0], results[1]);
}

/// The same writes on deadbolt and redis-server announce the same events: the STORE forms,
/// `del` when a result is empty and the destination existed (and nothing when it did not),
/// ZMPOP as zpopmin/zpopmax plus `del` when it empties a key, ZREMRANGEBYLEX, and `new`
/// for a destination the command created.
#[test]
fn keyspace_events_match_redis() {
    let script: &[&[&str]] = &[
        &["ZADD", "a", "1", "x", "2", "y", "3", "z"],
        &["ZADD", "b", "5", "y", "6", "w"],
        &["ZUNIONSTORE", "u", "2", "a", "b"],
        &["ZINTERSTORE", "i", "2", "a", "b"],
        &["ZDIFFSTORE", "d", "2", "a", "b"],
        &["ZRANGESTORE", "r", "a", "0", "1"],
        &["ZINTERSTORE", "i", "2", "a", "nosuch"],
        &["ZDIFFSTORE", "never", "1", "nosuch"],
        &["ZRANGESTORE", "r", "nosuch", "0", "-1"],
        &["ZUNIONSTORE", "u", "1", "u"],
        &["ZMPOP", "1", "u", "MIN"],
        &["ZMPOP", "2", "nosuch", "u", "MAX", "COUNT", "10"],
        &["ZREMRANGEBYLEX", "d", "-", "+"],
        &["ZUNION", "2", "a", "b"],
        &["ZINTERCARD", "2", "a", "b"],
        &["ZRANDMEMBER", "a", "2"],
        &["SET", "end", "1"],
    ];
    let ours = &common::keyevents_like_redis(script);
    let events: Vec<&str> = ours.iter().map(|m| common::keyevent_name(m)).collect();
    assert_eq!(
        events,
        [
            "new",
            "zadd",
            "new",
            "zadd",
            "new",
            "zunionstore",
            "new",
            "zinterstore",
            "new",
            "zdiffstore",
            "new",
            "zrangestore",
            "del",
            "del",
            // Overwriting an existing destination is not `new`.
            "zunionstore",
            "zpopmin",
            "zpopmax",
            "del",
            "zremrangebylex",
            "del",
            "new",
            "set"
        ],
        "{ours:?}"
    );
}

/// WATCH sees exactly the writes Redis signals: the EXEC replies of deadbolt and redis-server
/// agree for each write made by another client between WATCH and EXEC.
#[test]
fn watch_is_invalidated_like_redis() {
    let cases: &[&[&str]] = &[
        &["ZUNIONSTORE", "k", "1", "src"],
        &["ZINTERSTORE", "k", "2", "src", "nosuch"],
        &["ZDIFFSTORE", "k", "1", "src"],
        &["ZRANGESTORE", "k", "src", "0", "0"],
        &["ZRANGESTORE", "k", "nosuch", "0", "0"],
        &["ZMPOP", "1", "k", "MIN"],
        &["ZMPOP", "1", "nosuch", "MIN"],
        &["ZREMRANGEBYLEX", "k", "[x", "[x"],
        &["ZREMRANGEBYLEX", "k", "-", "+"],
        &["ZUNION", "1", "k"],
        &["ZRANDMEMBER", "k", "-3"],
        &["ZSCAN", "k", "0"],
    ];
    let run = |server: &Server| -> Vec<Vec<u8>> {
        let (mut w, mut o) = (server.conn(), server.conn());
        let mut out = Vec::new();
        for case in cases {
            o.cmd(&["DEL", "k", "src"]);
            o.cmd(&["ZADD", "k", "1", "a", "2", "b"]);
            o.cmd(&["ZADD", "src", "3", "c"]);
            w.cmd(&["WATCH", "k"]);
            w.cmd(&["MULTI"]);
            w.cmd(&["PING"]);
            o.cmd(case);
            out.push(w.cmd(&["EXEC"]));
        }
        // A STORE with an empty result into a missing key changes nothing.
        o.cmd(&["DEL", "k"]);
        w.cmd(&["WATCH", "k"]);
        w.cmd(&["MULTI"]);
        w.cmd(&["PING"]);
        o.cmd(&["ZUNIONSTORE", "k", "1", "nosuch"]);
        out.push(w.cmd(&["EXEC"]));
        out
    };
    let t = both(run);
    let aborted = t.iter().filter(|r| r.as_slice() == b"*-1\r\n").count();
    assert_eq!(aborted, 7, "{t:?}");
}

/// BZMPOP parks like BZPOPMIN: a ZADD or a ZUNIONSTORE into the awaited key wakes it (oldest
/// waiter first, COUNT honoured, RESP3 doubles), a wrong-type write does not (nor does it
/// fail a waiter served from another key, BZPOPMAX included), a timeout
/// answers a null array, and inside MULTI it does not block.
#[test]
fn bzmpop_blocks_and_is_woken_like_redis() {
    let t = both(|s| {
        let (mut a, mut b, mut c) = (s.conn(), s.conn(), s.conn());
        a.send(&["BZMPOP", "0", "2", "x", "y", "MIN", "COUNT", "2"]);
        wait_blocked(&mut c, 1);
        b.send(&["HELLO", "3"]);
        b.read_reply();
        b.send(&["BZMPOP", "10", "1", "y", "MAX"]);
        wait_blocked(&mut c, 2);
        let mut out = vec![c.cmd(&["LPUSH", "x", "not-a-zset"])];
        out.push(c.cmd(&["DEL", "x"]));
        out.push(c.cmd(&["ZADD", "y", "1.5", "low", "2", "mid", "3", "high"]));
        out.push(a.read_reply());
        out.push(b.read_reply());
        out.push(c.cmd(&["ZRANGE", "y", "0", "-1", "WITHSCORES"]));
        // A STORE into the awaited key serves the waiter too.
        c.cmd(&["ZADD", "src", "7", "s1", "8", "s2"]);
        a.send(&["BZMPOP", "0", "1", "dest", "MAX", "COUNT", "5"]);
        wait_blocked(&mut c, 1);
        out.push(c.cmd(&["ZUNIONSTORE", "dest", "1", "src", "WEIGHTS", "2"]));
        out.push(a.read_reply());
        out.push(c.cmd(&["EXISTS", "dest"]));
        // A waited-on key that became another type meanwhile does not fail the waiter.
        a.send(&["BZMPOP", "0", "2", "p", "q", "MIN"]);
        wait_blocked(&mut c, 1);
        c.cmd(&["SET", "p", "string"]);
        out.push(c.cmd(&["ZADD", "q", "4", "four"]));
        out.push(a.read_reply());
        a.send(&["BZPOPMAX", "p2", "q2", "0"]);
        wait_blocked(&mut c, 1);
        c.cmd(&["SET", "p2", "string"]);
        c.cmd(&["ZADD", "q2", "5", "five"]);
        out.push(a.read_reply());
        // Timeout.
        out.push(a.cmd(&["BZMPOP", "0.05", "1", "never", "MIN"]));
        // MULTI does not block.
        a.cmd(&["MULTI"]);
        a.cmd(&["BZMPOP", "0", "1", "never", "MIN"]);
        out.push(a.cmd(&["EXEC"]));
        out
    });
    assert_eq!(
        t[3],
        b"*2\r\n$1\r\ny\r\n*2\r\n*2\r\n$3\r\nlow\r\n$3\r\n1.5\r\n*2\r\n$3\r\nmid\r\n$1\r\n2\r\n"
    );
    assert_eq!(t[4], b"*2\r\n$1\r\ny\r\n*1\r\n*2\r\n$4\r\nhigh\r\n,3\r\n");
    assert_eq!(
        t[7],
        b"*2\r\n$4\r\ndest\r\n*2\r\n*2\r\n$2\r\ns2\r\n$2\r\n16\r\n*2\r\n$2\r\ns1\r\n$2\r\n14\r\n"
    );
    assert_eq!(
        t[10],
        b"*2\r\n$1\r\nq\r\n*1\r\n*2\r\n$4\r\nfour\r\n$1\r\n4\r\n"
    );
    assert_eq!(t[11], b"*3\r\n$2\r\nq2\r\n$4\r\nfive\r\n$1\r\n5\r\n");
    assert_eq!(t[12], b"*-1\r\n");
    assert_eq!(t[13], b"*1\r\n*-1\r\n");
}

/// Every write of these commands reaches the append-only file as its effect: after a kill -9
/// and restart the sets are the same, destinations replaced or deleted, TTLs dropped by a
/// STORE, and what a served BZMPOP popped stays popped.
#[test]
fn writes_survive_a_restart() {
    let dir = TempDir::new("zsets-more-aof");
    let mut s = common::deadbolt_with_aof(&dir.0, "always", &[]);
    let mut c = s.conn();
    let mut w = s.conn();
    let writes: &[&[&str]] = &[
        &[
            "ZADD", "a", "1", "x", "2", "y", "3", "z", "0", "p", "0", "q",
        ],
        &["ZADD", "b", "5", "y", "6", "w", "1e300", "big"],
        &["SADD", "s", "x", "w"],
        &["SET", "u", "old", "EX", "1000"],
        &[
            "ZUNIONSTORE",
            "u",
            "3",
            "a",
            "b",
            "s",
            "WEIGHTS",
            "1",
            "2",
            "0.5",
        ],
        &["ZINTERSTORE", "i", "2", "a", "b", "AGGREGATE", "MAX"],
        &["ZDIFFSTORE", "d", "2", "a", "b"],
        &["ZRANGESTORE", "r", "b", "0", "-1", "REV"],
        &["SET", "gone", "v"],
        &["ZINTERSTORE", "gone", "2", "a", "nosuch"],
        &["ZREMRANGEBYLEX", "a", "[p", "[q"],
        &["ZMPOP", "1", "d", "MAX", "COUNT", "1"],
        &["ZADD", "m", "1", "one", "2", "two", "3", "three"],
    ];
    for wr in writes {
        let reply = c.cmd(wr);
        assert!(!reply.starts_with(b"-"), "{wr:?}: {reply:?}");
    }
    w.send(&["BZMPOP", "0", "1", "waited", "MIN", "COUNT", "2"]);
    wait_blocked(&mut c, 1);
    c.cmd(&["ZADD", "waited", "1", "w1", "2", "w2", "3", "w3"]);
    assert!(w.read_reply().starts_with(b"*2\r\n$6\r\nwaited"));
    let keys = ["a", "u", "i", "d", "r", "gone", "waited", "m"];
    let dump = |c: &mut Conn| -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = keys
            .iter()
            .map(|k| c.cmd(&["ZRANGE", k, "0", "-1", "WITHSCORES"]))
            .collect();
        v.push(c.cmd(&["TTL", "u"]));
        v.push(c.cmd(&["EXISTS", "gone"]));
        v
    };
    let before = dump(&mut c);
    assert_eq!(before[6], b"*2\r\n$2\r\nw3\r\n$1\r\n3\r\n");
    assert_eq!(before[8], b":-1\r\n");
    assert_eq!(before[9], b":0\r\n");
    s.kill9();
    let s = common::deadbolt_with_aof(&dir.0, "always", &[]);
    let mut c = s.conn();
    assert_eq!(dump(&mut c), before);
}

/// Seeded random commands of the new family on both servers, compared reply by reply: set
/// operations with weights and aggregates over sorted and plain sets (ties, infinities,
/// weights that make NaN), STORE forms into existing and missing keys, lex ranges, pops.
#[test]
fn seeded_random_commands_match_redis() {
    let seed = std::env::var("ZSETS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_2026_u64);
    let mut rng = fastrand::Rng::with_seed(seed);
    let keys = ["a", "b", "c", "d", "s"];
    let members = ["m", "n", "o", "p", "q", "r", "aa", "ab"];
    let scores = ["0", "1", "-1", "2.5", "1e300", "inf", "-inf", "0.1", "3"];
    let weights = ["1", "2", "-1", "0", "0.5", "inf", "-inf", "1e300"];
    let mut script: Vec<Vec<String>> = Vec::new();
    let pick = |rng: &mut fastrand::Rng, from: &[&str]| from[rng.usize(..from.len())].to_string();
    for _ in 0..400 {
        let mut cmd: Vec<String> = Vec::new();
        let n = rng.usize(1..=3);
        let srcs: Vec<String> = (0..n).map(|_| pick(&mut rng, &keys)).collect();
        match rng.u32(..14) {
            0 | 1 => {
                cmd.push("ZADD".into());
                cmd.push(pick(&mut rng, &keys[..4]));
                for _ in 0..rng.usize(1..4) {
                    cmd.push(pick(&mut rng, &scores));
                    cmd.push(pick(&mut rng, &members));
                }
            }
            2 => {
                cmd.extend(["SADD".to_string(), "s".to_string()]);
                cmd.push(pick(&mut rng, &members));
            }
            3..=6 => {
                let op = [
                    "ZUNION",
                    "ZINTER",
                    "ZDIFF",
                    "ZUNIONSTORE",
                    "ZINTERSTORE",
                    "ZDIFFSTORE",
                ][rng.usize(..6)];
                cmd.push(op.into());
                let store = op.ends_with("STORE");
                if store {
                    cmd.push(pick(&mut rng, &keys[..4]));
                }
                cmd.push(n.to_string());
                cmd.extend(srcs);
                if !op.starts_with("ZDIFF") {
                    if rng.bool() {
                        cmd.push("WEIGHTS".into());
                        cmd.extend((0..n).map(|_| pick(&mut rng, &weights)));
                    }
                    if rng.bool() {
                        cmd.push("AGGREGATE".into());
                        cmd.push(pick(&mut rng, &["SUM", "MIN", "MAX"]));
                    }
                }
                if !store && rng.bool() {
                    cmd.push("WITHSCORES".into());
                }
            }
            7 => {
                cmd.push("ZINTERCARD".into());
                cmd.push(n.to_string());
                cmd.extend(srcs);
                if rng.bool() {
                    cmd.extend(["LIMIT".to_string(), rng.u32(..4).to_string()]);
                }
            }
            8 => {
                cmd.extend(["ZRANGESTORE".to_string(), pick(&mut rng, &keys[..4])]);
                cmd.push(pick(&mut rng, &keys[..4]));
                match rng.u32(..3) {
                    0 => cmd.extend([rng.i32(-4..4).to_string(), rng.i32(-4..4).to_string()]),
                    1 => {
                        cmd.extend([pick(&mut rng, &scores), pick(&mut rng, &scores)]);
                        cmd.push("BYSCORE".into());
                    }
                    _ => {
                        cmd.extend(["[n".to_string(), "(q".to_string(), "BYLEX".to_string()]);
                    }
                }
                if rng.bool() {
                    cmd.push("REV".into());
                }
            }
            9 => {
                let c = ["ZLEXCOUNT", "ZREMRANGEBYLEX"][rng.usize(..2)];
                let bounds = ["-", "+", "[n", "(n", "[p", "(r", "[aa"];
                cmd.extend([c.to_string(), pick(&mut rng, &keys[..4])]);
                cmd.extend([pick(&mut rng, &bounds), pick(&mut rng, &bounds)]);
            }
            10 => {
                cmd.extend(["ZMPOP".to_string(), n.to_string()]);
                cmd.extend(srcs);
                cmd.push(pick(&mut rng, &["MIN", "MAX"]));
                if rng.bool() {
                    cmd.extend(["COUNT".to_string(), rng.u32(1..4).to_string()]);
                }
            }
            _ => {
                let k = pick(&mut rng, &keys[..4]);
                let bounds = ["-", "+", "[n", "(n", "[p", "(r", "[aa", "(ab"];
                match rng.u32(..4) {
                    0 => cmd.extend(["ZRANGE".into(), k, "0".into(), "-1".into()]),
                    1 => cmd.extend(["ZRANDMEMBER".into(), k, "100".into()]),
                    2 => cmd.extend(["ZSCAN".into(), k, "0".into()]),
                    _ => {
                        let rev = rng.bool();
                        let c = if rev { "ZREVRANGEBYLEX" } else { "ZRANGEBYLEX" };
                        cmd.extend([c.to_string(), k]);
                        cmd.extend([pick(&mut rng, &bounds), pick(&mut rng, &bounds)]);
                        if rng.bool() {
                            cmd.push("LIMIT".into());
                            cmd.push(rng.i32(-1..3).to_string());
                            cmd.push(rng.i32(-1..3).to_string());
                        }
                    }
                }
                if cmd[0] != "ZSCAN" && !cmd[0].ends_with("BYLEX") && rng.bool() {
                    cmd.push("WITHSCORES".into());
                }
            }
        }
        script.push(cmd);
    }
    for k in &keys[..4] {
        script.push(vec![
            "ZRANGE".into(),
            k.to_string(),
            "0".into(),
            "-1".into(),
            "WITHSCORES".into(),
        ]);
    }
    let transcripts = common::transcripts_on_both(&script);
    for (i, cmd) in script.iter().enumerate() {
        assert_eq!(
            String::from_utf8_lossy(&transcripts[0][i]),
            String::from_utf8_lossy(&transcripts[1][i]),
            "seed {seed:#x}, command {i}: {cmd:?}"
        );
    }
}
