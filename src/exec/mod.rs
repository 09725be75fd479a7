//! The executor: one thread that owns every database and runs every command, so commands,
//! transactions and scripts are atomic without locks around the data. Connection tasks send it
//! whole pipelines; it answers each batch with one buffer.

pub mod client;
pub mod stats;

use crate::cmd::dispatch;
use crate::cmd::table::Table;
use crate::config::Config;
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
        }
    }

    /// Redis's `signalModifiedKey`: invalidates WATCHes on the key and readies blocked clients.
    /// Called by every command that changes a key (through `Ctx::changed`).
    pub fn signal_modified_key(&mut self, _db: usize, _key: &[u8]) {}

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
    pub fn signal_flushed_db(&mut self, _db: Option<usize>) {}

    /// SWAPDB: watched keys of both databases may have changed; blocked clients may be served.
    pub fn signal_swapped_dbs(&mut self, _a: usize, _b: usize) {}

    /// Consumes the keys that expiry removed (lazily or actively) and counts them.
    pub fn drain_expired(&mut self) {
        for db in self.dbs.iter_mut() {
            if !db.expired.is_empty() {
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
            }
            Msg::Shutdown => self.shutting_down = true,
        }
    }

    fn run_batch(&mut self, id: u64, cmds: Vec<Vec<Bytes>>) {
        let Some(mut client) = self.clients.remove(&id) else {
            return;
        };
        let mut out = BytesMut::with_capacity(64);
        client.pending.extend(cmds);
        while let Some(argv) = client.pending.pop_front() {
            dispatch::process(self, &mut client, argv, &mut out);
            if client.close_after_reply || self.shutting_down {
                client.pending.clear();
                break;
            }
        }
        self.drain_expired();
        let close = client.close_after_reply;
        self.shared
            .net_output_bytes
            .fetch_add(out.len() as u64, Ordering::Relaxed);
        client
            .shared
            .pending_out
            .fetch_add(out.len(), Ordering::Relaxed);
        let _ = client.out.send(Out {
            data: out.freeze(),
            batch_done: true,
            close,
        });
        if !close {
            self.clients.insert(id, client);
        }
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

/// Starts the executor thread. It runs until the inbox closes or SHUTDOWN.
pub fn spawn(server: Server) -> std::io::Result<(Inbox, std::thread::JoinHandle<()>)> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
    let handle = std::thread::Builder::new()
        .name("executor".into())
        // Lua scripts recurse on this thread (nested replies, cjson up to 1000 levels).
        .stack_size(64 << 20)
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
                    }
                    if server.shutting_down {
                        break;
                    }
                }
            });
        })?;
    Ok((tx, handle))
}
