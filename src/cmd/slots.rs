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
