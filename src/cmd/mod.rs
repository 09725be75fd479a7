//! Commands: one table drives lookup, arity, flags and `COMMAND` output; one file per family.

pub mod acl;
mod acl_redis;
pub mod args;
pub mod bitmap;
pub mod blocking;
pub mod cluster;
pub mod connection;
pub mod dispatch;
pub mod docs;
// Generated (scripts/command-docs.py); kept as the script writes it.
#[rustfmt::skip]
mod docs_redis;
pub mod dump;
pub mod functions;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod keys;
pub mod keyspec;
pub mod list;
pub mod lockinsight;
pub mod lolwut;
pub mod module;
pub mod object;
pub mod observe;
pub mod persistence;
pub mod pubsub;
pub mod raft;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod set;
pub mod sort;
pub mod stream;
pub mod string;
pub mod string_range;
pub mod table;
pub mod tracking;
pub mod tx;
pub mod zset;

pub use args::Args;
pub use table::{CommandSpec, Handler};

use crate::machine::client::Client;
use crate::machine::{Host, State};
use crate::store::Db;

/// What a handler sees: the state machine's data, the calling client, the time of this command
/// (frozen for a whole script or transaction, as in Redis), and the narrow `Host` interface to
/// the event loop running it. Never the loop itself, sockets or the log.
pub struct Ctx<'a> {
    pub srv: &'a mut State,
    pub host: &'a mut dyn Host,
    pub client: &'a mut Client,
    /// Unix time in milliseconds.
    pub now: u64,
    /// Called from a Lua script (blocking commands do not block; NOSCRIPT commands refused).
    pub in_script: bool,
}

impl Ctx<'_> {
    /// The live value at `key` as the type `pick` selects: None if the key is missing,
    /// WRONGTYPE if it holds another type.
    pub fn value_mut<T: ?Sized>(
        &mut self,
        key: &[u8],
        pick: fn(&mut crate::store::Value) -> Option<&mut T>,
    ) -> crate::error::CmdResult<Option<&mut T>> {
        let now = self.now;
        match self.db().get_mut(key, now) {
            None => Ok(None),
            Some(e) => pick(&mut e.value)
                .map(Some)
                .ok_or(crate::error::CmdError::WrongType),
        }
    }

    /// Deletes `key` if its collection became empty (Redis never keeps one), with the `del`
    /// event when `announce` is set.
    pub fn drop_if_empty(&mut self, key: &[u8], announce: bool) {
        let now = self.now;
        if self
            .db()
            .get(key, now)
            .is_some_and(|e| e.value.is_empty_collection())
        {
            self.db().remove(key, now);
            if announce {
                self.notify(event::GENERIC, "del", key);
            }
        }
    }

    pub fn db(&mut self) -> &mut Db {
        &mut self.srv.dbs[self.client.db]
    }
}

/// Keyspace event classes: configuration defines them (`notify-keyspace-events`).
pub use crate::config::event;

impl Ctx<'_> {
    /// A write changed `key` in the client's database: Redis's `signalModifiedKey` (WATCH,
    /// blocked clients) followed by `notifyKeyspaceEvent(class, event, key)`. The log does not
    /// depend on this call: the store records every change itself (store/change.rs).
    pub fn changed(&mut self, class: u32, event: &'static str, key: &[u8]) {
        let db = self.client.db;
        self.srv.signal_modified_key(db, key);
        self.srv.notify_keyspace_event(class, event, key, db);
    }

    /// A keyspace event without a modification signal (e.g. `expire` after `set`).
    pub fn notify(&mut self, class: u32, event: &'static str, key: &[u8]) {
        let db = self.client.db;
        self.srv.notify_keyspace_event(class, event, key, db);
    }
}
