//! The Redis Cluster protocol over a deadbolt Raft cluster of one group, so that cluster-mode
//! clients (redis-py `RedisCluster`, ioredis `Cluster`, Redisson `useClusterServers`, redis-cli
//! `-c` …) connect unchanged.
//!
//! It is on only where `cluster-enabled yes` is set on a Raft cluster node (`Host::cluster()`
//! is Some); a lone server refuses `cluster-enabled yes` at start (config/mod.rs
//! `cluster_refusal`), and a cluster node without it answers CLUSTER, READONLY, READWRITE and
//! ASKING as a Redis without cluster support does, and redirects nothing (the Sentinel-found
//! cluster stays exactly as it is).
//!
//! With one group the raft leader is the master of all 16,384 slots and every other member is
//! its replica. A node's id is its raft id in 40 hex digits (`replication::run_id`, the same id
//! SENTINEL answers), its address the client address the cluster configuration gives it. What
//! Redis derives from its cluster bus is rendered from the consensus core's view: the config
//! epochs are the raft term, a member this node has not heard from within an election timeout
//! is `fail?` and `disconnected`, the leader's replication offset is its commit index and a
//! replica's what the view knows of it (its matched index on the leader, the applied index on
//! the node itself, else the view's commit index). The bus message counters are 0: raft's
//! messages are not Redis's cluster bus messages.
//!
//! Redirection (`redirect`, called from dispatch where Redis's processCommand redirects, after
//! the ACL check): keys in different slots are refused with CROSSSLOT on every node; on a
//! follower a command with keys gets `MOVED <slot> <leader host>:<port>`, unless the client
//! sent READONLY and the command only reads (it is then served locally after the read barrier
//! every follower read takes, so it stays linearizable); while no leader is known, CLUSTERDOWN.
//! Keyless commands run as on any node. ASKING answers OK and changes nothing: with one group
//! no slot is ever importing, which is all the flag is read for in Redis.
//!
//! CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT walk database 0 (deadbolt keeps no slot index):
//! O(N) in the keys, as KEYS. As in Redis Cluster, database 0 is the only one (`only_db0`).

use super::args::is;
use super::slots::{addr, enabled, key_hash_slot, SLOTS};
use super::spec::{flags::*, CommandSpec, Ctx, NO_KEYS};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use crate::replication::{ClusterView, Member, StateRole};
use bytes::Bytes;
use std::fmt::Write;

const DISABLED: &str = "ERR This instance has cluster support disabled";

const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, NO_KEYS, &[], handler)
}

const CONN: &[&str] = &["connection"];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "cluster",
        arity: -2,
        flags: 0,
        keys: NO_KEYS,
        acl: &[],
        handler: container,
        subcommands: &[
            sub("slots", 2, STALE, slots),
            sub("shards", 2, STALE, shards),
            sub("nodes", 2, STALE, nodes),
            sub("info", 2, STALE, info),
            sub("myid", 2, STALE, myid),
            sub("keyslot", 3, STALE, keyslot),
            sub("countkeysinslot", 3, STALE, countkeysinslot),
            sub("getkeysinslot", 4, STALE, getkeysinslot),
            sub("links", 2, STALE, links),
            sub("reset", -2, ADMIN | STALE | NOSCRIPT, reset),
            sub("help", 2, LOADING | STALE, help),
        ],
    },
    CommandSpec::leaf(
        "readonly",
        1,
        FAST | LOADING | STALE,
        NO_KEYS,
        CONN,
        readonly,
    ),
    CommandSpec::leaf(
        "readwrite",
        1,
        FAST | LOADING | STALE,
        NO_KEYS,
        CONN,
        readwrite,
    ),
    CommandSpec::leaf("asking", 1, FAST, NO_KEYS, CONN, asking),
];

/// Command tips COMMAND INFO prints, as Redis 7.0.15's.
pub static TIPS: &[(&str, &[&str])] = &[
    ("cluster|getkeysinslot", &["nondeterministic_output"]),
    ("cluster|info", &["nondeterministic_output"]),
    ("cluster|links", &["nondeterministic_output"]),
    ("cluster|nodes", &["nondeterministic_output"]),
    ("cluster|shards", &["nondeterministic_output"]),
    ("cluster|slots", &["nondeterministic_output"]),
];

// ---- the view as Redis Cluster nodes ----

fn node_id(m: &Member) -> String {
    super::support::run_id(m.id)
}

/// The master first, then its replicas in id order.
fn ordered(view: &ClusterView) -> Vec<&Member> {
    let mut all: Vec<&Member> = view.members.iter().collect();
    all.sort_by_key(|m| (m.id != view.leader, m.id));
    all
}

