//! SENTINEL, which exists in cluster mode only: every member answers as a Sentinel for the
//! master named by `sentinel-master-name`, the leader of the consensus core's `ClusterView`
//! (ROLE, WAIT and the view as Redis roles: role.rs and support.rs). docs/cluster.md, "The
//! Sentinel surface clients use", holds the bytes a real redis-sentinel 7.0.15 sends and what
//! redis-py, ioredis and Redisson read of them.
//!
//! What a view does not carry is rendered as a healthy, idle Sentinel shows it (link counters
//! 0, `down-after-milliseconds` the election timeout), except the ping times, which say how
//! long ago this node last heard from each member (`fill_pings`): clients read only names,
//! addresses, flags, offsets and counts. A member's run id is its node id in 40 hex digits, so
//! that every node names every other one the way that one names itself (`SENTINEL myid`).
//! While a node knows no leader it knows no master: get-master-addr-by-name answers nil and the
//! other lookups by name answer "No such master", which every client takes as "ask another
//! Sentinel / retry". A follower answers those only after it waited for the election (up to
//! an election timeout and a margin, the client parked, exec/cluster.rs): a client told "no
//! master" asks the next Sentinel in its list, and during an election that is often the dead
//! leader, where redis-py's default retries spend seconds on a refused port.
//!
//! Every member is a Sentinel, so the leader's death takes one Sentinel with it. redis-py's
//! `discover_master` (SENTINEL MASTERS) moves the Sentinel that answered to the head of its
//! list, and asks the head first on every reconnection: were the leader to answer it, the
//! leader would be the client's first Sentinel when it dies, and every failover would cost
//! the client its retries against the dead port (about 4 s at its defaults). So while another
//! voter is reachable, the leader lists no master in SENTINEL MASTERS and clients learn the
//! master from a follower, which stays alive when the leader dies; a client that asks the
//! leader again within seconds (none of its other Sentinels named a master, or it lists the
//! leader alone) is answered. (ioredis and Redisson ask
//! get-master-addr-by-name and keep no such order; the leader still names itself there.)

use super::spec::Ctx;
use super::spec::{flags::*, CommandSpec, NO_KEYS};
use super::support::spec_acl as spec;
use super::support::{addr, leader, replicas, run_id, voters};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use crate::replication::{ClusterView, Member, StateRole};
use bytes::Bytes;

/// Sentinel's subcommands: admin (Redis's sentinel-*.json), found only in cluster mode.
const SENT: u32 = ADMIN | ONLY_SENTINEL;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "sentinel",
    arity: -2,
    flags: SENT,
    keys: NO_KEYS,
    acl: &[],
    handler: sentinel_unknown,
    subcommands: &[
        spec(
            "get-master-addr-by-name",
            3,
            SENT,
            &[],
            sentinel_get_master_addr,
        ),
        spec("masters", 2, SENT, &[], sentinel_masters),
        spec("master", 3, SENT, &[], sentinel_master),
        spec("replicas", 3, SENT, &[], sentinel_replicas),
        spec("slaves", 3, SENT, &[], sentinel_replicas),
        spec("sentinels", 3, SENT, &[], sentinel_sentinels),
        spec("myid", 2, SENT, &[], sentinel_myid),
        spec("ckquorum", 3, SENT, &[], sentinel_ckquorum),
        spec(
            "help",
            2,
            LOADING | STALE | ONLY_SENTINEL,
            &[],
            sentinel_help,
        ),
    ],
}];

/// Sentinel's refusal of an unknown master name (sentinelGetMasterByNameOrReplyError).
const NO_SUCH_MASTER: &str = "ERR No such master with that name";
/// Sentinel's `down-after-milliseconds`: here the longest election timeout (10 ticks of 50 ms
/// up to twice that, replication/mod.rs).
const DOWN_AFTER_MS: &str = "1000";

