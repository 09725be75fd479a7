//! Keyspace notifications (Redis's notify.c): the `notify-keyspace-events` flag string and the
//! `__keyspace@<db>__:<key>` / `__keyevent@<db>__:<event>` messages published for every change.

use super::State;
use crate::cmd::event::*;

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

impl State {
    /// Redis's `notifyKeyspaceEvent`: publishes `__keyspace@<db>__:<key>` with the event name
    /// and `__keyevent@<db>__:<event>` with the key, when `notify-keyspace-events` enables the
    /// class. Every write reaches this through `Ctx::changed`, so the disabled case is one test.
    pub fn notify_keyspace_event(
        &mut self,
        class: u32,
        event: &'static str,
        key: &[u8],
        db: usize,
    ) {
        let flags = self.config.notify_keyspace_events;
        // Keys the command created come first: Redis fires `new` from dbAdd, before the
        // command's own event.
        if flags & NEW != 0 && class & (NEW | EXPIRED) == 0 {
            self.drain_created();
        }
        if flags & class == 0 {
            return;
        }
        // Keys the command's own lookups expired are announced first, as Redis does during the
        // lookup itself.
        if class != EXPIRED {
            self.drain_expired();
        }
        let mut num = itoa::Buffer::new();
        let db = num.format(db);
        if flags & KEYSPACE != 0 {
            let mut chan = Vec::with_capacity(16 + db.len() + key.len());
            chan.extend_from_slice(b"__keyspace@");
            chan.extend_from_slice(db.as_bytes());
            chan.extend_from_slice(b"__:");
            chan.extend_from_slice(key);
            self.publish(&chan, event.as_bytes(), false);
        }
        if flags & KEYEVENT != 0 {
            let mut chan = Vec::with_capacity(16 + db.len() + event.len());
            chan.extend_from_slice(b"__keyevent@");
            chan.extend_from_slice(db.as_bytes());
            chan.extend_from_slice(b"__:");
            chan.extend_from_slice(event.as_bytes());
            self.publish(&chan, key, false);
        }
    }
}

impl State {
    /// Puts every database's recording of created keys in step with the `n` class: called
    /// wherever a configuration is installed (start-up, CONFIG SET), not per command.
    pub fn sync_created_recording(&mut self) {
        let on = self.config.notify_keyspace_events & NEW != 0;
        for d in self.dbs.iter_mut() {
            if d.records_created() != on {
                d.record_created(on);
            }
        }
    }

    /// Publishes `new` for every key created since the last drain, database by database.
    pub fn drain_created(&mut self) {
        for db in 0..self.dbs.len() {
            if self.dbs[db].created.is_empty() {
                continue;
            }
            let mut keys = std::mem::take(&mut self.dbs[db].created);
            for key in &keys {
                self.notify_keyspace_event(NEW, "new", key, db);
            }
            keys.clear();
            if self.dbs[db].created.is_empty() {
                self.dbs[db].created = keys;
            }
        }
    }
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
