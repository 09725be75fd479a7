//! Blocked clients (BLPOP, BLMOVE, BLMPOP, BZPOPMIN...) are parked values, never threads: the
//! command that found nothing registers (client id, keys, deadline, argv) in `State::waiters`
//! and produces no reply; the client stays in `State::clients` with the rest of its pipeline in
//! `Client::pending`. A write to a waited-on key queues the key as ready (`signal_modified_key`);
//! after the command that wrote it (a whole EXEC or script counts as one command, as in Redis)
//! the ready keys are served: each waiter, oldest first, runs its command again while the key
//! still holds data, then the rest of its pipeline. Deadlines are served by the executor's timer.

use super::Server;
use crate::clock::unix_ms;
use crate::cmd::dispatch;
use crate::machine::client::Client;
use crate::protocol::encode::encode;
use crate::store::waiters::WaitKind;
use crate::store::Value;
use bytes::BytesMut;
use std::sync::atomic::Ordering;

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
/// the key that became ready, then the rest of its pipeline.
fn resume(srv: &mut Server, id: u64, ready: Option<&bytes::Bytes>) {
    let timed_out = ready.is_none();
    let Some(b) = srv.waiters.unblock(id) else {
        return;
    };
    let Some(mut client) = srv.clients.remove(&id) else {
        return;
    };
    client.blocked = false;
    // Still exempt if it is subscribed (RESP3 clients can be both).
    let subscribed = client.pubsub.subscribed();
    client
        .shared
        .timeout_exempt
        .store(subscribed, Ordering::Relaxed);
    let mut out = BytesMut::new();
    if timed_out {
        // Redis 7.0 answers every timed-out list/zset wait with a null array (even BLMOVE),
        // WAIT with the count of replicas that acknowledged.
        let reply = if b.unblocked_with_error {
            crate::protocol::Frame::Error(bytes::Bytes::from_static(
                b"UNBLOCKED client unblocked via CLIENT UNBLOCK",
            ))
        } else {
            crate::cmd::replication::timed_out_reply(&b.argv, &srv.io, client.repl_index)
        };
        if !(client.reply_off || client.reply_skip) {
            encode(&reply, client.resp3(), &mut out);
        }
    } else {
        // `drive` runs it first, as this client (the running client: its own tracking
        // invalidations and pushes follow its reply), then the rest of its pipeline.
        client.block_deadline = Some(b.deadline);
        client.block_ready_key = ready.cloned();
        client.pending.push_front(b.argv);
    }
    drive(srv, client, out);
}

/// Output of one batch handed to the connection before the batch ends, once this large: it
/// is then referenced by the connection's chain, not copied (machine/output.rs).
const BATCH_OUT_SPLIT: usize = crate::machine::output::BIG;

/// Commands whose keys one prefetch covers (`KeyMap::prefetch` takes up to 32).
const PREFETCH_WINDOW: usize = 32;

/// Starts loading what `cmds` will read: argv[1] is the first key of most commands (for the
/// others the hint is wasted, never wrong), and a removal moves the last entry into its hole
/// and rewrites that entry's slot. `run_batch` calls it for a batch, `drive` for the windows
/// after the first. Inlined: out of line, the name comparisons cost ~50 instructions a
/// command (callgrind, pipelined GET).
#[inline(always)]
pub fn prefetch_commands<'a>(
    db: &crate::store::keyspace::Db,
    cmds: impl Iterator<Item = &'a Vec<bytes::Bytes>> + Clone,
) {
    db.prefetch(cmds.clone().filter_map(|argv| argv.get(1)).map(|k| &k[..]));
    let removals = cmds
        .filter(|argv| {
            argv.first().is_some_and(|name| {
                name.eq_ignore_ascii_case(b"del") || name.eq_ignore_ascii_case(b"unlink")
            })
        })
        .map(|argv| argv.len().saturating_sub(1))
        .sum::<usize>();
    if removals > 0 {
        db.prefetch_removals(removals);
    }
}

/// Runs the client's pending pipeline until it ends, blocks, or the client must close, then
/// hands the output to its connection and puts the client back.
pub fn drive(srv: &mut Server, mut client: Box<Client>, mut out: BytesMut) {
    let id = client.id;
    // A waiter served while another client's batch runs: that client's pending self-pushes
    // stay its own.
    let outer_running = std::mem::replace(&mut srv.running, id);
    let outer_pushes = std::mem::take(&mut srv.self_pushes);
    let mut blocked = srv.waiters.is_blocked(id);
    let mut postponed = false;
    let mut ran = 0usize;
    while !blocked {
        // A long pipeline's keys are prefetched a window ahead: `run_batch` covered the first
        // `PREFETCH_WINDOW`, and half-way through each window the next one starts loading
        // (at -P 64 half of a batch's lookups missed the cache without this).
        if ran % PREFETCH_WINDOW == PREFETCH_WINDOW / 2
            && client.pending.len() > PREFETCH_WINDOW / 2
        {
            if let Some(db) = srv.dbs.get(client.db) {
                let window = client.pending.iter().skip(PREFETCH_WINDOW / 2);
                prefetch_commands(db, window.take(PREFETCH_WINDOW));
            }
        }
        ran += 1;
        let Some(argv) = client.pending.pop_front() else {
            break;
        };
        let held = dispatch::process(&mut srv.state, &mut srv.io, &mut client, argv, &mut out);
        srv.end_unit();
        srv.note_write(&mut client);
        if client.block_deadline.is_some() {
            // Set by `resume` for the command it re-runs, and for that one only.
            client.block_deadline = None;
            client.block_ready_key = None;
        }
        if out.len() >= BATCH_OUT_SPLIT && !srv.stopping {
            // A pipeline of large replies goes to the connection reply by reply instead of
            // doubling one buffer for all of them (three GETs of a 300 MB value asked for a
            // 1.2 GB block).
            let fresh = crate::machine::output::spare_buffer()
                .unwrap_or_else(|| BytesMut::with_capacity(crate::machine::output::BLOCK));
            let done = std::mem::replace(&mut out, fresh);
            srv.deliver(&client, done, false, false);
        }
        // Clients blocked on keys this command wrote are served before the next command (a
        // unit of their own each, after this one's).
        if srv.waiters.has_ready() {
            serve_ready(srv);
        }
        if let Some(argv) = held {
            // CLIENT PAUSE: the command waits, with the rest of the pipeline, for the pause to end.
            client.pending.push_front(argv);
            if !srv.ops.pause.waiting.contains(&id) {
                srv.ops.pause.waiting.push(id);
            }
            postponed = true;
            break;
        }
        if client.close_after_reply || srv.shutting_down {
            client.pending.clear();
            break;
        }
        blocked = srv.waiters.is_blocked(id);
    }
    srv.drain_expired();
    srv.flush_self_pushes(client.resp3(), &mut out);
    srv.running = outer_running;
    srv.self_pushes = outer_pushes;
    let close = client.close_after_reply;
    if close && blocked {
        srv.waiters.unblock(id);
        client.blocked = false;
        blocked = false;
    }
    if !out.is_empty() || !(blocked || postponed) {
        srv.deliver(&client, out, !(blocked || postponed), close);
    }
    if !close && srv.batch_output_over_limit(&mut client) {
        srv.close_client(client);
        return;
    }
    if close {
        srv.forget_client(&mut client);
    } else {
        srv.clients.insert(id, client);
    }
}
