//! Lock insight on a three-node cluster. Every lock operation runs on the leader (followers
//! refuse writes), so the leader's log line, `LOCKS LATE`, `LOCKS HELD`, metrics and page are
//! the cluster's view. A follower applies the leader's log without counting it as lock
//! operations of its own: its views stay empty, its page names the leader to look at, and its
//! metrics say `deadbolt_lock_view_leader 0`.

use crate::common;
use crate::lock_insight_util;

use common::{cluster_node_args, cluster_ports, Conn, Server, TempDir};
use lock_insight_util::{http_get, number_after, script};
use std::process::Command;
use std::time::{Duration, Instant};

const SECRET: &str = "lock-insight-cluster-secret-0123456789";

struct Node {
    id: u64,
    port: u16,
    metrics: u16,
    server: Server,
}

fn cluster(dir: &TempDir) -> Vec<Node> {
    let (ports, peers) = cluster_ports(3);
    let mut nodes = Vec::new();
    for (i, (port, _)) in ports.iter().enumerate() {
        let id = i as u64 + 1;
        let node_dir = dir.0.join(format!("n{id}"));
        std::fs::create_dir_all(&node_dir).unwrap();
        let metrics = common::free_port();
        let mut cmd = Command::new(common::deadbolt_bin());
        cmd.args(cluster_node_args(*port, &node_dir, id, &peers, SECRET))
            .args(["--metrics-port", &metrics.to_string()]);
        nodes.push(Node {
            id,
            port: *port,
            metrics,
            server: common::start_command(cmd),
        });
    }
    nodes
}

/// The node that leads and serves writes.
fn leader(nodes: &[Node]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for (i, n) in nodes.iter().enumerate() {
            let mut c = Conn::connect(n.port);
            if c.cmd_str(&["ROLE"]).starts_with("*3\r\n$6\r\nmaster") {
                c.send(&["SET", "__probe", "1"]);
                if c.try_read_reply(Duration::from_secs(2)).as_deref() == Some(b"+OK\r\n") {
                    return i;
                }
            }
        }
        assert!(Instant::now() < deadline, "no leader serving within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls the metrics port's `path` until it contains every one of `want`.
fn page_with(port: u16, path: &str, want: &[String]) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, body) = http_get(port, path);
        if want.iter().all(|w| body.contains(w)) {
            return body;
        }
        assert!(Instant::now() < deadline, "{want:?} in {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_leader_shows_the_clusters_locks_and_followers_name_the_leader() {
    let dir = TempDir::new("lock-insight-cluster");
    let nodes = cluster(&dir);
    let l = leader(&nodes);
    let lead = &nodes[l];
    let (mut a, mut b) = (Conn::connect(lead.port), Conn::connect(lead.port));
    assert_eq!(a.cmd(&["CLIENT", "SETNAME", "worker-a"]), b"+OK\r\n");
    let a_id = number_after(&a.cmd_str(&["CLIENT", "ID"]), ":");
    let key = "lock:orders:42";
    assert_eq!(a.cmd(&["SET", key, "tok-a", "NX", "PX", "200"]), b"+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.cmd(&["PTTL", key]) != b":-2\r\n" {
        assert!(Instant::now() < deadline, "the lease never ran out");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        b.cmd(&["SET", key, "tok-b", "NX", "PX", "60000"]),
        b"+OK\r\n"
    );
    let release = script("redis-py/lua_release_script.lua");
    assert_eq!(a.cmd(&["EVAL", &release, "1", key, "tok-a"]), b":0\r\n");

    // The leader: the log line, the history, the held lock, the metrics and the page.
    lead.server.wait_log(
        &format!("Lock released late: key '{key}' by client id={a_id} addr="),
        Duration::from_secs(5),
    );
    let hist = a.cmd_str(&["LOCKS", "LATE"]);
    assert!(hist.starts_with("*1\r\n"), "{hist:?}");
    let late = number_after(&hist, "$7\r\nlate-ms\r\n:");
    let held = a.cmd_str(&["LOCKS", "HELD", "0", "MATCH", "lock:*", "COUNT", "100"]);
    assert!(held.contains("$5\r\ntoken\r\n$5\r\ntok-b\r\n"), "{held:?}");
    page_with(
        lead.metrics,
        "/metrics",
        &[
            "deadbolt_lock_view_leader 1\n".into(),
            "deadbolt_lock_late_releases_total{prefix=\"lock:orders\"} 1\n".into(),
            "deadbolt_lock_held{prefix=\"lock:orders\"} 1\n".into(),
        ],
    );
    page_with(
        lead.metrics,
        "/",
        &[
            format!("Cluster node {}, the leader: every lock operation", lead.id),
            format!("<td class=\"k\">{key}</td><td>{a_id}</td>"),
            format!("<td class=\"late\">{late}</td>"),
        ],
    );

    // Each follower applied the same keys (a linearizable read answers B's token) but counts
    // none of it: empty views, and its page names the leader.
    for f in nodes.iter().filter(|n| n.id != lead.id) {
        let mut c = Conn::connect(f.port);
        assert_eq!(c.cmd(&["GET", key]), b"$5\r\ntok-b\r\n");
        assert!(
            c.cmd_str(&["SET", "lock:x", "t", "NX", "PX", "1000"])
                .starts_with("-READONLY"),
            "followers refuse lock writes"
        );
        let info = c.cmd_str(&["INFO", "locks"]);
        assert!(info.contains("lock_acquires:0\r\n"), "{info}");
        assert!(info.contains("lock_late_releases:0\r\n"), "{info}");
        assert_eq!(c.cmd(&["LOCKS", "LATE"]), b"*0\r\n");
        assert_eq!(
            c.cmd(&["LOCKS", "HELD", "0", "COUNT", "100"]),
            b"*2\r\n$1\r\n0\r\n*0\r\n"
        );
        page_with(
            f.metrics,
            "/metrics",
            &["deadbolt_lock_view_leader 0\n".into()],
        );
        let page = page_with(
            f.metrics,
            "/",
            &[format!(
                "Cluster node {}, a follower: lock operations run on the leader (node {} at 127.0.0.1:{})",
                f.id, lead.id, lead.port
            )],
        );
        assert!(!page.contains(key), "{page}");
    }
}
