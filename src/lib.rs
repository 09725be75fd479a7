//! deadbolt: a lock server that speaks the Redis protocol.
//!
//! `run` is what `main` and the tests call: it takes a configuration, already-bound listeners and
//! a shutdown future, so tests start a server on port 0 in-process.

pub mod alloc;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod config;
pub mod error;
pub mod exec;
pub mod glob;
pub mod locks;
pub mod logging;
pub mod machine;
pub mod persist;
pub mod protocol;
pub mod redisrepl;
pub mod replication;
pub mod script;
pub mod server;
pub mod stopwatch;
pub mod store;
pub mod supervise;

use config::Config;

#[global_allocator]
static GLOBAL: alloc::CountingAlloc = alloc::CountingAlloc;

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::net::TcpListener;

/// What `deadbolt -v` prints, in redis-server's shape (`Redis server v=7.0.15 sha=00000000:0
/// malloc=jemalloc-5.3.0 bits=64 build=…`), so scripts that parse it find the same fields.
pub fn version_line() -> String {
    let build = sha1_smol::Sha1::from(concat!(
        env!("CARGO_PKG_VERSION"),
        "-",
        env!("CARGO_PKG_NAME")
    ))
    .digest()
    .to_string();
    format!(
        "deadbolt server v={} sha=00000000:0 malloc={} bits={} build={} redis_version={}",
        env!("CARGO_PKG_VERSION"),
        alloc::allocator_name(),
        usize::BITS,
        &build[..16],
        machine::REDIS_VERSION
    )
}

/// Binds every address of `cfg.bind` on `cfg.port` (Redis's `bind` semantics).
pub async fn bind(cfg: &Config) -> std::io::Result<Vec<TcpListener>> {
    bind_port(cfg, cfg.port).await
}

/// Binds every address of `cfg.bind` on `port` (the plain port or `tls-port`).
pub async fn bind_port(cfg: &Config, port: u16) -> std::io::Result<Vec<TcpListener>> {
    let mut listeners = Vec::new();
    for addr in &cfg.bind {
        let (host, optional) = config::bind_host(addr);
        let target = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let socket_addr: std::net::SocketAddr = match target.parse() {
            Ok(a) => a,
            Err(_) => {
                let mut found = tokio::net::lookup_host(&target).await?;
                found
                    .next()
                    .ok_or_else(|| std::io::Error::other(format!("cannot resolve {host}")))?
            }
        };
        let socket = if socket_addr.is_ipv6() {
            tokio::net::TcpSocket::new_v6()?
        } else {
            tokio::net::TcpSocket::new_v4()?
        };
        socket.set_reuseaddr(true)?;
        match socket
            .bind(socket_addr)
            .and_then(|_| socket.listen(cfg.tcp_backlog.max(1)))
        {
            Ok(l) => listeners.push(l),
            Err(e) if optional => tracing::warn!("Could not bind optional address {addr}: {e}"),
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("Could not create server TCP listening socket {target}: {e}"),
                ))
            }
        }
    }
    Ok(listeners)
}

