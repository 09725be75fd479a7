//! Configuration: one table of directives (`DIRECTIVES`) feeds the config file parser, the
//! command-line overrides, CONFIG GET/SET/REWRITE and docs/configuration.md's table.
//!
//! Nothing here imports `cmd`, `exec`, `server` or `script`: they read the configuration, and
//! what it needs of theirs (the users, the keyspace event classes) lives here.

pub mod compat;
mod directives;
pub mod durability;
pub mod event;
pub mod file;
pub mod users;

pub use compat::COMPAT;
pub use directives::{Directive, DIRECTIVES};
pub use durability::Fsync;

/// Every directive a file, the command line or CONFIG GET/SET may name: deadbolt's own, then
/// Redis's that it accepts for compatibility (`compat`).
pub fn all_directives() -> impl Iterator<Item = &'static Directive> {
    DIRECTIVES.iter().chain(COMPAT.iter())
}
pub use file::{load, ConfigError};

/// How a directive changed by CONFIG SET reaches the running server. Every row of `DIRECTIVES`
/// names one and `exec::Server::apply_change` handles every kind (an exhaustive match), so a
/// directive can't be settable without saying how its new value takes effect: CONFIG SET never
/// answers OK for a change that goes nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Apply {
    /// Fixed at start-up: CONFIG SET answers "can't set immutable config", as Redis does.
    Immutable,
    /// Redis 7 refuses CONFIG SET of these ("can't set protected config") unless
    /// `enable-protected-configs` allows it; deadbolt has no such switch, so it always refuses.
    Protected,
    /// The executor reads `Server::config` each time it uses the value (a command, a script,
    /// a cron round, a loop turn): the next use sees the new value, for every client. What such
    /// a change asks for that deadbolt has nothing to act on is logged (`Config::without_effect`).
    Live,
    /// Read off the executor too (accept, the connections' decoders, TLS tasks): published to
    /// `machine::Shared`. What each one governs follows Redis: tcp-keepalive, protected-mode and
    /// requirepass apply to connections accepted afterwards; timeout and the request limits
    /// to open connections as well.
    Network,
    /// `maxclients`: published like `Network` once the process may open that many descriptors
    /// (raising the soft RLIMIT_NOFILE if needed); refused otherwise, as Redis does.
    MaxClients,
    /// `bind`, `port`: the listening sockets are closed and the new addresses bound at once
    /// (Redis's changeBindAddr / changeListenPort); a failure fails CONFIG SET, which binds
    /// the old ones again.
    Listen,
    /// `hz`: the cron timer is re-armed at the new period at once.
    CronTimer,
    /// `loglevel`: the log filter is swapped.
    LogFilter,
    /// `appendonly`, `appendfsync`: the log is opened (with a rewrite from the dataset) or
    /// closed, and the open log's fsync policy follows. Opening can fail: CONFIG SET then
    /// fails and the old values stay.
    Persistence,
    /// `maxmemory`: read live; a value already under the memory in use is logged, as Redis.
    MaxMemory,
    /// Only read when the append-only file is loaded, at start-up: accepted (CONFIG REWRITE
    /// keeps it for the next start) and the log says so.
    NextStart,
}

impl Apply {
    /// Whether CONFIG SET may change a directive applied this way.
    pub fn settable(self) -> bool {
        !matches!(self, Apply::Immutable | Apply::Protected)
    }
}

