//! Set algebra (SINTER SINTERCARD SINTERSTORE SUNION SUNIONSTORE SDIFF SDIFFSTORE SMOVE) and
//! SORT beyond single deterministic replies (those are in tests/corpus/sets_algebra.txt and
//! sort.txt): replies whose order is Redis's hash order compared as sets, over random sets
//! large enough to leave the intset encoding; keyspace events and WATCH compared with a real
//! redis-server; and what reaches the append-only file.

use crate::common;

use common::TempDir;

use common::{reply_len, Conn};
use std::time::{Duration, Instant};

/// An array or set reply with its elements sorted (anything else unchanged).
fn unordered(reply: Vec<u8>) -> Vec<u8> {
    if !matches!(reply.first(), Some(b'*' | b'~')) || reply.get(1) == Some(&b'-') {
        return reply;
    }
    let header_end = reply.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
    let mut items = Vec::new();
    let mut pos = header_end;
    while pos < reply.len() {
        let n = reply_len(&reply, pos).unwrap();
        items.push(reply[pos..pos + n].to_vec());
        pos += n;
    }
    items.sort();
    let mut out = reply[..header_end].to_vec();
    items.into_iter().for_each(|i| out.extend(i));
    out
}

/// Random set commands on both servers, replies compared (as sets where Redis answers in hash
/// order). Sets mix integers and strings and grow past 512 members, so both of Redis's
/// encodings and both of SDIFF's algorithms are exercised.
#[test]
fn random_set_algebra_matches_redis() {
    let mut rng = fastrand::Rng::with_seed(0x5e7_a19e);
    let keys = ["a", "b", "c", "d", "s"];
    let member = |rng: &mut fastrand::Rng| -> String {
        match rng.u8(..3) {
            0 => rng.i64(-40..700).to_string(),
            1 => format!("m{}", rng.u32(..300)),
            _ => rng.u32(..60).to_string(),
        }
    };
    let mut script: Vec<(bool, Vec<String>)> = Vec::new();
    // Big integer-only and mixed sets first, so large operands exist from the start.
    let mut big = vec!["SADD".to_string(), "a".into()];
    big.extend((0..600).map(|i| (i * 3).to_string()));
    script.push((false, big));
    let mut big = vec!["SADD".to_string(), "b".into()];
    big.extend((0..300).map(|i| format!("m{i}")));
    script.push((false, big));
    for _ in 0..1500 {
        let pick = |rng: &mut fastrand::Rng| keys[rng.usize(..keys.len())].to_string();
        let several = |rng: &mut fastrand::Rng| -> Vec<String> {
            (0..rng.usize(1..5)).map(|_| pick(rng)).collect()
        };
        let (sorted, cmd): (bool, Vec<String>) = match rng.u8(..14) {
            0..=2 => {
                let mut v = vec!["SADD".into(), pick(&mut rng)];
                v.extend((0..rng.usize(1..30)).map(|_| member(&mut rng)));
                (false, v)
            }
            3 => {
                let mut v = vec!["SREM".into(), pick(&mut rng)];
                v.extend((0..rng.usize(1..30)).map(|_| member(&mut rng)));
                (false, v)
            }
            4 => {
                let op = ["SINTER", "SUNION", "SDIFF"][rng.usize(..3)];
                let mut v = vec![op.into()];
                v.extend(several(&mut rng));
                (true, v)
            }
            5 | 6 => {
                let op = ["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"][rng.usize(..3)];
                let mut v = vec![op.into(), pick(&mut rng)];
                v.extend(several(&mut rng));
                (false, v)
            }
            7 => {
                let ks = several(&mut rng);
                let mut v = vec!["SINTERCARD".into(), ks.len().to_string()];
                v.extend(ks);
                if rng.bool() {
                    v.extend(["LIMIT".into(), rng.u32(..20).to_string()]);
                }
                (false, v)
            }
            8 => (
                false,
                vec![
                    "SMOVE".into(),
                    pick(&mut rng),
                    pick(&mut rng),
                    member(&mut rng),
                ],
            ),
            9 => (false, vec!["SCARD".into(), pick(&mut rng)]),
            10 => (true, vec!["SMEMBERS".into(), pick(&mut rng)]),
            11 => {
                let mut v = vec!["SORT".into(), pick(&mut rng)];
                if rng.bool() {
                    v.push("ALPHA".into());
                }
                if rng.bool() {
                    v.push("DESC".into());
                }
                if rng.bool() {
                    v.extend(["LIMIT".into(), rng.i64(-2..30).to_string()]);
                    v.push(rng.i64(-2..30).to_string());
                }
                (false, v)
            }
            12 => {
                let mut v = vec!["SORT".into(), pick(&mut rng), "ALPHA".into()];
                v.extend(["STORE".into(), "sorted".into()]);
                (false, v)
            }
            _ => (false, vec!["DEL".into(), pick(&mut rng)]),
        };
        script.push((sorted, cmd));
    }
    let cmds: Vec<&Vec<String>> = script.iter().map(|(_, cmd)| cmd).collect();
    let runs = common::transcripts_on_both(&cmds).map(|replies| {
        let sorted = script.iter().map(|(sorted, _)| *sorted);
        let replies = replies.into_iter().zip(sorted);
        replies
            .map(|(r, sorted)| if sorted { unordered(r) } else { r })
            .collect::<Vec<_>>()
    });
    for (i, (cmd, (ours, redis))) in script.iter().zip(runs[0].iter().zip(&runs[1])).enumerate() {
        assert_eq!(
            String::from_utf8_lossy(ours),
            String::from_utf8_lossy(redis),
            "command {i}: {:?}",
            cmd.1
        );
    }
}

