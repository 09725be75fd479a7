//! `loadgen cycle`: replicated lock throughput. C clients each take and release their own locks
//! (no contention: every acquire is on a fresh name) as fast as replication lets them, so every
//! operation is a durable, replicated write. What a client waits for is the point:
//!
//! - `--target resp` (deadbolt cluster leader): the reply itself, which deadbolt sends only once
//!   the entry is committed on a majority.
//! - `--target resp --wait-replicas N` (Redis primary + replicas): each lock write is followed by
//!   `WAIT N 0` in the same pipeline, the way Redisson's synced writes send it; the operation
//!   completes when WAIT answers >= N.
//! - `--target etcd`: etcd's v3 JSON gateway. Like etcd's own `concurrency.Mutex`, each client
//!   holds one session lease; acquire = txn(create_revision == 0 -> put with the lease), release =
//!   txn(value == token -> delete), so one replicated write per operation as with the others.
//!
//! Workloads (`--workload`): `setnx` = `SET name token NX PX lease` + redis-py's compare-and-delete
//! release script; `redisson` = Redisson's acquire script, then its unlock script followed by the
//! DEL of the unlock latch (Redisson's `unlock()` completes after that DEL). etcd has one lock
//! recipe, used for both. An operation is one acquire or one release as the client library's
//! call sees it; latencies are per operation.
//!
//! `--cluster` (with `--target resp`): `--addr` is a seed node of a Redis Cluster (or of deadbolt
//! with `cluster-enabled yes`). The slot table is read with `CLUSTER SLOTS` at start; each client
//! keeps one connection per master and sends each lock's commands to the master of the lock
//! name's slot, as a cluster-mode client library does (cluster.rs: `-MOVED` refreshes the table,
//! `-ASK` is followed once, `-TRYAGAIN`/`-CLUSTERDOWN` are retried after a short back-off). Lock
//! names are fresh per cycle and carry no hash tag, so they spread over all 16,384 slots, as the
//! names of independent resources do. `--wait-replicas N` appends `WAIT N 0` on the same
//! connection, i.e. to the lock's master.

use crate::cluster::{Router, SlotTable};
use crate::resp::{Conn, Reply};
use crate::{json_str, SHA_ACQUIRE, SHA_RELEASE, SHA_UNLOCK};
use crate::{REDISPY_RELEASE, REDISSON_ACQUIRE, REDISSON_UNLOCK};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

#[derive(Clone, Copy, PartialEq)]
enum Target {
    Resp,
    Etcd,
}

#[derive(Clone, Copy, PartialEq)]
enum Workload {
    SetNx,
    Redisson,
}

struct Opts {
    target: Target,
    addr: String,
    clients: usize,
    duration: Duration,
    workload: Workload,
    wait_replicas: u32,
    lease_ms: u64,
    cluster: bool,
}

#[derive(Default)]
struct Stats {
    cycles: u64,
    acquire_us: Vec<u32>,
    release_us: Vec<u32>,
    errors: u64,
    first_error: Option<String>,
    /// Cluster mode: operations sent per master address, and the redirections seen.
    sent: Vec<(String, u64)>,
    moved: u64,
    asked: u64,
    retried: u64,
    reconnects: u64,
    refreshes: u64,
}

impl Stats {
    fn error(&mut self, e: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(e);
        }
    }
}

fn usage() -> ! {
    crate::die(
        "cycle: --target resp|etcd --addr HOST:PORT [--clients 50] [--duration 5] \
[--workload setnx|redisson] [--wait-replicas 0] [--lease-ms 30000] [--cluster] [--threads 1]",
    )
}