/// Every setting, with Redis's defaults unless noted.
#[derive(Debug, Clone)]
pub struct Config {
    pub bind: Vec<String>,
    pub port: u16,
    pub protected_mode: bool,
    pub tcp_backlog: u32,
    pub tcp_keepalive: u64,
    pub timeout: u64,
    pub databases: usize,
    pub maxclients: u64,
    pub proto_max_bulk_len: i64,
    pub client_query_buffer_limit: u64,
    pub loglevel: LogLevel,
    pub logfile: String,
    /// Values set of Redis's directives kept for compatibility (`compat`), by name; the others
    /// read as Redis's defaults.
    pub compat: std::collections::BTreeMap<&'static str, String>,
    pub pidfile: String,
    pub dir: String,
    pub requirepass: Option<String>,
    /// ACL users from `user` lines; the default user's password follows `requirepass`.
    pub users: users::Users,
    /// `aclfile`: users come from this file instead of `user` lines (empty: none).
    pub aclfile: String,
    /// `acllog-max-len`: ACL LOG's length.
    pub acllog_max_len: u64,
    pub hz: u64,
    /// Ours: at most this many µs the event loop polls before it sleeps (see
    /// `exec::net::IdleSpin`); 0: it sleeps as soon as it is out of work, as Redis.
    pub busy_poll_us: u64,
    pub busy_reply_threshold: u64,
    pub enable_debug_command: DebugCommand,
    pub appendonly: bool,
    /// `save`: RDB snapshot points (seconds, changes).
    pub save_points: Vec<(u64, u64)>,
    pub appendfilename: String,
    pub appenddirname: String,
    pub appendfsync: Fsync,
    pub auto_aof_rewrite_percentage: u64,
    pub auto_aof_rewrite_min_size: u64,
    pub aof_load_truncated: bool,
    /// Ours: ms during which writes are refused after a start that may have lost acknowledged
    /// writes (persistence off or appendfsync other than always). 0 = off.
    pub lock_restart_delay: u64,
    /// Ours: the master name a cluster answers SENTINEL commands for (clients are configured
    /// with it).
    pub sentinel_master_name: String,
    /// Ours: the port of the Prometheus text endpoint (lock insight); 0 = off.
    pub metrics_port: u16,
    /// Ours: this node's id in a cluster; 0 runs a lone server (no consensus, no SENTINEL).
    pub cluster_node_id: u64,
    /// Ours: every voter of a new cluster, this node included (`cluster-peers`).
    pub cluster_peers: Vec<ClusterPeer>,
    /// Ours: the number of Raft groups the slots are split among evenly (`cluster-groups`).
    pub cluster_groups: u32,
    /// Ours: the slot table spelled out (`cluster-slot-groups`): (group, first, last) ranges,
    /// ascending, covering every slot once; empty: `cluster_groups` decides.
    pub cluster_slot_groups: Vec<SlotRange>,
    /// Ours: this node joins a running cluster (added by RAFT ADDLEARNER) instead of starting
    /// one from `cluster-peers`.
    pub cluster_join: bool,
    /// Ours: the most two nodes' wall clocks may differ, in ms. A new leader extends every
    /// deadline by it, so no lock expires before the leader that granted it would have expired it.
    pub cluster_clock_drift: u64,
    /// Ours: the log is compacted into a snapshot after this many applied entries.
    pub cluster_snapshot_every: u64,
    /// The password cluster peers prove to each other (Redis's replica-to-master password).
    pub masterauth: Option<String>,
    /// Ours: the secret cluster peers prove to each other on the peer port; `masterauth` is
    /// used when it is unset, and cluster mode refuses to start with neither.
    pub cluster_secret: Option<String>,
    /// Ours: the addresses the peer port listens on; empty: those of `bind`, as Redis's
    /// cluster bus.
    pub cluster_peer_bind: Vec<String>,
    /// `client-output-buffer-limit`, indexed by `ObufClass`.
    pub client_output_buffer_limit: [ObufLimit; 3],
    /// `notify-keyspace-events` as Redis's NOTIFY_* bits (see `event`).
    pub notify_keyspace_events: u32,
    /// Most bytes the Lua heap may use (ours; Redis has no limit).
    pub lua_memory_limit: u64,
    /// Bytes; 0 means no limit. Over it, DENYOOM commands get -OOM (policy noeviction).
    pub maxmemory: u64,
    pub maxmemory_policy: String,
    /// Microseconds; commands at least this slow go to SLOWLOG (negative: off, 0: all).
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: u64,
    /// Entries kept by LOCKS LATE (lock insight's late-release history).
    pub lock_late_log_max_len: u64,
    /// The bytes that end a lock key's prefix in lock insight's per-prefix figures.
    pub lock_prefix_delimiters: String,
    /// 0: no TLS listener. Otherwise TLS is served on this port beside the plain one.
    pub tls_port: u16,
    pub tls_cert_file: String,
    pub tls_key_file: String,
    pub tls_ca_cert_file: String,
    pub tls_auth_clients: TlsAuthClients,
    /// Path of the file we were started with (CONFIG REWRITE writes it back).
    pub config_file: Option<std::path::PathBuf>,
}

