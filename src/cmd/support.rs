//! Helpers several command families share, so that no family imports another: each family
//! imports `spec`, this file and the small parsers beside it (args, blocking, keyspec), and runs
//! other commands only through `dispatch`.

use super::args::{int_arg, is, MAX_RANDOM_REPEATS};
use super::spec::{event, flags, CommandSpec, Ctx, KeySpecDoc, NO_KEYS};
use crate::error::{CmdError, CmdResult};
use crate::machine::client::Client;
use crate::machine::ops::{AclLogEntry, SlowEntry};
use crate::machine::State;
use crate::protocol::number::parse_i64;
use crate::protocol::Frame;
use crate::replication::{ClusterView, Member, StateRole};
use crate::store::encoding::Limits;
use crate::store::value::SetValue;
use crate::store::zset::ZSet;
use crate::store::Value;
use bytes::Bytes;
use std::fmt::Write;
use std::sync::atomic::Ordering;

// ---- Strings --------------------------------------------------------------------------

/// The string at `key`: None if missing, WRONGTYPE if another type. Counts hits/misses.
pub fn read_str(ctx: &mut Ctx, key: &[u8]) -> CmdResult<Option<Bytes>> {
    let now = ctx.now;
    let found = match ctx.db().get(key, now) {
        None => None,
        Some(e) => match &e.value {
            Value::Str(s) => Some(s.clone()),
            _ => return Err(CmdError::WrongType),
        },
    };
    if found.is_some() {
        ctx.srv.stats.keyspace_hits += 1;
    } else {
        ctx.srv.stats.keyspace_misses += 1;
    }
    Ok(found)
}

/// With maxmemory set, growing a value by `extra` bytes must not carry the server past it: the
/// DENYOOM check before the command only sees memory as it was, while one SETBIT or SETRANGE
/// can ask for up to proto-max-bulk-len at once. (Redis lets that single allocation through;
/// refusing it keeps a lock service inside its budget.)
pub fn check_growth(ctx: &Ctx, extra: usize) -> CmdResult<()> {
    let max = ctx.srv.config.maxmemory;
    if max != 0
        && extra > 0
        && (crate::alloc::used_memory() as u64).saturating_add(extra as u64) > max
    {
        return Err(CmdError::err(
            "OOM command not allowed when used memory > 'maxmemory'.",
        ));
    }
    Ok(())
}

/// Redis's `lookupStringForBitCommand` + `dbUnshareStringValue`: the string at `key` (created
/// empty when missing), zero-padded to at least `min_len` bytes, handed to `edit` in place.
/// `edit` also learns whether the key was created or grew. The caller bounds `min_len` by
/// proto-max-bulk-len. The stored buffer is reused when nothing else holds it, so SETBIT on a
/// large bitmap costs O(1), not a copy.
pub fn edit_str<R>(
    ctx: &mut Ctx,
    key: &[u8],
    min_len: usize,
    edit: impl FnOnce(&mut [u8], bool) -> R,
) -> CmdResult<R> {
    let now = ctx.now;
    let current = match ctx.db().get(key, now) {
        None => None,
        Some(e) => match &e.value {
            Value::Str(s) => Some(s.len()),
            _ => return Err(CmdError::WrongType),
        },
    };
    check_growth(ctx, min_len.saturating_sub(current.unwrap_or(0)))?;
    let db = ctx.db();
    let r = match db.get_mut(key, now).map(|e| &mut e.value) {
        Some(Value::Str(s)) => {
            let old_len = s.len();
            // Zero-copy when this is the only reference to the buffer.
            let mut v = Vec::from(std::mem::take(s));
            if let Err(e) = grow_zeroed(&mut v, min_len) {
                *s = Bytes::from(v);
                return Err(e);
            }
            let grew = v.len() != old_len;
            let r = edit(&mut v, grew);
            *s = Bytes::from(v);
            r
        }
        _ => {
            let mut v = Vec::new();
            grow_zeroed(&mut v, min_len)?;
            let r = edit(&mut v, true);
            db.set(key, Value::Str(Bytes::from(v)), 0);
            r
        }
    };
    // Written in place: Redis's `raw` encoding whatever the content (dbUnshareStringValue).
    db.set_str_enc(key, crate::store::keyspace::StrEnc::Raw);
    Ok(r)
}

pub fn alloc_failed() -> CmdError {
    CmdError::err("OOM command not allowed when used memory > 'maxmemory'.")
}

/// Zero-pads `v` to `len` bytes, reporting an allocation failure instead of aborting.
pub fn grow_zeroed(v: &mut Vec<u8>, len: usize) -> CmdResult<()> {
    if v.len() < len {
        v.try_reserve_exact(len - v.len())
            .map_err(|_| alloc_failed())?;
        v.resize(len, 0);
    }
    Ok(())
}

// ---- Sorted sets and the replies of the random-member commands ------------------------

