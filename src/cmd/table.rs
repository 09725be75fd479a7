//! The command table: one row per command (and per subcommand), built once at start-up.

use super::Ctx;
use crate::error::CmdResult;
use bytes::Bytes;
use std::collections::HashMap;

pub type Handler = fn(&mut Ctx, &[Bytes]) -> CmdResult;

pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    /// Refused inside Lua scripts.
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const FAST: u32 = 1 << 9;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 10;
    pub const MAY_REPLICATE: u32 = 1 << 11;
    /// Runs while a script is busy (SCRIPT KILL, SHUTDOWN NOSAVE...).
    pub const ALLOW_BUSY: u32 = 1 << 12;
    /// Cannot be queued in MULTI.
    pub const NO_MULTI: u32 = 1 << 13;
    /// Executed immediately even inside MULTI (EXEC, DISCARD, MULTI, WATCH, QUIT, RESET).
    pub const TX_CONTROL: u32 = 1 << 14;
    /// Allowed in RESP2 subscribed mode.
    pub const PUBSUB_OK: u32 = 1 << 15;
    pub const SKIP_MONITOR: u32 = 1 << 16;
    pub const SKIP_SLOWLOG: u32 = 1 << 17;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 18;
    /// Key positions depend on the arguments (Redis sets this from non-range key specs).
    pub const MOVABLE_KEYS: u32 = 1 << 19;
    /// Refused while a replica loads its data asynchronously (printed only; deadbolt has no
    /// replication).
    pub const NO_ASYNC_LOADING: u32 = 1 << 20;
    /// Exists only in cluster mode, where every node also answers as a Sentinel (Redis's
    /// CMD_ONLY_SENTINEL): a lone server knows no such command, and COMMAND does not list it.
    /// Not printed, as in Redis.
    pub const ONLY_SENTINEL: u32 = 1 << 21;

    /// (flag, name COMMAND INFO prints), in Redis's order.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLE_KEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// Key positions as in Redis's legacy (first, last, step) triple; last < 0 counts from the end.
#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    pub first: i32,
    pub last: i32,
    pub step: i32,
}

pub const NO_KEYS: KeySpec = KeySpec {
    first: 0,
    last: 0,
    step: 0,
};
pub const KEY1: KeySpec = KeySpec {
    first: 1,
    last: 1,
    step: 1,
};

/// Two keys, first and second argument (RENAME, LMOVE, SMOVE, GEODIST's source/destination…).
pub const TWO_KEYS: KeySpec = KeySpec {
    first: 1,
    last: 2,
    step: 1,
};
pub const ALL_KEYS: KeySpec = KeySpec {
    first: 1,
    last: -1,
    step: 1,
};

/// One of Redis 7's key specifications, as COMMAND INFO prints it (index begin-search, range
/// find-keys). Families that declare these get them printed instead of the flagless spec
/// derived from `KeySpec`.
#[derive(Debug)]
pub struct KeySpecDoc {
    pub notes: Option<&'static str>,
    /// In Redis's print order: RO RW OW RM access update insert delete ... variable_flags.
    pub flags: &'static [&'static str],
    pub begin_index: i32,
    pub lastkey: i32,
    pub keystep: i32,
    /// A `keynum` find-keys spec instead of `range`: (keynumidx, firstkey, keystep); then
    /// `lastkey` and `keystep` above are unused.
    pub keynum: Option<(i32, i32, i32)>,
    /// A `keyword` begin-search (GEORADIUS's STORE): the keyword, searched from
    /// `begin_index` on, instead of an `index` one.
    pub keyword: Option<&'static str>,
    /// A range find-keys spec's `limit` (XREAD's STREAMS: the keys are the first half of what
    /// follows).
    pub limit: i32,
}

/// `begin_index` of a spec whose begin_search and find_keys are both `unknown` (Redis never
/// begins a key search at index 0, the command name).
pub const SPEC_UNKNOWN: i32 = 0;

impl KeySpecDoc {
    /// Key names that cannot be found from the arguments' positions (SORT's BY/GET/STORE).
    pub const fn unknown(notes: &'static str, flags: &'static [&'static str]) -> Self {
        KeySpecDoc {
            notes: Some(notes),
            flags,
            begin_index: SPEC_UNKNOWN,
            lastkey: 0,
            keystep: 0,
            keynum: None,
            keyword: None,
            limit: 0,
        }
    }

    pub const fn range(flags: &'static [&'static str], begin_index: i32, lastkey: i32) -> Self {
        KeySpecDoc {
            notes: None,
            flags,
            begin_index,
            lastkey,
            keystep: 1,
            keynum: None,
            keyword: None,
            limit: 0,
        }
    }

