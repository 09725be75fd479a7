//! The executor's own event loop for plain TCP, as Redis's `ae`: the thread that owns the data
//! accepts, reads, decodes, runs and writes, so a request costs no hand-off between threads.
//! (Tokio connection tasks handing batches to this thread cost ~0.6 context switches and ~40 %
//! more server CPU per request with 50 clients; see README "Performance".) TLS connections keep
//! their tokio tasks and reach the executor through the inbox, whose wake-up is this loop's
//! `mio::Waker`.
//!
//! Output: a batch's replies are written straight to the socket by `Server::deliver` when
//! nothing is queued; everything else (pushes, wake-ups of blocked clients, replies held for the
//! log's fsync, what did not fit in the socket) goes through the client's channel, and the send
//! marks the connection dirty (`mark_dirty`) so `flush` writes it after the round.
//!
//! While a script is busy the Lua hook calls `while_busy`, which reads the other connections and
//! answers them (-BUSY, SCRIPT KILL, SHUTDOWN NOSAVE) as Redis's `processEventsWhileBlocked`.
//!
//! Borrowing: the loop's state lives in a thread-local and is only borrowed for short steps that
//! never call into `Server`, so the hook (inside a running script) can borrow it too.

use super::{Msg, Server};
use crate::machine::client::{auth_may_change, Client, ClientShared, Out, OutSender};
use crate::machine::Shared;
use crate::protocol::{DecodeLimits, Decoder, ProtocolError};
use bytes::{Bytes, BytesMut};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

const WAKER: Token = Token(usize::MAX);
/// Room kept free in a read buffer before a read (Redis reads 16 KB per event).
const READ_CHUNK: usize = 16 * 1024;
/// Bytes read from one connection in one turn before the others get theirs.
const READ_BUDGET: usize = 256 * 1024;

thread_local! {
    static NET: RefCell<Option<Net>> = const { RefCell::new(None) };
    /// Connections with output queued on their channel (or a batch answered directly) since the
    /// last flush.
    static DIRTY: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    /// The connection whose batch is running: it is looked at right after, so needs no mark.
    static SERVING: Cell<u64> = const { Cell::new(0) };
}

/// Called by `OutSender` on the executor thread.
pub fn mark_dirty(id: u64) {
    if SERVING.with(|s| s.get()) != id {
        DIRTY.with(|d| d.borrow_mut().push(id));
    }
}

/// Listeners take the tokens just below the waker's; clients use their id.
fn listener_token(i: usize) -> Token {
    Token(usize::MAX - 1 - i)
}

fn listener_index(t: usize, listeners: usize) -> Option<usize> {
    (usize::MAX - 1).checked_sub(t).filter(|i| *i < listeners)
}

struct Conn {
    sock: Arc<TcpStream>,
    client: Arc<ClientShared>,
    rx: mpsc::UnboundedReceiver<Out>,
    /// A partial request (or what arrived while a batch was in flight); empty otherwise, and
    /// then it holds no memory: reads go to the loop's shared buffer.
    rbuf: BytesMut,
    decoder: Decoder,
    /// Output the socket did not take yet (counted in `pending_out`).
    wbuf: BytesMut,
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
    /// Registered for WRITABLE (a write would block).
    want_write: bool,
    protocol_error: Option<ProtocolError>,
    last_activity: Instant,
}

