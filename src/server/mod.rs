//! What the event loop (exec/net.rs) asks of the network side: socket options, admission
//! (maxclients, protected mode) and the TLS configuration.

pub mod metrics;
pub mod protected;
pub mod tls;

use crate::machine::shared::{bump, Local};

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
pub fn admission(local: &Local, peer: std::net::IpAddr) -> Result<(), &'static [u8]> {
    let connected = local.connected_clients.get();
    if connected >= local.maxclients.get() {
        bump(&local.rejected_connections, 1);
        return Err(b"-ERR max number of clients reached\r\n");
    }
    bump(&local.total_connections, 1);
    if protected::refuse(local.protected_mode.get(), peer) {
        return Err(protected::DENIED);
    }
    local.connected_clients.set(connected + 1);
    Ok(())
}
