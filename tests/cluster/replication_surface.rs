//! The replication surface of a lone server (no cluster) against a real redis-server 7.0.15:
//! ROLE, WAIT (argument errors, MULTI, scripts, blocking until its timeout), WAITAOF and
//! SENTINEL as unknown commands, INFO replication and HELLO's role. Cluster mode's renderings
//! are unit tests over fabricated views (src/cmd/replication/tests.rs).

use crate::common;

use common::{deadbolt_and_redis, transcripts_on_both, wait_blocked, Conn};
use std::time::{Duration, Instant};

fn show(t: &[Vec<u8>]) -> Vec<String> {
    t.iter()
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .collect()
}

#[test]
fn replies_match_redis_byte_for_byte() {
    let script: &[&[&str]] = &[
        &["ROLE"],
        &["SET", "a", "b"],
        // A lone master keeps offset 0 whatever it writes: nothing is replicated.
        &["ROLE"],
        &["WAIT", "0", "0"],
        &["WAIT", "-1", "0"],
        &["WAIT", "0", "100"],
        &["WAIT", "x", "0"],
        &["WAIT", "99999999999999999999", "0"],
        &["WAIT", "1", "x"],
        &["WAIT", "1", "1.5"],
        &["WAIT", "1", "-1"],
        &["WAIT", "x", "-1"],
        &["WAIT", "1"],
        &["WAIT", "1", "2", "3"],
        // With no replica WAIT 1 waits out its timeout, then counts none.
        &["WAIT", "1", "10"],
        &["WAITAOF", "1", "1", "1"],
        &["SENTINEL", "masters"],
        &["SENTINEL"],
        &["sentinel", "get-master-addr-by-name", "mymaster"],
        &["SENTINEL", "myid"],
        &["COMMAND", "INFO", "sentinel", "wait", "role"],
        &["COMMAND", "DOCS", "sentinel"],
        // Inside MULTI WAIT never blocks.
        &["MULTI"],
        &["WAIT", "1", "0"],
        &["EXEC"],
        &["EVAL", "return redis.call('wait','1','0')", "0"],
        &["EVAL", "return redis.call('sentinel','masters')", "0"],
        &["EVAL", "return redis.call('role')", "0"],
    ];
    let [ours, theirs] = transcripts_on_both(script);
    assert_eq!(show(&ours), show(&theirs), "deadbolt vs redis-server");
    assert_eq!(ours[0], b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n");
}

/// SENTINEL, which exists only in cluster mode, is in no listing of a lone server's commands.
#[test]
fn command_listings_leave_sentinel_out() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    let list = c.cmd_str(&["COMMAND", "LIST"]);
    assert!(!list.contains("sentinel"), "{list}");
    let count = c.cmd_str(&["COMMAND", "COUNT"]);
    // COMMAND COUNT counts commands; COMMAND LIST also names their subcommands.
    let n = list
        .split("\r\n")
        .filter(|l| !l.starts_with('$') && !l.starts_with('*') && !l.is_empty() && !l.contains('|'))
        .count();
    assert_eq!(count, format!(":{n}\r\n"));
    let all = c.cmd_str(&["COMMAND"]);
    assert!(!all.contains("$8\r\nsentinel\r\n"));
    assert!(
        all.starts_with(&format!("*{n}\r\n")),
        "COMMAND lists COMMAND COUNT entries"
    );
}

