//! The core daemon over TCP: exact reply bytes for lock-shaped flows, protocol handling,
//! limits, expiry, config and process behaviour.

use crate::common;

use common::{resp_cmd, Conn};
use std::io::Write;
use std::time::{Duration, Instant};

#[test]
fn lock_acquire_release_flow() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd(&["SET", "lock:a", "owner-1", "NX", "PX", "30000"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd(&["SET", "lock:a", "owner-2", "NX", "PX", "30000"]),
        b"$-1\r\n"
    );
    assert_eq!(c.cmd(&["GET", "lock:a"]), b"$7\r\nowner-1\r\n");
    let pttl = c.cmd_str(&["PTTL", "lock:a"]);
    let ms: i64 = pttl.trim_start_matches(':').trim().parse().unwrap();
    assert!((29_000..=30_000).contains(&ms), "{pttl}");
    assert_eq!(c.cmd(&["DEL", "lock:a"]), b":1\r\n");
    assert_eq!(c.cmd(&["TTL", "lock:a"]), b":-2\r\n");
    assert_eq!(c.cmd(&["SET", "lock:a", "x"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["TTL", "lock:a"]), b":-1\r\n");
}

#[test]
fn expiry_edges() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    // PX 1: gone for every command once the millisecond has passed.
    assert_eq!(c.cmd(&["SET", "k", "v", "PX", "1"]), b"+OK\r\n");
    std::thread::sleep(Duration::from_millis(3));
    assert_eq!(c.cmd(&["GET", "k"]), b"$-1\r\n");
    assert_eq!(c.cmd(&["EXISTS", "k"]), b":0\r\n");
    // Negative EXPIRE deletes.
    c.cmd(&["SET", "k", "v"]);
    assert_eq!(c.cmd(&["EXPIRE", "k", "-1"]), b":1\r\n");
    assert_eq!(c.cmd(&["EXISTS", "k"]), b":0\r\n");
    // KEEPTTL keeps, plain SET and GETSET clear.
    c.cmd(&["SET", "k", "v", "EX", "100"]);
    c.cmd(&["SET", "k", "w", "KEEPTTL"]);
    assert_eq!(c.cmd(&["TTL", "k"]), b":100\r\n");
    c.cmd(&["GETSET", "k", "x"]);
    assert_eq!(c.cmd(&["TTL", "k"]), b":-1\r\n");
    assert_eq!(
        c.cmd(&["SET", "k", "v", "EX", "0"]),
        b"-ERR invalid expire time in 'set' command\r\n"
    );
    assert_eq!(
        c.cmd(&["SETEX", "k", "-3", "v"]),
        b"-ERR invalid expire time in 'setex' command\r\n"
    );
    assert_eq!(
        c.cmd(&["INCR", "k"]),
        b"-ERR value is not an integer or out of range\r\n"
    );
    c.cmd(&["SET", "n", "9223372036854775807"]);
    assert_eq!(
        c.cmd(&["INCR", "n"]),
        b"-ERR increment or decrement would overflow\r\n"
    );
    c.cmd(&["HSET", "h", "f", "v"]);
    assert_eq!(
        c.cmd(&["GET", "h"]),
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        c.cmd(&["GET"]),
        b"-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(
        c.cmd(&["SET", "k", "v", "NX", "XX"]),
        b"-ERR syntax error\r\n"
    );
}