/// What this node knows of a member's replication offset.
fn offset(view: &ClusterView, m: &Member) -> u64 {
    if m.id == view.id {
        if view.role == StateRole::Leader {
            view.commit
        } else {
            view.applied
        }
    } else if m.id == view.leader || m.matched == 0 {
        view.commit
    } else {
        m.matched
    }
}

fn view_or_disabled<'a>(ctx: &'a Ctx) -> Result<&'a ClusterView, CmdError> {
    if !enabled(ctx.srv, &*ctx.host) {
        return Err(CmdError::err(DISABLED));
    }
    ctx.host.cluster().ok_or(CmdError::err(DISABLED))
}

fn leader(view: &ClusterView) -> Option<&Member> {
    view.members.iter().find(|m| m.id == view.leader)
}

fn container(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    // Only reached with no subcommand, which the arity (-2) refuses first.
    Err(CmdError::unknown_command(argv))
}

/// Redis's addNodeToNodeReply with `cluster-preferred-endpoint-type ip` and no hostname.
fn slot_node(m: &Member) -> Frame {
    let (host, port, _) = addr(m);
    Frame::Array(vec![
        Frame::bulk_from(host),
        Frame::Integer(i64::from(port)),
        Frame::bulk_from(node_id(m)),
        Frame::Map(vec![]),
    ])
}

/// The members that lead some group (`cluster_shards`). A Redis Cluster node is a master or a
/// replica, never both, and clients keep one role per address (redis-py's last listed role
/// wins, so a group leader listed as another group's replica would be taken for a replica and
/// miss SCRIPT LOAD): with several groups a member leading one is listed as a master only.
fn leading(shards: &[(&ClusterView, Vec<(u16, u16)>)]) -> Vec<u64> {
    shards
        .iter()
        .map(|(v, _)| v.leader)
        .filter(|&l| l != 0)
        .collect()
}

/// CLUSTER SLOTS: each Raft group's slot ranges (one group: 0-16383), with the group's leader
/// and its live replicas (Redis lists only replicas that are available; members leading a
/// group are masters only, see `leading`), ascending by slot; a group without a known leader
/// is left out, so nothing while no leader is known.
fn slots(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    view_or_disabled(ctx)?;
    let mut out = Vec::new();
    let shards = ctx.host.cluster_shards();
    let leaders = leading(&shards);
    for (view, ranges) in shards {
        let Some(master) = leader(view) else {
            continue;
        };
        for (first, last) in ranges {
            let mut range = vec![
                Frame::Integer(i64::from(first)),
                Frame::Integer(i64::from(last)),
                slot_node(master),
            ];
            range.extend(
                ordered(view)
                    .into_iter()
                    .filter(|m| m.active && !leaders.contains(&m.id))
                    .map(slot_node),
            );
            out.push((first, Frame::Array(range)));
        }
    }
    out.sort_by_key(|r| r.0);
    Ok(Frame::Array(out.into_iter().map(|r| r.1).collect()))
}

fn text(s: &'static str) -> Frame {
    Frame::bulk_static(s)
}

/// CLUSTER SHARDS: a shard per Raft group (one group: every slot) whose leader is known, its
/// nodes as Redis's addNodeDetailsToShardReply describes them (a member leading another group
/// is in that group's shard only, see `leading`).
fn shards(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    view_or_disabled(ctx)?;
    let shards = ctx.host.cluster_shards();
    let leaders = leading(&shards);
    let shards = shards
        .into_iter()
        .filter(|(view, _)| view.leader != 0)
        .map(|(view, ranges)| shard(view, &ranges, &leaders))
        .collect();
    Ok(Frame::Array(shards))
}

fn shard(view: &ClusterView, ranges: &[(u16, u16)], leaders: &[u64]) -> Frame {
    let nodes = ordered(view)
        .into_iter()
        .filter(|m| m.id == view.leader || !leaders.contains(&m.id))
        .map(|m| {
            let (host, port, _) = addr(m);
            let master = m.id == view.leader;
            let health = if !m.active {
                "fail"
            } else if !master && offset(view, m) == 0 {
                "loading"
            } else {
                "online"
            };
            Frame::Map(vec![
                (text("id"), Frame::bulk_from(node_id(m))),
                (text("port"), Frame::Integer(i64::from(port))),
                (text("ip"), Frame::bulk_from(host)),
                (text("endpoint"), Frame::bulk_from(host)),
                (
                    text("role"),
                    text(if master { "master" } else { "replica" }),
                ),
                (
                    text("replication-offset"),
                    Frame::Integer(offset(view, m) as i64),
                ),
                (text("health"), text(health)),
            ])
        })
        .collect();
    let slots = ranges
        .iter()
        .flat_map(|&(a, b)| [Frame::Integer(i64::from(a)), Frame::Integer(i64::from(b))])
        .collect();
    Frame::Map(vec![
        (text("slots"), Frame::Array(slots)),
        (text("nodes"), Frame::Array(nodes)),
    ])
}

