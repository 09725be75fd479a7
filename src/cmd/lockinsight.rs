//! LOCKS: lock insight as commands. `LOCKS LATE` lists the latest late releases (a holder that
//! released after its lease ran out: which key, which client, how late), newest first, like
//! SLOWLOG GET; `LOCKS LATE RESET` empties that history. `LOCKS HELD cursor [MATCH pattern]
//! [COUNT count]` walks the keyspace as SCAN does and answers the held locks among the keys it
//! visits: a lock is a key whose acquire lock insight remembers (`SET … NX`, a known acquire
//! script) and that was not released since — the keys INFO locks counts. The figures come from locks.rs,
//! which keeps them bounded and off the hot path; these commands only read them.

use super::args::{int_arg, is};
use super::spec::Ctx;
use super::spec::{flags::*, CommandSpec, NO_KEYS};
use super::support::{parse_cursor, parse_scan_opts};
use crate::error::{CmdError, CmdResult};
use crate::glob::glob_match;
use crate::locks::LateRelease;
use crate::protocol::Frame;
use crate::replication::{ClusterView, StateRole};
use crate::store::value::Value;
use bytes::Bytes;

impl crate::locks::Who for crate::machine::client::Client {
    fn id(&self) -> u64 {
        self.id
    }
    fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }
    /// A copy: the history outlives the connection, and must not keep its read buffer.
    fn name(&self) -> Option<Bytes> {
        self.name.as_deref().map(Bytes::copy_from_slice)
    }
}

/// Whose lock view this node shows, for `Insight::set_view` (the cron, once a second): alone,
/// none to name; in a cluster, the leader's own (it takes every lock operation), or a
/// follower's, which names the leader whose view counts.
pub fn view_of(view: Option<&ClusterView>) -> (bool, String) {
    let Some(v) = view else {
        return (true, String::new());
    };
    if v.role == StateRole::Leader {
        return (
            true,
            format!(
                "Cluster node {}, the leader: every lock operation of the cluster runs here, so this is the cluster's view (term {}).",
                v.id, v.term
            ),
        );
    }
    let leader = v
        .members
        .iter()
        .find(|m| v.leader != 0 && m.id == v.leader)
        .map(|m| {
            let (host, port, _) = m.endpoint();
            format!("node {} at {host}:{port}", m.id)
        })
        .unwrap_or_else(|| "not known yet".into());
    (
        false,
        format!(
            "Cluster node {}, a follower: lock operations run on the leader ({leader}); its page, LOCKS and metrics show them. This node shows only what it took while it led.",
            v.id
        ),
    )
}

/// How many entries `LOCKS LATE` without a count returns (SLOWLOG GET's default).
const DEFAULT_COUNT: usize = 10;

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

pub static COMMANDS: &[CommandSpec] = &[spec(
    "locks",
    -2,
    0,
    &["slow"],
    locks_help,
    &[
        spec("help", 2, LOADING | STALE, &["slow"], locks_help, &[]),
        spec(
            "held",
            -3,
            ADMIN | LOADING | STALE,
            &["admin", "slow", "dangerous"],
            locks_held,
            &[],
        ),
        spec(
            "late",
            -2,
            ADMIN | LOADING | STALE,
            &["admin", "slow", "dangerous"],
            locks_late,
            &[],
        ),
    ],
)];

fn locks_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::help(&[
        "LOCKS <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "HELD <cursor> [MATCH <pattern>] [COUNT <count>]",
        "    Walk the keyspace as SCAN does and return the next cursor and the held locks among the",
        "    keys visited: key, token, reentrant (a Redisson hold count), holder-id, holder-addr,",
        "    holder-name (the acquiring client, while connected), age-ms, lease-ms, remaining-ms",
        "    (the key's PTTL) and waiters (clients retrying for it).",
        "LATE [<count>]",
        "    Return the latest <count> late lock releases, newest first (default: 10, -1 means all).",
        "    A release is late when the holder's lease had run out: the key was gone or another",
        "    client's. Each entry has the fields id, time (unix ms), key, client-id, client-addr,",
        "    client-name, acquired (unix ms), lease-ms, late-ms and held-ms (nil when the acquire",
        "    was not seen).",
        "LATE RESET",
        "    Empty the late-release history.",
        "HELP",
        "    Prints this help.",
    ]))
}

fn wrong(argv: &[Bytes]) -> CmdError {
    CmdError::erf(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try LOCKS HELP.",
        String::from_utf8_lossy(&argv[1][..argv[1].len().min(128)])
    ))
}

fn locks_late(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let max = ctx.srv.config.lock_late_log_max_len as usize;
    ctx.srv.locks.set_late_max(max);
    let count = match argv.len() {
        2 => DEFAULT_COUNT,
        3 if is(&argv[2], "reset") => {
            ctx.srv.locks.clear_late_log();
            return Ok(Frame::ok());
        }
        3 => match int_arg(&argv[2]) {
            Ok(-1) => usize::MAX,
            Ok(n) if n >= 0 => n as usize,
            _ => {
                return Err(CmdError::err(
                    "ERR count should be greater than or equal to -1",
                ))
            }
        },
        _ => return Err(wrong(argv)),
    };
    Ok(Frame::Array(
        ctx.srv.locks.late_log().take(count).map(entry).collect(),
    ))
}

