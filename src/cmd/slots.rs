//! Redis Cluster's hash slots and what the cluster protocol asks of commands outside the
//! CLUSTER family (cluster.rs): the slot of a key, whether this node speaks the protocol, and
//! the refusals Redis Cluster gives (dispatch.rs redirects with them; SELECT, MOVE, SWAPDB and
//! COPY are limited to database 0).

use super::spec::Ctx;
use crate::error::CmdError;
use crate::machine::{Host, State};
use crate::replication::Member;

/// Redis's CLUSTER_SLOTS.
pub const SLOTS: u16 = 16384;

pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";
pub const CLUSTERDOWN: &str = "CLUSTERDOWN The cluster is down";

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0, no reflection), Redis's crc16.c.
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

pub fn crc16(buf: &[u8]) -> u16 {
    buf.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[usize::from(((crc >> 8) as u8) ^ b)]
    })
}

/// Redis's keyHashSlot: the CRC16 of the key, or of the part between the first `{` and the
/// first `}` after it when that part is not empty, modulo 16,384.
pub fn key_hash_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|s| {
            let rest = &key[s + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .filter(|&e| e > 0)
                .map(|e| &rest[..e])
        })
        .unwrap_or(key);
    crc16(hashed) & (SLOTS - 1)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_is_xmodem() {
        // The check value of CRC-16/XMODEM, and Redis Cluster spec's example.
        assert_eq!(crc16(b"123456789"), 0x31c3);
    }

    #[test]
    fn hash_tags_as_redis() {
        assert_eq!(key_hash_slot(b"foo"), 12182);
        assert_eq!(
            key_hash_slot(b"{user1000}.following"),
            key_hash_slot(b"user1000")
        );
        assert_eq!(key_hash_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 0x3fff);
        assert_eq!(key_hash_slot(b"foo{{bar}}zap"), key_hash_slot(b"{bar"));
        assert_eq!(key_hash_slot(b"foo{bar}{zap}"), key_hash_slot(b"bar"));
        assert_eq!(key_hash_slot(b"{"), crc16(b"{") & 0x3fff);
        assert_eq!(key_hash_slot(b""), 0);
    }
}
