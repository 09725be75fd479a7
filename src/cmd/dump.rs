//! DUMP and RESTORE in Redis's payload format (store/rdb.rs), so a value moves between Redis 7.0
//! and deadbolt either way. RESTORE validates the whole payload (as Redis does with
//! `sanitize-dump-payload yes`) before it touches the keyspace.

use super::args::{int_arg, is};
use super::spec::{event, Ctx};
use super::spec::{flags::*, CommandSpec, KeySpecDoc, KEY1};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use crate::store::rdb;
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::leaf(
        "dump",
        2,
        READONLY,
        KEY1,
        &["keyspace", "read", "slow"],
        dump,
    ),
    CommandSpec::leaf(
        "restore",
        -4,
        WRITE | DENYOOM,
        KEY1,
        &["keyspace", "write", "slow", "dangerous"],
        restore,
    ),
];

pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    ("dump", &[KeySpecDoc::range(&["RO", "access"], 1, 0)]),
    ("restore", &[KeySpecDoc::range(&["OW", "update"], 1, 0)]),
];

pub static TIPS: &[(&str, &[&str])] = &[("dump", &["nondeterministic_output"])];

fn dump(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let lim = super::support::limits(ctx);
    let now = ctx.now;
    Ok(match ctx.db().get(&argv[1], now) {
        Some(e) => Frame::Bulk(Bytes::from(rdb::dump(&e.value, &lim))),
        None => Frame::Null,
    })
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f], checked in the order of
/// Redis's restoreCommand: options, existing key, TTL, checksum, payload.
fn restore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq) = (None, false);
    let mut i = 4;
    while i < argv.len() {
        let more = i + 1 < argv.len();
        if is(&argv[i], "replace") {
            replace = true;
        } else if is(&argv[i], "absttl") {
            absttl = true;
        } else if is(&argv[i], "idletime") && more && !freq {
            let seconds = int_arg(&argv[i + 1])?;
            if seconds < 0 {
                return Err(CmdError::err("ERR Invalid IDLETIME value, must be >= 0"));
            }
            idle = Some(seconds as u64);
            i += 1;
        } else if is(&argv[i], "freq") && more && idle.is_none() {
            let f = int_arg(&argv[i + 1])?;
            if !(0..=255).contains(&f) {
                return Err(CmdError::err(
                    "ERR Invalid FREQ value, must be >= 0 and <= 255",
                ));
            }
            freq = true;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let key = &argv[1];
    let now = ctx.now;
    if !replace && ctx.db().contains(key, now) {
        return Err(CmdError::err("BUSYKEY Target key name already exists."));
    }
    let ttl = int_arg(&argv[2])?;
    if ttl < 0 {
        return Err(CmdError::err("ERR Invalid TTL value, must be >= 0"));
    }
    let Some(body) = rdb::verify(&argv[3]) else {
        return Err(CmdError::err(
            "ERR DUMP payload version or checksum are wrong",
        ));
    };
    let value = rdb::restore(body).map_err(|_| CmdError::err("ERR Bad data format"))?;
    let deleted = replace && ctx.db().remove(key, now).is_some();
    // Redis's `ttl += mstime()` wraps past i64 to a deadline in the past: such a key is
    // already expired, so it is not stored.
    let when = if ttl != 0 && !absttl {
        ttl.wrapping_add(now as i64)
    } else {
        ttl
    };
    if when != 0 && when <= now as i64 {
        // Already expired: the key is only deleted (Redis propagates a DEL).
        if deleted {
            ctx.changed(event::GENERIC, "del", key);
        }
        return Ok(Frame::ok());
    }
    ctx.db().set(key, value, when as u64);
    if let Some(seconds) = idle {
        ctx.db().set_idle(key, seconds, now);
    }
    ctx.changed(event::GENERIC, "restore", key);
    Ok(Frame::ok())
}
