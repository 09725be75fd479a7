//! The one check pipeline every command goes through (Redis's `processCommand` order):
//! lookup → subcommand → arity → auth → subscribed-context → execute → stats → encode.

use super::keyspec::{has_keys, key_refs, KeyRefs};
use super::spec::Ctx;
use super::spec::{flags, CmdId, CommandSpec};
use super::support::add_log_entry;
use crate::config::users::User;
use crate::error::{CmdError, CmdResult};
use crate::machine::client::Client;
use crate::machine::{Host, State};
use crate::protocol::Frame;
use bytes::{Bytes, BytesMut};
use std::time::Instant;

/// Resolves a command (and its subcommand) and checks arity. Errors are what Redis replies.
pub fn resolve(argv: &[Bytes]) -> Result<CmdId, CmdError> {
    resolve_in(crate::cmd::registry::table(), argv)
}

/// `resolve` against any command table (the busy-script answers hold their own copy).
pub fn resolve_in(table: &super::table::Table, argv: &[Bytes]) -> Result<CmdId, CmdError> {
    resolve_mode(table, argv, false)
}

/// `sentinel`: the server runs in cluster mode, where SENTINEL exists (Redis's
/// CMD_ONLY_SENTINEL commands exist only on a Sentinel).
fn resolve_mode(
    table: &super::table::Table,
    argv: &[Bytes],
    sentinel: bool,
) -> Result<CmdId, CmdError> {
    let name = &argv[0];
    let found = table
        .lookup(name)
        .or_else(|| sentinel.then(|| table.lookup_sentinel(name)).flatten());
    let Some(id) = found else {
        return Err(CmdError::unknown_command(argv));
    };
    let entry = &table.entries[id];
    if entry.spec.subcommands.is_empty() {
        if !entry.spec.arity_ok(argv.len()) {
            return Err(CmdError::WrongArity(entry.full_name.clone()));
        }
        return Ok(id);
    }
    if argv.len() < 2 {
        // A container alone runs itself when its arity allows (bare COMMAND lists every command,
        // as clients ask at start-up); the others want a subcommand.
        if entry.spec.arity_ok(argv.len()) {
            return Ok(id);
        }
        return Err(CmdError::WrongArity(entry.full_name.clone()));
    }
    let Some(sid) = table.lookup_sub(id, &argv[1]) else {
        return Err(CmdError::UnknownSubcommand(
            argv[1].to_vec(),
            upper(entry.spec.name),
        ));
    };
    let sub = &table.entries[sid];
    if !sub.spec.arity_ok(argv.len()) {
        return Err(CmdError::WrongArity(sub.full_name.clone()));
    }
    Ok(sid)
}

