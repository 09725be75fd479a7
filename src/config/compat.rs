//! Redis 7.0's directives that deadbolt has no machinery for, so that a stock redis.conf starts.
//! Each is one of three things, decided by what ignoring it would cost:
//! - **accepted, with one logged notice**, where it only tunes Redis internals (encodings,
//!   rehashing, defragmentation, lazy freeing, RDB files, Redis replication
//!   timing): CONFIG GET answers Redis's value (or the one set), CONFIG SET takes it, and the
//!   log says once why it has no effect;
//! - **refused with the reason**, at start-up and by CONFIG SET, for any value but Redis's
//!   default where ignoring it would lose data or weaken security (`unixsocket`, TLS
//!   restrictions; `cluster-enabled` outside a Raft cluster);
//! - `replicaof`, which starts following a Redis master (redisrepl/replica.rs);
//! - `min-replicas-to-write` / `min-replicas-max-lag` (cmd/support.rs: writes get
//!   NOREPLICAS, as on a Redis master without enough good replicas);
//! - `io-threads`, `io-threads-do-reads` (the executor's I/O threads, `exec/io_threads.rs`);
//! - `daemonize`, `supervised` (`supervise.rs`), `latency-tracking` and
//!   `latency-tracking-info-percentiles` (`machine/latency.rs`), which work; and the encoding
//!   thresholds (`hash-max-listpack-entries` ..., `list-max-listpack-size`) and `rdbcompression`,
//!   which decide what OBJECT ENCODING, MEMORY USAGE and DUMP answer (`store/encoding.rs`);
//!   `lazyfree-lazy-user-flush` (FLUSHDB/FLUSHALL without SYNC free on another thread,
//!   store/lazyfree.rs); `dbfilename`, `rdbchecksum` and `stop-writes-on-bgsave-error`, which RDB snapshots
//!   follow (`persist/rdb_file.rs`); `tls-replication` / `tls-cluster` (either puts the
//!   cluster peer connections under TLS, read when the node starts) and
//!   `tls-client-cert-file` / `tls-client-key-file` (the certificate a node presents when it
//!   dials a peer), `exec/peer.rs`; `cluster-enabled`, which a Raft cluster node answers the
//!   Redis Cluster protocol with (`cmd/cluster.rs`) and a lone server refuses
//!   (`Config::cluster_refusal`).
//!
//! Names, aliases, defaults and which are immutable or protected are Redis 7.0.15's own
//! (`CONFIG GET *` and `CONFIG SET` of each on a real redis-server; tests/ops/redis_conf.rs
//! compares them).

use super::{parse_memory, Apply, Directive};

/// How a value is checked and shown (CONFIG GET prints the canonical form, as Redis does).
pub enum Kind {
    Bool,
    Int,
    /// An int Redis bounds to 0..INT_MAX (`min-replicas-to-write`, `min-replicas-max-lag`).
    NonNegInt,
    /// An int Redis bounds to an interval (`io-threads`: 1..=128).
    IntIn(i64, i64),
    Mem,
    /// A memory value or a percentage up to 100 (`maxmemory-clients`).
    MemOrPercent,
    Enum(&'static [&'static str]),
    Str,
    /// `latency-tracking-info-percentiles`: numbers between 0 and 100.
    Percentiles,
    /// `oom-score-adj-values`: three integers between -2000 and 2000.
    OomValues,
}

