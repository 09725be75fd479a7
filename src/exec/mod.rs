//! The executor: one thread that owns every database and runs every command, so commands,
//! transactions and scripts are atomic without locks around the data. It is also the event loop
//! (net.rs) for TCP and TLS connections alike: it reads whole pipelines, runs them against the
//! state machine (`machine::State`, through cmd/), feeds each unit's change record to the log,
//! and answers each batch with one buffer.

pub mod blocking;
pub mod cluster;
pub mod hold;
mod io_threads;
pub mod listen;
pub mod net;
pub mod peer;
mod probe;
pub mod unit;

use crate::clock::unix_ms;
use crate::cmd::dispatch;
use crate::config::Fsync;
use crate::config::{Apply, Config};
use crate::machine::client::Client;
use crate::machine::{Host, Shared, State};
use crate::persist::aof::Aof;
use crate::persist::load::{LoadError, Loader, Step};
use crate::persist::{emit, rdb_file};
use crate::store::ChangeRecord;
use bytes::{Bytes, BytesMut};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub enum Msg {
    Disconnect {
        id: u64,
    },
    Shutdown,
    /// The transport could not deliver to this peer (`Cluster::report_unreachable`).
    PeerUnreachable(u64),
    /// The link to a Redis master this server replicates (redisrepl/replica.rs).
    Repl(crate::redisrepl::replica::Event),
}

pub type Inbox = mpsc::UnboundedSender<Msg>;

/// The event loop's side of the executor: the state machine's data (`State`, which handlers
/// see) plus what only the loop touches: the log, loading, replies held for fsync, timers.
/// Derefs to `State`, so loop code reads the data directly.
pub struct Server {
    pub state: State,
    /// A shutdown was requested from outside the executor (SIGTERM/SIGINT, SHUTDOWN NOSAVE
    /// during a busy script) and a unit ended after it: from then on nothing is logged and no
    /// reply leaves, so the unit that was cut short (a script stopped midway) leaves no trace in
    /// the log, as Redis exits from inside its script hook, and nothing unlogged is acknowledged.
    stopping: bool,
    /// The loop's own part, which handlers reach through `machine::Host`.
    pub io: Io,
    loader_client: Option<Box<Client>>,
    /// The record of the unit that just ended (store/change.rs), reused from unit to unit.
    changes: ChangeRecord,
    /// Output held until the log is durable or committed (exec/hold.rs).
    holds: hold::Holds,
    /// A batch output buffer to reuse (its contents were copied into a connection's OutBuf).
    spare_out: Option<BytesMut>,
    /// When idle clients (`timeout`) are looked for next.
    next_idle_check: Instant,
    /// Ready keys are being served (`blocking::serve_ready`): nested commands leave new ready
    /// keys to the outer call.
    pub(crate) serving_ready: bool,
}

/// What handlers may ask of the loop (`machine::Host`): the log and its loading.
pub struct Io {
    /// The append-only log, when `appendonly yes`.
    pub aof: Option<Aof>,
    /// Loading the log at start-up (commands meanwhile get -LOADING).
    pub loader: Option<Loader>,
    /// When the cron runs next (every 1/`hz` s; `apply_change` re-arms it when hz changes).
    next_cron: Instant,
    /// When lock insight last forgot stale entries and rendered the metrics (Unix ms).
    locks_swept_at: u64,
    /// The event loop while it has lent itself for running commands: a busy script's hook
    /// serves the other connections through it (`net::Lent`, `Host::while_busy`).
    pub busy_loop: net::Lent,
    /// Cluster mode (`cluster-node-id`): the node's Raft groups (each a consensus core with its
    /// held replies), the slot→group table and the peer transport.
    pub cluster: Option<cluster::Groups>,
    /// RDB snapshots: the background save in progress and the last one's outcome.
    pub rdb: crate::persist::rdb_file::RdbState,
    /// The change count the background save in progress covers (subtracted when it succeeds).
    rdb_covered: u64,
    /// The executor's inbox, for threads started at run time (a Redis master link).
    pub inbox: Option<Inbox>,
    /// The loop's listening sockets, replaced by CONFIG SET of `bind` / `port` (`Apply::Listen`).
    pub listen: Option<std::rc::Rc<std::cell::RefCell<listen::ListenSet>>>,
}

impl std::ops::Deref for Server {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

impl Server {
    /// `busy`: what the loop answering other clients reads while a script is busy, given
    /// before anything loads, since a scripting engine created while loading (the function
    /// libraries of an RDB file) keeps the one it was made with.
    pub fn new(
        config: Config,
        shared: Arc<Shared>,
        busy: std::rc::Rc<crate::machine::busy::BusyState>,
    ) -> Server {
        let loader = if config.appendonly {
            match Aof::files_to_load(&aof_dir(&config), &config.appendfilename) {
                Ok(files) => Some(
                    Loader::new(files, config.aof_load_truncated)
                        .knowing(|a| dispatch::resolve(a).is_ok()),
                ),
                Err(e) => fatal(&e),
            }
        } else {
            None
        };
        let (tx, _) = tokio::sync::mpsc::unbounded_channel();
        let nowhere: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
        let loader_client = Box::new(Client::new(0, nowhere, nowhere, tx, Default::default()));
        let mut server = Server {
            state: State::new(config, shared, crate::cmd::registry::table().entries.len()),
            stopping: false,
            io: Io {
                aof: None,
                loader,
                next_cron: Instant::now(),
                locks_swept_at: 0,
                busy_loop: Default::default(),
                cluster: None,
                rdb: crate::persist::rdb_file::RdbState::new(unix_ms() / 1000),
                rdb_covered: 0,
                inbox: None,
                listen: None,
            },
            loader_client: Some(loader_client),
            changes: ChangeRecord::default(),
            holds: Default::default(),
            spare_out: None,
            next_idle_check: Instant::now(),
            serving_ready: false,
        };
        server.state.busy = busy;
        if !server.config.appendonly && server.config.cluster_node_id == 0 {
            server.load_rdb();
        }
        server
    }

