//! Several Raft groups as an operator configures them: `cluster-groups 3` on three nodes splits
//! the slots as `redis-cli --cluster create` splits them among three masters, each node leads
//! one group once settled (and again after a restart), RAFT STATUS and CLUSTER INFO report
//! every group; a bad table, or one other than the logs were created with, refuses to start
//! with the reason; `scripts/cluster` starts such a cluster in one command.

use super::nodes::{exit_output, group_field, keys_in, poll, Nodes, ScriptCluster, SECRET};
use crate::common;

use common::{cluster_node_args, cluster_ports, TempDir};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RANGES: [&str; 3] = ["0-5460", "5461-10922", "10923-16383"];

/// Each group's leader (node index) once every node names the same leader for each group and
/// each node leads exactly one group: group g its preferred voter, node g + 1.
fn spread(nodes: &Nodes, within: Duration) -> Vec<usize> {
    nodes.raft_leaders(&[0, 1, 2], within)
}

fn info_field(info: &str, name: &str) -> String {
    info.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {info:?}"))
        .to_string()
}

#[test]
fn a_bad_slot_table_refuses_to_start_with_the_reason() {
    let dir = TempDir::new("cluster-groups-refused");
    let (ports, peers) = cluster_ports(3);
    let base = cluster_node_args(ports[0].0, &dir.0, 1, &peers, SECRET);
    for (extra, why) in [
        (
            &["--cluster-enabled", "yes", "--cluster-slot-groups", "0:0-100 1:200-16383"][..],
            "slots 101-199 are owned by no group",
        ),
        (
            &["--cluster-enabled", "yes", "--cluster-slot-groups", "0:0-9000,1:8000-16383"],
            "slot 8000 is given to both group 0 and group 1",
        ),
        (
            &["--cluster-enabled", "yes", "--cluster-slot-groups", "0:0-8191 2:8192-16383"],
            "group 1 owns no slot",
        ),
        (
            &["--cluster-enabled", "yes", "--cluster-groups", "0"],
            "argument must be between 1 and 64 inclusive",
        ),
        (
            &["--cluster-enabled", "yes", "--cluster-groups", "3", "--cluster-slot-groups", "0:0-16383"],
            "set one of them, not both",
        ),
        (
            &["--cluster-groups", "3"],
            "several Raft groups need deadbolt's Raft cluster mode (cluster-node-id, cluster-peers) with cluster-enabled yes",
        ),
    ] {
        let child = Command::new(common::deadbolt_bin())
            .args(&base)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let (status, out) = exit_output(child);
        assert!(!status.success(), "{extra:?} started");
        assert!(out.contains(why), "{extra:?}: {why:?} not in {out:?}");
    }
    // None of them left any cluster state behind.
    assert!(!dir.0.join("cluster").exists());
}

