//! The directive table. Each row: name, aliases, how a CONFIG SET of it reaches the running
//! server (`Apply`; `Immutable` when it can't), how to print and parse it, and the text
//! `config/deadbolt.conf` and docs/configuration.md show.

use super::{
    parse_memory, Apply, Config, DebugCommand, LogLevel, ObufClass, ObufLimit, TlsAuthClients,
};

pub struct Directive {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub apply: Apply,
    pub get: fn(&Config) -> String,
    pub set: fn(&mut Config, &str) -> Result<(), String>,
    pub doc: &'static str,
}

fn yes_no(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

fn show_bool(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

fn int_in(v: &str, min: i64, max: i64) -> Result<i64, String> {
    let n: i64 = v
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
    if n < min || n > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(n)
}

fn mem_in(v: &str, max: u64) -> Result<u64, String> {
    let n = parse_memory(v).ok_or_else(|| "argument must be a memory value".to_string())?;
    if n > max {
        return Err(format!("argument must be between 0 and {max} inclusive"));
    }
    Ok(n)
}

impl Directive {
    /// Whether CONFIG SET may change it.
    pub fn mutable(&self) -> bool {
        self.apply.settable()
    }
}

pub static DIRECTIVES: &[Directive] = &[
    Directive {
        name: "bind",
        aliases: &[],
        apply: Apply::Listen,
        get: |c| c.bind.join(" "),
        set: |c, v| {
            let addrs: Vec<String> = v.split_whitespace().map(str::to_string).collect();
            if addrs.is_empty() {
                return Err("Too many bind addresses specified.".into());
            }
            c.bind = addrs;
            Ok(())
        },
        doc: "Addresses to listen on, space separated. Default 127.0.0.1 (loopback only). CONFIG SET rebinds at once (plain and TLS).",
    },
    Directive {
        name: "port",
        aliases: &[],
        apply: Apply::Listen,
        get: |c| c.port.to_string(),
        set: |c, v| {
            c.port = int_in(v, 0, 65535)? as u16;
            Ok(())
        },
        doc: "TCP port. 0 at start picks a free port (printed in the log); CONFIG SET moves the listener at once (0: no plain TCP listener, as Redis).",
    },
    Directive {
        name: "protected-mode",
        aliases: &[],
        apply: Apply::Network,
        get: |c| show_bool(c.protected_mode),
        set: |c, v| {
            c.protected_mode = yes_no(v)?;
            Ok(())
        },
        doc: "With no password and a non-loopback bind, refuse every client but 127.0.0.1, ::1 and unix sockets (as Redis).",
    },
    Directive {
        name: "tcp-backlog",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.tcp_backlog.to_string(),
        set: |c, v| {
            c.tcp_backlog = int_in(v, 0, i32::MAX as i64)? as u32;
            Ok(())
        },
        doc: "listen(2) backlog.",
    },
    Directive {
        name: "tcp-keepalive",
        aliases: &[],
        apply: Apply::Network,
        get: |c| c.tcp_keepalive.to_string(),
        set: |c, v| {
            c.tcp_keepalive = int_in(v, 0, i32::MAX as i64)? as u64;
            Ok(())
        },
        doc: "Seconds a client socket may be silent before TCP keepalive probes start (then every third of it, 3 probes; 0: off). CONFIG SET applies to connections accepted afterwards, as in Redis.",
    },
    Directive {
        name: "timeout",
        aliases: &[],
        apply: Apply::Network,
        get: |c| c.timeout.to_string(),
        set: |c, v| {
            c.timeout = int_in(v, 0, i32::MAX as i64)? as u64;
            Ok(())
        },
        doc: "Close a client idle for this many seconds (0: never). Blocked and subscribed clients are exempt.",
    },
    Directive {
        name: "databases",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.databases.to_string(),
        set: |c, v| {
            c.databases = int_in(v, 1, i32::MAX as i64)? as usize;
            Ok(())
        },
        doc: "Number of databases (SELECT 0..n-1).",
    },
    Directive {
        name: "maxclients",
        aliases: &[],
        apply: Apply::MaxClients,
        get: |c| c.maxclients.to_string(),
        set: |c, v| {
            c.maxclients = int_in(v, 1, u32::MAX as i64)? as u64;
            Ok(())
        },
        doc: "Most simultaneous clients; more get '-ERR max number of clients reached'.",
    },
    Directive {
        name: "proto-max-bulk-len",
        aliases: &[],
        apply: Apply::Network,
        get: |c| c.proto_max_bulk_len.to_string(),
        set: |c, v| {
            let n = mem_in(v, i64::MAX as u64)?;
            if n < 1024 * 1024 {
                return Err(format!("argument must be between {} and {} inclusive", 1024 * 1024, i64::MAX));
            }
            c.proto_max_bulk_len = n as i64;
            Ok(())
        },
        doc: "Largest bulk string a request may carry (memory units allowed).",
    },
    Directive {
        name: "client-query-buffer-limit",
        aliases: &[],
        apply: Apply::Network,
        get: |c| c.client_query_buffer_limit.to_string(),
        set: |c, v| {
            let n = mem_in(v, i64::MAX as u64)?;
            if n < 1024 * 1024 {
                return Err(format!("argument must be between {} and {} inclusive", 1024 * 1024, i64::MAX));
            }
            c.client_query_buffer_limit = n;
            Ok(())
        },
        doc: "Most unprocessed input one client may have buffered; beyond it the client is closed.",
    },
    Directive {
        name: "loglevel",
        aliases: &[],
        apply: Apply::LogFilter,
        get: |c| c.loglevel.name().into(),
        set: |c, v| {
            let lower = v.to_ascii_lowercase();
            c.loglevel = LogLevel::NAMES
                .iter()
                .find(|(n, _)| *n == lower)
                .map(|(_, l)| *l)
                .ok_or_else(|| "argument(s) must be one of the following: debug, verbose, notice, warning".to_string())?;
            Ok(())
        },
        doc: "debug, verbose, notice, warning or nothing.",
    },
    Directive {
        name: "logfile",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.logfile.clone(),
        set: |c, v| {
            c.logfile = v.to_string();
            Ok(())
        },
        doc: "Log file path; empty logs to standard output.",
    },
    Directive {
        name: "pidfile",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.pidfile.clone(),
        set: |c, v| {
            c.pidfile = v.to_string();
            Ok(())
        },
        doc: "Write the process id to this file at start-up (empty: none).",
    },
    Directive {
        name: "dir",
        aliases: &[],
        apply: Apply::Protected,
        // Redis chdirs into `dir` at start and answers getcwd(): the absolute, resolved path.
        get: |c| {
            std::fs::canonicalize(&c.dir)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| c.dir.clone())
        },
        set: |c, v| {
            c.dir = v.to_string();
            Ok(())
        },
        doc: "Working directory for files the server writes (the append-only files). CONFIG SET refuses it, as Redis 7 refuses protected configs by default.",
    },
    Directive {
        name: "requirepass",
        aliases: &[],
        apply: Apply::Network,
        get: |c| c.requirepass.clone().unwrap_or_default(),
        set: |c, v| {
            c.requirepass = if v.is_empty() { None } else { Some(v.to_string()) };
            c.users.set_default_password(c.requirepass.as_deref());
            Ok(())
        },
        doc: "Password for the default user (AUTH password). Empty: no password.",
    },
    Directive {
        name: "aclfile",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.aclfile.clone(),
        set: |c, v| {
            c.aclfile = v.to_string();
            Ok(())
        },
        doc: "File of ACL users (`user NAME rules…` lines), loaded at start and by ACL LOAD, written by ACL SAVE. Empty: users come from `user` lines. Not both.",
    },
    Directive {
        name: "acllog-max-len",
        aliases: &[],
        apply: Apply::Live,
        get: |c| c.acllog_max_len.to_string(),
        set: |c, v| {
            c.acllog_max_len = int_in(v, 0, i64::MAX)? as u64;
            Ok(())
        },
        doc: "Entries ACL LOG keeps (denied commands, keys, channels, failed AUTHs). Default 128.",
    },
    Directive {
        name: "acl-pubsub-default",
        aliases: &[],
        apply: Apply::Live,
        get: |c| {
            if c.users.all_channels_default { "allchannels" } else { "resetchannels" }.into()
        },
        set: |c, v| {
            c.users.all_channels_default = match v.to_ascii_lowercase().as_str() {
                "allchannels" => true,
                "resetchannels" => false,
                _ => return Err("argument(s) must be one of the following: allchannels, resetchannels".into()),
            };
            Ok(())
        },
        doc: "Channels a new user (or `reset`) starts with: `resetchannels` (none, Redis 7's default) or `allchannels`.",
    },
    Directive {
        name: "hz",
        aliases: &[],
        apply: Apply::CronTimer,
        get: |c| c.hz.to_string(),
        set: |c, v| {
            c.hz = int_in(v, 0, i32::MAX as i64)?.clamp(1, 500) as u64;
            Ok(())
        },
        doc: "Background task frequency (active expiry), 1..500.",
    },
    Directive {
        name: "busy-poll-us",
        aliases: &[],
        apply: Apply::Live,
        get: |c| c.busy_poll_us.to_string(),
        set: |c, v| {
            c.busy_poll_us = int_in(v, 0, 1_000_000)? as u64;
            Ok(())
        },
        doc: "Ours. Out of work, the event loop keeps polling for up to this many microseconds before it sleeps, while the recent gaps between requests are that short: clients that send again right after a reply neither wait for it to wake nor pay for waking it. Costs CPU while traffic flows; 0: sleep at once, as Redis.",
    },
    Directive {
        name: "busy-reply-threshold",
        aliases: &["lua-time-limit"],
        apply: Apply::Live,
        get: |c| c.busy_reply_threshold.to_string(),
        set: |c, v| {
            c.busy_reply_threshold = int_in(v, 0, i64::MAX)? as u64;
            Ok(())
        },
        doc: "Milliseconds a script may run before other clients get -BUSY and SCRIPT KILL works.",
    },
    Directive {
        name: "enable-debug-command",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| {
            match c.enable_debug_command {
                DebugCommand::No => "no",
                DebugCommand::Yes => "yes",
                DebugCommand::Local => "local",
            }
            .into()
        },
        set: |c, v| {
            c.enable_debug_command = match v.to_ascii_lowercase().as_str() {
                "no" => DebugCommand::No,
                "yes" => DebugCommand::Yes,
                "local" => DebugCommand::Local,
                _ => return Err("argument(s) must be one of the following: no, yes, local".into()),
            };
            Ok(())
        },
        doc: "Allow DEBUG (Redis 7.0's subcommands, and the test-only DEBUG CLOCK-OFFSET): no, yes, or local (loopback clients only).",
    },
    Directive {
        name: "appendonly",
        aliases: &[],
        apply: Apply::Persistence,
        get: |c| show_bool(c.appendonly),
        set: |c, v| {
            c.appendonly = yes_no(v)?;
            Ok(())
        },
        doc: "Log every write to the append-only file and load it at start-up.",
    },
    Directive {
        name: "appendfilename",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.appendfilename.clone(),
        set: |c, v| {
            if v.is_empty() || v.contains('/') {
                return Err("appendfilename can't be a path, just a filename".into());
            }
            c.appendfilename = v.to_string();
            Ok(())
        },
        doc: "Base name of the append-only files (inside appenddirname).",
    },
    Directive {
        name: "appenddirname",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.appenddirname.clone(),
        set: |c, v| {
            if v.is_empty() || v.contains('/') {
                return Err("appenddirname can't be a path, just a dirname".into());
            }
            c.appenddirname = v.to_string();
            Ok(())
        },
        doc: "Directory (inside dir) holding the manifest, base and increment files.",
    },
    Directive {
        name: "appendfsync",
        aliases: &[],
        apply: Apply::Persistence,
        get: |c| c.appendfsync.name().into(),
        set: |c, v| {
            c.appendfsync = super::Fsync::parse(v).ok_or_else(|| "argument(s) must be one of the following: everysec, always, no".to_string())?;
            Ok(())
        },
        doc: "always: a write is acknowledged only once fsynced (grouped per executor round); everysec; no.",
    },
    Directive {
        name: "auto-aof-rewrite-percentage",
        aliases: &[],
        apply: Apply::Live,
        get: |c| c.auto_aof_rewrite_percentage.to_string(),
        set: |c, v| {
            c.auto_aof_rewrite_percentage = int_in(v, 0, i32::MAX as i64)? as u64;
            Ok(())
        },
        doc: "Rewrite when the log grew by this % over its size after the last rewrite (0: never).",
    },
    Directive {
        name: "auto-aof-rewrite-min-size",
        aliases: &[],
        apply: Apply::Live,
        get: |c| c.auto_aof_rewrite_min_size.to_string(),
        set: |c, v| {
            c.auto_aof_rewrite_min_size = mem_in(v, i64::MAX as u64)?;
            Ok(())
        },
        doc: "No automatic rewrite below this size.",
    },
    Directive {
        name: "aof-load-truncated",
        aliases: &[],
        apply: Apply::NextStart,
        get: |c| show_bool(c.aof_load_truncated),
        set: |c, v| {
            c.aof_load_truncated = yes_no(v)?;
            Ok(())
        },
        doc: "Load a log whose last command is torn (cutting it off) instead of refusing to start. Read when the log is loaded, at start-up.",
    },
    Directive {
        name: "lock-restart-delay",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.lock_restart_delay.to_string(),
        set: |c, v| {
            c.lock_restart_delay = int_in(v, 0, i64::MAX)? as u64;
            Ok(())
        },
        doc: "Ours. After a start that may have lost acknowledged writes (appendonly no, or appendfsync not always), refuse writes for this many ms. Set it to the longest lock lease clients use (Redlock's delayed restart). 0: off.",
    },
    Directive {
        name: "lock-late-log-max-len",
        aliases: &[],
        apply: Apply::Live,
        get: |c| c.lock_late_log_max_len.to_string(),
        set: |c, v| {
            c.lock_late_log_max_len = int_in(v, 0, 10_000)? as u64;
            Ok(())
        },
        doc: "Ours. How many late lock releases LOCKS LATE keeps (newest first, like slowlog-max-len). 0: none kept; the log line and the counters stay.",
    },
    Directive {
        name: "lock-prefix-delimiters",
        aliases: &[],
        apply: Apply::Live,
        get: |c| c.lock_prefix_delimiters.clone(),
        set: |c, v| {
            if v.is_empty() || v.len() > 8 || !v.bytes().all(|b| b.is_ascii_graphic()) {
                return Err("argument must be 1 to 8 printable characters".into());
            }
            c.lock_prefix_delimiters = v.to_string();
            Ok(())
        },
        doc: "Ours. The bytes that end a lock key's prefix in lock insight (INFO locks, metrics-port): a key is grouped under its part before the last of them (lock:orders:42 under lock:orders); a key with none under itself less trailing digits (orders under orders, job42 under job). 1 to 8 printable bytes.",
    },
    Directive {
        name: "metrics-port",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.metrics_port.to_string(),
        set: |c, v| {
            c.metrics_port = int_in(v, 0, 65535)? as u16;
            Ok(())
        },
        doc: "Ours. A TCP port serving Prometheus's text format at /metrics on the first bind address: the lock insight of INFO locks (acquires, contention, late releases, hold and wait histograms by key prefix), and a live HTML page of it at /. 0, the default: off.",
    },
    Directive {
        name: "sentinel-master-name",
        aliases: &[],
        // The name every client is configured with: renamed under running clients, all of them
        // would stop finding the master.
        apply: Apply::Immutable,
        get: |c| c.sentinel_master_name.clone(),
        set: |c, v| {
            // It appears space separated in Sentinel events (+switch-master) and comma
            // separated in INFO lines.
            if v.is_empty() || v.bytes().any(|b| b <= b' ' || b == b',' || b == 0x7f) {
                return Err("argument must be a non-empty name without spaces or commas".into());
            }
            c.sentinel_master_name = v.to_string();
            Ok(())
        },
        doc: "Ours. The master name a cluster node answers SENTINEL commands for (SENTINEL get-master-addr-by-name <name>): the name Sentinel clients are configured with. A lone server (no cluster) answers no SENTINEL command, as a Redis that is not a Sentinel.",
    },
    Directive {
        name: "cluster-node-id",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.cluster_node_id.to_string(),
        set: |c, v| {
            c.cluster_node_id = int_in(v, 0, i64::MAX)? as u64;
            Ok(())
        },
        doc: "Ours. This node's id in a replicated cluster (its entry in cluster-peers). 0, the default: a lone server, exactly as without cluster support.",
    },
    Directive {
        name: "cluster-peers",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| {
            c.cluster_peers
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        },
        set: |c, v| {
            c.cluster_peers = super::parse_cluster_peers(v)?;
            Ok(())
        },
        doc: "Ours. The voters a new cluster starts with, this node included: space-separated id@host:port:peerport (clients connect to port, nodes to each other on peerport). Read only when the node's directory holds no cluster state yet; later changes go through RAFT ADDLEARNER/PROMOTE/REMOVE.",
    },
    Directive {
        name: "cluster-groups",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.cluster_groups.to_string(),
        set: |c, v| {
            c.cluster_groups = int_in(v, 1, i64::from(super::MAX_CLUSTER_GROUPS))? as u32;
            Ok(())
        },
        doc: "Ours. How many Raft groups share the 16384 hash slots, split evenly as `redis-cli --cluster create` splits them among masters (3: 0-5460, 5461-10922, 10923-16383); each group has its own log and leader, and leadership spreads so each node leads about an equal share. More than 1 needs cluster-enabled yes. The same on every node, read when the node's directory holds no cluster state yet (a node refuses to start with a table other than the one its logs were created with); resharding moves slots later. At most 64.",
    },
    Directive {
        name: "cluster-slot-groups",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| super::show_slot_table(&c.cluster_slot_groups),
        set: |c, v| {
            c.cluster_slot_groups = super::parse_slot_table(v)?;
            Ok(())
        },
        doc: "Ours. The slot table spelled out instead of cluster-groups: space-separated <group>:<first>-<last> (or <group>:<slot>), e.g. \"0:0-8191 1:8192-16383\"; every slot owned by exactly one group, groups numbered from 0 without gaps. Empty, the default: cluster-groups decides. Same rules as cluster-groups.",
    },
    Directive {
        name: "cluster-join",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| show_bool(c.cluster_join),
        set: |c, v| {
            c.cluster_join = yes_no(v)?;
            Ok(())
        },
        doc: "Ours. yes: this node joins a running cluster instead of starting one: cluster-peers names the running members and this node, and it waits, holding no data, until the leader adds it (RAFT ADDLEARNER, then RAFT PROMOTE).",
    },
    Directive {
        name: "cluster-clock-drift",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.cluster_clock_drift.to_string(),
        set: |c, v| {
            c.cluster_clock_drift = int_in(v, 0, 3_600_000)? as u64;
            Ok(())
        },
        doc: "Ours. The most, in ms, that two nodes' wall clocks may differ (keep them in sync with NTP). A new leader extends every key's expiry by this much, so a lock never expires earlier than the leader that granted it would have expired it.",
    },
    Directive {
        name: "cluster-snapshot-every",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.cluster_snapshot_every.to_string(),
        set: |c, v| {
            c.cluster_snapshot_every = int_in(v, 16, i64::MAX)? as u64;
            Ok(())
        },
        doc: "Ours. The replicated log is compacted into a snapshot (the AOF base format) after this many entries (and at least one per key). Compaction writes and fsyncs on the loop thread: every 10 000 entries it put a few-ms stall into the p99 of replicated locks (bench/run --sections cluster), every 100 000 the log keeps about 20 MB in memory.",
    },
    Directive {
        name: "masterauth",
        aliases: &[],
        apply: Apply::Live,
        get: |c| c.masterauth.clone().unwrap_or_default(),
        set: |c, v| {
            let value = (!v.is_empty()).then(|| v.to_string());
            if c.masterauth != value && !c.cluster_peers.is_empty() && c.cluster_secret.is_none() {
                tracing::warn!("masterauth changed: the cluster's peer port keeps proving the password it started with until this node restarts");
            }
            c.masterauth = value;
            Ok(())
        },
        doc: "The password given to a Redis master this server replicates (REPLICAOF; read at each connection to it, as Redis). In a cluster without cluster-secret, the password nodes prove to each other on the peer port (an HMAC of a fresh nonce; it never crosses the wire), read at start-up. Prefer cluster-secret: masterauth is often the clients' requirepass.",
    },
    Directive {
        name: "cluster-secret",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.cluster_secret.clone().unwrap_or_default(),
        set: |c, v| {
            c.cluster_secret = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        },
        doc: "Ours. The secret every cluster node proves on the peer port (an HMAC of a fresh nonce; it never crosses the wire), the same on every node; e.g. `openssl rand -hex 32`. A cluster node refuses to start without it (or masterauth). See docs/cluster-security.md.",
    },
    Directive {
        name: "cluster-peer-bind",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.cluster_peer_bind.join(" "),
        set: |c, v| {
            c.cluster_peer_bind = v.split_whitespace().map(str::to_string).collect();
            Ok(())
        },
        doc: "Ours. Addresses the cluster peer port listens on, space separated, with bind's syntax. Empty, the default: the addresses of bind, as Redis's cluster bus.",
    },
    Directive {
        name: "save",
        aliases: &[],
        // The cron reads the points each time it looks.
        apply: Apply::Live,
        get: |c| {
            c.save_points
                .iter()
                .map(|(s, n)| format!("{s} {n}"))
                .collect::<Vec<_>>()
                .join(" ")
        },
        set: |c, v| {
            c.save_points = super::durability::parse_save_points(v)?;
            Ok(())
        },
        doc: "RDB snapshot points: `<seconds> <changes>` pairs; a background save runs when at least <changes> keys changed and <seconds> passed since the last save. \"\" (the default) takes no snapshots; SAVE and BGSAVE still work, and the file is loaded at start when appendonly is off.",
    },
    Directive {
        name: "client-output-buffer-limit",
        aliases: &[],
        apply: Apply::Live,
        get: |c| {
            let parts: Vec<String> = c
                .client_output_buffer_limit
                .iter()
                .zip(ObufClass::NAMES)
                .map(|(l, n)| format!("{n} {} {} {}", l.hard, l.soft, l.soft_secs))
                .collect();
            parts.join(" ")
        },
        set: set_obuf_limits,
        doc: "<class> <hard> <soft> <soft-seconds> for normal, replica and pubsub clients: a client whose pending output reaches hard, or stays over soft for soft-seconds, is disconnected. 0 disables a limit. deadbolt has no replicas: the replica class is accepted and has no effect (the log says so).",
    },
    Directive {
        name: "notify-keyspace-events",
        aliases: &[],
        apply: Apply::Live,
        get: |c| super::event::flags_to_string(c.notify_keyspace_events),
        set: |c, v| {
            c.notify_keyspace_events = super::event::flags_from_str(v)
                .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string())?;
            Ok(())
        },
        doc: "Keyspace notification classes published on __keyspace@<db>__:<key> / __keyevent@<db>__:<event> (K, E, g, $, l, s, h, z, x, e, t, m, d, n, A). Empty: off. e (evicted), m (key miss) and d (module) are accepted but never fire here (the log says so).",
    },
    Directive {
        name: "lua-memory-limit",
        aliases: &[],
        apply: Apply::Live,
        get: |c| c.lua_memory_limit.to_string(),
        set: |c, v| {
            let n = mem_in(v, i64::MAX as u64)?;
            if n < 1024 * 1024 {
                return Err(format!("argument must be between {} and {} inclusive", 1024 * 1024, i64::MAX));
            }
            c.lua_memory_limit = n;
            Ok(())
        },
        doc: "Most memory the Lua scripting heap may use (deadbolt only; Redis has no limit). A script that needs more fails with an error instead of exhausting the server.",
    },
    Directive {
        name: "tls-port",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.tls_port.to_string(),
        set: |c, v| {
            c.tls_port = int_in(v, 0, 65535)? as u16;
            Ok(())
        },
        doc: "TCP port for TLS connections on the bind addresses (0: no TLS). Needs tls-cert-file and tls-key-file.",
    },
    Directive {
        name: "tls-cert-file",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.tls_cert_file.clone(),
        set: |c, v| {
            c.tls_cert_file = v.to_string();
            Ok(())
        },
        doc: "Server certificate chain (PEM).",
    },
    Directive {
        name: "tls-key-file",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.tls_key_file.clone(),
        set: |c, v| {
            c.tls_key_file = v.to_string();
            Ok(())
        },
        doc: "Private key of the server certificate (PEM: PKCS#8, PKCS#1 or SEC1).",
    },
    Directive {
        name: "tls-ca-cert-file",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.tls_ca_cert_file.clone(),
        set: |c, v| {
            c.tls_ca_cert_file = v.to_string();
            Ok(())
        },
        doc: "CA certificates (PEM) that sign client certificates; needed unless tls-auth-clients is no.",
    },
    Directive {
        name: "tls-auth-clients",
        aliases: &[],
        apply: Apply::Immutable,
        get: |c| c.tls_auth_clients.name().into(),
        set: |c, v| {
            c.tls_auth_clients = match v.to_ascii_lowercase().as_str() {
                "yes" => TlsAuthClients::Yes,
                "no" => TlsAuthClients::No,
                "optional" => TlsAuthClients::Optional,
                _ => return Err("argument(s) must be one of the following: no, yes, optional".into()),
            };
            Ok(())
        },
        doc: "yes: TLS clients must present a certificate signed by tls-ca-cert-file; optional: checked if presented; no: not asked for.",
    },
    Directive {
        name: "maxmemory",
        aliases: &[],
        apply: Apply::MaxMemory,
        get: |c| c.maxmemory.to_string(),
        set: |c, v| {
            c.maxmemory = mem_in(v, i64::MAX as u64)?;
            Ok(())
        },
        doc: "Memory limit in bytes (units allowed; 0: none). Over it, commands that add data get -OOM; reads and deletes still work.",
    },
    Directive {
        name: "maxmemory-policy",
        aliases: &[],
        apply: Apply::Live,
        get: |c| c.maxmemory_policy.clone(),
        set: |c, v| {
            const NAMES: &[&str] = &[
                "volatile-lru",
                "volatile-lfu",
                "volatile-random",
                "volatile-ttl",
                "allkeys-lru",
                "allkeys-lfu",
                "allkeys-random",
                "noeviction",
            ];
            let lower = v.to_ascii_lowercase();
            if !NAMES.contains(&lower.as_str()) {
                return Err(format!(
                    "argument(s) must be one of the following: {}",
                    NAMES.join(", ")
                ));
            }
            if lower != "noeviction" {
                // Evicting a key here would silently release someone's lock.
                return Err(format!(
                    "deadbolt never evicts keys (they are locks): '{lower}' is not supported, only noeviction"
                ));
            }
            c.maxmemory_policy = lower;
            Ok(())
        },
        doc: "Only noeviction: over maxmemory, writes fail with -OOM and no lock is ever evicted.",
    },
    Directive {
        name: "slowlog-log-slower-than",
        aliases: &[],
        apply: Apply::Live,
        get: |c| c.slowlog_log_slower_than.to_string(),
        set: |c, v| {
            c.slowlog_log_slower_than = int_in(v, -1, i64::MAX)?;
            Ok(())
        },
        doc: "Commands taking at least this many microseconds are logged in SLOWLOG (-1: off, 0: every command).",
    },
    Directive {
        name: "slowlog-max-len",
        aliases: &[],
        apply: Apply::Live,
        get: |c| c.slowlog_max_len.to_string(),
        set: |c, v| {
            c.slowlog_max_len = int_in(v, 0, i64::MAX)? as u64;
            Ok(())
        },
        doc: "Most SLOWLOG entries kept (the oldest go first).",
    },
];

/// Redis's rule: every class given is validated before any is applied; classes not named keep
/// their limits.
fn set_obuf_limits(c: &mut Config, v: &str) -> Result<(), String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if words.is_empty() || words.len() % 4 != 0 {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut updated = c.client_output_buffer_limit;
    for w in words.chunks(4) {
        let class = ObufClass::by_name(w[0]).ok_or_else(|| {
            "Invalid client class specified in buffer limit configuration.".to_string()
        })?;
        let bad = || {
            "Error in hard, soft or soft_seconds setting in buffer limit configuration.".to_string()
        };
        let hard = parse_memory(w[1]).ok_or_else(bad)?;
        let soft = parse_memory(w[2]).ok_or_else(bad)?;
        let soft_secs: u64 = w[3].parse().map_err(|_| bad())?;
        updated[class as usize] = ObufLimit {
            hard,
            soft,
            soft_secs,
        };
    }
    c.client_output_buffer_limit = updated;
    Ok(())
}