    /// Start-up without the append-only file: the RDB snapshot, if there is one, as Redis's
    /// loadDataFromDisk (a file that cannot be read whole stops the start, as in Redis).
    fn load_rdb(&mut self) {
        let path = rdb_file::path(&self.config.dir, self.config.compat_value("dbfilename"));
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => fatal(&format!("Fatal error loading the DB: {e}. Exiting.")),
        };
        let started = Instant::now();
        let now = unix_ms();
        let databases = self.dbs.len();
        let dbs = &mut self.state.dbs;
        for db in dbs.iter_mut() {
            db.note_time(now);
        }
        let loaded = rdb_file::decode(&bytes, now, databases, |db, key, value, at| {
            dbs[db].set(&key, value, at);
        })
        .unwrap_or_else(|e| fatal(&format!("Fatal error loading the DB: {e} Exiting.")));
        if let Err(e) = self.load_functions(&loaded.functions, false) {
            fatal(&format!("Failed loading library, {e}"));
        }
        self.dbs.discard_changes();
        tracing::info!("Loading RDB produced by version {}", loaded.version);
        if let Some(ctime) = loaded.ctime {
            tracing::info!("RDB age {} seconds", (now / 1000).saturating_sub(ctime));
        }
        if let Some(mem) = loaded.used_mem {
            tracing::info!(
                "RDB memory usage when created {:.2} Mb",
                mem as f64 / (1024.0 * 1024.0)
            );
        }
        tracing::info!(
            "Done loading RDB, keys loaded: {}, keys expired: {}.",
            loaded.keys,
            loaded.expired
        );
        tracing::info!(
            "DB loaded from disk: {:.3} seconds",
            started.elapsed().as_secs_f64()
        );
        self.io.rdb.loaded = (loaded.keys, loaded.expired);
    }

    /// `before_sleep`'s steps 4 and 5: the round's log is written (and fsynced as the policy
    /// says), then the output that waited for it is released.
    fn flush_log(&mut self) {
        if let Some(aof) = self.io.aof.as_mut() {
            // Under `always` the round's replies are held and claim durability: a failed write
            // or fsync cannot be answered, so the server exits as Redis does, and the held
            // replies never leave. A short write was cut back first (`Aof::flush`).
            if !aof.flush() && aof.fsync == Fsync::Always {
                fatal("Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting...");
            }
        }
        self.release_held(true);
    }

    /// Releases the held output whose watermark is reached (exec/hold.rs); `fsynced`: the log
    /// was just made durable. True if anything was released or dropped.
    pub(crate) fn release_held(&mut self, fsynced: bool) -> bool {
        let cluster = self.io.cluster.as_ref();
        settle_holds(
            &mut self.holds,
            fsynced,
            |g, index, read, term| match cluster {
                Some(gs) => gs.verdict(g, index, read, term),
                None => hold::Verdict::Drop,
            },
        )
    }

    /// `release_held` for one group's replies while the groups are taken out of `io`
    /// (`cluster_round`); the others' wait.
    pub(crate) fn release_held_by(&mut self, c: &cluster::ClusterIo) -> bool {
        settle_holds(&mut self.holds, false, |g, index, read, term| {
            if g == c.group {
                c.verdict(index, read, term)
            } else {
                hold::Verdict::Wait
            }
        })
    }
}

/// The one place held output is released (`Server::release_held`); `committed` judges a
/// cluster watermark (group, index, read barrier, term).
fn settle_holds(
    holds: &mut hold::Holds,
    fsynced: bool,
    committed: impl Fn(crate::replication::group::GroupId, u64, u64, u64) -> hold::Verdict,
) -> bool {
    holds.settle(|wm| match *wm {
        hold::Watermark::Fsynced if fsynced => hold::Verdict::Release,
        hold::Watermark::Fsynced => hold::Verdict::Wait,
        hold::Watermark::Ordered => hold::Verdict::Release,
        hold::Watermark::Committed {
            group,
            index,
            read,
            term,
        } => committed(group, index, read, term),
    })
}

impl Server {
    /// The executor's last act (Redis's finishShutdown): whatever the log holds is written and
    /// fsynced, whatever the policy; the changes of a unit cut short are dropped.
    fn finish_shutdown(&mut self) {
        self.dbs.discard_changes();
        if let Some(aof) = self.io.aof.as_mut() {
            tracing::info!("Calling fsync() on the AOF file.");
            aof.fsync = Fsync::Always;
            if !aof.flush() {
                tracing::warn!("Fail to fsync the AOF file.");
                // Held replies claim durability: without it they must not leave.
                return;
            }
        }
        self.release_held(true);
    }

    /// Runs one unit of a log (a command, or a MULTI block's commands) as the loader's
    /// client, at time `now`: start-up applies the append-only file this way, and a follower
    /// applies a replicated entry this way. The first argv that names no command stops the
    /// unit with Redis's unknown-command error text; the commands before it have run.
    /// The `lock-restart-delay` window does not refuse these writes (a client's are refused).
    pub fn apply_commands(&mut self, cmds: Vec<Vec<Bytes>>, now: u64) -> Result<(), String> {
        self.apply_unit(cmds, now, false)
    }

