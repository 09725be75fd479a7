//! The state machine's data: every database, the clients' sessions, WATCHes, blocked clients,
//! pub/sub subscriptions, statistics and the operator state (MONITOR, SLOWLOG, CLIENT PAUSE).
//! Command handlers (cmd/) and scripts (script/) see this and nothing of the event loop: no
//! sockets, no log file, no timers. What they need of the loop (CONFIG SET side effects, an AOF
//! rewrite, persistence status) goes through the narrow `Host` trait the loop implements.
//!
//! Layering: protocol/ and store/ below; config/ and persist/ beside; machine/ above them;
//! cmd/ and script/ above machine/; exec/ (the event loop) on top. Nothing here imports cmd/,
//! script/ or exec/.

pub mod busy;
pub mod client;
pub mod latency;
pub mod notify;
pub mod ops;
pub mod output;
pub mod pubsub;
pub mod redis_master;
pub mod replica_link;
pub mod shared;
pub mod stats;
pub mod tracking;

pub use shared::Shared;

use crate::clock::unix_ms;
use crate::config::Fsync;
use crate::config::{Apply, Config};
use crate::protocol::Frame;
use crate::store::waiters::{Waiters, Watches};
use crate::store::Dbs;
use client::Client;
use stats::Stats;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Redis version we answer as (clients gate features on it).
pub const REDIS_VERSION: &str = "7.0.15";

/// A command's index in the command table (cmd/table.rs).
pub type CmdId = usize;

/// One Raft group as `Host::cluster_groups` reports it: its id, its view, its slot ranges.
pub type GroupStatus<'a> = (u32, &'a crate::replication::ClusterView, Vec<(u16, u16)>);

