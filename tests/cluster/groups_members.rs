//! Membership with several Raft groups: each group has its own, changed through its own
//! leader. A node joining a 3-node, 3-group cluster (`cluster-join yes`) opens every group
//! with no membership and learns each from that group's leader; RAFT ADDLEARNER / PROMOTE /
//! REMOVE with `GROUP g` change group g on its leader, and without it every group the node
//! leads (the error names the others' leaders). Leaders spread over the current voters: a
//! removed node's groups move to the others. RAFT TRANSFER takes `GROUP g` too.

use super::nodes::{group_field, group_members, keys_in, poll, Nodes, ScriptCluster};
use crate::common::Conn;
use std::time::{Duration, Instant};

const RANGES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

/// Keys of group `g`'s slots (`n` of them, named with `prefix`).
fn keys_of(g: usize, prefix: &str, n: usize) -> Vec<String> {
    let (a, b) = RANGES[g];
    keys_in(prefix, 0, a..=b).take(n).collect()
}

/// Every key holds its token on node `i`, read there linearizably (READONLY: the read waits
/// for its group's leader to confirm it; a node closing its clients as leadership moves is
/// asked again).
fn holds_all(nodes: &Nodes, i: usize, keys: &[(String, String)]) {
    for (k, v) in keys {
        nodes.read_until(i, &["GET", k], &format!("${}\r\n{v}\r\n", v.len()));
    }
}

/// Takes a lock on each of `keys` through its group's leader.
fn lock(nodes: &Nodes, leader: usize, keys: &[String], token: &str) -> Vec<(String, String)> {
    let mut c = Conn::connect(nodes.ports[leader]);
    keys.iter()
        .map(|k| {
            assert_eq!(
                c.cmd_str(&["SET", k, token, "NX", "PX", "600000"]),
                "+OK\r\n",
                "lock {k} on node {}",
                leader + 1
            );
            (k.clone(), token.to_string())
        })
        .collect()
}