fn entry(e: &LateRelease) -> Frame {
    let opt = |v: Option<u64>| v.map_or(Frame::Null, |n| Frame::Integer(n as i64));
    let field = |name: &'static str, v: Frame| (Frame::bulk_static(name), v);
    Frame::Map(vec![
        field("id", Frame::Integer(e.id as i64)),
        field("time", Frame::Integer(e.at_ms as i64)),
        field("key", Frame::Bulk(Bytes::copy_from_slice(e.key()))),
        field("client-id", Frame::Integer(e.client_id as i64)),
        field("client-addr", Frame::bulk_from(e.client_addr.to_string())),
        field(
            "client-name",
            Frame::Bulk(e.client_name.clone().unwrap_or_default()),
        ),
        field("acquired", opt(e.acquired_ms)),
        field(
            "lease-ms",
            opt(e
                .acquired_ms
                .filter(|_| e.lease_ms != 0)
                .map(|_| e.lease_ms)),
        ),
        field("late-ms", opt(e.late_ms)),
        field(
            "held-ms",
            opt(e.acquired_ms.map(|a| e.at_ms.saturating_sub(a))),
        ),
    ])
}

/// A key LOCKS HELD visited that may be a lock: its token, hold count and PTTL.
struct Candidate {
    key: Bytes,
    token: Bytes,
    reentrant: i64,
    remaining_ms: i64,
}

fn locks_held(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let cursor = parse_cursor(&argv[2])?;
    let o = parse_scan_opts(&argv[3..], false)?;
    let now = ctx.now;
    let mut seen = Vec::new();
    let next = ctx.db().scan(cursor, o.count, now, |k, e| {
        if o.pattern.is_some_and(|p| !glob_match(p, k, false)) {
            return;
        }
        // A lock's value: the owner's token (SET NX), or Redisson's hash of owner → hold count.
        let (token, reentrant) = match &e.value {
            Value::Str(v) => (v.clone(), 1),
            Value::Hash(h) if h.len() == 1 => match h.get_index(0) {
                Some((f, n)) => (
                    Bytes::copy_from_slice(f),
                    std::str::from_utf8(n)
                        .ok()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0),
                ),
                None => return,
            },
            _ => return,
        };
        seen.push(Candidate {
            key: Bytes::copy_from_slice(k),
            token,
            reentrant,
            remaining_ms: if e.expires_at == 0 {
                -1
            } else {
                e.expires_at.saturating_sub(now) as i64
            },
        });
    });
    let locks = &ctx.srv.locks;
    let held: Vec<_> = seen
        .into_iter()
        .filter_map(|c| locks.held(&c.key, now).map(|h| (c, h)))
        .collect();
    let keys: Vec<&[u8]> = held.iter().map(|(c, _)| &c.key[..]).collect();
    let waiters = locks.waiting_for(&keys);
    let field = |name: &'static str, v: Frame| (Frame::bulk_static(name), v);
    let rows = held
        .iter()
        .zip(waiters)
        .map(|((c, h), waiters)| {
            // The caller is not in the client table while its command runs.
            let holder = if ctx.client.id == h.client {
                Some(&*ctx.client)
            } else {
                ctx.srv.clients.get(&h.client).map(|c| &**c)
            };
            Frame::Map(vec![
                field("key", Frame::Bulk(c.key.clone())),
                field("token", Frame::Bulk(c.token.clone())),
                field("reentrant", Frame::Integer(c.reentrant)),
                field("holder-id", Frame::Integer(h.client as i64)),
                field(
                    "holder-addr",
                    holder.map_or(Frame::Null, |cl| Frame::bulk_from(cl.addr.to_string())),
                ),
                field(
                    "holder-name",
                    holder.map_or(Frame::Null, |cl| {
                        Frame::Bulk(cl.name.clone().unwrap_or_default())
                    }),
                ),
                field(
                    "age-ms",
                    Frame::Integer(now.saturating_sub(h.acquired_ms) as i64),
                ),
                field(
                    "lease-ms",
                    if h.lease_ms == 0 {
                        Frame::Null
                    } else {
                        Frame::Integer(h.lease_ms as i64)
                    },
                ),
                field("remaining-ms", Frame::Integer(c.remaining_ms)),
                field("waiters", Frame::Integer(waiters as i64)),
            ])
        })
        .collect();
    let mut b = itoa::Buffer::new();
    Ok(Frame::Array(vec![
        Frame::Bulk(Bytes::copy_from_slice(b.format(next).as_bytes())),
        Frame::Array(rows),
    ]))
}