fn upper(name: &'static str) -> &'static str {
    // The handful of container commands, spelled as Redis prints them in "Try X HELP".
    match name {
        "client" => "CLIENT",
        "config" => "CONFIG",
        "command" => "COMMAND",
        "script" => "SCRIPT",
        "object" => "OBJECT",
        "debug" => "DEBUG",
        "pubsub" => "PUBSUB",
        "xgroup" => "XGROUP",
        "acl" => "ACL",
        "slowlog" => "SLOWLOG",
        "latency" => "LATENCY",
        "memory" => "MEMORY",
        "function" => "FUNCTION",
        "cluster" => "CLUSTER",
        "module" => "MODULE",
        "xinfo" => "XINFO",
        "sentinel" => "SENTINEL",
        "raft" => "RAFT",
        "locks" => "LOCKS",
        _ => "COMMAND",
    }
}

/// Runs one network command and appends its encoded reply to `out`. Gives the command back
/// when CLIENT PAUSE holds it: the caller runs it after the pause.
pub fn process(
    srv: &mut State,
    host: &mut dyn Host,
    client: &mut Client,
    argv: Vec<Bytes>,
    out: &mut BytesMut,
) -> Option<Vec<Bytes>> {
    let tracking = srv.tracking.active();
    if tracking {
        srv.tracking_begin(client);
        // Redis's processCommand keeps the table within tracking-table-max-keys before each
        // command, queued ones included; what that takes from this client is sent at once,
        // before the command's reply (it is not executing yet).
        if srv.tracking.total_keys() > 0 {
            super::tracking::limit_table(srv);
            crate::machine::tracking::after_reply(srv, client, out);
        }
    }
    let Some(result) = process_frame(srv, host, client, &argv) else {
        return Some(argv);
    };
    let error_reply;
    let reply = match &result {
        Ok(frame) => frame,
        Err(e) => {
            error_reply = e.to_frame();
            &error_reply
        }
    };
    if srv.config.notify_keyspace_events != 0 || srv.tracking.active() {
        // Keys this command's lookups expired are announced before its reply, as in Redis;
        // the running client's own invalidations for them follow its reply (a client that
        // read an expired key learns it with this reply, not the next one).
        srv.drain_expired();
    }
    srv.flush_self_pushes(client.resp3(), out);
    if tracking {
        crate::machine::tracking::before_reply(srv, out);
    }
    // CLIENT REPLY OFF / SKIP silence replies, not pushes.
    let silenced = client.reply_off || client.reply_skip;
    if !std::mem::take(&mut client.skip_reply) && !silenced {
        // Large values (GET of a big string, or one inside MGET's or LRANGE's array) are not
        // copied: each body joins the connection's chain by reference, between its header
        // and its CRLF, when the batch output is delivered (`Server::deliver`).
        let resp3 = client.resp3();
        crate::protocol::encode::encode_referencing(reply, resp3, out, &mut client.big_out);
    }
    client.reply_skip = std::mem::take(&mut client.reply_skip_next);
    if let Some(t) = client.tracking.as_deref_mut() {
        // CLIENT CACHING covers the next command (or transaction) only.
        if client.multi.is_none() && !argv[0].eq_ignore_ascii_case(b"client") {
            t.caching = false;
        }
        crate::machine::tracking::after_reply(srv, client, out);
    }
    if !srv.ops.self_feed.is_empty() {
        // A monitor's own command: its MONITOR line follows its reply, as in Redis.
        out.extend_from_slice(&srv.ops.self_feed);
        srv.ops.self_feed.clear();
    }
    crate::protocol::decode::recycle(argv);
    None
}

/// None: held back by CLIENT PAUSE.
///
/// The refusals come in Redis 7.0's `processCommand` order, and every one of them goes through
/// `reject`, which (like Redis's `rejectCommand`) flags an open transaction so EXEC aborts.
/// Errors a command's own handler returns (nested MULTI, WATCH inside MULTI) do not flag it.
fn process_frame(
    srv: &mut State,
    host: &mut dyn Host,
    client: &mut Client,
    argv: &[Bytes],
) -> Option<CmdResult> {
    // One read of the TSC gives both the command's wall clock and its stopwatch's start.
    let started = crate::stopwatch::Stopwatch::start();
    let mut now = crate::clock::unix_ms_at(started.tsc());
    client.last_interaction_ms = now;
    let table = crate::cmd::registry::table();
    let id = match resolve_mode(table, argv, host.cluster().is_some()) {
        Ok(id) => {
            // A cluster follower (of the group owning the keys) expires nothing ahead of the
            // leader (exec/cluster.rs).
            if super::support::is_replica(role_of_unit(host, client, id, argv)) {
                now = now.saturating_sub(srv.config.cluster_clock_drift);
            }
            id
        }
        Err(e) => {
            super::support::flag_transaction(client);
            // Redis charges a wrong arity to the command (the subcommand, when one was named)
            // and an unknown subcommand to nothing: its lookup found no command.
            if let CmdError::WrongArity(_) = e {
                let sentinel = host.cluster().is_some();
                if let Some(mut id) = table
                    .lookup(&argv[0])
                    .or_else(|| sentinel.then(|| table.lookup_sentinel(&argv[0])).flatten())
                {
                    if argv.len() >= 2 && !table.entries[id].spec.subcommands.is_empty() {
                        id = table.lookup_sub(id, &argv[1]).unwrap_or(id);
                    }
                    srv.stats.commands[id].rejected_calls += 1;
                    if table.entries[id].spec.name == "exec" {
                        let e = exec_abort(srv, client, e);
                        return Some(Ok(error_frame(srv, e)));
                    }
                }
            }
            return Some(Ok(error_frame(srv, e)));
        }
    };
    let spec = crate::cmd::registry::table().entries[id].spec;
    // EXEC is refused for what it would run, as Redis does with `mstate.cmd_flags`.
    let (tx_flags, tx_inv_flags) = match &client.multi {
        Some(queue) if spec.name == "exec" => queue.iter().fold((0, 0), |(all, inv), (q, _)| {
            let f = crate::cmd::registry::table().entries[*q].spec.flags;
            (all | f, inv | !f)
        }),
        _ => (0, 0),
    };
    let cmd_flags = spec.flags | tx_flags;
    // Redis's processCommand refuses a protected command right after its arity check.
    if spec.has(flags::PROTECTED)
        && !super::support::protected_allowed_for(srv.config.enable_debug_command, client)
    {
        let e = CmdError::err(super::support::DEBUG_REFUSED);
        return Some(Ok(reject(srv, client, id, e)));
    }
    if !client.authenticated && !spec.has(flags::NO_AUTH) && srv.config.auth_required() {
        let e = CmdError::err("NOAUTH Authentication required.");
        return Some(Ok(reject(srv, client, id, e)));
    }
    if client.multi.is_some() && spec.has(flags::NO_MULTI) {
        let e = CmdError::err("ERR Command not allowed inside a transaction");
        return Some(Ok(reject(srv, client, id, e)));
    }
    if client.perms.is_some() {
        let context = if client.multi.is_some() {
            "multi"
        } else {
            "toplevel"
        };
        if let Err(d) = check(srv, client, id, argv, context) {
            let e = noperm(d, &table.entries[id].full_name);
            return Some(Ok(reject(srv, client, id, e)));
        }
    }
    // Redis Cluster's redirection (cmd/cluster.rs), where Redis's processCommand does it.
    if let Some(e) = cluster_redirect(srv, &*host, client, id, argv) {
        return Some(Ok(cluster_refuse(srv, client, id, e)));
    }
    // maxmemory with noeviction: commands that may add data are refused while over the limit;
    // reads, DEL and the rest keep working so locks can still be released. Inside MULTI every
    // command but EXEC, DISCARD, QUIT and RESET is refused, since queuing itself takes memory.
    // A script with a shebang counts as deny-oom unless it declares allow-oom or no-writes.
    if srv.config.maxmemory != 0 {
        let queuing =
            client.multi.is_some() && !matches!(spec.name, "exec" | "discard" | "quit" | "reset");
        if (queuing || (effective_flags(srv, spec, argv) | tx_flags) & flags::DENYOOM != 0)
            && crate::alloc::used_memory() as u64 > srv.config.maxmemory
        {
            let e = CmdError::err("OOM command not allowed when used memory > 'maxmemory'.");
            return Some(Ok(reject(srv, client, id, e)));
        }
    }
    // Redis refuses PING too while the disk is failing, so a health check sees MISCONF.
    if cmd_flags & flags::WRITE != 0 || spec.name == "ping" {
        if let Err(e) = writes_refused(srv, &*host, cmd_flags & flags::WRITE != 0) {
            return Some(Ok(reject(srv, client, id, e)));
        }
    }
    // min-replicas-to-write: Redis's processCommand refuses what it counts as a write (EXEC
    // of writes, scripts that declare they write) after MISCONF.
    if !super::support::good_replicas_ok(srv, &*host)
        && (effective_flags(srv, spec, argv) | tx_flags) & flags::WRITE != 0
    {
        let e = CmdError::err(super::support::NOREPLICAS);
        return Some(Ok(reject(srv, client, id, e)));
    }
    // A replica refuses writes (and EXEC of writes, and scripts that declare they write)
    // before it looks further, as Redis's processCommand after MISCONF and NOREPLICAS.
    // A lone server pays one None check.
    if super::support::refuses_writes(srv, role_of_keys(host, id, argv))
        && (effective_flags(srv, spec, argv) | tx_flags) & flags::WRITE != 0
    {
        let e = CmdError::err(super::support::READONLY);
        return Some(Ok(reject(srv, client, id, e)));
    }
    // RESP2 has no way to tell pushes from replies, so a subscribed connection only talks pub/sub.
    if client.resp == 2 && client.pubsub.subscribed() && !spec.has(flags::PUBSUB_OK) {
        let name = &crate::cmd::registry::table().entries[id].full_name;
        let e = CmdError::erf(format!("Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"));
        return Some(Ok(reject(srv, client, id, e)));
    }
    // Redis's processCommand: a replica whose master link is down refuses what is not STALE
    // (EXEC: when a queued command is not).
    if (host.cluster_masterdown() || super::support::stale_refused(srv))
        && (!spec.has(flags::STALE) || tx_inv_flags & flags::STALE != 0)
    {
        let e = CmdError::err(super::support::MASTERDOWN);
        return Some(Ok(reject(srv, client, id, e)));
    }
    if host.loading() && (!spec.has(flags::LOADING) || tx_inv_flags & flags::LOADING != 0) {
        let e = CmdError::err("LOADING Redis is loading the dataset in memory");
        return Some(Ok(reject(srv, client, id, e)));
    }
    // The replica and pause checks see EXEC with the flags of what it would run.
    let exec_spec;
    let effective = if tx_flags != 0 {
        exec_spec = super::spec::CommandSpec {
            flags: cmd_flags,
            ..*spec
        };
        &exec_spec
    } else {
        spec
    };
    if let Err(e) = super::support::check_monitor(srv, client, effective) {
        return Some(Ok(reject(srv, client, id, e)));
    }
    if super::support::paused(srv, effective, now) {
        return None;
    }
    if let Some(queue) = client.multi.as_mut() {
        if !spec.has(flags::TX_CONTROL) {
            // Owned copies: a queued command must not pin the network read buffer.
            queue.push((id, argv.iter().map(crate::store::value::own).collect()));
            return Some(Ok(Frame::simple("QUEUED")));
        }
    }
    // A node running several groups logs what it deletes in the groups it leads: a key of a
    // group it follows, dead by the clock bound, is hidden rather than deleted (that group's
    // leader logs the deletion), as a Redis replica hides what its master will expire.
    // A unit without keys (SCAN, RANDOMKEY, KEYS …) may meet keys of any group: it hides
    // them too unless this node serves every group as leader and no slot is moving (a deletion
    // it logged would go to a group it follows, or to one whose slot is frozen).
    let hide = host.cluster_groups_split()
        && (super::support::is_replica(role_of_unit(host, client, id, argv))
            || (!host.cluster_serves_all() && unit_is_keyless(client, id, argv)));
    if hide {
        set_expiry(srv, crate::store::Expiry::Hide);
    }
    let mut ctx = Ctx {
        srv,
        host,
        client,
        now,
        in_script: false,
    };
    // The write refusals were checked above, with EXEC's flags.
    let result = execute_timed(&mut ctx, id, argv, started);
    if hide {
        set_expiry(ctx.srv, crate::store::Expiry::Remove);
    }
    Some(result)
}

fn set_expiry(srv: &mut State, e: crate::store::Expiry) {
    for db in srv.dbs.iter_mut() {
        db.expiry = e;
    }
}

/// Runs the handler of the command (or subcommand) `argv` names, directly: no checks and no
/// stats of its own, as Redis's GEOADD calls zaddCommand (the caller's command is the one
/// counted).
pub fn call_handler(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let id = resolve(argv)?;
    (super::registry::table().entries[id].spec.handler)(ctx, argv)
}

/// Redis's `getCommandFlags`: a command's flags, except for EVAL and FCALL, which take the
/// flags of the script or function they name (`scriptFlagsToCmdFlags`). A script without a
/// shebang, and EVALSHA of a script not in the cache, keep the command's own flags; a script
/// refuses its first write then, from inside.
///
/// Used where Redis refuses a script before it runs for what it declares: `deny-oom` over
/// maxmemory and writes on a replica.
pub fn effective_flags(srv: &State, spec: &CommandSpec, argv: &[Bytes]) -> u32 {
    use crate::script::{self, shebang};
    let declared = match spec.name {
        "eval" | "eval_ro" => argv
            .get(1)
            .and_then(|body| shebang::parse(body).ok())
            .map(|(f, _)| f),
        "evalsha" | "evalsha_ro" => argv
            .get(1)
            .and_then(|sha| script::sha_key(sha))
            .and_then(|sha| script::cached_flags(srv, &sha)),
        "fcall" | "fcall_ro" => argv
            .get(1)
            .and_then(|name| script::functions::function_flags(srv, name)),
        _ => None,
    };
    match declared {
        Some(f) if f & shebang::COMPAT == 0 => {
            let mut cmd = spec.flags & !(flags::STALE | flags::DENYOOM | flags::WRITE);
            if f & (shebang::ALLOW_OOM | shebang::NO_WRITES) == 0 {
                cmd |= flags::DENYOOM;
            }
            if f & shebang::NO_WRITES == 0 {
                cmd |= flags::WRITE;
            }
            if f & shebang::ALLOW_STALE != 0 {
                cmd |= flags::STALE;
            }
            cmd & !flags::MAY_REPLICATE
        }
        _ => spec.flags,
    }
}

/// Redis's `rejectCommand`: counts the refusal and flags an open transaction (EXEC then answers
/// EXECABORT).
fn reject(srv: &mut State, client: &mut Client, id: CmdId, e: CmdError) -> Frame {
    srv.stats.commands[id].rejected_calls += 1;
    super::support::flag_transaction(client);
    let e = if crate::cmd::registry::table().entries[id].spec.name == "exec" {
        exec_abort(srv, client, e)
    } else {
        e
    };
    error_frame(srv, e)
}

/// Redis's `execCommandAbort`: an EXEC refused before it runs (NOPERM, NOAUTH, OOM, MISCONF,
/// wrong arity...) discards the transaction and every WATCH, MULTI or not, and answers
/// `EXECABORT Transaction discarded because of: <the refusal>`. Redis words the arity and
/// RESP2 pub/sub refusals without an error code, so their `ERR ` is dropped.
fn exec_abort(srv: &mut State, client: &mut Client, e: CmdError) -> CmdError {
    client.multi = None;
    client.multi_dirty = false;
    srv.watches.unwatch_all(client.id);
    let text = e.to_string();
    let why = match text.strip_prefix("ERR ") {
        Some(rest)
            if matches!(e, CmdError::WrongArity(_)) || rest.starts_with("Can't execute '") =>
        {
            rest
        }
        _ => &text,
    };
    CmdError::err(format!("EXECABORT Transaction discarded because of: {why}"))
}

/// Executes a resolved command with the context's time, counting it in the stats.
pub fn run(ctx: &mut Ctx, id: CmdId, argv: &[Bytes]) -> Frame {
    if crate::cmd::registry::table().entries[id]
        .spec
        .has(flags::WRITE)
    {
        if let Err(e) = writes_allowed(ctx.srv, &*ctx.host) {
            ctx.srv.stats.commands[id].rejected_calls += 1;
            return error_frame(ctx.srv, e);
        }
    }
    execute(ctx, id, argv)
}

/// `run` once the write refusals are known not to apply.
fn execute(ctx: &mut Ctx, id: CmdId, argv: &[Bytes]) -> Frame {
    execute_timed(ctx, id, argv, crate::stopwatch::Stopwatch::start())
        .unwrap_or_else(|e| e.to_frame())
}

/// `execute`, timed from `started`. A client's command is timed from where its clock was read,
/// before the refusal checks (tens of ns more than Redis's `call()` counts, for one TSC read
/// fewer per command).
///
/// The handler's result comes back as it is, an error already counted in the stats (its reply
/// is `CmdError::to_frame`): moved into a `Frame` here, each reply was copied once more, and
/// read back right after the handler wrote it in other widths, which stalls the store buffer
/// (`execute_timed` fell from 6.2-6.7 % to 4.8 % of a pipelined DEL's samples).
fn execute_timed(
    ctx: &mut Ctx,
    id: CmdId,
    argv: &[Bytes],
    started: crate::stopwatch::Stopwatch,
) -> CmdResult {
    let entry = &crate::cmd::registry::table().entries[id];
    let spec = entry.spec;
    ctx.client.last_cmd = Some(entry.full_name.as_str());
    ctx.srv.stats.error_mark = ctx.srv.stats.total_error_replies;
    let dirty = ctx.srv.changes_since_save;
    let result = (spec.handler)(ctx, argv);
    if ctx.srv.changes_since_save != dirty
        && ctx.srv.redis_master.active()
        && spec.has(flags::WRITE)
    {
        // Redis replicas get the write as Redis propagates it (machine/redis_master.rs).
        let (st, db) = (&mut *ctx.srv, ctx.client.db);
        st.redis_master
            .note(spec.name, db, argv, &st.dbs, result.as_ref().ok());
    }
    if ctx.client.tracking.is_some() {
        super::tracking::remember(ctx, entry, argv);
    }
    if ctx.srv.dbs[ctx.client.db].records_created() {
        // A key created without an event of the command's own still gets its `new`.
        ctx.srv.drain_created();
    }
    let nsec = started.elapsed_ns();
    let usec = nsec / 1000;
    if !ctx.srv.ops.monitors.is_empty() && !spec.has(flags::SKIP_MONITOR | flags::ADMIN) {
        super::support::feed_monitors(ctx.srv, ctx.client, ctx.in_script, argv);
    }
    // The threshold is tested here too: most commands are fast, and the call is not free.
    let slower_than = ctx.srv.config.slowlog_log_slower_than;
    if !ctx.in_script
        && !spec.has(flags::SKIP_SLOWLOG)
        && slower_than >= 0
        && usec as i64 >= slower_than
    {
        super::support::slowlog_push(ctx.srv, ctx.client, argv, usec);
    }
    let stats = &mut ctx.srv.stats;
    let st = &mut stats.commands[id];
    // A served waiter re-running its blocking command is still one call, as in Redis.
    if ctx.client.block_deadline.is_none() {
        st.calls += 1;
        stats.total_commands += 1;
    }
    st.nsec += nsec;
    if stats.latency_tracking && ctx.client.block_deadline.is_none() {
        st.latency.get_or_insert_with(Default::default).record(nsec);
    }
    // Redis's call(): the latency monitor's `command` / `fast-command` event.
    let event = if spec.has(flags::FAST) {
        "fast-command"
    } else {
        "command"
    };
    let unix_s = || (crate::clock::unix_ms() / 1000) as i64;
    (stats.latency_events).sample_if_needed(event, nsec / 1_000_000, unix_s);
    match &result {
        Ok(Frame::Error(e)) => {
            if std::mem::take(&mut ctx.srv.stats.error_already_counted) {
                // A script's error that was counted where it happened (Redis's
                // afterErrorReply with ERR_REPLY_FLAG_NO_STATS_UPDATE): the script
                // still failed.
                ctx.srv.stats.commands[id].failed_calls += 1;
            } else {
                // Handlers that build their own error frames (EXEC, EVAL).
                let code =
                    String::from_utf8_lossy(e.split(|&b| b == b' ').next().unwrap_or(b"ERR"))
                        .into_owned();
                ctx.srv.stats.count_error(&code);
            }
        }
        Ok(_) => {}
        Err(e) => ctx.srv.stats.count_error(e.code()),
    }
    // Failed: an error was replied since the last command (this one's own or a nested
    // one's) ended, as Redis's incrCommandStatsOnError counts it.
    let stats = &mut ctx.srv.stats;
    if stats.total_error_replies > stats.error_mark {
        stats.commands[id].failed_calls += 1;
    }
    stats.error_mark = stats.total_error_replies;
    result
}

/// The error reply for `e`, counted in INFO errorstats.
pub fn error_frame(srv: &mut State, e: CmdError) -> Frame {
    srv.stats.count_error(e.code());
    // Bytes, not Display: an unknown command's name is echoed raw, as Redis does.
    e.to_frame()
}

/// Refusals that apply to every write: a failing append-only file (MISCONF, as Redis) and the
/// `lock-restart-delay` window after an amnesiac restart.
pub fn writes_allowed(srv: &mut State, host: &dyn Host) -> Result<(), CmdError> {
    writes_refused(srv, host, true)
}

/// MISCONF (which Redis also gives PING) and, for writes only, the `lock-restart-delay` window.
fn writes_refused(srv: &mut State, host: &dyn Host, write: bool) -> Result<(), CmdError> {
    if let Some(aof) = host.aof() {
        if let Some(why) = aof.write_error() {
            return Err(
                CmdError::erf(format!("Errors writing to the AOF file: {why}")).into_misconf(),
            );
        }
    }
    // Redis's writeCommandsDeniedByDiskError, RDB side: save points are set and the last
    // background save failed.
    if !srv.config.save_points.is_empty()
        && host.rdb().is_some_and(|r| !r.last_ok)
        && srv.config.compat_value("stop-writes-on-bgsave-error") == "yes"
    {
        return Err(CmdError::err("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error."));
    }
    if !write {
        return Ok(());
    }
    if let Some(until) = srv.writes_refused_until {
        let now = Instant::now();
        if now < until {
            let left = (until - now).as_millis();
            return Err(CmdError::Other(std::borrow::Cow::Owned(format!(
                "TRYAGAIN Writes are refused for {left} more ms (lock-restart-delay): this node restarted without durable persistence and may have forgotten locks it granted"
            ))));
        }
        srv.writes_refused_until = None;
    }
    Ok(())
}

/// A command called by a script (`redis.call`): Redis's `scriptCall` checks in its order
/// (unknown command / arity → noscript → write in a read-only script), then `run` with the
/// script's context. Returns the reply (errors as `Frame::Error`) and whether the command is a
/// write (the script can no longer be killed).
///
/// `deny_oom`: the server was over maxmemory when the script started, the script has not
/// written yet and may not ignore it (Redis's `scriptVerifyOOM`): deny-oom commands are then
/// refused, since the script can still stop cleanly.
pub fn script_call(
    ctx: &mut Ctx,
    argv: &[Bytes],
    read_only: bool,
    deny_oom: bool,
) -> (Frame, bool) {
    let table = &crate::cmd::registry::table();
    let Some(mut id) = table.lookup(&argv[0]) else {
        let e = CmdError::err("ERR Unknown Redis command called from script");
        return (rejected_in_script(ctx.srv, e), false);
    };
    if !table.entries[id].spec.subcommands.is_empty() && argv.len() >= 2 {
        match table.lookup_sub(id, &argv[1]) {
            Some(sid) => id = sid,
            None => {
                let e = CmdError::err("ERR Unknown Redis command called from script");
                return (rejected_in_script(ctx.srv, e), false);
            }
        }
    }
    let spec = table.entries[id].spec;
    let e = if !spec.arity_ok(argv.len()) {
        "ERR Wrong number of args calling Redis command from script"
    } else if spec.has(flags::NOSCRIPT) && !ctx.srv.debug.disable_deny_scripts {
        "ERR This Redis command is not allowed from script"
    } else if let Err(d) = check(ctx.srv, ctx.client, id, argv, "lua") {
        // Redis's scriptVerifyACL: a script reaches only what its caller may.
        script_denied(d)
    } else if read_only && spec.flags & (flags::WRITE | flags::MAY_REPLICATE) != 0 {
        "ERR Write commands are not allowed from read-only scripts."
    } else if spec.has(flags::WRITE)
        && super::support::refuses_writes(ctx.srv, role_of_keys(&*ctx.host, id, argv))
    {
        // Redis's scriptVerifyWriteCommandAllow (after ACL, before OOM); the script's error
        // then carries its ` script: …` suffix. A script cannot have written before: a node's
        // role changes only between units of work.
        super::support::READONLY
    } else if spec.has(flags::WRITE) && !super::support::good_replicas_ok(ctx.srv, &*ctx.host) {
        // scriptVerifyWriteCommandAllow: a script without flags learns at its first write.
        super::support::NOREPLICAS
    } else if deny_oom && spec.has(flags::DENYOOM) {
        "OOM command not allowed when used memory > 'maxmemory'."
    } else {
        let write = spec.has(flags::WRITE);
        return (run(ctx, id, argv), write);
    };
    ctx.srv.stats.commands[id].rejected_calls += 1;
    (rejected_in_script(ctx.srv, CmdError::err(e)), false)
}

/// A call refused by `script_call`: its error is counted as the call's rejection, not as the
/// script's failure (Redis's incrCommandStatsOnError with ERROR_COMMAND_REJECTED moves its
/// mark too).
fn rejected_in_script(srv: &mut State, e: CmdError) -> Frame {
    let frame = error_frame(srv, e);
    srv.stats.error_mark = srv.stats.total_error_replies;
    frame
}

// ---- ACL: Redis's ACLCheckAllPerm, for every command, EXEC's queue and scripts' calls ------

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
    if !s.all_commands && !spec.has(flags::NO_AUTH) && !s.bit(id) {
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
            // A key spec can point past a short argv (redis.acl_check_cmd checks no arity).
            let Some(key) = argv.get(k.pos) else {
                continue;
            };
            if !s.key_ok(key, k.read, k.write) {
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

// ---- Redis Cluster redirection ----

/// Redis's getNodeByQuery and clusterRedirectClient: the refusal a command gets instead of
/// running here (CROSSSLOT, CLUSTERDOWN, MOVED to the leader of the group owning the slot,
/// `Host::role_for`), None when it runs. EXEC is judged by every queued command's keys, as in
/// Redis.
pub fn cluster_redirect(
    srv: &State,
    host: &dyn Host,
    client: &Client,
    id: CmdId,
    argv: &[Bytes],
) -> Option<CmdError> {
    host.cluster()?;
    let table = crate::cmd::registry::table();
    let entry = &table.entries[id];
    if matches!(entry.spec.name, "ssubscribe" | "sunsubscribe" | "spublish") {
        return cluster_pubsub_shard(srv, host, entry, argv);
    }
    let exec = entry.spec.name == "exec";
    if !exec && !super::keyspec::has_keys(entry) {
        return None;
    }
    if !super::slots::enabled(srv, host) {
        return None;
    }
    let mut slot = None;
    let mut judge = |qid: CmdId, qargv: &[Bytes]| -> Result<(), CmdError> {
        let e = &table.entries[qid];
        for k in super::keyspec::key_refs(e, qargv).iter() {
            let Some(key) = qargv.get(k.pos) else {
                continue;
            };
            let this = super::slots::key_hash_slot(key);
            match slot {
                None => slot = Some(this),
                Some(s) if s != this => return Err(CmdError::err(super::slots::CROSSSLOT)),
                Some(_) => {}
            }
        }
        Ok(())
    };
    if exec {
        // EXEC without MULTI answers its own error.
        for (qid, qargv) in client.multi.as_ref()? {
            if let Err(e) = judge(*qid, qargv) {
                return Some(e);
            }
        }
    } else if let Err(e) = judge(id, argv) {
        return Some(e);
    }
    let slot = slot?;
    if let Some(e) = super::slots::moving(host, slot) {
        return Some(e);
    }
    let view = host.role_for(slot)?;
    if view.role == crate::replication::StateRole::Leader {
        return None;
    }
    let Some(leader) = view.members.iter().find(|m| m.id == view.leader) else {
        return Some(CmdError::err(super::slots::CLUSTERDOWN));
    };
    // After READONLY a follower serves what only reads (behind its read barrier).
    let writes = |qid: CmdId, qargv: &[Bytes]| {
        effective_flags(srv, table.entries[qid].spec, qargv) & flags::WRITE != 0
    };
    if client.cluster_readonly {
        let write = match (exec, client.multi.as_ref()) {
            (true, Some(queue)) => queue.iter().any(|(qid, qargv)| writes(*qid, qargv)),
            _ => writes(id, argv),
        };
        if !write {
            return None;
        }
    }
    let (host, port, _) = super::slots::addr(leader);
    Some(CmdError::err(format!("MOVED {slot} {host}:{port}")))
}

/// The role a write is refused by on a follower: that of the group owning its first key's
/// slot (a command reaching this point in cluster mode has keys of one slot), else the home
/// group's. Only a node with several groups looks at the keys.
/// `role_of_keys`, where EXEC is judged by its first queued command that names a key (a
/// transaction's keys share a slot in cluster mode).
fn role_of_unit<'h>(
    host: &'h dyn Host,
    client: &Client,
    id: CmdId,
    argv: &[Bytes],
) -> Option<&'h crate::replication::ClusterView> {
    let table = crate::cmd::registry::table();
    if host.cluster_groups_split() && table.entries[id].spec.name == "exec" {
        let keyed = client.multi.as_ref().and_then(|q| {
            q.iter().find(|(qid, qargv)| {
                super::keyspec::key_refs(&table.entries[*qid], qargv)
                    .iter()
                    .next()
                    .is_some()
            })
        });
        if let Some((qid, qargv)) = keyed {
            return role_of_keys(host, *qid, qargv);
        }
    }
    role_of_keys(host, id, argv)
}

/// Whether the unit `argv` starts names no key (EXEC: none of its queued commands does).
fn unit_is_keyless(client: &Client, id: CmdId, argv: &[Bytes]) -> bool {
    let table = crate::cmd::registry::table();
    let keyless = |id: CmdId, argv: &[Bytes]| {
        super::keyspec::key_refs(&table.entries[id], argv)
            .iter()
            .next()
            .is_none()
    };
    if table.entries[id].spec.name == "exec" {
        return client
            .multi
            .as_ref()
            .is_none_or(|q| q.iter().all(|(qid, qargv)| keyless(*qid, qargv)));
    }
    keyless(id, argv)
}

fn role_of_keys<'h>(
    host: &'h dyn Host,
    id: CmdId,
    argv: &[Bytes],
) -> Option<&'h crate::replication::ClusterView> {
    let home = host.cluster()?;
    if !host.cluster_groups_split() {
        return Some(home);
    }
    let entry = &crate::cmd::registry::table().entries[id];
    let key = super::keyspec::key_refs(entry, argv)
        .iter()
        .find_map(|k| argv.get(k.pos));
    match key {
        Some(k) => host.role_for(super::slots::key_hash_slot(k)),
        // A flush empties the groups this node leads (cmd/keys.rs), and SWAPDB answers as on
        // a Redis Cluster master: READONLY only where the node leads no group, as a replica.
        None if matches!(entry.spec.name, "flushall" | "flushdb" | "swapdb")
            && host.cluster_serves_any() =>
        {
            None
        }
        None => Some(home),
    }
}

