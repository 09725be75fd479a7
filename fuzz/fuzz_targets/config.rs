//! The config-file parser and the directive table: any text gives a configuration or a clean
//! error, never a panic. `include` lines are dropped (the fuzzer must not read the file system);
//! the same words are also applied as command-line overrides.
#![no_main]
use deadbolt::config::file::{apply_text, load, parse_overrides};
use deadbolt::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().to_ascii_lowercase().starts_with("include"))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut cfg = Config::default();
    if let Err(e) = apply_text(&mut cfg, &text, "fuzz.conf", None, 0) {
        let shown = e.to_string();
        assert!(
            shown.contains("FATAL CONFIG FILE ERROR"),
            "unclear error: {shown}"
        );
    }
    // Each line as `--name value ...` on the command line.
    let args: Vec<String> = text
        .lines()
        .flat_map(|l| {
            let mut words = l.split_whitespace().map(str::to_string);
            let first = words.next().map(|w| format!("--{w}"));
            first.into_iter().chain(words).collect::<Vec<_>>()
        })
        .collect();
    if let Ok(overrides) = parse_overrides(&args) {
        let _ = load(None, &overrides);
    }
});
