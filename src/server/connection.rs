//! One connection: read → decode the whole pipeline → one batch to the executor → write every
//! reply chunk queued for us with one write. Output from the executor (replies and pub/sub
//! pushes) arrives on one channel, so it is written in exactly the order it was produced.
//!
//! Only TLS connections have a task: plain TCP is served by the executor's event loop
//! (exec/net.rs).

use crate::exec::{Inbox, Msg};
use crate::machine::client::{auth_may_change, ClientShared, Out};
use crate::machine::Shared;
use crate::protocol::{DecodeLimits, Decoder};
use bytes::BytesMut;
use std::future::Future;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

const READ_CHUNK: usize = 16 * 1024;

/// The byte stream a connection task serves (TLS; generic so tests could use any stream).
pub trait Transport: Send + 'static {
    fn read_buf(&mut self, buf: &mut BytesMut) -> impl Future<Output = io::Result<usize>> + Send;
    /// Writes everything (and flushes what a TLS stream may keep buffered).
    fn write_all(&mut self, buf: &[u8]) -> impl Future<Output = io::Result<()>> + Send;
    fn shutdown(&mut self) -> impl Future<Output = ()> + Send;
}

/// A TLS (or any other) stream: everything goes through the output channel.
pub struct Stream<S>(pub S);

impl<S> Transport for Stream<S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    async fn read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        self.0.read_buf(buf).await
    }

    async fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf).await?;
        self.0.flush().await
    }

    async fn shutdown(&mut self) {
        let _ = self.0.shutdown().await;
    }
}

