//! The log as Redis writes it, for the pipelines and greps operators already have:
//! `pid:role dd Mon yyyy hh:mm:ss.mmm level message`, no colour codes on a pipe or in a file,
//! a fatal error said once, `-v`/`--version` as redis-server prints them, and "Ready to accept
//! connections" only once the log is loaded (INFO persistence shows the loading progress).

use crate::common;

use common::{Conn, TempDir};
use std::time::{Duration, Instant};

/// Redis's serverLogRaw shape, checked character class by character class.
fn redis_shaped(line: &str) -> bool {
    let Some((pid, rest)) = line.split_once(':') else {
        return false;
    };
    let b = rest.as_bytes();
    // "M 26 Nov 2026 12:48:30.675 * msg"
    pid.bytes().all(|c| c.is_ascii_digit())
        && !pid.is_empty()
        && b.len() > 28
        && matches!(b[0], b'M' | b'S')
        && b[1] == b' '
        && b[2..4].iter().all(u8::is_ascii_digit)
        && b[4] == b' '
        && b[5].is_ascii_uppercase()
        && b[6..8].iter().all(u8::is_ascii_lowercase)
        && b[8] == b' '
        && b[9..13].iter().all(u8::is_ascii_digit)
        && b[13] == b' '
        && b[14..16].iter().all(u8::is_ascii_digit)
        && b[16] == b':'
        && b[17..19].iter().all(u8::is_ascii_digit)
        && b[19] == b':'
        && b[20..22].iter().all(u8::is_ascii_digit)
        && b[22] == b'.'
        && b[23..26].iter().all(u8::is_ascii_digit)
        && b[26] == b' '
        && matches!(b[27], b'.' | b'-' | b'*' | b'#')
        && b[28] == b' '
}

#[test]
fn lines_have_redis_shape_without_colour_on_a_pipe_and_in_a_file() {
    let s = common::deadbolt(&["--loglevel", "verbose"]);
    s.wait_log("Ready to accept connections", Duration::from_secs(10));
    let mut c = s.conn();
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    let lines = s.log.lock().unwrap().clone();
    assert!(lines.len() >= 4, "{lines:?}");
    for l in &lines {
        assert!(!l.contains('\u{1b}'), "colour code on a pipe: {l:?}");
        assert!(redis_shaped(l), "not Redis's shape: {l:?}");
    }
    for banner in [
        "Server initialized",
        "Ready to accept connections",
        "just started",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(banner)),
            "{banner}: {lines:?}"
        );
    }

    let dir = TempDir::new("logfile");
    let file = dir.0.join("deadbolt.log");
    // With a log file the port cannot be read from standard output: a fixed free port.
    let port = common::free_port().to_string();
    let mut child = std::process::Command::new(common::deadbolt_bin())
        .args(["--port", &port, "--bind", "127.0.0.1", "--logfile"])
        .arg(&file)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if text.contains("Ready to accept connections") {
            break text;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("never ready: {text:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    for l in text.lines() {
        assert!(!l.contains('\u{1b}'), "colour code in the file: {l:?}");
        assert!(redis_shaped(l), "not Redis's shape: {l:?}");
    }
}

#[test]
fn version_flags_print_redis_servers_fields() {
    for flag in ["-v", "--version"] {
        let out = std::process::Command::new(common::deadbolt_bin())
            .arg(flag)
            .output()
            .unwrap();
        assert!(out.status.success(), "{flag}");
        let line = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
        assert!(line.starts_with("deadbolt server v="), "{line}");
        // Every field redis-server -v prints, in its order.
        let mut at = 0;
        for field in [" v=", " sha=", " malloc=mimalloc-", " bits=64", " build="] {
            let i = line[at..]
                .find(field)
                .unwrap_or_else(|| panic!("{field} in {line}"));
            at += i + field.len();
        }
    }
}

#[test]
fn a_fatal_error_is_said_once() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = std::process::Command::new(common::deadbolt_bin())
        .args(["--port", &port, "--bind", "127.0.0.1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let all = common::all_output(&out);
    assert_eq!(
        all.matches("Could not create server TCP listening socket")
            .count(),
        1,
        "{all}"
    );
    assert!(!all.contains("Ready to accept connections"), "{all}");
}

/// A log big enough that loading takes several executor rounds: while it loads, INFO
/// persistence shows Redis's loading_* figures and the log has not said Ready; it says Ready
/// after "DB loaded".
#[test]
fn ready_is_said_only_after_loading_and_info_shows_progress() {
    let dir = TempDir::new("ready-after-load");
    let d = dir.0.to_str().unwrap();
    {
        let s = common::deadbolt_with_aof(&dir.0, "everysec", &[]);
        let mut c = s.conn();
        // 300 000 SETs in pipelined chunks.
        let mut batch = Vec::new();
        for chunk in 0..30 {
            batch.clear();
            for i in 0..10_000 {
                let key = format!("key:{chunk}:{i}");
                batch.extend_from_slice(&common::resp_cmd(&["SET", &key, "some-value-of-a-lock"]));
            }
            c.send_raw(&batch);
            for _ in 0..10_000 {
                assert_eq!(c.read_reply(), b"+OK\r\n");
            }
        }
        c.send(&["SHUTDOWN"]);
        assert!(c.is_closed(Duration::from_secs(30)));
    }
    let s = common::deadbolt(&["--dir", d, "--appendonly", "yes"]);
    let mut c = Conn::connect(s.port);
    let mut saw_progress = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info = c.cmd_str(&["INFO", "persistence"]);
        // (not `contains`: "async_loading:0" is always there)
        if info.lines().any(|l| l == "loading:0") {
            break;
        }
        assert!(Instant::now() < deadline, "still loading");
        if saw_progress.is_none() {
            let ready = s
                .log
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.contains("Ready to accept connections"));
            assert!(!ready, "Ready logged while loading");
            saw_progress = Some(info);
        }
    }
    let info = saw_progress.expect("the load was too quick to be seen: make the log bigger");
    for field in [
        "loading_start_time:",
        "loading_total_bytes:",
        "loading_rdb_used_mem:",
        "loading_loaded_bytes:",
        "loading_loaded_perc:",
        "loading_eta_seconds:",
    ] {
        assert!(info.contains(field), "{field} in {info}");
    }
    let total: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("loading_total_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("total bytes");
    assert!(total > 1_000_000, "{info}");
    s.wait_log("Ready to accept connections", Duration::from_secs(10));
    let lines = s.log.lock().unwrap().clone();
    let loaded = lines.iter().position(|l| l.contains("DB loaded"));
    let ready = lines
        .iter()
        .position(|l| l.contains("Ready to accept connections"));
    assert!(loaded.is_some() && loaded < ready, "{lines:?}");
    assert_eq!(c.cmd(&["DBSIZE"]), b":300000\r\n");
}
