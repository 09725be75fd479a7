//! Users and their rules, as Redis 7.0's acl.c models them: on/off, passwords, a root selector
//! (command bitmap with first-args, key patterns with read/write flags, channel patterns) and
//! further selectors `(…)`. Rules come from `user` lines, the aclfile and ACL SETUSER.
//!
//! Rules that name commands or categories need the command table, which lives above this
//! layer: it hands its knowledge down as a `Catalog` (built by `cmd::registry::catalog`). The
//! permission checks that read key specifications are in `cmd::acl`.

use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

pub type PassHash = [u8; 32];

/// Redis's ACLCommandCategories, in its order (ACL CAT prints them so, and the rule writer
/// tries them so).
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// A category's bit in `Catalog` masks, by name (any case).
pub fn category_bit(name: &[u8]) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

/// Redis's USER_COMMAND_BITS_COUNT: command ids index a fixed bitmap.
pub const MAX_COMMANDS: usize = 1024;
const WORDS: usize = MAX_COMMANDS / 64;

/// What the rules need to know of the command table: names, containers and categories, by the
/// table's ids.
#[derive(Debug, Default)]
pub struct Catalog {
    names: Vec<String>,
    parent: Vec<Option<usize>>,
    subs: Vec<Vec<usize>>,
    cats: Vec<u32>,
    /// Top-level commands rules and categories walk, in table order.
    top: Vec<usize>,
    by_name: HashMap<String, usize>,
}

impl Catalog {
    /// Adds the next id (`name` is the full `parent|sub` name). `listed`: false for commands
    /// that only `+@all` reaches (deadbolt's cluster-only SENTINEL, which Redis does not have).
    pub fn push(&mut self, name: &str, parent: Option<usize>, cats: u32, listed: bool) -> usize {
        let id = self.names.len();
        assert!(id < MAX_COMMANDS, "more commands than the ACL bitmap holds");
        self.names.push(name.to_string());
        self.parent.push(parent);
        self.subs.push(Vec::new());
        self.cats.push(cats);
        if let Some(p) = parent {
            self.subs[p].push(id);
        } else if listed {
            self.top.push(id);
        }
        if listed {
            self.by_name.insert(name.to_string(), id);
        }
        id
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn name(&self, id: usize) -> &str {
        &self.names[id]
    }

    pub fn categories(&self, id: usize) -> u32 {
        self.cats[id]
    }

    /// Redis's ACLLookupCommand: `name` or `container|sub`, any case.
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        let s = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        if s.matches('|').count() > 1 {
            return None;
        }
        self.by_name.get(&s).copied()
    }

    /// Every command and subcommand, containers before their subcommands (ACL CAT's walk).
    pub fn walk(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.names.len());
        for &t in &self.top {
            out.push(t);
            out.extend(&self.subs[t]);
        }
        out
    }
}

/// A key pattern with the access it grants (`~` both, `%R~` read, `%W~` write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    pub read: bool,
    pub write: bool,
}

impl KeyPattern {
    fn describe(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(match (self.read, self.write) {
            (true, true) => b"~",
            (true, false) => b"%R~",
            _ => b"%W~",
        });
        out.extend_from_slice(&self.pattern);
    }
}

/// Why a rule is refused: Redis's errno values, with ACLSetUserStringError's texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    UnknownCommand,
    Syntax,
    KeysAfterAll,
    ChannelsAfterAll,
    NoSuchPassword,
    BadHash,
    Duplicate,
    FirstArgOfSubcommand,
}

