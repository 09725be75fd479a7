//! The executor's own event loop, as Redis's `ae`: the thread that owns the data accepts,
//! reads, decodes, runs and writes, so a request costs no hand-off between threads. (Tokio
//! connection tasks handing batches to this thread cost ~0.6 context switches and ~40 % more
//! server CPU per request with 50 clients; see README "Performance".)
//!
//! Plain TCP and TLS connections are the same `Conn`, served by the same code; only its
//! `Transport` differs: bytes go straight to the socket, or through a rustls session over that
//! same non-blocking socket (handshake included, bounded by `tls::HANDSHAKE_TIMEOUT`). Query
//! buffer limit, protocol errors, idle `timeout`, busy-script answers, pub/sub output,
//! pipelining and closing are written once.
//!
//! Output: the executor appends every reply and push to the connection's `ConnOut`
//! (machine/output.rs), which lists the connection as pending; the loop writes the pending
//! connections at the end of the round (`flush`), after the log reached the file, as Redis
//! writes its clients in `beforeSleep`, so a client is woken once per round rather than once
//! per reply. What the socket does not take stays in the chain and leaves when it turns
//! writable. Held output (`exec::hold`) stays behind its connection's gate until released.
//!
//! While a script is busy the Lua hook calls `Lent::while_busy`: the loop, lent to the executor
//! for the time it runs commands (`Net::lend`), reads the other connections and answers them
//! (-BUSY, SCRIPT KILL, SHUTDOWN NOSAVE) as Redis's `processEventsWhileBlocked`.