pub fn zset_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a mut ZSet>> {
    ctx.value_mut(key, Value::as_zset_mut)
}

pub fn zset_ref<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a ZSet>> {
    Ok(zset_mut(ctx, key)?.map(|z| &*z))
}

/// The STORE commands' ending for an empty result (set, sorted-set, SORT, GEO and BITOP
/// stores): deletes `dest`, with a `del` event if it existed (Redis's dbDelete path).
pub fn delete_dest(ctx: &mut Ctx, dest: &[u8]) {
    let now = ctx.now;
    if ctx.db().remove(dest, now).is_some() {
        ctx.changed(event::GENERIC, "del", dest);
    }
}

/// Stores `z` at `dest` (replacing any value and its TTL) with `ev`, or deletes `dest` when
/// `z` is empty (a `del` event if it existed), as Redis's setKey/dbDelete paths do. Replies
/// the stored cardinality.
pub fn store_result(ctx: &mut Ctx, dest: &Bytes, z: ZSet, ev: &'static str) -> CmdResult {
    let n = z.len();
    if n == 0 {
        delete_dest(ctx, dest);
        return Ok(Frame::Integer(0));
    }
    ctx.db().set(dest, Value::ZSet(Box::new(z)), 0);
    ctx.changed(event::ZSET, ev, dest);
    Ok(Frame::Integer(n as i64))
}

/// Pairs as a reply: flat in RESP2, [a, b] pairs in RESP3; just the firsts without `with`.
pub fn paired(items: Vec<(Frame, Frame)>, with: bool, resp3: bool) -> Frame {
    if !with {
        return Frame::Array(items.into_iter().map(|(a, _)| a).collect());
    }
    if resp3 {
        return Frame::Array(
            items
                .into_iter()
                .map(|(a, b)| Frame::Array(vec![a, b]))
                .collect(),
        );
    }
    let mut out = Vec::with_capacity(items.len() * 2);
    for (a, b) in items {
        out.push(a);
        out.push(b);
    }
    Frame::Array(out)
}

/// Redis's ZRANDMEMBER/HRANDFIELD count argument: (count, with scores/values). The count is
/// parsed before the key is looked at; `word` is WITHSCORES or WITHVALUES.
pub fn random_count_args(argv: &[Bytes], word: &str) -> CmdResult<Option<(i64, bool)>> {
    let Some(c) = argv.get(2) else {
        return Ok(None);
    };
    let n = int_arg(c)?;
    if n == i64::MIN {
        return Err(CmdError::err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"));
    }
    if argv.len() > 4 || (argv.len() == 4 && !is(&argv[3], word)) {
        return Err(CmdError::Syntax);
    }
    let with = argv.len() == 4;
    if with && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&n) {
        return Err(CmdError::err("ERR value is out of range"));
    }
    if n < 0 && n.unsigned_abs() > MAX_RANDOM_REPEATS as u64 {
        return Err(CmdError::err("ERR value is out of range"));
    }
    Ok(Some((n, with)))
}

/// Which of `len` positions a counted random pick returns: `count` < 0 picks |count| times
/// with repeats (drawn lazily: nothing is allocated by the count); otherwise distinct
/// positions, all of them in order when count >= len. The caller bounded |count|
/// (random_count_args), and distinct picks never exceed `len`.
pub fn random_positions(len: usize, count: i64) -> Box<dyn Iterator<Item = usize>> {
    if len == 0 || count == 0 {
        return Box::new(std::iter::empty());
    }
    if count < 0 {
        let n = count.unsigned_abs() as usize;
        return Box::new((0..n).map(move |_| fastrand::usize(..len)));
    }
    let n = (count as u64).min(len as u64) as usize;
    if n == len {
        return Box::new(0..len);
    }
    if n.saturating_mul(3) <= len {
        // Few picks from many (Redis's CASE 4): draw until `n` distinct positions, so the work
        // and memory follow the count, not the size of the set.
        let mut picked = crate::store::FastSet::default();
        picked.reserve(n);
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let i = fastrand::usize(..len);
            if picked.insert(i) {
                out.push(i);
            }
        }
        return Box::new(out.into_iter());
    }
    // Distinct picks, many of them: a partial Fisher-Yates over the positions.
    let mut idx: Vec<usize> = (0..len).collect();
    for i in 0..n {
        let j = fastrand::usize(i..len);
        idx.swap(i, j);
    }
    idx.truncate(n);
    Box::new(idx.into_iter())
}

// ---- Sets as Redis shows them ---------------------------------------------------------

/// Redis keeps all-integer sets up to this size as a sorted intset (set-max-intset-entries).
pub const INTSET_MAX_ENTRIES: usize = 512;

/// Members in the order Redis shows them where that order is defined: a small all-integer set
/// is an intset, sorted numerically. Other sets are hash tables with no promised order.
pub fn ordered(s: &SetValue) -> Vec<Bytes> {
    shown(s.iter().cloned().collect())
}

