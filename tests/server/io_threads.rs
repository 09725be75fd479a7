//! I/O threads (`io-threads 4`, `io-threads-do-reads yes`): replies stay in order per client
//! across many clients, TLS works through them, and client kill, output limits, MONITOR and
//! pub/sub behave as without threads; the threads sleep when the server is idle. Each test
//! also checks INFO's `io_threaded_*_processed`, so it fails if the threads never ran.

use crate::common::{self, resp_cmd, Conn, Server};
use std::time::{Duration, Instant};

const THREADS: &[&str] = &["--io-threads", "4", "--io-threads-do-reads", "yes"];

fn args(extra: &[&'static str]) -> Vec<&'static str> {
    let mut a = THREADS.to_vec();
    a.extend_from_slice(extra);
    a
}

fn info_field(c: &mut Conn, section: &str, name: &str) -> u64 {
    let info = c.cmd_str(&["INFO", section]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .trim()
        .parse()
        .unwrap()
}

/// Both kinds of threaded work happened since the counters were last read as `before`.
fn assert_threads_ran(c: &mut Conn, before: (u64, u64)) {
    let reads = info_field(c, "stats", "io_threaded_reads_processed");
    let writes = info_field(c, "stats", "io_threaded_writes_processed");
    assert!(
        reads > before.0 && writes > before.1,
        "the I/O threads did nothing: reads {reads}, writes {writes}"
    );
}

fn counters(c: &mut Conn) -> (u64, u64) {
    (
        info_field(c, "stats", "io_threaded_reads_processed"),
        info_field(c, "stats", "io_threaded_writes_processed"),
    )
}

/// Reads exactly `want.len()` bytes and compares.
fn expect_bytes(c: &mut Conn, want: &[u8], who: &str) {
    let mut got = Vec::new();
    while got.len() < want.len() {
        got.extend_from_slice(&c.read_reply());
    }
    assert!(
        got == want,
        "{who}: replies out of order or damaged:\n got {:?}\nwant {:?}",
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(want)
    );
}

/// Each of `clients` connections pipelines `per` INCRs of its own counter interleaved with
/// ECHOs naming their place, all sent before any reply is read; every connection's replies
/// come back whole and in order.
fn pipelines_in_order(s: &Server, conns: &mut [Conn], per: usize, round: usize) {
    let _ = s;
    let mut wants = Vec::with_capacity(conns.len());
    for (i, c) in conns.iter_mut().enumerate() {
        let mut req = Vec::new();
        let mut want = Vec::new();
        for j in 1..=per {
            let key = format!("n:{i}");
            req.extend_from_slice(&resp_cmd(&["INCR", key.as_str()]));
            want.extend_from_slice(format!(":{}\r\n", round * per + j).as_bytes());
            let tag = format!("{i}:{j}");
            req.extend_from_slice(&resp_cmd(&["ECHO", tag.as_str()]));
            want.extend_from_slice(format!("${}\r\n{tag}\r\n", tag.len()).as_bytes());
        }
        c.send_raw(&req);
        wants.push(want);
    }
    for (i, (c, want)) in conns.iter_mut().zip(&wants).enumerate() {
        expect_bytes(c, want, &format!("client {i}"));
    }
}

/// Room for this process's 1,000 sockets beside the other tests' (a soft limit of 1024 is
/// common): the soft descriptor limit goes up to the hard one.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write only the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

#[test]
fn pipelined_replies_stay_in_order_across_1000_clients() {
    raise_fd_limit();
    let s = common::deadbolt(&args(&[]));
    let mut admin = s.conn();
    assert!(admin
        .cmd_str(&["INFO", "server"])
        .contains("io_threads_active:1\r\n"));
    assert_eq!(
        admin.cmd_str(&["CONFIG", "GET", "io-threads"]),
        "*2\r\n$10\r\nio-threads\r\n$1\r\n4\r\n"
    );
    let before = counters(&mut admin);
    let mut conns: Vec<Conn> = (0..1000).map(|_| s.conn()).collect();
    for round in 0..3 {
        pipelines_in_order(&s, &mut conns, 16, round);
    }
    assert_threads_ran(&mut admin, before);
    // Every INCR ran once.
    assert_eq!(admin.cmd(&["GET", "n:999"]), b"$2\r\n48\r\n");
}

#[test]
fn tls_clients_are_served_through_the_threads() {
    let t = common::deadbolt_tls(&args(&[]));
    let mut admin = t.conn();
    let before = counters(&mut admin);
    let mut conns: Vec<Conn> = (0..40).map(|_| t.conn_tls()).collect();
    for round in 0..3 {
        pipelines_in_order(&t.server, &mut conns, 8, round);
    }
    // A large reply through TLS and the threads.
    let big = "x".repeat(300_000);
    admin.cmd(&["SET", "big", big.as_str()]);
    for c in conns.iter_mut() {
        c.send(&["GET", "big"]);
    }
    for c in conns.iter_mut() {
        let r = c.read_reply();
        assert_eq!(
            r,
            format!("${}\r\n{big}\r\n", big.len()).into_bytes(),
            "GET big through TLS"
        );
    }
    assert_threads_ran(&mut admin, before);
}

/// Many busy connections around the one under test, so that passes hand their work out.
fn crowd(s: &Server, n: usize) -> Vec<Conn> {
    (0..n).map(|_| s.conn()).collect()
}

fn crowd_ping(crowd: &mut [Conn]) {
    for c in crowd.iter_mut() {
        c.send(&["PING"]);
    }
    for c in crowd.iter_mut() {
        assert_eq!(c.read_reply(), b"+PONG\r\n");
    }
}

#[test]
fn monitor_and_pubsub_see_everything_in_order() {
    let s = common::deadbolt(&args(&[]));
    let mut admin = s.conn();
    let before = counters(&mut admin);
    let mut monitor = s.conn();
    assert_eq!(monitor.cmd(&["MONITOR"]), b"+OK\r\n");
    let mut subs: Vec<Conn> = (0..30).map(|_| s.conn()).collect();
    for c in subs.iter_mut() {
        c.cmd(&["SUBSCRIBE", "ch"]);
    }
    let mut pubs = crowd(&s, 30);
    for round in 0..5 {
        for (i, p) in pubs.iter_mut().enumerate() {
            let m = format!("{round}:{i}");
            p.send(&["PUBLISH", "ch", m.as_str()]);
        }
        for p in pubs.iter_mut() {
            assert_eq!(p.read_reply(), b":30\r\n");
        }
    }
    // Every subscriber got every message, in the order the executor ran the PUBLISHes.
    let mut order: Option<Vec<Vec<u8>>> = None;
    for c in subs.iter_mut() {
        let got: Vec<Vec<u8>> = (0..150).map(|_| c.read_reply()).collect();
        match &order {
            None => order = Some(got),
            Some(o) => assert!(o == &got, "subscribers saw different orders"),
        }
    }
    // MONITOR saw each PUBLISH once, in the same order.
    let mut seen = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen < 150 {
        assert!(Instant::now() < deadline, "MONITOR saw {seen} of 150");
        let line = monitor.read_reply();
        if String::from_utf8_lossy(&line).contains("\"PUBLISH\"") {
            seen += 1;
        }
    }
    assert_threads_ran(&mut admin, before);
}

#[test]
fn client_kill_and_output_limits_with_threads() {
    let s = common::deadbolt(&args(&["--client-output-buffer-limit", "normal 1mb 0 0"]));
    let mut admin = s.conn();
    let before = counters(&mut admin);
    let mut crowd = crowd(&s, 40);
    // CLIENT KILL ID closes the one connection; the others go on.
    let mut victim = s.conn();
    let id = victim.cmd_str(&["CLIENT", "ID"]);
    let id = id.trim_start_matches(':').trim().to_string();
    crowd_ping(&mut crowd);
    assert_eq!(admin.cmd(&["CLIENT", "KILL", "ID", id.as_str()]), b":1\r\n");
    assert!(victim.is_closed(Duration::from_secs(5)));
    crowd_ping(&mut crowd);
    // A client that asks for far more than the limit without reading is closed.
    let big = "y".repeat(200_000);
    admin.cmd(&["SET", "big", big.as_str()]);
    let mut greedy = s.conn();
    let mut req = Vec::new();
    for _ in 0..100 {
        req.extend_from_slice(&resp_cmd(&["GET", "big"]));
    }
    greedy.send_raw(&req);
    crowd_ping(&mut crowd);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let list = admin.cmd_str(&["CLIENT", "LIST"]);
        if list.lines().filter(|l| l.starts_with("id=")).count() == 1 + crowd.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the greedy client stayed: {list}"
        );
        crowd_ping(&mut crowd);
    }
    crowd_ping(&mut crowd);
    assert_threads_ran(&mut admin, before);
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime: fields 14 and 15 of the whole line, 12 and 13 of the rest.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[test]
fn idle_threads_use_no_cpu() {
    let s = common::deadbolt(&args(&[]));
    let mut admin = s.conn();
    let before = counters(&mut admin);
    let mut conns = crowd(&s, 64);
    for round in 0..3 {
        pipelines_in_order(&s, &mut conns, 4, round);
    }
    assert_threads_ran(&mut admin, before);
    let tasks = std::fs::read_dir(format!("/proc/{}/task", s.pid()))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|n| n.starts_with("io_thd_"))
        .count();
    assert_eq!(tasks, 3, "io-threads 4 is the executor and 3 I/O threads");
    // The connections stay open and idle: a thread that spun would use a whole second.
    let t0 = cpu_ticks(s.pid());
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks(s.pid()) - t0;
    assert!(used <= 10, "idle server used {used} ticks of CPU in 1 s");
}

#[test]
fn one_io_thread_is_the_executor_alone() {
    let s = common::deadbolt(&["--io-threads", "1"]);
    let mut c = s.conn();
    assert!(c
        .cmd_str(&["INFO", "server"])
        .contains("io_threads_active:0\r\n"));
    let tasks = std::fs::read_dir(format!("/proc/{}/task", s.pid()))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|n| n.starts_with("io_thd_"))
        .count();
    assert_eq!(tasks, 0);
    // Out of range as Redis says it.
    for bad in ["0", "129"] {
        let out = std::process::Command::new(common::deadbolt_bin())
            .args(["--port", "0", "--io-threads", bad])
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(
            common::all_output(&out).contains("argument must be between 1 and 128 inclusive"),
            "{}",
            common::all_output(&out)
        );
    }
}

