//! `loadgen pipe`: pipelined load in the shape of `redis-benchmark -c C -P P -n N -r R`, for the
//! server-bound rows of bench/run.
//!
//! Why not redis-benchmark there: with one core for the client, redis-benchmark spends more CPU
//! per request than a fast server does (it re-arms its write event with two `epoll_ctl` calls per
//! round trip and formats every request), so a server that needs less than that goes idle between
//! batches and the run measures the client. This generator encodes all N requests before the clock
//! starts, sends each batch of P as one slice of that buffer, and only frames the replies, so both
//! servers are saturated and the throughput ratio is the servers' ratio.
//!
//! Same request stream as redis-benchmark: every `__rand_int__` in an argument is replaced by an
//! independent uniform draw from [0, R), zero-padded to 12 digits; each connection keeps P requests
//! in flight and sends the next P when the last reply of its batch arrives. A request's latency is
//! from its batch's send to the read that completed its reply. Any error reply fails the run.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PLACEHOLDER: &[u8] = b"__rand_int__";
/// Latency histogram resolution: 1 µs buckets up to 1 s (above that, the last bucket).
const BUCKETS: usize = 1_000_000;

struct Opts {
    addr: String,
    clients: usize,
    pipeline: usize,
    requests: usize,
    keyspace: u64,
    seed: u64,
    command: Vec<Vec<u8>>,
}

fn usage() -> ! {
    eprintln!(
        "usage: loadgen pipe [--addr 127.0.0.1:6379] [--clients 50] [--pipeline 16] \
[--requests 1000000] [--keyspace 10000] [--seed 1] -- CMD [ARG...]   (__rand_int__ in an ARG \
is a random key number)"
    );
    std::process::exit(2)
}

fn parse_opts(args: &[String]) -> Opts {
    let mut o = Opts {
        addr: "127.0.0.1:6379".into(),
        clients: 50,
        pipeline: 16,
        requests: 1_000_000,
        keyspace: 10_000,
        seed: 1,
        command: Vec::new(),
    };
    let mut i = 0;
    while i < args.len() {
        if args[i] == "--" {
            o.command = args[i + 1..]
                .iter()
                .map(|a| a.as_bytes().to_vec())
                .collect();
            break;
        }
        let v = args.get(i + 1).cloned().unwrap_or_default();
        let num = || -> u64 { v.parse().unwrap_or_else(|_| usage()) };
        match args[i].as_str() {
            "--addr" => o.addr = v.clone(),
            "--clients" => o.clients = num() as usize,
            "--pipeline" => o.pipeline = num() as usize,
            "--requests" => o.requests = num() as usize,
            "--keyspace" => o.keyspace = num(),
            "--seed" => o.seed = num(),
            _ => usage(),
        }
        i += 2;
    }
    if o.command.is_empty() || o.clients == 0 || o.pipeline == 0 || o.keyspace == 0 {
        usage();
    }
    o
}

/// xorshift64*: fast, and the stream only needs to be uniform, not unpredictable.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) % n
    }
}

