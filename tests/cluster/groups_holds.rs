//! Replies on a node running two Raft groups (the test-only `DEADBOLT_CLUSTER_GROUPS` split:
//! group 1 owns slots 8192-16383, the home group the rest) wait for every group their batch
//! touched: a write's commit in its own group's log, a read's barrier in the group owning its
//! key, however the batch ends; a follower's READONLY read waits for the barrier of the group
//! owning its key; WAIT counts the replicas of the group the client last wrote to.

use super::nodes::Nodes;
use crate::common::{self, Conn};
use std::time::{Duration, Instant};

/// "bar" hashes to slot 5061 (the home group's), "foo" to slot 12182 (group 1's).
const KEYS: [&str; 2] = ["bar", "foo"];

fn start(name: &str) -> Nodes {
    Nodes::new(name).env_groups("1:8192-16383").start()
}

/// Each group's serving leader once they settle on their preferred voters, different nodes:
/// (home group's, group 1's).
/// A leader is the one node acknowledging a write to its group's key while both others
/// redirect it there.
fn leaders(nodes: &Nodes) -> (usize, usize) {
    let l = nodes.preferred_leaders(&KEYS);
    (l[0], l[1])
}

fn signal(nodes: &Nodes, which: &[usize], sig: &str) {
    for &i in which {
        nodes.signal(i, sig);
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// On group 1's leader, which follows the home group: a pipeline whose write went to group 1
/// and whose last request (PING) is the home group's is answered only once group 1 committed
/// the write, and a read of group 1's key only behind group 1's read barrier. With both other
/// nodes frozen neither can happen: nothing is answered, and the leader, deposed, closes the
/// connections. Held for the batch's last unit's group alone, both would be answered at once
/// (this node leads no home group to hold them for), the write acknowledged without a commit.
/// WAIT after a write counts the replicas of the write's group.
#[test]
fn a_reply_waits_for_every_group_its_batch_touched() {
    let nodes = start("cluster-groups-holds");
    let (home, one) = leaders(&nodes);
    let third = 3 - home - one;
    let mut c = Conn::connect(nodes.ports[one]);
    // All up: the pipeline is answered in order.
    c.send_raw(
        &[
            common::resp_cmd(&["SET", "{foo}a", "1"]),
            common::resp_cmd(&["PING"]),
            common::resp_cmd(&["GET", "{foo}a"]),
        ]
        .concat(),
    );
    let mut got = Vec::new();
    for _ in 0..3 {
        got.extend(c.read_reply());
    }
    assert_eq!(text(&got), "+OK\r\n+PONG\r\n$1\r\n1\r\n");
    // WAIT counts group 1's replicas on group 1's leader (it follows the home group), and the
    // home group's on the home group's leader.
    assert_eq!(c.cmd(&["WAIT", "2", "5000"]), b":2\r\n");
    let mut h = Conn::connect(nodes.ports[home]);
    assert_eq!(h.cmd(&["SET", "{bar}w", "1"]), b"+OK\r\n");
    assert_eq!(h.cmd(&["WAIT", "2", "5000"]), b":2\r\n");

    let mut write = Conn::connect(nodes.ports[one]);
    let mut read = Conn::connect(nodes.ports[one]);
    assert_eq!(read.cmd(&["PING"]), b"+PONG\r\n");
    signal(&nodes, &[home, third], "-STOP");
    write.send_raw(
        &[
            common::resp_cmd(&["SET", "{foo}cut", "1"]),
            common::resp_cmd(&["PING"]),
        ]
        .concat(),
    );
    read.send(&["GET", "{foo}a"]);
    let (w, w_closed) = write.drain(Duration::from_secs(5));
    let (r, r_closed) = read.drain(Duration::from_secs(5));
    signal(&nodes, &[home, third], "-CONT");
    assert_eq!(
        (text(&w), w_closed),
        (String::new(), true),
        "a pipeline writing to group 1 was answered while group 1 could not commit"
    );
    assert_eq!(
        (text(&r), r_closed),
        (String::new(), true),
        "a read of group 1's key was answered while group 1 could confirm no barrier"
    );
}

/// On the home group's leader, a follower of group 1: after READONLY a read of group 1's key
/// waits for group 1's read barrier, not the home group's. Group 1's leader frozen, the home
/// group (this node and the third) still confirms its barriers at once, but group 1 confirms
/// none before it elected another leader (an election timeout, 500 ms at least): the read is
/// answered only then (the value, or MASTERDOWN once the barrier gave up). A pipeline reading
/// both groups' keys on a follower of both waits for both barriers and is answered.
#[test]
fn a_readonly_read_waits_for_the_barrier_of_its_keys_group() {
    let nodes = start("cluster-groups-readonly");
    let (home, one) = leaders(&nodes);
    let third = 3 - home - one;
    let mut w1 = Conn::connect(nodes.ports[one]);
    assert_eq!(w1.cmd(&["SET", "{foo}r", "one"]), b"+OK\r\n");
    let mut w0 = Conn::connect(nodes.ports[home]);
    assert_eq!(w0.cmd(&["SET", "{bar}r", "home"]), b"+OK\r\n");
    // The third node follows both: one pipeline reading both groups' keys waits for both
    // barriers, in either order, and is answered.
    let mut f = Conn::connect(nodes.ports[third]);
    assert_eq!(f.cmd(&["READONLY"]), b"+OK\r\n");
    for _ in 0..20 {
        f.send_raw(
            &[
                common::resp_cmd(&["GET", "{foo}r"]),
                common::resp_cmd(&["GET", "{bar}r"]),
            ]
            .concat(),
        );
        let mut got = f.read_reply();
        got.extend(f.read_reply());
        assert_eq!(text(&got), "$3\r\none\r\n$4\r\nhome\r\n");
    }
    let mut r = Conn::connect(nodes.ports[home]);
    assert_eq!(r.cmd(&["READONLY"]), b"+OK\r\n");
    assert_eq!(r.cmd(&["GET", "{foo}r"]), b"$3\r\none\r\n");
    // Group 1's leader answers (its loop runs, so its followers heard from it within the last
    // heartbeat), then is frozen.
    assert_eq!(w1.cmd(&["PING"]), b"+PONG\r\n");
    signal(&nodes, &[one], "-STOP");
    let stat = format!("/proc/{}/stat", nodes.pid(one));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string(&stat)
        .unwrap_or_default()
        .rsplit(')')
        .next()
        .is_some_and(|s| s.trim_start().starts_with('T'))
    {
        assert!(Instant::now() < deadline, "node {one} never stopped");
        std::thread::sleep(Duration::from_millis(1));
    }
    r.send(&["GET", "{foo}r"]);
    let early = r.try_read_reply(Duration::from_millis(250));
    let later = r.try_read_reply(Duration::from_secs(10));
    signal(&nodes, &[one], "-CONT");
    assert_eq!(
        early.as_deref().map(text),
        None,
        "a READONLY read of group 1's key was answered while group 1 could confirm no barrier"
    );
    let later = text(&later.unwrap_or_default());
    assert!(
        later == "$3\r\none\r\n" || later.starts_with("-MASTERDOWN "),
        "the read ended as {later:?}"
    );
}
