//! The executor: one thread that owns every database and runs every command, so commands,
//! transactions and scripts are atomic without locks around the data. Connection tasks send it
//! whole pipelines; it answers each batch with one buffer.

pub mod blocking;
pub mod client;
pub mod net;
pub mod notify;
pub mod pubsub;
pub mod stats;

use crate::cmd::dispatch;
use crate::cmd::table::Table;
use crate::config::Config;
use crate::persist::aof::Aof;
use crate::persist::load::{LoadError, Loader, Step};
use crate::persist::{emit, Fsync, LogOp};
use crate::protocol::Frame;
use crate::store::waiters::{Waiters, Watches};
use crate::store::Db;
use bytes::{Bytes, BytesMut};
use client::{Client, Out};
use stats::Stats;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, Notify};

/// Redis version we answer as (clients gate features on it).
pub const REDIS_VERSION: &str = "7.0.15";

pub enum Msg {
    Connect(Box<Client>),
    Batch { id: u64, cmds: Vec<Vec<Bytes>> },
    Disconnect { id: u64 },
    Shutdown,
}

pub type Inbox = mpsc::UnboundedSender<Msg>;

/// What connection tasks and the accept loop read without asking the executor.
///
/// The first block is the configuration the network side enforces (the directives applied as
/// `config::Apply::Network` / `MaxClients`), published by `apply` at start and after each CONFIG
/// SET that changes one of them; a unit test checks that every such directive moves a field.
/// Reads are relaxed loads, once per accept or per decoded batch.
#[derive(Debug)]
pub struct Shared {
    /// `maxclients`: checked at accept.
    pub maxclients: AtomicUsize,
    /// `proto-max-bulk-len`: the decoders' bulk limit, for the next request of every client.
    pub proto_max_bulk_len: AtomicI64,
    /// `client-query-buffer-limit`: checked after each read, for every client.
    pub client_query_buffer_limit: AtomicUsize,
    /// `timeout`: idle clients are closed by the cron (plain TCP) or their task (TLS).
    pub timeout_secs: AtomicU64,
    /// `tcp-keepalive`: set on each socket at accept; open sockets keep theirs, as in Redis.
    pub tcp_keepalive: AtomicU64,
    /// `protected-mode` (with `requirepass`) in force: non-loopback clients are refused at accept.
    pub protected_mode: AtomicBool,
    /// `requirepass`: the default user needs a password or is off, so clients that have not
    /// authenticated are held to Redis's pre-AUTH request limits by the decoder.
    pub auth_required: AtomicBool,
    pub next_client_id: AtomicU64,
    pub connected_clients: AtomicUsize,
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    /// Set when a client asked for SHUTDOWN; the accept loop watches `shutdown_notify`.
    pub shutdown_requested: AtomicBool,
    pub shutdown_notify: Notify,
    /// A running script past busy-reply-threshold, SCRIPT KILL and SHUTDOWN NOSAVE requests.
    pub script: crate::script::busy::BusyState,
}

impl Shared {
    pub fn new(cfg: &Config) -> Shared {
        let s = Shared {
            next_client_id: AtomicU64::new(3),
            connected_clients: AtomicUsize::new(0),
            maxclients: AtomicUsize::new(0),
            proto_max_bulk_len: AtomicI64::new(0),
            client_query_buffer_limit: AtomicUsize::new(0),
            timeout_secs: AtomicU64::new(0),
            tcp_keepalive: AtomicU64::new(0),
            protected_mode: AtomicBool::new(false),
            auth_required: AtomicBool::new(false),
            total_connections: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            net_input_bytes: AtomicU64::new(0),
            net_output_bytes: AtomicU64::new(0),
            shutdown_requested: AtomicBool::new(false),
            shutdown_notify: Notify::new(),
            script: Default::default(),
        };
        s.apply(cfg);
        s
    }

    /// Publishes the limits connection tasks enforce (called again after CONFIG SET).
    pub fn apply(&self, cfg: &Config) {
        self.maxclients
            .store(cfg.maxclients as usize, Ordering::Relaxed);
        self.proto_max_bulk_len
            .store(cfg.proto_max_bulk_len, Ordering::Relaxed);
        self.client_query_buffer_limit
            .store(cfg.client_query_buffer_limit as usize, Ordering::Relaxed);
        self.timeout_secs.store(cfg.timeout, Ordering::Relaxed);
        self.tcp_keepalive
            .store(cfg.tcp_keepalive, Ordering::Relaxed);
        self.protected_mode
            .store(crate::server::protected::active(cfg), Ordering::Relaxed);
        self.auth_required
            .store(cfg.auth_required(), Ordering::Relaxed);
        self.script.set_users(&cfg.users);
    }

