//! Observability: MONITOR, SLOWLOG, LATENCY, and CLIENT PAUSE/UNPAUSE (rows in connection.rs).
//!
//! Costs nothing while unused: dispatch tests `monitors.is_empty()` and the slowlog threshold,
//! and the executor tests one integer for a pause.

use super::args::{int_arg, is};
use super::table::{flags::*, CommandSpec, NO_KEYS};
use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::machine::client::Client;
use crate::machine::State;
use crate::protocol::Frame;
use bytes::Bytes;
use std::sync::atomic::Ordering;

/// A monitor that has this much output not yet written is disconnected (its backlog must not
/// grow without bound under load).
const MONITOR_OUTPUT_LIMIT: usize = 64 * 1024 * 1024;
/// Redis's SLOWLOG_ENTRY_MAX_ARGC and SLOWLOG_ENTRY_MAX_STRING.
const SLOWLOG_MAX_ARGC: usize = 32;
const SLOWLOG_MAX_STRING: usize = 128;

pub use crate::machine::ops::{OpsState, Pause, SlowEntry};

// ---- redaction and formatting -----------------------------------------------------------------

const REDACTED: Bytes = Bytes::from_static(b"(redacted)");

/// The arguments as MONITOR and SLOWLOG show them: passwords of AUTH and HELLO ... AUTH replaced
/// by "(redacted)", as Redis does.
fn shown_args(argv: &[Bytes]) -> Vec<Bytes> {
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
fn monitor_line(unix_us: u64, db: usize, source: &str, argv: &[Bytes]) -> Vec<u8> {
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

// ---- hooks called from dispatch -------------------------------------------------------------

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
        && spec.has(WRITE | READONLY | MAY_REPLICATE)
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
    p.all || spec.has(WRITE | MAY_REPLICATE)
}

fn end_pause(srv: &mut State) {
    let p = &mut srv.ops.pause;
    p.until_ms = 0;
    p.ended = !p.waiting.is_empty();
}

/// Called from the executor's timer: ends an expired pause.
pub fn tick(srv: &mut State, now_ms: u64) {
    if srv.ops.pause.until_ms != 0 && now_ms >= srv.ops.pause.until_ms {
        end_pause(srv);
    }
}

// ---- commands ---------------------------------------------------------------------------------

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: &'static [&'static str],
    handler: super::Handler,
    subcommands: &'static [CommandSpec],
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys: NO_KEYS,
        acl,
        handler,
        subcommands,
    }
}

pub static COMMANDS: &[CommandSpec] = &[
    spec(
        "monitor",
        1,
        ADMIN | NOSCRIPT | LOADING | STALE,
        &["admin", "slow", "dangerous"],
        monitor,
        &[],
    ),
    spec(
        "slowlog",
        -2,
        0,
        &["slow"],
        slowlog_help,
        &[
            spec("help", 2, LOADING | STALE, &["slow"], slowlog_help, &[]),
            spec(
                "get",
                -2,
                ADMIN | LOADING | STALE,
                &["admin", "slow", "dangerous"],
                slowlog_get,
                &[],
            ),
            spec(
                "len",
                2,
                ADMIN | LOADING | STALE,
                &["admin", "slow", "dangerous"],
                slowlog_len,
                &[],
            ),
            spec(
                "reset",
                2,
                ADMIN | LOADING | STALE,
                &["admin", "slow", "dangerous"],
                slowlog_reset,
                &[],
            ),
        ],
    ),
    spec(
        "latency",
        -2,
        0,
        &["slow"],
        latency_help,
        &[
            spec("help", 2, LOADING | STALE, &["slow"], latency_help, &[]),
            spec(
                "latest",
                2,
                ADMIN | NOSCRIPT | LOADING | STALE,
                &["admin", "slow", "dangerous"],
                latency_latest,
                &[],
            ),
            spec(
                "history",
                3,
                ADMIN | NOSCRIPT | LOADING | STALE,
                &["admin", "slow", "dangerous"],
                latency_history,
                &[],
            ),
            spec(
                "reset",
                -2,
                ADMIN | NOSCRIPT | LOADING | STALE,
                &["admin", "slow", "dangerous"],
                latency_reset,
                &[],
            ),
            spec(
                "doctor",
                2,
                ADMIN | NOSCRIPT | LOADING | STALE,
                &["admin", "slow", "dangerous"],
                latency_doctor,
                &[],
            ),
            spec(
                "graph",
                3,
                ADMIN | NOSCRIPT | LOADING | STALE,
                &["admin", "slow", "dangerous"],
                latency_graph,
                &[],
            ),
            spec(
                "histogram",
                -2,
                ADMIN | NOSCRIPT | LOADING | STALE,
                &["admin", "slow", "dangerous"],
                latency_histogram,
                &[],
            ),
        ],
    ),
];

