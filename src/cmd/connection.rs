//! Connection commands: PING, ECHO, QUIT, RESET, HELLO, AUTH, SELECT, CLIENT.

use super::args::{int_arg, is};
use super::spec::Ctx;
use super::spec::{flags::*, CommandSpec, NO_KEYS};
use super::support::end_pause;
use crate::error::{CmdError, CmdResult};
use crate::machine::client::Client;
use crate::machine::REDIS_VERSION;
use crate::protocol::Frame;
use bytes::Bytes;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, NO_KEYS, &["connection"], handler)
}

const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: super::spec::Handler,
) -> CommandSpec {
    spec(name, arity, flags, handler)
}

pub static COMMANDS: &[CommandSpec] = &[
    spec("ping", -1, FAST | PUBSUB_OK, ping),
    spec("echo", 2, LOADING | STALE | FAST, echo),
    spec(
        "quit",
        -1,
        NOSCRIPT | NO_AUTH | ALLOW_BUSY | TX_CONTROL | PUBSUB_OK | LOADING | STALE | FAST,
        quit,
    ),
    spec(
        "reset",
        1,
        NOSCRIPT | NO_AUTH | ALLOW_BUSY | TX_CONTROL | PUBSUB_OK | LOADING | STALE | FAST,
        reset,
    ),
    spec(
        "hello",
        -1,
        NOSCRIPT | NO_AUTH | ALLOW_BUSY | LOADING | STALE | FAST,
        hello,
    ),
    spec(
        "auth",
        -2,
        NOSCRIPT | NO_AUTH | ALLOW_BUSY | LOADING | STALE | FAST,
        auth,
    ),
    spec("select", 2, LOADING | STALE | FAST, select),
    CommandSpec {
        name: "client",
        arity: -2,
        flags: 0,
        keys: NO_KEYS,
        // Redis files only the subcommands under @connection.
        acl: &[],
        handler: client_help,
        subcommands: &[
            sub("help", 2, LOADING | STALE, client_help),
            sub("id", 2, NOSCRIPT | LOADING | STALE, client_id),
            sub("getname", 2, NOSCRIPT | LOADING | STALE, client_getname),
            sub("setname", 3, NOSCRIPT | LOADING | STALE, client_setname),
            sub("setinfo", 4, NOSCRIPT | LOADING | STALE, client_setinfo),
            sub("info", 2, NOSCRIPT | LOADING | STALE, client_info),
            sub("list", -2, ADMIN | NOSCRIPT | LOADING | STALE, client_list),
            sub("kill", -3, ADMIN | NOSCRIPT | LOADING | STALE, client_kill),
            sub(
                "pause",
                -3,
                ADMIN | NOSCRIPT | LOADING | STALE,
                client_pause,
            ),
            sub(
                "unpause",
                2,
                ADMIN | NOSCRIPT | LOADING | STALE,
                client_unpause,
            ),
            sub(
                "no-evict",
                3,
                ADMIN | NOSCRIPT | LOADING | STALE,
                client_no_evict,
            ),
            sub("reply", 3, NOSCRIPT | LOADING | STALE, client_reply),
            sub(
                "unblock",
                -3,
                ADMIN | NOSCRIPT | LOADING | STALE,
                client_unblock,
            ),
            sub(
                "tracking",
                -3,
                NOSCRIPT | LOADING | STALE,
                super::tracking::client_tracking,
            ),
            sub(
                "caching",
                3,
                NOSCRIPT | LOADING | STALE,
                super::tracking::client_caching,
            ),
            sub(
                "getredir",
                2,
                NOSCRIPT | LOADING | STALE,
                super::tracking::client_getredir,
            ),
            sub(
                "trackinginfo",
                2,
                NOSCRIPT | LOADING | STALE,
                super::tracking::client_trackinginfo,
            ),
        ],
    },
];