/// `enable-debug-command`: DEBUG is refused unless enabled (for everyone or loopback clients).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DebugCommand {
    No,
    Yes,
    Local,
}

/// One class of `client-output-buffer-limit`: bytes of pending output (0 = no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObufLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_secs: u64,
}

/// Client classes of `client-output-buffer-limit`, in the order Redis prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObufClass {
    Normal = 0,
    Replica = 1,
    Pubsub = 2,
}

impl ObufClass {
    pub const NAMES: [&'static str; 3] = ["normal", "slave", "pubsub"];

    /// Redis's `getClientTypeByName` minus `master`, which has no limits of its own.
    pub fn by_name(name: &str) -> Option<ObufClass> {
        match name.to_ascii_lowercase().as_str() {
            "normal" => Some(ObufClass::Normal),
            "slave" | "replica" => Some(ObufClass::Replica),
            "pubsub" => Some(ObufClass::Pubsub),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Verbose,
    Notice,
    Warning,
    Nothing,
}

impl LogLevel {
    pub const NAMES: &'static [(&'static str, LogLevel)] = &[
        ("debug", LogLevel::Debug),
        ("verbose", LogLevel::Verbose),
        ("notice", LogLevel::Notice),
        ("warning", LogLevel::Warning),
        ("nothing", LogLevel::Nothing),
    ];

    pub fn name(self) -> &'static str {
        LogLevel::NAMES
            .iter()
            .find(|(_, l)| *l == self)
            .map(|(n, _)| *n)
            .unwrap_or("notice")
    }
}

/// `tls-auth-clients`: whether TLS clients must present a certificate signed by the CA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsAuthClients {
    Yes,
    No,
    Optional,
}

impl TlsAuthClients {
    pub fn name(self) -> &'static str {
        match self {
            TlsAuthClients::Yes => "yes",
            TlsAuthClients::No => "no",
            TlsAuthClients::Optional => "optional",
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: vec!["127.0.0.1".into()],
            port: 6379,
            protected_mode: true,
            tcp_backlog: 511,
            tcp_keepalive: 300,
            timeout: 0,
            databases: 16,
            maxclients: 10000,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            loglevel: LogLevel::Notice,
            logfile: String::new(),
            compat: Default::default(),
            pidfile: String::new(),
            dir: ".".into(),
            requirepass: None,
            users: Default::default(),
            aclfile: String::new(),
            acllog_max_len: 128,
            hz: 10,
            busy_reply_threshold: 5000,
            enable_debug_command: DebugCommand::No,
            appendonly: false,
            save_points: Vec::new(),
            appendfilename: "appendonly.aof".into(),
            appenddirname: "appendonlydir".into(),
            appendfsync: Fsync::EverySec,
            auto_aof_rewrite_percentage: 100,
            auto_aof_rewrite_min_size: 64 * 1024 * 1024,
            aof_load_truncated: true,
            busy_poll_us: 0,
            lock_restart_delay: 0,
            sentinel_master_name: "mymaster".into(),
            metrics_port: 0,
            cluster_node_id: 0,
            cluster_peers: Vec::new(),
            cluster_groups: 1,
            cluster_slot_groups: Vec::new(),
            cluster_join: false,
            cluster_clock_drift: 500,
            cluster_snapshot_every: 100_000,
            masterauth: None,
            cluster_secret: None,
            cluster_peer_bind: Vec::new(),
            client_output_buffer_limit: [
                ObufLimit::default(),
                ObufLimit {
                    hard: 256 << 20,
                    soft: 64 << 20,
                    soft_secs: 60,
                },
                ObufLimit {
                    hard: 32 << 20,
                    soft: 8 << 20,
                    soft_secs: 60,
                },
            ],
            notify_keyspace_events: 0,
            lua_memory_limit: 256 * 1024 * 1024,
            maxmemory: 0,
            maxmemory_policy: "noeviction".into(),
            slowlog_log_slower_than: 10000,
            slowlog_max_len: 128,
            lock_late_log_max_len: 128,
            lock_prefix_delimiters: ":".into(),
            tls_port: 0,
            tls_cert_file: String::new(),
            tls_key_file: String::new(),
            tls_ca_cert_file: String::new(),
            tls_auth_clients: TlsAuthClients::Yes,
            config_file: None,
        }
    }
}