fn monitor(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if ctx.srv.ops.monitors.contains(&ctx.client.id) {
        // Redis ignores a second MONITOR without replying.
        ctx.client.skip_reply = true;
        return Ok(Frame::ok());
    }
    ctx.client
        .shared
        .timeout_exempt
        .store(true, Ordering::Relaxed);
    ctx.srv.ops.monitors.push(ctx.client.id);
    Ok(Frame::ok())
}

fn help_frame(lines: &[&'static str]) -> Frame {
    Frame::Array(lines.iter().map(|l| Frame::simple(l)).collect())
}

fn slowlog_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(help_frame(&[
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
        "HELP",
        "    Prints this help.",
    ]))
}

fn slowlog_get(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let count = match argv.len() {
        2 => 10,
        3 => int_arg(&argv[2])
            .ok()
            .filter(|n| *n >= -1)
            .ok_or(CmdError::err(
                "ERR count should be greater than or equal to -1",
            ))?,
        _ => {
            return Err(CmdError::erf(format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
                String::from_utf8_lossy(&argv[1][..argv[1].len().min(128)])
            )))
        }
    };
    let log = &ctx.srv.ops.slowlog;
    let n = if count == -1 {
        log.len()
    } else {
        (count as usize).min(log.len())
    };
    Ok(Frame::Array(
        log.iter()
            .take(n)
            .map(|e| {
                Frame::Array(vec![
                    Frame::Integer(e.id as i64),
                    Frame::Integer(e.unix_secs as i64),
                    Frame::Integer(e.usec as i64),
                    Frame::Array(e.argv.iter().cloned().map(Frame::Bulk).collect()),
                    Frame::Bulk(Bytes::from(e.peer.clone())),
                    Frame::Bulk(e.name.clone()),
                ])
            })
            .collect(),
    ))
}

fn slowlog_len(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Integer(ctx.srv.ops.slowlog.len() as i64))
}

fn slowlog_reset(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    ctx.srv.ops.slowlog.clear();
    Ok(Frame::ok())
}

/// LATENCY's event monitor (LATEST, HISTORY, RESET, GRAPH, DOCTOR) records nothing: Redis's
/// does not either with its default `latency-monitor-threshold 0`, and deadbolt accepts that
/// directive without effect (the log says so). HISTOGRAM answers from the per-command latency
/// histograms (`latency-tracking`, machine/latency.rs).
fn latency_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(help_frame(&[
        "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Return a human readable latency analysis report.",
        "GRAPH <event>",
        "    Return an ASCII latency graph for the <event> class.",
        "HISTORY <event>",
        "    Return time-latency samples for the <event> class.",
        "LATEST",
        "    Return the latest latency samples for all events.",
        "RESET [<event> ...]",
        "    Reset latency data of one or more <event> classes.",
        "    (default: reset all data for all event classes)",
        "HISTOGRAM [COMMAND ...]",
        "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
        "    If no commands are specified then all histograms are replied.",
        "HELP",
        "    Prints this help.",
    ]))
}

fn latency_latest(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Array(Vec::new()))
}

fn latency_history(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Array(Vec::new()))
}

fn latency_reset(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Integer(0))
}

fn latency_doctor(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Verbatim(Bytes::from_static(
        b"I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n",
    )))
}

fn latency_graph(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Err(CmdError::erf(format!(
        "No samples available for event '{}'",
        String::from_utf8_lossy(&argv[2])
    )))
}