    /// Keys counted by the argument `keynumidx` after `begin_index` (ZUNION, ZMPOP...).
    pub const fn keynum(
        flags: &'static [&'static str],
        begin_index: i32,
        keynumidx: i32,
        firstkey: i32,
        keystep: i32,
    ) -> Self {
        KeySpecDoc {
            notes: None,
            flags,
            begin_index,
            lastkey: 0,
            keystep: 0,
            keynum: Some((keynumidx, firstkey, keystep)),
            keyword: None,
            limit: 0,
        }
    }

    /// The key after `keyword`, searched for from argument `startfrom` on.
    pub const fn keyword(
        flags: &'static [&'static str],
        keyword: &'static str,
        startfrom: i32,
    ) -> Self {
        KeySpecDoc {
            notes: None,
            flags,
            begin_index: startfrom,
            lastkey: 0,
            keystep: 1,
            keynum: None,
            keyword: Some(keyword),
            limit: 0,
        }
    }

    /// Keys from after `keyword` to `lastkey`, the first 1/`limit` of them (XREAD's STREAMS).
    pub const fn keyword_range(
        flags: &'static [&'static str],
        keyword: &'static str,
        startfrom: i32,
        lastkey: i32,
        limit: i32,
    ) -> Self {
        KeySpecDoc {
            notes: None,
            flags,
            begin_index: startfrom,
            lastkey,
            keystep: 1,
            keynum: None,
            keyword: Some(keyword),
            limit,
        }
    }

    /// The same spec with a note (XADD's).
    pub const fn with_notes(mut self, notes: &'static str) -> Self {
        self.notes = Some(notes);
        self
    }
}

pub struct CommandSpec {
    /// Lower case, as COMMAND prints it.
    pub name: &'static str,
    /// Redis's rule: > 0 exact argc, < 0 at least -arity.
    pub arity: i32,
    pub flags: u32,
    pub keys: KeySpec,
    /// ACL categories as COMMAND INFO prints them (without '@').
    pub acl: &'static [&'static str],
    pub handler: Handler,
    pub subcommands: &'static [CommandSpec],
}

impl CommandSpec {
    /// A command without subcommands (what every family's row helper builds).
    pub const fn leaf(
        name: &'static str,
        arity: i32,
        flags: u32,
        keys: KeySpec,
        acl: &'static [&'static str],
        handler: Handler,
    ) -> CommandSpec {
        CommandSpec {
            name,
            arity,
            flags,
            keys,
            acl,
            handler,
            subcommands: &[],
        }
    }

    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = self.arity as i64;
        if arity > 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    /// Positions of the key arguments in `argv`.
    pub fn key_positions(&self, argc: usize) -> impl Iterator<Item = usize> {
        let k = self.keys;
        let (first, step) = (k.first.max(0) as usize, k.step.max(1) as usize);
        let last = if k.first <= 0 {
            0
        } else if k.last < 0 {
            (argc as i64 + k.last as i64).max(0) as usize
        } else {
            (k.last as usize).min(argc.saturating_sub(1))
        };
        (first..=last)
            .step_by(step)
            .filter(move |&i| k.first > 0 && i < argc)
    }
}

/// A command or subcommand's place in the table; stats are indexed by it.
pub use crate::machine::CmdId;

/// The command table: built once, never changed while the server runs (Redis's command
/// table is static too), shared by the executor and by the threads that answer while a
/// script is busy.
#[inline]
pub fn table() -> &'static Table {
    static TABLE: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
    TABLE.get_or_init(Table::build)
}

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

/// All command families. Adding a family = one line here.
pub fn families() -> Vec<&'static [CommandSpec]> {
    vec![
        super::string::COMMANDS,
        super::keys::COMMANDS,
        super::hash::COMMANDS,
        super::connection::COMMANDS,
        super::server::COMMANDS,
        super::list::COMMANDS,
        super::set::COMMANDS,
        super::zset::COMMANDS,
        super::tx::COMMANDS,
        super::persistence::COMMANDS,
        super::pubsub::COMMANDS,
        super::scripting::COMMANDS,
        super::functions::COMMANDS,
        super::acl::COMMANDS,
        super::module::COMMANDS,
        super::observe::COMMANDS,
        super::lockinsight::COMMANDS,
        super::string_range::COMMANDS,
        super::bitmap::COMMANDS,
        super::sort::COMMANDS,
        super::geo::COMMANDS,
        super::hll::COMMANDS,
        super::stream::COMMANDS,
        super::replication::COMMANDS,
        super::raft::COMMANDS,
        super::cluster::COMMANDS,
        super::object::COMMANDS,
        super::dump::COMMANDS,
        super::lolwut::COMMANDS,
    ]
}

