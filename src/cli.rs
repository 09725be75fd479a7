//! Command line, redis-server style: `deadbolt [/path/to/deadbolt.conf] [--directive value …]`.

use clap::Parser;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "deadbolt",
    about = "A lock server that speaks the Redis protocol",
    override_usage = "deadbolt [/path/to/deadbolt.conf] [--directive value ...] [--test-config] [--ping]\n       deadbolt -v | --version",
    after_help = "Examples:\n  deadbolt --port 7000\n  deadbolt /etc/deadbolt/deadbolt.conf --loglevel verbose\n  deadbolt --ping --port 6379     (health probe: exit 0 if the server answers PONG)"
)]
pub struct Cli {
    /// Validate the configuration and exit (0 when valid).
    #[arg(long = "test-config")]
    pub test_config: bool,

    /// Health probe: connect to the configured bind/port, send PING, exit 0 on PONG, 1 otherwise.
    #[arg(long)]
    pub ping: bool,

    /// Optional config file followed by `--directive value` overrides (any directive of the file).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<String>,
}

pub struct Invocation {
    pub config_file: Option<PathBuf>,
    pub overrides: Vec<String>,
    pub test_config: bool,
    pub ping: bool,
}

impl Cli {
    /// Separates the config file from the directives; `--test-config`/`--ping` may appear anywhere.
    pub fn invocation(self) -> Invocation {
        let mut test_config = self.test_config;
        let mut ping = self.ping;
        let mut rest: Vec<String> = Vec::new();
        for a in self.args {
            match a.as_str() {
                "--test-config" => test_config = true,
                "--ping" => ping = true,
                _ => rest.push(a),
            }
        }
        let config_file = match rest.first() {
            Some(first) if !first.starts_with("--") => Some(PathBuf::from(rest.remove(0))),
            _ => None,
        };
        Invocation {
            config_file,
            overrides: rest,
            test_config,
            ping,
        }
    }
}