    /// Bytes written to a client's socket (INFO `total_net_output_bytes`). Counted where the
    /// socket took them, as Redis's `writeToClient`, so replies, pushes and wake-ups all count
    /// once, whichever path they left by.
    pub fn count_output(&self, n: usize) {
        if n > 0 {
            self.net_output_bytes.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    pub fn request_shutdown(&self) {
        self.shutdown_requested.store(true, Ordering::SeqCst);
        self.shutdown_notify.notify_waiters();
        self.shutdown_notify.notify_one();
    }
}

pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Everything the executor owns.
pub struct Server {
    pub dbs: Vec<Db>,
    pub config: Config,
    pub table: Arc<Table>,
    pub stats: Stats,
    pub shared: Arc<Shared>,
    /// Every connected client except the one whose batch is running (see `Ctx::client`).
    /// Boxed: a batch takes its client out and puts it back, which must not copy the struct.
    pub clients: HashMap<u64, Box<Client>, ahash::RandomState>,
    pub started: Instant,
    pub run_id: String,
    /// Set by SHUTDOWN: the executor stops after the current batch.
    pub shutting_down: bool,
    /// A shutdown was requested from outside the executor (SIGTERM/SIGINT, SHUTDOWN NOSAVE
    /// during a busy script) and a unit ended after it: from then on nothing is logged and no
    /// reply leaves, so the unit that was cut short (a script stopped midway) leaves no trace in
    /// the log, as Redis exits from inside its script hook, and nothing unlogged is acknowledged.
    stopping: bool,
    /// The append-only log, when `appendonly yes`.
    pub aof: Option<Aof>,
    /// Loading the log at start-up (commands meanwhile get -LOADING).
    pub loader: Option<Loader>,
    loader_client: Option<Box<Client>>,
    /// True while replaying the log: its commands are not logged again.
    replaying: bool,
    /// Changes made by the current unit of work, logged when it ends.
    pub log_ops: Vec<LogOp>,
    /// Replies held until the log is durable (`appendfsync always`).
    held: Vec<(client::OutSender, Out)>,
    /// `lock-restart-delay`: writes are refused until then.
    pub writes_refused_until: Option<Instant>,
    /// WATCHed keys and the clients whose transaction they invalidated.
    pub watches: Watches,
    /// Clients blocked on keys (see blocking.rs).
    pub waiters: Waiters,
    /// Ready keys are being served: nested commands leave new ready keys to the outer loop.
    pub serving_ready: bool,
    pub pubsub: pubsub::Registry,
    /// The client whose batch is running (0: none); it is not in `clients`.
    pub running: u64,
    /// Pushes for the running client, written into its batch output before the next reply.
    pub self_pushes: Vec<Frame>,
    /// Clients with deferred pushes (see `Client::deferred`).
    pub dirty: Vec<u64>,
    /// MONITOR, SLOWLOG and CLIENT PAUSE state (cmd/observe.rs).
    pub ops: crate::cmd::observe::OpsState,
    spare_out: Option<BytesMut>,
    /// When the cron runs next (every 1/`hz` s; `apply_change` re-arms it when hz changes).
    next_cron: Instant,
    /// When idle clients (`timeout`) are looked for next.
    next_idle_check: Instant,
}

impl Server {
    pub fn new(config: Config, shared: Arc<Shared>) -> Server {
        let dbs = (0..config.databases.max(1))
            .map(|_| Db::default())
            .collect();
        let table = Arc::new(Table::build());
        let stats = Stats::new(table.entries.len());
        let writes_refused_until = (config.lock_restart_delay > 0
            && !(config.appendonly && config.appendfsync == Fsync::Always))
            .then(|| Instant::now() + Duration::from_millis(config.lock_restart_delay));
        if writes_refused_until.is_some() {
            tracing::warn!(
                "Writes are refused for lock-restart-delay ({} ms): this start may have lost acknowledged writes",
                config.lock_restart_delay
            );
        }
        let loader = if config.appendonly {
            match Aof::files_to_load(&aof_dir(&config), &config.appendfilename) {
                Ok(files) => Some(Loader::new(files, config.aof_load_truncated)),
                Err(e) => fatal(&e),
            }
        } else {
            None
        };
        let (tx, _) = tokio::sync::mpsc::unbounded_channel();
        let nowhere: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
        let loader_client = Box::new(Client::new(0, nowhere, nowhere, tx, Default::default()));
        let mut server = Server {
            dbs,
            config,
            table,
            stats,
            shared,
            clients: HashMap::default(),
            started: Instant::now(),
            run_id: (0..40)
                .map(|_| fastrand::alphanumeric().to_ascii_lowercase())
                .collect(),
            shutting_down: false,
            stopping: false,
            ops: Default::default(),
            pubsub: Default::default(),
            running: 0,
            self_pushes: Vec::new(),
            dirty: Vec::new(),
            watches: Watches::default(),
            waiters: Waiters::default(),
            serving_ready: false,
            aof: None,
            loader,
            loader_client: Some(loader_client),
            replaying: false,
            log_ops: Vec::new(),
            held: Vec::new(),
            spare_out: None,
            writes_refused_until,
            next_cron: Instant::now(),
            next_idle_check: Instant::now(),
        };
        server.sync_created_recording();
        server
    }

    /// Records a change for the persistence log (nothing while loading or with the log off).
    pub fn record(&mut self, op: LogOp) {
        if self.aof.is_some() && !self.replaying {
            self.log_ops.push(op);
        }
    }

    /// Ends a unit of work (a command, an EXEC, a script, an expiry sweep): its changes go to
    /// the log as one atomic block holding each changed key's final state.
    pub fn end_unit(&mut self) {
        if self.stopping || self.shared.script.shutdown.load(Ordering::Acquire) {
            self.stopping = true;
            self.shutting_down = true;
            self.log_ops.clear();
            return;
        }
        if self.log_ops.is_empty() {
            return;
        }
        let ops = std::mem::take(&mut self.log_ops);
        let Some(aof) = self.aof.as_mut() else { return };
        let mut seen = std::collections::HashSet::new();
        let mut keep = vec![false; ops.len()];
        for (i, op) in ops.iter().enumerate().rev() {
            keep[i] = match op {
                LogOp::Key(db, k) => seen.insert((*db, k.clone())),
                _ => true,
            };
        }
        let wrapped = keep.iter().filter(|k| **k).count() > 1;
        let out = &mut aof.pending;
        if wrapped {
            emit::command(out, &[b"MULTI"]);
        }
        for (op, _) in ops.iter().zip(&keep).filter(|(_, k)| **k) {
            let select = |db: usize, out: &mut Vec<u8>, selected: &mut Option<usize>| {
                if *selected != Some(db) {
                    emit::command(out, &[b"SELECT", itoa::Buffer::new().format(db).as_bytes()]);
                    *selected = Some(db);
                }
            };
            match op {
                LogOp::Key(db, k) => {
                    select(*db, out, &mut aof.selected_db);
                    emit::key_state(out, k, self.dbs[*db].peek(k));
                }
                LogOp::FlushDb(db) => {
                    select(*db, out, &mut aof.selected_db);
                    emit::command(out, &[b"FLUSHDB"]);
                }
                LogOp::FlushAll => emit::command(out, &[b"FLUSHALL"]),
                LogOp::SwapDb(a, b) => {
                    let mut x = itoa::Buffer::new();
                    let mut y = itoa::Buffer::new();
                    emit::command(
                        out,
                        &[b"SWAPDB", x.format(*a).as_bytes(), y.format(*b).as_bytes()],
                    );
                }
            }
        }
        if wrapped {
            emit::command(out, &[b"EXEC"]);
        }
    }

    /// The whole dataset as commands (the base file of a rewrite).
    pub fn snapshot(&self) -> Vec<u8> {
        let now = unix_ms();
        let mut out = Vec::new();
        for (i, db) in self.dbs.iter().enumerate() {
            if db.is_empty() {
                continue;
            }
            emit::command(
                &mut out,
                &[b"SELECT", itoa::Buffer::new().format(i).as_bytes()],
            );
            for (k, e) in db.iter() {
                if !e.is_expired(now) {
                    emit::key_state(&mut out, k, Some(e));
                }
            }
        }
        out
    }

    pub fn start_rewrite(&mut self) -> std::io::Result<()> {
        let snapshot = self.snapshot();
        match self.aof.as_mut() {
            Some(aof) => aof.start_rewrite(snapshot),
            None => Err(std::io::Error::other("appendonly is off")),
        }
    }

    /// After each round of messages: make the round's log durable as the policy says, then
    /// release the replies that waited for it.
    fn after_round(&mut self) {
        if let Some(aof) = self.aof.as_mut() {
            let ok = aof.flush();
            if !ok && aof.fsync == Fsync::Always {
                fatal("Can't persist the AOF when the AOF fsync policy is 'always'. Exiting...");
            }
        }
        for (out, msg) in self.held.drain(..) {
            let _ = out.send(msg);
        }
    }

    /// The executor's last act (Redis's finishShutdown): whatever the log holds is written and
    /// fsynced, whatever the policy; the changes of a unit cut short are dropped.
    fn finish_shutdown(&mut self) {
        self.log_ops.clear();
        if let Some(aof) = self.aof.as_mut() {
            tracing::info!("Calling fsync() on the AOF file.");
            aof.fsync = Fsync::Always;
            if !aof.flush() {
                tracing::warn!("Fail to fsync the AOF file.");
                // Held replies claim durability: without it they must not leave.
                self.held.clear();
            }
        }
        for (out, msg) in self.held.drain(..) {
            let _ = out.send(msg);
        }
    }

    /// Sends output for `client` (a batch's replies), or holds it until the log is durable
    /// (`appendfsync always`: nothing is acknowledged before its write is on disk).
    pub fn deliver(&mut self, client: &Client, mut out: BytesMut, batch_done: bool, close: bool) {
        if self.stopping {
            // The batch may hold replies to units that were not logged: none may leave. The
            // connection closes as it would when Redis exits.
            client.push_out(Bytes::new(), true, true);
            return;
        }
        let hold = self.output_waits_for_fsync();
        if !hold {
            // The log reaches the file (write(2)) before any reply leaves, as Redis's
            // beforeSleep writes the AOF before the clients: an acknowledged write then
            // survives the process dying at any later point (SIGKILL, the shutdown watchdog),
            // the page cache keeps it. `appendfsync always` holds the reply instead, until
            // the round's fsync (`after_round`).
            if let Some(aof) = self.aof.as_mut() {
                if !aof.pending.is_empty() {
                    aof.flush();
                }
            }
        }
        // Before the connection can see the batch end and decode or answer the next request.
        client.publish_state();
        // Straight to the socket when nothing of this client's is queued on the channel
        // (`pending_out` drops to 0 only after the connection task wrote it all), so output
        // never overtakes earlier output; whatever does not fit goes through the channel.
        let cs = &client.shared;
        // Under an output buffer limit the reply must be counted in `pending_out` before the
        // check that follows the batch, as it always was: those clients keep the channel.
        let class = if client.pubsub.subscribed() {
            crate::config::ObufClass::Pubsub
        } else {
            crate::config::ObufClass::Normal
        };
        let limit = self.config.client_output_buffer_limit[class as usize];
        if !hold
            && !close
            && limit.hard == 0
            && limit.soft == 0
            && cs.pending_out.load(Ordering::Acquire) == 0
        {
            // What the socket does not take now goes through the channel.
            if let Some(n) = net::write_direct(cs, &self.shared, &out) {
                if n == out.len() {
                    if batch_done {
                        cs.direct_done.store(true, Ordering::Release);
                        client.out.wake();
                    }
                    self.recycle(out);
                    return;
                }
                let _ = out.split_to(n);
            }
        }
        let data = out.freeze();
        cs.pending_out.fetch_add(data.len(), Ordering::Relaxed);
        let msg = Out {
            data,
            batch_done,
            close,
        };
        if hold {
            self.held.push((client.out.clone(), msg));
        } else {
            let _ = client.out.send(msg);
        }
    }

    /// Under `appendfsync always` with writes not yet on disk, nothing may reach a client before
    /// the round's fsync (`after_round`): replies are held, pushes keep the channel.
    pub fn output_waits_for_fsync(&self) -> bool {
        self.aof
            .as_ref()
            .is_some_and(|a| a.needs_sync_before_reply())
    }

    /// A batch output buffer, reused when the last one was written directly (one allocation
    /// fewer per request).
    pub fn out_buf(&mut self) -> BytesMut {
        match self.spare_out.take() {
            Some(b) => b,
            None => BytesMut::with_capacity(64),
        }
    }

    fn recycle(&mut self, mut out: BytesMut) {
        if out.capacity() <= 16 << 10 {
            out.clear();
            self.spare_out = Some(out);
        }
    }

    /// Loads the log for about 20 ms; false when loading is finished.
    fn load_step(&mut self) -> bool {
        let Some(mut loader) = self.loader.take() else {
            return false;
        };
        let mut client = self
            .loader_client
            .take()
            .expect("loader client present while loading");
        let started = Instant::now();
        let done = loop {
            match loader.next_unit() {
                Ok(Step::Apply(cmds)) => {
                    self.replaying = true;
                    for argv in cmds {
                        let id = match dispatch::resolve(self, &argv) {
                            Ok(id) => id,
                            Err(e) => fatal(&format!("Bad command in the append only file: {e}")),
                        };
                        let mut ctx = crate::cmd::Ctx {
                            srv: self,
                            client: &mut client,
                            now: unix_ms(),
                            in_script: false,
                        };
                        dispatch::run(&mut ctx, id, &argv);
                    }
                    self.replaying = false;
                }
                Ok(Step::Done) => break true,
                Err(LoadError::Fatal(msg)) => fatal(&msg),
            }
            if started.elapsed() >= Loader::budget() {
                break false;
            }
        };
        self.loader_client = Some(client);
        if done {
            tracing::info!(
                "DB loaded from append only file: {:.3} seconds ({} commands)",
                loader.started.elapsed().as_secs_f64(),
                loader.commands
            );
            self.drain_expired();
            self.log_ops.clear();
            match Aof::open(
                aof_dir(&self.config),
                self.config.appendfilename.clone(),
                self.config.appendfsync,
            ) {
                Ok(aof) => self.aof = Some(aof),
                Err(e) => fatal(&format!("Can't open the append-only file: {e}")),
            }
            false
        } else {
            self.loader = Some(loader);
            true
        }
    }

    /// CONFIG SET appendonly / appendfsync at run time (Redis's updateAppendonly): opens the
    /// log, starting it from the current dataset, or closes it; the open log takes the fsync
    /// policy. While the log is being loaded `appendonly` is refused before this (-LOADING) and
    /// the policy is picked up when loading ends. Err: the reason CONFIG SET gives.
    fn persistence_config_changed(&mut self) -> Result<(), String> {
        const FAILED: &str = "Unable to turn on AOF. Check server logs.";
        match (self.config.appendonly, self.aof.is_some()) {
            (true, false) if self.loader.is_none() => {
                let aof = Aof::open(
                    aof_dir(&self.config),
                    self.config.appendfilename.clone(),
                    self.config.appendfsync,
                )
                .map_err(|e| {
                    tracing::warn!("Can't open the append-only file: {e}");
                    FAILED.to_string()
                })?;
                self.aof = Some(aof);
                // The log must start from the current dataset.
                if let Err(e) = self.start_rewrite() {
                    tracing::warn!("Can't start the AOF rewrite: {e}");
                    self.aof = None;
                    return Err(FAILED.into());
                }
                tracing::info!(
                    "Background append only file rewriting started (appendonly turned on)"
                );
            }
            (false, true) => {
                if let Some(mut aof) = self.aof.take() {
                    aof.fsync = Fsync::Always;
                    if !aof.flush() {
                        tracing::warn!("Fail to fsync the AOF file.");
                    }
                }
            }
            _ => {}
        }
        if let Some(aof) = self.aof.as_mut() {
            aof.fsync = self.config.appendfsync;
        }
        Ok(())
    }

    /// Makes a CONFIG SET take effect: `self.config` already holds the new values, `old` the
    /// previous ones; `names` are the changed directives applied this way. Err: the reason
    /// CONFIG SET reports (the caller then puts `old` back and applies it again).
    pub fn apply_change(
        &mut self,
        kind: crate::config::Apply,
        old: &Config,
        names: &[&str],
    ) -> Result<(), String> {
        use crate::config::Apply;
        match kind {
            // Refused before anything is set.
            Apply::Immutable | Apply::Protected => {}
            // `notify-keyspace-events` decides whether created keys are recorded.
            Apply::Live => self.sync_created_recording(),
            Apply::Network => self.shared.apply(&self.config),
            Apply::MaxClients => {
                if self.config.maxclients > old.maxclients {
                    fd_room_for(self.config.maxclients).map_err(|can| {
                        format!("The operating system is not able to handle the specified number of clients, try with {can}")
                    })?;
                }
                self.shared.apply(&self.config);
            }
            Apply::CronTimer => {
                // Redis only uses the new period after the next run; re-arming now makes a
                // higher hz take effect at once (a lower one after the run already due).
                self.next_cron = self
                    .next_cron
                    .min(Instant::now() + cron_period(self.config.hz));
            }
            Apply::LogFilter => crate::logging::set_level(self.config.loglevel),
            Apply::Persistence => self.persistence_config_changed()?,
            Apply::MaxMemory => {
                let used = crate::alloc::used_memory() as u64;
                if self.config.maxmemory != 0 && self.config.maxmemory < used {
                    tracing::warn!("WARNING: the new maxmemory value set via CONFIG SET ({}) is smaller than the current memory usage ({used}). This will result in key eviction and/or the inability to accept new write commands depending on the maxmemory-policy.", self.config.maxmemory);
                }
            }
            Apply::NextStart => {
                for name in names {
                    tracing::info!("CONFIG SET {name}: the new value applies when the append-only file is next loaded, at start-up (CONFIG REWRITE keeps it)");
                }
            }
        }
        Ok(())
    }

    /// Redis's `signalModifiedKey`: invalidates WATCHes on the key and readies blocked clients.
    /// Called by every command that changes a key (through `Ctx::changed`).
    pub fn signal_modified_key(&mut self, db: usize, key: &[u8]) {
        self.watches.touch(db, key);
        self.waiters.signal(db, key);
    }

    /// FLUSHDB (Some(db)) / FLUSHALL (None): Redis's `signalFlushedDb` (WATCH on any key of it).
    /// Called before the data is dropped: only watched keys that exist are touched, as in Redis.
    pub fn signal_flushed_db(&mut self, db: Option<usize>) {
        if self.watches.is_empty() {
            return;
        }
        let now = unix_ms();
        let range = match db {
            Some(d) => d..d + 1,
            None => 0..self.dbs.len(),
        };
        for d in range {
            let dbs = &mut self.dbs;
            self.watches.touch_db(d, |k| dbs[d].contains(k, now));
        }
    }

    /// SWAPDB (called after the swap): watched keys existing in either database are touched and
    /// clients blocked on keys that now hold data are served.
    pub fn signal_swapped_dbs(&mut self, a: usize, b: usize) {
        let now = unix_ms();
        if !self.watches.is_empty() {
            let dbs = &mut self.dbs;
            self.watches
                .touch_db(a, |k| dbs[a].contains(k, now) || dbs[b].contains(k, now));
            self.watches
                .touch_db(b, |k| dbs[a].contains(k, now) || dbs[b].contains(k, now));
        }
        if !self.waiters.is_empty() {
            self.waiters.signal_db(a);
            self.waiters.signal_db(b);
        }
    }

    /// Consumes the keys that expiry removed (lazily or actively): Redis fires `expired` for
    /// each, so waiters can wake at a lock's TTL instead of polling.
    pub fn drain_expired(&mut self) {
        let logging = self.aof.is_some() && !self.replaying;
        for db in 0..self.dbs.len() {
            if self.dbs[db].expired.is_empty() {
                continue;
            }
            let mut keys = std::mem::take(&mut self.dbs[db].expired);
            for key in &keys {
                if logging {
                    self.log_ops.push(LogOp::Key(db, key.clone()));
                }
                // Expiry is a modification for WATCH (Redis's deleteExpiredKeyAndPropagate).
                self.watches.touch(db, key);
                self.notify_keyspace_event(crate::cmd::event::EXPIRED, "expired", key, db);
            }
            keys.clear();
            if self.dbs[db].expired.is_empty() {
                self.dbs[db].expired = keys;
            }
        }
    }

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Connect(client) => self.connect(client),
            Msg::Batch { id, mut cmds } => self.run_batch(id, &mut cmds),
            Msg::Disconnect { id } => {
                if let Some(mut c) = self.clients.remove(&id) {
                    self.forget_client(&mut c);
                }
            }
            Msg::Shutdown => self.shutting_down = true,
        }
    }

