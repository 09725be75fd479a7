//! The registry: the one file that names every command family, and what is built from all of
//! them (the command table, the ACL catalog). Adding a family is one line in `families` (and in
//! `key_spec_docs` / `command_tips` when it declares those).

use super::spec::{flags::ONLY_SENTINEL, CommandSpec, KeySpecDoc};
use super::table::Table;
use crate::config::users::Catalog;

/// The command table: built once, never changed while the server runs (Redis's command
/// table is static too), shared by the executor and by the threads that answer while a
/// script is busy.
#[inline]
pub fn table() -> &'static Table {
    static TABLE: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
    TABLE.get_or_init(build)
}

/// A new table of every family's commands.
pub fn build() -> Table {
    Table::build(families(), key_spec_docs(), command_tips())
}

/// The command table as the rules see it (names, containers, categories), built once.
pub fn catalog() -> &'static Catalog {
    static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    CATALOG.get_or_init(|| {
        let t = super::registry::table();
        let mut c = Catalog::default();
        for e in &t.entries {
            let listed = !e.spec.has(ONLY_SENTINEL)
                && e.parent
                    .is_none_or(|p| !t.entries[p].spec.has(ONLY_SENTINEL));
            c.push(&e.full_name, e.parent, e.categories, listed);
        }
        // Redis's commands deadbolt lacks: rules may name them, and they count in the rule
        // strings as in Redis; nothing can run them.
        for (name, cats) in super::acl_redis::COMMANDS {
            if c.lookup(name.as_bytes()).is_some() {
                continue;
            }
            let parent = name
                .split_once('|')
                .and_then(|(p, _)| c.lookup(p.as_bytes()));
            let bits = cats.iter().fold(0, |m, n| {
                m | crate::config::users::category_bit(n.as_bytes()).unwrap_or(0)
            });
            c.push(name, parent, bits, true);
        }
        c
    })
}

/// All command families. Adding a family = one line here.
pub fn families() -> Vec<&'static [CommandSpec]> {
    vec![
        super::string::COMMANDS,
        super::keys::COMMANDS,
        super::hash::COMMANDS,
        super::connection::COMMANDS,
        super::server::COMMANDS,
        super::debug::COMMANDS,
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
        super::role::COMMANDS,
        super::sentinel::COMMANDS,
        super::raft::COMMANDS,
        super::cluster::COMMANDS,
        super::object::COMMANDS,
        super::dump::COMMANDS,
        super::lolwut::COMMANDS,
        super::sync::COMMANDS,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::spec::{flags, CmdId};

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
        let t = build();
        for (name, docs) in key_spec_docs().into_iter().flatten() {
            let id = lookup_full(&t, name);
            assert_eq!(t.entries[id].key_specs.map(|d| d.len()), Some(docs.len()));
        }
    }

    #[test]
    fn declared_tips_name_commands() {
        let t = build();
        for (name, tips) in command_tips().into_iter().flatten() {
            let id = lookup_full(&t, name);
            assert_eq!(t.entries[id].tips, *tips);
        }
    }
}
