//! RAFT: the cluster's own operations (ours; Redis has no equivalent). Like SENTINEL it exists
//! only in cluster mode, so a lone server answers Redis's unknown-command error and COMMAND
//! does not list it. Not named CLUSTER: cluster-aware clients would read it as Redis Cluster.
//!
//! - `RAFT STATUS`: this node's view (role, leader, term, commit and applied indexes, and on
//!   the leader each member's replicated index and lag), as INFO-style lines: the home
//!   group's, then, on a node running several groups, each group's with its slot ranges.
//! - `RAFT ADDLEARNER id host port peerport`, `RAFT PROMOTE id`, `RAFT REMOVE id`: membership
//!   changes through the log (a new node catches up as a learner before it votes). Each Raft
//!   group has its own membership: without `GROUP g` the change is proposed in every group
//!   this node leads (one group: the home group, as before), and the error names the groups it
//!   does not lead with their leaders; `GROUP g` proposes it in group g alone, on its leader.
//! - `RAFT TRANSFER id [GROUP g]`: hands leadership of the home group (or group g) to a
//!   caught-up voter (before maintenance).
//! - `RAFT RESHARD first last group`: moves a slot range to another Raft group, on the node
//!   leading the range's group (exec/reshard.rs; elsewhere MOVED to that leader).

use super::spec::Ctx;
use super::spec::{flags::*, CommandSpec, NO_KEYS};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use crate::replication::{Admin, ClusterView, Member, StateRole};
use bytes::Bytes;
use std::fmt::Write;

const OPS: u32 = ADMIN | NOSCRIPT | ONLY_SENTINEL;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, NO_KEYS, &[], handler)
}

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "raft",
    arity: -2,
    flags: OPS,
    keys: NO_KEYS,
    acl: &[],
    handler: unknown,
    subcommands: &[
        spec("status", 2, OPS | LOADING | STALE, status),
        spec("addlearner", -6, OPS, add_learner),
        spec("promote", -3, OPS, promote),
        spec("remove", -3, OPS, remove),
        // Never inside MULTI: its reply leaves without a read barrier (see exec/cluster.rs),
        // so it must be a unit of its own, with no reads riding on it.
        spec("transfer", -3, OPS | NO_MULTI, transfer),
        // Never inside MULTI: it proposes to a log of its own, outside the unit's entry.
        spec("reshard", 5, OPS | NO_MULTI, reshard),
        spec("help", 2, OPS | LOADING | STALE, help),
    ],
}];

fn unknown(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    // Only reached with no subcommand, which the arity (-2) refuses first.
    Err(CmdError::unknown_command(argv))
}

fn role_name(role: StateRole) -> &'static str {
    match role {
        StateRole::Leader => "leader",
        StateRole::Follower => "follower",
        StateRole::Candidate => "candidate",
        StateRole::PreCandidate => "pre-candidate",
    }
}

/// `matched=<index>,lag=<entries behind commit>` of a member as `v`'s leader knows it (a
/// follower knows neither: `?`).
fn progress(out: &mut String, v: &ClusterView, m: &Member) {
    if v.role == StateRole::Leader {
        let _ = write!(
            out,
            "matched={},lag={}\r\n",
            m.matched,
            v.commit.saturating_sub(m.matched)
        );
    } else {
        out.push_str("matched=?,lag=?\r\n");
    }
}

/// The home group's view as `id:`, `role:` … `memberN:` lines; with several groups, then
/// `groups:<n>` and per group `group<g>:role=…,leader=…,term=…,commit=…,applied=…,members=…,
/// slots=<first>-<last> …` and `group<g>_member<i>:id=…,voter=…,matched=…,lag=…` lines (field
/// names no earlier line uses, so a reader of the first lines reads them as before).
fn status(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let Some(v) = ctx.host.cluster() else {
        return Err(CmdError::err(
            "ERR This instance has cluster support disabled",
        ));
    };
    let mut out = String::new();
    let _ = write!(
        out,
        "id:{}\r\nrole:{}\r\nleader:{}\r\nterm:{}\r\ncommit:{}\r\napplied:{}\r\nmembers:{}\r\n",
        v.id,
        role_name(v.role),
        v.leader,
        v.term,
        v.commit,
        v.applied,
        v.members.len()
    );
    for (i, m) in v.members.iter().enumerate() {
        let mut w = m.addr.split(' ');
        let (host, port, peer) = (
            w.next().unwrap_or(""),
            w.next().unwrap_or("0"),
            w.next().unwrap_or("0"),
        );
        let _ = write!(
            out,
            "member{i}:id={},ip={host},port={port},peer_port={peer},voter={},",
            m.id,
            u8::from(m.voter)
        );
        progress(&mut out, v, m);
    }
    let groups = ctx.host.cluster_groups();
    if groups.len() > 1 {
        let _ = write!(out, "groups:{}\r\n", groups.len());
        for (g, v, ranges) in &groups {
            let _ = write!(
                out,
                "group{g}:role={},leader={},term={},commit={},applied={},members={},slots=",
                role_name(v.role),
                v.leader,
                v.term,
                v.commit,
                v.applied,
                v.members.len()
            );
            for (i, (a, b)) in ranges.iter().enumerate() {
                let sep = if i == 0 { "" } else { " " };
                let _ = write!(out, "{sep}{a}-{b}");
            }
            out.push_str("\r\n");
            for (i, m) in v.members.iter().enumerate() {
                let _ = write!(
                    out,
                    "group{g}_member{i}:id={},voter={},",
                    m.id,
                    u8::from(m.voter)
                );
                progress(&mut out, v, m);
            }
        }
    }
    Ok(Frame::bulk_from(out))
}

