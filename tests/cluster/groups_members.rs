//! Membership with several Raft groups: each group has its own, changed through its own
//! leader. A node joining a 3-node, 3-group cluster (`cluster-join yes`) opens every group
//! with no membership and learns each from that group's leader; RAFT ADDLEARNER / PROMOTE /
//! REMOVE with `GROUP g` change group g on its leader, and without it every group the node
//! leads (the error names the others' leaders). Leaders spread over the current voters: a
//! removed node's groups move to the others. RAFT TRANSFER takes `GROUP g` too.

use super::groups_config::ScriptCluster;
use crate::common;

use common::{cluster_node_args, cluster_ports, resp_cmd, Conn, TempDir};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "cluster-groups-members-secret-0123456789abcdef";
const RANGES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

/// Nodes 1-4 (indexes 0-3); node 4 joins later. Each node's output goes to `n<id>.log`.
struct Nodes {
    ports: Vec<(u16, u16)>,
    children: Vec<Option<Child>>,
    args: Vec<Vec<String>>,
    dir: TempDir,
}

impl Nodes {
    fn new(name: &str) -> Nodes {
        let dir = TempDir::new(name);
        let (ports, all) = cluster_ports(4);
        let founders: Vec<&str> = all.split(' ').take(3).collect();
        let founders = founders.join(" ");
        let mut args = Vec::new();
        for (i, (port, _)) in ports.iter().enumerate() {
            let id = i as u64 + 1;
            let node_dir = dir.0.join(format!("n{id}"));
            std::fs::create_dir_all(&node_dir).unwrap();
            // The joining node names the founders and itself.
            let peers = if id == 4 { &all } else { &founders };
            let mut a = cluster_node_args(*port, &node_dir, id, peers, SECRET);
            a.extend(
                ["--cluster-enabled", "yes", "--cluster-groups", "3"]
                    .iter()
                    .map(|s| s.to_string()),
            );
            if id == 4 {
                a.extend(["--cluster-join".to_string(), "yes".to_string()]);
            }
            args.push(a);
        }
        Nodes {
            ports,
            children: (0..4).map(|_| None).collect(),
            args,
            dir,
        }
    }

    fn start(&mut self, i: usize) {
        let log = std::fs::File::create(self.log_path(i)).unwrap();
        let child = Command::new(common::deadbolt_bin())
            .args(&self.args[i])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn deadbolt");
        self.children[i] = Some(child);
        let p = self.ports[i].0;
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", p)).is_err() {
            assert!(Instant::now() < deadline, "node on {p} never listened");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn log_path(&self, i: usize) -> std::path::PathBuf {
        self.dir.0.join(format!("n{}.log", i + 1))
    }

    fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.log_path(i)).unwrap_or_default()
    }

    /// SIGTERM, then waits for the exit.
    fn stop(&mut self, i: usize) {
        let mut c = self.children[i].take().expect("running");
        let ok = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        while c.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "node {} did not exit", i + 1);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn ask(&self, i: usize, args: &[&str]) -> String {
        let mut c = Conn::connect(self.ports[i].0);
        c.send(args);
        let r = c.try_read_reply(Duration::from_secs(2)).unwrap_or_default();
        String::from_utf8_lossy(&r).into_owned()
    }

    /// `ask`, again every 100 ms for up to 10 s until the reply is `want`.
    fn ask_until(&self, i: usize, args: &[&str], want: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = self.ask(i, args);
            if r == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{args:?} on node {} answers {r:?}",
                i + 1
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A RAFT STATUS field of a `group<g>:a=…,b=…` line.
fn group_field(status: &str, g: usize, name: &str) -> Option<String> {
    let line = status
        .split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("group{g}:")))?;
    line.split(',')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .map(str::to_string)
}