/// Serves until `shutdown` resolves or a client runs SHUTDOWN; then stops within
/// `SHUTDOWN_BOUND` whatever the executor is running.
pub async fn run(
    cfg: Config,
    listeners: Vec<TcpListener>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    alloc::configure();
    // TLS first: a bad certificate stops the start before anything is served.
    let tls = if cfg.tls_port != 0 {
        let config = server::tls::server_config(&cfg).map_err(std::io::Error::other)?;
        Some((config, bind_port(&cfg, cfg.tls_port).await?))
    } else {
        None
    };
    let mut cfg = cfg;
    for why in cfg.without_effect(&Config::default()) {
        tracing::warn!("{why}");
    }
    if cfg.config_file.is_some() && !cfg.appendonly && cfg.cluster_node_id == 0 {
        // A redis.conf without save lines means RDB snapshots to Redis; deadbolt has none.
        tracing::warn!("WARNING no persistence: appendonly is no and deadbolt writes no RDB snapshots, so a restart starts empty. Set appendonly yes to keep locks across restarts.");
    }
    exec::adjust_open_files_limit(&mut cfg);
    let shared = Arc::new(machine::Shared::new());
    if cfg.metrics_port != 0 {
        let host = cfg
            .bind
            .first()
            .map_or("127.0.0.1", |b| config::bind_host(b).0);
        server::metrics::start(host, cfg.metrics_port, shared.clone())?;
    }
    let pidfile = cfg.pidfile.clone();
    for l in &listeners {
        if let Ok(a) = l.local_addr() {
            tracing::info!("Listening on {a}");
        }
    }
    // Plain TCP and TLS are served by the executor thread's own event loop (exec/net.rs).
    let std_listeners = |ls: Vec<TcpListener>| {
        ls.into_iter()
            .map(|l| l.into_std())
            .collect::<std::io::Result<Vec<_>>>()
    };
    let tls_addrs: Vec<_> = tls
        .iter()
        .flat_map(|(_, ls)| ls.iter().filter_map(|l| l.local_addr().ok()))
        .collect();
    let listeners = exec::net::Listeners {
        plain: std_listeners(listeners)?,
        tls: match tls {
            Some((config, ls)) => Some((config, std_listeners(ls)?)),
            None => None,
        },
    };
    for a in tls_addrs {
        tracing::info!("Listening for TLS on {a}");
    }
    let mode = if cfg.cluster_node_id != 0 {
        "cluster"
    } else {
        "standalone"
    };
    let port = listeners
        .plain
        .first()
        .and_then(|l| l.local_addr().ok())
        .map_or(cfg.port, |a| a.port());
    // `port 0` picked a free port: CONFIG GET port and a later CONFIG SET of `bind` use it
    // (at run time port 0 means no plain listener, as in Redis).
    if cfg.port == 0 {
        cfg.port = port;
    }
    tracing::info!("Running mode={mode}, port={port}.");
    let supervisor = supervise::supervisor(&cfg);
    // The executor says "Ready to accept connections" once the log is loaded.
    let (inbox, executor) = exec::spawn(cfg, shared.clone(), listeners)?;
    // Tokio's part: the signals, the caller's shutdown future and the shutdown watchdog.
    let by_signal = tokio::select! {
        _ = shutdown => true,
        _ = wait_shutdown_request(&shared) => false,
    };
    if supervisor == supervise::Supervisor::Systemd {
        supervise::stopping();
    }
    let insist = insist_on_signals();
    // The SHUTDOWN command logged this itself; SHUTDOWN NOSAVE during a busy script is answered
    // outside the executor and a signal only logged its own line.
    if by_signal || shared.script.shutdown.load(Ordering::Acquire) {
        tracing::warn!("User requested shutdown...");
    }
    // A running script stops at its next hook, whatever it wrote, as for SHUTDOWN NOSAVE; the
    // executor stops at the end of the unit it is in (see `exec::Server::end_unit`).
    shared.script.shutdown.store(true, Ordering::Release);
    let _ = inbox.send(exec::Msg::Shutdown);
    drop(inbox);
    let joined = tokio::task::spawn_blocking(move || executor.join());
    tokio::select! {
        _ = joined => {}
        _ = insist => {}
        _ = tokio::time::sleep(SHUTDOWN_BOUND) => {
            // The executor is inside something no hook reaches (a Lua C function in a long
            // loop, a huge KEYS). Exiting is safe: every acknowledged write already reached
            // the log file (write(2) before its reply left, fsync first under `appendfsync
            // always`), and the page cache outlives the process; the unit cut short was never
            // logged.
            tracing::warn!(
                "Shutdown did not complete within {} seconds (the server is stuck in a command or script that no hook interrupts): exiting now without waiting for it.",
                SHUTDOWN_BOUND.as_secs()
            );
            remove_pidfile(&pidfile);
            tracing::warn!("deadbolt is now ready to exit, bye bye...");
            std::process::exit(1);
        }
    }
    remove_pidfile(&pidfile);
    tracing::warn!("deadbolt is now ready to exit, bye bye...");
    Ok(())
}

