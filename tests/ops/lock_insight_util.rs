//! Helpers the lock insight tests share: HTTP on the metrics port, the lock clients' scripts,
//! numbers out of log lines, and the external programs (chromium, prometheus) the page and
//! scrape tests drive.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

/// The lock client script `path` under lua/, byte-exact (its SHA1 is what lock insight knows).
pub fn script(path: &str) -> String {
    std::fs::read_to_string(format!("{}/lua/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// `GET path` over HTTP/1.0 (the server closes after the body): the status line and the body.
pub fn http_get(port: u16, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("connect 127.0.0.1:{port}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let out = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    )
}

pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The integer after `what` in `text`, up to the first byte that is not a digit.
pub fn number_after(text: &str, what: &str) -> u64 {
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

/// An external program a test needs, found on PATH: a clear failure naming the Debian package
/// when it is missing (scripts/test installs it), never a skip.
pub fn require(program: &str, package: &str) -> String {
    match Command::new(program).arg("--version").output() {
        Ok(out) if out.status.success() => program.to_string(),
        Ok(out) => panic!(
            "`{program} --version` failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!(
            "`{program}` is not installed ({e}); this test needs Debian's `{package}` package: apt-get install -y {package}"
        ),
    }
}

/// Percent-encodes a URL query value.
pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A client's `addr=` as CLIENT INFO says it.
pub fn client_addr(c: &mut super::common::Conn) -> String {
    c.cmd_str(&["CLIENT", "INFO"])
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .expect("addr= in CLIENT INFO")
        .to_string()
}