fn help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::help(&[
        "RAFT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "STATUS",
        "    This node's view of the cluster: role, leader, term, commit and applied",
        "    indexes, and each member (on the leader, with its replicated index and lag);",
        "    with several Raft groups, the same for each group with its slot ranges.",
        "ADDLEARNER <id> <host> <port> <peer-port> [GROUP <group>]",
        "    Add a node as a learner: it catches up from the log without voting.",
        "PROMOTE <id> [GROUP <group>]",
        "    Make a caught-up learner a voter.",
        "REMOVE <id> [GROUP <group>]",
        "    Remove a node from the cluster.",
        "    Without GROUP these change every Raft group this node leads; with GROUP,",
        "    that group only (send it to the group's leader).",
        "TRANSFER <id> [GROUP <group>]",
        "    Hand leadership of the home group (or of the group) to a caught-up voter.",
        "RESHARD <first-slot> <last-slot> <group>",
        "    Move a slot range to another Raft group (on the leader of its group).",
        "HELP",
        "    Print this help.",
    ]))
}

fn node_id(arg: &[u8]) -> Result<u64, CmdError> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|&id| id != 0)
        .ok_or_else(|| CmdError::err("ERR node id must be a positive integer"))
}

/// The optional `GROUP <g>` after a subcommand's fixed arguments (`argv[from..]`).
fn group_arg(argv: &[Bytes], from: usize) -> Result<Option<u32>, CmdError> {
    match argv.get(from..).unwrap_or_default() {
        [] => Ok(None),
        [word, g] if word.eq_ignore_ascii_case(b"group") => std::str::from_utf8(g)
            .ok()
            .and_then(|s| s.parse::<u32>().ok())
            .map(Some)
            .ok_or_else(|| CmdError::err("ERR group must be a non-negative integer")),
        _ => Err(CmdError::err("ERR syntax error")),
    }
}

fn run(ctx: &mut Ctx, op: Admin, argv: &[Bytes], from: usize) -> CmdResult {
    let group = group_arg(argv, from)?;
    ctx.host
        .cluster_admin(&op, group)
        .map(|()| Frame::ok())
        .map_err(CmdError::erf)
}

fn add_learner(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let id = node_id(&argv[2])?;
    let host = std::str::from_utf8(&argv[3])
        .ok()
        .filter(|h| !h.is_empty() && !h.contains(|c: char| c.is_whitespace()))
        .ok_or_else(|| CmdError::err("ERR invalid host"))?;
    let port = |a: &[u8]| {
        std::str::from_utf8(a)
            .ok()
            .and_then(|s| s.parse::<u16>().ok())
            .filter(|&p| p != 0)
            .ok_or_else(|| CmdError::err("ERR Invalid port"))
    };
    let (p, pp) = (port(&argv[4])?, port(&argv[5])?);
    run(
        ctx,
        Admin::AddLearner {
            id,
            addr: format!("{host} {p} {pp}"),
        },
        argv,
        6,
    )
}

fn promote(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let id = node_id(&argv[2])?;
    run(ctx, Admin::Promote(id), argv, 3)
}

fn remove(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let id = node_id(&argv[2])?;
    run(ctx, Admin::Remove(id), argv, 3)
}

fn transfer(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let id = node_id(&argv[2])?;
    run(ctx, Admin::Transfer(id), argv, 3)
}

fn reshard(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let slot = |a: &[u8]| {
        std::str::from_utf8(a)
            .ok()
            .and_then(|s| s.parse::<u16>().ok())
            .filter(|&s| s < crate::replication::group::SLOTS)
            .ok_or_else(|| CmdError::err("ERR Invalid or out of range slot"))
    };
    let (first, last) = (slot(&argv[2])?, slot(&argv[3])?);
    let group = std::str::from_utf8(&argv[4])
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .ok_or_else(|| CmdError::err("ERR group must be a non-negative integer"))?;
    ctx.host
        .cluster_reshard(first, last, group)
        .map(|()| Frame::ok())
        .map_err(CmdError::err)
}
