//! Online resharding (`RAFT RESHARD`): a slot range moves from one Raft group to the other on
//! three nodes running both (`DEADBOLT_CLUSTER_GROUPS`: group 1 owns 8192-16383), while a
//! client keeps taking and releasing locks in it, following -MOVED and retrying -TRYAGAIN as
//! cluster clients do. Every acknowledged lock is then on every node with its token and
//! deadline, no released one comes back, CLUSTER SLOTS names the new owner and writes go to
//! its leader; a node restarted after the move rebuilds the same keys from the two logs
//! (group 0's replays first, so group 1's older entries for the range must not apply over its
//! import); and a move whose source leader is killed right after RESHARD completes or is
//! retried without losing a lock.

use super::nodes::{keys_in, Nodes};
use deadbolt::replication::group::key_hash_slot;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The range moved: group 1's, to the home group (which replays first after a restart).
const FIRST: u16 = 9000;
const LAST: u16 = 9199;
const TTL: u64 = 60_000;

fn start(name: &str, extra: &[&str]) -> Nodes {
    Nodes::new(name)
        .env_groups("1:8192-16383")
        .args(extra)
        .start()
}

#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

/// One connection speaking RESP2.
struct Client {
    r: BufReader<TcpStream>,
}

impl Client {
    fn connect(port: u16) -> std::io::Result<Client> {
        let s = TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            Duration::from_secs(2),
        )?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.set_nodelay(true)?;
        Ok(Client {
            r: BufReader::new(s),
        })
    }

    fn call(&mut self, args: &[&[u8]]) -> std::io::Result<Reply> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.r.get_mut().write_all(&out)?;
        self.read()
    }

    fn read(&mut self) -> std::io::Result<Reply> {
        let mut line = String::new();
        if self.r.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(1);
        let num = || rest.parse::<i64>().unwrap_or(-1);
        Ok(match kind {
            "+" => Reply::Status(rest.to_string()),
            "-" => Reply::Error(rest.to_string()),
            ":" => Reply::Int(num()),
            "$" if num() < 0 => Reply::Bulk(None),
            "$" => {
                let mut b = vec![0; num() as usize + 2];
                self.r.read_exact(&mut b)?;
                b.truncate(b.len() - 2);
                Reply::Bulk(Some(b))
            }
            "*" => {
                let mut v = Vec::new();
                for _ in 0..num().max(0) {
                    v.push(self.read()?);
                }
                Reply::Array(v)
            }
            _ => return Err(std::io::ErrorKind::InvalidData.into()),
        })
    }
}

/// A cluster-mode client: sends a command where the last redirection pointed, follows -MOVED,
/// retries -TRYAGAIN (and the refusals of a cluster electing a leader) after a pause, and
/// tries the other nodes when one cannot be reached. Err: the connection broke after the
/// command was sent (its outcome is unknown).
struct ClusterClient {
    ports: Vec<u16>,
    conns: HashMap<u16, Client>,
    hint: u16,
    tryagain: u64,
    moved: u64,
}

impl ClusterClient {
    fn new(ports: &[u16]) -> ClusterClient {
        ClusterClient {
            ports: ports.to_vec(),
            conns: HashMap::new(),
            hint: ports[0],
            tryagain: 0,
            moved: 0,
        }
    }

