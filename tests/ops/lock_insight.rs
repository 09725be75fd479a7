//! Lock insight an operator reads during an incident: a redis-py-style holder (`SET k tok NX
//! PX 200`, then the release script of lua/redis-py) whose lease runs out before it releases.
//! The log line, `LOCKS LATE` and the Prometheus endpoint each name the key, the client and
//! how late the release came.

use crate::common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn script(path: &str) -> String {
    std::fs::read_to_string(format!("{}/lua/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn scrape(port: u16) -> String {
    http_get(port, "/metrics")
}

fn http_get(port: u16, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The integer after `what` in `text`, up to the first byte that is not a digit.
fn number_after(text: &str, what: &str) -> u64 {
    let at = text
        .find(what)
        .unwrap_or_else(|| panic!("{what:?} in {text:?}"))
        + what.len();
    let digits: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("a number after {what:?} in {text:?}"))
}

#[test]
fn a_late_release_is_named_in_the_log_the_command_and_the_endpoint() {
    let metrics = common::free_port();
    let s = common::deadbolt(&["--metrics-port", &metrics.to_string()]);
    let (mut a, mut b) = (s.conn(), s.conn());
    assert_eq!(a.cmd(&["CLIENT", "SETNAME", "worker-a"]), b"+OK\r\n");
    let a_id = number_after(&a.cmd_str(&["CLIENT", "ID"]), ":");
    let key = "lock:orders:42";
    assert_eq!(a.cmd(&["SET", key, "tok-a", "NX", "PX", "200"]), b"+OK\r\n");
    assert_eq!(b.cmd(&["SET", key, "tok-b", "NX", "PX", "200"]), b"$-1\r\n");
    // A "works" past its lease; B takes the key once it is gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.cmd(&["PTTL", key]) != b":-2\r\n" {
        assert!(Instant::now() < deadline, "the lease never ran out");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        b.cmd(&["SET", key, "tok-b", "NX", "PX", "10000"]),
        b"+OK\r\n"
    );
    let release = script("redis-py/lua_release_script.lua");
    let before = unix_ms();
    assert_eq!(a.cmd(&["EVAL", &release, "1", key, "tok-a"]), b":0\r\n");

    // The log line.
    let needle = format!("Lock released late: key '{key}' by client id={a_id} addr=");
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
    assert!(line.contains("name=worker-a,"), "{line}");
    let late = number_after(&line, "name=worker-a, ");
    assert!(
        line.contains(&format!("{late} ms after its lease of 200 ms ran out")),
        "{line}"
    );
    let held = number_after(&line, "held ");
    assert_eq!(held, 200 + late, "{line}");
    let acquired = number_after(&line, "acquired at unix ms ");
    assert!(acquired <= before, "{line}");

    // The history.
    let hist = a.cmd_str(&["LOCKS", "LATE"]);
    for want in [
        "*1\r\n*20\r\n$2\r\nid\r\n:0\r\n".to_string(),
        format!("$3\r\nkey\r\n$14\r\n{key}\r\n"),
        format!("$9\r\nclient-id\r\n:{a_id}\r\n"),
        "$11\r\nclient-name\r\n$8\r\nworker-a\r\n".to_string(),
        format!("$8\r\nacquired\r\n:{acquired}\r\n"),
        "$8\r\nlease-ms\r\n:200\r\n".to_string(),
        format!("$7\r\nlate-ms\r\n:{late}\r\n"),
        format!("$7\r\nheld-ms\r\n:{held}\r\n"),
    ] {
        assert!(hist.contains(&want), "{want:?} in {hist:?}");
    }
    let addr = a.cmd_str(&["CLIENT", "INFO"]);
    let addr = addr
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    assert!(
        hist.contains(&format!(
            "$11\r\nclient-addr\r\n${}\r\n{addr}\r\n",
            addr.len()
        )),
        "{addr} in {hist:?}"
    );

    // The endpoint (rendered about once a second).
    let want = format!(
        "deadbolt_lock_last_late_release_late_seconds{{prefix=\"lock:orders\",key=\"{key}\",client_id=\"{a_id}\",client_addr=\"{addr}\",client_name=\"worker-a\"}} {}",
        late as f64 / 1000.0
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = scrape(metrics);
        if text.contains(&want) {
            break text;
        }
        assert!(Instant::now() < deadline, "{want} never appeared: {text}");
        std::thread::sleep(Duration::from_millis(100));
    };
    // The late hold is in the hold histogram (B still holds the key).
    assert!(
        text.contains("deadbolt_lock_hold_seconds_count{prefix=\"lock:orders\"} 1"),
        "{text}"
    );
    assert!(text.contains("deadbolt_lock_late_releases_total{prefix=\"lock:orders\"} 1"));
    // B holds the key now; B waited once (its retries would not count again).
    assert!(
        text.contains("deadbolt_lock_held{prefix=\"lock:orders\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("deadbolt_lock_waits_total{prefix=\"lock:orders\"} 1"),
        "{text}"
    );
    let oldest = text
        .lines()
        .find_map(|l| l.strip_prefix("deadbolt_lock_oldest_held_seconds{prefix=\"lock:orders\"} "))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(oldest > 0.0 && oldest < 10.0, "{oldest}");

    // The page at `/`: server-rendered HTML (reloading itself without script, live with it),
    // naming the key, the client and how late; no external assets.
    let page = http_get(metrics, "/");
    assert!(page.starts_with("HTTP/1.1 200 OK\r\n"), "{page}");
    assert!(
        page.contains("Content-Type: text/html; charset=utf-8"),
        "{page}"
    );
    assert!(
        page.contains("<noscript><meta http-equiv=\"refresh\" content=\"2\"></noscript>"),
        "{page}"
    );
    assert!(
        !page.contains(" src=") && !page.contains("href=\"http"),
        "{page}"
    );
    let row = format!(
        "<td class=\"k\">{key}</td><td>{a_id}</td><td class=\"k\">{addr}</td><td class=\"k\">worker-a</td><td>200</td><td class=\"late\">{late}</td><td>{held}</td>"
    );
    assert!(page.contains(&row), "{row} in {page}");
    assert!(
        page.contains("<td class=\"k\">lock:orders</td><td>1</td>"),
        "{page}"
    );

    // B's own release is on time: nothing new in the history.
    assert_eq!(b.cmd(&["EVAL", &release, "1", key, "tok-b"]), b":1\r\n");
    assert!(a.cmd_str(&["LOCKS", "LATE"]).starts_with("*1\r\n"));
    assert_eq!(a.cmd(&["LOCKS", "LATE", "0"]), b"*0\r\n");
    assert_eq!(a.cmd(&["LOCKS", "LATE", "RESET"]), b"+OK\r\n");
    assert_eq!(a.cmd(&["LOCKS", "LATE", "-1"]), b"*0\r\n");
}

#[test]
fn the_late_history_is_bounded_by_its_directive() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "lock-late-log-max-len"]),
        b"*2\r\n$21\r\nlock-late-log-max-len\r\n$3\r\n128\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "lock-late-log-max-len", "2"]),
        b"+OK\r\n"
    );
    let release = script("redis-py/lua_release_script.lua");
    for n in 0..5 {
        // A release of a key nobody holds: late, its acquire unseen.
        let key = format!("lock:gone:{n}");
        assert_eq!(c.cmd(&["EVAL", &release, "1", &key, "t"]), b":0\r\n");
    }
    let hist = c.cmd_str(&["LOCKS", "LATE", "-1"]);
    assert!(
        hist.starts_with("*2\r\n*20\r\n$2\r\nid\r\n:4\r\n"),
        "{hist:?}"
    );
    assert!(hist.contains("$7\r\nlate-ms\r\n$-1\r\n"), "{hist:?}");
    assert!(hist.contains("lock:gone:3"), "{hist:?}");
    assert!(!hist.contains("lock:gone:2"), "{hist:?}");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "lock-late-log-max-len", "-1"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'lock-late-log-max-len') - argument must be between 0 and 10000 inclusive\r\n"
    );
}