    pub fn connect(&mut self, mut client: Box<Client>) {
        // Like Redis: a client is authenticated at connect while the default user needs no
        // password.
        client.authenticated = !self.config.auth_required();
        client.perms = self.config.users.default_user().perms();
        self.clients.insert(client.id, client);
    }

    /// Runs the requests in `cmds` (drained, so the caller can reuse the vector).
    pub fn run_batch(&mut self, id: u64, cmds: &mut Vec<Vec<Bytes>>) {
        let Some(mut client) = self.clients.remove(&id) else {
            cmds.clear();
            return;
        };
        // Pushes queued for it earlier come before this batch's replies.
        client.flush_deferred();
        client::apply_busy_marks(self, &mut client);
        // A pipelined batch: the cache misses of all its keys overlap instead of coming one
        // request after another (store/keymap.rs `prefetch`). argv[1] is the first key of
        // most commands; for the others the hint is wasted, never wrong.
        if cmds.len() > 1 {
            if let Some(db) = self.dbs.get(client.db) {
                db.prefetch(cmds.iter().filter_map(|argv| argv.get(1)).map(|k| &k[..]));
            }
        }
        client.pending.extend(cmds.drain(..));
        let out = self.out_buf();
        blocking::drive(self, client, out);
        if self.ops.pause.ended {
            self.resume_paused();
        }
    }

