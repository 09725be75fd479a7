//! The listening sockets: made at start-up (lib.rs binds them), accepted on by the loop
//! (net.rs), and replaced by CONFIG SET of `bind` or `port` while the server runs, as Redis
//! 7.0's changeBindAddr / changeListenPort: the old sockets are closed first, then the new
//! addresses bound; when that fails the error goes back to CONFIG SET, which re-applies the
//! old configuration (binding the old addresses again).

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::Arc;

/// Every socket the loop accepts on, with the rustls configuration of the TLS ones. Shared by
/// the loop and the executor's configuration changes (both on the executor thread).
pub struct ListenSet {
    registry: Registry,
    pub listeners: Vec<TcpListener>,
    /// The rustls configuration of each listener (None: plain TCP).
    pub tls_of: Vec<Option<Arc<rustls::ServerConfig>>>,
    /// The TLS configuration in use, kept apart from the listeners: a rebind that fails (and
    /// the rollback to the old addresses after it) closes every socket first.
    tls_cfg: Option<Arc<rustls::ServerConfig>>,
    token: fn(usize) -> Token,
}

impl ListenSet {
    pub fn new(
        registry: Registry,
        plain: Vec<TcpListener>,
        tls: Option<(Arc<rustls::ServerConfig>, Vec<TcpListener>)>,
        token: fn(usize) -> Token,
    ) -> std::io::Result<ListenSet> {
        let mut set = ListenSet {
            registry,
            listeners: Vec::new(),
            tls_of: Vec::new(),
            tls_cfg: tls.as_ref().map(|(cfg, _)| cfg.clone()),
            token,
        };
        set.install(plain, tls)?;
        Ok(set)
    }

    fn install(
        &mut self,
        plain: Vec<TcpListener>,
        tls: Option<(Arc<rustls::ServerConfig>, Vec<TcpListener>)>,
    ) -> std::io::Result<()> {
        self.tls_of = vec![None; plain.len()];
        self.listeners = plain;
        if let Some((cfg, tls)) = tls {
            self.tls_of.extend(tls.iter().map(|_| Some(cfg.clone())));
            self.listeners.extend(tls);
        }
        for (i, l) in self.listeners.iter().enumerate() {
            l.set_nonblocking(true)?;
            self.registry.register(
                &mut SourceFd(&l.as_raw_fd()),
                (self.token)(i),
                Interest::READABLE,
            )?;
        }
        Ok(())
    }

    fn close_all(&mut self) {
        for l in self.listeners.drain(..) {
            let _ = self.registry.deregister(&mut SourceFd(&l.as_raw_fd()));
        }
        self.tls_of.clear();
    }

    /// Listens on `bind` at `port` (0: no plain listener, as Redis) and at `tls_port` with
    /// the TLS configuration in use, after closing every current socket. Err: Redis's reason
    /// for CONFIG SET (the details are logged).
    pub fn rebind(
        &mut self,
        bind: &[String],
        port: u16,
        tls_port: u16,
        backlog: u32,
        bind_changed: bool,
    ) -> Result<(), String> {
        let tls_cfg = self.tls_cfg.clone();
        self.close_all();
        let reason = if bind_changed {
            "Failed to bind to specified addresses."
        } else {
            "Unable to listen on this port. Check server logs."
        };
        let plain = if port == 0 {
            Vec::new()
        } else {
            bind_now(bind, port, backlog).map_err(|e| {
                tracing::warn!("{e}");
                reason.to_string()
            })?
        };
        let tls = match tls_cfg {
            Some(cfg) if tls_port != 0 => Some((
                cfg,
                bind_now(bind, tls_port, backlog).map_err(|e| {
                    tracing::warn!("{e}");
                    reason.to_string()
                })?,
            )),
            _ => None,
        };
        self.install(plain, tls).map_err(|e| {
            tracing::warn!("Listening on the new addresses: {e}");
            self.close_all();
            reason.to_string()
        })
    }
}

/// Binds every address of `bind` on `port` now (lib.rs's `bind_port`, without the runtime):
/// an address starting with `-` is optional, its failure only logged.
pub fn bind_now(bind: &[String], port: u16, backlog: u32) -> std::io::Result<Vec<TcpListener>> {
    let mut out = Vec::new();
    for addr in bind {
        let (host, optional) = crate::config::bind_host(addr);
        let target = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let bound = target
            .to_socket_addrs()
            .and_then(|mut a| {
                a.next()
                    .ok_or_else(|| std::io::Error::other(format!("cannot resolve {host}")))
            })
            .and_then(|a| listen_on(a, backlog));
        match bound {
            Ok(l) => out.push(l),
            Err(e) if optional => tracing::warn!("Could not bind optional address {addr}: {e}"),
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("Warning: Could not create server TCP listening socket {target}: {e}"),
                ))
            }
        }
    }
    Ok(out)
}

fn listen_on(addr: SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.bind(&addr.into())?;
    s.listen(backlog.clamp(1, i32::MAX as u32) as i32)?;
    Ok(s.into())
}