impl Config {
    /// The peer port's shared secret: `cluster-secret`, else `masterauth`; None when neither
    /// is set (a cluster node then refuses to start).
    pub fn peer_secret(&self) -> Option<&str> {
        [&self.cluster_secret, &self.masterauth]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .find(|s| !s.is_empty())
    }

    /// Why this configuration cannot start a cluster node, if it cannot.
    pub fn cluster_refusal(&self) -> Option<&'static str> {
        if self.compat_value("cluster-enabled") == "yes"
            && (self.cluster_node_id == 0 || self.cluster_peers.is_empty())
        {
            return Some(
                "cluster-enabled yes: not supported by deadbolt: a lone server has no Redis \
                 Cluster to answer for; cluster-enabled yes needs deadbolt's Raft cluster mode \
                 (cluster-node-id and cluster-peers), whose leader then owns every hash slot \
                 (docs/cluster.md, \"Cluster-mode clients\")",
            );
        }
        if self.cluster_groups != 1 && !self.cluster_slot_groups.is_empty() {
            return Some(
                "cluster-groups and cluster-slot-groups: set one of them, not both (cluster-groups \
                 splits the slots evenly, cluster-slot-groups spells the table out)",
            );
        }
        if self.slot_table().iter().any(|r| r.group != 0)
            && (self.cluster_node_id == 0 || self.compat_value("cluster-enabled") != "yes")
        {
            return Some(
                "cluster-groups / cluster-slot-groups: several Raft groups need deadbolt's Raft \
                 cluster mode (cluster-node-id, cluster-peers) with cluster-enabled yes: clients \
                 find each group's leader through the Redis Cluster protocol (docs/cluster.md, \
                 \"Raft groups\")",
            );
        }
        if self.cluster_node_id != 0 && !self.compat_value("replicaof").trim().is_empty() {
            return Some(
                "replicaof: not allowed in cluster mode: the cluster replicates through Raft and \
                 elects its leader (RAFT TRANSFER moves it)",
            );
        }
        (!self.cluster_peers.is_empty() && self.peer_secret().is_none()).then_some(
            "cluster mode needs a shared secret for the peer port: set cluster-secret (the same \
             on every node, e.g. the output of `openssl rand -hex 32`); see \
             docs/cluster-security.md",
        )
    }

    /// The slot table a new cluster starts with: `cluster-slot-groups` when set, else the
    /// 16384 slots split evenly among `cluster-groups` groups (`even_slot_table`).
    pub fn slot_table(&self) -> Vec<SlotRange> {
        if self.cluster_slot_groups.is_empty() {
            even_slot_table(self.cluster_groups)
        } else {
            self.cluster_slot_groups.clone()
        }
    }

    pub fn find(name: &str) -> Option<&'static Directive> {
        all_directives().find(|d| {
            d.name.eq_ignore_ascii_case(name)
                || d.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
        })
    }

    /// Whether a new connection must authenticate before running commands.
    pub fn auth_required(&self) -> bool {
        self.users.auth_required()
    }

    /// Protected mode is in force (server/protected.rs): `protected-mode yes` and a default
    /// user without password.
    pub fn protected_mode_active(&self) -> bool {
        self.protected_mode && self.users.default_user().nopass
    }

    /// What this configuration asks for, beyond `old`, that deadbolt accepts but has nothing to
    /// act on, each line saying why. The server logs them (at start-up against the defaults,
    /// after CONFIG SET against the values it replaced): an accepted directive takes effect or
    /// the log says why it has none.
    pub fn without_effect(&self, old: &Config) -> Vec<String> {
        let mut why = Vec::new();
        let replica = ObufClass::Replica as usize;
        if self.client_output_buffer_limit[replica] != old.client_output_buffer_limit[replica] {
            why.push(
                "client-output-buffer-limit: the replica class has no effect: deadbolt has no replicas"
                    .to_string(),
            );
        }
        let gained = self.notify_keyspace_events & !old.notify_keyspace_events;
        for (class, letter, reason) in [
            (event::EVICTED, 'e', "deadbolt never evicts a key"),
            (event::KEY_MISS, 'm', "deadbolt does not publish key misses"),
            (event::MODULE, 'd', "deadbolt loads no modules"),
        ] {
            if gained & class != 0 {
                why.push(format!(
                    "notify-keyspace-events: class '{letter}' never fires: {reason}"
                ));
            }
        }
        why.extend(compat::notices(&self.compat, &old.compat));
        why
    }

    /// A compatibility directive's value (`compat`): the one set, else Redis's default.
    /// The encoding thresholds and `rdbcompression`, as OBJECT ENCODING, MEMORY USAGE, DUMP
    /// and RDB snapshots apply them (`store/encoding.rs`).
    pub fn encoding_limits(&self) -> crate::store::encoding::Limits {
        let num =
            |name: &str, default: i64| self.compat_value(name).parse::<i64>().unwrap_or(default);
        let unsigned = |name: &str, default: i64| num(name, default).max(0) as u64;
        let d = crate::store::encoding::Limits::default();
        crate::store::encoding::Limits {
            hash_entries: unsigned("hash-max-listpack-entries", d.hash_entries as i64),
            hash_value: unsigned("hash-max-listpack-value", d.hash_value as i64),
            zset_entries: unsigned("zset-max-listpack-entries", d.zset_entries as i64),
            zset_value: unsigned("zset-max-listpack-value", d.zset_value as i64),
            set_intset_entries: unsigned("set-max-intset-entries", d.set_intset_entries as i64),
            list_fill: num("list-max-listpack-size", d.list_fill),
            compress: self.compat_value("rdbcompression") != "no",
        }
    }

    /// `io-threads` (1: the executor alone) and `io-threads-do-reads`.
    pub fn io_threads(&self) -> (usize, bool) {
        let n = self.compat_value("io-threads").parse().unwrap_or(1);
        (n, self.compat_value("io-threads-do-reads") == "yes")
    }

    pub fn compat_value(&self, name: &str) -> &str {
        match self.compat.get(name) {
            Some(v) => v,
            None => compat::default_of(name).unwrap_or(""),
        }
    }

    /// Applies one directive by name; the error is the reason Redis would print.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let d = Config::find(name)
            .ok_or_else(|| "Bad directive or wrong number of arguments".to_string())?;
        (d.set)(self, value)
    }
}

