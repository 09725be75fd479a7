//! Latency tracking as Redis 7.0 has it (`latency-tracking yes` by default): INFO latencystats'
//! percentiles per command and LATENCY HISTOGRAM's cumulative power-of-two buckets, compared
//! with a real redis-server for shape (timings differ) and byte for byte where no timing is in
//! the reply (the event monitor's empty answers, DOCTOR, GRAPH, HELP, unknown names).

use crate::common;

use common::Conn;

/// RESP2 array of bulk strings and integers, flattened to their texts.
fn items(reply: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(reply)
        .split("\r\n")
        .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
        .map(|l| l.trim_start_matches(':').to_string())
        .collect()
}

fn exercise(c: &mut Conn) {
    assert_eq!(c.cmd(&["SET", "k", "v"]), b"+OK\r\n");
    for _ in 0..5 {
        assert_eq!(c.cmd(&["GET", "k"]), b"$1\r\nv\r\n");
    }
    assert!(c.cmd(&["CONFIG", "GET", "maxclients"]).len() > 10);
}

#[test]
fn histograms_and_percentiles_like_redis() {
    let ours = common::deadbolt(&[]);
    let redis = common::redis_server(&[]);
    let (mut a, mut b) = (ours.conn(), redis.conn());
    exercise(&mut a);
    exercise(&mut b);
    for args in [
        &["LATENCY", "HISTOGRAM", "nosuch"][..],
        &["LATENCY", "LATEST"],
        &["LATENCY", "HISTORY", "command"],
        &["LATENCY", "RESET"],
        &["LATENCY", "GRAPH", "command"],
        &["LATENCY", "DOCTOR"],
        &["LATENCY", "HELP"],
    ] {
        assert_eq!(a.cmd_str(args), b.cmd_str(args), "{args:?}");
    }
    // Shape: name, calls, the count, histogram_usec, then (bound, cumulative) pairs that end at
    // the number of calls, bounds from Redis's series 1, 2, 4, 8, 16, 33, 66, 132 … (the
    // highest value its HDR histogram counts as equal to 1024 ns << k, in µs).
    let bounds: Vec<u64> = (0..30)
        .map(|k| ((1024u64 << k) + (1024u64 << k) / 128 - 1) / 1000)
        .collect();
    assert_eq!(bounds[..8], [1, 2, 4, 8, 16, 33, 66, 132]);
    for cmd in ["get", "set", "config|get"] {
        for c in [&mut a, &mut b] {
            let got = items(&c.cmd(&["LATENCY", "HISTOGRAM", cmd]));
            assert_eq!(
                &got[..3],
                &[cmd, "calls", if cmd == "get" { "5" } else { "1" }],
                "{got:?}"
            );
            assert_eq!(got[3], "histogram_usec", "{got:?}");
            let pairs: Vec<(u64, u64)> = got[4..]
                .chunks(2)
                .map(|p| (p[0].parse().unwrap(), p[1].parse().unwrap()))
                .collect();
            assert!(!pairs.is_empty(), "{got:?}");
            assert!(pairs.iter().all(|(b, _)| bounds.contains(b)), "{got:?}");
            assert!(
                pairs.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1),
                "{got:?}"
            );
            assert_eq!(pairs.last().unwrap().1.to_string(), got[2], "{got:?}");
        }
    }
    // INFO latencystats: one line per command that ran, Redis's percentile labels.
    for c in [&mut a, &mut b] {
        assert_eq!(
            c.cmd(&[
                "CONFIG",
                "SET",
                "latency-tracking-info-percentiles",
                "50 99.9 100"
            ]),
            b"+OK\r\n"
        );
        let info = c.cmd_str(&["INFO", "latencystats"]);
        let line = info
            .lines()
            .find(|l| l.starts_with("latency_percentiles_usec_get:"))
            .unwrap_or_else(|| panic!("{info}"));
        let fields: Vec<&str> = line.split(':').nth(1).unwrap().split(',').collect();
        assert_eq!(fields.len(), 3, "{line}");
        for (f, label) in fields.iter().zip(["p50=", "p99.9=", "p100="]) {
            let v = f
                .strip_prefix(label)
                .unwrap_or_else(|| panic!("{label} in {line}"));
            let (_, decimals) = v.split_once('.').unwrap_or_else(|| panic!("{line}"));
            assert_eq!(decimals.len(), 3, "{line}");
        }
        assert!(c.cmd_str(&["INFO", "all"]).contains("# Latencystats\r\n"));
        assert!(!c.cmd_str(&["INFO"]).contains("# Latencystats"));
        // Off: the section is empty, as in Redis.
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "latency-tracking", "no"]),
            b"+OK\r\n"
        );
        let info = c.cmd_str(&["INFO", "latencystats"]);
        assert!(!info.contains("latency_percentiles_usec_"), "{info}");
    }
}
