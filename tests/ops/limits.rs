//! Oversized and malformed requests: the same error and disconnect as redis-server, and the
//! server goes on serving everyone else. Also over TLS-less plain connections with small limits.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Everything the server sends after `data` until it closes (or goes quiet: "<open>").
fn exchange(port: u16, data: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    // The server may close while we are still writing a large request.
    let _ = s.write_all(data);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => {
                out.extend_from_slice(b"<closed>");
                return out;
            }
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                out.extend_from_slice(b"<closed>");
                return out;
            }
            Err(_) => {
                out.extend_from_slice(b"<open>");
                return out;
            }
        }
    }
}

#[test]
fn oversized_and_malformed_requests_match_redis() {
    let limits = [
        "--client-query-buffer-limit",
        "1mb",
        "--proto-max-bulk-len",
        "1mb",
    ];
    let ours = common::deadbolt(&limits);
    let redis = common::redis_server(&limits);
    let mut big_set = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$524288\r\n".to_vec();
    big_set.extend(std::iter::repeat_n(b'x', 512 * 1024));
    big_set.extend_from_slice(b"\r\n");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "bulk over proto-max-bulk-len",
            b"*1\r\n$1048577\r\n".to_vec(),
        ),
        ("negative bulk length", b"*1\r\n$-5\r\n".to_vec()),
        ("huge multibulk count", b"*2147483648\r\n".to_vec()),
        ("inline request over 64k", vec![b'A'; 70_000]),
        ("unbalanced quotes", b"SET \"a b\r\n".to_vec()),
        ("not a bulk", b"*1\r\nxfoo\r\n".to_vec()),
        (
            "a large bulk under the limits is fine",
            [big_set.clone(), b"*1\r\n$4\r\nPING\r\n".to_vec()].concat(),
        ),
        (
            "replies before the bad command still come",
            b"*1\r\n$4\r\nPING\r\n*1\r\n$-5\r\n".to_vec(),
        ),
    ];
    for (name, data) in &cases {
        let (a, b) = (exchange(ours.port, data), exchange(redis.port, data));
        assert_eq!(
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b),
            "{name}"
        );
    }
    // Everyone else is still served.
    assert_eq!(ours.conn().cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn a_query_buffer_past_its_limit_drops_the_client_like_redis() {
    let limits = ["--client-query-buffer-limit", "1mb"];
    let ours = common::deadbolt(&limits);
    let redis = common::redis_server(&limits);
    // A 2 MiB argument is allowed by proto-max-bulk-len but cannot fit the 1 MiB query buffer.
    let mut data = b"*2\r\n$4\r\nECHO\r\n$2097152\r\n".to_vec();
    data.extend(std::iter::repeat_n(b'y', 1536 * 1024));
    let (a, b) = (exchange(ours.port, &data), exchange(redis.port, &data));
    assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
    assert_eq!(a, b"<closed>");
    assert_eq!(ours.conn().cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn invalid_limit_values_are_refused_keeping_the_old_value() {
    let ours = common::deadbolt(&[]);
    let redis = common::redis_server(&[]);
    let (mut a, mut b) = (ours.conn(), redis.conn());
    for cmd in [
        &["CONFIG", "SET", "proto-max-bulk-len", "100"][..],
        &["CONFIG", "SET", "proto-max-bulk-len", "abc"],
        &["CONFIG", "GET", "proto-max-bulk-len"],
        &["CONFIG", "SET", "client-query-buffer-limit", "1"],
        &["CONFIG", "GET", "client-query-buffer-limit"],
        &["CONFIG", "SET", "protected-mode", "maybe"],
        &["CONFIG", "GET", "protected-mode"],
        &["CONFIG", "SET", "requirepass"],
    ] {
        assert_eq!(a.cmd_str(cmd), b.cmd_str(cmd), "{cmd:?}");
    }
}