    /// The pause ended: run what the held-back clients sent, in the order they were held.
    fn resume_paused(&mut self) {
        self.ops.pause.ended = false;
        for id in std::mem::take(&mut self.ops.pause.waiting) {
            self.run_batch(id, &mut Vec::new());
        }
    }

    /// Periodic work (Redis's serverCron): active expiry within a time budget.
    fn cron(&mut self) {
        let started = Instant::now();
        // A quarter of the period, as Redis's ACTIVE_EXPIRE_CYCLE_SLOW_TIME_PERC.
        let budget = cron_period(self.config.hz) / 4;
        let now = unix_ms();
        for db in self.dbs.iter_mut() {
            // Redis's active expire cycle: 20 keys a step while over a quarter of them were dead.
            while db.active_expire_step(now, 20, 64) {
                if started.elapsed() > budget {
                    break;
                }
            }
        }
        self.drain_expired();
        self.end_unit();
        self.flush_deferred();
        self.stats.sample_ops();
        crate::cmd::observe::tick(self, now);
        if self.ops.pause.ended {
            self.resume_paused();
        }
        if let Some(aof) = self.aof.as_mut() {
            aof.poll_rewrite();
            if aof.should_auto_rewrite(
                self.config.auto_aof_rewrite_percentage,
                self.config.auto_aof_rewrite_min_size,
            ) {
                tracing::info!(
                    "Starting automatic rewriting of AOF on {}% growth",
                    self.config.auto_aof_rewrite_percentage
                );
                if let Err(e) = self.start_rewrite() {
                    tracing::warn!("Can't start the AOF rewrite: {e}");
                }
            }
        }
    }
}

