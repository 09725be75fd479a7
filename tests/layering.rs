//! The crate's modules form layers, and imports only point down (docs/design.md): the wire format and the data know nothing above them, the configuration
//! table knows no command or loop, the state machine knows no event loop, handlers and scripts
//! see the state machine, and the event loop sits on top. A new `use` that points up fails here,
//! naming the file.
//!
//! Inside `cmd/` the files form layers too: `spec.rs` (what a command is) imports nothing of
//! `cmd/`; the helpers (`support.rs` and the small parsers beside it) import only `spec` and each
//! other; a command family (a file, or a file with its folder) imports only `spec`, the helpers,
//! and the top: `registry.rs` (the table, to look a command up) and `dispatch.rs` (to run one or
//! check its permissions); `registry.rs` is the one file that imports every family. Without
//! those calls back up through the top, the files import each other without a cycle.
//!
//! Read from the sources: every `crate::<module>` path (grouped `use crate::{a, b}` too) outside
//! `#[cfg(test)]` code, and inside `cmd/` every `super::<file>` path as well.

use std::collections::BTreeSet;
use std::path::Path;

/// Layers, lowest first. A module may import any module of a lower layer; within a layer only
/// the modules listed together in `PEERS`.
const LAYERS: &[&[&str]] = &[
    &["protocol", "clock", "glob", "alloc", "stopwatch", "cli"],
    &["store", "error", "locks"],
    &["config"],
    &["persist"],
    &["replication"],
    &["logging", "supervise"],
    &["machine"],
    &["cmd", "script"],
    &["exec", "server", "redisrepl"],
    &["lib", "main"],
];

/// Modules of one layer that call each other: scripts run commands through dispatch and the
/// scripting commands run scripts; the accept side and the event loop are one network layer.
const PEERS: &[(&str, &str)] = &[("cmd", "script"), ("exec", "server"), ("exec", "redisrepl")];

fn layer_of(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|l| l.contains(&module))
        .unwrap_or_else(|| panic!("module `{module}` has no layer in tests/layering.rs"))
}

fn allowed(from: &str, to: &str) -> bool {
    let (a, b) = (layer_of(from), layer_of(to));
    a > b
        || (a == b
            && PEERS
                .iter()
                .any(|&(x, y)| (x, y) == (from, to) || (y, x) == (from, to)))
}

