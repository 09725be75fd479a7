//! Redis 7.0 functions: FUNCTION LOAD | LIST | DELETE | FLUSH | DUMP | RESTORE | STATS | KILL |
//! HELP, FCALL and FCALL_RO (functions.c). The libraries and their Lua state are in
//! `crate::script::functions`.

use super::args::is;
use super::spec::Ctx;
use super::spec::{flags::*, CommandSpec, KeySpecDoc, NO_KEYS};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use crate::script::functions::{self as lib, Functions, Libraries, LOAD_TIMEOUT};
use crate::script::payload;
use bytes::Bytes;

const SCRIPTING: &[&str] = &["slow", "scripting"];

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, NO_KEYS, SCRIPTING, handler)
}

const FCALL_FLAGS: u32 = NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS;

pub static COMMANDS: &[CommandSpec] = &[
    spec("fcall", -3, FCALL_FLAGS, fcall),
    spec("fcall_ro", -3, READONLY | FCALL_FLAGS, fcall_ro),
    CommandSpec {
        name: "function",
        arity: -2,
        flags: 0,
        keys: NO_KEYS,
        acl: &["slow"],
        handler: function_help,
        subcommands: &[
            spec("load", -3, WRITE | DENYOOM | NOSCRIPT, function_load),
            spec("restore", -3, WRITE | DENYOOM | NOSCRIPT, function_restore),
            spec("list", -2, NOSCRIPT, function_list),
            spec("help", 2, LOADING | STALE, function_help),
            spec("kill", 2, NOSCRIPT | ALLOW_BUSY, function_kill),
            spec("delete", 3, WRITE | NOSCRIPT, function_delete),
            spec("dump", 2, NOSCRIPT, function_dump),
            spec("flush", -2, WRITE | NOSCRIPT, function_flush),
            spec("stats", 2, NOSCRIPT | ALLOW_BUSY, function_stats),
        ],
    },
];

/// The command changed the libraries: it is their record for the AOF and the cluster log
/// (see `store::ChangeRecord::functions`).
fn changed(ctx: &mut Ctx, argv: &[Bytes]) {
    ctx.srv.dbs.functions_changed(argv);
    let (_, funcs, libs) = lib::stats(ctx.srv);
    ctx.srv.busy.function_counts.set((libs, funcs));
}

fn with<R>(ctx: &mut Ctx, f: impl FnOnce(&mut Functions, &mut Ctx) -> R) -> Result<R, CmdError> {
    lib::with_functions(ctx, f)
}

fn fcall_generic(ctx: &mut Ctx, argv: &[Bytes], ro: bool) -> CmdResult {
    // Functions are fed to monitors before the commands they run (fcallCommandGeneric).
    if !ctx.srv.ops.monitors.is_empty() {
        super::support::feed_monitors(ctx.srv, ctx.client, false, argv);
    }
    with(ctx, |funcs, ctx| {
        let Functions { engine, libs } = funcs;
        let Some(f) = libs.function(&argv[1]) else {
            return Err(CmdError::err("ERR Function not found"));
        };
        let Ok(n) = super::args::int_arg(&argv[2]) else {
            return Err(CmdError::err("ERR Bad number of keys provided"));
        };
        if n > (argv.len() - 3) as i64 {
            return Err(CmdError::err(
                "ERR Number of keys can't be greater than number of args",
            ));
        }
        if n < 0 {
            return Err(CmdError::err("ERR Number of keys can't be negative"));
        }
        let (keys, args) = argv[3..].split_at(n as usize);
        Ok(engine.run_function(ctx, &f.func, f.flags, &f.name, keys, args, argv, ro))
    })?
}

fn fcall(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    fcall_generic(ctx, argv, false)
}

fn fcall_ro(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    fcall_generic(ctx, argv, true)
}

/// FUNCTION LOAD [REPLACE] <code>.
fn function_load(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut replace = false;
    let mut at = 2;
    while at < argv.len() - 1 {
        if is(&argv[at], "replace") {
            replace = true;
            at += 1;
            continue;
        }
        return Ok(error_reply(
            &[&b"Unknown option given: "[..], cstr(&argv[at])].concat(),
        ));
    }
    if at >= argv.len() {
        return Err(CmdError::err("ERR Function code is missing"));
    }
    // The log's own commands load without a timeout (Redis's mustObeyClient).
    let timeout = (ctx.client.id != 0).then_some(LOAD_TIMEOUT);
    // A copy: the argument may be a slice of the connection's read buffer, which a library
    // kept for good must not pin.
    let code = Bytes::copy_from_slice(&argv[at]);
    match with(ctx, |f, _| {
        lib::create(&mut f.engine, &mut f.libs, &code, replace, timeout)
    })? {
        Ok(name) => {
            changed(ctx, argv);
            Ok(Frame::Bulk(name))
        }
        Err(e) => Ok(error_reply(&e)),
    }
}

