//! Observability: MONITOR, SLOWLOG and LATENCY (CLIENT PAUSE/UNPAUSE are in connection.rs; the
//! hooks dispatch calls on every command are in support.rs).
//!
//! Costs nothing while unused: dispatch tests `monitors.is_empty()` and the slowlog threshold,
//! and the executor tests one integer for a pause.

use super::args::int_arg;
use super::spec::Ctx;
use super::spec::{flags::*, CommandSpec, NO_KEYS};
use super::support::end_pause;
use crate::error::{CmdError, CmdResult};
use crate::machine::State;
use crate::protocol::Frame;
use bytes::Bytes;

pub use crate::machine::ops::{OpsState, Pause, SlowEntry};

// ---- redaction and formatting -----------------------------------------------------------------

// ---- hooks called from dispatch -------------------------------------------------------------

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
    handler: super::spec::Handler,
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
    ctx.client.shared.timeout_exempt.set(true);
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

/// LATENCY: Redis's latency monitor (events recorded at or over `latency-monitor-threshold`,
/// machine/latency.rs) and HISTOGRAM from the per-command latency histograms
/// (`latency-tracking`).
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

fn latency_latest(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Array(
        ctx.srv
            .stats
            .latency_events
            .events()
            .map(|(event, ts)| {
                let (time, ms) = ts.last();
                Frame::Array(vec![
                    Frame::Bulk(Bytes::copy_from_slice(event.as_bytes())),
                    Frame::Integer(time),
                    Frame::Integer(ms as i64),
                    Frame::Integer(ts.max as i64),
                ])
            })
            .collect(),
    ))
}

fn latency_history(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Array(
        ctx.srv
            .stats
            .latency_events
            .get(&argv[2])
            .map(|ts| {
                ts.samples()
                    .map(|(t, ms)| Frame::Array(vec![Frame::Integer(t), Frame::Integer(ms as i64)]))
                    .collect()
            })
            .unwrap_or_default(),
    ))
}

fn latency_reset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let m = &mut ctx.srv.stats.latency_events;
    let resets = if argv.len() == 2 {
        m.reset(None)
    } else {
        argv[2..].iter().map(|e| m.reset(Some(e))).sum()
    };
    Ok(Frame::Integer(resets as i64))
}

fn latency_doctor(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    // THPGetAnonHugePagesSize: huge pages mapped by this process.
    let anon_huge_pages = std::fs::read_to_string("/proc/self/smaps_rollup")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("AnonHugePages:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .is_some_and(|kb| kb > 0);
    let cfg = &ctx.srv.config;
    let inputs = crate::machine::latency::DoctorInputs {
        slowlog_log_slower_than: cfg.slowlog_log_slower_than,
        hz: cfg.hz,
        fsync_always: cfg.appendfsync == crate::config::Fsync::Always,
        anon_huge_pages,
    };
    let now = (crate::clock::unix_ms() / 1000) as i64;
    let report = crate::machine::latency::doctor(&ctx.srv.stats.latency_events, now, &inputs);
    Ok(Frame::Verbatim(Bytes::from(report)))
}

fn latency_graph(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let Some(ts) = ctx.srv.stats.latency_events.get(&argv[2]) else {
        return Err(CmdError::erf(format!(
            "No samples available for event '{}'",
            String::from_utf8_lossy(&argv[2])
        )));
    };
    let event = String::from_utf8_lossy(&argv[2]);
    let now = (crate::clock::unix_ms() / 1000) as i64;
    Ok(Frame::Verbatim(Bytes::from(
        crate::machine::latency::graph(&event, ts, now),
    )))
}

/// Redis's LATENCY HISTOGRAM: per command that has calls (all of them, or those named, a
/// parent standing for its subcommands; unknown names skipped, a name given twice answered
/// twice) its calls and cumulative counts at power-of-two µs bounds.
fn latency_histogram(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let table = crate::cmd::registry::table();
    let has_calls = |id: usize| {
        ctx.srv.stats.commands[id]
            .latency
            .as_ref()
            .is_some_and(|h| h.total > 0)
    };
    let mut ids: Vec<usize> = Vec::new();
    if argv.len() == 2 {
        ids.extend((0..table.entries.len()).filter(|&id| has_calls(id)));
    } else {
        for name in &argv[2..] {
            let lower = name.to_ascii_lowercase();
            let Some(id) = table
                .entries
                .iter()
                .position(|e| e.full_name.as_bytes() == lower.as_slice())
            else {
                continue;
            };
            if has_calls(id) {
                ids.push(id);
            }
            let entry = &table.entries[id];
            let mut subs: Vec<usize> = entry.subs.values().copied().collect();
            subs.sort_unstable();
            ids.extend(subs.into_iter().filter(|&sub| has_calls(sub)));
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
    use crate::cmd::support::{monitor_line, shown_args};

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