/// The module names a source refers to as `crate::name`, test code and comments left out.
fn references(src: &str) -> BTreeSet<String> {
    let code: String = src
        .split("#[cfg(test)]")
        .next()
        .unwrap_or("")
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name = item.trim().split("::").next().unwrap_or("").trim();
                if !name.is_empty() {
                    out.insert(name.to_string());
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn imports_point_down_the_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&root).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        let src = std::fs::read_to_string(file).unwrap();
        for target in references(&src) {
            if target != module && !allowed(&module, &target) {
                wrong.push(format!("{} imports crate::{target}", rel.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that point up the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_checker_sees_grouped_and_plain_paths_and_skips_tests() {
    let src = "use crate::{exec::Server, store};\nfn f() { crate::cmd::x(); } // crate::script\n#[cfg(test)]\nuse crate::cli;";
    let got: Vec<String> = references(src).into_iter().collect();
    assert_eq!(got, ["cmd", "exec", "store"]);
    assert!(allowed("cmd", "machine"));
    assert!(allowed("cmd", "script"));
    assert!(!allowed("machine", "exec"));
    assert!(!allowed("config", "cmd"));
    assert!(allowed("store", "protocol"));
}

// ---- inside cmd/ ----------------------------------------------------------------------------

/// What a command is: imports nothing of `cmd/`.
const CMD_SPEC: &str = "spec";
/// Helpers the families share: import `spec` and each other only.
const CMD_HELPERS: &[&str] = &[
    "support",
    "args",
    "blocking",
    "keyspec",
    "table",
    "tracking",
    "acl_redis",
    "slots",
    "migrate_conn",
];
/// The top: the registry names every family; dispatch runs commands. Families may call up into
/// these (a command looked up or run by name), nothing else does.
const CMD_TOP: &[&str] = &["registry", "dispatch"];
/// `cmd/mod.rs`: declares the files and re-exports `spec` for the rest of the crate.
const CMD_ROOT: &str = "mod";

/// The file of `cmd/` a source belongs to: `cmd/zset.rs` → `zset`, `cmd/sentinel/tests.rs` →
/// `sentinel` (a folder belongs to the file of its name).
fn cmd_unit(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The files of `cmd/` a source of unit `unit` (at folder depth `depth` below `cmd/`) refers to:
/// `super::x`, `super::super::x` from a folder, `crate::cmd::x`, grouped paths too. A name that
/// is no file of `cmd/` is an item of `cmd/mod.rs` (`CMD_ROOT`).
fn cmd_references(src: &str, depth: usize, units: &BTreeSet<String>) -> BTreeSet<String> {
    let code = strip_tests_and_comments(src);
    let up = "super::".repeat(depth + 1);
    let mut out = BTreeSet::new();
    for prefix in [up.as_str(), "crate::cmd::"] {
        let mut rest = code.as_str();
        while let Some(i) = rest.find(prefix) {
            let before = rest[..i].chars().last();
            rest = &rest[i + prefix.len()..];
            // `super::super::x` seen from `super::`: counted at its own depth only.
            if before.is_some_and(|c| c == ':' || c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            if rest.starts_with("super::") {
                continue;
            }
            let names: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                group[..end]
                    .split(',')
                    .map(|item| {
                        item.trim()
                            .split("::")
                            .next()
                            .unwrap_or("")
                            .trim()
                            .to_string()
                    })
                    .collect()
            } else {
                vec![rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect()]
            };
            for name in names.into_iter().filter(|n| !n.is_empty() && n != "self") {
                if units.contains(&name) {
                    out.insert(name);
                } else {
                    out.insert(CMD_ROOT.to_string());
                }
            }
        }
    }
    out
}

/// The code of `src` without comments and without `#[cfg(test)]` items: a test module (inline
/// or in its own file) and single test-only items such as a `use`.
fn strip_tests_and_comments(src: &str) -> String {
    let mut out = Vec::new();
    let mut lines = src.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" {
            match lines.next() {
                // An inline module: up to its closing brace at the same indentation.
                Some(item) if item.trim_end().ends_with('{') => {
                    let indent = item.len() - item.trim_start().len();
                    let close = format!("{}}}", " ".repeat(indent));
                    for l in lines.by_ref() {
                        if l.trim_end() == close {
                            break;
                        }
                    }
                }
                _ => {}
            }
            continue;
        }
        out.push(line.split("//").next().unwrap_or(""));
    }
    out.join("\n")
}

/// (unit, the units it imports) for every source of `cmd/` that is not a test module.
fn cmd_graph(root: &Path) -> Vec<(String, BTreeSet<String>)> {
    let mut files = Vec::new();
    sources(root, &mut files);
    let units: BTreeSet<String> = files
        .iter()
        .map(|f| cmd_unit(f.strip_prefix(root).unwrap()))
        .collect();
    let mut graph: Vec<(String, BTreeSet<String>)> = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(root).unwrap();
        // Test modules in their own files (`sentinel/tests.rs`) are test code.
        if rel.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let unit = cmd_unit(rel);
        let depth = rel.components().count() - 1;
        let src = std::fs::read_to_string(file).unwrap();
        let mut refs = cmd_references(&src, depth, &units);
        refs.remove(&unit);
        match graph.iter_mut().find(|(u, _)| *u == unit) {
            Some((_, r)) => r.extend(refs),
            None => graph.push((unit, refs)),
        }
    }
    graph.sort();
    graph
}

fn is_family(unit: &str) -> bool {
    unit != CMD_SPEC && unit != CMD_ROOT && !CMD_HELPERS.contains(&unit) && !CMD_TOP.contains(&unit)
}

/// What the rules above say is wrong with `graph`, one line each.
fn cmd_layering_errors(graph: &[(String, BTreeSet<String>)]) -> Vec<String> {
    let mut wrong = Vec::new();
    let families: BTreeSet<&str> = graph
        .iter()
        .map(|(u, _)| u.as_str())
        .filter(|u| is_family(u))
        .collect();
    for (unit, refs) in graph {
        for r in refs {
            let ok = match unit.as_str() {
                CMD_ROOT => r == CMD_SPEC,
                CMD_SPEC => false,
                u if CMD_HELPERS.contains(&u) => r == CMD_SPEC || CMD_HELPERS.contains(&r.as_str()),
                "registry" => r != CMD_ROOT && r != "dispatch",
                "dispatch" => r == CMD_SPEC || r == "registry" || CMD_HELPERS.contains(&r.as_str()),
                _ => {
                    r == CMD_SPEC
                        || CMD_HELPERS.contains(&r.as_str())
                        || CMD_TOP.contains(&r.as_str())
                }
            };
            if !ok {
                wrong.push(format!("cmd/{unit} imports cmd/{r}"));
            }
        }
    }
    // Only the registry names the families; it names every one of them.
    if let Some((_, refs)) = graph.iter().find(|(u, _)| u == "registry") {
        for f in &families {
            if !refs.contains(*f) {
                wrong.push(format!("cmd/registry does not name the family cmd/{f}"));
            }
        }
    } else {
        wrong.push("cmd/registry.rs is missing".to_string());
    }
    // No cycle once the calls back up through the top are set aside.
    let down = |u: &str| -> Vec<String> {
        graph
            .iter()
            .find(|(x, _)| x == u)
            .map(|(_, r)| {
                r.iter()
                    .filter(|t| !CMD_TOP.contains(&t.as_str()) || CMD_TOP.contains(&u))
                    .filter(|t| !(CMD_TOP.contains(&u) && CMD_TOP.contains(&t.as_str())))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    };
    for (start, _) in graph {
        // Depth-first search for a path from `start` back to itself.
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((at, path)) = stack.pop() {
            for next in down(&at) {
                if next == *start {
                    let cycle = format!("cycle: cmd/{} -> cmd/{start}", path.join(" -> cmd/"));
                    if !wrong.contains(&cycle) && path.len() > 1 && path.iter().min() == Some(start)
                    {
                        wrong.push(cycle);
                    }
                } else if seen.insert(next.clone()) {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next, p));
                }
            }
        }
    }
    wrong
}

#[test]
fn cmd_files_form_layers_without_a_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join("cmd");
    let wrong = cmd_layering_errors(&cmd_graph(&root));
    assert!(
        wrong.is_empty(),
        "cmd/ layering (see the top of tests/layering.rs):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_cmd_checker_sees_folders_groups_and_cycles() {
    let units: BTreeSet<String> = ["spec", "zset", "geo", "support", "registry", "dispatch"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let src = "use super::spec::{flags, Ctx};\nuse super::{support::read_str, Ctx};\nfn f() { crate::cmd::zset::x(); super::registry::table(); } // super::geo\n#[cfg(test)]\nuse super::geo;";
    let got: Vec<String> = cmd_references(src, 0, &units).into_iter().collect();
    assert_eq!(got, ["mod", "registry", "spec", "support", "zset"]);
    // From a folder, `super::` is the family itself and `super::super::` the files of cmd/.
    let nested = "use super::*;\nuse super::super::zset::x;\nuse crate::cmd::spec::Ctx;";
    let got: Vec<String> = cmd_references(nested, 1, &units).into_iter().collect();
    assert_eq!(got, ["spec", "zset"]);

    let g = |edges: &[(&str, &[&str])]| -> Vec<(String, BTreeSet<String>)> {
        edges
            .iter()
            .map(|(u, r)| (u.to_string(), r.iter().map(|s| s.to_string()).collect()))
            .collect()
    };
    let good = g(&[
        ("spec", &[]),
        ("support", &["spec"]),
        ("zset", &["spec", "support", "registry"]),
        ("geo", &["spec", "support", "dispatch"]),
        ("dispatch", &["spec", "support", "registry"]),
        ("registry", &["spec", "zset", "geo"]),
    ]);
    assert_eq!(cmd_layering_errors(&good), Vec::<String>::new());
    // Today's shape before the split: a family borrowing another's helper, the spec types
    // beside the family list, a family the registry forgets.
    let bad = g(&[
        ("spec", &["registry"]),
        ("support", &["spec", "zset"]),
        ("zset", &["spec", "geo"]),
        ("geo", &["spec", "zset"]),
        ("dispatch", &["spec", "zset"]),
        ("registry", &["spec", "zset"]),
    ]);
    let errors = cmd_layering_errors(&bad);
    for expected in [
        "cmd/spec imports cmd/registry",
        "cmd/support imports cmd/zset",
        "cmd/zset imports cmd/geo",
        "cmd/geo imports cmd/zset",
        "cmd/dispatch imports cmd/zset",
        "cmd/registry does not name the family cmd/geo",
        "cycle: cmd/geo -> cmd/zset -> cmd/geo",
    ] {
        assert!(
            errors.iter().any(|e| e == expected),
            "{expected} not in {errors:#?}"
        );
    }
}
