//! Durability: an append-only file of RESP commands (Redis 7's multi-part layout: a manifest, a
//! base file and increment files in `appenddirname`).
//!
//! What is logged is the *effect* of each unit of work (a command, a whole EXEC or script, an
//! expiry sweep), not the command text: every key a unit changed is written as commands that
//! recreate its final state, with deadlines as absolute times (`SET k v PXAT t`, `PEXPIREAT`), and
//! a unit touching several keys is wrapped in MULTI/EXEC. Replays are therefore deterministic
//! (no relative TTL is re-applied after downtime, so a lock never outlives its original
//! deadline), idempotent per key, and a torn unit is dropped as a whole.

pub mod aof;
pub mod emit;
pub mod load;
pub mod rdb_file;

/// strerror's text of an I/O error, without Rust's " (os error N)" (Redis's log and MISCONF
/// texts carry strerror alone).
pub fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(at) => s[..at].to_string(),
        None => s,
    }
}