/// Redis's `memtoull`: a number with an optional unit (k, kb, m, mb, g, gb; case-insensitive).
pub fn parse_memory(v: &str) -> Option<u64> {
    let lower = v.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit() && c != '-')
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(split);
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    let n: u64 = num.parse().ok()?;
    n.checked_mul(mul)
}

/// How CONFIG GET prints a memory value: plain bytes, as Redis 7 does.
pub fn fmt_memory(v: u64) -> String {
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("100"), Some(100));
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("1kb"), Some(1024));
        assert_eq!(parse_memory("512MB"), Some(512 * 1024 * 1024));
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        assert_eq!(parse_memory("1x"), None);
        assert_eq!(parse_memory("-1"), None);
    }

    /// The layers above read the configuration; an import back up would be a circle.
    #[test]
    fn imports_nothing_above_it() {
        let files = [
            ("mod.rs", include_str!("mod.rs")),
            ("directives.rs", include_str!("directives.rs")),
            ("event.rs", include_str!("event.rs")),
            ("file.rs", include_str!("file.rs")),
            ("users.rs", include_str!("users.rs")),
        ];
        for (file, text) in files {
            for above in ["cmd", "exec", "server", "script"] {
                let path = ["crate::", above].concat();
                assert!(!text.contains(&path), "config/{file} uses {path}");
            }
            // Paths grouped in braces after `crate::` would hide the module names from the check.
            let grouped = ["crate", "::", "{"].concat();
            assert!(
                !text.contains(&grouped),
                "config/{file}: name each crate path"
            );
        }
    }

    #[test]
    fn what_has_no_effect_is_named() {
        let base = Config::default();
        assert!(base.without_effect(&base).is_empty());
        let mut c = base.clone();
        c.set("notify-keyspace-events", "KEA").unwrap();
        c.set("client-output-buffer-limit", "pubsub 1mb 0 0")
            .unwrap();
        let why = c.without_effect(&base);
        // 't' (streams) fires since deadbolt has streams.
        assert_eq!(why.len(), 2, "{why:?}");
        assert!(!why.iter().any(|w| w.contains("'t'")), "{why:?}");
        for letter in ["'e'", "'d'"] {
            assert!(why.iter().any(|w| w.contains(letter)), "{letter}: {why:?}");
        }
        // Only what the change adds: dropping a class or re-setting the same ones says nothing.
        assert!(base.without_effect(&c).is_empty());
        assert!(c.without_effect(&c).is_empty());
        c.set("notify-keyspace-events", "KEAm").unwrap();
        c.set("client-output-buffer-limit", "replica 1mb 1mb 10")
            .unwrap();
        let mut before = base.clone();
        before.set("notify-keyspace-events", "KEA").unwrap();
        let why = c.without_effect(&before);
        assert_eq!(why.len(), 2, "{why:?}");
        assert!(
            why[0].contains("replica") && why[1].contains("'m'"),
            "{why:?}"
        );
    }

    #[test]
    fn slot_tables() {
        let show = |t: &[SlotRange]| show_slot_table(t);
        // redis-cli --cluster create's split among 3, 2 and 1 masters.
        assert_eq!(
            show(&even_slot_table(3)),
            "0:0-5460 1:5461-10922 2:10923-16383"
        );
        assert_eq!(show(&even_slot_table(2)), "0:0-8191 1:8192-16383");
        assert_eq!(show(&even_slot_table(1)), "0:0-16383");
        for n in 1..=MAX_CLUSTER_GROUPS {
            let t = even_slot_table(n);
            assert_eq!(parse_slot_table(&show(&t)).unwrap(), t, "{n}");
        }
        // Commas, single slots, items out of order; one group's adjacent ranges merge.
        assert_eq!(
            show(&parse_slot_table("1:100-16383,0:0-98 0:99").unwrap()),
            "0:0-99 1:100-16383"
        );
        assert_eq!(parse_slot_table("").unwrap(), vec![]);
        for (bad, why) in [
            ("0:0-100", "slots 101-16383 are owned by no group"),
            ("0:1-16383", "slot 0 is owned by no group"),
            (
                "0:0-9000 1:8000-16383",
                "slot 8000 is given to both group 0 and group 1",
            ),
            ("0:0-8191 2:8192-16383", "group 1 owns no slot"),
            ("1:0-16383", "group 0 owns no slot"),
            ("0:0-16384", "is not <group>:<first>-<last>"),
            ("0:10-5", "is not <group>:<first>-<last>"),
            ("x:0-16383", "is not"),
            ("0-16383", "is not"),
            ("64:0-16383", "group ids go from 0 to 63"),
        ] {
            let e = parse_slot_table(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let mut c = Config::default();
        c.set("cluster-groups", "3").unwrap();
        assert_eq!(show(&c.slot_table()), "0:0-5460 1:5461-10922 2:10923-16383");
        assert!(c.set("cluster-groups", "0").is_err());
        assert!(c.set("cluster-groups", "65").is_err());
        // Both set: refused at start-up; several groups outside cluster mode too.
        c.set("cluster-slot-groups", "0:0-1 1:2-16383").unwrap();
        assert!(c.cluster_refusal().unwrap().contains("not both"));
        c.set("cluster-groups", "1").unwrap();
        assert!(c.cluster_refusal().unwrap().contains("cluster-enabled yes"));
    }

    #[test]
    fn every_directive_round_trips_its_default() {
        let mut c = Config::default();
        for d in DIRECTIVES {
            let v = (d.get)(&c);
            (d.set)(&mut c, &v).unwrap_or_else(|e| panic!("{}: {v:?}: {e}", d.name));
            assert_eq!((d.get)(&c), v, "{}", d.name);
        }
    }
}

/// One voter of `cluster-peers`: `id@host:port:peerport` (clients reach it on `port`, peers on
/// `peerport`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterPeer {
    pub id: u64,
    pub host: String,
    pub port: u16,
    pub peer_port: u16,
}

