//! Strings by range and bitmaps beyond single replies (those are in tests/corpus/bitmap.txt and
//! string_range.txt): what reaches the append-only file, keyspace events and WATCH compared
//! with a real redis-server, the memory bounds on growing a string, and in-place edits.

use crate::common;

use common::TempDir;

use std::time::{Duration, Instant};

/// Every write of these families is logged as its effect: a restart gives back the exact bytes
/// (binary included), the TTLs, and keys that a refused BITFIELD still created.
#[test]
fn writes_survive_a_restart_byte_for_byte() {
    let dir = TempDir::new("bits-aof");
    let mut s = common::deadbolt_with_aof(&dir.0, "always", &[]);
    let mut c = s.conn();
    let writes: &[&[&str]] = &[
        &["SETBIT", "bm", "0", "1"],
        &["SETBIT", "bm", "1001", "1"],
        &["SETBIT", "bm", "7", "1"],
        &["SETBIT", "bm", "7", "0"],
        &["SET", "r", "hello\x00world", "EX", "1000"],
        &["SETRANGE", "r", "3", "\u{ff}\u{1}"],
        &["SETRANGE", "pad", "20", "tail"],
        &[
            "BITFIELD", "bf", "SET", "i5", "3", "-7", "INCRBY", "u12", "#3", "4000",
        ],
        &[
            "BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "i8", "40", "-300",
        ],
        &[
            "BITFIELD", "failed", "OVERFLOW", "FAIL", "SET", "u4", "0", "99",
        ],
        &["SET", "src2", "\x0f\x0f\x0f"],
        &["BITOP", "XOR", "x", "bm", "src2"],
        &["BITOP", "NOT", "n", "r"],
        &["SET", "gone", "v"],
        &["BITOP", "AND", "gone", "nosuchkey"],
    ];
    for w in writes {
        let reply = c.cmd(w);
        assert!(!reply.starts_with(b"-"), "{w:?}: {reply:?}");
    }
    let keys = ["bm", "r", "pad", "bf", "failed", "x", "n", "gone"];
    let before: Vec<Vec<u8>> = keys.iter().map(|k| c.cmd(&["GET", k])).collect();
    assert_eq!(before[4], b"$1\r\n\x00\r\n", "FAIL left the key created");
    assert_eq!(before[7], b"$-1\r\n");
    let ttl_before = c.cmd(&["PEXPIRETIME", "r"]);
    s.kill9();
    let s = common::deadbolt_with_aof(&dir.0, "always", &[]);
    let mut c = s.conn();
    let after: Vec<Vec<u8>> = keys.iter().map(|k| c.cmd(&["GET", k])).collect();
    assert_eq!(before, after);
    assert_eq!(c.cmd(&["PEXPIRETIME", "r"]), ttl_before);
    assert_eq!(c.cmd(&["GETBIT", "bm", "1001"]), b":1\r\n");
}

/// The same writes on deadbolt and redis-server announce the same events, and only when the
/// data changed (SETBIT to the value already there, an empty SETRANGE or a BITFIELD that
/// FAIL refused announce nothing; a key such a BITFIELD created still announces `new`).
#[test]
fn keyspace_events_match_redis() {
    let script: &[&[&str]] = &[
        &["SETBIT", "b", "3", "1"],
        &["SETBIT", "b", "3", "1"],
        &["SETBIT", "b", "3", "0"],
        &["SETBIT", "b", "30", "0"],
        &["SETRANGE", "s", "2", "ab"],
        &["SETRANGE", "s", "0", ""],
        &["SETRANGE", "s", "0", "\x00"],
        &["BITFIELD", "f", "SET", "u8", "0", "5"],
        &["BITFIELD", "f", "SET", "u8", "0", "5"],
        &["BITFIELD", "f", "GET", "u8", "0"],
        &[
            "BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "300",
        ],
        &[
            "BITFIELD", "f2", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "300",
        ],
        &[
            "BITFIELD", "f", "INCRBY", "u8", "0", "1", "INCRBY", "u8", "8", "1",
        ],
        &["BITOP", "OR", "d", "b", "s"],
        &["BITOP", "AND", "d", "nosuch"],
        &["BITOP", "AND", "d", "nosuch"],
        &["BITFIELD_RO", "f", "GET", "u8", "0"],
        &["GETRANGE", "s", "0", "-1"],
        &["LCS", "s", "b"],
        &["SET", "end", "1"],
    ];
    let ours = &common::keyevents_like_redis(script);
    let events: Vec<&str> = ours.iter().map(|m| common::keyevent_name(m)).collect();
    assert_eq!(
        events,
        [
            "new", "setbit", "setbit", "setbit", "new", "setrange", "setrange", "new", "setbit",
            "new", "setbit", "new", "set", "del", "new", "set"
        ],
        "{ours:?}"
    );
}