/// CLUSTER NODES: Redis's clusterGenNodesDescription, one line per member.
fn nodes(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let view = view_or_disabled(ctx)?;
    let now = crate::clock::unix_ms();
    let master = (view.leader != 0).then(|| super::support::run_id(view.leader));
    // The slots each member leads, over every group (one group: its leader's, 0-16383).
    let mut led: Vec<(u64, u16, u16)> = ctx
        .host
        .cluster_shards()
        .into_iter()
        .filter(|(v, _)| v.leader != 0)
        .flat_map(|(v, ranges)| ranges.into_iter().map(move |(a, b)| (v.leader, a, b)))
        .collect();
    led.sort_unstable_by_key(|r| r.1);
    let mut out = String::new();
    for m in ordered(view) {
        let (host, port, cport) = addr(m);
        let myself = m.id == view.id;
        let mut flags = String::new();
        if myself {
            flags.push_str("myself,");
        }
        let leads = m.id == view.leader || led.iter().any(|r| r.0 == m.id);
        flags.push_str(if leads { "master," } else { "slave," });
        if !m.active {
            flags.push_str("fail?,");
        }
        flags.pop();
        let of = match &master {
            Some(id) if !leads => id.as_str(),
            _ => "-",
        };
        let pong = if myself {
            0
        } else {
            ctx.host
                .cluster_idle_ms(m.id)
                .map_or(0, |idle| now.saturating_sub(idle))
        };
        let link = if myself || m.active {
            "connected"
        } else {
            "disconnected"
        };
        let _ = write!(
            out,
            "{} {host}:{port}@{cport} {flags} {of} 0 {pong} {} {link}",
            node_id(m),
            view.term
        );
        for &(_, a, b) in led.iter().filter(|r| r.0 == m.id) {
            if a == b {
                let _ = write!(out, " {a}");
            } else {
                let _ = write!(out, " {a}-{b}");
            }
        }
        out.push('\n');
    }
    Ok(Frame::Verbatim(Bytes::from(out)))
}

/// CLUSTER INFO, with Redis's fields (see the module comment for the epochs and counters),
/// counted per Raft group as Redis counts per master: a group's slots are assigned while its
/// leader is known, ok while that leader is live (fail otherwise); the state is ok only when
/// every slot is; `cluster_size` counts the groups owning slots with a known leader (Redis's
/// masters serving slots); the current epoch is the highest term, this node's the home group's.
fn info(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let view = view_or_disabled(ctx)?;
    let (mut assigned, mut ok, mut size, mut epoch) = (0u32, 0u32, 0u32, view.term);
    for (g, ranges) in ctx.host.cluster_shards() {
        epoch = epoch.max(g.term);
        if g.leader == 0 {
            continue;
        }
        let n: u32 = ranges
            .iter()
            .map(|&(a, b)| u32::from(b) - u32::from(a) + 1)
            .sum();
        assigned += n;
        size += 1;
        if leader(g).is_some_and(|m| m.active) {
            ok += n;
        }
    }
    let out = format!(
        "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{ok}\r\n\
         cluster_slots_pfail:0\r\ncluster_slots_fail:{}\r\ncluster_known_nodes:{}\r\n\
         cluster_size:{size}\r\ncluster_current_epoch:{epoch}\r\ncluster_my_epoch:{}\r\n\
         cluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\n\
         total_cluster_links_buffer_limit_exceeded:0\r\n",
        if ok == u32::from(SLOTS) { "ok" } else { "fail" },
        assigned - ok,
        view.members.len(),
        view.term,
    );
    Ok(Frame::Verbatim(Bytes::from(out)))
}

fn myid(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let view = view_or_disabled(ctx)?;
    Ok(Frame::bulk_from(super::support::run_id(view.id)))
}

fn keyslot(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    view_or_disabled(ctx)?;
    Ok(Frame::Integer(i64::from(key_hash_slot(&argv[2]))))
}

/// Keys of database 0 (the only one Redis Cluster has) in `slot`, at most `max`.
fn keys_in_slot(ctx: &mut Ctx, slot: u16, max: usize) -> Vec<Frame> {
    let now = ctx.now;
    let Some(db) = ctx.srv.dbs.first() else {
        return Vec::new();
    };
    db.iter()
        .filter(|(k, e)| !e.is_expired(now) && key_hash_slot(k) == slot)
        .take(max)
        .map(|(k, _)| Frame::Bulk(Bytes::copy_from_slice(k)))
        .collect()
}