/// FUNCTION DELETE <library>.
fn function_delete(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if !with(ctx, |f, _| f.libs.remove(&argv[2]))? {
        return Err(CmdError::err("ERR Library not found"));
    }
    changed(ctx, argv);
    Ok(Frame::ok())
}

/// FUNCTION FLUSH [ASYNC|SYNC].
fn function_flush(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 3 {
        return Err(syntax_error(argv));
    }
    if argv.len() == 3 && !is(&argv[2], "sync") && !is(&argv[2], "async") {
        return Err(CmdError::err(
            "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
        ));
    }
    flush(ctx);
    changed(ctx, argv);
    Ok(Frame::ok())
}

/// Drops every library together with the Lua state that held them (functionsLibCtxClear and
/// a fresh engine, so nothing a library left behind survives).
fn flush(ctx: &mut Ctx) {
    ctx.srv.functions = None;
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE].
fn function_list(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut with_code = false;
    let mut pattern: Option<&Bytes> = None;
    let mut i = 2;
    while i < argv.len() {
        let a = &argv[i];
        if !with_code && is(a, "withcode") {
            with_code = true;
            i += 1;
            continue;
        }
        if pattern.is_none() && is(a, "libraryname") {
            if i >= argv.len() - 1 {
                return Err(CmdError::err("ERR library name argument was not given"));
            }
            pattern = Some(&argv[i + 1]);
            i += 2;
            continue;
        }
        return Ok(error_reply(&[&b"Unknown argument "[..], cstr(a)].concat()));
    }
    with(ctx, |f, _| {
        let libs = f
            .libs
            .libs
            .values()
            .filter(|l| pattern.is_none_or(|p| crate::glob::glob_match(p, &l.name, true)));
        let out = libs
            .map(|l| {
                let mut m = vec![
                    (
                        Frame::bulk_static("library_name"),
                        Frame::Bulk(l.name.clone()),
                    ),
                    (Frame::bulk_static("engine"), Frame::bulk_static("LUA")),
                    (
                        Frame::bulk_static("functions"),
                        Frame::Array(
                            l.functions
                                .iter()
                                .map(|f| {
                                    Frame::Map(vec![
                                        (Frame::bulk_static("name"), Frame::Bulk(f.name.clone())),
                                        (
                                            Frame::bulk_static("description"),
                                            f.desc.clone().map_or(Frame::Null, Frame::Bulk),
                                        ),
                                        (
                                            Frame::bulk_static("flags"),
                                            Frame::Set(
                                                lib::flag_names(f.flags)
                                                    .map(Frame::simple)
                                                    .collect(),
                                            ),
                                        ),
                                    ])
                                })
                                .collect(),
                        ),
                    ),
                ];
                if with_code {
                    m.push((
                        Frame::bulk_static("library_code"),
                        Frame::Bulk(l.code.clone()),
                    ));
                }
                Frame::Map(m)
            })
            .collect();
        Frame::Array(out)
    })
}

/// FUNCTION DUMP: Redis's payload (see `script::payload`).
fn function_dump(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    with(ctx, |f, _| {
        Frame::Bulk(Bytes::from(payload::dump(
            f.libs.libs.values().map(|l| &l.code[..]),
        )))
    })
}

/// FUNCTION RESTORE <payload> [FLUSH|APPEND|REPLACE].
fn function_restore(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 4 {
        return Err(syntax_error(argv));
    }
    #[derive(PartialEq)]
    enum Policy {
        Flush,
        Append,
        Replace,
    }
    let policy =
        match argv.get(3) {
            None => Policy::Append,
            Some(p) if is(p, "append") => Policy::Append,
            Some(p) if is(p, "replace") => Policy::Replace,
            Some(p) if is(p, "flush") => Policy::Flush,
            Some(_) => return Err(CmdError::err(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            )),
        };
    // Redis restores without a load timeout; a payload is client input (its code could loop
    // forever), so only the log's own RESTOREs go without one here.
    let timeout = (ctx.client.id != 0).then_some(LOAD_TIMEOUT);
    let data = &argv[2];
    if !payload::verify(data) {
        return Err(CmdError::err(
            "ERR DUMP payload version or checksum are wrong",
        ));
    }
    let r = with(ctx, |f, _| -> Result<(), Vec<u8>> {
        // The payload's libraries load into their own set first (no timeout, no REPLACE
        // among themselves: rdbFunctionLoad), then join the current ones by the policy.
        let mut fresh = Libraries::default();
        payload::parse(data, |code| {
            lib::create(
                &mut f.engine,
                &mut fresh,
                &Bytes::from(code),
                false,
                timeout,
            )
            .map(|_| ())
        })?;
        if policy == Policy::Flush {
            f.libs = fresh;
            Ok(())
        } else {
            lib::join(&mut f.libs, fresh, policy == Policy::Replace).map_err(String::into_bytes)
        }
    })?;
    if let Err(e) = r {
        return Ok(error_reply(&e));
    }
    changed(ctx, argv);
    Ok(Frame::ok())
}

