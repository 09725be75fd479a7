//! Geo commands beyond the byte-for-byte corpus (tests/corpus/geo.txt): a seeded random
//! differential against redis-server (random points, searches of every shape and option, STORE
//! forms), keyspace events, WATCH, and what reaches the append-only file.

use crate::common;

use common::TempDir;

use common::{Conn, Server};

/// A longitude with 6 random decimals, sometimes exactly on the antimeridian.
fn lon(rng: &mut fastrand::Rng) -> String {
    match rng.u8(..20) {
        0 => "180".into(),
        1 => "-180".into(),
        _ => format!("{:.6}", rng.f64() * 360.0 - 180.0),
    }
}

/// A latitude inside Redis's WGS84 limits, sometimes exactly on one.
fn lat(rng: &mut fastrand::Rng) -> String {
    match rng.u8(..20) {
        0 => "85.05112878".into(),
        1 => "-85.05112878".into(),
        _ => format!("{:.6}", rng.f64() * 170.1 - 85.05),
    }
}

fn unit(rng: &mut fastrand::Rng) -> String {
    ["m", "km", "ft", "mi", "KM"][rng.usize(..5)].into()
}

/// A distance in `unit`-ish magnitudes from metres to half the planet.
fn dist(rng: &mut fastrand::Rng) -> String {
    let exp = rng.i32(0..8);
    format!("{:.3}", rng.f64() * 10f64.powi(exp))
}

