//! Keyspace event classes (Redis's NOTIFY_* bits) and the `notify-keyspace-events` flag string
//! that selects them. Commands raise events by class (`cmd::event` is this module), the
//! executor publishes the enabled ones (`machine::notify`).

pub const KEYSPACE: u32 = 1 << 0; // K
pub const KEYEVENT: u32 = 1 << 1; // E
pub const GENERIC: u32 = 1 << 2; // g
pub const STRING: u32 = 1 << 3; // $
pub const LIST: u32 = 1 << 4; // l
pub const SET: u32 = 1 << 5; // s
pub const HASH: u32 = 1 << 6; // h
pub const ZSET: u32 = 1 << 7; // z
pub const EXPIRED: u32 = 1 << 8; // x
pub const EVICTED: u32 = 1 << 9; // e
pub const STREAM: u32 = 1 << 10; // t
pub const KEY_MISS: u32 = 1 << 11; // m
pub const NEW: u32 = 1 << 14; // n

/// Module events ('d'); nothing here raises them, but the letter is accepted and rendered.
pub const MODULE: u32 = 1 << 12;
/// Redis's NOTIFY_ALL, the class set 'A' stands for (not K, E, m or n).
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Redis's `keyspaceEventsStringToFlags`; None for a letter it does not know.
pub fn flags_from_str(classes: &str) -> Option<u32> {
    let mut flags = 0;
    for c in classes.bytes() {
        flags |= match c {
            b'A' => ALL,
            b'g' => GENERIC,
            b'$' => STRING,
            b'l' => LIST,
            b's' => SET,
            b'h' => HASH,
            b'z' => ZSET,
            b'x' => EXPIRED,
            b'e' => EVICTED,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b't' => STREAM,
            b'm' => KEY_MISS,
            b'd' => MODULE,
            b'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// Redis 7.0's `keyspaceEventsFlagsToString`, the CONFIG GET rendering. 7.0 prints 'n' among
/// the class letters, so 'A' swallows it (`AKn` reads back as `AK`); clients compare this text.
pub fn flags_to_string(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                s.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(s: &str) -> String {
        flags_to_string(flags_from_str(s).unwrap())
    }

    #[test]
    fn canonical_rendering_matches_redis_7_0() {
        // Each pair was read back from redis-server 7.0.15 with CONFIG SET / CONFIG GET.
        assert_eq!(round("KEA"), "AKE");
        assert_eq!(round("xmKgn$lshzetd"), "AKm");
        assert_eq!(round("n"), "n");
        assert_eq!(round("gn"), "gn");
        assert_eq!(round(""), "");
        assert_eq!(round("g$lshzxet"), "g$lshzxet");
        assert_eq!(round("g$lshzxetd"), "A");
        assert_eq!(round("E"), "E");
        assert_eq!(flags_from_str("Kq"), None);
    }
}
