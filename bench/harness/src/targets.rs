//! The systems under test. A target starts its servers in the node namespaces, says who leads,
//! lets the nemesis kill/restart/pause/resume a node, and hands out client sessions.
//!
//! The deadbolt cluster's sessions are the Redis ones (`SentinelSession`) with the node addresses
//! as the Sentinel endpoints: every deadbolt node answers the Sentinel protocol itself.

use crate::cluster::{self, key_slot, ClusterClient};
use crate::history::Res;
use crate::http::{b64, unb64, HttpConn};
use crate::netns::{node_ip, node_ns, OBSERVER};
use crate::procs::Proc;
use crate::resp::{Conn, Reply};
use serde_json::json;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const MASTER_NAME: &str = "mymaster";
const REDIS_PORT: u16 = 6379;
const SENTINEL_PORT: u16 = 26379;
const ETCD_PORT: u16 = 2379;

pub trait Session: Send {
    /// Ok = the lock is ours, Busy = someone else holds it.
    fn acquire(&mut self, key: usize, token: u64, ttl_ms: u64) -> Res;
    fn release(&mut self, key: usize, token: u64) -> Res;
    fn read(&mut self, key: usize) -> (Res, u64);
    fn write(&mut self, key: usize, value: u64) -> Res;
}

pub trait Target {
    fn name(&self) -> String;
    /// Does this system promise no double grants and no lost acknowledged writes?
    fn promises_safety(&self) -> bool;
    fn nodes(&self) -> usize;
    fn start(&mut self) -> Result<(), String>;
    fn leader(&self) -> Option<usize>;
    /// The Raft groups (shards) the target runs: the nemesis picks the node to fault by one
    /// group's leadership.
    fn groups(&self) -> usize {
        1
    }
    /// The node leading group `g` (one group: the leader).
    fn group_leader(&self, _g: usize) -> Option<usize> {
        self.leader()
    }
    /// Every group's leader, in group order.
    fn group_leaders(&self) -> Vec<Option<usize>> {
        (0..self.groups()).map(|g| self.group_leader(g)).collect()
    }
    /// The node that group `g`'s leadership settles on when every node is up, if any.
    fn preferred_leader(&self, _g: usize) -> Option<usize> {
        None
    }
    /// The groups node `node` says it leads, from its own view (None: it did not answer).
    fn led_by(&self, _node: usize) -> Option<Vec<usize>> {
        None
    }
    /// The process of node `node` (None: there is none to act on).
    fn proc(&mut self, node: usize) -> Option<&mut Proc>;
    fn kill(&mut self, node: usize) {
        if let Some(p) = self.proc(node) {
            p.kill();
        }
    }
    fn restart(&mut self, node: usize) -> Result<(), String> {
        self.proc(node).map_or(Ok(()), |p| p.start())
    }
    fn pause(&mut self, node: usize) {
        if let Some(p) = self.proc(node) {
            p.pause();
        }
    }
    fn resume(&mut self, node: usize) {
        if let Some(p) = self.proc(node) {
            p.resume();
        }
    }
    fn session(&self, src: Ipv4Addr) -> Box<dyn Session>;
    /// Does `clock_offset` work here (and so the clock fault apply)?
    fn moves_clocks(&self) -> bool {
        false
    }
    /// Moves one node's wall clock by `ms` from now on (0 puts it back). Only the deadbolt
    /// cluster has a way to do this (its test-only `DEBUG CLOCK-OFFSET`).
    fn clock_offset(&mut self, _node: usize, _ms: i64) -> Result<(), String> {
        Err("this target cannot move a node's clock".into())
    }
    /// Asks the leader to hand leadership to `node`; the caller polls `leader()` for the result.
    fn transfer(&mut self, _node: usize) -> Result<(), String> {
        Err("this target cannot transfer leadership".into())
    }
    /// Can hash slots move between groups here (and so the reshard faults apply)?
    fn reshards(&self) -> bool {
        false
    }
    /// The hash slot of workload key `key` (its lock, its fence register and Redisson's keys for
    /// it all hash there).
    fn key_slot(&self, _key: usize) -> Option<u16> {
        None
    }
    /// The group owning workload key `key`'s slot when the cluster was created.
    fn home_group(&self, _key: usize) -> usize {
        0
    }
    /// Slots that never move: the ones each group's leader is found by.
    fn pinned_slots(&self) -> Vec<u16> {
        vec![]
    }
    /// Each slot's group, by a majority of the nodes' own tables (None: fewer than two nodes
    /// answered).
    fn slot_owners(&self) -> Option<Vec<usize>> {
        None
    }
    /// Logs the move of slots `first..=last` (group `from`'s) to group `to` on `from`'s
    /// leader, following `-MOVED`, retrying refusals that pass for `within`. Ok: the node that
    /// accepted it and a note (a lost reply that a retry showed had been proposed says so).
    fn reshard(
        &mut self,
        _first: u16,
        _last: u16,
        _from: usize,
        _to: usize,
        _within: Duration,
    ) -> Result<(usize, String), String> {
        Err("this target cannot move slots".into())
    }
    /// How many nodes show slots `first..=last` as group `to`'s: their own table (RAFT STATUS)
    /// lists them under `to`, and their CLUSTER SLOTS names `to`'s master for them.
    fn showing_owner(&self, _first: u16, _last: u16, _to: usize) -> usize {
        0
    }
}

