//! Sentinel's own view of the other members: every member PINGs every other member's client
//! port, as redis-sentinel PINGs each instance it watches, from one thread per member.
//!
//! Raft alone cannot tell a follower whether the *other* follower is alive (followers exchange
//! no messages), and it notices a dead leader only after an election timeout of silence. A
//! member's client port answers as long as its process runs, and the kernel refuses a
//! connection (or ends an open one) the moment the process dies, so a probe tells within one
//! probe period that a member's process is gone. That is what `SENTINEL replicas`/`sentinels`
//! flags report, and what lets a follower stop naming a dead leader to clients before the new
//! one is elected.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often each member is pinged.
pub const PERIOD: Duration = Duration::from_millis(100);
/// A connect or a PING reply that takes longer than this counts as no answer this period.
const IO_TIMEOUT: Duration = Duration::from_millis(500);

/// What the probes learnt of one member.
#[derive(Clone, Copy, Debug, Default)]
pub struct Seen {
    /// The last reply to a PING (any reply: the process runs its loop).
    pub last_ok: Option<Instant>,
    /// The last attempt failed at once: the connection was refused or closed by the peer (its
    /// process is gone), not merely slow. Cleared by the next reply.
    pub refused: bool,
}

struct Target {
    addr: Mutex<String>,
    seen: Mutex<Seen>,
    stop: AtomicBool,
}

pub struct Probes {
    targets: Vec<(u64, Arc<Target>, Option<JoinHandle<()>>)>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Nothing panics while holding these locks; if something did, the data is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Probes {
    pub fn new() -> Probes {
        Probes {
            targets: Vec::new(),
        }
    }

    /// Probe member `id` at `host:port` (its client address); None stops probing it.
    pub fn set(&mut self, id: u64, addr: Option<String>) {
        let pos = self.targets.iter().position(|t| t.0 == id);
        match (pos, addr) {
            (Some(i), Some(a)) => *lock(&self.targets[i].1.addr) = a,
            (Some(i), None) => {
                let (_, t, h) = self.targets.swap_remove(i);
                t.stop.store(true, Ordering::Relaxed);
                drop(h); // detached: it sees `stop` within one period
            }
            (None, Some(a)) => {
                let t = Arc::new(Target {
                    addr: Mutex::new(a),
                    seen: Mutex::new(Seen::default()),
                    stop: AtomicBool::new(false),
                });
                let t2 = t.clone();
                let h = std::thread::Builder::new()
                    .name(format!("probe-{id}"))
                    .spawn(move || run(&t2))
                    .ok();
                self.targets.push((id, t, h));
            }
            (None, None) => {}
        }
    }

    pub fn seen(&self, id: u64) -> Seen {
        self.targets
            .iter()
            .find(|t| t.0 == id)
            .map_or(Seen::default(), |t| *lock(&t.1.seen))
    }
}

impl Drop for Probes {
    fn drop(&mut self) {
        for (_, t, _) in &self.targets {
            t.stop.store(true, Ordering::Relaxed);
        }
    }
}

enum Fail {
    /// Refused, reset or closed by the peer: nothing listens or the process went away.
    Gone,
    /// Timed out or another error: no conclusion.
    Slow,
}

fn classify(e: &std::io::Error) -> Fail {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused | ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof => {
            Fail::Gone
        }
        _ => Fail::Slow,
    }
}

fn connect(addr: &str) -> std::io::Result<BufReader<TcpStream>> {
    let sa = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("address does not resolve"))?;
    let s = TcpStream::connect_timeout(&sa, IO_TIMEOUT)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(BufReader::new(s))
}

/// One PING on an open connection; any complete reply line counts (a -NOAUTH or -LOADING
/// answer still shows a running process).
fn ping(conn: &mut BufReader<TcpStream>, line: &mut String) -> std::io::Result<()> {
    conn.get_mut().write_all(b"*1\r\n$4\r\nPING\r\n")?;
    line.clear();
    if conn.read_line(line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

fn run(t: &Target) {
    let mut conn: Option<BufReader<TcpStream>> = None;
    let mut line = String::new();
    while !t.stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let result = match conn.as_mut() {
            Some(c) => ping(c, &mut line),
            None => {
                let addr = lock(&t.addr).clone();
                connect(&addr).and_then(|mut c| {
                    let r = ping(&mut c, &mut line);
                    conn = Some(c);
                    r
                })
            }
        };
        match result {
            Ok(()) => {
                let mut s = lock(&t.seen);
                s.last_ok = Some(Instant::now());
                s.refused = false;
            }
            Err(e) => {
                conn = None;
                if let Fail::Gone = classify(&e) {
                    // An open connection that ended may only have been closed by the peer
                    // (a leader closes its clients when it steps down): dial again at once,
                    // and report the process gone only if that fails too.
                    let addr = lock(&t.addr).clone();
                    match connect(&addr).and_then(|mut c| {
                        let r = ping(&mut c, &mut line);
                        conn = Some(c);
                        r
                    }) {
                        Ok(()) => {
                            let mut s = lock(&t.seen);
                            s.last_ok = Some(Instant::now());
                            s.refused = false;
                        }
                        Err(e2) => {
                            conn = None;
                            if let Fail::Gone = classify(&e2) {
                                lock(&t.seen).refused = true;
                            }
                        }
                    }
                }
            }
        }
        let Some(rest) = PERIOD.checked_sub(started.elapsed()) else {
            continue;
        };
        // Wait out the period watching the open connection: a peer whose process dies ends it
        // at once (the kernel closes its sockets), and the next period's dial tells whether
        // anything still listens.
        match conn.as_ref() {
            Some(c) if !rest.is_zero() => {
                let s = c.get_ref();
                let mut b = [0u8; 1];
                let _ = s.set_read_timeout(Some(rest));
                let ended = match s.peek(&mut b) {
                    Ok(n) => n == 0,
                    Err(e) => matches!(classify(&e), Fail::Gone),
                };
                let _ = s.set_read_timeout(Some(IO_TIMEOUT));
                if ended {
                    conn = None;
                }
                let left = PERIOD.saturating_sub(started.elapsed());
                if !ended && !left.is_zero() {
                    std::thread::sleep(left);
                }
            }
            _ => std::thread::sleep(rest),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    fn until(what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !f() {
            assert!(Instant::now() < deadline, "{what} within 5 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A member answering PINGs is seen; once its process is gone (its connection ends and
    /// its port refuses) it is reported refused, without waiting for a timeout.
    #[test]
    fn a_member_that_answers_is_seen_and_a_gone_one_refused() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 64];
            // Answer a few PINGs, then go away with the listener (as a killed process).
            for _ in 0..3 {
                let n = s.read(&mut buf).unwrap();
                assert_eq!(&buf[..n], b"*1\r\n$4\r\nPING\r\n");
                s.write_all(b"+PONG\r\n").unwrap();
            }
        });
        let mut p = Probes::new();
        p.set(7, Some(addr));
        until("a reply", || p.seen(7).last_ok.is_some());
        assert!(!p.seen(7).refused);
        server.join().unwrap();
        until("refused", || p.seen(7).refused);
        assert_eq!(p.seen(8).last_ok, None, "an unknown member was never seen");
        p.set(7, None);
        assert_eq!(p.seen(7).last_ok, None);
    }
}
