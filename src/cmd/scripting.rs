//! Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT LOAD | EXISTS | FLUSH | KILL | HELP.
//! The engine itself is in `crate::script`.

use super::args::{int_arg, is};
use super::spec::Ctx;
use super::spec::KeySpecDoc;
use super::spec::{flags::*, CommandSpec, NO_KEYS};
use super::support::{SCRIPT_KEYS_RO, SCRIPT_KEYS_RW};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use crate::script;
use bytes::Bytes;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, NO_KEYS, &["slow", "scripting"], handler)
}

const EVAL_FLAGS: u32 = NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS;

pub static COMMANDS: &[CommandSpec] = &[
    spec("eval", -3, EVAL_FLAGS, eval),
    spec("evalsha", -3, EVAL_FLAGS, evalsha),
    spec("eval_ro", -3, READONLY | EVAL_FLAGS, eval_ro),
    spec("evalsha_ro", -3, READONLY | EVAL_FLAGS, evalsha_ro),
    CommandSpec {
        name: "script",
        arity: -2,
        flags: 0,
        keys: NO_KEYS,
        acl: &["slow"],
        handler: script_help,
        subcommands: &[
            spec("load", 3, NOSCRIPT | STALE, script_load),
            spec("exists", -3, NOSCRIPT, script_exists),
            spec("flush", -2, NOSCRIPT, script_flush),
            spec("kill", 2, NOSCRIPT | ALLOW_BUSY, script_kill),
            spec("help", 2, LOADING | STALE, script_help),
        ],
    },
];

const NOSCRIPT_ERR: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// Redis's numkeys checks; the number of keys.
fn numkeys(argv: &[Bytes]) -> Result<usize, CmdError> {
    let n = int_arg(&argv[2])?;
    if n > (argv.len() - 3) as i64 {
        return Err(CmdError::err(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    if n < 0 {
        return Err(CmdError::err("ERR Number of keys can't be negative"));
    }
    Ok(n as usize)
}

/// MONITOR shows the script's own line before anything else, so the commands it runs (tagged
/// `lua`) come after it: Redis's evalCommand feeds it first thing, whatever follows (NOSCRIPT,
/// a compile error, a bad numkeys). EVAL and EVALSHA carry SKIP_MONITOR so that dispatch does
/// not show them again after they ran.
fn feed_monitors(ctx: &mut Ctx, argv: &[Bytes]) {
    if !ctx.srv.ops.monitors.is_empty() {
        super::support::feed_monitors(ctx.srv, ctx.client, false, argv);
    }
}

fn eval_generic(ctx: &mut Ctx, argv: &[Bytes], ro: bool) -> CmdResult {
    feed_monitors(ctx, argv);
    let n = numkeys(argv)?;
    let (keys, args) = argv[3..].split_at(n);
    script::with_engine(ctx, |engine, ctx| {
        let sha = engine.create(&argv[1])?;
        let reply = engine.run(ctx, &sha, keys, args, ro);
        ctx.srv
            .locks
            .on_script(&*ctx.client, &sha, keys, args, &reply, ctx.now);
        Ok(reply)
    })?
}

fn evalsha_generic(ctx: &mut Ctx, argv: &[Bytes], ro: bool) -> CmdResult {
    feed_monitors(ctx, argv);
    // A SHA of the wrong length is NOSCRIPT before numkeys is even looked at.
    let Some(sha) = script::sha_key(&argv[1]) else {
        return Err(CmdError::err(NOSCRIPT_ERR));
    };
    let n = numkeys(argv)?;
    let (keys, args) = argv[3..].split_at(n);
    script::with_engine(ctx, |engine, ctx| {
        if !engine.contains(&sha) {
            return Err(CmdError::err(NOSCRIPT_ERR));
        }
        let reply = engine.run(ctx, &sha, keys, args, ro);
        ctx.srv
            .locks
            .on_script(&*ctx.client, &sha, keys, args, &reply, ctx.now);
        Ok(reply)
    })?
}

fn eval(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    eval_generic(ctx, argv, false)
}

fn eval_ro(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    eval_generic(ctx, argv, true)
}

fn evalsha(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    evalsha_generic(ctx, argv, false)
}

fn evalsha_ro(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    evalsha_generic(ctx, argv, true)
}

fn script_load(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let sha = script::with_engine(ctx, |engine, _| engine.create(&argv[2]))??;
    Ok(Frame::Bulk(Bytes::copy_from_slice(&sha)))
}

fn script_exists(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    script::with_engine(ctx, |engine, _| {
        Frame::Array(
            argv[2..]
                .iter()
                .map(|s| Frame::Integer(engine.exists(s) as i64))
                .collect(),
        )
    })
}

fn script_flush(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    match argv.len() {
        2 => {}
        3 if is(&argv[2], "sync") || is(&argv[2], "async") => {}
        _ => {
            return Err(CmdError::err(
                "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
            ))
        }
    }
    script::flush(ctx.srv);
    Ok(Frame::ok())
}

/// Reaches the executor only when no script is running: a busy script's SCRIPT KILL is
/// answered by the connection tasks (see `script::busy`).
fn script_kill(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Err(CmdError::err("NOTBUSY No scripts in execution right now."))
}

fn script_help(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() >= 2 && !is(&argv[1], "help") {
        return Err(CmdError::UnknownSubcommand(argv[1].to_vec(), "SCRIPT"));
    }
    let lines = [
        "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "EXISTS <sha1> [<sha1> ...]",
        "    Return information about the existence of the scripts in the script cache.",
        "FLUSH [ASYNC|SYNC]",
        "    Flush the Lua scripts cache. Very dangerous on replicas.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the scripts cache.",
        "    * SYNC: Synchronously flush the scripts cache.",
        "KILL",
        "    Kill the currently executing Lua script.",
        "LOAD <script>",
        "    Load a script into the scripts cache without executing it.",
        "HELP",
        "    Prints this help.",
    ];
    Ok(Frame::help(&lines))
}

/// Redis 7.0's key specifications of the family (its commands.c), as COMMAND INFO prints them;
/// subcommands by their `parent|sub` name.
pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    ("eval", &[SCRIPT_KEYS_RW]),
    (
        "evalsha",
        &[KeySpecDoc::keynum(&["RW", "access", "update"], 2, 0, 1, 1)],
    ),
    ("eval_ro", &[SCRIPT_KEYS_RO]),
    (
        "evalsha_ro",
        &[KeySpecDoc::keynum(&["RO", "access"], 2, 0, 1, 1)],
    ),
];

/// Redis 7.0's command tips of the family (its commands.c).
pub static TIPS: &[(&str, &[&str])] = &[
    (
        "script|load",
        &["request_policy:all_nodes", "response_policy:all_succeeded"],
    ),
    (
        "script|exists",
        &[
            "request_policy:all_shards",
            "response_policy:agg_logical_and",
        ],
    ),
    (
        "script|flush",
        &["request_policy:all_nodes", "response_policy:all_succeeded"],
    ),
    (
        "script|kill",
        &["request_policy:all_shards", "response_policy:one_succeeded"],
    ),
];
