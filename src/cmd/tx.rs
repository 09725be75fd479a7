//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH (redis-py pipelines use MULTI/EXEC by
//! default; check-and-set lock releases use WATCH). Queuing itself happens in dispatch.rs, in
//! Redis's processCommand order.

use super::dispatch;
use super::spec::Ctx;
use super::spec::{flags::*, CommandSpec, KeySpec, KeySpecDoc, ALL_KEYS, NO_KEYS};
use super::support::discard_transaction;
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use bytes::Bytes;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, keys, &["transaction"], handler)
}

pub static COMMANDS: &[CommandSpec] = &[
    spec(
        "multi",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | TX_CONTROL,
        NO_KEYS,
        multi,
    ),
    spec(
        "exec",
        1,
        NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG | TX_CONTROL,
        NO_KEYS,
        exec,
    ),
    spec(
        "discard",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | TX_CONTROL,
        NO_KEYS,
        discard,
    ),
    spec(
        "watch",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | TX_CONTROL,
        ALL_KEYS,
        watch,
    ),
    spec(
        "unwatch",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        NO_KEYS,
        unwatch,
    ),
];

fn multi(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::err("ERR MULTI calls can not be nested"));
    }
    ctx.client.multi = Some(Vec::new());
    ctx.client.multi_dirty = false;
    Ok(Frame::ok())
}

fn discard(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if ctx.client.multi.is_none() {
        return Err(CmdError::err("ERR DISCARD without MULTI"));
    }
    discard_transaction(ctx);
    Ok(Frame::ok())
}

fn exec(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let Some(queue) = ctx.client.multi.take() else {
        return Err(CmdError::err("ERR EXEC without MULTI"));
    };
    if std::mem::take(&mut ctx.client.multi_dirty) {
        discard_transaction(ctx);
        return Err(CmdError::err(
            "EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    // Redis 7.0 fails EXEC when a watched key expired since WATCH: looking the keys up expires
    // them lazily, and expiry touches their watchers (this client included).
    let id = ctx.client.id;
    if ctx.srv.watches.watching(id) > 0 {
        let now = ctx.now;
        let keys = ctx.srv.watches.keys_of(id).to_vec();
        for (db, key) in keys {
            if let Some(d) = ctx.srv.dbs.get_mut(db) {
                d.contains(&key, now);
            }
        }
        ctx.srv.drain_expired();
    }
    let aborted = ctx.srv.watches.is_dirty(id);
    discard_transaction(ctx);
    if aborted {
        return Ok(Frame::NullArray);
    }
    ctx.client.in_exec = true;
    let mut replies = Vec::with_capacity(queue.len());
    for (cmd, argv) in queue {
        // ACLs are checked again: an AUTH queued earlier in this transaction may have
        // changed the user (Redis's execCommand does the same).
        if ctx.client.perms.is_some() {
            if let Err(d) = super::dispatch::check(ctx.srv, ctx.client, cmd, &argv, "multi") {
                let e = super::dispatch::noperm_at_exec(d);
                replies.push(dispatch::error_frame(ctx.srv, e));
                continue;
            }
        }
        replies.push(dispatch::run(ctx, cmd, &argv));
    }
    ctx.client.in_exec = false;
    Ok(Frame::Array(replies))
}

fn watch(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::err("ERR WATCH inside MULTI is not allowed"));
    }
    let (id, db, now) = (ctx.client.id, ctx.client.db, ctx.now);
    for key in &argv[1..] {
        // A key already logically expired is dropped now, so its later removal does not count
        // as a change (Redis 7.0 remembers such keys as "expired at WATCH time").
        ctx.srv.dbs[db].contains(key, now);
    }
    ctx.srv.drain_expired();
    for key in &argv[1..] {
        ctx.srv
            .watches
            .watch(id, db, &crate::store::value::own(key));
    }
    Ok(Frame::ok())
}

fn unwatch(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    ctx.srv.watches.unwatch_all(ctx.client.id);
    Ok(Frame::ok())
}

/// Redis 7.0's key specifications of the family (its commands.c), as COMMAND INFO prints them;
/// subcommands by their `parent|sub` name.
pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[("watch", &[KeySpecDoc::range(&["RO"], 1, -1)])];