#[test]
fn three_groups_spread_their_leaders_and_report_every_group() {
    let mut nodes = Nodes::new("cluster-three-groups").groups(3).start();
    let leaders = spread(&nodes, Duration::from_secs(30));
    for i in 0..3 {
        let st = nodes.answer(i, &["RAFT", "STATUS"]);
        // The first lines are the home group's, as with one group.
        let home_role = if leaders[0] == i {
            "leader"
        } else {
            "follower"
        };
        assert!(st.contains(&format!("\r\nrole:{home_role}\r\n")), "{st:?}");
        assert!(
            st.contains(&format!("\r\nleader:{}\r\n", leaders[0] + 1)),
            "{st:?}"
        );
        assert!(st.contains("\r\ngroups:3\r\n"), "{st:?}");
        for (g, range) in RANGES.iter().enumerate() {
            assert_eq!(
                group_field(&st, g, "slots").as_deref(),
                Some(*range),
                "{st:?}"
            );
            assert!(group_field(&st, g, "term").is_some_and(|t| t != "0"));
            // The group's leader knows each member's lag; the others do not.
            for m in 0..3 {
                let line = st
                    .split("\r\n")
                    .find_map(|l| l.strip_prefix(&format!("group{g}_member{m}:")))
                    .unwrap_or_else(|| panic!("group{g}_member{m} not in {st:?}"));
                if leaders[g] == i {
                    assert!(
                        line.contains(",voter=1,matched=") && !line.contains('?'),
                        "{line}"
                    );
                } else {
                    assert!(line.ends_with("matched=?,lag=?"), "{line}");
                }
            }
        }
        let info = nodes.answer(i, &["CLUSTER", "INFO"]);
        for (field, want) in [
            ("cluster_state", "ok"),
            ("cluster_slots_assigned", "16384"),
            ("cluster_slots_ok", "16384"),
            ("cluster_slots_fail", "0"),
            ("cluster_known_nodes", "3"),
            ("cluster_size", "3"),
        ] {
            assert_eq!(info_field(&info, field), want, "{field} in {info:?}");
        }
        // Each node leads a group, so it answers as a Redis Cluster master does (Redisson
        // probes a slot's master with WAIT 0 0 on connect), whichever group is the home one.
        let role = nodes.answer(i, &["ROLE"]);
        assert!(
            role.starts_with("*3\r\n$6\r\nmaster\r\n"),
            "node {}: ROLE {role:?}",
            i + 1
        );
        let repl = nodes.answer(i, &["INFO", "replication"]);
        assert!(repl.contains("role:master\r\n"), "node {}: {repl:?}", i + 1);
        let wait = nodes.answer(i, &["WAIT", "0", "0"]);
        assert!(wait.starts_with(':'), "node {}: WAIT 0 0: {wait:?}", i + 1);
        // The table is fixed: CONFIG SET refuses it as Redis refuses an immutable directive.
        assert_eq!(
            nodes.answer(i, &["CONFIG", "GET", "cluster-groups"]),
            "*2\r\n$14\r\ncluster-groups\r\n$1\r\n3\r\n"
        );
        assert_eq!(
            nodes.answer(i, &["CONFIG", "SET", "cluster-groups", "1"]),
            "-ERR CONFIG SET failed (possibly related to argument 'cluster-groups') - can't set immutable config\r\n"
        );
    }
    // CLUSTER SLOTS: each range with its group's leader and no replica (every member leads a
    // group, and a Redis Cluster node is a master or a replica, never both: redis-py keeps the
    // role it read last per address).
    for i in 0..3 {
        let r = nodes.answer(i, &["CLUSTER", "SLOTS"]);
        assert!(r.starts_with("*3\r\n"), "{r:?}");
        for (g, range) in RANGES.iter().enumerate() {
            let (a, b) = range.split_once('-').unwrap();
            let port = nodes.ports[leaders[g]];
            let entry = format!("*3\r\n:{a}\r\n:{b}\r\n*4\r\n$9\r\n127.0.0.1\r\n:{port}\r\n");
            assert!(r.contains(&entry), "{entry:?} not in {r:?}");
        }
    }
    // redis-cli's own cluster check reads CLUSTER NODES and INFO of every node: 3 masters
    // owning their ranges, every slot covered, all nodes agreeing.
    let out = Command::new("redis-cli")
        .args([
            "--cluster",
            "check",
            &format!("127.0.0.1:{}", nodes.ports[0]),
        ])
        .output()
        .expect("redis-cli");
    let out = common::all_output(&out);
    for want in [
        "[OK] 0 keys in 3 masters.",
        "[OK] All nodes agree about slots configuration.",
        "[OK] All 16384 slots covered.",
    ] {
        assert!(out.contains(want), "{want:?} not in {out}");
    }
    redis_py_locks_in_every_group(&nodes);
    // Each group's leader acknowledges a write to one of its slots.
    for (g, range) in RANGES.iter().enumerate() {
        let (a, b) = range.split_once('-').unwrap();
        let (a, b): (u16, u16) = (a.parse().unwrap(), b.parse().unwrap());
        let key = keys_in("k", 0, a..=b).next().unwrap();
        assert_eq!(nodes.answer(leaders[g], &["SET", &key, "v"]), "+OK\r\n");
    }
    // Two nodes frozen: no group keeps a live leader, and the survivor says so.
    let survivor = leaders[1];
    let frozen: Vec<usize> = (0..3).filter(|&i| i != survivor).collect();
    for &i in &frozen {
        nodes.signal(i, "-STOP");
    }
    poll(Duration::from_secs(15), || {
        // While it still leads group 1 its reply waits for a read barrier no quorum confirms,
        // and is dropped (the connection closed) when it steps down: asked again.
        let info = nodes.ask(survivor, &["CLUSTER", "INFO"]);
        let n = |f: &str| info_field(&info, f).parse::<u32>().unwrap();
        if !info.is_empty()
            && info_field(&info, "cluster_state") == "fail"
            && n("cluster_slots_ok") == 0
        {
            assert_eq!(
                n("cluster_slots_assigned"),
                n("cluster_slots_fail"),
                "{info:?}"
            );
            Ok(())
        } else {
            Err(format!("the survivor still says {info:?}"))
        }
    });
    for &i in &frozen {
        nodes.signal(i, "-CONT");
    }
    spread(&nodes, Duration::from_secs(30));
    // A node stopped as an operator stops it (SIGTERM: it hands its group over first) …
    let k = 2;
    nodes.stop(k);
    // … refuses to start with a table other than the one its logs were created with …
    let (status, out) = nodes.start_refused(k, &["--cluster-groups", "2"]);
    assert!(!status.success());
    assert!(
        out.contains("is not the one this node's cluster logs")
            && out.contains(
                "start it with cluster-slot-groups \"0:0-5460 1:5461-10922 2:10923-16383\""
            ),
        "{out:?}"
    );
    // … and, started again with the same one, takes its share of the leaders back.
    nodes.start(k);
    spread(&nodes, Duration::from_secs(30));
}

