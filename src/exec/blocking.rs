//! Blocked clients (BLPOP, BLMOVE, BLMPOP, BZPOPMIN...) are parked values, never threads: the
//! command that found nothing registers (client id, keys, deadline, argv) in `Server::waiters`
//! and produces no reply; the client stays in `Server::clients` with the rest of its pipeline in
//! `Client::pending`. A write to a waited-on key queues the key as ready (`signal_modified_key`);
//! after the command that wrote it (a whole EXEC or script counts as one command, as in Redis)
//! the ready keys are served: each waiter, oldest first, runs its command again while the key
//! still holds data, then the rest of its pipeline. Deadlines are served by the executor's timer.

use super::client::Client;
use super::{unix_ms, Server};
use crate::cmd::{dispatch, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::protocol::encode::encode;
use crate::protocol::number::parse_f64;
use crate::protocol::Frame;
use crate::store::value::own;
use crate::store::waiters::{Blocked, WaitKind};
use crate::store::Value;
use bytes::{Bytes, BytesMut};
use std::sync::atomic::Ordering;

/// Parses a blocking command's timeout in seconds (a float) into milliseconds; 0 waits forever.
/// Errors and edge cases are Redis 7.0's `getTimeoutFromObjectOrReply`.
pub fn parse_timeout(arg: &[u8], now: u64) -> CmdResult<u64> {
    let secs = parse_f64(arg).ok_or(CmdError::err("ERR timeout is not a float or out of range"))?;
    let ms = secs * 1000.0;
    // C converts with `(long long)`: out-of-range values (inf, 1e300) become LLONG_MIN on
    // x86-64, so Redis reports them as negative; fractions below 1 ms truncate to 0 (forever).
    if !(ms > -9.223_372_036_854_776e18 && ms < 9.223_372_036_854_776e18) {
        return Err(CmdError::err("ERR timeout is negative"));
    }
    let ms = ms as i64;
    if ms < 0 {
        return Err(CmdError::err("ERR timeout is negative"));
    }
    if ms > 0 && ms > i64::MAX - now as i64 {
        return Err(CmdError::err("ERR timeout is out of range"));
    }
    Ok(ms as u64)
}

/// Blocking commands act as their non-blocking forms inside MULTI/EXEC and Lua scripts.
pub fn may_block(ctx: &Ctx) -> bool {
    !ctx.in_script && !ctx.client.in_exec
}

/// Parks the calling client on `keys` until one is served, the timeout passes or it leaves.
pub fn block(
    ctx: &mut Ctx,
    keys: &[Bytes],
    timeout_ms: u64,
    kind: WaitKind,
    argv: &[Bytes],
) -> CmdResult {
    let deadline = match ctx.client.block_deadline {
        // A served waiter that found nothing after all keeps its original deadline.
        Some(d) => d,
        None if timeout_ms == 0 => 0,
        None => ctx.now + timeout_ms,
    };
    let b = Blocked {
        db: ctx.client.db,
        keys: keys.iter().map(own).collect(),
        deadline,
        kind,
        argv: argv.iter().map(own).collect(),
    };
    ctx.srv.waiters.block(ctx.client.id, b);
    ctx.client.blocked = true;
    ctx.client.skip_reply = true;
    ctx.client
        .shared
        .timeout_exempt
        .store(true, Ordering::Relaxed);
    Ok(Frame::NullArray)
}

fn holds(srv: &mut Server, db: usize, key: &[u8], kind: WaitKind, now: u64) -> bool {
    match srv.dbs[db].get(key, now).map(|e| &e.value) {
        Some(Value::List(l)) => kind == WaitKind::List && !l.is_empty(),
        Some(Value::ZSet(z)) => kind == WaitKind::ZSet && !z.is_empty(),
        _ => false,
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
                if !holds(srv, dk.0, &dk.1, kind, now) {
                    continue;
                }
                resume(srv, id, false);
            }
        }
    }
    srv.serving_ready = false;
}

/// Times out the waiters whose deadline has passed.
pub fn time_out(srv: &mut Server) {
    let now = unix_ms();
    for id in srv.waiters.take_timed_out(now) {
        resume(srv, id, true);
    }
    serve_ready(srv);
}

/// Unblocks a client: replies the timeout null or runs its command again, then the rest of its
/// pipeline.
fn resume(srv: &mut Server, id: u64, timed_out: bool) {
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
        // Redis 7.0 answers every timed-out list/zset wait with a null array (even BLMOVE).
        encode(&Frame::NullArray, client.resp3(), &mut out);
    } else {
        client.block_deadline = Some(b.deadline);
        if let Some(argv) = dispatch::process(srv, &mut client, b.argv, &mut out) {
            // Held by CLIENT PAUSE: `drive` parks it with the rest of the pipeline.
            client.pending.push_front(argv);
        }
        client.block_deadline = None;
    }
    drive(srv, client, out);
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
    while !blocked {
        let Some(argv) = client.pending.pop_front() else {
            break;
        };
        let held = dispatch::process(srv, &mut client, argv, &mut out);
        srv.end_unit();
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

#[cfg(test)]
mod tests {
    use super::parse_timeout;

    #[test]
    fn timeouts_like_redis() {
        assert_eq!(parse_timeout(b"0", 1000), Ok(0));
        assert_eq!(parse_timeout(b"1.5", 1000), Ok(1500));
        assert_eq!(parse_timeout(b"0.0001", 1000), Ok(0));
        let neg = Err(crate::error::CmdError::err("ERR timeout is negative"));
        assert_eq!(parse_timeout(b"-1", 1000), neg);
        assert_eq!(parse_timeout(b"inf", 1000), neg);
        assert_eq!(parse_timeout(b"1e300", 1000), neg);
        assert!(parse_timeout(b"abc", 1000).is_err());
    }
}
