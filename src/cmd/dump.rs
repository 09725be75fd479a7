//! DUMP and RESTORE in Redis's payload format (store/rdb.rs), so a value moves between Redis 7.0
//! and deadbolt either way. RESTORE validates the whole payload (as Redis does with
//! `sanitize-dump-payload yes`) before it touches the keyspace.

use super::args::{int_arg, is};
use super::spec::{event, Ctx};
use super::spec::{flags::*, CommandSpec, KeySpec, KeySpecDoc, KEY1};
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
    CommandSpec::leaf(
        "migrate",
        -6,
        WRITE | MOVABLE_KEYS,
        KeySpec {
            first: 3,
            last: 3,
            step: 1,
        },
        &["keyspace", "write", "slow", "dangerous"],
        migrate,
    ),
];

pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    ("dump", &[KeySpecDoc::range(&["RO", "access"], 1, 0)]),
    ("restore", &[KeySpecDoc::range(&["OW", "update"], 1, 0)]),
    (
        "migrate",
        &[
            KeySpecDoc::range(&["RW", "access", "delete"], 3, 0),
            KeySpecDoc {
                notes: None,
                flags: &["RW", "access", "delete", "incomplete"],
                begin_index: -2,
                lastkey: -1,
                keystep: 1,
                keynum: None,
                keyword: Some("KEYS"),
                limit: 0,
            },
        ],
    ),
];

pub static TIPS: &[(&str, &[&str])] = &[
    ("dump", &["nondeterministic_output"]),
    ("migrate", &["nondeterministic_output"]),
];

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

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password]
/// [AUTH2 username password] [KEYS key …], as Redis's migrateCommand: DUMP payloads sent as
/// RESTORE commands over a connection kept for the next call (up to 64 targets, closed after
/// 10 s unused: INFO's `migrate_cached_sockets`), the local keys deleted for each RESTORE the
/// target acknowledged (unless COPY).
///
/// Like Redis, the executor waits for the target: every step (connect, each 64 KB written,
/// each reply line) is bounded by `timeout` milliseconds, so a stalled target holds the server
/// for a bounded time and the client gets `IOERR`.
fn migrate(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (mut copy, mut replace) = (false, false);
    let mut auth: Option<(Option<&Bytes>, &Bytes)> = None;
    let (mut first_key, mut num_keys) = (3, 1);
    let mut j = 6;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        if is(&argv[j], "copy") {
            copy = true;
        } else if is(&argv[j], "replace") {
            replace = true;
        } else if is(&argv[j], "auth") {
            if more == 0 {
                return Err(CmdError::Syntax);
            }
            j += 1;
            auth = Some((None, &argv[j]));
        } else if is(&argv[j], "auth2") {
            if more < 2 {
                return Err(CmdError::Syntax);
            }
            auth = Some((Some(&argv[j + 1]), &argv[j + 2]));
            j += 2;
        } else if is(&argv[j], "keys") {
            if !argv[3].is_empty() {
                return Err(CmdError::err(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            first_key = j + 1;
            num_keys = argv.len() - j - 1;
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let mut timeout = int_arg(&argv[5])?;
    let dbid = int_arg(&argv[4])?;
    if timeout <= 0 {
        timeout = 1000;
    }
    let now = ctx.now;
    let lim = super::support::limits(ctx);
    // The keys that exist, with their payload and TTL (Redis looks them up, then serialises
    // those not expired in between; here both happen at the same `now`).
    let mut found: Vec<(&Bytes, i64, Vec<u8>)> = Vec::new();
    for key in &argv[first_key..first_key + num_keys] {
        if let Some(e) = ctx.db().get(key, now) {
            let ttl = if e.expires_at == 0 {
                0
            } else {
                (e.expires_at.saturating_sub(now) as i64).max(1)
            };
            found.push((key, ttl, rdb::dump(&e.value, &lim)));
        }
    }
    if found.is_empty() {
        return Ok(Frame::Simple(Bytes::from_static(b"NOKEY")));
    }
    let timeout = std::time::Duration::from_millis(timeout as u64);
    let mut name = argv[1].to_vec();
    name.push(b':');
    name.extend_from_slice(&argv[2]);
    let mut may_retry = true;
    loop {
        let last_dbid = super::migrate_conn::socket(&name, &argv[1], &argv[2], timeout, now / 1000)
            .map_err(|_| CmdError::err("IOERR error or timeout connecting to the client"))?;
        let mut cmd = Vec::new();
        if let Some((user, pass)) = auth {
            let mut args: Vec<&[u8]> = vec![b"AUTH"];
            if let Some(u) = user {
                args.push(u);
            }
            args.push(pass);
            super::migrate_conn::command(&mut cmd, &args);
        }
        let select = last_dbid != Some(dbid);
        if select {
            let db_text = dbid.to_string();
            super::migrate_conn::command(&mut cmd, &[b"SELECT", db_text.as_bytes()]);
        }
        for (key, ttl, payload) in &found {
            let ttl = ttl.to_string();
            let mut args: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), payload];
            if replace {
                args.push(b"REPLACE");
            }
            super::migrate_conn::command(&mut cmd, &args);
        }
        let prelude = usize::from(auth.is_some()) + usize::from(select);
        let (lines, failure) =
            super::migrate_conn::exchange(&name, &cmd, prelude + found.len(), timeout);
        let mut error_from_target: Option<&Vec<u8>> = None;
        let acked = lines.len().saturating_sub(prelude);
        if lines.len() >= prelude {
            let prelude_error = lines[..prelude].iter().find(|l| l.starts_with(b"-"));
            for ((key, _, _), line) in found.iter().zip(&lines[prelude..]) {
                let error = prelude_error.or(line.starts_with(b"-").then_some(line));
                if let Some(e) = error {
                    error_from_target.get_or_insert(e);
                } else if !copy {
                    ctx.db().remove(key, now);
                    ctx.changed(event::GENERIC, "del", key);
                }
            }
        }
        let io_error = |f: &super::migrate_conn::Failure| {
            CmdError::err(format!(
                "IOERR error or timeout {} to target instance",
                if f.writing { "writing" } else { "reading" }
            ))
        };
        match failure {
            None => {}
            // Nothing acknowledged and not a timeout: once more on a fresh connection.
            Some(f) if error_from_target.is_none() && acked == 0 => {
                super::migrate_conn::close(&name);
                if may_retry && !f.timed_out {
                    may_retry = false;
                    continue;
                }
                return Err(io_error(&f));
            }
            Some(f) => {
                super::migrate_conn::close(&name);
                if error_from_target.is_none() {
                    return Err(io_error(&f));
                }
            }
        }
        if let Some(e) = error_from_target {
            super::migrate_conn::set_dbid(&name, None);
            let text = String::from_utf8_lossy(&e[1..]);
            return Err(CmdError::erf(format!(
                "Target instance replied with error: {text}"
            )));
        }
        super::migrate_conn::set_dbid(&name, Some(dbid));
        return Ok(Frame::ok());
    }
}