fn ping(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() <= 2 && ctx.client.resp == 2 && ctx.client.pubsub.subscribed() {
        // In RESP2 a subscribed client reads everything as pushes, so PING answers like one.
        let arg = argv.get(1).cloned().unwrap_or_default();
        return Ok(Frame::Array(vec![
            Frame::bulk_static("pong"),
            Frame::Bulk(arg),
        ]));
    }
    match argv.len() {
        1 => Ok(Frame::simple("PONG")),
        2 => Ok(Frame::Bulk(argv[1].clone())),
        _ => Err(CmdError::WrongArity("ping".into())),
    }
}

fn echo(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Bulk(argv[1].clone()))
}

fn quit(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    ctx.client.close_after_reply = true;
    Ok(Frame::ok())
}

fn reset(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    super::support::discard_transaction(ctx);
    ctx.srv.unsubscribe_all_silently(ctx.client);
    ctx.srv.disable_tracking(ctx.client);
    let c = &mut *ctx.client;
    c.reply_off = false;
    c.reply_skip = false;
    c.reply_skip_next = false;
    c.cluster_readonly = false;
    c.db = 0;
    c.resp = 2;
    c.shared.resp3.set(false);
    c.name = None;
    c.authenticated = !ctx.srv.config.auth_required();
    c.user = "default".into();
    c.perms = ctx.srv.config.users.perms("default");
    Ok(Frame::simple("RESET"))
}

/// Checks a password for `user` (the default user when None) against the configured users and
/// logs the client in. Errors are Redis's texts; nothing here logs the password.
pub fn check_auth(ctx: &mut Ctx, cmd: &Bytes, user: Option<&[u8]>, pass: &[u8]) -> CmdResult<()> {
    let users = &ctx.srv.config.users;
    if user.is_none() && users.default_user().nopass {
        return Err(CmdError::err(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        ));
    }
    let name = user.unwrap_or(b"default");
    match users.get(name) {
        Some(u) if u.enabled && u.password_ok(pass) => {
            ctx.client.authenticated = true;
            ctx.client.user = u.name.clone();
            ctx.client.perms = users.perms(&u.name);
            Ok(())
        }
        _ => {
            // Redis logs the attempt with the command as typed and the user tried.
            let context = if ctx.client.multi.is_some() || ctx.client.in_exec {
                "multi"
            } else {
                "toplevel"
            };
            let object = cmd.clone();
            super::support::add_log_entry(ctx.srv, ctx.client, "auth", context, object, Some(name));
            Err(CmdError::err(
                "WRONGPASS invalid username-password pair or user is disabled.",
            ))
        }
    }
}

fn auth(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    match argv.len() {
        2 => check_auth(ctx, &argv[0], None, &argv[1])?,
        3 => check_auth(ctx, &argv[0], Some(&argv[1]), &argv[2])?,
        _ => return Err(CmdError::Syntax),
    }
    Ok(Frame::ok())
}

fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

