//! deadbolt as a replica of a Redis master, as Redis 7.0's replication.c does it.
//!
//! The master link runs on its own thread (`start`): it connects, sends PING, AUTH (with
//! `masteruser`/`masterauth` when set), `REPLCONF listening-port`, `REPLCONF capa eof capa
//! psync2` and `PSYNC <replid> <offset+1>` (`? -1` the first time), then reads either
//! `+FULLRESYNC <replid> <offset>` and the RDB payload (`$<len>` or the diskless
//! `$EOF:<40 bytes>` form) or `+CONTINUE [<new replid>]`, and then the command stream. It
//! hands the payload and the stream's commands to the executor (`exec::Msg::Repl`), which
//! replaces the dataset with the payload (flush, then load) and applies each command as
//! Redis applies its master client's (`handle`): no reply goes back but `REPLCONF ACK
//! <offset>` once a second and after `REPLCONF GETACK`. The offset counts the stream's bytes
//! per whole command (a MULTI…EXEC block counts when its EXEC arrives), so after a dropped
//! link the next PSYNC asks exactly for the first byte not applied and the master answers
//! `+CONTINUE` while its backlog still holds it.
//!
//! A replica leaves expiry to its master (`store::Expiry`): its clients read a key past its
//! deadline as absent, the master's commands still find it, and the master's DEL removes it.
//! `REPLICAOF NO ONE` (`replicaof`) ends the link, keeps the data and takes expiry back.

