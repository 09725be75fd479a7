//! COMMAND DOCS: Redis 7.0.15's documentation of each command deadbolt has, rendered as Redis's
//! addReplyCommandDocs does. The text is static data: every Redis 7.0 command's in
//! docs_redis.rs (generated from Redis's own JSON files, so commands added to deadbolt later
//! get theirs by name), and the few deadbolt has that Redis 7.0 lacks in `OURS` below.
//! Nothing is built until COMMAND DOCS is asked.

use super::super::registry::table;

use super::super::spec::CmdId;
use super::super::spec::Ctx;
use crate::error::CmdResult;
use crate::protocol::Frame;
use bytes::Bytes;

/// One command's docs. An empty string is an absent field (Redis's NULL: the generator maps
/// an empty JSON value to NULL as Redis's does).
pub struct Doc {
    /// `get`, `client|kill`.
    pub name: &'static str,
    pub summary: &'static str,
    pub since: &'static str,
    pub group: &'static str,
    pub complexity: &'static str,
    /// `deprecated`, `syscmd`, in that order.
    pub doc_flags: &'static [&'static str],
    pub deprecated_since: &'static str,
    pub replaced_by: &'static str,
    /// (version, change).
    pub history: &'static [(&'static str, &'static str)],
    pub args: &'static [Arg],
}

pub struct Arg {
    pub name: &'static str,
    /// `string`, `integer`, `double`, `key`, `pattern`, `unix-time`, `pure-token`, `oneof`,
    /// `block`.
    pub kind: &'static str,
    /// -1 when the argument is not a key.
    pub key_spec_index: i8,
    pub token: &'static str,
    pub since: &'static str,
    pub deprecated_since: &'static str,
    /// `OPTIONAL | MULTIPLE | MULTIPLE_TOKEN`.
    pub flags: u8,
    /// A `oneof`'s or `block`'s arguments.
    pub args: &'static [Arg],
}

pub const OPTIONAL: u8 = 1;
pub const MULTIPLE: u8 = 2;
pub const MULTIPLE_TOKEN: u8 = 4;

/// An argument, positionally (keeps the generated table short).
#[allow(clippy::too_many_arguments)]
pub const fn a(
    name: &'static str,
    kind: &'static str,
    key_spec_index: i8,
    token: &'static str,
    since: &'static str,
    deprecated_since: &'static str,
    flags: u8,
    args: &'static [Arg],
) -> Arg {
    Arg {
        name,
        kind,
        key_spec_index,
        token,
        since,
        deprecated_since,
        flags,
        args,
    }
}

