//! Server commands: INFO, CONFIG, COMMAND, TIME, LASTSAVE, SHUTDOWN (ROLE and WAIT: role.rs;
//! DEBUG: debug.rs). COMMAND DOCS and its data: docs.rs and docs_redis.rs beside this file.

pub mod docs;
// Generated (scripts/command-docs.py); kept as the script writes it.
#[rustfmt::skip]
mod docs_redis;

use super::args::{glob_match, is};
use super::spec::Ctx;
use super::spec::{flags, flags::*, CommandSpec, NO_KEYS};
use super::support::{spec_acl, ADMIN_CATS};
use crate::clock::unix_us;
use crate::config::{all_directives, Apply, Config, Directive};
use crate::error::{CmdError, CmdResult};
use crate::machine::pubsub::Kind;
use crate::machine::{Host, State, REDIS_VERSION};
use crate::protocol::Frame;
use bytes::Bytes;
use std::fmt::Write;
use std::sync::atomic::Ordering;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, NO_KEYS, &[], handler)
}

const CONN: &[&str] = &["connection"];

pub static COMMANDS: &[CommandSpec] = &[
    spec_acl("info", -1, LOADING | STALE, &["dangerous"], info),
    spec("time", 1, LOADING | STALE | FAST, time),
    spec_acl("lastsave", 1, LOADING | STALE | FAST, ADMIN_CATS, lastsave),
    spec(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY,
        shutdown,
    ),
    CommandSpec {
        name: "config",
        arity: -2,
        flags: 0,
        keys: NO_KEYS,
        acl: &[],
        handler: config_help,
        subcommands: &[
            spec("help", 2, LOADING | STALE, config_help),
            spec("get", -3, ADMIN | NOSCRIPT | LOADING | STALE, config_get),
            spec("set", -4, ADMIN | NOSCRIPT | LOADING | STALE, config_set),
            spec(
                "resetstat",
                2,
                ADMIN | NOSCRIPT | LOADING | STALE,
                config_resetstat,
            ),
            spec(
                "rewrite",
                2,
                ADMIN | NOSCRIPT | LOADING | STALE,
                config_rewrite,
            ),
        ],
    },
    CommandSpec {
        name: "command",
        arity: -1,
        flags: LOADING | STALE,
        keys: NO_KEYS,
        acl: &["connection"],
        handler: command_all,
        subcommands: &[
            spec_acl("count", 2, LOADING | STALE, CONN, command_count),
            spec_acl("info", -2, LOADING | STALE, CONN, command_info),
            spec_acl("docs", -2, LOADING | STALE, CONN, docs::command_docs),
            spec_acl("list", -2, LOADING | STALE, CONN, command_list),
            spec_acl("getkeys", -4, LOADING | STALE, CONN, command_getkeys),
            spec_acl(
                "getkeysandflags",
                -4,
                LOADING | STALE,
                CONN,
                command_getkeys,
            ),
            spec_acl("help", 2, LOADING | STALE, CONN, command_help),
        ],
    },
];

fn time(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let us = unix_us();
    Ok(Frame::Array(vec![
        Frame::bulk_from((us / 1_000_000).to_string()),
        Frame::bulk_from((us % 1_000_000).to_string()),
    ]))
}

fn lastsave(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Integer(
        ctx.host
            .rdb()
            .map_or(ctx.srv.stats.start_unix, |r| r.last_save_unix) as i64,
    ))
}

fn shutdown(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    for a in &argv[1..] {
        if !(is(a, "nosave") || is(a, "save") || is(a, "now") || is(a, "force") || is(a, "abort")) {
            return Err(CmdError::Syntax);
        }
    }
    if argv[1..].iter().any(|a| is(a, "abort")) {
        return Err(CmdError::err("ERR No shutdown in progress."));
    }
    tracing::warn!("User requested shutdown...");
    // As Redis's prepareForShutdown: a snapshot when save points are set or SAVE is asked,
    // unless NOSAVE; if it fails the server stays up (FORCE shuts down anyway).
    let nosave = argv[1..].iter().any(|a| is(a, "nosave"));
    let wants_save = argv[1..].iter().any(|a| is(a, "save"));
    if !nosave && (wants_save || !ctx.srv.config.save_points.is_empty()) {
        tracing::info!("Saving the final RDB snapshot before exiting.");
        if ctx.host.rdb_save(ctx.srv, false).is_err() && !argv[1..].iter().any(|a| is(a, "force")) {
            tracing::warn!("Error trying to save the DB, can't exit.");
            return Err(CmdError::err("ERR Errors trying to SHUTDOWN. Check logs."));
        }
    }
    ctx.srv.shutting_down = true;
    ctx.client.close_after_reply = true;
    ctx.srv.shared.request_shutdown();
    // Redis closes the connection without a reply when the shutdown succeeds.
    ctx.client.skip_reply = true;
    Ok(Frame::ok())
}

// ---- CONFIG ----------------------------------------------------------------------------------

fn config_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let lines = [
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "REWRITE",
        "    Rewrite the configuration file.",
        "HELP",
        "    Print this help.",
    ];
    Ok(Frame::help(&lines))
}

