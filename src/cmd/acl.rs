//! The ACL command and the permission checks (Redis 7.0's acl.c). The users and their rules are
//! configuration (`config::users`); this family knows the command table they are checked
//! against: categories, key specifications (read or write access per key) and channels.
//!
//! A client holds its user's rules (`Client::perms`) only when the user is restricted, so the
//! unrestricted default user costs one branch per command; every change to a user replaces the
//! rules its clients hold.

use super::keyspec::{has_keys, key_refs, KeyRefs};
use super::spec::Ctx;
use super::spec::{flags::*, CmdId, CommandSpec, NO_KEYS};
use super::support::add_log_entry;
use crate::config::users::{Catalog, User};
use crate::error::{CmdError, CmdResult};
use crate::machine::client::Client;

use crate::machine::State;
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

/// The command table as the rules see it (names, containers, categories), built once.
pub fn catalog() -> &'static Catalog {
    static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    CATALOG.get_or_init(|| {
        let t = super::registry::table();
        let mut c = Catalog::default();
        for e in &t.entries {
            let listed = !e.spec.has(ONLY_SENTINEL)
                && e.parent
                    .is_none_or(|p| !t.entries[p].spec.has(ONLY_SENTINEL));
            c.push(&e.full_name, e.parent, e.categories, listed);
        }
        // Redis's commands deadbolt lacks: rules may name them, and they count in the rule
        // strings as in Redis; nothing can run them.
        for (name, cats) in super::acl_redis::COMMANDS {
            if c.lookup(name.as_bytes()).is_some() {
                continue;
            }
            let parent = name
                .split_once('|')
                .and_then(|(p, _)| c.lookup(p.as_bytes()));
            let bits = cats.iter().fold(0, |m, n| {
                m | crate::config::users::category_bit(n.as_bytes()).unwrap_or(0)
            });
            c.push(name, parent, bits, true);
        }
        c
    })
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

/// Republishes what depends on the users (AUTH while a script is busy, the pre-AUTH limits
/// and protected mode, which follow the default user) and gives the clients of `name` (None:
/// of every user) their user's rules as they are now.
fn users_changed(ctx: &mut Ctx, name: Option<&str>) {
    ctx.srv.shared.apply(&ctx.srv.config);
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

/// Why ACLs refuse a command (Redis's ACL_DENIED_CMD / KEY / CHANNEL, ordered as Redis picks
/// the reason to report among selectors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    Command = 1,
    Key = 2,
    Channel = 4,
}

impl Denied {
    fn reason(self) -> &'static str {
        match self {
            Denied::Command => "command",
            Denied::Key => "key",
            Denied::Channel => "channel",
        }
    }
}

/// Redis's ACLCheckAllUserCommandPerm: allowed when one selector allows the command with all
/// its keys and channels. Err: the reason and the argument it is about (0 for a command).
pub fn check_user(u: &User, id: CmdId, argv: &[Bytes]) -> Result<(), (Denied, usize)> {
    let entry = &super::registry::table().entries[id];
    let mut keys: Option<KeyRefs> = None;
    let (mut relevant, mut last_idx, mut idx) = (Denied::Command, 0, 0);
    for s in &u.selectors {
        match check_selector(s, id, entry, argv, &mut keys, &mut idx) {
            None => return Ok(()),
            Some(d) => {
                if d > relevant || (d == relevant && idx > last_idx) {
                    relevant = d;
                    last_idx = idx;
                }
            }
        }
    }
    Err((relevant, last_idx))
}

/// Redis's ACLSelectorCheckCmd. `keys` caches the command's keys across selectors.
fn check_selector(
    s: &crate::config::users::Selector,
    id: CmdId,
    entry: &super::table::TableEntry,
    argv: &[Bytes],
    keys: &mut Option<KeyRefs>,
    idx: &mut usize,
) -> Option<Denied> {
    let spec = entry.spec;
    if !s.all_commands && !spec.has(NO_AUTH) && !s.bit(id) {
        let first = if entry.parent.is_some() { 2 } else { 1 };
        let allowed = s.first_args(id);
        if allowed.is_empty()
            || !argv
                .get(first)
                .is_some_and(|a| allowed.iter().any(|f| f.eq_ignore_ascii_case(a)))
        {
            return Some(Denied::Command);
        }
    }
    if !s.all_keys && has_keys(entry) {
        let ks = keys.get_or_insert_with(|| key_refs(entry, argv));
        for k in ks.iter() {
            if !s.key_ok(&argv[k.pos], k.read, k.write) {
                *idx = k.pos;
                return Some(Denied::Key);
            }
        }
    }
    if !s.all_channels {
        for (pos, is_pattern) in channel_refs(spec.name, argv.len()) {
            if !s.channel_ok(&argv[pos], is_pattern) {
                *idx = pos;
                return Some(Denied::Channel);
            }
        }
    }
    None
}

