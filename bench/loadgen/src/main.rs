//! Lock-contention load generator: W workers contend on L locks over the wire, the way real lock
//! clients do, and check mutual exclusion while they do it.
//!
//! Protocols:
//! - `redisson`: Redisson RLock's acquire script (EVALSHA, NOSCRIPT → SCRIPT LOAD + retry); on
//!   failure SUBSCRIBE `redisson_lock__channel:{name}`, retry once, then wait for the unlock message
//!   or the holder's PTTL; unlock script (DEL + PUBLISH), then DEL of the unlock latch.
//! - `setnx`: `SET name token NX PX lease`; on failure BLPOP a per-lock signal list (or poll every
//!   millisecond if BLPOP is unknown to the server); release = redis-py's compare-and-delete script,
//!   then LPUSH + LTRIM 0 0 on the signal list.
//!
//! Inside the critical section each worker does a non-atomic GET + SET on a per-lock counter, and
//! marks the lock as held in-process: an overlap (two holders at once) or a lost counter update
//! means the server broke mutual exclusion. Prints one JSON object on stdout.
//!
//! `loadgen cycle` measures replicated lock throughput (see cycle.rs).
//!
//! `loadgen pipe` is pipelined load in redis-benchmark's shape for the server-bound rows (see
//! pipe.rs).
//!
//! `loadgen subscribe` is a helper for bench/run's PUBLISH fan-out: it opens S subscriber
//! connections on one channel, prints `ready`, counts deliveries, answers `count` on stdin with the
//! running total, and exits printing the total on `quit`/EOF.

mod cluster;
mod cycle;
mod pipe;
mod resp;

use resp::{Conn, Reply};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::watch;

// Byte-exact copies of the client scripts (shared/reference/clients.md §1.6 and §2.2).
const REDISSON_ACQUIRE: &str = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";
const REDISSON_UNLOCK: &str = "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end; if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; ";
const REDISPY_RELEASE: &str = "\n        local token = redis.call('get', KEYS[1])\n        if not token or token ~= ARGV[1] then\n            return 0\n        end\n        redis.call('del', KEYS[1])\n        return 1\n    ";
const SHA_ACQUIRE: &str = "149c5a8bf18676fd99e9e6e24923bd64d9b62f94";
const SHA_UNLOCK: &str = "6866459238a13a701d42f4971f12d9f3a50e2442";
const SHA_RELEASE: &str = "c3f8721cbb97f72bc19e972846bd7aaf91901658";

#[derive(Clone, Copy, PartialEq, Debug)]
enum Protocol {
    Redisson,
    SetNx,
}

#[derive(Clone, Debug)]
struct Opts {
    addr: String,
    workers: usize,
    locks: usize,
    duration: Duration,
    protocol: Protocol,
    lease_ms: u64,
    work_us: u64,
    threads: usize,
}

const USAGE: &str =
    "usage: loadgen [--addr 127.0.0.1:6379] [--workers 50] [--locks 5] [--duration 10] \
[--protocol redisson|setnx] [--lease-ms 30000] [--work-us 0] [--threads 1]\n       \
loadgen subscribe [--addr A] [--subscribers S] [--channel C]\n       \
loadgen cycle --target resp|etcd --addr A [--clients 50] [--duration 5] [--workload setnx|redisson] \
[--wait-replicas 0] [--lease-ms 30000] [--cluster] [--threads 1]\n       \
loadgen pipe [--addr A] [--clients 50] [--pipeline 16] [--requests N] [--keyspace R] -- CMD ARG...";

fn die(msg: &str) -> ! {
    eprintln!("loadgen: {msg}\n{USAGE}");
    std::process::exit(2)
}

