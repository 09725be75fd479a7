//! tracing-subscriber set up from `loglevel` and `logfile`; CONFIG SET loglevel changes the
//! filter at run time through a reload handle.
//!
//! Lines are written as Redis writes them (server.c `serverLogRaw`), because log pipelines and
//! operators' greps parse that shape: `pid:role dd Mon yyyy hh:mm:ss.mmm level message`, the
//! role `M` (a master, a lone server, a cluster leader) or `S` (a cluster follower), the level
//! `.` debug, `-` verbose, `*` notice, `#` warning. No colour codes, on a terminal or not:
//! Redis writes none, and a file or container log must not get any.

use crate::config::{Config, LogLevel};
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::reload;

type Handle = reload::Handle<LevelFilter, tracing_subscriber::Registry>;
static RELOAD: OnceLock<Handle> = OnceLock::new();
/// The role letter of every line from now on (Redis's `role_char`).
static ROLE: AtomicU8 = AtomicU8::new(b'M');

pub fn level_filter(level: LogLevel) -> LevelFilter {
    match level {
        LogLevel::Debug => LevelFilter::TRACE,
        LogLevel::Verbose => LevelFilter::DEBUG,
        LogLevel::Notice => LevelFilter::INFO,
        LogLevel::Warning => LevelFilter::WARN,
        LogLevel::Nothing => LevelFilter::OFF,
    }
}

/// A cluster node tells the log whether it now follows (`S`) or leads (`M`).
pub fn set_replica(replica: bool) {
    ROLE.store(if replica { b'S' } else { b'M' }, Ordering::Relaxed);
}

struct RedisFormat;

impl<S, N> FormatEvent<S, N> for RedisFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let level = match *event.metadata().level() {
            Level::TRACE => '.',
            Level::DEBUG => '-',
            Level::INFO => '*',
            Level::WARN | Level::ERROR => '#',
        };
        let role = ROLE.load(Ordering::Relaxed) as char;
        write!(w, "{}:{role} ", std::process::id())?;
        write_timestamp(&mut w)?;
        write!(w, " {level} ")?;
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `26 Nov 2026 12:48:30.675` in local time, as Redis's `strftime("%d %b %Y %H:%M:%S.")` plus
/// milliseconds.
fn write_timestamp(w: &mut Writer<'_>) -> fmt::Result {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    // SAFETY: `tm` is plain data that localtime_r fills in; both pointers are valid for the
    // call and localtime_r keeps neither.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return write!(w, "{}", now.as_secs());
        }
        tm
    };
    let month = MONTHS.get(tm.tm_mon as usize).copied().unwrap_or("???");
    write!(
        w,
        "{:02} {month} {} {:02}:{:02}:{:02}.{:03}",
        tm.tm_mday,
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        now.subsec_millis()
    )
}

pub fn init(cfg: &Config) -> std::io::Result<()> {
    let (filter, handle) = reload::Layer::new(level_filter(cfg.loglevel));
    let registry = tracing_subscriber::registry().with(filter);
    if cfg.logfile.is_empty() {
        let layer = tracing_subscriber::fmt::layer()
            .event_format(RedisFormat)
            .with_ansi(false)
            .with_writer(std::io::stdout);
        let _ = registry.with(layer).try_init();
    } else {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&cfg.logfile)?;
        let layer = tracing_subscriber::fmt::layer()
            .event_format(RedisFormat)
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(file));
        let _ = registry.with(layer).try_init();
    }
    let _ = RELOAD.set(handle);
    SINK.store(
        if cfg.logfile.is_empty() { 1 } else { 2 },
        Ordering::Relaxed,
    );
    Ok(())
}

/// Where lines go: 0 nowhere yet (logging not initialised), 1 standard output, 2 a file.
static SINK: AtomicU8 = AtomicU8::new(0);

/// A fatal error, said once where the operator looks: the log line, and on standard error too
/// only when the log is a file (or not set up yet), so a terminal never shows it twice.
pub fn error_once(msg: &str) {
    let sink = SINK.load(Ordering::Relaxed);
    if sink != 0 {
        tracing::error!("{msg}");
    }
    if sink != 1 {
        eprintln!("{msg}");
    }
}

/// Applies a new log level (CONFIG SET loglevel). A no-op when logging was never initialised.
pub fn set_level(level: LogLevel) {
    if let Some(h) = RELOAD.get() {
        let _ = h.modify(|f| *f = level_filter(level));
    }
}
