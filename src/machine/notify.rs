//! Keyspace notifications (Redis's notify.c): the `__keyspace@<db>__:<key>` /
//! `__keyevent@<db>__:<event>` messages published for every change. The classes and the
//! `notify-keyspace-events` flag string are configuration (`config::event`).

use super::State;
use crate::config::event::*;

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