#[test]
fn a_node_joins_every_group_and_a_removed_one_leaves_every_group() {
    let mut nodes = Nodes::new("cluster-groups-members")
        .groups(3)
        .joiner()
        .start();
    let l = nodes.raft_leaders(&[0, 1, 2], Duration::from_secs(30));
    let mut held = Vec::new();
    for (g, &leader) in l.iter().enumerate() {
        held.extend(lock(&nodes, leader, &keys_of(g, "before", 20), "t1"));
    }

    // Node 4 starts with no membership in any group: it elects nobody and holds nothing.
    nodes.start(3);
    let st = nodes.answer(3, &["RAFT", "STATUS"]);
    assert!(st.contains("\r\nmembers:0\r\n"), "{st:?}");
    for g in 0..3 {
        assert_eq!(
            group_field(&st, g, "members").as_deref(),
            Some("0"),
            "{st:?}"
        );
    }
    let (port4, peer4) = (nodes.ports[3].to_string(), nodes.peer_ports[3].to_string());
    let add = ["RAFT", "ADDLEARNER", "4", "127.0.0.1", &port4, &peer4];
    // Without GROUP: proposed in the group this node leads, the others' leaders named.
    let named = |g: usize| {
        format!(
            "group {g}: not the leader, node {} at 127.0.0.1:{} leads it (send it there with GROUP {g})",
            l[g] + 1,
            nodes.ports[l[g]]
        )
    };
    let others: Vec<String> = (1..3).map(named).collect();
    assert_eq!(
        nodes.answer(l[0], &add),
        format!("-ERR {} (proposed in group(s) 0)\r\n", others.join("; "))
    );
    // With GROUP: a non-leader names the leader; each group's leader adds it.
    let mut add_in = add.to_vec();
    add_in.extend(["GROUP", "1"]);
    assert_eq!(
        nodes.answer(l[0], &add_in),
        format!(
            "-ERR this node is not the leader of group 1: node {} at 127.0.0.1:{} leads it\r\n",
            l[1] + 1,
            nodes.ports[l[1]]
        )
    );
    for (g, &leader) in l.iter().enumerate().skip(1) {
        let gs = g.to_string();
        let mut a = add.to_vec();
        a.extend(["GROUP", &gs]);
        assert_eq!(nodes.answer(leader, &a), "+OK\r\n");
    }
    let mut again = add.to_vec();
    again.extend(["GROUP", "0"]);
    // (Once group 0 applied its change: until then a second change there is refused as one
    // in progress.)
    nodes.ask_until(l[0], &again, "-ERR node 4 is already a member\r\n");
    // It learns every group from that group's leader: its keys and its membership.
    holds_all(&nodes, 3, &held);
    for (g, &leader) in l.iter().enumerate() {
        let gs = g.to_string();
        nodes.ask_until(leader, &["RAFT", "PROMOTE", "4", "GROUP", &gs], "+OK\r\n");
    }
    poll(Duration::from_secs(20), || {
        let st = nodes.ask(3, &["RAFT", "STATUS"]);
        let all_voters = (0..3).all(|g| {
            let m = group_members(&st, g);
            m.len() == 4 && m.iter().all(|&(_, v)| v) && m.iter().any(|&(id, _)| id == 4)
        });
        if !all_voters || !st.contains("\r\nmembers:4\r\n") {
            return Err(format!("node 4 is not a voter of every group: {st:?}"));
        }
        for (g, (a, b)) in RANGES.iter().enumerate() {
            assert_eq!(
                group_field(&st, g, "slots"),
                Some(format!("{a}-{b}")),
                "{st:?}"
            );
        }
        Ok(())
    });
    // Four voters, three groups: the leaders stay spread, and a lock taken now reaches node 4.
    let l = nodes.raft_leaders(&[0, 1, 2, 3], Duration::from_secs(30));
    let mut after = Vec::new();
    for (g, &leader) in l.iter().enumerate() {
        after.extend(lock(&nodes, leader, &keys_of(g, "after", 5), "t2"));
    }
    holds_all(&nodes, 3, &after);
    held.extend(after);

    // Node 1 leaves every group, through each group's leader (itself for the group it leads).
    // First group 0 alone: the others go on replicating to it (the transport forgets a node
    // only once no group has it).
    nodes.ask_until(l[0], &["RAFT", "REMOVE", "1", "GROUP", "0"], "+OK\r\n");
    poll(Duration::from_secs(20), || {
        let statuses: Vec<String> = (1..4).map(|i| nodes.ask(i, &["RAFT", "STATUS"])).collect();
        let gone = statuses.iter().all(|st| {
            let m = group_members(st, 0);
            m.len() == 3 && !m.iter().any(|&(id, _)| id == 1)
        });
        gone.then_some(())
            .ok_or_else(|| format!("group 0 still has node 1: {statuses:#?}"))
    });
    let partial = lock(&nodes, l[1], &keys_of(1, "partial", 3), "t5");
    holds_all(&nodes, 0, &partial);
    held.extend(partial);
    for (g, &leader) in l.iter().enumerate().skip(1) {
        let gs = g.to_string();
        nodes.ask_until(leader, &["RAFT", "REMOVE", "1", "GROUP", &gs], "+OK\r\n");
    }
    poll(Duration::from_secs(20), || {
        let statuses: Vec<String> = (1..4).map(|i| nodes.ask(i, &["RAFT", "STATUS"])).collect();
        let gone = statuses.iter().all(|st| {
            (0..3).all(|g| {
                let m = group_members(st, g);
                m.len() == 3 && !m.iter().any(|&(id, _)| id == 1)
            })
        });
        gone.then_some(())
            .ok_or_else(|| format!("node 1 is still a member: {statuses:#?}"))
    });
    // Its groups move to the remaining voters, one each, while it still runs (a removed
    // leader hands its group over), and stay so once it is stopped.
    let l = nodes.raft_leaders(&[1, 2, 3], Duration::from_secs(30));
    nodes.stop(0);
    let l2 = nodes.raft_leaders(&[1, 2, 3], Duration::from_secs(30));
    assert_eq!(l, l2);
    for i in 1..4 {
        holds_all(&nodes, i, &held);
    }
    let mut last = Vec::new();
    for (g, &leader) in l.iter().enumerate() {
        last.extend(lock(&nodes, leader, &keys_of(g, "removed", 5), "t3"));
    }
    for i in 1..4 {
        holds_all(&nodes, i, &last);
    }

    // RAFT TRANSFER with GROUP: group 1's leader hands it to another voter (which, leading
    // two groups then, gives it back to the group's preferred voter).
    let to = (1..4).find(|&i| i != l[1] && i != l[2]).unwrap_or(l[0]);
    let to_id = (to + 1).to_string();
    assert_eq!(
        nodes.answer(l[0], &["RAFT", "TRANSFER", &to_id, "GROUP", "1"]),
        format!(
            "-ERR this node is not the leader of group 1: node {} at 127.0.0.1:{} leads it\r\n",
            l[1] + 1,
            nodes.ports[l[1]]
        )
    );
    for (args, want) in [
        (&["GROUP", "7"][..], "-ERR no Raft group 7 on this node\r\n"),
        (
            &["GROUP", "x"],
            "-ERR group must be a non-negative integer\r\n",
        ),
        (&["GROUPS", "1"], "-ERR syntax error\r\n"),
        (&["GROUP"], "-ERR syntax error\r\n"),
    ] {
        let mut a = vec!["RAFT", "TRANSFER", &to_id];
        a.extend(args);
        assert_eq!(nodes.answer(l[1], &a), want, "{a:?}");
    }
    let elected = format!("Cluster node {to_id}: elected leader of group 1");
    let before = nodes.log(to).matches(&elected).count();
    assert_eq!(
        nodes.ask(l[1], &["RAFT", "TRANSFER", &to_id, "GROUP", "1"]),
        "+OK\r\n"
    );
    poll(Duration::from_secs(20), || {
        let log = nodes.log(to);
        (log.matches(&elected).count() > before)
            .then_some(())
            .ok_or_else(|| format!("node {to_id} was never elected in group 1: {log}"))
    });
    let l3 = nodes.raft_leaders(&[1, 2, 3], Duration::from_secs(30));
    assert_eq!(l3, l);
    let mut c = Conn::connect(nodes.ports[l[1]]);
    let k = keys_of(1, "transfer", 1);
    assert_eq!(c.cmd_str(&["SET", &k[0], "t4", "NX"]), "+OK\r\n");
}

