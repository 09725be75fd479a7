//! Servers for the redis-rs suite: a real redis-server 7.0 (the reference) or deadbolt
//! ($DEADBOLT_BIN, default <repo>/target/debug/deadbolt), each on a free port of 127.0.0.1.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Redis,
    Deadbolt,
}

pub struct Server {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
    let mut buf = [0u8; 16];
    s.write_all(b"PING\r\n").is_ok()
        && s.read(&mut buf)
            .is_ok_and(|n| buf[..n].starts_with(b"+PONG"))
}

fn deadbolt_bin() -> PathBuf {
    std::env::var_os("DEADBOLT_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../target/debug/deadbolt")
        })
}

impl Server {
    pub fn start(kind: Kind) -> Server {
        let dir = std::env::temp_dir().join(format!(
            "clients-rs-{kind:?}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        for _ in 0..5 {
            let port = free_port();
            let p = port.to_string();
            let d = dir.to_string_lossy().into_owned();
            let mut cmd = match kind {
                Kind::Redis => {
                    let mut c = Command::new("redis-server");
                    c.args([
                        "--port",
                        &p,
                        "--bind",
                        "127.0.0.1",
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                        "--dir",
                        &d,
                    ]);
                    c
                }
                Kind::Deadbolt => {
                    let bin = deadbolt_bin();
                    assert!(
                        bin.exists(),
                        "deadbolt binary not found at {} (cargo build)",
                        bin.display()
                    );
                    let mut c = Command::new(bin);
                    c.args([
                        "--port",
                        &p,
                        "--bind",
                        "127.0.0.1",
                        "--dir",
                        &d,
                        "--appendonly",
                        "no",
                    ]);
                    c
                }
            };
            let log = std::fs::File::create(dir.join("server.log")).expect("log file");
            let mut child = cmd
                .current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .spawn()
                .expect("spawn server (redis-server installed? deadbolt built?)");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    break;
                }
                if ping(port) {
                    return Server { child, port, dir };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
        panic!("{kind:?} did not start; log:\n{log}");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Defines each test twice, `on_redis::name` and `on_deadbolt::name`, so a run can pick a target
/// with a name filter and a failure says which target it was.
#[macro_export]
macro_rules! both_targets {
    ($(async fn $name:ident($kind:ident: Kind) $body:block)*) => {
        mod on_redis {
            #[allow(unused_imports)]
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(Kind::Redis).await })*
        }
        mod on_deadbolt {
            #[allow(unused_imports)]
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(Kind::Deadbolt).await })*
        }
        $(async fn $name($kind: Kind) $body)*
    };
}

/// One command on a fresh RESP2 connection; the raw reply ("" on error or timeout).
pub fn raw_cmd(port: u16, args: &[&str]) -> String {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(2000)));
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    if s.write_all(req.as_bytes()).is_err() {
        return String::new();
    }
    let mut buf = [0u8; 4096];
    match s.read(&mut buf) {
        Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        Err(_) => String::new(),
    }
}

/// A cluster for cluster-mode clients: a real Redis Cluster 7.0 (3 masters, `redis-cli --cluster
/// create`, with `replicas` replicas each: then `cluster-node-timeout 1000`, so a killed master
/// fails over in seconds) or three deadbolt nodes with `cluster-enabled yes` (the Raft leader
/// masters every slot, followers answer MOVED).
pub struct ClusterTarget {
    kind: Kind,
    procs: Vec<Option<Child>>,
    pub ports: Vec<u16>,
    dir: PathBuf,
}

/// `cluster-groups 3`: the slots split as `redis-cli --cluster create` splits them among three
/// masters; group n's preferred leader is node n + 1.
pub const GROUP_RANGES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

/// Redis Cluster's hash slot of a key ({hash tag} included), computed here.
pub fn key_slot(key: &str) -> u16 {
    let mut k = key.as_bytes();
    if let Some(s) = k.iter().position(|&b| b == b'{') {
        if let Some(e) = k[s + 1..].iter().position(|&b| b == b'}') {
            if e > 0 {
                k = &k[s + 1..s + 1 + e];
            }
        }
    }
    let mut crc: u16 = 0;
    for &b in k {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc & 16383
}

/// A key `prefix:<n>` whose slot satisfies `want`.
pub fn key_where(prefix: &str, want: impl Fn(u16) -> bool) -> String {
    (0..)
        .map(|n| format!("{prefix}:{n}"))
        .find(|k| want(key_slot(k)))
        .expect("some key")
}

/// A key whose slot group `g` owns at creation.
pub fn key_in_group(prefix: &str, g: usize) -> String {
    let (lo, hi) = GROUP_RANGES[g];
    key_where(prefix, |s| (lo..=hi).contains(&s))
}

/// The master port that CLUSTER SLOTS on `port` names for `slot` (None: none, or no answer).
pub fn slot_master_port(port: u16, slot: u16) -> Option<u16> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    let mut c = client
        .get_connection_with_timeout(Duration::from_millis(1000))
        .ok()?;
    c.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let v: redis::Value = redis::cmd("CLUSTER").arg("SLOTS").query(&mut c).ok()?;
    let redis::Value::Array(ranges) = v else {
        return None;
    };
    for r in ranges {
        let redis::Value::Array(f) = r else { continue };
        let (
            Some(redis::Value::Int(lo)),
            Some(redis::Value::Int(hi)),
            Some(redis::Value::Array(m)),
        ) = (f.first(), f.get(1), f.get(2))
        else {
            continue;
        };
        if (*lo..=*hi).contains(&(slot as i64)) {
            if let Some(redis::Value::Int(p)) = m.get(1) {
                return u16::try_from(*p).ok();
            }
        }
    }
    None
}

