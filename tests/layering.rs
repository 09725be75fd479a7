//! The crate's modules form layers, and imports only point down (README "Design", and
//! ../shared/design.md): the wire format and the data know nothing above them, the configuration
//! table knows no command or loop, the state machine knows no event loop, handlers and scripts
//! see the state machine, and the event loop sits on top. A new `use` that points up fails here,
//! naming the file.
//!
//! Read from the sources: every `crate::<module>` path (grouped `use crate::{a, b}` too) outside
//! `#[cfg(test)]` code.

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
    &["exec", "server"],
    &["lib", "main", "fuzzing"],
];

/// Modules of one layer that call each other: scripts run commands through dispatch and the
/// scripting commands run scripts; the accept side and the event loop are one network layer.
const PEERS: &[(&str, &str)] = &[("cmd", "script"), ("exec", "server")];

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
    let src = "use crate::{exec::Server, store};\nfn f() { crate::cmd::x(); } // crate::script\n#[cfg(test)]\nuse crate::fuzzing;";
    let got: Vec<String> = references(src).into_iter().collect();
    assert_eq!(got, ["cmd", "exec", "store"]);
    assert!(allowed("cmd", "machine"));
    assert!(allowed("cmd", "script"));
    assert!(!allowed("machine", "exec"));
    assert!(!allowed("config", "cmd"));
    assert!(allowed("store", "protocol"));
}