/// Redis's commands_with_channels that publish or subscribe: (position, is a pattern).
fn channel_refs(name: &str, argc: usize) -> impl Iterator<Item = (usize, bool)> {
    let (range, pattern) = match name {
        "subscribe" | "ssubscribe" => (1..argc, false),
        "psubscribe" => (1..argc, true),
        "publish" | "spublish" => (1..2.min(argc), false),
        _ => (0..0, false),
    };
    range.map(move |p| (p, pattern))
}

/// Redis's ACLUserCheckCmdWithUnrestrictedKeyAccess for reading: one selector allows the
/// command and may read every key (SORT's BY and GET).
pub fn unrestricted_key_access(client: &Client, argv: &[Bytes]) -> bool {
    let Some(user) = &client.perms else {
        return true;
    };
    let t = super::registry::table();
    let Some(id) = t.lookup(&argv[0]) else {
        return false;
    };
    let entry = &t.entries[id];
    let mut keys = None;
    let mut idx = 0;
    user.selectors.iter().any(|s| {
        check_selector(s, id, entry, argv, &mut keys, &mut idx).is_none()
            && s.unrestricted_keys(true, false)
    })
}

/// The reply to a command ACLs refuse (processCommand's texts).
pub fn noperm(d: Denied, full_name: &str) -> CmdError {
    match d {
        Denied::Command => CmdError::Other(
            format!("NOPERM this user has no permissions to run the '{full_name}' command").into(),
        ),
        Denied::Key => CmdError::err(
            "NOPERM this user has no permissions to access one of the keys used as arguments",
        ),
        Denied::Channel => CmdError::err(
            "NOPERM this user has no permissions to access one of the channels used as arguments",
        ),
    }
}

/// EXEC's reply for a queued command no longer allowed (an AUTH or ACL SETUSER ran since).
pub fn noperm_at_exec(d: Denied) -> CmdError {
    let reason = match d {
        Denied::Command => "no permission to execute the command or subcommand",
        Denied::Key => "no permission to touch the specified keys",
        Denied::Channel => "no permission to access one of the channels used as arguments",
    };
    CmdError::Other(
        format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}").into(),
    )
}

/// scriptVerifyACL's error for a `redis.call` its caller may not make.
pub fn script_denied(d: Denied) -> &'static str {
    match d {
        Denied::Command => "ERR The user executing the script can't run this command or subcommand",
        Denied::Key => "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments",
        Denied::Channel => "ERR The user executing the script can't publish to the channel mentioned in the command",
    }
}

/// Checks `client`'s user (when restricted) for command `id`; a refusal is logged in ACL LOG
/// with `context` (`toplevel`, `multi`, `lua`). An unrestricted user costs one branch.
#[inline]
pub fn check(
    srv: &mut State,
    client: &Client,
    id: CmdId,
    argv: &[Bytes],
    context: &'static str,
) -> Result<(), Denied> {
    match &client.perms {
        None => Ok(()),
        Some(user) => check_restricted(srv, client, user, id, argv, context),
    }
}

#[inline(never)]
fn check_restricted(
    srv: &mut State,
    client: &Client,
    user: &User,
    id: CmdId,
    argv: &[Bytes],
    context: &'static str,
) -> Result<(), Denied> {
    let (d, pos) = match check_user(user, id, argv) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    let object = match d {
        Denied::Command => Bytes::from(super::registry::table().entries[id].full_name.clone()),
        _ => argv[pos].clone(),
    };
    add_log_entry(srv, client, d.reason(), context, object, None);
    Err(d)
}
