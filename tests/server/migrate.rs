//! MIGRATE from deadbolt and from redis-server to a real redis-server target, every reply
//! compared byte for byte: moving and copying keys, REPLACE, KEYS, TTLs, AUTH and AUTH2, the
//! target's errors, and the IOERR of a target that cannot be reached or does not answer.

use crate::common;

use common::{both, redis_server, Conn};
use std::net::TcpListener;
use std::time::{Duration, Instant};

fn show(replies: &[Vec<u8>]) -> Vec<String> {
    replies
        .iter()
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .collect()
}

#[test]
fn migrate_to_a_redis_server_answers_as_redis() {
    let t = both(|s| {
        let target = redis_server(&[]);
        let port = target.port.to_string();
        let mut c = s.conn();
        let mut t = target.conn();
        let mut out = Vec::new();
        let run = |c: &mut Conn, args: &[&str], out: &mut Vec<Vec<u8>>| out.push(c.cmd(args));
        run(&mut c, &["SET", "k", "v"], &mut out);
        run(&mut c, &["RPUSH", "l", "a", "b", "c"], &mut out);
        run(&mut c, &["SET", "e", "1", "PX", "100000"], &mut out);
        run(&mut c, &["HSET", "h", "f1", "v1", "f2", "v2"], &mut out);
        run(
            &mut c,
            &["MIGRATE", "127.0.0.1", &port, "k", "0", "1000"],
            &mut out,
        );
        run(
            &mut c,
            &["MIGRATE", "127.0.0.1", &port, "k", "0", "1000"],
            &mut out,
        );
        run(
            &mut c,
            &["MIGRATE", "127.0.0.1", &port, "l", "0", "1000", "COPY"],
            &mut out,
        );
        run(
            &mut c,
            &["MIGRATE", "127.0.0.1", &port, "l", "0", "1000", "COPY"],
            &mut out,
        );
        run(
            &mut c,
            &[
                "MIGRATE",
                "127.0.0.1",
                &port,
                "l",
                "0",
                "1000",
                "COPY",
                "REPLACE",
            ],
            &mut out,
        );
        run(
            &mut c,
            &[
                "MIGRATE",
                "127.0.0.1",
                &port,
                "nope",
                "0",
                "1000",
                "KEYS",
                "l",
            ],
            &mut out,
        );
        run(
            &mut c,
            &[
                "MIGRATE",
                "127.0.0.1",
                &port,
                "",
                "0",
                "1000",
                "KEYS",
                "x",
                "y",
            ],
            &mut out,
        );
        run(
            &mut c,
            &[
                "MIGRATE",
                "127.0.0.1",
                &port,
                "",
                "3",
                "1000",
                "KEYS",
                "x",
                "e",
                "h",
            ],
            &mut out,
        );
        run(
            &mut c,
            &["MIGRATE", "127.0.0.1", &port, "l", "99", "1000"],
            &mut out,
        );
        run(
            &mut c,
            &["MIGRATE", "127.0.0.1", &port, "l", "x", "1000"],
            &mut out,
        );
        run(
            &mut c,
            &["MIGRATE", "127.0.0.1", &port, "l", "0", "1000", "AUTH"],
            &mut out,
        );
        run(
            &mut c,
            &[
                "MIGRATE",
                "127.0.0.1",
                &port,
                "l",
                "0",
                "1000",
                "AUTH2",
                "u",
            ],
            &mut out,
        );
        run(
            &mut c,
            &["MIGRATE", "127.0.0.1", &port, "l", "0", "1000", "FOO"],
            &mut out,
        );
        run(
            &mut c,
            &[
                "MIGRATE",
                "127.0.0.1",
                &port,
                "l",
                "0",
                "1000",
                "AUTH",
                "pw",
            ],
            &mut out,
        );
        run(&mut c, &["EXISTS", "k", "l", "e", "h"], &mut out);
        run(
            &mut t,
            &["CONFIG", "SET", "requirepass", "foobar"],
            &mut out,
        );
        run(&mut c, &["SET", "a", "1"], &mut out);
        run(
            &mut c,
            &[
                "MIGRATE",
                "127.0.0.1",
                &port,
                "a",
                "0",
                "1000",
                "AUTH",
                "bad",
            ],
            &mut out,
        );
        run(
            &mut c,
            &[
                "MIGRATE",
                "127.0.0.1",
                &port,
                "a",
                "0",
                "1000",
                "AUTH",
                "foobar",
            ],
            &mut out,
        );
        run(&mut c, &["SET", "b", "2"], &mut out);
        run(
            &mut c,
            &[
                "MIGRATE",
                "127.0.0.1",
                &port,
                "b",
                "0",
                "1000",
                "AUTH2",
                "default",
                "foobar",
            ],
            &mut out,
        );
        run(&mut t, &["AUTH", "foobar"], &mut out);
        run(&mut t, &["SELECT", "3"], &mut out);
        run(&mut t, &["MGET", "x", "e", "h"], &mut out);
        run(&mut t, &["HGETALL", "h"], &mut out);
        let pttl = t.cmd(&["PTTL", "e"]);
        let pttl: i64 = String::from_utf8_lossy(&pttl[1..pttl.len() - 2])
            .parse()
            .unwrap_or(-3);
        out.push(format!("pttl in range: {}", (90_000..=100_000).contains(&pttl)).into_bytes());
        run(&mut t, &["SELECT", "0"], &mut out);
        run(&mut t, &["MGET", "k", "a", "b"], &mut out);
        run(&mut t, &["LRANGE", "l", "0", "-1"], &mut out);
        let info = c.cmd(&["INFO", "stats"]);
        out.push(
            String::from_utf8_lossy(&info)
                .lines()
                .filter(|l| l.starts_with("migrate_cached_sockets:"))
                .collect::<String>()
                .into_bytes(),
        );
        out
    });
    let t = show(&t);
    assert_eq!(t[4], "+OK\r\n");
    assert_eq!(t[5], "+NOKEY\r\n");
    assert!(t[7].contains("BUSYKEY"), "{}", t[7]);
    assert_eq!(
        t.last().map(String::as_str),
        Some("migrate_cached_sockets:1")
    );
}

