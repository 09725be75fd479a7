//! What threads other than the executor see: the main thread waits for a shutdown request
//! (`shutdown_notify`) and its signal handling sets the busy-script state's stop flag; the
//! metrics-port thread copies the rendered metrics text and page (behind locks held only to
//! swap or copy them); the I/O threads count the bytes they move. What only the executor
//! touches (the limits its loop enforces, the connection counters) is `Local`, plain cells.

use crate::config::Config;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tokio::sync::Notify;

/// See the module comment.
#[derive(Debug, Default)]
pub struct Shared {
    /// Bytes read from and written to clients' sockets, and the reads and writes that moved
    /// them (INFO `total_net_input_bytes`, `total_net_output_bytes`, `total_reads_processed`,
    /// `total_writes_processed`; Redis counts its read and write handlers' calls): bumped by
    /// the I/O threads during a fan-out as well as by the executor.
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub reads_processed: AtomicU64,
    pub writes_processed: AtomicU64,
    /// Set when a client asked for SHUTDOWN (the executor); the main thread watches
    /// `shutdown_notify`.
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

/// What the executor's commands (CONFIG SET, ACL, INFO, CLIENT) and its own event loop share:
/// the configuration the loop enforces and the connection counters. Both run on the executor
/// thread and no other thread reads them, so they are plain cells behind an `Rc`
/// (`State::local`, `Net::local`).
///
/// The first block is the configuration the event loop enforces (the directives applied as
/// `config::Apply::Network` / `MaxClients`), published by `apply` at start and after each
/// CONFIG SET that changes one of them; a unit test checks that every such directive moves
/// a field.
#[derive(Debug, Default)]
pub struct Local {
    /// `maxclients`: checked at accept.
    pub maxclients: Cell<usize>,
    /// `proto-max-bulk-len`: the decoders' bulk limit, for the next request of every client.
    pub proto_max_bulk_len: Cell<i64>,
    /// `client-query-buffer-limit`: checked after each read, for every client.
    pub client_query_buffer_limit: Cell<usize>,
    /// `timeout`: idle clients are closed by the cron.
    pub timeout_secs: Cell<u64>,
    /// `tcp-keepalive`: set on each socket at accept; open sockets keep theirs, as in Redis.
    pub tcp_keepalive: Cell<u64>,
    /// `protected-mode` (with `requirepass`) in force: non-loopback clients are refused at accept.
    pub protected_mode: Cell<bool>,
    /// `requirepass`: the default user needs a password or is off, so clients that have not
    /// authenticated are held to Redis's pre-AUTH request limits by the decoder.
    pub auth_required: Cell<bool>,
    pub next_client_id: Cell<u64>,
    pub connected_clients: Cell<usize>,
    pub total_connections: Cell<u64>,
    pub rejected_connections: Cell<u64>,
    /// `io-threads` above 1: the I/O threads run (INFO `io_threads_active`).
    pub io_threads_active: Cell<bool>,
    /// Connections whose reads and writes the I/O threads did (INFO
    /// `io_threaded_reads_processed`, `io_threaded_writes_processed`, counted per connection
    /// served, as Redis counts them; tallied by the executor after each fan-out).
    pub io_threaded_reads: Cell<u64>,
    pub io_threaded_writes: Cell<u64>,
}

impl Local {
    pub fn new(cfg: &Config) -> Local {
        let l = Local {
            next_client_id: Cell::new(3),
            ..Default::default()
        };
        l.apply(cfg);
        l
    }

    /// Publishes the limits the event loop enforces (called again after CONFIG SET).
    pub fn apply(&self, cfg: &Config) {
        self.maxclients.set(cfg.maxclients as usize);
        self.proto_max_bulk_len.set(cfg.proto_max_bulk_len);
        self.client_query_buffer_limit
            .set(cfg.client_query_buffer_limit as usize);
        self.timeout_secs.set(cfg.timeout);
        self.tcp_keepalive.set(cfg.tcp_keepalive);
        self.protected_mode.set(cfg.protected_mode_active());
        self.auth_required.set(cfg.auth_required());
    }
}

/// Adds `n` to a counter cell; returns the value before.
pub fn bump<T: Copy + std::ops::Add<Output = T>>(c: &Cell<T>, n: T) -> T {
    let was = c.get();
    c.set(was + n);
    was
}

impl Shared {
    pub fn new() -> Shared {
        Shared::default()
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