impl ClusterPeer {
    /// The address form the consensus core keeps: "host port peerport".
    pub fn addr(&self) -> String {
        format!("{} {} {}", self.host, self.port, self.peer_port)
    }
}

impl std::fmt::Display for ClusterPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}@{}:{}:{}",
            self.id, self.host, self.port, self.peer_port
        )
    }
}

/// Parses `cluster-peers`: space-separated `id@host:port:peerport`, ids unique and non-zero.
pub fn parse_cluster_peers(v: &str) -> Result<Vec<ClusterPeer>, String> {
    let mut out: Vec<ClusterPeer> = Vec::new();
    for item in v.split_whitespace() {
        let bad = || format!("'{item}' is not id@host:port:peerport");
        let (id, rest) = item.split_once('@').ok_or_else(bad)?;
        let mut parts = rest.rsplitn(3, ':');
        let peer_port = parts.next().and_then(|p| p.parse::<u16>().ok());
        let port = parts.next().and_then(|p| p.parse::<u16>().ok());
        let host = parts.next().filter(|h| !h.is_empty());
        let (Some(peer_port), Some(port), Some(host), Ok(id)) =
            (peer_port, port, host, id.parse::<u64>())
        else {
            return Err(bad());
        };
        if id == 0 || port == 0 || peer_port == 0 {
            return Err(format!("'{item}': ids and ports must be non-zero"));
        }
        if out.iter().any(|p| p.id == id) {
            return Err(format!("node id {id} is listed twice"));
        }
        out.push(ClusterPeer {
            id,
            host: host.to_string(),
            port,
            peer_port,
        });
    }
    Ok(out)
}