fn parse(args: &[String]) -> Opts {
    let mut o = Opts {
        target: Target::Resp,
        addr: "127.0.0.1:6379".into(),
        clients: 50,
        duration: Duration::from_secs(5),
        workload: Workload::SetNx,
        wait_replicas: 0,
        lease_ms: 30000,
        cluster: false,
    };
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        let num = |v: &str| -> u64 { v.parse().unwrap_or_else(|_| usage()) };
        match args[i].as_str() {
            "--cluster" => {
                o.cluster = true;
                i += 1;
                continue;
            }
            // Read by main.rs, which builds the runtime before this runs.
            "--threads" => {
                num(&v);
            }
            "--target" => {
                o.target = match v.as_str() {
                    "resp" => Target::Resp,
                    "etcd" => Target::Etcd,
                    _ => usage(),
                }
            }
            "--addr" => o.addr = v,
            "--clients" => o.clients = num(&v).max(1) as usize,
            "--duration" => {
                o.duration = Duration::from_secs_f64(v.parse().unwrap_or_else(|_| usage()))
            }
            "--workload" => {
                o.workload = match v.as_str() {
                    "setnx" => Workload::SetNx,
                    "redisson" => Workload::Redisson,
                    _ => usage(),
                }
            }
            "--wait-replicas" => o.wait_replicas = num(&v) as u32,
            "--lease-ms" => o.lease_ms = num(&v),
            _ => usage(),
        }
        i += 2;
    }
    if o.cluster && o.target != Target::Resp {
        crate::die("cycle: --cluster needs --target resp");
    }
    o
}

/// `--threads N` of `loadgen cycle` (tokio worker threads; default 1).
pub fn threads(args: &[String]) -> usize {
    args.iter()
        .position(|a| a == "--threads")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1)
}

const SCRIPTS: [(&str, &str); 3] = [
    (SHA_ACQUIRE, REDISSON_ACQUIRE),
    (SHA_UNLOCK, REDISSON_UNLOCK),
    (SHA_RELEASE, REDISPY_RELEASE),
];

async fn load_scripts(addr: &str) -> std::io::Result<()> {
    let mut c = Conn::connect(addr).await?;
    for (sha, src) in SCRIPTS {
        let r = c.cmd(&[b"SCRIPT", b"LOAD", src.as_bytes()]).await?;
        if !r.is_bulk(sha.as_bytes()) {
            return Err(std::io::Error::other(format!(
                "SCRIPT LOAD on {addr}: {r:?}"
            )));
        }
    }
    Ok(())
}