/// SENTINEL subcommands that name the master or its replicas, and CLUSTER SLOTS/SHARDS/NODES:
/// on a follower that knows no live leader they wait for the election (see the module comment).
pub fn discovery_waits_for_leader(argv: &[Bytes]) -> bool {
    let (Some(cmd), Some(sub)) = (argv.first(), argv.get(1)) else {
        return false;
    };
    if cmd.eq_ignore_ascii_case(b"cluster") {
        // Redis Cluster's topology (cmd/cluster.rs): a cluster-mode client refreshes it after
        // a connection to the old leader failed.
        return [&b"slots"[..], b"shards", b"nodes"]
            .iter()
            .any(|s| sub.eq_ignore_ascii_case(s));
    }
    if !cmd.eq_ignore_ascii_case(b"sentinel") {
        return false;
    }
    [
        &b"get-master-addr-by-name"[..],
        b"masters",
        b"master",
        b"replicas",
        b"slaves",
        b"sentinels",
    ]
    .iter()
    .any(|s| sub.eq_ignore_ascii_case(s))
}

// ---- ROLE ----

// ---- INFO replication ----

// ---- WAIT ----

// ---- SENTINEL ----

/// A Sentinel reply about the configured master (numbers stay bulk strings in RESP3 too).
fn pairs(fields: Vec<(&'static str, String)>) -> Frame {
    Frame::Map(
        fields
            .into_iter()
            .map(|(k, v)| (Frame::bulk_static(k), Frame::bulk_from(v)))
            .collect(),
    )
}

/// The master's entry, or None when `name` is not the configured one or no leader is known.
fn master_of<'v>(view: &'v ClusterView, config_name: &str, name: &[u8]) -> Option<&'v Member> {
    if name != config_name.as_bytes() {
        return None;
    }
    leader(view)
}

/// SENTINEL get-master-addr-by-name: `*2 ip port`, nil for an unknown name.
pub fn get_master_addr(view: &ClusterView, config_name: &str, name: &[u8]) -> Frame {
    match master_of(view, config_name, name) {
        Some(m) => {
            let (ip, port) = addr(m);
            Frame::Array(vec![Frame::bulk_from(ip), Frame::bulk_from(port)])
        }
        None => Frame::NullArray,
    }
}

/// The 20 fields of a master, in redis-sentinel 7.0.15's order.
pub fn master_entry(view: &ClusterView, config_name: &str, m: &Member) -> Frame {
    let (ip, port) = addr(m);
    let n = voters(view);
    pairs(vec![
        ("name", config_name.to_string()),
        ("ip", ip.to_string()),
        ("port", port.to_string()),
        ("runid", run_id(m.id)),
        ("flags", "master".into()),
        ("link-pending-commands", "0".into()),
        ("link-refcount", "1".into()),
        ("last-ping-sent", "0".into()),
        ("last-ok-ping-reply", "0".into()),
        ("last-ping-reply", "0".into()),
        ("down-after-milliseconds", DOWN_AFTER_MS.into()),
        ("info-refresh", "0".into()),
        ("role-reported", "master".into()),
        ("role-reported-time", "0".into()),
        ("config-epoch", view.term.to_string()),
        ("num-slaves", replicas(view).count().to_string()),
        (
            "num-other-sentinels",
            view.members.len().saturating_sub(1).to_string(),
        ),
        ("quorum", (n / 2 + 1).to_string()),
        ("failover-timeout", DOWN_AFTER_MS.into()),
        ("parallel-syncs", "1".into()),
    ])
}

/// The 21 fields of a replica, in redis-sentinel 7.0.15's order.
pub fn replica_entry(master: &Member, m: &Member) -> Frame {
    let (ip, port) = addr(m);
    let (mip, mport) = addr(master);
    pairs(vec![
        ("name", format!("{ip}:{port}")),
        ("ip", ip.to_string()),
        ("port", port.to_string()),
        ("runid", run_id(m.id)),
        (
            "flags",
            if m.active {
                "slave"
            } else {
                "slave,s_down,disconnected"
            }
            .into(),
        ),
        ("link-pending-commands", "0".into()),
        ("link-refcount", "1".into()),
        ("last-ping-sent", "0".into()),
        ("last-ok-ping-reply", "0".into()),
        ("last-ping-reply", "0".into()),
        ("down-after-milliseconds", DOWN_AFTER_MS.into()),
        ("info-refresh", "0".into()),
        ("role-reported", "slave".into()),
        ("role-reported-time", "0".into()),
        ("master-link-down-time", "0".into()),
        (
            "master-link-status",
            if m.active { "ok" } else { "err" }.into(),
        ),
        ("master-host", mip.to_string()),
        ("master-port", mport.to_string()),
        ("slave-priority", "100".into()),
        ("slave-repl-offset", m.matched.to_string()),
        ("replica-announced", "1".into()),
    ])
}

