//! The ACL command (WHOAMI / LIST / USERS / HELP) and the permission checks a client's `Perms`
//! feed. The users themselves are configuration (`config::users`): they change only through the
//! config (and `requirepass`, which is the default user's password), so a client's permissions
//! are computed once at AUTH and checked with one branch per command.

use super::table::{flags::*, CommandSpec, NO_KEYS};
use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use bytes::Bytes;

pub use crate::config::users::{Perms, User, Users};

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "acl",
    arity: -2,
    flags: 0,
    keys: NO_KEYS,
    acl: &["slow"],
    handler: help,
    subcommands: &[
        sub("help", 2, LOADING | STALE, help),
        sub("list", 2, ADMIN | NOSCRIPT | LOADING | STALE, list),
        sub("users", 2, ADMIN | NOSCRIPT | LOADING | STALE, users),
        sub("whoami", 2, NOSCRIPT | LOADING | STALE, whoami),
    ],
}];

const fn sub(name: &'static str, arity: i32, flags: u32, handler: super::Handler) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, NO_KEYS, &["slow"], handler)
}

/// Redis's ACL HELP, limited to the subcommands deadbolt implements.
fn help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let lines = [
        "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LIST",
        "    Show users details in config file format.",
        "USERS",
        "    List all the registered usernames.",
        "WHOAMI",
        "    Return the current connection username.",
        "HELP",
        "    Prints this help.",
    ];
    Ok(Frame::Array(
        lines.iter().map(|l| Frame::simple(l)).collect(),
    ))
}

fn list(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Array(
        ctx.srv
            .config
            .users
            .iter()
            .map(|u| Frame::Bulk(Bytes::from(u.describe())))
            .collect(),
    ))
}

fn users(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Array(
        ctx.srv
            .config
            .users
            .iter()
            .map(|u| Frame::Bulk(Bytes::from(u.name.clone())))
            .collect(),
    ))
}

fn whoami(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Bulk(Bytes::from(ctx.client.user.clone())))
}

/// The ACL check of `processCommand`, for a client whose user is restricted.
/// Why ACLs refuse a command (Redis's ACL_DENIED_CMD / ACL_DENIED_KEY / ACL_DENIED_CHANNEL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    Command,
    Key,
    Channel,
}

/// Redis's `ACLCheckAllPerm` for the rules deadbolt supports.
pub fn denied(perms: Perms, spec: &CommandSpec, argc: usize) -> Option<Denied> {
    if perms.no_commands && !spec.has(NO_AUTH) {
        return Some(Denied::Command);
    }
    // Shard channels are keys only for slot routing (key spec flag NOT_KEY): ACLs judge them
    // as channels.
    let shard_channels = matches!(spec.name, "spublish" | "ssubscribe" | "sunsubscribe");
    let has_keys = spec.key_positions(argc).next().is_some() || spec.has(MOVABLE_KEYS);
    if perms.no_keys && !shard_channels && has_keys {
        return Some(Denied::Key);
    }
    // Redis's commands_with_channels that publish or subscribe (UNSUBSCRIBE is never
    // refused); each takes at least one channel, and no channel is allowed.
    if perms.no_channels
        && matches!(
            spec.name,
            "publish" | "spublish" | "subscribe" | "ssubscribe" | "psubscribe"
        )
    {
        return Some(Denied::Channel);
    }
    None
}

pub fn check(perms: Perms, spec: &CommandSpec, full_name: &str, argc: usize) -> CmdResult<()> {
    match denied(perms, spec, argc) {
        None => Ok(()),
        Some(Denied::Command) => Err(CmdError::Other(
            format!("NOPERM this user has no permissions to run the '{full_name}' command").into(),
        )),
        Some(Denied::Key) => Err(CmdError::err(
            "NOPERM this user has no permissions to access one of the keys used as arguments",
        )),
        Some(Denied::Channel) => Err(CmdError::err(
            "NOPERM this user has no permissions to access one of the channels used as arguments",
        )),
    }
}

/// EXEC's check of each queued command (the user may have changed by an AUTH queued before
/// it): Redis's reply for a command no longer allowed.
pub fn check_at_exec(perms: Perms, spec: &CommandSpec, argc: usize) -> CmdResult<()> {
    let reason = match denied(perms, spec, argc) {
        None => return Ok(()),
        Some(Denied::Command) => "no permission to execute the command or subcommand",
        Some(Denied::Key) => "no permission to touch the specified keys",
        Some(Denied::Channel) => "no permission to access one of the channels used as arguments",
    };
    Err(CmdError::Other(
        format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}").into(),
    ))
}