/// WATCH sees exactly the writes Redis signals: the EXEC replies of deadbolt and redis-server
/// agree for each write made by another client between WATCH and EXEC.
#[test]
fn watch_is_invalidated_like_redis() {
    let setup: &[&str] = &["MSET", "k", "abc", "o", "xyz"];
    let cases: &[&[&str]] = &[
        &["SETBIT", "k", "0", "1"],
        &["SETBIT", "k", "0", "0"],
        &["SETBIT", "k", "100", "0"],
        &["SETRANGE", "k", "0", ""],
        &["SETRANGE", "k", "0", "a"],
        &["BITFIELD", "k", "GET", "u8", "0"],
        &["BITFIELD", "k", "SET", "u8", "0", "97"],
        &["BITFIELD", "k", "SET", "u8", "0", "98"],
        &["BITFIELD", "k", "OVERFLOW", "FAIL", "SET", "u4", "0", "99"],
        &["BITOP", "NOT", "k", "o"],
        &["BITOP", "AND", "k", "nosuch"],
        &["BITFIELD_RO", "k", "GET", "u8", "0"],
        &["GETRANGE", "k", "0", "1"],
        &["BITCOUNT", "k"],
        &["BITPOS", "k", "1"],
        &["LCS", "k", "o"],
    ];
    let aborted = common::watch_aborts_like_redis(&[setup], "k", cases);
    assert_eq!(
        aborted,
        [
            true, false, true, false, true, false, false, true, false, true, true, false, false,
            false, false, false
        ]
    );
}

/// With maxmemory set, one command cannot allocate past it: the offsets are valid (below
/// proto-max-bulk-len) but the growth is refused before anything is allocated.
#[test]
fn growth_past_maxmemory_is_refused() {
    let s = common::deadbolt(&["--maxmemory", "64mb"]);
    let mut c = s.conn();
    let oom = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";
    assert_eq!(c.cmd_str(&["SETBIT", "big", "4294967295", "1"]), oom);
    assert_eq!(c.cmd_str(&["SETRANGE", "big", "500000000", "x"]), oom);
    assert_eq!(
        c.cmd_str(&["BITFIELD", "big", "SET", "u8", "#536870911", "1"]),
        oom
    );
    assert_eq!(c.cmd_str(&["SET", "small", "v"]), "+OK\r\n");
    assert_eq!(c.cmd_str(&["SETRANGE", "small", "400000000", "x"]), oom);
    assert_eq!(c.cmd_str(&["GET", "small"]), "$1\r\nv\r\n");
    assert_eq!(c.cmd_str(&["EXISTS", "big"]), ":0\r\n");
    // Small growth is fine, and reads of far offsets allocate nothing.
    assert_eq!(c.cmd_str(&["SETBIT", "ok", "8000", "1"]), ":0\r\n");
    assert_eq!(c.cmd_str(&["GETBIT", "ok", "4294967295"]), ":0\r\n");
    assert_eq!(
        c.cmd_str(&["BITFIELD", "ok", "GET", "u8", "4294967287"]),
        "*1\r\n:0\r\n"
    );
    let info = c.cmd_str(&["INFO", "memory"]);
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(used < 64 << 20, "{used}");
    // Offsets beyond proto-max-bulk-len are refused whatever the memory.
    assert_eq!(
        c.cmd_str(&["SETBIT", "big", "4294967296", "1"]),
        "-ERR bit offset is not an integer or out of range\r\n"
    );
    assert_eq!(
        c.cmd_str(&["SETRANGE", "big", "536870911", "xy"]),
        "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
    );
}