fn poll<T>(deadline: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + deadline;
    while Instant::now() < end {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

/// The node (by address) that most reachable Sentinel endpoints name as master. The deadbolt
/// cluster target asks its own nodes, which answer the Sentinel protocol themselves.
pub fn leader_by_sentinels(endpoints: &[SocketAddr], nodes: usize) -> Option<usize> {
    let mut votes = vec![0usize; nodes];
    for &s in endpoints {
        let Ok(mut c) = Conn::connect(OBSERVER, s, CONNECT_TIMEOUT, Duration::from_millis(400))
        else {
            continue;
        };
        if let Ok(Reply::Array(Some(a))) = c.cmd(&[
            b"SENTINEL",
            b"get-master-addr-by-name",
            MASTER_NAME.as_bytes(),
        ]) {
            if let Some(Reply::Bulk(Some(h))) = a.first() {
                if let Some(i) =
                    (0..nodes).find(|&i| node_ip(i).to_string().as_bytes() == h.as_slice())
                {
                    votes[i] += 1;
                }
            }
        }
    }
    let (i, v) = votes.iter().enumerate().max_by_key(|(_, v)| **v)?;
    (*v > 0).then_some(i)
}

fn argv(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// Redis-protocol sessions: through the Sentinel protocol, or straight to one server.

const CONNECT_TIMEOUT: Duration = Duration::from_millis(250);
const IO_TIMEOUT: Duration = Duration::from_millis(600);

/// Which lock scripts a Redis-protocol client sends.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Flavor {
    /// `SET key token NX PX ttl`, compare-and-delete script to release.
    SetNx,
    /// Redisson's RLock: the reentrant hash-lock acquire script and its unlock script (current
    /// Redisson, with the unlock latch key), as in shared/reference/clients.md.
    Redisson,
}

const REDISSON_LOCK_LUA: &str = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";
const REDISSON_UNLOCK_LUA: &str = "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end; if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; ";

const RELEASE_LUA: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub struct SentinelSession {
    src: Ipv4Addr,
    sentinels: Vec<SocketAddr>,
    /// Straight to this server when there are no sentinels (single-node sanity target).
    direct: Option<SocketAddr>,
    next_sentinel: usize,
    master: Option<Conn>,
    /// Redisson-style: `WAIT n timeout` after each acquire; fewer acks = not acquired.
    wait_replicas: Option<(u64, u64)>,
    flavor: Flavor,
    /// Cluster mode: every call goes through this Redis Cluster client instead of a master.
    cluster: Option<ClusterClient>,
    /// The lock key of each workload key (default `lock:<key>`); its fence register is
    /// `fence:{<lock key>}`, in the same slot.
    names: Option<Vec<String>>,
}

enum CallErr {
    /// Nothing reached a master, or it refused (READONLY, NOREPLICAS, ...): no effect.
    Fail,
    /// Sent, then timeout or disconnect: effect unknown.
    Unknown,
}

impl SentinelSession {
    pub fn new(
        src: Ipv4Addr,
        sentinels: Vec<SocketAddr>,
        wait_replicas: Option<(u64, u64)>,
        flavor: Flavor,
    ) -> Self {
        let next_sentinel = src.octets()[3] as usize;
        SentinelSession {
            src,
            sentinels,
            direct: None,
            next_sentinel,
            master: None,
            wait_replicas,
            flavor,
            cluster: None,
            names: None,
        }
    }

    /// A cluster-mode client over the nodes `seeds`, with the lock keys `names`.
    pub fn cluster(
        src: Ipv4Addr,
        seeds: Vec<SocketAddr>,
        names: Vec<String>,
        flavor: Flavor,
    ) -> Self {
        SentinelSession {
            src,
            sentinels: vec![],
            direct: None,
            next_sentinel: 0,
            master: None,
            wait_replicas: None,
            flavor,
            cluster: Some(ClusterClient::new(src, seeds, CONNECT_TIMEOUT, IO_TIMEOUT)),
            names: Some(names),
        }
    }

    fn lock_key(&self, key: usize) -> String {
        match self.names.as_ref().and_then(|n| n.get(key)) {
            Some(n) => n.clone(),
            None => format!("lock:{key}"),
        }
    }

    fn fence_key(&self, key: usize) -> String {
        match self.names.as_ref().and_then(|n| n.get(key)) {
            Some(n) => format!("fence:{{{n}}}"),
            None => format!("fence:{key}"),
        }
    }

    pub fn direct(src: Ipv4Addr, server: SocketAddr, flavor: Flavor) -> Self {
        SentinelSession {
            src,
            sentinels: vec![],
            direct: Some(server),
            next_sentinel: 0,
            master: None,
            wait_replicas: None,
            flavor,
            cluster: None,
            names: None,
        }
    }

    /// Asks the Sentinels in turn for the master, connects and checks ROLE, as redis-py's
    /// `Sentinel.master_for` and Redisson's sentinel manager do.
    fn discover(&mut self) -> Option<Conn> {
        if let Some(addr) = self.direct {
            return Conn::connect(self.src, addr, CONNECT_TIMEOUT, IO_TIMEOUT).ok();
        }
        for _ in 0..self.sentinels.len() {
            let s = self.sentinels[self.next_sentinel % self.sentinels.len()];
            self.next_sentinel += 1;
            let Ok(mut sc) = Conn::connect(self.src, s, CONNECT_TIMEOUT, IO_TIMEOUT) else {
                continue;
            };
            let Ok(Reply::Array(Some(a))) = sc.cmd(&[
                b"SENTINEL",
                b"get-master-addr-by-name",
                MASTER_NAME.as_bytes(),
            ]) else {
                continue;
            };
            let (Some(Reply::Bulk(Some(h))), Some(Reply::Bulk(Some(p)))) = (a.first(), a.get(1))
            else {
                continue;
            };
            let Some(addr) = std::str::from_utf8(h)
                .ok()
                .zip(std::str::from_utf8(p).ok())
                .and_then(|(h, p)| format!("{h}:{p}").parse::<SocketAddr>().ok())
            else {
                continue;
            };
            let Ok(mut m) = Conn::connect(self.src, addr, CONNECT_TIMEOUT, IO_TIMEOUT) else {
                continue;
            };
            match m.cmd(&[b"ROLE"]) {
                Ok(Reply::Array(Some(r)))
                    if r.first() == Some(&Reply::Bulk(Some(b"master".to_vec()))) =>
                {
                    return Some(m)
                }
                _ => continue,
            }
        }
        None
    }

    fn call(&mut self, args: &[&[u8]]) -> Result<Reply, CallErr> {
        if let Some(c) = self.cluster.as_mut() {
            return match c.call(args) {
                Ok(Reply::Error(_)) | Err(cluster::CallErr::Fail) => Err(CallErr::Fail),
                Ok(r) => Ok(r),
                Err(cluster::CallErr::Unknown) => Err(CallErr::Unknown),
            };
        }
        if self.master.is_none() {
            self.master = self.discover();
        }
        let Some(m) = self.master.as_mut() else {
            return Err(CallErr::Fail);
        };
        match m.cmd(args) {
            Ok(Reply::Error(e)) => {
                // A demoted master says READONLY: find the new one next time.
                if e.starts_with("READONLY")
                    || e.starts_with("MASTERDOWN")
                    || e.starts_with("LOADING")
                {
                    self.master = None;
                }
                Err(CallErr::Fail)
            }
            Ok(r) => Ok(r),
            Err(_) => {
                self.master = None;
                Err(CallErr::Unknown)
            }
        }
    }
}

fn err_res(e: CallErr) -> Res {
    match e {
        CallErr::Fail => Res::Fail,
        CallErr::Unknown => Res::Unknown,
    }
}

impl Session for SentinelSession {
    fn acquire(&mut self, key: usize, token: u64, ttl_ms: u64) -> Res {
        let k = self.lock_key(key);
        let t = token.to_string();
        let ttl = ttl_ms.to_string();
        let got = match self.flavor {
            Flavor::SetNx => {
                match self.call(&[
                    b"SET",
                    k.as_bytes(),
                    t.as_bytes(),
                    b"NX",
                    b"PX",
                    ttl.as_bytes(),
                ]) {
                    Ok(Reply::Simple(s)) if s == "OK" => Res::Ok,
                    Ok(Reply::Bulk(None)) => Res::Busy,
                    Ok(_) => Res::Fail,
                    Err(e) => err_res(e),
                }
            }
            Flavor::Redisson => {
                let owner = format!("{t}:1");
                let args: [&[u8]; 6] = [
                    b"EVAL",
                    REDISSON_LOCK_LUA.as_bytes(),
                    b"1",
                    k.as_bytes(),
                    ttl.as_bytes(),
                    owner.as_bytes(),
                ];
                match self.call(&args) {
                    // nil = acquired; an integer is the holder's PTTL.
                    Ok(Reply::Bulk(None)) => Res::Ok,
                    Ok(Reply::Int(_)) => Res::Busy,
                    Ok(_) => Res::Fail,
                    Err(e) => err_res(e),
                }
            }
        };
        if got != Res::Ok {
            return got;
        }
        let Some((n, timeout)) = self.wait_replicas else {
            return Res::Ok;
        };
        let (n, timeout) = (n.to_string(), timeout.to_string());
        match self.call(&[b"WAIT", n.as_bytes(), timeout.as_bytes()]) {
            Ok(Reply::Int(acked)) if acked >= n.parse().unwrap_or(1) => Res::Ok,
            // Redisson throws "Only 0 of 1 slaves were synced": the caller does not hold the
            // lock. Give it back so it does not block others until it expires.
            Ok(_) | Err(CallErr::Fail) => {
                let _ = self.release(key, token);
                Res::Fail
            }
            Err(CallErr::Unknown) => Res::Unknown,
        }
    }

    fn release(&mut self, key: usize, token: u64) -> Res {
        let k = self.lock_key(key);
        let t = token.to_string();
        if self.flavor == Flavor::Redisson {
            let channel = format!("redisson_lock__channel:{{{k}}}");
            let latch = format!("redisson_unlock_latch:{{{k}}}:{t}");
            let owner = format!("{t}:1");
            let args: [&[u8]; 11] = [
                b"EVAL",
                REDISSON_UNLOCK_LUA.as_bytes(),
                b"3",
                k.as_bytes(),
                channel.as_bytes(),
                latch.as_bytes(),
                b"0",
                b"30000",
                owner.as_bytes(),
                b"publish",
                b"3000",
            ];
            // 1 = unlocked; 0 = still held (reentrant); nil = not the owner.
            return match self.call(&args) {
                Ok(Reply::Int(1)) => Res::Ok,
                Ok(_) => Res::Fail,
                Err(e) => err_res(e),
            };
        }
        match self.call(&[
            b"EVAL",
            RELEASE_LUA.as_bytes(),
            b"1",
            k.as_bytes(),
            t.as_bytes(),
        ]) {
            Ok(Reply::Int(1)) => Res::Ok,
            Ok(_) => Res::Fail,
            Err(e) => err_res(e),
        }
    }

    fn read(&mut self, key: usize) -> (Res, u64) {
        let k = self.fence_key(key);
        match self.call(&[b"GET", k.as_bytes()]) {
            Ok(Reply::Bulk(None)) => (Res::Ok, 0),
            Ok(Reply::Bulk(Some(v))) => {
                match std::str::from_utf8(&v).ok().and_then(|s| s.parse().ok()) {
                    Some(v) => (Res::Ok, v),
                    None => (Res::Fail, 0),
                }
            }
            Ok(_) => (Res::Fail, 0),
            Err(e) => (err_res(e), 0),
        }
    }

    fn write(&mut self, key: usize, value: u64) -> Res {
        let k = self.fence_key(key);
        let v = value.to_string();
        match self.call(&[b"SET", k.as_bytes(), v.as_bytes()]) {
            Ok(Reply::Simple(s)) if s == "OK" => Res::Ok,
            Ok(_) => Res::Fail,
            Err(e) => err_res(e),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Redis 7.0 primary + 2 replicas + 3 Sentinels.

pub struct RedisSentinel {
    prefix: String,
    dir: PathBuf,
    /// `min-replicas-to-write 1` on the servers and `WAIT 1` after each acquire.
    wait_profile: bool,
    flavor: Flavor,
    servers: Vec<Proc>,
    sentinels: Vec<Proc>,
}

impl RedisSentinel {
    pub fn new(prefix: &str, dir: &Path, wait_profile: bool, flavor: Flavor) -> Self {
        RedisSentinel {
            prefix: prefix.to_string(),
            dir: dir.to_path_buf(),
            wait_profile,
            flavor,
            servers: vec![],
            sentinels: vec![],
        }
    }

    fn sentinel_addrs(&self) -> Vec<SocketAddr> {
        (0..3)
            .map(|i| SocketAddr::new(node_ip(i).into(), SENTINEL_PORT))
            .collect()
    }

    fn ask(addr: SocketAddr, args: &[&[u8]]) -> Option<Reply> {
        let mut c =
            Conn::connect(OBSERVER, addr, CONNECT_TIMEOUT, Duration::from_millis(400)).ok()?;
        c.cmd(args).ok()
    }
}

impl Target for RedisSentinel {
    fn name(&self) -> String {
        let profile = if self.wait_profile {
            "redis-sentinel min-replicas=1+WAIT 1"
        } else {
            "redis-sentinel default"
        };
        match self.flavor {
            Flavor::SetNx => profile.to_string(),
            Flavor::Redisson => format!("{profile}, Redisson scripts"),
        }
    }

    fn promises_safety(&self) -> bool {
        false
    }

    fn nodes(&self) -> usize {
        3
    }

    fn start(&mut self) -> Result<(), String> {
        for i in 0..3 {
            let d = self.dir.join(format!("n{i}"));
            std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
            let mut conf = format!(
                "bind {ip}\nport {REDIS_PORT}\nprotected-mode no\ndaemonize no\ndir {d}\nrepl-diskless-sync-delay 0\n",
                ip = node_ip(i),
                d = d.display()
            );
            if i > 0 {
                conf.push_str(&format!("replicaof {} {REDIS_PORT}\n", node_ip(0)));
            }
            if self.wait_profile {
                conf.push_str("min-replicas-to-write 1\nmin-replicas-max-lag 10\n");
            }
            let cf = d.join("redis.conf");
            std::fs::write(&cf, conf).map_err(|e| e.to_string())?;
            let mut p = Proc::new(
                &format!("redis{i}"),
                &node_ns(&self.prefix, i),
                argv(&["redis-server", &cf.to_string_lossy()]),
                d.join("redis.log"),
            );
            p.start()?;
            self.servers.push(p);

            let sconf = format!(
                "bind {ip}\nport {SENTINEL_PORT}\nprotected-mode no\ndaemonize no\ndir {d}\nsentinel monitor {MASTER_NAME} {m} {REDIS_PORT} 2\nsentinel down-after-milliseconds {MASTER_NAME} 1000\nsentinel failover-timeout {MASTER_NAME} 6000\nsentinel parallel-syncs {MASTER_NAME} 1\n",
                ip = node_ip(i),
                d = d.display(),
                m = node_ip(0)
            );
            let sf = d.join("sentinel.conf");
            std::fs::write(&sf, sconf).map_err(|e| e.to_string())?;
            let mut s = Proc::new(
                &format!("sentinel{i}"),
                &node_ns(&self.prefix, i),
                argv(&["redis-server", &sf.to_string_lossy(), "--sentinel"]),
                d.join("sentinel.log"),
            );
            s.start()?;
            self.sentinels.push(s);
        }
        // Ready when the master has both replicas online and every Sentinel knows the other two
        // (they find each other through hello messages every 2 s).
        let master = SocketAddr::new(node_ip(0).into(), REDIS_PORT);
        poll(Duration::from_secs(40), || {
            let Some(Reply::Bulk(Some(info))) = Self::ask(master, &[b"INFO", b"replication"])
            else {
                return None;
            };
            if String::from_utf8_lossy(&info)
                .matches("state=online")
                .count()
                < 2
            {
                return None;
            }
            for s in self.sentinel_addrs() {
                match Self::ask(s, &[b"SENTINEL", b"sentinels", MASTER_NAME.as_bytes()]) {
                    Some(Reply::Array(Some(v))) if v.len() == 2 => {}
                    _ => return None,
                }
            }
            Some(())
        })
        .ok_or_else(|| "redis+sentinel did not become ready in 40 s".to_string())
    }

    fn leader(&self) -> Option<usize> {
        leader_by_sentinels(&self.sentinel_addrs(), 3)
    }

    fn proc(&mut self, node: usize) -> Option<&mut Proc> {
        self.servers.get_mut(node)
    }

    fn session(&self, src: Ipv4Addr) -> Box<dyn Session> {
        Box::new(SentinelSession::new(
            src,
            self.sentinel_addrs(),
            self.wait_profile.then_some((1, 200)),
            self.flavor,
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// Single-node deadbolt: no failover, a sanity target for the pause fault.

pub struct DeadboltSingle {
    prefix: String,
    dir: PathBuf,
    bin: PathBuf,
    flavor: Flavor,
    server: Option<Proc>,
}

impl DeadboltSingle {
    pub fn new(prefix: &str, dir: &Path, bin: PathBuf, flavor: Flavor) -> Self {
        DeadboltSingle {
            prefix: prefix.to_string(),
            dir: dir.to_path_buf(),
            bin,
            flavor,
            server: None,
        }
    }
    fn addr() -> SocketAddr {
        SocketAddr::new(node_ip(0).into(), REDIS_PORT)
    }
}

impl Target for DeadboltSingle {
    fn name(&self) -> String {
        match self.flavor {
            Flavor::SetNx => "deadbolt single node".to_string(),
            Flavor::Redisson => "deadbolt single node, Redisson scripts".to_string(),
        }
    }
    fn promises_safety(&self) -> bool {
        true
    }
    fn nodes(&self) -> usize {
        1
    }
    fn start(&mut self) -> Result<(), String> {
        let d = self.dir.join("n0");
        std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
        let ip = node_ip(0).to_string();
        let port = REDIS_PORT.to_string();
        let mut p = Proc::new(
            "deadbolt0",
            &node_ns(&self.prefix, 0),
            argv(&[
                &self.bin.to_string_lossy(),
                "--bind",
                &ip,
                "--port",
                &port,
                "--dir",
                &d.to_string_lossy(),
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--protected-mode",
                "no",
            ]),
            d.join("deadbolt.log"),
        );
        p.start()?;
        self.server = Some(p);
        poll(Duration::from_secs(20), || {
            let mut c = Conn::connect(OBSERVER, Self::addr(), CONNECT_TIMEOUT, IO_TIMEOUT).ok()?;
            (c.cmd(&[b"PING"]).ok()? == Reply::Simple("PONG".into())).then_some(())
        })
        .ok_or_else(|| "deadbolt did not answer PING in 20 s".to_string())
    }
    fn leader(&self) -> Option<usize> {
        Some(0)
    }
    fn proc(&mut self, _: usize) -> Option<&mut Proc> {
        self.server.as_mut()
    }
    fn session(&self, src: Ipv4Addr) -> Box<dyn Session> {
        Box::new(SentinelSession::direct(src, Self::addr(), self.flavor))
    }
}

// ---------------------------------------------------------------------------------------------
// deadbolt cluster: three deadbolt processes replicated by Raft, found through the Sentinel
// protocol every node answers.

const PEER_PORT: u16 = 16379;

/// The command line of cluster node `i` (of three) keeping its data in `dir`.
fn cluster_node_argv(bin: &Path, dir: &Path, i: usize, clock_drift_ms: u64) -> Vec<String> {
    let peers = (0..3)
        .map(|i| format!("{}@{}:{REDIS_PORT}:{PEER_PORT}", i + 1, node_ip(i)))
        .collect::<Vec<_>>()
        .join(" ");
    vec![
        bin.to_string_lossy().into_owned(),
        "--bind".into(),
        node_ip(i).to_string(),
        "--port".into(),
        REDIS_PORT.to_string(),
        // The same --dir on every restart: a killed node rejoins from its own raft log.
        "--dir".into(),
        dir.to_string_lossy().into_owned(),
        "--cluster-node-id".into(),
        (i + 1).to_string(),
        "--cluster-peers".into(),
        peers,
        // Cluster mode refuses to start without the peer port's shared secret; the harness's
        // nodes live in their own network namespaces, so a fixed one will do.
        "--cluster-secret".into(),
        "harness-peer-secret-0123456789abcdef".into(),
        "--cluster-clock-drift".into(),
        clock_drift_ms.to_string(),
        "--appendfsync".into(),
        "always".into(),
        "--enable-debug-command".into(),
        "yes".into(),
        "--protected-mode".into(),
        "no".into(),
    ]
}

pub struct DeadboltCluster {
    prefix: String,
    dir: PathBuf,
    bin: PathBuf,
    flavor: Flavor,
    /// `cluster-clock-drift`: the clock difference between nodes the cluster is told to absorb.
    clock_drift_ms: u64,
    servers: Vec<Proc>,
}

/// One node's `RAFT STATUS`: (its role is leader, the leader id it knows, its term).
struct RaftView {
    leader: bool,
    leader_id: u64,
    term: u64,
}

impl DeadboltCluster {
    pub fn new(
        prefix: &str,
        dir: &Path,
        bin: PathBuf,
        flavor: Flavor,
        clock_drift_ms: u64,
    ) -> Self {
        DeadboltCluster {
            prefix: prefix.to_string(),
            dir: dir.to_path_buf(),
            bin,
            flavor,
            clock_drift_ms,
            servers: vec![],
        }
    }

    fn addr(i: usize) -> SocketAddr {
        SocketAddr::new(node_ip(i).into(), REDIS_PORT)
    }

    fn node_addrs(&self) -> Vec<SocketAddr> {
        (0..3).map(Self::addr).collect()
    }

    fn ask(i: usize, args: &[&[u8]]) -> Option<Reply> {
        let mut c = Conn::connect(
            OBSERVER,
            Self::addr(i),
            CONNECT_TIMEOUT,
            Duration::from_millis(400),
        )
        .ok()?;
        c.cmd(args).ok()
    }

    fn raft_status(i: usize) -> Option<RaftView> {
        let Some(Reply::Bulk(Some(b))) = Self::ask(i, &[b"RAFT", b"STATUS"]) else {
            return None;
        };
        let text = String::from_utf8_lossy(&b).into_owned();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.trim_end().strip_prefix(name)?.strip_prefix(':'))
                .map(str::to_string)
        };
        Some(RaftView {
            leader: field("role")? == "leader",
            leader_id: field("leader")?.parse().ok()?,
            term: field("term")?.parse().ok()?,
        })
    }
}

/// A deadbolt cluster target's name: `base`, the clock bound when not the default, the
/// script flavour when not plain.
fn cluster_target_name(base: &str, clock_drift_ms: u64, flavor: Flavor) -> String {
    let mut n = base.to_string();
    if clock_drift_ms != 1000 {
        n.push_str(&format!(", cluster-clock-drift {clock_drift_ms}"));
    }
    if flavor == Flavor::Redisson {
        n.push_str(", Redisson scripts");
    }
    n
}

/// Starts the three nodes of a deadbolt cluster (each in its namespace, its data in
/// `<dir>/n<i>`), with `extra` directives after the common ones.
fn start_cluster_nodes(
    dir: &Path,
    prefix: &str,
    bin: &Path,
    clock_drift_ms: u64,
    extra: &[String],
) -> Result<Vec<Proc>, String> {
    let mut servers = Vec::with_capacity(3);
    for i in 0..3 {
        let d = dir.join(format!("n{i}"));
        std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
        let mut a = cluster_node_argv(bin, &d, i, clock_drift_ms);
        a.extend(extra.iter().cloned());
        let mut p = Proc::new(
            &format!("deadbolt{i}"),
            &node_ns(prefix, i),
            a,
            d.join("deadbolt.log"),
        );
        p.start()?;
        servers.push(p);
    }
    Ok(servers)
}

/// DEBUG CLOCK-OFFSET on a cluster node.
fn debug_clock_offset(node: usize, ms: i64) -> Result<(), String> {
    let ms = ms.to_string();
    match DeadboltCluster::ask(node, &[b"DEBUG", b"CLOCK-OFFSET", ms.as_bytes()]) {
        Some(Reply::Simple(s)) if s == "OK" => Ok(()),
        r => Err(format!("DEBUG CLOCK-OFFSET {ms} on node {node}: {r:?}")),
    }
}

impl Target for DeadboltCluster {
    fn name(&self) -> String {
        cluster_target_name("deadbolt cluster 3 nodes", self.clock_drift_ms, self.flavor)
    }
    fn promises_safety(&self) -> bool {
        true
    }
    fn nodes(&self) -> usize {
        3
    }
    fn start(&mut self) -> Result<(), String> {
        self.servers =
            start_cluster_nodes(&self.dir, &self.prefix, &self.bin, self.clock_drift_ms, &[])?;
        // Ready when all three agree on a leader and it commits a write.
        poll(Duration::from_secs(40), || {
            let l = self.leader()?;
            let st: Vec<_> = (0..3).filter_map(Self::raft_status).collect();
            if st.len() < 3 || st.iter().any(|v| v.leader_id != l as u64 + 1) {
                return None;
            }
            (Self::ask(l, &[b"SET", b"__ready", b"1"])? == Reply::Simple("OK".into())).then_some(())
        })
        .ok_or_else(|| "the deadbolt cluster did not elect a serving leader in 40 s".to_string())
    }
    /// The node that says it leads and that a majority of nodes name as leader; a deposed
    /// leader that has not yet noticed has the lower term.
    fn leader(&self) -> Option<usize> {
        let st: Vec<(usize, RaftView)> = (0..3)
            .filter_map(|i| Self::raft_status(i).map(|v| (i, v)))
            .collect();
        st.iter()
            .filter(|(i, v)| {
                v.leader
                    && st
                        .iter()
                        .filter(|(_, w)| w.leader_id == *i as u64 + 1 && w.term == v.term)
                        .count()
                        >= 2
            })
            .max_by_key(|(_, v)| v.term)
            .map(|(i, _)| *i)
    }
    fn proc(&mut self, node: usize) -> Option<&mut Proc> {
        self.servers.get_mut(node)
    }
    fn session(&self, src: Ipv4Addr) -> Box<dyn Session> {
        Box::new(SentinelSession::new(
            src,
            self.node_addrs(),
            None,
            self.flavor,
        ))
    }
    fn moves_clocks(&self) -> bool {
        true
    }
    fn clock_offset(&mut self, node: usize, ms: i64) -> Result<(), String> {
        debug_clock_offset(node, ms)
    }
    fn transfer(&mut self, node: usize) -> Result<(), String> {
        let l = self.leader().ok_or("no leader to transfer from")?;
        let id = (node + 1).to_string();
        match Self::ask(l, &[b"RAFT", b"TRANSFER", id.as_bytes()]) {
            Some(Reply::Simple(s)) if s == "OK" => Ok(()),
            r => Err(format!("RAFT TRANSFER {id} on node {l}: {r:?}")),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// deadbolt sharded: the same three nodes with `cluster-enabled yes` and three Raft groups, each
// owning a third of the slots; clients in cluster mode.

/// `cluster-groups 3`: the slots split as `redis-cli --cluster create` splits them among three
/// masters, the same on every node. With more than one group, group n's leadership settles on
/// node n.
const GROUPS: usize = 3;
/// The first slot of each group's one range at creation, ascending. These slots never move
/// (resharding leaves them out): each group's leader is found as the master of its first slot.
const GROUP_FIRST_SLOT: [u16; GROUPS] = [0, 5461, 10923];

/// The group owning `slot` when the cluster was created.
fn group_of_slot(slot: u16) -> usize {
    GROUP_FIRST_SLOT
        .iter()
        .rposition(|&first| slot >= first)
        .unwrap_or(0)
}

/// A group and its slot ranges, first and last slot of each.
type GroupSlots = (usize, Vec<(u16, u16)>);

/// One group's line of `RAFT STATUS` (`group<g>:role=…,leader=…,term=…,…,slots=<a>-<b> …`):
/// the slot ranges this node's table gives the group.
fn status_group_slots(text: &str) -> Vec<GroupSlots> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim_end().strip_prefix("group") else {
            continue;
        };
        let Some((id, fields)) = rest.split_once(':') else {
            continue;
        };
        // `group<g>_member<i>:` lines and `groups:<n>` are not a group's own line.
        let Ok(g) = id.parse::<usize>() else { continue };
        let Some(slots) = fields.split(',').find_map(|f| f.strip_prefix("slots=")) else {
            continue;
        };
        let ranges = slots
            .split(' ')
            .filter_map(|r| {
                let (a, b) = r.split_once('-')?;
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .collect();
        out.push((g, ranges));
    }
    out
}

/// The master `ranges` (one node's CLUSTER SLOTS) name for `slot`.
fn master_of(ranges: &[(u16, u16, Option<usize>)], slot: u16) -> Option<usize> {
    ranges
        .iter()
        .find(|(a, b, _)| (*a..=*b).contains(&slot))
        .and_then(|r| r.2)
}

pub struct DeadboltSharded {
    prefix: String,
    dir: PathBuf,
    bin: PathBuf,
    flavor: Flavor,
    clock_drift_ms: u64,
    /// The lock key of each workload key: key k lives in group k mod 3.
    names: Vec<String>,
    servers: Vec<Proc>,
}

impl DeadboltSharded {
    pub fn new(
        prefix: &str,
        dir: &Path,
        bin: PathBuf,
        flavor: Flavor,
        clock_drift_ms: u64,
        keys: usize,
    ) -> Self {
        let names = (0..keys)
            .map(|k| {
                (0u32..)
                    .map(|i| format!("lock:{k}-{i}"))
                    .find(|n| {
                        let s = key_slot(n.as_bytes());
                        group_of_slot(s) == k % GROUPS && !GROUP_FIRST_SLOT.contains(&s)
                    })
                    .unwrap_or_default()
            })
            .collect();
        DeadboltSharded {
            prefix: prefix.to_string(),
            dir: dir.to_path_buf(),
            bin,
            flavor,
            clock_drift_ms,
            names,
            servers: vec![],
        }
    }

    /// Node `i`'s `CLUSTER SLOTS`: each range with its master (a node index).
    fn slot_ranges(i: usize, timeout: Duration) -> Option<Vec<(u16, u16, Option<usize>)>> {
        let mut c =
            Conn::connect(OBSERVER, DeadboltCluster::addr(i), CONNECT_TIMEOUT, timeout).ok()?;
        let Reply::Array(Some(ranges)) = c.cmd(&[b"CLUSTER", b"SLOTS"]).ok()? else {
            return None;
        };
        let mut out = Vec::new();
        for r in &ranges {
            let Reply::Array(Some(r)) = r else { continue };
            let (Some(Reply::Int(first)), Some(Reply::Int(last)), Some(Reply::Array(Some(m)))) =
                (r.first(), r.get(1), r.get(2))
            else {
                continue;
            };
            let Some(Reply::Bulk(Some(host))) = m.first() else {
                continue;
            };
            let node = (0..3).find(|&n| node_ip(n).to_string().as_bytes() == host.as_slice());
            let clamp = |v: i64| v.clamp(0, 16383) as u16;
            out.push((clamp(*first), clamp(*last), node));
        }
        Some(out)
    }

    /// Each group's master (a node index) as node `i`'s `CLUSTER SLOTS` names it: the master of
    /// the group's first slot, which never moves.
    fn masters(i: usize, timeout: Duration) -> Option<[Option<usize>; 3]> {
        let r = Self::slot_ranges(i, timeout)?;
        Some(GROUP_FIRST_SLOT.map(|s| master_of(&r, s)))
    }

    /// Node `i`'s own slot table: the ranges its `RAFT STATUS` lists under each group.
    fn group_slots(i: usize) -> Option<Vec<GroupSlots>> {
        let Some(Reply::Bulk(Some(b))) = DeadboltCluster::ask(i, &[b"RAFT", b"STATUS"]) else {
            return None;
        };
        let groups = status_group_slots(&String::from_utf8_lossy(&b));
        (!groups.is_empty()).then_some(groups)
    }

    /// Each group's leader: the node that at least two nodes name as its master.
    fn leaders(&self) -> [Option<usize>; 3] {
        let views: Vec<_> = (0..3)
            .filter_map(|i| Self::masters(i, Duration::from_millis(400)))
            .collect();
        let mut out = [None; 3];
        for (g, slot) in out.iter_mut().enumerate() {
            *slot = (0..3).find(|&n| views.iter().filter(|v| v[g] == Some(n)).count() >= 2);
        }
        out
    }

    /// A write through a cluster-mode client to a key of every group.
    fn writes_everywhere(&self) -> bool {
        let mut c = ClusterClient::new(OBSERVER, self.node_addrs(), CONNECT_TIMEOUT, IO_TIMEOUT);
        self.names.iter().take(3).all(|n| {
            let k = format!("__ready:{{{n}}}");
            matches!(c.call(&[b"SET", k.as_bytes(), b"1"]), Ok(Reply::Simple(s)) if s == "OK")
        })
    }

    fn node_addrs(&self) -> Vec<SocketAddr> {
        (0..3).map(DeadboltCluster::addr).collect()
    }
}

impl Target for DeadboltSharded {
    fn name(&self) -> String {
        cluster_target_name(
            "deadbolt sharded 3 nodes x 3 groups",
            self.clock_drift_ms,
            self.flavor,
        )
    }
    fn promises_safety(&self) -> bool {
        true
    }
    fn nodes(&self) -> usize {
        3
    }
    fn start(&mut self) -> Result<(), String> {
        self.servers = start_cluster_nodes(
            &self.dir,
            &self.prefix,
            &self.bin,
            self.clock_drift_ms,
            &[
                "--cluster-enabled".into(),
                "yes".into(),
                "--cluster-groups".into(),
                GROUPS.to_string(),
            ],
        )?;
        // Ready when all three nodes name the same master for every group and a write to each
        // group commits; then wait a while for the leaderships to spread (one group per node).
        poll(Duration::from_secs(40), || {
            let views: Vec<_> = (0..3)
                .filter_map(|i| Self::masters(i, Duration::from_millis(2500)))
                .collect();
            let agreed = views.len() == 3
                && views[0].iter().all(Option::is_some)
                && views.iter().all(|v| *v == views[0]);
            (agreed && self.writes_everywhere()).then_some(())
        })
        .ok_or_else(|| {
            "the sharded deadbolt cluster did not elect serving leaders for its 3 groups in 40 s"
                .to_string()
        })?;
        let spread = poll(Duration::from_secs(15), || {
            let l = self.leaders();
            (l.iter().all(Option::is_some) && l[0] != l[1] && l[1] != l[2] && l[0] != l[2])
                .then_some(l)
        });
        eprintln!(
            "harness: group leaders {:?}{}",
            self.leaders(),
            if spread.is_some() {
                ""
            } else {
                " (not spread over the nodes after 15 s)"
            }
        );
        Ok(())
    }
    fn leader(&self) -> Option<usize> {
        self.group_leader(0)
    }
    fn groups(&self) -> usize {
        3
    }
    fn group_leader(&self, g: usize) -> Option<usize> {
        self.leaders().get(g).copied().flatten()
    }
    fn group_leaders(&self) -> Vec<Option<usize>> {
        self.leaders().to_vec()
    }
    /// deadbolt hands group n's leadership to the n-th voter in id order (node n here).
    fn preferred_leader(&self, g: usize) -> Option<usize> {
        Some(g)
    }
    fn led_by(&self, node: usize) -> Option<Vec<usize>> {
        // Long enough for a follower's CLUSTER SLOTS to wait out an election.
        let m = Self::masters(node, Duration::from_millis(2500))?;
        Some((0..3).filter(|&g| m[g] == Some(node)).collect())
    }
    fn proc(&mut self, node: usize) -> Option<&mut Proc> {
        self.servers.get_mut(node)
    }
    fn session(&self, src: Ipv4Addr) -> Box<dyn Session> {
        Box::new(SentinelSession::cluster(
            src,
            self.node_addrs(),
            self.names.clone(),
            self.flavor,
        ))
    }
    fn moves_clocks(&self) -> bool {
        true
    }
    fn clock_offset(&mut self, node: usize, ms: i64) -> Result<(), String> {
        debug_clock_offset(node, ms)
    }
    fn reshards(&self) -> bool {
        true
    }
    fn key_slot(&self, key: usize) -> Option<u16> {
        self.names.get(key).map(|n| key_slot(n.as_bytes()))
    }
    fn home_group(&self, key: usize) -> usize {
        self.key_slot(key).map_or(0, group_of_slot)
    }
    fn pinned_slots(&self) -> Vec<u16> {
        GROUP_FIRST_SLOT.to_vec()
    }
    fn slot_owners(&self) -> Option<Vec<usize>> {
        let views: Vec<Vec<usize>> = (0..3)
            .filter_map(Self::group_slots)
            .map(|groups| {
                let mut t = vec![usize::MAX; cluster::SLOTS as usize];
                for (g, ranges) in groups {
                    for (a, b) in ranges {
                        for slot in t.iter_mut().take(usize::from(b) + 1).skip(a.into()) {
                            *slot = g;
                        }
                    }
                }
                t
            })
            .collect();
        if views.len() < 2 {
            return None;
        }
        // Two tables that agree on a slot are a majority; else the first one's.
        Some(
            (0..cluster::SLOTS as usize)
                .map(|s| {
                    let agreed = views
                        .iter()
                        .find(|v| views.iter().filter(|w| w[s] == v[s]).count() >= 2);
                    agreed.unwrap_or(&views[0])[s]
                })
                .collect(),
        )
    }
    fn reshard(
        &mut self,
        first: u16,
        last: u16,
        from: usize,
        to: usize,
        within: Duration,
    ) -> Result<(usize, String), String> {
        let args = [
            "RAFT",
            "RESHARD",
            &first.to_string(),
            &last.to_string(),
            &to.to_string(),
        ];
        let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let end = Instant::now() + within;
        let mut node = self.group_leader(from);
        let mut path = String::new();
        // A reply lost after the command was written: it may have been proposed, which a
        // retry then shows ("being moved already", or the slots are the target's already).
        let mut lost = false;
        let mut last_err = String::from("no leader of the range's group");
        while Instant::now() < end {
            let Some(n) = node else {
                std::thread::sleep(Duration::from_millis(200));
                node = self.group_leader(from);
                continue;
            };
            let Ok(mut c) = Conn::connect(
                OBSERVER,
                DeadboltCluster::addr(n),
                CONNECT_TIMEOUT,
                Duration::from_millis(2000),
            ) else {
                last_err = format!("node {n} did not accept a connection");
                std::thread::sleep(Duration::from_millis(200));
                node = self.group_leader(from);
                continue;
            };
            let e = match c.cmd(&argv) {
                Ok(Reply::Simple(s)) if s == "OK" => return Ok((n, format!("+OK{path}"))),
                Ok(Reply::Error(e)) => e,
                Ok(r) => return Err(format!("{} on node {n}: {r:?}", args.join(" "))),
                Err(e) => {
                    lost = true;
                    path.push_str(&format!(" (node {n}'s reply lost: {e})"));
                    node = self.group_leader(from);
                    continue;
                }
            };
            if lost
                && (e.contains("being moved already")
                    || e.contains(&format!("group {to}'s already")))
            {
                return Ok((n, format!("proposed{path}; the retry: {e}")));
            }
            if let Some(rest) = e.strip_prefix("MOVED ") {
                let host = rest.split(' ').nth(1).and_then(|a| a.split(':').next());
                let m = (0..3).find(|&m| Some(node_ip(m).to_string().as_str()) == host);
                path.push_str(&format!(" (node {n}: -MOVED to node {m:?})"));
                node = m.or_else(|| self.group_leader(from));
                continue;
            }
            // Passing refusals: an election, a leader not serving yet, a table that has not
            // applied the previous move yet.
            let passing = [
                "TRYAGAIN",
                "CLUSTERDOWN",
                "try again",
                "being moved already",
                "span several groups",
                "'s already",
            ];
            if passing.iter().any(|p| e.contains(p)) {
                last_err = format!("node {n}: -{e}");
                std::thread::sleep(Duration::from_millis(200));
                node = self.group_leader(from);
                continue;
            }
            return Err(format!("{} on node {n}: -{e}", args.join(" ")));
        }
        Err(format!(
            "{} not accepted within {within:?}: {last_err}{path}",
            args.join(" ")
        ))
    }
    fn showing_owner(&self, first: u16, last: u16, to: usize) -> usize {
        (0..3)
            .filter(|&i| {
                let owned = Self::group_slots(i).is_some_and(|groups| {
                    groups.iter().any(|(g, ranges)| {
                        *g == to && ranges.iter().any(|(a, b)| *a <= first && last <= *b)
                    })
                });
                owned
                    && Self::slot_ranges(i, Duration::from_millis(400)).is_some_and(|r| {
                        let m = master_of(&r, GROUP_FIRST_SLOT[to]);
                        m.is_some() && (first..=last).all(|s| master_of(&r, s) == m)
                    })
            })
            .count()
    }
}

// ---------------------------------------------------------------------------------------------
// etcd 3.4, three nodes, through its v3 JSON gateway: a lease + a create-revision txn per lock.

pub struct Etcd {
    prefix: String,
    dir: PathBuf,
    servers: Vec<Proc>,
}

impl Etcd {
    pub fn new(prefix: &str, dir: &Path) -> Self {
        Etcd {
            prefix: prefix.to_string(),
            dir: dir.to_path_buf(),
            servers: vec![],
        }
    }

    fn addr(i: usize) -> SocketAddr {
        SocketAddr::new(node_ip(i).into(), ETCD_PORT)
    }

    /// (this member's id, the leader id it knows) from one node.
    fn status(i: usize) -> Option<(String, String)> {
        let mut c = HttpConn::connect(
            OBSERVER,
            Self::addr(i),
            CONNECT_TIMEOUT,
            Duration::from_millis(500),
        )
        .ok()?;
        let (code, v) = c.post("/v3/maintenance/status", &json!({})).ok()?;
        if code != 200 {
            return None;
        }
        let me = v["header"]["member_id"].as_str()?.to_string();
        let leader = v["leader"].as_str()?.to_string();
        Some((me, leader))
    }
}

impl Target for Etcd {
    fn name(&self) -> String {
        "etcd 3.4 three nodes".to_string()
    }
    fn promises_safety(&self) -> bool {
        true
    }
    fn nodes(&self) -> usize {
        3
    }
    fn start(&mut self) -> Result<(), String> {
        let cluster = (0..3)
            .map(|i| format!("n{i}=http://{}:2380", node_ip(i)))
            .collect::<Vec<_>>()
            .join(",");
        for i in 0..3 {
            let d = self.dir.join(format!("n{i}"));
            std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
            let ip = node_ip(i);
            let a = vec![
                "etcd".to_string(),
                format!("--name=n{i}"),
                format!("--data-dir={}", d.join("data").display()),
                format!("--listen-client-urls=http://{ip}:{ETCD_PORT}"),
                format!("--advertise-client-urls=http://{ip}:{ETCD_PORT}"),
                format!("--listen-peer-urls=http://{ip}:2380"),
                format!("--initial-advertise-peer-urls=http://{ip}:2380"),
                format!("--initial-cluster={cluster}"),
                "--initial-cluster-token=dbh".to_string(),
                "--initial-cluster-state=new".to_string(),
                "--heartbeat-interval=100".to_string(),
                "--election-timeout=1000".to_string(),
                "--logger=zap".to_string(),
            ];
            let mut p = Proc::new(
                &format!("etcd{i}"),
                &node_ns(&self.prefix, i),
                a,
                d.join("etcd.log"),
            );
            p.start()?;
            self.servers.push(p);
        }
        poll(Duration::from_secs(40), || {
            let st: Vec<_> = (0..3).filter_map(Self::status).collect();
            (st.len() == 3 && st.iter().all(|(_, l)| l != "0" && *l == st[0].1)).then_some(())
        })
        .ok_or_else(|| "etcd did not elect a leader with all three nodes up in 40 s".to_string())
    }
    fn leader(&self) -> Option<usize> {
        let st: Vec<(usize, String, String)> = (0..3)
            .filter_map(|i| Self::status(i).map(|(m, l)| (i, m, l)))
            .collect();
        let mut best: Option<(usize, usize)> = None;
        for (_, _, l) in &st {
            let votes = st.iter().filter(|(_, _, l2)| l2 == l).count();
            if let Some(node) = st.iter().find(|(_, m, _)| m == l).map(|(i, _, _)| *i) {
                if best.is_none_or(|(_, v)| votes > v) {
                    best = Some((node, votes));
                }
            }
        }
        best.map(|(n, _)| n)
    }
    fn proc(&mut self, node: usize) -> Option<&mut Proc> {
        self.servers.get_mut(node)
    }
    fn session(&self, src: Ipv4Addr) -> Box<dyn Session> {
        Box::new(EtcdSession {
            src,
            next: src.octets()[3] as usize,
            conn: None,
            leases: Default::default(),
        })
    }
}

const ETCD_TTL_S: u64 = 3;

pub struct EtcdSession {
    src: Ipv4Addr,
    next: usize,
    conn: Option<HttpConn>,
    leases: std::collections::HashMap<u64, String>,
}

impl EtcdSession {
    /// One request to the current endpoint; any transport error moves to the next endpoint.
    /// `Err(true)` = it may have taken effect.
    fn post(&mut self, path: &str, body: serde_json::Value) -> Result<serde_json::Value, bool> {
        if self.conn.is_none() {
            for _ in 0..3 {
                let i = self.next % 3;
                self.next += 1;
                if let Ok(c) = HttpConn::connect(
                    self.src,
                    Etcd::addr(i),
                    CONNECT_TIMEOUT,
                    Duration::from_millis(1500),
                ) {
                    self.conn = Some(c);
                    break;
                }
            }
        }
        let Some(c) = self.conn.as_mut() else {
            return Err(false);
        };
        match c.post(path, &body) {
            Ok((200, v)) => Ok(v),
            // A gateway error (timeout, leader changed, no leader): the proposal may still commit.
            Ok(_) => {
                self.conn = None;
                Err(true)
            }
            Err(_) => {
                self.conn = None;
                Err(true)
            }
        }
    }
}

fn unknown_or_fail(maybe: bool) -> Res {
    if maybe {
        Res::Unknown
    } else {
        Res::Fail
    }
}

impl Session for EtcdSession {
    fn acquire(&mut self, key: usize, token: u64, _ttl_ms: u64) -> Res {
        // A lease that nobody holds yet cannot make anyone else's lock unsafe: a failed grant
        // is a plain failure.
        let lease = match self.post("/v3/lease/grant", json!({ "TTL": ETCD_TTL_S.to_string() })) {
            Ok(v) => match v["ID"].as_str() {
                Some(id) => id.to_string(),
                None => return Res::Fail,
            },
            Err(_) => return Res::Fail,
        };
        let k = b64(format!("lock/{key}").as_bytes());
        let body = json!({
            "compare": [{ "key": k, "target": "CREATE", "result": "EQUAL", "create_revision": "0" }],
            "success": [{ "request_put": { "key": k, "value": b64(token.to_string().as_bytes()), "lease": lease } }],
        });
        match self.post("/v3/kv/txn", body) {
            Ok(v) if v["succeeded"].as_bool() == Some(true) => {
                self.leases.insert(token, lease);
                Res::Ok
            }
            Ok(_) => {
                let _ = self.post("/v3/lease/revoke", json!({ "ID": lease }));
                Res::Busy
            }
            Err(maybe) => unknown_or_fail(maybe),
        }
    }

    /// Revoking the lease deletes the lock key attached to it, and only that key.
    fn release(&mut self, _key: usize, token: u64) -> Res {
        let Some(lease) = self.leases.remove(&token) else {
            return Res::Fail;
        };
        match self.post("/v3/lease/revoke", json!({ "ID": lease })) {
            Ok(_) => Res::Ok,
            Err(maybe) => unknown_or_fail(maybe),
        }
    }

    fn read(&mut self, key: usize) -> (Res, u64) {
        let k = b64(format!("fence/{key}").as_bytes());
        match self.post("/v3/kv/range", json!({ "key": k })) {
            Ok(v) => match v["kvs"].as_array().and_then(|a| a.first()) {
                None => (Res::Ok, 0),
                Some(kv) => match kv["value"]
                    .as_str()
                    .and_then(unb64)
                    .and_then(|b| String::from_utf8(b).ok())
                    .and_then(|s| s.parse().ok())
                {
                    Some(n) => (Res::Ok, n),
                    None => (Res::Fail, 0),
                },
            },
            Err(maybe) => (unknown_or_fail(maybe), 0),
        }
    }

    fn write(&mut self, key: usize, value: u64) -> Res {
        let k = b64(format!("fence/{key}").as_bytes());
        match self.post(
            "/v3/kv/put",
            json!({ "key": k, "value": b64(value.to_string().as_bytes()) }),
        ) {
            Ok(_) => Res::Ok,
            Err(maybe) => unknown_or_fail(maybe),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raft_status_group_lines_give_each_groups_slots() {
        // The shape `RAFT STATUS` writes (src/cmd/raft.rs): the home group's lines, then per
        // group its line and its members' lines.
        let text = "role:leader\r\nleader:1\r\nterm:3\r\ncommit:9\r\napplied:9\r\nmembers:3\r\n\
            member0:id=1,ip=10.77.0.11,port=6379,peer_port=16379,voter=1,matched=9,lag=0\r\n\
            groups:3\r\n\
            group0:role=leader,leader=1,term=3,commit=9,applied=9,members=3,slots=0-5460\r\n\
            group0_member0:id=1,voter=1,matched=9,lag=0\r\n\
            group1:role=follower,leader=2,term=2,commit=7,applied=7,members=3,slots=1234-1234 5461-10922\r\n\
            group2:role=follower,leader=0,term=4,commit=5,applied=5,members=3,slots=\r\n";
        let g = status_group_slots(text);
        assert_eq!(
            g,
            vec![
                (0, vec![(0, 5460)]),
                (1, vec![(1234, 1234), (5461, 10922)]),
                (2, vec![]),
            ]
        );
    }

    #[test]
    fn a_groups_master_is_its_first_slots() {
        let r = [(0, 99, Some(0)), (100, 100, Some(2)), (101, 5460, Some(0))];
        assert_eq!(master_of(&r, 100), Some(2));
        assert_eq!(master_of(&r, 0), Some(0));
        assert_eq!(master_of(&r, 6000), None);
        // No workload key sits on a slot the leaders are found by.
        let t = DeadboltSharded::new(
            "p",
            Path::new("/tmp"),
            PathBuf::new(),
            Flavor::SetNx,
            1000,
            6,
        );
        for k in 0..6 {
            let s = t.key_slot(k).unwrap();
            assert!(!GROUP_FIRST_SLOT.contains(&s));
            assert_eq!(t.home_group(k), k % GROUPS);
        }
    }
}