#[test]
fn locks_command_errors_docs_and_acl_like_redis() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    common::assert_replies(
        &mut c,
        &[
            (
                "LOCKS LATE abc",
                Some("-ERR count should be greater than or equal to -1\r\n"),
            ),
            (
                "LOCKS LATE -2",
                Some("-ERR count should be greater than or equal to -1\r\n"),
            ),
            (
                "LOCKS LATE 1 2",
                Some("-ERR unknown subcommand or wrong number of arguments for 'LATE'. Try LOCKS HELP.\r\n"),
            ),
            (
                "LOCKS NOPE",
                Some("-ERR unknown subcommand 'NOPE'. Try LOCKS HELP.\r\n"),
            ),
            (
                "LOCKS",
                Some("-ERR wrong number of arguments for 'locks' command\r\n"),
            ),
        ],
    );
    let help = c.cmd_str(&["LOCKS", "HELP"]);
    assert!(help.contains("+LATE [<count>]\r\n"), "{help}");
    let docs = c.cmd_str(&["COMMAND", "DOCS", "locks"]);
    for want in [
        "locks|late",
        "locks|help",
        "count-or-reset",
        "RESET",
        "server",
    ] {
        assert!(docs.contains(want), "{want} in {docs}");
    }
    let info = c.cmd_str(&["COMMAND", "INFO", "locks"]);
    assert!(info.contains("locks|late"), "{info}");
    assert!(info.contains("@admin"), "{info}");
    assert_eq!(
        c.cmd(&["ACL", "SETUSER", "ops", "on", "nopass", "+@all", "-@admin"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["AUTH", "ops", "x"]), b"+OK\r\n");
    let denied = c.cmd_str(&["LOCKS", "LATE"]);
    assert!(denied.starts_with("-NOPERM"), "{denied}");
    assert!(c.cmd_str(&["LOCKS", "HELP"]).starts_with("*"));
}