/// deadbolt's commands that Redis 7.0 lacks, sorted by name.
static OURS: &[Doc] = &[
    // Redis 7.2's, as its src/commands/client-setinfo.json.
    Doc {
        name: "client|setinfo",
        summary: "Sets information specific to the client or connection.",
        since: "7.2.0",
        group: "connection",
        complexity: "O(1)",
        doc_flags: &[],
        deprecated_since: "",
        replaced_by: "",
        history: &[],
        args: &[a(
            "attr",
            "oneof",
            -1,
            "",
            "",
            "",
            0,
            &[
                a("libname", "string", -1, "LIB-NAME", "", "", 0, &[]),
                a("libver", "string", -1, "LIB-VER", "", "", 0, &[]),
            ],
        )],
    },
    server_doc(
        "locks",
        "A container for lock insight commands",
        "Depends on subcommand.",
        &[],
    ),
    server_doc(
        "locks|held",
        "Returns the held locks among the keys a SCAN step visits",
        "O(N) for a step of N keys, plus O(W) for the W waiting clients",
        &[
            a("cursor", "integer", -1, "", "", "", 0, &[]),
            a("pattern", "pattern", -1, "MATCH", "", "", OPTIONAL, &[]),
            a("count", "integer", -1, "COUNT", "", "", OPTIONAL, &[]),
        ],
    ),
    server_doc(
        "locks|help",
        "Show helpful text about the different subcommands",
        "O(1)",
        &[],
    ),
    server_doc(
        "locks|late",
        "Returns the latest late lock releases, or empties their history",
        "O(N) where N is the number of entries returned",
        &[a(
            "count-or-reset",
            "oneof",
            -1,
            "",
            "",
            "",
            OPTIONAL,
            &[
                a("count", "integer", -1, "", "", "", 0, &[]),
                a("reset", "pure-token", -1, "RESET", "", "", 0, &[]),
            ],
        )],
    ),
    // Only in cluster mode, where COMMAND still does not list it (as Redis's SENTINEL), so
    // these are read by nothing but a future change that lists it; they keep it documented.
    ours(
        "raft",
        "A container for deadbolt's cluster (Raft) operations",
        "Depends on subcommand.",
        &[],
    ),
    ours(
        "raft|addlearner",
        "Adds a node as a learner that catches up from the log without voting",
        "O(1)",
        &[
            a("id", "integer", -1, "", "", "", 0, &[]),
            a("host", "string", -1, "", "", "", 0, &[]),
            a("port", "integer", -1, "", "", "", 0, &[]),
            a("peer-port", "integer", -1, "", "", "", 0, &[]),
        ],
    ),
    ours(
        "raft|help",
        "Show helpful text about the different subcommands",
        "O(1)",
        &[],
    ),
    ours(
        "raft|promote",
        "Makes a caught-up learner a voter",
        "O(1)",
        NODE_ID,
    ),
    ours(
        "raft|remove",
        "Removes a node from the cluster",
        "O(1)",
        NODE_ID,
    ),
    ours(
        "raft|reshard",
        "Moves a slot range to another Raft group, on the leader of the range's group",
        "O(N) where N is the number of keys in the range",
        &[
            a("first-slot", "integer", -1, "", "", "", 0, &[]),
            a("last-slot", "integer", -1, "", "", "", 0, &[]),
            a("group", "integer", -1, "", "", "", 0, &[]),
        ],
    ),
    ours(
        "raft|status",
        "This node's view of the cluster: role, leader, term, indexes and members",
        "O(N) where N is the number of members",
        &[],
    ),
    ours(
        "raft|transfer",
        "Hands leadership to a caught-up voter",
        "O(1)",
        NODE_ID,
    ),
];

const NODE_ID: &[Arg] = &[a("id", "integer", -1, "", "", "", 0, &[])];

const fn ours(
    name: &'static str,
    summary: &'static str,
    complexity: &'static str,
    args: &'static [Arg],
) -> Doc {
    Doc {
        name,
        summary,
        since: "",
        group: "cluster",
        complexity,
        doc_flags: &[],
        deprecated_since: "",
        replaced_by: "",
        history: &[],
        args,
    }
}

/// A deadbolt command of the `server` group (lock insight).
const fn server_doc(
    name: &'static str,
    summary: &'static str,
    complexity: &'static str,
    args: &'static [Arg],
) -> Doc {
    Doc {
        group: "server",
        ..ours(name, summary, complexity, args)
    }
}

/// The docs of a command by its full name (`get`, `client|kill`, lower case).
pub fn find(name: &str) -> Option<&'static Doc> {
    [super::docs_redis::DOCS, OURS]
        .into_iter()
        .find_map(|docs| {
            docs.binary_search_by(|d| d.name.cmp(name))
                .ok()
                .map(|i| &docs[i])
        })
}

/// COMMAND DOCS [name ...]: every command without names; unknown names are left out.
pub(super) fn command_docs(_ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let t = table();
    let pairs = if argv.len() == 2 {
        t.top_level().map(|(id, _)| entry(id)).collect()
    } else {
        argv[2..]
            .iter()
            .filter_map(|n| super::lookup_full(n))
            .map(entry)
            .collect()
    };
    Ok(Frame::Map(pairs))
}

fn entry(id: CmdId) -> (Frame, Frame) {
    let e = &table().entries[id];
    (Frame::Bulk(Bytes::from(e.full_name.clone())), doc_of(id))
}

fn s(v: &'static str) -> Frame {
    Frame::bulk_static(v)
}