fn countkeysinslot(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    view_or_disabled(ctx)?;
    let slot = super::args::int_arg(&argv[2])?;
    if !(0..i64::from(SLOTS)).contains(&slot) {
        return Err(CmdError::err("ERR Invalid slot"));
    }
    let now = ctx.now;
    let n = ctx.srv.dbs.first().map_or(0, |db| {
        db.iter()
            .filter(|(k, e)| !e.is_expired(now) && key_hash_slot(k) == slot as u16)
            .count()
    });
    Ok(Frame::Integer(n as i64))
}

fn getkeysinslot(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    view_or_disabled(ctx)?;
    let slot = super::args::int_arg(&argv[2])?;
    let max = super::args::int_arg(&argv[3])?;
    if !(0..i64::from(SLOTS)).contains(&slot) || max < 0 {
        return Err(CmdError::err("ERR Invalid slot or number of keys"));
    }
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    Ok(Frame::Array(keys_in_slot(ctx, slot as u16, max)))
}

/// CLUSTER LINKS: a link each way to every member this node hears from (raft's peer
/// connections), with Redis's fields. The view keeps no per-connection record, so
/// `create-time` is when this node started and the buffers (Redis's bus buffers) are 0.
/// CLUSTER RESET: a Redis Cluster node forgets its slots and peers. A deadbolt node's
/// membership is the Raft configuration's, changed through RAFT ADDLEARNER/REMOVE on the
/// leader; a node leaving on its own would break the majority it counts in, so this is
/// refused with the way to do it. Without cluster support: Redis's error.
fn reset(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    view_or_disabled(ctx)?;
    if argv.len() > 3
        || argv
            .get(2)
            .is_some_and(|m| !is(m, "hard") && !is(m, "soft"))
    {
        return Err(CmdError::Syntax);
    }
    Err(CmdError::err(
        "ERR CLUSTER RESET is not supported: a deadbolt cluster's membership is its Raft configuration (RAFT REMOVE on the leader takes a node out)",
    ))
}

fn links(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let view = view_or_disabled(ctx)?;
    let started =
        crate::clock::unix_ms().saturating_sub(ctx.srv.started.elapsed().as_millis() as u64);
    let mut out = Vec::new();
    for m in ordered(view) {
        if m.id == view.id || !m.active {
            continue;
        }
        for (direction, events) in [("to", "r"), ("from", "r")] {
            out.push(Frame::Map(vec![
                (text("direction"), text(direction)),
                (text("node"), Frame::bulk_from(node_id(m))),
                (text("create-time"), Frame::Integer(started as i64)),
                (text("events"), text(events)),
                (text("send-buffer-allocated"), Frame::Integer(0)),
                (text("send-buffer-used"), Frame::Integer(0)),
            ]));
        }
    }
    Ok(Frame::Array(out))
}

fn help(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    view_or_disabled(ctx)?;
    Ok(Frame::help(&[
        "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "COUNTKEYSINSLOT <slot>",
        "    Return the number of keys in <slot>.",
        "GETKEYSINSLOT <slot> <count>",
        "    Return key names stored by current node in a slot.",
        "INFO",
        "    Return information about the cluster.",
        "KEYSLOT <key>",
        "    Return the hash slot for <key>.",
        "MYID",
        "    Return the node id.",
        "NODES",
        "    Return cluster configuration seen by node. Output format:",
        "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
        "SLOTS",
        "    Return information about slots range mappings. Each range is made of:",
        "    start, end, master and replicas IP addresses, ports and ids",
        "SHARDS",
        "    Return information about slot range mappings and the nodes associated with them.",
        "LINKS",
        "    Return information about all network links between this node and its peers.",
        "    Output format is an array where each array element is a map containing attributes of a link",
        "HELP",
        "    Print this help.",
    ]))
}

fn readonly(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    view_or_disabled(ctx)?;
    ctx.client.cluster_readonly = true;
    Ok(Frame::ok())
}

fn readwrite(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    view_or_disabled(ctx)?;
    ctx.client.cluster_readonly = false;
    Ok(Frame::ok())
}

fn asking(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    view_or_disabled(ctx)?;
    Ok(Frame::ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_questions_wait_for_the_election_on_a_follower() {
        let argv = |s: &str| -> Vec<Bytes> {
            s.split(' ')
                .map(|w| Bytes::copy_from_slice(w.as_bytes()))
                .collect()
        };
        let waits = super::super::sentinel::discovery_waits_for_leader;
        for yes in ["CLUSTER SLOTS", "cluster shards", "CLUSTER Nodes"] {
            assert!(waits(&argv(yes)), "{yes}");
        }
        for no in [
            "CLUSTER KEYSLOT x",
            "CLUSTER INFO",
            "CLUSTER MYID",
            "READONLY",
        ] {
            assert!(!waits(&argv(no)), "{no}");
        }
    }
}
