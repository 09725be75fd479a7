//! ROLE, WAIT and REPLICAOF/SLAVEOF: what a Redis master answers. A lone server is a master
//! without replicas; a cluster node renders the consensus core's `ClusterView` (the leader is
//! the master, every other member a replica: support.rs), and WAIT counts the members that
//! have the client's last write. SENTINEL, which every cluster node also answers, is in
//! sentinel.rs.

use super::args::int_arg;
use super::spec::Ctx;
use super::spec::{flags::*, CommandSpec};
use super::support::{addr, connected, is_replica, leader};
use super::support::{spec_acl as spec, ADMIN_CATS};
use crate::error::{CmdError, CmdResult};
use crate::machine::redis_master::Master;
use crate::machine::replica_link::LinkState;
use crate::machine::Host;
use crate::protocol::Frame;
use crate::replication::{ClusterView, StateRole};
use crate::store::waiters::{WaitKind, REPLICAS_KEY};
use bytes::Bytes;

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
];

/// Whether a follower must confirm with the leader before running this request, so that what
/// it reads is at least what the leader had committed when the request arrived (a
/// linearizable read, as on the leader). Those are the commands Redis flags `readonly` (they
/// read keys: GET, PTTL, EXISTS, KEYS, SCAN …), scripts and EXEC (their contents decide, and
/// they may read). The rest answer from the node itself (PING, INFO, ROLE, HELLO, SUBSCRIBE,
/// SENTINEL …), so discovery and health checks work while no leader is reachable, and writes
/// are refused at once (READONLY) so clients look for the leader.
pub fn replica_read_needs_leader(argv: &[Bytes], in_multi: bool) -> bool {
    let table = super::registry::table();
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
        _ => spec.flags & super::spec::flags::READONLY != 0,
    }
}

fn role(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    if let Some(m) = ctx.srv.replica.master.as_ref() {
        // Redis's roleCommand for a replica: the offset is the master client's (-1 while the
        // link is not up).
        let state = m.link.state();
        let offset = if state == LinkState::Connected {
            ctx.srv.replica.offset as i64
        } else {
            -1
        };
        return Ok(Frame::Array(vec![
            Frame::bulk_static("slave"),
            Frame::bulk_from(m.host.as_str()),
            Frame::Integer(m.port as i64),
            Frame::bulk_static(state.name()),
            Frame::Integer(offset),
        ]));
    }
    match ctx.host.cluster_own() {
        None => Ok(lone_master_role(&ctx.srv.redis_master)),
        view => Ok(role_frame(view)),
    }
}