/// The `group<g>_member<i>:` lines of a RAFT STATUS, as (id, voter).
fn group_members(status: &str, g: usize) -> Vec<(u64, bool)> {
    status
        .split("\r\n")
        .filter_map(|l| l.strip_prefix(&format!("group{g}_member")))
        .filter_map(|l| {
            let (_, rest) = l.split_once(":id=")?;
            let (id, rest) = rest.split_once(',')?;
            Some((id.parse().ok()?, rest.starts_with("voter=1")))
        })
        .collect()
}

/// Each group's leader (node index) once every node of `live` names the same leader for it,
/// that node says it leads it, and (`spread`) no node of `live` leads two groups.
fn leaders(nodes: &Nodes, live: &[usize], spread: bool, within: Duration) -> [usize; 3] {
    let deadline = Instant::now() + within;
    loop {
        let statuses: Vec<String> = live
            .iter()
            .map(|&i| nodes.ask(i, &["RAFT", "STATUS"]))
            .collect();
        let mut out = [usize::MAX; 3];
        for (g, slot) in out.iter_mut().enumerate() {
            let named: Vec<Option<String>> = statuses
                .iter()
                .map(|s| group_field(s, g, "leader"))
                .collect();
            let leads: Vec<usize> = (0..live.len())
                .filter(|&k| group_field(&statuses[k], g, "role").as_deref() == Some("leader"))
                .map(|k| live[k])
                .collect();
            if let [l] = leads[..] {
                let id = (l + 1).to_string();
                if named.iter().all(|n| n.as_deref() == Some(id.as_str())) {
                    *slot = l;
                }
            }
        }
        let mut distinct = out.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        if !out.contains(&usize::MAX) && (!spread || distinct.len() == 3) {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "no {}leader in every group: {statuses:#?}",
            if spread { "spread " } else { "" }
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Keys of group `g`'s slots (`n` of them, named with `prefix`).
fn keys_of(nodes: &Nodes, g: usize, prefix: &str, n: usize) -> Vec<String> {
    let (a, b) = RANGES[g];
    // Node 2 runs throughout.
    let mut c = Conn::connect(nodes.ports[1].0);
    (0..)
        .map(|k| format!("{prefix}{k}"))
        .filter(|k| {
            let r = c.cmd_str(&["CLUSTER", "KEYSLOT", k]);
            let s: u16 = r.trim_start_matches(':').trim_end().parse().unwrap();
            (a..=b).contains(&s)
        })
        .take(n)
        .collect()
}

/// Every key holds its token on node `i`, read there linearizably (READONLY: the read waits
/// for its group's leader to confirm it), within 15 s.
fn holds_all(nodes: &Nodes, i: usize, keys: &[(String, String)]) {
    let deadline = Instant::now() + Duration::from_secs(15);
    // A node closes its plain clients when it stops leading the home group (a removal, the
    // leadership moving to its preferred voter): the read connects again then.
    let connect = || loop {
        let mut c = Conn::connect(nodes.ports[i].0);
        c.send(&["READONLY"]);
        match c.try_read_reply(Duration::from_secs(5)) {
            Some(r) if r == b"+OK\r\n" => return c,
            got => assert!(
                Instant::now() < deadline,
                "node {} answers READONLY with {got:?}",
                i + 1
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut c = connect();
    for (k, v) in keys {
        let want = format!("${}\r\n{v}\r\n", v.len());
        loop {
            let sent = c.try_send_raw(&resp_cmd(&["GET", k])).is_ok();
            let got = match c.try_read_reply(Duration::from_secs(5)).filter(|_| sent) {
                Some(r) => String::from_utf8_lossy(&r).into_owned(),
                None => {
                    c = connect();
                    String::new()
                }
            };
            if got == want {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {} answers GET {k} with {got:?}",
                i + 1
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Takes a lock on each of `keys` through its group's leader.
fn lock(nodes: &Nodes, leader: usize, keys: &[String], token: &str) -> Vec<(String, String)> {
    let mut c = Conn::connect(nodes.ports[leader].0);
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
    let mut nodes = Nodes::new("cluster-groups-members");
    for i in 0..3 {
        nodes.start(i);
    }
    let l = leaders(&nodes, &[0, 1, 2], true, Duration::from_secs(30));
    let mut held = Vec::new();
    for (g, &leader) in l.iter().enumerate() {
        held.extend(lock(
            &nodes,
            leader,
            &keys_of(&nodes, g, "before", 20),
            "t1",
        ));
    }

    // Node 4 starts with no membership in any group: it elects nobody and holds nothing.
    nodes.start(3);
    let st = nodes.ask(3, &["RAFT", "STATUS"]);
    assert!(st.contains("\r\nmembers:0\r\n"), "{st:?}");
    for g in 0..3 {
        assert_eq!(
            group_field(&st, g, "members").as_deref(),
            Some("0"),
            "{st:?}"
        );
    }
    let (port4, peer4) = (nodes.ports[3].0.to_string(), nodes.ports[3].1.to_string());
    let add = ["RAFT", "ADDLEARNER", "4", "127.0.0.1", &port4, &peer4];
    // Without GROUP: proposed in the group this node leads, the others' leaders named.
    let named = |g: usize| {
        format!(
            "group {g}: not the leader, node {} at 127.0.0.1:{} leads it (send it there with GROUP {g})",
            l[g] + 1,
            nodes.ports[l[g]].0
        )
    };
    let others: Vec<String> = (1..3).map(named).collect();
    assert_eq!(
        nodes.ask(l[0], &add),
        format!("-ERR {} (proposed in group(s) 0)\r\n", others.join("; "))
    );
    // With GROUP: a non-leader names the leader; each group's leader adds it.
    let mut add_in = add.to_vec();
    add_in.extend(["GROUP", "1"]);
    assert_eq!(
        nodes.ask(l[0], &add_in),
        format!(
            "-ERR this node is not the leader of group 1: node {} at 127.0.0.1:{} leads it\r\n",
            l[1] + 1,
            nodes.ports[l[1]].0
        )
    );
    for (g, &leader) in l.iter().enumerate().skip(1) {
        let gs = g.to_string();
        let mut a = add.to_vec();
        a.extend(["GROUP", &gs]);
        assert_eq!(nodes.ask(leader, &a), "+OK\r\n");
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
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = nodes.ask(3, &["RAFT", "STATUS"]);
        let all_voters = (0..3).all(|g| {
            let m = group_members(&st, g);
            m.len() == 4 && m.iter().all(|&(_, v)| v) && m.iter().any(|&(id, _)| id == 4)
        });
        if all_voters && st.contains("\r\nmembers:4\r\n") {
            for (g, (a, b)) in RANGES.iter().enumerate() {
                assert_eq!(
                    group_field(&st, g, "slots"),
                    Some(format!("{a}-{b}")),
                    "{st:?}"
                );
            }
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node 4 is not a voter of every group: {st:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Four voters, three groups: the leaders stay spread, and a lock taken now reaches node 4.
    let l = leaders(&nodes, &[0, 1, 2, 3], true, Duration::from_secs(30));
    let mut after = Vec::new();
    for (g, &leader) in l.iter().enumerate() {
        after.extend(lock(&nodes, leader, &keys_of(&nodes, g, "after", 5), "t2"));
    }
    holds_all(&nodes, 3, &after);
    held.extend(after);

    // Node 1 leaves every group, through each group's leader (itself for the group it leads).
    // First group 0 alone: the others go on replicating to it (the transport forgets a node
    // only once no group has it).
    nodes.ask_until(l[0], &["RAFT", "REMOVE", "1", "GROUP", "0"], "+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(1..4).all(|i| {
        let m = group_members(&nodes.ask(i, &["RAFT", "STATUS"]), 0);
        m.len() == 3 && !m.iter().any(|&(id, _)| id == 1)
    }) {
        assert!(Instant::now() < deadline, "group 0 still has node 1");
        std::thread::sleep(Duration::from_millis(100));
    }
    let partial = lock(&nodes, l[1], &keys_of(&nodes, 1, "partial", 3), "t5");
    holds_all(&nodes, 0, &partial);
    held.extend(partial);
    for (g, &leader) in l.iter().enumerate().skip(1) {
        let gs = g.to_string();
        nodes.ask_until(leader, &["RAFT", "REMOVE", "1", "GROUP", &gs], "+OK\r\n");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let statuses: Vec<String> = (1..4).map(|i| nodes.ask(i, &["RAFT", "STATUS"])).collect();
        let gone = statuses.iter().all(|st| {
            (0..3).all(|g| {
                let m = group_members(st, g);
                m.len() == 3 && !m.iter().any(|&(id, _)| id == 1)
            })
        });
        if gone {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node 1 is still a member: {statuses:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Its groups move to the remaining voters, one each, while it still runs (a removed
    // leader hands its group over), and stay so once it is stopped.
    let l = leaders(&nodes, &[1, 2, 3], true, Duration::from_secs(30));
    nodes.stop(0);
    let l2 = leaders(&nodes, &[1, 2, 3], true, Duration::from_secs(30));
    assert_eq!(l, l2);
    for i in 1..4 {
        holds_all(&nodes, i, &held);
    }
    let mut last = Vec::new();
    for (g, &leader) in l.iter().enumerate() {
        last.extend(lock(
            &nodes,
            leader,
            &keys_of(&nodes, g, "removed", 5),
            "t3",
        ));
    }
    for i in 1..4 {
        holds_all(&nodes, i, &last);
    }

    // RAFT TRANSFER with GROUP: group 1's leader hands it to another voter (which, leading
    // two groups then, gives it back to the group's preferred voter).
    let to = (1..4).find(|&i| i != l[1] && i != l[2]).unwrap_or(l[0]);
    let to_id = (to + 1).to_string();
    assert_eq!(
        nodes.ask(l[0], &["RAFT", "TRANSFER", &to_id, "GROUP", "1"]),
        format!(
            "-ERR this node is not the leader of group 1: node {} at 127.0.0.1:{} leads it\r\n",
            l[1] + 1,
            nodes.ports[l[1]].0
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
        assert_eq!(nodes.ask(l[1], &a), want, "{a:?}");
    }
    let elected = format!("Cluster node {to_id}: elected leader of group 1");
    let before = nodes.log(to).matches(&elected).count();
    assert_eq!(
        nodes.ask(l[1], &["RAFT", "TRANSFER", &to_id, "GROUP", "1"]),
        "+OK\r\n"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while nodes.log(to).matches(&elected).count() == before {
        assert!(
            Instant::now() < deadline,
            "node {to_id} was never elected in group 1: {}",
            nodes.log(to)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let l3 = leaders(&nodes, &[1, 2, 3], true, Duration::from_secs(30));
    assert_eq!(l3, l);
    let mut c = Conn::connect(nodes.ports[l[1]].0);
    let k = keys_of(&nodes, 1, "transfer", 1);
    assert_eq!(c.cmd_str(&["SET", &k[0], "t4", "NX"]), "+OK\r\n");
}

/// `scripts/cluster add 4` makes node 4 a voter of every group of a 3-group cluster, and
/// `scripts/cluster remove 1` takes node 1 out of every group and stops it.
#[test]
fn the_cluster_script_adds_and_removes_a_node_in_every_group() {
    let sc = ScriptCluster::new("cluster-script-members", 4);
    let (base, dir_s) = (sc.base, sc.dir_str());
    let run = |args: &[&str]| sc.run(args);
    let (ok, out) = run(&[
        "start",
        &dir_s,
        "--cluster-enabled",
        "yes",
        "--cluster-groups",
        "3",
    ]);
    assert!(ok, "{out}");
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
    let deadline = Instant::now() + Duration::from_secs(10);
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
