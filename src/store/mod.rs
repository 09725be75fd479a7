//! The data the executor owns. Plain Rust: no tokio, no I/O, time passed in by the caller.

pub mod change;
pub mod encoding;
pub mod hash;
pub mod keymap;
pub mod keyspace;
pub mod lazyfree;
pub mod rdb;
pub mod set;
pub mod stream;
pub mod value;
pub mod waiters;
pub mod zset;

pub use change::{ChangeRecord, Dbs};
pub use keyspace::{Db, Entry, Expiry};
pub use value::Value;

pub type FastMap<K, V> = std::collections::HashMap<K, V, ahash::RandomState>;
pub type FastSet<K> = std::collections::HashSet<K, ahash::RandomState>;