    /// `apply_commands`; with `refuse_errors`, a command answered with an error also stops the
    /// unit with that error. Start-up loads this way: a log deadbolt wrote replays without
    /// errors, so an error means a damaged command (an option whose bytes changed, a number
    /// that is no longer one), and skipping it would load fewer keys without saying so.
    /// BUSYGROUP is not damage: re-creating a consumer group that is there already.
    fn apply_unit(
        &mut self,
        cmds: Vec<Vec<Bytes>>,
        now: u64,
        refuse_errors: bool,
    ) -> Result<(), String> {
        let Some(mut client) = self.loader_client.take() else {
            return Err("the loader client is in use".to_owned());
        };
        // The log's writes were acknowledged before: lock-restart-delay refuses new client
        // writes, never the replay of old ones (refusing them silently dropped the whole
        // file on a start with appendfsync everysec and a delay). The window resumes after.
        let refused_until = self.state.writes_refused_until.take();
        let mut result = Ok(());
        for argv in cmds {
            let id = match dispatch::resolve(&argv) {
                Ok(id) => id,
                Err(e) => {
                    result = Err(e.to_string());
                    break;
                }
            };
            let mut ctx = crate::cmd::Ctx {
                srv: &mut self.state,
                host: &mut self.io,
                client: &mut client,
                now,
                in_script: false,
            };
            if let crate::protocol::Frame::Error(e) = dispatch::run(&mut ctx, id, &argv) {
                if refuse_errors && !e.starts_with(b"BUSYGROUP") {
                    let args: Vec<String> = argv
                        .iter()
                        .take(3)
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .collect();
                    result = Err(format!(
                        "the command '{}' was answered '{}'",
                        args.join(" ").escape_debug(),
                        String::from_utf8_lossy(&e)
                    ));
                    break;
                }
            }
        }
        self.loader_client = Some(client);
        self.state.writes_refused_until = refused_until;
        result
    }

    /// Loads function libraries read from an RDB file (Redis's rdbFunctionLoad), replacing
    /// libraries of the same name when `replace`. The first that fails stops with its error.
    pub fn load_functions(&mut self, codes: &[Bytes], replace: bool) -> Result<(), String> {
        for code in codes {
            let mut cmd = vec![Bytes::from_static(b"FUNCTION"), Bytes::from_static(b"LOAD")];
            if replace {
                cmd.push(Bytes::from_static(b"REPLACE"));
            }
            cmd.push(code.clone());
            self.apply_unit(vec![cmd], unix_ms(), true)?;
        }
        Ok(())
    }

    /// Loads the log for about 20 ms; false when loading is finished.
    fn load_step(&mut self) -> bool {
        let Some(mut loader) = self.io.loader.take() else {
            return false;
        };
        let started = Instant::now();
        let done = loop {
            match loader.next_unit() {
                Ok(Step::Apply(cmds)) => {
                    if let Err(e) = self.apply_unit(cmds, unix_ms(), true) {
                        fatal(&format!("Bad command in the append only file (the unit ending in {}): {e}. Nothing was changed on disk. To recover: make a backup of the AOF directory, then repair that command by hand or restore the directory from a backup", loader.position()));
                    }
                }
                Ok(Step::Done) => break true,
                Err(LoadError::Fatal(msg)) => fatal(&msg),
            }
            if started.elapsed() >= Loader::budget() {
                break false;
            }
        };
        if !done && loader.progress_logged.elapsed() >= LOADING_PROGRESS_EVERY {
            loader.progress_logged = Instant::now();
            let (loaded, total) = loader.progress();
            tracing::info!(
                "Loading the append only file: {:.0}% ({loaded} of {total} bytes, {} commands, {:.1} seconds)",
                loaded as f64 * 100.0 / total.max(1) as f64,
                loader.commands,
                loader.started.elapsed().as_secs_f64()
            );
        }
        if done {
            tracing::info!(
                "DB loaded from append only file: {:.3} seconds ({} commands)",
                loader.started.elapsed().as_secs_f64(),
                loader.commands
            );
            self.drain_expired();
            match Aof::open(
                aof_dir(&self.config),
                self.config.appendfilename.clone(),
                self.config.appendfsync,
            ) {
                // The store has recorded nothing while loading: the log is not written again.
                Ok(aof) => self.io.set_aof(&mut self.state, Some(aof)),
                Err(e) => fatal(&format!("Can't open the append-only file: {e}")),
            }
            false
        } else {
            self.io.loader = Some(loader);
            true
        }
    }

