//! Per-client session state kept by the executor. Its output is the connection's `ConnOut`
//! (machine/output.rs), which the executor appends to and the event loop writes.

use super::CmdId;
use bytes::Bytes;
use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Instant;
use tokio::sync::mpsc;

use super::output::ConnOut;
pub use super::output::Out;

/// Where a new client's output goes: a connection of the event loop (its `ConnOut`), or a
/// channel (the fuzzer's clients, unit tests).
pub trait IntoOutput {
    fn into_output(self, id: u64) -> Rc<ConnOut>;
}

impl IntoOutput for Rc<ConnOut> {
    fn into_output(self, _id: u64) -> Rc<ConnOut> {
        self
    }
}

impl IntoOutput for mpsc::UnboundedSender<Out> {
    fn into_output(self, id: u64) -> Rc<ConnOut> {
        ConnOut::channel(id, self)
    }
}

/// What the event loop reads of a client's session without the executor: the idle timeout's
/// exemption, and what a busy script's answers depend on. The loop and the executor are one
/// thread (src/exec/net.rs), so these are plain cells shared through an `Rc`; no other thread
/// sees a connection's session.
#[derive(Default)]
pub struct ClientShared {
    /// Blocked, subscribed or monitoring clients are exempt from the idle `timeout`.
    pub timeout_exempt: Cell<bool>,
    /// `Client::authenticated` as of the last batch the executor answered: the connection's
    /// decoder applies Redis's pre-AUTH limits (10 arguments, 16 KB bulks) while it is false.
    pub authenticated: Cell<bool>,
    /// In MULTI as of the last batch answered (or as a busy script's answers left it).
    pub in_multi: Cell<bool>,
    /// What answers given while a script was busy did to the transaction (see
    /// `script::busy::BusyMarks`); applied before the client's next batch runs. Taken out and
    /// put back whole, so no borrow is ever held across a call.
    pub busy_marks: Cell<super::busy::BusyMarks>,
    /// `busy_marks` is not empty: the executor's check per batch is one read.
    pub busy_marked: Cell<bool>,
    /// The connection speaks RESP3 (HELLO 3), for replies given while a script is busy.
    pub resp3: Cell<bool>,
}

impl std::fmt::Debug for ClientShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientShared")
            .field("timeout_exempt", &self.timeout_exempt.get())
            .field("authenticated", &self.authenticated.get())
            .field("in_multi", &self.in_multi.get())
            .field("busy_marked", &self.busy_marked.get())
            .field("resp3", &self.resp3.get())
            .finish()
    }
}

impl ClientShared {
    /// State for a new connection: authenticated when the default user needs no password, as
    /// `State::connect` decides.
    pub fn new_for(local: &super::shared::Local) -> ClientShared {
        ClientShared {
            authenticated: Cell::new(!local.auth_required.get()),
            ..Default::default()
        }
    }

    /// Redis's `authRequired(c)`, for the decoder of this client's next request.
    pub fn auth_required(&self, local: &super::shared::Local) -> bool {
        local.auth_required.get() && !self.authenticated.get()
    }
}

/// Whether a batch must end after `args`: while a client is unauthenticated each request may
/// change what the next may send (AUTH, HELLO … AUTH), and RESET may log it out again, so the
/// next request is decoded only after it ran, as Redis decodes after every command.
/// `server_auth`: `Local::auth_required`, read once per batch.
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
    /// The connection's output (machine/output.rs).
    pub out: Rc<ConnOut>,
    /// Large bulk replies of the running batch that its output buffer does not copy: (offset
    /// in the batch output, body), in offset order; the batch output holds their headers and
    /// trailing CRLFs. `Server::deliver` interleaves them into `out` and empties this.
    pub big_out: Vec<(usize, Bytes)>,
    pub shared: Rc<ClientShared>,
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
    /// The Raft group that write went to (WAIT counts that group's replicas).
    pub repl_group: crate::replication::group::GroupId,
    /// Parked in a blocking command (CLIENT LIST flag `b`); the waiter itself is in
    /// `State::waiters`.
    pub blocked: bool,
    /// Channels, patterns and shard channels this client is subscribed to.
    pub pubsub: super::pubsub::ClientPubSub,
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
        out: impl IntoOutput,
        shared: Rc<ClientShared>,
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
            out: out.into_output(id),
            big_out: Vec::new(),
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
            repl_group: crate::replication::group::GroupId::HOME,
            blocked: false,
            pubsub: Default::default(),
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
        self.shared.authenticated.set(self.authenticated);
        self.shared.in_multi.set(self.multi.is_some());
    }

    pub fn resp3(&self) -> bool {
        self.resp == 3
    }

    /// Appends output outside of a batch reply (a large pub/sub message, a MONITOR line),
    /// by reference when large.
    pub fn push(&mut self, data: Bytes, batch_done: bool) {
        self.out.put(data);
        if batch_done {
            self.out.batch_done(false);
        }
    }

    /// Appends a push (a copy): the connection writes its output once per loop turn, so a
    /// burst of messages to one subscriber leaves in one write, as Redis writes a client's
    /// buffer in `beforeSleep`.
    pub fn defer(&mut self, data: &[u8]) {
        self.out.extend(data);
    }

    /// Output not written yet, held output included (output limits, CLIENT LIST `omem`).
    pub fn pending_out(&self) -> usize {
        self.out.len()
    }

    /// The connection closes at once (CLIENT KILL, output limits).
    pub fn kill(&self) {
        self.out.kill();
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
        let omem = c.pending_out();
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