/// Time between two cron runs at `hz` (clamped to Redis's 1..500).
fn cron_period(hz: u64) -> Duration {
    Duration::from_micros(1_000_000 / hz.clamp(1, 500))
}

/// Redis's adjustOpenFilesLimit at start-up: without descriptors for `maxclients`, accept
/// would fail with EMFILE long before the limit; maxclients is lowered to what fits instead.
pub fn adjust_open_files_limit(cfg: &mut Config) {
    if let Err(can) = fd_room_for(cfg.maxclients) {
        tracing::warn!(
            "You requested maxclients of {} requiring at least {} max file descriptors.",
            cfg.maxclients,
            cfg.maxclients.saturating_add(32)
        );
        tracing::warn!("Current maximum open files is {}. maxclients has been reduced to {can} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.", can + 32);
        cfg.maxclients = can;
    }
}

/// Redis's adjustOpenFilesLimit for CONFIG SET maxclients: the process must be able to open
/// `maxclients` + 32 descriptors (Redis's CONFIG_MIN_RESERVED_FDS), raising the soft
/// RLIMIT_NOFILE up to the hard one if needed. Err: how many clients it can serve.
fn fd_room_for(maxclients: u64) -> Result<(), u64> {
    const RESERVED: u64 = 32;
    let want = maxclients.saturating_add(RESERVED);
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Ok(());
    }
    let (cur, max) = (lim.rlim_cur, lim.rlim_max);
    if cur >= want {
        return Ok(());
    }
    let target = want.min(max);
    let raised = libc::rlimit {
        rlim_cur: target,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: setrlimit reads the struct we pass; the soft limit stays within the hard one.
    let got = if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        target
    } else {
        cur
    };
    if got >= want {
        Ok(())
    } else {
        Err(got.saturating_sub(RESERVED).max(1))
    }
}

