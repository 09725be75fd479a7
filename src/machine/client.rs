//! Per-connection state kept by the executor (the connection task only moves bytes).

use super::CmdId;
use bytes::{Bytes, BytesMut};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// A chunk of output for one connection, in the order it must be written.
#[derive(Debug)]
pub struct Out {
    pub data: Bytes,
    /// The batch of commands the connection sent is fully answered; it may send the next one.
    pub batch_done: bool,
    /// Close the connection after writing `data` (QUIT, CLIENT KILL, output limit).
    pub close: bool,
}

/// Where a client's output goes. A connection of the executor's event loop (`exec::net`) feeds
/// the loop's one outbox, tagged with its id: the queue's order is the order output was
/// produced, and the loop drains it (`net::Net::drain_outbox`), so no separate list of
/// connections with output is kept. Other clients (the fuzzer's, the log loader's) have a
/// channel of their own.
#[derive(Debug, Clone)]
pub struct OutSender(Route);

#[derive(Debug, Clone)]
enum Route {
    Loop { outbox: Arc<Outbox>, id: u64 },
    Own(mpsc::UnboundedSender<Out>),
}

/// The event loop's outbox: shared by every client's `OutSender` and the loop, which holds the
/// receiving end and sets `serving`.
#[derive(Debug)]
pub struct Outbox {
    tx: mpsc::UnboundedSender<(u64, Out)>,
    /// The connection whose batch is running: the loop looks at it right after, so a batch
    /// answered straight on its socket needs no wake-up.
    pub serving: AtomicU64,
    /// Something was sent since the loop last looked: after most batches nothing was (the
    /// reply went straight to the socket), and this load is cheaper than the channel's
    /// `try_recv`.
    sent: AtomicBool,
}

impl Outbox {
    pub fn new(tx: mpsc::UnboundedSender<(u64, Out)>) -> Outbox {
        Outbox {
            tx,
            serving: AtomicU64::new(0),
            sent: AtomicBool::new(false),
        }
    }

    fn send(&self, id: u64, out: Out) -> bool {
        self.sent.store(true, Ordering::Relaxed);
        self.tx.send((id, out)).is_ok()
    }

    /// Whether anything was sent since the last call (the loop then drains the channel).
    pub fn take_sent(&self) -> bool {
        // Sender and receiver are on the executor thread: no lost update between these two.
        let sent = self.sent.load(Ordering::Relaxed);
        if sent {
            self.sent.store(false, Ordering::Relaxed);
        }
        sent
    }
}

impl OutSender {
    /// The sender of connection `id` of the event loop whose outbox this is.
    pub fn looped(outbox: Arc<Outbox>, id: u64) -> OutSender {
        OutSender(Route::Loop { outbox, id })
    }

    /// False when nobody reads the output any more.
    pub fn send(&self, out: Out) -> bool {
        match &self.0 {
            Route::Loop { outbox, id } => outbox.send(*id, out),
            Route::Own(tx) => tx.send(out).is_ok(),
        }
    }

    /// Tells the connection a batch was answered directly (`ClientShared::direct_done`).
    pub fn wake(&self) {
        if let Route::Loop { outbox, id } = &self.0 {
            if outbox.serving.load(Ordering::Relaxed) != *id {
                let _ = outbox.send(
                    *id,
                    Out {
                        data: Bytes::new(),
                        batch_done: false,
                        close: false,
                    },
                );
            }
        }
    }
}

impl From<mpsc::UnboundedSender<Out>> for OutSender {
    fn from(tx: mpsc::UnboundedSender<Out>) -> OutSender {
        OutSender(Route::Own(tx))
    }
}

/// State shared between a connection of the event loop and the executor.
#[derive(Debug, Default)]
pub struct ClientShared {
    /// Bytes handed to the connection and not yet taken by its transport.
    pub pending_out: AtomicUsize,
    /// Set by the executor when the client must go (CLIENT KILL, output buffer limit).
    pub killed: AtomicBool,
    /// Blocked, subscribed or monitoring clients are exempt from the idle `timeout`.
    pub timeout_exempt: AtomicBool,
    /// The socket of a plain TCP connection, for replies written straight to it
    /// (`exec::Server::deliver`); None for TLS, whose session only the event loop holds.
    pub direct: Option<std::sync::Weak<std::net::TcpStream>>,
    /// A batch was answered directly on the socket (its `batch_done` did not go through the
    /// channel).
    pub direct_done: AtomicBool,
    /// `Client::authenticated` as of the last batch the executor answered: the connection's
    /// decoder applies Redis's pre-AUTH limits (10 arguments, 16 KB bulks) while it is false.
    pub authenticated: AtomicBool,
    /// In MULTI as of the last batch answered (or as a busy script's answers left it).
    pub in_multi: AtomicBool,
    /// What answers given while a script was busy did to the transaction (see
    /// `script::busy::BusyMarks`); applied before the client's next batch runs.
    pub busy_marks: std::sync::Mutex<super::busy::BusyMarks>,
    /// `busy_marks` is not empty: the executor's check per batch is one load, not a lock.
    pub busy_marked: AtomicBool,
    /// The connection speaks RESP3 (HELLO 3), for replies given while a script is busy.
    pub resp3: AtomicBool,
}

