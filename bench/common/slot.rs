//! Redis Cluster's key → hash slot, shared by the bench tools (`#[path]`-included by
//! bench/loadgen and bench/harness, which are separate crates); deadbolt's own is
//! `replication::group::key_hash_slot`.

/// Hash slots in a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// CRC16-CCITT (XModem: polynomial 0x1021, initial 0), the checksum Redis Cluster hashes keys
/// with (Redis's crc16.c).
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Redis's keyHashSlot: the part between the first `{` and the next `}` when that part is not
/// empty, else the whole key.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&c| c == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&c| c == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) & (SLOTS - 1)
}