/// The 14 fields of another Sentinel (every other member), in redis-sentinel 7.0.15's order.
pub fn sentinel_entry(m: &Member) -> Frame {
    let (ip, port) = addr(m);
    pairs(vec![
        ("name", run_id(m.id)),
        ("ip", ip.to_string()),
        ("port", port.to_string()),
        ("runid", run_id(m.id)),
        (
            "flags",
            if m.active {
                "sentinel"
            } else {
                "sentinel,s_down,disconnected"
            }
            .into(),
        ),
        ("link-pending-commands", "0".into()),
        ("link-refcount", "1".into()),
        ("last-ping-sent", "0".into()),
        ("last-ok-ping-reply", "0".into()),
        ("last-ping-reply", "0".into()),
        ("down-after-milliseconds", DOWN_AFTER_MS.into()),
        ("last-hello-message", "0".into()),
        ("voted-leader", "?".into()),
        ("voted-leader-epoch", "0".into()),
    ])
}

/// Sets the ping fields of every entry in a SENTINEL reply (`*N` of entries, or one entry)
/// from how long ago this node last heard from the member the entry's runid names, as
/// redis-sentinel renders its links: last-ok-ping-reply and last-ping-reply the time since
/// the last reply, last-ping-sent 0 while replies keep coming (a PING is never outstanding
/// longer than the probe period) and otherwise the time the PING has been waiting.
pub fn fill_pings(reply: &mut Frame, idle_ms: &dyn Fn(u64) -> Option<u64>) {
    let entries: &mut [Frame] = match reply {
        Frame::Array(items) => items,
        one @ Frame::Map(_) => std::slice::from_mut(one),
        _ => return,
    };
    for entry in entries {
        let Frame::Map(pairs) = entry else { continue };
        let id = pairs.iter().find_map(|(k, v)| match (k, v) {
            (Frame::Bulk(k), Frame::Bulk(v)) if &k[..] == b"runid" => std::str::from_utf8(v)
                .ok()
                .and_then(|h| u64::from_str_radix(h, 16).ok()),
            _ => None,
        });
        let Some(ms) = id.and_then(idle_ms) else {
            continue;
        };
        // One probe period without a reply is a PING waiting, not one lost.
        let sent = if ms < 200 { 0 } else { ms };
        for (k, v) in pairs.iter_mut() {
            let Frame::Bulk(k) = k else { continue };
            let value = match &k[..] {
                b"last-ok-ping-reply" | b"last-ping-reply" => ms,
                b"last-ping-sent" => sent,
                _ => continue,
            };
            *v = Frame::bulk_from(value.to_string());
        }
    }
}

/// Whether the leader may leave itself out of SENTINEL MASTERS: another voter is reachable
/// to name it (see the module comment).
pub fn leader_may_abstain(view: &ClusterView) -> bool {
    view.role == StateRole::Leader
        && view
            .members
            .iter()
            .any(|m| m.id != view.id && m.voter && m.active)
}

/// SENTINEL masters: `*1` with the master's entry, `*0` while no leader is known.
pub fn masters(view: &ClusterView, config_name: &str) -> Frame {
    Frame::Array(
        master_of(view, config_name, config_name.as_bytes())
            .map(|m| master_entry(view, config_name, m))
            .into_iter()
            .collect(),
    )
}

pub fn master(view: &ClusterView, config_name: &str, name: &[u8]) -> CmdResult {
    let m = master_of(view, config_name, name).ok_or(CmdError::err(NO_SUCH_MASTER))?;
    Ok(master_entry(view, config_name, m))
}

pub fn replicas_of(view: &ClusterView, config_name: &str, name: &[u8]) -> CmdResult {
    let m = master_of(view, config_name, name).ok_or(CmdError::err(NO_SUCH_MASTER))?;
    Ok(Frame::Array(
        replicas(view).map(|r| replica_entry(m, r)).collect(),
    ))
}

pub fn sentinels_of(view: &ClusterView, config_name: &str, name: &[u8]) -> CmdResult {
    master_of(view, config_name, name).ok_or(CmdError::err(NO_SUCH_MASTER))?;
    Ok(Frame::Array(
        view.members
            .iter()
            .filter(|m| m.id != view.id)
            .map(sentinel_entry)
            .collect(),
    ))
}

