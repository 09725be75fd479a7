//! Pub/sub commands: (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PUBLISH, SPUBLISH, PUBSUB.
//! The registry and delivery live in machine/pubsub.rs; (un)subscribe confirmations are pushes,
//! one per channel.

use super::args::glob_match;
use super::spec::Ctx;
use super::spec::KeySpecDoc;
use super::spec::{flags::*, CommandSpec, KeySpec, ALL_KEYS, KEY1, NO_KEYS};
use super::support::subcommand_syntax;
use crate::error::{CmdError, CmdResult};
use crate::machine::pubsub::Kind;
use crate::protocol::Frame;
use bytes::Bytes;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, keys, &["pubsub"], handler)
}

const SUB_FLAGS: u32 = PUBSUB | NOSCRIPT | LOADING | STALE | PUBSUB_OK;

pub static COMMANDS: &[CommandSpec] = &[
    spec("subscribe", -2, SUB_FLAGS, NO_KEYS, subscribe),
    spec("unsubscribe", -1, SUB_FLAGS, NO_KEYS, unsubscribe),
    spec("psubscribe", -2, SUB_FLAGS, NO_KEYS, psubscribe),
    spec("punsubscribe", -1, SUB_FLAGS, NO_KEYS, punsubscribe),
    spec("ssubscribe", -2, SUB_FLAGS, ALL_KEYS, ssubscribe),
    spec("sunsubscribe", -1, SUB_FLAGS, ALL_KEYS, sunsubscribe),
    spec(
        "publish",
        3,
        PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE,
        NO_KEYS,
        publish,
    ),
    spec(
        "spublish",
        3,
        PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE,
        KEY1,
        spublish,
    ),
    CommandSpec {
        name: "pubsub",
        arity: -2,
        flags: 0,
        keys: NO_KEYS,
        acl: &[],
        handler: pubsub_help,
        subcommands: &[
            spec(
                "channels",
                -2,
                PUBSUB | LOADING | STALE,
                NO_KEYS,
                pubsub_channels,
            ),
            spec(
                "numpat",
                2,
                PUBSUB | LOADING | STALE,
                NO_KEYS,
                pubsub_numpat,
            ),
            spec(
                "numsub",
                -2,
                PUBSUB | LOADING | STALE,
                NO_KEYS,
                pubsub_numsub,
            ),
            spec(
                "shardchannels",
                -2,
                PUBSUB | LOADING | STALE,
                NO_KEYS,
                pubsub_shardchannels,
            ),
            spec(
                "shardnumsub",
                -2,
                PUBSUB | LOADING | STALE,
                NO_KEYS,
                pubsub_shardnumsub,
            ),
            CommandSpec {
                name: "help",
                arity: 2,
                flags: LOADING | STALE,
                keys: NO_KEYS,
                acl: &[],
                handler: pubsub_help,
                subcommands: &[],
            },
        ],
    },
];

/// The last confirmation is the command's reply and the others precede it as pushes, so the
/// bytes are Redis's and a transaction sees one reply per command (in EXEC's array, as Redis
/// puts it for one channel).
///
/// With CLIENT REPLY OFF or SKIP every confirmation stays a push: they silence replies, and
/// Redis sends subscription confirmations whatever the reply mode (a client waiting for them
/// would otherwise wait for ever). The reply returned then is silenced unseen.
fn last_confirmation(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.reply_off || ctx.client.reply_skip {
        return Ok(Frame::Null);
    }
    ctx.srv
        .self_pushes
        .pop()
        .ok_or_else(|| CmdError::err("ERR no subscription confirmation"))
}

fn sub(ctx: &mut Ctx, kind: Kind, names: &[Bytes]) -> CmdResult {
    ctx.srv.subscribe(ctx.client, kind, names);
    last_confirmation(ctx)
}

fn unsub(ctx: &mut Ctx, kind: Kind, names: &[Bytes]) -> CmdResult {
    ctx.srv.unsubscribe(ctx.client, kind, names);
    last_confirmation(ctx)
}

fn subscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    sub(ctx, Kind::Channel, &argv[1..])
}

fn unsubscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    unsub(ctx, Kind::Channel, &argv[1..])
}

fn psubscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    sub(ctx, Kind::Pattern, &argv[1..])
}

fn punsubscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    unsub(ctx, Kind::Pattern, &argv[1..])
}

fn ssubscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    sub(ctx, Kind::Shard, &argv[1..])
}

fn sunsubscribe(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    unsub(ctx, Kind::Shard, &argv[1..])
}

fn publish(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    ctx.srv.dbs.published(false, &argv[1], &argv[2]);
    Ok(Frame::Integer(
        ctx.srv.publish(&argv[1], &argv[2], false) as i64
    ))
}

fn spublish(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    ctx.srv.dbs.published(true, &argv[1], &argv[2]);
    Ok(Frame::Integer(
        ctx.srv.publish(&argv[1], &argv[2], true) as i64
    ))
}

fn channels(ctx: &mut Ctx, kind: Kind, argv: &[Bytes]) -> CmdResult {
    let pattern = match argv.len() {
        2 => None,
        3 => Some(&argv[2]),
        _ => return Err(subcommand_syntax(argv)),
    };
    Ok(Frame::Array(
        ctx.srv
            .pubsub
            .channels(kind)
            .filter(|c| pattern.is_none_or(|p| glob_match(p, c, false)))
            .map(|c| Frame::Bulk(c.clone()))
            .collect(),
    ))
}

fn numsub(ctx: &mut Ctx, kind: Kind, argv: &[Bytes]) -> CmdResult {
    let mut out = Vec::with_capacity((argv.len() - 2).min(1024) * 2);
    for ch in &argv[2..] {
        out.push(Frame::Bulk(ch.clone()));
        out.push(Frame::Integer(ctx.srv.pubsub.subscribers(kind, ch) as i64));
    }
    Ok(Frame::Array(out))
}

fn pubsub_channels(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    channels(ctx, Kind::Channel, argv)
}

fn pubsub_shardchannels(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    channels(ctx, Kind::Shard, argv)
}

fn pubsub_numsub(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    numsub(ctx, Kind::Channel, argv)
}

fn pubsub_shardnumsub(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    numsub(ctx, Kind::Shard, argv)
}

fn pubsub_numpat(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Integer(ctx.srv.pubsub.len(Kind::Pattern) as i64))
}

fn pubsub_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let lines = [
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
        "HELP",
        "    Prints this help.",
    ];
    Ok(Frame::Array(
        lines.iter().map(|l| Frame::simple(l)).collect(),
    ))
}

/// Redis 7.0's key specifications of the family (its commands.c), as COMMAND INFO prints them;
/// subcommands by their `parent|sub` name.
pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    ("ssubscribe", &[KeySpecDoc::range(&["not_key"], 1, -1)]),
    ("sunsubscribe", &[KeySpecDoc::range(&["not_key"], 1, -1)]),
    ("spublish", &[KeySpecDoc::range(&["not_key"], 1, 0)]),
];