/// All requests, encoded back to back; `starts[i]` is where request i begins (plus an end mark).
fn encode_all(o: &Opts) -> (Vec<u8>, Vec<usize>) {
    let mut rng = Rng(o.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut buf = Vec::with_capacity(o.requests * 64);
    let mut starts = Vec::with_capacity(o.requests + 1);
    let mut arg = Vec::new();
    for _ in 0..o.requests {
        starts.push(buf.len());
        buf.extend_from_slice(format!("*{}\r\n", o.command.len()).as_bytes());
        for a in &o.command {
            arg.clear();
            let mut rest = &a[..];
            while let Some(p) = rest
                .windows(PLACEHOLDER.len())
                .position(|w| w == PLACEHOLDER)
            {
                arg.extend_from_slice(&rest[..p]);
                arg.extend_from_slice(format!("{:012}", rng.below(o.keyspace)).as_bytes());
                rest = &rest[p + PLACEHOLDER.len()..];
            }
            arg.extend_from_slice(rest);
            buf.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            buf.extend_from_slice(&arg);
            buf.extend_from_slice(b"\r\n");
        }
    }
    starts.push(buf.len());
    (buf, starts)
}

/// Frames whole replies in `buf[at..]`: returns (replies, bytes consumed), stopping before a
/// partial one. Error replies in the complete ones are appended to `errors` by their text.
fn frame(buf: &[u8], mut at: usize, errors: &mut Vec<String>) -> (usize, usize) {
    let start = at;
    let mut done = 0;
    let mut found = Vec::new();
    while let Some(end) = reply_end(buf, at, &mut found) {
        errors.append(&mut found);
        done += 1;
        at = end;
    }
    (done, at - start)
}

/// Where the reply starting at `at` ends, or None if `buf` does not hold all of it yet.
fn reply_end(buf: &[u8], at: usize, errors: &mut Vec<String>) -> Option<usize> {
    let nl = at + buf.get(at..)?.iter().position(|&b| b == b'\n')?;
    let body = buf.get(at + 1..nl.saturating_sub(1))?;
    let next = nl + 1;
    match buf[at] {
        b'-' => {
            errors.push(String::from_utf8_lossy(body).into_owned());
            Some(next)
        }
        b'$' => {
            let n = parse_int(body);
            if n < 0 {
                return Some(next);
            }
            let end = next + n as usize + 2;
            (end <= buf.len()).then_some(end)
        }
        kind @ (b'*' | b'~' | b'>' | b'%') => {
            let n = parse_int(body).max(0) * if kind == b'%' { 2 } else { 1 };
            let mut end = next;
            for _ in 0..n {
                end = reply_end(buf, end, errors)?;
            }
            Some(end)
        }
        _ => Some(next),
    }
}

fn parse_int(b: &[u8]) -> i64 {
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        _ => (false, b),
    };
    let v = digits
        .iter()
        .fold(0i64, |v, d| v * 10 + (d.wrapping_sub(b'0') as i64));
    if neg {
        -v
    } else {
        v
    }
}

/// The pre-encoded requests, read by every connection.
struct Requests {
    bytes: Vec<u8>,
    starts: Vec<usize>,
}

struct Shared {
    total: usize,
    next: usize,
    pipeline: usize,
    latency: Vec<u32>,
    errors: Vec<String>,
    error_count: u64,
}

impl Shared {
    /// The next batch (up to P requests) as a range of request indexes.
    fn take(&mut self) -> Option<(usize, usize)> {
        if self.next >= self.total {
            return None;
        }
        let from = self.next;
        self.next = (from + self.pipeline).min(self.total);
        Some((from, self.next))
    }

    fn record(&mut self, n: usize, waited: Duration) {
        let us = (waited.as_micros() as usize).min(BUCKETS - 1);
        self.latency[us] += n as u32;
    }
}

async fn connection(
    addr: String,
    requests: Rc<Requests>,
    shared: Rc<RefCell<Shared>>,
) -> Result<(), String> {
    let mut s = TcpStream::connect(&addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut have = 0usize;
    let mut errors = Vec::new();
    loop {
        let batch = shared.borrow_mut().take();
        let Some((from, to)) = batch else {
            return Ok(());
        };
        let sent = Instant::now();
        // The batch is one slice of the pre-encoded buffer: one write, no copy.
        let batch = &requests.bytes[requests.starts[from]..requests.starts[to]];
        s.write_all(batch)
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut owed = to - from;
        while owed > 0 {
            if have == buf.len() {
                buf.resize(buf.len() * 2, 0);
            }
            let n = s
                .read(&mut buf[have..])
                .await
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("server closed the connection".into());
            }
            have += n;
            let (done, used) = frame(&buf[..have], 0, &mut errors);
            let now = Instant::now();
            buf.copy_within(used..have, 0);
            have -= used;
            let done = done.min(owed);
            owed -= done;
            let mut sh = shared.borrow_mut();
            sh.record(done, now - sent);
            if !errors.is_empty() {
                sh.error_count += errors.len() as u64;
                if sh.errors.len() < 3 {
                    sh.errors.append(&mut errors);
                }
                errors.clear();
            }
        }
    }
}

