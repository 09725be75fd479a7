//! redis.conf syntax: one directive per line, words split like redis-cli input (quotes and
//! escapes), `#` comments, `include other.conf`, and the last occurrence of a directive wins.
//! Command-line `--name value` pairs are applied after the file, as redis-server does.

use super::Config;
use crate::protocol::decode::split_args;
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct ConfigError {
    pub line_no: usize,
    pub line: String,
    pub reason: String,
    pub source_name: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "\n*** FATAL CONFIG FILE ERROR (deadbolt {}) ***",
            env!("CARGO_PKG_VERSION")
        )?;
        writeln!(
            f,
            "Reading the configuration file, at line {} ({})",
            self.line_no, self.source_name
        )?;
        writeln!(f, ">>> '{}'", self.line)?;
        write!(f, "{}", self.reason)
    }
}

impl std::error::Error for ConfigError {}

/// Builds the configuration from an optional file and the command-line directives.
pub fn load(
    file: Option<&Path>,
    overrides: &[(String, Vec<String>)],
) -> Result<Config, ConfigError> {
    let mut cfg = Config::default();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            line_no: 0,
            line: String::new(),
            reason: format!(
                "Fatal error, can't open config file '{}': {e}",
                path.display()
            ),
            source_name: path.display().to_string(),
        })?;
        apply_text(
            &mut cfg,
            &text,
            &path.display().to_string(),
            path.parent(),
            0,
        )?;
        cfg.config_file = Some(std::fs::canonicalize(path).unwrap_or_else(|_| PathBuf::from(path)));
    }
    for (i, (name, values)) in overrides.iter().enumerate() {
        apply_one(&mut cfg, name, values).map_err(|reason| ConfigError {
            line_no: i + 1,
            line: redact(&format!("{} {}", name, values.join(" "))),
            reason,
            source_name: "command line".into(),
        })?;
    }
    Ok(cfg)
}

pub fn apply_text(
    cfg: &mut Config,
    text: &str,
    source: &str,
    base: Option<&Path>,
    depth: usize,
) -> Result<(), ConfigError> {
    for (idx, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |reason: String| ConfigError {
            line_no: idx + 1,
            line: redact(line),
            reason,
            source_name: source.to_string(),
        };
        let words = split_args(line.as_bytes())
            .ok_or_else(|| err("Unbalanced quotes in configuration line".into()))?;
        let words: Vec<String> = words
            .into_iter()
            .map(|w| String::from_utf8_lossy(&w).into_owned())
            .collect();
        let Some((name, values)) = words.split_first() else {
            continue;
        };
        if name.eq_ignore_ascii_case("include") {
            if depth > 16 || values.len() != 1 {
                return Err(err("Bad include directive".into()));
            }
            let mut path = PathBuf::from(&values[0]);
            if path.is_relative() {
                if let Some(b) = base {
                    path = b.join(path);
                }
            }
            let inner = std::fs::read_to_string(&path)
                .map_err(|e| err(format!("Can't open include file '{}': {e}", path.display())))?;
            apply_text(
                cfg,
                &inner,
                &path.display().to_string(),
                path.parent(),
                depth + 1,
            )?;
            continue;
        }
        apply_one(cfg, name, values).map_err(err)?;
    }
    Ok(())
}

/// Error messages quote the offending line; never with a password in it.
fn redact(line: &str) -> String {
    let name = line.split_whitespace().next().unwrap_or("");
    if ["user", "requirepass", "masterauth", "cluster-secret"]
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n))
    {
        format!("{name} (redacted)")
    } else {
        line.to_string()
    }
}

fn apply_one(cfg: &mut Config, name: &str, values: &[String]) -> Result<(), String> {
    if name.eq_ignore_ascii_case("user") {
        // `--user "alice on >pw"` on the command line arrives as one word.
        let words: Vec<String> = if values.len() == 1 {
            values[0].split_whitespace().map(str::to_string).collect()
        } else {
            values.to_vec()
        };
        return cfg.users.queue_line(&words);
    }
    if values.is_empty() && !name.eq_ignore_ascii_case("requirepass") {
        return Err("wrong number of arguments".into());
    }
    cfg.set(name, &values.join(" "))
}