#[test]
fn active_expiry_reclaims_untouched_keys() {
    let s = common::deadbolt(&["--hz", "100"]);
    let mut c = s.conn();
    let mut pipeline = Vec::new();
    for i in 0..5000 {
        pipeline.extend(resp_cmd(&[
            "SET",
            &format!("lock:{i}"),
            "owner",
            "PX",
            "20",
        ]));
    }
    c.send_raw(&pipeline);
    for _ in 0..5000 {
        assert_eq!(c.read_reply(), b"+OK\r\n");
    }
    // Nobody touches the keys: the background cycle must remove them. INFO's keyspace line
    // (which does not look keys up) shows when they are gone.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let info = c.cmd_str(&["INFO", "keyspace"]);
        if !info.contains("db0:") {
            break;
        }
        assert!(Instant::now() < deadline, "keys not reclaimed: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = c.cmd_str(&["INFO", "stats"]);
    assert!(stats.contains("expired_keys:5000\r\n"), "{stats}");
}

#[test]
fn pipelining_inline_and_binary_keys() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    // Inline commands as typed into nc, mixed with multibulk, in one write.
    let mut req = b"PING\r\nSET \"a b\" 'c d'\r\n".to_vec();
    req.extend(resp_cmd(&["GET", "a b"]));
    req.extend(b"\r\n");
    req.extend(resp_cmd(&[&b"SET"[..], b"k\0\r\n", b"\xff\x00"]));
    req.extend(resp_cmd(&[&b"GET"[..], b"k\0\r\n"]));
    c.send_raw(&req);
    assert_eq!(c.read_reply(), b"+PONG\r\n");
    assert_eq!(c.read_reply(), b"+OK\r\n");
    assert_eq!(c.read_reply(), b"$3\r\nc d\r\n");
    assert_eq!(c.read_reply(), b"+OK\r\n");
    assert_eq!(c.read_reply(), b"$2\r\n\xff\x00\r\n");
}

#[test]
fn large_pipeline_answered_in_order() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    let mut req = Vec::new();
    for i in 0..20_000 {
        req.extend(resp_cmd(&["INCR", "counter"]));
        if i % 1000 == 0 {
            req.extend(resp_cmd(&["ECHO", &i.to_string()]));
        }
    }
    let writer = {
        let mut w = c.stream.try_clone().unwrap();
        std::thread::spawn(move || w.write_all(&req).unwrap())
    };
    for i in 0..20_000 {
        assert_eq!(c.read_reply(), format!(":{}\r\n", i + 1).into_bytes());
        if i % 1000 == 0 {
            let s = i.to_string();
            assert_eq!(
                c.read_reply(),
                format!("${}\r\n{s}\r\n", s.len()).into_bytes()
            );
        }
    }
    writer.join().unwrap();
}