impl RuleError {
    pub fn message(self) -> &'static str {
        match self {
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeysAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelsAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::Duplicate => "Duplicate user found. A user can only be defined once in config files",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// One set of permissions: a command is allowed when one selector allows it with all its keys
/// and channels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    pub all_keys: bool,
    pub all_channels: bool,
    /// Every command bit is set (cleared by any removal): the check can skip the bitmap.
    pub all_commands: bool,
    /// Redis's reserved bit: `+@all` was the last word on commands (commands added later are
    /// allowed too), so the rules are written as removals from `+@all`.
    future: bool,
    bits: [u64; WORDS],
    /// Allowed first arguments of otherwise denied commands (`+select|0`), by command id.
    first_args: Vec<(usize, Vec<Vec<u8>>)>,
    pub keys: Vec<KeyPattern>,
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    /// A selector with no permissions (channels as `acl-pubsub-default` says).
    pub fn new(all_channels: bool) -> Selector {
        Selector {
            all_keys: false,
            all_channels,
            all_commands: false,
            future: false,
            bits: [0; WORDS],
            first_args: Vec::new(),
            keys: Vec::new(),
            channels: Vec::new(),
        }
    }

    pub fn bit(&self, id: usize) -> bool {
        id < MAX_COMMANDS && self.bits[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: usize, value: bool) {
        if id >= MAX_COMMANDS {
            return;
        }
        if value {
            self.bits[id / 64] |= 1 << (id % 64);
        } else {
            self.bits[id / 64] &= !(1 << (id % 64));
            self.all_commands = false;
        }
    }

    /// The first arguments that open command `id` when its bit is off.
    pub fn first_args(&self, id: usize) -> &[Vec<u8>] {
        self.first_args
            .iter()
            .find(|(i, _)| *i == id)
            .map_or(&[], |(_, a)| a.as_slice())
    }

    /// Redis's ACLChangeSelectorPerm: a container's subcommands follow it.
    fn change_perm(&mut self, cat: &Catalog, id: usize, allow: bool) {
        self.set_bit(id, allow);
        self.first_args.retain(|(i, _)| *i != id);
        if let Some(subs) = cat.subs.get(id) {
            for &s in subs {
                self.set_bit(s, allow);
            }
        }
    }

    fn set_category(&mut self, cat: &Catalog, flag: u32, allow: bool) {
        for &t in &cat.top {
            if cat.cats[t] & flag != 0 {
                self.change_perm(cat, t, allow);
            }
            for &s in &cat.subs[t] {
                if cat.cats[s] & flag != 0 {
                    self.change_perm(cat, s, allow);
                }
            }
        }
    }

    fn all(&mut self, allow: bool) {
        self.bits = [if allow { u64::MAX } else { 0 }; WORDS];
        self.all_commands = allow;
        self.future = allow;
        self.first_args.clear();
    }

    /// Redis's ACLSetSelector.
    pub fn apply(&mut self, op: &[u8], cat: &Catalog) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("allkeys") || op == b"~*" {
            self.all_keys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.all_keys = false;
            self.keys.clear();
        } else if is("allchannels") || op == b"&*" {
            self.all_channels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.all(true);
        } else if is("nocommands") || is("-@all") {
            self.all(false);
        } else if op.first().is_some_and(|&c| c == b'~' || c == b'%') {
            if self.all_keys {
                return Err(RuleError::KeysAfterAll);
            }
            let (mut read, mut write) = (false, false);
            let mut offset = 1;
            if op[0] == b'%' {
                while offset < op.len() {
                    let c = op[offset];
                    if c.eq_ignore_ascii_case(&b'r') && !read {
                        read = true;
                    } else if c.eq_ignore_ascii_case(&b'w') && !write {
                        write = true;
                    } else if c == b'~' {
                        offset += 1;
                        break;
                    } else {
                        return Err(RuleError::Syntax);
                    }
                    offset += 1;
                }
                // Redis 7.0 would store `%~x` with no access and crash describing it.
                if !read && !write {
                    return Err(RuleError::Syntax);
                }
            } else {
                (read, write) = (true, true);
            }
            let pattern = &op[offset.min(op.len())..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            match self.keys.iter_mut().find(|p| p.pattern == pattern) {
                Some(p) => {
                    p.read |= read;
                    p.write |= write;
                }
                None => self.keys.push(KeyPattern {
                    pattern: pattern.to_vec(),
                    read,
                    write,
                }),
            }
            self.all_keys = false;
        } else if op.first() == Some(&b'&') {
            if self.all_channels {
                return Err(RuleError::ChannelsAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(pattern.to_vec());
            }
            self.all_channels = false;
        } else if op.first() == Some(&b'+') && op.get(1) != Some(&b'@') {
            let name = &op[1..];
            match name.iter().rposition(|&b| b == b'|') {
                None => {
                    let id = cat.lookup(name).ok_or(RuleError::UnknownCommand)?;
                    self.change_perm(cat, id, true);
                }
                Some(bar) => {
                    let (base, sub) = (&name[..bar], &name[bar + 1..]);
                    let id = cat.lookup(base).ok_or(RuleError::UnknownCommand)?;
                    if cat.parent[id].is_some() {
                        return Err(RuleError::FirstArgOfSubcommand);
                    }
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if !cat.subs[id].is_empty() {
                        let sid = cat.lookup(name).ok_or(RuleError::UnknownCommand)?;
                        self.change_perm(cat, sid, true);
                    } else {
                        // Redis logs a deprecation warning for this form and keeps it.
                        let sub = sub.to_ascii_lowercase();
                        match self.first_args.iter_mut().find(|(i, _)| *i == id) {
                            Some((_, args)) => {
                                if !args.iter().any(|a| a.eq_ignore_ascii_case(&sub)) {
                                    args.push(name[bar + 1..].to_vec());
                                }
                            }
                            None => self.first_args.push((id, vec![name[bar + 1..].to_vec()])),
                        }
                    }
                }
            }
        } else if op.first() == Some(&b'-') && op.get(1) != Some(&b'@') {
            let id = cat.lookup(&op[1..]).ok_or(RuleError::UnknownCommand)?;
            self.change_perm(cat, id, false);
        } else if matches!(op.first(), Some(b'+' | b'-')) {
            let flag = category_bit(&op[2..]).ok_or(RuleError::UnknownCommand)?;
            self.set_category(cat, flag, op[0] == b'+');
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// Allowed and denied commands of a category (ACLCountCategoryBitsForSelector).
    fn count_category(&self, cat: &Catalog, flag: u32) -> (usize, usize) {
        let (mut on, mut off) = (0, 0);
        for id in cat.walk() {
            if cat.cats[id] & flag != 0 {
                if self.bit(id) {
                    on += 1;
                } else {
                    off += 1;
                }
            }
        }
        (on, off)
    }

    /// Redis 7.0's ACLDescribeSelectorCommandRules: `+@all`/`-@all`, then the categories that
    /// fit best, then single commands, rebuilt from the bitmap.
    pub fn describe_commands(&self, cat: &Catalog) -> String {
        let additive = !self.future;
        let mut rules = String::from(if additive { "-@all " } else { "+@all " });
        let mut fake = Selector::new(false);
        fake.all(!additive);
        let mut temp = Selector::new(false);
        temp.bits = self.bits;
        let mut applied = [false; CATEGORIES.len()];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (usize::MAX, 0);
            for (j, done) in applied.iter().enumerate() {
                if *done {
                    continue;
                }
                let (on, off) = temp.count_category(cat, 1 << j);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(j) = best else { break };
            fake.set_category(cat, 1 << j, additive);
            temp.set_category(cat, 1 << j, !additive);
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(CATEGORIES[j]);
            rules.push(' ');
            applied[j] = true;
        }
        for &t in &cat.top {
            self.describe_single(cat, &mut fake, t, &mut rules);
            for &s in &cat.subs[t] {
                self.describe_single(cat, &mut fake, s, &mut rules);
            }
        }
        rules.pop();
        rules
    }

    fn describe_single(&self, cat: &Catalog, fake: &mut Selector, id: usize, rules: &mut String) {
        let userbit = self.bit(id);
        if userbit != fake.bit(id) {
            rules.push(if userbit { '+' } else { '-' });
            rules.push_str(&cat.names[id]);
            rules.push(' ');
            fake.change_perm(cat, id, userbit);
        }
        if !userbit {
            for a in self.first_args(id) {
                rules.push('+');
                rules.push_str(&cat.names[id]);
                rules.push('|');
                rules.push_str(&String::from_utf8_lossy(a));
                rules.push(' ');
            }
        }
    }

    /// The keys part of ACL GETUSER (`~*` or the patterns joined by spaces).
    pub fn describe_keys(&self) -> Vec<u8> {
        if self.all_keys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, p) in self.keys.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            p.describe(&mut out);
        }
        out
    }

    /// The channels part of ACL GETUSER.
    pub fn describe_channels(&self) -> Vec<u8> {
        if self.all_channels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(c);
        }
        out
    }

    /// Redis's ACLDescribeSelector (keys, channels, commands), as ACL LIST prints it.
    pub fn describe(&self, cat: &Catalog) -> Vec<u8> {
        let mut out = Vec::new();
        if self.all_keys {
            out.extend_from_slice(b"~* ");
        } else {
            for p in &self.keys {
                p.describe(&mut out);
                out.push(b' ');
            }
        }
        if self.all_channels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for c in &self.channels {
                out.push(b'&');
                out.extend_from_slice(c);
                out.push(b' ');
            }
        }
        out.extend_from_slice(self.describe_commands(cat).as_bytes());
        out
    }

    /// Redis's ACLSelectorCheckKey: `read`/`write` are the access the key spec asks for.
    pub fn key_ok(&self, key: &[u8], read: bool, write: bool) -> bool {
        self.all_keys
            || self.keys.iter().any(|p| {
                (p.read || !read)
                    && (p.write || !write)
                    && crate::glob::glob_match(&p.pattern, key, false)
            })
    }

    /// Redis's ACLCheckChannelAgainstList: a PSUBSCRIBE pattern must be one of the patterns
    /// literally; a channel is matched against them.
    pub fn channel_ok(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels || channel_in(&self.channels, channel, is_pattern)
    }

    /// Has `read`/`write` access to every key (`~*`, or `%R~*`/`%W~*` as needed).
    pub fn unrestricted_keys(&self, read: bool, write: bool) -> bool {
        self.all_keys
            || self
                .keys
                .iter()
                .any(|p| (p.read || !read) && (p.write || !write) && p.pattern == b"*")
    }
}

pub fn channel_in(list: &[Vec<u8>], channel: &[u8], is_pattern: bool) -> bool {
    list.iter().any(|p| {
        if is_pattern {
            p == channel
        } else {
            crate::glob::glob_match(p, channel, false)
        }
    })
}

fn trim<'a>(s: &'a [u8], set: &[u8]) -> &'a [u8] {
    let start = s.iter().position(|b| !set.contains(b)).unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !set.contains(b))
        .map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

