//! Persistence commands. The append-only file is the only persistence: SAVE and BGSAVE (RDB
//! snapshots) are not offered and answer `ERR unknown command`, never a fake OK.

use super::table::{flags::*, CommandSpec, NO_KEYS};
use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "bgrewriteaof",
    arity: 1,
    flags: ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
    keys: NO_KEYS,
    acl: &[],
    handler: bgrewriteaof,
    subcommands: &[],
}];

fn bgrewriteaof(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let Some(aof) = ctx.host.aof() else {
        return Err(CmdError::err(
            "ERR Background append only file rewriting is only available with appendonly yes",
        ));
    };
    if aof.rewrite_in_progress() {
        return Err(CmdError::err(
            "ERR Background append only file rewriting already in progress",
        ));
    }
    ctx.host
        .start_rewrite(ctx.srv)
        .map_err(|e| CmdError::erf(format!("Can't start the AOF rewrite: {e}")))?;
    Ok(Frame::simple(
        "Background append only file rewriting started",
    ))
}