    fn run(&mut self, args: &[&[u8]]) -> Result<Reply, String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut next = 0;
        loop {
            assert!(Instant::now() < deadline, "no answer to {args:?}");
            let port = self.hint;
            let c = match self.conns.entry(port) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => match Client::connect(port) {
                    Ok(c) => v.insert(c),
                    Err(_) => {
                        next += 1;
                        self.hint = self.ports[next % self.ports.len()];
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                },
            };
            let reply = match c.call(args) {
                Ok(r) => r,
                Err(e) => {
                    self.conns.remove(&port);
                    next += 1;
                    self.hint = self.ports[next % self.ports.len()];
                    return Err(format!("{e}"));
                }
            };
            match &reply {
                Reply::Error(e) if e.starts_with("MOVED ") => {
                    self.moved += 1;
                    let addr = e.rsplit(' ').next().unwrap_or("");
                    self.hint = addr.rsplit(':').next().unwrap().parse().unwrap();
                }
                Reply::Error(e) if e.starts_with("TRYAGAIN") => {
                    self.tryagain += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Reply::Error(e)
                    if e.starts_with("CLUSTERDOWN")
                        || e.starts_with("MASTERDOWN")
                        || e.starts_with("READONLY")
                        || e.starts_with("LOADING") =>
                {
                    next += 1;
                    self.hint = self.ports[next % self.ports.len()];
                    std::thread::sleep(Duration::from_millis(50));
                }
                _ => return Ok(reply),
            }
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Keys of the moved range (`lock:<n>`), `n` from `from` on.
fn range_keys(from: u64, count: usize) -> Vec<String> {
    keys_in("lock:", from, FIRST..=LAST).take(count).collect()
}

/// What the test knows of each key: its token and when the SET was sent and acknowledged,
/// None once a compare-and-delete of it was acknowledged; uncertain keys (the connection broke
/// before the reply) are left out of the checks.
#[derive(Default)]
struct Ledger {
    held: HashMap<String, Option<(String, u64, u64)>>,
    uncertain: Vec<String>,
}

struct Rng(u64);

impl Rng {
    fn token(&mut self) -> String {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        format!("{:016x}", self.0)
    }
}

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

fn acquire(c: &mut ClusterClient, ledger: &Mutex<Ledger>, key: &str, token: &str) -> bool {
    let sent = now_ms();
    let ttl = TTL.to_string();
    let r = c.run(&[
        b"SET",
        key.as_bytes(),
        token.as_bytes(),
        b"NX",
        b"PX",
        ttl.as_bytes(),
    ]);
    let mut l = ledger.lock().unwrap();
    match r {
        Ok(Reply::Status(s)) if s == "OK" => {
            l.held
                .insert(key.to_string(), Some((token.to_string(), sent, now_ms())));
            true
        }
        Ok(Reply::Bulk(None)) => false,
        Ok(other) => panic!("SET {key} answered {other:?}"),
        Err(_) => {
            l.uncertain.push(key.to_string());
            false
        }
    }
}

fn release(c: &mut ClusterClient, ledger: &Mutex<Ledger>, key: &str, token: &str) {
    let r = c.run(&[
        b"EVAL",
        RELEASE.as_bytes(),
        b"1",
        key.as_bytes(),
        token.as_bytes(),
    ]);
    let mut l = ledger.lock().unwrap();
    match r {
        Ok(Reply::Int(1)) => {
            l.held.insert(key.to_string(), None);
        }
        Ok(other) => panic!("the release of {key} answered {other:?}"),
        Err(_) => l.uncertain.push(key.to_string()),
    }
}

/// A key of the moved range (`leader_for` writes a key of its slot, not it).
fn probe() -> String {
    range_keys(0, 1).remove(0)
}

/// Each group's leader, once each is its group's preferred voter (the groups hand leadership
/// there after the first election): (home group's, group 1's).
fn settled_leaders(nodes: &Nodes) -> (usize, usize) {
    let l = nodes.preferred_leaders(&["{bar}:leader", &format!("{{{}}}:leader", probe())]);
    (l[0], l[1])
}

/// Waits until the range is the home group's on every live node (CLUSTER SLOTS names its
/// current leader for it); false if not within `within`.
fn wait_home(nodes: &Nodes, live: &[usize], within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let home = leader_for(nodes, "bar");
        if wait_moved(nodes, home, live, Duration::from_millis(500)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
    }
}

/// The node that acknowledges writes to `key`'s slot, once exactly one running node does and
/// the others redirect there.
fn leader_for(nodes: &Nodes, key: &str) -> usize {
    nodes.leader_of(&format!("{{{key}}}:leader"))
}

/// Waits until every live node's CLUSTER SLOTS gives the moved range to `leader`.
fn wait_moved(nodes: &Nodes, leader: usize, live: &[usize], within: Duration) -> bool {
    let range = format!(
        ":{FIRST}\r\n:{LAST}\r\n*4\r\n$9\r\n127.0.0.1\r\n:{}\r\n",
        nodes.ports[leader]
    );
    let deadline = Instant::now() + within;
    loop {
        // (A node closing its clients as leadership moves answers nothing: asked again.)
        let all = live
            .iter()
            .all(|&i| nodes.ask(i, &["CLUSTER", "SLOTS"]).contains(&range));
        if all {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every lock the ledger holds is on node `i` with its token and a deadline within what its
/// SET allowed (and the same on every node: `deadlines`); every released one is absent.
fn check_node(
    nodes: &Nodes,
    i: usize,
    ledger: &Ledger,
    deadlines: &mut HashMap<String, i64>,
    slack: u64,
    later: u64,
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    // A READONLY connection; a node closes its plain clients when it stops leading the home
    // group (leadership moving back to its preferred node after a restart), so the check
    // connects again then.
    let connect = || loop {
        if let Ok(mut c) = Client::connect(nodes.ports[i]) {
            if c.call(&[b"READONLY"])
                .is_ok_and(|r| r == Reply::Status("OK".into()))
            {
                break c;
            }
        }
        assert!(
            Instant::now() < deadline,
            "node {i} takes no READONLY connection"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut c = connect();
    let mut checked = 0;
    for (key, state) in &ledger.held {
        if ledger.uncertain.contains(key) {
            continue;
        }
        // A follower's read waits for its read barrier; retried while the node catches up.
        let (value, pexp) = loop {
            let read = c
                .call(&[b"GET", key.as_bytes()])
                .and_then(|v| Ok((v, c.call(&[b"PEXPIRETIME", key.as_bytes()])?)));
            let (v, p) = match read {
                Ok(r) => r,
                Err(e) => {
                    assert!(Instant::now() < deadline, "node {i}: GET {key}: {e}");
                    c = connect();
                    continue;
                }
            };
            // CLUSTERDOWN while a group elects a leader: asked again.
            let settled = !matches!(p, Reply::Error(_))
                && match (state, &v) {
                    (Some((token, ..)), Reply::Bulk(Some(b))) => b == token.as_bytes(),
                    (None, Reply::Bulk(None)) => true,
                    _ => false,
                };
            if settled || Instant::now() >= deadline {
                break (v, p);
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        match state {
            Some((token, sent, acked)) => {
                assert_eq!(
                    value,
                    Reply::Bulk(Some(token.as_bytes().to_vec())),
                    "node {i}: acknowledged lock {key} lost or changed"
                );
                let Reply::Int(at) = pexp else {
                    panic!("node {i}: PEXPIRETIME {key} answered {pexp:?}");
                };
                // A group led on a node that follows the home group takes its commands'
                // clock the clock bound (500 ms) early: the follower clock shift in dispatch
                // is still the home group's.
                assert!(
                    at as u64 + 500 >= sent + TTL && (at as u64) <= acked + TTL + slack,
                    "node {i}: {key} expires at {at}, its SET was sent at {sent} and acknowledged at {acked}"
                );
                let first = *deadlines.entry(key.clone()).or_insert(at);
                assert!(
                    at >= first && at <= first + later as i64,
                    "node {i}: {key} expires at {at}, at {first} on the nodes checked before"
                );
            }
            None => assert_eq!(
                value,
                Reply::Bulk(None),
                "node {i}: released lock {key} is back"
            ),
        }
        checked += 1;
    }
    assert!(checked >= 1000, "only {checked} keys checked");
}

/// A client taking and releasing locks in the moved range until `stop`: each lock it gets is
/// released two acquisitions later.
fn churn(ports: Vec<u16>, ledger: Arc<Mutex<Ledger>>, stop: Arc<AtomicBool>) -> (u64, u64) {
    let mut c = ClusterClient::new(&ports);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ now_ms());
    let keys = (1_000_000u64..)
        .map(|n| format!("lock:{n}"))
        .filter(|k| (FIRST..=LAST).contains(&key_hash_slot(k.as_bytes())));
    let mut taken: Vec<(String, String)> = Vec::new();
    for key in keys {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let token = rng.token();
        if acquire(&mut c, &ledger, &key, &token) {
            taken.push((key, token));
        }
        if taken.len() > 2 {
            let (k, t) = taken.remove(0);
            release(&mut c, &ledger, &k, &t);
        }
    }
    (c.tryagain, c.moved)
}

fn reshard(c: &mut ClusterClient, to: &str) -> Reply {
    let (a, b) = (FIRST.to_string(), LAST.to_string());
    c.run(&[
        b"RAFT",
        b"RESHARD",
        a.as_bytes(),
        b.as_bytes(),
        to.as_bytes(),
    ])
    .expect("RAFT RESHARD answered")
}

#[test]
fn a_range_moves_under_load_without_losing_a_lock_and_a_restart_rebuilds_it() {
    move_under_load_and_restart("cluster-reshard", &[], 0);
}

/// The same with a snapshot every 64 entries: the logs compact before, during and after the
/// move, so nodes (and the restarted one) install snapshots carrying the groups' claims.
#[test]
fn a_move_survives_compactions_and_snapshot_installs() {
    move_under_load_and_restart(
        "cluster-reshard-snapshots",
        &["--cluster-snapshot-every", "64"],
        2000,
    );
}

/// `fill`: writes to the home group after the move, past a compaction by count (at least one
/// entry per key), so its snapshot then holds the import's claims.
fn move_under_load_and_restart(name: &str, extra: &[&str], fill: usize) {
    let mut nodes = start(name, extra);
    let all = [0, 1, 2];
    // "bar" is the home group's (slot 5061); the range is group 1's until it moves.
    let (home, source) = settled_leaders(&nodes);
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut c = ClusterClient::new(&nodes.ports);
    let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ now_ms());
    let held = range_keys(0, 1000);
    let mut tokens = Vec::new();
    for key in &held {
        let t = rng.token();
        assert!(acquire(&mut c, &ledger, key, &t), "{key} not acquired");
        tokens.push(t);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let churner = {
        let (ports, l, s) = (nodes.ports.clone(), ledger.clone(), stop.clone());
        std::thread::spawn(move || churn(ports, l, s))
    };
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(reshard(&mut c, "0"), Reply::Status("OK".into()));
    // Moved: every node names the home group's leader for the range.
    assert!(
        wait_home(&nodes, &all, Duration::from_secs(20)),
        "the range never moved to group 0 (source leader node {source}, home leader {home})"
    );
    let home = leader_for(&nodes, "bar");
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let (tryagain, moved) = churner.join().unwrap();
    // It followed the range to its new leader (a TRYAGAIN is seen only when a command
    // falls in the few milliseconds between the release and the import).
    assert!(moved > 0, "the churning client was never redirected");
    // Writes to the range go to the home group's leader, the others redirect there.
    assert_eq!(leader_for(&nodes, &probe()), home);
    // Locks taken in group 1 and released or taken again in group 0: a replay of group 1's
    // older entries over the import would bring back their old tokens.
    for (i, key) in held.iter().enumerate().take(300) {
        release(&mut c, &ledger, key, &tokens[i]);
        if i % 3 == 0 {
            let t = rng.token();
            assert!(acquire(&mut c, &ledger, key, &t));
        }
    }
    for i in 0..fill {
        let k = format!("{{bar}}:fill:{}", i % 50);
        assert_eq!(
            c.run(&[b"SET", k.as_bytes(), b"x"]),
            Ok(Reply::Status("OK".into()))
        );
    }
    // A few writes to either group after those: a follower's log then records a commit
    // index past them, so the restarted node applies them from its own disk, the home group's
    // log first (the order a missing filter gets wrong).
    for i in 0..5 {
        for key in ["bar", "foo"] {
            let k = format!("{{{key}}}:after:{i}");
            assert_eq!(
                c.run(&[b"SET", k.as_bytes(), b"x"]),
                Ok(Reply::Status("OK".into()))
            );
        }
    }
    let l = ledger.lock().unwrap();
    // No election during the move: one deadline on every node, as its leader set it.
    let mut deadlines = HashMap::new();
    for i in all {
        check_node(&nodes, i, &l, &mut deadlines, 1_000, 0);
    }
    drop(l);
    // A node restarted after the move replays both logs (the home group's first) to the same.
    // The node leading neither group restarts while group 1's leader is down: the home
    // group's leader tells it its commit index at once, group 1 must elect a leader first,
    // so it replays the import and what followed before group 1's older entries for the
    // range (which must then not apply). Then group 1's old leader comes back too.
    let source = leader_for(&nodes, "foo");
    let other = (0..3).find(|&i| i != home && i != source);
    let restarted: Vec<usize> = match other {
        Some(other) => {
            nodes.kill(source);
            nodes.restart(other);
            vec![other, source]
        }
        None => vec![(home + 1) % 3],
    };
    let l = ledger.lock().unwrap();
    for &i in &restarted {
        if !nodes.live().contains(&i) {
            nodes.restart(i);
        }
        eprintln!("checking restarted node {i}");
        // Replaying the logs, it applies each group's EXTEND entries (one per election, the
        // clock bound each) to every key of the node, the moved range's included when the
        // source group's log replays after the import; and group 1's new leader extends
        // them on every node: a deadline may come out later than the leader's was, never
        // earlier.
        check_node(&nodes, i, &l, &mut deadlines, 3_000, 4 * 500);
    }
    eprintln!(
        "moved {} keys ({} uncertain); the churning client saw {tryagain} TRYAGAIN and {moved} MOVED",
        l.held.len(),
        l.uncertain.len()
    );
}

#[test]
fn a_move_survives_the_source_leader_killed_right_after_reshard() {
    let mut nodes = start("cluster-reshard-kill", &[]);
    let all = [0, 1, 2];
    settled_leaders(&nodes);
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut c = ClusterClient::new(&nodes.ports);
    let mut rng = Rng(0x1234_5678_9abc_def1 ^ now_ms());
    for key in range_keys(0, 1000) {
        let t = rng.token();
        assert!(acquire(&mut c, &ledger, &key, &t), "{key} not acquired");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let churner = {
        let (ports, l, s) = (nodes.ports.clone(), ledger.clone(), stop.clone());
        std::thread::spawn(move || churn(ports, l, s))
    };
    assert_eq!(reshard(&mut c, "0"), Reply::Status("OK".into()));
    // The node that took the RESHARD: the source group's leader.
    let killed = nodes.index_of(c.hint);
    nodes.kill(killed);
    let live: Vec<usize> = all.iter().copied().filter(|&i| i != killed).collect();
    // The release committed (the move completes) or was lost with the leader (the range is
    // group 1's again, not frozen, and RESHARD is asked again of its new leader).
    let mut retries = 0;
    let deadline = Instant::now() + Duration::from_secs(40);
    while !wait_home(&nodes, &live, Duration::from_secs(3)) {
        assert!(Instant::now() < deadline, "the move never completed");
        match reshard(&mut c, "0") {
            Reply::Status(s) if s == "OK" => retries += 1,
            Reply::Error(e) if e.contains("being moved") || e.contains("not serving") => {}
            other => panic!("retrying RESHARD: {other:?}"),
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let (tryagain, moved) = churner.join().unwrap();
    let home = leader_for(&nodes, "bar");
    assert_eq!(leader_for(&nodes, &probe()), home);
    let l = ledger.lock().unwrap();
    // A new leader extends every deadline (the clock bound) at its own log position, and each
    // node applies the two groups' logs in its own order: a deadline may be later on one node
    // than on another (never earlier than the SET allowed).
    for &i in &live {
        check_node(&nodes, i, &l, &mut HashMap::new(), 10_000, 0);
    }
    drop(l);
    // The killed node comes back and catches up on both logs.
    nodes.restart(killed);
    let l = ledger.lock().unwrap();
    check_node(&nodes, killed, &l, &mut HashMap::new(), 10_000, 0);
    eprintln!(
        "RESHARD retried {retries} times; {} uncertain; {tryagain} TRYAGAIN, {moved} MOVED",
        l.uncertain.len()
    );
}

/// RAFT RESHARD's refusals: a node not leading the range's group redirects to its leader (as
/// redis-cli -c follows), bad ranges and groups are errors, a range spanning two groups or
/// already moving is refused; one group moves nothing.
#[test]
fn reshard_refusals() {
    let nodes = start("cluster-reshard-refusals", &[]);
    let (_, source) = settled_leaders(&nodes);
    let call = |i: usize, args: &[&str]| nodes.answer(i, args);
    let err = |s: &str| format!("-{s}\r\n");
    let follower = (source + 1) % 3;
    assert_eq!(
        call(follower, &["RAFT", "RESHARD", "9000", "9001", "0"]),
        err(&format!("MOVED 9000 127.0.0.1:{}", nodes.ports[source]))
    );
    for (args, want) in [
        (["9001", "9000", "0"], "ERR Invalid or out of range slot"),
        (["9000", "16384", "0"], "ERR Invalid or out of range slot"),
        (["x", "9000", "0"], "ERR Invalid or out of range slot"),
        (["9000", "9001", "7"], "ERR Unknown group 7"),
        (
            ["9000", "9001", "-1"],
            "ERR group must be a non-negative integer",
        ),
        (
            ["9000", "9001", "1"],
            "ERR Slots 9000-9001 are group 1's already",
        ),
        (
            ["8000", "9000", "0"],
            "ERR Slots 8000-9000 span several groups (slot 8192 is 1's, slot 8000 0's)",
        ),
    ] {
        let mut a = vec!["RAFT", "RESHARD"];
        a.extend(args);
        assert_eq!(call(source, &a), err(want), "{args:?}");
    }
    assert_eq!(
        call(source, &["RAFT", "RESHARD", "9000"]),
        err("ERR wrong number of arguments for 'raft|reshard' command")
    );
    // A move of one slot, then the same slot again at once: refused while it moves, the
    // range's new group's afterwards.
    assert_eq!(
        call(source, &["RAFT", "RESHARD", "9000", "9000", "0"]),
        "+OK\r\n"
    );
    let again = call(source, &["RAFT", "RESHARD", "9000", "9000", "0"]);
    assert!(
        again == err("ERR Slot 9000 is being moved already") || again.starts_with("-MOVED 9000 "),
        "{again:?}"
    );
    let home = leader_for(&nodes, "bar");
    nodes.ask_until(
        home,
        &["RAFT", "RESHARD", "9000", "9000", "0"],
        &err("ERR Slots 9000-9000 are group 0's already"),
    );
}

/// A range holding more keys than one import entry carries (8192) moves in several imports,
/// one per round of the new group's leader; each node ends with every key.
#[test]
fn a_large_range_moves_in_several_imports() {
    let nodes = start("cluster-reshard-large", &[]);
    let all = [0, 1, 2];
    let (_, source) = settled_leaders(&nodes);
    let keys = range_keys(0, 20_000);
    let pipeline = |c: &mut Client, cmds: &[Vec<&[u8]>]| -> Vec<Reply> {
        let mut out = Vec::new();
        for args in cmds {
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in args {
                out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                out.extend_from_slice(a);
                out.extend_from_slice(b"\r\n");
            }
        }
        c.r.get_mut().write_all(&out).unwrap();
        cmds.iter().map(|_| c.read().unwrap()).collect()
    };
    let mut c = Client::connect(nodes.ports[source]).unwrap();
    for chunk in keys.chunks(1000) {
        let cmds: Vec<Vec<&[u8]>> = chunk
            .iter()
            .map(|k| vec![&b"SET"[..], k.as_bytes(), k.as_bytes()])
            .collect();
        for r in pipeline(&mut c, &cmds) {
            assert_eq!(r, Reply::Status("OK".into()));
        }
    }
    let mut cc = ClusterClient::new(&nodes.ports);
    cc.hint = nodes.ports[source];
    assert_eq!(reshard(&mut cc, "0"), Reply::Status("OK".into()));
    assert!(
        wait_home(&nodes, &all, Duration::from_secs(30)),
        "the range never moved"
    );
    for i in all {
        let mut c = Client::connect(nodes.ports[i]).unwrap();
        c.call(&[b"READONLY"]).unwrap();
        for chunk in keys.chunks(1000) {
            let cmds: Vec<Vec<&[u8]>> = chunk
                .iter()
                .map(|k| vec![&b"GET"[..], k.as_bytes()])
                .collect();
            for (k, r) in chunk.iter().zip(pipeline(&mut c, &cmds)) {
                assert_eq!(r, Reply::Bulk(Some(k.as_bytes().to_vec())), "node {i}: {k}");
            }
        }
    }
}

/// The importing group has no leader when the range is released (its leader was killed just
/// before): the leader it elects next finds the import pending in the applied table and makes
/// it; no lock is lost.
#[test]
fn a_release_without_a_leader_in_the_importing_group_is_imported_by_the_next_one() {
    let mut nodes = start("cluster-reshard-no-importer", &[]);
    let all = [0, 1, 2];
    let (home, source) = settled_leaders(&nodes);
    assert_ne!(
        home, source,
        "the groups' leaders settle on different nodes"
    );
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut c = ClusterClient::new(&nodes.ports);
    let mut rng = Rng(0x5851_f42d_4c95_7f2d ^ now_ms());
    for key in range_keys(0, 1000) {
        let t = rng.token();
        assert!(acquire(&mut c, &ledger, &key, &t), "{key} not acquired");
    }
    nodes.kill(home);
    c.hint = nodes.ports[source];
    assert_eq!(reshard(&mut c, "0"), Reply::Status("OK".into()));
    let live: Vec<usize> = all.iter().copied().filter(|&i| i != home).collect();
    assert!(
        wait_home(&nodes, &live, Duration::from_secs(30)),
        "the range never reached group 0's next leader"
    );
    let l = ledger.lock().unwrap();
    for &i in &live {
        check_node(&nodes, i, &l, &mut HashMap::new(), 3_000, 0);
    }
    drop(l);
    nodes.restart(home);
    let l = ledger.lock().unwrap();
    check_node(&nodes, home, &l, &mut HashMap::new(), 3_000, 0);
}

/// A range moved to a group, away from it and back to it again while that group keeps its
/// leader (one term): each release is imported, the third as the first (the leader once took
/// its first import of the range for the second release's and left the range in transit).
#[test]
fn a_range_moved_back_to_a_group_in_the_same_term_is_imported_again() {
    let nodes = start("cluster-reshard-back-and-forth", &[]);
    let all = [0, 1, 2];
    let (home, _) = settled_leaders(&nodes);
    let mut c = ClusterClient::new(&nodes.ports);
    let key = range_keys(7, 1).remove(0);
    assert_eq!(
        c.run(&[b"SET", key.as_bytes(), b"t", b"PX", b"60000"]),
        Ok(Reply::Status("OK".into()))
    );
    for to in ["0", "1", "0"] {
        assert_eq!(reshard(&mut c, to), Reply::Status("OK".into()), "to {to}");
        // Done once the range's leader (where the client's MOVED leads) calls it the target
        // group's already.
        let done = Reply::Error(format!("ERR Slots {FIRST}-{LAST} are group {to}'s already"));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = reshard(&mut c, to);
            if r == done {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the move to group {to} never finished: {r:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert!(wait_moved(&nodes, home, &all, Duration::from_secs(10)));
    assert_eq!(
        c.run(&[b"GET", key.as_bytes()]),
        Ok(Reply::Bulk(Some(b"t".to_vec())))
    );
}
