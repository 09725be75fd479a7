//! A command's key arguments, as Redis 7.0's getKeysFromCommandWithSpecs finds them: by the
//! command's key specifications (index or keyword, range or numkeys, XREAD's limit), by the
//! command's own finder where the specs cannot tell (SET/BITFIELD's variable flags, SORT).
//! ACL key checks, CLIENT TRACKING and COMMAND GETKEYS all use this one.

use super::spec::{flags::*, KeySpecDoc, SPEC_UNKNOWN};
use bytes::Bytes;

/// A key argument and the access its key spec asks for.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyRef {
    pub pos: usize,
    pub read: bool,
    pub write: bool,
    /// The key spec's flags (COMMAND GETKEYSANDFLAGS), in Redis's order.
    pub flags: &'static [&'static str],
}

/// A command's keys: the first few in place, so checking a restricted user's command does not
/// allocate unless it names many keys.
#[derive(Default)]
pub struct KeyRefs {
    inline: [KeyRef; 8],
    len: usize,
    more: Vec<KeyRef>,
}

impl KeyRefs {
    pub fn one(k: KeyRef) -> KeyRefs {
        let mut out = KeyRefs::default();
        out.push(k);
        out
    }

    pub fn push(&mut self, k: KeyRef) {
        match self.inline.get_mut(self.len) {
            Some(slot) => {
                *slot = k;
                self.len += 1;
            }
            None => self.more.push(k),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &KeyRef> {
        self.inline[..self.len].iter().chain(self.more.iter())
    }
}

fn flag(d: &KeySpecDoc, name: &str) -> bool {
    d.flags.iter().any(|f| f.eq_ignore_ascii_case(name))
}

/// Redis's doesCommandHaveKeys.
pub fn has_keys(entry: &super::table::TableEntry) -> bool {
    match entry.key_specs {
        Some(docs) => docs.iter().any(|d| !flag(d, "not_key")),
        None => entry.spec.keys.first > 0 || entry.spec.has(MOVABLE_KEYS),
    }
}

fn access(d: &KeySpecDoc, pos: usize) -> KeyRef {
    KeyRef {
        pos,
        read: flag(d, "access"),
        write: flag(d, "insert") || flag(d, "delete") || flag(d, "update"),
        flags: d.flags,
    }
}

/// Redis's getKeysFromCommandWithSpecs: the keys by the key specifications, or by the
/// command's own key finder where the specs cannot tell (variable flags, incomplete specs).
pub fn key_refs(entry: &super::table::TableEntry, argv: &[Bytes]) -> KeyRefs {
    let Some(docs) = entry.key_specs else {
        let write = entry.spec.has(WRITE);
        let mut out = KeyRefs::default();
        let flags: &'static [&'static str] = if write {
            &["RW", "access", "update"]
        } else {
            &["RO", "access"]
        };
        for pos in entry.spec.key_positions(argv.len()) {
            out.push(KeyRef {
                pos,
                read: true,
                write,
                flags,
            });
        }
        return out;
    };
    if docs.iter().any(|d| flag(d, "variable_flags")) {
        return variable_flag_keys(entry.spec.name, argv);
    }
    match keys_by_specs(docs, argv, entry.spec.arity) {
        Some(k) => k,
        None => fallback_keys(entry.spec.name, argv),
    }
}

/// Redis's getKeysUsingKeySpecs; None for an invalid or incomplete spec.
fn keys_by_specs(docs: &[KeySpecDoc], argv: &[Bytes], arity: i32) -> Option<KeyRefs> {
    let argc = argv.len() as i64;
    let mut out = KeyRefs::default();
    for d in docs {
        if flag(d, "not_key") {
            continue;
        }
        if d.begin_index == SPEC_UNKNOWN {
            return None;
        }
        let mut first: i64 = d.begin_index as i64;
        if let Some(kw) = d.keyword {
            let from = d.begin_index as i64;
            let start = if from > 0 { from } else { argc + from };
            let end = if from > 0 { argc - 1 } else { 1 };
            let mut i = start;
            first = 0;
            while i != end {
                if i >= argc || i < 1 {
                    break;
                }
                if argv[i as usize].eq_ignore_ascii_case(kw.as_bytes()) {
                    first = i + 1;
                    break;
                }
                i += if start <= end { 1 } else { -1 };
            }
            if first == 0 {
                continue;
            }
        }
        let (last, step) = if let Some((numidx, firstkey, step)) = d.keynum {
            if numidx as i64 >= argc || first + numidx as i64 >= argc {
                return None;
            }
            let n: i64 = std::str::from_utf8(&argv[(first + numidx as i64) as usize])
                .ok()
                .and_then(|s| s.parse().ok())
                .filter(|n| *n >= 0)?;
            first += firstkey as i64;
            (first + n - 1, step as i64)
        } else if d.lastkey >= 0 {
            (first + d.lastkey as i64, d.keystep as i64)
        } else if d.limit > 0 {
            // XREAD's STREAMS: the keys are the first 1/limit of what follows.
            (
                first + ((argc - first) / d.limit as i64 + d.lastkey as i64),
                d.keystep as i64,
            )
        } else {
            (argc + d.lastkey as i64, d.keystep as i64)
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let mut i = first;
        while i <= last {
            if i < argc {
                out.push(access(d, i as usize));
            } else if arity >= 0 {
                return None;
            }
            i += step.max(1);
        }
        if flag(d, "incomplete") {
            return None;
        }
    }
    Some(out)
}

/// setGetKeys and bitfieldGetKeys: the access depends on the arguments.
fn variable_flag_keys(name: &str, argv: &[Bytes]) -> KeyRefs {
    let is = |a: &Bytes, w: &str| a.eq_ignore_ascii_case(w.as_bytes());
    let read_only = match name {
        "set" => {
            let get = argv.iter().skip(3).any(|a| is(a, "get"));
            return KeyRefs::one(KeyRef {
                pos: 1,
                read: get,
                write: true,
                flags: if get {
                    &["RW", "access", "update"]
                } else {
                    &["OW", "update"]
                },
            });
        }
        "bitfield" => {
            let mut ro = true;
            let mut i = 2;
            while i < argv.len() {
                let rem = argv.len() - i - 1;
                if is(&argv[i], "get") && rem >= 2 {
                    i += 3;
                } else if (is(&argv[i], "set") || is(&argv[i], "incrby")) && rem >= 3 {
                    ro = false;
                    break;
                } else if is(&argv[i], "overflow") && rem >= 1 {
                    i += 2;
                } else {
                    ro = false;
                    break;
                }
            }
            ro
        }
        _ => false,
    };
    KeyRefs::one(KeyRef {
        pos: 1,
        read: true,
        write: !read_only,
        flags: if read_only {
            &["RO", "access"]
        } else {
            &["RW", "access", "update"]
        },
    })
}

/// The key finders Redis falls back to when a spec cannot be used (sortGetKeys,
/// sortROGetKeys); the others find no key where the specs fail (a bad numkeys).
fn fallback_keys(name: &str, argv: &[Bytes]) -> KeyRefs {
    let mut out = KeyRefs::default();
    if name == "migrate" {
        // migrateGetKeys: the key argument, or everything after KEYS (none when the key
        // argument is not empty: MIGRATE then refuses the syntax).
        let (mut first, mut num) = (3, 1);
        let mut i = 6;
        while i < argv.len() {
            let a = &argv[i];
            if a.eq_ignore_ascii_case(b"keys") {
                if argv[3].is_empty() {
                    first = i + 1;
                    num = argv.len() - first;
                } else {
                    num = 0;
                }
                break;
            } else if a.eq_ignore_ascii_case(b"auth") {
                i += 1;
            } else if a.eq_ignore_ascii_case(b"auth2") {
                i += 2;
            }
            i += 1;
        }
        for pos in first..(first + num).min(argv.len()) {
            out.push(KeyRef {
                pos,
                read: true,
                write: true,
                flags: &["RW", "access", "delete"],
            });
        }
        return out;
    }
    if name == "sort" || name == "sort_ro" {
        out.push(KeyRef {
            pos: 1,
            read: true,
            write: false,
            flags: &["RO", "access"],
        });
    }
    if name == "sort" {
        let mut store = None;
        let mut i = 2;
        while i < argv.len() {
            let a = &argv[i];
            if a.eq_ignore_ascii_case(b"limit") {
                i += 2;
            } else if a.eq_ignore_ascii_case(b"get") || a.eq_ignore_ascii_case(b"by") {
                i += 1;
            } else if a.eq_ignore_ascii_case(b"store") && i + 1 < argv.len() {
                store = Some(i + 1);
            }
            i += 1;
        }
        if let Some(pos) = store {
            out.push(KeyRef {
                pos,
                read: false,
                write: true,
                flags: &["OW", "update"],
            });
        }
    }
    out
}
