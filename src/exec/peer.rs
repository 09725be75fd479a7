//! The cluster peer transport (replication/DESIGN.md §2): Raft messages between nodes over TCP.
//!
//! Each node dials every peer to *send* (one thread per peer, owning that peer's queue, with
//! blocking sockets; the executor writes a round's frames itself when that thread is idle, see
//! `Peers::flush`) and accepts connections to *receive*: two connections per pair, no
//! deduplication. An accepted connection's handshake runs on a short-lived thread (blocking,
//! with timeouts); once authenticated, the socket is handed to the executor, which reads it
//! itself, non-blocking, from its own epoll (`Peers::receive`, woken through `Peers::poll_fd`).
//! A reader thread per connection would add a thread wake-up to every message on the commit
//! path (peer socket → reader → executor), twice per replicated write; on a busy machine each
//! wake-up waits for a CPU, and that wait was the tail of the commit latency.
//!
//! Wire: a frame is `u32 BE body length | u8 type | body` (the length excludes the type byte).
//! - 3 NONCE (acceptor → dialer, first): 32 random bytes.
//! - 1 HELLO (dialer → acceptor): node id (u64 BE) | HMAC-SHA256(secret, nonce | node id),
//!   the secret being `cluster-secret` (else `masterauth`); the transport refuses to start
//!   without one (docs/cluster-security.md).
//! - 4 WELCOME (acceptor → dialer): the HELLO was accepted. Without it a dialer with the
//!   wrong secret could not tell a rejection from a peer that went away, and would believe (and
//!   log) itself connected on every retry while its messages vanish. Its body is SHA-256 of the
//!   slot table the acceptor's logs were created with (`PeerKey::table`), or empty where that
//!   table is one group holding every slot (as the wire's first version, which knows one group
//!   only, sends it). A dialer whose table differs sends nothing: two nodes that split the slots
//!   differently would each apply only their own groups' keys from one log, and the copies
//!   would drift apart with every write. (Nodes of several groups built before the digest
//!   welcome with an empty body: such a cluster is upgraded all at once, not node by node.)
//! - 6 RAFT (dialer → acceptor): `u32 BE group id | eraftpb::Message in protobuf`.
//! - 7 SNAPSHOT (dialer → acceptor): `u32 BE group id | u32 BE head length | head | data`, a
//!   `MsgSnapshot`, the head being the message in protobuf with its snapshot's data left out
//!   and `data` that data, raw.
//! - 2 and 5: RAFT and SNAPSHOT without the group id, as a node of the wire's first version
//!   sends them; read as group 0's (the only group that version knows). Every message names
//!   its Raft group (replication/group.rs): one connection per pair of nodes carries all the
//!   groups they share, and a message for a group this node does not run is dropped and
//!   logged, never stepped into another group's node. The leader's snapshot is already in memory (the store hands raft a shared
//!   buffer): the sender thread writes it from there, so neither the loop nor memory pays for
//!   encoding hundreds of MB into a second buffer; the receiver hands raft the data as a slice
//!   of the frame it read (no copy either).
//!
//! Nothing here blocks the executor: an undeliverable message is dropped and the loop is told
//! with `Msg::PeerUnreachable`, and raft retransmits (it probes the peer again).
//!
//! Trust: a RAFT message is delivered only from a connection whose HELLO proved the secret, and
//! only when its `from` is the node id that HELLO named, its `to` is this node and its group is
//! one this node runs (`Peers::set_groups`); anything else
//! is dropped (and logged, at most once per `DROP_LOG_EVERY` per connection). A connection that
//! has not proved the secret holds one of a few handshake slots (`MAX_PENDING_PER_SOURCE` per
//! source address, `MAX_PENDING` in all) for at most `ACCEPT_HANDSHAKE_DEADLINE`; a new
//! connection over either budget pushes out the oldest unproven one, so idle or slow
//! connections cannot keep a member from connecting, and authenticated connections are never
//! counted against those budgets. The listener binds `cluster-peer-bind`, else `bind` (Redis's
//! cluster bus listens on the `bind` addresses too).
//!
//! TLS (`tls-replication yes` or `tls-cluster yes`, `PeerTls`): every connection is a rustls
//! session and the frames above travel inside it. The sender thread owns its session (the
//! executor's direct write in `flush` is skipped); the executor reads its sessions as it reads
//! plain sockets (`read_frames_tls`).

use super::{Inbox, Msg};
use crate::config::{ClusterPeer, Config};
use crate::replication::group::GroupId;
use crate::replication::Message;
use bytes::Bytes;
use protobuf::Message as _;
use raft::eraftpb::MessageType;
use rustls::{ClientConnection, ServerConnection};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::ToSocketAddrs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

const HELLO: u8 = 1;
/// The first version's RAFT and SNAPSHOT frames: no group id, group 0's.
const RAFT_V1: u8 = 2;
const NONCE: u8 = 3;
const WELCOME: u8 = 4;
const SNAPSHOT_V1: u8 = 5;
const RAFT: u8 = 6;
const SNAPSHOT: u8 = 7;
/// The group id heading a RAFT or SNAPSHOT frame's body.
const GROUP_LEN: usize = 4;

const NONCE_LEN: usize = 32;
const HELLO_LEN: usize = 8 + 32;
/// A WELCOME's body: the digest of the acceptor's slot table.
const TABLE_LEN: usize = 32;
/// Snapshots travel as one SNAPSHOT frame (`cluster-max-frame`, 512mb in DESIGN.md §2).
pub const MAX_FRAME: usize = 512 << 20;
/// Bytes queued for one peer before messages are dropped. raft keeps up to `MAX_INFLIGHT` (32)
/// appends of `MAX_MSG` (256 KiB) in flight per follower (replication/mod.rs), 8 MiB; past this
/// the peer is slower than we produce, and dropping
/// puts it back in probe mode rather than growing memory. A message is always accepted into an
/// empty queue, so a snapshot larger than the cap still goes.
pub const DEFAULT_QUEUE_CAP: usize = 64 << 20;

const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_millis(500);
/// How long a link to a peer created with another slot table waits before it tries again.
const OTHER_TABLE_RETRY: Duration = Duration::from_secs(10);
const DIAL_TIMEOUT: Duration = Duration::from_secs(1);
/// A peer that has not finished the handshake in this long is gone (or is not a peer).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// An accepted connection that has not proved the secret in this long, in all, is cut: a
/// member's handshake is one round trip. The budget is the whole handshake, not each read, so
/// a client trickling bytes cannot stretch it.
const ACCEPT_HANDSHAKE_DEADLINE: Duration = Duration::from_secs(2);
/// Unproven (handshaking) connections held at once from one source address, and in all.
const MAX_PENDING_PER_SOURCE: usize = 4;
const MAX_PENDING: usize = 32;
/// Dropped messages (a wrong sender or recipient) are logged at most this often per connection.
const DROP_LOG_EVERY: Duration = Duration::from_secs(10);
/// A write that makes no progress for this long means the peer is dead without a FIN.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Frames up to this size are copied into one buffer so a batch of heartbeats and appends
/// leaves in one write; bigger ones (snapshots) are written from their own buffer.
const COALESCE: usize = 256 << 10;