/// `members` (distinct) in the order Redis would show them as a set: numerically when they
/// would form an intset.
pub fn shown(mut members: Vec<Bytes>) -> Vec<Bytes> {
    if members.len() <= INTSET_MAX_ENTRIES {
        let ints: Option<Vec<i64>> = members.iter().map(|m| parse_i64(m)).collect();
        if let Some(ints) = ints {
            let mut keyed: Vec<(i64, Bytes)> = ints.into_iter().zip(members).collect();
            keyed.sort_unstable_by_key(|(i, _)| *i);
            members = keyed.into_iter().map(|(_, m)| m).collect();
        }
    }
    members
}

// ---- SCAN and its family --------------------------------------------------------------

/// SCAN-family options shared with HSCAN/SSCAN/ZSCAN: (pattern, count, type).
pub struct ScanOpts<'a> {
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
    pub type_name: Option<&'a [u8]>,
}

/// Redis parses cursors with `strtoul`: a leading '-' wraps around instead of failing.
pub fn parse_cursor(arg: &[u8]) -> CmdResult<u64> {
    let invalid = || CmdError::err("ERR invalid cursor");
    let text = std::str::from_utf8(arg).map_err(|_| invalid())?;
    match text.strip_prefix('-') {
        Some(rest) => rest
            .parse::<u64>()
            .map(u64::wrapping_neg)
            .map_err(|_| invalid()),
        None => text
            .strip_prefix('+')
            .unwrap_or(text)
            .parse::<u64>()
            .map_err(|_| invalid()),
    }
}

pub fn parse_scan_opts(opts: &[Bytes], allow_type: bool) -> CmdResult<ScanOpts<'_>> {
    let mut o = ScanOpts {
        pattern: None,
        count: 10,
        type_name: None,
    };
    let mut i = 0;
    while i < opts.len() {
        let rest = opts.len() - i - 1;
        if is(&opts[i], "count") && rest >= 1 {
            let n = int_arg(&opts[i + 1])?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            o.count = n as usize;
            i += 2;
        } else if is(&opts[i], "match") && rest >= 1 {
            let p = &opts[i + 1][..];
            o.pattern = if p == b"*" { None } else { Some(p) };
            i += 2;
        } else if allow_type && is(&opts[i], "type") && rest >= 1 {
            o.type_name = Some(&opts[i + 1][..]);
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(o)
}

// ---- LMPOP and ZMPOP ------------------------------------------------------------------

/// Parses LMPOP/ZMPOP's `numkeys key... WHERE [COUNT n]` starting at `argv[at]`:
/// (keys, where, count). `side` reads WHERE (LEFT|RIGHT, MIN|MAX); None is a syntax error.
/// Redis's lmpopGenericCommand/zmpopGenericCommand order: numkeys, then WHERE (a syntax error
/// when numkeys runs past the arguments), then COUNT; the blocking forms' timeout is parsed
/// after all of them.
pub fn parse_mpop<W>(
    argv: &[Bytes],
    at: usize,
    side: impl FnOnce(&[u8]) -> Option<W>,
) -> CmdResult<(&[Bytes], W, usize)> {
    let numkeys = match int_arg(&argv[at]) {
        Ok(n) if n > 0 => n as u64,
        _ => return Err(CmdError::err("ERR numkeys should be greater than 0")),
    };
    let where_idx = (at as u64).saturating_add(numkeys).saturating_add(1);
    if where_idx >= argv.len() as u64 {
        return Err(CmdError::Syntax);
    }
    let where_idx = where_idx as usize;
    let side = side(&argv[where_idx]).ok_or(CmdError::Syntax)?;
    let mut count = None;
    let mut j = where_idx + 1;
    while j < argv.len() {
        if count.is_none() && is(&argv[j], "count") && j + 1 < argv.len() {
            j += 1;
            match int_arg(&argv[j]) {
                Ok(n) if n > 0 => count = Some(n as u64),
                _ => return Err(CmdError::err("ERR count should be greater than 0")),
            }
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    // Capped at usize::MAX on 32-bit targets; pops never exceed the value's length anyway.
    let count = usize::try_from(count.unwrap_or(1)).unwrap_or(usize::MAX);
    Ok((&argv[at + 1..where_idx], side, count))
}

// ---- Errors ---------------------------------------------------------------------------

/// Redis's `addReplySubcommandSyntaxError`, naming the words as the client typed them.
pub fn subcommand_syntax(argv: &[Bytes]) -> CmdError {
    CmdError::erf(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        String::from_utf8_lossy(&argv[1][..argv[1].len().min(128)]),
        String::from_utf8_lossy(&argv[0]).to_uppercase()
    ))
}

// ---- Rows and protected commands ------------------------------------------------------

/// A row with Redis's explicit ACL categories (ADMIN adds @admin and @dangerous by itself).
pub const fn spec_acl(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: &'static [&'static str],
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, NO_KEYS, acl, handler)
}