/// What the state machine asks of the event loop that runs it. Implemented by `exec::Server`;
/// handlers reach it as `ctx.host`.
pub trait Host {
    /// Makes a CONFIG SET take effect beyond the configuration itself (`state.config` holds
    /// the new values, `old` the previous ones). Err: the reason CONFIG SET reports.
    fn apply_change(
        &mut self,
        state: &mut State,
        kind: Apply,
        old: &Config,
        names: &[&str],
    ) -> Result<(), String>;
    /// BGREWRITEAOF: starts a rewrite from the current dataset.
    fn start_rewrite(&mut self, state: &State) -> std::io::Result<()>;
    /// The log is still being loaded (commands get -LOADING).
    fn loading(&self) -> bool;
    /// While loading: (start in Unix seconds, bytes loaded, bytes in all), for INFO.
    fn loading_progress(&self) -> Option<(u64, u64, u64)> {
        None
    }
    /// The append-only log, None when it is off (INFO persistence, write refusals).
    fn aof(&self) -> Option<&crate::persist::aof::Aof>;
    /// Writes what the append-only log holds in memory to its file (DEBUG LOADAOF reads it
    /// back); false if the write failed. True without a log.
    fn aof_flush(&mut self) -> bool {
        true
    }
    /// RDB snapshots' state (INFO persistence, LASTSAVE, the MISCONF refusal).
    fn rdb(&self) -> Option<&crate::persist::rdb_file::RdbState> {
        None
    }
    /// SAVE (`background` false) or BGSAVE: Ok with the status reply, Err with the error text.
    fn rdb_save(&mut self, _state: &State, _background: bool) -> Result<&'static str, String> {
        Err("ERR RDB snapshots are not available here".into())
    }
    /// BGSAVE inside EXEC: the loop starts it once the transaction is over, as Redis's
    /// `rdb_bgsave_scheduled`. False where there is no loop to do it.
    fn rdb_schedule(&mut self) -> bool {
        false
    }
    /// Called by a busy script's hook: the loop reads the other connections and answers them
    /// (-BUSY, SCRIPT KILL, SHUTDOWN NOSAVE), as Redis's `processEventsWhileBlocked`.
    fn while_busy(&self);
    /// The consensus core's view of the cluster (ROLE, INFO replication, WAIT, SENTINEL, the
    /// READONLY refusal); None for a lone server, which answers as a Redis master without
    /// replicas.
    fn cluster(&self) -> Option<&crate::replication::ClusterView>;
    /// The view of the Raft group owning hash slot `slot` (who leads it, its term and commit
    /// index): Redis Cluster's redirection asks it. The home group's where there is one group.
    fn role_for(&self, _slot: u16) -> Option<&crate::replication::ClusterView> {
        self.cluster()
    }
    /// The view of Raft group `group` (the home group's where it does not run here).
    fn cluster_group(
        &self,
        _group: crate::replication::group::GroupId,
    ) -> Option<&crate::replication::ClusterView> {
        self.cluster()
    }
    /// The group this node answers ROLE, INFO replication, HELLO and a WAIT before any write
    /// for: with several groups the first one it leads (a Redis Cluster node leading slots is
    /// a master), else the home group.
    fn cluster_own_group(&self) -> crate::replication::group::GroupId {
        crate::replication::group::GroupId::HOME
    }
    /// `cluster_own_group`'s view (None outside cluster mode).
    fn cluster_own(&self) -> Option<&crate::replication::ClusterView> {
        self.cluster_group(self.cluster_own_group())
    }
    /// Whether this cluster node runs several Raft groups (its role depends on the slot).
    fn cluster_groups_split(&self) -> bool {
        false
    }
    /// Where a node runs several Raft groups: whether it serves as leader the group owning
    /// `key`'s slot (its FLUSHALL and FLUSHDB empty those keys alone).
    fn cluster_serves_key(&self, _key: &[u8]) -> bool {
        true
    }
    /// Where a node runs several Raft groups: whether it serves as leader any of them (a
    /// flush is refused, READONLY, on a node leading none, as on a Redis Cluster replica).
    fn cluster_serves_any(&self) -> bool {
        true
    }
    /// Where a node runs several Raft groups: whether it serves every group owning slots as
    /// leader and no slot is moving between groups (only then may a command without keys
    /// delete the expired keys it meets).
    fn cluster_serves_all(&self) -> bool {
        true
    }
    /// Each Raft group owning slots: its view and its slot ranges (CLUSTER SLOTS, SHARDS,
    /// NODES). One group: the view and every slot.
    fn cluster_shards(&self) -> Vec<(&crate::replication::ClusterView, Vec<(u16, u16)>)> {
        let all = vec![(0, crate::replication::group::SLOTS - 1)];
        self.cluster().map(|v| vec![(v, all)]).unwrap_or_default()
    }
    /// Every Raft group this node runs, ascending by id: its id, its view and its slot ranges
    /// (none for a group that owns no slot) (RAFT STATUS, CLUSTER INFO). One group: the home
    /// view, id 0, every slot.
    fn cluster_groups(&self) -> Vec<GroupStatus<'_>> {
        let all = vec![(0, crate::replication::group::SLOTS - 1)];
        self.cluster()
            .map(|v| vec![(0, v, all)])
            .unwrap_or_default()
    }
    /// RAFT RESHARD: release `first..=last` from the group leading it here to group `to`
    /// (exec/reshard.rs); Err: the whole error reply.
    fn cluster_reshard(&mut self, _first: u16, _last: u16, _to: u32) -> Result<(), String> {
        Err("ERR This instance has cluster support disabled".into())
    }
    /// Whether a hash slot is being moved between Raft groups: its keys get -TRYAGAIN.
    fn cluster_slot_frozen(&self, _slot: u16) -> bool {
        false
    }
    /// RAFT ADDLEARNER/PROMOTE/REMOVE/TRANSFER on the consensus core, in Raft group `group`
    /// (None: PROMOTE and the like in every group this node leads, TRANSFER in the home
    /// group); Err: the error reply's text after `ERR `.
    fn cluster_admin(
        &mut self,
        op: &crate::replication::Admin,
        group: Option<u32>,
    ) -> Result<(), String>;
    /// A cluster follower gave up confirming this batch's reads with a leader: commands that
    /// may not run on stale data answer MASTERDOWN, as on a Redis replica whose master link is
    /// down with `replica-serve-stale-data no`.
    fn cluster_masterdown(&self) -> bool {
        false
    }
    /// Milliseconds since this cluster node last heard from member `id` (raft or its PINGs;
    /// 0 for itself): Sentinel's last-ok-ping-reply. None outside cluster mode.
    fn cluster_idle_ms(&self, _id: u64) -> Option<u64> {
        None
    }
    /// SENTINEL MASTERS on a cluster leader: true the first time `client` asks (it is to be
    /// told no master, so it learns the master from a follower), false when this node told it
    /// so within the last few seconds (it has nowhere else to learn it).
    fn cluster_first_masters_ask(&mut self, _client: u64) -> bool {
        false
    }
    /// REPLICAOF host port (`Some`) or NO ONE (`None`) on a lone server: starts following a
    /// Redis master (switching from the one followed), or stops and becomes a master keeping
    /// the data. Err: the error reply.
    fn replicaof(
        &mut self,
        _state: &mut State,
        _master: Option<(String, u16)>,
    ) -> Result<(), String> {
        Err("ERR REPLICAOF is not available here".into())
    }
}