/// `host:port` for a socket address, with brackets for an IPv6 literal.
pub fn addr_of(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The transport: owned by the executor. Dropping it stops every thread it started.
pub struct Peers {
    me: u64,
    /// The Raft groups this node runs: messages for any other are dropped.
    groups: Vec<GroupId>,
    /// Every address the peer port listens on (the port filled in where it was 0).
    local: Vec<SocketAddr>,
    key: Arc<PeerKey>,
    inbox: Inbox,
    cap: usize,
    links: HashMap<u64, (Arc<Link>, JoinHandle<()>)>,
    stop: Arc<AtomicBool>,
    listener: Option<JoinHandle<()>>,
    conns: Arc<Mutex<Conns>>,
    /// `flush`'s framing buffer, kept between rounds (the loop is its only user).
    flush_buf: std::cell::RefCell<Vec<u8>>,
    /// Authenticated inbound connections, read by the executor (`receive`).
    inbound: Inbound,
    /// Peer connections are TLS sessions (`tls-replication yes`).
    tls: Option<PeerTls>,
}

/// One peer's outgoing side, shared by `Peers::send` and that peer's sender thread.
struct Link {
    id: u64,
    q: Mutex<Queue>,
    cv: Condvar,
    /// Dial with TLS; then only the sender writes (the executor's direct write in `flush`
    /// would bypass the session).
    tls: Option<Arc<rustls::ClientConfig>>,
}

struct Queue {
    /// Frames to send, oldest first.
    frames: VecDeque<Frame>,
    bytes: usize,
    /// The last dial failed and no connection has been made since: new messages are dropped.
    unreachable: bool,
    /// `PeerUnreachable` was reported since the last failed dial or successful write, so the
    /// loop hears about a failure once, not once per message.
    reported: bool,
    addr: String,
    /// The address changed: leave the current connection and dial the new one.
    redial: bool,
    stop: bool,
    /// The socket being dialed or written, so `stop`/`redial` can unblock a write or handshake.
    stream: Option<TcpStream>,
    /// The handshake is done and the sender is pumping this connection.
    connected: bool,
    /// The sender has taken a batch and is writing it outside the lock.
    writing: bool,
    /// The rest of a frame the executor began writing itself (`Peers::send`); the sender
    /// writes it before anything else.
    partial: Vec<u8>,
}

/// One frame to send: `header(len, ty) | body | data`, `len` being `body.len() + data.len()`.
/// `data` (a snapshot's, shared with the store) is written from its own buffer, never copied.
struct Frame {
    ty: u8,
    body: Vec<u8>,
    data: Bytes,
}

impl Frame {
    fn raft(body: Vec<u8>) -> Frame {
        Frame {
            ty: RAFT,
            body,
            data: Bytes::new(),
        }
    }

    /// The body length, as the header gives it.
    fn len(&self) -> usize {
        self.body.len() + self.data.len()
    }
}

/// Accepted connections (handshaking or read by the executor), so `Drop` can close them and
/// wait for the handshake threads, and the listener can bound the unproven ones.
#[derive(Default)]
struct Conns {
    next: u64,
    open: HashMap<u64, TcpStream>,
    /// Connections still in their handshake, oldest first: (conn key, source, accepted at).
    pending: VecDeque<(u64, IpAddr, std::time::Instant)>,
    threads: Vec<JoinHandle<()>>,
    /// Connections whose handshake passed, for the executor to take (`Peers::receive`).
    handed: Vec<Handed>,
}

/// A connection whose handshake passed: (conn key, peer id, socket, remote address, TLS
/// session).
type Handed = (
    u64,
    u64,
    TcpStream,
    SocketAddr,
    Option<Box<ServerConnection>>,
);

/// The executor's side of receiving: its own epoll set of authenticated peer connections
/// (registered in the executor's epoll as one descriptor, so a frame arriving wakes the loop
/// directly), and a waker the handshake threads use to hand over new connections.
struct Inbound {
    poll: mio::Poll,
    events: mio::Events,
    waker: Arc<mio::Waker>,
    conns: HashMap<usize, InConn>,
    next_token: usize,
    /// One read's landing place, shared by every connection.
    scratch: Vec<u8>,
    /// Connections left at `RECV_BUDGET` with bytes possibly still in the socket: read again
    /// on the next turn whatever epoll says (it reports only new arrivals, and a sender done
    /// sending brings none).
    again: Vec<usize>,
}

/// One authenticated inbound connection: its socket (non-blocking) and the bytes of the frame
/// it is in the middle of.
struct InConn {
    key: u64,
    peer: u64,
    from: SocketAddr,
    sock: TcpStream,
    buf: Vec<u8>,
    /// Messages dropped for a wrong sender or recipient (logged rate-limited).
    drops: RateLimited,
    /// The TLS session over `sock` (`tls-replication yes`); it may already hold decrypted
    /// bytes read during the handshake.
    tls: Option<Box<ServerConnection>>,
}

/// TLS for peer connections: `tls-replication yes` with the server's TLS configured, as Redis
/// encrypts its replication links. Both sides verify the other's certificate against
/// `tls-ca-cert-file`; the shared secret is still proved inside the session.
#[derive(Clone)]
pub struct PeerTls {
    server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
}

impl PeerTls {
    /// From the server's TLS settings; the dialing side presents `tls-client-cert-file` /
    /// `tls-client-key-file` when set, else `tls-cert-file` / `tls-key-file` (as Redis's
    /// replication client). The error is a start-up message.
    pub fn from_config(cfg: &Config) -> Result<PeerTls, String> {
        use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
        if cfg.tls_ca_cert_file.is_empty() {
            return Err(
                "tls-replication yes needs tls-ca-cert-file: nodes verify each other's certificates"
                    .into(),
            );
        }
        let server = crate::server::tls::server_config(cfg)?;
        let mut server = (*server).clone();
        // The acceptor never writes after its WELCOME: the dialer takes anything readable for
        // the end of the connection. Session tickets would be such bytes.
        server.send_tls13_tickets = 0;
        let (cert_file, key_file) = match (
            cfg.compat_value("tls-client-cert-file"),
            cfg.compat_value("tls-client-key-file"),
        ) {
            ("", _) | (_, "") => (cfg.tls_cert_file.as_str(), cfg.tls_key_file.as_str()),
            (c, k) => (c, k),
        };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_file)
            .and_then(|it| it.collect::<Result<_, _>>())
            .map_err(|e| format!("Failed to load certificate: {cert_file}: {e}"))?;
        let key = PrivateKeyDer::from_pem_file(key_file)
            .map_err(|e| format!("Failed to load private key: {key_file}: {e}"))?;
        let mut roots = rustls::RootCertStore::empty();
        let cas = CertificateDer::pem_file_iter(&cfg.tls_ca_cert_file)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| {
                format!(
                    "Failed to load CA certificate(s): {}: {e}",
                    cfg.tls_ca_cert_file
                )
            })?;
        for ca in cas {
            roots
                .add(ca)
                .map_err(|e| format!("Failed to load CA certificate(s): {e}"))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("Failed to configure TLS: {e}"))?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .map_err(|e| format!("Failed to configure TLS: client certificate and key: {e}"))?;
        Ok(PeerTls {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }
}

/// Token of the handshake threads' waker in `Inbound::poll`; connections count up from 0.
const HANDED: mio::Token = mio::Token(usize::MAX);
/// Bytes read from one connection in one `receive` before the loop goes on (a snapshot can
/// be hundreds of MB: the rest is read on the next turns, which the waker makes come at once).
const RECV_BUDGET: usize = 4 << 20;
const RECV_CHUNK: usize = 64 << 10;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these locks; if something did, the data is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn report(inbox: &Inbox, id: u64) {
    // The executor is gone only at shutdown, when nothing needs to hear it.
    let _ = inbox.send(Msg::PeerUnreachable(id));
}

/// What a node proves and compares in the handshake: the shared secret, and the slot table its
/// logs were created with.
pub struct PeerKey {
    secret: Box<[u8]>,
    /// SHA-256 of the table as `cluster-slot-groups` spells it.
    table: [u8; 32],
    /// The table is one group owning every slot (what a node of the wire's first version has).
    one_group: bool,
}

impl PeerKey {
    /// `table` as `cluster-slot-groups` spells it; `one_group` when it is one group holding
    /// every slot.
    pub fn new(secret: &[u8], table: &str, one_group: bool) -> PeerKey {
        PeerKey {
            secret: secret.into(),
            table: Sha256::digest(table.as_bytes()).into(),
            one_group,
        }
    }
}

impl Peers {
    /// The transport of cluster node `me` as the configuration sets it up: the secret
    /// (`cluster-secret`, else `masterauth`; an error without one) and the listen addresses
    /// (`cluster-peer-bind`, else `bind`, on `own`'s peer port). `peers` as for `start`;
    /// `table` and `one_group` as for `PeerKey::new`.
    pub fn from_config(
        me: u64,
        config: &Config,
        own: &ClusterPeer,
        peers: &[(u64, String)],
        (table, one_group): (&str, bool),
        inbox: Inbox,
    ) -> io::Result<Peers> {
        let secret = config
            .peer_secret()
            .ok_or_else(|| io::Error::other(config.cluster_refusal().unwrap_or("no secret")))?
            .to_string();
        if secret.len() < 16 {
            tracing::warn!(
                "cluster-secret is shorter than 16 characters: anyone who sees one peer handshake \
                 can guess it offline"
            );
        }
        let binds = if config.cluster_peer_bind.is_empty() {
            &config.bind
        } else {
            &config.cluster_peer_bind
        };
        let mut listen = Vec::new();
        for b in binds {
            let (host, optional) = crate::config::bind_host(b);
            match (host, own.peer_port)
                .to_socket_addrs()
                .map(|mut a| a.next())
            {
                Ok(Some(a)) => listen.push((a, optional)),
                Ok(None) | Err(_) if optional => {
                    tracing::warn!("Could not resolve optional peer address {b}")
                }
                Ok(None) => return Err(io::Error::other(format!("cannot resolve {host}"))),
                Err(e) => return Err(io::Error::other(format!("cannot resolve {host}: {e}"))),
            }
        }
        // Redis encrypts replication links with tls-replication and its cluster bus with
        // tls-cluster; the peer port carries both kinds of traffic, so either turns TLS on.
        let tls = if config.compat_value("tls-replication") == "yes"
            || config.compat_value("tls-cluster") == "yes"
        {
            Some(PeerTls::from_config(config).map_err(io::Error::other)?)
        } else {
            None
        };
        let key = PeerKey::new(secret.as_bytes(), table, one_group);
        let p = Peers::start(me, &listen, peers, key, tls, inbox)?;
        if p.tls.is_some() {
            tracing::info!("cluster: peer connections use TLS (tls-replication yes)");
        }
        // Others dial the address cluster-peers gives: say so if nothing listens there.
        if let Ok(own_addrs) = (own.host.as_str(), own.peer_port).to_socket_addrs() {
            let own_addrs: Vec<SocketAddr> = own_addrs.collect();
            let covered = own_addrs.iter().any(|o| {
                p.local.iter().any(|l| {
                    l.port() == o.port()
                        && (l.ip() == o.ip()
                            || (l.ip().is_unspecified() && l.is_ipv4() == o.is_ipv4()))
                })
            });
            if !covered {
                tracing::warn!(
                    "cluster-peers gives this node's peer address as {}:{}, but the peer port \
                     listens on {}: other nodes may not reach it (set bind or cluster-peer-bind)",
                    own.host,
                    own.peer_port,
                    p.listening()
                );
            }
        }
        Ok(p)
    }

    /// Binds every address of `listen` (an optional one may fail, with a warning; at least one
    /// must bind) and starts one sender per peer (`peers`: id and `host:peerport`, see
    /// `addr_of`; an entry for `me` is ignored). The secret must not be empty: an empty key is
    /// one anybody can prove.
    pub fn start(
        me: u64,
        listen: &[(SocketAddr, bool)],
        peers: &[(u64, String)],
        key: PeerKey,
        tls: Option<PeerTls>,
        inbox: Inbox,
    ) -> io::Result<Peers> {
        if key.secret.is_empty() {
            return Err(io::Error::other(
                "the peer transport needs a non-empty secret",
            ));
        }
        let mut listeners = Vec::new();
        for &(addr, optional) in listen {
            match TcpListener::bind(addr) {
                Ok(l) => listeners.push(l),
                Err(e) if optional => {
                    tracing::warn!("Could not bind optional peer address {addr}: {e}")
                }
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("Could not listen for cluster peers on {addr}: {e}"),
                    ))
                }
            }
        }
        if listeners.is_empty() {
            return Err(io::Error::other(
                "no address to listen for cluster peers on",
            ));
        }
        let mut local = Vec::new();
        for l in &listeners {
            // Nonblocking so the accept loop can also wake on a timeout to see the stop flag.
            l.set_nonblocking(true)?;
            local.push(l.local_addr()?);
        }
        let key = Arc::new(key);
        let stop = Arc::new(AtomicBool::new(false));
        let conns = Arc::new(Mutex::new(Conns::default()));
        let poll = mio::Poll::new()?;
        let waker = Arc::new(mio::Waker::new(poll.registry(), HANDED)?);
        let inbound = Inbound {
            poll,
            events: mio::Events::with_capacity(64),
            waker: waker.clone(),
            conns: HashMap::new(),
            next_token: 0,
            scratch: vec![0; RECV_CHUNK],
            again: Vec::new(),
        };
        let handle = {
            let (key, stop, conns) = (key.clone(), stop.clone(), conns.clone());
            let server_tls = tls.as_ref().map(|t| t.server.clone());
            thread::Builder::new()
                .name("peer-listen".into())
                .spawn(move || run_listener(listeners, key, server_tls, waker, stop, conns))?
        };
        let mut p = Peers {
            me,
            groups: vec![GroupId::HOME],
            local,
            key,
            inbox,
            cap: DEFAULT_QUEUE_CAP,
            links: HashMap::new(),
            stop,
            listener: Some(handle),
            conns,
            flush_buf: Default::default(),
            inbound,
            tls,
        };
        for (id, addr) in peers {
            if *id != me && !p.links.contains_key(id) {
                p.add_link(*id, addr.clone())?;
            }
        }
        Ok(p)
    }

    /// The first address actually bound (the port filled in when it was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local[0]
    }

    /// Every address the peer port listens on, for the log.
    pub fn listening(&self) -> String {
        let all: Vec<String> = self.local.iter().map(|a| a.to_string()).collect();
        all.join(" ")
    }

    /// The descriptor the executor watches in its epoll: readable whenever a peer connection
    /// has bytes (or a new one was authenticated), then `receive` reads them.
    pub fn poll_fd(&self) -> RawFd {
        self.inbound.poll.as_raw_fd()
    }

    /// Reads what the peers sent since the last call, without blocking, and hands every
    /// complete message addressed to this node to `deliver`, in each connection's order. A
    /// connection that ends, breaks the framing or sends an undecodable message is closed (its
    /// peer redials); the others go on.
    pub fn receive(&mut self, deliver: &mut dyn FnMut(GroupId, Message)) {
        let inb = &mut self.inbound;
        if let Err(e) = inb.poll.poll(&mut inb.events, Some(Duration::ZERO)) {
            if e.kind() != io::ErrorKind::Interrupted {
                tracing::warn!("cluster: epoll on the peer connections: {e}");
            }
            return;
        }
        let mut ready: Vec<usize> = std::mem::take(&mut inb.again);
        let mut adopt = false;
        for ev in inb.events.iter() {
            if ev.token() == HANDED {
                adopt = true;
            } else if !ready.contains(&ev.token().0) {
                ready.push(ev.token().0);
            }
        }
        if adopt {
            let handed = std::mem::take(&mut lock(&self.conns).handed);
            for (key, peer, sock, from, tls) in handed {
                let token = inb.next_token;
                inb.next_token += 1;
                let fd = sock.as_raw_fd();
                let registered = inb.poll.registry().register(
                    &mut mio::unix::SourceFd(&fd),
                    mio::Token(token),
                    mio::Interest::READABLE,
                );
                if let Err(e) = registered {
                    tracing::warn!("cluster: cannot watch the connection from peer {peer}: {e}");
                    let _ = sock.shutdown(Shutdown::Both);
                    lock(&self.conns).open.remove(&key);
                    continue;
                }
                // A node dials each peer over one connection at a time: an older one from the
                // same id is a connection its sender has left (the node restarted or redialed)
                // that was not yet seen closed.
                let stale: Vec<usize> = inb
                    .conns
                    .iter()
                    .filter(|(_, c)| c.peer == peer)
                    .map(|(t, _)| *t)
                    .collect();
                for t in stale {
                    if let Some(old) = inb.conns.remove(&t) {
                        tracing::info!(
                            "cluster: peer {peer} connected again (from {from}), closing its \
                             older connection from {}",
                            old.from
                        );
                        close_inbound(&inb.poll, &self.conns, old);
                    }
                }
                inb.conns.insert(
                    token,
                    InConn {
                        key,
                        peer,
                        from,
                        sock,
                        buf: Vec::new(),
                        drops: RateLimited::default(),
                        tls,
                    },
                );
                // Frames may have arrived before it was registered (edge-triggered epoll
                // reports only new ones).
                ready.push(token);
            }
        }
        for token in ready {
            let Some(c) = inb.conns.get_mut(&token) else {
                continue;
            };
            let to = Recipient {
                me: self.me,
                groups: &self.groups,
            };
            let end = read_frames(to, c, &mut inb.scratch, deliver);
            match end {
                Ok(true) => {}
                // Over the budget: the rest is read on the next turn, which the waker makes
                // come at once (nothing new may arrive to trigger the edge).
                Ok(false) => {
                    inb.again.push(token);
                    let _ = inb.waker.wake();
                }
                Err(end) => {
                    let c = inb.conns.remove(&token).expect("looked up above");
                    let (peer, from) = (c.peer, c.from);
                    close_inbound(&inb.poll, &self.conns, c);
                    match end {
                        ServeEnd::Closed => tracing::info!(
                            "cluster: peer {peer} disconnected (inbound from {from})"
                        ),
                        ServeEnd::BadHello(why) | ServeEnd::Failed(why) => tracing::info!(
                            "cluster: closed the connection from peer {peer} ({from}): {why}"
                        ),
                    }
                }
            }
        }
    }

    /// Makes `poll_fd` readable, so the loop turns again at once.
    pub fn wake_loop(&self) {
        let _ = self.inbound.waker.wake();
    }

    /// `wake_loop` for another thread (the cluster log's writer).
    pub fn loop_waker(&self) -> Box<dyn Fn() + Send> {
        let waker = self.inbound.waker.clone();
        Box::new(move || {
            let _ = waker.wake();
        })
    }

    /// The Raft groups this node runs (group 0 alone until told otherwise): a message for
    /// any other is dropped and logged.
    pub fn set_groups(&mut self, groups: &[GroupId]) {
        self.groups = groups.to_vec();
    }

    /// Bytes queued per peer before messages are dropped (`DEFAULT_QUEUE_CAP`).
    pub fn set_queue_cap(&mut self, bytes: usize) {
        self.cap = bytes;
    }

    /// Queues a message for `m.to`; never blocks (beyond a short lock shared with that peer's
    /// sender). Over the per-peer cap, while the peer is unreachable, or for a peer it has no
    /// address for, it drops the message and reports `Msg::PeerUnreachable(to)`.
    pub fn send(&self, group: GroupId, m: Message) {
        let to = m.to;
        let Some((link, _)) = self.links.get(&to) else {
            tracing::debug!("cluster: no address for peer {to}, message dropped");
            report(&self.inbox, to);
            return;
        };
        let frame = match encode(group, m) {
            Ok(f) if f.len() <= MAX_FRAME => f,
            Ok(f) => {
                tracing::warn!(
                    "cluster: a {} byte message for peer {to} is over the {MAX_FRAME} byte frame cap, dropped",
                    f.len()
                );
                report(&self.inbox, to);
                return;
            }
            Err(e) => {
                tracing::warn!("cluster: cannot encode a message for peer {to}: {e}");
                report(&self.inbox, to);
                return;
            }
        };
        let mut q = lock(&link.q);
        let over = q.bytes > 0 && q.bytes + frame.len() > self.cap;
        if q.unreachable || over || q.stop {
            if !q.reported {
                q.reported = true;
                drop(q);
                report(&self.inbox, to);
            }
            return;
        }
        q.bytes += frame.len();
        q.frames.push_back(frame);
        // An idle sender is left asleep: `flush` writes the round's frames from here.
        let idle = q.connected && !q.writing;
        drop(q);
        if !idle {
            link.cv.notify_one();
        }
    }

    /// `send` then `flush`: one message on the wire at once (the transport's own tests).
    #[cfg(test)]
    fn send_now(&self, m: Message) {
        self.send(GroupId::HOME, m);
        self.flush();
    }

    /// After a round's messages are queued: for each peer whose sender is idle, writes them
    /// from this thread in one non-blocking send (two context switches per message were a
    /// third of a node's CPU under load), and wakes the sender only for what the socket did
    /// not take. Never blocks.
    pub fn flush(&self) {
        let mut out = self.flush_buf.borrow_mut();
        for (link, _) in self.links.values() {
            let mut q = lock(&link.q);
            if q.frames.is_empty() {
                continue;
            }
            // A snapshot's data is written by the sender thread from the shared buffer: from
            // here it would be copied into `out` and, for what the socket does not take at
            // once, into `partial`, on the loop.
            if link.tls.is_some() || q.frames.iter().any(|f| !f.data.is_empty()) {
                drop(q);
                link.cv.notify_one();
                continue;
            }
            let fd = q.stream.as_ref().map(|s| s.as_raw_fd());
            let (Some(fd), true, false, true) = (fd, q.connected, q.writing, q.partial.is_empty())
            else {
                drop(q);
                link.cv.notify_one();
                continue;
            };
            // A peer that restarted has closed this connection: a send would still succeed
            // and its messages (votes among them) would vanish. The sender finds it closed,
            // keeps the frames and dials again.
            if fd_closed(fd) {
                drop(q);
                link.cv.notify_one();
                continue;
            }
            out.clear();
            for f in &q.frames {
                out.extend_from_slice(&header(f.len(), f.ty));
                out.extend_from_slice(&f.body);
            }
            // SAFETY: `fd` is the open socket `q.stream` owns, kept open by the lock we hold;
            // the buffer is valid for its length. MSG_DONTWAIT makes this one call
            // non-blocking without changing the socket the sender writes with blocking calls;
            // MSG_NOSIGNAL turns a closed peer into EPIPE, not SIGPIPE.
            let n = unsafe {
                libc::send(
                    fd,
                    out.as_ptr().cast(),
                    out.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            if n <= 0 {
                // The socket is full or broken: the sender writes them, or finds out.
                drop(q);
                link.cv.notify_one();
                continue;
            }
            let n = n as usize;
            q.frames.clear();
            q.bytes = 0;
            if n == out.len() {
                q.reported = false;
                continue;
            }
            // The rest must follow on this connection before anything else.
            q.partial = out[n..].to_vec();
            drop(q);
            link.cv.notify_one();
        }
        // A round's appends can be megabytes: they need not stay allocated.
        if out.capacity() > 4 * COALESCE {
            *out = Vec::new();
        }
    }

    /// Membership changed at run time: add or re-address (Some) or remove (None) a peer.
    pub fn set_peer(&mut self, id: u64, addr: Option<String>) {
        if id == self.me {
            return;
        }
        match addr {
            Some(addr) => {
                if let Some((link, _)) = self.links.get(&id) {
                    let mut q = lock(&link.q);
                    if q.addr != addr {
                        q.addr = addr;
                        q.redial = true;
                        if let Some(s) = &q.stream {
                            let _ = s.shutdown(Shutdown::Both);
                        }
                        drop(q);
                        link.cv.notify_all();
                    }
                } else if let Err(e) = self.add_link(id, addr) {
                    tracing::error!("cluster: cannot start the sender for peer {id}: {e}");
                }
            }
            None => {
                // Not joined: the executor must not wait for a dial in progress. The thread
                // sees `stop` and exits on its own.
                if let Some((link, _handle)) = self.links.remove(&id) {
                    stop_link(&link);
                }
            }
        }
    }

    fn add_link(&mut self, id: u64, addr: String) -> io::Result<()> {
        let link = Arc::new(Link {
            id,
            q: Mutex::new(Queue {
                frames: VecDeque::new(),
                bytes: 0,
                unreachable: false,
                reported: false,
                addr,
                redial: false,
                stop: false,
                stream: None,
                connected: false,
                writing: false,
                partial: Vec::new(),
            }),
            cv: Condvar::new(),
            tls: self.tls.as_ref().map(|t| t.client.clone()),
        });
        let handle = {
            let (me, link, key, inbox) =
                (self.me, link.clone(), self.key.clone(), self.inbox.clone());
            thread::Builder::new()
                .name(format!("peer-send-{id}"))
                .spawn(move || run_sender(me, link, key, inbox))?
        };
        self.links.insert(id, (link, handle));
        Ok(())
    }
}

/// Stops watching an authenticated inbound connection and closes it.
fn close_inbound(poll: &mio::Poll, conns: &Mutex<Conns>, c: InConn) {
    let fd = c.sock.as_raw_fd();
    let _ = poll.registry().deregister(&mut mio::unix::SourceFd(&fd));
    lock(conns).open.remove(&c.key);
    let _ = c.sock.shutdown(Shutdown::Both);
}

fn stop_link(link: &Link) {
    let mut q = lock(&link.q);
    q.stop = true;
    q.frames.clear();
    q.bytes = 0;
    if let Some(s) = &q.stream {
        let _ = s.shutdown(Shutdown::Both);
    }
    drop(q);
    link.cv.notify_all();
}

impl Drop for Peers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop at once (it also wakes on its own every 200 ms).
        let first = self.local[0];
        let wake = match first.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => {
                SocketAddr::new(Ipv4Addr::LOCALHOST.into(), first.port())
            }
            IpAddr::V6(ip) if ip.is_unspecified() => {
                SocketAddr::new(Ipv6Addr::LOCALHOST.into(), first.port())
            }
            _ => first,
        };
        let _ = TcpStream::connect_timeout(&wake, Duration::from_millis(200));
        if let Some(h) = self.listener.take() {
            let _ = h.join();
        }
        // The listener has ended, so no connection is added after this.
        let threads = {
            let mut c = lock(&self.conns);
            for s in c.open.values() {
                let _ = s.shutdown(Shutdown::Both);
            }
            std::mem::take(&mut c.threads)
        };
        for (_, (link, _)) in self.links.iter() {
            stop_link(link);
        }
        for (_, (_, h)) in self.links.drain() {
            let _ = h.join();
        }
        for h in threads {
            let _ = h.join();
        }
    }
}