/// Sharded pub/sub: the channels (Redis's legacy key range; their key specs say `not_key`)
/// must share a slot. Any node then serves them, as Redis serves them on the slot's master
/// and its replicas, and while the cluster is down (`cluster-allow-pubsubshard-when-down`,
/// yes by default).
fn cluster_pubsub_shard(
    srv: &State,
    host: &dyn Host,
    entry: &super::table::TableEntry,
    argv: &[Bytes],
) -> Option<CmdError> {
    if !super::slots::enabled(srv, host) {
        return None;
    }
    let mut slots = entry
        .spec
        .key_positions(argv.len())
        .filter_map(|p| argv.get(p))
        .map(|c| super::slots::key_hash_slot(c));
    let first = slots.next()?;
    slots
        .any(|s| s != first)
        .then(|| CmdError::err(super::slots::CROSSSLOT))
}

/// A redirection's reply, as Redis's processCommand gives it: EXEC's discards the transaction
/// (and its WATCHes), any other command's flags an open one so that EXEC aborts.
pub fn cluster_refuse(srv: &mut State, client: &mut Client, id: CmdId, e: CmdError) -> Frame {
    if crate::cmd::registry::table().entries[id].spec.name == "exec" {
        client.multi = None;
        client.multi_dirty = false;
        srv.watches.unwatch_all(client.id);
    } else {
        super::support::flag_transaction(client);
    }
    srv.stats.commands[id].rejected_calls += 1;
    error_frame(srv, e)
}
