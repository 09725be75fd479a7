//! A hostile process on the nodes' network against a real three-node cluster on 127.0.0.1
//! (docs/cluster-security.md): every attack on the peer port is refused, and the cluster's own
//! behaviour (who leads, the term, check-quorum, a restarted follower's rejoin) is what it
//! would be without the attacker.
//! - without the secret, a forged MsgTimeoutNow moves no leadership and a forged heartbeat
//!   response at term+1000 changes no term;
//! - forged heartbeat responses for two stopped followers do not keep their leader in office;
//! - a member (it holds the secret) cannot speak for another member: the message's `from` must
//!   be the id its handshake proved (the control: sent under the proved id, it does move
//!   leadership, so the check is what stops it);
//! - 80 idle unauthenticated connections per node are cut and a restarted follower rejoins.

use crate::common;

use common::{cluster_node_args, cluster_ports, free_port, Conn, TempDir};
use protobuf::Message as _;
use raft::eraftpb::{Message, MessageType};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECRET: &str = "peer-attack-test-secret-0123456789";

// The peer port's wire (src/exec/peer.rs): `u32 BE body length | u8 type | body`.
const HELLO: u8 = 1;
const RAFT: u8 = 2;
const NONCE: u8 = 3;
const WELCOME: u8 = 4;

struct Node {
    id: u64,
    port: u16,
    peer_port: u16,
    child: Option<Child>,
    args: Vec<String>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Node {
    fn start(&mut self) {
        let mut child = Command::new(common::deadbolt_bin())
            .args(&self.args)
            .args(common::io_threads_args())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn deadbolt");
        for s in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let log = self.log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(s).lines() {
                    let Ok(line) = line else { break };
                    log.lock().unwrap().push(line);
                }
            });
        }
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "node {} never listened", self.id);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    fn logged(&self, needle: &str) -> bool {
        self.log.lock().unwrap().iter().any(|l| l.contains(needle))
    }

    /// RAFT STATUS's `role`, `leader` and `term`, or None if the node does not answer.
    fn status(&self) -> Option<(String, u64, u64)> {
        let text = resp(self.port, &["RAFT", "STATUS"], Duration::from_secs(2))?;
        let field = |name: &str| {
            text.split("\r\n")
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .map(str::to_string)
        };
        Some((
            field("role")?,
            field("leader")?.parse().ok()?,
            field("term")?.parse().ok()?,
        ))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(c) = &self.child {
            // A node left stopped would never die on SIGKILL's reaping.
            let _ = Command::new("kill")
                .args(["-CONT", &c.id().to_string()])
                .status();
        }
        self.kill9();
        if std::thread::panicking() {
            if let Ok(log) = self.log.lock() {
                eprintln!("--- node {} log ({} lines) ---", self.id, log.len());
                for line in log.iter().rev().take(40).rev() {
                    eprintln!("{line}");
                }
            }
        }
    }
}

struct Cluster {
    nodes: Vec<Node>,
    _dir: TempDir,
}

fn cluster(name: &str) -> Cluster {
    cluster_with(name, &[])
}

fn cluster_with(name: &str, extra: &[String]) -> Cluster {
    cluster_with_each(name, |_| extra.to_vec())
}

/// Three nodes, node `i` (0-based) started with `extra(i)` too.
fn cluster_with_each(name: &str, extra: impl Fn(usize) -> Vec<String>) -> Cluster {
    let dir = TempDir::new(name);
    let (ports, peers) = cluster_ports(3);
    let mut nodes = Vec::new();
    for (i, &(port, peer_port)) in ports.iter().enumerate() {
        let id = i as u64 + 1;
        let node_dir = dir.0.join(format!("n{id}"));
        std::fs::create_dir_all(&node_dir).unwrap();
        let mut args = cluster_node_args(port, &node_dir, id, &peers, SECRET);
        args.extend(extra(i));
        nodes.push(Node {
            id,
            port,
            peer_port,
            child: None,
            args,
            log: Default::default(),
        });
    }
    for node in &mut nodes {
        node.start();
    }
    Cluster { nodes, _dir: dir }
}