/// SENTINEL ckquorum: every voter counts as a usable Sentinel (the view has no liveness yet).
pub fn ckquorum(view: &ClusterView, config_name: &str, name: &[u8]) -> CmdResult {
    master_of(view, config_name, name).ok_or(CmdError::err(NO_SUCH_MASTER))?;
    let usable = voters(view);
    if usable > 0 {
        return Ok(Frame::Simple(Bytes::from(format!(
            "OK {usable} usable Sentinels. Quorum and failover authorization can be reached"
        ))));
    }
    Err(CmdError::Other(std::borrow::Cow::Owned(format!("NOQUORUM {usable} usable Sentinels. Not enough available Sentinels to reach the specified quorum for this master. Not enough available Sentinels to reach the majority and authorize a failover"))))
}

/// The view SENTINEL renders; resolve lets SENTINEL through only in cluster mode, so a
/// missing view here is a lone server that was reached some other way.
fn view_of<'a>(ctx: &'a Ctx) -> Result<&'a ClusterView, CmdError> {
    ctx.host.cluster().ok_or(CmdError::err(
        "ERR This instance has cluster support disabled",
    ))
}

/// Sentinel's help, for the subcommands a cluster node answers (Redis's wording).
fn sentinel_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::help(&[
        "SENTINEL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CKQUORUM <master-name>",
        "    Check if the current Sentinel configuration is able to reach the quorum",
        "    needed to failover a master and the majority needed to authorize the",
        "    failover.",
        "GET-MASTER-ADDR-BY-NAME <master-name>",
        "    Return the ip and port number of the master with that name.",
        "MASTER <master-name>",
        "    Show the state and info of the specified master.",
        "MASTERS",
        "    Show a list of monitored masters and their state.",
        "MYID",
        "    Return the ID of the Sentinel instance.",
        "REPLICAS <master-name>",
        "    Show a list of replicas for this master and their state.",
        "SENTINELS <master-name>",
        "    Show a list of Sentinel instances for this master and their state.",
        "HELP",
        "    Print this help.",
    ]))
}

fn sentinel_unknown(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    // Only reached with no subcommand, which the arity (-2) refuses first.
    Err(CmdError::unknown_command(argv))
}

fn sentinel_get_master_addr(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let name = ctx.srv.config.sentinel_master_name.clone();
    Ok(get_master_addr(view_of(ctx)?, &name, &argv[2]))
}

fn sentinel_masters(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let name = ctx.srv.config.sentinel_master_name.clone();
    // The leader lists no master the first time a client asks it while a follower can answer;
    // a client that asks again soon after (it found no master elsewhere: its list may hold
    // this node alone) is answered.
    if leader_may_abstain(view_of(ctx)?) && ctx.host.cluster_first_masters_ask(ctx.client.id) {
        return Ok(Frame::Array(vec![]));
    }
    let mut r = masters(view_of(ctx)?, &name);
    fill_pings(&mut r, &|id| ctx.host.cluster_idle_ms(id));
    Ok(r)
}

fn sentinel_master(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let name = ctx.srv.config.sentinel_master_name.clone();
    let mut r = master(view_of(ctx)?, &name, &argv[2])?;
    fill_pings(&mut r, &|id| ctx.host.cluster_idle_ms(id));
    Ok(r)
}

fn sentinel_replicas(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let name = ctx.srv.config.sentinel_master_name.clone();
    let mut r = replicas_of(view_of(ctx)?, &name, &argv[2])?;
    fill_pings(&mut r, &|id| ctx.host.cluster_idle_ms(id));
    Ok(r)
}

fn sentinel_sentinels(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let name = ctx.srv.config.sentinel_master_name.clone();
    let mut r = sentinels_of(view_of(ctx)?, &name, &argv[2])?;
    fill_pings(&mut r, &|id| ctx.host.cluster_idle_ms(id));
    Ok(r)
}

fn sentinel_myid(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::bulk_from(run_id(view_of(ctx)?.id)))
}

fn sentinel_ckquorum(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let name = ctx.srv.config.sentinel_master_name.clone();
    ckquorum(view_of(ctx)?, &name, &argv[2])
}

#[cfg(test)]
mod tests;