/// Redis's LATENCY HISTOGRAM: per command (all that have calls, or the names given, unknown
/// ones skipped) its calls and cumulative counts at power-of-two µs bounds.
fn latency_histogram(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let table = crate::cmd::table::table();
    let mut ids: Vec<usize> = Vec::new();
    if argv.len() == 2 {
        ids.extend((0..table.entries.len()).filter(|&id| {
            ctx.srv.stats.commands[id]
                .latency
                .as_ref()
                .is_some_and(|h| h.total > 0)
        }));
    } else {
        for name in &argv[2..] {
            let lower = name.to_ascii_lowercase();
            let found = table
                .entries
                .iter()
                .position(|e| e.full_name.as_bytes() == lower.as_slice());
            if let Some(id) = found.filter(|id| !ids.contains(id)) {
                ids.push(id);
            }
        }
    }
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let hist = ctx.srv.stats.commands[id].latency.as_ref();
        let calls = hist.map_or(0, |h| h.total);
        let buckets = hist.map(|h| h.power_of_two_usec()).unwrap_or_default();
        out.push((
            Frame::Bulk(Bytes::from(table.entries[id].full_name.clone())),
            Frame::Map(vec![
                (Frame::bulk_static("calls"), Frame::Integer(calls as i64)),
                (
                    Frame::bulk_static("histogram_usec"),
                    Frame::Map(
                        buckets
                            .into_iter()
                            .map(|(us, n)| (Frame::Integer(us as i64), Frame::Integer(n as i64)))
                            .collect(),
                    ),
                ),
            ]),
        ));
    }
    Ok(Frame::Map(out))
}

// ---- CLIENT PAUSE / UNPAUSE (rows in connection.rs) -------------------------------------------

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

/// Redis 7.0's command tips of the family (its commands.c).
pub static TIPS: &[(&str, &[&str])] = &[
    (
        "slowlog|get",
        &["request_policy:all_nodes", "nondeterministic_output"],
    ),
    (
        "slowlog|len",
        &[
            "request_policy:all_nodes",
            "response_policy:agg_sum",
            "nondeterministic_output",
        ],
    ),
    (
        "slowlog|reset",
        &["request_policy:all_nodes", "response_policy:all_succeeded"],
    ),
    (
        "latency|latest",
        &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
    ),
    (
        "latency|history",
        &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
    ),
    (
        "latency|reset",
        &["request_policy:all_nodes", "response_policy:all_succeeded"],
    ),
    (
        "latency|doctor",
        &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
    ),
    (
        "latency|graph",
        &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
    ),
    (
        "latency|histogram",
        &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monitor_line_format() {
        let argv: Vec<Bytes> = ["set", "bin", "a\x01\x7f\u{e9}\n\tz\"\\\r\x07\x08"]
            .iter()
            .map(|s| Bytes::from(s.to_string()))
            .collect();
        let line = monitor_line(1_795_318_446_889_218, 3, "127.0.0.1:55016", &argv);
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "+1795318446.889218 [3 127.0.0.1:55016] \"set\" \"bin\" \"a\\x01\\x7f\\xc3\\xa9\\n\\tz\\\"\\\\\\r\\a\\b\"\r\n"
        );
        let line = monitor_line(5, 0, "lua", &[Bytes::from_static(b"get")]);
        assert_eq!(line, b"+0.000005 [0 lua] \"get\"\r\n");
    }

    #[test]
    fn passwords_are_redacted() {
        let b = |v: &[&str]| {
            v.iter()
                .map(|s| Bytes::from(s.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(shown_args(&b(&["AUTH", "pw"])), b(&["AUTH", "(redacted)"]));
        assert_eq!(
            shown_args(&b(&[
                "CONFIG",
                "SET",
                "hz",
                "5",
                "REQUIREPASS",
                "pw",
                "maxmemory"
            ])),
            b(&[
                "CONFIG",
                "SET",
                "hz",
                "5",
                "REQUIREPASS",
                "(redacted)",
                "maxmemory"
            ])
        );
        assert_eq!(
            shown_args(&b(&["acl", "setuser", "u", ">pw"])),
            b(&["acl", "setuser", "(redacted)", "(redacted)"])
        );
        assert_eq!(
            shown_args(&b(&["auth", "u", "pw"])),
            b(&["auth", "(redacted)", "(redacted)"])
        );
        assert_eq!(
            shown_args(&b(&["HELLO", "3", "SETNAME", "n", "AUTH", "u", "pw"])),
            b(&[
                "HELLO",
                "3",
                "SETNAME",
                "n",
                "AUTH",
                "(redacted)",
                "(redacted)"
            ])
        );
        assert_eq!(
            shown_args(&b(&["SET", "auth", "x"])),
            b(&["SET", "auth", "x"])
        );
    }
}