/// `scripts/cluster start DIR --cluster-enabled yes --cluster-groups 3` starts a 3-node,
/// 3-group cluster; `status` shows each group, each node leading one once settled.
#[test]
fn the_cluster_script_starts_three_groups_in_one_command() {
    let sc = ScriptCluster::new("cluster-script-groups", 3);
    let dir_s = sc.dir_str();
    let run = |args: &[&str]| sc.run(args);
    sc.start_groups(3);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ok, out) = run(&["status", &dir_s]);
        let leads: Vec<&str> = out
            .lines()
            .filter_map(|l| l.trim().strip_prefix("leads group(s): "))
            .collect();
        let mut sorted = leads.clone();
        sorted.sort_unstable();
        if ok && sorted == ["0", "1", "2"] {
            for (g, range) in RANGES.iter().enumerate() {
                assert!(
                    out.contains(&format!("group {g} slots {range}: leader node ")),
                    "{out}"
                );
            }
            break;
        }
        assert!(Instant::now() < deadline, "never one group per node: {out}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// redis-py's RedisCluster sees every node as a primary and locks (SET NX, then a release
/// script: EVALSHA after SCRIPT LOAD on the primaries) keys of every group.
fn redis_py_locks_in_every_group(nodes: &Nodes) {
    let venv = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/python/.venv/bin/python"
    );
    let python = if std::path::Path::new(venv).exists() {
        venv.to_string()
    } else {
        std::env::var("DEADBOLT_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
    };
    let startup: Vec<String> = nodes
        .ports
        .iter()
        .map(|p| format!("ClusterNode('127.0.0.1', {p})"))
        .collect();
    let script = format!(
        r#"
from redis.cluster import RedisCluster, ClusterNode
rc = RedisCluster(startup_nodes=[{}])
groups = set()
for n in range(200):
    name = "lock%d" % n
    slot = rc.keyslot(name)
    g = 0 if slot <= 5460 else 1 if slot <= 10922 else 2
    if g in groups:
        continue
    node = rc.get_node_from_key(name)
    assert node.server_type == "primary", (name, node)
    with rc.lock(name, timeout=10):
        assert not rc.lock(name, timeout=10).acquire(blocking=False)
    groups.add(g)
assert groups == {{0, 1, 2}}, groups
assert all(n.server_type == "primary" for n in rc.get_nodes()), rc.get_nodes()
print("ok")
"#,
        startup.join(", ")
    );
    let out = Command::new(&python)
        .args(["-c", &script])
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    assert!(
        out.status.success() && out.stdout == b"ok\n",
        "redis-py ({python}; point DEADBOLT_TEST_PYTHON at a python with redis-py): {}",
        common::all_output(&out)
    );
}

/// A group whose preferred leader was killed gets a new leader, which must not hand the group
/// back while the killed node's port refuses: raft holds proposals while a transfer is under
/// way, so a transfer towards a dead node would stall the group right after its failover. Once
/// the node is back and caught up, the group goes back to it.
#[test]
fn a_new_leader_hands_nothing_to_a_preferred_voter_that_is_down() {
    let mut nodes = Nodes::new("groups-spread-down").groups(3).start();
    spread(&nodes, Duration::from_secs(30));
    const HANDS_BACK: &str = "Cluster group 1: handing leadership to node 2";
    let before: Vec<usize> = (0..3)
        .map(|i| nodes.log(i).matches(HANDS_BACK).count())
        .collect();
    // Node 2 leads group 1 (its preferred voter).
    nodes.kill(1);
    let new = poll(Duration::from_secs(20), || {
        let st = nodes.ask(0, &["RAFT", "STATUS"]);
        match group_field(&st, 1, "leader").as_deref() {
            Some("1") => Ok(0),
            Some("3") => Ok(2),
            other => Err(format!("group 1's leader: {other:?}")),
        }
    });
    // Longer than the spread's retry period (2 s): no transfer is started towards node 2.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert_eq!(
            nodes.log(new).matches(HANDS_BACK).count(),
            before[new],
            "node {} handed group 1 to the node it lost",
            new + 1
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    nodes.restart(1);
    spread(&nodes, Duration::from_secs(30));
    // Having handed the group back, the node that stood in does not campaign against the
    // leader it just voted for (an election it hastened earlier is over).
    let log = nodes.log(new);
    let handed = log.rfind(HANDS_BACK).expect("group 1 was handed back");
    assert!(
        !log[handed..].contains("starting a new election"),
        "node {} campaigned after handing group 1 back:\n{}",
        new + 1,
        &log[handed..]
    );
}