/// A parsed RESP2 reply (enough for LOCKS HELD).
#[derive(Debug, Clone, PartialEq)]
enum R {
    Int(i64),
    Str(Option<String>),
    Arr(Vec<R>),
}

fn parse(b: &[u8], at: &mut usize) -> R {
    let end = *at + b[*at..].windows(2).position(|w| w == b"\r\n").unwrap();
    let head = std::str::from_utf8(&b[*at + 1..end]).unwrap();
    let kind = b[*at];
    *at = end + 2;
    match kind {
        b':' => R::Int(head.parse().unwrap()),
        b'+' | b'-' => R::Str(Some(head.to_string())),
        b'$' if head == "-1" => R::Str(None),
        b'$' => {
            let n: usize = head.parse().unwrap();
            let s = String::from_utf8_lossy(&b[*at..*at + n]).into_owned();
            *at += n + 2;
            R::Str(Some(s))
        }
        b'*' => {
            let n: usize = head.parse().unwrap();
            R::Arr((0..n).map(|_| parse(b, at)).collect())
        }
        k => panic!("unexpected reply type {k}"),
    }
}

/// LOCKS HELD's reply: the next cursor and each row's fields by name.
fn held(c: &mut common::Conn, args: &[&str]) -> (String, Vec<Vec<(String, R)>>) {
    let reply = c.cmd(args);
    let R::Arr(top) = parse(&reply, &mut 0) else {
        panic!("{}", String::from_utf8_lossy(&reply))
    };
    let (R::Str(Some(cursor)), R::Arr(rows)) = (&top[0], &top[1]) else {
        panic!("{top:?}")
    };
    let rows = rows
        .iter()
        .map(|r| {
            let R::Arr(f) = r else { panic!("{r:?}") };
            f.chunks(2)
                .map(|p| match &p[0] {
                    R::Str(Some(n)) => (n.clone(), p[1].clone()),
                    other => panic!("{other:?}"),
                })
                .collect()
        })
        .collect();
    (cursor.clone(), rows)
}

fn get<'a>(row: &'a [(String, R)], name: &str) -> &'a R {
    &row.iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("{name} in {row:?}"))
        .1
}