/// Redis's ACLStringHasSpaces.
fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&b| b.is_ascii_whitespace() || b == 0 || b == 0x0b)
}

#[derive(Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    /// Some(false): `skip-sanitize-payload`, Some(true): `sanitize-payload` (RESTORE payload
    /// checks; deadbolt has no RESTORE, the flag is kept and printed as Redis does).
    pub sanitize: Option<bool>,
    /// SHA-256 of each password, in the order they were added (Redis keeps only hashes too).
    pub passwords: Vec<PassHash>,
    /// The root selector first, then the `(…)` selectors.
    pub selectors: Vec<Selector>,
}

// Hashes stay out of debug output (and so out of any log).
impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("name", &self.name)
            .field("enabled", &self.enabled)
            .field("passwords", &self.passwords.len())
            .finish_non_exhaustive()
    }
}

impl User {
    /// A new user as Redis creates it: off, no password, no keys, no commands; channels as
    /// `acl-pubsub-default` says.
    pub fn new(name: &str, all_channels: bool) -> User {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(all_channels)],
        }
    }

    /// Redis's default user: `on nopass ~* &* +@all`.
    pub fn default_user() -> User {
        let mut u = User::new("default", false);
        u.enabled = true;
        u.nopass = true;
        let root = &mut u.selectors[0];
        root.all(true);
        root.all_keys = true;
        root.all_channels = true;
        u
    }

    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    /// Everything allowed (no check needed): the root selector has all commands, keys and
    /// channels.
    pub fn unrestricted(&self) -> bool {
        let r = self.root();
        r.all_commands && r.all_keys && r.all_channels
    }

    /// Applies one rule (Redis's ACLSetUser).
    pub fn apply(&mut self, op: &[u8], cat: &Catalog, all_channels: bool) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if op.is_empty() {
        } else if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize = Some(false);
        } else if is("sanitize-payload") {
            self.sanitize = Some(true);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let h = if op[0] == b'>' {
                hash_password(&op[1..])
            } else {
                parse_hash(&op[1..])?
            };
            if !self.passwords.contains(&h) {
                self.passwords.push(h);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let h = if op[0] == b'<' {
                hash_password(&op[1..])
            } else {
                parse_hash(&op[1..])?
            };
            let before = self.passwords.len();
            self.passwords.retain(|p| *p != h);
            if self.passwords.len() == before {
                return Err(RuleError::NoSuchPassword);
            }
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut s = Selector::new(all_channels);
            // Unbalanced quotes give Redis no arguments: an empty selector.
            let inner = &op[1..(op.len() - 1).max(1)];
            for a in crate::protocol::decode::split_args(inner).unwrap_or_default() {
                s.apply(&a, cat)?;
            }
            self.selectors.push(s);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            self.nopass = false;
            self.passwords.clear();
            let root = &mut self.selectors[0];
            root.all_keys = false;
            root.keys.clear();
            root.all_channels = all_channels;
            root.channels.clear();
            self.enabled = false;
            self.sanitize = Some(true);
            self.selectors.truncate(1);
            self.selectors[0].all(false);
        } else {
            self.selectors[0].apply(op, cat)?;
        }
        Ok(())
    }

    /// Redis's ACLDescribeUser: flags, password hashes, the root selector, then `(…)` ones.
    pub fn describe(&self, cat: &Catalog) -> Vec<u8> {
        let mut out = Vec::new();
        for f in self.flags() {
            out.extend_from_slice(f.as_bytes());
            out.push(b' ');
        }
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(hex(p).as_bytes());
            out.push(b' ');
        }
        for (i, s) in self.selectors.iter().enumerate() {
            if i == 0 {
                out.extend_from_slice(&s.describe(cat));
            } else {
                out.extend_from_slice(b" (");
                out.extend_from_slice(&s.describe(cat));
                out.push(b')');
            }
        }
        out
    }

    /// The `user NAME …` line ACL LIST, ACL SAVE and CONFIG REWRITE write.
    pub fn line(&self, cat: &Catalog) -> Vec<u8> {
        let mut out = format!("user {} ", self.name).into_bytes();
        out.extend_from_slice(&self.describe(cat));
        out
    }

    /// Flag names in Redis's ACLUserFlags order.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Some(false) => f.push("skip-sanitize-payload"),
            Some(true) => f.push("sanitize-payload"),
            None => {}
        }
        f
    }

    /// Whether `pass` opens this user (constant time over every stored hash).
    pub fn password_ok(&self, pass: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let h = hash_password(pass);
        let mut ok = false;
        for p in &self.passwords {
            ok |= constant_time_eq(p, &h);
        }
        ok
    }
}

pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(b"0123456789abcdef"[(b >> 4) as usize]));
        s.push(char::from(b"0123456789abcdef"[(b & 15) as usize]));
    }
    s
}

pub fn hash_password(pass: &[u8]) -> PassHash {
    Sha256::digest(pass).into()
}

fn parse_hash(hex: &[u8]) -> Result<PassHash, RuleError> {
    if hex.len() != 64 {
        return Err(RuleError::BadHash);
    }
    let mut out = [0u8; 32];
    for (i, chunk) in hex.chunks(2).enumerate() {
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let (Some(hi), Some(lo)) = (digit(chunk[0]), digit(chunk[1])) else {
            return Err(RuleError::BadHash);
        };
        out[i] = hi << 4 | lo;
    }
    Ok(out)
}

/// What a client may do: None for a user with every permission (the hot path's one branch),
/// else the user's rules, replaced whenever the user changes.
pub type Perms = Option<Arc<User>>;

/// Redis's ACLMergeSelectorArguments: a selector spread over several words becomes one.
/// Err: the word that opens an unclosed selector.
pub fn merge_selector_args<A: AsRef<[u8]>>(args: &[A]) -> Result<Vec<Vec<u8>>, Vec<u8>> {
    let mut out = Vec::with_capacity(args.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, a) in args.iter().enumerate() {
        let op = a.as_ref();
        if let Some((_, sel)) = open.as_mut() {
            sel.push(b' ');
            sel.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(open.take().map(|(_, s)| s).unwrap_or_default());
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((i, op.to_vec()));
            continue;
        }
        out.push(op.to_vec());
    }
    match open {
        Some((i, _)) => Err(args[i].as_ref().to_vec()),
        None => Ok(out),
    }
}

