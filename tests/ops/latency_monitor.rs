//! The latency monitor (`latency-monitor-threshold`: LATENCY LATEST, HISTORY, GRAPH, DOCTOR,
//! RESET), LATENCY HISTOGRAM's choice of commands, and `min-replicas-to-write`, each compared
//! with a real redis-server.

use crate::common;
use common::*;
use std::time::{Duration, Instant};

/// RESP2 reply flattened to its lines without the type prefixes' lengths.
fn items(reply: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(reply)
        .split("\r\n")
        .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
        .map(|l| l.trim_start_matches(':').to_string())
        .collect()
}

#[test]
fn a_slow_command_is_a_latency_event_as_in_redis() {
    let mut shapes = Vec::new();
    for (name, s) in deadbolt_and_redis(&["--enable-debug-command", "yes"]) {
        let mut c = s.conn();
        // Off by default: a slow command records nothing.
        c.cmd(&["DEBUG", "SLEEP", "0.15"]);
        assert_eq!(c.cmd_str(&["LATENCY", "LATEST"]), "*0\r\n", "{name}");
        assert_eq!(
            c.cmd_str(&["CONFIG", "SET", "latency-monitor-threshold", "100"]),
            "+OK\r\n"
        );
        let doctor = c.cmd_str(&["LATENCY", "DOCTOR"]);
        assert!(!doctor.contains("latency spikes"), "{name}: {doctor}");
        c.cmd(&["DEBUG", "SLEEP", "0.25"]);
        // Under the threshold: no event.
        c.cmd(&["PING"]);
        let latest = items(&c.cmd(&["LATENCY", "LATEST"]));
        assert_eq!(latest.len(), 4, "{name}: {latest:?}");
        assert_eq!(latest[0], "command", "{name}");
        let ms: u64 = latest[2].parse().unwrap();
        assert!((250..1000).contains(&ms), "{name}: {latest:?}");
        assert_eq!(latest[3], latest[2], "{name}: max");
        let history = items(&c.cmd(&["LATENCY", "HISTORY", "command"]));
        assert_eq!(history, latest[1..3].to_vec(), "{name}");
        let graph = c.cmd_str(&["LATENCY", "GRAPH", "command"]);
        assert!(
            graph.contains(&format!(
                "command - high {ms} ms, low {ms} ms (all time high {ms} ms)\n"
            )),
            "{name}: {graph}"
        );
        let doctor = c.cmd_str(&["LATENCY", "DOCTOR"]);
        assert!(
            doctor.contains(&format!(
                "1. command: 1 latency spikes (average {ms}ms, mean deviation 0ms"
            )),
            "{name}: {doctor}"
        );
        assert!(
            doctor.contains("- Check your Slow Log to understand"),
            "{name}"
        );
        let mut shape = vec![
            c.cmd(&["LATENCY", "HISTORY", "fast-command"]),
            c.cmd(&["LATENCY", "GRAPH", "fast-command"]),
            c.cmd(&["LATENCY", "RESET", "COMMAND", "nosuch"]),
        ];
        shape.push(c.cmd(&["LATENCY", "LATEST"]));
        shapes.push(shape);
    }
    assert_eq!(shapes[0], shapes[1]);
}

/// Removing a large expired value takes time in the expire cycle: an `expire-cycle` event.
#[test]
fn a_slow_expire_cycle_is_a_latency_event() {
    let s = deadbolt(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    c.cmd(&[
        "EVAL",
        "for i = 1, tonumber(ARGV[1]) do redis.call('sadd', KEYS[1], i) end",
        "1",
        "big",
        "300000",
    ]);
    c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "1"]);
    c.cmd(&["PEXPIRE", "big", "1"]);
    // DEBUG OBJECT does not expire the key: only the cycle removes it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.cmd_str(&["DEBUG", "OBJECT", "big"]) != "-ERR no such key\r\n" {
        assert!(Instant::now() < deadline, "not expired");
        std::thread::sleep(Duration::from_millis(20));
    }
    let latest = c.cmd_str(&["LATENCY", "LATEST"]);
    assert!(latest.contains("expire-cycle"), "{latest}");
}

/// Only commands that ran are listed; a parent stands for its subcommands that ran.
#[test]
fn histogram_lists_commands_with_calls_as_redis() {
    let mut got = Vec::new();
    for (_, s) in deadbolt_and_redis(&[]) {
        let mut c = s.conn();
        c.cmd(&["CONFIG", "RESETSTAT"]);
        c.cmd(&["CLIENT", "ID"]);
        c.cmd(&["CLIENT", "GETNAME"]);
        c.cmd(&["SET", "a", "b"]);
        let names = |reply: Vec<u8>| {
            let mut n: Vec<String> = items(&reply)
                .into_iter()
                .filter(|l| l.contains('|') || ["set", "get", "config|resetstat"].contains(&&l[..]))
                .collect();
            n.sort();
            n
        };
        got.push(vec![
            names(c.cmd(&["LATENCY", "HISTOGRAM", "client"])),
            names(c.cmd(&["LATENCY", "HISTOGRAM", "set", "get", "set", "nosuch"])),
            names(c.cmd(&["LATENCY", "HISTOGRAM", "client|id"])),
            names(c.cmd(&["LATENCY", "HISTOGRAM"])),
        ]);
    }
    assert_eq!(got[0], got[1]);
    assert_eq!(got[0][0], vec!["client|getname", "client|id"]);
}

/// A master without enough good replicas refuses writes, as Redis's checkGoodReplicasStatus.
#[test]
fn min_replicas_to_write_refuses_writes_as_redis() {
    both(|s| {
        let mut c = s.conn();
        let mut other = s.conn();
        let mut out = vec![c.cmd(&["SET", "x", "1"])];
        for cmd in [
            &["CONFIG", "SET", "min-replicas-to-write", "-1"][..],
            &["CONFIG", "SET", "min-replicas-to-write", "abc"],
            &["CONFIG", "SET", "min-replicas-to-write", "1"],
            &["CONFIG", "GET", "min-slaves-to-write"],
            &["SET", "x", "2"],
            &["GET", "x"],
            &["EVAL", "return redis.call('get', KEYS[1])", "1", "x"],
            &["EVAL", "return redis.call('set', KEYS[1], 3)", "1", "x"],
            &["EVAL", "#!lua\nreturn redis.call('get', KEYS[1])", "1", "x"],
            &[
                "EVAL",
                "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])",
                "1",
                "x",
            ],
            &["CONFIG", "SET", "min-replicas-max-lag", "0"],
            &["SET", "x", "4"],
            &["CONFIG", "SET", "min-replicas-max-lag", "10"],
            &["MULTI"],
            &["INCR", "x"],
            &["EXEC"],
            &["CONFIG", "SET", "min-replicas-to-write", "0"],
        ] {
            out.push(c.cmd(cmd));
        }
        // Queued while allowed, refused at EXEC: the whole transaction is discarded.
        out.push(c.cmd(&["MULTI"]));
        out.push(c.cmd(&["INCR", "x"]));
        out.push(other.cmd(&["CONFIG", "SET", "min-replicas-to-write", "2"]));
        out.push(c.cmd(&["EXEC"]));
        out.push(other.cmd(&["CONFIG", "SET", "min-replicas-to-write", "0"]));
        out.push(c.cmd(&["GET", "x"]));
        out
    });
}
