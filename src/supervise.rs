//! `daemonize yes` and `supervised`, as redis-server does them: a daemon forks away from its
//! terminal (the parent exits 0 at once, the pid file names the child), and a supervised server
//! tells systemd (`sd_notify` over `$NOTIFY_SOCKET`) or upstart (SIGSTOP) when it is ready,
//! which is only once the append-only file is loaded.

use crate::config::Config;
use std::os::unix::net::UnixDatagram;

/// Where a daemon's pid goes when `pidfile` is not set (Redis: /var/run/redis.pid).
pub const DEFAULT_PIDFILE: &str = "/var/run/deadbolt.pid";

pub fn daemonize_wanted(cfg: &Config) -> bool {
    cfg.compat_value("daemonize") == "yes"
}

/// Forks: the parent exits 0, the child leaves the terminal's session and its standard streams
/// go to /dev/null (the log then needs `logfile`, as with Redis). Must run before any thread
/// is started: only the calling thread survives a fork.
pub fn daemonize() -> std::io::Result<()> {
    // SAFETY: called from main before the runtime, the logger or any other thread exists, so
    // the child is a complete copy of a single-threaded process; the parent only exits.
    unsafe {
        match libc::fork() {
            -1 => return Err(std::io::Error::last_os_error()),
            0 => {}
            _ => libc::_exit(0),
        }
        if libc::setsid() == -1 {
            return Err(std::io::Error::last_os_error());
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null != -1 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Supervisor {
    No,
    Systemd,
    Upstart,
}

/// Redis's `supervised` resolution: `auto` means systemd when `$NOTIFY_SOCKET` is set, upstart
/// when `$UPSTART_JOB` is.
pub fn supervisor(cfg: &Config) -> Supervisor {
    match cfg.compat_value("supervised") {
        "systemd" => Supervisor::Systemd,
        "upstart" => Supervisor::Upstart,
        "auto" if std::env::var_os("NOTIFY_SOCKET").is_some() => Supervisor::Systemd,
        "auto" if std::env::var_os("UPSTART_JOB").is_some() => Supervisor::Upstart,
        _ => Supervisor::No,
    }
}

/// INFO's `process_supervised`.
pub fn info_name(cfg: &Config) -> &'static str {
    match supervisor(cfg) {
        Supervisor::No => "no",
        Supervisor::Systemd => "systemd",
        Supervisor::Upstart => "upstart",
    }
}

/// The log is loaded and clients are served.
pub fn ready(cfg: &Config) {
    match supervisor(cfg) {
        Supervisor::Systemd => {
            tracing::info!("Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit.");
            notify_systemd("STATUS=Ready to accept connections\nREADY=1\n");
        }
        Supervisor::Upstart => {
            tracing::info!("Supervised by upstart, will stop to signal readiness.");
            // SAFETY: raising a signal on ourselves; upstart resumes us with SIGCONT.
            unsafe {
                libc::raise(libc::SIGSTOP);
            }
        }
        Supervisor::No => {}
    }
}

/// Shutting down under systemd: it then waits for the exit instead of killing at once.
pub fn stopping() {
    notify_systemd("STOPPING=1\n");
}

fn notify_systemd(message: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        tracing::warn!(
            "systemd supervision requested or auto-detected, but NOTIFY_SOCKET is not set"
        );
        return;
    };
    let sent = (|| -> std::io::Result<usize> {
        let sock = UnixDatagram::unbound()?;
        let bytes = path.as_encoded_bytes();
        if let Some(name) = bytes.strip_prefix(b"@") {
            // An abstract socket (systemd's usual form): '@' stands for the leading NUL.
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            sock.send_to_addr(message.as_bytes(), &addr)
        } else {
            sock.send_to(message.as_bytes(), &path)
        }
    })();
    if let Err(e) = sent {
        tracing::warn!("Could not notify systemd ({}): {e}", path.to_string_lossy());
    }
}
