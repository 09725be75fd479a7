//! A stock redis-server as the replica of a single-node deadbolt (`--replicaof`): the way a
//! Redis user moves a live lock service from deadbolt to Redis. Full resync of 10,000 held
//! locks, the stream through lock traffic (acquire, extend, release by redis-py's script,
//! expiry), WAIT, a partial resync after the link is killed, promotion, and every lock's value
//! and deadline on the promoted replica. INFO replication and ROLE are compared in shape with
//! a redis-server master in the same situation.

use crate::common::*;
use std::time::{Duration, Instant};

const SECRET: &str = "a-shared-secret-of-the-test-cluster";
const RELEASE: &str = include_str!("../../lua/redis-py/lua_release_script.lua");

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Sends every command at once, then reads every reply.
fn pipeline(c: &mut Conn, cmds: &[Vec<String>]) -> Vec<Vec<u8>> {
    let mut buf = Vec::new();
    for cmd in cmds {
        buf.extend_from_slice(&resp_cmd(cmd));
    }
    c.send_raw(&buf);
    cmds.iter().map(|_| c.read_reply()).collect()
}

fn info_field(c: &mut Conn, section: &str, name: &str) -> String {
    let info = text(&c.cmd(&["INFO", section]));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Polls `check` until it holds (panics with `what` after 20 s).
fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn cmd(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// Every key with its value and absolute deadline (PEXPIRETIME), sorted.
fn dump_locks(c: &mut Conn) -> Vec<(String, String, String)> {
    let keys = text(&c.cmd(&["KEYS", "*"]));
    let mut names: Vec<String> = keys
        .split("\r\n")
        .skip(1)
        .filter(|l| !l.starts_with('$') && !l.is_empty())
        .map(str::to_string)
        .collect();
    names.sort();
    let gets: Vec<Vec<String>> = names.iter().map(|k| cmd(&["GET", k])).collect();
    let times: Vec<Vec<String>> = names.iter().map(|k| cmd(&["PEXPIRETIME", k])).collect();
    let values = pipeline(c, &gets);
    let deadlines = pipeline(c, &times);
    names
        .into_iter()
        .zip(values.iter().zip(&deadlines))
        .map(|(k, (v, d))| (k, text(v), text(d)))
        .collect()
}

/// The field names of INFO replication, with `slaveN` lines reduced to their keys.
fn replication_shape(c: &mut Conn) -> Vec<String> {
    let info = text(&c.cmd(&["INFO", "replication"]));
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| {
            if k.starts_with("slave") {
                let keys: Vec<&str> = v
                    .split(',')
                    .filter_map(|f| f.split_once('='))
                    .map(|f| f.0)
                    .collect();
                format!("{k}:{}", keys.join(","))
            } else {
                k.to_string()
            }
        })
        .collect()
}

/// ROLE with the numbers replaced by their RESP type.
fn role_shape(c: &mut Conn) -> String {
    let role = text(&c.cmd(&["ROLE"]));
    role.split("\r\n")
        .map(|l| match l.chars().next() {
            Some(':') => ":N".to_string(),
            Some('$') => "$".to_string(),
            _ if l.chars().all(|ch| ch.is_ascii_digit() || ch == '.') => "V".to_string(),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A redis-server replica of `master_port`, its files (the RDB it receives) in `dir`.
fn attach_replica(master_port: u16, dir: &std::path::Path) -> (Server, Conn) {
    std::fs::create_dir_all(dir).unwrap();
    let replica = redis_server(&[
        "--replicaof",
        "127.0.0.1",
        &master_port.to_string(),
        "--dir",
        dir.to_str().unwrap(),
        "--enable-debug-command",
        "yes",
    ]);
    let mut r = replica.conn();
    wait_for("the replica's link", || {
        info_field(&mut r, "replication", "master_link_status") == "up"
    });
    (replica, r)
}

#[test]
fn a_redis_replica_follows_deadbolt_and_is_promoted_with_every_lock() {
    let dir = TempDir::new("redis-replica");
    let db = deadbolt(&[
        "--dir",
        dir.0.to_str().unwrap(),
        "--enable-debug-command",
        "yes",
    ]);
    let mut m = db.conn();
    // 10,000 held locks with TTLs from 60 s to 160 s, and 200 that expire within a second.
    let mut acquire: Vec<Vec<String>> = (0..10_000)
        .map(|i| {
            let ttl = (60_000 + i * 10).to_string();
            cmd(&[
                "SET",
                &format!("lock:{i}"),
                &format!("token-{i}"),
                "NX",
                "PX",
                &ttl,
            ])
        })
        .collect();
    acquire.extend((0..200).map(|i| {
        let ttl = (300 + i * 3).to_string();
        cmd(&["SET", &format!("short:{i}"), "t", "NX", "PX", &ttl])
    }));
    for r in pipeline(&mut m, &acquire) {
        assert_eq!(r, b"+OK\r\n");
    }

    let (mut replica, mut r) = attach_replica(db.port, &dir.0.join("replica"));
    wait_for("the full resync's keys", || {
        text(&r.cmd(&["DBSIZE"])) == text(&m.cmd(&["DBSIZE"]))
    });
    assert_eq!(info_field(&mut m, "stats", "sync_full"), "1");

    // Lock traffic: acquire, extend, release (EVALSHA and EVAL of redis-py's script), and a
    // failed acquire that changes nothing.
    let sha = text(&m.cmd(&["SCRIPT", "LOAD", RELEASE]));
    let sha = sha.lines().nth(1).unwrap().to_string();
    let mut traffic: Vec<Vec<String>> = Vec::new();
    for i in 0..1000 {
        let ttl = (90_000 + i).to_string();
        traffic.push(cmd(&[
            "SET",
            &format!("new:{i}"),
            &format!("n-{i}"),
            "NX",
            "PX",
            &ttl,
        ]));
        traffic.push(cmd(&["PEXPIRE", &format!("lock:{i}"), "120000"]));
        let (k, t) = (format!("lock:{}", 5000 + i), format!("token-{}", 5000 + i));
        if i % 2 == 0 {
            traffic.push(cmd(&["EVALSHA", &sha, "1", &k, &t]));
        } else {
            traffic.push(cmd(&["EVAL", RELEASE, "1", &k, &t]));
        }
        traffic.push(cmd(&[
            "SET",
            &format!("lock:{}", 9000 + i),
            "other",
            "NX",
            "PX",
            "1000",
        ]));
    }
    // A Redisson-style lock is a hash with a deadline.
    traffic.push(cmd(&["HINCRBY", "rlock", "client:1", "1"]));
    traffic.push(cmd(&["PEXPIRE", "rlock", "100000"]));
    let replies = pipeline(&mut m, &traffic);
    let replies = &replies[..replies.len() - 2];
    assert!(replies.chunks(4).all(|r| r[0] == b"+OK\r\n"
        && r[1] == b":1\r\n"
        && r[2] == b":1\r\n"
        && r[3] == b"$-1\r\n"));
    wait_for("the short locks to expire on deadbolt", || {
        text(&m.cmd(&["EXISTS", "short:199"])) == ":0\r\n"
            && (0..200).all(|i| text(&m.cmd(&["EXISTS", &format!("short:{i}")])) == ":0\r\n")
    });
    assert_eq!(m.cmd(&["WAIT", "1", "1000"]), b":1\r\n");
    assert_eq!(dump_locks(&mut r), dump_locks(&mut m));
    // The whole dataset, as Redis digests it.
    assert_eq!(r.cmd(&["DEBUG", "DIGEST"]), m.cmd(&["DEBUG", "DIGEST"]));

    // The master as Redis shows it, compared in shape with a redis-server master.
    let redis_master = redis_server(&["--dir", dir.0.to_str().unwrap()]);
    let mut rm = redis_master.conn();
    rm.cmd(&["SET", "x", "1"]);
    let (_redis_replica, _) = attach_replica(redis_master.port, &dir.0.join("redis-replica"));
    wait_for("both masters' replicas to ack", || {
        info_field(&mut rm, "replication", "slave0").contains("state=online")
            && info_field(&mut m, "replication", "slave0").contains("state=online")
    });
    assert_eq!(replication_shape(&mut m), replication_shape(&mut rm));
    assert_eq!(role_shape(&mut m), role_shape(&mut rm));
    for c in [&mut m, &mut rm] {
        // Replicas are not counted as clients, and are listed as replicas (flag S).
        assert_eq!(info_field(c, "clients", "connected_clients"), "1");
        let listed = text(&c.cmd(&["CLIENT", "LIST", "TYPE", "replica"]));
        assert!(listed.contains(" flags=S "), "{listed}");
    }
    drop(_redis_replica);

    // The link dies; writes meanwhile come from the backlog: PSYNC gets +CONTINUE.
    assert_eq!(m.cmd(&["CLIENT", "KILL", "TYPE", "replica"]), b":1\r\n");
    let more: Vec<Vec<String>> = (0..500)
        .map(|i| cmd(&["SET", &format!("late:{i}"), "l", "NX", "PX", "100000"]))
        .collect();
    pipeline(&mut m, &more);
    wait_for("the partial resync", || {
        info_field(&mut m, "stats", "sync_partial_ok") == "1"
            && info_field(&mut r, "replication", "master_link_status") == "up"
    });
    assert_eq!(info_field(&mut m, "stats", "sync_full"), "1");
    replica.wait_log(
        "Successful partial resynchronization with master",
        Duration::from_secs(5),
    );
    assert_eq!(m.cmd(&["WAIT", "1", "2000"]), b":1\r\n");
    assert_eq!(
        info_field(&mut m, "replication", "master_repl_offset"),
        info_field(&mut r, "replication", "master_repl_offset")
    );

    // Promotion: the replica holds every lock with deadbolt's deadline.
    assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    let promoted = dump_locks(&mut r);
    let source = dump_locks(&mut m);
    assert_eq!(promoted.len(), 10_000 + 1000 - 1000 + 500 + 1);
    assert_eq!(promoted, source);
    assert_eq!(r.cmd(&["DEBUG", "DIGEST"]), m.cmd(&["DEBUG", "DIGEST"]));
    // And the TTLs as clients read them: the replica's, read between two of deadbolt's, lies
    // between them (within a millisecond of rounding), and within 10 ms of the first.
    let pttl =
        |c: &mut Conn, k: &str| -> i64 { text(&c.cmd(&["PTTL", k]))[1..].trim().parse().unwrap() };
    for (k, _, _) in source.iter().step_by(97) {
        let (a1, b, a2) = (pttl(&mut m, k), pttl(&mut r, k), pttl(&mut m, k));
        assert!(
            a2 - 1 <= b && b <= a1 + 1,
            "{k}: deadbolt {a1}..{a2}, replica {b}"
        );
        assert!(
            a1 - b <= 10 || a1 - a2 > 10,
            "{k}: deadbolt {a1}..{a2}, replica {b}"
        );
    }
    // The promoted replica takes lock writes.
    assert_eq!(
        r.cmd(&["SET", "after", "1", "NX", "PX", "1000"]),
        b"+OK\r\n"
    );
    replica.kill9();
}

#[test]
fn sync_is_refused_in_cluster_mode_and_replconf_answers_as_redis() {
    let dir = TempDir::new("sync-raw");
    let dir_arg = dir.0.to_str().unwrap();
    let both = deadbolt_and_redis(&["--dir", dir_arg, "--repl-ping-replica-period", "3600"]);
    let mut seen = Vec::new();
    for (_, s) in &both {
        let mut c = s.conn();
        seen.push(
            [
                c.cmd(&[
                    "REPLCONF",
                    "listening-port",
                    "7000",
                    "capa",
                    "eof",
                    "capa",
                    "psync2",
                ]),
                c.cmd(&["REPLCONF", "listening-port"]),
                c.cmd(&["REPLCONF", "listening-port", "x"]),
                c.cmd(&["REPLCONF", "nope", "1"]),
                c.cmd(&["REPLCONF", "rdb-only", "2"]),
                c.cmd(&["REPLCONF"]),
                c.cmd(&["PSYNC", "?"]),
                c.cmd(&["PSYNC", "?", "x"]),
            ]
            .map(|b| text(&b)),
        );
        // REPLCONF ACK from a non-replica and GETACK to a master answer nothing.
        c.send(&["REPLCONF", "ACK", "10"]);
        c.send(&["REPLCONF", "GETACK", "*"]);
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    }
    assert_eq!(seen[0], seen[1]);
    // A raw SYNC gets the RDB as a bulk without a CRLF after it, then the stream.
    for (_, s) in &both {
        let mut c = s.conn();
        c.send_raw(b"SYNC\r\n");
        let mut w = s.conn();
        w.cmd(&["SET", "k", "v"]);
        let (got, _) = c.drain(Duration::from_millis(500));
        // Redis sends newlines while the RDB is being made.
        let got = &got[got.iter().take_while(|&&b| b == b'\n').count()..];
        let header_end = got.windows(2).position(|w| w == b"\r\n").unwrap();
        let len: usize = text(&got[1..header_end]).parse().unwrap();
        assert!(got[header_end + 2..].starts_with(b"REDIS0010"));
        let stream = text(&got[header_end + 2 + len..]);
        assert_eq!(
            stream,
            "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
        );
    }
    let dir = TempDir::new("sync-cluster");
    let (ports, peers) = cluster_ports(1);
    let args = cluster_node_args(ports[0].0, &dir.0, 1, &peers, SECRET);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let node = deadbolt(&args);
    let mut c = node.conn();
    let err = text(&c.cmd(&["SYNC"]));
    assert!(
        err.starts_with("-ERR SYNC and PSYNC are not supported in cluster mode"),
        "{err}"
    );
}

/// Writes of every form the stream takes (Redis's rewrites, verbatim commands, transactions,
/// scripts, pops, expiries, and the units sent as key states), then the replica's dataset is
/// deadbolt's, by Redis's own DEBUG DIGEST.
#[test]
fn a_redis_replica_stays_identical_through_every_kind_of_write() {
    let dir = TempDir::new("redis-replica-mixed");
    let db = deadbolt(&[
        "--dir",
        dir.0.to_str().unwrap(),
        "--enable-debug-command",
        "yes",
    ]);
    let mut m = db.conn();
    m.cmd(&["SET", "before", "1", "PX", "1"]);
    let lib = |name: &str| {
        format!("#!lua name={name}\nredis.register_function('f_{name}', function(keys, args) return 1 end)")
    };
    assert_eq!(
        text(&m.cmd(&["FUNCTION", "LOAD", &lib("early")])),
        "$5\r\nearly\r\n"
    );
    let (_replica, mut r) = attach_replica(db.port, &dir.0.join("replica"));
    // Libraries come with the full resync's RDB, and later ones through the stream.
    assert_eq!(
        text(&m.cmd(&["FUNCTION", "LOAD", &lib("late")])),
        "$4\r\nlate\r\n"
    );
    m.cmd(&["SET", "src", "payload"]);
    let script = "redis.call('set', KEYS[1], 'x') redis.call('incr', KEYS[2]) return redis.call('spop', KEYS[3])";
    for round in 0..20 {
        let k = |p: &str| format!("{p}:{round}");
        let cmds: Vec<Vec<String>> = vec![
            cmd(&["SET", &k("s"), "v", "EX", "100"]),
            cmd(&["SET", &k("short"), "v", "PX", "20"]),
            cmd(&["SETEX", &k("sx"), "100", "v"]),
            cmd(&["PSETEX", &k("psx"), "100000", "v"]),
            cmd(&["GETEX", &k("s"), "PX", "5000"]),
            cmd(&["GETEX", &k("sx"), "PERSIST"]),
            cmd(&["GETDEL", &k("psx")]),
            cmd(&["INCR", &k("n")]),
            cmd(&["INCRBY", &k("n"), "5"]),
            cmd(&["INCRBYFLOAT", &k("f"), "1.1"]),
            cmd(&["HSET", &k("h"), "a", "1", "b", "2"]),
            cmd(&["HINCRBYFLOAT", &k("h"), "a", "0.25"]),
            cmd(&["SADD", &k("set"), "a", "b", "c", "d", "e"]),
            cmd(&["SPOP", &k("set")]),
            cmd(&["SPOP", &k("set"), "2"]),
            cmd(&["SINTERSTORE", &k("inter"), &k("set"), &k("set")]),
            cmd(&["RPUSH", &k("l"), "1", "2", "3", "4"]),
            cmd(&["LMPOP", "1", &k("l"), "LEFT", "COUNT", "2"]),
            cmd(&["ZADD", &k("z"), "1", "a", "2", "b", "3", "c"]),
            cmd(&["ZMPOP", "1", &k("z"), "MAX", "COUNT", "2"]),
            cmd(&["ZINCRBY", &k("z"), "2.5", "a"]),
            cmd(&["EXPIRE", &k("n"), "100"]),
            cmd(&["PEXPIREAT", &k("f"), "1"]),
            cmd(&["APPEND", &k("s"), "tail"]),
            cmd(&["SETRANGE", &k("s"), "1", "XY"]),
            cmd(&["RENAME", &k("inter"), &k("renamed")]),
            cmd(&["XADD", &k("x"), "*", "f", "v"]),
            cmd(&["MULTI"]),
            cmd(&["SET", &k("m1"), "1"]),
            cmd(&["INCR", &k("m1")]),
            cmd(&["SELECT", "1"]),
            cmd(&["SET", &k("m2"), "2", "PX", "100000"]),
            cmd(&["SELECT", "0"]),
            cmd(&["EXEC"]),
            cmd(&["SADD", &k("sp"), "1", "2", "3"]),
            cmd(&["EVAL", script, "3", &k("e1"), &k("e2"), &k("sp")]),
            cmd(&["PUBLISH", "ch", "msg"]),
        ];
        pipeline(&mut m, &cmds);
        // RESTORE with a relative TTL, of DUMP's bytes as they came.
        let mut restore = b"*4\r\n$7\r\nRESTORE\r\n".to_vec();
        let key = k("r");
        restore
            .extend_from_slice(format!("${}\r\n{key}\r\n$6\r\n100000\r\n", key.len()).as_bytes());
        let raw = m.cmd(&["DUMP", "src"]);
        restore.extend_from_slice(&raw);
        m.send_raw(&restore);
        assert_eq!(m.read_reply(), b"+OK\r\n");
        if round == 10 {
            pipeline(
                &mut m,
                &[
                    cmd(&["SELECT", "2"]),
                    cmd(&["SET", "x", "1"]),
                    cmd(&["FLUSHDB"]),
                    cmd(&["SELECT", "0"]),
                    cmd(&["SWAPDB", "0", "3"]),
                    cmd(&["SWAPDB", "0", "3"]),
                ],
            );
        }
    }
    wait_for("the short keys to expire", || {
        (0..20).all(|i| text(&m.cmd(&["EXISTS", &format!("short:{i}")])) == ":0\r\n")
    });
    assert_eq!(m.cmd(&["WAIT", "1", "2000"]), b":1\r\n");
    // DEBUG DIGEST counts keys past their deadline that nothing deleted yet (as Redis's):
    // the one set before the replica attached is deleted now, so both sides drop it.
    assert_eq!(m.cmd(&["EXISTS", "before"]), b":0\r\n");
    assert_eq!(m.cmd(&["WAIT", "1", "2000"]), b":1\r\n");
    let digest = m.cmd(&["DEBUG", "DIGEST"]);
    assert_ne!(
        digest,
        b"$40\r\n0000000000000000000000000000000000000000\r\n"
    );
    assert_eq!(r.cmd(&["DEBUG", "DIGEST"]), digest);
    let libs = text(&r.cmd(&["FUNCTION", "LIST"]));
    assert!(libs.contains("early") && libs.contains("late"), "{libs}");
}

/// The whole move and back: deadbolt follows a Redis master, is promoted, and a new Redis
/// replica then follows deadbolt. While following, deadbolt refuses to chain a replica; when
/// it starts following a master it drops its Redis replicas; the promoted deadbolt's first
/// replica starts a new history (no replid2 left), and the locks' deadlines survive the switches.
#[test]
fn locks_move_from_redis_to_deadbolt_and_back_to_redis() {
    let dir = TempDir::new("repl-round-trip");
    let origin = redis_server(&["--dir", dir.0.to_str().unwrap()]);
    let mut o = origin.conn();
    let locks: Vec<Vec<String>> = (0..500)
        .map(|i| {
            cmd(&[
                "SET",
                &format!("lock:{i}"),
                &format!("token-{i}"),
                "NX",
                "PX",
                &(60_000 + i * 10).to_string(),
            ])
        })
        .collect();
    assert!(pipeline(&mut o, &locks).iter().all(|r| r == b"+OK\r\n"));

    let db = deadbolt(&[]);
    let mut d = db.conn();
    assert_eq!(
        d.cmd(&["REPLICAOF", "127.0.0.1", &origin.port.to_string()]),
        b"+OK\r\n"
    );
    wait_for("deadbolt's link to the origin", || {
        info_field(&mut d, "replication", "master_link_status") == "up"
            && info_field(&mut d, "keyspace", "db0").starts_with("keys=500,")
    });
    // No chaining: a replica of deadbolt while it follows is refused with the reason.
    let mut chained = db.conn();
    let refused = text(&chained.cmd(&["SYNC"]));
    assert!(
        refused.starts_with("-ERR deadbolt does not chain replication"),
        "{refused}"
    );
    assert_eq!(o.cmd(&["CLIENT", "PAUSE", "10000", "WRITE"]), b"+OK\r\n");
    let origin_offset = info_field(&mut o, "replication", "master_repl_offset");
    wait_for("deadbolt to catch up", || {
        info_field(&mut d, "replication", "slave_repl_offset") == origin_offset
    });
    let on_origin = dump_locks(&mut o);
    assert_eq!(d.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    assert_eq!(dump_locks(&mut d), on_origin);
    assert_ne!(
        info_field(&mut d, "replication", "master_replid2"),
        "0000000000000000000000000000000000000000"
    );
    let promoted_offset: u64 = info_field(&mut d, "replication", "master_repl_offset")
        .parse()
        .unwrap();
    assert_eq!(promoted_offset.to_string(), origin_offset);
    drop(o);
    drop(origin);

    // Back to Redis: a stock replica attaches to the promoted deadbolt.
    let (_replica, mut r) = attach_replica(db.port, &dir.0.join("back"));
    assert_eq!(
        info_field(&mut d, "replication", "master_replid2"),
        "0000000000000000000000000000000000000000"
    );
    // Following a master drops the Redis replicas (no chaining); once promoted again, the
    // replica comes back by itself with a full resynchronisation.
    let nowhere = free_port().to_string();
    assert_eq!(d.cmd(&["REPLICAOF", "127.0.0.1", &nowhere]), b"+OK\r\n");
    wait_for("the Redis replica's link to drop", || {
        info_field(&mut r, "replication", "master_link_status") == "down"
    });
    assert_eq!(d.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    wait_for("the Redis replica to come back", || {
        info_field(&mut r, "replication", "master_link_status") == "up"
    });
    assert_eq!(d.cmd(&["SET", "lock:new", "t", "PX", "60000"]), b"+OK\r\n");
    assert_eq!(text(&d.cmd(&["WAIT", "1", "5000"])), ":1\r\n");
    let mut expected = on_origin.clone();
    expected.extend(dump_locks(&mut d).into_iter().filter(|l| l.0 == "lock:new"));
    expected.sort();
    assert_eq!(dump_locks(&mut r), expected);
    assert_eq!(dump_locks(&mut d), expected);
}

/// Sends a raw SYNC and reads the RDB that comes first (Redis sends newlines while it makes it).
fn raw_sync(c: &mut Conn) {
    c.send_raw(b"SYNC\r\n");
    let mut got = Vec::new();
    wait_for("the RDB of a raw SYNC", || {
        got.extend(c.drain(Duration::from_millis(50)).0);
        let body = &got[got.iter().take_while(|&&b| b == b'\n').count()..];
        let Some(end) = body.windows(2).position(|w| w == b"\r\n") else {
            return false;
        };
        let len: usize = text(&body[1..end]).parse().unwrap();
        assert_eq!(
            body.len(),
            end + 2 + len,
            "the stream started before the RDB ended"
        );
        true
    });
}

/// The stream after the RDB, with XCLAIM's delivery time (`TIME <ms>`) masked.
fn synced_stream(c: &mut Conn) -> String {
    let (got, _) = c.drain(Duration::from_millis(500));
    let mut out = String::new();
    let mut rest = text(&got);
    while let Some(at) = rest.find("$4\r\nTIME\r\n$") {
        out.push_str(&rest[..at + 11]);
        rest = rest[at + 11..].split_once("\r\n").unwrap().1.to_string();
        let ms;
        (ms, rest) = match rest.split_once("\r\n") {
            Some((ms, tail)) => (ms.to_string(), tail.to_string()),
            None => panic!("TIME without its value"),
        };
        assert!(
            ms.len() == 13 && ms.bytes().all(|b| b.is_ascii_digit()),
            "{ms}"
        );
        out.push_str("13\r\nMS\r\n");
    }
    out + &rest
}

/// XREADGROUP goes to a replica as Redis 7.0 propagates it (t_stream.c): an XCLAIM per entry
/// delivered into the PEL, XGROUP CREATECONSUMER / SETID with NOACK, nothing for a re-read of
/// history; several in MULTI/EXEC, alone or in a transaction. The raw SYNC streams of deadbolt
/// and redis-server are the same bytes (delivery times aside), and a stock replica of
/// deadbolt ends with deadbolt's DEBUG DIGEST.
#[test]
fn xreadgroup_is_propagated_as_redis_propagates_it() {
    let dir = TempDir::new("xreadgroup-sync");
    let dir_arg = dir.0.to_str().unwrap();
    let both = deadbolt_and_redis(&[
        "--dir",
        dir_arg,
        "--repl-ping-replica-period",
        "3600",
        "--enable-debug-command",
        "yes",
    ]);
    let mut streams = Vec::new();
    let mut replica = None;
    for (name, s) in &both {
        let mut w = s.conn();
        let mut setup: Vec<Vec<String>> = (1..=6)
            .map(|i| cmd(&["XADD", "s", &format!("{i}-1"), "f", &i.to_string()]))
            .collect();
        setup.push(cmd(&["XADD", "t", "1-1", "f", "t1"]));
        setup.push(cmd(&["XGROUP", "CREATE", "s", "g", "0"]));
        setup.push(cmd(&["XGROUP", "CREATE", "t", "g", "0"]));
        setup.push(cmd(&["XADD", "b", "1-1", "f", "b1"]));
        setup.push(cmd(&["XGROUP", "CREATE", "b", "g", "$"]));
        pipeline(&mut w, &setup);
        if *name == "deadbolt" {
            replica = Some(attach_replica(s.port, &dir.0.join("replica")));
        }
        let mut c = s.conn();
        raw_sync(&mut c);
        let traffic = vec![
            cmd(&["MULTI"]),
            cmd(&[
                "XREADGROUP",
                "GROUP",
                "g",
                "c1",
                "COUNT",
                "2",
                "STREAMS",
                "s",
                ">",
            ]),
            cmd(&["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0"]),
            cmd(&["EXEC"]),
            cmd(&[
                "XREADGROUP",
                "GROUP",
                "g",
                "c1",
                "COUNT",
                "1",
                "STREAMS",
                "s",
                ">",
            ]),
            cmd(&[
                "XREADGROUP",
                "GROUP",
                "g",
                "c2",
                "NOACK",
                "COUNT",
                "1",
                "STREAMS",
                "s",
                ">",
            ]),
            cmd(&[
                "XREADGROUP",
                "GROUP",
                "g",
                "c2",
                "COUNT",
                "1",
                "NOACK",
                "STREAMS",
                "s",
                ">",
            ]),
            cmd(&["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0"]),
            cmd(&["SET", "k", "1"]),
            cmd(&[
                "XREADGROUP",
                "GROUP",
                "g",
                "c1",
                "STREAMS",
                "s",
                "t",
                ">",
                ">",
            ]),
            cmd(&["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">"]),
            cmd(&["MULTI"]),
            cmd(&[
                "XREADGROUP",
                "GROUP",
                "g",
                "c3",
                "NOACK",
                "STREAMS",
                "s",
                "0",
            ]),
            cmd(&["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "t", "0-0"]),
            cmd(&["SET", "k", "2"]),
            cmd(&["EXEC"]),
        ];
        let replies = pipeline(&mut w, &traffic);
        assert!(
            text(&replies[3]).starts_with("*2\r\n*1\r\n*2\r\n$1\r\ns\r\n*2\r\n"),
            "{name}: {}",
            text(&replies[3])
        );
        streams.push(synced_stream(&mut c));
        // A blocked XREADGROUP served by a later XADD: the XADD, then the reader's XCLAIM
        // (with NOACK, the new consumer and SETID in MULTI/EXEC).
        let mut tails = Vec::new();
        for (consumer, noack, id) in [("bc1", false, "2-1"), ("bc2", true, "3-1")] {
            let mut blocked = s.conn();
            let mut read = vec!["XREADGROUP", "GROUP", "g", consumer, "BLOCK", "0"];
            if noack {
                read.push("NOACK");
            }
            blocked.send(&[&read[..], &["STREAMS", "b", ">"]].concat());
            wait_for("the reader to block", || {
                text(&w.cmd(&["INFO", "clients"])).contains("blocked_clients:1\r\n")
            });
            w.cmd(&["XADD", "b", id, "f", "v"]);
            assert!(text(&blocked.read_reply()).contains(id), "{name}");
            tails.push(synced_stream(&mut c));
        }
        streams.push(tails.concat());
    }
    // deadbolt's (traffic, blocked readers), then redis-server's.
    assert_eq!(streams[0], streams[2]);
    assert_eq!(streams[1], streams[3]);
    let xclaim = |id: &str, last: &str| {
        format!(
            "*14\r\n$6\r\nXCLAIM\r\n$1\r\ns\r\n$1\r\ng\r\n$2\r\nc1\r\n$1\r\n0\r\n$3\r\n{id}\r\n\
             $4\r\nTIME\r\n$13\r\nMS\r\n$10\r\nRETRYCOUNT\r\n$1\r\n1\r\n$5\r\nFORCE\r\n\
             $6\r\nJUSTID\r\n$6\r\nLASTID\r\n$3\r\n{last}\r\n"
        )
    };
    let expected_start = format!(
        "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*1\r\n$5\r\nMULTI\r\n{}{}*1\r\n$4\r\nEXEC\r\n{}",
        xclaim("1-1", "1-1"),
        xclaim("2-1", "2-1"),
        xclaim("3-1", "3-1")
    );
    assert!(streams[0].starts_with(&expected_start), "{}", streams[0]);
    assert!(
        streams[0].contains(
            "*7\r\n$6\r\nXGROUP\r\n$5\r\nSETID\r\n$1\r\ns\r\n$1\r\ng\r\n$3\r\n5-1\r\n\
             $11\r\nENTRIESREAD\r\n$1\r\n5\r\n"
        ),
        "{}",
        streams[0]
    );
    let (_replica, mut r) = replica.unwrap();
    let mut m = both[0].1.conn();
    assert_eq!(m.cmd(&["WAIT", "1", "2000"]), b":1\r\n");
    let digest = m.cmd(&["DEBUG", "DIGEST"]);
    assert_eq!(r.cmd(&["DEBUG", "DIGEST"]), digest);
    // The groups' PELs and last IDs too (not delivery counts: Redis does not propagate a
    // re-read of history; nor entries-read, which a replica's XCLAIM LASTID leaves as it was).
    for key in ["s", "t"] {
        let pending = m.cmd(&["XPENDING", key, "g"]);
        assert_eq!(r.cmd(&["XPENDING", key, "g"]), pending);
        let last_id = |c: &mut Conn| {
            let groups = text(&c.cmd(&["XINFO", "GROUPS", key]));
            let (_, after) = groups.split_once("last-delivered-id\r\n").unwrap();
            after.split("\r\n").nth(1).unwrap().to_string()
        };
        assert_eq!(last_id(&mut r), last_id(&mut m));
    }
}