impl ClientShared {
    /// State for a new connection: authenticated when the default user needs no password, as
    /// `State::connect` decides.
    pub fn new_for(shared: &super::Shared) -> ClientShared {
        ClientShared {
            authenticated: AtomicBool::new(!shared.auth_required.load(Ordering::Relaxed)),
            ..Default::default()
        }
    }

    /// Redis's `authRequired(c)`, for the decoder of this client's next request.
    pub fn auth_required(&self, shared: &super::Shared) -> bool {
        shared.auth_required.load(Ordering::Relaxed) && !self.authenticated.load(Ordering::Relaxed)
    }
}

/// Whether a batch must end after `args`: while a client is unauthenticated each request may
/// change what the next may send (AUTH, HELLO … AUTH), and RESET may log it out again, so the
/// next request is decoded only after it ran, as Redis decodes after every command.
/// `server_auth`: `Shared::auth_required`, read once per batch.
pub fn auth_may_change(auth_required: bool, server_auth: bool, args: &[Bytes]) -> bool {
    auth_required
        || (server_auth
            && args
                .first()
                .is_some_and(|a| a.eq_ignore_ascii_case(b"reset")))
}

pub struct Client {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    pub name: Option<Bytes>,
    pub lib_name: Option<Bytes>,
    pub lib_ver: Option<Bytes>,
    pub db: usize,
    /// 2 or 3.
    pub resp: u8,
    pub authenticated: bool,
    pub user: String,
    /// The user's permissions, fixed at AUTH (see cmd/acl.rs).
    pub perms: crate::config::users::Perms,
    pub created: Instant,
    /// Unix ms of the last command (CLIENT LIST `idle=`), from the clock the command ran with.
    pub last_interaction_ms: u64,
    /// Table id of the last command run (CLIENT LIST `cmd=`), None before the first.
    /// The last command's full name (CLIENT LIST `cmd=`).
    pub last_cmd: Option<&'static str>,
    pub out: OutSender,
    pub shared: Arc<ClientShared>,
    /// Close after the current batch's replies are written.
    pub close_after_reply: bool,
    /// The command produced no reply now (SHUTDOWN; a blocked command answers later).
    pub skip_reply: bool,
    /// Commands of the current batch not yet run (the client is blocked or paused).
    pub pending: std::collections::VecDeque<Vec<Bytes>>,
    /// Commands queued since MULTI (None: not in a transaction).
    pub multi: Option<Vec<(CmdId, Vec<Bytes>)>>,
    /// A command was rejected while queuing: EXEC must abort (Redis's CLIENT_DIRTY_EXEC).
    pub multi_dirty: bool,
    /// EXEC is running the queue: blocking commands must not block.
    pub in_exec: bool,
    /// Set while a served waiter re-runs its command: the deadline it blocked with.
    pub block_deadline: Option<u64>,
    /// Set with `block_deadline`: the key whose write woke the waiter (a woken XREAD is served
    /// from that key only, as Redis's serveClientsBlockedOnStreamKey).
    pub block_ready_key: Option<bytes::Bytes>,
    /// Cluster mode: the log index of this client's last write (WAIT counts the followers
    /// holding it, as Redis counts the replicas that acknowledged the client's offset).
    pub repl_index: u64,
    /// Parked in a blocking command (CLIENT LIST flag `b`); the waiter itself is in
    /// `State::waiters`.
    pub blocked: bool,
    /// Channels, patterns and shard channels this client is subscribed to.
    pub pubsub: super::pubsub::ClientPubSub,
    /// Pushes queued by the executor, not yet handed to the connection task: a burst of
    /// messages to one subscriber leaves as one chunk (one wake-up, one write), as Redis writes
    /// a client's buffer once per event-loop turn. `exec::Server::flush_deferred` sends them.
    pub deferred: BytesMut,
    /// CLIENT REPLY OFF: no replies (pushes still leave).
    pub reply_off: bool,
    /// CLIENT REPLY SKIP: the next command's reply is dropped (`reply_skip` while it runs).
    pub reply_skip_next: bool,
    pub reply_skip: bool,
    /// CLIENT TRACKING's mode (None: off); the keys it read are in `State::tracking`.
    pub tracking: Option<Box<super::tracking::ClientTracking>>,
    /// READONLY (cluster mode): read commands on a follower are served there (linearizably,
    /// after a read barrier) instead of redirected to the leader; READWRITE and RESET clear it.
    pub cluster_readonly: bool,
}