/// Seeded random geo sets and searches on both servers, compared reply by reply. Points are
/// clustered (one random centre, small offsets) as well as global so that both the nine-box
/// pruning and the full-planet searches are exercised, and some points share coordinates so
/// that ties meet both the full sort and pqsort's partial one at a COUNT cut.
#[test]
fn seeded_random_searches_match_redis() {
    let seed = std::env::var("GEO_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x6e0_2026_u64);
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut script: Vec<Vec<String>> = Vec::new();
    let (clon, clat) = (rng.f64() * 300.0 - 150.0, rng.f64() * 140.0 - 70.0);
    let mut placed: Vec<(String, String)> = Vec::new();
    for i in 0..300 {
        let (x, y) = if i % 7 == 6 {
            // Equal coordinates: equal distances, whose order at a COUNT cut is pqsort's.
            placed[rng.usize(..placed.len())].clone()
        } else if i % 2 == 0 {
            (lon(&mut rng), lat(&mut rng))
        } else {
            (
                format!("{:.6}", clon + rng.f64() * 4.0 - 2.0),
                format!("{:.6}", clat + rng.f64() * 4.0 - 2.0),
            )
        };
        placed.push((x.clone(), y.clone()));
        script.push(vec!["GEOADD".into(), "g".into(), x, y, format!("p{i}")]);
    }
    for _ in 0..300 {
        let mut cmd: Vec<String> = Vec::new();
        let variant = rng.u8(..6);
        let store = match variant {
            0 => {
                cmd.extend(["GEOSEARCH".into(), "g".into()]);
                false
            }
            1 => {
                cmd.extend(["GEOSEARCHSTORE".into(), "dst".into(), "g".into()]);
                true
            }
            2 | 3 => {
                cmd.extend([
                    if variant == 2 {
                        "GEORADIUS"
                    } else {
                        "GEORADIUS_RO"
                    }
                    .into(),
                    "g".into(),
                ]);
                if rng.bool() {
                    cmd.extend([lon(&mut rng), lat(&mut rng)]);
                } else {
                    cmd.extend([
                        format!("{:.6}", clon + rng.f64() - 0.5),
                        format!("{:.6}", clat + rng.f64() - 0.5),
                    ]);
                }
                cmd.extend([dist(&mut rng), unit(&mut rng)]);
                false
            }
            _ => {
                cmd.extend([
                    if variant == 4 {
                        "GEORADIUSBYMEMBER"
                    } else {
                        "GEORADIUSBYMEMBER_RO"
                    }
                    .into(),
                    "g".into(),
                    format!("p{}", rng.u32(..300)),
                    dist(&mut rng),
                    unit(&mut rng),
                ]);
                false
            }
        };
        if variant <= 1 {
            if rng.bool() {
                cmd.extend(["FROMMEMBER".into(), format!("p{}", rng.u32(..300))]);
            } else {
                cmd.extend(["FROMLONLAT".into(), lon(&mut rng), lat(&mut rng)]);
            }
            if rng.bool() {
                cmd.extend(["BYRADIUS".into(), dist(&mut rng), unit(&mut rng)]);
            } else {
                cmd.extend([
                    "BYBOX".into(),
                    dist(&mut rng),
                    dist(&mut rng),
                    unit(&mut rng),
                ]);
            }
        }
        match rng.u8(..4) {
            0 => cmd.push("ASC".into()),
            1 => cmd.push("DESC".into()),
            _ => {}
        }
        if rng.bool() {
            cmd.extend(["COUNT".into(), rng.u32(1..60).to_string()]);
            if rng.u8(..3) == 0 {
                cmd.push("ANY".into());
            }
        }
        let radius_store = variant == 2 || variant == 4;
        if store {
            if rng.bool() {
                cmd.push("STOREDIST".into());
            }
        } else if radius_store && rng.u8(..3) == 0 {
            cmd.extend([
                if rng.bool() { "STORE" } else { "STOREDIST" }.into(),
                "dst".into(),
            ]);
        } else {
            for opt in ["WITHDIST", "WITHCOORD", "WITHHASH"] {
                if rng.bool() {
                    cmd.push(opt.into());
                }
            }
        }
        let stores = cmd.iter().any(|a| a.starts_with("STORE")) || store;
        script.push(cmd);
        if stores {
            script.push(
                ["ZRANGE", "dst", "0", "-1", "WITHSCORES"]
                    .map(String::from)
                    .to_vec(),
            );
        }
    }
    let mut members: Vec<String> = vec!["GEOPOS".into(), "g".into()];
    members.extend((0..300).map(|i| format!("p{i}")));
    script.push(members.clone());
    members[0] = "GEOHASH".into();
    script.push(members);
    for _ in 0..50 {
        let mut cmd = vec![
            "GEODIST".to_string(),
            "g".into(),
            format!("p{}", rng.u32(..300)),
            format!("p{}", rng.u32(..300)),
        ];
        if rng.bool() {
            cmd.push(unit(&mut rng));
        }
        script.push(cmd);
    }
    let transcripts = common::transcripts_on_both(&script);
    let mut nonempty = 0;
    for (i, cmd) in script.iter().enumerate() {
        assert_eq!(
            String::from_utf8_lossy(&transcripts[0][i]),
            String::from_utf8_lossy(&transcripts[1][i]),
            "seed {seed:#x}, command {i}: {cmd:?}"
        );
        let r = &transcripts[0][i];
        if cmd[0].starts_with("GEO") && r.starts_with(b"*") && r.len() > 8 {
            nonempty += 1;
        }
    }
    // The draw must actually find points, or the comparison proves little.
    assert!(nonempty > 50, "only {nonempty} non-empty searches");
}

/// GEOADD announces `zadd` (it is ZADD underneath) and `new` for a created key, the STORE forms `georadiusstore` and
/// `geosearchstore`, an empty result `del` of an existing destination (nothing otherwise),
/// and read-only searches nothing.
#[test]
fn keyspace_events_match_redis() {
    let script: &[&[&str]] = &[
        &[
            "GEOADD",
            "g",
            "13.361389",
            "38.115556",
            "a",
            "15.087269",
            "37.502669",
            "b",
        ],
        &["GEOADD", "g", "13.361389", "38.115556", "a"],
        &["GEOADD", "g", "XX", "1", "1", "nope"],
        &["GEOADD", "g", "CH", "13.4", "38.1", "a"],
        &["GEORADIUS", "g", "15", "37", "200", "km", "STORE", "r"],
        &["GEORADIUSBYMEMBER", "g", "a", "500", "km", "STOREDIST", "r"],
        &[
            "GEOSEARCHSTORE",
            "s",
            "g",
            "FROMLONLAT",
            "15",
            "37",
            "BYRADIUS",
            "200",
            "km",
        ],
        &[
            "GEOSEARCHSTORE",
            "s",
            "g",
            "FROMLONLAT",
            "0",
            "0",
            "BYRADIUS",
            "1",
            "km",
        ],
        &[
            "GEOSEARCHSTORE",
            "s",
            "g",
            "FROMLONLAT",
            "0",
            "0",
            "BYRADIUS",
            "1",
            "km",
        ],
        &["GEORADIUS", "nosuch", "0", "0", "1", "km", "STORE", "r"],
        &["GEOSEARCH", "g", "FROMMEMBER", "a", "BYRADIUS", "500", "km"],
        &["GEORADIUS_RO", "g", "15", "37", "200", "km"],
        &["SET", "end", "1"],
    ];
    let ours = &common::keyevents_like_redis(script);
    let events: Vec<&str> = ours.iter().map(|m| common::keyevent_name(m)).collect();
    assert_eq!(
        events,
        [
            "new",
            "zadd",
            "zadd",
            "new",
            "georadiusstore",
            // Replacing an existing destination is not `new`.
            "georadiusstore",
            "new",
            "geosearchstore",
            "del",
            "del",
            "new",
            "set"
        ],
        "{ours:?}"
    );
}

/// WATCH is invalidated by the geo writes Redis signals and not by reads or no-op writes.
#[test]
fn watch_is_invalidated_like_redis() {
    let cases: &[&[&str]] = &[
        &["GEOADD", "k", "1", "1", "new"],
        &["GEOADD", "k", "1", "1", "a"],
        &["GEOADD", "k", "XX", "2", "2", "a"],
        &[
            "GEOSEARCHSTORE",
            "k",
            "src",
            "FROMLONLAT",
            "1",
            "1",
            "BYRADIUS",
            "1",
            "km",
        ],
        &[
            "GEOSEARCHSTORE",
            "k",
            "src",
            "FROMLONLAT",
            "50",
            "50",
            "BYRADIUS",
            "1",
            "km",
        ],
        &["GEORADIUS", "src", "1", "1", "1", "km", "STORE", "k"],
        &[
            "GEOSEARCH",
            "k",
            "FROMLONLAT",
            "1",
            "1",
            "BYRADIUS",
            "1",
            "km",
        ],
        &["GEOPOS", "k", "a"],
    ];
    let run = |server: &Server| -> Vec<Vec<u8>> {
        let (mut w, mut o) = (server.conn(), server.conn());
        let mut out = Vec::new();
        for case in cases {
            o.cmd(&["DEL", "k", "src"]);
            o.cmd(&["GEOADD", "k", "1", "1", "a"]);
            o.cmd(&["GEOADD", "src", "1", "1", "c"]);
            w.cmd(&["WATCH", "k"]);
            w.cmd(&["MULTI"]);
            w.cmd(&["PING"]);
            o.cmd(case);
            out.push(w.cmd(&["EXEC"]));
        }
        out
    };
    let mut t = Vec::new();
    for (_, server) in common::deadbolt_and_redis(&[]) {
        t.push(run(&server));
    }
    assert_eq!(t[0], t[1]);
    let aborted = t[0].iter().filter(|r| r.as_slice() == b"*-1\r\n").count();
    assert_eq!(aborted, 5, "{:?}", t[0]);
}

/// Geo writes reach the append-only file as their effect: after kill -9 and a restart the
/// geo set, the STORE destinations (TTL dropped) and a deleted empty destination are as before.
#[test]
fn writes_survive_a_restart() {
    let dir = TempDir::new("geo-aof");
    let mut s = common::deadbolt_with_aof(&dir.0, "always", &[]);
    let mut c = s.conn();
    let writes: &[&[&str]] = &[
        &[
            "GEOADD",
            "g",
            "13.361389",
            "38.115556",
            "a",
            "15.087269",
            "37.502669",
            "b",
        ],
        &["GEOADD", "g", "180", "85.05112878", "pole"],
        &["SET", "r", "old", "EX", "1000"],
        &["GEORADIUS", "g", "15", "37", "200", "km", "STOREDIST", "r"],
        &[
            "GEOSEARCHSTORE",
            "s",
            "g",
            "FROMMEMBER",
            "a",
            "BYBOX",
            "400",
            "400",
            "km",
        ],
        &["SET", "gone", "v"],
        &[
            "GEOSEARCHSTORE",
            "gone",
            "g",
            "FROMLONLAT",
            "0",
            "0",
            "BYRADIUS",
            "1",
            "m",
        ],
    ];
    for wr in writes {
        let reply = c.cmd(wr);
        assert!(!reply.starts_with(b"-"), "{wr:?}: {reply:?}");
    }
    let dump = |c: &mut Conn| -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = ["g", "r", "s"]
            .iter()
            .map(|k| c.cmd(&["ZRANGE", k, "0", "-1", "WITHSCORES"]))
            .collect();
        v.push(c.cmd(&["GEOPOS", "g", "a", "b", "pole"]));
        v.push(c.cmd(&["TTL", "r"]));
        v.push(c.cmd(&["EXISTS", "gone"]));
        v
    };
    let before = dump(&mut c);
    assert_eq!(before[4], b":-1\r\n");
    assert_eq!(before[5], b":0\r\n");
    assert!(before[1].starts_with(b"*4\r\n"), "{:?}", before[1]);
    s.kill9();
    let s = common::deadbolt_with_aof(&dir.0, "always", &[]);
    let mut c = s.conn();
    assert_eq!(dump(&mut c), before);
}