use crate::clock::unix_ms;
use crate::exec::{Inbox, Msg, Server};
use crate::machine::replica_link::{LinkShared, LinkState, MasterOf};
use crate::machine::State;
use crate::protocol::decode::{DecodeLimits, Decoder};
use crate::store::Expiry;
use bytes::{Buf, Bytes, BytesMut};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the link hands the executor; `gen` names the link (a later REPLICAOF ignores an older
/// one's messages).
#[derive(Debug)]
pub enum Event {
    /// A full resynchronisation: the master's replication id and offset, and its dataset.
    FullSync {
        gen: u64,
        replid: String,
        offset: u64,
        rdb: Vec<u8>,
    },
    /// A partial resynchronisation was accepted: the stream goes on from the offset applied,
    /// under `replid` (the master's new id when it changed, Redis's PSYNC2).
    Continue { gen: u64, replid: String },
    /// Commands of the stream, in order, each unit with the stream offset after it.
    Units { gen: u64, units: Vec<Unit> },
}

/// One unit of the stream: a command, or the commands of a MULTI…EXEC block (empty for PING
/// and REPLCONF, which only move the offset).
#[derive(Debug)]
pub struct Unit {
    pub cmds: Vec<Vec<Bytes>>,
    pub end: u64,
}

/// What the link needs to know to run.
pub struct LinkConfig {
    pub host: String,
    pub port: u16,
    pub masteruser: String,
    pub masterauth: String,
    pub listening_port: u16,
    pub announce_ip: String,
    pub timeout: Duration,
    /// The history to continue (PSYNC replid offset+1); None: `? -1`.
    pub resume: Option<(String, u64)>,
}

static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Longest line the link reads from its master before the command stream (Redis's
/// PROTO_INLINE_MAX_SIZE); a longer one is a protocol error.
const LINE_MAX: usize = 64 * 1024;
/// Stream bytes handed to the executor but not yet applied past which the link stops reading
/// from the master (the executor's inbox is unbounded), and the largest MULTI…EXEC block the
/// link holds before its EXEC (a larger one is a protocol error).
const QUEUED_MAX: u64 = 64 * 1024 * 1024;
/// The most an RDB payload of announced length reserves before its bytes arrive.
const PAYLOAD_RESERVE_MAX: usize = 1 << 20;
/// The largest offset or payload length a master may announce (Redis's are `long long`).
const NUMBER_MAX: u64 = i64::MAX as u64;

/// REPLICAOF on the executor (`Host::replicaof`). `Some(host, port)`: follow that master,
/// ending the link to another; `None` (NO ONE): stop following, keep the data, become a master
/// with a new replication id (the old one and its offset stay valid as replid2, Redis's
/// shiftReplicationId), and take expiry back.
pub fn replicaof(
    state: &mut State,
    inbox: Option<&Inbox>,
    target: Option<(String, u16)>,
    at_start: bool,
) -> Result<(), String> {
    let previous = state.replica.master.take();
    // CONFIG GET replicaof answers the master followed now, as Redis's getter reads masterhost.
    let value = target
        .as_ref()
        .map_or_else(String::new, |(h, p)| format!("{h} {p}"));
    let _ = state.config.set("replicaof", &value);
    if let Some(m) = previous.as_ref() {
        m.link.stop.store(true, Ordering::Release);
    }
    let Some((host, port)) = target else {
        if previous.is_some() {
            let old = std::mem::replace(&mut state.repl_id, crate::machine::random_hex40());
            let offset = state.replica.offset;
            tracing::warn!(
                "Setting secondary replication ID to {old}, valid up to offset: {}. New replication ID is {}",
                offset.saturating_add(1),
                state.repl_id
            );
            state.replica.replid2 = Some((old, offset.saturating_add(1)));
            // The stream this server now masters goes on from the offset it reached.
            state.redis_master.offset = offset;
            set_expiry(state, Expiry::Remove);
        }
        return Ok(());
    };
    let Some(inbox) = inbox else {
        return Err("the master link cannot start here".into());
    };
    // Its own stream's history ends here (its Redis replicas are dropped): the next one it
    // masters starts after a promotion.
    state.redis_master.disconnect_all();
    // A replica that followed a master asks the next one to continue that history (Redis
    // caches its master); a master's own history is asked for as well (Redis's
    // replicationCacheMasterUsingMyself), which a master of another history refuses with
    // +FULLRESYNC.
    // At start-up there is no such history (Redis has no cached master then): `PSYNC ? -1`.
    let resume = (!at_start).then(|| (state.repl_id.clone(), state.replica.offset));
    let gen = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
    let link = Arc::new(LinkShared::default());
    link.applied.store(state.replica.offset, Ordering::Release);
    link.read_offset
        .store(state.replica.offset, Ordering::Relaxed);
    let cfg = LinkConfig {
        host: host.clone(),
        port,
        masteruser: state.config.compat_value("masteruser").to_owned(),
        masterauth: state.config.masterauth.clone().unwrap_or_default(),
        listening_port: announce_port(state),
        announce_ip: state.config.compat_value("replica-announce-ip").to_owned(),
        timeout: Duration::from_secs(
            state
                .config
                .compat_value("repl-timeout")
                .parse::<u64>()
                .unwrap_or(60)
                .max(1),
        ),
        resume,
    };
    tracing::info!("Connecting to MASTER {host}:{port}");
    start(cfg, gen, link.clone(), inbox.clone());
    state.replica.master = Some(MasterOf {
        host,
        port,
        gen,
        link,
        synced_at: None,
        uncached: at_start,
    });
    set_expiry(state, Expiry::Hide);
    Ok(())
}

fn announce_port(state: &State) -> u16 {
    let announced = state
        .config
        .compat_value("replica-announce-port")
        .parse::<u16>()
        .unwrap_or(0);
    if announced != 0 {
        announced
    } else {
        state.config.port
    }
}

fn set_expiry(state: &mut State, e: Expiry) {
    for db in state.dbs.iter_mut() {
        db.expiry = e;
    }
}

/// The executor's side: applies what the link `gen` sent, if it is still the link followed.
pub fn handle(server: &mut Server, ev: Event) {
    let gen = match &ev {
        Event::FullSync { gen, .. } | Event::Continue { gen, .. } | Event::Units { gen, .. } => {
            *gen
        }
    };
    let Some(master) = server.state.replica.master.as_ref() else {
        return;
    };
    if master.gen != gen {
        return;
    }
    let link = master.link.clone();
    match ev {
        Event::FullSync {
            replid,
            offset,
            rdb,
            ..
        } => full_sync(server, &link, replid, offset, &rdb),
        Event::Continue { replid, .. } => {
            if replid != server.state.repl_id {
                tracing::info!("Master replication ID changed to {replid}");
                let old = std::mem::replace(&mut server.state.repl_id, replid);
                server.state.replica.replid2 =
                    Some((old, server.state.replica.offset.saturating_add(1)));
            }
            let offset = server.state.replica.offset;
            if let Some(m) = server.state.replica.master.as_mut() {
                m.synced_at.get_or_insert(offset);
            }
            server.state.replica.backlog_from.get_or_insert(offset);
            link.applied
                .store(server.state.replica.offset, Ordering::Release);
        }
        Event::Units { units, .. } => {
            if server
                .state
                .replica
                .master
                .as_ref()
                .is_none_or(|m| m.synced_at.is_none())
            {
                // The dataset these follow was not loaded: the link is resynchronising.
                return;
            }
            let now = unix_ms();
            set_expiry(&mut server.state, Expiry::Keep);
            for unit in units {
                if !unit.cmds.is_empty() {
                    if let Err(e) = server.apply_commands(unit.cmds, now) {
                        tracing::warn!("Command from the MASTER not applied: {e}");
                    }
                    server.end_unit();
                }
                server.state.replica.offset = unit.end;
            }
            set_expiry(&mut server.state, Expiry::Hide);
            link.applied
                .store(server.state.replica.offset, Ordering::Release);
        }
    }
}

/// Redis's readSyncBulkPayload after the transfer: the old dataset goes (flush, as
/// emptyData), the master's is loaded with every key as the master holds it (a replica keeps
/// keys past their deadline until the master deletes them), and the stream starts at
/// `offset` under the master's replication id.
fn full_sync(server: &mut Server, link: &LinkShared, replid: String, offset: u64, rdb: &[u8]) {
    let started = Instant::now();
    tracing::info!("MASTER <-> REPLICA sync: Flushing old data");
    // emptyData: the function libraries go with the keys; the master's come with its RDB.
    server.state.functions = None;
    server.state.signal_flushed_db(None);
    for db in server.state.dbs.iter_mut() {
        server.state.changes_since_save += db.len() as u64;
        db.clear();
    }
    tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
    let now = unix_ms();
    let databases = server.state.dbs.len();
    let dbs = &mut server.state.dbs;
    for db in dbs.iter_mut() {
        db.note_time(now);
    }
    // Keys dead by this clock are loaded too: the master deletes them (Redis's rdbLoad on a
    // replica), and a clock a little ahead of the master's must not lose a live lock.
    let loaded = crate::persist::rdb_file::decode(rdb, 0, databases, |db, key, value, at| {
        dbs[db].set(&key, value, at);
    });
    // The stream's first command is a SELECT; until then the master client is in db 0.
    let select0 = vec![vec![
        Bytes::from_static(b"SELECT"),
        Bytes::from_static(b"0"),
    ]];
    let _ = server.apply_commands(select0, now);
    let loaded = loaded.and_then(|l| {
        server
            .load_functions(&l.functions, false)
            .map_err(|e| format!("Failed loading library, {e}"))?;
        Ok(l)
    });
    match loaded {
        Ok(l) => {
            server.end_unit();
            server.state.repl_id = replid;
            server.state.replica.offset = offset;
            server.state.replica.replid2 = None;
            server.state.replica.backlog_from = Some(offset);
            if let Some(m) = server.state.replica.master.as_mut() {
                m.synced_at = Some(offset);
            }
            link.applied.store(offset, Ordering::Release);
            link.loaded.store(true, Ordering::Release);
            tracing::info!(
                "MASTER <-> REPLICA sync: Finished with success ({} keys, {:.3} seconds)",
                l.keys,
                started.elapsed().as_secs_f64()
            );
        }
        Err(e) => {
            // What was loaded is dropped, as Redis empties the dataset after a failed load.
            server.state.functions = None;
            for db in server.state.dbs.iter_mut() {
                db.clear();
            }
            server.end_unit();
            if let Some(m) = server.state.replica.master.as_mut() {
                m.synced_at = None;
            }
            tracing::warn!("Failed trying to load the MASTER synchronization DB from socket: {e}");
            link.resync.store(true, Ordering::Release);
        }
    }
}

/// Why the link ended.
enum End {
    /// REPLICAOF NO ONE / another master / shutdown: the thread ends.
    Stop,
    /// Reconnect (after a pause when `wait`).
    Retry { wait: bool, why: String },
}

type LinkResult<T> = Result<T, End>;

fn retry<T>(why: impl Into<String>) -> LinkResult<T> {
    Err(End::Retry {
        wait: true,
        why: why.into(),
    })
}

/// Starts the master link's thread.
pub fn start(cfg: LinkConfig, gen: u64, shared: Arc<LinkShared>, inbox: Inbox) {
    let spawned = std::thread::Builder::new()
        .name("master-link".into())
        .spawn(move || run(cfg, gen, shared, inbox));
    if let Err(e) = spawned {
        tracing::warn!("Can't start the master link: {e}");
    }
}

struct Link {
    cfg: LinkConfig,
    gen: u64,
    shared: Arc<LinkShared>,
    inbox: Inbox,
    /// The history to ask for: (replid, offset applied or sent).
    history: Option<(String, u64)>,
}

fn run(cfg: LinkConfig, gen: u64, shared: Arc<LinkShared>, inbox: Inbox) {
    let history = cfg.resume.clone();
    let mut link = Link {
        cfg,
        gen,
        shared,
        inbox,
        history,
    };
    let mut ever_up = false;
    loop {
        if link.stopped() {
            return;
        }
        link.shared.set_state(LinkState::Connect);
        match link.session(&mut ever_up) {
            Err(End::Stop) | Ok(()) => return,
            Err(End::Retry { wait, why }) => {
                if link.stopped() {
                    return;
                }
                tracing::warn!("{why}");
                // ROLE says `connect` until the next attempt (Redis's REPL_STATE_CONNECT).
                link.shared.set_state(LinkState::Connect);
                if ever_up && link.shared.down_since_ms.load(Ordering::Relaxed) == 0 {
                    link.shared
                        .down_since_ms
                        .store(unix_ms(), Ordering::Relaxed);
                }
                if wait {
                    // Redis's replicationCron retries once a second.
                    let until = Instant::now() + Duration::from_secs(1);
                    while Instant::now() < until {
                        if link.stopped() {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
                tracing::info!("Reconnecting to MASTER {}:{}", link.cfg.host, link.cfg.port);
            }
        }
    }
}

/// The connection to the master and what has been read from it but not yet used.
struct Conn {
    s: TcpStream,
    buf: BytesMut,
}

impl Link {
    fn stopped(&self) -> bool {
        self.shared.stop.load(Ordering::Acquire) || self.inbox.is_closed()
    }

    fn send(&self, ev: Event) -> LinkResult<()> {
        if self.stopped() || self.inbox.send(Msg::Repl(ev)).is_err() {
            return Err(End::Stop);
        }
        Ok(())
    }

    fn connect(&self) -> LinkResult<Conn> {
        self.shared.set_state(LinkState::Connecting);
        let addrs = (self.cfg.host.as_str(), self.cfg.port)
            .to_socket_addrs()
            .or_else(|e| retry(format!("Unable to connect to MASTER: {e}")))?;
        let mut last = String::from("no address");
        for a in addrs {
            match TcpStream::connect_timeout(&a, self.cfg.timeout) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    s.set_read_timeout(Some(Duration::from_millis(100)))
                        .or_else(|e| retry(format!("Unable to connect to MASTER: {e}")))?;
                    return Ok(Conn {
                        s,
                        buf: BytesMut::with_capacity(16 * 1024),
                    });
                }
                Err(e) => last = e.to_string(),
            }
        }
        retry(format!("Error condition on socket for SYNC: {last}"))
    }

    /// Reads more bytes into the buffer; Err when the link must end (EOF, error, timeout,
    /// stop).
    fn fill(&self, c: &mut Conn, deadline: Instant) -> LinkResult<usize> {
        let mut chunk = [0u8; 16 * 1024];
        if self.stopped() {
            return Err(End::Stop);
        }
        match c.s.read(&mut chunk) {
            // Redis reconnects at once (replicationHandleMasterDisconnection), so a partial
            // resynchronisation finds the backlog as fresh as possible.
            Ok(0) => Err(End::Retry {
                wait: false,
                why: "Connection with master lost.".into(),
            }),
            Ok(n) => {
                c.buf.extend_from_slice(&chunk[..n]);
                self.shared.last_io_ms.store(unix_ms(), Ordering::Relaxed);
                Ok(n)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                if Instant::now() >= deadline {
                    return retry("Timeout connecting to the MASTER...");
                }
                Ok(0)
            }
            Err(e) => retry(format!("Error reading from MASTER: {e}")),
        }
    }

    /// One line of a reply (without CR LF). Empty lines are the master's keepalive newlines.
    fn line(&self, c: &mut Conn) -> LinkResult<Bytes> {
        let deadline = Instant::now() + self.cfg.timeout;
        let mut scanned = 0;
        loop {
            match take_line(&mut c.buf, &mut scanned) {
                Ok(Some(line)) => return Ok(line),
                Ok(None) => {}
                Err(what) => return Err(self.protocol_error(what)),
            }
            self.fill(c, deadline)?;
        }
    }

    /// A protocol error from the master: logged as Redis logs its master client's, and the
    /// link is dropped (it reconnects and resynchronises).
    fn protocol_error(&self, what: &str) -> End {
        tracing::warn!(
            "Protocol error ({what}) from client: addr={}:{} flags=M",
            self.cfg.host,
            self.cfg.port
        );
        End::Retry {
            wait: true,
            why: "Connection with master lost.".into(),
        }
    }

    fn write(&self, c: &mut Conn, argv: &[&[u8]]) -> LinkResult<()> {
        let mut out = Vec::with_capacity(64);
        crate::persist::emit::command(&mut out, argv);
        c.s.write_all(&out)
            .or_else(|e| retry(format!("Error writing to MASTER: {e}")))
    }

    /// Sends a command and reads its one-line reply.
    fn ask(&self, c: &mut Conn, argv: &[&[u8]]) -> LinkResult<Bytes> {
        self.write(c, argv)?;
        loop {
            let l = self.line(c)?;
            if !l.is_empty() {
                return Ok(l);
            }
        }
    }

    fn session(&mut self, ever_up: &mut bool) -> LinkResult<()> {
        if self.shared.resync.swap(false, Ordering::AcqRel) {
            self.history = None;
        }
        let mut c = self.connect()?;
        self.shared.set_state(LinkState::Handshake);
        tracing::info!("MASTER <-> REPLICA sync started");
        // PING: any reply will do but one that says the master cannot serve us; -NOAUTH and
        // -NOPERM are fine before AUTH (Redis's syncWithMaster).
        let pong = self.ask(&mut c, &[b"PING"])?;
        if pong.first() == Some(&b'-')
            && !pong.starts_with(b"-NOAUTH")
            && !pong.starts_with(b"-NOPERM")
            && !pong.starts_with(b"-ERR operation not permitted")
        {
            return retry(format!(
                "Error reply to PING from master: '{}'",
                String::from_utf8_lossy(&pong)
            ));
        }
        tracing::info!("Master replied to PING, replication can continue...");
        if !self.cfg.masterauth.is_empty() {
            let pass = self.cfg.masterauth.as_bytes();
            let reply = if self.cfg.masteruser.is_empty() {
                self.ask(&mut c, &[b"AUTH", pass])?
            } else {
                self.ask(&mut c, &[b"AUTH", self.cfg.masteruser.as_bytes(), pass])?
            };
            if reply.first() == Some(&b'-') {
                return retry(format!(
                    "Unable to AUTH to MASTER: {}",
                    String::from_utf8_lossy(&reply)
                ));
            }
        }
        let port = self.cfg.listening_port.to_string();
        let reply = self.ask(&mut c, &[b"REPLCONF", b"listening-port", port.as_bytes()])?;
        if reply.first() == Some(&b'-') {
            tracing::info!(
                "(Non critical) Master does not understand REPLCONF listening-port: {}",
                String::from_utf8_lossy(&reply)
            );
        }
        if !self.cfg.announce_ip.is_empty() {
            let ip = self.cfg.announce_ip.clone();
            self.ask(&mut c, &[b"REPLCONF", b"ip-address", ip.as_bytes()])?;
        }
        let reply = self.ask(&mut c, &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])?;
        if reply.first() == Some(&b'-') {
            tracing::info!(
                "(Non critical) Master does not understand REPLCONF capa: {}",
                String::from_utf8_lossy(&reply)
            );
        }
        let (id, from) = match &self.history {
            Some((id, off)) => {
                tracing::info!(
                    "Trying a partial resynchronization (request {id}:{}).",
                    off.saturating_add(1)
                );
                (id.clone(), off.saturating_add(1).to_string())
            }
            None => {
                tracing::info!("Partial resynchronization not possible (no cached master)");
                ("?".to_owned(), "-1".to_owned())
            }
        };
        let reply = self.ask(&mut c, &[b"PSYNC", id.as_bytes(), from.as_bytes()])?;
        let text = String::from_utf8_lossy(&reply).into_owned();
        let mut offset;
        if let Some(rest) = text.strip_prefix("+FULLRESYNC ") {
            let mut parts = rest.split(' ');
            let replid = parts.next().unwrap_or("").to_owned();
            offset = parts
                .next()
                .and_then(|o| o.parse::<u64>().ok())
                .unwrap_or(0);
            if replid.len() != 40 || offset > NUMBER_MAX {
                return retry(format!(
                    "Master replied with wrong +FULLRESYNC syntax: {text}"
                ));
            }
            tracing::info!("Full resync from master: {replid}:{offset}");
            self.shared.set_state(LinkState::Sync);
            let rdb = self.payload(&mut c)?;
            tracing::info!(
                "MASTER <-> REPLICA sync: receiving {} bytes from master to disk",
                rdb.len()
            );
            self.history = Some((replid.clone(), offset));
            self.shared.loaded.store(false, Ordering::Release);
            self.send(Event::FullSync {
                gen: self.gen,
                replid,
                offset,
                rdb,
            })?;
            // The first ACK (which puts this replica online on a diskless master) goes once
            // the dataset is loaded, as Redis sends it after loading.
            let until = Instant::now() + self.cfg.timeout;
            while !self.shared.loaded.load(Ordering::Acquire) {
                if self.stopped() {
                    return Err(End::Stop);
                }
                if self.shared.resync.load(Ordering::Acquire) || Instant::now() > until {
                    return retry("The MASTER's dataset could not be loaded");
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        } else if let Some(rest) = text.strip_prefix("+CONTINUE") {
            let Some((old, off)) = self.history.clone() else {
                return retry("Unexpected +CONTINUE without a cached master");
            };
            let replid = match rest.trim() {
                new if new.len() == 40 => new.to_owned(),
                _ => old,
            };
            tracing::info!(
                "Successful partial resynchronization with master. MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization."
            );
            offset = off;
            self.history = Some((replid.clone(), off));
            self.send(Event::Continue {
                gen: self.gen,
                replid,
            })?;
        } else if text.starts_with("-NOMASTERLINK") || text.starts_with("-LOADING") {
            return retry(format!(
                "Master is currently unable to PSYNC but should be in the future: {text}"
            ));
        } else {
            return retry(format!("Unexpected reply to PSYNC from master: {text}"));
        }
        self.shared.set_state(LinkState::Connected);
        self.shared.down_since_ms.store(0, Ordering::Relaxed);
        *ever_up = true;
        self.stream(&mut c, &mut offset)
    }

    /// The RDB payload after +FULLRESYNC: `$<len>\r\n<len bytes>` or `$EOF:<mark>\r\n<bytes>
    /// <mark>` (diskless), after any keepalive newlines.
    fn payload(&self, c: &mut Conn) -> LinkResult<Vec<u8>> {
        let head = loop {
            let l = self.line(c)?;
            if !l.is_empty() {
                break l;
            }
        };
        if head.first() != Some(&b'$') {
            return retry(format!(
                "Bad protocol from MASTER, the first byte is not '$' (we received '{}'), are you sure the host and port are right?",
                String::from_utf8_lossy(&head)
            ));
        }
        let deadline = || Instant::now() + self.cfg.timeout;
        if let Some(mark) = head.strip_prefix(b"$EOF:") {
            if mark.len() != 40 {
                return retry("Bad EOF mark from MASTER");
            }
            let mark = mark.to_vec();
            self.shared.sync_total.store(0, Ordering::Relaxed);
            let mut rdb = Vec::new();
            loop {
                // Everything but the last 40 bytes is payload for sure.
                if c.buf.len() >= 40 && c.buf.ends_with(&mark) {
                    let n = c.buf.len() - 40;
                    rdb.extend_from_slice(&c.buf[..n]);
                    c.buf.clear();
                    return Ok(rdb);
                }
                if c.buf.len() > 64 * 1024 {
                    let n = c.buf.len() - 40;
                    rdb.extend_from_slice(&c.buf[..n]);
                    c.buf.advance(n);
                }
                self.shared
                    .sync_read
                    .store((rdb.len() + c.buf.len()) as u64, Ordering::Relaxed);
                self.fill(c, deadline())?;
            }
        }
        let len = std::str::from_utf8(&head[1..])
            .ok()
            .and_then(|n| n.parse::<u64>().ok())
            .filter(|&n| n <= NUMBER_MAX)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| self.protocol_error("invalid bulk length"))?;
        self.shared.sync_total.store(len as u64, Ordering::Relaxed);
        // The payload grows with what arrives: the announced length is the master's word.
        let mut rdb = Vec::with_capacity(len.min(PAYLOAD_RESERVE_MAX));
        loop {
            let take = (len - rdb.len()).min(c.buf.len());
            rdb.extend_from_slice(&c.buf[..take]);
            c.buf.advance(take);
            self.shared
                .sync_read
                .store(rdb.len() as u64, Ordering::Relaxed);
            if rdb.len() == len {
                return Ok(rdb);
            }
            self.fill(c, deadline())?;
        }
    }

    /// The command stream: decoded into units handed to the executor; REPLCONF ACK once a
    /// second and on GETACK. `offset`: the stream offset of the last whole unit read.
    fn stream(&mut self, c: &mut Conn, offset: &mut u64) -> LinkResult<()> {
        let mut split = Splitter::new(*offset);
        let mut units: Vec<Unit> = Vec::new();
        let mut last_ack = Instant::now() - Duration::from_secs(2);
        let mut last_io = Instant::now();
        loop {
            loop {
                match split.next(&mut c.buf) {
                    Ok(None) => break,
                    Ok(Some(Item::Unit(u))) => units.push(u),
                    Ok(Some(Item::GetAck(upto))) => {
                        // The ACK covers everything before the GETACK (Redis acks the offset
                        // processed before the command that asks).
                        self.flush(&mut units)?;
                        self.await_applied(upto);
                        // Only what the executor applied: a write acked but not applied would
                        // count for the master's WAIT and be lost on promotion.
                        let applied = self.shared.applied.load(Ordering::Acquire);
                        self.ack(c, upto.min(applied))?;
                        last_ack = Instant::now();
                    }
                    Err(what) => return Err(self.protocol_error(&what)),
                }
            }
            *offset = split.offset;
            self.shared.read_offset.store(
                split.offset + split.pending() + c.buf.len() as u64,
                Ordering::Relaxed,
            );
            self.flush(&mut units)?;
            if let Some(h) = self.history.as_mut() {
                h.1 = *offset;
            }
            if self.shared.resync.load(Ordering::Acquire) {
                return Err(End::Retry {
                    wait: false,
                    why: "Resynchronising with the MASTER: the dataset it sent could not be loaded"
                        .into(),
                });
            }
            if last_ack.elapsed() >= Duration::from_secs(1) {
                let applied = self.shared.applied.load(Ordering::Acquire);
                self.ack(c, applied)?;
                last_ack = Instant::now();
            }
            if self.hold_back(c, *offset, &mut last_ack)? {
                // The master was not read meanwhile: its silence is not known.
                last_io = Instant::now();
            }
            let n = self.fill(c, Instant::now() + self.cfg.timeout)?;
            if n > 0 {
                last_io = Instant::now();
            } else if last_io.elapsed() > self.cfg.timeout {
                return retry("MASTER timeout: no data nor PING received...");
            }
        }
    }

    fn flush(&self, units: &mut Vec<Unit>) -> LinkResult<()> {
        if units.is_empty() {
            return Ok(());
        }
        self.send(Event::Units {
            gen: self.gen,
            units: std::mem::take(units),
        })
    }

    /// Backpressure: while more than QUEUED_MAX bytes of the stream handed to the executor
    /// (up to `sent`) are not applied yet, the master is not read (its bytes wait in the
    /// kernel's buffers and then in its own output buffer); the ACKs go on once a second.
    /// True when it waited.
    fn hold_back(&self, c: &mut Conn, sent: u64, last_ack: &mut Instant) -> LinkResult<bool> {
        let mut waited = false;
        loop {
            let applied = self.shared.applied.load(Ordering::Acquire);
            if sent.saturating_sub(applied) <= QUEUED_MAX {
                return Ok(waited);
            }
            if self.stopped() {
                return Err(End::Stop);
            }
            if self.shared.resync.load(Ordering::Acquire) {
                return Ok(waited);
            }
            if last_ack.elapsed() >= Duration::from_secs(1) {
                self.ack(c, applied)?;
                *last_ack = Instant::now();
            }
            waited = true;
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Waits (briefly) until the executor has applied the stream up to `offset`.
    fn await_applied(&self, offset: u64) {
        let until = Instant::now() + Duration::from_secs(1);
        while self.shared.applied.load(Ordering::Acquire) < offset && Instant::now() < until {
            if self.stopped() {
                return;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn ack(&self, c: &mut Conn, offset: u64) -> LinkResult<()> {
        let off = offset.to_string();
        self.write(c, &[b"REPLCONF", b"ACK", off.as_bytes()])
    }
}

/// Takes one line (without CR LF) from `buf`, scanning only the bytes after `scanned` (those
/// before it hold no newline); None while it holds no whole line; Err when the line grows past
/// LINE_MAX.
fn take_line(buf: &mut BytesMut, scanned: &mut usize) -> Result<Option<Bytes>, &'static str> {
    let from = (*scanned).min(buf.len());
    if let Some(i) = buf[from..].iter().position(|&b| b == b'\n') {
        let nl = from + i;
        *scanned = 0;
        let mut line = buf.split_to(nl + 1).freeze();
        line.truncate(nl);
        if line.last() == Some(&b'\r') {
            line.truncate(nl - 1);
        }
        return Ok(Some(line));
    }
    *scanned = buf.len();
    if buf.len() > LINE_MAX {
        return Err("too big inline request");
    }
    Ok(None)
}

/// What the stream splits into.
#[derive(Debug)]
enum Item {
    Unit(Unit),
    /// REPLCONF GETACK: the master wants an ACK of the offset before it (the GETACK itself
    /// then follows as an empty unit).
    GetAck(u64),
}

/// Splits the command stream into units and counts its offset as Redis does: every byte of a
/// command once the command is whole, a MULTI…EXEC block's bytes when its EXEC arrives (a link
/// that drops inside a block resumes before its MULTI).
struct Splitter {
    dec: Decoder,
    limits: DecodeLimits,
    /// The offset after the last whole unit.
    offset: u64,
    /// A MULTI block being read: its commands and the bytes it has taken so far.
    multi: Option<(Vec<Vec<Bytes>>, u64)>,
    /// Bytes consumed that belong to no command yet (blank keepalive lines).
    carry: u64,
    /// A GETACK whose empty unit is still to be returned.
    after_getack: Option<u64>,
    /// The most bytes a MULTI block may take before its EXEC.
    multi_max: u64,
}

impl Splitter {
    fn new(offset: u64) -> Splitter {
        Splitter {
            dec: Decoder::new(),
            limits: DecodeLimits::default(),
            offset,
            multi: None,
            carry: 0,
            after_getack: None,
            multi_max: QUEUED_MAX,
        }
    }

    /// Bytes read but not yet counted in `offset`.
    fn pending(&self) -> u64 {
        self.multi.as_ref().map_or(0, |m| m.1) + self.carry
    }

    /// The next item from `buf`; None when it holds no whole one; Err: the protocol error
    /// (as Redis's log names it) that drops the link.
    fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Item>, String> {
        if let Some(end) = self.after_getack.take() {
            self.offset = end;
            return Ok(Some(Item::Unit(Unit {
                cmds: Vec::new(),
                end,
            })));
        }
        loop {
            let had = buf.len();
            let decoded = self.dec.decode(buf, &self.limits);
            self.carry += (had - buf.len()) as u64;
            let decoded = decoded.map_err(|e| {
                let reply = e.reply();
                let text = String::from_utf8_lossy(&reply);
                let text = text.trim_end();
                text.strip_prefix("-ERR Protocol error: ")
                    .unwrap_or(text)
                    .to_owned()
            })?;
            let Some(argv) = decoded else {
                return Ok(None);
            };
            let used = std::mem::take(&mut self.carry);
            let Some(name) = argv.first() else { continue };
            if let Some((cmds, bytes)) = self.multi.as_mut() {
                *bytes += used;
                if *bytes > self.multi_max {
                    return Err("too big MULTI block".into());
                }
                if !name.eq_ignore_ascii_case(b"exec") {
                    cmds.push(argv);
                    continue;
                }
                self.offset += *bytes;
                let cmds = std::mem::take(cmds);
                self.multi = None;
                return Ok(Some(Item::Unit(Unit {
                    cmds,
                    end: self.offset,
                })));
            }
            if name.eq_ignore_ascii_case(b"multi") {
                self.multi = Some((Vec::new(), used));
                continue;
            }
            if name.eq_ignore_ascii_case(b"replconf") {
                if argv
                    .get(1)
                    .is_some_and(|a| a.eq_ignore_ascii_case(b"getack"))
                {
                    self.after_getack = Some(self.offset + used);
                    return Ok(Some(Item::GetAck(self.offset)));
                }
                self.offset += used;
                return Ok(Some(Item::Unit(Unit {
                    cmds: Vec::new(),
                    end: self.offset,
                })));
            }
            self.offset += used;
            // PING only keeps the link alive.
            let cmds = if name.eq_ignore_ascii_case(b"ping") {
                Vec::new()
            } else {
                vec![argv]
            };
            return Ok(Some(Item::Unit(Unit {
                cmds,
                end: self.offset,
            })));
        }
    }
}

/// The `replicaof host port` directive (config file or command line): the master to follow
/// from the start, as Redis's loadServerConfig sets masterhost.
pub fn configured(config: &crate::config::Config) -> Option<(String, u16)> {
    let v = config.compat_value("replicaof").trim();
    if v.is_empty() {
        return None;
    }
    let mut parts = v.split_whitespace();
    let host = parts.next()?.to_owned();
    let port = parts.next()?.parse::<u16>().ok()?;
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        crate::persist::emit::command(&mut out, &argv);
        out
    }

    #[test]
    fn the_stream_splits_into_units_with_redis_offsets() {
        let parts = [
            cmd(&["SELECT", "0"]),
            cmd(&["SET", "k", "v", "PXAT", "1700000000000"]),
            cmd(&["MULTI"]),
            cmd(&["INCR", "n"]),
            cmd(&["DEL", "k"]),
            cmd(&["EXEC"]),
            cmd(&["PING"]),
            cmd(&["REPLCONF", "GETACK", "*"]),
            cmd(&["PEXPIREAT", "n", "1700000000000"]),
        ];
        let all: Vec<u8> = parts.concat();
        let ends: Vec<u64> = parts
            .iter()
            .scan(100u64, |at, p| {
                *at += p.len() as u64;
                Some(*at)
            })
            .collect();
        // Fed a byte at a time, as a slow link might deliver it.
        let mut split = Splitter::new(100);
        let mut buf = BytesMut::new();
        let mut items = Vec::new();
        for (fed, &b) in all.iter().enumerate() {
            buf.extend_from_slice(&[b]);
            while let Some(item) = split.next(&mut buf).unwrap() {
                items.push(item);
            }
            // What was read is counted once: whole units, or pending, or still in the buffer.
            assert_eq!(
                split.offset + split.pending() + buf.len() as u64,
                100 + fed as u64 + 1
            );
        }
        let shape: Vec<(String, u64)> = items
            .iter()
            .map(|i| match i {
                Item::Unit(u) => (
                    u.cmds
                        .iter()
                        .map(|c| String::from_utf8_lossy(&c[0]).into_owned())
                        .collect::<Vec<_>>()
                        .join(","),
                    u.end,
                ),
                Item::GetAck(at) => ("GETACK".to_string(), *at),
            })
            .collect();
        let want: Vec<(String, u64)> = vec![
            ("SELECT".into(), ends[0]),
            ("SET".into(), ends[1]),
            ("INCR,DEL".into(), ends[5]),
            ("".into(), ends[6]),
            ("GETACK".into(), ends[6]),
            ("".into(), ends[7]),
            ("PEXPIREAT".into(), ends[8]),
        ];
        assert_eq!(shape, want);
        assert_eq!(split.offset, 100 + all.len() as u64);
    }

    #[test]
    fn a_block_cut_short_is_not_counted() {
        let mut split = Splitter::new(0);
        let set = cmd(&["SET", "a", "1"]);
        let mut buf =
            BytesMut::from(&[set.clone(), cmd(&["MULTI"]), cmd(&["INCR", "n"])].concat()[..]);
        let Some(Item::Unit(u)) = split.next(&mut buf).unwrap() else {
            panic!("no unit");
        };
        assert_eq!(u.end, set.len() as u64);
        assert!(split.next(&mut buf).unwrap().is_none());
        // The offset a PSYNC resumes from stays before the MULTI.
        assert_eq!(split.offset, set.len() as u64);
        assert!(split.pending() > 0);
    }
    #[test]
    fn a_reply_line_is_capped_and_scanned_once() {
        let mut buf = BytesMut::new();
        let mut scanned = 0;
        buf.extend_from_slice(b"+FULLRES");
        assert_eq!(take_line(&mut buf, &mut scanned), Ok(None));
        assert_eq!(scanned, 8);
        buf.extend_from_slice(b"YNC x 0\r\n$5\r\n");
        let line = take_line(&mut buf, &mut scanned).unwrap().unwrap();
        assert_eq!(&line[..], b"+FULLRESYNC x 0");
        assert_eq!(&buf[..], b"$5\r\n");
        assert_eq!(scanned, 0);
        // A master that never ends its line: refused once it passes the cap, not buffered on.
        let mut buf = BytesMut::new();
        let mut scanned = 0;
        let mut refused = false;
        for _ in 0..(LINE_MAX / 1024 + 2) {
            buf.extend_from_slice(&[b'a'; 1024]);
            match take_line(&mut buf, &mut scanned) {
                Ok(None) => {}
                Ok(Some(l)) => panic!("a line from no newline: {} bytes", l.len()),
                Err(e) => {
                    assert_eq!(e, "too big inline request");
                    refused = true;
                    break;
                }
            }
        }
        assert!(refused);
        assert!(buf.len() <= LINE_MAX + 1024);
    }

    #[test]
    fn a_multi_without_exec_is_capped() {
        let mut split = Splitter::new(0);
        split.multi_max = 4096;
        let mut buf = BytesMut::from(&cmd(&["MULTI"])[..]);
        let mut refused = None;
        for i in 0..1000 {
            buf.extend_from_slice(&cmd(&["SET", &format!("k{i}"), "0123456789"]));
            match split.next(&mut buf) {
                Ok(None) => {}
                Ok(Some(item)) => panic!("a unit before EXEC: {item:?}"),
                Err(e) => {
                    refused = Some((i, e));
                    break;
                }
            }
        }
        let (at, why) = refused.expect("the block was never refused");
        assert_eq!(why, "too big MULTI block");
        // Refused as soon as the block passes the cap, not later.
        assert!(at * 30 < 4096 + 200, "refused only after {at} commands");
        assert_eq!(split.offset, 0);
    }

    #[test]
    fn stream_protocol_errors_name_the_error_as_redis_logs_it() {
        let mut split = Splitter::new(0);
        let mut buf = BytesMut::from(&vec![b'a'; 70 * 1024][..]);
        assert_eq!(split.next(&mut buf).unwrap_err(), "too big inline request");
        let mut split = Splitter::new(0);
        let mut buf = BytesMut::from(&b"*1\r\n$abc\r\n"[..]);
        assert_eq!(split.next(&mut buf).unwrap_err(), "invalid bulk length");
    }
    /// Reads the REPLCONF ACK offsets the link sends for `secs` seconds.
    fn acks_for(master: &mut TcpStream, secs: f64) -> Vec<u64> {
        let until = Instant::now() + Duration::from_secs_f64(secs);
        let mut got = Vec::new();
        let mut buf = BytesMut::new();
        let mut dec = Decoder::new();
        master
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        while Instant::now() < until {
            let mut chunk = [0u8; 512];
            if let Ok(n) = master.read(&mut chunk) {
                buf.extend_from_slice(&chunk[..n]);
            }
            while let Some(argv) = dec.decode(&mut buf, &DecodeLimits::default()).unwrap() {
                assert_eq!(&argv[1][..], b"ACK");
                got.push(std::str::from_utf8(&argv[2]).unwrap().parse().unwrap());
            }
        }
        got
    }

    #[test]
    fn getack_acks_only_what_the_executor_applied() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let replica = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        replica
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let (mut master, _) = listener.accept().unwrap();
        let (inbox, mut executor) = tokio::sync::mpsc::unbounded_channel();
        let shared = Arc::new(LinkShared::default());
        let mut link = Link {
            cfg: LinkConfig {
                host: "127.0.0.1".into(),
                port: 0,
                masteruser: String::new(),
                masterauth: String::new(),
                listening_port: 0,
                announce_ip: String::new(),
                timeout: Duration::from_secs(30),
                resume: None,
            },
            gen: 1,
            shared: shared.clone(),
            inbox,
            history: None,
        };
        let running = std::thread::spawn(move || {
            let mut c = Conn {
                s: replica,
                buf: BytesMut::new(),
            };
            let mut offset = 0;
            let _ = link.stream(&mut c, &mut offset);
        });
        let set = cmd(&["SET", "k", "v"]);
        let getack = cmd(&["REPLCONF", "GETACK", "*"]);
        master
            .write_all(&[set.clone(), getack.clone()].concat())
            .unwrap();
        // The executor never applies the SET: no ACK may cover it, the GETACK's included
        // (sent after its 1 s wait).
        let acks = acks_for(&mut master, 2.5);
        assert!(acks.len() >= 2, "{acks:?}");
        assert!(acks.iter().all(|&a| a == 0), "{acks:?}");
        assert!(matches!(
            executor.try_recv(),
            Ok(Msg::Repl(Event::Units { .. }))
        ));
        // Once the executor applied both (the first GETACK as an empty unit), the next
        // GETACK is answered at once with the offset before it.
        let before = (set.len() + getack.len()) as u64;
        shared.applied.store(before, Ordering::Release);
        master.write_all(&getack).unwrap();
        let acks = acks_for(&mut master, 0.5);
        assert_eq!(acks.first(), Some(&before), "{acks:?}");
        shared.stop.store(true, Ordering::Release);
        running.join().unwrap();
    }
}
