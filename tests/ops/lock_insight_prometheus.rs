//! A real Prometheus (Debian's `prometheus` package) scrapes deadbolt's metrics port: the
//! target is up (Prometheus parsed the exposition), a late release shows in its query API with
//! its prefix, key and client labels, and the documented alert expression
//! `increase(deadbolt_lock_late_releases_total[5m]) > 0` selects the prefix.

use crate::common;
use crate::lock_insight_util;

use lock_insight_util::{client_addr, http_get, number_after, require, script, url_encode};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A running Prometheus, killed on drop.
struct Prometheus {
    child: std::process::Child,
    port: u16,
    _dir: common::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Scraping `target` every second, its storage in a directory of its own, its API on a free
    /// loopback port.
    fn start(target: u16) -> Prometheus {
        let bin = require("prometheus", "prometheus");
        let dir = common::TempDir::new("lock-insight-prometheus");
        let config = dir.0.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: deadbolt\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
            ),
        )
        .unwrap();
        let port = common::free_port();
        let log = std::fs::File::create(dir.0.join("prometheus.log")).unwrap();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.0.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn prometheus");
        Prometheus {
            child,
            port,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.0.join("prometheus.log")).unwrap_or_default()
    }

    /// The API's answer to `path` (a JSON document), once it answers at all.
    fn api(&mut self, path: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("prometheus exited ({status}): {}", self.log());
            }
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                let (status, body) = http_get(self.port, path);
                if status.contains(" 200 ") {
                    return body;
                }
            }
            assert!(
                Instant::now() < deadline,
                "prometheus's API never answered {path}: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Polls the instant query `q` until its JSON answer satisfies `ok`.
    fn query_until(&mut self, q: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let body = self.api(&format!("/api/v1/query?query={}", url_encode(q)));
            if ok(&body) {
                return body;
            }
            assert!(Instant::now() < deadline, "{q}: {body}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

#[test]
fn prometheus_scrapes_late_releases_with_their_labels() {
    let metrics = common::free_port();
    let s = common::deadbolt(&["--metrics-port", &metrics.to_string()]);
    let (mut a, mut b) = (s.conn(), s.conn());
    assert_eq!(a.cmd(&["CLIENT", "SETNAME", "worker-a"]), b"+OK\r\n");
    let a_id = number_after(&a.cmd_str(&["CLIENT", "ID"]), ":");
    let a_addr = client_addr(&mut a);
    let key = "lock:orders:42";
    assert_eq!(a.cmd(&["SET", key, "tok-a", "NX", "PX", "200"]), b"+OK\r\n");

    // The target is up: Prometheus parsed the text it scraped. The prefix's late counter is
    // there at 0 before anything was late.
    let mut p = Prometheus::start(metrics);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let t = p.api("/api/v1/targets");
        if t.contains("\"health\":\"up\"") {
            break;
        }
        assert!(Instant::now() < deadline, "the target never came up: {t}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let q = "deadbolt_lock_late_releases_total{prefix=\"lock:orders\"}";
    p.query_until(q, |r| r.contains("\"value\":[") && r.contains(",\"0\"]"));

    // A's lease runs out, B takes the lock, A releases late.
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.cmd(&["PTTL", key]) != b":-2\r\n" {
        assert!(Instant::now() < deadline, "the lease never ran out");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        b.cmd(&["SET", key, "tok-b", "NX", "PX", "30000"]),
        b"+OK\r\n"
    );
    let release = script("redis-py/lua_release_script.lua");
    assert_eq!(a.cmd(&["EVAL", &release, "1", key, "tok-a"]), b":0\r\n");
    let hist = a.cmd_str(&["LOCKS", "LATE", "1"]);
    let late_ms = number_after(&hist, "$7\r\nlate-ms\r\n:");

    p.query_until(q, |r| r.contains(",\"1\"]"));
    let r = p.query_until("deadbolt_lock_last_late_release_late_seconds", |r| {
        r.contains("\"key\":\"lock:orders:42\"")
    });
    for want in [
        "\"prefix\":\"lock:orders\"".to_string(),
        format!("\"client_id\":\"{a_id}\""),
        format!("\"client_addr\":\"{a_addr}\""),
        "\"client_name\":\"worker-a\"".to_string(),
        "\"job\":\"deadbolt\"".to_string(),
        format!(",\"{}\"]", late_ms as f64 / 1000.0),
    ] {
        assert!(r.contains(&want), "{want} in {r}");
    }
    // The alert rule docs/lock-insight.md gives fires for the prefix.
    let r = p.query_until("increase(deadbolt_lock_late_releases_total[5m]) > 0", |r| {
        r.contains("\"prefix\":\"lock:orders\"")
    });
    assert!(r.contains("\"status\":\"success\""), "{r}");
    // The held lock (B's) and the histograms are there too.
    p.query_until("deadbolt_lock_held{prefix=\"lock:orders\"}", |r| {
        r.contains(",\"1\"]")
    });
    p.query_until(
        "deadbolt_lock_hold_seconds_count{prefix=\"lock:orders\"}",
        |r| r.contains(",\"1\"]"),
    );
}