/// The state machine's data.
pub struct State {
    pub dbs: Dbs,
    pub config: Config,
    pub stats: Stats,
    pub shared: Arc<Shared>,
    /// What the loop answering other clients while a script is busy reads (the loop's own,
    /// `Net::busy_state`, once the server runs).
    pub busy: std::rc::Rc<busy::BusyState>,
    /// The limits the event loop enforces and the connection counters, shared with the
    /// loop (`Net::set_local`).
    pub local: std::rc::Rc<shared::Local>,
    /// Every connected client except the one whose batch is running (see `Ctx::client`).
    /// Boxed: a batch takes its client out and puts it back, which must not copy the struct.
    pub clients: HashMap<u64, Box<Client>, ahash::RandomState>,
    pub started: Instant,
    pub run_id: String,
    /// INFO replication's `master_replid` (Redis's replid: random, not the run id; DEBUG
    /// CHANGE-REPL-ID draws a new one).
    pub repl_id: String,
    /// Redis replicas of this server and the stream they get (machine/redis_master.rs).
    pub redis_master: crate::machine::redis_master::Master,
    /// Set by SHUTDOWN: the executor stops after the current batch.
    pub shutting_down: bool,
    /// `lock-restart-delay`: writes are refused until then.
    pub writes_refused_until: Option<Instant>,
    /// WATCHed keys and the clients whose transaction they invalidated.
    pub watches: Watches,
    /// Clients blocked on keys (see exec/blocking.rs).
    pub waiters: Waiters,
    pub pubsub: pubsub::Registry,
    /// The client whose batch is running (0: none); it is not in `clients`.
    pub running: u64,
    /// Pushes for the running client, written into its batch output before the next reply.
    pub self_pushes: Vec<Frame>,
    /// MONITOR, SLOWLOG and CLIENT PAUSE state (cmd/observe.rs).
    pub ops: ops::OpsState,
    /// What the lock operations clients sent amount to (locks.rs: INFO locks, metrics-port).
    pub locks: crate::locks::Insight,
    /// The Lua engine and its script cache (script/mod.rs), created on first use and taken
    /// out while a script runs. `Any` because this layer sits below script/ and cannot name
    /// the type; script/ downcasts (one type-id comparison per EVAL).
    pub scripting: Option<Box<dyn std::any::Any>>,
    /// CLIENT TRACKING's table of keys clients cache, and BCAST prefixes (tracking.rs).
    pub tracking: tracking::Tracking,
    /// Keys changed since the last RDB save (Redis's `server.dirty`; INFO
    /// rdb_changes_since_last_save, the save points).
    pub changes_since_save: u64,
    /// The functions engine and its libraries (`script::functions::Functions`), created by the
    /// first FUNCTION/FCALL command; FUNCTION FLUSH empties it, SCRIPT FLUSH leaves it alone.
    pub functions: Option<Box<dyn std::any::Any>>,
    /// What DEBUG switches (SET-ACTIVE-EXPIRE, PAUSE-CRON, SET-DISABLE-DENY-SCRIPTS...).
    pub debug: DebugSwitches,
    /// deadbolt as a replica of a Redis master (REPLICAOF host port): the master followed and
    /// the replication history it leaves (replica_link.rs).
    pub replica: replica_link::ReplicaHistory,
}

/// Redis's debugging switches, set by DEBUG and read where Redis reads them.
#[derive(Debug, Clone)]
pub struct DebugSwitches {
    /// DEBUG SET-ACTIVE-EXPIRE: the cron removes dead keys (lookups always do).
    pub active_expire: bool,
    /// DEBUG PAUSE-CRON: the periodic work is skipped.
    pub pause_cron: bool,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may call `noscript` commands.
    pub disable_deny_scripts: bool,
}

impl Default for DebugSwitches {
    fn default() -> Self {
        DebugSwitches {
            active_expire: true,
            pause_cron: false,
            disable_deny_scripts: false,
        }
    }
}

/// 40 random hex digits, as Redis's getRandomHexChars.
pub fn random_hex40() -> String {
    (0..40)
        .map(|_| char::from(b"0123456789abcdef"[fastrand::usize(..16)]))
        .collect()
}