pub struct Net {
    poll: Poll,
    events: Events,
    listeners: Vec<TcpListener>,
    conns: HashMap<u64, Conn, ahash::RandomState>,
    /// Shared read buffer: connections without a partial request read here, so an idle
    /// connection holds no read buffer (Redis frees idle query buffers likewise).
    scratch: BytesMut,
    /// Clients accepted and not yet handed to the executor (during a busy script, until it
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
    /// An accept failed (EMFILE…): try again on the next turn rather than wait for an event.
    accept_retry: bool,
    shared: Arc<Shared>,
    /// When the last poll returned: connection activity is stamped with it (the idle
    /// `timeout` counts in seconds), one clock read per turn rather than per request.
    now: Instant,
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

impl Net {
    pub fn new(
        listeners: Vec<TcpListener>,
        shared: Arc<Shared>,
    ) -> io::Result<(Net, Arc<LoopWaker>)> {
        let poll = Poll::new()?;
        let waker = Arc::new(LoopWaker(mio::Waker::new(poll.registry(), WAKER)?));
        for (i, l) in listeners.iter().enumerate() {
            l.set_nonblocking(true)?;
            poll.registry().register(
                &mut SourceFd(&l.as_raw_fd()),
                listener_token(i),
                Interest::READABLE,
            )?;
        }
        let net = Net {
            poll,
            events: Events::with_capacity(1024),
            listeners,
            conns: HashMap::default(),
            scratch: BytesMut::new(),
            accepted: Vec::new(),
            ready: Vec::new(),
            serving: Vec::new(),
            batch: Vec::new(),
            fired: Vec::new(),
            accept_retry: false,
            shared,
            now: Instant::now(),
        };
        Ok((net, waker))
    }

