//! Commands: spec.rs says what a command is, registry.rs lists every family (one file per
//! family), table.rs indexes them, dispatch.rs runs one in Redis's processCommand order.

pub mod acl;
mod acl_redis;
pub mod args;
pub mod bitmap;
pub mod blocking;
pub mod cluster;
pub mod connection;
pub mod debug;
pub mod dispatch;
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
pub mod migrate_conn;
pub mod module;
pub mod object;
pub mod observe;
pub mod persistence;
pub mod pubsub;
pub mod raft;
pub mod registry;
pub mod role;
pub mod scripting;
pub mod sentinel;
pub mod server;
pub mod set;
pub mod slots;
pub mod sort;
pub mod spec;
pub mod stream;
pub mod string;
pub mod string_range;
pub mod support;
pub mod sync;
pub mod table;
pub mod tracking;
pub mod tx;
pub mod zset;

pub use spec::{event, CommandSpec, Ctx, Handler};