    /// Queues the round's broadcast invalidations (CLIENT TRACKING BCAST); every other push
    /// is in its connection's output already.
    pub fn flush_deferred(&mut self) {
        self.state.tracking_broadcast();
    }

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Disconnect { id } => {
                if let Some(mut c) = self.clients.remove(&id) {
                    self.forget_client(&mut c);
                }
            }
            Msg::Shutdown => self.shutting_down = true,
            Msg::PeerUnreachable(id) => {
                if let Some(c) = self.io.cluster.as_mut() {
                    c.report_unreachable(id);
                }
            }
            Msg::Repl(ev) => crate::redisrepl::replica::handle(self, ev),
        }
    }

    /// RDB snapshots in the cron (Redis's serverCron): a finished background save is recorded,
    /// a scheduled one starts, and a save point that is due starts one (after a failure, not
    /// before 5 s have passed, as Redis's CONFIG_BGSAVE_RETRY_DELAY).
    fn rdb_cron(&mut self, now_ms: u64) {
        let now = now_ms / 1000;
        if let Some(done) = self.io.rdb.poll() {
            match done {
                Ok(_) => {
                    tracing::info!("Background saving terminated with success");
                    self.state.changes_since_save = self
                        .state
                        .changes_since_save
                        .saturating_sub(self.io.rdb_covered);
                }
                Err(e) => tracing::warn!("Background saving error: {e}"),
            }
        }
        if self.io.rdb.in_progress()
            || self
                .io
                .aof
                .as_ref()
                .is_some_and(|a| a.rewrite_in_progress())
        {
            return;
        }
        let rdb = &self.io.rdb;
        let due = rdb.scheduled
            || self
                .state
                .config
                .save_points
                .iter()
                .any(|&(secs, changes)| {
                    self.state.changes_since_save >= changes
                        && now.saturating_sub(rdb.last_save_unix) >= secs
                        && (rdb.last_ok || now.saturating_sub(rdb.last_try_unix) > 5)
                });
        if due {
            if !self.io.rdb.scheduled {
                tracing::info!(
                    "{} changes in the last save interval. Saving...",
                    self.state.changes_since_save
                );
            }
            self.io.rdb.scheduled = false;
            let (io, state) = (&mut self.io, &self.state);
            let _ = io.rdb_save(state, true);
        }
    }

    /// Periodic work (Redis's serverCron): active expiry within a time budget.
    fn cron(&mut self) {
        crate::stopwatch::refine();
        if self.state.debug.pause_cron {
            // DEBUG PAUSE-CRON: Redis's serverCron returns before doing anything.
            return;
        }
        let started = Instant::now();
        // A quarter of the period, as Redis's ACTIVE_EXPIRE_CYCLE_SLOW_TIME_PERC.
        let budget = cron_period(self.config.hz) / 4;
        let now = unix_ms();
        // In a cluster only a group's serving leader expires its keys (its deletions are
        // logged, one entry per group: `ChangeRecord::per_key`). A Redis replica leaves expiry
        // to its master (redisrepl/replica.rs).
        let scope = self
            .io
            .cluster
            .as_ref()
            .map_or(cluster::Expirable::All, |c| c.may_expire());
        let expire = !matches!(scope, cluster::Expirable::Nothing)
            && self.state.debug.active_expire
            && !self.state.replica.following();
        if expire {
            self.state.dbs.changes_per_key();
        }
        let groups = self.io.cluster.as_ref();
        for db in self.state.dbs.iter_mut().filter(|_| expire) {
            // Redis's active expire cycle: 20 keys a step while over a quarter of them were dead.
            loop {
                let more = match (&scope, groups) {
                    (cluster::Expirable::Groups(led), Some(gs)) => {
                        db.active_expire_step_of(now, 20, 64, |k| gs.key_in(led, k))
                    }
                    _ => db.active_expire_step(now, 20, 64),
                };
                if !more || started.elapsed() > budget {
                    break;
                }
            }
        }
        let cycle_ms = started.elapsed().as_millis() as u64;
        let unix_s = || (unix_ms() / 1000) as i64;
        (self.state.stats.latency_events).sample_if_needed("expire-cycle", cycle_ms, unix_s);
        self.drain_expired();
        self.end_unit();
        self.flush_deferred();
        self.state.stats.sample_ops(&self.state.shared);
        if now / 1000 != self.io.locks_swept_at / 1000 {
            // MIGRATE's cached connections unused for 10 s are closed (Redis's serverCron).
            crate::cmd::migrate_conn::cached_sockets(now / 1000);
            self.io.locks_swept_at = now;
            self.state.locks.sweep(now);
            let late_max = self.state.config.lock_late_log_max_len as usize;
            self.state.locks.set_late_max(late_max);
            let delimiters = self.state.config.lock_prefix_delimiters.as_bytes();
            self.state.locks.set_delimiters(delimiters);
            let (leading, view) =
                crate::cmd::lockinsight::view_of(self.io.cluster.as_ref().map(|g| &g.home().view));
            self.state.locks.set_view(leading, view);
            if self.state.config.metrics_port != 0 {
                let mut text = String::with_capacity(4096);
                self.state.locks.prometheus(&mut text, now);
                if let Ok(mut m) = self.state.shared.metrics.lock() {
                    *m = text;
                }
                let mut page = String::with_capacity(8192);
                self.state.locks.html(&mut page, now);
                if let Ok(mut m) = self.state.shared.page.lock() {
                    *m = page;
                }
            }
        }
        crate::cmd::observe::tick(self, now);
        if self.state.tracking.active() {
            let max = self.state.config.compat_value("tracking-table-max-keys");
            self.state.tracking_limit(max.parse().unwrap_or(0));
        }
        if self.ops.pause.ended {
            self.resume_paused();
        }
        self.rdb_cron(now);
        self.redis_master_cron(now);
        let (io, st) = (&mut self.io, &self.state);
        if let Some(aof) = io.aof.as_mut() {
            if !aof.cron() && aof.fsync == Fsync::Always {
                fatal("Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting...");
            }
            // After a failed fsync the kernel may have dropped the failed range's pages even
            // though a later fsync succeeds: the log is rewritten from memory, which holds
            // every acknowledged write.
            if !aof.rewrite_in_progress() && aof.take_rewrite_after_fsync_error() {
                tracing::warn!("AOF fsync works again: rewriting the AOF from memory, as writes made before the failed fsync may not be on disk.");
                if let Err(e) = io.start_rewrite(st) {
                    tracing::warn!("Can't start the AOF rewrite: {e}");
                }
                return;
            }
            if aof.should_auto_rewrite(
                st.config.auto_aof_rewrite_percentage,
                st.config.auto_aof_rewrite_min_size,
            ) {
                tracing::info!(
                    "Starting automatic rewriting of AOF on {}% growth",
                    st.config.auto_aof_rewrite_percentage
                );
                if let Err(e) = io.start_rewrite(st) {
                    tracing::warn!("Can't start the AOF rewrite: {e}");
                }
            }
        }
    }
}