use super::io_threads::{Pool, Worker};
use super::listen::ListenSet;
use super::{Msg, Server};
use crate::machine::client::{auth_may_change, Client, ClientShared};
use crate::machine::output::{ConnOut, PendingList, MAX_IOV};
use crate::machine::shared::{bump, Local};
use crate::machine::Shared;
use crate::protocol::{DecodeLimits, Decoder, ProtocolError};
use bytes::{Bytes, BytesMut};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{self, BufRead, IoSlice, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAKER: Token = Token(usize::MAX);
/// A descriptor another part of the executor reads itself (`watch`): its events only wake the
/// loop. Far above any client id (a counter) and below the listeners' tokens.
const WATCHED: Token = Token(usize::MAX / 2);
/// Room kept free in a read buffer before a read (Redis reads 16 KB per event).
const READ_CHUNK: usize = 16 * 1024;
/// Bytes read from one connection in one turn before the others get theirs: 16 KB, as Redis
/// reads per event (PROTO_IOBUF_LEN), ~180 lock writes. A PING beside a bulk loader of 2 M lock
/// keys waited up to 15 ms with 256 KB, 7-9 ms with 64 KB, and 5-7.5 ms with 16 KB (p99.9 3.6-4.1
/// ms against Redis's 5.5-7.5 in the same runs; bench/run growth). Pipelining clients send far
/// less per turn.
const READ_BUDGET: usize = 16 * 1024;
/// Bytes of requests one batch runs at most. A connection reads on while its batch waits (for
/// an fsync, or in a cluster for the log to commit), so a pipelining client's next batch
/// would be everything that arrived meanwhile: a bulk loader through one connection built
/// batches of hundreds of thousands of commands, each holding the loop (and a cluster
/// leader's heartbeats) for seconds, until the followers elected another leader.
const MAX_BATCH_BYTES: usize = 256 * 1024;

/// Listeners take the tokens just below the waker's; clients use their id.
fn listener_token(i: usize) -> Token {
    Token(usize::MAX - 1 - i)
}

fn listener_index(t: usize, listeners: usize) -> Option<usize> {
    (usize::MAX - 1).checked_sub(t).filter(|i| *i < listeners)
}

/// What the loop listens on.
pub struct Listeners {
    pub plain: Vec<TcpListener>,
    /// `tls-port`: its sockets and the rustls configuration their connections use.
    pub tls: Option<(Arc<rustls::ServerConfig>, Vec<TcpListener>)>,
}

/// How a connection's bytes travel: straight through the socket, or through a rustls session
/// over it. Everything above `read`/`write` is the same for both.
enum Transport {
    Tcp,
    Tls(Box<rustls::ServerConnection>),
}

impl Transport {
    /// Reads what the peer sent into `buf`: Ok(0) at its end, WouldBlock when nothing is there.
    /// TLS: as many records as it takes to give some plaintext (the handshake moves on here).
    /// `max` bounds a plain read (a TLS read gives one record's plaintext, at most 16 KB).
    fn read(&mut self, sock: &TcpStream, buf: &mut BytesMut, max: usize) -> io::Result<usize> {
        let tls = match self {
            Transport::Tcp => return read_into(sock, buf, max),
            Transport::Tls(tls) => tls,
        };
        let mut eof = false;
        loop {
            let mut reader = tls.reader();
            match reader.fill_buf() {
                Ok([]) => return Ok(0), // close_notify
                Ok(chunk) => {
                    let n = chunk.len();
                    buf.extend_from_slice(chunk);
                    reader.consume(n);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && eof => return Ok(0),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            // Ok(0): the TCP stream ended; rustls then reports how (close_notify or not).
            eof = tls.read_tls(&mut &*sock)? == 0;
            if let Err(e) = tls.process_new_packets() {
                // The alert rustls queued for the peer leaves when the connection closes.
                tracing::debug!("TLS error: {e}");
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        }
    }

    /// Writes as much of `data` as the transport takes now; 0 when it would block.
    fn write(&mut self, sock: &TcpStream, data: &[u8]) -> io::Result<usize> {
        let tls = match self {
            Transport::Tcp => return write_some(sock, data),
            Transport::Tls(tls) => tls,
        };
        let mut done = 0;
        loop {
            // Records made earlier leave first; plaintext is taken only while they all left,
            // so what rustls holds stays within its buffer limit.
            flush_tls(tls, sock)?;
            if done == data.len() || tls.wants_write() {
                return Ok(done);
            }
            match tls.writer().write(&data[done..])? {
                0 => return Ok(done),
                n => done += n,
            }
        }
    }

    /// Writes as much of `iov` as the transport takes now (one `writev` for plain TCP); 0 when
    /// it would block.
    fn write_vectored(&mut self, sock: &TcpStream, iov: &[IoSlice<'_>]) -> io::Result<usize> {
        if let Transport::Tcp = self {
            loop {
                return match (&*sock).write_vectored(iov) {
                    Ok(0) => Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => Err(e),
                };
            }
        }
        let mut done = 0;
        for s in iov {
            let n = self.write(sock, s)?;
            done += n;
            if n < s.len() {
                break;
            }
        }
        Ok(done)
    }

    /// TLS records made and not yet written (handshake messages, alerts, encrypted output).
    fn pending(&self) -> bool {
        match self {
            Transport::Tcp => false,
            Transport::Tls(tls) => tls.wants_write(),
        }
    }

    fn flush(&mut self, sock: &TcpStream) -> io::Result<()> {
        match self {
            Transport::Tcp => Ok(()),
            Transport::Tls(tls) => flush_tls(tls, sock),
        }
    }

    fn handshaking(&self) -> bool {
        match self {
            Transport::Tcp => false,
            Transport::Tls(tls) => tls.is_handshaking(),
        }
    }

    /// Best effort before the socket is shut: TLS sends the alert a failed session queued, or
    /// close_notify; never waits for a peer that does not read.
    fn close(&mut self, sock: &TcpStream, failed: bool) {
        if let Transport::Tls(tls) = self {
            if !failed && !tls.is_handshaking() {
                tls.send_close_notify();
            }
            let _ = flush_tls(tls, sock);
        }
    }
}

impl Conn {
    /// Lists the connection for the next pass, once.
    fn queue(&mut self, ready: &mut Vec<u64>, id: u64) {
        if !self.queued {
            self.queued = true;
            ready.push(id);
        }
    }
}

/// Writes the session's records until there are none or the socket is full.
fn flush_tls(tls: &mut rustls::ServerConnection, sock: &TcpStream) -> io::Result<()> {
    while tls.wants_write() {
        match tls.write_tls(&mut &*sock) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

struct Conn {
    sock: TcpStream,
    io: Transport,
    client: Rc<ClientShared>,
    /// Its output, shared with the executor's `Client`.
    out: Rc<ConnOut>,
    addr: SocketAddr,
    laddr: SocketAddr,
    /// Counted in `connected_clients` and known to the executor. A TLS connection is admitted
    /// (maxclients, protected mode) once its handshake is done, so its refusal is readable.
    admitted: bool,
    /// TLS: the handshake must be done by then.
    handshake_deadline: Option<Instant>,
    /// A partial request (or what arrived while a batch was in flight); empty otherwise, and
    /// then it holds no memory: reads go to the loop's shared buffer.
    rbuf: BytesMut,
    decoder: Decoder,
    /// A batch is with the executor (running, blocked, paused or waiting for the log's fsync):
    /// the next one waits, as the replies must come in order.
    in_flight: bool,
    /// The socket may hold more than the last read took.
    readable: bool,
    /// The peer shut its side (epoll said so): read until EOF, as a short read does not mean
    /// the end of the data was seen and no further edge will come.
    peer_closed: bool,
    eof: bool,
    /// Write what is queued, then close.
    closing: bool,
    /// The transport failed (a write error, a TLS error): close without writing more.
    broken: bool,
    /// Registered for WRITABLE (a write would block).
    want_write: bool,
    /// Listed in `Net::ready` (or in the pass being served) and not reached yet. A connection
    /// is listed at most once per pass, whatever listed it (its event, its used-up read
    /// budget, its settle): a client that keeps its socket full gets one turn per pass like
    /// every other, and a pass (the only place the loop polls) stays bounded.
    queued: bool,
    protocol_error: Option<ProtocolError>,
    last_activity: Instant,
    /// An I/O thread read the socket this pass (`read_in`); `next_batch` decodes what it read.
    prefetched: bool,
    /// That read used up its budget: serve the connection again next pass.
    requeue: bool,
    /// In the fan-out being posted (a connection listed twice is posted once).
    posted: bool,
}

/// The I/O threads and what the executor's own share of a fan-out uses.
struct IoThreads {
    pool: Pool<IoWorker>,
    local: IoWorker,
    /// `io-threads-do-reads`: reads are handed out too, not only writes.
    reads: bool,
    /// The connections of the fan-out being posted (kept to reuse its memory).
    posts: Vec<*mut Conn>,
}

#[derive(Clone, Copy)]
struct IoPhase {
    read: bool,
    now: Instant,
}

/// What one I/O thread (or the executor, for its share) does to a connection it is handed.
struct IoWorker {
    /// Read buffer: what a read took is split off into the connection's own buffer.
    scratch: BytesMut,
    shared: Arc<Shared>,
}

impl Worker for IoWorker {
    type Item = Conn;
    type Phase = IoPhase;

    /// Touches only the connection's socket, transport, read buffer, flags and output chain
    /// (never its `Rc`s themselves, nor the pending list), and `Shared`'s counters.
    fn work(&mut self, c: &mut Conn, phase: IoPhase) {
        c.posted = false;
        if phase.read {
            if c.rbuf.is_empty() {
                // What arrives is split off the thread's buffer: no copy, and the buffer's
                // memory is reused once the requests decoded from it are gone.
                self.scratch.clear();
                c.requeue = read_in(c, &mut self.scratch, &self.shared, phase.now);
                c.rbuf = self.scratch.split();
            } else {
                let mut own = std::mem::take(&mut c.rbuf);
                c.requeue = read_in(c, &mut own, &self.shared, phase.now);
                c.rbuf = own;
            }
            c.prefetched = true;
        } else {
            write_pending(c, &self.shared, phase.now);
        }
    }
}

pub struct Net {
    poll: Poll,
    events: Events,
    /// The listening sockets, which CONFIG SET of `bind` / `port` replaces (exec/listen.rs).
    listen: Rc<RefCell<ListenSet>>,
    conns: HashMap<u64, Conn, ahash::RandomState>,
    /// Shared read buffer: connections without a partial request read here, so an idle
    /// connection holds no read buffer (Redis frees idle query buffers likewise).
    scratch: BytesMut,
    /// Clients admitted and not yet handed to the executor (during a busy script, until it
    /// ends). Boxed as the executor's client map keeps them, so the struct is never moved again.
    #[allow(clippy::vec_box)]
    accepted: Vec<Box<Client>>,
    /// Connections to serve again without waiting for an event.
    ready: Vec<u64>,
    /// The ready connections of the pass being served; the busy hook answers those not yet
    /// reached (their events were consumed by the poll that started the pass).
    serving: Vec<u64>,
    /// Events of the last poll.
    fired: Vec<Fired>,
    /// The requests of the batch being decoded or run, reused from one to the next.
    batch: Vec<Vec<Bytes>>,
    /// Connections with output or news from the executor (`ConnOut` lists them), written at
    /// the end of the round (`flush`): a client is woken once per round, not once per reply
    /// (on one machine each wake-up is an inter-processor interrupt paid in our `send`).
    pending: PendingList,
    /// The list `flush` works through (swapped with `pending`, so neither allocates).
    flushing: Vec<u64>,
    /// Connections closed, for the executor to forget.
    closed: Vec<u64>,
    /// TLS handshakes under way (the cron looks for stalled ones only when there are some).
    handshakes: usize,
    /// An accept failed (EMFILE…): try again on the next turn rather than wait for an event.
    accept_retry: bool,
    shared: Arc<Shared>,
    /// A running script's state, shared with the executor's script engine (`State::busy`):
    /// the busy hook's answers read it.
    busy: Rc<crate::machine::busy::BusyState>,
    /// The limits this loop enforces and the connection counters, shared with the executor's
    /// commands (`State::local`).
    local: Rc<Local>,
    /// When the last poll returned: connection activity is stamped with it (the idle
    /// `timeout` counts in seconds), one clock read per turn rather than per request.
    now: Instant,
    /// `io-threads` above 1: the threads a pass's reads and writes are handed out to.
    io: Option<IoThreads>,
}

struct Fired {
    token: usize,
    readable: bool,
    read_closed: bool,
    writable: bool,
}

/// What the executor thread needs to wake its loop from other threads (the inbox).
pub struct LoopWaker(mio::Waker);

impl std::task::Wake for LoopWaker {
    fn wake(self: Arc<Self>) {
        let _ = self.0.wake();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let _ = self.0.wake();
    }
}

/// The loop, as lent to the executor while it runs commands (`Net::lend`): what a busy
/// script's hook serves the other connections with. Empty otherwise.
#[derive(Default)]
pub struct Lent(Option<NonNull<Net>>);

impl Lent {
    /// The hook's entry while a script is busy (see the module comment); nothing when no loop
    /// was lent (the fuzzer's executor).
    pub fn while_busy(&self) {
        if let Some(net) = self.0 {
            // SAFETY: set by `Net::lend` from its `&mut self`, which it does not use until the
            // call it lent the loop for returns, and cleared then: the Net is alive and nothing
            // else holds a reference to it. The hook runs on the executor thread inside that
            // call; `busy_turn` never calls back into the executor, so this is the only
            // reference while it runs.
            unsafe { (*net.as_ptr()).busy_turn() }
        }
    }
}

impl Net {
    pub fn new(listeners: Listeners, shared: Arc<Shared>) -> io::Result<(Net, Arc<LoopWaker>)> {
        let poll = Poll::new()?;
        let waker = Arc::new(LoopWaker(mio::Waker::new(poll.registry(), WAKER)?));
        let listen = ListenSet::new(
            poll.registry().try_clone()?,
            listeners.plain,
            listeners.tls,
            listener_token,
        )?;
        let net = Net {
            poll,
            events: Events::with_capacity(1024),
            listen: Rc::new(RefCell::new(listen)),
            conns: HashMap::default(),
            scratch: BytesMut::new(),
            accepted: Vec::new(),
            ready: Vec::new(),
            serving: Vec::new(),
            batch: Vec::new(),
            fired: Vec::new(),
            pending: Default::default(),
            flushing: Vec::new(),
            closed: Vec::new(),
            handshakes: 0,
            accept_retry: false,
            shared,
            busy: Default::default(),
            local: Default::default(),
            now: Instant::now(),
            io: None,
        };
        Ok((net, waker))
    }

    /// Starts `io-threads` - 1 I/O threads (none for 1); `reads`: `io-threads-do-reads`.
    pub fn start_io_threads(&mut self, threads: usize, reads: bool) -> io::Result<()> {
        if threads <= 1 {
            return Ok(());
        }
        let shared = self.shared.clone();
        let worker = move || IoWorker {
            scratch: BytesMut::new(),
            shared: shared.clone(),
        };
        let pool = Pool::start(threads, worker.clone())?;
        self.io = Some(IoThreads {
            pool,
            local: worker(),
            reads,
            posts: Vec::new(),
        });
        // `State::local` learns it in `set_local`.
        Ok(())
    }

    /// Hands the socket work of `ids` to the I/O threads when there is enough of it (Redis
    /// 7.0 starts its threads from twice their number of pending clients); `read`: reads,
    /// else writes. Only connections that have such work are posted; the rest, and a pass
    /// with too little, are served by the executor as without threads.
    fn fan_out(&mut self, read: bool) {
        let Some(io) = self.io.as_mut() else {
            return;
        };
        if read && !io.reads {
            return;
        }
        let ids = if read { &self.serving } else { &self.flushing };
        let min = io.pool.threads() * 2;
        if ids.len() < min {
            return;
        }
        let mut posts = std::mem::take(&mut io.posts);
        posts.clear();
        for id in ids {
            let Some(c) = self.conns.get_mut(id) else {
                continue;
            };
            let wanted = if read {
                c.admitted
                    && c.readable
                    && !c.eof
                    && !c.closing
                    && !c.broken
                    && c.protocol_error.is_none()
            } else {
                !c.broken && (c.out.writable() > 0 || c.io.pending())
            };
            if wanted && !c.posted {
                c.posted = true;
                posts.push(c as *mut Conn);
            }
        }
        if posts.len() >= min {
            let phase = IoPhase {
                read,
                now: self.now,
            };
            // SAFETY: distinct connections (`posted`) of `conns`, which is neither changed nor
            // read until `run` returns; the workers touch only what `IoWorker::work` says,
            // never the `Rc`s themselves, and the executor thread runs no command meanwhile
            // (it only does its own share of this fan-out).
            unsafe { io.pool.run(&posts, phase, &mut io.local) };
            let counter = if read {
                &self.local.io_threaded_reads
            } else {
                &self.local.io_threaded_writes
            };
            bump(counter, posts.len() as u64);
        } else {
            for &p in &posts {
                // SAFETY: pointers just taken from `conns`, unchanged since.
                unsafe { (*p).posted = false };
            }
        }
        posts.clear();
        io.posts = posts;
    }

    /// The listening sockets, for the executor's CONFIG SET of `bind` and `port`.
    /// Takes the executor's limits and connection counters (`State::local`).
    pub fn set_local(&mut self, local: Rc<Local>) {
        local.io_threads_active.set(self.io.is_some());
        self.local = local;
    }

    /// The busy-script state this loop answers from, for `State::busy`.
    pub fn busy_state(&self) -> Rc<crate::machine::busy::BusyState> {
        self.busy.clone()
    }

    pub fn listen_set(&self) -> Rc<RefCell<ListenSet>> {
        self.listen.clone()
    }

    /// Wakes the loop whenever `fd` turns readable; its owner reads it during the loop's turn
    /// (the cluster's peer connections, exec/peer.rs).
    pub fn watch(&self, fd: std::os::fd::RawFd) -> io::Result<()> {
        self.poll
            .registry()
            .register(&mut SourceFd(&fd), WATCHED, Interest::READABLE)
    }

    /// Runs `f` with this loop lent to the executor (`Server::busy_loop`), for a busy script's
    /// hook to serve the other connections.
    pub fn lend<R>(&mut self, server: &mut Server, f: impl FnOnce(&mut Server) -> R) -> R {
        server.io.busy_loop = Lent(Some(NonNull::from(&mut *self)));
        let r = f(server);
        // (A panic unwinds through the executor thread's end: nothing runs that could use the
        // pointer left behind.)
        server.io.busy_loop = Lent(None);
        r
    }

    /// True if anything happened (a connection, a listener or the inbox's waker).
    fn poll_events(&mut self, timeout: Option<Duration>) -> bool {
        self.fired.clear();
        let polled = self.poll.poll(&mut self.events, timeout);
        self.now = Instant::now();
        if let Err(e) = polled {
            if e.kind() != io::ErrorKind::Interrupted {
                tracing::warn!("epoll: {e}");
            }
            return false;
        }
        for ev in self.events.iter() {
            let t = ev.token();
            if t == WAKER || t == WATCHED {
                continue;
            }
            self.fired.push(Fired {
                token: t.0,
                readable: ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                read_closed: ev.is_read_closed() || ev.is_error(),
                writable: ev.is_writable() || ev.is_write_closed(),
            });
        }
        !self.events.is_empty()
    }

    /// Accepts every pending connection on listener `i`; the admitted clients wait in
    /// `accepted` for the executor (`sync_clients`).
    fn accept(&mut self, i: usize) {
        loop {
            let accepted = match self.listen.borrow().listeners.get(i) {
                Some(l) => l.accept(),
                None => return,
            };
            let (sock, addr) = match accepted {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE and friends: the connection stays in the backlog; retry next turn.
                    tracing::warn!("Accepting client connection: {e}");
                    self.accept_retry = true;
                    return;
                }
            };
            let tls = self.listen.borrow().tls_of.get(i).cloned().flatten();
            self.open(sock, addr, tls);
        }
    }

    /// A new connection joins the loop: plain TCP is admitted at once, TLS after its handshake.
    fn open(&mut self, sock: TcpStream, addr: SocketAddr, tls: Option<Arc<rustls::ServerConfig>>) {
        let local = &self.local;
        if sock.set_nonblocking(true).is_err() {
            return;
        }
        // `tcp-keepalive` as it is now: CONFIG SET reaches the sockets accepted after it.
        crate::server::prepare(&sock, local.tcp_keepalive.get());
        let io = match tls {
            None => {
                if let Err(refusal) = crate::server::admission(local, addr.ip()) {
                    // Best effort on a fresh socket (its buffer takes a short line): never
                    // wait on a peer that does not read.
                    let _ = (&sock).write(refusal);
                    let _ = sock.shutdown(std::net::Shutdown::Write);
                    return;
                }
                Transport::Tcp
            }
            Some(cfg) => match rustls::ServerConnection::new(cfg) {
                Ok(session) => Transport::Tls(Box::new(session)),
                Err(e) => {
                    tracing::warn!("TLS session for {addr}: {e}");
                    return;
                }
            },
        };
        let admitted = matches!(io, Transport::Tcp);
        let id = bump(&local.next_client_id, 1);
        if self
            .poll
            .registry()
            .register(
                &mut SourceFd(&sock.as_raw_fd()),
                Token(id as usize),
                Interest::READABLE,
            )
            .is_err()
        {
            if admitted {
                local
                    .connected_clients
                    .set(local.connected_clients.get().saturating_sub(1));
            }
            return;
        }
        let laddr = sock.local_addr().unwrap_or(addr);
        let client = Rc::new(ClientShared::new_for(local));
        self.conns.insert(
            id,
            Conn {
                sock,
                io,
                client,
                out: ConnOut::looped(id, self.pending.clone()),
                addr,
                laddr,
                admitted: false,
                handshake_deadline: (!admitted)
                    .then(|| self.now + crate::server::tls::HANDSHAKE_TIMEOUT),
                rbuf: BytesMut::new(),
                decoder: Decoder::new(),
                in_flight: false,
                readable: false,
                peer_closed: false,
                eof: false,
                closing: false,
                broken: false,
                want_write: false,
                queued: false,
                protocol_error: None,
                last_activity: self.now,
                prefetched: false,
                requeue: false,
                posted: false,
            },
        );
        if admitted {
            self.join(id);
        } else {
            self.handshakes += 1;
        }
    }

    /// The connection `id` passed admission: its client waits in `accepted` for the executor.
    fn join(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.admitted = true;
        // As `Server::connect` decides, as of now.
        c.client.authenticated.set(!self.local.auth_required.get());
        let client = Client::new(id, c.addr, c.laddr, c.out.clone(), c.client.clone());
        self.accepted.push(Box::new(client));
    }

    /// A TLS handshake ended: admission, as for plain TCP at accept; a refusal is written
    /// through the session before the connection closes.
    fn handshake_done(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.handshake_deadline = None;
        self.handshakes -= 1;
        match crate::server::admission(&self.local, c.addr.ip()) {
            Ok(()) => self.join(id),
            Err(refusal) => {
                let _ = c.io.write(&c.sock, refusal);
                self.close(id);
            }
        }
    }

    /// Reads what connection `id` has for us (within the budget) and decodes the complete
    /// requests into `batch` if it may send a batch now; true if it did.
    fn next_batch(&mut self, id: u64, batch: &mut Vec<Vec<Bytes>>) -> bool {
        let Some(c) = self.conns.get_mut(&id) else {
            return false;
        };
        if c.closing || c.broken {
            return false;
        }
        // Reads go to the connection's own buffer when it has a partial request (or an I/O
        // thread just filled it), else to the loop's shared one.
        let own_buf = !c.rbuf.is_empty();
        let mut read = false;
        if c.prefetched {
            c.prefetched = false;
            read = true;
            if std::mem::take(&mut c.requeue) {
                c.queue(&mut self.ready, id);
            }
        } else if c.readable && !c.eof && c.protocol_error.is_none() {
            read = true;
            let again = if own_buf {
                let mut own = std::mem::take(&mut c.rbuf);
                let again = read_in(c, &mut own, &self.shared, self.now);
                c.rbuf = own;
                again
            } else {
                self.scratch.clear();
                read_in(c, &mut self.scratch, &self.shared, self.now)
            };
            if again {
                // Others get their turn; this one is served again next pass.
                c.queue(&mut self.ready, id);
            }
        }
        let buf = if own_buf {
            &mut c.rbuf
        } else {
            &mut self.scratch
        };
        if read {
            let limit = self.local.client_query_buffer_limit.get();
            if buf.len() + c.decoder.overhead() > limit {
                tracing::warn!(
                    "Closing client id={id} that reached max query buffer length ({} bytes)",
                    buf.len()
                );
                buf.clear();
                self.close(id);
                return false;
            }
        }
        if !c.admitted {
            // A TLS handshake: what arrived with its end waits in the connection's buffer for
            // the client's first batch, once admitted.
            if !own_buf && !self.scratch.is_empty() {
                c.rbuf.extend_from_slice(&self.scratch);
                self.scratch.clear();
            }
            if c.handshake_deadline.is_some() && !c.io.handshaking() && !c.broken {
                self.handshake_done(id);
                if self.conns.contains_key(&id) {
                    return self.next_batch(id, batch);
                }
                return false;
            }
            self.settle(id, true);
            return false;
        }
        if !c.in_flight && c.protocol_error.is_none() {
            let limits = DecodeLimits {
                max_bulk_len: self.local.proto_max_bulk_len.get(),
            };
            let auth_required = c.client.auth_required(&self.local);
            let server_auth = self.local.auth_required.get();
            c.decoder.set_auth_required(auth_required);
            let unread = buf.len();
            loop {
                match c.decoder.decode(buf, &limits) {
                    Ok(Some(args)) => {
                        let end = auth_may_change(auth_required, server_auth, &args);
                        batch.push(args);
                        // The rest waits for the next batch (`settle` queues it once this
                        // one's replies are out).
                        if end || unread - buf.len() >= MAX_BATCH_BYTES {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!("Protocol error ({e}) from client id={id}");
                        c.protocol_error = Some(e);
                        break;
                    }
                }
            }
        }
        // A partial request (or anything kept while a batch is in flight) moves to the
        // connection's own buffer; the shared one is free for the next connection.
        if !own_buf && !self.scratch.is_empty() {
            c.rbuf.extend_from_slice(&self.scratch);
            self.scratch.clear();
        }
        if own_buf && c.rbuf.is_empty() && c.rbuf.capacity() > 0 {
            c.rbuf = BytesMut::new();
        }
        if batch.is_empty() {
            self.settle(id, true);
            return false;
        }
        c.in_flight = true;
        true
    }

    /// After anything happened to connection `id`: writes, and decides whether it closes or
    /// has requests to run. `decoded`: its buffer was just decoded, so what is left there is
    /// an incomplete request.
    fn settle(&mut self, id: u64, decoded: bool) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.out.take_batch_done() {
            c.in_flight = false;
        }
        c.closing |= c.out.closing();
        if c.broken {
            self.close(id);
            return;
        }
        if !c.admitted {
            // A TLS handshake: its messages go out; a peer that left is forgotten.
            if c.eof {
                self.close(id);
            } else {
                self.write_out(id);
            }
            return;
        }
        if !c.in_flight && !c.closing {
            if let Some(e) = c.protocol_error.take() {
                // Replies to the requests before the bad one went first.
                c.out.extend(&e.reply());
                c.closing = true;
            } else if c.eof {
                // A half-closed client gets the replies to all it sent, then goes.
                if decoded || c.rbuf.is_empty() {
                    c.closing = true;
                } else {
                    c.queue(&mut self.ready, id);
                }
            } else if c.readable || (!decoded && !c.rbuf.is_empty()) {
                c.queue(&mut self.ready, id);
            }
        }
        // A client that went away while blocked (BLPOP, SUBSCRIBE) is released, as Redis
        // frees it on EOF; a killed one (CLIENT KILL, output limits) closes after what its
        // socket takes now.
        if (c.eof && c.client.timeout_exempt.get()) || c.out.killed() {
            c.closing = true;
        }
        self.write_out(id);
    }

    /// Writes the connection's output up to its gate; closes it when it is closing and done.
    fn write_out(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let failed = c.broken || write_pending(c, &self.shared, self.now);
        let killed = c.out.killed();
        // A killed client's rest is not waited for: it may never read it.
        let done = killed || (c.out.writable() == 0 && !c.io.pending());
        if failed || (c.closing && done) {
            self.close(id);
            return;
        }
        let want = c.out.writable() > 0 || c.io.pending();
        if want != c.want_write {
            c.want_write = want;
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            let _ = self.poll.registry().reregister(
                &mut SourceFd(&c.sock.as_raw_fd()),
                Token(id as usize),
                interest,
            );
        }
    }

    fn close(&mut self, id: u64) {
        let Some(mut c) = self.conns.remove(&id) else {
            return;
        };
        let _ = self
            .poll
            .registry()
            .deregister(&mut SourceFd(&c.sock.as_raw_fd()));
        c.io.close(&c.sock, c.broken);
        // Half-close first: the peer reads every reply before the connection ends.
        let _ = c.sock.shutdown(std::net::Shutdown::Write);
        if c.handshake_deadline.is_some() {
            self.handshakes -= 1;
        }
        if c.admitted {
            let n = &self.local.connected_clients;
            n.set(n.get().saturating_sub(1));
            self.closed.push(id);
        }
    }

    /// Takes the last poll's events: accepts on the listeners, marks readable connections
    /// ready, writes to writable ones (`write`: else they are listed for the round's end).
    fn dispatch(&mut self, write: bool) {
        let fired = std::mem::take(&mut self.fired);
        for ev in &fired {
            let listeners = self.listen.borrow().listeners.len();
            if let Some(i) = listener_index(ev.token, listeners) {
                self.accept(i);
                continue;
            }
            let id = ev.token as u64;
            if let Some(c) = self.conns.get_mut(&id) {
                c.peer_closed |= ev.read_closed;
                if ev.readable {
                    c.readable = true;
                    c.queue(&mut self.ready, id);
                }
                if ev.writable {
                    if write {
                        self.write_out(id);
                    } else {
                        self.pending.borrow_mut().push(id);
                    }
                }
            }
        }
        self.fired = fired;
        if std::mem::take(&mut self.accept_retry) {
            let listeners = self.listen.borrow().listeners.len();
            for i in 0..listeners {
                self.accept(i);
            }
        }
    }

    /// One pass of the hook's loop while a script is busy: read, answer, write; never run.
    fn busy_turn(&mut self) {
        // Output the executor produced meanwhile waits for the round's end, after the log
        // reached the file; only these answers leave now.
        self.poll_events(Some(Duration::ZERO));
        self.dispatch(false);
        let ids: Vec<u64> = self.ready.iter().chain(&self.serving).copied().collect();
        let mut batch = std::mem::take(&mut self.batch);
        for id in ids {
            if !self.next_batch(id, &mut batch) {
                continue;
            }
            let Some(c) = self.conns.get_mut(&id) else {
                batch.clear();
                continue;
            };
            let auth_required = c.client.auth_required(&self.local);
            let answer = self
                .busy
                .answer(&batch, &c.client, auth_required, &self.shared.script);
            batch.clear();
            // Never ran: the connection may send again.
            c.in_flight = false;
            if let Some(ans) = answer {
                c.out.extend(&ans.replies);
                if ans.shutdown {
                    self.shared.request_shutdown();
                }
                c.closing |= ans.shutdown || ans.close;
                self.write_out(id);
            }
        }
        self.batch = batch;
    }

    /// When the last poll returned.
    pub fn polled_at(&self) -> Instant {
        self.now
    }

    /// True when the loop has work that must not wait for an event.
    pub fn has_ready(&self) -> bool {
        // Not `accept_retry`: while out of descriptors the retry waits for the next turn
        // instead of spinning.
        !self.ready.is_empty()
    }

    /// One turn: wait for events up to `timeout`, then serve them.
    pub fn turn(&mut self, server: &mut Server, timeout: Option<Duration>) -> bool {
        let woken = self.poll_events(timeout);
        self.dispatch(true);
        self.sync_clients(server);
        self.serve_ready(server);
        woken
    }

    /// Waits up to `timeout` for events, then serves them; with nothing ready it first polls
    /// without sleeping for a while (`IdleSpin`).
    pub fn wait(&mut self, server: &mut Server, timeout: Duration, spin: &mut IdleSpin) {
        if timeout.is_zero() || spin.max.is_zero() {
            self.turn(server, Some(timeout));
            return;
        }
        // Gaps end when the poll returns (`polled_at`), not after the turn's work.
        let idle_from = Instant::now();
        let budget = spin.budget().min(timeout);
        if !budget.is_zero() {
            loop {
                let woken = self.turn(server, Some(Duration::ZERO));
                let gap = self.now.saturating_duration_since(idle_from);
                if woken {
                    spin.record(gap);
                    return;
                }
                if gap >= budget {
                    break;
                }
            }
        }
        let left = timeout.saturating_sub(self.now.saturating_duration_since(idle_from));
        self.turn(server, Some(left));
        spin.record(self.now.saturating_duration_since(idle_from));
    }

    /// Serves the connections with requests or bytes to read.
    fn serve_ready(&mut self, server: &mut Server) {
        std::mem::swap(&mut self.ready, &mut self.serving);
        if self.io.is_some() {
            self.fan_out(true);
        }
        let mut batch = std::mem::take(&mut self.batch);
        let mut i = 0;
        while let Some(&id) = self.serving.get(i) {
            i += 1;
            if let Some(c) = self.conns.get_mut(&id) {
                c.queued = false;
            }
            if !self.next_batch(id, &mut batch) {
                continue;
            }
            // A TLS client whose handshake just ended, or clients a busy script's hook
            // admitted, join before their own requests run.
            if !self.accepted.is_empty() {
                self.sync_clients(server);
            }
            // Its output is written at the round's end (`flush`), with everyone else's.
            self.lend(server, |s| s.run_batch(id, &mut batch));
        }
        self.serving.clear();
        self.batch = batch;
        self.sync_clients(server);
    }

    /// At the round's end (`before_sleep`): writes every pending connection (Redis's
    /// handleClientsWithPendingWrites), and learns which batches were answered.
    pub fn flush(&mut self, server: &mut Server) {
        std::mem::swap(&mut self.flushing, &mut *self.pending.borrow_mut());
        if self.io.is_some() {
            self.fan_out(false);
        }
        let mut list = std::mem::take(&mut self.flushing);
        for id in list.drain(..) {
            if let Some(c) = self.conns.get(&id) {
                c.out.unlist();
                self.settle(id, false);
            }
        }
        self.flushing = list;
        self.sync_clients(server);
    }

    /// Hands the executor the clients admitted since the last call, then forgets the closed
    /// ones (in that order: a client admitted and closed meanwhile must not outlive its socket).
    fn sync_clients(&mut self, server: &mut Server) {
        for c in self.accepted.drain(..) {
            server.connect(c);
        }
        for id in self.closed.drain(..) {
            server.handle(Msg::Disconnect { id });
        }
    }

    /// Closes idle clients (`timeout`, read as it is now) and TLS handshakes past
    /// `tls::HANDSHAKE_TIMEOUT`, from the executor's cron.
    pub fn close_idle(&mut self, server: &mut Server) {
        let secs = server.config.timeout;
        if secs == 0 && self.handshakes == 0 {
            return;
        }
        let limit = (secs > 0).then(|| Duration::from_secs(secs));
        let now = Instant::now();
        let idle: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| match c.handshake_deadline {
                Some(d) => now >= d,
                None => limit.is_some_and(|limit| {
                    c.admitted
                        && !c.in_flight
                        && !c.closing
                        && !c.client.timeout_exempt.get()
                        && now.duration_since(c.last_activity) > limit
                }),
            })
            .map(|(id, _)| *id)
            .collect();
        for id in idle {
            tracing::debug!("Closing idle client id={id}");
            self.close(id);
        }
        self.sync_clients(server);
    }
}

/// Reads what connection `c` has for us into `buf` (its own buffer, taken out of it, or a
/// shared one), within the read budget; true if the budget ran out with more to read (the
/// connection is then served again next pass). Runs on the executor or on an I/O thread.
#[inline]
fn read_in(c: &mut Conn, buf: &mut BytesMut, shared: &Shared, now: Instant) -> bool {
    if !c.readable || c.eof || c.protocol_error.is_some() {
        return false;
    }
    // The connection's own buffer holds a partial request; the shared one starts empty.
    let own_buf = !buf.is_empty();
    let tcp = matches!(c.io, Transport::Tcp);
    let mut total = 0;
    let mut again = false;
    // A large argument's payload arriving (a 1 MiB SET): the buffer is sized for it once and
    // it is read whole in this turn, as Redis reads big arguments (PROTO_MBULK_BIG_ARG);
    // grown block by block, each request was copied again at every growth.
    let bulk_left = c.decoder.bulk_end().saturating_sub(buf.len());
    let budget = if bulk_left > READ_BUDGET {
        if buf.capacity() - buf.len() < bulk_left {
            let need = buf.len() + bulk_left;
            match crate::protocol::pool::take(need) {
                // A kept buffer (no page faults); the old one is kept in turn once the
                // request decoded from it is gone.
                Some(mut kept) => {
                    kept.extend_from_slice(buf);
                    let old = std::mem::replace(buf, kept);
                    crate::protocol::pool::keep(old.freeze());
                }
                None => buf.reserve(bulk_left),
            }
        }
        bulk_left
    } else {
        READ_BUDGET
    };
    loop {
        if buf.capacity() - buf.len() < READ_CHUNK / 2 {
            buf.reserve(READ_CHUNK * if own_buf { 1 } else { 4 });
        }
        // One read takes at most the budget: the shared buffer may have grown far larger,
        // and a bulk loader keeps its socket full.
        let room = (buf.capacity() - buf.len()).min(budget - total);
        match c.io.read(&c.sock, buf, room) {
            Ok(0) => {
                c.eof = true;
                c.readable = false;
                break;
            }
            Ok(n) => {
                total += n;
                // A short read drained the socket; a TLS read stops at a record's plaintext,
                // so TLS reads on until the socket would block.
                if tcp && n < room && !c.peer_closed {
                    c.readable = false;
                    break;
                }
                if total >= budget {
                    again = true;
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                c.readable = false;
                break;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                c.eof = true;
                c.readable = false;
                // A TLS session that failed cannot carry replies any more.
                c.broken |= !tcp;
                break;
            }
        }
    }
    if total > 0 {
        shared
            .net_input_bytes
            .fetch_add(total as u64, Ordering::Relaxed);
        shared.reads_processed.fetch_add(1, Ordering::Relaxed);
        c.last_activity = now;
    }
    again
}

/// Writes connection `c`'s output up to its gate (and TLS records made earlier), as far as
/// the socket takes it; a failure marks it broken (the executor then closes it). Runs on the
/// executor or on an I/O thread.
#[inline]
fn write_pending(c: &mut Conn, shared: &Shared, now: Instant) -> bool {
    let mut failed = false;
    let writable = c.out.writable();
    if writable > 0 {
        match write_chain(&mut c.io, &c.sock, &c.out, writable) {
            Ok(n) => {
                shared.count_output(n);
                if n > 0 {
                    c.last_activity = now;
                }
            }
            Err(_) => failed = true,
        }
    } else if c.io.pending() {
        failed = c.io.flush(&c.sock).is_err();
    }
    c.broken |= failed;
    failed
}

/// One `recv` into the spare capacity of `buf`.
fn read_into(sock: &TcpStream, buf: &mut BytesMut, max: usize) -> io::Result<usize> {
    let spare = buf.spare_capacity_mut();
    let len = spare.len().min(max);
    // SAFETY: recv writes at most `len` <= `spare.len()` bytes into memory we own exclusively;
    // only the bytes it reports as written are then exposed through `set_len`.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            spare.as_mut_ptr() as *mut libc::c_void,
            len,
            0,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    // SAFETY: the kernel initialised the first `n` spare bytes.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

/// Writes up to `limit` bytes of `out` through the transport, `MAX_IOV` pieces a call, until
/// they are written or the transport takes no more; how many it wrote.
fn write_chain(
    io: &mut Transport,
    sock: &TcpStream,
    out: &ConnOut,
    limit: usize,
) -> io::Result<usize> {
    let mut buf = out.buf.borrow_mut();
    if let Some(one) = buf.single(limit) {
        let n = io.write(sock, one)?;
        buf.consume(n);
        return Ok(n);
    }
    let mut total = 0;
    while total < limit {
        let (n, offered) = {
            let mut iov = [IoSlice::new(&[]); MAX_IOV];
            let k = buf.slices(limit - total, &mut iov);
            if k == 0 {
                break;
            }
            let offered: usize = iov[..k].iter().map(|s| s.len()).sum();
            (io.write_vectored(sock, &iov[..k])?, offered)
        };
        buf.consume(n);
        total += n;
        if n < offered {
            break;
        }
    }
    Ok(total)
}

/// Writes as much as the socket takes now; 0 when it would block.
fn write_some(sock: &TcpStream, data: &[u8]) -> io::Result<usize> {
    let mut done = 0;
    while done < data.len() {
        match (&*sock).write(&data[done..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// How long the loop polls before it sleeps in epoll. A client that sends its next request
/// soon after a reply would otherwise find the loop asleep and pay for waking it (in a VM an
/// inter-processor interrupt, a few microseconds of its CPU) on every request, while a
/// loop that is up answers sooner. The loop polls only while the recent idle gaps (from
/// running out of work to the next event) are short enough for that to pay: up to twice
/// their moving average, never past `max`; after a long pause it sleeps at once.
#[derive(Default)]
pub struct IdleSpin {
    /// `busy-poll-us`.
    max: Duration,
    /// Moving average of the idle gaps, in nanoseconds (weight 1/8).
    avg_gap_ns: u64,
}

impl IdleSpin {
    /// Follows `busy-poll-us` (CONFIG SET applies on the next turn).
    pub fn set_max(&mut self, max: Duration) {
        if max != self.max {
            // Starts as after a long pause: no spin until the gaps show it pays.
            *self = IdleSpin {
                max,
                avg_gap_ns: (max * 8).as_nanos() as u64,
            };
        }
    }

    fn budget(&self) -> Duration {
        let avg = Duration::from_nanos(self.avg_gap_ns);
        if avg >= self.max {
            Duration::ZERO
        } else {
            (avg * 2).min(self.max)
        }
    }

    fn record(&mut self, gap: Duration) {
        // A long pause counts as a bounded one, so one busy moment brings the spin back.
        let gap = gap.min(self.max * 8).as_nanos() as u64;
        self.avg_gap_ns = self.avg_gap_ns / 8 * 7 + gap / 8;
    }
}

#[cfg(test)]
mod tests {
    use super::IdleSpin;
    use std::time::Duration;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn off_by_default_and_at_zero() {
        let mut s = IdleSpin::default();
        assert_eq!(s.budget(), Duration::ZERO);
        for _ in 0..100 {
            s.record(us(1));
        }
        assert_eq!(s.budget(), Duration::ZERO);
    }

    #[test]
    fn spins_only_once_gaps_are_short_and_stops_after_a_pause() {
        let mut s = IdleSpin::default();
        s.set_max(us(20));
        // Fresh: as after a long pause.
        assert_eq!(s.budget(), Duration::ZERO);
        for _ in 0..40 {
            s.record(us(4));
        }
        let b = s.budget();
        assert!(b > Duration::ZERO && b <= us(20), "{b:?}");
        // Twice the average gap, so a gap a little longer than usual is still caught.
        assert!(b >= us(8), "{b:?}");
        // One long pause ends the spinning; a few short gaps bring it back.
        s.record(Duration::from_secs(1));
        assert_eq!(s.budget(), Duration::ZERO);
        for _ in 0..40 {
            s.record(us(4));
        }
        assert!(s.budget() > Duration::ZERO);
    }

    #[test]
    fn gaps_longer_than_the_limit_never_spin() {
        let mut s = IdleSpin::default();
        s.set_max(us(20));
        for _ in 0..100 {
            s.record(us(25));
        }
        assert_eq!(s.budget(), Duration::ZERO);
    }
}