impl Cluster {
    /// The index of the leader every running node names, once it serves a write.
    fn leader(&self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            let seen: Vec<Option<(String, u64, u64)>> = self
                .nodes
                .iter()
                .filter(|n| n.child.is_some())
                .map(Node::status)
                .collect();
            let leader = seen.first().and_then(|s| s.as_ref()).map(|s| s.1);
            if let Some(l) = leader.filter(|&l| l != 0) {
                if seen.iter().all(|s| s.as_ref().map(|s| s.1) == Some(l)) {
                    let i = (l - 1) as usize;
                    if resp(
                        self.nodes[i].port,
                        &["SET", "__probe", "1"],
                        Duration::from_secs(2),
                    )
                    .as_deref()
                        == Some("+OK\r\n")
                    {
                        return i;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "no agreed leader within {timeout:?}: {seen:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every node names leader `l` at term `term` throughout `window` (the attack had no effect).
    fn assert_unchanged(&self, l: usize, term: u64, window: Duration, what: &str) {
        let end = Instant::now() + window;
        while Instant::now() < end {
            for n in &self.nodes {
                if let Some((_, leader, t)) = n.status() {
                    assert_eq!(
                        (leader, t),
                        (self.nodes[l].id, term),
                        "{what}: node {} changed leader or term",
                        n.id
                    );
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// One command over a fresh connection; None when the node does not answer in `wait`.
fn resp(port: u16, args: &[&str], wait: Duration) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(wait)).ok()?;
    s.write_all(&common::resp_cmd(args)).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if common::reply_len(&buf, 0).is_some() {
            return Some(String::from_utf8_lossy(&buf).into_owned());
        }
    }
    None
}

// ---- the attacker's side of the peer protocol ----

/// HMAC-SHA256 (RFC 2104) over the concatenation of `parts`.
fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    for p in parts {
        inner.update(p);
    }
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

fn frame(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.push(ty);
    f.extend_from_slice(body);
    f
}

fn raft_frame(m: &Message) -> Vec<u8> {
    frame(RAFT, &m.write_to_bytes().unwrap())
}

fn forged(ty: MessageType, from: u64, to: u64, term: u64) -> Message {
    Message {
        msg_type: ty,
        from,
        to,
        term,
        ..Default::default()
    }
}

/// Connects to a peer port and runs the handshake as node `id` with `key`; then writes
/// `after` at once (as an attacker would, without waiting for the verdict). Returns the
/// socket and whether WELCOME came back.
fn handshake(peer_port: u16, id: u64, key: &[u8], after: &[u8]) -> (TcpStream, bool) {
    let mut s = TcpStream::connect(("127.0.0.1", peer_port)).expect("peer port");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut head = [0u8; 5];
    s.read_exact(&mut head).expect("NONCE header");
    assert_eq!((&head[..4], head[4]), (&32u32.to_be_bytes()[..], NONCE));
    let mut nonce = [0u8; 32];
    s.read_exact(&mut nonce).unwrap();
    let mut hello = id.to_be_bytes().to_vec();
    hello.extend_from_slice(&hmac(key, &[&nonce, &id.to_be_bytes()]));
    let mut out = frame(HELLO, &hello);
    out.extend_from_slice(after);
    let _ = s.write_all(&out);
    // These nodes run one group: their WELCOME is empty (several groups: the digest of the
    // slot table, 32 bytes).
    let welcomed = matches!(s.read_exact(&mut head), Ok(()) if head == [0, 0, 0, 0, WELCOME]);
    (s, welcomed)
}

/// Whether the other end closed `s` within `wait`.
fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => {}
        }
        if Instant::now() > deadline {
            return false;
        }
    }
}

/// Without the secret (the empty key a node without one used to accept, and a wrong one), a
/// forged MsgTimeoutNow to a follower is refused: the connection is cut and nobody campaigns.
#[test]
fn a_forged_timeout_now_without_the_secret_moves_no_leadership() {
    let cl = cluster("peer-attack-timeout-now");
    let l = cl.leader(Duration::from_secs(10));
    let (_, _, term) = cl.nodes[l].status().unwrap();
    let f = (l + 1) % 3;
    let (lid, fid) = (cl.nodes[l].id, cl.nodes[f].id);
    let attack = raft_frame(&forged(MessageType::MsgTimeoutNow, lid, fid, term));
    for key in [&b""[..], b"not-the-secret"] {
        let (mut s, welcomed) = handshake(cl.nodes[f].peer_port, lid, key, &attack);
        assert!(!welcomed, "a HELLO without the secret was welcomed");
        assert!(closed_within(&mut s, Duration::from_secs(5)));
    }
    // A RAFT frame with no handshake at all.
    let mut s = TcpStream::connect(("127.0.0.1", cl.nodes[f].peer_port)).unwrap();
    let _ = s.write_all(&attack);
    assert!(closed_within(&mut s, Duration::from_secs(5)));
    cl.assert_unchanged(l, term, Duration::from_secs(3), "forged MsgTimeoutNow");
    assert!(cl.nodes[f].logged("did not prove the shared secret"));
}

/// A forged heartbeat response at term+1000 sent to the leader changes no term.
#[test]
fn a_forged_heartbeat_response_at_a_far_term_is_refused() {
    let cl = cluster("peer-attack-term");
    let l = cl.leader(Duration::from_secs(10));
    let (_, _, term) = cl.nodes[l].status().unwrap();
    let f = (l + 1) % 3;
    let (lid, fid) = (cl.nodes[l].id, cl.nodes[f].id);
    let attack = raft_frame(&forged(
        MessageType::MsgHeartbeatResponse,
        fid,
        lid,
        term + 1000,
    ));
    for key in [&b""[..], b"not-the-secret"] {
        let (mut s, welcomed) = handshake(cl.nodes[l].peer_port, fid, key, &attack);
        assert!(!welcomed);
        assert!(closed_within(&mut s, Duration::from_secs(5)));
    }
    cl.assert_unchanged(l, term, Duration::from_secs(3), "forged term+1000");
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// Both followers stopped: check-quorum deposes the leader even while forged heartbeat
/// responses in their names arrive every 30 ms.
#[test]
fn forged_heartbeats_do_not_keep_a_cut_off_leader_in_office() {
    let cl = cluster("peer-attack-quorum");
    let l = cl.leader(Duration::from_secs(10));
    let (_, _, term) = cl.nodes[l].status().unwrap();
    let lid = cl.nodes[l].id;
    let followers: Vec<usize> = (0..3).filter(|&i| i != l).collect();
    for &f in &followers {
        signal(cl.nodes[f].pid(), "-STOP");
    }
    let stopped = Instant::now();
    let mut refused = 0;
    let mut stepped_down = None;
    while stopped.elapsed() < Duration::from_secs(15) {
        for &f in &followers {
            let fid = cl.nodes[f].id;
            let mut attack = Vec::new();
            for t in [term, term + 1] {
                attack.extend(raft_frame(&forged(
                    MessageType::MsgHeartbeatResponse,
                    fid,
                    lid,
                    t,
                )));
            }
            for key in [&b""[..], b"not-the-secret"] {
                let (_, welcomed) = handshake(cl.nodes[l].peer_port, fid, key, &attack);
                assert!(!welcomed);
                refused += 1;
            }
        }
        if let Some((role, _, _)) = cl.nodes[l].status() {
            if role != "leader" {
                stepped_down = Some(stopped.elapsed());
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    for &f in &followers {
        signal(cl.nodes[f].pid(), "-CONT");
    }
    let after = stepped_down.expect("the leader stayed in office without a quorum for 15 s");
    // Check-quorum runs every election timeout (0.5-1 s here); a loaded machine adds a little.
    eprintln!("leader stepped down {after:?} after its followers stopped ({refused} forged handshakes refused)");
    assert!(refused >= 4, "the attack ran: {refused}");
}

/// A member holding the secret cannot pose as another: a MsgTimeoutNow from "the leader" on the
/// connection of another follower is dropped (and logged). The control, the same message on a
/// connection that proved the leader's id, does move leadership: the sender check is what
/// stopped the first.
#[test]
fn a_member_posing_as_another_member_is_dropped() {
    let cl = cluster("peer-attack-spoof");
    let l = cl.leader(Duration::from_secs(10));
    let (_, _, term) = cl.nodes[l].status().unwrap();
    let f = (l + 1) % 3;
    let other = (l + 2) % 3;
    let (lid, fid, oid) = (cl.nodes[l].id, cl.nodes[f].id, cl.nodes[other].id);
    let attack = raft_frame(&forged(MessageType::MsgTimeoutNow, lid, fid, term));
    let (mut s, welcomed) = handshake(cl.nodes[f].peer_port, oid, SECRET.as_bytes(), &attack);
    assert!(welcomed, "a member's HELLO is welcomed");
    // A message for another node on a member's connection is dropped too.
    let misaddressed = raft_frame(&forged(MessageType::MsgTimeoutNow, oid, lid, term));
    s.write_all(&misaddressed).unwrap();
    cl.assert_unchanged(l, term, Duration::from_secs(3), "spoofed sender");
    assert!(
        cl.nodes[f].logged(&format!(
            "dropped a message from {lid} to {fid} on the connection of peer {oid}"
        )),
        "the spoofed message was not reported"
    );
    drop(s);
    // The control: the same message under the id it claims starts an election on `f` (who
    // wins it depends on which peer links the test's connections displaced).
    let (_s, welcomed) = handshake(cl.nodes[f].peer_port, lid, SECRET.as_bytes(), &attack);
    assert!(welcomed);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if cl.nodes[f].status().is_some_and(|(_, _, t)| t > term) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the control MsgTimeoutNow moved nothing: the test could not see an attack work"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// From a follower's restart until it answers a read of a write made after it: it needs a
/// leader and both directions of the peer links.
fn rejoin(cl: &mut Cluster, f: usize, l: usize, n: u32) -> Duration {
    cl.nodes[f].kill9();
    let key = format!("after-restart-{n}");
    let mut c = Conn::connect(cl.nodes[l].port);
    assert_eq!(c.cmd(&["SET", &key, "v"]), b"+OK\r\n");
    let started = Instant::now();
    cl.nodes[f].start();
    let deadline = started + Duration::from_secs(30);
    loop {
        let got = resp(cl.nodes[f].port, &["GET", &key], Duration::from_millis(500));
        if got.as_deref() == Some("$1\r\nv\r\n") {
            return started.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "the restarted follower did not rejoin in 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// 80 idle connections to each running node's peer port: they are cut (the per-source
/// handshake budget and deadline), and a restarted follower rejoins as it does without them.
#[test]
fn idle_unauthenticated_connections_do_not_delay_a_rejoin() {
    let mut cl = cluster("peer-attack-flood");
    let l = cl.leader(Duration::from_secs(10));
    let f = (l + 1) % 3;
    let quiet = rejoin(&mut cl, f, l, 0);
    let l = cl.leader(Duration::from_secs(10));
    let f = (l + 1) % 3;
    let mut idle: Vec<TcpStream> = Vec::new();
    for n in cl.nodes.iter().filter(|n| n.id != cl.nodes[f].id) {
        for _ in 0..80 {
            idle.push(TcpStream::connect(("127.0.0.1", n.peer_port)).unwrap());
        }
    }
    let flooded = rejoin(&mut cl, f, l, 1);
    eprintln!("rejoin: {quiet:?} without the idle connections, {flooded:?} with 160");
    // Generous against scheduling noise, yet below what holding the idle connections until a
    // 5 s handshake timeout (with a full connection cap refusing the follower meanwhile) costs.
    assert!(
        flooded < quiet + Duration::from_secs(2),
        "rejoin took {flooded:?} with idle connections open ({quiet:?} without)"
    );
    // None of them is held: a few by the per-source budget, the rest cut at once, and those by
    // the handshake deadline.
    let open = idle
        .iter_mut()
        .map(|s| closed_within(s, Duration::from_secs(5)))
        .filter(|closed| !closed)
        .count();
    assert_eq!(
        open, 0,
        "{open} idle unauthenticated connections still open"
    );
}

/// Cluster mode does not start with an unauthenticated peer port: without cluster-secret (or
/// masterauth) the node exits at once and says what to set.
#[test]
fn a_cluster_node_without_a_secret_refuses_to_start() {
    let dir = TempDir::new("peer-no-secret");
    let (port, peer_port) = (free_port(), free_port());
    let out = Command::new(common::deadbolt_bin())
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            dir.0.to_str().unwrap(),
            "--cluster-node-id",
            "1",
            "--cluster-peers",
            &format!("1@127.0.0.1:{port}:{peer_port}"),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = common::all_output(&out);
    assert!(
        text.contains("cluster mode needs a shared secret for the peer port: set cluster-secret"),
        "{text}"
    );
}

/// The peer port listens on `bind` (as Redis's cluster bus), not on the address cluster-peers
/// gives, and the node warns when the two disagree.
#[test]
fn the_peer_port_listens_on_bind() {
    let dir = TempDir::new("peer-bind");
    let (port, peer_port) = (free_port(), free_port());
    let mut node = Node {
        id: 1,
        port,
        peer_port,
        child: None,
        args: [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            dir.0.to_str().unwrap(),
            "--cluster-node-id",
            "1",
            "--cluster-peers",
            &format!("1@127.0.0.2:{port}:{peer_port}"),
            "--cluster-secret",
            SECRET,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        log: Default::default(),
    };
    node.start();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !node.logged("cluster-peers gives this node's peer address as 127.0.0.2") {
        assert!(Instant::now() < deadline, "no warning about the address");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(TcpStream::connect(("127.0.0.1", peer_port)).is_ok());
    assert!(TcpStream::connect(("127.0.0.2", peer_port)).is_err());
    // cluster-peer-bind, when set, replaces bind for the peer port.
    node.kill9();
    node.args
        .extend(["--cluster-peer-bind", "127.0.0.2"].map(String::from));
    node.start();
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.2", peer_port)).is_err() {
        assert!(Instant::now() < deadline, "no peer listener on 127.0.0.2");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(TcpStream::connect(("127.0.0.1", peer_port)).is_err());
}

/// `tls-replication yes`: the cluster forms and replicates over TLS, and the peer port no
/// longer speaks the plain-text handshake, even to a client that holds the secret.
#[test]
fn with_tls_replication_peers_talk_tls_only() {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    };
    let pki = TempDir::new("peer-tls-pki");
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "peer test CA");
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    leaf.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &ca_cert, &ca_key).unwrap();
    let path = |n: &str| pki.0.join(n).display().to_string();
    std::fs::write(path("ca.pem"), ca_cert.pem()).unwrap();
    std::fs::write(path("node.pem"), cert.pem()).unwrap();
    std::fs::write(path("node.key"), key.serialize_pem()).unwrap();
    let extra: Vec<String> = [
        "--tls-cert-file",
        &path("node.pem"),
        "--tls-key-file",
        &path("node.key"),
        "--tls-ca-cert-file",
        &path("ca.pem"),
        "--tls-replication",
        "yes",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let cl = cluster_with("peer-tls", &extra);
    let l = cl.leader(Duration::from_secs(15));
    assert!(cl.nodes[l].logged("peer connections use TLS"));
    assert_eq!(
        resp(
            cl.nodes[l].port,
            &["SET", "k", "over-tls"],
            Duration::from_secs(5)
        )
        .as_deref(),
        Some("+OK\r\n")
    );
    for n in &cl.nodes {
        let deadline = Instant::now() + Duration::from_secs(10);
        while resp(n.port, &["GET", "k"], Duration::from_secs(1)).as_deref()
            != Some("$8\r\nover-tls\r\n")
        {
            assert!(
                Instant::now() < deadline,
                "node {} never got the write",
                n.id
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // The plain-text handshake: the acceptor waits for a TLS ClientHello and sends no NONCE.
    let mut s = TcpStream::connect(("127.0.0.1", cl.nodes[l].peer_port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut head = [0u8; 5];
    assert!(
        s.read_exact(&mut head).is_err(),
        "a plain-text NONCE: {head:?}"
    );
    assert!(closed_within(&mut s, Duration::from_secs(5)));
}

/// A node started with another slot table than the others' (a configuration mistake: each
/// table is valid alone) is sent nothing and sends nothing: with one log applied under two
/// tables, each node would keep only its own groups' keys and the copies would drift apart.
#[test]
fn a_node_created_with_another_slot_table_is_kept_out() {
    let cl = cluster_with_each("peer-other-table", |i| {
        if i == 2 {
            ["--cluster-enabled", "yes", "--cluster-groups", "2"]
                .map(String::from)
                .to_vec()
        } else {
            Vec::new()
        }
    });
    const WHY: &str = "was created with another slot table than this node";
    let deadline = Instant::now() + Duration::from_secs(20);
    let l = loop {
        let leaders: Vec<u64> = cl.nodes[..2]
            .iter()
            .filter_map(|n| n.status().map(|s| s.1))
            .collect();
        if let [a, b] = leaders[..] {
            if a == b && (a == 1 || a == 2) {
                let i = (a - 1) as usize;
                let set = resp(cl.nodes[i].port, &["SET", "k", "v"], Duration::from_secs(2));
                if set.as_deref() == Some("+OK\r\n") {
                    break i;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "nodes 1 and 2 agree on no leader: {leaders:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(cl.nodes[2].logged(WHY) && cl.nodes[l].logged(WHY)) {
        assert!(
            Instant::now() < deadline,
            "the mismatch is not logged on both sides"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Node 3 follows nobody: it heard from no member.
    let st = cl.nodes[2].status().expect("node 3 answers RAFT STATUS");
    assert_eq!(st.1, 0, "node 3 names a leader: {st:?}");
}
