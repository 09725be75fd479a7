//! Two Raft groups on the same three nodes, split by `cluster-slot-groups` (group 1 owns slots
//! 8192-16383, the home group the rest): each group elects its own leader,
//! the leaders settle on different nodes (leadership moves to each group's preferred voter),
//! and a write to a key is acknowledged by the leader of the group owning its slot while every
//! other node redirects it there with MOVED.

use crate::common;

use common::{cluster_node_args, cluster_ports, Conn, TempDir};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "cluster-groups-secret-0123456789abcdef";

struct Nodes {
    ports: Vec<u16>,
    children: Vec<Child>,
    args: Vec<Vec<String>>,
    split: String,
    _dir: TempDir,
}

impl Nodes {
    fn spawn(&self, i: usize) -> Child {
        Command::new(common::deadbolt_bin())
            .args(&self.args[i])
            .args(["--cluster-slot-groups", &self.split])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn deadbolt")
    }

    fn listening(&self, i: usize) {
        let p = self.ports[i];
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", p)).is_err() {
            assert!(Instant::now() < deadline, "node on {p} never listened");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
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
        children: Vec::new(),
        args,
        split: split.to_string(),
        _dir: dir,
    };
    for i in 0..3 {
        let child = nodes.spawn(i);
        nodes.children.push(child);
    }
    for i in 0..3 {
        nodes.listening(i);
    }
    nodes
}

/// Each group's leader once both serve, on different nodes: (home group's, group 1's).
fn leaders(nodes: &Nodes, keys: [(&str, u16); 2], round: &mut u32) -> (usize, usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        *round += 1;
        let mut seen = Vec::new();
        let mut leaders = Vec::new();
        for (key, slot) in keys {
            let replies = set_everywhere(nodes, key, &format!("v{round}"));
            leaders.push(acknowledged_by(nodes, slot, &replies));
            seen.push(replies);
        }
        if let [Some(a), Some(b)] = leaders[..] {
            if a != b {
                return (a, b);
            }
        }
        assert!(
            Instant::now() < deadline,
            "no two leaders on different nodes, each acknowledging its own slot: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What each node answers to `SET key value`, in node order.
fn set_everywhere(nodes: &Nodes, key: &str, value: &str) -> Vec<String> {
    nodes
        .ports
        .iter()
        .map(|&p| {
            let mut c = Conn::connect(p);
            c.send(&["SET", key, value]);
            let r = c.try_read_reply(Duration::from_secs(2)).unwrap_or_default();
            String::from_utf8_lossy(&r).trim_end().to_string()
        })
        .collect()
}

/// The node that acknowledged the write, when exactly one did and every other one redirected
/// it there (`-MOVED <slot> 127.0.0.1:<its port>`).
fn acknowledged_by(nodes: &Nodes, slot: u16, replies: &[String]) -> Option<usize> {
    let ok: Vec<usize> = (0..replies.len())
        .filter(|&i| replies[i] == "+OK")
        .collect();
    let [leader] = ok[..] else {
        return None;
    };
    let moved = format!("-MOVED {slot} 127.0.0.1:{}", nodes.ports[leader]);
    (0..replies.len())
        .filter(|&i| i != leader)
        .all(|i| replies[i] == moved)
        .then_some(leader)
}

#[test]
fn each_groups_writes_are_acknowledged_by_its_own_leader_on_different_nodes() {
    let nodes = start("cluster-two-groups", "0:0-8191 1:8192-16383", &[]);
    // "bar" is slot 5061 (the home group's), "foo" slot 12182 (group 1's).
    let keys = [("bar", 5061u16), ("foo", 12182u16)];
    let mut round = 0;
    let leaders = leaders(&nodes, keys, &mut round);
    // Each group's leader holds its key's last acknowledged value; the other group's key is
    // redirected there too.
    let value = format!("v{round}");
    for ((key, slot), leader, other) in [
        (keys[0], leaders.0, leaders.1),
        (keys[1], leaders.1, leaders.0),
    ] {
        let mut c = Conn::connect(nodes.ports[leader]);
        assert_eq!(
            c.cmd(&["GET", key]),
            format!("${}\r\n{value}\r\n", value.len()).as_bytes()
        );
        let mut o = Conn::connect(nodes.ports[other]);
        let moved = format!("-MOVED {slot} 127.0.0.1:{}\r\n", nodes.ports[leader]);
        assert_eq!(o.cmd(&["GET", key]), moved.as_bytes());
    }
    // Every node describes both groups: CLUSTER SLOTS lists each range with its own leader.
    for &p in &nodes.ports {
        let mut c = Conn::connect(p);
        let r = String::from_utf8_lossy(&c.cmd(&["CLUSTER", "SLOTS"])).into_owned();
        for (first, last, leader) in [(0, 8191, leaders.0), (8192, 16383, leaders.1)] {
            let port = nodes.ports[leader];
            let range = format!(":{first}\r\n:{last}\r\n*4\r\n$9\r\n127.0.0.1\r\n:{port}\r\n");
            assert!(r.contains(&range), "{range:?} not in {r:?}");
        }
        assert!(r.starts_with("*2\r\n"), "{r:?}");
    }
    // Locking goes on in both groups: SET NX on each leader, refused while held.
    for ((key, _), leader) in [(keys[0], leaders.0), (keys[1], leaders.1)] {
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
    let mut nodes = start(
        "cluster-two-groups-snapshot",
        "0:0-8191 1:8192-16383",
        &["--cluster-snapshot-every", "16"],
    );
    let keys = [("bar", 5061u16), ("foo", 12182u16)];
    let mut round = 0;
    let (home, one) = leaders(&nodes, keys, &mut round);
    let other = 3 - home - one;
    // Keys of the home group's slots, on every node before the third goes down.
    let mut h = Conn::connect(nodes.ports[home]);
    for i in 0..20 {
        assert_eq!(h.cmd(&["SET", &format!("{{bar}}{i}"), "home"]), b"+OK\r\n");
    }
    let dbsize = |p: u16| {
        let mut c = Conn::connect(p);
        c.cmd(&["READONLY"]);
        c.cmd(&["DBSIZE"])
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while dbsize(nodes.ports[other]) != dbsize(nodes.ports[home]) {
        assert!(
            Instant::now() < deadline,
            "the home group's keys never reached node {other}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = nodes.children[other].kill();
    let _ = nodes.children[other].wait();
    // Group 1's log runs far past it and is compacted.
    let mut g = Conn::connect(nodes.ports[one]);
    for i in 0..300 {
        assert_eq!(
            g.cmd(&["SET", &format!("{{foo}}{}", i % 100), "one"]),
            b"+OK\r\n"
        );
    }
    nodes.children[other] = nodes.spawn(other);
    nodes.listening(other);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (mine, theirs) = (dbsize(nodes.ports[other]), dbsize(nodes.ports[home]));
        if mine == theirs {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node {other} did not converge: DBSIZE {:?} there, {:?} on the home leader",
            String::from_utf8_lossy(&mine),
            String::from_utf8_lossy(&theirs)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // 20 + 100 keys and the two probes.
    assert_eq!(dbsize(nodes.ports[other]), b":122\r\n");
}
