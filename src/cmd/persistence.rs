//! Persistence commands: BGREWRITEAOF for the append-only file, SAVE and BGSAVE for RDB
//! snapshots (persist/rdb_file.rs; the loop writes them, `Host::rdb_save`).

use super::spec::Ctx;
use super::spec::{flags::*, CommandSpec, NO_KEYS};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "bgrewriteaof",
        arity: 1,
        flags: ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
        keys: NO_KEYS,
        acl: &[],
        handler: bgrewriteaof,
        subcommands: &[],
    },
    CommandSpec::leaf(
        "save",
        1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI,
        NO_KEYS,
        &[],
        save,
    ),
    CommandSpec::leaf(
        "bgsave",
        -1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
        NO_KEYS,
        &[],
        bgsave,
    ),
];

/// SAVE: the snapshot is written before the reply (Redis blocks every client meanwhile too).
fn save(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if ctx.host.rdb().is_some_and(|r| r.in_progress()) {
        return Err(CmdError::err("ERR Background save already in progress"));
    }
    let reply = ctx
        .host
        .rdb_save(ctx.srv, false)
        .map_err(|e| CmdError::Other(std::borrow::Cow::Owned(e)))?;
    ctx.srv.changes_since_save = 0;
    Ok(Frame::simple(reply))
}

/// BGSAVE [SCHEDULE]: written by another thread from a snapshot taken now.
fn bgsave(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 2 || (argv.len() == 2 && !super::args::is(&argv[1], "schedule")) {
        return Err(CmdError::Syntax);
    }
    if ctx.host.rdb().is_some_and(|r| r.in_progress()) {
        return Err(CmdError::err("ERR Background save already in progress"));
    }
    // Redis cannot fork inside EXEC and schedules the save; so does deadbolt, for the same
    // reply (the snapshot then holds the whole transaction's effect).
    if ctx.client.in_exec && ctx.host.rdb_schedule() {
        return Ok(Frame::simple("Background saving scheduled"));
    }
    let reply = ctx
        .host
        .rdb_save(ctx.srv, true)
        .map_err(|e| CmdError::Other(std::borrow::Cow::Owned(e)))?;
    Ok(Frame::simple(reply))
}

fn bgrewriteaof(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if ctx.host.aof().is_some_and(|aof| aof.rewrite_in_progress()) {
        return Err(CmdError::err(
            "ERR Background append only file rewriting already in progress",
        ));
    }
    // With `appendonly no` Redis still rewrites: the dataset becomes the AOF directory's base.
    let off = ctx.host.aof().is_none();
    if let Err(e) = ctx.host.start_rewrite(ctx.srv) {
        if off {
            tracing::warn!("Background AOF rewrite failed: {e}");
            return Err(CmdError::err("ERR Can't execute an AOF background rewriting. Please check the server logs for more information."));
        }
        return Err(CmdError::erf(format!("Can't start the AOF rewrite: {e}")));
    }
    if off {
        tracing::info!("Background AOF rewrite finished successfully");
    }
    Ok(Frame::simple(
        "Background append only file rewriting started",
    ))
}