// ---- HMAC ----

/// HMAC-SHA256 (RFC 2104) over the concatenation of `parts`.
fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
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

/// Compares without an early exit, so the time taken does not say how much of a MAC matched.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hello_mac(key: &[u8], nonce: &[u8], id: u64) -> [u8; 32] {
    hmac_sha256(key, &[nonce, &id.to_be_bytes()])
}

fn random_nonce() -> io::Result<[u8; NONCE_LEN]> {
    let mut n = [0u8; NONCE_LEN];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut n)?;
    Ok(n)
}

// ---- framing ----

/// A message as the frame that carries it: a snapshot with data as a SNAPSHOT frame (the data
/// shared, not copied), anything else as a RAFT frame.
fn encode(group: GroupId, mut m: Message) -> protobuf::ProtobufResult<Frame> {
    let group = group.0.to_be_bytes();
    if m.get_msg_type() != MessageType::MsgSnapshot || m.get_snapshot().data.is_empty() {
        let mut body = Vec::with_capacity(64);
        body.extend_from_slice(&group);
        m.write_to_vec(&mut body)?;
        return Ok(Frame::raft(body));
    }
    let data = m.mut_snapshot().take_data();
    let head_len = m.compute_size() as usize;
    let mut body = Vec::with_capacity(GROUP_LEN + 4 + head_len);
    body.extend_from_slice(&group);
    body.extend_from_slice(&(head_len as u32).to_be_bytes());
    m.write_to_vec(&mut body)?;
    Ok(Frame {
        ty: SNAPSHOT,
        body,
        data,
    })
}

fn header(len: usize, ty: u8) -> [u8; 5] {
    let l = (len as u32).to_be_bytes();
    [l[0], l[1], l[2], l[3], ty]
}

fn write_frame(mut w: impl Write, ty: u8, body: &[u8]) -> io::Result<()> {
    let mut f = Vec::with_capacity(5 + body.len());
    f.extend_from_slice(&header(body.len(), ty));
    f.extend_from_slice(body);
    w.write_all(&f)
}

/// Reads a frame header. `Ok(None)` is a clean end of stream between frames.
fn read_header(mut r: impl Read) -> io::Result<Option<(usize, u8)>> {
    let mut h = [0u8; 5];
    let mut got = 0;
    while got < h.len() {
        match r.read(&mut h[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some((
        u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize,
        h[4],
    )))
}

/// Reads one frame of exactly `len` bytes and type `ty` (handshake frames only: tiny).
fn read_exact_frame<const N: usize>(mut r: impl Read, ty: u8) -> io::Result<[u8; N]> {
    match read_header(&mut r)? {
        Some((len, t)) if len == N && t == ty => {
            let mut b = [0u8; N];
            r.read_exact(&mut b)?;
            Ok(b)
        }
        Some((len, t)) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("expected a type {ty} frame of {N} bytes, got type {t} of {len}"),
        )),
        None => Err(io::ErrorKind::UnexpectedEof.into()),
    }
}