fn parse_opts(args: &[String]) -> Opts {
    let mut o = Opts {
        addr: "127.0.0.1:6379".into(),
        workers: 50,
        locks: 5,
        duration: Duration::from_secs(10),
        protocol: Protocol::Redisson,
        lease_ms: 30000,
        work_us: 0,
        threads: 1,
    };
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        let num = |v: &str| -> u64 {
            v.parse()
                .unwrap_or_else(|_| die(&format!("{} needs a number", args[i])))
        };
        match args[i].as_str() {
            "--addr" => o.addr = v,
            "--workers" => o.workers = num(&v) as usize,
            "--locks" => o.locks = num(&v) as usize,
            "--duration" => {
                let s: f64 = v
                    .parse()
                    .unwrap_or_else(|_| die("--duration needs seconds"));
                o.duration = Duration::from_secs_f64(s);
            }
            "--protocol" => {
                o.protocol = match v.as_str() {
                    "redisson" => Protocol::Redisson,
                    "setnx" => Protocol::SetNx,
                    _ => die("--protocol is redisson or setnx"),
                }
            }
            "--lease-ms" => o.lease_ms = num(&v),
            "--work-us" => o.work_us = num(&v),
            "--threads" => o.threads = num(&v).max(1) as usize,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            other => die(&format!("unknown option {other}")),
        }
        i += 2;
    }
    if o.workers == 0 || o.locks == 0 {
        die("--workers and --locks must be > 0");
    }
    o
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("pipe") {
        std::process::exit(pipe::pipe_main(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("cycle") {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cycle::threads(&args[1..]))
            .enable_all()
            .build()
            .expect("tokio runtime");
        std::process::exit(rt.block_on(cycle::cycle_main(&args[1..])));
    }
    let (sub, rest) = match args.first().map(String::as_str) {
        Some("subscribe") => (true, &args[1..]),
        _ => (false, &args[..]),
    };
    if sub {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("tokio runtime");
        std::process::exit(rt.block_on(subscribe_main(rest)));
    }
    let o = parse_opts(rest);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(o.threads)
        .enable_all()
        .build()
        .expect("tokio runtime");
    std::process::exit(rt.block_on(lock_main(o)));
}

// ---------------------------------------------------------------------------------------------
// Fan-out subscriber helper.

async fn subscribe_main(args: &[String]) -> i32 {
    let mut addr = "127.0.0.1:6379".to_string();
    let mut n = 20usize;
    let mut channel = "bench:fanout".to_string();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--addr" => addr = v,
            "--subscribers" => n = v.parse().unwrap_or_else(|_| die("--subscribers N")),
            "--channel" => channel = v,
            o => die(&format!("unknown option {o}")),
        }
        i += 2;
    }
    let total = Arc::new(AtomicU64::new(0));
    let broken = Arc::new(AtomicU64::new(0));
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        let mut c = match Conn::connect(&addr).await {
            Ok(c) => c,
            Err(e) => {
                println!("{{\"error\":\"connect: {e}\"}}");
                return 1;
            }
        };
        match c.cmd(&[b"SUBSCRIBE", channel.as_bytes()]).await {
            Ok(Reply::Array(Some(v))) if v.first().is_some_and(|k| k.is_bulk(b"subscribe")) => {}
            Ok(Reply::Error(e)) => {
                println!("{{\"unsupported\":{}}}", json_str(&e));
                return 3;
            }
            other => {
                println!(
                    "{{\"error\":{}}}",
                    json_str(&format!("subscribe: {other:?}"))
                );
                return 1;
            }
        }
        conns.push(c);
    }
    let mut per = Vec::with_capacity(n);
    for mut c in conns {
        let total = total.clone();
        let broken = broken.clone();
        let mine = Arc::new(AtomicU64::new(0));
        per.push(mine.clone());
        tokio::spawn(async move {
            loop {
                match c.read_reply().await {
                    Ok(Reply::Array(Some(v)))
                        if v.first().is_some_and(|k| k.is_bulk(b"message")) =>
                    {
                        mine.fetch_add(1, Ordering::Relaxed);
                        total.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(_) => {}
                    Err(_) => {
                        broken.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
            }
        });
    }
    let mut out = tokio::io::stdout();
    let _ = out.write_all(b"ready\n").await;
    let _ = out.flush().await;
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    loop {
        let l = lines.next_line().await.ok().flatten();
        let t = total.load(Ordering::Relaxed);
        let b = broken.load(Ordering::Relaxed);
        match l.as_deref() {
            Some("count") => {
                let _ = out.write_all(format!("{t} {b}\n").as_bytes()).await;
                let _ = out.flush().await;
            }
            _ => {
                let counts: Vec<u64> = per.iter().map(|p| p.load(Ordering::Relaxed)).collect();
                let s = format!(
                    "{{\"deliveries\":{t},\"disconnected\":{b},\"per_subscriber_min\":{},\"per_subscriber_max\":{}}}\n",
                    counts.iter().min().unwrap_or(&0),
                    counts.iter().max().unwrap_or(&0)
                );
                let _ = out.write_all(s.as_bytes()).await;
                let _ = out.flush().await;
                return 0;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Lock contention.

struct Lock {
    name: Vec<u8>,
    channel: Vec<u8>,
    counter: Vec<u8>,
    signal: Vec<u8>,
    /// worker id + 1 while held (in-process mutual exclusion check).
    holder: AtomicU32,
    /// Successful critical sections (increments the server counter should show at the end).
    local: AtomicU64,
}

struct Shared {
    o: Opts,
    locks: Vec<Lock>,
    overlaps: AtomicU64,
    errors: AtomicU64,
    lease_lost: AtomicU64,
    first_error: std::sync::Mutex<Option<String>>,
    blpop: AtomicBool,
    run_id: String,
}

impl Shared {
    fn error(&self, e: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut f = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            *f = Some(e);
        }
    }
}

#[derive(Default)]
struct WorkerStats {
    acquisitions: u64,
    latencies_us: Vec<u32>,
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// Loads the scripts the protocol needs; `Err` = the server can't run this protocol.
async fn prepare(c: &mut Conn, p: Protocol) -> Result<bool, String> {
    let scripts: &[(&str, &str)] = match p {
        Protocol::Redisson => &[
            (REDISSON_ACQUIRE, SHA_ACQUIRE),
            (REDISSON_UNLOCK, SHA_UNLOCK),
        ],
        Protocol::SetNx => &[(REDISPY_RELEASE, SHA_RELEASE)],
    };
    for (src, sha) in scripts {
        match c.cmd(&[b"SCRIPT", b"LOAD", src.as_bytes()]).await {
            Ok(r) if r.is_bulk(sha.as_bytes()) => {}
            other => return Err(format!("SCRIPT LOAD: {}", describe(&other))),
        }
    }
    let blpop = match p {
        Protocol::Redisson => {
            // PUBLISH is called from the unlock script; SUBSCRIBE by waiters.
            match c.cmd(&[b"PUBLISH", b"loadgen:probe", b"0"]).await {
                Ok(Reply::Int(_)) => {}
                other => return Err(format!("PUBLISH: {}", describe(&other))),
            }
            false
        }
        Protocol::SetNx => matches!(
            c.cmd(&[b"BLPOP", b"loadgen:probe", b"0.01"]).await,
            Ok(Reply::Array(None)) | Ok(Reply::Bulk(None))
        ),
    };
    Ok(blpop)
}

async fn lock_main(o: Opts) -> i32 {
    let run_id = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ (std::process::id() as u64) << 32
    );
    let mut ctl = match Conn::connect(&o.addr).await {
        Ok(c) => c,
        Err(e) => {
            println!(
                "{{\"error\":{}}}",
                json_str(&format!("connect {}: {e}", o.addr))
            );
            return 1;
        }
    };
    let blpop = match prepare(&mut ctl, o.protocol).await {
        Ok(b) => b,
        Err(e) => {
            println!("{{\"unsupported\":{}}}", json_str(&e));
            eprintln!("loadgen: unsupported by this server: {e}");
            return 3;
        }
    };
    let locks = (0..o.locks)
        .map(|i| {
            let name = format!("lg:{run_id}:{i}");
            Lock {
                channel: format!("redisson_lock__channel:{{{name}}}").into_bytes(),
                counter: format!("{name}:counter").into_bytes(),
                signal: format!("{name}:signal").into_bytes(),
                name: name.into_bytes(),
                holder: AtomicU32::new(0),
                local: AtomicU64::new(0),
            }
        })
        .collect();
    let sh = Arc::new(Shared {
        o: o.clone(),
        locks,
        overlaps: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        lease_lost: AtomicU64::new(0),
        first_error: std::sync::Mutex::new(None),
        blpop: AtomicBool::new(blpop),
        run_id,
    });

    // Connect everyone first so the measured window starts with all W workers in place.
    let mut conns = Vec::with_capacity(o.workers);
    let mut connect_errors = 0u64;
    let mut connect_error_text = String::new();
    for _ in 0..o.workers {
        match Conn::connect(&o.addr).await {
            Ok(c) => conns.push(c),
            Err(e) => {
                connect_errors += 1;
                if connect_error_text.is_empty() {
                    connect_error_text = e.to_string();
                }
            }
        }
    }
    // A server at maxclients accepts and then replies with an error: make every worker prove its
    // connection works before the clock starts.
    let mut ok = Vec::with_capacity(conns.len());
    for mut c in conns {
        match c.cmd(&[b"PING"]).await {
            Ok(Reply::Simple(s)) if s == b"PONG" => ok.push(c),
            other => {
                connect_errors += 1;
                if connect_error_text.is_empty() {
                    connect_error_text = format!("{other:?}");
                }
            }
        }
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let start = Instant::now();
    let mut handles = Vec::with_capacity(ok.len());
    for (id, c) in ok.into_iter().enumerate() {
        let sh = sh.clone();
        let stop = stop_rx.clone();
        handles.push(tokio::spawn(async move {
            let mut st = WorkerStats::default();
            let r = match sh.o.protocol {
                Protocol::Redisson => redisson_worker(&sh, id as u32, c, stop, &mut st).await,
                Protocol::SetNx => setnx_worker(&sh, id as u32, c, stop, &mut st).await,
            };
            if let Err(e) = r {
                sh.error(format!("worker {id}: {e}"));
            }
            st
        }));
    }
    tokio::time::sleep(o.duration).await;
    let _ = stop_tx.send(true);
    let mut per_worker = Vec::with_capacity(handles.len());
    let mut lat: Vec<u32> = Vec::new();
    for h in handles {
        // A worker stuck on a dead server must not hang the report.
        match tokio::time::timeout(Duration::from_secs(10), h).await {
            Ok(Ok(st)) => {
                per_worker.push(st.acquisitions);
                lat.extend_from_slice(&st.latencies_us);
            }
            _ => sh.error("worker did not stop within 10 s of the end".into()),
        }
    }
    let elapsed = start.elapsed().as_secs_f64();

    // Lost updates: every critical section incremented the server counter by one.
    let mut lost: i64 = 0;
    let mut check_error = None;
    for l in &sh.locks {
        let local = l.local.load(Ordering::Relaxed) as i64;
        let server = match ctl.cmd(&[b"GET", &l.counter]).await {
            Ok(Reply::Bulk(Some(v))) => std::str::from_utf8(&v)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .unwrap_or(-1),
            Ok(Reply::Bulk(None)) => 0,
            other => {
                check_error = Some(format!("GET counter: {other:?}"));
                0
            }
        };
        lost += local - server;
    }
    // Leave nothing behind (the harness also flushes between runs).
    let _ = cleanup(&mut ctl, &sh).await;

    lat.sort_unstable();
    let pct = |p: f64| -> u32 {
        if lat.is_empty() {
            0
        } else {
            lat[((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1]
        }
    };
    let total: u64 = per_worker.iter().sum();
    let n = per_worker.len().max(1) as f64;
    let mean = total as f64 / n;
    let var = per_worker
        .iter()
        .map(|&a| (a as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    let first_error = sh
        .first_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .or(check_error);
    let proto = match o.protocol {
        Protocol::Redisson => "redisson",
        Protocol::SetNx => "setnx",
    };
    let wake = match o.protocol {
        Protocol::Redisson => "pubsub",
        Protocol::SetNx if sh.blpop.load(Ordering::Relaxed) => "blpop",
        Protocol::SetNx => "poll",
    };
    println!(
        "{{\"protocol\":\"{proto}\",\"wakeup\":\"{wake}\",\"workers\":{},\"connected\":{},\"connect_errors\":{connect_errors},\
\"connect_error\":{},\"locks\":{},\"duration_s\":{elapsed:.3},\"acquisitions\":{total},\"acq_per_s\":{:.1},\
\"latency_us\":{{\"p50\":{},\"p99\":{},\"max\":{}}},\"fairness\":{{\"min\":{},\"max\":{},\"mean\":{mean:.1},\"stddev\":{:.1}}},\
\"overlaps\":{},\"lost_updates\":{lost},\"lease_lost\":{},\"errors\":{},\"first_error\":{}}}",
        o.workers,
        per_worker.len(),
        json_str(&connect_error_text),
        o.locks,
        total as f64 / elapsed,
        pct(0.50),
        pct(0.99),
        lat.last().copied().unwrap_or(0),
        per_worker.iter().min().copied().unwrap_or(0),
        per_worker.iter().max().copied().unwrap_or(0),
        var.sqrt(),
        sh.overlaps.load(Ordering::Relaxed),
        sh.lease_lost.load(Ordering::Relaxed),
        sh.errors.load(Ordering::Relaxed),
        first_error.as_deref().map(json_str).unwrap_or_else(|| "null".into()),
    );
    if sh.overlaps.load(Ordering::Relaxed) > 0 || lost != 0 {
        eprintln!("loadgen: MUTUAL EXCLUSION VIOLATED");
        return 4;
    }
    0
}

async fn cleanup(c: &mut Conn, sh: &Shared) -> std::io::Result<()> {
    for l in &sh.locks {
        c.queue(&[b"DEL", &l.name, &l.counter, &l.signal]);
    }
    c.flush().await?;
    for _ in &sh.locks {
        c.read_reply().await?;
    }
    Ok(())
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// A reply or I/O failure as one readable line (for the JSON report).
fn describe(r: &std::io::Result<Reply>) -> String {
    match r {
        Ok(Reply::Error(e)) => e.clone(),
        Ok(other) => format!("unexpected reply {other:?}"),
        Err(e) => e.to_string(),
    }
}

fn io_err(s: String) -> std::io::Error {
    std::io::Error::other(s)
}

async fn evalsha(
    c: &mut Conn,
    sha: &str,
    src: &str,
    keys: &[&[u8]],
    args: &[&[u8]],
) -> std::io::Result<Reply> {
    let nk = keys.len().to_string();
    let mut argv: Vec<&[u8]> = vec![b"EVALSHA", sha.as_bytes(), nk.as_bytes()];
    argv.extend_from_slice(keys);
    argv.extend_from_slice(args);
    let r = c.cmd(&argv).await?;
    if matches!(&r, Reply::Error(e) if e.starts_with("NOSCRIPT")) {
        // What redis-py / Redisson do: load it and try again.
        c.cmd(&[b"SCRIPT", b"LOAD", src.as_bytes()]).await?;
        return c.cmd(&argv).await;
    }
    Ok(r)
}

/// The critical section: mark held, GET + SET the counter, optional work, unmark.
async fn critical(sh: &Shared, id: u32, l: &Lock, c: &mut Conn) -> std::io::Result<()> {
    if l.holder.swap(id + 1, Ordering::AcqRel) != 0 {
        sh.overlaps.fetch_add(1, Ordering::Relaxed);
    }
    let v = match c.cmd(&[b"GET", &l.counter]).await? {
        Reply::Bulk(Some(v)) => std::str::from_utf8(&v)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| io_err("counter is not a number".into()))?,
        Reply::Bulk(None) => 0,
        other => return Err(io_err(format!("GET: {other:?}"))),
    };
    let w = sh.o.work_us;
    if w >= 1000 {
        tokio::time::sleep(Duration::from_micros(w)).await;
    } else if w > 0 {
        // tokio's timer has millisecond resolution: spin for sub-millisecond work.
        let t = Instant::now();
        while t.elapsed() < Duration::from_micros(w) {
            std::hint::spin_loop();
        }
    }
    let nv = (v + 1).to_string();
    match c.cmd(&[b"SET", &l.counter, nv.as_bytes()]).await? {
        Reply::Simple(s) if s == b"OK" => {}
        other => return Err(io_err(format!("SET: {other:?}"))),
    }
    l.local.fetch_add(1, Ordering::Relaxed);
    if l.holder
        .compare_exchange(id + 1, 0, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        sh.overlaps.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

fn stopped(stop: &watch::Receiver<bool>) -> bool {
    *stop.borrow()
}

async fn redisson_worker(
    sh: &Shared,
    id: u32,
    mut c: Conn,
    mut stop: watch::Receiver<bool>,
    st: &mut WorkerStats,
) -> std::io::Result<()> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((id as u64 + 1) * 0x1000_0001));
    // Redisson's owner id: <connection-manager uuid>:<thread id>.
    let owner = format!(
        "{}-{:04x}-4000-8000-{:012x}:{}",
        sh.run_id,
        id >> 16,
        id,
        id + 1
    );
    let lease = sh.o.lease_ms.to_string();
    let mut sub: Option<Conn> = None;
    let mut seq = 0u64;
    while !stopped(&stop) {
        let l = &sh.locks[(rng.next() % sh.locks.len() as u64) as usize];
        let t0 = Instant::now();
        let mut subscribed = false;
        let acquired = loop {
            let r = evalsha(
                &mut c,
                SHA_ACQUIRE,
                REDISSON_ACQUIRE,
                &[&l.name],
                &[lease.as_bytes(), owner.as_bytes()],
            )
            .await?;
            let ttl = match r {
                Reply::Bulk(None) => break true,
                Reply::Int(t) => t,
                other => return Err(io_err(format!("acquire: {other:?}"))),
            };
            if !subscribed {
                if sub.is_none() {
                    sub = Some(Conn::connect(&sh.o.addr).await?);
                }
                let s = sub.as_mut().expect("just set");
                s.queue(&[b"SUBSCRIBE", &l.channel]);
                s.flush().await?;
                wait_ack(s, b"subscribe").await?;
                subscribed = true;
                // Retry once subscribed: an unlock between the failed attempt and the
                // subscription would otherwise be missed (Redisson does the same).
                continue;
            }
            let wait = if ttl > 0 { ttl as u64 } else { sh.o.lease_ms };
            let s = sub.as_mut().expect("subscribed");
            tokio::select! {
                r = s.read_reply() => { r?; }
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
                _ = stop.wait_for(|v| *v) => break false,
            }
        };
        if subscribed {
            let s = sub.as_mut().expect("subscribed");
            s.queue(&[b"UNSUBSCRIBE", &l.channel]);
            s.flush().await?;
            wait_ack(s, b"unsubscribe").await?;
        }
        if !acquired {
            break;
        }
        st.acquisitions += 1;
        st.latencies_us
            .push(t0.elapsed().as_micros().min(u32::MAX as u128) as u32);
        critical(sh, id, l, &mut c).await?;
        seq += 1;
        let latch = format!(
            "redisson_unlock_latch:{{{}}}:{}:{seq}",
            String::from_utf8_lossy(&l.name),
            id
        );
        let r = evalsha(
            &mut c,
            SHA_UNLOCK,
            REDISSON_UNLOCK,
            &[&l.name, &l.channel, latch.as_bytes()],
            &[
                b"0",
                lease.as_bytes(),
                owner.as_bytes(),
                b"publish",
                b"3000",
            ],
        )
        .await?;
        match r {
            Reply::Int(1) => {}
            Reply::Bulk(None) => {
                sh.lease_lost.fetch_add(1, Ordering::Relaxed);
            }
            other => return Err(io_err(format!("unlock: {other:?}"))),
        }
        // Redisson deletes the latch after every unlock.
        c.cmd(&[b"DEL", latch.as_bytes()]).await?;
    }
    Ok(())
}

/// Reads until the (un)subscribe ack; messages that race with it are dropped.
async fn wait_ack(s: &mut Conn, kind: &[u8]) -> std::io::Result<()> {
    loop {
        match s.read_reply().await? {
            Reply::Array(Some(v)) if v.first().is_some_and(|k| k.is_bulk(kind)) => return Ok(()),
            Reply::Array(Some(_)) => {}
            Reply::Error(e) => {
                return Err(io_err(format!("{}: {e}", String::from_utf8_lossy(kind))))
            }
            other => {
                return Err(io_err(format!(
                    "{}: {other:?}",
                    String::from_utf8_lossy(kind)
                )))
            }
        }
    }
}

async fn setnx_worker(
    sh: &Shared,
    id: u32,
    mut c: Conn,
    mut stop: watch::Receiver<bool>,
    st: &mut WorkerStats,
) -> std::io::Result<()> {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03 ^ ((id as u64 + 1) * 0x1000_0001));
    let lease = sh.o.lease_ms.to_string();
    // BLPOP's timeout bounds a wait if a wake-up is ever missed; the lease still rules the lock.
    let block = format!("{:.3}", (sh.o.lease_ms.min(1000) as f64) / 1000.0);
    let blpop = sh.blpop.load(Ordering::Relaxed);
    let mut seq = 0u64;
    while !stopped(&stop) {
        let l = &sh.locks[(rng.next() % sh.locks.len() as u64) as usize];
        seq += 1;
        // 32 hex chars, like redis-py's uuid1().hex.
        let token = format!("{:016x}{:08x}{:08x}", rng.next(), id, seq as u32);
        let t0 = Instant::now();
        let acquired = loop {
            match c
                .cmd(&[
                    b"SET",
                    &l.name,
                    token.as_bytes(),
                    b"NX",
                    b"PX",
                    lease.as_bytes(),
                ])
                .await?
            {
                Reply::Simple(s) if s == b"OK" => break true,
                Reply::Bulk(None) => {}
                other => return Err(io_err(format!("SET NX: {other:?}"))),
            }
            if blpop {
                c.queue(&[b"BLPOP", &l.signal, block.as_bytes()]);
                c.flush().await?;
                tokio::select! {
                    r = c.read_reply() => {
                        match r? {
                            Reply::Array(_) | Reply::Bulk(None) => {}
                            other => return Err(io_err(format!("BLPOP: {other:?}"))),
                        }
                    }
                    // The connection has a BLPOP in flight: the worker is done with it anyway.
                    _ = stop.wait_for(|v| *v) => break false,
                }
            } else {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(1)) => {}
                    _ = stop.wait_for(|v| *v) => break false,
                }
            }
        };
        if !acquired {
            break;
        }
        st.acquisitions += 1;
        st.latencies_us
            .push(t0.elapsed().as_micros().min(u32::MAX as u128) as u32);
        critical(sh, id, l, &mut c).await?;
        match evalsha(
            &mut c,
            SHA_RELEASE,
            REDISPY_RELEASE,
            &[&l.name],
            &[token.as_bytes()],
        )
        .await?
        {
            Reply::Int(1) => {}
            Reply::Int(0) => {
                sh.lease_lost.fetch_add(1, Ordering::Relaxed);
            }
            other => return Err(io_err(format!("release: {other:?}"))),
        }
        if blpop {
            // At most one pending wake-up: a release with nobody waiting must not pile up signals.
            c.queue(&[b"LPUSH", &l.signal, b"1"]);
            c.queue(&[b"LTRIM", &l.signal, b"0", b"0"]);
            c.flush().await?;
            for _ in 0..2 {
                if let Reply::Error(e) = c.read_reply().await? {
                    return Err(io_err(format!("signal: {e}")));
                }
            }
        }
    }
    Ok(())
}