/// Redis's addReplyCommandDocs, field for field in its order.
fn doc_of(id: CmdId) -> Frame {
    let e = &table().entries[id];
    let mut f = Vec::with_capacity(10);
    match find(&e.full_name) {
        Some(d) => {
            let mut opt = |k: &'static str, v: &'static str| {
                if !v.is_empty() {
                    f.push((s(k), s(v)));
                }
            };
            opt("summary", d.summary);
            opt("since", d.since);
            f.push((s("group"), s(d.group)));
            let mut opt = |k: &'static str, v: &'static str| {
                if !v.is_empty() {
                    f.push((s(k), s(v)));
                }
            };
            opt("complexity", d.complexity);
            if !d.doc_flags.is_empty() {
                let flags = d.doc_flags.iter().map(|x| Frame::simple(x)).collect();
                f.push((s("doc_flags"), Frame::Set(flags)));
            }
            let mut opt = |k: &'static str, v: &'static str| {
                if !v.is_empty() {
                    f.push((s(k), s(v)));
                }
            };
            opt("deprecated_since", d.deprecated_since);
            opt("replaced_by", d.replaced_by);
            if !d.history.is_empty() {
                let h = d
                    .history
                    .iter()
                    .map(|(v, c)| Frame::Array(vec![s(v), s(c)]))
                    .collect();
                f.push((s("history"), Frame::Set(h)));
            }
            if !d.args.is_empty() {
                f.push((s("arguments"), args(d.args)));
            }
        }
        // Only a command added without docs (the unit test below forbids it): Redis's
        // minimum, the group, which is its container's.
        None => {
            let group = e
                .parent
                .and_then(|p| find(&table().entries[p].full_name))
                .map_or("server", |d| d.group);
            f.push((s("group"), s(group)));
        }
    }
    if !e.subs.is_empty() {
        let mut ids: Vec<CmdId> = e.subs.values().copied().collect();
        ids.sort_unstable();
        f.push((
            s("subcommands"),
            Frame::Map(ids.into_iter().map(entry).collect()),
        ));
    }
    Frame::Map(f)
}

/// Redis's addReplyCommandArgList.
fn args(list: &'static [Arg]) -> Frame {
    Frame::Array(
        list.iter()
            .map(|x| {
                let mut f = vec![(s("name"), s(x.name)), (s("type"), s(x.kind))];
                if x.key_spec_index >= 0 {
                    f.push((s("key_spec_index"), Frame::Integer(x.key_spec_index.into())));
                }
                for (k, v) in [
                    ("token", x.token),
                    ("since", x.since),
                    ("deprecated_since", x.deprecated_since),
                ] {
                    if v == "\"\"" {
                        // MIGRATE's empty-string token: commands.def spells it `"\"\""`, and
                        // Redis prints the empty string it stands for.
                        f.push((s(k), s("")));
                    } else if !v.is_empty() {
                        f.push((s(k), s(v)));
                    }
                }
                if x.flags != 0 {
                    let flags = [
                        (OPTIONAL, "optional"),
                        (MULTIPLE, "multiple"),
                        (MULTIPLE_TOKEN, "multiple_token"),
                    ]
                    .into_iter()
                    .filter(|(bit, _)| x.flags & bit != 0)
                    .map(|(_, n)| Frame::simple(n))
                    .collect();
                    f.push((s("flags"), Frame::Set(flags)));
                }
                if matches!(x.kind, "oneof" | "block") {
                    f.push((s("arguments"), args(x.args)));
                }
                Frame::Map(f)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_sorted_for_binary_search() {
        for docs in [super::super::docs_redis::DOCS, OURS] {
            for w in docs.windows(2) {
                assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
            }
        }
        assert!(OURS.iter().all(|d| super::super::docs_redis::DOCS
            .binary_search_by(|r| r.name.cmp(d.name))
            .is_err()));
    }

    /// Every command and subcommand in deadbolt's table, visible or not, has its docs.
    #[test]
    fn every_command_has_docs() {
        let missing: Vec<&str> = table()
            .entries
            .iter()
            .map(|e| e.full_name.as_str())
            .filter(|n| find(n).is_none())
            .collect();
        assert!(missing.is_empty(), "no docs for {missing:?}");
    }
}