fn config_get(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut pairs: Vec<(Frame, Frame)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for pattern in &argv[2..] {
        // configGetCommand: a name without glob characters is looked up, hidden or not.
        let glob = pattern.iter().any(|c| matches!(c, b'*' | b'?' | b'['));
        if !glob {
            // Answered under the name as given (Redis adds the argument itself).
            let name = String::from_utf8_lossy(pattern);
            if let Some(d) = Config::find(&name) {
                let canonical = std::iter::once(d.name)
                    .chain(d.aliases.iter().copied())
                    .find(|n| n.eq_ignore_ascii_case(&name))
                    .unwrap_or(d.name);
                if seen.insert(canonical) {
                    pairs.push((
                        Frame::Bulk(pattern.clone()),
                        Frame::bulk_from((d.get)(&ctx.srv.config)),
                    ));
                }
            }
            continue;
        }
        for d in all_directives() {
            if glob && crate::config::compat::HIDDEN.contains(&d.name) {
                continue;
            }
            let names = std::iter::once(d.name).chain(d.aliases.iter().copied());
            for name in names {
                if glob_match(pattern, name.as_bytes(), true) && seen.insert(name) {
                    pairs.push((
                        Frame::bulk_static(name),
                        Frame::bulk_from((d.get)(&ctx.srv.config)),
                    ));
                }
            }
        }
    }
    Ok(Frame::Map(pairs))
}

/// Redis's configSetCommand: every name is checked first (unknown, immutable or protected,
/// refused while loading, given twice), then every value is parsed into a copy of the
/// configuration, then the changed directives are applied, once per kind of application
/// (`config::Apply`). The first failure wins and leaves the old configuration in force.
fn config_set(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() % 2 == 1 {
        return Err(CmdError::Syntax);
    }
    let failed = |name: &str, reason: &str| {
        CmdError::erf(format!(
            "CONFIG SET failed (possibly related to argument '{name}') - {reason}"
        ))
    };
    // Each directive with the name it was given by (an alias stays an alias in errors).
    let mut rows: Vec<(&'static Directive, &'static str, String)> = Vec::new();
    let mut error: Option<CmdError> = None;
    let mut deny_loading = false;
    for pair in argv[2..].chunks(2) {
        let name = String::from_utf8_lossy(&pair[0]);
        let Some(d) = Config::find(&name) else {
            if error.is_none() {
                error = Some(CmdError::erf(format!(
                    "Unknown option or number of arguments for CONFIG SET - '{name}'"
                )));
            }
            continue;
        };
        if error.is_some() || deny_loading {
            continue;
        }
        match d.apply {
            Apply::Immutable => error = Some(failed(&name, "can't set immutable config")),
            Apply::Protected => error = Some(failed(&name, "can't set protected config")),
            // Redis's DENY_LOADING_CONFIG: the log being loaded can't be switched.
            Apply::Persistence if d.name == "appendonly" && ctx.host.loading() => {
                deny_loading = true
            }
            _ if rows.iter().any(|(r, _, _)| std::ptr::eq(*r, d)) => {
                error = Some(failed(&name, "duplicate parameter"))
            }
            _ => {
                let given = std::iter::once(d.name)
                    .chain(d.aliases.iter().copied())
                    .find(|n| n.eq_ignore_ascii_case(&name))
                    .unwrap_or(d.name);
                rows.push((d, given, String::from_utf8_lossy(&pair[1]).into_owned()))
            }
        }
    }
    if deny_loading {
        return Err(CmdError::err(
            "LOADING Redis is loading the dataset in memory",
        ));
    }
    if let Some(e) = error {
        return Err(e);
    }
    let mut updated = ctx.srv.config.clone();
    for (d, given, value) in &rows {
        // Redis names the directive as it knows it (lower case) when a value is refused.
        (d.set)(&mut updated, value).map_err(|e| failed(given, &e))?;
    }
    apply_config(ctx.srv, ctx.host, updated).map_err(|(name, e)| failed(name, &e))?;
    Ok(Frame::ok())
}

