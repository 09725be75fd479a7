//! Expiry and flushes with several Raft groups on the same three nodes (the test-only
//! `DEADBOLT_CLUSTER_GROUPS` split): each group's serving leader expires the keys of its own
//! slots, actively, and its log carries the deletions to the other nodes; a group's new leader
//! moves the deadlines of its own keys only (EXTEND); FLUSHALL and FLUSHDB on a node empty the
//! groups it leads, as a Redis Cluster master flushes its own slots.

use crate::common;

use common::{cluster_node_args, cluster_ports, Conn, TempDir};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "cluster-groups-expiry-secret-0123456789";

/// Three groups: the home group owns 0-5460, group 1 5461-10922, group 2 10923-16383.
const THREE: &str = "1:5461-10922,2:10923-16383";
/// A key of each group's slots, in group order: "b" is slot 3300, "c" 7365, "a" 15495.
const TAGS3: [(&str, u16); 3] = [("b", 3300), ("c", 7365), ("a", 15495)];

struct Nodes {
    ports: Vec<u16>,
    children: Vec<Option<Child>>,
    args: Vec<Vec<String>>,
    split: String,
    _dir: TempDir,
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Nodes {
    fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.children[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn spawn(&mut self, i: usize) {
        let child = Command::new(common::deadbolt_bin())
            .args(&self.args[i])
            .env("DEADBOLT_CLUSTER_GROUPS", &self.split)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn deadbolt");
        self.children[i] = Some(child);
        let p = self.ports[i];
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", p)).is_err() {
            assert!(Instant::now() < deadline, "node on {p} never listened");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn live(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.ports.len()).filter(|&i| self.children[i].is_some())
    }
}

fn start(name: &str, split: &str, extra: &[&str]) -> Nodes {
    let dir = TempDir::new(name);
    let (ports, peers) = cluster_ports(3);
    let mut args = Vec::new();
    for (i, (port, _)) in ports.iter().enumerate() {
        let id = i as u64 + 1;
        let node_dir = dir.0.join(format!("n{id}"));
        std::fs::create_dir_all(&node_dir).unwrap();
        let mut a = cluster_node_args(*port, &node_dir, id, &peers, SECRET);
        a.extend(["--cluster-enabled".into(), "yes".into()]);
        a.extend(extra.iter().map(|s| s.to_string()));
        args.push(a);
    }
    let mut nodes = Nodes {
        ports: ports.iter().map(|p| p.0).collect(),
        children: (0..3).map(|_| None).collect(),
        args,
        split: split.to_string(),
        _dir: dir,
    };
    for i in 0..3 {
        nodes.spawn(i);
    }
    nodes
}

/// The live node that acknowledges `SET key value` while every other live node redirects it
/// there (`-MOVED <slot> 127.0.0.1:<its port>`), if there is exactly one.
fn acknowledged_by(nodes: &Nodes, key: &str, slot: u16, value: &str) -> Option<usize> {
    let replies: Vec<(usize, String)> = nodes
        .live()
        .map(|i| {
            let mut c = Conn::connect(nodes.ports[i]);
            c.send(&["SET", key, value]);
            let r = c.try_read_reply(Duration::from_secs(2)).unwrap_or_default();
            (i, String::from_utf8_lossy(&r).trim_end().to_string())
        })
        .collect();
    let ok: Vec<usize> = replies
        .iter()
        .filter(|r| r.1 == "+OK")
        .map(|r| r.0)
        .collect();
    let [leader] = ok[..] else {
        return None;
    };
    let moved = format!("-MOVED {slot} 127.0.0.1:{}", nodes.ports[leader]);
    replies
        .iter()
        .all(|(i, r)| *i == leader || *r == moved)
        .then_some(leader)
}

/// Each group's leader (in the order of `keys`), once every group serves and no two share a
/// node.
fn leaders(nodes: &Nodes, keys: &[(&str, u16)]) -> Vec<usize> {
    leaders_where(nodes, keys, |l| {
        let mut distinct = l.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        distinct.len() == l.len()
    })
}

/// Each group's leader (in the order of `keys`), once every group serves and `settled` holds.
fn leaders_where(
    nodes: &Nodes,
    keys: &[(&str, u16)],
    settled: impl Fn(&[usize]) -> bool,
) -> Vec<usize> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found: Vec<Option<usize>> = keys
            .iter()
            .map(|&(k, slot)| acknowledged_by(nodes, k, slot, "probe"))
            .collect();
        if let Some(l) = found.iter().copied().collect::<Option<Vec<usize>>>() {
            if settled(&l) {
                return l;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the groups' leaders never settled: {found:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// DBSIZE on node `i` (a read, confirmed by the leader where the node follows).
fn dbsize(nodes: &Nodes, i: usize) -> i64 {
    let mut c = Conn::connect(nodes.ports[i]);
    assert_eq!(c.cmd(&["READONLY"]), b"+OK\r\n");
    let r = c.cmd_str(&["DBSIZE"]);
    r.strip_prefix(':')
        .and_then(|n| n.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("DBSIZE on node {i}: {r:?}"))
}

/// Polls until every live node holds `want` keys (never fewer than `floor` meanwhile).
fn every_node_holds(nodes: &Nodes, want: i64, floor: i64, within: Duration, what: &str) {
    let deadline = Instant::now() + within;
    loop {
        let sizes: Vec<i64> = nodes.live().map(|i| dbsize(nodes, i)).collect();
        assert!(
            sizes.iter().all(|&n| n >= floor),
            "{what}: a node dropped keys it must keep: DBSIZE {sizes:?}, at least {floor} expected"
        );
        if sizes.iter().all(|&n| n == want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: DBSIZE {sizes:?} on the live nodes, {want} expected"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
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
    let mut l2 = Conn::connect(nodes.ports[lead[2]]);
    assert_eq!(l2.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
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
        let sizes: Vec<i64> = nodes.live().map(|i| dbsize(&nodes, i)).collect();
        assert_eq!(
            sizes,
            [13, 13, 13],
            "only group 2's leader may expire its keys"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(l2.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), b"+OK\r\n");
    every_node_holds(&nodes, 3, 3, Duration::from_secs(5), "group 2 expired");
}

/// A group whose leader fails over gets a new leader whose EXTEND moves the deadlines of that
/// group's keys by the clock bound, on every node; another group's keys keep theirs.
#[test]
fn a_groups_failover_moves_only_its_own_keys_deadlines() {
    let mut nodes = start("groups-extend", THREE, &["--cluster-clock-drift", "3000"]);
    let lead = leaders(&nodes, &TAGS3);
    let expiretime = |nodes: &Nodes, i: usize, key: &str| {
        let mut c = Conn::connect(nodes.ports[i]);
        c.cmd(&["READONLY"]);
        int_reply(&mut c, &["PEXPIRETIME", key])
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
    let deadline = Instant::now() + Duration::from_secs(20);
    let new = loop {
        if let Some(l) = acknowledged_by(&nodes, TAGS3[2].0, TAGS3[2].1, "again") {
            break l;
        }
        assert!(Instant::now() < deadline, "group 2 elected no new leader");
        std::thread::sleep(Duration::from_millis(100));
    };
    for i in nodes.live().collect::<Vec<_>>() {
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
    let mut n = Conn::connect(nodes.ports[none]);
    let readonly = b"-READONLY You can't write against a read only replica.\r\n";
    assert_eq!(n.cmd(&["FLUSHALL"]), readonly);
    assert_eq!(n.cmd(&["FLUSHDB"]), readonly);
    // As on a Redis Cluster replica, the write refusal comes before SWAPDB's own.
    assert_eq!(n.cmd(&["SWAPDB", "0", "1"]), readonly);
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
    let deadline = Instant::now() + Duration::from_secs(20);
    let interim = loop {
        if let Some(l) = acknowledged_by(&nodes, TAGS3[2].0, TAGS3[2].1, "interim") {
            break l;
        }
        assert!(Instant::now() < deadline, "group 2 elected no new leader");
        std::thread::sleep(Duration::from_millis(100));
    };
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
    nodes.spawn(lead[2]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while acknowledged_by(&nodes, TAGS3[2].0, TAGS3[2].1, "back") != Some(lead[2]) {
        if Instant::now() >= deadline {
            let seen: Vec<String> = nodes
                .live()
                .map(|i| {
                    let mut c = Conn::connect(nodes.ports[i]);
                    c.cmd_str(&["SET", "a", "seen"])
                })
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
    let lead = leaders_where(&nodes, &tags, |l| l[0] == l[1]);
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
    assert_eq!(b.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
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
    let mut a = Conn::connect(nodes.ports[lead[0]]);
    assert_eq!(a.cmd(&["READONLY"]), b"+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(2);
    while a.cmd(&["EXISTS", "{c}:lock"]) != b":1\r\n" {
        assert!(
            Instant::now() < deadline,
            "the lock never reached node {}",
            lead[0]
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Past its deadline, within the bound: still held, as seen there.
    std::thread::sleep(Duration::from_millis(1000).saturating_sub(granted.elapsed()));
    assert_eq!(a.cmd(&["GET", "{c}:lock"]), b"$2\r\nme\r\n");
    let deadline = Instant::now() + Duration::from_secs(6);
    while a.cmd(&["GET", "{c}:lock"]) != b"$-1\r\n" {
        assert!(
            Instant::now() < deadline,
            "the lock never looked free on the follower"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        granted.elapsed() >= Duration::from_millis(3200),
        "free on a follower after {:?}, before its deadline plus the bound",
        granted.elapsed()
    );
    // Hidden, not deleted: the follower expired nothing itself.
    assert_eq!(dbsize(&nodes, lead[0]), 5);
    let info = a.cmd_str(&["INFO", "stats"]);
    assert!(info.contains("\r\nexpired_keys:0\r\n"), "{info}");
    // Group 1's leader deletes it once it expires again, and every node loses it.
    assert_eq!(b.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), b"+OK\r\n");
    every_node_holds(
        &nodes,
        4,
        4,
        Duration::from_secs(5),
        "group 1's lock expired",
    );
}
