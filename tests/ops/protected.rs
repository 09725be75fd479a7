//! Protected mode: a non-loopback client of a server with no password gets Redis's -DENIED and
//! is disconnected; loopback clients, passwords and `protected-mode no` let clients in.
//! Needs a non-loopback address of this machine (from `hostname -I`); without one the test
//! fails and says so.

use crate::common;

use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::time::Duration;

fn own_address() -> Option<IpAddr> {
    let out = std::process::Command::new("hostname")
        .arg("-I")
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|w| w.parse::<IpAddr>().ok())
        .find(|a| a.is_ipv4() && !a.is_loopback())
}

/// Port of the listener on `ip` from the "Listening on ip:port" log line.
fn port_on(s: &common::Server, ip: IpAddr) -> u16 {
    let needle = format!("Listening on {ip}:");
    s.wait_log(&needle, Duration::from_secs(5));
    let log = s.log.lock().unwrap();
    let line = log.iter().find(|l| l.contains(&needle)).unwrap();
    line.split(&needle).nth(1).unwrap().trim().parse().unwrap()
}

/// Sends PING from a connection to ip:port; everything received until the server closes the
/// connection or goes quiet, and whether it closed.
fn ping_from(ip: IpAddr, port: u16, auth: Option<&str>) -> (Vec<u8>, bool) {
    let mut s = TcpStream::connect((ip, port)).unwrap();
    if let Some(p) = auth {
        s.write_all(&common::resp_cmd(&["AUTH", p])).unwrap();
    }
    s.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (got, true),
            Err(_) => return (got, false),
        }
        if got.ends_with(b"+PONG\r\n") {
            return (got, false);
        }
    }
}

#[test]
fn non_loopback_clients_are_denied_like_redis() {
    let ip = own_address()
        .expect("protected mode needs a non-loopback IPv4 address of this machine (hostname -I)");
    let ip_s = ip.to_string();
    let ours = common::deadbolt(&["--bind", "127.0.0.1", &ip_s]);
    let ours_port = port_on(&ours, ip);
    let redis = common::redis_server(&["--bind", "127.0.0.1", &ip_s]);

    let (mine, closed) = ping_from(ip, ours_port, None);
    let (theirs, rclosed) = ping_from(ip, redis.port, None);
    assert_eq!(
        String::from_utf8_lossy(&mine),
        String::from_utf8_lossy(&theirs)
    );
    assert!(mine.starts_with(b"-DENIED Redis is running in protected mode"));
    assert!(closed && rclosed, "the denied client is disconnected");

    // Loopback is served; the refusal did not disturb the server.
    let mut c = ours.conn();
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");

    // With a password, remote clients are let in (and must AUTH).
    assert_eq!(c.cmd(&["CONFIG", "SET", "requirepass", "pw"]), b"+OK\r\n");
    let (got, closed) = ping_from(ip, ours_port, None);
    assert_eq!(got, b"-NOAUTH Authentication required.\r\n");
    assert!(!closed);
    assert_eq!(ping_from(ip, ours_port, Some("pw")).0, b"+OK\r\n+PONG\r\n");

    // Without a password but with protected mode off (CONFIG SET from loopback), too.
    assert_eq!(c.cmd(&["AUTH", "pw"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "requirepass", "", "protected-mode", "no"]),
        b"+OK\r\n"
    );
    assert_eq!(ping_from(ip, ours_port, None).0, b"+PONG\r\n");
    assert_eq!(c.cmd(&["CONFIG", "SET", "protected-mode", "maybe"]), {
        let mut r = redis.conn();
        r.cmd(&["CONFIG", "SET", "protected-mode", "maybe"])
    });
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "protected-mode"]),
        b"*2\r\n$14\r\nprotected-mode\r\n$2\r\nno\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "protected-mode", "yes"]),
        b"+OK\r\n"
    );
    assert!(ping_from(ip, ours_port, None).0.starts_with(b"-DENIED"));
}
