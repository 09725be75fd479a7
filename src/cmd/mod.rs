//! Commands: one table drives lookup, arity, flags and `COMMAND` output; one file per family.

pub mod args;
pub mod connection;
pub mod dispatch;
pub mod hash;
pub mod keys;
pub mod server;
pub mod string;
pub mod table;

pub use args::Args;
pub use table::{CommandSpec, Handler};

use crate::exec::client::Client;
use crate::exec::Server;
use crate::store::Db;

/// What a handler sees: the server's data, the calling client, and the time of this command
/// (frozen for a whole script or transaction, as in Redis).
pub struct Ctx<'a> {
    pub srv: &'a mut Server,
    pub client: &'a mut Client,
    /// Unix time in milliseconds.
    pub now: u64,
    /// Called from a Lua script (blocking commands do not block; NOSCRIPT commands refused).
    pub in_script: bool,
}

impl Ctx<'_> {
    pub fn db(&mut self) -> &mut Db {
        &mut self.srv.dbs[self.client.db]
    }
}