#[test]
fn protocol_errors_close_only_the_offender() {
    let s = common::deadbolt(&[]);
    let mut good = s.conn();
    for (input, expected) in [
        (
            &b"*abc\r\n"[..],
            &b"-ERR Protocol error: invalid multibulk length\r\n"[..],
        ),
        (
            b"*1\r\n$-5\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\nGET\r\n",
            b"-ERR Protocol error: expected '$', got 'G'\r\n",
        ),
        (
            b"SET a \"b\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
        (
            b"*2\r\n$4\r\nPING\r\n$99999999999\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
    ] {
        let mut bad = s.conn();
        // Commands before the bad bytes are still answered.
        let mut req = resp_cmd(&["PING"]);
        req.extend_from_slice(input);
        bad.send_raw(&req);
        let mut expect = b"+PONG\r\n".to_vec();
        expect.extend_from_slice(expected);
        assert_eq!(
            bad.read_to_close(),
            expect,
            "input {:?}",
            String::from_utf8_lossy(input)
        );
        assert_eq!(good.cmd(&["PING"]), b"+PONG\r\n");
    }
    // Too big inline request.
    let mut bad = s.conn();
    bad.send_raw(&vec![b'a'; 70 * 1024]);
    assert_eq!(
        bad.read_to_close(),
        b"-ERR Protocol error: too big inline request\r\n"
    );
    assert_eq!(good.cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn proto_max_bulk_len_and_query_buffer_limit() {
    let s = common::deadbolt(&[
        "--proto-max-bulk-len",
        "1mb",
        "--client-query-buffer-limit",
        "1mb",
    ]);
    let mut c = s.conn();
    c.send_raw(b"*2\r\n$4\r\nECHO\r\n$1048577\r\n");
    assert_eq!(
        c.read_to_close(),
        b"-ERR Protocol error: invalid bulk length\r\n"
    );
    // A bulk within proto-max-bulk-len but a query buffer over the limit: closed, nothing
    // buffered without bound, other clients fine.
    let mut big = s.conn();
    let mut req = b"*2\r\n$4\r\nECHO\r\n$1048576\r\n".to_vec();
    req.extend(vec![b'x'; 1024 * 1024]);
    let _ = big.stream.write_all(&req);
    let _ = big.stream.write_all(&vec![b'y'; 512 * 1024]);
    assert!(big.is_closed(Duration::from_secs(5)));
    let mut other = s.conn();
    assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n");
    // An exactly-at-limit bulk works.
    let mut ok = s.conn();
    let payload = vec![b'z'; 1000 * 1000];
    let reply = ok.cmd(&[&b"ECHO"[..], &payload]);
    assert_eq!(reply.len(), payload.len() + "$1000000\r\n\r\n".len());
}

#[test]
fn maxclients_refuses_with_redis_text() {
    let s = common::deadbolt(&["--maxclients", "2"]);
    let mut a = s.conn();
    let mut b = s.conn();
    assert_eq!(a.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(b.cmd(&["PING"]), b"+PONG\r\n");
    let mut c = Conn::connect(s.port);
    assert_eq!(c.read_to_close(), b"-ERR max number of clients reached\r\n");
    drop(a);
    // The slot frees when the executor sees the disconnect.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut d = Conn::connect(s.port);
        d.send(&["PING"]);
        if d.try_read_reply(Duration::from_secs(1)).as_deref() == Some(b"+PONG\r\n") {
            break;
        }
        assert!(Instant::now() < deadline, "slot never freed");
    }
    let info = b.cmd_str(&["INFO", "stats"]);
    assert!(info.contains("rejected_connections:"), "{info}");
}

#[test]
fn idle_timeout_closes_clients() {
    let s = common::deadbolt(&["--timeout", "1"]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    let started = Instant::now();
    assert!(c.is_closed(Duration::from_secs(5)));
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[test]
fn resp3_hello_and_null_shapes() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    let hello = c.cmd_str(&["HELLO", "3"]);
    assert!(hello.starts_with("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:"), "{hello}");
    assert!(hello.ends_with("$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"), "{hello}");
    assert_eq!(c.cmd(&["GET", "missing"]), b"_\r\n");
    c.cmd(&["HSET", "h", "a", "1"]);
    assert_eq!(c.cmd(&["HGETALL", "h"]), b"%1\r\n$1\r\na\r\n$1\r\n1\r\n");
    assert_eq!(
        c.cmd(&["HELLO", "4"]),
        b"-NOPROTO unsupported protocol version\r\n"
    );
    assert!(
        c.cmd_str(&["INFO", "server"]).starts_with("="),
        "INFO is verbatim text in RESP3"
    );
    assert!(c.cmd_str(&["HELLO", "2"]).starts_with("*14\r\n"));
    assert_eq!(c.cmd(&["GET", "missing"]), b"$-1\r\n");
}

#[test]
fn requirepass_auth_and_hello_auth() {
    let s = common::deadbolt(&["--requirepass", "s3cret"]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd(&["GET", "k"]),
        b"-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        c.cmd(&["AUTH", "wrong"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(c.cmd(&["AUTH", "s3cret"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["GET", "k"]), b"$-1\r\n");
    let mut d = s.conn();
    assert!(d
        .cmd_str(&["HELLO", "3"])
        .starts_with("-NOAUTH HELLO must be called with the client already authenticated"));
    assert!(d
        .cmd_str(&["HELLO", "3", "AUTH", "default", "s3cret"])
        .starts_with("%7\r\n"));
    assert_eq!(d.cmd(&["PING"]), b"+PONG\r\n");
    // Passwords never reach the log.
    assert!(!s.log.lock().unwrap().iter().any(|l| l.contains("s3cret")));
}

#[test]
fn client_commands_across_connections() {
    let s = common::deadbolt(&[]);
    let mut a = s.conn();
    let mut b = s.conn();
    assert_eq!(a.cmd(&["CLIENT", "SETNAME", "alpha"]), b"+OK\r\n");
    assert_eq!(
        a.cmd(&["CLIENT", "SETINFO", "LIB-NAME", "redis-py"]),
        b"+OK\r\n"
    );
    let id_b = String::from_utf8(b.cmd(&["CLIENT", "ID"])).unwrap();
    let id_b = id_b.trim_start_matches(':').trim().to_string();
    let list = a.cmd_str(&["CLIENT", "LIST"]);
    assert!(list.contains(" name=alpha "), "{list}");
    assert!(list.contains(&format!("id={id_b} ")), "{list}");
    assert!(list.contains("cmd=client|list"), "{list}");
    assert_eq!(a.cmd(&["CLIENT", "KILL", "ID", &id_b]), b":1\r\n");
    assert!(b.is_closed(Duration::from_secs(5)));
    assert_eq!(a.cmd(&["CLIENT", "KILL", "ID", &id_b]), b":0\r\n");
    let info = a.cmd_str(&["CLIENT", "INFO"]);
    assert!(
        info.contains("name=alpha") && info.contains("cmd=client|info"),
        "{info}"
    );
}

#[test]
fn info_has_the_fields_exporters_read() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    c.cmd(&["SET", "a", "1", "EX", "100"]);
    c.cmd(&["GET", "a"]);
    c.cmd(&["GET", "missing"]);
    c.cmd(&["NOSUCH"]);
    c.cmd(&["GET"]);
    let info = c.cmd_str(&["INFO", "all"]);
    for field in [
        "redis_version:7.0.15\r\n",
        "connected_clients:1\r\n",
        "used_memory:",
        "connected_slaves:0\r\n",
        "keyspace_hits:1\r\n",
        "keyspace_misses:1\r\n",
        "instantaneous_ops_per_sec:",
        "cmdstat_get:calls=2,",
        "cmdstat_get:calls=2,usec=",
        ",rejected_calls=1,failed_calls=0\r\n",
        "errorstat_ERR:count=2\r\n",
        "db0:keys=1,expires=1,avg_ttl=",
        "used_cpu_sys:",
        "loading:0\r\n",
    ] {
        assert!(info.contains(field), "missing {field:?} in\n{info}");
    }
    assert!(
        !c.cmd_str(&["INFO"]).contains("cmdstat_"),
        "commandstats only with INFO all/commandstats"
    );
}

#[test]
fn config_set_get_and_runtime_effects() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxclients", "abc"]), b"-ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't be parsed into an integer\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "maxclients"]),
        b"*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n"
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "databases", "2"]), b"-ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "lua-time-limit", "100"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "busy-reply-threshold"]),
        b"*2\r\n$20\r\nbusy-reply-threshold\r\n$3\r\n100\r\n"
    );
    // timeout applies to existing connections at once.
    assert_eq!(c.cmd(&["CONFIG", "SET", "timeout", "1"]), b"+OK\r\n");
    let mut idle = s.conn();
    assert_eq!(idle.cmd(&["PING"]), b"+PONG\r\n");
    assert!(idle.is_closed(Duration::from_secs(5)));
}

#[test]
fn config_file_then_command_line_last_wins() {
    let dir = std::env::temp_dir().join(format!("deadbolt-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("test.conf");
    std::fs::write(
        &file,
        "# comment\nmaxclients 7\ntimeout 5\ntimeout 9\ndatabases 4\n",
    )
    .unwrap();
    let s = common::deadbolt_with_file(&file, &["--timeout", "11"]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "maxclients"]),
        b"*2\r\n$10\r\nmaxclients\r\n$1\r\n7\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "timeout"]),
        b"*2\r\n$7\r\ntimeout\r\n$2\r\n11\r\n"
    );
    assert_eq!(
        c.cmd(&["SELECT", "4"]),
        b"-ERR DB index is out of range\r\n"
    );
    // CONFIG REWRITE writes the running values back.
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxclients", "8"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("# comment\nmaxclients 8\n"), "{text}");
    assert_eq!(text.matches("timeout").count(), 1, "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn test_config_flag_and_bad_config() {
    let ok = std::process::Command::new(common::deadbolt_bin())
        .args(["--test-config", "--port", "7000"])
        .output()
        .unwrap();
    assert!(ok.status.success());
    let bad = std::process::Command::new(common::deadbolt_bin())
        .args(["--test-config", "--maxclients", "lots"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("FATAL CONFIG FILE ERROR")
            && err.contains("maxclients lots")
            && err.contains("integer"),
        "{err}"
    );
    let unknown = std::process::Command::new(common::deadbolt_bin())
        .args(["--test-config", "--nosuch", "1"])
        .output()
        .unwrap();
    assert!(!unknown.status.success());
    let version = std::process::Command::new(common::deadbolt_bin())
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("deadbolt "));
}

#[test]
fn ping_probe_and_sigterm_shutdown() {
    let mut s = common::deadbolt(&[]);
    let probe = std::process::Command::new(common::deadbolt_bin())
        .args(["--ping", "--port", &s.port.to_string()])
        .status()
        .unwrap();
    assert!(probe.success());
    s.wait_log("Ready to accept connections", Duration::from_secs(5));
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(s.pid() as i32, libc::SIGTERM) };
    let status = s
        .wait_exit(Duration::from_secs(10))
        .expect("exits on SIGTERM");
    assert!(status.success());
    s.wait_log(
        "Received SIGTERM scheduling shutdown...",
        Duration::from_secs(1),
    );
    s.wait_log("ready to exit, bye bye...", Duration::from_secs(1));
    let dead_port = common::free_port();
    let probe = std::process::Command::new(common::deadbolt_bin())
        .args(["--ping", "--port", &dead_port.to_string()])
        .status()
        .unwrap();
    assert!(!probe.success());
}

#[test]
fn shutdown_command_stops_the_server() {
    let mut s = common::deadbolt(&[]);
    let mut c = s.conn();
    c.send(&["SHUTDOWN", "NOSAVE"]);
    assert_eq!(c.read_to_close(), b"");
    assert!(s
        .wait_exit(Duration::from_secs(10))
        .expect("exits")
        .success());
}

#[test]
fn debug_sleep_when_enabled() {
    let s = common::deadbolt(&["--enable-debug-command", "local"]);
    let mut c = s.conn();
    let t = Instant::now();
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.2"]), b"+OK\r\n");
    assert!(t.elapsed() >= Duration::from_millis(200));
}

/// A client that sends a pipeline and half-closes gets every reply, then the close: on both
/// servers.
#[test]
fn half_closed_client_gets_every_reply() {
    for (name, s) in common::deadbolt_and_redis(&[]) {
        let mut c = s.conn();
        let mut req = Vec::new();
        for args in [
            &["SET", "k", "1"][..],
            &["GET", "k"],
            &["INCR", "k"],
            &["PING"],
        ] {
            req.extend(resp_cmd(args));
        }
        // A partial request at the end can never complete: it is dropped with the connection.
        req.extend_from_slice(b"*2\r\n$3\r\nGET");
        c.send_raw(&req);
        c.stream.shutdown(std::net::Shutdown::Write).unwrap();
        let replies: Vec<Vec<u8>> = (0..4).map(|_| c.read_reply()).collect();
        assert_eq!(
            replies.concat(),
            b"+OK\r\n$1\r\n1\r\n:2\r\n+PONG\r\n",
            "{name}"
        );
        // The data and the FIN can arrive as one epoll edge: the close must not wait for more.
        assert!(c.is_closed(Duration::from_secs(5)), "{name}: not closed");
    }
}

/// A pipeline that ends in a blocking command (or MONITOR) and a half-close: the replies before
/// it still arrive, as in Redis, though the client is released at EOF. The data and the FIN
/// usually arrive as one read, so the release comes in the same pass as the replies.
#[test]
fn half_closed_client_blocked_at_the_end_gets_the_replies_before() {
    for (name, s) in common::deadbolt_and_redis(&[]) {
        for last in [&["BLPOP", "nolist", "0"][..], &["MONITOR"]] {
            for _ in 0..20 {
                let mut c = s.conn();
                let mut req = Vec::new();
                req.extend(resp_cmd(&["SET", "k", "1"]));
                req.extend(resp_cmd(&["INCR", "k"]));
                req.extend(resp_cmd(last));
                c.send_raw(&req);
                c.stream.shutdown(std::net::Shutdown::Write).unwrap();
                assert_eq!(c.read_reply(), b"+OK\r\n", "{name} {last:?}");
                assert_eq!(c.read_reply(), b":2\r\n", "{name} {last:?}");
            }
        }
    }
}

/// A client blocked in BLPOP that goes away is released: the next push is not handed to it.
#[test]
fn blocked_client_at_eof_is_released() {
    for (name, s) in common::deadbolt_and_redis(&[]) {
        let mut other = s.conn();
        let mut c = s.conn();
        c.send(&["BLPOP", "q", "0"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !other
            .cmd_str(&["INFO", "clients"])
            .contains("blocked_clients:1")
        {
            assert!(Instant::now() < deadline, "{name}: never blocked");
        }
        c.stream.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(c.is_closed(Duration::from_secs(10)), "{name}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !other
            .cmd_str(&["INFO", "clients"])
            .contains("blocked_clients:0")
        {
            assert!(Instant::now() < deadline, "{name}: still blocked");
        }
        assert_eq!(other.cmd(&["RPUSH", "q", "x"]), b":1\r\n", "{name}");
        assert_eq!(other.cmd(&["LLEN", "q"]), b":1\r\n", "{name}");
    }
}

/// INFO's connection counters after a maxclients refusal are Redis's: the refused connection is
/// rejected, not received.
#[test]
fn maxclients_refusal_counts_as_in_redis() {
    fn counters(c: &mut Conn) -> Vec<i64> {
        let info = c.cmd_str(&["INFO", "stats"]);
        ["total_connections_received:", "rejected_connections:"]
            .iter()
            .map(|field| {
                let line = info.split("\r\n").find(|l| l.starts_with(field));
                line.and_then(|l| l[field.len()..].parse().ok())
                    .unwrap_or_else(|| panic!("{field} missing"))
            })
            .collect()
    }
    let mut deltas = Vec::new();
    for (name, s) in common::deadbolt_and_redis(&[]) {
        let mut a = s.conn();
        assert_eq!(
            a.cmd(&["CONFIG", "SET", "maxclients", "1"]),
            b"+OK\r\n",
            "{name}"
        );
        let before = counters(&mut a);
        let mut refused = Conn::connect(s.port);
        assert_eq!(
            refused.read_to_close(),
            b"-ERR max number of clients reached\r\n",
            "{name}"
        );
        let after = counters(&mut a);
        deltas.push((after[0] - before[0], after[1] - before[1]));
    }
    assert_eq!(deltas[1], (0, 1), "redis-server");
    assert_eq!(deltas[0], deltas[1], "deadbolt vs redis-server");
}

#[test]
fn net_output_bytes_count_pushes_as_in_redis() {
    // INFO's own reply is counted once written, so each delta holds the first INFO's length.
    fn out_bytes(c: &mut Conn) -> (i64, i64) {
        let info = c.cmd_str(&["INFO", "stats"]);
        let field = "total_net_output_bytes:";
        let line = info.split("\r\n").find(|l| l.starts_with(field));
        let v = line
            .and_then(|l| l[field.len()..].parse().ok())
            .unwrap_or_else(|| panic!("{field} missing"));
        (v, info.len() as i64)
    }
    let mut deltas = Vec::new();
    for (name, s) in common::deadbolt_and_redis(&[]) {
        let mut info = s.conn();
        let mut sub = s.conn();
        let mut publisher = s.conn();
        assert_eq!(
            sub.cmd(&["SUBSCRIBE", "ch"]),
            b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
            "{name}"
        );
        let (before, info_len) = out_bytes(&mut info);
        for i in 0..10 {
            let msg = format!("message-{i}");
            assert_eq!(publisher.cmd(&["PUBLISH", "ch", &msg]), b":1\r\n", "{name}");
            assert_eq!(
                sub.read_reply(),
                format!("*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$9\r\n{msg}\r\n").as_bytes(),
                "{name}"
            );
        }
        let (after, _) = out_bytes(&mut info);
        deltas.push(after - before - info_len);
    }
    // 10 PUBLISH replies of 4 bytes and 10 messages of 40 bytes.
    assert_eq!(deltas[1], 10 * 4 + 10 * 40, "redis-server");
    assert_eq!(deltas[0], deltas[1], "deadbolt vs redis-server");
}