pub async fn cycle_main(args: &[String]) -> i32 {
    let o = Arc::new(parse(args));
    let run = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    );
    // Cluster mode: the slot table, read once from the seed; every client starts from it.
    let table = if o.cluster {
        match SlotTable::fetch(&o.addr).await {
            Ok(t) if !t.masters().is_empty() => Some(t),
            Ok(_) => {
                println!("{{\"error\":\"CLUSTER SLOTS lists no master\"}}");
                return 1;
            }
            Err(e) => {
                println!("{{\"error\":{}}}", json_str(&e));
                return 1;
            }
        }
    } else {
        None
    };
    if o.target == Target::Resp {
        // Load the scripts once (on every master) so no client's first EVALSHA pays a NOSCRIPT
        // round.
        let addrs: Vec<String> = match &table {
            Some(t) => t.masters().iter().map(|&i| t.addrs[i].clone()).collect(),
            None => vec![o.addr.clone()],
        };
        for a in addrs {
            if let Err(e) = load_scripts(&a).await {
                println!("{{\"error\":{}}}", json_str(&e.to_string()));
                return 1;
            }
        }
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut handles = Vec::with_capacity(o.clients);
    // Connect (and, for etcd, grant the session lease) before the clock starts.
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(o.clients);
    let (go_tx, go_rx) = watch::channel(false);
    for id in 0..o.clients {
        let o = o.clone();
        let stop = stop_rx.clone();
        let ready = ready_tx.clone();
        let mut go = go_rx.clone();
        let prefix = format!("cy:{run}:{id}");
        let table = table.clone();
        handles.push(tokio::spawn(async move {
            let mut st = Stats::default();
            let r = match o.target {
                Target::Resp => {
                    resp_client(&o, id, &prefix, table, stop, ready, &mut go, &mut st).await
                }
                Target::Etcd => etcd_client(&o, &prefix, stop, ready, &mut go, &mut st).await,
            };
            if let Err(e) = r {
                st.error(format!("client {id}: {e}"));
            }
            st
        }));
    }
    drop(ready_tx);
    let mut n_ready = 0;
    while ready_rx.recv().await.is_some() {
        n_ready += 1;
    }
    let start = Instant::now();
    let _ = go_tx.send(true);
    tokio::time::sleep(o.duration).await;
    let _ = stop_tx.send(true);
    let mut all = Stats::default();
    for h in handles {
        match tokio::time::timeout(Duration::from_secs(30), h).await {
            Ok(Ok(st)) => {
                all.cycles += st.cycles;
                all.acquire_us.extend_from_slice(&st.acquire_us);
                all.release_us.extend_from_slice(&st.release_us);
                all.errors += st.errors;
                if all.first_error.is_none() {
                    all.first_error = st.first_error;
                }
                for (a, n) in st.sent {
                    match all.sent.iter_mut().find(|(b, _)| *b == a) {
                        Some(e) => e.1 += n,
                        None => all.sent.push((a, n)),
                    }
                }
                all.moved += st.moved;
                all.asked += st.asked;
                all.retried += st.retried;
                all.reconnects += st.reconnects;
                all.refreshes += st.refreshes;
            }
            _ => all.error("client did not stop within 30 s of the end".into()),
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let mut ops: Vec<u32> = all
        .acquire_us
        .iter()
        .chain(all.release_us.iter())
        .copied()
        .collect();
    ops.sort_unstable();
    all.acquire_us.sort_unstable();
    all.release_us.sort_unstable();
    let pct = |v: &[u32], p: f64| -> u32 {
        if v.is_empty() {
            0
        } else {
            v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
        }
    };
    let lat = |v: &[u32]| {
        format!(
            "{{\"p50\":{},\"p99\":{},\"p999\":{},\"max\":{}}}",
            pct(v, 0.5),
            pct(v, 0.99),
            pct(v, 0.999),
            v.last().copied().unwrap_or(0)
        )
    };
    all.sent.sort();
    let cluster = if o.cluster {
        let per: Vec<String> = all
            .sent
            .iter()
            .map(|(a, n)| format!("{}:{n}", json_str(a)))
            .collect();
        format!(
            ",\"cluster\":{{\"masters\":{},\"sent_per_node\":{{{}}},\"moved\":{},\"asked\":{},\"retried\":{},\"reconnects\":{},\"refreshes\":{}}}",
            table.as_ref().map_or(0, |t| t.masters().len()),
            per.join(","),
            all.moved,
            all.asked,
            all.retried,
            all.reconnects,
            all.refreshes
        )
    } else {
        String::new()
    };
    println!(
        "{{\"target\":\"{}\",\"workload\":\"{}\",\"clients\":{},\"ready\":{n_ready},\"wait_replicas\":{},\
\"duration_s\":{elapsed:.3},\"cycles\":{},\"ops\":{},\"ops_per_s\":{:.1},\"latency_us\":{},\
\"acquire_us\":{},\"release_us\":{},\"errors\":{},\"first_error\":{}{cluster}}}",
        match o.target {
            Target::Resp => "resp",
            Target::Etcd => "etcd",
        },
        match o.workload {
            Workload::SetNx => "setnx",
            Workload::Redisson => "redisson",
        },
        o.clients,
        o.wait_replicas,
        all.cycles,
        ops.len(),
        ops.len() as f64 / elapsed,
        lat(&ops),
        lat(&all.acquire_us),
        lat(&all.release_us),
        all.errors,
        all.first_error
            .as_deref()
            .map(json_str)
            .unwrap_or_else(|| "null".into()),
    );
    i32::from(all.errors > 0)
}

fn us(t: Instant) -> u32 {
    t.elapsed().as_micros().min(u32::MAX as u128) as u32
}

/// Sends one lock write, plus `WAIT n 0` in the same pipeline when asked, and returns the write's
/// reply once WAIT (if any) has answered with at least n replicas.
async fn write(c: &mut Conn, args: &[&[u8]], wait: &[u8], n: u32) -> Result<Reply, String> {
    c.queue(args);
    if n > 0 {
        c.queue(&[b"WAIT", wait, b"0"]);
    }
    c.flush().await.map_err(|e| e.to_string())?;
    let r = c.read_reply().await.map_err(|e| e.to_string())?;
    if n > 0 {
        match c.read_reply().await.map_err(|e| e.to_string())? {
            Reply::Int(k) if k >= n as i64 => {}
            other => return Err(format!("WAIT: {other:?}")),
        }
    }
    Ok(r)
}

/// Where a client's commands go: one server, or each key's master in a cluster.
enum Link {
    One(Conn),
    Cluster(Box<Router>),
}

impl Link {
    async fn write(
        &mut self,
        key: &[u8],
        args: &[&[u8]],
        wait: &[u8],
        n: u32,
    ) -> Result<Reply, String> {
        match self {
            Link::One(c) => write(c, args, wait, n).await,
            Link::Cluster(r) => r.write(key, args, wait, n).await,
        }
    }
}

/// Copies a client's router counters into its stats (also when the client ends early).
struct Counted<'a> {
    link: Link,
    st: &'a mut Stats,
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        if let Link::Cluster(r) = &self.link {
            self.st.sent = r
                .sent
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(i, &n)| (r.table.addrs[i].clone(), n))
                .collect();
            self.st.moved = r.moved;
            self.st.asked = r.asked;
            self.st.retried = r.retried;
            self.st.reconnects = r.reconnects;
            self.st.refreshes = r.refreshes;
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn resp_client(
    o: &Opts,
    id: usize,
    prefix: &str,
    table: Option<SlotTable>,
    stop: watch::Receiver<bool>,
    ready: tokio::sync::mpsc::Sender<()>,
    go: &mut watch::Receiver<bool>,
    st: &mut Stats,
) -> std::io::Result<()> {
    let c = match table {
        None => Conn::connect(&o.addr).await.map(Link::One),
        Some(t) => {
            let mut r = Router::new(t, SCRIPTS.to_vec());
            match r.connect_all().await {
                Ok(()) => Ok(Link::Cluster(Box::new(r))),
                Err(e) => Err(std::io::Error::other(e)),
            }
        }
    };
    let _ = ready.send(()).await;
    drop(ready);
    let _ = go.wait_for(|v| *v).await;
    let mut cs = Counted { link: c?, st };
    let (c, st) = (&mut cs.link, &mut *cs.st);
    let lease = o.lease_ms.to_string();
    let wait = o.wait_replicas.to_string();
    let n = o.wait_replicas;
    let owner = format!("6c1f3f0e-9a4b-4d2e-8f5a-{id:012x}:1");
    let mut seq = 0u64;
    while !*stop.borrow() {
        seq += 1;
        let name = format!("{prefix}:{seq}");
        let token = format!("{:016x}{:016x}", id, seq);
        let t = Instant::now();
        let r = match o.workload {
            Workload::SetNx => {
                c.write(
                    name.as_bytes(),
                    &[
                        b"SET",
                        name.as_bytes(),
                        token.as_bytes(),
                        b"NX",
                        b"PX",
                        lease.as_bytes(),
                    ],
                    wait.as_bytes(),
                    n,
                )
                .await
            }
            Workload::Redisson => {
                c.write(
                    name.as_bytes(),
                    &[
                        b"EVALSHA",
                        SHA_ACQUIRE.as_bytes(),
                        b"1",
                        name.as_bytes(),
                        lease.as_bytes(),
                        owner.as_bytes(),
                    ],
                    wait.as_bytes(),
                    n,
                )
                .await
            }
        };
        match (o.workload, r) {
            (Workload::SetNx, Ok(Reply::Simple(s))) if s == b"OK" => {}
            (Workload::Redisson, Ok(Reply::Bulk(None))) => {}
            (_, Ok(other)) => {
                st.error(format!("acquire: {other:?}"));
                continue;
            }
            // A closed connection (e.g. a leader that stepped down) ends this client: spinning
            // on it would only count the same failure a million times.
            (_, Err(e)) => {
                st.error(format!("acquire: {e}"));
                return Ok(());
            }
        }
        st.acquire_us.push(us(t));
        let t = Instant::now();
        let ok = match o.workload {
            Workload::SetNx => {
                let r = c
                    .write(
                        name.as_bytes(),
                        &[
                            b"EVALSHA",
                            SHA_RELEASE.as_bytes(),
                            b"1",
                            name.as_bytes(),
                            token.as_bytes(),
                        ],
                        wait.as_bytes(),
                        n,
                    )
                    .await;
                matches!(r, Ok(Reply::Int(1)))
                    .then_some(())
                    .ok_or_else(|| format!("release: {r:?}"))
            }
            Workload::Redisson => {
                let channel = format!("redisson_lock__channel:{{{name}}}");
                let latch = format!("redisson_unlock_latch:{{{name}}}:{seq}");
                let r = c
                    .write(
                        name.as_bytes(),
                        &[
                            b"EVALSHA",
                            SHA_UNLOCK.as_bytes(),
                            b"3",
                            name.as_bytes(),
                            channel.as_bytes(),
                            latch.as_bytes(),
                            b"0",
                            lease.as_bytes(),
                            owner.as_bytes(),
                            b"publish",
                            b"3000",
                        ],
                        wait.as_bytes(),
                        n,
                    )
                    .await;
                if matches!(r, Ok(Reply::Int(1))) {
                    // Redisson's unlock() completes after this DEL, which it sends without WAIT.
                    let del: [&[u8]; 2] = [b"DEL", latch.as_bytes()];
                    match c.write(latch.as_bytes(), &del, b"0", 0).await {
                        Ok(Reply::Int(1)) => Ok(()),
                        other => Err(format!("DEL latch: {other:?}")),
                    }
                } else {
                    Err(format!("unlock: {r:?}"))
                }
            }
        };
        match ok {
            Ok(()) => {
                st.release_us.push(us(t));
                st.cycles += 1;
            }
            Err(e) => {
                st.error(e);
                return Ok(());
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// etcd's v3 JSON gateway over HTTP/1.1 keep-alive.

fn b64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut o = String::with_capacity(data.len().div_ceil(3) * 4);
    for ch in data.chunks(3) {
        let b = [ch[0], *ch.get(1).unwrap_or(&0), *ch.get(2).unwrap_or(&0)];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= ch.len() {
                o.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                o.push('=');
            }
        }
    }
    o
}

struct Http {
    s: TcpStream,
    host: String,
    buf: Vec<u8>,
}

impl Http {
    async fn connect(addr: &str) -> std::io::Result<Http> {
        let s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        Ok(Http {
            s,
            host: addr.to_string(),
            buf: Vec::with_capacity(4096),
        })
    }

    /// POSTs a JSON body, returns (status, body).
    async fn post(&mut self, path: &str, body: &str) -> Result<(u16, String), String> {
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        self.s
            .write_all(req.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let head_end = loop {
            if let Some(p) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p;
            }
            self.fill().await?;
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).to_ascii_lowercase();
        let status: u16 = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or("bad status line")?;
        let len = head.lines().find_map(|l| {
            l.strip_prefix("content-length:")
                .and_then(|v| v.trim().parse::<usize>().ok())
        });
        let chunked = head
            .lines()
            .any(|l| l.starts_with("transfer-encoding:") && l.contains("chunked"));
        self.buf.drain(..head_end + 4);
        let mut out = Vec::new();
        if let Some(n) = len {
            while self.buf.len() < n {
                self.fill().await?;
            }
            out.extend(self.buf.drain(..n));
        } else if chunked {
            loop {
                let le = loop {
                    if let Some(p) = self.buf.windows(2).position(|w| w == b"\r\n") {
                        break p;
                    }
                    self.fill().await?;
                };
                let sz = usize::from_str_radix(
                    String::from_utf8_lossy(&self.buf[..le])
                        .split(';')
                        .next()
                        .unwrap_or("")
                        .trim(),
                    16,
                )
                .map_err(|_| "bad chunk size")?;
                while self.buf.len() < le + 2 + sz + 2 {
                    self.fill().await?;
                }
                out.extend_from_slice(&self.buf[le + 2..le + 2 + sz]);
                self.buf.drain(..le + 2 + sz + 2);
                if sz == 0 {
                    break;
                }
            }
        } else {
            return Err("response without length".into());
        }
        Ok((status, String::from_utf8_lossy(&out).into_owned()))
    }

    async fn fill(&mut self) -> Result<(), String> {
        let mut tmp = [0u8; 4096];
        let n = self.s.read(&mut tmp).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("etcd closed the connection".into());
        }
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(())
    }
}

/// The string or number value of `"key":` in a flat JSON answer (int64s come quoted).
fn json_field<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    let k = format!("\"{key}\":");
    let at = body.find(&k)? + k.len();
    let rest = body[at..].trim_start();
    if let Some(r) = rest.strip_prefix('"') {
        r.split('"').next()
    } else {
        rest.split([',', '}']).next().map(str::trim)
    }
}

async fn etcd_client(
    o: &Opts,
    prefix: &str,
    stop: watch::Receiver<bool>,
    ready: tokio::sync::mpsc::Sender<()>,
    go: &mut watch::Receiver<bool>,
    st: &mut Stats,
) -> std::io::Result<()> {
    let setup = async {
        let mut h = Http::connect(&o.addr).await.map_err(|e| e.to_string())?;
        // The session lease outlives the run; the client revokes it at the end.
        let ttl = (o.lease_ms / 1000).max(60 + o.duration.as_secs());
        let (code, body) = h
            .post("/v3/lease/grant", &format!("{{\"TTL\":{ttl}}}"))
            .await?;
        let id = json_field(&body, "ID")
            .filter(|_| code == 200)
            .ok_or_else(|| format!("lease grant: {code} {body}"))?
            .to_string();
        Ok::<_, String>((h, id))
    }
    .await;
    let _ = ready.send(()).await;
    drop(ready);
    let _ = go.wait_for(|v| *v).await;
    let (mut h, lease) = setup.map_err(std::io::Error::other)?;
    let mut seq = 0u64;
    while !*stop.borrow() {
        seq += 1;
        let key = b64(format!("{prefix}:{seq}").as_bytes());
        let val = b64(format!("{:032x}", seq).as_bytes());
        let t = Instant::now();
        let acq = format!(
            "{{\"compare\":[{{\"key\":\"{key}\",\"result\":\"EQUAL\",\"target\":\"CREATE\",\"create_revision\":\"0\"}}],\
\"success\":[{{\"request_put\":{{\"key\":\"{key}\",\"value\":\"{val}\",\"lease\":\"{lease}\"}}}}]}}"
        );
        match h.post("/v3/kv/txn", &acq).await {
            Ok((200, b)) if json_field(&b, "succeeded") == Some("true") => {}
            other => {
                st.error(format!("acquire txn: {other:?}"));
                if other.is_err() {
                    return Ok(());
                }
                continue;
            }
        }
        st.acquire_us.push(us(t));
        let t = Instant::now();
        let rel = format!(
            "{{\"compare\":[{{\"key\":\"{key}\",\"result\":\"EQUAL\",\"target\":\"VALUE\",\"value\":\"{val}\"}}],\
\"success\":[{{\"request_delete_range\":{{\"key\":\"{key}\"}}}}]}}"
        );
        match h.post("/v3/kv/txn", &rel).await {
            Ok((200, b)) if json_field(&b, "succeeded") == Some("true") => {
                st.release_us.push(us(t));
                st.cycles += 1;
            }
            other => {
                st.error(format!("release txn: {other:?}"));
                if other.is_err() {
                    return Ok(());
                }
            }
        }
    }
    let _ = h
        .post("/v3/lease/revoke", &format!("{{\"ID\":\"{lease}\"}}"))
        .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(b64(b""), "");
        assert_eq!(b64(b"f"), "Zg==");
        assert_eq!(b64(b"fo"), "Zm8=");
        assert_eq!(b64(b"foo"), "Zm9v");
        assert_eq!(b64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn json_fields() {
        let b = r#"{"header":{"revision":"7"},"ID":"7587","TTL":"60","succeeded":true}"#;
        assert_eq!(json_field(b, "ID"), Some("7587"));
        assert_eq!(json_field(b, "succeeded"), Some("true"));
        assert_eq!(json_field(b, "nope"), None);
    }
}