/// `scripts/cluster add 4` makes node 4 a voter of every group of a 3-group cluster, and
/// `scripts/cluster remove 1` takes node 1 out of every group and stops it.
#[test]
fn the_cluster_script_adds_and_removes_a_node_in_every_group() {
    let sc = ScriptCluster::new("cluster-script-members", 4);
    let (base, dir_s) = (sc.base, sc.dir_str());
    let run = |args: &[&str]| sc.run(args);
    sc.start_groups(3);
    // Empty while the node does not answer (node 4 just started, a node closing its clients
    // as leadership moves): the callers poll.
    let status = |port: u16| {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            return String::new();
        }
        let mut c = Conn::connect(port);
        c.send(&["RAFT", "STATUS"]);
        c.try_read_reply(Duration::from_secs(5))
            .map(|r| String::from_utf8_lossy(&r).into_owned())
            .unwrap_or_default()
    };
    // Every group on the node asked lists exactly `ids`, all voters.
    let members_are = |port: u16, ids: &[u64]| {
        let st = status(port);
        (0..3).all(|g| {
            let mut m = group_members(&st, g);
            m.sort_unstable();
            m == ids.iter().map(|&id| (id, true)).collect::<Vec<_>>()
        })
    };
    let (ok, out) = run(&["add", "4", &dir_s]);
    assert!(ok, "{out}");
    // Node 4 learns three groups' logs and is promoted in each: on a loaded machine that
    // can take a while.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !members_are(base + 3, &[1, 2, 3, 4]) {
        assert!(
            Instant::now() < deadline,
            "node 4 is not a voter of every group: {:?}",
            status(base + 3)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (ok, out) = run(&["remove", "1", &dir_s]);
    assert!(ok, "{out}");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", base)).is_err(),
        "node 1 still runs: {out}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    for port in base + 1..base + 4 {
        while !members_are(port, &[2, 3, 4]) {
            assert!(Instant::now() < deadline, "{:?}", status(port));
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // A removed node is not started again.
    let (_, out) = run(&["start", &dir_s]);
    assert!(
        out.contains("node 1 was removed from the cluster: not started"),
        "{out}"
    );
    assert!(std::net::TcpStream::connect(("127.0.0.1", base)).is_err());
}