/// A port nobody listens on and a target that accepts but never answers: IOERR, the key kept,
/// and the server answering others after at most about the timeout.
#[test]
fn migrate_to_an_unreachable_or_silent_target_fails_within_its_timeout() {
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let silent_port = silent.local_addr().expect("addr").port().to_string();
    let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed_port = closed.local_addr().expect("addr").port().to_string();
    drop(closed);
    let t = both(|s| {
        let mut c = s.conn();
        let mut out = vec![c.cmd(&["SET", "k", "v"])];
        out.push(c.cmd(&["MIGRATE", "127.0.0.1", &closed_port, "k", "0", "200"]));
        let start = Instant::now();
        out.push(c.cmd(&["MIGRATE", "127.0.0.1", &silent_port, "k", "0", "300"]));
        let took = start.elapsed();
        out.push(format!("bounded: {}", took < Duration::from_secs(2)).into_bytes());
        out.push(c.cmd(&["EXISTS", "k"]));
        out
    });
    let t = show(&t);
    assert_eq!(
        t[1],
        "-IOERR error or timeout writing to target instance\r\n"
    );
    assert_eq!(
        t[2],
        "-IOERR error or timeout reading to target instance\r\n"
    );
    assert_eq!(t[3], "bounded: true");
    drop(silent);
}

/// MONITOR shows MIGRATE's AUTH and AUTH2 arguments redacted, as Redis does.
#[test]
fn monitor_redacts_migrate_credentials() {
    let t = both(|s| {
        let port = s.port.to_string();
        let mut m = s.conn();
        let mut out = vec![m.cmd(&["MONITOR"])];
        let mut c = s.conn();
        for extra in [&[][..], &["AUTH", "user"], &["AUTH2", "user", "password"]] {
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "key", "9", "5000"];
            args.extend_from_slice(extra);
            out.push(c.cmd(&args));
            let line = m.read_reply();
            let line = String::from_utf8_lossy(&line).into_owned();
            // Drop the timestamp, the client address and the server's port.
            let line = line
                .split_once(']')
                .map_or(line.clone(), |(_, r)| r.to_owned());
            out.push(line.replace(&port, "PORT").into_bytes());
        }
        out
    });
    assert!(show(&t)[6].contains("\"AUTH2\" \"(redacted)\" \"(redacted)\""));
}