/// LASTSAVE, ROLE: in Redis's @admin and @dangerous without the `admin` flag.
pub const ADMIN_CATS: &[&str] = &["admin", "dangerous"];

/// Redis's allowProtectedAction: `enable-debug-command` / `enable-module-command`.
pub fn protected_action_allowed(setting: crate::config::DebugCommand, ctx: &Ctx) -> bool {
    protected_allowed_for(setting, ctx.client)
}

/// `protected_action_allowed` for a client not yet in a command context (dispatch's checks).
pub fn protected_allowed_for(
    setting: crate::config::DebugCommand,
    client: &crate::machine::client::Client,
) -> bool {
    match setting {
        crate::config::DebugCommand::Yes => true,
        crate::config::DebugCommand::Local => client.addr.ip().is_loopback(),
        crate::config::DebugCommand::No => false,
    }
}

/// Redis's refusal of DEBUG when `enable-debug-command` does not allow the connection.
pub const DEBUG_REFUSED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

// ---- Transactions ---------------------------------------------------------------------

/// Redis's `flagTransaction`: a command refused while queuing makes the coming EXEC answer
/// EXECABORT. Every refusal before queuing calls it (dispatch.rs, and the BUSY refusal during a
/// busy script); a no-op outside MULTI.
pub fn flag_transaction(client: &mut crate::machine::client::Client) {
    client.multi_dirty |= client.multi.is_some();
}

/// Leaves MULTI state and drops every WATCH (DISCARD, EXEC, RESET).
pub fn discard_transaction(ctx: &mut Ctx) {
    ctx.client.multi = None;
    ctx.client.multi_dirty = false;
    ctx.srv.watches.unwatch_all(ctx.client.id);
}

// ---- Scripts --------------------------------------------------------------------------

/// EVAL_RO's and FCALL_RO's.
pub const SCRIPT_KEYS_RO: KeySpecDoc = KeySpecDoc {
    notes: Some("We cannot tell how the keys will be used so we assume the worst, RO and ACCESS"),
    flags: &["RO", "access"],
    ..SCRIPT_KEYS_RW
};

/// EVAL's and FCALL's key specification: numkeys, then the keys, whose use nobody can tell.
pub const SCRIPT_KEYS_RW: KeySpecDoc = KeySpecDoc {
    notes: Some("We cannot tell how the keys will be used so we assume the worst, RW and UPDATE"),
    flags: &["RW", "access", "update"],
    begin_index: 2,
    lastkey: 0,
    keystep: 0,
    keynum: Some((0, 1, 1)),
    keyword: None,
    limit: 0,
};

// ---- Memory ---------------------------------------------------------------------------

/// The encoding thresholds as configured now (CONFIG SET takes effect at once).
pub fn limits(ctx: &Ctx) -> Limits {
    ctx.srv.config.encoding_limits()
}

/// The figures MEMORY STATS, MEMORY DOCTOR and INFO memory share (Redis's
/// getMemoryOverheadData).
pub struct Overhead {
    pub used: usize,
    pub peak: usize,
    pub startup: usize,
    pub rss: usize,
    /// The allocator's active bytes (Redis: jemalloc's).
    pub committed: usize,
    pub clients: usize,
    pub aof_buffer: usize,
    pub lua: usize,
    pub functions: usize,
    /// (db index, main table overhead) of each non-empty database.
    pub dbs: Vec<(usize, usize)>,
    pub keys: usize,
}

pub fn overhead(srv: &crate::machine::State, host: &dyn crate::machine::Host) -> Overhead {
    let used = crate::alloc::used_memory();
    let rss = crate::alloc::rss_bytes();
    let (lua, _) = crate::script::memory_and_scripts(srv);
    let mut dbs = Vec::new();
    let mut keys = 0;
    for (i, db) in srv.dbs.iter().enumerate() {
        let n = db.len();
        if n == 0 {
            continue;
        }
        keys += n;
        // keymap.rs: an entry per key, plus the index's slots and unused entry slots.
        dbs.push((
            i,
            n * crate::store::keyspace::ENTRY_BYTES + db.overhead_bytes(),
        ));
    }
    let connected = srv.local.connected_clients.get();
    // CLIENT LIST's tot-mem: an idle connection's buffers (20000) and its pending output.
    let pending: usize = srv.clients.values().map(|c| c.pending_out()).sum();
    Overhead {
        used,
        peak: crate::alloc::peak_memory(),
        startup: srv.stats.startup_memory,
        rss,
        // mimalloc reports what it reserved read/write (its arena, committed lazily), which
        // can exceed what is touched; the resident set bounds it.
        committed: crate::alloc::allocator_committed().min(rss).max(used),
        clients: connected * 20000 + pending,
        aof_buffer: host.aof().map_or(0, |a| a.pending.len()),
        lua,
        functions: crate::script::functions::overhead(srv),
        dbs,
        keys,
    }
}

