//! What threads other than the executor see: the main thread waits for a shutdown request
//! (`shutdown_notify`) and its signal handling sets the busy-script state's stop flag; the
//! metrics-port thread copies the rendered metrics text and page (behind locks held only to
//! swap or copy them). The published limits and counters are read by the executor's own event
//! loop; they stay here, as atomics, because `Shared` is the one value all of them hold.

use crate::config::Config;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use tokio::sync::Notify;

/// See the module comment.
///
/// The first block is the configuration the event loop enforces (the directives applied as
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
    /// `timeout`: idle clients are closed by the cron.
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
    /// Read events that took bytes from a client / writes a client's socket took (INFO
    /// `total_reads_processed`, `total_writes_processed`; Redis counts its read and write
    /// handlers' calls).
    pub reads_processed: AtomicU64,
    pub writes_processed: AtomicU64,
    /// `io-threads` above 1: the I/O threads run (INFO `io_threads_active`).
    pub io_threads_active: AtomicBool,
    /// Reads and writes the I/O threads did (INFO `io_threaded_reads_processed`,
    /// `io_threaded_writes_processed`, counted per connection served, as Redis counts them).
    pub io_threaded_reads: AtomicU64,
    pub io_threaded_writes: AtomicU64,
    /// Set when a client asked for SHUTDOWN; the main thread watches `shutdown_notify`.
    pub shutdown_requested: AtomicBool,
    pub shutdown_notify: Notify,
    /// A running script's stop flag (SHUTDOWN NOSAVE, a signal); the rest of the busy-script
    /// state is the executor's alone (`State::busy`).
    pub script: super::busy::ScriptStop,
    /// `metrics-port`: the Prometheus text the executor renders about once a second.
    pub metrics: std::sync::Mutex<String>,
    /// `metrics-port`: the lock insight page at `/`, rendered with the metrics.
    pub page: std::sync::Mutex<String>,
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
            reads_processed: AtomicU64::new(0),
            writes_processed: AtomicU64::new(0),
            io_threads_active: AtomicBool::new(false),
            io_threaded_reads: AtomicU64::new(0),
            io_threaded_writes: AtomicU64::new(0),
            shutdown_requested: AtomicBool::new(false),
            shutdown_notify: Notify::new(),
            script: Default::default(),
            metrics: Default::default(),
            page: Default::default(),
        };
        s.apply(cfg);
        s
    }

    /// Publishes the limits the event loop enforces (called again after CONFIG SET).
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
            .store(cfg.protected_mode_active(), Ordering::Relaxed);
        self.auth_required
            .store(cfg.auth_required(), Ordering::Relaxed);
    }

    /// Bytes written to a client's socket (INFO `total_net_output_bytes`). Counted where the
    /// socket took them, as Redis's `writeToClient`, so replies, pushes and wake-ups all count
    /// once, whichever path they left by.
    pub fn count_output(&self, n: usize) {
        if n > 0 {
            self.net_output_bytes.fetch_add(n as u64, Ordering::Relaxed);
            self.writes_processed.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn request_shutdown(&self) {
        self.shutdown_requested.store(true, Ordering::SeqCst);
        self.shutdown_notify.notify_waiters();
        self.shutdown_notify.notify_one();
    }
}