impl State {
    /// `ncommands`: the size of the command table, for per-command statistics.
    pub fn new(config: Config, shared: Arc<Shared>, ncommands: usize) -> State {
        let writes_refused_until = (config.lock_restart_delay > 0
            && !(config.appendonly && config.appendfsync == Fsync::Always))
            .then(|| Instant::now() + Duration::from_millis(config.lock_restart_delay));
        if writes_refused_until.is_some() {
            tracing::warn!(
                "Writes are refused for lock-restart-delay ({} ms): this start may have lost acknowledged writes",
                config.lock_restart_delay
            );
        }
        let latency_tracking = config.compat_value("latency-tracking") == "yes";
        let local = std::rc::Rc::new(shared::Local::new(&config));
        let mut state = State {
            dbs: Dbs::new(config.databases),
            config,
            stats: Stats::new(ncommands),
            shared,
            busy: Default::default(),
            local,
            clients: HashMap::default(),
            started: Instant::now(),
            // 40 hex digits, as Redis's getRandomHexChars (Sentinel clients read run ids).
            run_id: (0..40)
                .map(|_| char::from(b"0123456789abcdef"[fastrand::usize(..16)]))
                .collect(),
            repl_id: random_hex40(),
            redis_master: Default::default(),
            shutting_down: false,
            writes_refused_until,
            watches: Watches::default(),
            waiters: Waiters::default(),
            pubsub: Default::default(),
            running: 0,
            self_pushes: Vec::new(),
            ops: Default::default(),
            locks: Default::default(),
            scripting: None,
            tracking: Default::default(),
            changes_since_save: 0,
            functions: None,
            debug: DebugSwitches::default(),
            replica: Default::default(),
        };
        state.sync_created_recording();
        state.stats.latency_tracking = latency_tracking;
        state.sync_latency_threshold();
        state
    }

    /// `latency-monitor-threshold` into the monitor, where each command reads it.
    pub fn sync_latency_threshold(&mut self) {
        let ms = self.config.compat_value("latency-monitor-threshold");
        self.stats.latency_events.threshold_ms = ms.parse::<u64>().unwrap_or(0);
    }

    pub fn connect(&mut self, mut client: Box<Client>) {
        // Like Redis: a client is authenticated at connect while the default user needs no
        // password.
        client.authenticated = !self.config.auth_required();
        client.perms = self.config.users.perms("default");
        self.clients.insert(client.id, client);
    }

    /// Redis's `signalModifiedKey`: invalidates WATCHes on the key and readies blocked clients.
    /// Called by every command that changes a key (through `Ctx::changed`).
    pub fn signal_modified_key(&mut self, db: usize, key: &[u8]) {
        self.watches.touch(db, key);
        self.waiters.signal(db, key);
        self.changes_since_save += 1;
        if self.tracking.active() {
            self.tracking_invalidate(key, self.running, true);
        }
    }

    /// FLUSHDB (Some(db)) / FLUSHALL (None): Redis's `signalFlushedDb` (WATCH on any key of it).
    /// Called before the data is dropped: only watched keys that exist are touched, as in Redis.
    pub fn signal_flushed_db(&mut self, db: Option<usize>) {
        if self.tracking.flush_needed() {
            self.tracking_flush();
        }
        // Clients blocked in XREADGROUP on a key the flush removes are told it is gone
        // (Redis's scanDatabaseForDeletedStreams); other waiters find nothing and wait on.
        if !self.waiters.is_empty() {
            match db {
                Some(d) => self.waiters.signal_db(d),
                None => (0..self.dbs.len()).for_each(|d| self.waiters.signal_db(d)),
            }
        }
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
        // Called after every batch: the common case (nothing expired) is one pass of loads.
        if self.dbs.iter().all(|d| d.expired.is_empty()) {
            return;
        }
        for db in 0..self.dbs.len() {
            if self.dbs[db].expired.is_empty() {
                continue;
            }
            let mut keys = std::mem::take(&mut self.dbs[db].expired);
            for key in &keys {
                // Expiry is a modification for WATCH (Redis's deleteExpiredKeyAndPropagate).
                self.watches.touch(db, key);
                if self.tracking.active() {
                    self.tracking_invalidate(key, 0, true);
                }
                self.notify_keyspace_event(crate::config::event::EXPIRED, "expired", key, db);
            }
            keys.clear();
            if self.dbs[db].expired.is_empty() {
                self.dbs[db].expired = keys;
            }
        }
    }
}