impl Server {
    /// Redis replicas, once a second: PINGs, silent replicas dropped, the backlog's time to
    /// live and size (machine/redis_master.rs).
    fn redis_master_cron(&mut self, now: u64) {
        if !self.state.redis_master.active() {
            return;
        }
        let num = |s: &State, name: &str| s.config.compat_value(name).parse::<u64>().unwrap_or(0);
        let st = &mut self.state;
        let (ping, timeout) = (num(st, "repl-ping-replica-period"), num(st, "repl-timeout"));
        let (ttl, size) = (num(st, "repl-backlog-ttl"), num(st, "repl-backlog-size"));
        let (drop, freed) =
            (st.redis_master).cron(now, ping, timeout, ttl, size as usize, &mut st.repl_id);
        for id in drop {
            if let Some(c) = self.state.clients.remove(&id) {
                self.state.close_client(c);
            }
        }
        if freed && self.io.aof.is_none() {
            self.state.dbs.record_changes(false);
            self.state.dbs.record_publishes(false);
        }
    }
}

impl Io {
    /// Opens or closes the log; the store records changes exactly while there is one to feed.
    fn set_aof(&mut self, state: &mut State, aof: Option<Aof>) {
        // Redis replicas' stream (machine/redis_master.rs) is fed from the same record.
        state
            .dbs
            .record_changes(aof.is_some() || state.redis_master.active());
        self.aof = aof;
    }

    /// CONFIG SET appendonly / appendfsync at run time (Redis's updateAppendonly): opens the
    /// log, starting it from the current dataset, or closes it; the open log takes the fsync
    /// policy. While the log is being loaded `appendonly` is refused before this (-LOADING) and
    /// the policy is picked up when loading ends. Err: the reason CONFIG SET gives.
    fn persistence_config_changed(&mut self, state: &mut State) -> Result<(), String> {
        const FAILED: &str = "Unable to turn on AOF. Check server logs.";
        match (state.config.appendonly, self.aof.is_some()) {
            (true, false) if self.loader.is_none() => {
                let aof = Aof::open(
                    aof_dir(&state.config),
                    state.config.appendfilename.clone(),
                    state.config.appendfsync,
                )
                .map_err(|e| {
                    tracing::warn!("Can't open the append-only file: {e}");
                    FAILED.to_string()
                })?;
                self.set_aof(state, Some(aof));
                // The log must start from the current dataset.
                if let Err(e) = self.start_rewrite(state) {
                    tracing::warn!("Can't start the AOF rewrite: {e}");
                    self.set_aof(state, None);
                    return Err(FAILED.into());
                }
                tracing::info!(
                    "Background append only file rewriting started (appendonly turned on)"
                );
            }
            (false, true) => {
                if let Some(mut aof) = self.aof.take() {
                    self.set_aof(state, None);
                    aof.fsync = Fsync::Always;
                    if !aof.flush() {
                        tracing::warn!("Fail to fsync the AOF file.");
                    }
                }
            }
            _ => {}
        }
        if let Some(aof) = self.aof.as_mut() {
            aof.fsync = state.config.appendfsync;
        }
        Ok(())
    }
}

