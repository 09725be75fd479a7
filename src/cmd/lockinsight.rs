//! LOCKS: lock insight as commands. `LOCKS LATE` lists the latest late releases (a holder that
//! released after its lease ran out: which key, which client, how late), newest first, like
//! SLOWLOG GET; `LOCKS LATE RESET` empties that history. The figures come from locks.rs,
//! which keeps them bounded and off the hot path; these commands only read them.

use super::args::{int_arg, is};
use super::table::{flags::*, CommandSpec, NO_KEYS};
use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::locks::LateRelease;
use crate::protocol::Frame;
use bytes::Bytes;

/// How many entries `LOCKS LATE` without a count returns (SLOWLOG GET's default).
const DEFAULT_COUNT: usize = 10;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: &'static [&'static str],
    handler: super::Handler,
    subcommands: &'static [CommandSpec],
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys: NO_KEYS,
        acl,
        handler,
        subcommands,
    }
}

pub static COMMANDS: &[CommandSpec] = &[spec(
    "locks",
    -2,
    0,
    &["slow"],
    locks_help,
    &[
        spec("help", 2, LOADING | STALE, &["slow"], locks_help, &[]),
        spec(
            "late",
            -2,
            ADMIN | LOADING | STALE,
            &["admin", "slow", "dangerous"],
            locks_late,
            &[],
        ),
    ],
)];

fn locks_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::help(&[
        "LOCKS <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LATE [<count>]",
        "    Return the latest <count> late lock releases, newest first (default: 10, -1 means all).",
        "    A release is late when the holder's lease had run out: the key was gone or another",
        "    client's. Each entry has the fields id, time (unix ms), key, client-id, client-addr,",
        "    client-name, acquired (unix ms), lease-ms, late-ms and held-ms (nil when the acquire",
        "    was not seen).",
        "LATE RESET",
        "    Empty the late-release history.",
        "HELP",
        "    Prints this help.",
    ]))
}

fn wrong(argv: &[Bytes]) -> CmdError {
    CmdError::erf(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try LOCKS HELP.",
        String::from_utf8_lossy(&argv[1][..argv[1].len().min(128)])
    ))
}

fn locks_late(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let max = ctx.srv.config.lock_late_log_max_len as usize;
    ctx.srv.locks.set_late_max(max);
    let count = match argv.len() {
        2 => DEFAULT_COUNT,
        3 if is(&argv[2], "reset") => {
            ctx.srv.locks.late_log.clear();
            return Ok(Frame::ok());
        }
        3 => match int_arg(&argv[2]) {
            Ok(-1) => usize::MAX,
            Ok(n) if n >= 0 => n as usize,
            _ => {
                return Err(CmdError::err(
                    "ERR count should be greater than or equal to -1",
                ))
            }
        },
        _ => return Err(wrong(argv)),
    };
    Ok(Frame::Array(
        ctx.srv
            .locks
            .late_log
            .iter()
            .take(count)
            .map(entry)
            .collect(),
    ))
}

fn entry(e: &LateRelease) -> Frame {
    let opt = |v: Option<u64>| v.map_or(Frame::Null, |n| Frame::Integer(n as i64));
    let field = |name: &'static str, v: Frame| (Frame::bulk_static(name), v);
    Frame::Map(vec![
        field("id", Frame::Integer(e.id as i64)),
        field("time", Frame::Integer(e.at_ms as i64)),
        field("key", Frame::Bulk(Bytes::copy_from_slice(&e.key))),
        field("client-id", Frame::Integer(e.client_id as i64)),
        field("client-addr", Frame::bulk_from(e.client_addr.as_bytes())),
        field(
            "client-name",
            Frame::Bulk(Bytes::copy_from_slice(&e.client_name)),
        ),
        field("acquired", opt(e.acquired_ms)),
        field(
            "lease-ms",
            opt(e
                .acquired_ms
                .filter(|_| e.lease_ms != 0)
                .map(|_| e.lease_ms)),
        ),
        field("late-ms", opt(e.late_ms)),
        field(
            "held-ms",
            opt(e.acquired_ms.map(|a| e.at_ms.saturating_sub(a))),
        ),
    ])
}