/// ROLE outside cluster mode: `*3 master :<offset> [[ip port acked-offset]…]`, the Redis
/// replicas that are online, as Redis's roleCommand lists them.
fn lone_master_role(m: &Master) -> Frame {
    let reps = m
        .replicas
        .iter()
        .filter(|r| r.online())
        .map(|r| {
            Frame::Array(vec![
                Frame::bulk_from(r.ip()),
                Frame::bulk_from(r.conf.listening_port.to_string()),
                Frame::bulk_from(r.ack_off.to_string()),
            ])
        })
        .collect();
    Frame::Array(vec![
        Frame::bulk_static("master"),
        Frame::Integer(m.offset as i64),
        Frame::Array(reps),
    ])
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

/// Connected replicas known to hold everything up to `index` (the leader's view of its
/// followers). Redis counts only the replicas it is connected to, so WAIT never answers more than
/// INFO's connected_slaves: Redisson compares the two after every lock script and re-reads INFO
/// on each mismatch, and a follower that died after acknowledging must not count as a live copy.
pub(super) fn acked(view: Option<&ClusterView>, index: u64) -> i64 {
    view.map_or(0, |v| {
        connected(v).filter(|m| m.matched >= index).count() as i64
    })
}

/// WAIT numreplicas timeout (Redis 7.0's waitCommand): answers at once when enough replicas
/// acknowledged (a lone server: when numreplicas <= 0) or inside MULTI; otherwise the client
/// blocks until the timeout (0: forever) and then answers the count, as Redis does.
fn wait(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    // In a cluster, the Raft group the client's last write went to: its leader counts its
    // followers. Before the connection's first write, the group the node describes itself by
    // (a node leading any group answers as a master: Redisson probes with WAIT 0 0 on connect).
    let group = if ctx.client.repl_index == 0 {
        ctx.host.cluster_own_group()
    } else {
        ctx.client.repl_group
    };
    if is_replica(ctx.host.cluster_group(group)) || ctx.srv.replica.following() {
        return Err(CmdError::err("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated."));
    }
    let n = int_arg(&argv[1])?;
    let t = int_arg(&argv[2])
        .map_err(|_| CmdError::err("ERR timeout is not an integer or out of range"))?;
    let t = super::blocking::millis_timeout(t, ctx.now)?;
    // The followers holding this client's last write (Redis: the replicas that acknowledged
    // its offset).
    let view = ctx.host.cluster_group(group);
    if view.is_none() {
        // A lone server: its Redis replicas that acknowledged the stream up to this WAIT's
        // start (the offset is kept while it is parked; re-run when an ACK arrives).
        if ctx.client.block_deadline.is_none() {
            ctx.client.repl_index = ctx.srv.redis_master.offset;
        }
        let have = ctx.srv.redis_master.acked(ctx.client.repl_index);
        if have >= n || !super::blocking::may_block(ctx) {
            return Ok(Frame::Integer(have));
        }
        let master = &mut ctx.srv.redis_master;
        if master.replicas.is_empty() {
            // Nothing can change the count, only the deadline (or the client leaving) ends
            // it, and the loop answers `timed_out_reply` then.
            return super::blocking::block(ctx, &[], t, WaitKind::List, argv);
        }
        // REPLCONF GETACK * at the end of the pass, as Redis's beforeSleep.
        master.get_ack = true;
        let key = [Bytes::from_static(REPLICAS_KEY)];
        return super::blocking::block(ctx, &key, t, WaitKind::Replicas, argv);
    }
    let have = acked(view, ctx.client.repl_index);
    if have >= n || !super::blocking::may_block(ctx) {
        return Ok(Frame::Integer(have));
    }
    // Woken each time the commit index moves (exec/cluster.rs), when it counts again.
    let key = [Bytes::from_static(REPLICAS_KEY)];
    super::blocking::block(ctx, &key, t, WaitKind::Replicas, argv)
}

/// What a parked command answers when its deadline passes: WAIT the replicas that acked
/// (Redis's replyToBlockedClientTimedOut), the list and zset waits a null array.
pub fn timed_out_reply(
    argv: &[Bytes],
    host: &dyn Host,
    master: &Master,
    repl_index: u64,
    repl_group: crate::replication::group::GroupId,
) -> Frame {
    if argv
        .first()
        .is_some_and(|a| a.eq_ignore_ascii_case(b"wait"))
    {
        let group = if repl_index == 0 {
            host.cluster_own_group()
        } else {
            repl_group
        };
        return match host.cluster_group(group) {
            None => Frame::Integer(master.acked(repl_index)),
            view => Frame::Integer(acked(view, repl_index)),
        };
    }
    Frame::NullArray
}

/// REPLICAOF / SLAVEOF (Redis's replicaofCommand). `host port`: follow that Redis master
/// (redisrepl/replica.rs), switching from the one followed; the same master again is
/// `+OK Already connected to specified master`. `NO ONE`: stop following and become a master
/// with the data kept; on a master it changes nothing. A cluster elects its own leader, so
/// there it is refused.
fn replicaof(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let no_one = argv[1].eq_ignore_ascii_case(b"no") && argv[2].eq_ignore_ascii_case(b"one");
    if ctx.host.cluster().is_some() {
        return Err(CmdError::err(
            "ERR REPLICAOF is not allowed in cluster mode: the cluster elects its leader (RAFT TRANSFER moves it)",
        ));
    }
    if no_one {
        if ctx.srv.replica.following() {
            ctx.host.replicaof(ctx.srv, None).map_err(CmdError::erf)?;
            tracing::info!(
                "MASTER MODE enabled (user request from 'id={}')",
                ctx.client.id
            );
        }
        return Ok(Frame::ok());
    }
    let port = match int_arg(&argv[2]) {
        Ok(p @ 0..=65535) => p as u16,
        _ => return Err(CmdError::err("ERR Invalid master port")),
    };
    let host = String::from_utf8_lossy(&argv[1]).into_owned();
    if let Some(m) = ctx.srv.replica.master.as_ref() {
        if m.host.eq_ignore_ascii_case(&host) && m.port == port {
            tracing::info!("REPLICAOF would result into synchronization with the master we are already connected with. No operation performed.");
            return Ok(Frame::Simple(Bytes::from_static(
                b"OK Already connected to specified master",
            )));
        }
    }
    ctx.host
        .replicaof(ctx.srv, Some((host.clone(), port)))
        .map_err(CmdError::erf)?;
    tracing::info!(
        "REPLICAOF {host}:{port} enabled (user request from 'id={}')",
        ctx.client.id
    );
    Ok(Frame::ok())
}
