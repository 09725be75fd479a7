//! The network side: accept loop, client limits, one task per connection.

pub mod connection;
pub mod protected;
pub mod tls;

use crate::exec::{Inbox, Msg};
use crate::machine::client::{Client, ClientShared};
use crate::machine::Shared;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Accepts TLS connections until `shutdown`; after the handshake each is served by its own task
/// (plain TCP is served by the executor's event loop, exec/net.rs). Never resolves without TLS.
pub async fn accept_tls(
    tls: Option<(tls::TlsAcceptor, Vec<TcpListener>)>,
    inbox: Inbox,
    shared: Arc<Shared>,
) {
    let Some((acceptor, listeners)) = tls else {
        return std::future::pending().await;
    };
    let mut tasks = tokio::task::JoinSet::new();
    for listener in listeners {
        let (acceptor, inbox, shared) = (acceptor.clone(), inbox.clone(), shared.clone());
        tasks.spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, addr)) => {
                        // Read per accept: CONFIG SET reaches the next sockets.
                        prepare(&stream, shared.tcp_keepalive.load(Ordering::Relaxed));
                        let (acceptor, inbox, shared) =
                            (acceptor.clone(), inbox.clone(), shared.clone());
                        tokio::spawn(async move {
                            let laddr = stream.local_addr().unwrap_or(addr);
                            let hs = tokio::time::timeout(
                                tls::HANDSHAKE_TIMEOUT,
                                acceptor.accept(stream),
                            )
                            .await;
                            match hs {
                                Ok(Ok(tls_stream)) => {
                                    on_accept_stream(
                                        connection::Stream(tls_stream),
                                        addr,
                                        laddr,
                                        &inbox,
                                        &shared,
                                    )
                                    .await
                                }
                                Ok(Err(e)) => tracing::debug!(
                                    "Error accepting a client connection: {e} (addr={addr})"
                                ),
                                Err(_) => tracing::debug!("TLS handshake timed out (addr={addr})"),
                            }
                        });
                    }
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::warn!("Accepting client connection: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

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

/// Admission, then the connection task of a TLS client (already in a task of its own, so a
/// refused peer that does not read stalls nobody else).
async fn on_accept_stream<T: connection::Transport>(
    mut stream: T,
    addr: SocketAddr,
    laddr: SocketAddr,
    inbox: &Inbox,
    shared: &Arc<Shared>,
) {
    if let Err(refusal) = admission(shared, addr.ip()) {
        let _ = stream.write_all(refusal).await;
        stream.shutdown().await;
        return;
    }
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let client_shared = Arc::new(ClientShared::new_for(shared));
    let client = Client::new(id, addr, laddr, out_tx, client_shared.clone());
    if inbox.send(Msg::Connect(Box::new(client))).is_err() {
        shared.connected_clients.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    let inbox = inbox.clone();
    let shared = shared.clone();
    tokio::spawn(async move {
        connection::serve(
            stream,
            id,
            inbox.clone(),
            out_rx,
            client_shared,
            shared.clone(),
        )
        .await;
        let _ = inbox.send(Msg::Disconnect { id });
        shared.connected_clients.fetch_sub(1, Ordering::SeqCst);
    });
}
