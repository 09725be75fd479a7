//! Blocked clients (BLPOP, BLMOVE, BLMPOP, BZPOPMIN...) are parked values, never threads: the
//! command that found nothing registers (client id, keys, deadline, argv) in `State::waiters`
//! and produces no reply; the client stays in `State::clients` with the rest of its pipeline in
//! `Client::pending`. A write to a waited-on key queues the key as ready (`signal_modified_key`);
//! after the command that wrote it (a whole EXEC or script counts as one command, as in Redis)
//! the ready keys are served: each waiter, oldest first, runs its command again while the key
//! still holds data, then the rest of its pipeline. Deadlines are served by the executor's timer.

use super::Server;
use crate::clock::unix_ms;
use crate::protocol::encode::encode;
use crate::store::waiters::{Unblock, WaitKind};
use crate::store::Value;
use bytes::BytesMut;

fn holds(srv: &mut Server, id: u64, db: usize, key: &[u8], kind: WaitKind, now: u64) -> bool {
    if matches!(kind, WaitKind::Stream | WaitKind::StreamGroup) {
        let value = srv.state.dbs[db].get(key, now).map(|e| &e.value);
        let argv = srv.state.waiters.argv_of(id).unwrap_or(&[]);
        return crate::cmd::stream::waiter_ready(argv, key, value);
    }
    match srv.dbs[db].get(key, now).map(|e| &e.value) {
        Some(Value::List(l)) => kind == WaitKind::List && !l.is_empty(),
        Some(Value::ZSet(z)) => kind == WaitKind::ZSet && !z.is_empty(),
        _ => kind == WaitKind::Replicas,
    }
}

/// Serves the keys written since the last call (Redis's handleClientsBlockedOnKeys).
pub fn serve_ready(srv: &mut Server) {
    if srv.serving_ready {
        return;
    }
    srv.serving_ready = true;
    while srv.waiters.has_ready() {
        for dk in srv.waiters.take_ready() {
            for (id, kind) in srv.waiters.queue(&dk) {
                let now = unix_ms();
                if !holds(srv, id, dk.0, &dk.1, kind, now) {
                    continue;
                }
                resume(srv, id, Some(&dk.1));
            }
        }
    }
    srv.serving_ready = false;
}

/// Times out the waiters whose deadline has passed.
pub fn time_out(srv: &mut Server) {
    let now = unix_ms();
    for id in srv.waiters.take_timed_out(now) {
        resume(srv, id, None);
    }
    serve_ready(srv);
}

/// Unblocks a client: replies the timeout null (`ready` None) or runs its command again for
/// the key that became ready, then the rest of its pipeline. A client unblocked early is
/// answered as `Blocked::unblock` says, whatever woke it.
fn resume(srv: &mut Server, id: u64, ready: Option<&bytes::Bytes>) {
    let Some(b) = srv.waiters.unblock(id) else {
        return;
    };
    let Some(mut client) = srv.clients.remove(&id) else {
        return;
    };
    client.blocked = false;
    // Still exempt if it is subscribed (RESP3 clients can be both).
    let subscribed = client.pubsub.subscribed();
    client.shared.timeout_exempt.set(subscribed);
    let mut out = BytesMut::new();
    let error =
        |text: &'static [u8]| crate::protocol::Frame::Error(bytes::Bytes::from_static(text));
    match (b.unblock, ready) {
        (Unblock::Demoted, _) => {
            // Redis's CLIENT_CLOSE_AFTER_REPLY: nothing else it sent runs.
            client.pending.clear();
            client.close_after_reply = true;
            let reply = error(
                b"UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
            );
            if !(client.reply_off || client.reply_skip) {
                encode(&reply, client.resp3(), &mut out);
            }
        }
        (Unblock::Rerun(deadline), _) => {
            client.block_deadline = Some(deadline);
            client.block_ready_key = None;
            client.pending.push_front(b.argv);
        }
        (Unblock::Timeout | Unblock::Error, None) => {
            // Redis 7.0 answers every timed-out list/zset wait with a null array (even
            // BLMOVE), WAIT with the count of replicas that acknowledged.
            let reply = if b.unblock == Unblock::Error {
                error(b"UNBLOCKED client unblocked via CLIENT UNBLOCK")
            } else {
                crate::cmd::role::timed_out_reply(
                    &b.argv,
                    &srv.io,
                    &srv.state.redis_master,
                    client.repl_index,
                    client.repl_group,
                )
            };
            if !(client.reply_off || client.reply_skip) {
                encode(&reply, client.resp3(), &mut out);
            }
        }
        (Unblock::Timeout | Unblock::Error, Some(key)) => {
            // `drive` runs it first, as this client (the running client: its own tracking
            // invalidations and pushes follow its reply), then the rest of its pipeline.
            client.block_deadline = Some(b.deadline);
            client.block_ready_key = Some(key.clone());
            client.pending.push_front(b.argv);
        }
    }
    super::unit::drive(srv, client, out);
}
