//! PUBLISH fan-out throughput to 100 subscribers, deadbolt vs redis-server in the same run.
//! By hand: `cargo test --release --test server pubsub_bench:: -- --ignored --nocapture`
//! (`FANOUT_MESSAGES`, `FANOUT_SUBSCRIBERS` and `FANOUT_PIPELINE` (default 64) override the
//! defaults).

use crate::common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Publishes `messages` messages (pipelined, 64 in flight) to `subs` subscribers; the time until
/// every subscriber has received every message.
fn fanout(s: &common::Server, subs: usize, messages: usize) -> Duration {
    let payload = "0123456789abcdef";
    let msg_len = common::resp_cmd(&["message", "lock", payload]).len();
    let mut readers = Vec::new();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    for _ in 0..subs {
        let mut c = s.conn();
        c.cmd(&["SUBSCRIBE", "lock"]);
        let ready_tx = ready_tx.clone();
        readers.push(std::thread::spawn(move || {
            let _ = ready_tx.send(());
            let want = msg_len * messages;
            let mut got = 0;
            let mut buf = vec![0u8; 256 << 10];
            while got < want {
                let n = c.stream.read(&mut buf).expect("subscriber read");
                assert!(n > 0, "subscriber disconnected after {got} bytes");
                got += n;
            }
            assert_eq!(got, want);
        }));
    }
    for _ in 0..subs {
        ready_rx.recv().unwrap();
    }
    let mut p = s.conn();
    let one = common::resp_cmd(&["PUBLISH", "lock", payload]);
    let depth = env_or("FANOUT_PIPELINE", 64);
    let mut batch = Vec::with_capacity(one.len() * depth);
    for _ in 0..depth {
        batch.extend_from_slice(&one);
    }
    let reply = format!(":{subs}\r\n");
    let started = Instant::now();
    let mut sent = 0;
    while sent < messages {
        let n = depth.min(messages - sent);
        p.stream.write_all(&batch[..one.len() * n]).unwrap();
        for _ in 0..n {
            assert_eq!(p.read_reply(), reply.as_bytes());
        }
        sent += n;
    }
    for r in readers {
        r.join().unwrap();
    }
    started.elapsed()
}

#[test]
#[ignore]
fn publish_fanout_to_100_subscribers() {
    let subs = env_or("FANOUT_SUBSCRIBERS", 100);
    let messages = env_or("FANOUT_MESSAGES", 50_000);
    let ours = common::deadbolt(&[]);
    let redis = common::redis_server(&[]);
    let mut rates = [Vec::new(), Vec::new()];
    // Alternate the servers so background load hits both alike.
    for _round in 0..3 {
        for (i, s) in [&ours, &redis].into_iter().enumerate() {
            let t = fanout(s, subs, messages);
            rates[i].push(messages as f64 / t.as_secs_f64());
        }
    }
    let best = |v: &Vec<f64>| v.iter().cloned().fold(0.0, f64::max);
    let (d, r) = (best(&rates[0]), best(&rates[1]));
    eprintln!(
        "PUBLISH fan-out to {subs} subscribers, {messages} messages, best of 3: deadbolt {d:.0} msg/s ({:.0} deliveries/s), redis-server {r:.0} msg/s ({:.0} deliveries/s), ratio {:.2}",
        d * subs as f64,
        r * subs as f64,
        d / r
    );
    eprintln!("all rounds: deadbolt {:?}, redis {:?}", rates[0], rates[1]);
}