// ---- sending ----

#[derive(PartialEq, Clone, Copy)]
enum LinkState {
    New,
    Unreachable,
    Rejected,
    OtherTable,
}

enum DialError {
    Io(io::Error),
    /// The peer closed the connection after our HELLO: it does not share our secret.
    Rejected,
    /// The peer's logs were created with another slot table.
    OtherTable,
    Stopped,
}

impl From<io::Error> for DialError {
    fn from(e: io::Error) -> Self {
        DialError::Io(e)
    }
}

enum PumpEnd {
    Stop,
    Redial,
    /// Seen closed before writing: the batch is back in the queue.
    Closed,
    /// A write failed: the batch is lost.
    Lost(io::Error),
}

fn run_sender(me: u64, link: Arc<Link>, key: Arc<PeerKey>, inbox: Inbox) {
    let id = link.id;
    let mut state = LinkState::New;
    let mut backoff = BACKOFF_MIN;
    loop {
        let addr = {
            let mut q = lock(&link.q);
            if q.stop {
                return;
            }
            q.redial = false;
            q.addr.clone()
        };
        let failure = match dial(me, &addr, &key, &link) {
            Ok(stream) => {
                tracing::info!("cluster: connected to peer {id} at {addr}");
                backoff = BACKOFF_MIN;
                {
                    let mut q = lock(&link.q);
                    q.unreachable = false;
                    q.connected = true;
                }
                let mut stream = stream;
                let end = pump(&link, &mut stream);
                {
                    let mut q = lock(&link.q);
                    q.stream = None;
                    q.connected = false;
                    q.writing = false;
                    // A frame cut short on a connection that is gone cannot be finished on
                    // the next one.
                    q.partial.clear();
                }
                match end {
                    PumpEnd::Stop => return,
                    PumpEnd::Redial => {
                        tracing::info!("cluster: peer {id} has a new address, reconnecting");
                        state = LinkState::New;
                    }
                    PumpEnd::Closed => {
                        tracing::info!("cluster: peer {id} at {addr} closed the connection");
                        state = LinkState::Unreachable;
                    }
                    PumpEnd::Lost(e) => {
                        tracing::info!("cluster: lost the connection to peer {id} at {addr}: {e}");
                        state = LinkState::Unreachable;
                        lock(&link.q).reported = true;
                        report(&inbox, id);
                    }
                }
                // Redial at once: a restarted peer is usually back already.
                continue;
            }
            Err(DialError::Stopped) => return,
            Err(f) => f,
        };
        let next = match &failure {
            DialError::Rejected => LinkState::Rejected,
            DialError::OtherTable => LinkState::OtherTable,
            _ => LinkState::Unreachable,
        };
        if next != state {
            match &failure {
                DialError::Rejected => tracing::warn!(
                    "cluster: peer {id} at {addr} refused our HELLO (is cluster-secret the same on every node?)"
                ),
                DialError::OtherTable => tracing::error!(
                    "cluster: peer {id} at {addr} was created with another slot table than this \
                     node (cluster-groups / cluster-slot-groups must be the same on every node, \
                     see <dir>/cluster/slot-groups): sending it nothing"
                ),
                DialError::Io(e) => tracing::info!("cluster: peer {id} at {addr} is unreachable: {e}"),
                DialError::Stopped => {}
            }
            state = next;
        }
        let mut q = lock(&link.q);
        q.stream = None;
        q.unreachable = true;
        let dropped = !q.frames.is_empty();
        q.frames.clear();
        q.bytes = 0;
        q.reported = dropped;
        if dropped {
            report(&inbox, id);
        }
        // A table changes only with a restart of one side (which redials at once through
        // `set_peer`): no need to knock every half second, logging on both ends each time.
        let wait = if matches!(failure, DialError::OtherTable) {
            OTHER_TABLE_RETRY
        } else {
            backoff
        };
        let (q, _) = link
            .cv
            .wait_timeout_while(q, wait, |q| !q.stop && !q.redial)
            .unwrap_or_else(|e| e.into_inner());
        if q.redial {
            backoff = BACKOFF_MIN;
        } else {
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }
}

/// A dialed connection: plain, or a TLS session over the socket.
enum PeerStream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<ClientConnection, TcpStream>>),
}

impl PeerStream {
    fn raw(&self) -> &TcpStream {
        match self {
            PeerStream::Plain(s) => s,
            PeerStream::Tls(t) => &t.sock,
        }
    }
}

impl Read for PeerStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            PeerStream::Plain(s) => s.read(buf),
            PeerStream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for PeerStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            PeerStream::Plain(s) => s.write(buf),
            PeerStream::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            PeerStream::Plain(s) => s.flush(),
            PeerStream::Tls(t) => t.flush(),
        }
    }
}

/// The host part of `host:port` (brackets of an IPv6 literal removed), as a TLS server name.
fn server_name(addr: &str) -> io::Result<rustls::pki_types::ServerName<'static>> {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}")))
}

fn dial(me: u64, addr: &str, key: &PeerKey, link: &Link) -> Result<PeerStream, DialError> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the address resolves to nothing");
    let mut stream = None;
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, DIAL_TIMEOUT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = e,
        }
    }
    let s = stream.ok_or(last)?;
    {
        let mut q = lock(&link.q);
        if q.stop {
            return Err(DialError::Stopped);
        }
        q.stream = Some(s.try_clone()?);
    }
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    s.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let mut s = match &link.tls {
        Some(cfg) => {
            let conn =
                ClientConnection::new(cfg.clone(), server_name(addr)?).map_err(io::Error::other)?;
            PeerStream::Tls(Box::new(rustls::StreamOwned::new(conn, s)))
        }
        None => PeerStream::Plain(s),
    };
    let nonce: [u8; NONCE_LEN] = read_exact_frame(&mut s, NONCE)?;
    let mut hello = [0u8; HELLO_LEN];
    hello[..8].copy_from_slice(&me.to_be_bytes());
    hello[8..].copy_from_slice(&hello_mac(&key.secret, &nonce, me));
    write_frame(&mut s, HELLO, &hello)?;
    s.flush()?;
    match read_header(&mut s) {
        Ok(Some((0, WELCOME))) if key.one_group => {}
        Ok(Some((0, WELCOME))) => return Err(DialError::OtherTable),
        Ok(Some((TABLE_LEN, WELCOME))) => {
            let mut table = [0u8; TABLE_LEN];
            s.read_exact(&mut table)?;
            if table != key.table {
                return Err(DialError::OtherTable);
            }
        }
        Ok(Some((len, t))) => {
            return Err(DialError::Io(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("expected WELCOME, got a type {t} frame of {len} bytes"),
            )))
        }
        Ok(None) => return Err(DialError::Rejected),
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Err(DialError::Rejected),
        Err(e) => return Err(e.into()),
    }
    s.raw().set_read_timeout(None)?;
    s.raw().set_write_timeout(Some(WRITE_TIMEOUT))?;
    Ok(s)
}

/// Whether the peer has closed (or reset) the connection. The acceptor never sends after
/// WELCOME, so anything readable means the connection is over. Checked before each batch so a
/// restarted peer's first messages are not written into the dead connection and lost silently.
fn peer_closed(s: &TcpStream) -> bool {
    fd_closed(s.as_raw_fd())
}

/// `peer_closed` on a descriptor the caller keeps open.
fn fd_closed(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd for the duration of the call and the fd stays open
    // (the caller keeps it open); a zero timeout makes it a check, not a wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents != 0
}