// ---- MONITOR, SLOWLOG and CLIENT PAUSE: the hooks dispatch calls ---------------------------------------------------------

/// A monitor that has this much output not yet written is disconnected (its backlog must not
/// grow without bound under load).
pub const MONITOR_OUTPUT_LIMIT: usize = 64 * 1024 * 1024;

pub const REDACTED: Bytes = Bytes::from_static(b"(redacted)");

/// The arguments as MONITOR and SLOWLOG show them: passwords of AUTH and HELLO ... AUTH replaced
/// by "(redacted)", as Redis does.
pub fn shown_args(argv: &[Bytes]) -> Vec<Bytes> {
    let mut out: Vec<Bytes> = argv.to_vec();
    if is(&argv[0], "auth") {
        for a in out.iter_mut().skip(1) {
            *a = REDACTED;
        }
    } else if is(&argv[0], "config") && argv.len() > 3 && is(&argv[1], "set") {
        // Redis redacts the values of its SENSITIVE_CONFIG directives (configSetCommand).
        for pair in out[2..].chunks_mut(2) {
            if let [name, value] = pair {
                if ["requirepass", "masterauth", "masteruser", "cluster-secret"]
                    .iter()
                    .any(|sensitive| is(name, sensitive))
                {
                    *value = REDACTED;
                }
            }
        }
    } else if is(&argv[0], "acl") && argv.len() > 2 && is(&argv[1], "setuser") {
        // Every argument after the subcommand, as Redis's aclCommand does.
        for a in out.iter_mut().skip(2) {
            *a = REDACTED;
        }
    } else if is(&argv[0], "migrate") {
        // migrateCommand redacts AUTH's password and AUTH2's user and password.
        let mut i = 6;
        while i < out.len() && !is(&out[i], "keys") {
            let n = if is(&out[i], "auth") {
                1
            } else if is(&out[i], "auth2") {
                2
            } else {
                0
            };
            for a in out.iter_mut().skip(i + 1).take(n) {
                *a = REDACTED;
            }
            i += 1 + n;
        }
    } else if is(&argv[0], "hello") {
        let mut i = 2;
        while i < out.len() {
            if is(&out[i], "auth") && i + 2 < out.len() {
                out[i + 1] = REDACTED;
                out[i + 2] = REDACTED;
                i += 3;
            } else if is(&out[i], "setname") {
                i += 2;
            } else {
                break;
            }
        }
    }
    out
}

/// Redis's `sdscatrepr`: a quoted string with C escapes for non-printable bytes.
pub fn repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// One MONITOR line: `+1700000000.123456 [0 127.0.0.1:5000] "set" "k" "v"\r\n`.
pub fn monitor_line(unix_us: u64, db: usize, source: &str, argv: &[Bytes]) -> Vec<u8> {
    let mut line = format!(
        "+{}.{:06} [{} {}]",
        unix_us / 1_000_000,
        unix_us % 1_000_000,
        db,
        source
    )
    .into_bytes();
    for a in shown_args(argv) {
        line.push(b' ');
        repr(&mut line, &a);
    }
    line.extend_from_slice(b"\r\n");
    line
}

/// Sends a command that just ran to every monitor (Redis's `replicationFeedMonitors`).
pub fn feed_monitors(srv: &mut State, client: &Client, in_script: bool, argv: &[Bytes]) {
    let source = if in_script {
        "lua".to_string()
    } else {
        client.addr.to_string()
    };
    let line = monitor_line(crate::clock::unix_us(), client.db, &source, argv);
    let line = Bytes::from(line);
    let current = client.id;
    let ops = &mut srv.ops;
    let clients = &mut srv.clients;
    ops.monitors.retain(|&id| {
        if id == current {
            // Its own command: the line follows its reply (dispatch::process appends it).
            ops.self_feed.extend_from_slice(&line);
            return true;
        }
        let Some(m) = clients.get_mut(&id) else {
            return false; // disconnected
        };
        if m.pending_out() > MONITOR_OUTPUT_LIMIT {
            tracing::warn!("Closing monitor client id={id}: output backlog over the limit");
            if let Some(m) = clients.remove(&id) {
                m.kill();
            }
            return false;
        }
        m.push(line.clone(), false);
        true
    });
}

pub fn end_pause(srv: &mut State) {
    let p = &mut srv.ops.pause;
    p.until_ms = 0;
    p.ended = !p.waiting.is_empty();
}

/// Redis's SLOWLOG_ENTRY_MAX_ARGC and SLOWLOG_ENTRY_MAX_STRING.
pub const SLOWLOG_MAX_ARGC: usize = 32;

pub const SLOWLOG_MAX_STRING: usize = 128;