    /// Makes this the executor thread's loop.
    pub fn install(self) {
        NET.with(|n| *n.borrow_mut() = Some(self));
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
            if t == WAKER {
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

    /// Accepts every pending connection on listener `i`; their clients wait in `accepted` for
    /// the executor (`sync_clients`).
    fn accept(&mut self, i: usize) {
        loop {
            let (sock, addr) = match self.listeners[i].accept() {
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
            if let Some(c) = self.admit(sock, addr) {
                self.accepted.push(c);
            }
        }
    }

    /// maxclients and protected mode, then the connection joins the loop.
    fn admit(&mut self, sock: TcpStream, addr: SocketAddr) -> Option<Box<Client>> {
        let shared = &self.shared;
        if sock.set_nonblocking(true).is_err() {
            return None;
        }
        // `tcp-keepalive` as it is now: CONFIG SET reaches the sockets accepted after it.
        crate::server::prepare(&sock, shared.tcp_keepalive.load(Ordering::Relaxed));
        if let Err(refusal) = crate::server::admission(shared, addr.ip()) {
            // Best effort on a fresh socket (its buffer takes a short line): never wait on a
            // peer that does not read.
            let _ = (&sock).write(refusal);
            let _ = sock.shutdown(std::net::Shutdown::Write);
            return None;
        }
        let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
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
            shared.connected_clients.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        let laddr = sock.local_addr().unwrap_or(addr);
        let sock = Arc::new(sock);
        let (tx, rx) = mpsc::unbounded_channel();
        let client_shared = Arc::new(ClientShared {
            direct: Some(Arc::downgrade(&sock)),
            ..ClientShared::new_for(shared)
        });
        let client = Client::new(
            id,
            addr,
            laddr,
            OutSender::local(tx, id),
            client_shared.clone(),
        );
        self.conns.insert(
            id,
            Conn {
                sock,
                client: client_shared,
                rx,
                rbuf: BytesMut::new(),
                decoder: Decoder::new(),
                wbuf: BytesMut::new(),
                in_flight: false,
                readable: false,
                peer_closed: false,
                eof: false,
                closing: false,
                want_write: false,
                protocol_error: None,
                last_activity: self.now,
            },
        );
        Some(Box::new(client))
    }

    /// Reads what connection `id` has for us (within the budget) and decodes the complete
    /// requests into `batch` if it may send a batch now; true if it did.
    fn next_batch(&mut self, id: u64, batch: &mut Vec<Vec<Bytes>>) -> bool {
        let Some(c) = self.conns.get_mut(&id) else {
            return false;
        };
        if c.closing {
            return false;
        }
        let own_buf = !c.rbuf.is_empty();
        let buf = if own_buf {
            &mut c.rbuf
        } else {
            self.scratch.clear();
            &mut self.scratch
        };
        if c.readable && !c.eof && c.protocol_error.is_none() {
            let mut total = 0;
            loop {
                if buf.capacity() - buf.len() < READ_CHUNK / 2 {
                    buf.reserve(READ_CHUNK * if own_buf { 1 } else { 4 });
                }
                let room = buf.capacity() - buf.len();
                match read_into(&c.sock, buf) {
                    Ok(0) => {
                        c.eof = true;
                        c.readable = false;
                        break;
                    }
                    Ok(n) => {
                        total += n;
                        if n < room && !c.peer_closed {
                            c.readable = false;
                            break;
                        }
                        if total >= READ_BUDGET {
                            // Others get their turn; this one is served again next pass.
                            self.ready.push(id);
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
                        break;
                    }
                }
            }
            if total > 0 {
                self.shared
                    .net_input_bytes
                    .fetch_add(total as u64, Ordering::Relaxed);
                c.last_activity = self.now;
            }
            let limit = self
                .shared
                .client_query_buffer_limit
                .load(Ordering::Relaxed);
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
        if !c.in_flight && c.protocol_error.is_none() {
            let limits = DecodeLimits {
                max_bulk_len: self.shared.proto_max_bulk_len.load(Ordering::Relaxed),
            };
            let auth_required = c.client.auth_required(&self.shared);
            let server_auth = self.shared.auth_required.load(Ordering::Relaxed);
            c.decoder.set_auth_required(auth_required);
            loop {
                match c.decoder.decode(buf, &limits) {
                    Ok(Some(args)) => {
                        let end = auth_may_change(auth_required, server_auth, &args);
                        batch.push(args);
                        if end {
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

    /// After anything happened to connection `id`: takes what the executor queued, writes,
    /// and decides whether it closes or has requests to run. `decoded`: its buffer was just
    /// decoded, so what is left there is an incomplete request.
    fn settle(&mut self, id: u64, decoded: bool) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.client.direct_done.swap(false, Ordering::Acquire) {
            c.in_flight = false;
        }
        let mut failed = false;
        while let Ok(o) = c.rx.try_recv() {
            c.closing |= o.close;
            if o.batch_done {
                c.in_flight = false;
            }
            if failed {
                continue;
            }
            if c.wbuf.is_empty() {
                // Straight from the chunk; only what the socket does not take is copied.
                match write_some(&c.sock, &o.data) {
                    Ok(n) => {
                        self.shared.count_output(n);
                        sub_pending(&c.client, n);
                        c.wbuf.extend_from_slice(&o.data[n..]);
                    }
                    Err(_) => failed = true,
                }
            } else {
                c.wbuf.extend_from_slice(&o.data);
            }
        }
        if failed {
            self.close(id);
            return;
        }
        if !c.in_flight && !c.closing {
            if let Some(e) = c.protocol_error.take() {
                // Replies to the requests before the bad one went first.
                c.wbuf.extend_from_slice(&e.reply());
                c.closing = true;
            } else if c.eof {
                // A half-closed client gets the replies to all it sent, then goes.
                if decoded || c.rbuf.is_empty() {
                    c.closing = true;
                } else {
                    self.ready.push(id);
                }
            } else if c.readable || (!decoded && !c.rbuf.is_empty()) {
                self.ready.push(id);
            }
        }
        // A client that went away while blocked (BLPOP, SUBSCRIBE) is released, as Redis
        // frees it on EOF; `killed` covers CLIENT KILL and output limits.
        if (c.eof && c.client.timeout_exempt.load(Ordering::Relaxed))
            || c.client.killed.load(Ordering::Relaxed)
        {
            c.closing = true;
            c.wbuf.clear();
        }
        self.write_out(id);
    }

    /// Writes the connection's queued output; closes it when it is closing and done.
    fn write_out(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let mut failed = false;
        if !c.wbuf.is_empty() {
            match write_some(&c.sock, &c.wbuf) {
                Ok(n) => {
                    let _ = c.wbuf.split_to(n);
                    self.shared.count_output(n);
                    sub_pending(&c.client, n);
                    if n > 0 {
                        c.last_activity = self.now;
                    }
                }
                Err(_) => failed = true,
            }
            if c.wbuf.is_empty() && c.wbuf.capacity() > 64 << 10 {
                c.wbuf = BytesMut::new();
            }
        }
        if failed || (c.closing && c.wbuf.is_empty()) {
            self.close(id);
            return;
        }
        let want = !c.wbuf.is_empty();
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
        let Some(c) = self.conns.remove(&id) else {
            return;
        };
        let _ = self
            .poll
            .registry()
            .deregister(&mut SourceFd(&c.sock.as_raw_fd()));
        // Half-close first: the peer reads every reply before the connection ends.
        let _ = c.sock.shutdown(std::net::Shutdown::Write);
        self.shared.connected_clients.fetch_sub(1, Ordering::SeqCst);
        CLOSED.with(|cl| cl.borrow_mut().push(id));
    }

    /// Takes the last poll's events: accepts on the listeners, marks readable connections
    /// ready, writes to writable ones.
    fn dispatch(&mut self) {
        let fired = std::mem::take(&mut self.fired);
        for ev in &fired {
            if let Some(i) = listener_index(ev.token, self.listeners.len()) {
                self.accept(i);
                continue;
            }
            let id = ev.token as u64;
            if let Some(c) = self.conns.get_mut(&id) {
                c.peer_closed |= ev.read_closed;
                if ev.readable {
                    c.readable = true;
                    self.ready.push(id);
                }
                if ev.writable {
                    self.write_out(id);
                }
            }
        }
        self.fired = fired;
        if std::mem::take(&mut self.accept_retry) {
            for i in 0..self.listeners.len() {
                self.accept(i);
            }
        }
    }

    /// One pass of the hook's loop while a script is busy: read, answer, write; never run.
    fn busy_turn(&mut self) {
        self.poll_events(Some(Duration::ZERO));
        self.dispatch();
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
            let auth_required = c.client.auth_required(&self.shared);
            let answer = self.shared.script.answer(&batch, &c.client, auth_required);
            batch.clear();
            // Never ran: the connection may send again.
            c.in_flight = false;
            if let Some(ans) = answer {
                c.wbuf.extend_from_slice(&ans.replies);
                if ans.shutdown {
                    self.shared.request_shutdown();
                }
                c.closing |= ans.shutdown || ans.close;
                self.write_out(id);
            }
        }
        self.batch = batch;
    }
}

thread_local! {
    /// Connections closed by the loop, to be forgotten by the executor.
    static CLOSED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

fn sub_pending(c: &ClientShared, n: usize) {
    if n > 0 {
        let p = c.pending_out.load(Ordering::Relaxed);
        c.pending_out.store(p.saturating_sub(n), Ordering::Relaxed);
    }
}

/// One `recv` into the spare capacity of `buf`.
fn read_into(sock: &TcpStream, buf: &mut BytesMut) -> io::Result<usize> {
    let spare = buf.spare_capacity_mut();
    // SAFETY: recv writes at most `spare.len()` bytes into memory we own exclusively; only the
    // bytes it reports as written are then exposed through `set_len`.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            spare.as_mut_ptr() as *mut libc::c_void,
            spare.len(),
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

/// Writes `data` straight to the socket of a connection of this loop, counting what it took;
/// None when the client has none (TLS, or closed). An error counts as nothing written: the
/// channel's write then fails again and closes the connection.
pub(crate) fn write_direct(cs: &ClientShared, shared: &Shared, data: &[u8]) -> Option<usize> {
    let sock = cs.direct.as_ref().and_then(std::sync::Weak::upgrade)?;
    let n = write_some(&sock, data).unwrap_or(0);
    shared.count_output(n);
    Some(n)
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

fn with<R>(f: impl FnOnce(&mut Net) -> R) -> Option<R> {
    NET.with(|n| n.borrow_mut().as_mut().map(f))
}

/// The hook's entry while a script is busy (see the module comment).
pub fn while_busy() {
    NET.with(|n| {
        if let Ok(mut g) = n.try_borrow_mut() {
            if let Some(net) = g.as_mut() {
                net.busy_turn();
            }
        }
    });
}

/// When the last poll returned.
pub fn polled_at() -> Instant {
    with(|n| n.now).unwrap_or_else(Instant::now)
}

/// True when the loop has work that must not wait for an event.
pub fn has_ready() -> bool {
    // Not `accept_retry`: while out of descriptors the retry waits for the next turn instead of
    // spinning.
    with(|n| !n.ready.is_empty()).unwrap_or(false)
}

/// One turn: wait for events up to `timeout`, then serve them.
pub fn turn(server: &mut Server, timeout: Option<Duration>) -> bool {
    let woken = with(|n| {
        let woken = n.poll_events(timeout);
        n.dispatch();
        woken
    })
    .unwrap_or(false);
    sync_clients(server);
    serve_ready(server);
    woken
}

/// Waits up to `timeout` for events, then serves them; with nothing ready it first polls
/// without sleeping for a while (`IdleSpin`).
pub fn wait(server: &mut Server, timeout: Duration, spin: &mut IdleSpin) {
    if timeout.is_zero() || spin.max.is_zero() {
        turn(server, Some(timeout));
        return;
    }
    // Gaps end when the poll returns (`polled_at`), not after the turn's work.
    let idle_from = Instant::now();
    let budget = spin.budget().min(timeout);
    if !budget.is_zero() {
        loop {
            let woken = turn(server, Some(Duration::ZERO));
            let gap = polled_at().saturating_duration_since(idle_from);
            if woken {
                spin.record(gap);
                return;
            }
            if gap >= budget {
                break;
            }
        }
    }
    let left = timeout.saturating_sub(polled_at().saturating_duration_since(idle_from));
    turn(server, Some(left));
    spin.record(polled_at().saturating_duration_since(idle_from));
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

/// Serves the connections with requests or bytes to read.
fn serve_ready(server: &mut Server) {
    let Some(mut batch) = with(|n| {
        std::mem::swap(&mut n.ready, &mut n.serving);
        std::mem::take(&mut n.batch)
    }) else {
        return;
    };
    let mut i = 0;
    while let Some(Some(id)) = with(|n| n.serving.get(i).copied()) {
        i += 1;
        if with(|n| n.next_batch(id, &mut batch)) != Some(true) {
            continue;
        }
        SERVING.with(|s| s.set(id));
        server.run_batch(id, &mut batch);
        SERVING.with(|s| s.set(0));
        let accepted = with(|n| {
            n.settle(id, false);
            !n.accepted.is_empty()
        });
        // Clients a busy script's hook accepted join before their own requests run.
        if accepted == Some(true) {
            sync_clients(server);
        }
    }
    with(|n| {
        n.serving.clear();
        n.batch = batch;
    });
    sync_clients(server);
}

/// After the executor's round: writes every connection it queued output for.
pub fn flush(server: &mut Server) {
    let mut dirty = Vec::new();
    loop {
        DIRTY.with(|d| std::mem::swap(&mut dirty, &mut *d.borrow_mut()));
        if dirty.is_empty() {
            break;
        }
        with(|n| {
            for id in dirty.drain(..) {
                n.settle(id, false);
            }
        });
    }
    sync_clients(server);
}

/// Hands the executor the clients accepted since the last call, then forgets the closed ones
/// (in that order: a client accepted and closed meanwhile must not outlive its socket).
fn sync_clients(server: &mut Server) {
    let accepted = with(|n| std::mem::take(&mut n.accepted)).unwrap_or_default();
    for c in accepted {
        server.connect(c);
    }
    let closed = CLOSED.with(|c| std::mem::take(&mut *c.borrow_mut()));
    for id in closed {
        server.handle(Msg::Disconnect { id });
    }
}

/// Closes idle clients (`timeout`, read as it is now), from the executor's cron.
pub fn close_idle(server: &mut Server) {
    let secs = server.config.timeout;
    if secs == 0 {
        return;
    }
    let limit = Duration::from_secs(secs);
    with(|n| {
        let now = Instant::now();
        let idle: Vec<u64> = n
            .conns
            .iter()
            .filter(|(_, c)| {
                !c.in_flight
                    && !c.closing
                    && !c.client.timeout_exempt.load(Ordering::Relaxed)
                    && now.duration_since(c.last_activity) > limit
            })
            .map(|(id, _)| *id)
            .collect();
        for id in idle {
            tracing::debug!("Closing idle client id={id}");
            n.close(id);
        }
    });
    sync_clients(server);
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
