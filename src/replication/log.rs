//! raft-rs logs through slog only; this drain forwards its records to tracing, so cluster
//! events land in the same log as the rest of the server (and honour `loglevel`).

use std::fmt::Write as _;

struct Kv(String);

impl slog::Serializer for Kv {
    fn emit_arguments(&mut self, key: slog::Key, val: &std::fmt::Arguments) -> slog::Result {
        let _ = write!(self.0, " {key}={val}");
        Ok(())
    }
}

struct ToTracing;

impl slog::Drain for ToTracing {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &slog::Record, values: &slog::OwnedKVList) -> Result<(), slog::Never> {
        use slog::KV as _;
        let mut kv = Kv(String::new());
        let _ = record.kv().serialize(record, &mut kv);
        let _ = values.serialize(record, &mut kv);
        let msg = record.msg();
        let kv = kv.0;
        match record.level() {
            slog::Level::Critical | slog::Level::Error => tracing::error!("raft: {msg}{kv}"),
            slog::Level::Warning => tracing::warn!("raft: {msg}{kv}"),
            slog::Level::Info => tracing::info!("raft: {msg}{kv}"),
            slog::Level::Debug => tracing::debug!("raft: {msg}{kv}"),
            slog::Level::Trace => tracing::trace!("raft: {msg}{kv}"),
        }
        Ok(())
    }
}

/// The logger a `RawNode` is built with, tagged with the node id.
pub fn logger(id: u64) -> slog::Logger {
    // raft-rs tags its own records with raft_id already.
    let _ = id;
    slog::Logger::root(ToTracing, slog::o!())
}
