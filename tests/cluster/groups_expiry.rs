//! Expiry and flushes with several Raft groups on the same three nodes (the test-only
//! `DEADBOLT_CLUSTER_GROUPS` split): each group's serving leader expires the keys of its own
//! slots, actively, and its log carries the deletions to the other nodes; a group's new leader
//! moves the deadlines of its own keys only (EXTEND); FLUSHALL and FLUSHDB on a node empty the
//! groups it leads, as a Redis Cluster master flushes its own slots.

use super::nodes::{poll, Nodes};
use crate::common::Conn;
use std::time::{Duration, Instant};

/// Three groups: the home group owns 0-5460, group 1 5461-10922, group 2 10923-16383.
const THREE: &str = "1:5461-10922,2:10923-16383";
/// A key of each group's slots, in group order: "b" is slot 3300, "c" 7365, "a" 15495.
const TAGS3: [(&str, u16); 3] = [("b", 3300), ("c", 7365), ("a", 15495)];

fn start(name: &str, split: &str, extra: &[&str]) -> Nodes {
    Nodes::new(name).env_groups(split).args(extra).start()
}

/// Each group's leader (in the order of `tags`), once every group serves from its preferred
/// voter (no two on one node).
fn leaders(nodes: &Nodes, tags: &[(&str, u16)]) -> Vec<usize> {
    nodes.preferred_leaders(&tags.iter().map(|t| t.0).collect::<Vec<_>>())
}

/// The node acknowledging writes to `tag` once one does (a group electing a leader), within
/// 20 s.
fn new_leader(nodes: &Nodes, tag: &str, value: &str) -> usize {
    poll(Duration::from_secs(20), || {
        nodes
            .acknowledged_by(tag, value)
            .ok_or_else(|| format!("{tag}'s group elected no new leader"))
    })
}

/// Polls until every live node holds `want` keys (never fewer than `floor` meanwhile).
fn every_node_holds(nodes: &Nodes, want: i64, floor: i64, within: Duration, what: &str) {
    poll(within, || {
        let sizes: Vec<i64> = nodes.live().into_iter().map(|i| nodes.dbsize(i)).collect();
        assert!(
            sizes.iter().all(|&n| n >= floor),
            "{what}: a node dropped keys it must keep: DBSIZE {sizes:?}, at least {floor} expected"
        );
        if sizes.iter().all(|&n| n == want) {
            Ok(())
        } else {
            Err(format!(
                "{what}: DBSIZE {sizes:?} on the live nodes, {want} expected"
            ))
        }
    })
}

fn int_reply(c: &mut Conn, args: &[&str]) -> i64 {
    let r = c.cmd_str(args);
    r.strip_prefix(':')
        .and_then(|n| n.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("{args:?}: {r:?}"))
}

