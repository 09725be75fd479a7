//! Slow subscribers: `client-output-buffer-limit pubsub` disconnects a subscriber that does not
//! read, the server's memory stays bounded, and a subscriber that reads gets every message.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn vm_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

struct Outcome {
    baseline_kb: u64,
    peak_kb: u64,
    published: usize,
    /// PUBLISH replies: how many messages still reached both subscribers.
    delivered_to_both: usize,
    slow_bytes: usize,
}

/// Publishes `total` bytes to two subscribers on channel `big`: one never reads, one reads and
/// checks every message arrives in order.
fn run(
    limits: Option<&str>,
    total: usize,
    msg_size: usize,
) -> (common::Server, common::Conn, Outcome) {
    let s = common::deadbolt(&[]);
    let mut admin = s.conn();
    if let Some(l) = limits {
        assert_eq!(
            admin.cmd_str(&["CONFIG", "SET", "client-output-buffer-limit", l]),
            "+OK\r\n"
        );
    }
    let mut slow = s.conn();
    slow.cmd(&["SUBSCRIBE", "big"]);
    let mut fast = s.conn();
    fast.cmd(&["SUBSCRIBE", "big"]);
    let count = total / msg_size;
    let received = Arc::new(AtomicUsize::new(0));
    let reader = {
        let received = received.clone();
        std::thread::spawn(move || {
            for i in 0..count {
                let r = fast.read_reply();
                let head = format!("seq={i:010}:");
                let expected_len = format!("${msg_size}\r\n{head}");
                let at = r
                    .windows(expected_len.len())
                    .position(|w| w == expected_len.as_bytes());
                assert!(
                    at.is_some(),
                    "message {i} out of order: {:?}",
                    String::from_utf8_lossy(&r[..r.len().min(80)])
                );
                received.store(i + 1, Ordering::Release);
            }
            // Nothing after the last one.
            assert_eq!(fast.try_read_reply(Duration::from_millis(50)), None);
            fast
        })
    };
    let mut publisher = s.conn();
    let pid = s.pid();
    let baseline_kb = vm_rss_kb(pid);
    let mut peak_kb = baseline_kb;
    let mut payload = vec![b'x'; msg_size];
    let mut delivered_to_both = 0;
    for i in 0..count {
        // Keep the reading subscriber within a few messages of the publisher, so only the slow
        // one can reach its limit however loaded the machine is.
        while i - received.load(Ordering::Acquire) > 16 {
            std::thread::yield_now();
        }
        let head = format!("seq={i:010}:");
        payload[..head.len()].copy_from_slice(head.as_bytes());
        let r = publisher.cmd(&[&b"PUBLISH"[..], b"big", &payload]);
        match r.as_slice() {
            b":2\r\n" => {
                assert_eq!(delivered_to_both, i, "the slow subscriber came back");
                delivered_to_both += 1;
            }
            b":1\r\n" => {}
            other => panic!("PUBLISH replied {:?}", String::from_utf8_lossy(other)),
        }
        if i % 64 == 0 {
            peak_kb = peak_kb.max(vm_rss_kb(pid));
        }
    }
    let fast = reader.join().unwrap();
    peak_kb = peak_kb.max(vm_rss_kb(pid));
    let slow_bytes = slow.read_to_close().len();
    (
        s,
        fast,
        Outcome {
            baseline_kb,
            peak_kb,
            published: count * msg_size,
            delivered_to_both,
            slow_bytes,
        },
    )
}

#[test]
fn slow_subscriber_is_disconnected_at_the_hard_limit() {
    let started = Instant::now();
    let (s, _fast, o) = run(Some("pubsub 2mb 0 0"), 256 << 20, 32 << 10);
    // Disconnected: only a prefix reached it, bounded by the limit plus socket buffers.
    assert!(o.delivered_to_both > 0);
    assert!(o.delivered_to_both < o.published / (32 << 10));
    assert!(o.slow_bytes < 64 << 20, "{}", o.slow_bytes);
    s.wait_log(
        "scheduled to be closed ASAP for overcoming of output buffer limits",
        Duration::from_secs(5),
    );
    s.wait_log(" flags=P db=0 sub=1 psub=0 ssub=0 ", Duration::from_secs(1));
    let grew_mb = o.peak_kb.saturating_sub(o.baseline_kb) / 1024;
    eprintln!(
        "published {} MB in {:?}; slow subscriber got {} KB; RSS baseline {} MB, peak {} MB",
        o.published >> 20,
        started.elapsed(),
        o.slow_bytes >> 10,
        o.baseline_kb / 1024,
        o.peak_kb / 1024
    );
    assert!(grew_mb < 48, "RSS grew {grew_mb} MB");
    let mut c = s.conn();
    assert_eq!(
        c.cmd_str(&["PUBSUB", "NUMSUB", "big"]),
        "*2\r\n$3\r\nbig\r\n:1\r\n"
    );
}

/// Small messages take the other delivery path (copied into each subscriber's deferred output
/// instead of shared): the same limit applies.
#[test]
fn slow_subscriber_of_small_messages_is_disconnected_too() {
    let (s, _fast, o) = run(Some("pubsub 1mb 0 0"), 48 << 20, 4 << 10);
    assert!(o.delivered_to_both > 0);
    assert!(o.delivered_to_both < o.published / (4 << 10));
    assert!(o.slow_bytes < 32 << 20, "{}", o.slow_bytes);
    s.wait_log(
        "scheduled to be closed ASAP for overcoming of output buffer limits",
        Duration::from_secs(5),
    );
    let grew_mb = o.peak_kb.saturating_sub(o.baseline_kb) / 1024;
    assert!(grew_mb < 32, "RSS grew {grew_mb} MB");
}

#[test]
fn soft_limit_disconnects_after_its_seconds() {
    let s = common::deadbolt(&[]);
    let mut admin = s.conn();
    admin.cmd(&[
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "pubsub 0 1mb 1",
    ]);
    let mut slow = s.conn();
    slow.cmd(&["SUBSCRIBE", "c"]);
    let payload = vec![b'y'; 256 << 10];
    let started = Instant::now();
    // Over the soft limit quickly, then it must stay over it for more than one second.
    let mut dropped_after = None;
    while started.elapsed() < Duration::from_secs(10) {
        let r = admin.cmd(&[&b"PUBLISH"[..], b"c", &payload]);
        if r == b":0\r\n" {
            dropped_after = Some(started.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = dropped_after.expect("soft limit never enforced");
    assert!(after >= Duration::from_secs(1), "{after:?}");
    assert!(slow.is_closed(Duration::from_secs(5)));
}

/// The real thing, by hand: `cargo test --release --test server pubsub_limits:: -- --ignored --nocapture`
/// publishes 1 GB with the default limits (pubsub 32mb 8mb 60).
#[test]
#[ignore]
fn one_gigabyte_with_default_limits() {
    let started = Instant::now();
    let (_s, _fast, o) = run(None, 1 << 30, 64 << 10);
    eprintln!(
        "published {} MB in {:?}; both got {} messages; slow subscriber got {} MB; RSS baseline {} MB, peak {} MB",
        o.published >> 20,
        started.elapsed(),
        o.delivered_to_both,
        o.slow_bytes >> 20,
        o.baseline_kb / 1024,
        o.peak_kb / 1024
    );
    assert!(o.delivered_to_both < (1 << 30) / (64 << 10));
}
