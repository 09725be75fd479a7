//! `metrics-port`: Prometheus's text format at `GET /metrics` and the lock insight page at
//! `GET /` (server-rendered HTML, no external assets, a meta refresh), on its own thread so a scrape
//! never waits for the executor (which renders the text about once a second into
//! `Shared::metrics`). One request per connection, bounded in size and time.

use crate::machine::Shared;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// A request line and headers larger than this are refused (a scrape sends a few hundred bytes).
const MAX_REQUEST: usize = 8192;
/// A client that sends nothing for this long is dropped, so one slow scraper cannot stall the
/// next.
const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// Binds `host:port` and serves from a thread of its own; Err when the port cannot be bound.
pub fn start(host: &str, port: u16, shared: Arc<Shared>) -> std::io::Result<()> {
    let listener = TcpListener::bind((host, port)).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("Could not listen on the metrics port {host}:{port}: {e}"),
        )
    })?;
    if let Ok(a) = listener.local_addr() {
        tracing::info!("Serving lock metrics (Prometheus) on http://{a}/metrics");
    }
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for stream in listener.incoming() {
                match stream {
                    Ok(s) => serve(s, &shared),
                    Err(e) => tracing::debug!("metrics: accept failed: {e}"),
                }
            }
        })?;
    Ok(())
}

fn serve(mut s: TcpStream, shared: &Shared) {
    let _ = s.set_read_timeout(Some(IO_TIMEOUT));
    let _ = s.set_write_timeout(Some(IO_TIMEOUT));
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.len() > MAX_REQUEST {
            let _ = s.write_all(b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            return;
        }
    }
    let line = buf.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut words = line.split(|&b| b == b' ');
    let (method, path) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
    );
    let path = path.split(|&b| b == b'?').next().unwrap_or_default();
    let response = if method != b"GET" && method != b"HEAD" {
        "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
    } else if path != b"/metrics" && path != b"/" {
        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
    } else {
        let (body, kind) = if path == b"/" {
            (&shared.page, "text/html; charset=utf-8")
        } else {
            (&shared.metrics, "text/plain; version=0.0.4; charset=utf-8")
        };
        let body = body.lock().map(|m| m.clone()).unwrap_or_default();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        if method == b"HEAD" {
            head
        } else {
            head + &body
        }
    };
    let _ = s.write_all(response.as_bytes());
}
