//! SYNC, PSYNC and REPLCONF: what a Redis 7.0 master answers a replica (`redis-server
//! --replicaof`, `redis-cli --replica`, Redis's test suite attaching to the stream). The
//! replica's state, the backlog and the stream are in machine/redis_master.rs; the loop feeds it
//! each unit's change record and writes it to the replicas.

use super::args::int_arg;
use super::spec::flags::*;
use super::spec::{CommandSpec, Ctx};
use super::support::spec_acl as spec;
use crate::error::{CmdError, CmdResult};
use crate::machine::redis_master::Synced;
use crate::protocol::Frame;
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    spec(
        "sync",
        1,
        NO_ASYNC_LOADING | ADMIN | NO_MULTI | NOSCRIPT,
        &[],
        sync,
    ),
    spec(
        "psync",
        -3,
        NO_ASYNC_LOADING | ADMIN | NO_MULTI | NOSCRIPT,
        &[],
        sync,
    ),
    spec(
        "replconf",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY,
        &[],
        replconf,
    ),
];

/// Redis's syncCommand for SYNC and PSYNC replid offset.
fn sync(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if ctx.host.cluster().is_some() {
        return Err(CmdError::err(
            "ERR SYNC and PSYNC are not supported in cluster mode: cluster nodes replicate through Raft (add a deadbolt node with cluster-peers, or use a single-node deadbolt as the master of a Redis replica)",
        ));
    }
    if ctx.srv.replica.following() {
        return Err(CmdError::err(
            "ERR deadbolt does not chain replication: this server is a replica of a Redis master; attach the replica to that master",
        ));
    }
    let master = &mut ctx.srv.redis_master;
    // Already a replica: ignored, no reply (as Redis).
    if master.is_replica(ctx.client.id) {
        ctx.client.skip_reply = true;
        return Ok(Frame::Null);
    }
    if !ctx.client.out.is_empty() {
        return Err(CmdError::err(
            "ERR SYNC and PSYNC are invalid with pending output",
        ));
    }
    let psync = if argv[0].eq_ignore_ascii_case(b"psync") {
        let Ok(from) = int_arg(&argv[2]) else {
            tracing::warn!("Replica asks for synchronization but with a wrong offset");
            return Err(CmdError::NotInteger);
        };
        Some((&argv[1][..], from))
    } else {
        None
    };
    let backlog_size = ctx
        .srv
        .config
        .compat_value("repl-backlog-size")
        .parse()
        .unwrap_or(1 << 20);
    if !ctx.srv.dbs.records_changes() {
        // Nothing consumed the record until now (no AOF): the stream needs it from here on.
        ctx.srv.dbs.record_changes(true);
    }
    ctx.srv.dbs.record_publishes(true);
    let peer_ip = ctx.client.addr.ip().to_string();
    let out = ctx.client.out.clone();
    let st = &mut *ctx.srv;
    let (dbs, config) = (&st.dbs, &st.config);
    let functions = crate::script::functions::library_codes(st);
    let snapshot = || {
        crate::persist::rdb_file::encode(
            dbs,
            crate::clock::unix_ms(),
            &config.encoding_limits(),
            config.compat_value("rdbchecksum") != "no",
            (crate::machine::REDIS_VERSION, crate::alloc::used_memory()),
            &functions,
        )
    };
    let new_history = !st.redis_master.active();
    let synced = st.redis_master.sync(
        ctx.client.id,
        out,
        peer_ip,
        psync,
        &mut st.repl_id,
        backlog_size,
        ctx.now,
        (dbs.iter().map(|d| d.expired_total).sum(), snapshot),
    );
    if new_history && st.redis_master.active() {
        // The backlog's creation gave the server a new replication id (Redis's
        // createReplicationBacklog clears the secondary one too).
        st.replica.replid2 = None;
        st.replica.backlog_from = None;
    }
    match synced {
        Synced::Full(Some(line)) | Synced::Partial(line) => Ok(Frame::Simple(Bytes::from(line))),
        Synced::Full(None) => {
            ctx.client.skip_reply = true;
            Ok(Frame::Null)
        }
    }
}

/// Redis's replconfCommand: option/value pairs; ACK and GETACK answer nothing.
fn replconf(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if argv.len() % 2 == 0 {
        return Err(CmdError::Syntax);
    }
    let id = ctx.client.id;
    for pair in argv[1..].chunks(2) {
        let (opt, val) = (&pair[0], &pair[1]);
        let is = |name: &str| opt.eq_ignore_ascii_case(name.as_bytes());
        if is("listening-port") {
            let port = int_arg(val)?;
            ctx.srv.redis_master.conf_mut(id).listening_port = port;
        } else if is("ip-address") {
            // Redis's NET_HOST_STR_LEN.
            if val.len() >= 256 {
                return Err(CmdError::erf(format!(
                    "REPLCONF ip-address provided by replica instance is too long: {} bytes",
                    val.len()
                )));
            }
            ctx.srv.redis_master.conf_mut(id).ip_address =
                Some(String::from_utf8_lossy(val).into_owned());
        } else if is("capa") {
            // Capabilities this master does not know are ignored.
            if val.eq_ignore_ascii_case(b"eof") {
                ctx.srv.redis_master.conf_mut(id).capa_eof = true;
            } else if val.eq_ignore_ascii_case(b"psync2") {
                ctx.srv.redis_master.conf_mut(id).capa_psync2 = true;
            }
        } else if is("ack") {
            ctx.client.skip_reply = true;
            let Ok(offset) = int_arg(val) else {
                return Ok(Frame::Null);
            };
            let offset = u64::try_from(offset).unwrap_or(0);
            if ctx.srv.redis_master.ack(id, offset, ctx.now) {
                // Parked WAITs count again.
                for db in 0..ctx.srv.dbs.len() {
                    ctx.srv
                        .waiters
                        .signal(db, crate::store::waiters::REPLICAS_KEY);
                }
            }
            return Ok(Frame::Null);
        } else if is("getack") {
            // Only a replica answers GETACK (to its master); a master ignores it.
            ctx.client.skip_reply = true;
            return Ok(Frame::Null);
        } else if is("rdb-only") {
            if !(0..=1).contains(&int_arg(val)?) {
                return Err(CmdError::erf(
                    "value is out of range, value must between 0 and 1".to_string(),
                ));
            }
        } else if is("rdb-filter-only") {
            for f in String::from_utf8_lossy(val).split_whitespace() {
                if !f.eq_ignore_ascii_case("functions") {
                    return Err(CmdError::erf(format!(
                        "Unsupported rdb-filter-only option: {f}"
                    )));
                }
            }
        } else {
            return Err(CmdError::erf(format!(
                "Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(opt)
            )));
        }
    }
    Ok(Frame::ok())
}