#[test]
fn timeouts_and_client_pause_with_threads() {
    let s = common::deadbolt(&args(&["--timeout", "1"]));
    let mut admin = s.conn();
    let before = counters(&mut admin);
    let mut crowd = crowd(&s, 40);
    crowd_ping(&mut crowd);
    // CLIENT PAUSE WRITE: the writes wait, the crowd's PINGs (through the threads) do not,
    // and each writer's replies come in order once the pause ends.
    assert_eq!(
        admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]),
        b"+OK\r\n"
    );
    let mut writers: Vec<Conn> = (0..20).map(|_| s.conn()).collect();
    for (i, w) in writers.iter_mut().enumerate() {
        let k = format!("p:{i}");
        let mut req = resp_cmd(&["INCR", k.as_str()]);
        req.extend_from_slice(&resp_cmd(&["INCR", k.as_str()]));
        w.send_raw(&req);
    }
    crowd_ping(&mut crowd);
    assert!(writers[0]
        .try_read_reply(Duration::from_millis(200))
        .is_none());
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), b"+OK\r\n");
    for w in writers.iter_mut() {
        assert_eq!(w.read_reply(), b":1\r\n");
        assert_eq!(w.read_reply(), b":2\r\n");
    }
    assert_threads_ran(&mut admin, before);
    // `timeout 1`: the idle ones are closed, a client that keeps talking is not.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !crowd
        .iter_mut()
        .all(|c| c.is_closed(Duration::from_millis(10)))
    {
        assert!(Instant::now() < deadline, "idle clients were not closed");
        admin.cmd(&["PING"]);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn a_busy_script_is_answered_with_threads() {
    let s = common::deadbolt(&args(&["--busy-reply-threshold", "50"]));
    let mut admin = s.conn();
    let before = counters(&mut admin);
    let mut crowd = crowd(&s, 40);
    crowd_ping(&mut crowd);
    let mut runner = s.conn();
    runner.send(&["EVAL", "while true do end", "0"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = admin.cmd_str(&["PING"]);
        if r.starts_with("-BUSY") {
            break;
        }
        assert!(Instant::now() < deadline, "never busy: {r}");
        std::thread::sleep(Duration::from_millis(20));
    }
    for c in crowd.iter_mut() {
        c.send(&["PING"]);
    }
    for c in crowd.iter_mut() {
        assert!(c.read_reply().starts_with(b"-BUSY"));
    }
    assert_eq!(admin.cmd(&["SCRIPT", "KILL"]), b"+OK\r\n");
    assert!(runner.read_reply().starts_with(b"-ERR Script killed"));
    crowd_ping(&mut crowd);
    assert_threads_ran(&mut admin, before);
}
