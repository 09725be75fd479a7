//! An incident as an operator meets it: a redis-py holder and a Redisson holder (their own
//! scripts from lua/, byte-exact, sent as the clients send them) each let a 200 ms lease run
//! out before releasing, while another lock is held and a client waits for it. The log line,
//! `LOCKS LATE`, the Prometheus endpoint and the page at `/` — loaded in a real headless
//! browser (Debian's chromium), live JavaScript and all — each name the key, the client and how
//! late. The browser's screenshot is checked for its size and for drawn content.
//!
//! `DEADBOLT_PAGE_SCREENSHOT=path` keeps the screenshot (docs/lock-insight-page.png is one).

use crate::common;
use crate::lock_insight_util;

use lock_insight_util::{client_addr, http_get, number_after, require, script, unix_ms};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One late release as the test expects every view to name it.
struct Late {
    key: &'static str,
    prefix: &'static str,
    client_id: u64,
    addr: String,
    name: &'static str,
    lease_ms: u64,
    late_ms: u64,
    held_ms: u64,
}

/// Waits until `key` is gone (its lease ran out).
fn wait_gone(c: &mut common::Conn, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.cmd(&["PTTL", key]) != b":-2\r\n" {
        assert!(Instant::now() < deadline, "{key}: the lease never ran out");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The log line naming `key`'s late release: checks it names the client and the lease, and
/// returns how late and how long held it says.
fn logged(
    s: &common::Server,
    key: &str,
    id: u64,
    addr: &str,
    name: &str,
    lease: u64,
) -> (u64, u64) {
    let needle =
        format!("Lock released late: key '{key}' by client id={id} addr={addr} name={name}, ");
    s.wait_log(&needle, Duration::from_secs(5));
    let line = s
        .log
        .lock()
        .unwrap()
        .iter()
        .find(|l| l.contains(&needle))
        .cloned()
        .unwrap();
    assert!(line.contains(" * "), "logged at notice: {line}");
    let late = number_after(&line, &needle);
    assert!(
        line.contains(&format!("{late} ms after its lease of {lease} ms ran out")),
        "{line}"
    );
    let held = number_after(&line, "held ");
    assert_eq!(held, lease + late, "{line}");
    (late, held)
}

/// Runs chromium headless with `args` and the page URL; its standard output. Fails (never
/// skips) when chromium is missing or does not finish within a minute.
fn chromium(profile: &std::path::Path, args: &[&str], url: &str) -> String {
    let bin = require("chromium", "chromium");
    let mut child = Command::new(bin)
        .args([
            "--headless",
            // Tests run as root in CI, where chromium's sandbox refuses to start.
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--disable-dev-shm-usage",
            // Timers run ahead in virtual time: the page's script fetches a few times.
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn chromium");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "chromium did not finish within 60 s: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "chromium failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn late_redis_py_and_redisson_releases_are_named_in_the_log_command_endpoint_and_page() {
    let metrics = common::free_port();
    let s = common::deadbolt(&["--metrics-port", &metrics.to_string()]);
    let (mut py, mut other, mut waiter, mut rs, mut op) =
        (s.conn(), s.conn(), s.conn(), s.conn(), s.conn());
    for (c, name) in [
        (&mut py, "py-worker"),
        (&mut other, "py-other"),
        (&mut waiter, "py-waiter"),
        (&mut rs, "redisson-worker"),
    ] {
        assert_eq!(c.cmd(&["CLIENT", "SETNAME", name]), b"+OK\r\n");
    }
    let id = |c: &mut common::Conn| number_after(&c.cmd_str(&["CLIENT", "ID"]), ":");
    let (py_id, rs_id) = (id(&mut py), id(&mut rs));
    let (py_addr, rs_addr) = (client_addr(&mut py), client_addr(&mut rs));
    // The clients load their scripts and call them by SHA1, as redis-py's Script and
    // Redisson's evalSha do.
    let sha = |c: &mut common::Conn, path: &str| {
        let r = c.cmd_str(&["SCRIPT", "LOAD", &script(path)]);
        r.lines().nth(1).expect("a SHA1").to_string()
    };
    let py_release = sha(&mut py, "redis-py/lua_release_script.lua");
    let rs_acquire = sha(&mut rs, "redisson/rlock_trylockinnerasync.lua");
    let rs_unlock = sha(&mut rs, "redisson/rlock_unlockinnerasync.lua");

    // redis-py: `Lock("lock:orders:42", timeout=0.2)`; a waiter retries; the lease runs out,
    // another worker takes the lock, and the first releases late.
    let key = "lock:orders:42";
    assert_eq!(
        py.cmd(&["SET", key, "tok-py", "NX", "PX", "200"]),
        b"+OK\r\n"
    );
    assert_eq!(
        waiter.cmd(&["SET", key, "tok-w", "NX", "PX", "30000"]),
        b"$-1\r\n"
    );
    wait_gone(&mut op, key);
    assert_eq!(
        other.cmd(&["SET", key, "tok-other", "NX", "PX", "30000"]),
        b"+OK\r\n"
    );
    assert_eq!(
        waiter.cmd(&["SET", key, "tok-w", "NX", "PX", "30000"]),
        b"$-1\r\n"
    );
    let before = unix_ms();
    assert_eq!(
        py.cmd(&["EVALSHA", &py_release, "1", key, "tok-py"]),
        b":0\r\n"
    );

    // Redisson: `getLock("invoices").lock(1100, MILLISECONDS)`; the lease runs out unrenewed
    // and unlock() finds the lock no longer its own (IllegalMonitorStateException). Its lease
    // is over a second: the log line comes at most once a second.
    let name = "invoices";
    let owner = "6f0f5a34-5cd1-4a8c-9d4c-3a1ef1f2a6b1:57";
    assert_eq!(
        rs.cmd(&["EVALSHA", &rs_acquire, "1", name, "1100", owner]),
        b"$-1\r\n"
    );
    wait_gone(&mut op, name);
    assert_eq!(
        rs.cmd(&[
            "EVALSHA",
            &rs_unlock,
            "3",
            name,
            "redisson_lock__channel:{invoices}",
            "redisson_unlock_latch:{invoices}:b7c1",
            "0",
            "30000",
            owner,
            "publish",
            "13500",
        ]),
        b"$-1\r\n"
    );

    // The log lines.
    let (py_late, py_held) = logged(&s, key, py_id, &py_addr, "py-worker", 200);
    let (rs_late, rs_held) = logged(&s, name, rs_id, &rs_addr, "redisson-worker", 1100);
    let expected = [
        Late {
            key: name,
            prefix: "invoices",
            client_id: rs_id,
            addr: rs_addr,
            name: "redisson-worker",
            lease_ms: 1100,
            late_ms: rs_late,
            held_ms: rs_held,
        },
        Late {
            key,
            prefix: "lock:orders",
            client_id: py_id,
            addr: py_addr,
            name: "py-worker",
            lease_ms: 200,
            late_ms: py_late,
            held_ms: py_held,
        },
    ];

    // The command: newest first.
    let hist = op.cmd_str(&["LOCKS", "LATE"]);
    assert!(
        hist.starts_with("*2\r\n*20\r\n$2\r\nid\r\n:1\r\n"),
        "{hist:?}"
    );
    let at = hist
        .find(&format!("$3\r\nkey\r\n${}\r\n{key}\r\n", key.len()))
        .expect("the redis-py entry");
    let (newer, older) = hist.split_at(at);
    for (e, part) in expected.iter().zip([newer, older]) {
        for want in [
            format!("$3\r\nkey\r\n${}\r\n{}\r\n", e.key.len(), e.key),
            format!("$9\r\nclient-id\r\n:{}\r\n", e.client_id),
            format!("$11\r\nclient-addr\r\n${}\r\n{}\r\n", e.addr.len(), e.addr),
            format!("$11\r\nclient-name\r\n${}\r\n{}\r\n", e.name.len(), e.name),
            format!("$8\r\nlease-ms\r\n:{}\r\n", e.lease_ms),
            format!("$7\r\nlate-ms\r\n:{}\r\n", e.late_ms),
            format!("$7\r\nheld-ms\r\n:{}\r\n", e.held_ms),
        ] {
            assert!(part.contains(&want), "{want:?} in {part:?}");
        }
    }
    let acquired = number_after(older, "$8\r\nacquired\r\n:");
    assert!(acquired <= before, "{hist:?}");

    // The endpoint (rendered about once a second).
    let series: Vec<String> = expected
        .iter()
        .map(|e| {
            format!(
                "deadbolt_lock_last_late_release_late_seconds{{prefix=\"{}\",key=\"{}\",client_id=\"{}\",client_addr=\"{}\",client_name=\"{}\"}} {}",
                e.prefix,
                e.key,
                e.client_id,
                e.addr,
                e.name,
                e.late_ms as f64 / 1000.0
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let (status, text) = http_get(metrics, "/metrics");
        assert_eq!(status, "HTTP/1.1 200 OK");
        if series.iter().all(|w| text.contains(w)) {
            break text;
        }
        assert!(Instant::now() < deadline, "{series:?} in {text}");
        std::thread::sleep(Duration::from_millis(100));
    };
    for want in [
        "deadbolt_lock_late_releases_total{prefix=\"lock:orders\"} 1\n",
        "deadbolt_lock_late_releases_total{prefix=\"invoices\"} 1\n",
        "deadbolt_lock_held{prefix=\"lock:orders\"} 1\n",
        "deadbolt_lock_waiters{prefix=\"lock:orders\"} 1\n",
        "deadbolt_lock_view_leader 1\n",
    ] {
        assert!(text.contains(want), "{want} in {text}");
    }

    // The page without a browser: server-rendered, refreshing without script, no external
    // assets.
    let (status, page) = http_get(metrics, "/");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        page.contains("<noscript><meta http-equiv=\"refresh\" content=\"2\"></noscript>"),
        "{page}"
    );
    assert!(
        !page.contains(" src=") && !page.contains("href=\"http"),
        "{page}"
    );

    // The page in a browser: the DOM after its script ran (it fetched the page again and
    // swapped the live part in), naming each late release's key, client and lateness, the held
    // lock and its waiter.
    let dir = common::TempDir::new("lock-insight-page");
    let url = format!("http://127.0.0.1:{metrics}/");
    let dom = chromium(&dir.0.join("dump"), &["--dump-dom"], &url);
    assert!(
        dom.contains("<p id=\"status\" class=\"ok\">Live: updated "),
        "{dom}"
    );
    for e in &expected {
        let row = format!(
            "<td class=\"k\">{}</td><td>{}</td><td class=\"k\">{}</td><td class=\"k\">{}</td><td>{}</td><td class=\"late\">{}</td><td>{}</td>",
            e.key, e.client_id, e.addr, e.name, e.lease_ms, e.late_ms, e.held_ms
        );
        assert!(dom.contains(&row), "{row} in {dom}");
    }
    // lock:orders: one held (by `other`), its oldest hold, one waiter.
    let row = dom
        .split("<tr>")
        .find(|r| r.starts_with("<td class=\"k\">lock:orders</td>"))
        .unwrap_or_else(|| panic!("the lock:orders row in {dom}"));
    assert!(
        row.starts_with("<td class=\"k\">lock:orders</td><td>1</td><td>"),
        "{row}"
    );
    let oldest = number_after(row, "<td class=\"k\">lock:orders</td><td>1</td><td>");
    assert!(oldest < 30_000, "{row}");
    assert!(
        row.contains(
            "</td><td>1</td><td>2</td><td>2</td><td>1</td><td>0</td><td class=\"late\">1</td>"
        ),
        "waiters 1, acquires 2, contended 2, waits 1, releases 0, late 1: {row}"
    );
    assert!(dom.contains("<b>late releases / s</b>"), "{dom}");
    assert!(dom.contains("<b>lock:orders</b> hold: n=1, "), "{dom}");

    // The screenshot: the size asked for, and drawn: many pixels off the background, some of
    // them the red of the late figures.
    let png = dir.0.join("page.png");
    chromium(
        &dir.0.join("shot"),
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1100,900",
        ],
        &url,
    );
    let file = std::fs::File::open(&png).expect("chromium wrote the screenshot");
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    assert_eq!((info.width, info.height), (1100, 900));
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    let px = |i: usize| (buf[i], buf[i + 1], buf[i + 2]);
    let (mut drawn, mut red) = (0usize, 0usize);
    for i in (0..info.buffer_size()).step_by(channels) {
        let (r, g, b) = px(i);
        if (r, g, b) != (255, 255, 255) {
            drawn += 1;
        }
        if r > 140 && g < 60 && b < 60 {
            red += 1;
        }
    }
    let total = (info.width * info.height) as usize;
    assert!(
        drawn > total / 50 && drawn < total * 9 / 10,
        "{drawn} of {total} pixels drawn"
    );
    assert!(red > 20, "{red} red pixels (the late figures)");
    if let Ok(keep) = std::env::var("DEADBOLT_PAGE_SCREENSHOT") {
        std::fs::copy(&png, keep).expect("keep the screenshot");
    }
}
