//! The Redis Cluster protocol on a three-node deadbolt cluster started with `cluster-enabled
//! yes`, compared with a real `redis-server --cluster-enabled yes` owning every slot: the
//! CLUSTER replies' shapes and field names, KEYSLOT values, CROSSSLOT inside and outside
//! MULTI and scripts, MOVED from a follower (and READONLY reads there), `redis-cli -c`
//! following MOVED, redis-py's `RedisCluster` holding a `Lock` across a leader kill, and what a
//! node's clients see when it stops leading a group (kept and redirected, as by a Redis
//! Cluster master a failover demoted; closed without cluster-enabled, as Sentinel does).

use super::nodes::group_field;
use crate::common;

use common::{cluster_node_args, cluster_ports, Conn, TempDir};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "cluster-protocol-secret-0123456789";

struct Node {
    port: u16,
    child: Option<Child>,
}

impl Node {
    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

struct Cluster {
    nodes: Vec<Node>,
    _dir: TempDir,
}

/// Three nodes with `cluster-enabled yes`, listening.
fn cluster(name: &str) -> Cluster {
    cluster_with(name, &["--cluster-enabled", "yes"])
}

/// Three nodes (ids 1, 2, 3: index + 1) started with `extra` directives, listening.
fn cluster_with(name: &str, extra: &[&str]) -> Cluster {
    let dir = TempDir::new(name);
    let (ports, peers) = cluster_ports(3);
    let mut nodes = Vec::new();
    for (i, (port, _)) in ports.iter().enumerate() {
        let id = i as u64 + 1;
        let node_dir = dir.0.join(format!("n{id}"));
        std::fs::create_dir_all(&node_dir).unwrap();
        let mut args = cluster_node_args(*port, &node_dir, id, &peers, SECRET);
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new(common::deadbolt_bin())
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn deadbolt");
        nodes.push(Node {
            port: *port,
            child: Some(child),
        });
    }
    for n in &nodes {
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", n.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "node on {} never listened",
                n.port
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    Cluster { nodes, _dir: dir }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Cluster {
    /// The index of the node every live node names as master of slot 0 in CLUSTER SLOTS, once
    /// it serves writes.
    fn leader(&self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            let mut seen = Vec::new();
            for n in self.nodes.iter().filter(|n| n.child.is_some()) {
                let mut c = Conn::connect(n.port);
                seen.push(parse(&c.cmd(&["CLUSTER", "SLOTS"])));
            }
            let port = |r: &R| match r {
                R::Agg(_, v) => match v.first() {
                    Some(R::Agg(_, range)) => match range.get(2) {
                        Some(R::Agg(_, node)) => match node.get(1) {
                            Some(R::Line(b':', p)) => text(p).parse::<u16>().ok(),
                            _ => None,
                        },
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            };
            let first = seen.first().and_then(port);
            if let Some(p) = first.filter(|_| seen.iter().all(|s| port(s) == first)) {
                if let Some(i) = self
                    .nodes
                    .iter()
                    .position(|n| n.port == p && n.child.is_some())
                {
                    let mut c = Conn::connect(p);
                    c.send(&["SET", "__probe", "1"]);
                    if c.try_read_reply(Duration::from_secs(2)).as_deref() == Some(b"+OK\r\n") {
                        return i;
                    }
                }
            }
            assert!(Instant::now() < deadline, "no agreed leader: {seen:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A real redis-server in cluster mode owning every slot, once its cluster state is ok.
fn redis_cluster_node(dir: &TempDir) -> common::Server {
    let conf = dir.0.join("nodes.conf");
    let r = common::redis_server(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        conf.to_str().unwrap(),
    ]);
    let mut c = r.conn();
    assert_eq!(
        c.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        b"+OK\r\n"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !text(&c.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok") {
        assert!(
            Instant::now() < deadline,
            "redis-server never reached cluster_state:ok"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    r
}

/// A parsed reply (maps flattened into key, value, …).
#[derive(Debug, Clone, PartialEq)]
enum R {
    Line(u8, Vec<u8>),
    Bulk(u8, Option<Vec<u8>>),
    Agg(u8, Vec<R>),
}

fn parse(b: &[u8]) -> R {
    fn line(b: &[u8], at: &mut usize) -> Vec<u8> {
        let end = b[*at..].windows(2).position(|w| w == b"\r\n").unwrap() + *at;
        let l = b[*at..end].to_vec();
        *at = end + 2;
        l
    }
    fn one(b: &[u8], at: &mut usize) -> R {
        let t = b[*at];
        *at += 1;
        let l = line(b, at);
        let n: i64 = text(&l).parse().unwrap_or(0);
        match t {
            b'$' | b'=' => {
                if n < 0 {
                    return R::Bulk(t, None);
                }
                let v = b[*at..*at + n as usize].to_vec();
                *at += n as usize + 2;
                R::Bulk(t, Some(v))
            }
            b'*' | b'%' | b'~' => {
                let count = if t == b'%' { n * 2 } else { n };
                R::Agg(t, (0..count.max(0)).map(|_| one(b, at)).collect())
            }
            _ => R::Line(t, l),
        }
    }
    one(b, &mut 0)
}

/// The reply's shape: types and map keys kept, values dropped.
fn shape(r: &R) -> String {
    match r {
        R::Line(t, _) => (*t as char).to_string(),
        R::Bulk(t, v) => format!("{}{}", *t as char, if v.is_some() { "" } else { "nil" }),
        R::Agg(b'%', v) => {
            let fields: Vec<String> = v
                .chunks(2)
                .map(|kv| match &kv[0] {
                    R::Bulk(_, Some(k)) => format!("{}={}", text(k), shape(&kv[1])),
                    other => shape(other),
                })
                .collect();
            format!("%{{{}}}", fields.join(","))
        }
        R::Agg(t, v) => format!(
            "{}[{}]",
            *t as char,
            v.iter().map(shape).collect::<Vec<_>>().join(",")
        ),
    }
}

fn items(r: &R) -> &[R] {
    match r {
        R::Agg(_, v) => v,
        _ => panic!("not an aggregate: {r:?}"),
    }
}

/// INFO-style text → its field names.
fn field_names(t: &str) -> Vec<String> {
    t.lines()
        .filter_map(|l| l.split(':').next())
        .filter(|n| !n.is_empty() && !n.starts_with("cluster_stats_messages_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn cluster_replies_have_redis_cluster_shapes_and_keyslots() {
    let cl = cluster("protocol-shapes");
    let l = cl.leader(Duration::from_secs(15));
    let f = (l + 1) % 3;
    let rdir = TempDir::new("protocol-shapes-redis");
    let redis = redis_cluster_node(&rdir);
    let (mut r, mut me, mut fo) = (
        redis.conn(),
        Conn::connect(cl.nodes[l].port),
        Conn::connect(cl.nodes[f].port),
    );

    // KEYSLOT: the same slot for every key, hash tags included.
    for key in [
        "foo",
        "bar",
        "lock:orders",
        "{user1000}.following",
        "{user1000}.followers",
        "foo{}{bar}",
        "foo{{bar}}zap",
        "foo{bar}{zap}",
        "{",
        "}",
        "{}",
        "a{b",
        "a}b{c}",
        "redisson_lock__channel:{lock}",
        "",
        "\u{e9}t\u{e9}",
    ] {
        let q = ["CLUSTER", "KEYSLOT", key];
        assert_eq!(me.cmd(&q), r.cmd(&q), "KEYSLOT {key:?}");
    }
    // Argument errors as Redis.
    for q in [
        &["CLUSTER", "COUNTKEYSINSLOT", "16384"][..],
        &["CLUSTER", "COUNTKEYSINSLOT", "x"],
        &["CLUSTER", "GETKEYSINSLOT", "0", "-1"],
        &["CLUSTER", "GETKEYSINSLOT", "-1", "1"],
        &["CLUSTER", "KEYSLOT"],
        &["CLUSTER", "NOSUCH"],
    ] {
        assert_eq!(text(&me.cmd(q)), text(&r.cmd(q)), "{q:?}");
    }
    for c in [&mut me, &mut r] {
        assert_eq!(c.cmd(&["SET", "{t}a", "1"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["SET", "{t}b", "1"]), b"+OK\r\n");
    }
    let slot = text(&r.cmd(&["CLUSTER", "KEYSLOT", "t"]));
    let slot = slot.trim_start_matches(':').trim();
    for q in [
        &["CLUSTER", "COUNTKEYSINSLOT", slot][..],
        &["CLUSTER", "GETKEYSINSLOT", slot, "1"],
    ] {
        assert_eq!(shape(&parse(&me.cmd(q))), shape(&parse(&r.cmd(q))), "{q:?}");
    }
    assert_eq!(me.cmd(&["CLUSTER", "COUNTKEYSINSLOT", slot]), b":2\r\n");

    for proto in ["2", "3"] {
        for c in [&mut me, &mut fo, &mut r] {
            c.cmd(&["HELLO", proto]);
        }
        // SLOTS: one range 0-16383, the master's entry as Redis's; every replica's entry has
        // the master's shape (Redis lists each replica as it lists the master).
        let theirs = parse(&r.cmd(&["CLUSTER", "SLOTS"]));
        for c in [&mut me, &mut fo] {
            let mine = parse(&c.cmd(&["CLUSTER", "SLOTS"]));
            assert_eq!(items(&mine).len(), 1, "RESP{proto} {mine:?}");
            let (m, t) = (items(&items(&mine)[0]), items(&items(&theirs)[0]));
            assert_eq!(m.len(), 5, "master and two replicas: {m:?}");
            assert_eq!(m[..2], t[..2], "RESP{proto}: the range");
            for node in &m[2..] {
                assert_eq!(shape(node), shape(&t[2]), "RESP{proto}");
            }
            assert_eq!(
                items(&m[2])[1],
                R::Line(b':', cl.nodes[l].port.to_string().into_bytes())
            );
        }
        // SHARDS: one shard, its fields and each node's fields as Redis names them.
        let theirs = parse(&r.cmd(&["CLUSTER", "SHARDS"]));
        let mine = parse(&me.cmd(&["CLUSTER", "SHARDS"]));
        let (ms, ts) = (items(&items(&mine)[0]), items(&items(&theirs)[0]));
        assert_eq!(ms.len(), ts.len(), "RESP{proto}");
        assert_eq!(ms[0], ts[0]);
        assert_eq!(ms[1], ts[1], "RESP{proto}: slots 0-16383");
        let tnode = shape(&items(&ts[3])[0]);
        assert_eq!(items(&ms[3]).len(), 3);
        for node in items(&ms[3]) {
            let s = shape(node);
            let roles = s.replace("role=$", "");
            assert_eq!(roles, tnode.replace("role=$", ""), "RESP{proto}");
        }
    }
    for c in [&mut me, &mut fo, &mut r] {
        c.cmd(&["HELLO", "2"]);
    }
    // NODES: Redis's line format; the leader is the master of 0-16383, the others replicas.
    let tline = text(&r.cmd(&["CLUSTER", "NODES"]));
    let tline = tline.lines().nth(1).unwrap().to_string();
    let tfields: Vec<&str> = tline.split(' ').collect();
    assert_eq!(tfields.len(), 9, "{tline}");
    for (c, me_idx) in [(&mut me, l), (&mut fo, f)] {
        let nodes = text(&c.cmd(&["CLUSTER", "NODES"]));
        let lines: Vec<&str> = nodes.lines().skip(1).filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 3, "{nodes}");
        for line in &lines {
            let f: Vec<&str> = line.split(' ').collect();
            assert_eq!(f[0].len(), 40, "{line}");
            assert!(f[0].bytes().all(|b| b.is_ascii_hexdigit()), "{line}");
            assert!(
                f[1].starts_with("127.0.0.1:") && f[1].contains('@'),
                "{line}"
            );
            assert_eq!(f[7], "connected", "{line}");
            if f[2].contains("master") {
                assert_eq!(f.len(), 9, "{line}");
                assert_eq!((f[3], f[8]), ("-", "0-16383"), "{line}");
                assert!(f[1].starts_with(&format!("127.0.0.1:{}@", cl.nodes[l].port)));
            } else {
                assert_eq!(f.len(), 8, "{line}");
                assert!(f[2].contains("slave"), "{line}");
                assert_eq!(f[3].len(), 40, "{line}");
            }
            let myself = f[1].starts_with(&format!("127.0.0.1:{}@", cl.nodes[me_idx].port));
            assert_eq!(f[2].starts_with("myself,"), myself, "{line}");
        }
    }
    // INFO: Redis's field names, in its order; MYID: 40 hex digits, the same on every node.
    let tinfo = text(&r.cmd(&["CLUSTER", "INFO"]));
    let minfo = text(&me.cmd(&["CLUSTER", "INFO"]));
    assert_eq!(field_names(&minfo), field_names(&tinfo), "{minfo}");
    assert!(minfo.contains("cluster_state:ok") && minfo.contains("cluster_known_nodes:3"));
    let id = text(&fo.cmd(&["CLUSTER", "MYID"]));
    assert!(text(&fo.cmd(&["CLUSTER", "NODES"]))
        .contains(&format!("{} ", &id[id.len() - 42..id.len() - 2])));
    // LINKS: Redis's fields for each link (addReplyClusterLinkDescription), a link each way
    // to each of the two other nodes.
    me.cmd(&["HELLO", "3"]);
    let links = parse(&me.cmd(&["CLUSTER", "LINKS"]));
    assert_eq!(items(&links).len(), 4, "{links:?}");
    for link in items(&links) {
        assert_eq!(
            shape(link),
            "%{direction=$,node=$,create-time=:,events=$,send-buffer-allocated=:,send-buffer-used=:}"
        );
    }
    assert!(text(&me.cmd(&["INFO", "cluster"])).contains("cluster_enabled:1"));
}

/// A lone server (which refuses `cluster-enabled yes`) and a Raft cluster node without it
/// answer as a Redis without cluster support.
#[test]
fn without_cluster_enabled_cluster_commands_answer_as_redis_without_it() {
    let lone = common::deadbolt(&[]);
    let redis = common::redis_server(&[]);
    let (mut a, mut b) = (lone.conn(), redis.conn());
    for q in [
        &["CLUSTER", "INFO"][..],
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "KEYSLOT", "x"],
        &["READONLY"],
        &["READWRITE"],
        &["ASKING"],
        &["INFO", "cluster"],
    ] {
        assert_eq!(text(&a.cmd(q)), text(&b.cmd(q)), "{q:?}");
    }
    let dir = TempDir::new("protocol-disabled");
    let (ports, peers) = cluster_ports(1);
    let node = common::start_command({
        let mut c = Command::new(common::deadbolt_bin());
        c.args(cluster_node_args(ports[0].0, &dir.0, 1, &peers, SECRET));
        c
    });
    let mut c = node.conn();
    assert_eq!(
        text(&c.cmd(&["CLUSTER", "SLOTS"])),
        "-ERR This instance has cluster support disabled\r\n"
    );
    assert_eq!(text(&c.cmd(&["READONLY"])), text(&b.cmd(&["READONLY"])));
}

#[test]
fn followers_redirect_and_keys_across_slots_are_refused_like_redis() {
    let cl = cluster("protocol-moved");
    let l = cl.leader(Duration::from_secs(15));
    let f = (l + 1) % 3;
    let rdir = TempDir::new("protocol-moved-redis");
    let redis = redis_cluster_node(&rdir);
    let lport = cl.nodes[l].port;
    let mut fo = Conn::connect(cl.nodes[f].port);
    let slot = |k: &str| {
        let r = text(&Conn::connect(lport).cmd(&["CLUSTER", "KEYSLOT", k]));
        r.trim_start_matches(':').trim().to_string()
    };
    let moved = |k: &str| format!("-MOVED {} 127.0.0.1:{lport}\r\n", slot(k));
    // A follower redirects a command with keys, reads and writes alike; keyless ones run.
    assert_eq!(text(&fo.cmd(&["SET", "lock", "me"])), moved("lock"));
    assert_eq!(text(&fo.cmd(&["GET", "{user}x"])), moved("user"));
    assert_eq!(fo.cmd(&["PING"]), b"+PONG\r\n");
    // Inside MULTI the redirection flags the transaction, as any refusal.
    assert_eq!(fo.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(text(&fo.cmd(&["SET", "lock", "me"])), moved("lock"));
    assert_eq!(
        text(&fo.cmd(&["EXEC"])),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    // After READONLY a read is served by the follower (linearizably: it sees the write the
    // leader acknowledged), a write still moves; READWRITE ends it.
    let mut le = Conn::connect(lport);
    assert_eq!(le.cmd(&["SET", "lock", "owner"]), b"+OK\r\n");
    assert_eq!(fo.cmd(&["READONLY"]), b"+OK\r\n");
    assert_eq!(fo.cmd(&["GET", "lock"]), b"$5\r\nowner\r\n");
    assert_eq!(text(&fo.cmd(&["DEL", "lock"])), moved("lock"));
    assert_eq!(fo.cmd(&["READWRITE"]), b"+OK\r\n");
    assert_eq!(text(&fo.cmd(&["GET", "lock"])), moved("lock"));
    assert_eq!(fo.cmd(&["READONLY"]), b"+OK\r\n");
    assert_eq!(fo.cmd(&["RESET"]), b"+RESET\r\n");
    assert_eq!(text(&fo.cmd(&["GET", "lock"])), moved("lock"));
    // Sharded pub/sub is served by the slot's replicas too, as in Redis.
    assert_eq!(
        text(&fo.cmd(&["SSUBSCRIBE", "ch"])),
        "*3\r\n$10\r\nssubscribe\r\n$2\r\nch\r\n:1\r\n"
    );
    assert_eq!(fo.cmd(&["RESET"]), b"+RESET\r\n");

    // CROSSSLOT, on the leader as on a Redis Cluster master: multi-key commands, scripts,
    // functions' keys, and MULTI (a queued command's own keys; EXEC's over all queued ones).
    let script: &[&[&str]] = &[
        &["MSET", "a", "1", "b", "2"],
        &["MSET", "{t}a", "1", "{t}b", "2"],
        &["DEL", "a", "b"],
        &["EVAL", "return 1", "2", "a", "b"],
        &[
            "EVAL",
            "return redis.call('get', KEYS[1])",
            "2",
            "{t}a",
            "{t}b",
        ],
        &["EVAL", "return 1", "0"],
        &["MULTI"],
        &["SET", "a", "1"],
        &["SET", "b", "1"],
        &["EXEC"],
        &["EXEC"],
        &["MULTI"],
        &["MSET", "a", "1", "b", "2"],
        &["SET", "a", "1"],
        &["EXEC"],
        &["MULTI"],
        &["SET", "{t}a", "3"],
        &["GET", "{t}b"],
        &["EXEC"],
        &["WATCH", "a", "b"],
        &["WATCH", "{t}a"],
        &["MULTI"],
        &["GET", "{t}a"],
        &["EXEC"],
        &["SUNIONSTORE", "{t}d", "{t}s1", "s2"],
        &["SPUBLISH", "ch", "m"],
        &["SSUBSCRIBE", "a", "b"],
        &["SSUBSCRIBE", "{t}a", "{t}b"],
        &["SUNSUBSCRIBE", "x", "y"],
        &["SUNSUBSCRIBE", "{t}a"],
        &["SUNSUBSCRIBE", "{t}b"],
        &["SELECT", "1"],
        &["SELECT", "x"],
        &["SELECT", "0"],
        &["MOVE", "{t}a", "1"],
        &["SWAPDB", "0", "1"],
        &["COPY", "{t}a", "{t}c", "DB", "1"],
        &["COPY", "{t}a", "{t}c", "DB", "0"],
        &["COPY", "{t}a", "{t}a"],
        &["PING"],
    ];
    let mut le = Conn::connect(lport);
    let mut rc = redis.conn();
    for q in script {
        assert_eq!(text(&le.cmd(q)), text(&rc.cmd(q)), "{q:?}");
    }
}

/// A node that reaches no majority knows no leader: commands with keys get CLUSTERDOWN (a read
/// once its barrier gave up), keyless ones run, and CLUSTER INFO says the state is fail.
#[test]
fn without_a_leader_keys_get_clusterdown() {
    let mut cl = cluster("protocol-down");
    let l = cl.leader(Duration::from_secs(15));
    let survivor = (l + 1) % 3;
    for i in (0..3).filter(|&i| i != survivor) {
        cl.nodes[i].kill9();
    }
    let mut c = Conn::connect(cl.nodes[survivor].port);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = text(&c.cmd(&["SET", "lock", "me"]));
        if r == "-CLUSTERDOWN The cluster is down\r\n" {
            break;
        }
        assert!(r.starts_with("-MOVED "), "{r}");
        assert!(Instant::now() < deadline, "still {r}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        text(&c.cmd(&["GET", "lock"])),
        "-CLUSTERDOWN The cluster is down\r\n"
    );
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    assert!(text(&c.cmd(&["CLUSTER", "INFO"])).contains("cluster_state:fail"));
}

#[test]
fn redis_cli_follows_moved() {
    let cl = cluster("protocol-cli");
    let l = cl.leader(Duration::from_secs(15));
    let f = (l + 1) % 3;
    let port = cl.nodes[f].port.to_string();
    let cli = |args: &[&str]| {
        let out = Command::new("redis-cli")
            .args(["-c", "-p", &port])
            .args(args)
            .output()
            .expect("redis-cli is required (apt-get install redis-tools)");
        text(&out.stdout)
    };
    assert_eq!(cli(&["SET", "lock:cli", "token"]), "OK\n");
    assert_eq!(cli(&["GET", "lock:cli"]), "token\n");
    // Without -c the follower's answer is the redirection itself.
    let out = Command::new("redis-cli")
        .args(["-p", &port, "GET", "lock:cli"])
        .output()
        .unwrap();
    assert!(text(&out.stdout).starts_with("MOVED "), "{:?}", out);
}

/// redis-py's RedisCluster, unchanged, with its Lock: acquire and release, hold one across a
/// SIGKILL of the leader, acquire another after it within seconds (the held one stays held).
///
/// Runs the client suite's Python (tests/clients/python/.venv, redis-py as pinned there) when
/// it exists, else the one named by `DEADBOLT_TEST_PYTHON` (default `python3`), which must
/// import `redis`: a machine without it fails here rather than passing untested. redis-py
/// before 4.4 cannot rediscover a cluster's topology once it has connected (it deep-copies
/// its own connect callback, which holds locks: fixed by redis/redis-py#2377), against Redis
/// Cluster as against deadbolt; with such a version the acquire after the kill goes through a
/// new RedisCluster on the same startup nodes, and the test says so.
#[test]
fn redis_py_cluster_lock_survives_leader_kill() {
    let venv = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/python/.venv/bin/python"
    );
    let python = if std::path::Path::new(venv).exists() {
        venv.to_string()
    } else {
        std::env::var("DEADBOLT_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
    };
    let probe = Command::new(&python)
        .args(["-c", "from redis.cluster import RedisCluster"])
        .output();
    assert!(
        probe.as_ref().is_ok_and(|o| o.status.success()),
        "{python} cannot import redis.cluster (apt-get install python3-redis, or point \
         DEADBOLT_TEST_PYTHON at a python that has it): {probe:?}"
    );
    let mut cl = cluster("protocol-redis-py");
    let l = cl.leader(Duration::from_secs(15));
    let nodes: Vec<String> = cl
        .nodes
        .iter()
        .map(|n| format!("ClusterNode('127.0.0.1', {})", n.port))
        .collect();
    let script = format!(
        r#"
import sys, time, redis
from redis.cluster import RedisCluster, ClusterNode
rediscovers = tuple(int(x) for x in redis.__version__.split(".")[:2]) >= (4, 4)
rc = RedisCluster(startup_nodes=[{nodes}])
lock = rc.lock("orders", timeout=30)
assert lock.acquire(blocking=False)
assert not rc.lock("orders", timeout=30).acquire(blocking=False)
lock.release()
held = rc.lock("held", timeout=60)
assert held.acquire(blocking=False)
print("HELD", flush=True)
sys.stdin.readline()
start = time.monotonic()
if not rediscovers:
    rc = RedisCluster(startup_nodes=[{nodes}])
    held.redis = rc
deadline = start + 15
while True:
    try:
        after = rc.lock("after-kill", timeout=30)
        if after.acquire(blocking=False):
            break
    except Exception as e:
        last = e
    assert time.monotonic() < deadline, "no lock within 15 s: %r" % (last,)
    time.sleep(0.05)
took = time.monotonic() - start
assert not rc.lock("held", timeout=60).acquire(blocking=False), "the held lock was lost"
held.release()
after.release()
print("ok %.2f s, redis-py %s%s" % (took, redis.__version__, "" if rediscovers else " (a new RedisCluster after the kill)"), flush=True)
"#,
        nodes = nodes.join(", ")
    );
    let mut py = Command::new(&python)
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(py.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    if line != "HELD\n" {
        let o = py.wait_with_output().unwrap();
        panic!("{line}{}", text(&o.stderr));
    }
    cl.nodes[l].kill9();
    py.stdin.as_mut().unwrap().write_all(b"\n").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    let o = py.wait_with_output().unwrap();
    assert!(line.starts_with("ok "), "{line}{}", text(&o.stderr));
    eprintln!("redis-py RedisCluster: kill → next lock {}", line.trim());
}

// ---- A node that stops leading a group ----

fn status(port: u16) -> String {
    let mut c = Conn::connect(port);
    c.send(&["RAFT", "STATUS"]);
    text(&c.try_read_reply(Duration::from_secs(2)).unwrap_or_default())
}

impl Cluster {
    fn pid(&self, i: usize) -> u32 {
        self.nodes[i].child.as_ref().expect("running").id()
    }

    fn signal(&self, i: usize, sig: &str) {
        let pid = self.pid(i).to_string();
        let ok = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(ok.success(), "kill {sig} {pid}");
    }

    /// Polls `args` on node `i` (a new connection each time: a node may close its clients
    /// while leadership moves) until the reply satisfies `done`; returns it.
    fn until(&self, i: usize, args: &[&str], done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut c = Conn::connect(self.nodes[i].port);
            c.send(args);
            let r = text(&c.try_read_reply(Duration::from_secs(2)).unwrap_or_default());
            if done(&r) {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "{args:?} on node {i}: still {r:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The node serving writes of the home group (RAFT STATUS, with or without cluster-enabled).
    fn raft_leader(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            for (i, n) in self.nodes.iter().enumerate() {
                if status(n.port).contains("\r\nrole:leader\r\n") {
                    let mut c = Conn::connect(n.port);
                    c.send(&["SET", "__probe", "1"]);
                    if c.try_read_reply(Duration::from_secs(2)).as_deref() == Some(b"+OK\r\n") {
                        return i;
                    }
                }
            }
            assert!(Instant::now() < deadline, "no leader serving writes");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn keyslot(port: u16, key: &str) -> String {
    let r = text(&Conn::connect(port).cmd(&["CLUSTER", "KEYSLOT", key]));
    r.trim_start_matches(':').trim().to_string()
}

/// Sends a command to a client that may be redirected while the leader is being elected:
/// again while it answers CLUSTERDOWN, which the moment between the transferee's vote and
/// its first append gives. Panics if the connection closes.
fn past_clusterdown(c: &mut Conn, args: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        c.send(args);
        let r = c
            .try_read_reply(Duration::from_secs(10))
            .map(|r| text(&r))
            .unwrap_or_else(|| panic!("{args:?}: no reply, or the connection closed"));
        if r != "-CLUSTERDOWN The cluster is down\r\n" {
            return r;
        }
        assert!(Instant::now() < deadline, "{args:?}: still CLUSTERDOWN");
        std::thread::sleep(Duration::from_millis(20));
    }
}

const DEMOTED: &str = "-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n";

/// With `cluster-enabled yes` and one group, leadership moves off a node (RAFT TRANSFER) while
/// clients are connected to it. As a Redis Cluster master demoted by a failover
/// (replicationSetMaster: disconnectAllBlockedClients only), the node keeps its clients: a
/// plain one gets `-MOVED` to the new leader; EXEC of a transaction queued before gets
/// `-MOVED`, discarding it and its WATCHes (processCommand's cluster redirection); a WATCH
/// stays armed (a write of the new leader, applied here, aborts EXEC; an untouched key's does
/// not); a READONLY client reads here; a sharded subscriber keeps its channel (every node
/// serves it); the blocked client gets `-UNBLOCKED …` and is closed, as in Redis.
#[test]
fn a_cluster_node_that_stops_leading_keeps_its_clients_like_redis() {
    let cl = cluster("protocol-stepdown");
    let l = cl.leader(Duration::from_secs(15));
    let t = (l + 1) % 3;
    let (lport, tport) = (cl.nodes[l].port, cl.nodes[t].port);
    let mut plain = Conn::connect(lport);
    assert_eq!(plain.cmd(&["SET", "lock", "v1"]), b"+OK\r\n");
    let mut multi = Conn::connect(lport);
    assert_eq!(multi.cmd(&["WATCH", "lock"]), b"+OK\r\n");
    assert_eq!(multi.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(multi.cmd(&["SET", "lock", "mine"]), b"+QUEUED\r\n");
    let mut watched = Conn::connect(lport);
    assert_eq!(watched.cmd(&["WATCH", "lock"]), b"+OK\r\n");
    assert_eq!(watched.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(watched.cmd(&["PING"]), b"+QUEUED\r\n");
    let mut untouched = Conn::connect(lport);
    assert_eq!(untouched.cmd(&["WATCH", "nokey"]), b"+OK\r\n");
    assert_eq!(untouched.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(untouched.cmd(&["PING"]), b"+QUEUED\r\n");
    let mut ro = Conn::connect(lport);
    assert_eq!(ro.cmd(&["READONLY"]), b"+OK\r\n");
    let mut sub = Conn::connect(lport);
    assert_eq!(
        text(&sub.cmd(&["SSUBSCRIBE", "ch"])),
        "*3\r\n$10\r\nssubscribe\r\n$2\r\nch\r\n:1\r\n"
    );
    let mut blocked = Conn::connect(lport);
    blocked.send(&["BLPOP", "queue", "0"]);
    common::wait_blocked(&mut plain, 1);

    let mut admin = Conn::connect(lport);
    admin.send(&["RAFT", "TRANSFER", &(t + 1).to_string()]);
    // The blocked client: Redis's disconnectAllBlockedClients.
    let (got, closed) = blocked.drain(Duration::from_secs(20));
    assert_eq!(text(&got), DEMOTED);
    assert!(closed, "the blocked client was not closed");

    // The plain client stays and is sent to the new leader.
    let moved = |k: &str| format!("-MOVED {} 127.0.0.1:{tport}\r\n", keyslot(tport, k));
    assert_eq!(
        past_clusterdown(&mut plain, &["GET", "lock"]),
        moved("lock")
    );
    assert_eq!(text(&plain.cmd(&["SET", "lock", "x"])), moved("lock"));
    assert_eq!(plain.cmd(&["PING"]), b"+PONG\r\n");
    assert!(text(&plain.cmd(&["ROLE"])).starts_with("*5\r\n$5\r\nslave\r\n"));
    // EXEC of the transaction queued on the leader: redirected, the transaction discarded.
    assert_eq!(text(&multi.cmd(&["EXEC"])), moved("lock"));
    assert_eq!(text(&multi.cmd(&["EXEC"])), "-ERR EXEC without MULTI\r\n");
    // The WATCH on `lock` is still armed: the new leader's write, applied here, aborts EXEC.
    cl.until(t, &["SET", "lock", "v2"], |r| r == "+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(20);
    while ro.cmd(&["GET", "lock"]) != b"$2\r\nv2\r\n" {
        assert!(
            Instant::now() < deadline,
            "the new leader's write never applied here"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(watched.cmd(&["EXEC"]), b"*-1\r\n");
    assert_eq!(untouched.cmd(&["EXEC"]), b"*1\r\n+PONG\r\n");
    // The sharded subscriber still gets the channel's messages.
    cl.until(t, &["SPUBLISH", "ch", "hi"], |r| r.starts_with(':'));
    assert_eq!(
        sub.try_read_reply(Duration::from_secs(10))
            .map(|r| text(&r)),
        Some("*3\r\n$8\r\nsmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n".to_string())
    );
    let _ = admin;
}

/// Three groups on three nodes (`cluster-groups 3`, node g+1 leading group g). Node 1 comes to
/// lead group 1 as well (its preferred leader, node 2, frozen), clients connect to it, and once
/// node 2 is back node 1 hands group 1 over and keeps group 0: as a Redis Cluster master that
/// lost some slots, it keeps every client, the one blocked on a group-1 key gets `-MOVED`
/// (clusterRedirectBlockedClientIfNeeded) and stays connected, the one blocked on a group-0 key
/// stays blocked and is served, EXEC of a group-1 transaction gets `-MOVED`, and group 0's keys
/// are still served.
#[test]
fn a_node_that_hands_one_group_over_redirects_its_clients_and_serves_the_rest() {
    let cl = cluster_with(
        "protocol-stepdown-groups",
        &["--cluster-enabled", "yes", "--cluster-groups", "3"],
    );
    // Node index g leads group g once the leaders spread.
    for g in 0..3 {
        cl.until(g, &["RAFT", "STATUS"], |st| {
            group_field(st, g, "role").as_deref() == Some("leader")
        });
    }
    let (a, p, q) = (0usize, 1usize, 2usize);
    let (aport, pport) = (cl.nodes[a].port, cl.nodes[p].port);
    // `{c}` is group 1's (slot 7365), `{b}` group 0's (slot 3300).
    assert_eq!(keyslot(aport, "{c}"), "7365");
    assert_eq!(keyslot(aport, "{b}"), "3300");
    cl.signal(p, "-STOP");
    let resumed = Resume(&cl, p);
    // Group 1 elects node 1 or node 3; node 1 takes it (node 2, its preferred leader, is frozen
    // and so not handed it back yet).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let st = status(aport);
        match group_field(&st, 1, "leader").as_deref() {
            Some("1") => break,
            Some("3") => {
                let mut c = Conn::connect(cl.nodes[q].port);
                c.send(&["RAFT", "TRANSFER", "1", "GROUP", "1"]);
                let _ = c.try_read_reply(Duration::from_secs(2));
            }
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "node 1 never led group 1: {st:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    cl.until(a, &["SET", "{c}probe", "1"], |r| r == "+OK\r\n");

    let mut plain = Conn::connect(aport);
    assert_eq!(plain.cmd(&["SET", "{c}lock", "v1"]), b"+OK\r\n");
    assert_eq!(plain.cmd(&["SET", "{b}lock", "v1"]), b"+OK\r\n");
    let mut multi = Conn::connect(aport);
    assert_eq!(multi.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(multi.cmd(&["SET", "{c}lock", "mine"]), b"+QUEUED\r\n");
    let mut blocked1 = Conn::connect(aport);
    blocked1.send(&["BLPOP", "{c}queue", "0"]);
    let mut blocked0 = Conn::connect(aport);
    blocked0.send(&["BLPOP", "{b}queue", "0"]);
    common::wait_blocked(&mut plain, 2);

    drop(resumed);
    // Node 1 hands group 1 back to node 2 and keeps group 0.
    let pmoved = |k: &str| format!("-MOVED {} 127.0.0.1:{pport}\r\n", keyslot(aport, k));
    assert_eq!(
        blocked1
            .try_read_reply(Duration::from_secs(30))
            .map(|r| text(&r)),
        Some(pmoved("{c}queue")),
        "the client blocked on group 1's key"
    );
    assert!(!blocked1.is_closed(Duration::from_millis(200)));
    assert_eq!(blocked1.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(
        past_clusterdown(&mut plain, &["GET", "{c}lock"]),
        pmoved("{c}lock")
    );
    assert_eq!(text(&multi.cmd(&["EXEC"])), pmoved("{c}lock"));
    assert_eq!(plain.cmd(&["GET", "{b}lock"]), b"$2\r\nv1\r\n");
    assert_eq!(
        blocked0.try_read_reply(Duration::from_millis(200)),
        None,
        "the client blocked on group 0's key was answered"
    );
    assert_eq!(plain.cmd(&["RPUSH", "{b}queue", "x"]), b":1\r\n");
    assert_eq!(
        text(&blocked0.read_reply()),
        "*2\r\n$8\r\n{b}queue\r\n$1\r\nx\r\n"
    );
    // Node 1 still answers as a master (it leads group 0).
    assert!(text(&plain.cmd(&["ROLE"])).starts_with("*3\r\n$6\r\nmaster\r\n"));
}

/// Resumes a frozen node when dropped (a failed assertion must not leave it stopped).
struct Resume<'a>(&'a Cluster, usize);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        self.0.signal(self.1, "-CONT");
    }
}

/// Without cluster-enabled (the Sentinel-discovered cluster) the node that stops leading
/// closes every plain client, the blocked one included, as Sentinel's CLIENT KILL TYPE normal
/// of a demoted master; a subscriber stays.
#[test]
fn without_cluster_enabled_a_node_that_stops_leading_closes_its_plain_clients() {
    let cl = cluster_with("protocol-stepdown-sentinel", &[]);
    let l = cl.raft_leader();
    let t = (l + 1) % 3;
    let port = cl.nodes[l].port;
    let mut plain = Conn::connect(port);
    assert_eq!(plain.cmd(&["SET", "lock", "v1"]), b"+OK\r\n");
    let mut ro = Conn::connect(port);
    assert_eq!(ro.cmd(&["GET", "lock"]), b"$2\r\nv1\r\n");
    let mut sub = Conn::connect(port);
    assert_eq!(
        text(&sub.cmd(&["SUBSCRIBE", "news"])),
        "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n"
    );
    let mut blocked = Conn::connect(port);
    blocked.send(&["BLPOP", "queue", "0"]);
    common::wait_blocked(&mut plain, 1);
    let mut admin = Conn::connect(port);
    admin.send(&["RAFT", "TRANSFER", &(t + 1).to_string()]);
    for (name, c) in [
        ("plain", &mut plain),
        ("reader", &mut ro),
        ("blocked", &mut blocked),
    ] {
        let (got, closed) = c.drain(Duration::from_secs(20));
        assert!(closed, "the {name} client was not closed");
        assert_eq!(text(&got), "", "the {name} client was answered");
    }
    assert_eq!(text(&sub.cmd(&["PING"])), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
}