/// Redis Cluster's hash slots.
const SLOT_COUNT: u32 = 16384;
/// The most Raft groups a node runs (each has its own log files, helper threads and probes).
pub const MAX_CLUSTER_GROUPS: u32 = 64;

/// One row of the slot table: `group` owns slots `first..=last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotRange {
    pub group: u32,
    pub first: u16,
    pub last: u16,
}

/// The slots split among `n` groups as `redis-cli --cluster create` splits them among `n`
/// masters (its clusterManagerCommandCreate, float arithmetic included): group i owns the i-th
/// share, the last one up to 16383.
pub fn even_slot_table(n: u32) -> Vec<SlotRange> {
    let n = n.clamp(1, MAX_CLUSTER_GROUPS);
    let per = SLOT_COUNT as f32 / n as f32;
    let (mut first, mut cursor) = (0i64, 0f32);
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n {
        let mut last = (cursor + per - 1.0).round() as i64;
        if last > i64::from(SLOT_COUNT) || i == n - 1 {
            last = i64::from(SLOT_COUNT) - 1;
        }
        last = last.max(first);
        out.push(SlotRange {
            group: i,
            first: first as u16,
            last: last as u16,
        });
        first = last + 1;
        cursor += per;
    }
    out
}

/// `cluster-slot-groups`' text: the ranges in slot order, `<group>:<first>-<last>` each.
pub fn show_slot_table(table: &[SlotRange]) -> String {
    table
        .iter()
        .map(|r| format!("{}:{}-{}", r.group, r.first, r.last))
        .collect::<Vec<_>>()
        .join(" ")
}

