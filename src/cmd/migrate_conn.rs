//! MIGRATE's connections to its targets and the blocking exchange with one, every step
//! bounded by the caller's timeout. The cache belongs to the executor thread (the only one
//! that runs commands), as Redis's `server.migrate_cached_sockets`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

const CACHE_ITEMS: usize = 64;
const CACHE_TTL_SECS: u64 = 10;

struct Cached {
    /// None: the connection was refused, which Redis only notices when it writes.
    stream: Option<TcpStream>,
    /// The database selected on the target; None until a MIGRATE succeeds.
    dbid: Option<i64>,
    last_use: u64,
}

thread_local! {
    static CACHE: RefCell<HashMap<Vec<u8>, Cached>> = RefCell::new(HashMap::new());
}

/// The target could not be connected within the timeout (or its name did not resolve).
pub struct ConnectFailed;

pub struct Failure {
    pub writing: bool,
    pub timed_out: bool,
}

/// Appends a RESP multibulk command.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

pub fn cached() -> usize {
    CACHE.with(|c| c.borrow().len())
}

pub fn expire(now_secs: u64) {
    CACHE.with(|c| {
        c.borrow_mut()
            .retain(|_, s| now_secs.saturating_sub(s.last_use) <= CACHE_TTL_SECS)
    });
}

pub fn close(name: &[u8]) {
    CACHE.with(|c| c.borrow_mut().remove(name));
}

pub fn set_dbid(name: &[u8], dbid: Option<i64>) {
    CACHE.with(|c| {
        if let Some(s) = c.borrow_mut().get_mut(name) {
            s.dbid = dbid;
        }
    });
}

/// The cached connection to `name` (made if missing); returns the database it has
/// selected. Err when the target cannot be connected within `timeout`.
pub fn socket(
    name: &[u8],
    host: &[u8],
    port: &[u8],
    timeout: Duration,
    now_secs: u64,
) -> Result<Option<i64>, ConnectFailed> {
    expire(now_secs);
    if let Some(dbid) = CACHE.with(|c| {
        c.borrow_mut().get_mut(name).map(|s| {
            s.last_use = now_secs;
            s.dbid
        })
    }) {
        return Ok(dbid);
    }
    let stream = connect(host, port, timeout)?;
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CACHE_ITEMS {
            // Redis drops one at random; any will do.
            if let Some(k) = c.keys().next().cloned() {
                c.remove(&k);
            }
        }
        c.insert(
            name.to_vec(),
            Cached {
                stream,
                dbid: None,
                last_use: now_secs,
            },
        );
    });
    Ok(None)
}

/// Redis connects without blocking and waits until the socket is writable: a refused
/// connection counts as connected and fails at the first write; a name that does not
/// resolve or a connection that times out fails here.
fn connect(
    host: &[u8],
    port: &[u8],
    timeout: Duration,
) -> Result<Option<TcpStream>, ConnectFailed> {
    let host = std::str::from_utf8(host).map_err(|_| ConnectFailed)?;
    // Redis's atoi: a port that is not a number is port 0, which fails.
    let port: u16 = std::str::from_utf8(port)
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let addr = (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or(ConnectFailed)?;
    match TcpStream::connect_timeout(&addr, timeout) {
        Ok(s) => {
            let _ = s.set_nodelay(true);
            Ok(Some(s))
        }
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Err(ConnectFailed),
        Err(_) => Ok(None),
    }
}

fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Sends `cmd` on `name`'s connection in 64 KB writes and reads up to `replies` reply
/// lines (Redis's connSyncWrite and connSyncReadLine: each bounded by `timeout`; a line
/// is kept without its CR LF): the lines read, and the failure that stopped it early.
pub fn exchange(
    name: &[u8],
    cmd: &[u8],
    replies: usize,
    timeout: Duration,
) -> (Vec<Vec<u8>>, Option<Failure>) {
    let Some(mut s) = CACHE.with(|c| {
        c.borrow()
            .get(name)
            .and_then(|s| s.stream.as_ref())
            .and_then(|s| s.try_clone().ok())
    }) else {
        let f = Failure {
            writing: true,
            timed_out: false,
        };
        return (Vec::new(), Some(f));
    };
    let fail = |writing, timed_out| Some(Failure { writing, timed_out });
    for chunk in cmd.chunks(64 * 1024) {
        let deadline = Instant::now() + timeout;
        let mut pos = 0;
        while pos < chunk.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return (Vec::new(), fail(true, true));
            }
            if s.set_write_timeout(Some(left)).is_err() {
                return (Vec::new(), fail(true, false));
            }
            match s.write(&chunk[pos..]) {
                Ok(0) => return (Vec::new(), fail(true, false)),
                Err(e) => return (Vec::new(), fail(true, timed_out(&e))),
                Ok(n) => pos += n,
            }
        }
    }
    let mut lines = Vec::with_capacity(replies);
    let mut buf = Vec::new();
    let mut start = 0;
    while lines.len() < replies {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(nl) = buf[start..].iter().position(|&b| b == b'\n') {
                let mut line = buf[start..start + nl].to_vec();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                start += nl + 1;
                lines.push(line);
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return (lines, fail(false, true));
            }
            if s.set_read_timeout(Some(left)).is_err() {
                return (lines, fail(false, false));
            }
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk) {
                Ok(0) => return (lines, fail(false, false)),
                Err(e) => return (lines, fail(false, timed_out(&e))),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
    (lines, None)
}

/// INFO's `migrate_cached_sockets`, after closing those unused for 10 s (also the cron's
/// sweep, as Redis's serverCron).
pub fn cached_sockets(now_secs: u64) -> usize {
    expire(now_secs);
    cached()
}
