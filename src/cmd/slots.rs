//! Redis Cluster's hash slots and what the cluster protocol asks of commands outside the
//! CLUSTER family (cluster.rs): the slot of a key, whether this node speaks the protocol, and
//! the refusals Redis Cluster gives (dispatch.rs redirects with them; SELECT, MOVE, SWAPDB and
//! COPY are limited to database 0).

use super::spec::Ctx;
use crate::error::CmdError;
use crate::machine::{Host, State};
use crate::replication::Member;

pub use crate::replication::group::{crc16, key_hash_slot, SLOTS};

pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";
pub const CLUSTERDOWN: &str = "CLUSTERDOWN The cluster is down";
/// Redis's reply while a slot migrates (cluster.c, getNodeByQuery's CLUSTER_REDIR_UNSTABLE):
/// clients retry it after a pause.
pub const TRYAGAIN: &str = "TRYAGAIN Multiple keys request during rehashing of slot";

/// A slot being moved between Raft groups (released by its group, not yet imported by the
/// other): nobody serves its keys, every node answers -TRYAGAIN until the move completes,
/// then -MOVED to the new group's leader, as Redis answers during a slot migration.
pub fn moving(host: &dyn Host, slot: u16) -> Option<CmdError> {
    host.cluster_slot_frozen(slot)
        .then(|| CmdError::err(TRYAGAIN))
}

/// Whether this node speaks Redis Cluster: a Raft cluster node with `cluster-enabled yes`.
pub fn enabled(srv: &State, host: &dyn Host) -> bool {
    host.cluster().is_some() && srv.config.compat_value("cluster-enabled") == "yes"
}

/// Redis Cluster has database 0 alone: SELECT of another, MOVE, SWAPDB and COPY to or from
/// another are refused with Redis's `<what> is not allowed in cluster mode`.
pub fn only_db0(ctx: &Ctx, what: &str) -> Result<(), CmdError> {
    if enabled(ctx.srv, &*ctx.host) {
        return Err(CmdError::err(format!(
            "ERR {what} is not allowed in cluster mode"
        )));
    }
    Ok(())
}

/// "host port peerport" → (host, client port, peer port).
pub fn addr(m: &Member) -> (&str, u16, u16) {
    let (host, port, peer) = m.endpoint();
    (host, port.parse().unwrap_or(0), peer.parse().unwrap_or(0))
}
