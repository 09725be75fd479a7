use clap::Parser;
use deadbolt::cli::Cli;
use deadbolt::config;
use std::process::ExitCode;

fn main() -> ExitCode {
    let inv = Cli::parse().invocation();
    let overrides = match config::file::parse_overrides(&inv.overrides) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("deadbolt: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cfg = match config::load(inv.config_file.as_deref(), &overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
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
        tracing::info!(
            "deadbolt {} starting, pid={}",
            env!("CARGO_PKG_VERSION"),
            std::process::id()
        );
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
            tracing::error!("{e}");
            eprintln!("deadbolt: {e}");
            ExitCode::FAILURE
        }
    }
}
