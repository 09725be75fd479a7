//! The durability directives' values: `appendfsync` and the `save` points.

/// When the append-only file is fsynced (`appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fsync {
    Always,
    EverySec,
    No,
}

impl Fsync {
    pub fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::EverySec => "everysec",
            Fsync::No => "no",
        }
    }

    pub fn parse(v: &str) -> Option<Fsync> {
        match v.to_ascii_lowercase().as_str() {
            "always" => Some(Fsync::Always),
            "everysec" => Some(Fsync::EverySec),
            "no" => Some(Fsync::No),
            _ => None,
        }
    }
}

/// `save` as Redis parses it: pairs of seconds and changes ("" for none).
pub fn parse_save_points(v: &str) -> Result<Vec<(u64, u64)>, String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if words.len() == 1 && (words[0] == "\"\"" || words[0].is_empty()) {
        return Ok(Vec::new());
    }
    if words.len() % 2 != 0 {
        return Err("Invalid save parameters".into());
    }
    words
        .chunks(2)
        .map(|p| match (p[0].parse::<u64>(), p[1].parse::<u64>()) {
            (Ok(s), Ok(c)) if s >= 1 => Ok((s, c)),
            _ => Err("Invalid save parameters".into()),
        })
        .collect()
}