#[test]
fn held_locks_list_their_holder_lease_and_waiters() {
    let s = common::deadbolt(&[]);
    let (mut a, mut w1, mut w2, mut op) = (s.conn(), s.conn(), s.conn(), s.conn());
    assert_eq!(a.cmd(&["CLIENT", "SETNAME", "holder"]), b"+OK\r\n");
    let a_id = number_after(&a.cmd_str(&["CLIENT", "ID"]), ":") as i64;
    let key = "lock:orders:7";
    assert_eq!(
        // A lease long enough that a loaded machine cannot run it out before the view.
        a.cmd(&["SET", key, "tok-a", "NX", "PX", "60000"]),
        b"+OK\r\n"
    );
    // Two clients wait; one retries twice: two waiters, not three.
    for w in [1, 2, 1] {
        let w = if w == 1 { &mut w1 } else { &mut w2 };
        assert_eq!(
            w.cmd(&["SET", key, "tok-w", "NX", "PX", "5000"]),
            b"$-1\r\n"
        );
    }
    // A Redisson lock taken twice by one thread (re-entrant), on a name without ':'.
    let acquire = script("redisson/rlock_trylockinnerasync.lua");
    for _ in 0..2 {
        assert_eq!(
            a.cmd(&["EVAL", &acquire, "1", "orders", "30000", "uuid-1:1"]),
            b"$-1\r\n"
        );
    }
    // A name without ':' (redis-py's `lock("orders")`) is its own prefix, not `(none)`.
    let info = op.cmd_str(&["INFO", "locks"]);
    assert!(info.contains("prefix=orders,acquires=2,"), "{info}");
    assert!(!info.contains("(none)"), "{info}");
    // Keys that are not locks: a plain SET, and a SET NX that was released.
    assert_eq!(op.cmd(&["SET", "plain", "v"]), b"+OK\r\n");
    assert_eq!(
        op.cmd(&["SET", "lock:done", "t", "NX", "PX", "5000"]),
        b"+OK\r\n"
    );
    let release = script("redis-py/lua_release_script.lua");
    assert_eq!(
        op.cmd(&["EVAL", &release, "1", "lock:done", "t"]),
        b":1\r\n"
    );

    let (cursor, rows) = held(&mut op, &["LOCKS", "HELD", "0", "COUNT", "1000"]);
    assert_eq!(cursor, "0");
    assert_eq!(rows.len(), 2, "{rows:?}");
    let row = rows
        .iter()
        .find(|r| get(r, "key") == &R::Str(Some(key.into())))
        .unwrap();
    assert_eq!(get(row, "token"), &R::Str(Some("tok-a".into())));
    assert_eq!(get(row, "reentrant"), &R::Int(1));
    assert_eq!(get(row, "holder-id"), &R::Int(a_id));
    assert_eq!(get(row, "holder-name"), &R::Str(Some("holder".into())));
    let R::Str(Some(addr)) = get(row, "holder-addr") else {
        panic!("{row:?}")
    };
    assert!(a
        .cmd_str(&["CLIENT", "INFO"])
        .contains(&format!("addr={addr} ")));
    assert_eq!(get(row, "lease-ms"), &R::Int(60000));
    let (R::Int(age), R::Int(remaining)) = (get(row, "age-ms"), get(row, "remaining-ms")) else {
        panic!("{row:?}")
    };
    assert!(
        (0..60000).contains(age) && (0..=60000).contains(remaining),
        "{row:?}"
    );
    assert!(age + remaining <= 60001, "{row:?}");
    assert_eq!(get(row, "waiters"), &R::Int(2));
    let row = rows
        .iter()
        .find(|r| get(r, "key") == &R::Str(Some("orders".into())))
        .unwrap();
    assert_eq!(get(row, "token"), &R::Str(Some("uuid-1:1".into())));
    assert_eq!(get(row, "reentrant"), &R::Int(2));
    assert_eq!(get(row, "lease-ms"), &R::Int(30000));
    assert_eq!(get(row, "waiters"), &R::Int(0));

    // MATCH, and a walk with a small COUNT visits every key once, as SCAN does.
    let (_, rows) = held(
        &mut op,
        &["LOCKS", "HELD", "0", "MATCH", "lock:*", "COUNT", "1000"],
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    let mut found = Vec::new();
    let mut cursor = "0".to_string();
    let mut steps = 0;
    loop {
        let (next, rows) = held(&mut op, &["LOCKS", "HELD", &cursor, "COUNT", "1"]);
        found.extend(rows.iter().map(|r| format!("{:?}", get(r, "key"))));
        steps += 1;
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    found.sort();
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(steps, 3, "one key (of three) a step");
    // Redis's SCAN errors.
    assert_eq!(op.cmd(&["LOCKS", "HELD", "x"]), b"-ERR invalid cursor\r\n");
    assert_eq!(
        op.cmd(&["LOCKS", "HELD", "0", "COUNT", "0"]),
        op.cmd(&["SCAN", "0", "COUNT", "0"])
    );
    assert_eq!(
        op.cmd(&["LOCKS", "HELD", "0", "TYPE", "string"]),
        b"-ERR syntax error\r\n"
    );
    // Once released, the lock is gone from the view.
    assert_eq!(a.cmd(&["EVAL", &release, "1", key, "tok-a"]), b":1\r\n");
    let (_, rows) = held(
        &mut op,
        &["LOCKS", "HELD", "0", "MATCH", "lock:*", "COUNT", "1000"],
    );
    assert!(rows.is_empty(), "{rows:?}");
}