/// SETBIT and BITFIELD edit a large bitmap in place: hundreds of writes to a 64 MB string
/// take far less than copying it once per write would (that would move ~80 GB).
#[test]
fn large_bitmaps_are_edited_in_place() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    let last_bit = (64u64 << 23) - 1;
    assert_eq!(
        c.cmd_str(&["SETBIT", "huge", &last_bit.to_string(), "1"]),
        ":0\r\n"
    );
    let started = Instant::now();
    let n = 600u64;
    for i in 0..n {
        let off = (i * 1_000_003) % last_bit;
        c.send(&["SETBIT", "huge", &off.to_string(), "1"]);
        c.send(&[
            "BITFIELD",
            "huge",
            "INCRBY",
            "u4",
            &(off + 1).to_string(),
            "1",
        ]);
    }
    for _ in 0..2 * n {
        let r = c.read_reply();
        assert!(r.starts_with(b":") || r.starts_with(b"*1"), "{r:?}");
    }
    let elapsed = started.elapsed();
    // Copying the 64 MB value per command would take tens of seconds; 15 s leaves room for a
    // loaded CI machine without letting that through.
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");
    assert_eq!(c.cmd_str(&["STRLEN", "huge"]), format!(":{}\r\n", 64 << 20));
    assert_eq!(
        c.cmd_str(&["GETBIT", "huge", &last_bit.to_string()]),
        ":1\r\n"
    );
    let first_after_byte0 = (0..n)
        .map(|i| (i * 1_000_003) % last_bit)
        .filter(|&o| o >= 8)
        .min()
        .unwrap();
    // Counting and searching a large range are word-at-a-time.
    let started = Instant::now();
    for _ in 0..5 {
        let r = c.cmd_str(&["BITCOUNT", "huge"]);
        assert!(r.starts_with(':'), "{r}");
        assert_eq!(
            c.cmd_str(&["BITPOS", "huge", "1", "1"]),
            format!(":{first_after_byte0}\r\n")
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

/// Seeded random commands of both families over a few small keys, replayed on deadbolt and
/// redis-server: every reply equal. Reaches offsets, widths, ranges and overflow mixes the
/// hand-written corpus does not list.
#[test]
fn random_commands_match_redis() {
    let seed = 0x5eed_b175;
    let mut rng = fastrand::Rng::with_seed(seed);
    let keys = ["a", "b", "c"];
    let int = |rng: &mut fastrand::Rng, lim: i64| rng.i64(-lim..=lim).to_string();
    let mut script: Vec<Vec<String>> = Vec::new();
    for _ in 0..3000 {
        let k = keys[rng.usize(..keys.len())].to_string();
        let unit = || ["", "BIT", "BYTE"];
        let cmd: Vec<String> = match rng.u8(..11) {
            0 => vec![
                "SETBIT".into(),
                k,
                rng.u64(..200).to_string(),
                rng.u8(..2).to_string(),
            ],
            1 => vec!["GETBIT".into(), k, rng.u64(..220).to_string()],
            2 | 3 => {
                let mut v = vec!["BITCOUNT".into(), k];
                if rng.bool() {
                    v.push(int(&mut rng, 30));
                    v.push(int(&mut rng, 30));
                    let u = unit()[rng.usize(..3)];
                    if !u.is_empty() {
                        v.push(u.into());
                    }
                }
                v
            }
            4 | 5 => {
                let mut v = vec!["BITPOS".into(), k, rng.u8(..2).to_string()];
                let extra = rng.usize(..4);
                if extra >= 1 {
                    v.push(int(&mut rng, 40));
                }
                if extra >= 2 {
                    v.push(int(&mut rng, 40));
                }
                if extra == 3 {
                    v.push(["BIT", "BYTE"][rng.usize(..2)].into());
                }
                v
            }
            6 => {
                let op = ["AND", "OR", "XOR", "NOT"][rng.usize(..4)];
                let mut v = vec!["BITOP".into(), op.into(), k];
                let n = if op == "NOT" { 1 } else { rng.usize(1..4) };
                for _ in 0..n {
                    v.push(keys[rng.usize(..keys.len())].into());
                }
                v
            }
            7 | 8 => {
                let mut v = vec![if rng.u8(..4) == 0 {
                    "BITFIELD_RO".into()
                } else {
                    "BITFIELD".into()
                }];
                v.push(k);
                for _ in 0..rng.usize(1..5) {
                    let signed = rng.bool();
                    let bits = if signed {
                        rng.u32(1..=64)
                    } else {
                        rng.u32(1..=63)
                    };
                    let ty = format!("{}{bits}", if signed { 'i' } else { 'u' });
                    let off = if rng.u8(..4) == 0 {
                        format!("#{}", rng.u64(..6))
                    } else {
                        rng.u64(..150).to_string()
                    };
                    let val = match rng.u8(..4) {
                        0 => i64::MAX.to_string(),
                        1 => i64::MIN.to_string(),
                        _ => {
                            let lim = 1 << rng.u32(1..40);
                            int(&mut rng, lim)
                        }
                    };
                    match rng.u8(..4) {
                        0 => v.extend(["GET".into(), ty, off]),
                        1 => v.extend(["SET".into(), ty, off, val]),
                        2 => v.extend(["INCRBY".into(), ty, off, val]),
                        _ => v.extend([
                            "OVERFLOW".into(),
                            ["WRAP", "SAT", "FAIL"][rng.usize(..3)].into(),
                        ]),
                    }
                }
                v
            }
            9 => match rng.u8(..3) {
                0 => vec![
                    "SETRANGE".into(),
                    k,
                    rng.u64(..40).to_string(),
                    (0..rng.usize(..6))
                        .map(|_| char::from(rng.u8(b'a'..=b'e')))
                        .collect(),
                ],
                1 => vec!["GETRANGE".into(), k, int(&mut rng, 40), int(&mut rng, 40)],
                _ => vec!["GET".into(), k],
            },
            _ => {
                let mut v = vec!["LCS".into(), k, keys[rng.usize(..keys.len())].into()];
                match rng.u8(..4) {
                    0 => v.push("LEN".into()),
                    1 => v.extend(["IDX".into(), "WITHMATCHLEN".into()]),
                    2 => v.extend(["IDX".into(), "MINMATCHLEN".into(), rng.u8(..5).to_string()]),
                    _ => {}
                }
                v
            }
        };
        script.push(cmd);
    }
    let [ours, redis] = common::transcripts_on_both(&script);
    for (cmd, (ours, redis)) in script.iter().zip(ours.iter().zip(&redis)) {
        assert_eq!(
            String::from_utf8_lossy(ours),
            String::from_utf8_lossy(redis),
            "seed {seed:#x}: {}",
            cmd.join(" ")
        );
    }
}
