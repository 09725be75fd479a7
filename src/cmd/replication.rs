//! The replication surface clients see: ROLE, WAIT and, in cluster mode, SENTINEL; plus the
//! renderings INFO replication, HELLO and the READONLY refusal use.
//!
//! A lone server (`Host::cluster()` is None) answers exactly as a Redis 7.0 master without
//! replicas. A cluster node renders the consensus core's `ClusterView`: the leader is the
//! master, every other member a replica, and every member also answers as a Sentinel for the
//! master named by `sentinel-master-name` (DESIGN.md in src/replication, §3, holds the bytes a
//! real redis-sentinel 7.0.15 sends and what redis-py, ioredis and Redisson read of them).
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

use super::args::int_arg;
use super::server::{spec_acl as spec, ADMIN_CATS};
use super::table::{flags::*, CommandSpec, NO_KEYS};
use super::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::machine::{Host, State};
use crate::protocol::Frame;
use crate::replication::{ClusterView, Member, StateRole};
use crate::script;
use crate::store::waiters::{WaitKind, REPLICAS_KEY};
use bytes::Bytes;
use std::fmt::Write;

/// Sentinel's subcommands: admin (Redis's sentinel-*.json), found only in cluster mode.
const SENT: u32 = ADMIN | ONLY_SENTINEL;

pub static COMMANDS: &[CommandSpec] = &[
    spec("wait", 3, NOSCRIPT, &["connection"], wait),
    spec(
        "replicaof",
        3,
        ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING,
        ADMIN_CATS,
        replicaof,
    ),
    spec(
        "slaveof",
        3,
        ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING,
        ADMIN_CATS,
        replicaof,
    ),
    spec(
        "role",
        1,
        NOSCRIPT | LOADING | STALE | FAST,
        ADMIN_CATS,
        role,
    ),
    CommandSpec {
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
    },
];

/// Sentinel's refusal of an unknown master name (sentinelGetMasterByNameOrReplyError).
const NO_SUCH_MASTER: &str = "ERR No such master with that name";
/// Redis's `shared.masterdownerr`, without the leading `-`.
pub const MASTERDOWN: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";
/// Redis's `shared.roslaveerr`, without the leading `-`.
pub const READONLY: &str = "READONLY You can't write against a read only replica.";
/// Sentinel's `down-after-milliseconds`: here the longest election timeout (10 ticks of 50 ms
/// up to twice that, replication/mod.rs).
const DOWN_AFTER_MS: &str = "1000";

// ---- the view, as Redis roles ----

/// A follower (or a candidate: any member that is not the leader) refuses writes, as a
/// read-only Redis replica does. A lone server never does.
pub fn is_replica(view: Option<&ClusterView>) -> bool {
    view.is_some_and(|v| v.role != StateRole::Leader)
}

/// Whether a follower must confirm with the leader before running this request, so that what
/// it reads is at least what the leader had committed when the request arrived (a
/// linearizable read, as on the leader). Those are the commands Redis flags `readonly` (they
/// read keys: GET, PTTL, EXISTS, KEYS, SCAN …), scripts and EXEC (their contents decide, and
/// they may read). The rest answer from the node itself (PING, INFO, ROLE, HELLO, SUBSCRIBE,
/// SENTINEL …), so discovery and health checks work while no leader is reachable, and writes
/// are refused at once (READONLY) so clients look for the leader.
pub fn replica_read_needs_leader(argv: &[Bytes], in_multi: bool) -> bool {
    let table = super::table::table();
    let Some(name) = argv.first() else {
        return false;
    };
    let Some(mut id) = table.lookup(name) else {
        return false;
    };
    if !table.entries[id].spec.subcommands.is_empty() {
        match argv.get(1).and_then(|sub| table.lookup_sub(id, sub)) {
            Some(sub) => id = sub,
            None => return false,
        }
    }
    let spec = table.entries[id].spec;
    match spec.name {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => true,
        "exec" => in_multi,
        _ => spec.flags & super::table::flags::READONLY != 0,
    }
}

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

/// Redis's `evalGetCommandFlags` for the replica check: a script with a shebang is a write
/// unless it declares `no-writes` (one without is refused at its first write instead, with the
/// script suffix). EVALSHA of an unknown script keeps EVALSHA's own flags.
pub fn script_declares_writes(srv: &State, spec: &CommandSpec, argv: &[Bytes]) -> bool {
    let evalsha = match spec.name {
        "eval" | "eval_ro" => false,
        "evalsha" | "evalsha_ro" => true,
        _ => return false,
    };
    let Some(body_or_sha) = argv.get(1) else {
        return false;
    };
    let found = if evalsha {
        script::sha_key(body_or_sha).and_then(|sha| script::cached_flags(srv, &sha))
    } else {
        script::shebang::parse(body_or_sha).ok().map(|(f, _)| f)
    };
    found.is_some_and(|f| f & script::shebang::COMPAT == 0 && f & script::shebang::NO_WRITES == 0)
}

/// "host port peerport" → (host, client port).
fn addr(m: &Member) -> (&str, &str) {
    let mut it = m.addr.split_ascii_whitespace();
    (it.next().unwrap_or(""), it.next().unwrap_or("0"))
}

/// A member's run id as every node renders it (see the module comment).
pub fn run_id(id: u64) -> String {
    format!("{id:040x}")
}

fn leader(view: &ClusterView) -> Option<&Member> {
    if view.leader == 0 {
        return None;
    }
    view.members.iter().find(|m| m.id == view.leader)
}

/// Members other than the leader: the master's replicas.
fn replicas(view: &ClusterView) -> impl Iterator<Item = &Member> {
    view.members.iter().filter(move |m| m.id != view.leader)
}

