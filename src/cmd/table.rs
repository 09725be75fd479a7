//! The command table: one row per command (and per subcommand), with the index every request
//! looks its command up in. Built from the families the registry lists (registry.rs).

use super::spec::{flags, CmdId, CommandSpec, KeySpecDoc};
use std::collections::HashMap;

pub struct Table {
    pub entries: Vec<TableEntry>,
    by_name: NameIndex,
    /// `ONLY_SENTINEL` commands: found only through `lookup_sentinel`.
    sentinel_only: HashMap<Vec<u8>, CmdId, ahash::RandomState>,
}

pub struct TableEntry {
    pub spec: &'static CommandSpec,
    /// `get`, `client|setname`.
    pub full_name: String,
    pub parent: Option<CmdId>,
    /// Subcommand name (lower case) → id.
    pub subs: HashMap<Vec<u8>, CmdId, ahash::RandomState>,
    /// Key specifications declared by the family (see `key_spec_docs`).
    pub key_specs: Option<&'static [KeySpecDoc]>,
    /// Command tips COMMAND INFO prints (see `command_tips`).
    pub tips: &'static [&'static str],
    /// ACL categories (`config::users::CATEGORIES` bits): the declared ones plus those Redis's
    /// setImplicitACLCategories derives from the flags.
    pub categories: u32,
}

/// Redis's setImplicitACLCategories over the declared categories.
pub fn categories(spec: &CommandSpec) -> u32 {
    use crate::config::users::category_bit;
    let bit = |n: &str| category_bit(n.as_bytes()).unwrap_or(0);
    let mut c = spec.acl.iter().fold(0, |m, n| m | bit(n));
    if spec.has(flags::WRITE) {
        c |= bit("write");
    }
    if spec.has(flags::READONLY) && c & bit("scripting") == 0 {
        c |= bit("read");
    }
    if spec.has(flags::ADMIN) {
        c |= bit("admin") | bit("dangerous");
    }
    if spec.has(flags::PUBSUB) {
        c |= bit("pubsub");
    }
    if spec.has(flags::FAST) {
        c |= bit("fast");
    }
    if spec.has(flags::BLOCKING) {
        c |= bit("blocking");
    }
    if c & bit("fast") == 0 {
        c |= bit("slow");
    }
    c
}