/// What deadbolt does with a value other than Redis's default.
#[derive(Clone, Copy)]
pub enum Why {
    /// Accepted; the log says this once.
    Notice(&'static str),
    /// Refused with this reason: ignoring it would lose data or weaken security.
    Refuse(&'static str),
    /// Implemented (`daemonize`, `supervised`): no notice.
    Works,
}

const INTERNALS: Why = Why::Notice(
    "they tune Redis internals that deadbolt does not have (encodings, rehashing, defragmentation, lazy freeing, allocator threads, CPU affinity, crash reports)",
);
const RDB: Why = Why::Notice(
    "no effect in deadbolt: its append-only file has no RDB preamble, there are no replication sync files, and an RDB snapshot is written by one thread and fsynced once",
);
const REPL: Why = Why::Notice(
    "no effect in deadbolt: a Redis replica of deadbolt gets its RDB encoded from memory at SYNC, then the stream; deadbolt's own replicas come from its Raft cluster mode (README \"Cluster\")",
);
const RCLUSTER: Why = Why::Notice(
    "deadbolt does not speak Redis Cluster (its own cluster-node-id/cluster-peers directives are the Raft cluster)",
);
const EVICT: Why =
    Why::Notice("deadbolt never evicts keys: over maxmemory it refuses writes that add data");
const OBSERVE: Why =
    Why::Notice("deadbolt has no latency monitor, syslog output or process-title rewriting yet");
const TLS_TUNING: Why =
    Why::Notice("TLS session caching and DH parameters do not apply to deadbolt's TLS (rustls)");
const BEHAVIOUR: Why =
    Why::Notice("deadbolt keeps its own behaviour here (see README \"Configuration\")");

macro_rules! compat_table {
    ($( $name:literal [$($alias:literal),*] $apply:ident $default:literal $kind:expr, $why:expr; )*) => {
        /// The directives of this module, as rows of the one directive table's type.
        pub static COMPAT: &[Directive] = &[
            $(
                Directive {
                    name: $name,
                    aliases: &[$($alias),*],
                    apply: Apply::$apply,
                    get: |c| c.compat.get($name).cloned().unwrap_or_else(|| $default.to_string()),
                    set: |c, v| {
                        let v = canonical(&$kind, v)?;
                        if let Why::Refuse(reason) = $why {
                            if v != $default {
                                return Err(format!("not supported by deadbolt: {reason}"));
                            }
                        }
                        c.compat.insert($name, v);
                        Ok(())
                    },
                    doc: "",
                },
            )*
        ];

        /// What deadbolt does with the directive (None: not one of these).
        pub fn why(name: &str) -> Option<Why> {
            match name {
                $( $name => Some($why), )*
                _ => None,
            }
        }

        /// Redis's default (CONFIG GET on a fresh redis-server 7.0).
        pub fn default_of(name: &str) -> Option<&'static str> {
            match name {
                $( $name => Some($default), )*
                _ => None,
            }
        }
    };
}

fn int(v: &str) -> Result<i64, String> {
    v.parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())
}

fn canonical(kind: &Kind, v: &str) -> Result<String, String> {
    match kind {
        Kind::Bool => match v.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int => int(v).map(|n| n.to_string()),
        Kind::NonNegInt => int(v).and_then(|n| {
            if (0..=i32::MAX as i64).contains(&n) {
                Ok(n.to_string())
            } else {
                Err("argument must be between 0 and 2147483647 inclusive".to_string())
            }
        }),
        Kind::IntIn(lo, hi) => int(v).and_then(|n| {
            if (*lo..=*hi).contains(&n) {
                Ok(n.to_string())
            } else {
                Err(format!("argument must be between {lo} and {hi} inclusive"))
            }
        }),
        Kind::Mem => parse_memory(v)
            .map(|n| n.to_string())
            .ok_or_else(|| "argument must be a memory value".to_string()),
        Kind::Enum(values) => {
            let lower = v.to_ascii_lowercase();
            values
                .iter()
                .find(|e| **e == lower)
                .map(|e| e.to_string())
                .ok_or_else(|| {
                    format!(
                        "argument(s) must be one of the following: {}",
                        values.join(", ")
                    )
                })
        }
        // numericParseString: memory first, then `N%`; the bound is checked after parsing.
        Kind::MemOrPercent => match parse_memory(v) {
            Some(n) => Ok(n.to_string()),
            None => match v.strip_suffix('%').map(str::parse::<i64>) {
                Some(Ok(p)) if (0..=100).contains(&p) => Ok(format!("{p}%")),
                Some(Ok(p)) if p > 100 => {
                    Err("percentage argument must be less or equal to 100".into())
                }
                _ => Err("argument must be a memory or percent value".into()),
            },
        },
        Kind::Str => Ok(v.to_string()),
        Kind::Percentiles => {
            let mut out = Vec::new();
            for w in v.split_whitespace() {
                let p: f64 = w.parse().map_err(|_| {
                    "Invalid latency-tracking-info-percentiles parameters".to_string()
                })?;
                if !(0.0..=100.0).contains(&p) {
                    return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into());
                }
                out.push(w.to_string());
            }
            Ok(out.join(" "))
        }
        Kind::OomValues => {
            let values: Vec<&str> = v.split_whitespace().collect();
            if values.len() != 3 {
                return Err("wrong number of arguments".into());
            }
            let mut out = Vec::new();
            for w in values {
                match w.parse::<i64>() {
                    Ok(n) if (-2000..=2000).contains(&n) => out.push(n.to_string()),
                    _ => return Err(
                        "Invalid oom-score-adj-values, elements must be between -2000 and 2000."
                            .into(),
                    ),
                }
            }
            Ok(out.join(" "))
        }
    }
}