fn pump(link: &Link, w: &mut PeerStream) -> PumpEnd {
    let mut out: Vec<u8> = Vec::new();
    loop {
        let (partial, batch) = {
            let mut q = lock(&link.q);
            q.writing = false;
            loop {
                if q.stop {
                    return PumpEnd::Stop;
                }
                if q.redial {
                    return PumpEnd::Redial;
                }
                if !q.frames.is_empty() || !q.partial.is_empty() {
                    break;
                }
                q = link.cv.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            q.bytes = 0;
            q.writing = true;
            (
                std::mem::take(&mut q.partial),
                std::mem::take(&mut q.frames),
            )
        };
        // A frame the executor began must be finished on this connection whatever happens
        // next: the peer would otherwise read the next frame's bytes as its rest.
        if !partial.is_empty() {
            if let Err(e) = w.write_all(&partial) {
                return PumpEnd::Lost(e);
            }
        }
        if peer_closed(w.raw()) {
            let mut q = lock(&link.q);
            for f in batch.into_iter().rev() {
                q.bytes += f.len();
                q.frames.push_front(f);
            }
            return PumpEnd::Closed;
        }
        let r = write_batch(w, &batch, &mut out).and_then(|_| w.flush());
        if let Err(e) = r {
            return PumpEnd::Lost(e);
        }
        if out.capacity() > 4 * COALESCE {
            out = Vec::new();
        }
        lock(&link.q).reported = false;
    }
}

/// Writes frames, coalescing small ones so a batch leaves in as few writes as possible; a big
/// body, and a snapshot's data, is written from its own buffer.
fn write_batch(w: &mut impl Write, batch: &VecDeque<Frame>, out: &mut Vec<u8>) -> io::Result<()> {
    out.clear();
    for f in batch {
        if !out.is_empty() && out.len() + 5 + f.len() > COALESCE {
            w.write_all(out)?;
            out.clear();
        }
        out.extend_from_slice(&header(f.len(), f.ty));
        if f.body.len() >= COALESCE {
            w.write_all(out)?;
            out.clear();
            w.write_all(&f.body)?;
        } else {
            out.extend_from_slice(&f.body);
        }
        if !f.data.is_empty() {
            w.write_all(out)?;
            out.clear();
            w.write_all(&f.data)?;
        }
    }
    if !out.is_empty() {
        w.write_all(out)?;
    }
    Ok(())
}

// ---- receiving ----

fn run_listener(
    listeners: Vec<TcpListener>,
    key: Arc<PeerKey>,
    tls: Option<Arc<rustls::ServerConfig>>,
    waker: Arc<mio::Waker>,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<Conns>>,
) {
    let mut refused = RateLimited::default();
    while !stop.load(Ordering::SeqCst) {
        cut_late_handshakes(&conns);
        let mut accepted = None;
        for l in &listeners {
            match l.accept() {
                Ok(x) => {
                    accepted = Some(x);
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors and the like: retrying at once would spin.
                    tracing::warn!("cluster: accept on the peer port failed: {e}");
                    thread::sleep(Duration::from_millis(100));
                }
            }
        }
        let Some((s, from)) = accepted else {
            wait_readable(&listeners, 200);
            continue;
        };
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let mut c = lock(&conns);
        c.threads.retain(|h| !h.is_finished());
        let source = canonical_ip(from.ip());
        let mut evicted = 0;
        while c.pending.iter().filter(|p| p.1 == source).count() >= MAX_PENDING_PER_SOURCE {
            evict_oldest(&mut c, Some(source));
            evicted += 1;
        }
        while c.pending.len() >= MAX_PENDING {
            evict_oldest(&mut c, None);
            evicted += 1;
        }
        if evicted > 0 {
            refused.note(evicted, |n| {
                tracing::warn!(
                    "cluster: too many unauthenticated peer connections (from {source} and \
                     others): cut {n} of them that had not finished their handshake"
                )
            });
        }
        let Ok(clone) = s.try_clone() else { continue };
        let conn = c.next;
        c.next += 1;
        let (key, tls, waker, conns2) = (key.clone(), tls.clone(), waker.clone(), conns.clone());
        let spawned =
            thread::Builder::new()
                .name("peer-hello".into())
                .spawn(move || match handshake(&s, from, &key, tls) {
                    Some((id, session)) => {
                        let mut c = lock(&conns2);
                        // Cut while its HELLO was checked: it is not handed over.
                        if let Some(at) = c.pending.iter().position(|p| p.0 == conn) {
                            c.pending.remove(at);
                            c.handed.push((conn, id, s, from, session));
                            drop(c);
                            // The executor is gone only at shutdown, when nothing needs it.
                            let _ = waker.wake();
                        } else {
                            c.open.remove(&conn);
                        }
                    }
                    None => {
                        let mut c = lock(&conns2);
                        c.open.remove(&conn);
                        c.pending.retain(|p| p.0 != conn);
                    }
                });
        match spawned {
            Ok(h) => {
                c.open.insert(conn, clone);
                c.pending
                    .push_back((conn, source, std::time::Instant::now()));
                c.threads.push(h);
            }
            Err(e) => tracing::warn!("cluster: cannot start a handshake for {from}: {e}"),
        }
    }
}

/// The address a budget is kept for: an IPv4-mapped IPv6 address counts as its IPv4 address.
fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Cuts the oldest connection still in its handshake (from `source` when given): its thread's
/// next read fails and it ends.
fn evict_oldest(c: &mut Conns, source: Option<IpAddr>) {
    let at = c
        .pending
        .iter()
        .position(|p| source.is_none_or(|s| p.1 == s));
    if let Some((key, _, _)) = at.and_then(|at| c.pending.remove(at)) {
        if let Some(s) = c.open.remove(&key) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Cuts the handshakes that have run past `ACCEPT_HANDSHAKE_DEADLINE`.
fn cut_late_handshakes(conns: &Mutex<Conns>) {
    let mut c = lock(conns);
    let now = std::time::Instant::now();
    while c
        .pending
        .front()
        .is_some_and(|p| now.duration_since(p.2) >= ACCEPT_HANDSHAKE_DEADLINE)
    {
        evict_oldest(&mut c, None);
    }
}

/// A warning that may repeat often, logged at most once per `DROP_LOG_EVERY` with the count
/// of occurrences since the last one.
#[derive(Default)]
struct RateLimited {
    count: u64,
    logged_at: Option<std::time::Instant>,
}

impl RateLimited {
    fn note(&mut self, n: u64, log: impl FnOnce(u64)) {
        self.count += n;
        let now = std::time::Instant::now();
        if self
            .logged_at
            .is_none_or(|t| now.duration_since(t) >= DROP_LOG_EVERY)
        {
            log(self.count);
            self.count = 0;
            self.logged_at = Some(now);
        }
    }
}

fn wait_readable(ls: &[TcpListener], ms: i32) {
    let mut ps: Vec<libc::pollfd> = ls
        .iter()
        .map(|l| libc::pollfd {
            fd: l.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `ps` holds `ps.len()` valid pollfds for the duration of the call and the
    // listeners (borrowed) keep their fds open.
    unsafe { libc::poll(ps.as_mut_ptr(), ps.len() as libc::nfds_t, ms) };
}

enum ServeEnd {
    Closed,
    BadHello(String),
    Failed(String),
}

/// The acceptor's side of the handshake, blocking with timeouts (on its own thread). Some(peer
/// id, TLS session) once the peer proved the shared secret: the socket is then non-blocking,
/// ready for the executor to read.
fn handshake(
    s: &TcpStream,
    from: SocketAddr,
    key: &PeerKey,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> Option<(u64, Option<Box<ServerConnection>>)> {
    match handshake_tls(s, key, tls) {
        Ok(done) => {
            tracing::info!("cluster: peer {} connected (inbound)", done.0);
            Some(done)
        }
        Err(ServeEnd::Closed) => None,
        Err(ServeEnd::BadHello(why)) => {
            tracing::warn!("cluster: rejected a peer connection from {from}: {why}");
            None
        }
        Err(ServeEnd::Failed(why)) => {
            tracing::debug!("cluster: peer connection from {from} ended: {why}");
            None
        }
    }
}

fn handshake_tls(
    s: &TcpStream,
    key: &PeerKey,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> Result<(u64, Option<Box<ServerConnection>>), ServeEnd> {
    let fail = |e: io::Error| ServeEnd::Failed(e.to_string());
    // Accepted sockets can inherit the listener's nonblocking mode on some platforms.
    s.set_nonblocking(false)
        .and_then(|_| s.set_nodelay(true))
        .and_then(|_| s.set_read_timeout(Some(HANDSHAKE_TIMEOUT)))
        .and_then(|_| s.set_write_timeout(Some(HANDSHAKE_TIMEOUT)))
        .map_err(fail)?;
    let (id, session) = match tls {
        None => (handshake_inner(&mut &*s, key)?, None),
        Some(cfg) => {
            let mut conn = ServerConnection::new(cfg).map_err(|e| fail(io::Error::other(e)))?;
            let id = handshake_inner(&mut rustls::Stream::new(&mut conn, &mut &*s), key)?;
            (id, Some(Box::new(conn)))
        }
    };
    s.set_read_timeout(None)
        .and_then(|_| s.set_write_timeout(None))
        .and_then(|_| s.set_nonblocking(true))
        .map_err(fail)?;
    Ok((id, session))
}

/// NONCE, HELLO, WELCOME over `rw` (the socket, or a TLS session over it).
fn handshake_inner(rw: &mut (impl Read + Write), key: &PeerKey) -> Result<u64, ServeEnd> {
    let fail = |e: io::Error| ServeEnd::Failed(e.to_string());
    let nonce = random_nonce().map_err(|e| ServeEnd::Failed(format!("no random nonce: {e}")))?;
    write_frame(&mut *rw, NONCE, &nonce)
        .and_then(|_| rw.flush())
        .map_err(fail)?;
    // The length is checked before anything is read into memory: only a 40-byte HELLO is valid.
    let hello: [u8; HELLO_LEN] = match read_header(&mut *rw) {
        Ok(Some((HELLO_LEN, HELLO))) => {
            let mut b = [0u8; HELLO_LEN];
            rw.read_exact(&mut b).map_err(fail)?;
            b
        }
        Ok(Some((len, t))) => {
            return Err(ServeEnd::BadHello(format!(
                "expected HELLO, got a type {t} frame of {len} bytes"
            )))
        }
        Ok(None) => return Err(ServeEnd::Closed),
        Err(e) => return Err(fail(e)),
    };
    let mut idb = [0u8; 8];
    idb.copy_from_slice(&hello[..8]);
    let id = u64::from_be_bytes(idb);
    if !ct_eq(&hello[8..], &hello_mac(&key.secret, &nonce, id)) {
        return Err(ServeEnd::BadHello(format!(
            "node {id} did not prove the shared secret (is cluster-secret the same on every node?)"
        )));
    }
    // Only the header of the HELLO was read above, never past it: whatever RAFT frames follow
    // WELCOME stay in the socket (or, with TLS, in the session) for the executor.
    // A one-group node welcomes as the wire's first version did (empty), so nodes of that
    // version and this one keep talking while a one-group cluster is upgraded node by node.
    let table: &[u8] = if key.one_group { &[] } else { &key.table };
    write_frame(&mut *rw, WELCOME, table)
        .and_then(|_| rw.flush())
        .map_err(fail)?;
    Ok(id)
}

/// Reads `c` until the socket has nothing more (Ok(true)) or `RECV_BUDGET` bytes were read
/// (Ok(false): call again), delivering each complete frame. Err: the connection is over.
fn read_frames(
    to: Recipient,
    c: &mut InConn,
    scratch: &mut [u8],
    deliver: &mut dyn FnMut(GroupId, Message),
) -> Result<bool, ServeEnd> {
    if let Some(mut session) = c.tls.take() {
        let r = read_frames_tls(to, c, &mut session, scratch, deliver);
        c.tls = Some(session);
        return r;
    }
    let mut read = 0;
    let drained = loop {
        if read >= RECV_BUDGET {
            break false;
        }
        match (&c.sock).read(scratch) {
            Ok(0) => return Err(ended(c)),
            Ok(n) => {
                read += n;
                c.buf.extend_from_slice(&scratch[..n]);
                // Frames are taken as soon as they are whole, so the buffer holds at most one
                // frame and a read (a frame is grown only as its bytes arrive: a length the
                // peer never sends costs nothing).
                take_frames(to, c, deliver)?;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ServeEnd::Failed(e.to_string())),
        }
    };
    // A snapshot's frame can be megabytes: it need not stay allocated.
    if c.buf.is_empty() && c.buf.capacity() > 4 * COALESCE {
        c.buf = Vec::new();
    }
    Ok(drained)
}

/// The end of a connection the peer closed: clean between frames, a failure inside one.
fn ended(c: &InConn) -> ServeEnd {
    if c.buf.is_empty() {
        ServeEnd::Closed
    } else {
        ServeEnd::Failed("connection closed inside a frame".into())
    }
}

/// `read_frames` through a TLS session: decrypted bytes the session holds first (the handshake
/// may have read past it), then records from the socket until it has none.
fn read_frames_tls(
    to: Recipient,
    c: &mut InConn,
    session: &mut ServerConnection,
    scratch: &mut [u8],
    deliver: &mut dyn FnMut(GroupId, Message),
) -> Result<bool, ServeEnd> {
    let mut read = 0;
    loop {
        loop {
            match session.reader().read(scratch) {
                // close_notify: the peer ended the session.
                Ok(0) => return Err(ended(c)),
                Ok(n) => {
                    read += n;
                    c.buf.extend_from_slice(&scratch[..n]);
                    take_frames(to, c, deliver)?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(ServeEnd::Failed(e.to_string())),
            }
        }
        if read >= RECV_BUDGET {
            return Ok(false);
        }
        match session.read_tls(&mut &c.sock) {
            Ok(0) => return Err(ended(c)),
            Ok(_) => {
                if let Err(e) = session.process_new_packets() {
                    // The alert saying why, best effort.
                    let _ = session.write_tls(&mut &c.sock);
                    return Err(ServeEnd::Failed(format!("TLS: {e}")));
                }
                // Replies the protocol itself needs (a key update), best effort: the socket
                // has room for a few bytes unless the peer stopped reading entirely.
                while session.wants_write() {
                    match session.write_tls(&mut &c.sock) {
                        Ok(n) if n > 0 => {}
                        _ => break,
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ServeEnd::Failed(e.to_string())),
        }
    }
    if c.buf.is_empty() && c.buf.capacity() > 4 * COALESCE {
        c.buf = Vec::new();
    }
    Ok(true)
}

/// Who a connection's messages must be for: this node, in one of its groups.
#[derive(Clone, Copy)]
struct Recipient<'a> {
    me: u64,
    groups: &'a [GroupId],
}

/// The group id heading a body of a version 2 frame.
fn group_of(body: &[u8]) -> Option<GroupId> {
    let g = body.get(..GROUP_LEN)?;
    Some(GroupId(u32::from_be_bytes([g[0], g[1], g[2], g[3]])))
}

/// Delivers the whole frames at the front of `c.buf` and keeps the incomplete rest.
fn take_frames(
    to: Recipient,
    c: &mut InConn,
    deliver: &mut dyn FnMut(GroupId, Message),
) -> Result<(), ServeEnd> {
    let me = to.me;
    let mut at = 0;
    let result = loop {
        let rest = &c.buf[at..];
        if rest.len() < 5 {
            break Ok(());
        }
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let ty = rest[4];
        if len > MAX_FRAME {
            break Err(ServeEnd::Failed(format!(
                "a {len} byte frame is over the {MAX_FRAME} byte cap"
            )));
        }
        if ![RAFT, SNAPSHOT, RAFT_V1, SNAPSHOT_V1].contains(&ty) {
            break Err(ServeEnd::Failed(format!("unexpected frame type {ty}")));
        }
        let head = if ty == RAFT || ty == SNAPSHOT {
            GROUP_LEN
        } else {
            0
        };
        if len < head {
            break Err(ServeEnd::Failed(format!(
                "a {len} byte frame of type {ty} has no group id"
            )));
        }
        if rest.len() < 5 + len {
            // The rest of a big frame lands in one allocation sized by its header, at most
            // `MAX_FRAME`: growing it by doubling would copy it again and again, on the loop.
            // Only address space until the bytes arrive: pages are touched as they are read.
            if len > COALESCE && c.buf.capacity() - at < 5 + len {
                c.buf.drain(..at);
                at = 0;
                c.buf.reserve_exact(5 + len - c.buf.len());
            }
            break Ok(());
        }
        let group = group_of(&rest[5..5 + head]).unwrap_or(GroupId::HOME);
        let m = if ty == RAFT || ty == RAFT_V1 {
            let m = Message::parse_from_bytes(&rest[5 + head..5 + len]);
            at += 5 + len;
            match m {
                Ok(m) => m,
                Err(e) => break Err(ServeEnd::Failed(format!("undecodable RAFT frame: {e}"))),
            }
        } else {
            // The frame leaves the buffer as it is (the bytes after it are copied into a new
            // one), so the snapshot's data can be a slice of it.
            c.buf.drain(..at);
            at = 0;
            let next = c.buf.split_off(5 + len);
            let frame = Bytes::from(std::mem::replace(&mut c.buf, next));
            match snapshot_message(frame.slice(5 + head..)) {
                Ok(m) => m,
                Err(why) => break Err(ServeEnd::Failed(format!("bad SNAPSHOT frame: {why}"))),
            }
        };
        // The handshake proved who is at the other end: a message claiming another sender, or
        // meant for another node, is not believed.
        if m.from != c.peer || m.to != me {
            let (peer, from, to) = (c.peer, m.from, m.to);
            let addr = c.from;
            c.drops.note(1, |n| {
                tracing::warn!(
                    "cluster: dropped a message from {from} to {to} on the connection of peer \
                     {peer} ({addr}); {n} such dropped since the last report"
                )
            });
            continue;
        }
        // A group this node does not run (not yet created here, or already removed): raft
        // retransmits, so dropping is safe, and stepping it into another group's node is not.
        if !to.groups.contains(&group) {
            let (peer, addr, ty) = (c.peer, c.from, m.get_msg_type());
            c.drops.note(1, |n| {
                tracing::warn!(
                    "cluster: dropped a {ty:?} from peer {peer} ({addr}) for {group}, which this \
                     node does not run; {n} such dropped since the last report"
                )
            });
            continue;
        }
        deliver(group, m);
    };
    c.buf.drain(..at);
    result
}

/// The message a SNAPSHOT frame's body carries, its snapshot's data a slice of `body`.
fn snapshot_message(body: Bytes) -> Result<Message, String> {
    let head_len = match body.get(..4) {
        Some(l) => u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize,
        None => return Err("no head length".into()),
    };
    let Some(head) = body.get(4..4 + head_len) else {
        return Err(format!(
            "a {head_len} byte head in a {} byte body",
            body.len()
        ));
    };
    let mut m = Message::parse_from_bytes(head).map_err(|e| e.to_string())?;
    if m.get_msg_type() != MessageType::MsgSnapshot || !m.has_snapshot() {
        return Err(format!("a {:?} message", m.get_msg_type()));
    }
    m.mut_snapshot().data = body.slice(4 + head_len..);
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::eraftpb::MessageType;
    use std::time::Instant;
    use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

    fn msg(from: u64, to: u64, seq: u64) -> Message {
        Message {
            msg_type: MessageType::MsgHeartbeat,
            from,
            to,
            commit: seq,
            ..Default::default()
        }
    }

    /// What one node's executor would have received.
    struct Got {
        rx: UnboundedReceiver<Msg>,
        /// (from, seq) of each RAFT message, in arrival order.
        raft: Vec<(u64, u64)>,
        unreachable: Vec<u64>,
    }

    impl Got {
        /// Takes what `p` (this node's transport) received and was told.
        fn pump(&mut self, p: &mut Peers) {
            let raft = &mut self.raft;
            p.receive(&mut |_, m| raft.push((m.from, m.commit)));
            while let Ok(m) = self.rx.try_recv() {
                if let Msg::PeerUnreachable(id) = m {
                    self.unreachable.push(id);
                }
            }
        }

        /// Polls until `done` holds; false if `secs` pass first.
        fn until(&mut self, p: &mut Peers, secs: u64, mut done: impl FnMut(&Got) -> bool) -> bool {
            let deadline = Instant::now() + Duration::from_secs(secs);
            loop {
                self.pump(p);
                if done(self) {
                    return true;
                }
                if Instant::now() > deadline {
                    return false;
                }
                thread::sleep(Duration::from_millis(1));
            }
        }

        fn from(&self, id: u64) -> Vec<u64> {
            self.raft
                .iter()
                .filter(|(f, _)| *f == id)
                .map(|(_, s)| *s)
                .collect()
        }

        fn reports(&self, id: u64) -> usize {
            self.unreachable.iter().filter(|u| **u == id).count()
        }
    }

    /// The secret of a node started with `None`.
    const KEY: &[u8] = b"test-secret";
    /// The slot table of one group, as `cluster-slot-groups` spells it.
    const ONE_GROUP: &str = "0:0-16383";

    fn one_group(secret: &[u8]) -> PeerKey {
        PeerKey::new(secret, ONE_GROUP, true)
    }

    fn node_at(id: u64, listen: &str, secret: Option<&str>) -> (Peers, Got) {
        let key = one_group(secret.map_or(KEY, str::as_bytes));
        node_with(id, listen, key)
    }

    fn node_with(id: u64, listen: &str, key: PeerKey) -> (Peers, Got) {
        let (tx, rx) = unbounded_channel();
        let p = Peers::start(id, &[(listen.parse().unwrap(), false)], &[], key, None, tx).unwrap();
        let g = Got {
            rx,
            raft: Vec::new(),
            unreachable: Vec::new(),
        };
        (p, g)
    }

    fn node(id: u64, secret: Option<&str>) -> (Peers, Got) {
        node_at(id, "127.0.0.1:0", secret)
    }

    fn at(p: &Peers) -> Option<String> {
        Some(p.local_addr().to_string())
    }

    /// A port nothing listens on (bound and released).
    fn dead_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    #[test]
    fn hmac_matches_rfc4231() {
        let hex = |b: [u8; 32]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        // Test case 1, with the data split to check the parts are concatenated.
        assert_eq!(
            hex(hmac_sha256(&[0x0b; 20], &[b"Hi ", b"There"])),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        // Test case 6: a key longer than the block is hashed first.
        assert_eq!(
            hex(hmac_sha256(
                &[0xaa; 131],
                &[b"Test Using Larger Than Block-Size Key - Hash Key First"]
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
        assert_eq!(addr_of("::1", 7), "[::1]:7");
        assert_eq!(addr_of("10.0.0.1", 7), "10.0.0.1:7");
    }

    #[test]
    fn two_nodes_exchange_10000_each_way_in_order() {
        let (mut a, mut ga) = node(1, None);
        let (mut b, mut gb) = node(2, None);
        a.set_peer(2, at(&b));
        b.set_peer(1, at(&a));
        for i in 0..10_000 {
            a.send_now(msg(1, 2, i));
            b.send_now(msg(2, 1, i));
        }
        assert!(
            gb.until(&mut b, 10, |g| g.raft.len() >= 10_000),
            "b got {}",
            gb.raft.len()
        );
        assert!(
            ga.until(&mut a, 10, |g| g.raft.len() >= 10_000),
            "a got {}",
            ga.raft.len()
        );
        let want: Vec<u64> = (0..10_000).collect();
        assert_eq!(gb.from(1), want);
        assert_eq!(ga.from(2), want);
        assert!(ga.unreachable.is_empty() && gb.unreachable.is_empty());
    }

    #[test]
    fn a_message_larger_than_one_turns_budget_arrives_whole_and_in_order() {
        let (mut a, _ga) = node(1, None);
        let (mut b, _gb) = node(2, None);
        a.set_peer(2, at(&b));
        let mut big = msg(1, 2, 1);
        big.context = vec![7u8; 3 * RECV_BUDGET + 5].into();
        a.send_now(big);
        a.send_now(msg(1, 2, 2));
        // Read as the loop does, turn after turn: a turn takes at most RECV_BUDGET bytes of a
        // connection, and a frame is delivered only once whole.
        let mut got: Vec<(u64, usize)> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut turns = 0;
        while got.len() < 2 {
            assert!(Instant::now() < deadline, "got {got:?}");
            b.receive(&mut |_, m| got.push((m.commit, m.context.len())));
            turns += 1;
            thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(got, vec![(1, 3 * RECV_BUDGET + 5), (2, 0)]);
        assert!(turns > 1);
    }

    fn snapshot_msg(from: u64, to: u64, seq: u64, data: &Bytes) -> Message {
        let mut m = msg(from, to, seq);
        m.set_msg_type(MessageType::MsgSnapshot);
        m.mut_snapshot().data = data.clone();
        let meta = m.mut_snapshot().mut_metadata();
        meta.index = 7;
        meta.term = 3;
        meta.mut_conf_state().voters = vec![1, 2, 3];
        m
    }

    /// `a` (node 1) sends `b` (node 2) a heartbeat, a 40 MB snapshot, a snapshot claiming to be
    /// from node 3 and a heartbeat: `b` reads them turn by turn as the loop does and gets the
    /// heartbeats and the real snapshot, whole and in order, and not the impostor.
    fn snapshot_arrives_whole_and_in_order(a: &Peers, b: &mut Peers) {
        let data: Bytes = (0..40 << 20)
            .map(|i: u32| (i % 251) as u8)
            .collect::<Vec<_>>()
            .into();
        let started = Instant::now();
        a.send_now(msg(1, 2, 1));
        a.send_now(snapshot_msg(1, 2, 2, &data));
        a.send_now(snapshot_msg(3, 2, 3, &data));
        a.send_now(msg(1, 2, 4));
        let queued = started.elapsed();
        let mut got: Vec<Message> = Vec::new();
        let (mut turns, mut longest) = (0, Duration::ZERO);
        let deadline = Instant::now() + Duration::from_secs(60);
        while got.last().map(|m| m.commit) != Some(4) {
            assert!(Instant::now() < deadline, "got {} messages", got.len());
            let t = Instant::now();
            b.receive(&mut |_, m| got.push(m));
            longest = longest.max(t.elapsed());
            turns += 1;
            thread::sleep(Duration::from_millis(1));
        }
        // Not asserted (timings): what the sending loop and the longest receiving turn cost.
        eprintln!(
            "40 MB snapshot: queued and flushed in {queued:?}, received in {turns} turns, the \
             longest {longest:?}"
        );
        let seqs: Vec<(u64, MessageType)> = got.iter().map(|m| (m.commit, m.msg_type)).collect();
        assert_eq!(
            seqs,
            vec![
                (1, MessageType::MsgHeartbeat),
                (2, MessageType::MsgSnapshot),
                (4, MessageType::MsgHeartbeat)
            ]
        );
        let snap = got[1].get_snapshot();
        assert!(snap.data == data, "the snapshot's data differs");
        let meta = snap.get_metadata();
        assert_eq!((meta.index, meta.term), (7, 3));
        assert_eq!(meta.get_conf_state().voters, vec![1, 2, 3]);
        assert!(got[0].get_snapshot().data.is_empty() && got[2].get_snapshot().data.is_empty());
        // 40 MB through RECV_BUDGET (4 MB) a turn takes at least 10 turns; one that read
        // without a budget would take one.
        assert!(turns >= (40 << 20) / RECV_BUDGET, "{turns} turns");
    }

    #[test]
    fn a_snapshot_arrives_whole_and_in_order_with_the_messages_around_it() {
        let (mut a, _ga) = node(1, None);
        let (mut b, _gb) = node(2, None);
        a.set_peer(2, at(&b));
        snapshot_arrives_whole_and_in_order(&a, &mut b);
    }

    #[test]
    fn a_snapshot_arrives_whole_and_in_order_over_tls() {
        let (tls, dir) = test_tls("snapshot");
        let (mut a, _ga) = tls_node(1, &tls);
        let (mut b, _gb) = tls_node(2, &tls);
        a.set_peer(2, at(&b));
        snapshot_arrives_whole_and_in_order(&a, &mut b);
        drop((a, b));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_snapshot_frame_is_framed_and_read_as_sent() {
        let data = Bytes::from_static(b"state bytes");
        let f = encode(GroupId(5), snapshot_msg(1, 2, 9, &data)).unwrap();
        assert_eq!(f.ty, SNAPSHOT);
        assert_eq!(f.data, data);
        let mut wire = Vec::new();
        write_batch(&mut wire, &VecDeque::from([f]), &mut Vec::new()).unwrap();
        let len = u32::from_be_bytes([wire[0], wire[1], wire[2], wire[3]]) as usize;
        assert_eq!((len + 5, wire[4]), (wire.len(), SNAPSHOT));
        assert_eq!(group_of(&wire[5..]), Some(GroupId(5)));
        let m = snapshot_message(Bytes::from(wire[5 + GROUP_LEN..].to_vec())).unwrap();
        assert_eq!((m.commit, m.get_snapshot().data.clone()), (9, data));
        // A message without a snapshot's data stays a RAFT frame; a SNAPSHOT frame whose head
        // is not a snapshot, or is longer than the body, is refused.
        assert_eq!(encode(GroupId::HOME, msg(1, 2, 1)).unwrap().ty, RAFT);
        let mut body = vec![0, 0, 0, 2];
        body.extend_from_slice(&msg(1, 2, 1).write_to_bytes().unwrap());
        body[3] = (body.len() - 4) as u8;
        assert!(snapshot_message(Bytes::from(body)).is_err());
        assert!(snapshot_message(Bytes::from_static(&[0, 0, 1, 0, 1])).is_err());
        assert!(snapshot_message(Bytes::from_static(&[0, 0])).is_err());
    }

    #[test]
    fn three_nodes_exchange_10000_each_way_in_order() {
        let mut nodes: Vec<(Peers, Got)> = (1..=3).map(|id| node(id, Some("pw"))).collect();
        let addrs: Vec<Option<String>> = nodes.iter().map(|(p, _)| at(p)).collect();
        for (i, (p, _)) in nodes.iter_mut().enumerate() {
            for (j, a) in addrs.iter().enumerate() {
                p.set_peer(j as u64 + 1, a.clone());
            }
            assert!(!p.links.contains_key(&(i as u64 + 1)), "no link to itself");
        }
        for s in 0..10_000 {
            for from in 1..=3u64 {
                for to in (1..=3u64).filter(|t| *t != from) {
                    nodes[from as usize - 1].0.send_now(msg(from, to, s));
                }
            }
        }
        let want: Vec<u64> = (0..10_000).collect();
        for (i, (p, g)) in nodes.iter_mut().enumerate() {
            let me = i as u64 + 1;
            assert!(
                g.until(p, 10, |g| g.raft.len() >= 20_000),
                "node {me} got {}",
                g.raft.len()
            );
            for from in (1..=3u64).filter(|f| *f != me) {
                assert_eq!(g.from(from), want, "node {me} from {from}");
            }
            assert!(g.unreachable.is_empty());
        }
    }

    /// Sends numbered messages from `a` (id 1) to node 2 every few ms until `g` has one, then
    /// 100 more; returns the first sequence number sent in this call.
    fn resume(a: &Peers, b: &mut Peers, g: &mut Got, mut seq: u64) -> u64 {
        let first = seq;
        let deadline = Instant::now() + Duration::from_secs(10);
        while g.raft.is_empty() {
            assert!(
                Instant::now() < deadline,
                "nothing arrived after the peer came back"
            );
            a.send_now(msg(1, 2, seq));
            seq += 1;
            g.until(b, 0, |g| !g.raft.is_empty());
            thread::sleep(Duration::from_millis(5));
        }
        let end = seq + 100;
        for s in seq..end {
            a.send_now(msg(1, 2, s));
        }
        assert!(g.until(b, 10, |g| g.raft.last().map(|r| r.1) == Some(end - 1)));
        // Whatever arrived is consecutive and in order, and includes everything after the
        // first arrival.
        let got = g.from(1);
        let start = got[0];
        assert_eq!(got, (start..end).collect::<Vec<_>>());
        first
    }

    #[test]
    fn late_peer_gets_messages_after_redial() {
        let port = dead_port();
        let (mut a, mut ga) = node(1, None);
        a.set_peer(2, Some(format!("127.0.0.1:{port}")));
        for i in 0..10 {
            a.send_now(msg(1, 2, i));
        }
        assert!(
            ga.until(&mut a, 5, |g| g.reports(2) > 0),
            "no PeerUnreachable"
        );
        let (mut b, mut gb) = node_at(2, &format!("127.0.0.1:{port}"), None);
        let first = resume(&a, &mut b, &mut gb, 10);
        assert_eq!(first, 10);
        assert!(
            gb.raft[0].1 >= 10,
            "a message sent before the peer listened arrived"
        );
        ga.pump(&mut a);
        assert!(
            ga.reports(2) < 10,
            "reported per message: {}",
            ga.reports(2)
        );
    }

    #[test]
    fn restarted_peer_receives_later_messages() {
        let (mut a, mut ga) = node(1, None);
        let (mut b, mut gb) = node(2, None);
        let addr = b.local_addr().to_string();
        a.set_peer(2, Some(addr.clone()));
        for i in 0..100 {
            a.send_now(msg(1, 2, i));
        }
        assert!(gb.until(&mut b, 5, |g| g.raft.len() == 100));
        gb.pump(&mut b);
        drop(b);
        let (mut b2, mut gb2) = node_at(2, &addr, None);
        resume(&a, &mut b2, &mut gb2, 100);
        ga.pump(&mut a);
        assert_eq!(
            gb.raft.len(),
            100,
            "the old node got nothing after it stopped"
        );
    }

    #[test]
    fn wrong_secret_delivers_nothing() {
        let (mut a, mut ga) = node(1, Some("right"));
        let (mut b, mut gb) = node(2, Some("wrong"));
        let (mut c, mut gc) = node(3, Some("right"));
        let (mut d, mut gd) = node(4, None);
        a.set_peer(2, at(&b));
        a.set_peer(3, at(&c));
        a.set_peer(4, at(&d));
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seq = 0;
        while !(gc.raft.len() >= 20 && ga.reports(2) > 0 && ga.reports(4) > 0) {
            assert!(Instant::now() < deadline, "c got {}", gc.raft.len());
            for to in 2..=4 {
                a.send_now(msg(1, to, seq));
            }
            seq += 1;
            gc.until(&mut c, 0, |_| true);
            ga.until(&mut a, 0, |_| true);
            thread::sleep(Duration::from_millis(5));
        }
        gb.pump(&mut b);
        gd.pump(&mut d);
        assert!(gb.raft.is_empty() && gd.raft.is_empty());
        assert_eq!(ga.reports(3), 0);
    }

    #[test]
    fn a_peer_created_with_another_slot_table_is_sent_nothing() {
        const THREE: &str = "0:0-5460 1:5461-10922 2:10923-16383";
        let three = || PeerKey::new(KEY, THREE, false);
        let (mut a, mut ga) = node_with(1, "127.0.0.1:0", three());
        // The same table; one group; another split of the slots into three groups.
        let (mut b, mut gb) = node_with(2, "127.0.0.1:0", three());
        let (mut c, mut gc) = node(3, None);
        let other = PeerKey::new(KEY, "0:0-5000 1:5001-10922 2:10923-16383", false);
        let (mut d, mut gd) = node_with(4, "127.0.0.1:0", other);
        a.set_peer(2, at(&b));
        a.set_peer(3, at(&c));
        a.set_peer(4, at(&d));
        // And the other way: the one-group node dials the three-group one.
        c.set_peer(1, at(&a));
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seq = 0;
        while !(gb.raft.len() >= 20 && ga.reports(3) > 0 && ga.reports(4) > 0) {
            assert!(Instant::now() < deadline, "b got {}", gb.raft.len());
            for to in 2..=4 {
                a.send_now(msg(1, to, seq));
            }
            c.send_now(msg(3, 1, seq));
            seq += 1;
            gb.until(&mut b, 0, |_| true);
            ga.until(&mut a, 0, |_| true);
            thread::sleep(Duration::from_millis(5));
        }
        gc.pump(&mut c);
        gd.pump(&mut d);
        assert!(gc.raft.is_empty() && gd.raft.is_empty());
        assert!(
            ga.from(3).is_empty(),
            "a took messages from a one-group peer"
        );
        assert_eq!(ga.reports(2), 0);
    }

    /// An acceptor of the wire's first version (its WELCOME is empty), serving one connection:
    /// true if the dialer sent anything after the WELCOME.
    fn first_version_acceptor() -> (String, thread::JoinHandle<bool>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        l.set_nonblocking(true).unwrap();
        let served = thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut s = loop {
                match l.accept() {
                    Ok((s, _)) => break s,
                    Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                    Err(e) => panic!("no dialer within 10 s: {e}"),
                }
            };
            s.set_nonblocking(false).unwrap();
            write_frame(&mut s, NONCE, &[0u8; NONCE_LEN]).unwrap();
            let _: [u8; HELLO_LEN] = read_exact_frame(&mut s, HELLO).unwrap();
            write_frame(&mut s, WELCOME, &[]).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 64];
            matches!(s.read(&mut buf), Ok(n) if n > 0)
        });
        (addr, served)
    }

    #[test]
    fn an_empty_welcome_is_the_one_group_table() {
        let (addr, served) = first_version_acceptor();
        let (mut one, _g) = node(1, None);
        one.set_peer(9, Some(addr));
        one.send_now(msg(1, 9, 0));
        assert!(served.join().unwrap(), "a one-group node talks to it");

        let (addr, served) = first_version_acceptor();
        let three = PeerKey::new(KEY, "0:0-8191 1:8192-16383", false);
        let (mut two, _g) = node_with(2, "127.0.0.1:0", three);
        two.set_peer(9, Some(addr));
        two.send_now(msg(2, 9, 0));
        assert!(!served.join().unwrap(), "a node of two groups sent to it");
        assert!(!lock(&two.links[&9].0.q).connected);
    }

    /// A raw connection to `to` that has passed the handshake as node `id`.
    fn raw_peer(to: SocketAddr, id: u64, key: &[u8]) -> TcpStream {
        let mut s = TcpStream::connect(to).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let nonce: [u8; NONCE_LEN] = read_exact_frame(&mut s, NONCE).unwrap();
        let mut hello = id.to_be_bytes().to_vec();
        hello.extend_from_slice(&hello_mac(key, &nonce, id));
        write_frame(&mut s, HELLO, &hello).unwrap();
        // One group: an empty WELCOME, as the wire's first version sends.
        let w: [u8; 0] = read_exact_frame(&mut s, WELCOME).unwrap();
        assert_eq!(w.len(), 0);
        s
    }

    /// The other end closes the connection (EOF or reset) within 5 s, while `p`'s executor side
    /// (`receive`, which reads authenticated connections) keeps running.
    fn assert_closed(mut s: TcpStream, p: &mut Peers, g: &mut Got) {
        s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut buf = [0u8; 64];
        loop {
            g.pump(p);
            match s.read(&mut buf) {
                Ok(0) => return,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return,
                Err(e) if Instant::now() < deadline && is_timeout(&e) => {}
                Err(e) => panic!("connection still open: {e}"),
            }
        }
    }

    fn is_timeout(e: &io::Error) -> bool {
        matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        )
    }

    #[test]
    fn bad_frames_close_only_that_connection() {
        let (mut a, _ga) = node(1, None);
        let (mut b, mut gb) = node(2, None);
        let baddr = b.local_addr();
        a.set_peer(2, at(&b));
        let raft = |m: &Message| {
            let mut body = GroupId::HOME.0.to_be_bytes().to_vec();
            body.extend(m.write_to_bytes().unwrap());
            let mut f = header(body.len(), RAFT).to_vec();
            f.extend_from_slice(&body);
            f
        };

        // Before the handshake: garbage, then an oversized length.
        let mut s = TcpStream::connect(baddr).unwrap();
        s.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        assert_closed(s, &mut b, &mut gb);
        let mut s = TcpStream::connect(baddr).unwrap();
        s.write_all(&header(u32::MAX as usize, HELLO)).unwrap();
        assert_closed(s, &mut b, &mut gb);
        // A HELLO with a wrong MAC, and one keyed with the empty secret, each followed by a
        // message that would be delivered if the HELLO were believed.
        for key in [&b"wrong"[..], b""] {
            let mut s = TcpStream::connect(baddr).unwrap();
            let nonce: [u8; NONCE_LEN] = read_exact_frame(&mut s, NONCE).unwrap();
            let mut hello = 9u64.to_be_bytes().to_vec();
            hello.extend_from_slice(&hello_mac(key, &nonce, 9));
            write_frame(&mut s, HELLO, &hello).unwrap();
            let _ = s.write_all(&raft(&msg(9, 2, 0)));
            assert_closed(s, &mut b, &mut gb);
        }

        // After it: a length over the cap (nothing else is sent), an undecodable body, an
        // unknown frame type.
        let mut s = raw_peer(baddr, 9, KEY);
        s.write_all(&header(MAX_FRAME + 1, RAFT)).unwrap();
        assert_closed(s, &mut b, &mut gb);
        let mut s = raw_peer(baddr, 9, KEY);
        write_frame(&mut s, RAFT, &[0x10, 0x80]).unwrap();
        assert_closed(s, &mut b, &mut gb);
        let mut s = raw_peer(baddr, 9, KEY);
        write_frame(&mut s, NONCE, &[0; NONCE_LEN]).unwrap();
        assert_closed(s, &mut b, &mut gb);

        // A message for another node, or claiming another sender than the one the handshake
        // proved, is dropped; the connection goes on.
        let mut s = raw_peer(baddr, 9, KEY);
        let mut f = raft(&msg(9, 99, 1));
        f.extend(raft(&msg(1, 2, 7)));
        f.extend(raft(&msg(9, 2, 2)));
        s.write_all(&f).unwrap();
        assert!(gb.until(&mut b, 5, |g| !g.from(9).is_empty()));
        assert!(gb.from(1).is_empty(), "a spoofed sender was believed");

        // The node still serves its peers.
        for i in 0..100 {
            a.send_now(msg(1, 2, i));
        }
        assert!(gb.until(&mut b, 5, |g| g.from(1).len() == 100));
        assert_eq!(gb.from(9), vec![2]);
        assert_eq!(gb.from(1), (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn each_message_names_its_group_and_one_for_a_group_not_run_here_is_dropped() {
        let (a, _ga) = node(1, None);
        let (mut b, _gb) = node(2, None);
        b.set_groups(&[GroupId(0), GroupId(3)]);
        let mut got = Vec::new();
        let wait_for = |b: &mut Peers, n: usize, got: &mut Vec<(GroupId, u64)>| {
            let deadline = Instant::now() + Duration::from_secs(5);
            while got.len() < n && Instant::now() < deadline {
                b.receive(&mut |g, m| got.push((g, m.commit)));
                thread::sleep(Duration::from_millis(2));
            }
        };
        let framed = |ty: u8, group: Option<u32>, m: &Message| {
            let mut body = group.map(|g| g.to_be_bytes().to_vec()).unwrap_or_default();
            body.extend(m.write_to_bytes().unwrap());
            let mut f = header(body.len(), ty).to_vec();
            f.extend(body);
            f
        };
        let mut s = raw_peer(b.local_addr(), 9, KEY);
        // Group 7 is not run here: dropped (and logged), the connection goes on. A first
        // version's frame, without a group id, is group 0's.
        let mut f = framed(RAFT, Some(7), &msg(9, 2, 1));
        f.extend(framed(RAFT, Some(3), &msg(9, 2, 2)));
        f.extend(framed(RAFT_V1, None, &msg(9, 2, 3)));
        f.extend(framed(RAFT, Some(0), &msg(9, 2, 4)));
        // A snapshot for a group not run here is dropped whole; the frame after it arrives.
        let data = Bytes::from(vec![7u8; 1000]);
        let snap = encode(GroupId(7), snapshot_msg(9, 2, 5, &data)).unwrap();
        assert_eq!(snap.ty, SNAPSHOT);
        f.extend(header(snap.len(), snap.ty));
        f.extend(&snap.body);
        f.extend(&snap.data);
        f.extend(framed(RAFT, Some(3), &msg(9, 2, 6)));
        s.write_all(&f).unwrap();
        wait_for(&mut b, 4, &mut got);
        let expected = [(3, 2), (0, 3), (0, 4), (3, 6)].map(|(g, i)| (GroupId(g), i));
        assert_eq!(got, expected);
        // A frame too short to hold its group id breaks the framing: that connection closes.
        write_frame(&mut s, RAFT, &[0, 0]).unwrap();
        let mut g = Got {
            rx: unbounded_channel().1,
            raft: Vec::new(),
            unreachable: Vec::new(),
        };
        assert_closed(s, &mut b, &mut g);
        // The transport tags what it sends with the group it is given.
        let mut a = a;
        a.set_peer(2, at(&b));
        got.clear();
        a.send(GroupId(7), msg(1, 2, 7));
        a.send(GroupId(3), msg(1, 2, 8));
        a.flush();
        wait_for(&mut b, 1, &mut got);
        assert_eq!(got, vec![(GroupId(3), 8)]);
    }

    #[test]
    fn over_the_cap_drops_and_never_blocks() {
        // A peer that completes the handshake and then never reads.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let (welcomed_tx, welcomed_rx) = std::sync::mpsc::channel::<()>();
        let stuck = thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            write_frame(&mut s, NONCE, &[1; NONCE_LEN]).unwrap();
            let _: [u8; HELLO_LEN] = read_exact_frame(&mut s, HELLO).unwrap();
            write_frame(&mut s, WELCOME, &[]).unwrap();
            let _ = welcomed_tx.send(());
            let _ = done_rx.recv_timeout(Duration::from_secs(30));
        });
        let (mut a, mut ga) = node(1, None);
        let cap = 64 << 10;
        a.set_queue_cap(cap);
        a.set_peer(2, Some(addr.to_string()));
        // Connected first: otherwise the cap can be reached while the dial is still under way,
        // and this thread's accept would wait forever (seen as a hang under load).
        welcomed_rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the sender connects and completes the handshake");
        let connected = Instant::now() + Duration::from_secs(5);
        while !lock(&a.links[&2].0.q).connected {
            assert!(
                Instant::now() < connected,
                "the sender never started pumping"
            );
            thread::sleep(Duration::from_millis(1));
        }
        let mut m = msg(1, 2, 0);
        m.context = vec![b'x'; 1000].into();
        let started = Instant::now();
        let mut sent = 0;
        while ga.reports(2) == 0 {
            assert!(sent < 200_000, "the cap never applied");
            a.send_now(m.clone());
            sent += 1;
            ga.pump(&mut a);
            let q = lock(&a.links[&2].0.q);
            assert!(q.bytes <= cap + 1100, "{} bytes queued", q.bytes);
        }
        assert!(started.elapsed() < Duration::from_secs(20));
        drop(a);
        let _ = done_tx.send(());
        stuck.join().unwrap();
    }

    #[test]
    fn an_empty_secret_is_refused() {
        let (tx, _rx) = unbounded_channel();
        let listen = [("127.0.0.1:0".parse().unwrap(), false)];
        assert!(Peers::start(1, &listen, &[], one_group(b""), None, tx).is_err());
    }

    /// Whether `s` was closed by the other end within `wait`.
    fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
        s.set_read_timeout(Some(wait)).unwrap();
        let mut buf = [0u8; 64];
        let deadline = Instant::now() + wait;
        loop {
            match s.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
            if Instant::now() > deadline {
                return false;
            }
        }
    }

    #[test]
    fn idle_unauthenticated_connections_are_bounded_and_a_peer_still_connects() {
        let (mut b, mut gb) = node(2, None);
        let baddr = b.local_addr();
        let mut idle: Vec<TcpStream> = (0..20)
            .map(|_| TcpStream::connect(baddr).unwrap())
            .collect();
        // A real peer connects past them and delivers at once.
        let (mut a, _ga) = node(1, None);
        a.set_peer(2, at(&b));
        let mut seq = 0;
        let deadline = Instant::now() + Duration::from_secs(5);
        while gb.raft.is_empty() {
            assert!(Instant::now() < deadline, "the peer never got through");
            a.send_now(msg(1, 2, seq));
            seq += 1;
            gb.until(&mut b, 0, |g| !g.raft.is_empty());
            thread::sleep(Duration::from_millis(5));
        }
        // Over the per-source budget, the oldest were cut at once; the rest by the deadline.
        let early = idle
            .iter_mut()
            .filter_map(|s| closed_within(s, Duration::from_millis(10)).then_some(()))
            .count();
        assert!(early >= 20 - MAX_PENDING_PER_SOURCE, "{early} of 20 cut");
        for s in &mut idle {
            assert!(closed_within(
                s,
                ACCEPT_HANDSHAKE_DEADLINE + Duration::from_secs(3)
            ));
        }
        assert!(lock(&b.conns).pending.is_empty());
    }

    #[test]
    fn a_peer_connecting_again_replaces_its_older_connection() {
        let (mut b, mut gb) = node(2, None);
        let baddr = b.local_addr();
        let frame = |seq| {
            let mut body = GroupId::HOME.0.to_be_bytes().to_vec();
            body.extend(msg(9, 2, seq).write_to_bytes().unwrap());
            let mut f = header(body.len(), RAFT).to_vec();
            f.extend_from_slice(&body);
            f
        };
        let mut first = raw_peer(baddr, 9, KEY);
        first.write_all(&frame(1)).unwrap();
        assert!(gb.until(&mut b, 5, |g| !g.raft.is_empty()));
        let mut second = raw_peer(baddr, 9, KEY);
        second.write_all(&frame(2)).unwrap();
        assert!(gb.until(&mut b, 5, |g| g.raft.len() == 2));
        assert!(closed_within(&mut first, Duration::from_secs(5)));
        assert_eq!(b.inbound.conns.len(), 1);
    }

    /// A CA and one node certificate (server and client use, for 127.0.0.1) in a fresh
    /// directory, and the TLS settings every node of a test cluster would share.
    fn test_tls(tag: &str) -> (PeerTls, std::path::PathBuf) {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        };
        let dir =
            std::env::temp_dir().join(format!("deadbolt-peer-tls-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
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
        std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
        std::fs::write(dir.join("node.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("node.key"), key.serialize_pem()).unwrap();
        let cfg = Config {
            tls_ca_cert_file: dir.join("ca.pem").display().to_string(),
            tls_cert_file: dir.join("node.pem").display().to_string(),
            tls_key_file: dir.join("node.key").display().to_string(),
            ..Default::default()
        };
        (PeerTls::from_config(&cfg).unwrap(), dir)
    }

    fn tls_node(id: u64, tls: &PeerTls) -> (Peers, Got) {
        let (tx, rx) = unbounded_channel();
        let listen = [("127.0.0.1:0".parse().unwrap(), false)];
        let p = Peers::start(id, &listen, &[], one_group(KEY), Some(tls.clone()), tx).unwrap();
        let g = Got {
            rx,
            raft: Vec::new(),
            unreachable: Vec::new(),
        };
        (p, g)
    }

    #[test]
    fn tls_peers_exchange_in_order_and_plain_text_is_refused() {
        let (tls, dir) = test_tls("exchange");
        let (mut a, mut ga) = tls_node(1, &tls);
        let (mut b, mut gb) = tls_node(2, &tls);
        a.set_peer(2, at(&b));
        b.set_peer(1, at(&a));
        let mut big = msg(1, 2, 10_000);
        big.context = vec![7u8; 3 * RECV_BUDGET + 5].into();
        for i in 0..10_000 {
            a.send_now(msg(1, 2, i));
            b.send_now(msg(2, 1, i));
        }
        a.send_now(big);
        assert!(
            gb.until(&mut b, 20, |g| g.raft.len() > 10_000),
            "b got {}",
            gb.raft.len()
        );
        assert!(ga.until(&mut a, 20, |g| g.raft.len() >= 10_000));
        assert_eq!(gb.from(1), (0..=10_000).collect::<Vec<_>>());
        assert_eq!(ga.from(2), (0..10_000).collect::<Vec<_>>());
        // A plain-text peer (right secret, no TLS) gets nowhere, either way round.
        let (mut p, mut gp) = node(3, None);
        p.set_peer(2, at(&b));
        b.set_peer(3, at(&p));
        for i in 0..50 {
            p.send_now(msg(3, 2, i));
            b.send_now(msg(2, 3, i));
            thread::sleep(Duration::from_millis(5));
        }
        gb.pump(&mut b);
        gp.pump(&mut p);
        assert!(gb.from(3).is_empty() && gp.raft.is_empty());
        drop((a, b, p));
        let _ = std::fs::remove_dir_all(dir);
    }
}
