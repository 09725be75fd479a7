//! A Redis Cluster client, as cluster-mode libraries (redis-py `RedisCluster`, Jedis, redis-rs
//! `cluster`) behave: the slot table from `CLUSTER SLOTS` (at start, after a `-MOVED`, and after a
//! connection to a slot's master failed), each key routed by its CRC16 slot with `{hash tags}`,
//! `-MOVED` followed (and the table refreshed), `-ASK` answered with `ASKING` on the named node,
//! `-TRYAGAIN` / `-CLUSTERDOWN` retried after a pause, all within a bound of attempts.
//!
//! What a reply means for the history is the Sentinel client's rule: a redirection, a refusal or
//! a connection that could not be opened had no effect (the call is retried or fails); once a
//! command was written, a timeout or a lost connection is an unknown outcome and is never retried
//! (a retry could apply it twice).

use crate::resp::{Conn, Reply};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What every cluster client of the run did, for the run's summary: MOVED followed, ASK
/// followed, TRYAGAIN/CLUSTERDOWN retried, CLUSTER SLOTS refreshes, calls that ran out of
/// attempts.
pub static MOVED: AtomicU64 = AtomicU64::new(0);
pub static ASK: AtomicU64 = AtomicU64::new(0);
pub static RETRIED: AtomicU64 = AtomicU64::new(0);
pub static REFRESHES: AtomicU64 = AtomicU64::new(0);
pub static GAVE_UP: AtomicU64 = AtomicU64::new(0);

/// One line for the run's summary.
pub fn summary() -> String {
    let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
    format!(
        "{} MOVED and {} ASK followed, {} TRYAGAIN/CLUSTERDOWN retried, {} CLUSTER SLOTS refreshes, {} calls out of attempts",
        n(&MOVED),
        n(&ASK),
        n(&RETRIED),
        n(&REFRESHES),
        n(&GAVE_UP)
    )
}

#[path = "../../common/slot.rs"]
mod slot;
#[cfg(test)]
use slot::crc16;
pub use slot::{key_slot, SLOTS};

/// The key a command is routed by: the first key of EVAL/EVALSHA, else the first argument.
fn routing_key<'a>(args: &[&'a [u8]]) -> Option<&'a [u8]> {
    let name = args.first()?;
    if name.eq_ignore_ascii_case(b"EVAL") || name.eq_ignore_ascii_case(b"EVALSHA") {
        let numkeys: usize = std::str::from_utf8(args.get(2)?).ok()?.parse().ok()?;
        return if numkeys > 0 {
            args.get(3).copied()
        } else {
            None
        };
    }
    args.get(1).copied()
}

pub enum CallErr {
    /// No effect: nothing was sent, or every answer was a refusal or redirection.
    Fail,
    /// Sent, then a timeout or a lost connection: the effect is unknown.
    Unknown,
}

/// Attempts per call (redirections, retries after TRYAGAIN/CLUSTERDOWN, connections that could
/// not be opened), as Jedis's `maxAttempts` (5) and redis-py's retries bound theirs.
const MAX_ATTEMPTS: u32 = 5;
/// The pause before another attempt after TRYAGAIN, CLUSTERDOWN or a slot without a master.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// `CLUSTER SLOTS` on a follower waits for an election in progress (up to 2 s): the topology
/// query gets longer than a data command.
const TOPOLOGY_TIMEOUT: Duration = Duration::from_millis(1500);

pub struct ClusterClient {
    src: Ipv4Addr,
    seeds: Vec<SocketAddr>,
    next_seed: usize,
    connect_timeout: Duration,
    io_timeout: Duration,
    /// Slot → master, from the last CLUSTER SLOTS, with MOVED answers written over it.
    table: Vec<Option<SocketAddr>>,
    /// Refresh the table before the next command (a MOVED, a dead master, a CLUSTERDOWN).
    stale: bool,
    conns: HashMap<SocketAddr, Conn>,
}

fn parse_addr(host: &[u8], port: i64) -> Option<SocketAddr> {
    let host = std::str::from_utf8(host).ok()?;
    format!("{host}:{port}").parse().ok()
}

/// `MOVED 3999 127.0.0.1:6381` / `ASK 3999 127.0.0.1:6381` → the slot and the address.
fn redirect_target(rest: &str) -> Option<(u16, SocketAddr)> {
    let (slot, addr) = rest.trim().split_once(' ')?;
    Some((slot.parse().ok()?, addr.parse().ok()?))
}