/// How long a requested shutdown may take before the process exits without waiting for the
/// executor. Docker's default stop timeout is 10 s, systemd's 90 s: a clean exit fits well
/// within both.
pub const SHUTDOWN_BOUND: std::time::Duration = std::time::Duration::from_secs(5);

fn remove_pidfile(pidfile: &str) {
    if !pidfile.is_empty() {
        tracing::info!("Removing the pid file.");
        let _ = std::fs::remove_file(pidfile);
    }
}

/// While a shutdown is under way: a second SIGINT exits at once, as Redis's sigShutdownHandler
/// ("You insist..."); SIGTERM is logged again. The streams are made before the shutdown starts
/// so that no signal falls between; the future never resolves otherwise.
fn insist_on_signals() -> impl Future<Output = ()> {
    #[cfg(unix)]
    let streams = {
        use tokio::signal::unix::{signal, SignalKind};
        signal(SignalKind::terminate())
            .and_then(|t| Ok((t, signal(SignalKind::interrupt())?)))
            .ok()
    };
    async move {
        #[cfg(unix)]
        if let Some((mut term, mut int)) = streams {
            loop {
                tokio::select! {
                    _ = term.recv() => tracing::warn!("Received SIGTERM scheduling shutdown..."),
                    _ = int.recv() => {
                        tracing::warn!("You insist... exiting now.");
                        std::process::exit(1);
                    }
                }
            }
        }
        std::future::pending::<()>().await
    }
}

async fn wait_shutdown_request(shared: &machine::Shared) {
    loop {
        let notified = shared.shutdown_notify.notified();
        if shared.shutdown_requested.load(Ordering::SeqCst) {
            return;
        }
        notified.await;
    }
}

/// Resolves on SIGINT or SIGTERM, logging Redis's text.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            std::future::pending::<()>().await;
            return;
        };
        tokio::select! {
            _ = term.recv() => tracing::warn!("Received SIGTERM scheduling shutdown..."),
            _ = int.recv() => tracing::warn!("Received SIGINT scheduling shutdown..."),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The `--ping` health probe: PING the configured address, true on `+PONG` (or an auth error,
/// which proves the server is up and answering).
pub fn cli_ping(cfg: &Config) -> bool {
    use std::io::{Read, Write};
    let host = match cfg.bind.first().map(|h| h.trim_start_matches('-')) {
        Some("*") | Some("0.0.0.0") | None => "127.0.0.1".to_string(),
        Some("::") | Some("::*") => "::1".to_string(),
        Some(h) => h.to_string(),
    };
    let target = if host.contains(':') {
        format!("[{host}]:{}", cfg.port)
    } else {
        format!("{host}:{}", cfg.port)
    };
    let Ok(addr) = target.parse::<std::net::SocketAddr>() else {
        return false;
    };
    let timeout = std::time::Duration::from_secs(2);
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, timeout) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(timeout));
    let mut req = Vec::new();
    if let Some(pass) = &cfg.requirepass {
        req.extend_from_slice(
            format!("*2\r\n$4\r\nAUTH\r\n${}\r\n{}\r\n", pass.len(), pass).as_bytes(),
        );
    }
    req.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
    if s.write_all(&req).is_err() {
        return false;
    }
    let mut buf = [0u8; 256];
    let mut got = Vec::new();
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        // -NOAUTH: the probe lacks the password (given on the command line, say), but the
        // server is up and answering, which is what a health check asks.
        if got.windows(7).any(|w| w == b"+PONG\r\n") || got.windows(8).any(|w| w == b"-NOAUTH ") {
            return true;
        }
        if got.len() > 4096 {
            break;
        }
    }
    false
}