impl Host for Io {
    /// Makes a CONFIG SET take effect: `state.config` already holds the new values, `old` the
    /// previous ones; `names` are the changed directives applied this way. Err: the reason
    /// CONFIG SET reports (the caller then puts `old` back and applies it again).
    fn apply_change(
        &mut self,
        state: &mut State,
        kind: Apply,
        old: &Config,
        names: &[&str],
    ) -> Result<(), String> {
        match kind {
            // Refused before anything is set.
            Apply::Immutable | Apply::Protected => {}
            // `notify-keyspace-events` decides whether created keys are recorded.
            Apply::Live => {
                state.sync_created_recording();
                state.stats.latency_tracking =
                    state.config.compat_value("latency-tracking") == "yes";
                state.sync_latency_threshold();
                for why in state.config.without_effect(old) {
                    tracing::warn!("{why}");
                }
            }
            Apply::Network => state.local.apply(&state.config),
            Apply::Listen => {
                let Some(listen) = &self.listen else {
                    return Ok(());
                };
                let c = &state.config;
                listen.borrow_mut().rebind(
                    &c.bind,
                    c.port,
                    c.tls_port,
                    c.tcp_backlog,
                    c.bind != old.bind,
                )?;
            }
            Apply::MaxClients => {
                if state.config.maxclients > old.maxclients {
                    fd_room_for(state.config.maxclients).map_err(|can| {
                        format!("The operating system is not able to handle the specified number of clients, try with {can}")
                    })?;
                }
                state.local.apply(&state.config);
            }
            Apply::CronTimer => {
                // Redis only uses the new period after the next run; re-arming now makes a
                // higher hz take effect at once (a lower one after the run already due).
                self.next_cron = self
                    .next_cron
                    .min(Instant::now() + cron_period(state.config.hz));
            }
            Apply::LogFilter => crate::logging::set_level(state.config.loglevel),
            Apply::Persistence => self.persistence_config_changed(state)?,
            Apply::MaxMemory => {
                let used = crate::alloc::used_memory() as u64;
                if state.config.maxmemory != 0 && state.config.maxmemory < used {
                    tracing::warn!("WARNING: the new maxmemory value set via CONFIG SET ({}) is smaller than the current memory usage ({used}). This will result in key eviction and/or the inability to accept new write commands depending on the maxmemory-policy.", state.config.maxmemory);
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

    fn rdb(&self) -> Option<&crate::persist::rdb_file::RdbState> {
        Some(&self.rdb)
    }

    fn rdb_save(&mut self, state: &State, background: bool) -> Result<&'static str, String> {
        if background && self.rdb.in_progress() {
            return Err("ERR Background save already in progress".into());
        }
        let path = rdb_file::path(&state.config.dir, state.config.compat_value("dbfilename"));
        let now = unix_ms() / 1000;
        let data = rdb_snapshot(state);
        if background {
            self.rdb_covered = state.changes_since_save;
            self.rdb.start(path, data, now);
            tracing::info!("Background saving started");
            return Ok("Background saving started");
        }
        match self.rdb.save_now(&path, &data, now) {
            Ok(()) => {
                tracing::info!("DB saved on disk");
                Ok("OK")
            }
            Err(e) => {
                tracing::warn!(
                    "Failed saving the RDB file {} (in server root dir {}): {e}",
                    path.display(),
                    state.config.dir
                );
                Err("ERR".into())
            }
        }
    }

    fn rdb_schedule(&mut self) -> bool {
        self.rdb.scheduled = true;
        true
    }

    fn start_rewrite(&mut self, state: &State) -> std::io::Result<()> {
        let snapshot = snapshot(state, unix_ms());
        match self.aof.as_mut() {
            Some(aof) => aof.start_rewrite(snapshot),
            None => crate::persist::aof::rewrite_while_off(
                &aof_dir(&state.config),
                &state.config.appendfilename,
                &snapshot,
            ),
        }
    }

    fn loading(&self) -> bool {
        self.loader.is_some()
    }

    fn loading_progress(&self) -> Option<(u64, u64, u64)> {
        self.loader.as_ref().map(|l| {
            let (loaded, total) = l.progress();
            (l.started_unix, loaded, total)
        })
    }

    fn aof(&self) -> Option<&Aof> {
        self.aof.as_ref()
    }

    fn aof_flush(&mut self) -> bool {
        self.aof.as_mut().is_none_or(|a| a.flush())
    }

    fn while_busy(&self) {
        self.busy_loop.while_busy();
    }

    fn cluster(&self) -> Option<&crate::replication::ClusterView> {
        self.cluster.as_ref().map(|g| &g.home().view)
    }

    fn role_for(&self, slot: u16) -> Option<&crate::replication::ClusterView> {
        self.cluster.as_ref().map(|g| &g.by_slot(slot).view)
    }

    fn cluster_groups_split(&self) -> bool {
        self.cluster
            .as_ref()
            .is_some_and(|g| g.slots().groups().len() > 1)
    }

    fn cluster_serves_key(&self, key: &[u8]) -> bool {
        self.cluster.as_ref().is_none_or(|g| g.serves_key(key))
    }

    fn cluster_serves_any(&self) -> bool {
        self.cluster.as_ref().is_none_or(|g| g.serves_any())
    }

    fn cluster_serves_all(&self) -> bool {
        self.cluster.as_ref().is_none_or(|g| g.serves_all())
    }

    fn cluster_shards(&self) -> Vec<(&crate::replication::ClusterView, Vec<(u16, u16)>)> {
        self.cluster
            .as_ref()
            .map(|g| g.shards())
            .unwrap_or_default()
    }

    fn cluster_groups(&self) -> Vec<crate::machine::GroupStatus<'_>> {
        self.cluster.as_ref().map(|g| g.every()).unwrap_or_default()
    }

    fn cluster_idle_ms(&self, id: u64) -> Option<u64> {
        self.cluster
            .as_ref()
            .map(|g| g.home().idle_ms(id, Instant::now()))
    }

    fn cluster_first_masters_ask(&mut self, client: u64) -> bool {
        self.cluster
            .as_mut()
            .is_some_and(|g| g.home_mut().first_masters_ask(client, Instant::now()))
    }

    fn cluster_masterdown(&self) -> bool {
        // Set only while that one client's batch runs (exec/cluster.rs).
        self.cluster.as_ref().is_some_and(|g| g.masterdown())
    }

    fn cluster_own_group(&self) -> crate::replication::group::GroupId {
        self.cluster
            .as_ref()
            .map_or(crate::replication::group::GroupId::HOME, |g| g.own_group())
    }

    fn cluster_group(
        &self,
        group: crate::replication::group::GroupId,
    ) -> Option<&crate::replication::ClusterView> {
        self.cluster
            .as_ref()
            .map(|g| g.get(group).map_or(&g.home().view, |c| &c.view))
    }

    fn replicaof(
        &mut self,
        state: &mut State,
        master: Option<(String, u16)>,
    ) -> Result<(), String> {
        crate::redisrepl::replica::replicaof(state, self.inbox.as_ref(), master, false)
    }

    fn cluster_reshard(&mut self, first: u16, last: u16, to: u32) -> Result<(), String> {
        match self.cluster.as_mut() {
            Some(g) => g.reshard(first, last, to),
            None => Err("ERR This instance has cluster support disabled".into()),
        }
    }

    fn cluster_slot_frozen(&self, slot: u16) -> bool {
        self.cluster
            .as_ref()
            .is_some_and(|g| g.slots().any_frozen() && g.slots().frozen(slot))
    }

    fn cluster_admin(
        &mut self,
        op: &crate::replication::Admin,
        group: Option<u32>,
    ) -> Result<(), String> {
        match self.cluster.as_mut() {
            Some(g) => g.admin(op, group),
            None => Err("This instance has cluster support disabled".into()),
        }
    }
}

/// The whole dataset as an RDB file, as SAVE and BGSAVE write it.
fn rdb_snapshot(state: &State) -> Vec<u8> {
    rdb_file::encode(
        &state.dbs,
        unix_ms(),
        &state.config.encoding_limits(),
        state.config.compat_value("rdbchecksum") != "no",
        (crate::machine::REDIS_VERSION, crate::alloc::used_memory()),
        &crate::script::functions::library_codes(state),
    )
}

/// The whole dataset as commands (the base file of a rewrite), leaving out keys already dead
/// at `now`. A replicated snapshot passes `now = 0`: no entry is dead at 0, so it keeps every
/// key the leader has not deleted through the log, whatever this node's clock says.
pub fn snapshot(state: &State, now: u64) -> Vec<u8> {
    let mut out = Vec::new();
    // The function libraries first, as Redis's rewriteFunctions.
    for code in crate::script::functions::library_codes(state) {
        emit::command(&mut out, &[b"FUNCTION", b"LOAD", &code]);
    }
    for (i, db) in state.dbs.iter().enumerate() {
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

/// A long load says how far it got this often (INFO persistence has the figures any time).
const LOADING_PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Unrecoverable start-up or durability failure: log and exit like Redis.
fn fatal(msg: &str) -> ! {
    crate::logging::error_once(msg);
    std::process::exit(1);
}

/// Starts the executor thread with the listeners it serves itself (`net`, plain TCP and TLS).
/// It runs until the inbox closes or SHUTDOWN.
///
/// Between events it sleeps in epoll until a connection, an inbox message (shutdown: the inbox
/// wakes the loop through its waker), the next cron tick or the earliest blocked client's
/// deadline.
///
/// The server and the loop are built on the executor thread: their state (the Lua engine, the
/// connections' output) never leaves it.
pub fn spawn(
    config: Config,
    shared: Arc<Shared>,
    listeners: net::Listeners,
) -> std::io::Result<(Inbox, std::thread::JoinHandle<()>)> {
    let (tx, rx) = mpsc::unbounded_channel::<Msg>();
    let inbox = tx.clone();
    // A failure to build the loop comes back here.
    let (built_tx, built_rx) = std::sync::mpsc::sync_channel::<std::io::Result<()>>(1);
    let handle = std::thread::Builder::new()
        .name("executor".into())
        // Lua scripts recurse on this thread (nested replies, cjson up to 1000 levels).
        .stack_size(64 << 20)
        .spawn(move || {
            let has_tls = listeners.tls.is_some();
            let io_threads = config.io_threads();
            let built = net::Net::new(listeners, shared.clone()).and_then(|(mut net, waker)| {
                net.start_io_threads(io_threads.0, io_threads.1)?;
                Ok((net, waker))
            });
            let (net, waker) = match built {
                Ok(x) => {
                    let _ = built_tx.send(Ok(()));
                    x
                }
                Err(e) => {
                    let _ = built_tx.send(Err(e));
                    return;
                }
            };
            run_executor(config, shared, inbox, rx, net, waker, has_tls);
        })?;
    match built_rx.recv() {
        Ok(Ok(())) => Ok((tx, handle)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(std::io::Error::other("the executor thread ended at start")),
    }
}

/// The executor thread: builds the server, loads the log, then serves until shutdown.
fn run_executor(
    mut config: Config,
    shared: Arc<Shared>,
    inbox: Inbox,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    mut net: net::Net,
    waker: Arc<net::LoopWaker>,
    has_tls: bool,
) {
    crate::stopwatch::calibrate();
    if config.cluster_node_id != 0 && config.appendonly {
        // The replicated log is the node's durable record; an AOF beside it would be a
        // second truth that could disagree with the cluster after a failover.
        tracing::warn!("appendonly is ignored in cluster mode: the cluster log in <dir>/cluster is durable (fsynced before every acknowledgement)");
        config.appendonly = false;
    }
    let cluster = (config.cluster_node_id != 0).then(|| {
        cluster::Groups::open(&config, inbox.clone())
            .unwrap_or_else(|e| fatal(&format!("Cannot start the cluster node: {e}")))
    });
    let mut server = Server::new(config, shared, net.busy_state());
    net.set_local(server.state.local.clone());
    server.io.cluster = cluster;
    server.io.inbox = Some(inbox.clone());
    server.io.listen = Some(net.listen_set());
    // Peer messages wake the loop directly (exec/peer.rs reads them in cluster_round).
    if let Some(c) = server.io.cluster.as_ref() {
        if let Err(e) = net.watch(c.peer_fd()) {
            fatal(&format!("Cannot watch the cluster peer connections: {e}"));
        }
    }
    tracing::warn!("Server initialized");
    if !load(&mut server, &mut net, &mut rx) {
        return;
    }
    // Only now, as Redis: a health check or an operator waiting for this line must not
    // see it while the log is still loading.
    tracing::info!("Ready to accept connections tcp");
    if has_tls {
        tracing::info!("Ready to accept connections tls");
    }
    crate::supervise::ready(&server.config);
    if let Some(master) = crate::redisrepl::replica::configured(&server.config) {
        let inbox = server.io.inbox.clone();
        let state = &mut server.state;
        if let Err(e) =
            crate::redisrepl::replica::replicaof(state, inbox.as_ref(), Some(master), true)
        {
            fatal(&e);
        }
    }
    serve(&mut server, &mut net, &mut rx, waker);
    server.finish_shutdown();
}

/// Loads the log a slice at a time, answering clients (-LOADING) in between; false when a
/// shutdown stopped it.
fn load(server: &mut Server, net: &mut net::Net, rx: &mut mpsc::UnboundedReceiver<Msg>) -> bool {
    while server.load_step() {
        while let Ok(msg) = rx.try_recv() {
            server.handle(msg);
        }
        // Shutdown during loading (Redis's whileBlockedCron): stop without opening the log
        // for writing; what was loaded is still on disk.
        if server.shutting_down || server.shared.script.shutdown.load(Ordering::Acquire) {
            tracing::warn!("Shutdown requested during loading: loading stopped.");
            return false;
        }
        net.turn(server, Some(Duration::ZERO));
        before_sleep(server, net);
    }
    true
}

/// The loop proper: inbox, events, timers, then `before_sleep`, until shutdown.
fn serve(
    server: &mut Server,
    net: &mut net::Net,
    rx: &mut mpsc::UnboundedReceiver<Msg>,
    waker: Arc<net::LoopWaker>,
) {
    let waker = std::task::Waker::from(waker);
    let mut cx = std::task::Context::from_waker(&waker);
    server.io.next_cron = Instant::now();
    let mut spin = net::IdleSpin::default();
    loop {
        let mut handled = 0usize;
        while handled < 1024 {
            match rx.poll_recv(&mut cx) {
                std::task::Poll::Ready(Some(msg)) => {
                    server.handle(msg);
                    handled += 1;
                }
                std::task::Poll::Ready(None) => return,
                std::task::Poll::Pending => break,
            }
        }
        let timeout = if handled > 0 || net.has_ready() {
            Duration::ZERO
        } else {
            sleep_for(server)
        };
        spin.set_max(Duration::from_micros(server.config.busy_poll_us));
        net.wait(server, timeout, &mut spin);
        timers(server, net);
        before_sleep(server, net);
        if server.shutting_down {
            // A leader hands over before it goes, so its clients fail over in a round trip
            // instead of an election timeout.
            let now = Instant::now();
            if server.io.cluster.as_mut().is_some_and(|c| c.hand_over(now)) {
                continue;
            }
            return;
        }
    }
}

/// How long the loop may sleep: until the next cron tick, cluster tick or blocked client's
/// deadline.
fn sleep_for(server: &Server) -> Duration {
    let now = Instant::now();
    // Wake at the earliest blocked client's deadline, not only at the next tick. Deadlines
    // are in whole ms; 1 ms past one makes `now > deadline`.
    let mut wake = server.io.next_cron;
    if let Some(c) = server.io.cluster.as_ref() {
        wake = wake.min(c.next_tick());
    }
    if let Some(d) = server.waiters.next_deadline() {
        let due =
            now + Duration::from_millis(d.saturating_sub(unix_ms())) + Duration::from_millis(1);
        wake = wake.min(due);
    }
    wake.saturating_duration_since(now)
}

/// What is due by the clock after a turn: the cron, blocked clients' deadlines, the cluster's
/// ticks and consensus round.
fn timers(server: &mut Server, net: &mut net::Net) {
    // Cron runs on time under a steady stream of requests too (within a turn: the clock
    // read when the poll returned will do).
    let now = net.polled_at();
    if now >= server.io.next_cron {
        // Lent: a paused client resumed here may run a script that turns busy.
        net.lend(server, Server::cron);
        // Every client is looked at; `timeout` counts whole seconds, so at most ten times
        // a second whatever hz is (Redis spreads the same work over a second of
        // clientsCron).
        if now >= server.next_idle_check {
            net.close_idle(server);
            server.next_idle_check = now + Duration::from_millis(100);
        }
        server.io.next_cron = now + cron_period(server.config.hz);
    }
    if server
        .waiters
        .next_deadline()
        .is_some_and(|d| d <= unix_ms())
    {
        blocking::time_out(server);
    }
    if let Some(c) = server.io.cluster.as_mut() {
        c.tick_until(now);
        // Replies the peers' acks committed reach their sockets before the round's fsync
        // of newer entries (exec/cluster.rs).
        c.take_acks();
        if server.release_held(false) {
            net.flush(server);
        }
        // Lent: clients the opened gate releases may run a script that turns busy.
        net.lend(server, Server::cluster_round);
    }
}

/// The end of every pass of the loop, loading or not (Redis's beforeSleep). The order is the
/// rule "the log reaches the file (and the disk under `appendfsync always`) before any reply
/// that depends on it leaves", stated once:
/// 1. blocked clients whose keys became ready are served (their replies join this round);
/// 2. keys found expired are announced (keyspace events, tracking invalidations);
/// 3. the round's broadcast invalidations are queued (every other push is queued already);
/// 4. the log is written, and fsynced under `always`;
/// 5. held output whose watermark is reached is released (exec/hold.rs);
/// 6. every pending connection is written: replies and pushes, in the order produced.
fn before_sleep(server: &mut Server, net: &mut net::Net) {
    if server.waiters.has_ready() {
        net.lend(server, blocking::serve_ready);
    }
    server.drain_expired();
    server.flush_deferred();
    // 4 and 5.
    server.flush_log();
    // Redis replicas attached in this pass get their RDB after the reply that announced it.
    server.state.redis_master.flush();
    net.flush(server);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Apply, DIRECTIVES};

    /// Everything `Local::apply` publishes.
    fn published(s: &crate::machine::shared::Local) -> [u64; 7] {
        [
            s.maxclients.get() as u64,
            s.proto_max_bulk_len.get() as u64,
            s.client_query_buffer_limit.get() as u64,
            s.timeout_secs.get(),
            s.tcp_keepalive.get(),
            s.protected_mode.get() as u64,
            s.auth_required.get() as u64,
        ]
    }

    /// A directive read by the event loop must reach `Local`: changing any of them changes
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
            let local = crate::machine::shared::Local::new(&base);
            let before = published(&local);
            let mut cfg = base.clone();
            cfg.set(d.name, value).unwrap();
            local.apply(&cfg);
            assert_ne!(
                published(&local),
                before,
                "{} is applied as Network but Local::apply does not publish it",
                d.name
            );
        }
    }

    #[test]
    fn snapshot_at_zero_keeps_keys_its_clock_calls_dead() {
        let config = Config::default();
        let shared = Shared::new();
        let mut state = State::new(config, shared.into(), 1);
        let v = |s: &'static [u8]| crate::store::Value::Str(Bytes::from_static(s));
        state.dbs[0].set(b"old", v(b"1"), 1_000);
        state.dbs[0].set(b"new", v(b"2"), 9_000);
        state.dbs[0].set(b"forever", v(b"3"), 0);
        let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
        let at_5000 = text(snapshot(&state, 5_000));
        assert!(!at_5000.contains("old"), "{at_5000}");
        assert!(at_5000.contains("PXAT\r\n$4\r\n9000") && at_5000.contains("forever"));
        let at_zero = text(snapshot(&state, 0));
        assert!(at_zero.contains("$3\r\nold\r\n$1\r\n1\r\n$4\r\nPXAT\r\n$4\r\n1000"));
        assert!(at_zero.contains("new") && at_zero.contains("forever"));
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