/// The same writes on deadbolt and redis-server announce the same events in the same order:
/// the STORE variants' own events, `del` only when an empty result removed an existing
/// destination, SMOVE's srem / del / new / sadd, SORT STORE's sortstore.
#[test]
fn keyspace_events_match_redis() {
    let script: &[&[&str]] = &[
        &["SADD", "a", "1", "2", "3"],
        &["SADD", "b", "2", "3", "4"],
        &["SINTERSTORE", "d", "a", "b"],
        &["SINTERSTORE", "d", "a", "nokey"],
        &["SINTERSTORE", "d", "a", "nokey"],
        &["SUNIONSTORE", "d", "a", "b"],
        &["SUNIONSTORE", "d", "nokey"],
        &["SDIFFSTORE", "d", "a", "b"],
        &["SDIFFSTORE", "d", "a", "a"],
        &["SDIFFSTORE", "d", "a", "a"],
        &["SINTER", "a", "b"],
        &["SINTERCARD", "2", "a", "b"],
        &["SMOVE", "a", "m", "1"],
        &["SMOVE", "a", "m", "1"],
        &["SMOVE", "a", "a", "2"],
        &["SADD", "m", "2"],
        &["SMOVE", "a", "m", "2"],
        &["SMOVE", "a", "m", "3"],
        &["SORT", "m", "STORE", "sorted"],
        &["SORT", "nokey", "STORE", "sorted"],
        &["SORT", "nokey", "STORE", "sorted"],
        &["RPUSH", "l", "b", "a"],
        &["SORT", "l", "ALPHA", "STORE", "l"],
        &["SORT_RO", "l", "ALPHA"],
        &["SET", "end", "1"],
    ];
    let ours = &common::keyevents_like_redis(script);
    let events: Vec<String> = ours
        .iter()
        .map(|m| {
            let ev = m.rsplit("__keyevent@0__:").next().unwrap();
            let mut parts = ev.split("\r\n");
            let name = parts.next().unwrap();
            let key = parts.nth(1).unwrap();
            format!("{name} {key}")
        })
        .collect();
    assert_eq!(
        events,
        [
            "new a",
            "sadd a",
            "new b",
            "sadd b",
            "new d",
            "sinterstore d",
            "del d",
            "new d",
            "sunionstore d",
            "del d",
            "new d",
            "sdiffstore d",
            "del d",
            "srem a",
            "new m",
            "sadd m",
            "sadd m",
            "srem a",
            "srem a",
            "del a",
            "sadd m",
            "new sorted",
            "sortstore sorted",
            "del sorted",
            "new l",
            "rpush l",
            "sortstore l",
            "new end",
            "set end",
        ],
        "{ours:?}"
    );
}

/// WATCH sees exactly the writes Redis signals: the EXEC replies of deadbolt and redis-server
/// agree for each command run by another client between WATCH and EXEC (SMOVE signals its
/// destination only when the member was added there).
#[test]
fn watch_is_invalidated_like_redis() {
    let setup: &[&[&str]] = &[
        &["DEL", "k", "o", "l"],
        &["SADD", "k", "1", "2"],
        &["SADD", "o", "2", "3"],
        &["RPUSH", "l", "2", "1"],
    ];
    let cases: &[&[&str]] = &[
        &["SINTERSTORE", "k", "k", "o"],
        &["SINTERSTORE", "k", "nokey"],
        &["SINTERSTORE", "x", "k", "o"],
        &["SUNIONSTORE", "k", "k"],
        &["SDIFFSTORE", "k", "o", "o"],
        &["SINTER", "k", "o"],
        &["SINTERCARD", "1", "k"],
        &["SMOVE", "k", "o", "1"],
        &["SMOVE", "o", "k", "3"],
        &["SMOVE", "o", "k", "2"],
        &["SMOVE", "k", "k", "1"],
        &["SMOVE", "k", "o", "9"],
        &["SORT", "l", "STORE", "k"],
        &["SORT", "nokey", "STORE", "k"],
        &["SORT", "k", "STORE", "x"],
        &["SORT_RO", "k"],
    ];
    let aborted = common::watch_aborts_like_redis(setup, "k", cases);
    assert_eq!(
        aborted,
        [
            true, true, false, true, true, false, false, true, true, false, false, false, true,
            true, false, false
        ]
    );
}