/// Splits command-line arguments after the optional config file into (directive, values).
/// Like redis-server: `--port 7000 --bind 127.0.0.1 ::1` (a value runs until the next `--`).
pub fn parse_overrides(args: &[String]) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for a in args {
        if let Some(name) = a.strip_prefix("--") {
            if name.is_empty() {
                return Err("empty directive name after --".into());
            }
            out.push((name.to_string(), Vec::new()));
        } else if let Some(last) = out.last_mut() {
            last.1.push(a.clone());
        } else {
            return Err(format!(
                "unexpected argument '{a}' (directives are given as --name value)"
            ));
        }
    }
    Ok(out)
}

/// CONFIG REWRITE: keeps the file's comments and unknown lines, replaces each directive's last
/// line with its current value (dropping earlier duplicates), and appends directives that differ
/// from their defaults and were not in the file. Written to a temporary file and renamed.
///
/// `users`: the `user` lines to write (as Redis, every user, where the first `user` line was or
/// at the end), unless an aclfile holds the users: then the file keeps no `user` line.
pub fn rewrite(path: &Path, cfg: &Config, users: &[String]) -> std::io::Result<()> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let defaults = Config::default();
    let mut lines: Vec<Option<String>> = Vec::new();
    let mut last_line_of: std::collections::HashMap<&'static str, usize> =
        std::collections::HashMap::new();
    let mut first_user = None;
    for raw in text.lines() {
        let trimmed = raw.trim();
        let name = trimmed.split_whitespace().next().unwrap_or("");
        if name.eq_ignore_ascii_case("user") {
            if first_user.is_none() {
                first_user = Some(lines.len());
                lines.push(None);
            }
            continue;
        }
        if !trimmed.starts_with('#') {
            if let Some(d) = Config::find(name) {
                if let Some(prev) = last_line_of.insert(d.name, lines.len()) {
                    lines[prev] = None;
                }
            }
        }
        lines.push(Some(raw.to_string()));
    }
    let render = |name: &str, v: String| {
        if v.is_empty() || v.contains([' ', '"', '\'']) {
            format!(
                "{name} \"{}\"",
                v.replace('\\', "\\\\").replace('"', "\\\"")
            )
        } else {
            format!("{name} {v}")
        }
    };
    for d in super::all_directives() {
        let v = (d.get)(cfg);
        match last_line_of.get(d.name) {
            Some(&idx) => lines[idx] = Some(render(d.name, v)),
            None if v != (d.get)(&defaults) => lines.push(Some(render(d.name, v))),
            None => {}
        }
    }
    if cfg.aclfile.is_empty() {
        let users = users.join("\n");
        match first_user {
            Some(at) => lines[at] = Some(users),
            None if !users.is_empty() => lines.push(Some(users)),
            None => {}
        }
    }
    let mut out: String = lines.into_iter().flatten().collect::<Vec<_>>().join("\n");
    out.push('\n');
    let tmp = path.with_extension("rewrite.tmp");
    std::fs::write(&tmp, out)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_overrides_last_wins() {
        let mut cfg = Config::default();
        apply_text(
            &mut cfg,
            "# comment\nport 7000\nport 7001\nbind \"127.0.0.1\" ::1\nmaxclients 5\n",
            "t",
            None,
            0,
        )
        .unwrap();
        assert_eq!(cfg.port, 7001);
        assert_eq!(cfg.bind, vec!["127.0.0.1", "::1"]);
        let o = parse_overrides(&[
            "--port".into(),
            "7002".into(),
            "--timeout".into(),
            "3".into(),
        ])
        .unwrap();
        for (n, v) in &o {
            apply_one(&mut cfg, n, v).unwrap();
        }
        assert_eq!(cfg.port, 7002);
        assert_eq!(cfg.timeout, 3);
    }

    #[test]
    fn bad_lines_name_the_line() {
        let mut cfg = Config::default();
        let e = apply_text(&mut cfg, "port 1\nport abc\n", "t", None, 0).unwrap_err();
        assert_eq!(e.line_no, 2);
        assert!(e.reason.contains("integer"));
        let e = apply_text(&mut cfg, "nosuch 1\n", "t", None, 0).unwrap_err();
        assert!(e.reason.contains("Bad directive"));
    }
}