/// Every user by name (sorted, as ACL LIST and ACL USERS print them). Always has `default`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Users {
    map: BTreeMap<String, Arc<User>>,
    /// `acl-pubsub-default allchannels`: new users and `reset` get every channel.
    pub all_channels_default: bool,
    /// `user` lines of the configuration, loaded once the command table is known (Redis's
    /// UsersToLoad).
    pub pending: Vec<Vec<Vec<u8>>>,
    /// Whether any user came from `user` lines (Redis refuses them together with an aclfile).
    pub configured: bool,
}

impl Default for Users {
    fn default() -> Self {
        let mut map = BTreeMap::new();
        map.insert("default".to_string(), Arc::new(User::default_user()));
        Users {
            map,
            all_channels_default: false,
            pending: Vec::new(),
            configured: false,
        }
    }
}

impl Users {
    /// Names are kept as UTF-8 (a name that is not is kept with replacement characters, and
    /// found by the same bytes).
    pub fn get(&self, name: &[u8]) -> Option<&Arc<User>> {
        self.map.get(String::from_utf8_lossy(name).as_ref())
    }

    pub fn default_user(&self) -> &User {
        self.map
            .get("default")
            .expect("the default user always exists")
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<User>> {
        self.map.values()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The permissions a client authenticated as `name` has now.
    pub fn perms(&self, name: &str) -> Perms {
        let u = self.map.get(name)?;
        (!u.unrestricted()).then(|| u.clone())
    }

    /// Redis's `authRequired`: a new connection must AUTH unless the default user is on and
    /// needs no password.
    pub fn auth_required(&self) -> bool {
        let d = self.default_user();
        !d.nopass || !d.enabled
    }

    /// Redis's ACLStringSetUser: creates or changes `name` with `rules`, all or nothing.
    /// Returns the user as it was (None: created). Errors are ACL SETUSER's texts.
    pub fn set_user<A: AsRef<[u8]>>(
        &mut self,
        name: &str,
        rules: &[A],
        cat: &Catalog,
    ) -> Result<Option<Arc<User>>, String> {
        let merged = merge_selector_args(rules).map_err(|w| {
            format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(&w)
            )
        })?;
        let old = self.map.get(name).cloned();
        let mut u = match &old {
            Some(u) => User::clone(u),
            None => User::new(name, self.all_channels_default),
        };
        for op in &merged {
            u.apply(op, cat, self.all_channels_default).map_err(|e| {
                format!(
                    "Error in ACL SETUSER modifier '{}': {}",
                    String::from_utf8_lossy(op),
                    e.message()
                )
            })?;
        }
        self.map.insert(name.to_string(), Arc::new(u));
        Ok(old)
    }

    pub fn remove(&mut self, name: &[u8]) -> Option<Arc<User>> {
        self.map.remove(String::from_utf8_lossy(name).as_ref())
    }

    /// A `user NAME rule…` config line (Redis's ACLAppendUserForLoading): checked now as far
    /// as it can be without the command table, loaded by `load_pending`.
    pub fn queue_line(&mut self, words: &[String]) -> Result<(), String> {
        let Some((name, rules)) = words.split_first() else {
            return Err("wrong number of arguments".into());
        };
        if name.is_empty() || has_spaces(name.as_bytes()) {
            return Err("Usernames can't contain spaces or null characters".into());
        }
        if self.pending.iter().any(|l| l[0] == name.as_bytes()) {
            return Err(format!(
                "Error in user declaration '{name}': {}",
                RuleError::Duplicate.message()
            ));
        }
        let merged = merge_selector_args(rules).map_err(|w| {
            format!(
                "Error in user declaration '{}': Unmatched parenthesis in acl selector",
                String::from_utf8_lossy(&w)
            )
        })?;
        // Command names are checked at loading, when the table is known (as Redis does).
        let mut probe = User::new(name, self.all_channels_default);
        for op in &merged {
            match probe.apply(op, &Catalog::default(), self.all_channels_default) {
                Ok(()) | Err(RuleError::UnknownCommand) => {}
                Err(e) => {
                    let shown = if op.first().is_some_and(|&c| c == b'>' || c == b'<') {
                        "<password>".to_string()
                    } else {
                        String::from_utf8_lossy(op).into_owned()
                    };
                    return Err(format!(
                        "Error in user declaration '{shown}': {}",
                        e.message()
                    ));
                }
            }
        }
        let mut line = vec![name.as_bytes().to_vec()];
        line.extend(merged);
        self.pending.push(line);
        self.configured = true;
        Ok(())
    }

    /// Redis's ACLLoadConfiguredUsers: the queued `user` lines become users (`default` is
    /// reset first).
    pub fn load_pending(&mut self, cat: &Catalog) -> Result<(), String> {
        for line in std::mem::take(&mut self.pending) {
            let name = String::from_utf8_lossy(&line[0]).into_owned();
            let mut u = User::new(&name, self.all_channels_default);
            if name == "default" {
                // Redis resets the existing default user; `requirepass` is forgotten too.
                u.apply(b"reset", cat, self.all_channels_default)
                    .map_err(|e| e.message().to_string())?;
            }
            for op in &line[1..] {
                u.apply(op, cat, self.all_channels_default).map_err(|e| {
                    let shown = if op.first().is_some_and(|&c| c == b'>' || c == b'<') {
                        "<password>".to_string()
                    } else {
                        String::from_utf8_lossy(op).into_owned()
                    };
                    format!(
                        "Error loading ACL rule '{shown}' for the user named '{name}': {}",
                        e.message()
                    )
                })?;
            }
            self.map.insert(name, Arc::new(u));
        }
        Ok(())
    }

    /// Redis's ACLLoadFromFile: the users of an aclfile's text, or every error found (then
    /// nothing may change).
    pub fn parse_aclfile(
        &self,
        text: &[u8],
        filename: &str,
        cat: &Catalog,
    ) -> Result<Vec<User>, String> {
        let mut users: Vec<User> = Vec::new();
        let mut errors = String::new();
        for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
            let linenum = i + 1;
            let line = trim(raw, b" \t\r\n");
            if line.is_empty() {
                continue;
            }
            let argv: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
            if argv[0] != b"user" || argv.len() < 2 {
                errors.push_str(&format!(
                    "{filename}:{linenum} should start with user keyword followed by the username. "
                ));
                continue;
            }
            let name = String::from_utf8_lossy(argv[1]).into_owned();
            if has_spaces(argv[1]) {
                errors.push_str(&format!(
                    "'{filename}:{linenum}: username '{name}' contains invalid characters. "
                ));
                continue;
            }
            if users.iter().any(|u| u.name == name) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{name}' found on line {linenum}. "
                ));
                continue;
            }
            let mut u = User::new(&name, self.all_channels_default);
            let merged = match merge_selector_args(&argv[2..]) {
                Ok(m) => m,
                Err(_) => {
                    errors.push_str(&format!(
                        "{filename}:{linenum}: Unmatched parenthesis in selector definition."
                    ));
                    Vec::new()
                }
            };
            let mut syntax_error = false;
            for op in &merged {
                let op = trim(op, b"\t\r\n");
                match u.apply(op, cat, self.all_channels_default) {
                    Ok(()) => {}
                    Err(RuleError::UnknownCommand) => errors.push_str(&format!(
                        "{filename}:{linenum}: Error in applying operation '{}': {}. ",
                        String::from_utf8_lossy(op),
                        RuleError::UnknownCommand.message()
                    )),
                    Err(e) if !syntax_error => {
                        errors.push_str(&format!("{filename}:{linenum}: {}. ", e.message()));
                        syntax_error = true;
                    }
                    Err(_) => {}
                }
            }
            users.push(u);
        }
        if errors.is_empty() {
            Ok(users)
        } else {
            errors.push_str(
                "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
            );
            Err(errors)
        }
    }

    /// Replaces every user (ACL LOAD, the aclfile at start): without a `default` line the
    /// default user is Redis's fresh one.
    pub fn replace_all(&mut self, users: Vec<User>) {
        self.map = users
            .into_iter()
            .map(|u| (u.name.clone(), Arc::new(u)))
            .collect();
        self.map
            .entry("default".into())
            .or_insert_with(|| Arc::new(User::default_user()));
    }

    /// `requirepass`: the default user's password is replaced (nopass when empty).
    pub fn set_default_password(&mut self, pass: Option<&str>) {
        let d = Arc::make_mut(
            self.map
                .entry("default".into())
                .or_insert_with(|| Arc::new(User::default_user())),
        );
        d.passwords.clear();
        match pass {
            Some(p) => {
                d.nopass = false;
                d.passwords.push(hash_password(p.as_bytes()));
            }
            None => d.nopass = true,
        }
    }
}