fn aof_dir(cfg: &Config) -> std::path::PathBuf {
    std::path::Path::new(&cfg.dir).join(&cfg.appenddirname)
}

/// Unrecoverable start-up or durability failure: log and exit like Redis.
fn fatal(msg: &str) -> ! {
    tracing::error!("{msg}");
    eprintln!("{msg}");
    std::process::exit(1);
}

/// Starts the executor thread with the plain TCP listeners it serves itself (`net`). It runs
/// until the inbox closes or SHUTDOWN.
///
/// Between events it sleeps in epoll until a connection, an inbox message (TLS connections,
/// shutdown: the inbox wakes the loop through its waker), the next cron tick or the earliest
/// blocked client's deadline.
pub fn spawn(
    server: Server,
    listeners: Vec<std::net::TcpListener>,
) -> std::io::Result<(Inbox, std::thread::JoinHandle<()>)> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
    let (net, waker) = net::Net::new(listeners, server.shared.clone())?;
    let handle = std::thread::Builder::new()
        .name("executor".into())
        // Lua scripts recurse on this thread (nested replies, cjson up to 1000 levels).
        .stack_size(64 << 20)
        .spawn(move || {
            crate::stopwatch::calibrate();
            net.install();
            let mut server = server;
            let waker = std::task::Waker::from(waker);
            let mut cx = std::task::Context::from_waker(&waker);
            // Load the log a slice at a time, answering clients (-LOADING) in between.
            while server.load_step() {
                while let Ok(msg) = rx.try_recv() {
                    server.handle(msg);
                }
                // Shutdown during loading (Redis's whileBlockedCron): stop without opening the
                // log for writing; what was loaded is still on disk.
                if server.shutting_down || server.shared.script.shutdown.load(Ordering::Acquire) {
                    tracing::warn!("Shutdown requested during loading: loading stopped.");
                    return;
                }
                net::turn(&mut server, Some(Duration::ZERO));
                // The log is durable before pushes leave, as before replies (Redis writes
                // clients after flushAppendOnlyFile in beforeSleep).
                server.after_round();
                server.flush_deferred();
                net::flush(&mut server);
            }
            server.next_cron = Instant::now();
            let mut spin = net::IdleSpin::default();
            loop {
                let mut handled = 0usize;
                let mut closed = false;
                while handled < 1024 {
                    match rx.poll_recv(&mut cx) {
                        std::task::Poll::Ready(Some(msg)) => {
                            server.handle(msg);
                            handled += 1;
                            // Pushes leave in chunks, at least every 64 messages.
                            if handled % 64 == 0 {
                                server.flush_deferred();
                            }
                        }
                        std::task::Poll::Ready(None) => {
                            closed = true;
                            break;
                        }
                        std::task::Poll::Pending => break,
                    }
                }
                if closed {
                    break;
                }
                let timeout = if handled > 0 || net::has_ready() {
                    Duration::ZERO
                } else {
                    let now = Instant::now();
                    // Wake at the earliest blocked client's deadline, not only at the next
                    // tick. Deadlines are in whole ms; 1 ms past one makes `now > deadline`.
                    let mut wake = server.next_cron;
                    if let Some(d) = server.waiters.next_deadline() {
                        let due = now
                            + Duration::from_millis(d.saturating_sub(unix_ms()))
                            + Duration::from_millis(1);
                        wake = wake.min(due);
                    }
                    wake.saturating_duration_since(now)
                };
                spin.set_max(Duration::from_micros(server.config.busy_poll_us));
                net::wait(&mut server, timeout, &mut spin);
                // Cron runs on time under a steady stream of requests too (within a turn: the
                // clock read when the poll returned will do).
                let now = net::polled_at();
                if now >= server.next_cron {
                    server.cron();
                    // Every client is looked at; `timeout` counts whole seconds, so at most
                    // ten times a second whatever hz is (Redis spreads the same work over a
                    // second of clientsCron).
                    if now >= server.next_idle_check {
                        net::close_idle(&mut server);
                        server.next_idle_check = now + Duration::from_millis(100);
                    }
                    server.next_cron = now + cron_period(server.config.hz);
                }
                if server
                    .waiters
                    .next_deadline()
                    .is_some_and(|d| d <= unix_ms())
                {
                    blocking::time_out(&mut server);
                }
                // The log is durable before pushes leave, as before replies (Redis writes
                // clients after flushAppendOnlyFile in beforeSleep).
                server.after_round();
                server.flush_deferred();
                net::flush(&mut server);
                if server.shutting_down {
                    break;
                }
            }
            server.finish_shutdown();
        })?;
    Ok((tx, handle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Apply, DIRECTIVES};

    /// Everything `Shared::apply` publishes.
    fn published(s: &Shared) -> [u64; 7] {
        [
            s.maxclients.load(Ordering::Relaxed) as u64,
            s.proto_max_bulk_len.load(Ordering::Relaxed) as u64,
            s.client_query_buffer_limit.load(Ordering::Relaxed) as u64,
            s.timeout_secs.load(Ordering::Relaxed),
            s.tcp_keepalive.load(Ordering::Relaxed),
            s.protected_mode.load(Ordering::Relaxed) as u64,
            s.auth_required.load(Ordering::Relaxed) as u64,
        ]
    }

    /// A directive read off the executor must reach `Shared`: changing any of them changes
    /// what the network side reads. A new `Network` directive needs a value here and a field.
    #[test]
    fn every_network_directive_is_published() {
        let samples: &[(&str, &str)] = &[
            ("protected-mode", "no"),
            ("tcp-keepalive", "77"),
            ("timeout", "5"),
            ("maxclients", "7"),
            ("proto-max-bulk-len", "2mb"),
            ("client-query-buffer-limit", "3mb"),
            ("requirepass", "secret"),
        ];
        for d in DIRECTIVES {
            if !matches!(d.apply, Apply::Network | Apply::MaxClients) {
                continue;
            }
            let value = samples
                .iter()
                .find(|(n, _)| *n == d.name)
                .unwrap_or_else(|| panic!("{}: add a sample value to this test", d.name))
                .1;
            let base = Config::default();
            let shared = Shared::new(&base);
            let before = published(&shared);
            let mut cfg = base.clone();
            cfg.set(d.name, value).unwrap();
            shared.apply(&cfg);
            assert_ne!(
                published(&shared),
                before,
                "{} is applied as Network but Shared::apply does not publish it",
                d.name
            );
        }
    }

    #[test]
    fn cron_period_follows_hz_within_redis_bounds() {
        assert_eq!(cron_period(10), Duration::from_millis(100));
        assert_eq!(cron_period(0), Duration::from_secs(1));
        assert_eq!(cron_period(1000), Duration::from_millis(2));
    }

    #[test]
    fn fd_room_is_granted_within_the_hard_limit() {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit fills the struct we pass.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        assert_eq!(fd_room_for(1), Ok(()));
        if lim.rlim_max != libc::RLIM_INFINITY {
            let max = lim.rlim_max;
            assert_eq!(fd_room_for(max), Err(max - 32));
        }
    }
}
