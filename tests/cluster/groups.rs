//! Two Raft groups on the same three nodes, split by `cluster-slot-groups` (group 1 owns slots
//! 8192-16383, the home group the rest): each group elects its own leader,
//! the leaders settle on different nodes (leadership moves to each group's preferred voter),
//! and a write to a key is acknowledged by the leader of the group owning its slot while every
//! other node redirects it there with MOVED.

use super::nodes::{poll, Nodes};
use crate::common::Conn;
use std::time::Duration;

/// "bar" is slot 5061 (the home group's), "foo" slot 12182 (group 1's).
const KEYS: [(&str, u16); 2] = [("bar", 5061), ("foo", 12182)];

/// Each group's leader once both serve, each on its preferred voter (so on different nodes):
/// (home group's, group 1's), each the one node acknowledging a write to its key while the
/// others redirect it there.
fn leaders(nodes: &Nodes) -> (usize, usize) {
    let l = nodes.preferred_leaders(&[KEYS[0].0, KEYS[1].0]);
    (l[0], l[1])
}

#[test]
fn each_groups_writes_are_acknowledged_by_its_own_leader_on_different_nodes() {
    let nodes = Nodes::new("cluster-two-groups")
        .slot_groups("0:0-8191 1:8192-16383")
        .start();
    let leaders = leaders(&nodes);
    // Each group's leader holds its key's last acknowledged value; the other group's key is
    // redirected there too.
    let value = nodes.probe_value();
    for ((key, slot), leader, other) in [
        (KEYS[0], leaders.0, leaders.1),
        (KEYS[1], leaders.1, leaders.0),
    ] {
        assert_eq!(
            nodes.answer(leader, &["GET", key]),
            format!("${}\r\n{value}\r\n", value.len())
        );
        let moved = format!("-MOVED {slot} 127.0.0.1:{}\r\n", nodes.ports[leader]);
        assert_eq!(nodes.answer(other, &["GET", key]), moved);
    }
    // Every node describes both groups: CLUSTER SLOTS lists each range with its own leader.
    for i in 0..3 {
        let r = nodes.answer(i, &["CLUSTER", "SLOTS"]);
        for (first, last, leader) in [(0, 8191, leaders.0), (8192, 16383, leaders.1)] {
            let port = nodes.ports[leader];
            let range = format!(":{first}\r\n:{last}\r\n*4\r\n$9\r\n127.0.0.1\r\n:{port}\r\n");
            assert!(r.contains(&range), "{range:?} not in {r:?}");
        }
        assert!(r.starts_with("*2\r\n"), "{r:?}");
    }
    // Locking goes on in both groups: SET NX on each leader, refused while held.
    for ((key, _), leader) in [(KEYS[0], leaders.0), (KEYS[1], leaders.1)] {
        let lock = format!("{{{key}}}:lock");
        let mut c = Conn::connect(nodes.ports[leader]);
        assert_eq!(
            c.cmd(&["SET", &lock, "me", "NX", "PX", "30000"]),
            b"+OK\r\n"
        );
        assert_eq!(
            c.cmd(&["SET", &lock, "you", "NX", "PX", "30000"]),
            b"$-1\r\n"
        );
    }
}

/// A node that missed only group 1's log, compacted meanwhile, installs group 1's snapshot on
/// restart: the keys of the home group's slots it holds stay (an install that emptied the whole
/// keyspace would lose them for good: the home group has nothing to send it again).
#[test]
fn a_groups_snapshot_install_replaces_only_that_groups_keys() {
    let mut nodes = Nodes::new("cluster-two-groups-snapshot")
        .slot_groups("0:0-8191 1:8192-16383")
        .args(&["--cluster-snapshot-every", "16"])
        .start();
    let (home, one) = leaders(&nodes);
    let other = 3 - home - one;
    // Keys of the home group's slots, on every node before the third goes down.
    let mut h = Conn::connect(nodes.ports[home]);
    for i in 0..20 {
        assert_eq!(h.cmd(&["SET", &format!("{{bar}}{i}"), "home"]), b"+OK\r\n");
    }
    let converged = |nodes: &Nodes| {
        let (mine, theirs) = (nodes.dbsize(other), nodes.dbsize(home));
        if mine == theirs {
            Ok(mine)
        } else {
            Err(format!(
                "node {other} did not converge: DBSIZE {mine} there, {theirs} on the home leader"
            ))
        }
    };
    poll(Duration::from_secs(10), || converged(&nodes));
    nodes.kill(other);
    // Group 1's log runs far past it and is compacted.
    let mut g = Conn::connect(nodes.ports[one]);
    for i in 0..300 {
        assert_eq!(
            g.cmd(&["SET", &format!("{{foo}}{}", i % 100), "one"]),
            b"+OK\r\n"
        );
    }
    nodes.start(other);
    // 20 + 100 keys and the two probes.
    assert_eq!(poll(Duration::from_secs(15), || converged(&nodes)), 122);
}