/// Redis's `slowlogPushEntryIfNeeded` for a command that took `usec`.
pub fn slowlog_push(srv: &mut State, client: &Client, argv: &[Bytes], usec: u64) {
    let threshold = srv.config.slowlog_log_slower_than;
    if threshold < 0 || (usec as i64) < threshold {
        return;
    }
    let shown = shown_args(argv);
    let mut args: Vec<Bytes> = Vec::with_capacity(shown.len().min(SLOWLOG_MAX_ARGC));
    for (i, a) in shown.iter().enumerate() {
        if i == SLOWLOG_MAX_ARGC - 1 && shown.len() > SLOWLOG_MAX_ARGC {
            args.push(Bytes::from(format!(
                "... ({} more arguments)",
                shown.len() - SLOWLOG_MAX_ARGC + 1
            )));
            break;
        }
        if a.len() > SLOWLOG_MAX_STRING {
            let mut s = a[..SLOWLOG_MAX_STRING].to_vec();
            s.extend_from_slice(
                format!("... ({} more bytes)", a.len() - SLOWLOG_MAX_STRING).as_bytes(),
            );
            args.push(Bytes::from(s));
        } else {
            // A copy: the request buffer must not be kept alive by the log.
            args.push(Bytes::copy_from_slice(a));
        }
    }
    let ops = &mut srv.ops;
    let id = ops.slowlog_next_id;
    ops.slowlog_next_id += 1;
    ops.slowlog.push_front(SlowEntry {
        id,
        unix_secs: crate::clock::unix_ms() / 1000,
        usec,
        argv: args,
        peer: client.addr.to_string(),
        name: client.name.clone().unwrap_or_default(),
    });
    let max = srv.config.slowlog_max_len as usize;
    ops.slowlog.truncate(max);
}

/// A MONITOR client may not touch the keyspace (Redis flags it as a replica).
pub fn check_monitor(srv: &State, client: &Client, spec: &CommandSpec) -> Result<(), CmdError> {
    if !srv.ops.monitors.is_empty()
        && spec.has(flags::WRITE | flags::READONLY | flags::MAY_REPLICATE)
        && srv.ops.monitors.contains(&client.id)
    {
        return Err(CmdError::err(
            "ERR Replica can't interact with the keyspace",
        ));
    }
    Ok(())
}

/// Whether CLIENT PAUSE holds back this command now (checked before it runs).
pub fn paused(srv: &mut State, spec: &CommandSpec, now_ms: u64) -> bool {
    let p = &mut srv.ops.pause;
    if p.until_ms == 0 {
        return false;
    }
    if now_ms >= p.until_ms {
        end_pause(srv);
        return false;
    }
    p.all || spec.has(flags::WRITE | flags::MAY_REPLICATE)
}

// ---- ACL LOG --------------------------------------------------------------------------

/// Redis's addACLLogEntry: a denial similar to one of the last ten entries within a minute
/// bumps that entry (moved to the front) instead of adding one.
pub fn add_log_entry(
    srv: &mut State,
    client: &Client,
    reason: &'static str,
    context: &'static str,
    object: Bytes,
    username: Option<&[u8]>,
) {
    let now = crate::clock::unix_ms();
    let username = Bytes::copy_from_slice(username.unwrap_or(client.user.as_bytes()));
    let mut client_info = String::new();
    client.info_line(&mut client_info);
    if client_info.ends_with('\n') {
        client_info.pop();
    }
    let log = &mut srv.ops.acl_log;
    let similar = log.iter().take(10).position(|e| {
        e.reason == reason
            && e.context == context
            && e.ctime_ms.abs_diff(now) <= 60_000
            && e.object == object
            && e.username == username
    });
    if let Some(i) = similar {
        if let Some(mut e) = log.remove(i) {
            e.count += 1;
            e.ctime_ms = now;
            e.client_info = client_info;
            log.push_front(e);
        }
        return;
    }
    log.push_front(AclLogEntry {
        count: 1,
        reason,
        context,
        object,
        username,
        ctime_ms: now,
        client_info,
    });
    log.truncate(srv.config.acllog_max_len as usize);
}

// ---- The cluster view as Redis roles --------------------------------------------------

/// Redis's `shared.masterdownerr`, without the leading `-`.
pub const MASTERDOWN: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// Redis's NOREPLICAS refusal (shared.noreplicaserr).
pub const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