/// Installs a new configuration and makes it take effect: for each kind of application (in
/// table order), once, if any directive applied that way changed. When one fails the old
/// configuration is put back and re-applied; Err: the directive and the reason.
pub fn apply_config(
    srv: &mut State,
    host: &mut dyn Host,
    cfg: Config,
) -> Result<(), (&'static str, String)> {
    let old = std::mem::replace(&mut srv.config, cfg);
    let mut kinds: Vec<(Apply, Vec<&'static str>)> = Vec::new();
    for d in all_directives() {
        if (d.get)(&old) == (d.get)(&srv.config) {
            continue;
        }
        match kinds.iter_mut().find(|(k, _)| *k == d.apply) {
            Some((_, names)) => names.push(d.name),
            None => kinds.push((d.apply, vec![d.name])),
        }
    }
    for (i, (kind, names)) in kinds.iter().enumerate() {
        if let Err(e) = host.apply_change(srv, *kind, &old, names) {
            tracing::warn!(
                "Failed applying new configuration. Possibly related to new {} setting. Restoring previous settings.",
                names[0]
            );
            let new = std::mem::replace(&mut srv.config, old);
            for (k, n) in &kinds[..=i] {
                if let Err(e) = host.apply_change(srv, *k, &new, n) {
                    tracing::warn!("Restoring the previous {} setting: {e}", n[0]);
                }
            }
            return Err((names[0], e));
        }
    }
    Ok(())
}

fn config_resetstat(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    ctx.srv.stats.reset();
    crate::store::lazyfree::reset_stats();
    ctx.srv.local.rejected_connections.set(0);
    ctx.srv.local.total_connections.set(0);
    ctx.srv.shared.net_input_bytes.store(0, Ordering::Relaxed);
    ctx.srv.shared.net_output_bytes.store(0, Ordering::Relaxed);
    ctx.srv.shared.reads_processed.store(0, Ordering::Relaxed);
    ctx.srv.shared.writes_processed.store(0, Ordering::Relaxed);
    ctx.srv.local.io_threaded_reads.set(0);
    ctx.srv.local.io_threaded_writes.set(0);
    for db in ctx.srv.dbs.iter_mut() {
        db.expired_total = 0;
    }
    Ok(Frame::ok())
}

fn config_rewrite(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let Some(path) = ctx.srv.config.config_file.clone() else {
        return Err(CmdError::err(
            "ERR The server is running without a config file",
        ));
    };
    // Redis's rewriteConfigUserOption: the users as they are now, unless an aclfile has them.
    let cat = super::registry::catalog();
    let users: Vec<String> = ctx
        .srv
        .config
        .users
        .iter()
        .map(|u| String::from_utf8_lossy(&u.line(cat)).into_owned())
        .collect();
    crate::config::file::rewrite(&path, &ctx.srv.config, &users)
        .map_err(|e| CmdError::erf(format!("Rewriting config file: {e}")))?;
    Ok(Frame::ok())
}

// ---- COMMAND ---------------------------------------------------------------------------------

fn command_entry(id: usize) -> Frame {
    let t = &crate::cmd::registry::table();
    let e = &t.entries[id];
    let spec = e.spec;
    // Redis's populateCommandLegacyRangeSpec: a declared spec other than index + range (or
    // one marked incomplete) makes the keys movable.
    let movable = e.key_specs.is_some_and(|docs| {
        docs.iter().any(|d| {
            d.keynum.is_some()
                || d.keyword.is_some()
                || d.begin_index == super::spec::SPEC_UNKNOWN
                || d.flags.contains(&"incomplete")
        })
    });
    let flag_frames = flags::NAMES
        .iter()
        .filter(|(f, _)| spec.has(*f) || (*f == MOVABLE_KEYS && movable))
        .map(|(_, n)| Frame::simple(n))
        .collect();
    // Declared and implied categories, in the order of Redis's ACLCommandCategories table.
    let cats: Vec<Frame> = crate::config::users::CATEGORIES
        .iter()
        .enumerate()
        .filter(|(i, _)| e.categories & (1 << i) != 0)
        .map(|(_, c)| Frame::Simple(Bytes::from(format!("@{c}"))))
        .collect();
    let key_specs = if let Some(docs) = e.key_specs {
        docs.iter().map(key_spec_doc).collect()
    } else if spec.keys.first > 0 {
        let k = spec.keys;
        vec![Frame::Map(vec![
            (Frame::bulk_static("flags"), Frame::Set(vec![])),
            (
                Frame::bulk_static("begin_search"),
                Frame::Map(vec![
                    (Frame::bulk_static("type"), Frame::bulk_static("index")),
                    (
                        Frame::bulk_static("spec"),
                        Frame::Map(vec![(
                            Frame::bulk_static("index"),
                            Frame::Integer(k.first as i64),
                        )]),
                    ),
                ]),
            ),
            (
                Frame::bulk_static("find_keys"),
                Frame::Map(vec![
                    (Frame::bulk_static("type"), Frame::bulk_static("range")),
                    (
                        Frame::bulk_static("spec"),
                        Frame::Map(vec![
                            (
                                Frame::bulk_static("lastkey"),
                                Frame::Integer(if k.last < 0 {
                                    k.last as i64
                                } else {
                                    (k.last - k.first) as i64
                                }),
                            ),
                            (Frame::bulk_static("keystep"), Frame::Integer(k.step as i64)),
                            (Frame::bulk_static("limit"), Frame::Integer(0)),
                        ]),
                    ),
                ]),
            ),
        ])]
    } else {
        vec![]
    };
    let subs: Vec<Frame> = {
        let mut ids: Vec<usize> = e.subs.values().copied().collect();
        ids.sort();
        ids.into_iter().map(command_entry).collect()
    };
    Frame::Array(vec![
        Frame::Bulk(Bytes::from(e.full_name.clone())),
        Frame::Integer(spec.arity as i64),
        Frame::Set(flag_frames),
        Frame::Integer(spec.keys.first as i64),
        Frame::Integer(spec.keys.last as i64),
        Frame::Integer(spec.keys.step as i64),
        Frame::Set(cats),
        // Tips and key specs are sets in RESP3, as is an empty subcommand list (Redis's
        // addReplyCommandTips / KeySpecs / SubCommands).
        Frame::Set(e.tips.iter().map(|t| Frame::bulk_static(t)).collect()),
        Frame::Set(key_specs),
        if subs.is_empty() {
            Frame::Set(subs)
        } else {
            Frame::Array(subs)
        },
    ])
}

/// A declared key specification in Redis's addReplyCommandKeySpecs layout.
fn key_spec_doc(d: &super::spec::KeySpecDoc) -> Frame {
    let map = |pairs: Vec<(&'static str, Frame)>| {
        Frame::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (Frame::bulk_static(k), v))
                .collect(),
        )
    };
    let mut fields = Vec::new();
    if let Some(n) = d.notes {
        fields.push(("notes", Frame::bulk_static(n)));
    }
    fields.push((
        "flags",
        Frame::Set(d.flags.iter().map(|f| Frame::simple(f)).collect()),
    ));
    let unknown = || {
        map(vec![
            ("type", Frame::bulk_static("unknown")),
            ("spec", map(vec![])),
        ])
    };
    let (begin, find) = if d.begin_index == super::spec::SPEC_UNKNOWN {
        (unknown(), unknown())
    } else {
        let begin = match d.keyword {
            Some(k) => map(vec![
                ("type", Frame::bulk_static("keyword")),
                (
                    "spec",
                    map(vec![
                        ("keyword", Frame::bulk_static(k)),
                        ("startfrom", Frame::Integer(d.begin_index as i64)),
                    ]),
                ),
            ]),
            None => map(vec![
                ("type", Frame::bulk_static("index")),
                (
                    "spec",
                    map(vec![("index", Frame::Integer(d.begin_index as i64))]),
                ),
            ]),
        };
        let find = if let Some((keynumidx, firstkey, keystep)) = d.keynum {
            map(vec![
                ("type", Frame::bulk_static("keynum")),
                (
                    "spec",
                    map(vec![
                        ("keynumidx", Frame::Integer(keynumidx as i64)),
                        ("firstkey", Frame::Integer(firstkey as i64)),
                        ("keystep", Frame::Integer(keystep as i64)),
                    ]),
                ),
            ])
        } else {
            map(vec![
                ("type", Frame::bulk_static("range")),
                (
                    "spec",
                    map(vec![
                        ("lastkey", Frame::Integer(d.lastkey as i64)),
                        ("keystep", Frame::Integer(d.keystep as i64)),
                        ("limit", Frame::Integer(d.limit as i64)),
                    ]),
                ),
            ])
        };
        (begin, find)
    };
    fields.push(("begin_search", begin));
    fields.push(("find_keys", find));
    map(fields)
}

