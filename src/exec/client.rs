//! Per-connection state kept by the executor (the connection task only moves bytes).

use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// A chunk of output for one connection, in the order it must be written.
#[derive(Debug)]
pub struct Out {
    pub data: Bytes,
    /// The batch of commands the connection sent is fully answered; it may send the next one.
    pub batch_done: bool,
    /// Close the connection after writing `data` (QUIT, CLIENT KILL, output limit).
    pub close: bool,
}

pub type OutSender = mpsc::UnboundedSender<Out>;

/// State shared between a connection task and the executor.
#[derive(Debug, Default)]
pub struct ClientShared {
    /// Bytes handed to the connection task and not yet written to the socket.
    pub pending_out: AtomicUsize,
    /// Set by the executor when the client must go (CLIENT KILL, output buffer limit).
    pub killed: AtomicBool,
    /// Blocked, subscribed or monitoring clients are exempt from the idle `timeout`.
    pub timeout_exempt: AtomicBool,
}

pub struct Client {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    pub name: Option<Bytes>,
    pub lib_name: Option<Bytes>,
    pub lib_ver: Option<Bytes>,
    pub db: usize,
    /// 2 or 3.
    pub resp: u8,
    pub authenticated: bool,
    pub user: String,
    /// The user's permissions, fixed at AUTH (see cmd/acl.rs).
    pub perms: crate::cmd::acl::Perms,
    pub created: Instant,
    pub last_interaction: Instant,
    pub last_cmd: &'static str,
    pub out: OutSender,
    pub shared: Arc<ClientShared>,
    /// Close after the current batch's replies are written.
    pub close_after_reply: bool,
    /// The command produced no reply now (SHUTDOWN; a blocked command answers later).
    pub skip_reply: bool,
    /// Commands of the current batch not yet run (the client is blocked or paused).
    pub pending: std::collections::VecDeque<Vec<Bytes>>,
}

impl Client {
    pub fn new(
        id: u64,
        addr: SocketAddr,
        laddr: SocketAddr,
        out: OutSender,
        shared: Arc<ClientShared>,
    ) -> Client {
        let now = Instant::now();
        Client {
            id,
            addr,
            laddr,
            name: None,
            lib_name: None,
            lib_ver: None,
            db: 0,
            resp: 2,
            authenticated: false,
            user: "default".into(),
            perms: Default::default(),
            created: now,
            last_interaction: now,
            last_cmd: "NULL",
            out,
            shared,
            close_after_reply: false,
            skip_reply: false,
            pending: Default::default(),
        }
    }

    pub fn resp3(&self) -> bool {
        self.resp == 3
    }

    /// Sends bytes to the connection outside of a batch reply (pub/sub, wake-ups).
    pub fn push(&self, data: Bytes, batch_done: bool) {
        self.shared
            .pending_out
            .fetch_add(data.len(), Ordering::Relaxed);
        let _ = self.out.send(Out {
            data,
            batch_done,
            close: false,
        });
    }

    pub fn kill(&self) {
        self.shared.killed.store(true, Ordering::Relaxed);
        let _ = self.out.send(Out {
            data: Bytes::new(),
            batch_done: true,
            close: true,
        });
    }
}
