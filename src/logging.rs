//! tracing-subscriber set up from `loglevel` and `logfile`; CONFIG SET loglevel changes the
//! filter at run time through a reload handle.

use crate::config::{Config, LogLevel};
use std::sync::OnceLock;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::prelude::*;
use tracing_subscriber::reload;

type Handle = reload::Handle<LevelFilter, tracing_subscriber::Registry>;
static RELOAD: OnceLock<Handle> = OnceLock::new();

pub fn level_filter(level: LogLevel) -> LevelFilter {
    match level {
        LogLevel::Debug => LevelFilter::TRACE,
        LogLevel::Verbose => LevelFilter::DEBUG,
        LogLevel::Notice => LevelFilter::INFO,
        LogLevel::Warning => LevelFilter::WARN,
        LogLevel::Nothing => LevelFilter::OFF,
    }
}

pub fn init(cfg: &Config) -> std::io::Result<()> {
    let (filter, handle) = reload::Layer::new(level_filter(cfg.loglevel));
    let registry = tracing_subscriber::registry().with(filter);
    if cfg.logfile.is_empty() {
        let layer = tracing_subscriber::fmt::layer()
            .with_target(false)
            .with_writer(std::io::stdout);
        let _ = registry.with(layer).try_init();
    } else {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&cfg.logfile)?;
        let layer = tracing_subscriber::fmt::layer()
            .with_target(false)
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(file));
        let _ = registry.with(layer).try_init();
    }
    let _ = RELOAD.set(handle);
    Ok(())
}

/// Applies a new log level (CONFIG SET loglevel). A no-op when logging was never initialised.
pub fn set_level(level: LogLevel) {
    if let Some(h) = RELOAD.get() {
        let _ = h.modify(|f| *f = level_filter(level));
    }
}