impl Client {
    pub fn new(
        id: u64,
        addr: SocketAddr,
        laddr: SocketAddr,
        out: impl Into<OutSender>,
        shared: Arc<ClientShared>,
    ) -> Client {
        let now = Instant::now();
        Client {
            id,
            addr,
            laddr,
            name: None,
            lib_name: None,
            lib_ver: None,
            db: 0,
            resp: 2,
            authenticated: false,
            user: "default".into(),
            perms: Default::default(),
            created: now,
            last_interaction_ms: super::unix_ms(),
            last_cmd: None,
            out: out.into(),
            shared,
            close_after_reply: false,
            skip_reply: false,
            pending: Default::default(),
            multi: None,
            multi_dirty: false,
            in_exec: false,
            block_deadline: None,
            block_ready_key: None,
            repl_index: 0,
            blocked: false,
            pubsub: Default::default(),
            deferred: BytesMut::new(),
            reply_off: false,
            reply_skip_next: false,
            reply_skip: false,
            tracking: None,
            cluster_readonly: false,
        }
    }

    /// Publishes what the connection's own answers depend on (pre-AUTH limits, busy-script
    /// answers), before the end of a batch is signalled to it.
    pub fn publish_state(&self) {
        self.shared
            .authenticated
            .store(self.authenticated, Ordering::Relaxed);
        self.shared
            .in_multi
            .store(self.multi.is_some(), Ordering::Relaxed);
    }

    pub fn resp3(&self) -> bool {
        self.resp == 3
    }

    /// Sends bytes to the connection outside of a batch reply (wake-ups), after any deferred
    /// pushes, so output stays in the order it was produced.
    pub fn push(&mut self, data: Bytes, batch_done: bool) {
        self.flush_deferred();
        self.shared
            .pending_out
            .fetch_add(data.len(), Ordering::Relaxed);
        let _ = self.out.send(Out {
            data,
            batch_done,
            close: false,
        });
    }

    /// Hands a batch's (or a woken waiter's) output to the connection.
    pub fn push_out(&self, data: Bytes, batch_done: bool, close: bool) {
        self.shared
            .pending_out
            .fetch_add(data.len(), Ordering::Relaxed);
        let _ = self.out.send(Out {
            data,
            batch_done,
            close,
        });
    }

    /// Queues a push for the next `flush_deferred`; true if the queue was empty (the caller
    /// remembers the client as having output to flush).
    pub fn defer(&mut self, data: &[u8]) -> bool {
        let was_empty = self.deferred.is_empty();
        self.deferred.extend_from_slice(data);
        self.shared
            .pending_out
            .fetch_add(data.len(), Ordering::Relaxed);
        was_empty
    }

    /// Hands the deferred pushes to the connection task (already counted in `pending_out`).
    pub fn flush_deferred(&mut self) {
        if self.deferred.is_empty() {
            return;
        }
        let data = self.deferred.split().freeze();
        if self.deferred.capacity() > 64 << 10 {
            self.deferred = BytesMut::new();
        }
        let _ = self.out.send(Out {
            data,
            batch_done: false,
            close: false,
        });
    }

    pub fn kill(&self) {
        self.shared.killed.store(true, Ordering::Relaxed);
        let _ = self.out.send(Out {
            data: Bytes::new(),
            batch_done: true,
            close: true,
        });
    }
}

impl Client {
    /// One CLIENT LIST line, with Redis 7.0's fields.
    pub fn info_line(&self, out: &mut String) {
        use std::fmt::Write;
        let c = self;
        let age = c.created.elapsed().as_secs();
        let idle = crate::clock::unix_ms().saturating_sub(c.last_interaction_ms) / 1000;
        let name = c
            .name
            .as_ref()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default();
        let omem = c
            .shared
            .pending_out
            .load(std::sync::atomic::Ordering::Relaxed);
        let cmd = c.last_cmd.unwrap_or("NULL");
        // Redis's order of the flag letters we can have.
        let mut flags = String::new();
        for (on, letter) in [
            (c.pubsub.subscribed(), 'P'),
            (c.multi.is_some(), 'x'),
            (c.blocked, 'b'),
            (c.tracking.is_some(), 't'),
            (c.tracking.as_ref().is_some_and(|t| t.broken_redirect), 'R'),
            (c.tracking.as_ref().is_some_and(|t| t.bcast), 'B'),
        ] {
            if on {
                flags.push(letter);
            }
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let _ = writeln!(
            out,
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=16384 rbp=0 obl=0 oll=0 omem={} tot-mem={} events=r cmd={} user={} redir={} resp={}",
            c.id,
            c.addr,
            c.laddr,
            c.id + 5,
            name,
            age,
            idle,
            flags,
            c.db,
            c.pubsub.channels.len(),
            c.pubsub.patterns.len(),
            c.pubsub.shard.len(),
            c.multi.as_ref().map_or(-1, |q| q.len() as i64),
            omem,
            omem + 20000,
            cmd,
            c.user,
            c.tracking.as_ref().map_or(-1, |t| t.redirect as i64),
            c.resp
        );
    }
}