/// A search over a big geo set is a scan of it, as in Redis, and nothing is sized by COUNT:
/// the largest COUNT answers every point, a whole-planet radius with COUNT 1 one point, and
/// the server keeps answering.
#[test]
fn big_searches_are_bounded_by_the_set() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    let mut rng = fastrand::Rng::with_seed(7);
    for batch in 0..20 {
        let mut cmd = vec!["GEOADD".to_string(), "big".into()];
        for i in 0..1000 {
            cmd.push(format!("{:.6}", rng.f64() * 360.0 - 180.0));
            cmd.push(format!("{:.6}", rng.f64() * 170.0 - 85.0));
            cmd.push(format!("m{batch}-{i}"));
        }
        assert_eq!(c.cmd(&cmd), b":1000\r\n");
    }
    let all = c.cmd(&[
        "GEOSEARCH",
        "big",
        "FROMLONLAT",
        "0",
        "0",
        "BYRADIUS",
        "30000",
        "km",
        "COUNT",
        "9223372036854775807",
        "ANY",
    ]);
    assert!(all.starts_with(b"*20000\r\n"), "{:?}", &all[..20]);
    let one = c.cmd(&[
        "GEORADIUS",
        "big",
        "0",
        "0",
        "30000",
        "km",
        "COUNT",
        "1",
        "DESC",
    ]);
    assert!(one.starts_with(b"*1\r\n"), "{one:?}");
    let stored = c.cmd(&[
        "GEOSEARCHSTORE",
        "dst",
        "big",
        "FROMMEMBER",
        "m0-0",
        "BYBOX",
        "40000",
        "40000",
        "km",
        "STOREDIST",
    ]);
    assert!(stored.starts_with(b":"), "{stored:?}");
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
}