pub async fn serve<T: Transport>(
    mut io: T,
    id: u64,
    inbox: Inbox,
    mut out_rx: mpsc::UnboundedReceiver<Out>,
    client: Arc<ClientShared>,
    shared: Arc<Shared>,
) {
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut wbuf = BytesMut::new();
    let mut decoder = Decoder::new();
    let mut in_flight = false;
    // A lone SCRIPT KILL / SHUTDOWN NOSAVE queued behind a script: answered here if that script
    // becomes busy, and the executor's later reply to it is dropped (see `script::busy`).
    let mut kill_in_flight: Option<Vec<bytes::Bytes>> = None;
    let mut drop_reply = false;
    let mut eof = false;
    let mut last_activity = Instant::now();
    loop {
        if !in_flight && !eof {
            let limits = DecodeLimits {
                max_bulk_len: shared.proto_max_bulk_len.load(Ordering::Relaxed),
            };
            let mut batch = Vec::new();
            let mut protocol_error = None;
            // The batch ended early (see `auth_may_change`): decode again once it is answered.
            let mut more = false;
            let auth_required = client.auth_required(&shared);
            let server_auth = shared.auth_required.load(Ordering::Relaxed);
            decoder.set_auth_required(auth_required);
            loop {
                match decoder.decode(&mut rbuf, &limits) {
                    Ok(Some(args)) => {
                        let end = auth_may_change(auth_required, server_auth, &args);
                        batch.push(args);
                        if end {
                            more = true;
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        protocol_error = Some(e);
                        break;
                    }
                }
            }
            // While the executor is inside a busy script, answer here (-BUSY, SCRIPT KILL,
            // SHUTDOWN NOSAVE) as Redis does from its script hook.
            while shared.script.must_wait(&batch) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            if let Some(ans) = shared.script.answer(&batch, &client, auth_required) {
                batch.clear();
                if ans.shutdown {
                    shared.request_shutdown();
                }
                if !ans.replies.is_empty() {
                    if io.write_all(&ans.replies).await.is_err() {
                        return;
                    }
                    shared.count_output(ans.replies.len());
                }
                if ans.shutdown {
                    return;
                }
                if ans.close {
                    io.shutdown().await;
                    return;
                }
            }
            if !batch.is_empty() {
                in_flight = true;
                // Inside MULTI the executor queues it: nothing to answer early.
                if batch.len() == 1
                    && crate::script::busy::is_kill_or_shutdown(&batch[0])
                    && !client.in_multi.load(Ordering::Relaxed)
                {
                    kill_in_flight = Some(batch[0].clone());
                }
                if inbox.send(Msg::Batch { id, cmds: batch }).is_err() {
                    return;
                }
            }
            if let Some(e) = protocol_error {
                tracing::debug!("Protocol error ({e}) from client id={id}");
                // Replies to the commands before the bad one come first.
                while in_flight {
                    match out_rx.recv().await {
                        Some(o) => {
                            in_flight = !o.batch_done;
                            wbuf.extend_from_slice(&o.data);
                        }
                        None => return,
                    }
                }
                wbuf.extend_from_slice(&e.reply());
                let _ = io.write_all(&wbuf).await;
                io.shutdown().await;
                return;
            }
            // Answered here (busy script) with requests still buffered: no read or reply will
            // come to wake us for them.
            if more && !in_flight {
                continue;
            }
        }
        let limit = shared.client_query_buffer_limit.load(Ordering::Relaxed);
        if rbuf.len() + decoder.overhead() > limit {
            tracing::warn!(
                "Closing client id={id} that reached max query buffer length ({} bytes)",
                rbuf.len()
            );
            return;
        }
        let timeout = shared.timeout_secs.load(Ordering::Relaxed);
        let idle_deadline =
            if timeout > 0 && !in_flight && !client.timeout_exempt.load(Ordering::Relaxed) {
                Some(last_activity + Duration::from_secs(timeout))
            } else {
                None
            };
        if rbuf.capacity() - rbuf.len() < READ_CHUNK / 2 {
            rbuf.reserve(READ_CHUNK);
        }
        tokio::select! {
            biased;
            out = out_rx.recv() => {
                let Some(first) = out else { return };
                let mut close = false;
                let mut handle = |o: Out, wbuf: &mut BytesMut| {
                    close |= o.close;
                    if o.batch_done {
                        in_flight = false;
                        kill_in_flight = None;
                        if std::mem::take(&mut drop_reply) {
                            return;
                        }
                    }
                    wbuf.extend_from_slice(&o.data);
                };
                handle(first, &mut wbuf);
                while let Ok(o) = out_rx.try_recv() {
                    handle(o, &mut wbuf);
                }
                let n = wbuf.len();
                if n > 0 {
                    // A client that does not read blocks this write; an output-limit kill must
                    // still close it. flush: a TLS stream may keep encrypted records buffered
                    // (no-op for TCP).
                    let written = tokio::select! {
                        r = io.write_all(&wbuf) => r.is_ok(),
                        _ = client.kill_notify.notified() => false,
                    };
                    if !written {
                        return;
                    }
                    shared.count_output(n);
                    client.pending_out.fetch_sub(n.min(client.pending_out.load(Ordering::Relaxed)), Ordering::Relaxed);
                    wbuf.clear();
                    if wbuf.capacity() > 1 << 20 {
                        wbuf = BytesMut::new();
                    }
                }
                if close {
                    io.shutdown().await;
                    return;
                }
                last_activity = Instant::now();
                if eof && !in_flight {
                    return;
                }
            }
            r = io.read_buf(&mut rbuf), if !eof => {
                match r {
                    Ok(0) | Err(_) => {
                        eof = true;
                        // A half-closed client still gets the replies to what it sent, but a
                        // client blocked in BLPOP & co. is released, as Redis frees it on EOF.
                        if !in_flight || client.timeout_exempt.load(Ordering::Relaxed) {
                            return;
                        }
                    }
                    Ok(n) => {
                        shared.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                        last_activity = Instant::now();
                    }
                }
            }
            // Built only when polled: a timer per loop turn would cost every request.
            _ = sleep_lazy(Duration::from_millis(5)), if in_flight && kill_in_flight.is_some() && !drop_reply => {
                let req = kill_in_flight.take().unwrap_or_default();
                let auth_required = client.auth_required(&shared);
                match shared.script.answer(std::slice::from_ref(&req), &client, auth_required) {
                    Some(ans) => {
                        drop_reply = true;
                        if ans.shutdown {
                            shared.request_shutdown();
                            return;
                        }
                        if io.write_all(&ans.replies).await.is_err() {
                            return;
                        }
                        shared.count_output(ans.replies.len());
                    }
                    None => kill_in_flight = Some(req),
                }
            }
            _ = sleep_until_opt(idle_deadline) => {
                tracing::debug!("Closing idle client id={id}");
                return;
            }
        }
        if client.killed.load(Ordering::Relaxed) && !in_flight {
            return;
        }
    }
}

async fn sleep_lazy(d: Duration) {
    tokio::time::sleep(d).await
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}
