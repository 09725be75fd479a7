//! The handler side of blocking commands (BLPOP, BLMOVE, BLMPOP, BZPOPMIN...): parsing the
//! timeout and parking the client. Serving and timing out parked clients is the event loop's
//! (exec/blocking.rs), as it writes their replies.

use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::protocol::number::parse_f64;
use crate::protocol::Frame;
use crate::store::value::own;
use crate::store::waiters::{Blocked, WaitKind};
use bytes::Bytes;
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
        unblocked_with_error: false,
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