compat_table! {
    "active-defrag-cycle-max" [] Live "25" Kind::Int, INTERNALS;
    "active-defrag-cycle-min" [] Live "1" Kind::Int, INTERNALS;
    "active-defrag-ignore-bytes" [] Live "104857600" Kind::Mem, INTERNALS;
    "active-defrag-max-scan-fields" [] Live "1000" Kind::Int, INTERNALS;
    "active-defrag-threshold-lower" [] Live "10" Kind::Int, INTERNALS;
    "active-defrag-threshold-upper" [] Live "100" Kind::Int, INTERNALS;
    "active-expire-effort" [] Live "1" Kind::Int, INTERNALS;
    "activedefrag" [] Live "no" Kind::Bool, INTERNALS;
    "activerehashing" [] Live "yes" Kind::Bool, INTERNALS;
    "always-show-logo" [] Immutable "no" Kind::Bool, OBSERVE;
    "aof-disable-auto-gc" [] Live "no" Kind::Bool, INTERNALS;
    "aof-rewrite-incremental-fsync" [] Live "yes" Kind::Bool, INTERNALS;
    "aof-timestamp-enabled" [] Live "no" Kind::Bool, BEHAVIOUR;
    "aof-use-rdb-preamble" [] Live "yes" Kind::Bool, RDB;
    "aof_rewrite_cpulist" [] Immutable "" Kind::Str, INTERNALS;
    "bgsave_cpulist" [] Immutable "" Kind::Str, INTERNALS;
    "bind-source-addr" [] Live "" Kind::Str, REPL;
    "bio_cpulist" [] Immutable "" Kind::Str, INTERNALS;
    "cluster-allow-pubsubshard-when-down" [] Live "yes" Kind::Bool, RCLUSTER;
    "cluster-allow-reads-when-down" [] Live "no" Kind::Bool, RCLUSTER;
    "cluster-allow-replica-migration" [] Live "yes" Kind::Bool, RCLUSTER;
    "cluster-announce-bus-port" [] Live "0" Kind::Int, RCLUSTER;
    "cluster-announce-hostname" [] Live "" Kind::Str, RCLUSTER;
    "cluster-announce-ip" [] Live "" Kind::Str, RCLUSTER;
    "cluster-announce-port" [] Live "0" Kind::Int, RCLUSTER;
    "cluster-announce-tls-port" [] Live "0" Kind::Int, RCLUSTER;
    "cluster-config-file" [] Immutable "nodes.conf" Kind::Str, RCLUSTER;
    "cluster-enabled" [] Immutable "no" Kind::Bool, Why::Works;
    "cluster-link-sendbuf-limit" [] Live "0" Kind::Mem, RCLUSTER;
    "cluster-migration-barrier" [] Live "1" Kind::Int, RCLUSTER;
    "cluster-node-timeout" [] Live "15000" Kind::Int, RCLUSTER;
    "cluster-port" [] Immutable "0" Kind::Int, RCLUSTER;
    "cluster-preferred-endpoint-type" [] Live "ip" Kind::Enum(&["ip", "hostname", "unknown-endpoint"]), RCLUSTER;
    "cluster-replica-no-failover" ["cluster-slave-no-failover"] Live "no" Kind::Bool, RCLUSTER;
    "cluster-replica-validity-factor" ["cluster-slave-validity-factor"] Live "10" Kind::Int, RCLUSTER;
    "cluster-require-full-coverage" [] Live "yes" Kind::Bool, RCLUSTER;
    "crash-log-enabled" [] Live "yes" Kind::Bool, INTERNALS;
    "crash-memcheck-enabled" [] Live "yes" Kind::Bool, INTERNALS;
    "daemonize" [] Immutable "no" Kind::Bool, Why::Works;
    "dbfilename" [] Protected "dump.rdb" Kind::Str, Why::Works;
    "disable-thp" [] Immutable "yes" Kind::Bool, INTERNALS;
    "dynamic-hz" [] Live "yes" Kind::Bool, INTERNALS;
    "enable-module-command" [] Immutable "no" Kind::Enum(&["no", "yes", "local"]), BEHAVIOUR;
    "enable-protected-configs" [] Immutable "no" Kind::Enum(&["no", "yes", "local"]), BEHAVIOUR;
    "hash-max-listpack-entries" ["hash-max-ziplist-entries"] Live "512" Kind::Int, Why::Works;
    "hash-max-listpack-value" ["hash-max-ziplist-value"] Live "64" Kind::Int, Why::Works;
    "hll-sparse-max-bytes" [] Live "3000" Kind::Mem, INTERNALS;
    "ignore-warnings" [] Live "" Kind::Str, INTERNALS;
    "io-threads" [] Immutable "1" Kind::IntIn(1, 128), Why::Works;
    "io-threads-do-reads" [] Immutable "no" Kind::Bool, Why::Works;
    "jemalloc-bg-thread" [] Live "yes" Kind::Bool, INTERNALS;
    "key-load-delay" [] Live "0" Kind::Int, INTERNALS;
    "latency-monitor-threshold" [] Live "0" Kind::Int, Why::Works;
    "latency-tracking" [] Live "yes" Kind::Bool, Why::Works;
    "latency-tracking-info-percentiles" [] Live "50 99 99.9" Kind::Percentiles, Why::Works;
    "lazyfree-lazy-eviction" [] Live "no" Kind::Bool, INTERNALS;
    "lazyfree-lazy-expire" [] Live "no" Kind::Bool, INTERNALS;
    "lazyfree-lazy-server-del" [] Live "no" Kind::Bool, INTERNALS;
    "lazyfree-lazy-user-del" [] Live "no" Kind::Bool, INTERNALS;
    "lazyfree-lazy-user-flush" [] Live "no" Kind::Bool, Why::Works;
    "lfu-decay-time" [] Live "1" Kind::Int, EVICT;
    "lfu-log-factor" [] Live "10" Kind::Int, EVICT;
    "list-compress-depth" [] Live "0" Kind::Int, INTERNALS;
    "list-max-listpack-size" ["list-max-ziplist-size"] Live "-2" Kind::Int, Why::Works;
    "loading-process-events-interval-bytes" [] Live "2097152" Kind::Int, INTERNALS;
    "masteruser" [] Live "" Kind::Str, REPL;
    "maxmemory-clients" [] Live "0" Kind::MemOrPercent, EVICT;
    "maxmemory-eviction-tenacity" [] Live "10" Kind::Int, EVICT;
    "maxmemory-samples" [] Live "5" Kind::Int, EVICT;
    "min-replicas-max-lag" ["min-slaves-max-lag"] Live "10" Kind::NonNegInt, Why::Works;
    "min-replicas-to-write" ["min-slaves-to-write"] Live "0" Kind::NonNegInt, Why::Works;
    "no-appendfsync-on-rewrite" [] Live "no" Kind::Bool, BEHAVIOUR;
    "oom-score-adj" [] Live "no" Kind::Enum(&["no", "yes", "relative", "absolute"]), INTERNALS;
    "oom-score-adj-values" [] Live "0 200 800" Kind::OomValues, INTERNALS;
    "proc-title-template" [] Live "{title} {listen-addr} {server-mode}" Kind::Str, OBSERVE;
    "propagation-error-behavior" [] Live "ignore" Kind::Enum(&["ignore", "panic", "panic-on-replicas"]), REPL;
    "rdb-del-sync-files" [] Live "no" Kind::Bool, RDB;
    "rdb-key-save-delay" [] Live "0" Kind::Int, INTERNALS;
    "rdb-save-incremental-fsync" [] Live "yes" Kind::Bool, RDB;
    "rdbchecksum" [] Immutable "yes" Kind::Bool, Why::Works;
    "rdbcompression" [] Live "yes" Kind::Bool, Why::Works;
    "repl-backlog-size" [] Live "1048576" Kind::Mem, Why::Works;
    "repl-backlog-ttl" [] Live "3600" Kind::Int, Why::Works;
    "repl-disable-tcp-nodelay" [] Live "no" Kind::Bool, REPL;
    "repl-diskless-load" [] Live "disabled" Kind::Enum(&["disabled", "on-empty-db", "swapdb"]), REPL;
    "repl-diskless-sync" [] Live "yes" Kind::Bool, REPL;
    "repl-diskless-sync-delay" [] Live "5" Kind::Int, REPL;
    "repl-diskless-sync-max-replicas" [] Live "0" Kind::Int, REPL;
    "repl-ping-replica-period" ["repl-ping-slave-period"] Live "10" Kind::Int, Why::Works;
    "repl-timeout" [] Live "60" Kind::Int, Why::Works;
    "replica-announce-ip" ["slave-announce-ip"] Live "" Kind::Str, REPL;
    "replica-announce-port" ["slave-announce-port"] Live "0" Kind::Int, REPL;
    "replica-announced" [] Live "yes" Kind::Bool, REPL;
    "replica-ignore-disk-write-errors" [] Live "no" Kind::Bool, REPL;
    "replica-ignore-maxmemory" ["slave-ignore-maxmemory"] Live "yes" Kind::Bool, REPL;
    "replica-lazy-flush" ["slave-lazy-flush"] Live "no" Kind::Bool, REPL;
    "replica-priority" ["slave-priority"] Live "100" Kind::Int, REPL;
    "replica-read-only" ["slave-read-only"] Live "yes" Kind::Bool, REPL;
    "replica-serve-stale-data" ["slave-serve-stale-data"] Live "yes" Kind::Bool, REPL;
    "replicaof" ["slaveof"] Immutable "" Kind::Str, Why::Works;
    "sanitize-dump-payload" [] Live "no" Kind::Enum(&["no", "yes", "clients"]), BEHAVIOUR;
    "server_cpulist" [] Immutable "" Kind::Str, INTERNALS;
    "set-max-intset-entries" [] Live "512" Kind::Int, Why::Works;
    "set-proc-title" [] Immutable "yes" Kind::Bool, OBSERVE;
    "shutdown-on-sigint" [] Live "default" Kind::Str, BEHAVIOUR;
    "shutdown-on-sigterm" [] Live "default" Kind::Str, BEHAVIOUR;
    "shutdown-timeout" [] Live "10" Kind::Int, BEHAVIOUR;
    "socket-mark-id" [] Immutable "0" Kind::Int, INTERNALS;
    "stop-writes-on-bgsave-error" [] Live "yes" Kind::Bool, Why::Works;
    "stream-node-max-bytes" [] Live "4096" Kind::Mem, Why::Works;
    "stream-node-max-entries" [] Live "100" Kind::Int, Why::Works;
    "supervised" [] Immutable "no" Kind::Enum(&["upstart", "systemd", "auto", "no"]), Why::Works;
    "syslog-enabled" [] Immutable "no" Kind::Bool, OBSERVE;
    "syslog-facility" [] Immutable "local0" Kind::Enum(&["user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"]), OBSERVE;
    "syslog-ident" [] Immutable "redis" Kind::Str, OBSERVE;
    "tls-ca-cert-dir" [] Live "" Kind::Str, Why::Refuse("client certificates are verified against tls-ca-cert-file only; a CA directory would be ignored and clients it should admit or refuse would be judged differently");
    "tls-ciphers" [] Live "" Kind::Str, Why::Refuse("deadbolt's TLS (rustls) offers its own fixed modern cipher list; a restriction here would be silently ignored");
    "tls-ciphersuites" [] Live "" Kind::Str, Why::Refuse("deadbolt's TLS (rustls) offers its own fixed TLS 1.3 suites; a restriction here would be silently ignored");
    "tls-client-cert-file" [] Live "" Kind::Str, Why::Works;
    "tls-client-key-file" [] Live "" Kind::Str, Why::Works;
    "tls-client-key-file-pass" [] Live "" Kind::Str, TLS_TUNING;
    "tls-cluster" [] Live "no" Kind::Bool, Why::Works;
    "tls-dh-params-file" [] Live "" Kind::Str, TLS_TUNING;
    "tls-key-file-pass" [] Live "" Kind::Str, Why::Refuse("encrypted private keys are not supported: give tls-key-file unencrypted (readable only by deadbolt's user)");
    "tls-prefer-server-ciphers" [] Live "no" Kind::Bool, TLS_TUNING;
    "tls-protocols" [] Live "" Kind::Str, Why::Refuse("deadbolt's TLS (rustls) always offers TLS 1.2 and 1.3; a narrower list would be silently ignored");
    "tls-replication" [] Live "no" Kind::Bool, Why::Works;
    "tls-session-cache-size" [] Live "20480" Kind::Int, TLS_TUNING;
    "tls-session-cache-timeout" [] Live "300" Kind::Int, TLS_TUNING;
    "tls-session-caching" [] Live "yes" Kind::Bool, TLS_TUNING;
    "tracking-table-max-keys" [] Live "1000000" Kind::Int, INTERNALS;
    "unixsocket" [] Immutable "" Kind::Str, Why::Refuse("unix sockets are not supported: clients configured for this socket could not connect; use a TCP port on 127.0.0.1");
    "unixsocketperm" [] Immutable "0" Kind::Str, INTERNALS;
    "use-exit-on-panic" [] Live "no" Kind::Bool, INTERNALS;
    "watchdog-period" [] Live "0" Kind::NonNegInt, INTERNALS;
    "zset-max-listpack-entries" ["zset-max-ziplist-entries"] Live "128" Kind::Int, Why::Works;
    "zset-max-listpack-value" ["zset-max-ziplist-value"] Live "64" Kind::Int, Why::Works;
}

/// Redis's HIDDEN_CONFIG directives (test and debugging knobs): CONFIG GET answers them when
/// asked by name, never for a pattern.
pub const HIDDEN: &[&str] = &[
    "key-load-delay",
    "loading-process-events-interval-bytes",
    "rdb-key-save-delay",
    "use-exit-on-panic",
    "watchdog-period",
];

/// The notices a change of these directives asks for (start-up: every one the configuration
/// sets; CONFIG SET: every one it changes), one line per reason, naming the directives.
pub fn notices(
    now: &std::collections::BTreeMap<&'static str, String>,
    old: &std::collections::BTreeMap<&'static str, String>,
) -> Vec<String> {
    let mut by_reason: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for (name, value) in now {
        if old.get(name) == Some(value) {
            continue;
        }
        let Some(Why::Notice(reason)) = why(name) else {
            continue;
        };
        match by_reason.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, names)) => names.push(name),
            None => by_reason.push((reason, vec![name])),
        }
    }
    by_reason
        .into_iter()
        .map(|(reason, names)| {
            format!(
                "Accepted without effect: {}. Why: {reason}.",
                names.join(", ")
            )
        })
        .collect()
}
