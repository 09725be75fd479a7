//! The directive table. Each row: name, aliases, whether CONFIG SET may change it at run time,
//! how to print and parse it, and the text `config/deadbolt.conf` and the README show.

use super::{parse_memory, Config, LogLevel, TlsAuthClients};

pub struct Directive {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub mutable: bool,
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

pub static DIRECTIVES: &[Directive] = &[
    Directive {
        name: "bind",
        aliases: &[],
        mutable: false,
        get: |c| c.bind.join(" "),
        set: |c, v| {
            let addrs: Vec<String> = v.split_whitespace().map(str::to_string).collect();
            if addrs.is_empty() {
                return Err("Too many bind addresses specified.".into());
            }
            c.bind = addrs;
            Ok(())
        },
        doc: "Addresses to listen on, space separated. Default 127.0.0.1 (loopback only).",
    },
    Directive {
        name: "port",
        aliases: &[],
        mutable: false,
        get: |c| c.port.to_string(),
        set: |c, v| {
            c.port = int_in(v, 0, 65535)? as u16;
            Ok(())
        },
        doc: "TCP port. 0 picks a free port (printed in the log).",
    },
    Directive {
        name: "protected-mode",
        aliases: &[],
        mutable: true,
        get: |c| show_bool(c.protected_mode),
        set: |c, v| {
            c.protected_mode = yes_no(v)?;
            Ok(())
        },
        doc: "With no password and a non-loopback bind, refuse non-loopback clients.",
    },
    Directive {
        name: "tcp-backlog",
        aliases: &[],
        mutable: false,
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
        mutable: true,
        get: |c| c.tcp_keepalive.to_string(),
        set: |c, v| {
            c.tcp_keepalive = int_in(v, 0, i32::MAX as i64)? as u64;
            Ok(())
        },
        doc: "Seconds between TCP keepalive probes on client sockets (0: off).",
    },
    Directive {
        name: "timeout",
        aliases: &[],
        mutable: true,
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
        mutable: false,
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
        mutable: true,
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
        mutable: true,
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
        mutable: true,
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
        mutable: true,
        get: |c| c.loglevel.name().into(),
        set: |c, v| {
            let lower = v.to_ascii_lowercase();
            c.loglevel = LogLevel::NAMES
                .iter()
                .find(|(n, _)| *n == lower)
                .map(|(_, l)| *l)
                .ok_or_else(|| "argument(s) must be one of the following: debug, verbose, notice, warning, nothing".to_string())?;
            Ok(())
        },
        doc: "debug, verbose, notice, warning or nothing.",
    },
    Directive {
        name: "logfile",
        aliases: &[],
        mutable: false,
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
        mutable: false,
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
        mutable: true,
        get: |c| c.dir.clone(),
        set: |c, v| {
            c.dir = v.to_string();
            Ok(())
        },
        doc: "Working directory for files the server writes.",
    },
    Directive {
        name: "requirepass",
        aliases: &[],
        mutable: true,
        get: |c| c.requirepass.clone().unwrap_or_default(),
        set: |c, v| {
            c.requirepass = if v.is_empty() { None } else { Some(v.to_string()) };
            c.users.set_default_password(c.requirepass.as_deref());
            Ok(())
        },
        doc: "Password for the default user (AUTH password). Empty: no password.",
    },
    Directive {
        name: "hz",
        aliases: &[],
        mutable: true,
        get: |c| c.hz.to_string(),
        set: |c, v| {
            c.hz = int_in(v, 0, i32::MAX as i64)?.clamp(1, 500) as u64;
            Ok(())
        },
        doc: "Background task frequency (active expiry), 1..500.",
    },
    Directive {
        name: "busy-reply-threshold",
        aliases: &["lua-time-limit"],
        mutable: true,
        get: |c| c.busy_reply_threshold.to_string(),
        set: |c, v| {
            c.busy_reply_threshold = int_in(v, 0, i64::MAX)? as u64;
            Ok(())
        },
        doc: "Milliseconds a script may run before other clients get -BUSY and SCRIPT KILL works.",
    },
    Directive {
        name: "tls-port",
        aliases: &[],
        mutable: false,
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
        mutable: false,
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
        mutable: false,
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
        mutable: false,
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
        mutable: false,
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
        mutable: true,
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
        mutable: true,
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
        mutable: true,
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
        mutable: true,
        get: |c| c.slowlog_max_len.to_string(),
        set: |c, v| {
            c.slowlog_max_len = int_in(v, 0, i64::MAX)? as u64;
            Ok(())
        },
        doc: "Most SLOWLOG entries kept (the oldest go first).",
    },
];
