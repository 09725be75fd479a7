//! config/deadbolt.conf documents every directive with its default, and stays that way.

use crate::common;

use deadbolt::config::{file::apply_text, Config, DIRECTIVES};

const CONF: &str = include_str!("../../config/deadbolt.conf");

/// The directive name a line sets or shows (commented-out examples count as showing it).
fn named_lines(name: &str) -> Vec<&'static str> {
    CONF.lines()
        .map(str::trim)
        .filter(|l| {
            let l = l.trim_start_matches('#').trim_start();
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.eq_ignore_ascii_case(name))
        })
        .collect()
}

#[test]
fn every_directive_is_documented_with_its_default() {
    let defaults = Config::default();
    let mut missing = Vec::new();
    for d in DIRECTIVES {
        let lines = named_lines(d.name);
        let active: Vec<_> = lines.iter().filter(|l| !l.starts_with('#')).collect();
        if active.len() != 1 {
            let v = (d.get)(&defaults);
            let shown = if v.is_empty() || v.contains(' ') {
                format!("\"{v}\"")
            } else {
                v
            };
            missing.push(format!("# {}\n{} {}", d.doc, d.name, shown));
        }
    }
    assert!(
        missing.is_empty(),
        "config/deadbolt.conf must set each directive once, to its default; add:\n\n{}",
        missing.join("\n\n")
    );
}

#[test]
fn the_file_parses_and_changes_nothing() {
    let mut cfg = Config::default();
    apply_text(&mut cfg, CONF, "config/deadbolt.conf", None, 0)
        .unwrap_or_else(|e| panic!("config/deadbolt.conf does not parse: {e}"));
    let defaults = Config::default();
    for d in DIRECTIVES {
        assert_eq!(
            (d.get)(&cfg),
            (d.get)(&defaults),
            "config/deadbolt.conf sets {} to something other than its default",
            d.name
        );
    }
}

#[test]
fn the_binary_accepts_the_file() {
    let out = std::process::Command::new(common::deadbolt_bin())
        .args([
            concat!(env!("CARGO_MANIFEST_DIR"), "/config/deadbolt.conf"),
            "--test-config",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout, b"Configuration OK\n");
}

/// docs/configuration.md's directive table, generated from DIRECTIVES.
fn readme_table() -> String {
    let defaults = Config::default();
    let mut out =
        String::from("| directive | default | CONFIG SET | meaning |\n|---|---|---|---|\n");
    for d in DIRECTIVES {
        let name = if d.aliases.is_empty() {
            d.name.to_string()
        } else {
            format!("{} ({})", d.name, d.aliases.join(", "))
        };
        // CONFIG GET dir answers the resolved absolute path (Redis's getcwd after its chdir);
        // the table shows the default as configured.
        let v = if d.name == "dir" {
            defaults.dir.clone()
        } else {
            (d.get)(&defaults)
        };
        let v = if v.is_empty() { "\"\"".to_string() } else { v };
        let mutable = if d.mutable() { "yes" } else { "no" };
        out.push_str(&format!(
            "| {name} | `{v}` | {mutable} | {} |\n",
            d.doc.replace('|', "\\|")
        ));
    }
    out
}

#[test]
fn docs_list_every_directive() {
    let readme = include_str!("../../docs/configuration.md");
    let start = readme
        .find("<!-- directives:start -->\n")
        .expect("docs/configuration.md has the directives markers")
        + "<!-- directives:start -->\n".len();
    let end = readme
        .find("<!-- directives:end -->")
        .expect("docs/configuration.md has the directives end marker");
    let expected = readme_table();
    assert!(
        readme[start..end] == expected,
        "docs/configuration.md's directive table is out of date; put this between the markers:\n\n{expected}"
    );
}