fn command_all(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 1 {
        return Err(CmdError::UnknownSubcommand(argv[1].to_vec(), "COMMAND"));
    }
    let ids: Vec<usize> = crate::cmd::registry::table()
        .top_level()
        .map(|(id, _)| id)
        .collect();
    Ok(Frame::Array(ids.into_iter().map(command_entry).collect()))
}

fn command_count(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Integer(
        crate::cmd::registry::table().top_level().count() as i64,
    ))
}

/// `get` or `client|setname`.
pub(super) fn lookup_full(name: &[u8]) -> Option<usize> {
    let lower = name.to_ascii_lowercase();
    match lower.iter().position(|&c| c == b'|') {
        Some(p) => crate::cmd::registry::table()
            .lookup(&lower[..p])
            .and_then(|id| crate::cmd::registry::table().lookup_sub(id, &lower[p + 1..])),
        None => crate::cmd::registry::table().lookup(&lower),
    }
}

fn command_info(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() == 2 {
        return command_all(ctx, &argv[..1]);
    }
    Ok(Frame::Array(
        argv[2..]
            .iter()
            .map(|n| lookup_full(n).map_or(Frame::Null, command_entry))
            .collect(),
    ))
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT cat | PATTERN pattern]: every command and, after
/// each, its subcommands (`parent|sub`), as Redis 7.0 lists them.
fn command_list(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    enum Filter<'a> {
        All,
        // No module is loaded, so no command belongs to one.
        Module,
        // An unknown category lists nothing, as in Redis.
        AclCat(u32),
        Pattern(&'a [u8]),
    }
    let filter = match argv.len() {
        2 => Filter::All,
        5 if is(&argv[2], "filterby") => match &argv[3] {
            t if is(t, "module") => Filter::Module,
            t if is(t, "aclcat") => {
                Filter::AclCat(crate::config::users::category_bit(&argv[4]).unwrap_or(0))
            }
            t if is(t, "pattern") => Filter::Pattern(&argv[4]),
            _ => return Err(CmdError::Syntax),
        },
        _ => return Err(CmdError::Syntax),
    };
    let table = crate::cmd::registry::table();
    let mut names = Vec::new();
    for (id, e) in table.top_level() {
        let subs = table.entries.iter().filter(|s| s.parent == Some(id));
        for entry in std::iter::once(e).chain(subs) {
            let keep = match filter {
                Filter::All => true,
                Filter::Module => false,
                Filter::AclCat(bit) => entry.categories & bit != 0,
                Filter::Pattern(p) => glob_match(p, entry.full_name.as_bytes(), true),
            };
            if keep {
                names.push(Frame::Bulk(Bytes::from(entry.full_name.clone())));
            }
        }
    }
    Ok(Frame::Array(names))
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS <full command>: its key arguments as the key
/// specifications find them (cmd/keyspec.rs), with Redis 7.0's refusals.
fn command_getkeys(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let with_flags = is(&argv[1], "getkeysandflags");
    let cmd = &argv[2..];
    let table = crate::cmd::registry::table();
    let mut id = table.lookup(&cmd[0]);
    if let Some(parent) = id.filter(|&p| !table.entries[p].spec.subcommands.is_empty()) {
        id = cmd.get(1).and_then(|sub| table.lookup_sub(parent, sub));
    }
    let Some(id) = id else {
        return Err(CmdError::err("ERR Invalid command specified"));
    };
    let entry = &table.entries[id];
    if !super::keyspec::has_keys(entry) {
        return Err(CmdError::err("ERR The command has no key arguments"));
    }
    if !entry.spec.arity_ok(cmd.len()) {
        return Err(CmdError::err(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    let keys = super::keyspec::key_refs(entry, cmd);
    if keys.iter().next().is_none() {
        if entry.spec.has(flags::NO_MANDATORY_KEYS) {
            return Ok(Frame::Array(Vec::new()));
        }
        return Err(CmdError::err("ERR Invalid arguments specified for command"));
    }
    Ok(Frame::Array(
        keys.iter()
            .map(|k| {
                let key = Frame::Bulk(cmd[k.pos].clone());
                if !with_flags {
                    return key;
                }
                let flags = k.flags.iter().map(|f| Frame::simple(f)).collect();
                Frame::Array(vec![key, Frame::Set(flags)])
            })
            .collect(),
    ))
}

fn command_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let lines = [
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all Redis commands.",
        "COUNT",
        "    Return the total number of commands in this Redis server.",
        "LIST",
        "    Return a list of all commands in this Redis server.",
        "INFO [<command-name> ...]",
        "    Return details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "GETKEYS <full-command>",
        "    Return the keys from a full Redis command.",
        "GETKEYSANDFLAGS <full-command>",
        "    Return the keys and the access flags from a full Redis command.",
        "HELP",
        "    Prints this help.",
    ];
    Ok(Frame::help(&lines))
}

// ---- INFO ------------------------------------------------------------------------------------

const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];
const ALL_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
    "locks",
];

fn info(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut wanted: Vec<&str> = Vec::new();
    if argv.len() == 1 {
        wanted.extend(DEFAULT_SECTIONS);
    }
    for a in &argv[1..] {
        let s = String::from_utf8_lossy(a).to_ascii_lowercase();
        match s.as_str() {
            "default" => wanted.extend(DEFAULT_SECTIONS),
            "all" | "everything" => wanted.extend(ALL_SECTIONS),
            other => {
                if let Some(sec) = ALL_SECTIONS.iter().find(|x| **x == other) {
                    wanted.push(sec);
                }
            }
        }
    }
    let mut out = String::with_capacity(4096);
    let mut first = true;
    for sec in ALL_SECTIONS {
        if !wanted.contains(sec) {
            continue;
        }
        if !first {
            out.push_str("\r\n");
        }
        first = false;
        write_section(ctx.srv, &*ctx.host, ctx.client.resp, sec, &mut out);
    }
    Ok(Frame::Verbatim(Bytes::from(out)))
}

/// `sysname release machine` from uname(2), as Redis's INFO `os` (dashboards group by kernel).
fn os_name() -> String {
    // SAFETY: utsname is plain C data; zeroed is a valid value for uname to fill.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return format!("{} {}", std::env::consts::OS, std::env::consts::ARCH);
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!(
        "{} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.machine)
    )
}

fn cpu_times(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage fills the struct we pass; zeroed is a valid initial value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF or RUSAGE_THREAD with a valid pointer.
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_stime), t(ru.ru_utime))
}

