//! redis_exporter (the Prometheus exporter most Redis users run; Debian's
//! `prometheus-redis-exporter`) scrapes deadbolt as it scrapes Redis: no scrape error, every
//! series it makes for redis-server it also makes for deadbolt, and the key values agree with
//! deadbolt's own INFO.

use crate::common;

use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const EXPORTER: &str = "prometheus-redis-exporter";

struct Exporter {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Exporter {
    /// One exporter for the server on `redis_port`, with the options that make it send the most
    /// commands (config metrics, the client list, key checks and counts).
    fn start(redis_port: u16, dir: &TempDir, name: &str) -> Exporter {
        for attempt in 0..5 {
            let port = free_port();
            let log = dir.0.join(format!("{name}-{attempt}.log"));
            let file = std::fs::File::create(&log).unwrap();
            let mut child = Command::new(EXPORTER)
                .args([
                    "-redis.addr",
                    &format!("redis://127.0.0.1:{redis_port}"),
                    "-web.listen-address",
                    &format!("127.0.0.1:{port}"),
                    "-include-config-metrics",
                    "-export-client-list",
                    "-check-keys",
                    "lock:*",
                    "-check-single-keys",
                    "lock:a,counter",
                    "-count-keys",
                    "db0=lock:*",
                    "-redis-only-metrics",
                ])
                .stdout(file.try_clone().unwrap())
                .stderr(file)
                .stdin(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("{EXPORTER} is required (apt-get install {EXPORTER}; scripts/test installs it): {e}")
                });
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // lost the port to another process: try another
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Exporter { child, port, log };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("could not start {EXPORTER}");
    }

    fn scrape(&self) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        assert!(
            body.starts_with("HTTP/1.0 200"),
            "scrape answered {body:.200}"
        );
        body.split_once("\r\n\r\n").unwrap().1.to_string()
    }

    fn problems(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap()
            .lines()
            .filter(|l| !l.contains("level=info") && !l.contains("level=debug"))
            .map(str::to_string)
            .collect()
    }
}

/// series (name and labels) → value
fn parse(metrics: &str) -> BTreeMap<String, f64> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// Series whose label values are facts of the process or its build, not of the data.
fn comparable(series: &str) -> bool {
    ![
        "redis_instance_info",
        "redis_config_value",
        "redis_config_key_value",
        "redis_connected_clients_details",
        "redis_latency_percentiles",
        "redis_commands_",
        "redis_errors_total",
    ]
    .iter()
    .any(|p| series.starts_with(p))
}

fn load(c: &mut Conn) {
    for i in 0..50 {
        assert_eq!(
            c.cmd_str(&["SET", &format!("lock:{i}"), "owner", "PX", "60000", "NX"]),
            "+OK\r\n"
        );
    }
    c.cmd_str(&["SET", "lock:a", "owner-a"]);
    c.cmd_str(&["INCRBY", "counter", "7"]);
    c.cmd_str(&["HSET", "redisson:lock", "id:1", "1"]);
    c.cmd_str(&["GET", "lock:1"]);
    c.cmd_str(&["GET", "missing"]);
}

fn info_field(info: &str, name: &str) -> f64 {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("INFO has no {name}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn redis_exporter_scrapes_deadbolt_as_it_scrapes_redis() {
    let dir = TempDir::new("exporter");
    let deadbolt = deadbolt(&[]);
    let redis = redis_server(&[]);
    let mut seen = Vec::new();
    for (name, server) in [("deadbolt", &deadbolt), ("redis", &redis)] {
        load(&mut server.conn());
        let exporter = Exporter::start(server.port, &dir, name);
        let metrics = parse(&exporter.scrape());
        assert_eq!(metrics.get("redis_up"), Some(&1.0), "{name}: redis_up");
        assert_eq!(
            metrics.get("redis_exporter_last_scrape_error{err=\"\"}"),
            Some(&0.0),
            "{name}: scrape error: {:?}",
            metrics
                .keys()
                .filter(|k| k.starts_with("redis_exporter_last_scrape_error"))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            exporter.problems(),
            Vec::<String>::new(),
            "{name}: exporter log"
        );
        seen.push((name, metrics, exporter));
    }

    let series = |m: &BTreeMap<String, f64>| -> BTreeSet<String> {
        m.keys().filter(|k| comparable(k)).cloned().collect()
    };
    let (ours, theirs) = (series(&seen[0].1), series(&seen[1].1));
    let missing: Vec<_> = theirs.difference(&ours).collect();
    assert!(
        missing.is_empty(),
        "series Redis has and deadbolt lacks: {missing:?}"
    );
    let ours_names: BTreeSet<&str> = seen[0]
        .1
        .keys()
        .map(|k| k.split('{').next().unwrap())
        .collect();
    for name in seen[1].1.keys().map(|k| k.split('{').next().unwrap()) {
        assert!(
            ours_names.contains(name),
            "metric {name} missing for deadbolt"
        );
    }

    // The data metrics agree with Redis's for the same data.
    for s in [
        "redis_db_keys{db=\"db0\"}",
        "redis_db_keys_expiring{db=\"db0\"}",
        "redis_keys_count{db=\"db0\",key=\"lock:*\"}",
        "redis_key_size{db=\"db0\",key=\"lock:a\"}",
        "redis_key_size{db=\"db0\",key=\"counter\"}",
        "redis_key_value{db=\"db0\",key=\"counter\"}",
    ] {
        assert_eq!(seen[0].1.get(s), seen[1].1.get(s), "{s}");
        assert!(seen[0].1.contains_key(s), "{s} missing");
    }

    // And deadbolt's values are its INFO's (read after the scrape: the figures that move with
    // the scrape itself are compared as bounds).
    let ours = &seen[0].1;
    let info = deadbolt.conn().cmd_str(&["INFO", "all"]);
    assert_eq!(ours["redis_db_keys{db=\"db0\"}"], 53.0);
    for (metric, field) in [
        ("redis_blocked_clients", "blocked_clients"),
        ("redis_config_maxclients", "maxclients"),
        ("redis_expired_keys_total", "expired_keys"),
    ] {
        assert_eq!(
            ours[metric],
            info_field(&info, field),
            "{metric} vs INFO {field}"
        );
    }
    for (metric, field) in [
        // The key checks run after the exporter read INFO, and read keys themselves.
        ("redis_keyspace_hits_total", "keyspace_hits"),
        ("redis_keyspace_misses_total", "keyspace_misses"),
        ("redis_commands_processed_total", "total_commands_processed"),
        (
            "redis_connections_received_total",
            "total_connections_received",
        ),
        ("redis_memory_used_bytes", "used_memory"),
    ] {
        assert!(
            ours[metric] > 0.0 && ours[metric] <= info_field(&info, field),
            "{metric} {} vs INFO {field} {}",
            ours[metric],
            info_field(&info, field)
        );
    }
    // (A young process may have used less CPU than one clock tick.)
    assert!(ours["redis_cpu_user_seconds_total"] <= info_field(&info, "used_cpu_user"));
    assert!(ours["redis_memory_used_dataset_bytes"] > 0.0);
    assert!(ours["redis_memory_used_startup_bytes"] > 0.0);
    assert!(ours["redis_memory_used_overhead_bytes"] >= ours["redis_memory_used_startup_bytes"]);
}