fn show_slots(a: u32, b: u32) -> String {
    if a == b {
        format!("slot {a} is")
    } else {
        format!("slots {a}-{b} are")
    }
}

/// Parses `cluster-slot-groups`: `<group>:<first>-<last>` or `<group>:<slot>` items separated
/// by spaces or commas. Err unless every one of the 16384 slots is owned by exactly one group
/// and the groups are numbered 0..n-1 (at most `MAX_CLUSTER_GROUPS`). Empty: an empty table.
/// The ranges come back in slot order, adjacent ranges of one group merged.
pub fn parse_slot_table(v: &str) -> Result<Vec<SlotRange>, String> {
    let mut owner: Vec<Option<u32>> = vec![None; SLOT_COUNT as usize];
    let mut any = false;
    for item in v.split([',', ' ', '\t']).filter(|i| !i.is_empty()) {
        any = true;
        let bad = || format!("'{item}' is not <group>:<first>-<last> (slots 0-16383)");
        let (g, range) = item.split_once(':').ok_or_else(bad)?;
        let (a, b) = range.split_once('-').unwrap_or((range, range));
        let (Ok(g), Ok(a), Ok(b)) = (g.parse::<u32>(), a.parse::<u32>(), b.parse::<u32>()) else {
            return Err(bad());
        };
        if a > b || b >= SLOT_COUNT {
            return Err(bad());
        }
        if g >= MAX_CLUSTER_GROUPS {
            return Err(format!(
                "'{item}': group ids go from 0 to {}",
                MAX_CLUSTER_GROUPS - 1
            ));
        }
        for s in a..=b {
            match owner[s as usize] {
                Some(o) if o != g => {
                    return Err(format!("slot {s} is given to both group {o} and group {g}"))
                }
                _ => owner[s as usize] = Some(g),
            }
        }
    }
    if !any {
        return Ok(Vec::new());
    }
    if let Some(a) = owner.iter().position(Option::is_none) {
        let len = owner[a..].iter().take_while(|o| o.is_none()).count();
        let (a, b) = (a as u32, (a + len - 1) as u32);
        return Err(format!(
            "{} owned by no group: every slot 0-16383 needs one",
            show_slots(a, b)
        ));
    }
    let mut out: Vec<SlotRange> = Vec::new();
    for (s, o) in owner.iter().enumerate() {
        let (s, g) = (s as u16, o.unwrap_or(0));
        match out.last_mut() {
            Some(r) if r.group == g => r.last = s,
            _ => out.push(SlotRange {
                group: g,
                first: s,
                last: s,
            }),
        }
    }
    let mut ids: Vec<u32> = out.iter().map(|r| r.group).collect();
    ids.sort_unstable();
    ids.dedup();
    if let Some(gap) = (0..).zip(&ids).find(|(i, g)| i != *g).map(|(i, _)| i) {
        return Err(format!(
            "group {gap} owns no slot: groups are numbered from 0 without gaps"
        ));
    }
    Ok(out)
}

/// A `bind` entry as an address to listen on: Redis's `-` prefix marks it optional (a failure
/// to bind it is logged, not fatal) and `*` is every IPv4 address.
pub fn bind_host(addr: &str) -> (&str, bool) {
    let (host, optional) = match addr.strip_prefix('-') {
        Some(h) => (h, true),
        None => (addr, false),
    };
    (if host == "*" { "0.0.0.0" } else { host }, optional)
}