fn hello(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut ver = None;
    if argv.len() >= 2 {
        let v = int_arg(&argv[1])
            .map_err(|_| CmdError::err("ERR Protocol version is not an integer or out of range"))?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::err("NOPROTO unsupported protocol version"));
        }
        ver = Some(v as u8);
    }
    let mut setname = None;
    let mut creds = None;
    let mut i = 2;
    while i < argv.len() {
        let more = argv.len() - i - 1;
        if is(&argv[i], "auth") && more >= 2 {
            creds = Some((&argv[i + 1], &argv[i + 2]));
            i += 3;
        } else if is(&argv[i], "setname") && more >= 1 {
            setname = Some(&argv[i + 1]);
            i += 2;
        } else {
            return Err(CmdError::erf(format!(
                "Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&argv[i])
            )));
        }
    }
    if let Some((user, pass)) = creds {
        check_auth(ctx, &argv[0], Some(user), pass)?;
    }
    if !ctx.client.authenticated && ctx.srv.config.auth_required() {
        return Err(CmdError::err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    if let Some(name) = setname {
        if !valid_name(name) {
            return Err(CmdError::err(
                "ERR Client names cannot contain spaces, newlines or special characters.",
            ));
        }
        ctx.client.name = if name.is_empty() {
            None
        } else {
            Some(crate::store::value::own(name))
        };
    }
    if let Some(v) = ver {
        ctx.client.resp = v;
        ctx.client.shared.resp3.set(v == 3);
    }
    Ok(Frame::Map(vec![
        (Frame::bulk_static("server"), Frame::bulk_static("redis")),
        (
            Frame::bulk_static("version"),
            Frame::bulk_static(REDIS_VERSION),
        ),
        (
            Frame::bulk_static("proto"),
            Frame::Integer(ctx.client.resp as i64),
        ),
        (
            Frame::bulk_static("id"),
            Frame::Integer(ctx.client.id as i64),
        ),
        (Frame::bulk_static("mode"), Frame::bulk_static("standalone")),
        (
            Frame::bulk_static("role"),
            Frame::bulk_static(if ctx.srv.replica.following() {
                "replica"
            } else {
                super::support::hello_role(ctx.host.cluster_own())
            }),
        ),
        (Frame::bulk_static("modules"), Frame::Array(vec![])),
    ]))
}

fn select(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let id = int_arg(&argv[1])?;
    // Redis reads the index as a C int first (getIntFromObjectOrReply).
    if i32::try_from(id).is_err() {
        return Err(CmdError::err(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    if id != 0 {
        super::slots::only_db0(ctx, "SELECT")?;
    }
    if id < 0 || id as usize >= ctx.srv.dbs.len() {
        return Err(CmdError::err("ERR DB index is out of range"));
    }
    ctx.client.db = id as usize;
    Ok(Frame::ok())
}

fn client_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    // Redis 7.0.15's text, in its order.
    let lines = [
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CACHING (YES|NO)",
        "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
        "GETREDIR",
        "    Return the client ID we are redirecting to when tracking is enabled.",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are:",
        "    * ADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made from the specified address",
        "    * LADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made to specified local address",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Kill connections by type.",
        "    * USER <username>",
        "      Kill connections authenticated by <username>.",
        "    * SKIPME (YES|NO)",
        "      Skip killing current connection (default: yes).",
        "LIST [options ...]",
        "    Return information about client connections. Options:",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Return clients of specified type.",
        "UNPAUSE",
        "    Stop the current client pause, resuming traffic.",
        "PAUSE <timeout> [WRITE|ALL]",
        "    Suspend all, or just write, clients for <timeout> milliseconds.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
        "    Unblock the specified blocked client.",
        "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
        "         [OPTIN] [OPTOUT] [NOLOOP]",
        "    Control server assisted client side caching.",
        "TRACKINGINFO",
        "    Report tracking status for the current connection.",
        "NO-EVICT (ON|OFF)",
        "    Protect current client connection from eviction.",
        "HELP",
        "    Prints this help.",
    ];
    Ok(Frame::help(&lines))
}

/// CLIENT REPLY ON|OFF|SKIP: OFF and SKIP answer nothing themselves.
fn client_reply(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let c = &mut *ctx.client;
    if is(&argv[2], "on") {
        c.reply_off = false;
        c.reply_skip = false;
        return Ok(Frame::ok());
    }
    if is(&argv[2], "off") {
        c.reply_off = true;
    } else if is(&argv[2], "skip") {
        if !c.reply_off {
            c.reply_skip_next = true;
        }
    } else {
        return Err(CmdError::Syntax);
    }
    c.skip_reply = true;
    Ok(Frame::ok())
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: the blocked client is answered at the next turn of the
/// loop, as if its timeout had passed (or with `-UNBLOCKED`).
fn client_unblock(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 4 {
        return Err(CmdError::erf(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(&argv[1])
        )));
    }
    let error = match argv.get(3) {
        None => false,
        Some(r) if is(r, "timeout") => false,
        Some(r) if is(r, "error") => true,
        Some(_) => {
            return Err(CmdError::err(
                "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    let id = int_arg(&argv[2])?;
    let done = id > 0 && ctx.srv.waiters.unblock_now(id as u64, error);
    Ok(Frame::Integer(done as i64))
}

fn client_id(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Integer(ctx.client.id as i64))
}

fn client_getname(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::opt_bulk(ctx.client.name.clone()))
}

fn client_setname(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if !valid_name(&argv[2]) {
        return Err(CmdError::err(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    ctx.client.name = if argv[2].is_empty() {
        None
    } else {
        Some(crate::store::value::own(&argv[2]))
    };
    Ok(Frame::ok())
}

/// Redis 7.2's CLIENT SETINFO, which current client libraries send on connect.
fn client_setinfo(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let attr = &argv[2];
    let lib_name = is(attr, "lib-name");
    if !lib_name && !is(attr, "lib-ver") {
        return Err(CmdError::erf(format!(
            "Unrecognized option '{}'",
            String::from_utf8_lossy(attr)
        )));
    }
    if !valid_name(&argv[3]) {
        let which = if lib_name { "lib-name" } else { "lib-ver" };
        return Err(CmdError::erf(format!(
            "{which} cannot contain spaces, newlines or special characters."
        )));
    }
    let v = if argv[3].is_empty() {
        None
    } else {
        Some(crate::store::value::own(&argv[3]))
    };
    if lib_name {
        ctx.client.lib_name = v;
    } else {
        ctx.client.lib_ver = v;
    }
    Ok(Frame::ok())
}

fn client_info(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut s = String::new();
    caller_line(ctx.client, argv, &mut s);
    Ok(Frame::Verbatim(Bytes::from(s)))
}

/// The caller's CLIENT LIST line. Its request is in the read buffer while it runs: `qbuf` is
/// that request's length as sent in the multibulk form (Redis's query buffer still holds it),
/// `argv-mem` its arguments' bytes (Redis's argv_len_sum), both counted in `tot-mem`. Other
/// clients hold no read buffer between requests, so theirs are 0; `qbuf-free` is 0 because
/// the read buffer is the loop's, not the client's.
fn caller_line(c: &Client, argv: &[Bytes], out: &mut String) {
    let start = out.len();
    c.info_line(out);
    let digits = |n: usize| itoa::Buffer::new().format(n).len();
    let qbuf = 3
        + digits(argv.len())
        + argv
            .iter()
            .map(|a| 5 + digits(a.len()) + a.len())
            .sum::<usize>();
    let argv_mem: usize = argv.iter().map(|a| a.len()).sum();
    let mut line = out[start..].replacen(
        " qbuf=0 qbuf-free=0 argv-mem=0 ",
        &format!(" qbuf={qbuf} qbuf-free=0 argv-mem={argv_mem} "),
        1,
    );
    if let Some(at) = line.find(" tot-mem=") {
        let from = at + " tot-mem=".len();
        let to = line[from..].find(' ').map_or(line.len(), |n| from + n);
        if let Ok(tot) = line[from..to].parse::<usize>() {
            line.replace_range(from..to, itoa::Buffer::new().format(tot + qbuf + argv_mem));
        }
    }
    out.truncate(start);
    out.push_str(&line);
}

fn client_list(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut ids: Option<Vec<u64>> = None;
    // TYPE: only clients of that type (`client_type`).
    let mut pubsub_type: Option<&str> = None;
    let mut i = 2;
    while i < argv.len() {
        if is(&argv[i], "type") && i + 1 < argv.len() {
            let t = &argv[i + 1];
            if !(is(t, "normal")
                || is(t, "master")
                || is(t, "replica")
                || is(t, "slave")
                || is(t, "pubsub"))
            {
                return Err(CmdError::erf(format!(
                    "Unknown client type '{}'",
                    String::from_utf8_lossy(t)
                )));
            }
            pubsub_type = Some(type_name(t));
            i += 2;
        } else if is(&argv[i], "id") && i + 1 < argv.len() {
            let mut v = Vec::new();
            for a in &argv[i + 1..] {
                let id = int_arg(a)
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or(CmdError::err("ERR Invalid client ID"))?;
                v.push(id as u64);
            }
            ids = Some(v);
            i = argv.len();
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let replicas: Vec<u64> = (ctx.srv.redis_master.replicas.iter())
        .map(|r| r.id)
        .collect();
    let mut clients: Vec<&Client> = ctx.srv.clients.values().map(|c| &**c).collect();
    clients.push(ctx.client);
    clients.sort_by_key(|c| c.id);
    let mut s = String::new();
    for c in clients {
        if ids.as_ref().is_some_and(|ids| !ids.contains(&c.id))
            || pubsub_type.is_some_and(|t| t != client_type(&replicas, c))
        {
            continue;
        }
        let from = s.len();
        if c.id == ctx.client.id {
            caller_line(c, argv, &mut s);
        } else {
            c.info_line(&mut s);
        }
        if replicas.contains(&c.id) {
            // Redis's flag for a replica connection.
            if let Some(at) = s[from..].find(" flags=N ") {
                s.replace_range(from + at + 7..from + at + 8, "S");
            }
        }
    }
    Ok(Frame::Verbatim(Bytes::from(s)))
}

fn client_kill(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() == 3 {
        // Old form: CLIENT KILL ip:port.
        let addr = String::from_utf8_lossy(&argv[2]).into_owned();
        if ctx.client.addr.to_string() == addr {
            ctx.client.close_after_reply = true;
            return Ok(Frame::ok());
        }
        let id = ctx
            .srv
            .clients
            .values()
            .find(|c| c.addr.to_string() == addr)
            .map(|c| c.id);
        return match id.and_then(|id| ctx.srv.clients.remove(&id)) {
            Some(c) => {
                ctx.srv.close_client(c);
                Ok(Frame::ok())
            }
            None => Err(CmdError::err("ERR No such client")),
        };
    }
    let mut filter_id = None;
    let mut filter_addr = None;
    let mut filter_laddr = None;
    let mut filter_user = None;
    let mut maxage = None;
    // Some(Some(true)): subscribed clients; Some(Some(false)): the others; Some(None): none
    // (master/replica: there is no replication here).
    let mut filter_type: Option<&str> = None;
    let mut skipme = true;
    let mut i = 2;
    while i < argv.len() {
        if i + 1 >= argv.len() {
            return Err(CmdError::Syntax);
        }
        let (opt, val) = (&argv[i], &argv[i + 1]);
        if is(opt, "id") {
            let id = int_arg(val)
                .ok()
                .filter(|n| *n > 0)
                .ok_or(CmdError::err("ERR client-id should be greater than 0"))?;
            filter_id = Some(id as u64);
        } else if is(opt, "addr") {
            filter_addr = Some(String::from_utf8_lossy(val).into_owned());
        } else if is(opt, "laddr") {
            filter_laddr = Some(String::from_utf8_lossy(val).into_owned());
        } else if is(opt, "user") {
            if ctx.srv.config.users.get(val).is_none() {
                // addReplyErrorFormat's `%s`: up to a NUL, CR and LF as spaces.
                let name = val.split(|&b| b == 0).next().unwrap_or_default();
                let name = String::from_utf8_lossy(name).replace(['\r', '\n'], " ");
                return Err(CmdError::erf(format!("No such user '{name}'")));
            }
            filter_user = Some(String::from_utf8_lossy(val).into_owned());
        } else if is(opt, "type") {
            if !(is(val, "normal")
                || is(val, "master")
                || is(val, "replica")
                || is(val, "slave")
                || is(val, "pubsub"))
            {
                return Err(CmdError::erf(format!(
                    "Unknown client type '{}'",
                    String::from_utf8_lossy(val)
                )));
            }
            filter_type = Some(type_name(val));
        } else if is(opt, "skipme") {
            if is(val, "yes") {
                skipme = true;
            } else if is(val, "no") {
                skipme = false;
            } else {
                return Err(CmdError::Syntax);
            }
        } else if is(opt, "maxage") {
            maxage = Some(int_arg(val)?);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let replicas: Vec<u64> = (ctx.srv.redis_master.replicas.iter())
        .map(|r| r.id)
        .collect();
    let matches = |c: &Client| {
        filter_id.is_none_or(|id| c.id == id)
            && filter_addr
                .as_ref()
                .is_none_or(|a| c.addr.to_string() == *a)
            && filter_laddr
                .as_ref()
                .is_none_or(|a| c.laddr.to_string() == *a)
            && filter_user.as_ref().is_none_or(|u| c.user == *u)
            && maxage.is_none_or(|m| c.created.elapsed().as_secs() as i64 >= m)
            && filter_type.is_none_or(|t| t == client_type(&replicas, c))
    };
    let victims: Vec<u64> = ctx
        .srv
        .clients
        .values()
        .filter(|c| matches(c))
        .map(|c| c.id)
        .collect();
    let mut killed = 0;
    for id in victims {
        if let Some(c) = ctx.srv.clients.remove(&id) {
            ctx.srv.close_client(c);
            killed += 1;
        }
    }
    if !skipme && matches(ctx.client) {
        ctx.client.close_after_reply = true;
        killed += 1;
    }
    Ok(Frame::Integer(killed))
}

/// A TYPE argument already checked as a client type, as `client_type` names it.
fn type_name(t: &[u8]) -> &'static str {
    if is(t, "slave") || is(t, "replica") {
        "replica"
    } else if is(t, "master") {
        "master"
    } else if is(t, "pubsub") {
        "pubsub"
    } else {
        "normal"
    }
}

/// Redis's getClientType: a Redis replica attached with SYNC/PSYNC, a subscriber, or normal.
/// `replicas`: the client ids of the Redis replicas.
fn client_type(replicas: &[u64], c: &Client) -> &'static str {
    if replicas.contains(&c.id) {
        "replica"
    } else if c.pubsub.subscribed() {
        "pubsub"
    } else {
        "normal"
    }
}

fn client_no_evict(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if is(&argv[2], "on") || is(&argv[2], "off") {
        Ok(Frame::ok())
    } else {
        Err(CmdError::Syntax)
    }
}

/// Redis 7.0's command tips of the family (its commands.c).
pub static TIPS: &[(&str, &[&str])] = &[
    (
        "ping",
        &["request_policy:all_shards", "response_policy:all_succeeded"],
    ),
    ("client|info", &["nondeterministic_output"]),
    ("client|list", &["nondeterministic_output"]),
];

pub fn client_pause(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() > 4 {
        return Err(CmdError::erf(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(&argv[1][..argv[1].len().min(128)])
        )));
    }
    // Redis checks the mode before the timeout.
    let all = match argv.len() {
        3 => true,
        _ if is(&argv[3], "all") => true,
        _ if is(&argv[3], "write") => false,
        _ => return Err(CmdError::err("ERR CLIENT PAUSE mode must be WRITE or ALL")),
    };
    let ms = int_arg(&argv[2])
        .map_err(|_| CmdError::err("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(CmdError::err("ERR timeout is negative"));
    }
    let p = &mut ctx.srv.ops.pause;
    // Redis's end time is `timeout + mstime()` for a positive timeout and 0 for 0; past
    // i64 the sum wraps negative. Both lie in the past: such a pause never takes effect
    // (it can only make one in force stricter), so it answers OK and pauses no one.
    let until = match u64::try_from(ms) {
        Ok(ms) if ms > 0 && ms <= i64::MAX as u64 - ctx.now.min(i64::MAX as u64) => ctx.now + ms,
        _ => 0,
    };
    // Like Redis: a new pause never shortens or weakens one in force.
    if p.until_ms != 0 {
        p.all |= all;
        p.until_ms = p.until_ms.max(until);
    } else {
        p.all = all;
        p.until_ms = until;
    }
    if p.until_ms <= ctx.now {
        end_pause(ctx.srv);
    }
    Ok(Frame::ok())
}

pub fn client_unpause(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if ctx.srv.ops.pause.until_ms != 0 {
        end_pause(ctx.srv);
    }
    Ok(Frame::ok())
}