/// The effects of every command here reach the append-only file: after a SIGKILL and restart
/// the keys hold the same members, lists and TTLs, and deleted destinations stay deleted.
#[test]
fn writes_survive_a_restart() {
    let dir = TempDir::new("sets-aof");
    let mut s = common::deadbolt_with_aof(&dir.0, "always", &[]);
    let mut c = s.conn();
    let writes: &[&[&str]] = &[
        &["SADD", "a", "1", "2", "3", "x", "y"],
        &["SADD", "b", "2", "3", "y", "z"],
        &["SET", "gone1", "v"],
        &["SET", "gone2", "v"],
        &["SET", "gone3", "v"],
        &["SET", "i", "old", "EX", "1000"],
        &["SINTERSTORE", "i", "a", "b"],
        &["SUNIONSTORE", "u", "a", "b"],
        &["SDIFFSTORE", "d", "a", "b"],
        &["SINTERSTORE", "gone1", "a", "nokey"],
        &["SDIFFSTORE", "gone2", "a", "a"],
        &["SMOVE", "a", "m", "x"],
        &["SADD", "one", "only"],
        &["SMOVE", "one", "m", "only"],
        &["RPUSH", "l", "3", "1", "2"],
        &["MSET", "w_1", "9", "w_2", "5", "w_3", "7"],
        &["SORT", "l", "BY", "w_*", "STORE", "sorted"],
        &["SORT", "l", "GET", "w_*", "STORE", "got"],
        &["SORT", "nokey", "STORE", "gone3"],
    ];
    for w in writes {
        let reply = c.cmd(w);
        assert!(!reply.starts_with(b"-"), "{w:?}: {reply:?}");
    }
    let probe = |c: &mut Conn| -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = ["a", "b", "i", "u", "d", "m"]
            .iter()
            .map(|k| unordered(c.cmd(&["SMEMBERS", k])))
            .collect();
        for k in ["sorted", "got"] {
            out.push(c.cmd(&["LRANGE", k, "0", "-1"]));
        }
        out.push(c.cmd(&["EXISTS", "gone1", "gone2", "gone3", "one"]));
        out.push(c.cmd(&["TTL", "i"]));
        out
    };
    let before = probe(&mut c);
    assert_eq!(before[2], b"*3\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\ny\r\n");
    assert_eq!(before[6], b"*3\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n1\r\n");
    assert_eq!(before[7], b"*3\r\n$1\r\n9\r\n$1\r\n5\r\n$1\r\n7\r\n");
    assert_eq!(before[8], b":0\r\n");
    assert_eq!(before[9], b":-1\r\n");
    s.kill9();
    let s = common::deadbolt_with_aof(&dir.0, "always", &[]);
    let mut c = s.conn();
    assert_eq!(probe(&mut c), before);
}

/// A small command cannot make SORT build an unbounded reply: GET repeated over a collection
/// is refused past 64M output elements, and the server keeps answering.
#[test]
fn sort_output_is_bounded() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    let members: Vec<String> = (0..70_000).map(|i| i.to_string()).collect();
    let mut sadd = vec!["SADD".to_string(), "big".into()];
    sadd.extend(members);
    assert_eq!(c.cmd(&sadd), b":70000\r\n");
    let mut sort = vec!["SORT".to_string(), "big".into()];
    for _ in 0..1000 {
        sort.extend(["GET".into(), "#".into()]);
    }
    let reply = c.cmd_str(&sort);
    assert!(reply.starts_with("-ERR SORT result too large"), "{reply}");
    sort.extend(["STORE".into(), "dst".into()]);
    let reply = c.cmd_str(&sort);
    assert!(reply.starts_with("-ERR SORT result too large"), "{reply}");
    assert_eq!(c.cmd(&["EXISTS", "dst"]), b":0\r\n");
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
}

/// SORT ... STORE creates a list: a client blocked on that key is served at once, with the
/// first stored element, as by redis-server.
#[test]
fn sort_store_wakes_a_blocked_client() {
    let mut replies = Vec::new();
    for (_, server) in common::deadbolt_and_redis(&[]) {
        let mut blocked = server.conn();
        let mut c = server.conn();
        c.cmd(&["RPUSH", "src", "3", "1", "2"]);
        blocked.send(&["BLPOP", "dst", "10"]);
        // The BLPOP is registered once CLIENT LIST shows the client blocked on it.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !c.cmd_str(&["CLIENT", "LIST"]).contains("cmd=blpop") {
            assert!(Instant::now() < deadline, "BLPOP never blocked");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(c.cmd(&["SORT", "src", "STORE", "dst"]), b":3\r\n");
        let got = blocked
            .try_read_reply(Duration::from_secs(5))
            .expect("BLPOP was not woken");
        replies.push((got, c.cmd(&["LRANGE", "dst", "0", "-1"])));
    }
    assert_eq!(replies[0], replies[1]);
    assert_eq!(replies[0].0, b"*2\r\n$3\r\ndst\r\n$1\r\n1\r\n");
}
