//! The executor: one thread that owns every database and runs every command, so commands,
//! transactions and scripts are atomic without locks around the data. Connection tasks send it
//! whole pipelines; it answers each batch with one buffer.

pub mod blocking;
pub mod client;
pub mod stats;

use crate::cmd::table::Table;
use crate::config::Config;
use crate::store::waiters::{Waiters, Watches};
use crate::store::Db;
use bytes::{Bytes, BytesMut};
use client::Client;
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
#[derive(Debug)]
pub struct Shared {
    pub next_client_id: AtomicU64,
    pub connected_clients: AtomicUsize,
    pub maxclients: AtomicUsize,
    pub proto_max_bulk_len: AtomicI64,
    pub client_query_buffer_limit: AtomicUsize,
    pub timeout_secs: AtomicU64,
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    /// Set when a client asked for SHUTDOWN; the accept loop watches `shutdown_notify`.
    pub shutdown_requested: AtomicBool,
    pub shutdown_notify: Notify,
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
            total_connections: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            net_input_bytes: AtomicU64::new(0),
            net_output_bytes: AtomicU64::new(0),
            shutdown_requested: AtomicBool::new(false),
            shutdown_notify: Notify::new(),
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
    pub clients: HashMap<u64, Client>,
    pub started: Instant,
    pub run_id: String,
    /// Set by SHUTDOWN: the executor stops after the current batch.
    pub shutting_down: bool,
    /// WATCHed keys and the clients whose transaction they invalidated.
    pub watches: Watches,
    /// Clients blocked on keys (see blocking.rs).
    pub waiters: Waiters,
    /// Ready keys are being served: nested commands leave new ready keys to the outer loop.
    pub serving_ready: bool,
}

impl Server {
    pub fn new(config: Config, shared: Arc<Shared>) -> Server {
        let dbs = (0..config.databases.max(1))
            .map(|_| Db::default())
            .collect();
        let table = Arc::new(Table::build());
        let stats = Stats::new(table.entries.len());
        Server {
            dbs,
            config,
            table,
            stats,
            shared,
            clients: HashMap::new(),
            started: Instant::now(),
            run_id: (0..40)
                .map(|_| fastrand::alphanumeric().to_ascii_lowercase())
                .collect(),
            shutting_down: false,
            watches: Watches::default(),
            waiters: Waiters::default(),
            serving_ready: false,
        }
    }

    /// Redis's `signalModifiedKey`: invalidates WATCHes on the key and readies blocked clients.
    /// Called by every command that changes a key (through `Ctx::changed`).
    pub fn signal_modified_key(&mut self, db: usize, key: &[u8]) {
        self.watches.touch(db, key);
        self.waiters.signal(db, key);
    }

    /// Redis's `notifyKeyspaceEvent`: publishes `__keyspace@<db>__:<key>` / `__keyevent@<db>__:<event>`
    /// when `notify-keyspace-events` enables the class.
    pub fn notify_keyspace_event(
        &mut self,
        _class: u32,
        _event: &'static str,
        _key: &[u8],
        _db: usize,
    ) {
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

    /// Consumes the keys that expiry removed (lazily or actively) and counts them.
    pub fn drain_expired(&mut self) {
        for (i, db) in self.dbs.iter_mut().enumerate() {
            if !db.expired.is_empty() {
                // Expiry is a modification for WATCH (Redis's deleteExpiredKeyAndPropagate).
                for key in db.expired.iter() {
                    self.watches.touch(i, key);
                }
                db.expired.clear();
            }
        }
    }

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Connect(mut client) => {
                // Like Redis: a client is authenticated at connect while no password is set.
                client.authenticated = self.config.requirepass.is_none();
                self.clients.insert(client.id, *client);
            }
            Msg::Batch { id, cmds } => self.run_batch(id, cmds),
            Msg::Disconnect { id } => {
                self.clients.remove(&id);
                self.watches.unwatch_all(id);
                self.waiters.unblock(id);
            }
            Msg::Shutdown => self.shutting_down = true,
        }
    }

    fn run_batch(&mut self, id: u64, cmds: Vec<Vec<Bytes>>) {
        let Some(mut client) = self.clients.remove(&id) else {
            return;
        };
        client.pending.extend(cmds);
        blocking::drive(self, client, BytesMut::with_capacity(64));
    }

    /// Periodic work (Redis's serverCron): active expiry within a time budget.
    fn cron(&mut self) {
        let started = Instant::now();
        let budget = Duration::from_millis(25);
        let now = unix_ms();
        for db in self.dbs.iter_mut() {
            while db.expire_due(now, 256) == 256 {
                if started.elapsed() > budget {
                    break;
                }
            }
        }
        self.drain_expired();
        self.stats.sample_ops();
    }
}

async fn sleep_opt(d: Option<Duration>) {
    match d {
        // Deadlines are in whole ms; sleeping 1 ms past one makes `now > deadline` hold.
        Some(d) => tokio::time::sleep(d + Duration::from_millis(1)).await,
        None => std::future::pending().await,
    }
}

/// Starts the executor thread. It runs until the inbox closes or SHUTDOWN.
pub fn spawn(server: Server) -> std::io::Result<(Inbox, std::thread::JoinHandle<()>)> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
    let handle = std::thread::Builder::new()
        .name("executor".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!("cannot start the executor runtime: {e}");
                    return;
                }
            };
            let mut server = server;
            rt.block_on(async move {
                let hz = server.config.hz.clamp(1, 500);
                let mut tick = tokio::time::interval(Duration::from_millis(1000 / hz));
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    // Wake at the earliest blocked client's deadline, not only at the next tick.
                    let waiter_due = server
                        .waiters
                        .next_deadline()
                        .map(|d| Duration::from_millis(d.saturating_sub(unix_ms())));
                    tokio::select! {
                        msg = rx.recv() => {
                            let Some(msg) = msg else { break };
                            server.handle(msg);
                            // Drain what is already queued before sleeping again.
                            while let Ok(msg) = rx.try_recv() {
                                server.handle(msg);
                            }
                        }
                        _ = tick.tick() => server.cron(),
                        _ = sleep_opt(waiter_due) => blocking::time_out(&mut server),
                    }
                    // Under a steady stream of messages the timer branch may never win the
                    // select: time out due waiters here as well.
                    if server
                        .waiters
                        .next_deadline()
                        .is_some_and(|d| d <= unix_ms())
                    {
                        blocking::time_out(&mut server);
                    }
                    if server.shutting_down {
                        break;
                    }
                }
            });
        })?;
    Ok((tx, handle))
}
