//! deadbolt as a replica of a real redis-server 7.0.15 (`REPLICAOF host port`), the way a
//! Redis user moves a live lock service to deadbolt: the full synchronisation of 10,000 held
//! locks, the command stream that follows (acquire, extend, redis-py's release script, a
//! master-side expiry arriving as DEL), the READONLY refusal, a dropped link resumed with
//! +CONTINUE, and `REPLICAOF NO ONE` with every lock and its deadline kept, after which
//! redis-py's Lock releases the locks it held before and takes new ones on deadbolt.

use crate::common;

use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

const LOCKS: usize = 10_000;

/// The Python that runs redis-py (`DEADBOLT_TEST_PYTHON`, default `python3`); it must import
/// `redis`, or the test fails saying so.
fn python() -> String {
    let python = std::env::var("DEADBOLT_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = Command::new(&python).args(["-c", "import redis"]).output();
    assert!(
        probe.as_ref().is_ok_and(|o| o.status.success()),
        "{python} cannot import redis (apt-get install python3-redis, or point \
         DEADBOLT_TEST_PYTHON at a python that has it): {probe:?}"
    );
    python
}

fn run_python(python: &str, script: &str) -> String {
    let out = Command::new(python).args(["-c", script]).output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One field of an INFO reply.
fn info_field(c: &mut Conn, section: &str, name: &str) -> String {
    let info = c.cmd_str(&["INFO", section]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .to_string()
}

/// Polls `f` until it is true, failing after `secs` seconds with `what`.
fn wait_until(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn int(reply: &[u8]) -> i64 {
    let s = String::from_utf8_lossy(reply);
    s.trim_start_matches(':')
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("not an integer: {s:?}"))
}

/// The replica has applied everything the master wrote.
fn caught_up(master: &mut Conn, replica: &mut Conn) -> bool {
    // The master streams to a replica once it is online (after the transfer and its first
    // REPLCONF ACK).
    if !master
        .cmd_str(&["INFO", "replication"])
        .contains("state=online")
    {
        return false;
    }
    let m = info_field(master, "replication", "master_repl_offset");
    info_field(replica, "replication", "slave_repl_offset") == m
}

/// Waits until the master streams to the replica: a diskless master puts a replica online at
/// its first REPLCONF ACK after the transfer, which may come a second later.
fn wait_streaming(master: &mut Conn, replica: &mut Conn) {
    assert_eq!(master.cmd_str(&["SET", "probe", "1"]), "+OK\r\n");
    wait_until(10, "the stream to flow", || {
        int(&replica.cmd(&["EXISTS", "probe"])) == 1
    });
    assert_eq!(int(&master.cmd(&["DEL", "probe"])), 1);
    wait_until(10, "the probe to go", || {
        int(&replica.cmd(&["EXISTS", "probe"])) == 0
    });
}

/// One command pipelined for many keys, on one connection: the replies in order.
fn pipelined(c: &mut Conn, cmd: &str, keys: &[String]) -> Vec<i64> {
    let mut req = Vec::new();
    for k in keys {
        req.extend_from_slice(&resp_cmd(&[cmd, k.as_str()]));
    }
    c.send_raw(&req);
    keys.iter().map(|_| int(&c.read_reply())).collect()
}

#[test]
fn replica_of_redis_keeps_every_lock_through_promotion() {
    let python = python();
    let dir = scratch("locks");
    let master = redis_server(&[
        "--repl-diskless-sync-delay",
        "0",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    let mport = master.port;
    let mut m = master.conn();
    let tokens = dir.join("tokens.txt");

    // 10,000 locks taken by redis-py's Lock on the master, TTLs from 30 s to 129 s.
    run_python(
        &python,
        &format!(
            r#"
import redis
r = redis.Redis(host="127.0.0.1", port={mport})
with open("{tokens}", "w") as f:
    for i in range({LOCKS}):
        lock = r.lock("lock:%d" % i, timeout=30 + (i % 100))
        assert lock.acquire(blocking=False)
        f.write("%d %s\n" % (i, lock.local.token.decode()))
"#,
            tokens = tokens.display()
        ),
    );
    assert_eq!(int(&m.cmd(&["DBSIZE"])), LOCKS as i64);

    // deadbolt follows it and loads them.
    let replica = deadbolt(&[]);
    let mut d = replica.conn();
    assert_eq!(
        d.cmd_str(&["REPLICAOF", "127.0.0.1", &mport.to_string()]),
        "+OK\r\n"
    );
    wait_until(30, "the first synchronisation", || {
        info_field(&mut d, "replication", "master_link_status") == "up" && caught_up(&mut m, &mut d)
    });
    assert_eq!(int(&d.cmd(&["DBSIZE"])), LOCKS as i64);
    wait_streaming(&mut m, &mut d);
    let role = d.cmd_str(&["ROLE"]);
    assert!(
        role.starts_with(&format!(
            "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:{mport}\r\n$9\r\nconnected\r\n"
        )),
        "{role}"
    );

    // Lock traffic on the master follows: acquire, extend, release through redis-py's
    // script (EVALSHA, replicated as its DEL), and a lock that expires on the master.
    let release = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/lua/redis-py/lua_release_script.lua"
    ))
    .unwrap();
    let sha = m.cmd_str(&["SCRIPT", "LOAD", &release]);
    let sha = sha
        .trim_start_matches('$')
        .lines()
        .nth(1)
        .unwrap()
        .to_string();
    for i in 0..100 {
        let k = format!("new:{i}");
        assert_eq!(m.cmd_str(&["SET", &k, "t", "NX", "PX", "90000"]), "+OK\r\n");
        let k = format!("lock:{i}");
        assert_eq!(int(&m.cmd(&["PEXPIRE", &k, "200000"])), 1);
    }
    let held: Vec<(usize, String)> = std::fs::read_to_string(&tokens)
        .unwrap()
        .lines()
        .map(|l| {
            let (i, t) = l.split_once(' ').unwrap();
            (i.parse().unwrap(), t.to_string())
        })
        .collect();
    for (i, token) in &held[9_900..] {
        let k = format!("lock:{i}");
        assert_eq!(int(&m.cmd(&["EVALSHA", &sha, "1", &k, token])), 1);
    }
    let set_at = Instant::now();
    assert_eq!(m.cmd_str(&["SET", "short", "t", "PX", "400"]), "+OK\r\n");
    wait_until(10, "the short lock on the replica", || {
        int(&d.cmd(&["EXISTS", "short"])) == 1
    });
    assert!(
        set_at.elapsed() < Duration::from_millis(400),
        "too slow to see it"
    );
    // Past its deadline the replica reads it as absent (deleted or not yet); the master
    // expires it (its lookup here, or its own cycle) and its DEL removes it on the replica.
    std::thread::sleep(Duration::from_millis(450).saturating_sub(set_at.elapsed()));
    assert_eq!(int(&d.cmd(&["EXISTS", "short"])), 0);
    assert_eq!(d.cmd_str(&["GET", "short"]), "$-1\r\n");
    // The replica expired nothing itself.
    assert_eq!(info_field(&mut d, "stats", "expired_keys"), "0");
    assert_eq!(m.cmd_str(&["GET", "short"]), "$-1\r\n");
    wait_until(10, "the stream to be applied", || caught_up(&mut m, &mut d));
    assert_eq!(int(&d.cmd(&["DBSIZE"])), LOCKS as i64);
    assert_eq!(d.cmd_str(&["GET", "lock:9999"]), "$-1\r\n");
    assert!(int(&d.cmd(&["PTTL", "lock:5"])) > 190_000);

    // A client's write is refused.
    assert_eq!(
        d.cmd_str(&["SET", "mine", "1"]),
        "-READONLY You can't write against a read only replica.\r\n"
    );

    // The link drops; writes go on on the master; the link resumes with +CONTINUE.
    assert_eq!(int(&m.cmd(&["CLIENT", "KILL", "TYPE", "replica"])), 1);
    for i in 100..200 {
        let k = format!("new:{i}");
        assert_eq!(m.cmd_str(&["SET", &k, "t", "NX", "PX", "90000"]), "+OK\r\n");
    }
    replica.wait_log(
        "Successful partial resynchronization with master",
        Duration::from_secs(20),
    );
    wait_until(20, "the stream after the resumed link", || {
        caught_up(&mut m, &mut d)
    });
    assert_eq!(info_field(&mut m, "stats", "sync_full"), "1");
    assert_eq!(info_field(&mut m, "stats", "sync_partial_ok"), "1");

    // The switch: the master stops taking writes, the replica has everything, and every
    // lock's deadline is the master's.
    assert_eq!(m.cmd_str(&["CLIENT", "PAUSE", "60000", "WRITE"]), "+OK\r\n");
    wait_until(10, "the replica to catch up", || caught_up(&mut m, &mut d));
    let keys: Vec<String> = (0..LOCKS)
        .map(|i| format!("lock:{i}"))
        .chain((0..200).map(|i| format!("new:{i}")))
        .collect();
    assert_eq!(int(&d.cmd(&["DBSIZE"])), int(&m.cmd(&["DBSIZE"])));
    for chunk in keys.chunks(1000) {
        assert_eq!(
            pipelined(&mut m, "PEXPIRETIME", chunk),
            pipelined(&mut d, "PEXPIRETIME", chunk)
        );
        let started = Instant::now();
        let on_master = pipelined(&mut m, "PTTL", chunk);
        let on_replica = pipelined(&mut d, "PTTL", chunk);
        let slack = 10 + started.elapsed().as_millis() as i64;
        for ((k, a), b) in chunk.iter().zip(&on_master).zip(&on_replica) {
            assert!((a - b).abs() <= slack, "{k}: master {a} ms, replica {b} ms");
        }
    }
    let replid = info_field(&mut d, "replication", "master_replid");
    let offset: u64 = info_field(&mut d, "replication", "master_repl_offset")
        .parse()
        .unwrap();
    assert_eq!(d.cmd_str(&["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    assert_eq!(info_field(&mut d, "replication", "role"), "master");
    assert_eq!(info_field(&mut d, "replication", "master_replid2"), replid);
    assert_eq!(
        info_field(&mut d, "replication", "second_repl_offset"),
        (offset + 1).to_string()
    );
    assert_ne!(info_field(&mut d, "replication", "master_replid"), replid);
    drop(master);

    // redis-py releases on deadbolt the locks it took on Redis, and takes new ones; a lock
    // still held elsewhere is not taken.
    let dport = replica.port;
    let out = run_python(
        &python,
        &format!(
            r#"
import redis
r = redis.Redis(host="127.0.0.1", port={dport})
held = dict(l.split() for l in open("{tokens}"))
for i in range(100, 1100):
    lock = r.lock("lock:%d" % i, timeout=60)
    lock.local.token = held[str(i)].encode()
    assert lock.owned(), i
    lock.release()
    again = r.lock("lock:%d" % i, timeout=60)
    assert again.acquire(blocking=False), i
assert not r.lock("lock:5000", timeout=60).acquire(blocking=False)
assert r.pttl("lock:5000") > 0
print("ok")
"#,
            tokens = tokens.display()
        ),
    );
    assert_eq!(out, "ok\n");

    // Expiry is the promoted server's own again: a lookup past the deadline removes the key
    // (a replica only hides it) and counts it.
    let expired = |c: &mut Conn| -> u64 { info_field(c, "stats", "expired_keys").parse().unwrap() };
    let before = expired(&mut d);
    assert_eq!(d.cmd_str(&["SET", "soon", "t", "PX", "30"]), "+OK\r\n");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(d.cmd_str(&["GET", "soon"]), "$-1\r\n");
    assert_eq!(expired(&mut d), before + 1);
    assert_eq!(int(&d.cmd(&["DBSIZE"])), (LOCKS + 200 - 100) as i64);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The non-diskless transfer (`$<len>` then the RDB) loads every type the master holds, and
/// MULTI/EXEC blocks and SELECT in the stream apply to the right database.
#[test]
fn disk_based_sync_and_transactions_in_the_stream() {
    // The master writes its RDB file for the transfer: into a directory of the test's own.
    let dir = scratch("disk");
    let master = redis_server(&["--repl-diskless-sync", "no", "--dir", dir.to_str().unwrap()]);
    let mut m = master.conn();
    m.cmd(&["HSET", "h", "f", "v"]);
    m.cmd(&["RPUSH", "l", "a", "b"]);
    m.cmd(&["SADD", "s", "x"]);
    m.cmd(&["ZADD", "z", "1", "m"]);
    // A function library travels in the RDB (and a later one in the stream).
    let lib = "#!lua name=lib1\nredis.register_function{function_name='one', callback=function() return 1 end, flags={'no-writes'}}";
    assert_eq!(m.cmd_str(&["FUNCTION", "LOAD", lib]), "$4\r\nlib1\r\n");
    m.cmd(&["SELECT", "3"]);
    m.cmd(&["SET", "in3", "v", "EX", "1000"]);
    let replica = deadbolt(&[]);
    let mut d = replica.conn();
    d.cmd(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_until(30, "the synchronisation", || {
        info_field(&mut d, "replication", "master_link_status") == "up" && caught_up(&mut m, &mut d)
    });
    assert_eq!(d.cmd_str(&["HGET", "h", "f"]), "$1\r\nv\r\n");
    assert_eq!(int(&d.cmd(&["LLEN", "l"])), 2);
    assert_eq!(int(&d.cmd(&["FCALL_RO", "one", "0"])), 1);
    let lib2 = "#!lua name=lib2\nredis.register_function{function_name='two', callback=function() return 2 end, flags={'no-writes'}}";
    assert_eq!(m.cmd_str(&["FUNCTION", "LOAD", lib2]), "$4\r\nlib2\r\n");
    wait_until(10, "the library in the stream", || {
        caught_up(&mut m, &mut d)
    });
    assert_eq!(int(&d.cmd(&["FCALL_RO", "two", "0"])), 2);
    assert_eq!(d.cmd_str(&["SELECT", "3"]), "+OK\r\n");
    assert!(int(&d.cmd(&["TTL", "in3"])) > 990);
    m.cmd(&["MULTI"]);
    m.cmd(&["INCR", "n"]);
    m.cmd(&["INCR", "n"]);
    assert_eq!(m.cmd_str(&["EXEC"]), "*2\r\n:1\r\n:2\r\n");
    wait_until(10, "the transaction", || caught_up(&mut m, &mut d));
    assert_eq!(d.cmd_str(&["GET", "n"]), "$1\r\n2\r\n");
    d.cmd(&["SELECT", "0"]);
    assert_eq!(d.cmd_str(&["GET", "n"]), "$-1\r\n");
    // WAIT on the master counts the replica once it acknowledged.
    m.cmd(&["SET", "acked", "1"]);
    m.cmd(&["SELECT", "0"]);
    m.cmd(&["SET", "lk", "tok"]);
    assert_eq!(int(&m.cmd(&["WAIT", "1", "5000"])), 1);

    // INFO replication and ROLE have the shape of a redis-server replica of the same master.
    let mport = master.port.to_string();
    let theirs = redis_server(&[
        "--replicaof",
        "127.0.0.1",
        &mport,
        "--dir",
        dir.to_str().unwrap(),
        "--dbfilename",
        "replica.rdb",
    ]);
    let mut r = theirs.conn();
    wait_until(30, "redis-server's synchronisation", || {
        info_field(&mut r, "replication", "master_link_status") == "up"
            && caught_up(&mut m, &mut r)
            && caught_up(&mut m, &mut d)
    });
    let fields = |c: &mut Conn| -> Vec<(String, String)> {
        c.cmd_str(&["INFO", "replication"])
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let (ours, real) = (fields(&mut d), fields(&mut r));
    let names = |f: &[(String, String)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(names(&ours), names(&real));
    for (name, value) in &real {
        // The backlog's start differs (each replica synchronised at its own offset), and the
        // seconds since the last byte may differ by one.
        if matches!(
            name.as_str(),
            "repl_backlog_first_byte_offset"
                | "repl_backlog_histlen"
                | "master_last_io_seconds_ago"
        ) {
            continue;
        }
        let ours = &ours.iter().find(|(k, _)| k == name).unwrap().1;
        assert_eq!(ours, value, "{name}");
    }
    let role = |c: &mut Conn| c.cmd_str(&["ROLE"]);
    assert_eq!(role(&mut d), role(&mut r));
    // Scripts on the replica: writes refused with the script's suffix (redis-py's release
    // script too, which deadbolt otherwise runs natively), reads served.
    let release = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/lua/redis-py/lua_release_script.lua"
    ))
    .unwrap();
    for args in [
        &["EVAL", "return redis.call('set','x','1')", "0"][..],
        &["EVAL", &release, "1", "lk", "tok"],
        &["EVAL", &release, "1", "lk", "other"],
        &["EVAL_RO", "return redis.call('get',KEYS[1])", "1", "lk"],
        &["SET", "x", "1"],
    ] {
        assert_eq!(d.cmd_str(args), r.cmd_str(args), "{}", args[0]);
    }
    assert!(d
        .cmd_str(&["EVAL", &release, "1", "lk", "tok"])
        .starts_with("-READONLY You can't write against a read only replica. script: "));
    // Promoted, both keep the master's id as replid2 up to the same offset.
    m.cmd(&["CLIENT", "PAUSE", "10000", "WRITE"]);
    wait_until(10, "both replicas to catch up", || {
        caught_up(&mut m, &mut d) && caught_up(&mut m, &mut r)
    });
    let hello_role = "$4\r\nrole\r\n$7\r\nreplica\r\n";
    assert!(r.cmd_str(&["HELLO", "2"]).contains(hello_role));
    assert!(d.cmd_str(&["HELLO", "2"]).contains(hello_role));
    assert_eq!(d.cmd_str(&["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    assert_eq!(r.cmd_str(&["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    let (ours, real) = (fields(&mut d), fields(&mut r));
    assert_eq!(names(&ours), names(&real));
    for name in [
        "role",
        "master_replid2",
        "master_repl_offset",
        "second_repl_offset",
    ] {
        let get = |f: &[(String, String)]| f.iter().find(|(k, _)| k == name).unwrap().1.clone();
        assert_eq!(get(&ours), get(&real), "{name}");
    }
    assert_eq!(role(&mut d), role(&mut r));
    assert_eq!(d.cmd_str(&["SET", "mine", "1"]), "+OK\r\n");
    drop(master);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An empty directory of this test's own (a master's RDB file, the lock tokens).
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("deadbolt-replica-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `replicaof` in the configuration (here on the command line): before the master answers,
/// INFO replication reads as a redis-server's started the same way (no cached master: offsets
/// 1, the link down since never), and writes are refused.
#[test]
fn replicaof_directive_before_the_master_answers() {
    let nobody = free_port().to_string();
    let ours = deadbolt(&["--replicaof", "127.0.0.1", &nobody]);
    let real = redis_server(&["--replicaof", "127.0.0.1", &nobody]);
    let (mut d, mut r) = (ours.conn(), real.conn());
    let lines = |c: &mut Conn| -> Vec<String> {
        c.cmd_str(&["INFO", "replication"])
            .lines()
            .filter(|l| !l.starts_with("master_replid:"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(lines(&mut d), lines(&mut r));
    let ro = "-READONLY You can't write against a read only replica.\r\n";
    assert_eq!(d.cmd_str(&["SET", "k", "v"]), ro);
    assert_eq!(r.cmd_str(&["SET", "k", "v"]), ro);
    assert_eq!(
        d.cmd_str(&["CONFIG", "GET", "replicaof"]),
        r.cmd_str(&["CONFIG", "GET", "replicaof"])
    );
}

/// Reads one command (a RESP array of bulk strings) the replica sent; None at EOF.
fn read_command(r: &mut impl std::io::BufRead) -> std::io::Result<Option<Vec<String>>> {
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not a command");
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let n: usize = line
        .trim()
        .strip_prefix('*')
        .and_then(|n| n.parse().ok())
        .ok_or_else(bad)?;
    let mut argv = Vec::with_capacity(n);
    for _ in 0..n {
        line.clear();
        r.read_line(&mut line)?;
        let len: usize = line
            .trim()
            .strip_prefix('$')
            .and_then(|n| n.parse().ok())
            .ok_or_else(bad)?;
        let mut arg = vec![0u8; len + 2];
        r.read_exact(&mut arg)?;
        arg.truncate(len);
        argv.push(String::from_utf8_lossy(&arg).into_owned());
    }
    Ok(Some(argv))
}

/// The process's resident set in kB (/proc/PID/status VmRSS).
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in {status}"))
}

/// A master that lies: a 1 MB reply line, a 1 MB stream line without CR LF, an RDB length of
/// 2^63 bytes, an offset of 2^64-1. Each is a protocol error that drops the link (logged as
/// Redis logs its master's), the replica keeps serving its clients in bounded memory, and it
/// follows the master once it behaves.
#[test]
fn a_hostile_master_drops_the_link_not_the_replica() {
    use std::io::{BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mport = listener.local_addr().unwrap().port();
    let replid = "0123456789abcdef0123456789abcdef01234567";
    // An empty RDB (checksum 0: not checked).
    let mut rdb = b"REDIS0009\xff".to_vec();
    rdb.extend_from_slice(&[0; 8]);
    let full = |offset: &str| {
        let mut out = format!("+FULLRESYNC {replid} {offset}\r\n${}\r\n", rdb.len()).into_bytes();
        out.extend_from_slice(&rdb);
        out
    };
    let huge = vec![b'a'; 1 << 20];
    let mut fullresync_then_line = full("0");
    fullresync_then_line.extend_from_slice(&huge);
    // Each connection's answer to PING and to PSYNC, in order; the last one behaves.
    let scenarios: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (huge.clone(), Vec::new()),
        (b"+PONG\r\n".to_vec(), fullresync_then_line),
        (
            b"+PONG\r\n".to_vec(),
            format!("+FULLRESYNC {replid} 0\r\n$9223372036854775808\r\n").into_bytes(),
        ),
        (
            b"+PONG\r\n".to_vec(),
            format!("+FULLRESYNC {replid} 18446744073709551615\r\n").into_bytes(),
        ),
        (b"+PONG\r\n".to_vec(), full("0")),
    ];
    let last = scenarios.len() - 1;
    // (connection, whether the replica ended it).
    let (tx, rx) = std::sync::mpsc::channel::<(usize, bool)>();
    std::thread::spawn(move || {
        for (i, (pong, psync)) in scenarios.into_iter().enumerate() {
            let Ok((s, _)) = listener.accept() else {
                return;
            };
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            let ended = loop {
                let argv = match read_command(&mut r) {
                    Ok(Some(argv)) => argv,
                    Ok(None) => break true,
                    // Closed with unread bytes: a reset.
                    Err(e) => {
                        break !matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        )
                    }
                };
                let reply: &[u8] = match argv[0].to_ascii_uppercase().as_str() {
                    "PING" => &pong,
                    "PSYNC" => &psync,
                    _ => b"+OK\r\n",
                };
                // The replica may drop the link before all of it is written.
                let _ = w.write_all(reply);
                if i == last && argv[0].eq_ignore_ascii_case("psync") {
                    // Holds the link open (the replica's ACKs are read and dropped).
                    let _ = tx.send((i, true));
                    let mut sink = [0u8; 4096];
                    while r.read(&mut sink).is_ok_and(|n| n > 0) {}
                    return;
                }
            };
            let _ = tx.send((i, ended));
        }
    });

    let d = deadbolt(&[]);
    let mut c = d.conn();
    assert_eq!(
        c.cmd_str(&["REPLICAOF", "127.0.0.1", &mport.to_string()]),
        "+OK\r\n"
    );
    let rss_limit_kb = 256 * 1024;
    for i in 0..=last {
        let done = rx.recv_timeout(Duration::from_secs(30));
        assert_eq!(
            done,
            Ok((i, true)),
            "master connection {i} was not ended by the replica"
        );
        assert_eq!(c.cmd_str(&["PING"]), "+PONG\r\n");
        let mut other = d.conn();
        assert_eq!(other.cmd_str(&["PING"]), "+PONG\r\n");
        let rss = rss_kb(d.pid());
        assert!(
            rss < rss_limit_kb,
            "RSS {rss} kB after master connection {i}"
        );
    }
    let log = d.log.lock().unwrap().clone();
    let errors = |what: &str| {
        let needle = format!("Protocol error ({what}) from client: addr=127.0.0.1:{mport} flags=M");
        log.iter().filter(|l| l.contains(&needle)).count()
    };
    assert_eq!(errors("too big inline request"), 2, "{log:#?}");
    assert_eq!(errors("invalid bulk length"), 1, "{log:#?}");
    assert!(
        log.iter()
            .any(|l| l.contains("Master replied with wrong +FULLRESYNC syntax")),
        "{log:#?}"
    );
    // The master that behaves is followed.
    wait_until(10, "the link to come up", || {
        info_field(&mut c, "replication", "master_link_status") == "up"
    });
    assert_eq!(c.cmd_str(&["DBSIZE"]), ":0\r\n");
}