/// Compares without an early exit, so timing does not reveal how much of a password matched.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u8 | ((a.len() ^ b.len()) >> 8) as u8;
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0xff);
        diff |= x ^ y;
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small table: get (read string fast), set (write string slow), config (container,
    /// slow) with get/set (admin).
    fn catalog() -> Catalog {
        let bit = |n: &str| category_bit(n.as_bytes()).unwrap();
        let mut c = Catalog::default();
        c.push("get", None, bit("read") | bit("string") | bit("fast"), true);
        c.push(
            "set",
            None,
            bit("write") | bit("string") | bit("slow"),
            true,
        );
        let cfg = c.push("config", None, bit("slow"), true);
        c.push("config|get", Some(cfg), bit("admin") | bit("slow"), true);
        c.push("config|set", Some(cfg), bit("admin") | bit("slow"), true);
        c
    }

    fn user(rules: &[&str]) -> Result<User, RuleError> {
        let cat = catalog();
        let mut u = User::new("x", false);
        for r in rules {
            u.apply(r.as_bytes(), &cat, false)?;
        }
        Ok(u)
    }

    fn line(rules: &[&str]) -> String {
        String::from_utf8(user(rules).unwrap().describe(&catalog())).unwrap()
    }

    #[test]
    fn passwords() {
        let mut u = user(&[">a", ">b"]).unwrap();
        let cat = catalog();
        assert!(u.password_ok(b"a") && u.password_ok(b"b") && !u.password_ok(b"c"));
        u.apply(b"<a", &cat, false).unwrap();
        assert!(!u.password_ok(b"a"));
        assert_eq!(u.apply(b"<a", &cat, false), Err(RuleError::NoSuchPassword));
        u.apply(b"nopass", &cat, false).unwrap();
        assert!(u.password_ok(b"anything") && u.passwords.is_empty());
        u.apply(b"resetpass", &cat, false).unwrap();
        assert!(!u.password_ok(b""));
        let h = "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"; // sha256("a")
        u.apply(format!("#{h}").as_bytes(), &cat, false).unwrap();
        assert!(u.password_ok(b"a"));
        assert_eq!(u.apply(b"#ABC", &cat, false), Err(RuleError::BadHash));
    }

    #[test]
    fn rules_are_described_as_redis_does() {
        assert_eq!(line(&[]), "off resetchannels -@all");
        assert_eq!(line(&["on", "~*", "&*", "+@all"]), "on ~* &* +@all");
        assert_eq!(line(&["+@all", "-set"]), "off resetchannels +@all -@write");
        assert_eq!(line(&["+get"]), "off resetchannels -@all +@read");
        assert_eq!(
            line(&["+config", "-config|set"]),
            "off resetchannels -@all +config -config|set"
        );
        assert_eq!(
            line(&["%R~a*", "%W~b*", "~c", "%RW~a*", "&ch"]),
            "off ~a* %W~b* ~c resetchannels &ch -@all"
        );
        assert_eq!(line(&["+@string"]), "off resetchannels -@all +@string");
        assert_eq!(line(&["-@all", "+set|x"]), "off resetchannels -@all +set|x");
        assert_eq!(
            line(&["(~a +get)", "(%R~b)"]),
            "off resetchannels -@all (~a resetchannels -@all +@read) (%R~b resetchannels -@all)"
        );
    }

    #[test]
    fn refusals() {
        assert_eq!(user(&["~*", "~a"]), Err(RuleError::KeysAfterAll));
        assert_eq!(user(&["&*", "&a"]), Err(RuleError::ChannelsAfterAll));
        assert_eq!(user(&["+nope"]), Err(RuleError::UnknownCommand));
        assert_eq!(user(&["+@nope"]), Err(RuleError::UnknownCommand));
        assert_eq!(
            user(&["+config|get|x"]),
            Err(RuleError::FirstArgOfSubcommand)
        );
        assert_eq!(user(&["+get|"]), Err(RuleError::Syntax));
        assert_eq!(user(&["%X~a"]), Err(RuleError::Syntax));
        assert_eq!(user(&["bogus"]), Err(RuleError::Syntax));
        assert_eq!(user(&["(on)"]), Err(RuleError::Syntax));
    }

    #[test]
    fn key_and_channel_checks() {
        let u = user(&["%R~r*", "%W~w*", "~b*", "&news.*"]).unwrap();
        let r = u.root();
        assert!(r.key_ok(b"r1", true, false) && !r.key_ok(b"r1", false, true));
        assert!(r.key_ok(b"w1", false, true) && !r.key_ok(b"w1", true, true));
        assert!(r.key_ok(b"b1", true, true) && !r.key_ok(b"zz", false, false));
        assert!(r.channel_ok(b"news.x", false) && !r.channel_ok(b"news.*x", true));
        assert!(r.channel_ok(b"news.*", true));
    }

    #[test]
    fn merging_selector_words() {
        assert_eq!(
            merge_selector_args(&["on", "(~a", "+get)", "(~b)"]).unwrap(),
            vec![b"on".to_vec(), b"(~a +get)".to_vec(), b"(~b)".to_vec()]
        );
        assert_eq!(merge_selector_args(&["(~a", "x"]), Err(b"(~a".to_vec()));
    }

    #[test]
    fn a_bad_rule_leaves_the_user_unchanged() {
        let cat = catalog();
        let mut u = Users::default();
        u.set_user("alice", &["on", ">pw", "~*", "+@all"], &cat)
            .unwrap();
        let before = u.clone();
        let e = u.set_user("alice", &["off", "~nope"], &cat).unwrap_err();
        assert_eq!(e, "Error in ACL SETUSER modifier '~nope': Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns");
        assert_eq!(u, before);
    }

    #[test]
    fn requirepass_is_the_default_users_password() {
        let mut u = Users::default();
        assert!(!u.auth_required());
        u.set_default_password(Some("sek"));
        assert!(u.auth_required());
        assert!(u.default_user().password_ok(b"sek"));
        assert!(!u.default_user().password_ok(b"bad"));
        u.set_default_password(None);
        assert!(!u.auth_required());
        u.set_user("default", &["off"], &catalog()).unwrap();
        assert!(u.auth_required());
    }
}
