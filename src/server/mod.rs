//! What the event loop (exec/net.rs) asks of the network side: socket options, admission
//! (maxclients, protected mode) and the TLS configuration.

pub mod metrics;
pub mod protected;
pub mod tls;

use crate::machine::Shared;
use std::sync::atomic::Ordering;

/// TCP_NODELAY and `tcp-keepalive` on an accepted socket (plain or TLS), as Redis's
/// anetKeepAlive: first probe after the interval, then every third of it, 3 probes.
pub fn prepare(stream: &impl std::os::fd::AsFd, keepalive_secs: u64) {
    let sock = socket2::SockRef::from(stream);
    let _ = sock.set_tcp_nodelay(true);
    if keepalive_secs > 0 {
        let secs = keepalive_secs.min(i32::MAX as u64);
        let ka = socket2::TcpKeepalive::new()
            .with_time(std::time::Duration::from_secs(secs))
            .with_interval(std::time::Duration::from_secs((secs / 3).max(1)))
            .with_retries(3);
        let _ = sock.set_tcp_keepalive(&ka);
    }
}

/// maxclients and protected mode for a new connection, plain or TLS: Ok when it is admitted
/// (counted in `connected_clients`), else the line to send it before closing.
///
/// The counters follow Redis 7.0's `acceptCommonHandler`: a maxclients refusal counts in
/// `rejected_connections` only; a protected-mode refusal comes after the client exists, so it
/// counts in `total_connections_received`.
pub fn admission(shared: &Shared, peer: std::net::IpAddr) -> Result<(), &'static [u8]> {
    let connected = shared.connected_clients.fetch_add(1, Ordering::SeqCst);
    if connected >= shared.maxclients.load(Ordering::Relaxed) {
        shared.connected_clients.fetch_sub(1, Ordering::SeqCst);
        shared.rejected_connections.fetch_add(1, Ordering::Relaxed);
        return Err(b"-ERR max number of clients reached\r\n");
    }
    shared.total_connections.fetch_add(1, Ordering::Relaxed);
    if protected::refuse(shared.protected_mode.load(Ordering::Relaxed), peer) {
        shared.connected_clients.fetch_sub(1, Ordering::SeqCst);
        return Err(protected::DENIED);
    }
    Ok(())
}
