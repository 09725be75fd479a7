//! The ACL command and the permission checks (Redis 7.0's acl.c). The users and their rules are
//! configuration (`config::users`); this family knows the command table they are checked
//! against: categories, key specifications (read or write access per key) and channels.
//!
//! A client holds its user's rules (`Client::perms`) only when the user is restricted, so the
//! unrestricted default user costs one branch per command; every change to a user replaces the
//! rules its clients hold.

use super::dispatch::{check_user, Denied};
use super::registry::catalog;
use super::spec::Ctx;
use super::spec::{flags::*, CommandSpec, NO_KEYS};
use crate::config::users::User;
use crate::error::{CmdError, CmdResult};
use crate::machine::client::Client;

use crate::protocol::Frame;
use bytes::Bytes;

pub use crate::config::users::{Perms, Users};

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "acl",
    arity: -2,
    flags: 0,
    keys: NO_KEYS,
    acl: &["slow"],
    handler: help,
    subcommands: &[
        sub("cat", -2, NOSCRIPT | LOADING | STALE, cat),
        sub("deluser", -3, ADMIN | NOSCRIPT | LOADING | STALE, deluser),
        sub("dryrun", -4, ADMIN | NOSCRIPT | LOADING | STALE, dryrun),
        sub("genpass", -2, NOSCRIPT | LOADING | STALE, genpass),
        sub("getuser", 3, ADMIN | NOSCRIPT | LOADING | STALE, getuser),
        sub("help", 2, LOADING | STALE, help),
        sub("list", 2, ADMIN | NOSCRIPT | LOADING | STALE, list),
        sub("load", 2, ADMIN | NOSCRIPT | LOADING | STALE, load),
        sub("log", -2, ADMIN | NOSCRIPT | LOADING | STALE, log),
        sub("save", 2, ADMIN | NOSCRIPT | LOADING | STALE, save),
        sub("setuser", -3, ADMIN | NOSCRIPT | LOADING | STALE, setuser),
        sub("users", 2, ADMIN | NOSCRIPT | LOADING | STALE, users),
        sub("whoami", 2, NOSCRIPT | LOADING | STALE, whoami),
    ],
}];

const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, NO_KEYS, &["slow"], handler)
}

/// Whether a catalog id is one of deadbolt's commands (not one only Redis has).
fn runnable(id: usize) -> bool {
    id < super::registry::table().entries.len()
}

/// The `user` lines of the configuration, then the aclfile (Redis's ACLLoadUsersAtStartup).
pub fn load_at_startup(cfg: &mut crate::config::Config) -> Result<(), String> {
    if !cfg.aclfile.is_empty() && cfg.users.configured {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    cfg.users.load_pending(catalog())?;
    if !cfg.aclfile.is_empty() {
        let users = read_aclfile(cfg)?;
        cfg.users.replace_all(users);
    }
    Ok(())
}

/// Where the aclfile is: Redis reads it after changing to `dir`, so a relative name is
/// relative to `dir`.
fn aclfile_path(cfg: &crate::config::Config) -> std::path::PathBuf {
    std::path::Path::new(&cfg.dir).join(&cfg.aclfile)
}

fn read_aclfile(cfg: &crate::config::Config) -> Result<Vec<User>, String> {
    let path = &cfg.aclfile;
    let text = std::fs::read(aclfile_path(cfg)).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{path}': {}",
            os_error(&e)
        )
    })?;
    cfg.users.parse_aclfile(&text, path, catalog())
}

/// strerror's text, without Rust's " (os error N)".
fn os_error(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(at) => s[..at].to_string(),
        None => s,
    }
}

