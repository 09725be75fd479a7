//! The handler side of blocking commands (BLPOP, BLMOVE, BLMPOP, BZPOPMIN...): parsing the
//! timeout and parking the client. Serving and timing out parked clients is the event loop's
//! (exec/blocking.rs), as it writes their replies.

use super::spec::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::protocol::number::LongDouble;
use crate::protocol::Frame;
use crate::store::value::own;
use crate::store::waiters::{Blocked, Unblock, WaitKind};
use bytes::Bytes;

/// Parses a blocking command's timeout in seconds into milliseconds; 0 waits for ever.
/// Redis 7.0's `getTimeoutFromObjectOrReply`: the text is a long double (`string2ld`),
/// converted with `(long long) ceill(secs * 1000)`, so a positive timeout under a millisecond
/// waits one millisecond (never for ever), a negative one above -1 ms is 0, and values past
/// i64 (inf, 1e300) come out as i64::MIN, "negative".
pub fn parse_timeout(arg: &[u8], now: u64) -> CmdResult<u64> {
    let secs = LongDouble::parse(arg)
        .ok_or(CmdError::err("ERR timeout is not a float or out of range"))?;
    millis_timeout(secs.ceil_millis(), now)
}

/// A timeout in milliseconds checked as Redis 7.0 does: negative is refused; a positive one
/// whose deadline would pass i64 (Redis's `timeout + mstime()` wraps to a negative deadline,
/// which its timeout table, keyed by the unsigned value, never reaches) waits for ever.
pub fn millis_timeout(ms: i64, now: u64) -> CmdResult<u64> {
    if ms < 0 {
        return Err(CmdError::err("ERR timeout is negative"));
    }
    if ms > i64::MAX - now.min(i64::MAX as u64) as i64 {
        return Ok(0);
    }
    Ok(ms as u64)
}

/// The keys a blocking pop tries, in order: argument order, except that a waiter served
/// because one of its keys got data tries that key first. Redis serves each waiter from the
/// key whose readiness woke it, keys in the order they became ready (`handleClientsBlockedOnKeys`),
/// so `BLPOP a c 0` woken by `RPUSH c 1; RPUSH a x` in one transaction pops from `c`.
pub fn serve_order<'a>(ctx: &Ctx, keys: &'a [Bytes]) -> impl Iterator<Item = &'a Bytes> + 'a {
    let first = ctx
        .client
        .block_ready_key
        .as_ref()
        .and_then(|r| keys.iter().position(|k| k == r));
    first.map(|i| &keys[i]).into_iter().chain(
        keys.iter()
            .enumerate()
            .filter(move |&(j, _)| Some(j) != first)
            .map(|(_, k)| k),
    )
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
        unblock: Unblock::Timeout,
    };
    ctx.srv.waiters.block(ctx.client.id, b);
    ctx.client.blocked = true;
    ctx.client.skip_reply = true;
    ctx.client.shared.timeout_exempt.set(true);
    Ok(Frame::NullArray)
}

#[cfg(test)]
mod tests {
    use super::parse_timeout;

    #[test]
    fn timeouts_like_redis() {
        assert_eq!(parse_timeout(b"0", 1000), Ok(0));
        assert_eq!(parse_timeout(b"1.5", 1000), Ok(1500));
        assert_eq!(parse_timeout(b"0.0001", 1000), Ok(1));
        assert_eq!(parse_timeout(b"1e-300", 1000), Ok(1));
        assert_eq!(parse_timeout(b"1e-400", 1000), Ok(1));
        assert_eq!(parse_timeout(b"0.0015", 1000), Ok(2));
        assert_eq!(parse_timeout(b"-0.0001", 1000), Ok(0));
        assert_eq!(parse_timeout(b"0x10", 1000), Ok(16000));
        assert_eq!(parse_timeout(b"9223372036854775", 1000), Ok(0));
        let neg = Err(crate::error::CmdError::err("ERR timeout is negative"));
        assert_eq!(parse_timeout(b"-1", 1000), neg);
        assert_eq!(parse_timeout(b"inf", 1000), neg);
        assert_eq!(parse_timeout(b"1e300", 1000), neg);
        assert_eq!(parse_timeout(b"9.3e15", 1000), neg);
        for bad in [&b"abc"[..], b"nan", b"", b" 1", b"1e5000", b"1e-5000"] {
            assert_eq!(
                parse_timeout(bad, 1000),
                Err(crate::error::CmdError::err(
                    "ERR timeout is not a float or out of range"
                ))
            );
        }
    }
}