pub fn pipe_main(args: &[String]) -> i32 {
    let o = parse_opts(args);
    let (bytes, starts) = encode_all(&o);
    let requests = Rc::new(Requests { bytes, starts });
    let shared = Rc::new(RefCell::new(Shared {
        total: o.requests,
        next: 0,
        pipeline: o.pipeline,
        latency: vec![0; BUCKETS],
        errors: Vec::new(),
        error_count: 0,
    }));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let local = tokio::task::LocalSet::new();
    let began = Instant::now();
    let results = local.block_on(&rt, async {
        let tasks: Vec<_> = (0..o.clients)
            .map(|_| {
                tokio::task::spawn_local(connection(
                    o.addr.clone(),
                    requests.clone(),
                    shared.clone(),
                ))
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap_or_else(|e| Err(e.to_string())));
        }
        out
    });
    let secs = began.elapsed().as_secs_f64();
    let sh = shared.borrow();
    if let Some(Err(e)) = results.iter().find(|r| r.is_err()) {
        println!("{{\"error\":{}}}", crate::json_str(e));
        return 1;
    }
    if sh.error_count > 0 {
        println!(
            "{{\"error\":{}}}",
            crate::json_str(&format!(
                "{} error replies, first: {}",
                sh.error_count,
                sh.errors.first().cloned().unwrap_or_default()
            ))
        );
        return 1;
    }
    let total: u64 = sh.latency.iter().map(|&c| c as u64).sum();
    let pct = |p: f64| -> f64 {
        let want = ((total as f64) * p).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (us, &c) in sh.latency.iter().enumerate() {
            seen += c as u64;
            if seen >= want {
                return (us as f64 + 1.0) / 1000.0;
            }
        }
        0.0
    };
    let sum: f64 = sh
        .latency
        .iter()
        .enumerate()
        .map(|(us, &c)| (us as f64 + 0.5) * c as f64)
        .sum();
    let max = sh.latency.iter().rposition(|&c| c > 0).unwrap_or(0);
    println!(
        "{{\"requests\":{total},\"seconds\":{secs:.4},\"rps\":{:.1},\"p50_latency_ms\":{:.3},\
\"p99_latency_ms\":{:.3},\"avg_latency_ms\":{:.3},\"max_latency_ms\":{:.3}}}",
        total as f64 / secs,
        pct(0.50),
        pct(0.99),
        sum / total.max(1) as f64 / 1000.0,
        (max as f64 + 1.0) / 1000.0
    );
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_whole_replies_and_stops_before_a_partial_one() {
        let mut errs = Vec::new();
        let buf = b"+OK\r\n$3\r\nabc\r\n$-1\r\n:12\r\n*2\r\n$1\r\nx\r\n-ERR in\r\n-ERR top\r\n$5\r\nab";
        let (done, used) = frame(buf, 0, &mut errs);
        assert_eq!(done, 6);
        assert_eq!(&buf[used..], b"$5\r\nab");
        assert_eq!(errs, vec!["ERR in".to_string(), "ERR top".to_string()]);
    }

    #[test]
    fn an_array_cut_short_is_not_counted_nor_its_errors() {
        let mut errs = Vec::new();
        let (done, used) = frame(b"*3\r\n-ERR a\r\n:1\r\n", 0, &mut errs);
        assert_eq!((done, used), (0, 0));
        assert!(errs.is_empty());
    }

    #[test]
    fn placeholders_become_independent_twelve_digit_draws() {
        let o = Opts {
            addr: String::new(),
            clients: 1,
            pipeline: 1,
            requests: 3,
            keyspace: 1_000_000_000,
            seed: 7,
            command: vec![b"GET".to_vec(), b"k:__rand_int__:__rand_int__".to_vec()],
        };
        let (bytes, starts) = encode_all(&o);
        assert_eq!(starts.len(), 4);
        let first = &bytes[starts[0]..starts[1]];
        assert!(first.starts_with(b"*2\r\n$3\r\nGET\r\n$27\r\nk:000"));
        let key = &first[first.len() - 29..first.len() - 2];
        assert!(key[2..14].iter().chain(&key[15..27]).all(u8::is_ascii_digit));
        assert_ne!(&key[2..14], &key[15..27], "two draws in one argument");
    }
}