impl ClusterTarget {
    pub fn start(kind: Kind) -> ClusterTarget {
        Self::start_with_replicas(kind, 0)
    }

    /// Three deadbolt nodes with `cluster-enabled yes` and `cluster-groups 3`, once each node
    /// leads one group.
    pub fn start_groups() -> ClusterTarget {
        let c = Self::start_inner(Kind::Deadbolt, 0, &["--cluster-groups", "3"]);
        c.group_leaders(Duration::from_secs(20));
        c
    }

    pub fn start_with_replicas(kind: Kind, replicas: usize) -> ClusterTarget {
        let c = Self::start_inner(kind, replicas, &[]);
        if let Kind::Deadbolt = kind {
            c.leader(Duration::from_secs(15));
        }
        c
    }

    fn start_inner(kind: Kind, replicas: usize, extra: &[&str]) -> ClusterTarget {
        let dir = std::env::temp_dir().join(format!(
            "clients-rs-cluster-{kind:?}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let n = match kind {
            Kind::Redis => 3 * (1 + replicas),
            Kind::Deadbolt => 3,
        };
        let pairs: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let peers = pairs
            .iter()
            .enumerate()
            .map(|(i, (p, pp))| format!("{}@127.0.0.1:{p}:{pp}", i + 1))
            .collect::<Vec<_>>()
            .join(" ");
        let mut procs = Vec::new();
        for (i, (port, bus)) in pairs.iter().enumerate() {
            let d = dir.join(format!("n{}", i + 1));
            std::fs::create_dir_all(&d).expect("node dir");
            let ds = d.to_string_lossy().into_owned();
            let (p, b) = (port.to_string(), bus.to_string());
            let mut cmd = match kind {
                Kind::Redis => {
                    let mut c = Command::new("redis-server");
                    let conf = d.join("nodes.conf").to_string_lossy().into_owned();
                    c.args([
                        "--port",
                        &p,
                        "--bind",
                        "127.0.0.1",
                        "--cluster-enabled",
                        "yes",
                    ])
                    .args(["--cluster-port", &b, "--cluster-config-file", &conf])
                    .args(["--save", "", "--appendonly", "no", "--dir", &ds]);
                    if replicas > 0 {
                        c.args(["--cluster-node-timeout", "1000"]);
                    }
                    c
                }
                Kind::Deadbolt => {
                    let mut c = Command::new(deadbolt_bin());
                    let id = (i + 1).to_string();
                    c.args(["--port", &p, "--bind", "127.0.0.1", "--dir", &ds])
                        .args(["--cluster-node-id", &id, "--cluster-peers", &peers])
                        .args(["--cluster-secret", "clients-rs-cluster-secret-0123456789"])
                        .args(["--cluster-enabled", "yes"])
                        .args(extra);
                    c
                }
            };
            let log = std::fs::File::create(d.join("server.log")).expect("log file");
            let child = cmd
                .current_dir(&d)
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .spawn()
                .expect("spawn server (redis-server installed? deadbolt built?)");
            procs.push(Some(child));
        }
        let ports: Vec<u16> = pairs.iter().map(|(p, _)| *p).collect();
        let c = ClusterTarget {
            kind,
            procs,
            ports,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        for &p in &c.ports {
            while !ping(p) {
                assert!(Instant::now() < deadline, "node on {p} never answered PING");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if let Kind::Redis = kind {
            let mut create = Command::new("redis-cli");
            create.args(["--cluster", "create"]);
            for p in &c.ports {
                create.arg(format!("127.0.0.1:{p}"));
            }
            let out = create
                .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
                .output()
                .expect("redis-cli");
            assert!(out.status.success(), "{out:?}");
            for &p in &c.ports {
                // Settled: cluster_state:ok, and a replica's link to its master is up.
                while !raw_cmd(p, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
                    || !(raw_cmd(p, &["INFO", "replication"]).contains("role:master")
                        || raw_cmd(p, &["INFO", "replication"]).contains("master_link_status:up"))
                {
                    assert!(
                        Instant::now() < deadline,
                        "{p} never reached cluster_state:ok"
                    );
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        c
    }

    pub fn live(&self) -> Vec<usize> {
        (0..self.ports.len())
            .filter(|&i| self.procs[i].is_some())
            .collect()
    }

    /// deadbolt: the index of the node every live node's CLUSTER SLOTS names as master of
    /// `slot` (not `not`), once it accepts a write to a key of that slot.
    pub fn slot_master(&self, slot: u16, timeout: Duration, not: Option<usize>) -> usize {
        let probe = key_where("__probe", |s| s == slot);
        let deadline = Instant::now() + timeout;
        loop {
            let seen: Vec<Option<u16>> = self
                .live()
                .iter()
                .map(|&i| slot_master_port(self.ports[i], slot))
                .collect();
            if let Some(Some(p)) = seen.first() {
                if seen.iter().all(|s| s == &Some(*p)) {
                    if let Some(i) = self.ports.iter().position(|q| q == p) {
                        if Some(i) != not
                            && self.procs[i].is_some()
                            && raw_cmd(*p, &["SET", &probe, "1"]) == "+OK\r\n"
                        {
                            return i;
                        }
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "no agreed master of slot {slot} within {timeout:?}: {seen:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// With `cluster-groups 3` on three nodes: waits until each node leads one group as every
    /// node's CLUSTER SLOTS says (the spread); the leader's index per group.
    pub fn group_leaders(&self, timeout: Duration) -> Vec<usize> {
        let deadline = Instant::now() + timeout;
        loop {
            let seen: Vec<usize> = GROUP_RANGES
                .iter()
                .map(|&(lo, _)| {
                    self.slot_master(lo, deadline.saturating_duration_since(Instant::now()), None)
                })
                .collect();
            let mut sorted = seen.clone();
            sorted.sort_unstable();
            if sorted == [0, 1, 2] {
                return seen;
            }
            assert!(
                Instant::now() < deadline,
                "the groups' leaders never spread over the nodes: {seen:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}/"))
            .collect()
    }

    /// deadbolt: the index of the one live node that accepts a write (the others answer MOVED).
    pub fn leader(&self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            let ok: Vec<usize> = (0..self.ports.len())
                .filter(|&i| self.procs[i].is_some())
                .filter(|&i| raw_cmd(self.ports[i], &["SET", "__probe", "1"]) == "+OK\r\n")
                .collect();
            if ok.len() == 1 {
                return ok[0];
            }
            assert!(
                Instant::now() < deadline,
                "{:?}: no single leader within {timeout:?}: {ok:?}",
                self.kind
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The index of the node every live node names as master of `key`'s slot (not `not`):
    /// deadbolt's leader, or the master in Redis's CLUSTER NODES.
    pub fn master_of(&self, key: &str, timeout: Duration, not: Option<usize>) -> usize {
        let deadline = Instant::now() + timeout;
        let live: Vec<usize> = (0..self.ports.len())
            .filter(|&i| self.procs[i].is_some())
            .collect();
        if let Kind::Deadbolt = self.kind {
            loop {
                let l = self.leader(deadline.saturating_duration_since(Instant::now()));
                if Some(l) != not {
                    return l;
                }
                assert!(Instant::now() < deadline, "the leader is still node {l}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let slot: u16 = raw_cmd(self.ports[live[0]], &["CLUSTER", "KEYSLOT", key])
            .trim()
            .trim_start_matches(':')
            .parse()
            .expect("CLUSTER KEYSLOT");
        loop {
            let seen: Vec<Option<String>> = live
                .iter()
                .map(|&i| master_of_slot(self.ports[i], slot))
                .collect();
            if let Some(Some(m)) = seen.first() {
                if seen.iter().all(|s| s.as_deref() == Some(m.as_str())) {
                    let port: u16 = m
                        .rsplit(':')
                        .next()
                        .and_then(|p| p.parse().ok())
                        .unwrap_or(0);
                    if let Some(i) = self.ports.iter().position(|&p| p == port) {
                        if Some(i) != not && self.procs[i].is_some() {
                            return i;
                        }
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "no agreed master of slot {slot}: {seen:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL node i, as a crash would; returns the time of the kill.
    pub fn kill(&mut self, i: usize) -> Instant {
        let t = Instant::now();
        if let Some(mut c) = self.procs[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        t
    }
}

impl Drop for ClusterTarget {
    fn drop(&mut self) {
        for i in 0..self.procs.len() {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The master of `slot` in the CLUSTER NODES of the node on `port` ("host:port").
fn master_of_slot(port: u16, slot: u16) -> Option<String> {
    let raw = raw_cmd(port, &["CLUSTER", "NODES"]);
    let body = raw.strip_prefix('$')?.split_once("\r\n")?.1;
    for line in body.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() < 9 || !f[2].split(',').any(|x| x == "master") || f[2].contains("fail") {
            continue;
        }
        for r in &f[8..] {
            let (lo, hi) = r.split_once('-').unwrap_or((r, r));
            if let (Ok(lo), Ok(hi)) = (lo.parse::<u16>(), hi.parse::<u16>()) {
                if (lo..=hi).contains(&slot) {
                    return Some(f[1].split('@').next()?.to_string());
                }
            }
        }
    }
    None
}