/// Top-level command names → ids: open addressing over a table at most a quarter full, hashed
/// (FNV-1a) on the lower-cased bytes as they are read. Every request looks its command up here;
/// an ahash `HashMap` lookup after copying the name lower-cased cost ~160 instructions, this
/// about a third of that. Names are stored lower case, as the specs spell them.
#[derive(Default)]
struct NameIndex {
    /// `("", _)`: an empty slot (no command has an empty name). With the name again as a
    /// zero-padded array, compared whole (a few vector compares, no `memcmp` call).
    slots: Vec<(&'static str, CmdId, [u8; 32])>,
    longest: usize,
    count: usize,
}

impl NameIndex {
    fn hash(name: &[u8]) -> usize {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in name {
            h = (h ^ b.to_ascii_lowercase() as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
        (h ^ (h >> 29)) as usize
    }

    fn insert(&mut self, name: &'static str, id: CmdId) {
        if (self.count + 1) * 4 > self.slots.len() {
            let old = std::mem::take(&mut self.slots);
            self.slots = vec![("", 0, [0; 32]); (old.len() * 2).max(64)];
            self.count = 0;
            for (n, i, _) in old.into_iter().filter(|(n, ..)| !n.is_empty()) {
                self.place(n, i);
            }
        }
        self.place(name, id);
        self.longest = self.longest.max(name.len());
    }

    fn place(&mut self, name: &'static str, id: CmdId) {
        let mask = self.slots.len() - 1;
        let mut at = Self::hash(name.as_bytes()) & mask;
        loop {
            let slot = &mut self.slots[at];
            if slot.0.is_empty() {
                let mut padded = [0u8; 32];
                // Longer names are never looked up here (`get` refuses them first).
                let n = name.len().min(32);
                padded[..n].copy_from_slice(&name.as_bytes()[..n]);
                *slot = (name, id, padded);
                self.count += 1;
                return;
            }
            if slot.0 == name {
                // A later spec of the same name wins, as `HashMap::insert` did.
                slot.1 = id;
                return;
            }
            at = (at + 1) & mask;
        }
    }

    #[inline]
    fn get(&self, name: &[u8]) -> Option<CmdId> {
        if name.is_empty() || name.len() > self.longest || name.len() > 32 {
            return None;
        }
        // Lower-cased once (branch-free) and hashed as it is copied; then plain compares.
        let mut lower = [0u8; 32];
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (d, &b) in lower.iter_mut().zip(name) {
            let l = b | ((b.wrapping_sub(b'A') < 26) as u8) << 5;
            *d = l;
            h = (h ^ l as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
        let mask = self.slots.len() - 1;
        let mut at = (h ^ (h >> 29)) as usize & mask;
        loop {
            let (n, id, padded) = &self.slots[at];
            if n.is_empty() {
                return None;
            }
            // Equal padded arrays and lengths: equal names (a NUL in the request's name is
            // told apart by the length).
            if n.len() == name.len() && *padded == lower {
                return Some(*id);
            }
            at = (at + 1) & mask;
        }
    }
}

impl Table {
    /// The table of these families' commands, with the key specifications and tips they
    /// declare by command name.
    pub fn build(
        families: Vec<&'static [CommandSpec]>,
        key_specs: Vec<&'static [(&'static str, &'static [KeySpecDoc])]>,
        tips: Vec<&'static [(&'static str, &'static [&'static str])]>,
    ) -> Table {
        let mut t = Table {
            entries: Vec::new(),
            by_name: NameIndex::default(),
            sentinel_only: HashMap::default(),
        };
        let docs: HashMap<&str, &'static [KeySpecDoc]> =
            key_specs.into_iter().flatten().copied().collect();
        let tips: HashMap<&str, &'static [&'static str]> =
            tips.into_iter().flatten().copied().collect();
        for fam in families {
            for spec in fam {
                let id = t.entries.len();
                t.entries.push(TableEntry {
                    spec,
                    full_name: spec.name.to_string(),
                    parent: None,
                    subs: HashMap::default(),
                    key_specs: docs.get(spec.name).copied(),
                    tips: tips.get(spec.name).copied().unwrap_or(&[]),
                    categories: categories(spec),
                });
                if spec.has(flags::ONLY_SENTINEL) {
                    t.sentinel_only.insert(spec.name.as_bytes().to_vec(), id);
                } else {
                    t.by_name.insert(spec.name, id);
                }
                for sub in spec.subcommands {
                    let sid = t.entries.len();
                    let full_name = format!("{}|{}", spec.name, sub.name);
                    t.entries.push(TableEntry {
                        spec: sub,
                        key_specs: docs.get(full_name.as_str()).copied(),
                        tips: tips.get(full_name.as_str()).copied().unwrap_or(&[]),
                        full_name,
                        parent: Some(id),
                        subs: HashMap::default(),
                        categories: categories(sub),
                    });
                    t.entries[id].subs.insert(sub.name.as_bytes().to_vec(), sid);
                }
            }
        }
        t
    }

    /// Case-insensitive lookup of a top-level command, once per request.
    pub fn lookup(&self, name: &[u8]) -> Option<CmdId> {
        self.by_name.get(name)
    }

    /// A command that exists only in cluster mode (SENTINEL).
    pub fn lookup_sentinel(&self, name: &[u8]) -> Option<CmdId> {
        if name.len() > 32 {
            return None;
        }
        self.sentinel_only.get(&name.to_ascii_lowercase()).copied()
    }

    pub fn lookup_sub(&self, parent: CmdId, name: &[u8]) -> Option<CmdId> {
        if name.len() > 64 {
            return None;
        }
        self.entries[parent]
            .subs
            .get(&name.to_ascii_lowercase())
            .copied()
    }

    /// Top-level commands, for COMMAND and COMMAND COUNT (a lone Redis lists no Sentinel
    /// command).
    pub fn top_level(&self) -> impl Iterator<Item = (CmdId, &TableEntry)> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.parent.is_none() && !e.spec.has(flags::ONLY_SENTINEL))
    }
}