/// Families' declared key specifications, by command name.
pub fn key_spec_docs() -> Vec<&'static [(&'static str, &'static [KeySpecDoc])]> {
    vec![
        super::string_range::KEY_SPECS,
        super::bitmap::KEY_SPECS,
        super::set::KEY_SPECS,
        super::sort::KEY_SPECS,
        super::zset::KEY_SPECS,
        super::hash::KEY_SPECS,
        super::string::KEY_SPECS,
        super::keys::KEY_SPECS,
        super::list::KEY_SPECS,
        super::pubsub::KEY_SPECS,
        super::scripting::KEY_SPECS,
        super::functions::KEY_SPECS,
        super::tx::KEY_SPECS,
        super::geo::KEY_SPECS,
        super::hll::KEY_SPECS,
        super::object::KEY_SPECS,
        super::dump::KEY_SPECS,
        super::stream::KEY_SPECS,
    ]
}

/// Families' command tips (e.g. `nondeterministic_output_order`), by command name.
pub fn command_tips() -> Vec<&'static [(&'static str, &'static [&'static str])]> {
    vec![
        super::set::TIPS,
        super::zset::TIPS,
        super::hash::TIPS,
        super::string::TIPS,
        super::keys::TIPS,
        super::connection::TIPS,
        super::scripting::TIPS,
        super::functions::TIPS,
        super::observe::TIPS,
        super::module::TIPS,
        super::server::TIPS,
        super::cluster::TIPS,
        super::object::TIPS,
        super::dump::TIPS,
        super::stream::TIPS,
    ]
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
    pub fn build() -> Table {
        let mut t = Table {
            entries: Vec::new(),
            by_name: NameIndex::default(),
            sentinel_only: HashMap::default(),
        };
        let docs: HashMap<&str, &'static [KeySpecDoc]> =
            key_spec_docs().into_iter().flatten().copied().collect();
        let tips: HashMap<&str, &'static [&'static str]> =
            command_tips().into_iter().flatten().copied().collect();
        for fam in families() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_is_found_in_any_case_and_nothing_else() {
        let t = table();
        for (id, e) in t.entries.iter().enumerate() {
            if e.parent.is_some() || e.spec.has(flags::ONLY_SENTINEL) {
                continue;
            }
            let name = e.spec.name.as_bytes();
            assert_eq!(t.lookup(name), Some(id), "{}", e.spec.name);
            assert_eq!(t.lookup(&name.to_ascii_uppercase()), Some(id));
            let mixed: Vec<u8> = name
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    if i % 2 == 0 {
                        b.to_ascii_uppercase()
                    } else {
                        *b
                    }
                })
                .collect();
            assert_eq!(t.lookup(&mixed), Some(id));
            let mut longer = name.to_vec();
            longer.push(b'x');
            assert!(t.lookup(&longer).is_none_or(|o| o != id));
        }
        for bad in [
            &b""[..],
            b"s",
            b"se",
            b"sett",
            b"s\xc5t",
            b"\xd3et",
            b"set\0",
            &[b'a'; 40],
        ] {
            assert_eq!(t.lookup(bad), None, "{bad:?}");
        }
        // Bytes whose bit 5 differs from a letter's but are not letters do not fold.
        assert_eq!(t.lookup(b"G\x05T"), None);
        assert_eq!(t.lookup(b"get@"), None);
    }

    /// `get` or `client|list`.
    fn lookup_full(t: &Table, name: &str) -> CmdId {
        match name.split_once('|') {
            Some((p, s)) => t
                .lookup(p.as_bytes())
                .and_then(|id| t.lookup_sub(id, s.as_bytes()))
                .expect(name),
            None => t.lookup(name.as_bytes()).expect(name),
        }
    }

    #[test]
    fn declared_key_specs_name_commands() {
        let t = Table::build();
        for (name, docs) in key_spec_docs().into_iter().flatten() {
            let id = lookup_full(&t, name);
            assert_eq!(t.entries[id].key_specs.map(|d| d.len()), Some(docs.len()));
        }
    }

    #[test]
    fn declared_tips_name_commands() {
        let t = Table::build();
        for (name, tips) in command_tips().into_iter().flatten() {
            let id = lookup_full(&t, name);
            assert_eq!(t.entries[id].tips, *tips);
        }
    }
}