/// Redis's `checkGoodReplicasStatus`: false when this master has fewer good replicas than
/// `min-replicas-to-write` (both it and `min-replicas-max-lag` nonzero). A lone server counts
/// its Redis replicas whose last REPLCONF ACK is that recent; a cluster leader counts the members it heard from within `min-replicas-max-lag`
/// seconds (Redis: replicas whose last REPLCONF ACK is that recent). A replica (follower)
/// passes, as in Redis. Unset (the default): one map lookup.
pub fn good_replicas_ok(srv: &State, host: &dyn crate::machine::Host) -> bool {
    let Some(to_write) = srv.config.compat.get("min-replicas-to-write") else {
        return true;
    };
    let to_write: u64 = to_write.parse().unwrap_or(0);
    let max_lag: u64 = srv
        .config
        .compat_value("min-replicas-max-lag")
        .parse()
        .unwrap_or(0);
    if to_write == 0 || max_lag == 0 {
        return true;
    }
    let Some(view) = host.cluster() else {
        // Redis replicas heard from within the lag (REPLCONF ACK every second).
        let good = (srv.redis_master).good(crate::clock::unix_ms(), max_lag);
        return good >= to_write;
    };
    if is_replica(Some(view)) {
        return true;
    }
    let good = view
        .members
        .iter()
        .filter(|m| m.id != view.id)
        .filter(|m| {
            host.cluster_idle_ms(m.id)
                .is_some_and(|idle| idle <= max_lag.saturating_mul(1000))
        })
        .count() as u64;
    good >= to_write
}

/// Redis's `shared.roslaveerr`, without the leading `-`.
pub const READONLY: &str = "READONLY You can't write against a read only replica.";

/// A follower (or a candidate: any member that is not the leader) refuses writes, as a
/// read-only Redis replica does. A lone server never does.
pub fn is_replica(view: Option<&ClusterView>) -> bool {
    view.is_some_and(|v| v.role != StateRole::Leader)
}

/// Writes from clients are refused (READONLY): a cluster follower, or a replica of a Redis
/// master with `replica-read-only yes` (Redis's default).
pub fn refuses_writes(srv: &State, view: Option<&ClusterView>) -> bool {
    is_replica(view)
        || (srv.replica.following() && srv.config.compat_value("replica-read-only") != "no")
}

/// A replica of a Redis master whose link is not up, with `replica-serve-stale-data no`:
/// what is not flagged `stale` answers MASTERDOWN (Redis's processCommand).
pub fn stale_refused(srv: &State) -> bool {
    srv.replica.following()
        && !srv.replica.link_up()
        && srv.config.compat_value("replica-serve-stale-data") == "no"
}

/// "host port peerport" → (host, client port).
pub fn addr(m: &Member) -> (&str, &str) {
    let (host, port, _) = m.endpoint();
    (host, port)
}

pub fn leader(view: &ClusterView) -> Option<&Member> {
    if view.leader == 0 {
        return None;
    }
    view.members.iter().find(|m| m.id == view.leader)
}

/// Members other than the leader: the master's replicas.
pub fn replicas(view: &ClusterView) -> impl Iterator<Item = &Member> {
    view.members.iter().filter(move |m| m.id != view.leader)
}

/// Replicas this node currently hears from: what Redis lists as connected.
pub fn connected(view: &ClusterView) -> impl Iterator<Item = &Member> {
    replicas(view).filter(|m| m.active)
}

pub fn voters(view: &ClusterView) -> usize {
    view.members.iter().filter(|m| m.voter).count()
}

/// A member's run id as every node renders it (see the module comment).
pub fn run_id(id: u64) -> String {
    format!("{id:040x}")
}

/// HELLO's `role` field.
pub fn hello_role(view: Option<&ClusterView>) -> &'static str {
    if is_replica(view) {
        "replica"
    } else {
        "master"
    }
}

/// The `# Replication` section of INFO on a server outside cluster mode that masters Redis
/// replicas or none (machine/redis_master.rs), as Redis 7.0 prints it.
pub fn info_lone_master(srv: &State, out: &mut String) {
    out.push_str("# Replication\r\nrole:master\r\n");
    let size = srv
        .config
        .compat_value("repl-backlog-size")
        .parse()
        .unwrap_or(1 << 20);
    (srv.redis_master).info(&srv.repl_id, size, crate::clock::unix_ms(), out);
}