impl ClusterClient {
    pub fn new(
        src: Ipv4Addr,
        seeds: Vec<SocketAddr>,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> Self {
        ClusterClient {
            src,
            next_seed: src.octets()[3] as usize,
            seeds,
            connect_timeout,
            io_timeout,
            table: vec![None; SLOTS as usize],
            stale: true,
            conns: HashMap::new(),
        }
    }

    /// Asks the seeds in turn for `CLUSTER SLOTS`; the first one that names a master for any
    /// slot gives the table (slots it names no master for stay unrouted until the next refresh).
    fn refresh(&mut self) -> bool {
        REFRESHES.fetch_add(1, Ordering::Relaxed);
        for _ in 0..self.seeds.len() {
            let s = self.seeds[self.next_seed % self.seeds.len()];
            self.next_seed += 1;
            let Ok(mut c) = Conn::connect(self.src, s, self.connect_timeout, TOPOLOGY_TIMEOUT)
            else {
                continue;
            };
            let Ok(Reply::Array(Some(ranges))) = c.cmd(&[b"CLUSTER", b"SLOTS"]) else {
                continue;
            };
            let mut table = vec![None; SLOTS as usize];
            let mut any = false;
            for r in &ranges {
                let Reply::Array(Some(r)) = r else { continue };
                let (Some(Reply::Int(a)), Some(Reply::Int(b)), Some(Reply::Array(Some(m)))) =
                    (r.first(), r.get(1), r.get(2))
                else {
                    continue;
                };
                let (Some(Reply::Bulk(Some(h))), Some(Reply::Int(p))) = (m.first(), m.get(1))
                else {
                    continue;
                };
                let Some(addr) = parse_addr(h, *p) else {
                    continue;
                };
                let (a, b) = ((*a).clamp(0, 16383) as usize, (*b).clamp(0, 16383) as usize);
                for slot in table.iter_mut().take(b + 1).skip(a) {
                    *slot = Some(addr);
                    any = true;
                }
            }
            if any {
                self.table = table;
                self.stale = false;
                return true;
            }
        }
        false
    }

    fn conn(&mut self, addr: SocketAddr) -> Option<&mut Conn> {
        if !self.conns.contains_key(&addr) {
            let c = Conn::connect(self.src, addr, self.connect_timeout, self.io_timeout).ok()?;
            self.conns.insert(addr, c);
        }
        self.conns.get_mut(&addr)
    }

    /// Sends one command to the master of its key's slot, following the cluster's redirections.
    /// A definite error reply that is not a redirection comes back as `Ok(Reply::Error)`.
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Reply, CallErr> {
        let slot = routing_key(args).map_or(0, key_slot) as usize;
        // `ASK`: the next attempt goes to this node, preceded by ASKING, and only that attempt.
        let mut ask: Option<SocketAddr> = None;
        for _ in 0..MAX_ATTEMPTS {
            if self.stale {
                self.refresh();
            }
            let Some(addr) = ask.or(self.table[slot]) else {
                self.stale = true;
                std::thread::sleep(RETRY_PAUSE);
                continue;
            };
            let asking = ask.take().is_some();
            let Some(c) = self.conn(addr) else {
                // Nothing sent: the master may be gone; find the new one.
                self.stale = true;
                continue;
            };
            if asking {
                match c.cmd(&[b"ASKING"]) {
                    Ok(Reply::Simple(_)) => {}
                    Ok(_) => continue,
                    Err(_) => {
                        // ASKING itself changes nothing: the command was not sent yet.
                        self.conns.remove(&addr);
                        continue;
                    }
                }
            }
            let reply = match c.cmd(args) {
                Ok(r) => r,
                Err(_) => {
                    self.conns.remove(&addr);
                    self.stale = true;
                    return Err(CallErr::Unknown);
                }
            };
            let Reply::Error(e) = &reply else {
                return Ok(reply);
            };
            if let Some(rest) = e.strip_prefix("MOVED ") {
                MOVED.fetch_add(1, Ordering::Relaxed);
                if let Some((s, to)) = redirect_target(rest) {
                    self.table[s as usize] = Some(to);
                }
                self.stale = true;
                continue;
            }
            if let Some(rest) = e.strip_prefix("ASK ") {
                ASK.fetch_add(1, Ordering::Relaxed);
                ask = redirect_target(rest).map(|(_, to)| to);
                continue;
            }
            if e.starts_with("TRYAGAIN") || e.starts_with("CLUSTERDOWN") {
                RETRIED.fetch_add(1, Ordering::Relaxed);
                self.stale |= e.starts_with("CLUSTERDOWN");
                std::thread::sleep(RETRY_PAUSE);
                continue;
            }
            if e.starts_with("READONLY") || e.starts_with("MASTERDOWN") || e.starts_with("LOADING")
            {
                // Not the master (any more): the table is out of date.
                self.stale = true;
            }
            return Ok(reply);
        }
        GAVE_UP.fetch_add(1, Ordering::Relaxed);
        Err(CallErr::Fail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::{Arc, Mutex};

    type Handler = Arc<dyn Fn(&[Vec<u8>]) -> Option<String> + Send + Sync>;

    /// A fake node on 127.0.0.1: each command (an array of bulk strings) gets `handler`'s
    /// raw RESP reply, or the connection closed for None. Also records every command.
    fn fake_node(handler: Handler) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let (h, log) = (handler.clone(), log.clone());
                std::thread::spawn(move || serve(s, h, log));
            }
        });
        (addr, seen)
    }

    fn serve(s: TcpStream, h: Handler, log: Arc<Mutex<Vec<String>>>) {
        let mut w = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let n: usize = line.trim()[1..].parse().unwrap();
            let mut args = Vec::new();
            for _ in 0..n {
                line.clear();
                r.read_line(&mut line).unwrap();
                let len: usize = line.trim()[1..].parse().unwrap();
                let mut b = vec![0; len + 2];
                r.read_exact(&mut b).unwrap();
                b.truncate(len);
                args.push(b);
            }
            let words: Vec<String> = args
                .iter()
                .map(|a| String::from_utf8_lossy(a).into())
                .collect();
            log.lock().unwrap().push(words.join(" "));
            match h(&args) {
                Some(reply) => w.write_all(reply.as_bytes()).unwrap(),
                None => return,
            }
        }
    }

    /// CLUSTER SLOTS naming `master` for every slot.
    fn all_slots(master: SocketAddr) -> String {
        format!(
            "*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:{}\r\n$2\r\nid\r\n",
            master.port()
        )
    }

    fn client(seed: SocketAddr) -> ClusterClient {
        let t = Duration::from_millis(500);
        ClusterClient::new(Ipv4Addr::LOCALHOST, vec![seed], t, t)
    }

    #[test]
    fn follows_moved_and_ask_and_retries_tryagain() {
        let (b, b_seen) = fake_node(Arc::new(|args: &[Vec<u8>]| {
            Some(match args[0].as_slice() {
                b"ASKING" | b"SET" => "+OK\r\n".to_string(),
                _ => "-ERR unexpected\r\n".to_string(),
            })
        }));
        let (a, a_seen) = fake_node(Arc::new(move |args: &[Vec<u8>]| {
            let key = args.get(1).cloned().unwrap_or_default();
            Some(match (args[0].as_slice(), key.as_slice()) {
                // Asked only after the MOVED: the new table names b.
                (b"CLUSTER", _) => all_slots(b),
                (b"SET", b"moved") => {
                    format!("-MOVED {} 127.0.0.1:{}\r\n", key_slot(b"moved"), b.port())
                }
                (b"SET", b"ask") => format!("-ASK {} 127.0.0.1:{}\r\n", key_slot(b"ask"), b.port()),
                (b"SET", b"busy") => {
                    "-TRYAGAIN Multiple keys request during rehashing of slot\r\n".into()
                }
                _ => "-ERR unexpected\r\n".into(),
            })
        }));
        let mut c = client(a);
        c.table = vec![Some(a); SLOTS as usize];
        c.stale = false;
        let moved_before = MOVED.load(Ordering::Relaxed);
        assert!(matches!(c.call(&[b"SET", b"moved", b"1"]), Ok(Reply::Simple(s)) if s == "OK"));
        assert!(MOVED.load(Ordering::Relaxed) > moved_before);
        assert_eq!(c.table[key_slot(b"moved") as usize], Some(b));
        assert!(b_seen.lock().unwrap().contains(&"SET moved 1".to_string()));
        // ASK: ASKING then the command on b, the table untouched.
        c.table = vec![Some(a); SLOTS as usize];
        c.stale = false;
        assert!(matches!(c.call(&[b"SET", b"ask", b"1"]), Ok(Reply::Simple(s)) if s == "OK"));
        let seen = b_seen.lock().unwrap().clone();
        let i = seen.iter().position(|s| s == "SET ask 1").unwrap();
        assert_eq!(seen[i - 1], "ASKING");
        assert_eq!(c.table[key_slot(b"ask") as usize], Some(a));
        // TRYAGAIN: retried up to the bound, then a definite failure.
        c.stale = false;
        assert!(matches!(
            c.call(&[b"SET", b"busy", b"1"]),
            Err(CallErr::Fail)
        ));
        let busy = a_seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| *s == "SET busy 1")
            .count();
        assert_eq!(busy, MAX_ATTEMPTS as usize);
    }

    #[test]
    fn a_lost_reply_is_unknown_and_not_retried() {
        // Every command read, then the connection closed without a reply.
        let (a, a_seen) = fake_node(Arc::new(|_: &[Vec<u8>]| None));
        let mut c = client(a);
        c.table = vec![Some(a); SLOTS as usize];
        c.stale = false;
        assert!(matches!(
            c.call(&[b"SET", b"k", b"1"]),
            Err(CallErr::Unknown)
        ));
        std::thread::sleep(Duration::from_millis(100));
        let sets = a_seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| *s == "SET k 1")
            .count();
        assert_eq!(sets, 1);
    }

    #[test]
    fn slots_match_redis() {
        // Redis's own examples (cluster-spec, CLUSTER KEYSLOT).
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b"foo{hash_tag}"), key_slot(b"hash_tag"));
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        // An empty tag hashes the whole key; only the first `{` counts.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 16383);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
    }

    #[test]
    fn routing_key_of_scripts() {
        assert_eq!(routing_key(&[b"GET", b"k"]), Some(&b"k"[..]));
        assert_eq!(
            routing_key(&[b"EVAL", b"return 1", b"1", b"k", b"a"]),
            Some(&b"k"[..])
        );
        assert_eq!(routing_key(&[b"EVAL", b"return 1", b"0"]), None);
    }
}