/// Replaces the value of `field:` lines (random ids) with their length.
fn mask(info: &str, fields: &[&str]) -> String {
    info.split("\r\n")
        .map(|l| match l.split_once(':') {
            Some((k, v)) if fields.contains(&k) => {
                assert!(
                    v.len() == 40 && v.bytes().all(|b| b.is_ascii_hexdigit()),
                    "{k} is not 40 hex digits: {v}"
                );
                format!("{k}:<40 hex>")
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\r\n")
}

#[test]
fn info_replication_and_hello_role_match_redis() {
    let mut got = Vec::new();
    for (name, server) in deadbolt_and_redis(&[]) {
        let mut c = server.conn();
        c.cmd(&["SET", "k", "v"]);
        let repl = c.cmd_str(&["INFO", "replication"]);
        let server_info = c.cmd_str(&["INFO", "server"]);
        let run_id = server_info
            .split("\r\n")
            .find(|l| l.starts_with("run_id:"))
            .map(|l| mask(l, &["run_id"]));
        // HELLO 3's map without the connection id (not the same on both).
        let hello = c.cmd_str(&["HELLO", "3"]);
        let hello = hello
            .split_once("$2\r\nid\r\n")
            .map(|(a, b)| format!("{a}{}", b.split_once("\r\n").unwrap().1))
            .unwrap_or_else(|| panic!("{name}: {hello}"));
        let repl3 = c.cmd_str(&["INFO", "replication"]);
        got.push((
            mask(&repl, &["master_replid"]),
            run_id,
            hello,
            mask(&repl3, &["master_replid"]),
        ));
    }
    assert_eq!(got[0], got[1], "deadbolt vs redis-server");
    assert!(
        got[0].2.contains("$4\r\nrole\r\n$6\r\nmaster\r\n"),
        "{}",
        got[0].2
    );
}

/// Time WAIT took to answer, and its reply.
fn timed(c: &mut Conn, args: &[&str]) -> (Duration, Vec<u8>) {
    let t = Instant::now();
    let r = c.cmd(args);
    (t.elapsed(), r)
}

#[test]
fn wait_for_a_replica_blocks_until_its_timeout_like_redis() {
    for (name, server) in deadbolt_and_redis(&[]) {
        let mut c = server.conn();
        let (took, r) = timed(&mut c, &["WAIT", "1", "300"]);
        assert_eq!(r, b":0\r\n", "{name}");
        // Redis checks timeouts at hz 10 (up to ~100 ms late).
        assert!(
            took >= Duration::from_millis(290) && took < Duration::from_secs(2),
            "{name}: WAIT 1 300 took {took:?}"
        );
        let (took, r) = timed(&mut c, &["WAIT", "0", "5000"]);
        assert_eq!(r, b":0\r\n", "{name}");
        assert!(
            took < Duration::from_secs(1),
            "{name}: WAIT 0 took {took:?}"
        );

        // A parked WAIT is a blocked client (INFO, CLIENT LIST flag b); the rest of its
        // pipeline waits behind it.
        c.send_raw(b"WAIT 1 400\r\nPING\r\n");
        let mut other = server.conn();
        wait_blocked(&mut other, 1);
        let list = other.cmd_str(&["CLIENT", "LIST"]);
        assert!(
            list.contains(" flags=b ") && list.contains(" cmd=wait "),
            "{name}: {list}"
        );
        assert!(
            c.try_read_reply(Duration::from_millis(100)).is_none(),
            "{name}"
        );
        assert_eq!(c.read_reply(), b":0\r\n", "{name}");
        assert_eq!(c.read_reply(), b"+PONG\r\n", "{name}");
        wait_blocked(&mut other, 0);

        // Timeout 0 waits for ever: only the client leaving ends it.
        let mut forever = server.conn();
        forever.send_raw(b"WAIT 5 0\r\n");
        wait_blocked(&mut other, 1);
        let info = other.cmd_str(&["INFO", "clients"]);
        assert!(
            info.contains("clients_in_timeout_table:0\r\n"),
            "{name}: {info}"
        );
        assert!(
            forever.try_read_reply(Duration::from_millis(300)).is_none(),
            "{name}"
        );
        drop(forever);
        wait_blocked(&mut other, 0);
        assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n", "{name}");
        // The largest timeout is a deadline too far to reach, not an overflow.
        let mut far = server.conn();
        far.send_raw(b"WAIT 1 9223372036854775807\r\n");
        wait_blocked(&mut other, 1);
        assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n", "{name}");
        assert!(
            far.try_read_reply(Duration::from_millis(200)).is_none(),
            "{name}"
        );
        drop(far);
        wait_blocked(&mut other, 0);
    }
}
