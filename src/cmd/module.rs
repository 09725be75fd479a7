//! MODULE: deadbolt loads no Redis modules (they are C code written against Redis's internals),
//! so it answers as a Redis 7.0 with none loaded: LIST is empty, LOAD and LOADEX fail the way a
//! module that cannot load fails (the reason in the log), UNLOAD finds no such module. LOAD,
//! LOADEX and UNLOAD are protected by `enable-module-command`, as in Redis.

use super::args::is;
use super::spec::Ctx;
use super::spec::{flags::*, CommandSpec};
use super::support::{spec_acl as spec, ADMIN_CATS};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    subcommands: &[
        spec("help", 2, LOADING | STALE, &["slow"], help),
        spec("list", 2, ADMIN | NOSCRIPT, ADMIN_CATS, list),
        spec(
            "load",
            -3,
            ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
            ADMIN_CATS,
            load,
        ),
        spec(
            "loadex",
            -3,
            ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
            ADMIN_CATS,
            load,
        ),
        spec(
            "unload",
            3,
            ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
            ADMIN_CATS,
            unload,
        ),
    ],
    ..spec("module", -2, 0, &["slow"], help)
}];

fn help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::help(&[
        "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LIST",
        "    Return a list of loaded modules.",
        "LOAD <path> [<arg> ...]",
        "    Load a module library from <path>, passing to it any optional arguments.",
        "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
        "    Load a module library from <path>, while passing it module configurations and optional arguments.",
        "UNLOAD <name>",
        "    Unload a module.",
        "HELP",
        "    Prints this help.",
    ]))
}

fn list(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Array(Vec::new()))
}

/// `enable-module-command` (immutable, so read as it was given at start).
fn allowed(ctx: &Ctx) -> CmdResult<()> {
    use crate::config::DebugCommand;
    let setting = match ctx.srv.config.compat_value("enable-module-command") {
        v if is(v.as_bytes(), "yes") => DebugCommand::Yes,
        v if is(v.as_bytes(), "local") => DebugCommand::Local,
        _ => DebugCommand::No,
    };
    if super::support::protected_action_allowed(setting, ctx) {
        return Ok(());
    }
    Err(CmdError::err("ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server."))
}

fn load(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    allowed(ctx)?;
    tracing::warn!(
        "Module {} failed to load: deadbolt does not load Redis modules",
        String::from_utf8_lossy(&argv[2])
    );
    Err(CmdError::err(
        "ERR Error loading the extension. Please check the server logs.",
    ))
}

fn unload(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    allowed(ctx)?;
    Err(CmdError::err(
        "ERR Error unloading module: no such module with that name",
    ))
}

/// Redis 7.0's command tips of the family.
pub static TIPS: &[(&str, &[&str])] = &[("module|list", &["nondeterministic_output_order"])];