fn help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let lines = [
        "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CAT [<category>]",
        "    List all commands that belong to <category>, or all command categories",
        "    when no category is specified.",
        "DELUSER <username> [<username> ...]",
        "    Delete a list of users.",
        "DRYRUN <username> <command> [<arg> ...]",
        "    Returns whether the user can execute the given command without executing the command.",
        "GETUSER <username>",
        "    Get the user's details.",
        "GENPASS [<bits>]",
        "    Generate a secure 256-bit user password. The optional `bits` argument can",
        "    be used to specify a different size.",
        "LIST",
        "    Show users details in config file format.",
        "LOAD",
        "    Reload users from the ACL file.",
        "LOG [<count> | RESET]",
        "    Show the ACL log entries.",
        "SAVE",
        "    Save the current config to the ACL file.",
        "SETUSER <username> <attribute> [<attribute> ...]",
        "    Create or modify a user with the specified attributes.",
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

/// Redis's addReplySubcommandSyntaxError for a subcommand given too many arguments.
fn syntax(argv: &[Bytes]) -> CmdError {
    super::support::subcommand_syntax(argv)
}

fn list(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let cat = catalog();
    Ok(Frame::Array(
        ctx.srv
            .config
            .users
            .iter()
            .map(|u| Frame::Bulk(Bytes::from(u.line(cat))))
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

fn cat(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let c = catalog();
    match argv.len() {
        2 => Ok(Frame::Array(
            crate::config::users::CATEGORIES
                .iter()
                .map(|n| Frame::bulk_static(n))
                .collect(),
        )),
        3 => {
            let Some(flag) = crate::config::users::category_bit(&argv[2]) else {
                let name = String::from_utf8_lossy(&argv[2]);
                let name: String = name.chars().take(128).collect();
                return Err(CmdError::erf(format!("Unknown category '{name}'")));
            };
            Ok(Frame::Array(
                c.walk()
                    .into_iter()
                    .filter(|&id| runnable(id) && c.categories(id) & flag != 0)
                    .map(|id| Frame::Bulk(Bytes::from(c.name(id).to_string())))
                    .collect(),
            ))
        }
        _ => Err(syntax(argv)),
    }
}

fn setuser(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let name = &argv[2];
    if name
        .iter()
        .any(|&b| b.is_ascii_whitespace() || b == 0 || b == 0x0b)
    {
        return Err(CmdError::err(
            "ERR Usernames can't contain spaces or null characters",
        ));
    }
    let name = String::from_utf8_lossy(name).into_owned();
    let old = ctx
        .srv
        .config
        .users
        .set_user(&name, &argv[3..], catalog())
        .map_err(CmdError::erf)?;
    if let Some(old) = old {
        let new = ctx.srv.config.users.get(name.as_bytes()).cloned();
        if let Some(new) = new {
            kill_pubsub_clients_if_needed(ctx, &new, &old);
        }
    }
    users_changed(ctx, Some(&name));
    Ok(Frame::ok())
}

/// Republishes what depends on the users (the pre-AUTH limits and protected mode, which
/// follow the default user) and gives the clients of `name` (None:
/// of every user) their user's rules as they are now.
fn users_changed(ctx: &mut Ctx, name: Option<&str>) {
    ctx.srv.local.apply(&ctx.srv.config);
    let users = &ctx.srv.config.users;
    let refresh = |c: &mut Client| {
        if name.is_none_or(|n| c.user == n) {
            c.perms = users.perms(&c.user);
        }
    };
    refresh(ctx.client);
    for c in ctx.srv.clients.values_mut() {
        refresh(c);
    }
}

/// Redis's ACLKillPubsubClientsIfNeeded: the user's subscribers lose their connection when a
/// channel or pattern they are subscribed to is no longer allowed.
fn kill_pubsub_clients_if_needed(ctx: &mut Ctx, new: &User, old: &User) {
    if new.selectors.iter().any(|s| s.all_channels) {
        return;
    }
    let upcoming: Vec<Vec<u8>> = new
        .selectors
        .iter()
        .flat_map(|s| s.channels.iter().cloned())
        .collect();
    let superset = old
        .selectors
        .iter()
        .all(|s| !s.all_channels && s.channels.iter().all(|c| upcoming.contains(c)));
    if superset {
        return;
    }
    let violates = |c: &Client| {
        c.user == old.name
            && c.pubsub.subscribed()
            && (c
                .pubsub
                .patterns
                .iter()
                .any(|p| !crate::config::users::channel_in(&upcoming, p, true))
                || c.pubsub
                    .channels
                    .iter()
                    .chain(c.pubsub.shard.iter())
                    .any(|ch| !crate::config::users::channel_in(&upcoming, ch, false)))
    };
    let victims: Vec<u64> = ctx
        .srv
        .clients
        .values()
        .filter(|c| violates(c))
        .map(|c| c.id)
        .collect();
    for id in victims {
        if let Some(c) = ctx.srv.clients.remove(&id) {
            ctx.srv.close_client(c);
        }
    }
    if violates(ctx.client) {
        ctx.client.close_after_reply = true;
    }
}

/// Disconnects the clients authenticated as a user that no longer exists (Redis's
/// ACLFreeUserAndKillClients): those whose user name `gone` selects.
fn kill_clients_of(ctx: &mut Ctx, gone: &dyn Fn(&str) -> bool) {
    let victims: Vec<u64> = ctx
        .srv
        .clients
        .values()
        .filter(|c| gone(&c.user))
        .map(|c| c.id)
        .collect();
    for id in victims {
        if let Some(c) = ctx.srv.clients.remove(&id) {
            ctx.srv.close_client(c);
        }
    }
    if gone(&ctx.client.user) {
        // Redis puts it back to the unauthenticated default user and closes it after this
        // command's reply.
        let c = &mut *ctx.client;
        c.user = "default".into();
        c.authenticated = false;
        c.perms = ctx.srv.config.users.perms("default");
        c.close_after_reply = true;
    }
}

fn deluser(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv[2..].iter().any(|n| &n[..] == b"default") {
        return Err(CmdError::err("ERR The 'default' user cannot be removed"));
    }
    let mut deleted = Vec::new();
    for n in &argv[2..] {
        if let Some(u) = ctx.srv.config.users.remove(n) {
            deleted.push(u.name.clone());
        }
    }
    if !deleted.is_empty() {
        kill_clients_of(ctx, &|u: &str| deleted.iter().any(|d| d == u));
        users_changed(ctx, None);
    }
    Ok(Frame::Integer(deleted.len() as i64))
}

fn getuser(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(u) = ctx.srv.config.users.get(&argv[2]).cloned() else {
        return Ok(Frame::Null);
    };
    let cat = catalog();
    let bulk = |s: &str| Frame::Bulk(Bytes::from(s.to_string()));
    let describe = |s: &crate::config::users::Selector| {
        vec![
            (bulk("commands"), bulk(&s.describe_commands(cat))),
            (bulk("keys"), Frame::Bulk(Bytes::from(s.describe_keys()))),
            (
                bulk("channels"),
                Frame::Bulk(Bytes::from(s.describe_channels())),
            ),
        ]
    };
    let mut fields = vec![
        (
            bulk("flags"),
            Frame::Set(u.flags().into_iter().map(bulk).collect()),
        ),
        (
            bulk("passwords"),
            Frame::Array(
                u.passwords
                    .iter()
                    .map(|p| bulk(&crate::config::users::hex(p)))
                    .collect(),
            ),
        ),
    ];
    fields.extend(describe(u.root()));
    fields.push((
        bulk("selectors"),
        Frame::Array(
            u.selectors[1..]
                .iter()
                .map(|s| Frame::Map(describe(s)))
                .collect(),
        ),
    ));
    Ok(Frame::Map(fields))
}

fn no_aclfile() -> CmdError {
    CmdError::err("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.")
}

fn load(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if ctx.srv.config.aclfile.is_empty() {
        return Err(no_aclfile());
    }
    let users = read_aclfile(&ctx.srv.config).map_err(CmdError::erf)?;
    ctx.srv.config.users.replace_all(users);
    // Redis frees every user but the default one: their clients are disconnected.
    kill_clients_of(ctx, &|u: &str| u != "default");
    users_changed(ctx, None);
    Ok(Frame::ok())
}

fn save(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if ctx.srv.config.aclfile.is_empty() {
        return Err(no_aclfile());
    }
    let cat = catalog();
    let mut text = Vec::new();
    for u in ctx.srv.config.users.iter() {
        text.extend_from_slice(&u.line(cat));
        text.push(b'\n');
    }
    let path = aclfile_path(&ctx.srv.config);
    let tmp = format!("{}.tmp-{}-{}", path.display(), std::process::id(), ctx.now);
    let written = std::fs::write(&tmp, &text).and_then(|_| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        tracing::warn!("Writing ACL file for ACL SAVE: {}", os_error(&e));
        return Err(CmdError::err("ERR There was an error trying to save the ACLs. Please check the server logs for more information"));
    }
    Ok(Frame::ok())
}

fn genpass(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    const MAX_BITS: i64 = 4096;
    let bits = match argv.len() {
        2 => 256,
        3 => super::args::int_arg(&argv[2])?,
        _ => return Err(syntax(argv)),
    };
    if bits <= 0 || bits > MAX_BITS {
        return Err(CmdError::erf(format!(
            "ACL GENPASS argument must be the number of bits for the output password, a positive number up to {MAX_BITS}"
        )));
    }
    let chars = (bits as usize).div_ceil(4);
    let mut seed = [0u8; MAX_BITS as usize / 8];
    getrandom(&mut seed[..chars.div_ceil(2)]);
    let hex = crate::config::users::hex(&seed[..chars.div_ceil(2)]);
    Ok(Frame::Bulk(Bytes::from(hex[..chars].to_string())))
}

/// Random bytes from the kernel (Redis's getRandomHexChars reads /dev/urandom too).
fn getrandom(buf: &mut [u8]) {
    use std::io::Read;
    let ok = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(buf));
    if ok.is_err() {
        for b in buf.iter_mut() {
            *b = fastrand::u8(..);
        }
    }
}

fn log(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut count: i64 = 10;
    match argv.len() {
        2 => {}
        3 if argv[2].eq_ignore_ascii_case(b"reset") => {
            ctx.srv.ops.acl_log.clear();
            return Ok(Frame::ok());
        }
        3 => count = super::args::int_arg(&argv[2])?.max(0),
        _ => return Err(syntax(argv)),
    }
    let now = crate::clock::unix_ms();
    let bulk = |s: &str| Frame::Bulk(Bytes::from(s.to_string()));
    Ok(Frame::Array(
        ctx.srv
            .ops
            .acl_log
            .iter()
            .take(count as usize)
            .map(|e| {
                Frame::Map(vec![
                    (bulk("count"), Frame::Integer(e.count as i64)),
                    (bulk("reason"), bulk(e.reason)),
                    (bulk("context"), bulk(e.context)),
                    (bulk("object"), Frame::Bulk(e.object.clone())),
                    (bulk("username"), Frame::Bulk(e.username.clone())),
                    (
                        bulk("age-seconds"),
                        Frame::Double(now.saturating_sub(e.ctime_ms) as f64 / 1000.0),
                    ),
                    (bulk("client-info"), bulk(&e.client_info)),
                ])
            })
            .collect(),
    ))
}

fn dryrun(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(u) = ctx.srv.config.users.get(&argv[2]).cloned() else {
        return Err(CmdError::erf(format!(
            "User '{}' not found",
            String::from_utf8_lossy(&argv[2])
        )));
    };
    let args = &argv[3..];
    let t = super::registry::table();
    let not_found = || {
        CmdError::erf(format!(
            "Command '{}' not found",
            String::from_utf8_lossy(&args[0])
        ))
    };
    let mut id = t.lookup(&args[0]).ok_or_else(not_found)?;
    if !t.entries[id].spec.subcommands.is_empty() && args.len() > 1 {
        id = t.lookup_sub(id, &args[1]).ok_or_else(not_found)?;
    }
    let e = &t.entries[id];
    if !e.spec.arity_ok(args.len()) {
        return Err(CmdError::erf(format!(
            "wrong number of arguments for '{}' command",
            e.full_name
        )));
    }
    Ok(match check_user(&u, id, args) {
        Ok(()) => Frame::ok(),
        Err((d, pos)) => {
            let arg = || String::from_utf8_lossy(&args[pos]).into_owned();
            Frame::Bulk(Bytes::from(match d {
                Denied::Command => format!(
                    "This user has no permissions to run the '{}' command",
                    e.full_name
                ),
                Denied::Key => {
                    format!("This user has no permissions to access the '{}' key", arg())
                }
                Denied::Channel => format!(
                    "This user has no permissions to access the '{}' channel",
                    arg()
                ),
            }))
        }
    })
}

// ---- the checks ----------------------------------------------------------------------------