/// FUNCTION STATS when no function is busy (a busy one's is answered by the connections, see
/// `script::busy`): no running script, and the one engine's counts.
fn function_stats(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let (_, functions, libraries) = lib::stats(ctx.srv);
    Ok(stats_frame(None, libraries, functions))
}

/// FUNCTION STATS's reply; `running` is (name, command, duration in ms).
pub fn stats_frame(running: Option<(Bytes, Vec<Bytes>, u64)>, libs: usize, funcs: usize) -> Frame {
    let running = match running {
        None => Frame::Null,
        Some((name, argv, ms)) => Frame::Map(vec![
            (Frame::bulk_static("name"), Frame::Bulk(name)),
            (
                Frame::bulk_static("command"),
                Frame::Array(argv.into_iter().map(Frame::Bulk).collect()),
            ),
            (Frame::bulk_static("duration_ms"), Frame::Integer(ms as i64)),
        ]),
    };
    Frame::Map(vec![
        (Frame::bulk_static("running_script"), running),
        (
            Frame::bulk_static("engines"),
            Frame::Map(vec![(
                Frame::bulk_static("LUA"),
                Frame::Map(vec![
                    (
                        Frame::bulk_static("libraries_count"),
                        Frame::Integer(libs as i64),
                    ),
                    (
                        Frame::bulk_static("functions_count"),
                        Frame::Integer(funcs as i64),
                    ),
                ]),
            )]),
        ),
    ])
}

/// Reaches the executor only when no script is running: a busy one's FUNCTION KILL is
/// answered by the connections (see `script::busy`).
fn function_kill(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Err(CmdError::err("NOTBUSY No scripts in execution right now."))
}

/// An `ERR` reply with the library's own bytes in it (names, code, Lua's messages), as
/// Redis's addReplyErrorSds; CR and LF become spaces so the reply stays one line.
fn error_reply(text: &[u8]) -> Frame {
    let mut out = Vec::with_capacity(text.len() + 4);
    out.extend_from_slice(b"ERR ");
    out.extend(
        text.iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    Frame::Error(Bytes::from(out))
}

/// Redis's addReplySubcommandSyntaxError.
fn syntax_error(argv: &[Bytes]) -> CmdError {
    let sub = cstr(&argv[1]);
    CmdError::erf(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)]).replace(['\r', '\n'], " ")
    ))
}

/// Redis prints some arguments with `%s`: up to the first NUL.
fn cstr(b: &[u8]) -> &[u8] {
    &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]
}

fn function_help(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() >= 2 && !is(&argv[1], "help") {
        return Err(CmdError::UnknownSubcommand(argv[1].to_vec(), "FUNCTION"));
    }
    let lines = [
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library with the given library name and code.",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries:",
        "    * Library name",
        "    * The engine used to run the Library",
        "    * Library description",
        "    * Functions list",
        "    * Library code (if WITHCODE is given)",
        "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
        "STATS",
        "    Return information about the current function running:",
        "    * Function name",
        "    * Command used to run the function",
        "    * Duration in MS that the function is running",
        "    If no function is running, return nil",
        "    In addition, returns a list of available engines.",
        "KILL",
        "    Kill the current running function.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the libraries.",
        "    * SYNC: Synchronously flush the libraries.",
        "DUMP",
        "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
        "    control how to handle existing libraries (default APPEND):",
        "    * FLUSH: delete all existing libraries.",
        "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
        "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
        "      libraries with the new libraries (notice that even on this option there is a chance of failure",
        "      in case of functions name collision with another library).",
        "HELP",
        "    Prints this help.",
    ];
    Ok(Frame::help(&lines))
}

/// Redis 7.0's key specifications of the family (its commands.c).
pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    ("fcall", &[super::support::SCRIPT_KEYS_RW]),
    ("fcall_ro", &[super::support::SCRIPT_KEYS_RO]),
];

/// Redis 7.0's command tips of the family (its commands.c).
pub static TIPS: &[(&str, &[&str])] = &[
    (
        "function|load",
        &["request_policy:all_shards", "response_policy:all_succeeded"],
    ),
    (
        "function|restore",
        &["request_policy:all_shards", "response_policy:all_succeeded"],
    ),
    ("function|list", &["nondeterministic_output_order"]),
    (
        "function|kill",
        &["request_policy:all_shards", "response_policy:one_succeeded"],
    ),
    (
        "function|delete",
        &["request_policy:all_shards", "response_policy:all_succeeded"],
    ),
    (
        "function|flush",
        &["request_policy:all_shards", "response_policy:all_succeeded"],
    ),
    (
        "function|stats",
        &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
    ),
];