/// Replicas this node currently hears from: what Redis lists as connected.
fn connected(view: &ClusterView) -> impl Iterator<Item = &Member> {
    replicas(view).filter(|m| m.active)
}

fn voters(view: &ClusterView) -> usize {
    view.members.iter().filter(|m| m.voter).count()
}

/// HELLO's `role` field.
pub fn hello_role(view: Option<&ClusterView>) -> &'static str {
    if is_replica(view) {
        "replica"
    } else {
        "master"
    }
}

// ---- ROLE ----

fn role(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(role_frame(ctx.host.cluster()))
}

/// ROLE. A lone server: `*3 master :0 *0` (a Redis master without replicas keeps offset 0).
/// The leader: `*3 master :<commit> [[ip port matched]…]`; a follower: `*5 slave <ip> :<port>
/// connected|connecting :<applied>`.
pub fn role_frame(view: Option<&ClusterView>) -> Frame {
    let Some(view) = view else {
        return Frame::Array(vec![
            Frame::bulk_static("master"),
            Frame::Integer(0),
            Frame::Array(vec![]),
        ]);
    };
    if view.role == StateRole::Leader {
        let reps = connected(view)
            .map(|m| {
                let (ip, port) = addr(m);
                Frame::Array(vec![
                    Frame::bulk_from(ip),
                    Frame::bulk_from(port),
                    Frame::bulk_from(m.matched.to_string()),
                ])
            })
            .collect();
        return Frame::Array(vec![
            Frame::bulk_static("master"),
            Frame::Integer(view.commit as i64),
            Frame::Array(reps),
        ]);
    }
    let (ip, port, state) = match leader(view) {
        Some(m) => {
            let (ip, port) = addr(m);
            (ip, port.parse().unwrap_or(0), "connected")
        }
        None => ("", 0, "connecting"),
    };
    Frame::Array(vec![
        Frame::bulk_static("slave"),
        Frame::bulk_from(ip),
        Frame::Integer(port),
        Frame::bulk_static(state),
        Frame::Integer(view.applied as i64),
    ])
}

// ---- INFO replication ----

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

// ---- WAIT ----

/// Connected replicas known to hold everything up to `index` (the leader's view of its
/// followers). Redis counts only the replicas it is connected to, so WAIT never answers more than
/// INFO's connected_slaves: Redisson compares the two after every lock script and re-reads INFO
/// on each mismatch, and a follower that died after acknowledging must not count as a live copy.
fn acked(view: Option<&ClusterView>, index: u64) -> i64 {
    view.map_or(0, |v| {
        connected(v).filter(|m| m.matched >= index).count() as i64
    })
}

/// WAIT numreplicas timeout (Redis 7.0's waitCommand): answers at once when enough replicas
/// acknowledged (a lone server: when numreplicas <= 0) or inside MULTI; otherwise the client
/// blocks until the timeout (0: forever) and then answers the count, as Redis does.
fn wait(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if is_replica(ctx.host.cluster()) {
        return Err(CmdError::err("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated."));
    }
    let n = int_arg(&argv[1])?;
    let t = int_arg(&argv[2])
        .map_err(|_| CmdError::err("ERR timeout is not an integer or out of range"))?;
    let t = super::blocking::millis_timeout(t, ctx.now)?;
    // The followers holding this client's last write (Redis: the replicas that acknowledged
    // its offset).
    let view = ctx.host.cluster();
    let have = acked(view, ctx.client.repl_index);
    if have >= n || !super::blocking::may_block(ctx) {
        return Ok(Frame::Integer(have));
    }
    if view.is_none() {
        // A lone server: nothing can change the count, only the deadline (or the client
        // leaving) ends it, and the loop answers `timed_out_reply` then.
        return super::blocking::block(ctx, &[], t, WaitKind::List, argv);
    }
    // Woken each time the commit index moves (exec/cluster.rs), when it counts again.
    let key = [Bytes::from_static(REPLICAS_KEY)];
    super::blocking::block(ctx, &key, t, WaitKind::Replicas, argv)
}

/// What a parked command answers when its deadline passes: WAIT the replicas that acked
/// (Redis's replyToBlockedClientTimedOut), the list and zset waits a null array.
pub fn timed_out_reply(argv: &[Bytes], host: &dyn Host, repl_index: u64) -> Frame {
    if argv
        .first()
        .is_some_and(|a| a.eq_ignore_ascii_case(b"wait"))
    {
        let view = host.cluster();
        return Frame::Integer(acked(view, repl_index));
    }
    Frame::NullArray
}

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

/// REPLICAOF / SLAVEOF. `NO ONE` on a lone server is what Redis answers on a master: OK, nothing
/// changes. Following a Redis master is not something deadbolt does (it speaks no PSYNC); its
/// replicas are cluster members, so that is refused with the reason instead of an OK that
/// would leave the operator believing a replica exists.
fn replicaof(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let no_one = argv[1].eq_ignore_ascii_case(b"no") && argv[2].eq_ignore_ascii_case(b"one");
    if ctx.host.cluster().is_some() {
        return Err(CmdError::err(
            "ERR REPLICAOF is not allowed in cluster mode: the cluster elects its leader (RAFT TRANSFER moves it)",
        ));
    }
    if no_one {
        tracing::info!(
            "MASTER MODE enabled (user request from 'id={}')",
            ctx.client.id
        );
        return Ok(Frame::ok());
    }
    if !matches!(int_arg(&argv[2]), Ok(0..=65535)) {
        return Err(CmdError::err("ERR Invalid master port"));
    }
    Err(CmdError::err(
        "ERR deadbolt does not replicate from a Redis master (no PSYNC); its replicas are deadbolt cluster members (see cluster-peers)",
    ))
}