/// Keys with a deadline, of three groups whose leaders are on three nodes, are expired without
/// any access: each group's leader deletes its own keys, and the other two nodes lose them
/// through that group's log (a follower never expires a key itself). A leader with active
/// expiry off keeps its group's dead keys on every node: no other node deletes them.
#[test]
fn each_groups_leader_expires_its_own_keys_and_its_log_deletes_them_everywhere() {
    let nodes = start(
        "groups-active-expiry",
        THREE,
        &["--enable-debug-command", "yes"],
    );
    let lead = leaders(&nodes, &TAGS3);
    // Group 2's leader does not expire: its dead keys must stay everywhere.
    assert_eq!(
        nodes.answer(lead[2], &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
        "+OK\r\n"
    );
    for (g, (tag, _)) in TAGS3.iter().enumerate() {
        let mut c = Conn::connect(nodes.ports[lead[g]]);
        for i in 0..10 {
            let key = format!("{{{tag}}}:lock{i}");
            assert_eq!(c.cmd(&["SET", &key, "owner", "PX", "400"]), b"+OK\r\n");
        }
    }
    // 3 probe keys without a deadline and 30 locks; within a bound past their 400 ms, groups
    // 0's and 1's locks are gone from every node, group 2's are on every node still.
    let started = Instant::now();
    every_node_holds(
        &nodes,
        13,
        13,
        Duration::from_secs(6),
        "groups 0 and 1 expired",
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    // Another second of sweeps on every node leaves group 2's dead keys where they are.
    let quiet = Instant::now() + Duration::from_secs(1);
    while Instant::now() < quiet {
        let sizes: Vec<i64> = nodes.live().into_iter().map(|i| nodes.dbsize(i)).collect();
        assert_eq!(
            sizes,
            [13, 13, 13],
            "only group 2's leader may expire its keys"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        nodes.answer(lead[2], &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]),
        "+OK\r\n"
    );
    every_node_holds(&nodes, 3, 3, Duration::from_secs(5), "group 2 expired");
}

/// A group whose leader fails over gets a new leader whose EXTEND moves the deadlines of that
/// group's keys by the clock bound, on every node; another group's keys keep theirs.
#[test]
fn a_groups_failover_moves_only_its_own_keys_deadlines() {
    let mut nodes = start("groups-extend", THREE, &["--cluster-clock-drift", "3000"]);
    let lead = leaders(&nodes, &TAGS3);
    let expiretime = |nodes: &Nodes, i: usize, key: &str| {
        let r = nodes.answer_readonly(i, &["PEXPIRETIME", key]);
        r.strip_prefix(':')
            .and_then(|n| n.trim_end().parse::<i64>().ok())
            .unwrap_or_else(|| panic!("PEXPIRETIME {key} on node {i}: {r:?}"))
    };
    let keep = "{b}:lock";
    let moved = "{a}:lock";
    let mut c0 = Conn::connect(nodes.ports[lead[0]]);
    assert_eq!(c0.cmd(&["SET", keep, "me", "PX", "600000"]), b"+OK\r\n");
    let mut c2 = Conn::connect(nodes.ports[lead[2]]);
    assert_eq!(c2.cmd(&["SET", moved, "me", "PX", "600000"]), b"+OK\r\n");
    let keep_at = expiretime(&nodes, lead[0], keep);
    let moved_at = expiretime(&nodes, lead[2], moved);
    assert!(keep_at > 0 && moved_at > 0, "{keep_at} {moved_at}");
    // Every node has both deadlines before the failover.
    for i in 0..3 {
        assert_eq!(expiretime(&nodes, i, keep), keep_at, "node {i}");
        assert_eq!(expiretime(&nodes, i, moved), moved_at, "node {i}");
    }
    // Group 2's leader goes; a new one is elected among the other two and serves (its EXTEND
    // is applied once it acknowledges a write).
    nodes.kill(lead[2]);
    let new = new_leader(&nodes, TAGS3[2].0, "again");
    for i in nodes.live() {
        assert_eq!(
            expiretime(&nodes, i, moved),
            moved_at + 3000,
            "group 2's key on node {i} (new leader {new})"
        );
        assert_eq!(
            expiretime(&nodes, i, keep),
            keep_at,
            "the home group's key on node {i} moved with group 2's EXTEND"
        );
    }
}

/// FLUSHALL / FLUSHDB on a node running several groups empty the keys of the groups it leads,
/// on every node, as a Redis Cluster master flushes its own slots; the other group's keys stay.
/// A node leading no group refuses them as a Redis Cluster replica does. SWAPDB is refused.
#[test]
fn a_flush_empties_the_groups_its_node_leads_on_every_node() {
    // Two groups: the home group 0-8191 ("b", slot 3300), group 1 8192-16383 ("a", 15495).
    let nodes = start("groups-flush", "1:8192-16383", &[]);
    let tags = [("b", 3300u16), ("a", 15495u16)];
    let lead = leaders(&nodes, &tags);
    let none = 3 - lead[0] - lead[1];
    for (g, (tag, _)) in tags.iter().enumerate() {
        let mut c = Conn::connect(nodes.ports[lead[g]]);
        for i in 0..5 {
            let key = format!("{{{tag}}}:k{i}");
            assert_eq!(c.cmd(&["SET", &key, "v", "PX", "600000"]), b"+OK\r\n");
        }
    }
    every_node_holds(&nodes, 12, 0, Duration::from_secs(5), "writes replicated");
    let readonly = "-READONLY You can't write against a read only replica.\r\n";
    assert_eq!(nodes.answer(none, &["FLUSHALL"]), readonly);
    assert_eq!(nodes.answer(none, &["FLUSHDB"]), readonly);
    // As on a Redis Cluster replica, the write refusal comes before SWAPDB's own.
    assert_eq!(nodes.answer(none, &["SWAPDB", "0", "1"]), readonly);
    // Group 1's leader flushes group 1's keys (and probe), everywhere; the home group's stay.
    let mut l1 = Conn::connect(nodes.ports[lead[1]]);
    assert_eq!(l1.cmd(&["FLUSHALL"]), b"+OK\r\n");
    assert_eq!(l1.cmd(&["DBSIZE"]), b":6\r\n");
    every_node_holds(&nodes, 6, 6, Duration::from_secs(5), "group 1 flushed");
    let mut l0 = Conn::connect(nodes.ports[lead[0]]);
    assert_eq!(l0.cmd(&["GET", "{b}:k0"]), b"$1\r\nv\r\n");
    assert_eq!(
        l0.cmd(&["GET", "{a}:k0"]),
        format!("-MOVED 15495 127.0.0.1:{}\r\n", nodes.ports[lead[1]]).as_bytes()
    );
    // The home group's leader, FLUSHDB ASYNC: nothing is left anywhere.
    assert_eq!(l0.cmd(&["FLUSHDB", "ASYNC"]), b"+OK\r\n");
    every_node_holds(&nodes, 0, 0, Duration::from_secs(5), "home group flushed");
    // A node leading a group answers SWAPDB as a Redis Cluster master.
    assert_eq!(
        l1.cmd(&["SWAPDB", "0", "1"]),
        b"-ERR SWAPDB is not allowed in cluster mode\r\n"
    );
    // Writes go on in both groups.
    assert_eq!(l0.cmd(&["SET", "{b}:after", "1"]), b"+OK\r\n");
    assert_eq!(l1.cmd(&["SET", "{a}:after", "1"]), b"+OK\r\n");
    every_node_holds(
        &nodes,
        2,
        0,
        Duration::from_secs(5),
        "writes after the flushes",
    );
}

/// A node that stops leading one group while it leads another keeps its clients, as a Redis
/// Cluster master that lost some slots: an idle connection, and one whose replies were all
/// released, go on; one blocked on the group's key gets `-MOVED` to its new leader
/// (clusterRedirectBlockedClientIfNeeded) and stays connected.
#[test]
fn a_non_home_groups_step_down_redirects_its_blocked_clients() {
    let mut nodes = start("groups-step-down", THREE, &[]);
    let lead = leaders(&nodes, &TAGS3);
    // Group 2's leader goes; one of the other two leads it for a while, beside its own group.
    nodes.kill(lead[2]);
    let interim = new_leader(&nodes, TAGS3[2].0, "interim");
    let own = if interim == lead[0] {
        TAGS3[0]
    } else {
        TAGS3[1]
    };
    let mut idle = Conn::connect(nodes.ports[interim]);
    assert_eq!(
        idle.cmd(&["SET", &format!("{{{}}}:x", own.0), "1"]),
        b"+OK\r\n"
    );
    assert_eq!(idle.cmd(&["SET", "{a}:x", "1"]), b"+OK\r\n");
    let mut blocked = Conn::connect(nodes.ports[interim]);
    blocked.send(&["BLPOP", "{a}:list", "0"]);
    // The old leader comes back: group 2's leadership moves back to it (its preferred voter),
    // and the interim leader steps down from group 2 while it keeps leading its own.
    nodes.start(lead[2]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while nodes.acknowledged_by(TAGS3[2].0, "back") != Some(lead[2]) {
        if Instant::now() >= deadline {
            let seen: Vec<String> = nodes
                .live()
                .into_iter()
                .map(|i| nodes.ask(i, &["SET", "a", "seen"]))
                .collect();
            panic!(
                "group 2's leadership never moved back to node {}: {seen:?}",
                lead[2]
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        blocked.try_read_reply(Duration::from_secs(10)),
        Some(
            format!(
                "-MOVED {} 127.0.0.1:{}\r\n",
                TAGS3[2].1, nodes.ports[lead[2]]
            )
            .into_bytes()
        ),
        "the client blocked on group 2's key"
    );
    assert_eq!(blocked.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(idle.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(
        idle.cmd(&["SET", "{a}:x", "2"]),
        format!(
            "-MOVED {} 127.0.0.1:{}\r\n",
            TAGS3[2].1, nodes.ports[lead[2]]
        )
        .as_bytes()
    );
    assert_eq!(
        idle.cmd(&["SET", &format!("{{{}}}:x", own.0), "2"]),
        b"+OK\r\n"
    );
}

/// One node leading two groups (group 3's preferred voter is the home group's, node 1): its
/// expiry sweep and its FLUSHALL change keys of both in one unit, logged as one entry per
/// group, and the other nodes lose the keys of both through the two logs.
#[test]
fn a_node_leading_two_groups_splits_its_sweep_and_its_flush_by_group() {
    let nodes = start("groups-split-unit", "3:8192-16383", &[]);
    let tags = [("b", 3300u16), ("a", 15495u16)];
    let lead = nodes.leaders_where(&[tags[0].0, tags[1].0], |l| l[0] == l[1]);
    let mut c = Conn::connect(nodes.ports[lead[0]]);
    for i in 0..20 {
        for (tag, _) in tags {
            let key = format!("{{{tag}}}:lock{i}");
            assert_eq!(c.cmd(&["SET", &key, "owner", "PX", "300"]), b"+OK\r\n");
        }
    }
    every_node_holds(&nodes, 2, 2, Duration::from_secs(6), "both groups expired");
    for i in 0..20 {
        for (tag, _) in tags {
            let key = format!("{{{tag}}}:k{i}");
            assert_eq!(c.cmd(&["SET", &key, "v"]), b"+OK\r\n");
        }
    }
    every_node_holds(&nodes, 42, 0, Duration::from_secs(5), "writes replicated");
    assert_eq!(c.cmd(&["FLUSHALL"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["DBSIZE"]), b":0\r\n");
    every_node_holds(&nodes, 0, 0, Duration::from_secs(5), "both groups flushed");
    assert_eq!(c.cmd(&["SET", "{a}:after", "1"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "{b}:after", "1"]), b"+OK\r\n");
    every_node_holds(
        &nodes,
        2,
        0,
        Duration::from_secs(5),
        "writes after the flush",
    );
}

/// TIME's reply in milliseconds.
fn time_ms(c: &mut Conn) -> i64 {
    let r = c.cmd_str(&["TIME"]);
    let parts: Vec<&str> = r.split("\r\n").collect();
    assert_eq!(parts.len(), 6, "{r:?}");
    let secs: i64 = parts[2].parse().expect("TIME seconds");
    let micros: i64 = parts[4].parse().expect("TIME microseconds");
    secs * 1000 + micros / 1000
}

/// With several groups the clock bound follows the group of the command's keys: a lock granted
/// by a group's leader that follows the home group gets its whole lease (not a deadline taken
/// from a follower's clock set back by the bound), and a node following the lock's group shows
/// it until its deadline plus the bound has passed, then hides it without deleting it (its
/// group's leader logs the deletion).
#[test]
fn the_clock_bound_follows_the_group_of_the_keys() {
    let nodes = start(
        "groups-clock-bound",
        THREE,
        &[
            "--cluster-clock-drift",
            "3000",
            "--enable-debug-command",
            "yes",
        ],
    );
    let lead = leaders(&nodes, &TAGS3);
    // Group 1's leader, which follows the home group; it leaves expiry to the test.
    let mut b = Conn::connect(nodes.ports[lead[1]]);
    assert_eq!(
        nodes.answer(lead[1], &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
        "+OK\r\n"
    );
    let t0 = time_ms(&mut b);
    assert_eq!(
        b.cmd(&["SET", "{c}:lease", "me", "PX", "60000"]),
        b"+OK\r\n"
    );
    let at = int_reply(&mut b, &["PEXPIRETIME", "{c}:lease"]);
    assert!(
        at >= t0 + 60_000,
        "a 60 s lease granted at {t0} ends at {at}"
    );
    // A short lock, read on the home group's leader, which follows group 1.
    assert_eq!(b.cmd(&["SET", "{c}:lock", "me", "PX", "300"]), b"+OK\r\n");
    let granted = Instant::now();
    nodes.read_until(lead[0], &["EXISTS", "{c}:lock"], ":1\r\n");
    // Past its deadline, within the bound: still held, as seen there.
    std::thread::sleep(Duration::from_millis(1000).saturating_sub(granted.elapsed()));
    assert_eq!(
        nodes.answer_readonly(lead[0], &["GET", "{c}:lock"]),
        "$2\r\nme\r\n"
    );
    // (Free there once its deadline plus the bound passed.)
    nodes.read_until(lead[0], &["GET", "{c}:lock"], "$-1\r\n");
    assert!(
        granted.elapsed() >= Duration::from_millis(3200),
        "free on a follower after {:?}, before its deadline plus the bound",
        granted.elapsed()
    );
    // Hidden, not deleted: the follower expired nothing itself.
    assert_eq!(nodes.dbsize(lead[0]), 5);
    let info = nodes.answer(lead[0], &["INFO", "stats"]);
    assert!(info.contains("\r\nexpired_keys:0\r\n"), "{info}");
    // Group 1's leader deletes it once it expires again, and every node loses it.
    assert_eq!(
        nodes.answer(lead[1], &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]),
        "+OK\r\n"
    );
    every_node_holds(
        &nodes,
        4,
        4,
        Duration::from_secs(5),
        "group 1's lock expired",
    );
}