/// The `# Replication` section of INFO, as Redis 7.0 prints it for a lone master, a master
/// with replicas and a replica. `repl_id`: what the server prints as `master_replid`.
pub fn info_section(view: Option<&ClusterView>, repl_id: &str, out: &mut String) {
    let zeros = "0000000000000000000000000000000000000000";
    let Some(view) = view else {
        let _ = write!(
            out,
            "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_replid:{repl_id}\r\nmaster_replid2:{zeros}\r\nmaster_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\nrepl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n"
        );
        return;
    };
    let offset = if view.role == StateRole::Leader {
        out.push_str("# Replication\r\nrole:master\r\n");
        let _ = write!(out, "connected_slaves:{}\r\n", connected(view).count());
        for (i, m) in connected(view).enumerate() {
            let (ip, port) = addr(m);
            let _ = write!(
                out,
                "slave{i}:ip={ip},port={port},state=online,offset={},lag=0\r\n",
                m.matched
            );
        }
        view.commit
    } else {
        out.push_str("# Replication\r\nrole:slave\r\n");
        let (host, port, up) = match leader(view) {
            Some(m) => {
                let (h, p) = addr(m);
                (h, p, true)
            }
            None => ("", "0", false),
        };
        let _ = write!(
            out,
            "master_host:{host}\r\nmaster_port:{port}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:0\r\nslave_read_repl_offset:{a}\r\nslave_repl_offset:{a}\r\n",
            if up { "up" } else { "down" },
            if up { 0 } else { -1 },
            a = view.applied,
        );
        if !up {
            out.push_str("master_link_down_since_seconds:-1\r\n");
        }
        out.push_str("slave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\nconnected_slaves:0\r\n");
        view.applied
    };
    let _ = write!(
        out,
        "master_failover_state:no-failover\r\nmaster_replid:{repl_id}\r\nmaster_replid2:{zeros}\r\nmaster_repl_offset:{offset}\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:1\r\nrepl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:1\r\nrepl_backlog_histlen:{offset}\r\n"
    );
}

/// INFO's `# Replication` for a replica of a Redis master, or a master that was one (its
/// replid2 and offset), as Redis 7.0 prints them; false when neither (`info_section` then).
pub fn info_redis_replica(srv: &State, out: &mut String) -> bool {
    let r = &srv.replica;
    let zeros = "0000000000000000000000000000000000000000";
    let unix_s = crate::clock::unix_ms() / 1000;
    match r.master.as_ref() {
        Some(m) => {
            let state = m.link.state();
            let up = state == crate::machine::replica_link::LinkState::Connected;
            let secs = |ms: u64| unix_s.saturating_sub(ms / 1000) as i64;
            let last_io = if up {
                secs(m.link.last_io_ms.load(Ordering::Relaxed))
            } else {
                -1
            };
            let syncing = state == crate::machine::replica_link::LinkState::Sync;
            let fresh = m.uncached && m.synced_at.is_none();
            let _ = write!(
                out,
                "# Replication\r\nrole:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{last_io}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{}\r\nslave_repl_offset:{}\r\n",
                m.host,
                m.port,
                if up { "up" } else { "down" },
                syncing as u8,
                if fresh { 1 } else { m.link.read_offset.load(Ordering::Relaxed).max(r.offset) },
                if fresh { 1 } else { r.offset },
            );
            if syncing {
                let total = m.link.sync_total.load(Ordering::Relaxed) as i64;
                let read = m.link.sync_read.load(Ordering::Relaxed) as i64;
                let perc = if total > 0 {
                    read as f64 * 100.0 / total as f64
                } else {
                    0.0
                };
                let _ = write!(
                    out,
                    "master_sync_total_bytes:{total}\r\nmaster_sync_read_bytes:{read}\r\nmaster_sync_left_bytes:{}\r\nmaster_sync_perc:{perc:.2}\r\nmaster_sync_last_io_seconds_ago:{}\r\n",
                    total.saturating_sub(read),
                    secs(m.link.last_io_ms.load(Ordering::Relaxed)),
                );
            }
            if !up {
                let down = m.link.down_since_ms.load(Ordering::Relaxed);
                let since = if down == 0 { -1 } else { secs(down) };
                let _ = write!(out, "master_link_down_since_seconds:{since}\r\n");
            }
            let _ = write!(
                out,
                "slave_priority:{}\r\nslave_read_only:{}\r\nreplica_announced:{}\r\n",
                srv.config.compat_value("replica-priority"),
                (srv.config.compat_value("replica-read-only") != "no") as u8,
                (srv.config.compat_value("replica-announced") != "no") as u8,
            );
        }
        // A promoted replica that has no Redis replica of its own yet (the master side's
        // backlog then starts a new history: machine/redis_master.rs).
        None if r.replid2.is_some() && !srv.redis_master.active() => {
            out.push_str("# Replication\r\nrole:master\r\n");
        }
        None => return false,
    }
    let (id2, second) = match &r.replid2 {
        Some((id, off)) => (id.as_str(), *off as i64),
        None => (zeros, -1),
    };
    // The backlog a replica keeps from its first synchronisation (Redis's, 1 MB by default);
    // a promoted replica keeps it.
    let (active, first, hist) = match r.backlog_from {
        Some(start) => {
            let hist = r.offset.saturating_sub(start).min(1 << 20);
            (1, r.offset + 1 - hist, hist)
        }
        None => (0, 0, 0),
    };
    let _ = write!(
        out,
        "connected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_replid:{}\r\nmaster_replid2:{id2}\r\nmaster_repl_offset:{}\r\nsecond_repl_offset:{second}\r\nrepl_backlog_active:{active}\r\nrepl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:{first}\r\nrepl_backlog_histlen:{hist}\r\n",
        srv.repl_id,
        r.offset,
    );
    true
}
