use clap::Parser;
use deadbolt::cli::Cli;
use deadbolt::config;
use std::process::ExitCode;

fn main() -> ExitCode {
    // redis-server's own check, before any other parsing: `-v` or `--version` as the first
    // argument prints the version line and exits (a config file could never be named `-v`).
    if let Some("-v" | "--version") = std::env::args().nth(1).as_deref() {
        println!("{}", deadbolt::version_line());
        return ExitCode::SUCCESS;
    }
    let inv = Cli::parse().invocation();
    let overrides = match config::file::parse_overrides(&inv.overrides) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("deadbolt: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut cfg = match config::load(inv.config_file.as_deref(), &overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    // The users need the command table, so they are loaded after the whole configuration.
    if let Err(e) = deadbolt::cmd::acl::load_at_startup(&mut cfg) {
        eprintln!("deadbolt: {e}");
        return ExitCode::FAILURE;
    }
    let inv_config_file = inv.config_file.is_some();
    if let Some(why) = cfg.cluster_refusal() {
        eprintln!("deadbolt: {why}");
        return ExitCode::FAILURE;
    }
    if inv.test_config {
        println!("Configuration OK");
        return ExitCode::SUCCESS;
    }
    if inv.ping {
        return if deadbolt::cli_ping(&cfg) {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    if deadbolt::supervise::daemonize_wanted(&cfg) {
        // Before the logger and the runtime start their threads: only this one survives.
        if let Err(e) = deadbolt::supervise::daemonize() {
            eprintln!("deadbolt: cannot daemonize: {e}");
            return ExitCode::FAILURE;
        }
        if cfg.pidfile.is_empty() {
            cfg.pidfile = deadbolt::supervise::DEFAULT_PIDFILE.into();
        }
    }
    if let Err(e) = deadbolt::logging::init(&cfg) {
        eprintln!("deadbolt: cannot open log file '{}': {e}", cfg.logfile);
        return ExitCode::FAILURE;
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("deadbolt: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async move {
        // Redis's banner lines, which operators and log pipelines look for.
        tracing::warn!("oO0OoO0OoO0Oo deadbolt is starting oO0OoO0OoO0Oo");
        tracing::warn!(
            "deadbolt version={} (Redis {} protocol), bits={}, commit=00000000, modified=0, pid={}, just started",
            env!("CARGO_PKG_VERSION"),
            deadbolt::machine::REDIS_VERSION,
            usize::BITS,
            std::process::id()
        );
        if inv_config_file {
            tracing::warn!("Configuration loaded");
        } else {
            tracing::warn!("Warning: no config file specified, using the default config. In order to specify a config file use deadbolt /path/to/deadbolt.conf");
        }
        let listeners = deadbolt::bind(&cfg).await?;
        if !cfg.pidfile.is_empty() {
            if let Err(e) = std::fs::write(&cfg.pidfile, format!("{}\n", std::process::id())) {
                tracing::warn!("Failed to write PID file: {e}");
            }
        }
        let pidfile = cfg.pidfile.clone();
        let r = deadbolt::run(cfg, listeners, deadbolt::shutdown_signal()).await;
        if !pidfile.is_empty() {
            let _ = std::fs::remove_file(&pidfile);
        }
        r
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            deadbolt::logging::error_once(&e.to_string());
            ExitCode::FAILURE
        }
    }
}