/// MemTotal from /proc/meminfo (0 where unavailable), as Redis's total_system_memory.
fn total_system_memory() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<usize>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

fn human(bytes: usize) -> String {
    let b = bytes as f64;
    if b < 1024.0 {
        format!("{bytes}B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.2}K", b / 1024.0)
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}M", b / (1024.0 * 1024.0))
    } else {
        format!("{:.2}G", b / (1024.0 * 1024.0 * 1024.0))
    }
}

fn write_section(srv: &mut State, host: &dyn Host, _resp: u8, sec: &str, out: &mut String) {
    let shared = &srv.shared;
    match sec {
        "server" => {
            let uptime = srv.started.elapsed().as_secs();
            let port = srv.config.port;
            let _ = write!(
                out,
                "# Server\r\nredis_version:{REDIS_VERSION}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:standalone\r\nos:{}\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\natomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\nprocess_id:{}\r\nprocess_supervised:{}\r\nrun_id:{}\r\ntcp_port:{port}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nlru_clock:{}\r\nexecutable:{}\r\nconfig_file:{}\r\nio_threads_active:{}\r\ndeadbolt_version:{}\r\n",
                os_name(),
                std::process::id(),
                crate::supervise::info_name(&srv.config),
                srv.run_id,
                unix_us(),
                uptime / 86400,
                srv.config.hz,
                srv.config.hz,
                (unix_us() / 1_000_000) & ((1 << 24) - 1),
                std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
                srv.config.config_file.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
                u8::from(srv.local.io_threads_active.get()),
                env!("CARGO_PKG_VERSION"),
            );
        }
        "clients" => {
            let _ = write!(
                out,
                "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nclient_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\nblocked_clients:{}\r\ntracking_clients:{}\r\nclients_in_timeout_table:{}\r\n",
                // Redis does not count its replicas here.
                srv.local.connected_clients.get()
                    .saturating_sub(srv.redis_master.replicas.len() as _),
                srv.config.maxclients,
                srv.waiters.len(),
                srv.tracking.clients,
                srv.waiters.with_timeout(),
            );
        }
        "memory" => {
            let used = crate::alloc::used_memory();
            let peak = crate::alloc::peak_memory();
            let rss = crate::alloc::rss_bytes();
            let total = total_system_memory();
            let max = srv.config.maxmemory;
            let (lua, scripts) = crate::script::memory_and_scripts(srv);
            // Redis's split (object.c getMemoryOverheadData), the one MEMORY STATS shows:
            // start-up memory, client buffers, the AOF buffer, script engines and the
            // keyspace's own structures are overhead; the rest is data.
            let o = super::support::overhead(srv, host);
            let (startup, clients, aof_buffer, active) =
                (o.startup, o.clients, o.aof_buffer, o.committed);
            let overhead = o.total();
            let (vm_functions, functions, libraries) = crate::script::functions::stats(srv);
            let fn_overhead = o.functions;
            let vm_total = lua + vm_functions;
            let dataset = used.saturating_sub(overhead);
            let net_used = used.saturating_sub(startup);
            let (lazy_pending, lazy_freed) = crate::store::lazyfree::counts();
            let ratio = |a: usize, b: usize| if b > 0 { a as f64 / b as f64 } else { 0.0 };
            let _ = write!(
                out,
                "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_peak_perc:{:.2}%\r\nused_memory_overhead:{overhead}\r\nused_memory_startup:{startup}\r\nused_memory_dataset:{dataset}\r\nused_memory_dataset_perc:{:.2}%\r\nallocator_allocated:{used}\r\nallocator_active:{active}\r\nallocator_resident:{active}\r\ntotal_system_memory:{total}\r\ntotal_system_memory_human:{}\r\nused_memory_lua:{lua}\r\nused_memory_vm_eval:{lua}\r\nused_memory_lua_human:{}\r\nused_memory_scripts_eval:0\r\nnumber_of_cached_scripts:{scripts}\r\nnumber_of_functions:{functions}\r\nnumber_of_libraries:{libraries}\r\nused_memory_vm_functions:{vm_functions}\r\nused_memory_vm_total:{vm_total}\r\nused_memory_vm_total_human:{}\r\nused_memory_functions:{fn_overhead}\r\nused_memory_scripts:{fn_overhead}\r\nused_memory_scripts_human:{}\r\nmaxmemory:{max}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\nallocator_frag_ratio:{:.2}\r\nallocator_frag_bytes:{}\r\nallocator_rss_ratio:1.00\r\nallocator_rss_bytes:0\r\nrss_overhead_ratio:{:.2}\r\nrss_overhead_bytes:{}\r\nmem_fragmentation_ratio:{:.2}\r\nmem_fragmentation_bytes:{}\r\nmem_not_counted_for_evict:0\r\nmem_replication_backlog:0\r\nmem_total_replication_buffers:0\r\nmem_clients_slaves:0\r\nmem_clients_normal:{clients}\r\nmem_cluster_links:0\r\nmem_aof_buffer:{aof_buffer}\r\nmem_allocator:{}\r\nactive_defrag_running:0\r\nlazyfree_pending_objects:{lazy_pending}\r\nlazyfreed_objects:{lazy_freed}\r\n",
                human(used),
                human(rss),
                human(peak),
                if peak > 0 { used as f64 * 100.0 / peak as f64 } else { 0.0 },
                if net_used > 0 { dataset as f64 * 100.0 / net_used as f64 } else { 0.0 },
                human(total),
                human(lua),
                human(vm_total),
                human(fn_overhead),
                human(max as usize),
                srv.config.maxmemory_policy,
                ratio(active, used),
                active - used,
                ratio(rss, active),
                rss as i64 - active as i64,
                ratio(rss, used),
                rss as i64 - used as i64,
                crate::alloc::allocator_name(),
            );
        }
        "persistence" => {
            let aof = host.aof();
            let rdb = host.rdb();
            let status = |ok: bool| if ok { "ok" } else { "err" };
            let _ = write!(
                out,
                "# Persistence\r\nloading:{}\r\nasync_loading:0\r\ncurrent_cow_peak:0\r\ncurrent_cow_size:0\r\ncurrent_cow_size_age:0\r\ncurrent_fork_perc:0.00\r\ncurrent_save_keys_processed:0\r\ncurrent_save_keys_total:0\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{}\r\nrdb_saves:{}\r\nrdb_last_cow_size:0\r\nrdb_last_load_keys_expired:{}\r\nrdb_last_load_keys_loaded:{}\r\naof_enabled:{}\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:0\r\naof_last_rewrite_time_sec:{}\r\naof_current_rewrite_time_sec:{}\r\naof_last_bgrewrite_status:{}\r\naof_rewrites:{}\r\naof_rewrites_consecutive_failures:{}\r\naof_last_write_status:{}\r\naof_last_cow_size:0\r\nmodule_fork_in_progress:0\r\nmodule_fork_last_cow_size:0\r\n",
                host.loading() as u8,
                srv.changes_since_save,
                rdb.is_some_and(|r| r.in_progress()) as u8,
                rdb.map_or(srv.stats.start_unix, |r| r.last_save_unix),
                status(rdb.is_none_or(|r| r.last_ok)),
                rdb.map_or(-1, |r| r.last_secs),
                rdb.and_then(|r| r.writing.as_ref())
                    .map_or(-1, |w| w.1.elapsed().as_secs() as i64),
                rdb.map_or(0, |r| r.saves),
                rdb.map_or(0, |r| r.loaded.1),
                rdb.map_or(0, |r| r.loaded.0),
                aof.is_some() as u8,
                aof.is_some_and(|a| a.rewrite_in_progress()) as u8,
                aof.map_or(-1, |a| a.last_rewrite_secs),
                aof.and_then(|a| a.rewrite_started).map_or(-1, |t| t.elapsed().as_secs() as i64),
                status(aof.is_none_or(|a| a.last_rewrite_ok)),
                aof.map_or(0, |a| a.rewrites),
                aof.map_or(0, |a| a.rewrite_failures_in_a_row),
                status(aof.is_none_or(|a| a.write_ok())),
            );
            if let Some(a) = aof {
                let _ = write!(
                    out,
                    "aof_current_size:{}\r\naof_base_size:{}\r\naof_pending_rewrite:0\r\naof_buffer_length:{}\r\naof_pending_bio_fsync:0\r\naof_delayed_fsync:0\r\n",
                    a.current_size,
                    a.base_size,
                    a.pending.len()
                );
            }
            if let Some((start, loaded, total)) = host.loading_progress() {
                // Redis's figures (server.c genRedisInfoString), the ETA from the rate so far.
                let perc = loaded as f64 * 100.0 / (total + 1) as f64;
                let elapsed = (crate::clock::unix_ms() / 1000).saturating_sub(start);
                let eta = if elapsed == 0 {
                    1
                } else {
                    elapsed * total.saturating_sub(loaded) / (loaded + 1)
                };
                let _ = write!(
                    out,
                    "loading_start_time:{start}\r\nloading_total_bytes:{total}\r\nloading_rdb_used_mem:0\r\nloading_loaded_bytes:{loaded}\r\nloading_loaded_perc:{perc:.2}\r\nloading_eta_seconds:{eta}\r\n"
                );
            }
            if let Some(until) = srv.writes_refused_until {
                let left = until
                    .saturating_duration_since(std::time::Instant::now())
                    .as_millis();
                let _ = write!(out, "lock_restart_delay_remaining_ms:{left}\r\n");
            }
        }
        "stats" => {
            let expired: u64 = srv.dbs.iter().map(|d| d.expired_total).sum();
            let st = &srv.stats;
            let (in_kbps, out_kbps) = st.instantaneous_kbps();
            let reads = srv.shared.reads_processed.load(Ordering::Relaxed);
            let writes = srv.shared.writes_processed.load(Ordering::Relaxed);
            let migrate_sockets =
                super::migrate_conn::cached_sockets(crate::clock::unix_ms() / 1000);
            let m = &srv.redis_master;
            let (sync_full, sync_ok, sync_err) =
                (m.sync_full, m.sync_partial_ok, m.sync_partial_err);
            let _ = write!(
                out,
                "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\ninstantaneous_input_kbps:{in_kbps:.2}\r\ninstantaneous_output_kbps:{out_kbps:.2}\r\nrejected_connections:{}\r\nsync_full:{sync_full}\r\nsync_partial_ok:{sync_ok}\r\nsync_partial_err:{sync_err}\r\nexpired_keys:{expired}\r\nexpired_stale_perc:0.00\r\nexpired_time_cap_reached_count:0\r\nexpire_cycle_cpu_milliseconds:0\r\nevicted_keys:0\r\nevicted_clients:0\r\ntotal_eviction_exceeded_time:0\r\ncurrent_eviction_exceeded_time:0\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\npubsubshard_channels:{}\r\nlatest_fork_usec:0\r\ntotal_forks:0\r\nmigrate_cached_sockets:{migrate_sockets}\r\nslave_expires_tracked_keys:0\r\nactive_defrag_hits:0\r\nactive_defrag_misses:0\r\nactive_defrag_key_hits:0\r\nactive_defrag_key_misses:0\r\ntotal_active_defrag_time:0\r\ncurrent_active_defrag_time:0\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\nunexpected_error_replies:0\r\ntotal_error_replies:{}\r\ndump_payload_sanitizations:0\r\ntotal_reads_processed:{reads}\r\ntotal_writes_processed:{writes}\r\nio_threaded_reads_processed:{}\r\nio_threaded_writes_processed:{}\r\nreply_buffer_shrinks:0\r\nreply_buffer_expands:0\r\n",
                srv.local.total_connections.get(),
                st.total_commands,
                st.instantaneous_ops(),
                shared.net_input_bytes.load(Ordering::Relaxed),
                shared.net_output_bytes.load(Ordering::Relaxed),
                srv.local.rejected_connections.get(),
                st.keyspace_hits,
                st.keyspace_misses,
                srv.pubsub.len(Kind::Channel),
                srv.pubsub.len(Kind::Pattern),
                srv.pubsub.len(Kind::Shard),
                srv.tracking.total_keys(),
                srv.tracking.total_items(),
                srv.tracking.total_prefixes(),
                st.total_error_replies,
                srv.local.io_threaded_reads.get(),
                srv.local.io_threaded_writes.get(),
            );
        }
        "replication" if super::support::info_redis_replica(srv, out) => {}
        "replication" => match host.cluster_own() {
            None => super::support::info_lone_master(srv, out),
            view => super::support::info_section(view, &srv.repl_id, out),
        },
        "cpu" => {
            let (sys, user) = cpu_times(libc::RUSAGE_SELF);
            // INFO runs on the executor thread, which is Redis's main thread here.
            let (main_sys, main_user) = cpu_times(libc::RUSAGE_THREAD);
            let _ = write!(out, "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\nused_cpu_sys_main_thread:{main_sys:.6}\r\nused_cpu_user_main_thread:{main_user:.6}\r\n");
        }
        "modules" => out.push_str("# Modules\r\n"),
        "commandstats" => {
            out.push_str("# Commandstats\r\n");
            for (id, e) in crate::cmd::registry::table().entries.iter().enumerate() {
                let s = &srv.stats.commands[id];
                if s.calls == 0 && s.rejected_calls == 0 && s.failed_calls == 0 {
                    continue;
                }
                let usec = s.nsec / 1000;
                let per = if s.calls > 0 {
                    s.nsec as f64 / 1000.0 / s.calls as f64
                } else {
                    0.0
                };
                let _ = write!(
                    out,
                    "cmdstat_{}:calls={},usec={},usec_per_call={:.2},rejected_calls={},failed_calls={}\r\n",
                    e.full_name, s.calls, usec, per, s.rejected_calls, s.failed_calls
                );
            }
        }
        "errorstats" => {
            out.push_str("# Errorstats\r\n");
            for (code, n) in &srv.stats.errors {
                let _ = write!(out, "errorstat_{code}:count={n}\r\n");
            }
        }
        "cluster" => {
            let on = super::slots::enabled(srv, host);
            let _ = write!(out, "# Cluster\r\ncluster_enabled:{}\r\n", u8::from(on));
        }
        "keyspace" => {
            out.push_str("# Keyspace\r\n");
            for (i, db) in srv.dbs.iter().enumerate() {
                if db.is_empty() {
                    continue;
                }
                let _ = write!(
                    out,
                    "db{i}:keys={},expires={},avg_ttl={}\r\n",
                    db.len(),
                    db.expires_count(),
                    db.avg_ttl
                );
            }
        }
        "locks" => srv.locks.info(out),
        "latencystats" => {
            out.push_str("# Latencystats\r\n");
            if !srv.stats.latency_tracking {
                return;
            }
            let percentiles: Vec<f64> = srv
                .config
                .compat_value("latency-tracking-info-percentiles")
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            for (id, e) in crate::cmd::registry::table().entries.iter().enumerate() {
                let Some(h) = srv.stats.commands[id]
                    .latency
                    .as_ref()
                    .filter(|h| h.total > 0)
                else {
                    continue;
                };
                let _ = write!(out, "latency_percentiles_usec_{}:", e.full_name);
                for (i, p) in percentiles.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "," };
                    let _ = write!(
                        out,
                        "{sep}{}={:.3}",
                        crate::machine::latency::percentile_label(*p),
                        h.percentile(*p) as f64 / 1000.0
                    );
                }
                out.push_str("\r\n");
            }
        }
        _ => {}
    }
}

/// Redis 7.0's command tips of the family (its commands.c).
pub static TIPS: &[(&str, &[&str])] = &[
    (
        "info",
        &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
    ),
    ("time", &["nondeterministic_output"]),
    (
        "wait",
        &["request_policy:all_shards", "response_policy:agg_min"],
    ),
    ("lastsave", &["nondeterministic_output"]),
    (
        "config|set",
        &["request_policy:all_nodes", "response_policy:all_succeeded"],
    ),
    ("command", &["nondeterministic_output_order"]),
    ("command|info", &["nondeterministic_output_order"]),
    ("command|docs", &["nondeterministic_output_order"]),
    ("command|list", &["nondeterministic_output_order"]),
];
