//! COMMAND INFO and COMMAND DOCS for every command deadbolt lists, compared with a real
//! redis-server 7.0 in RESP2 and RESP3, and COMMAND COUNT / LIST / (no subcommand) kept
//! consistent with each other.
//!
//! Replies are compared as parsed RESP trees, which keep every type marker and every byte of
//! every string, so equal trees are equal bytes, with one normalisation: Redis lists a
//! command's subcommands in the order of a hash table seeded at random per process, so both
//! sides' subcommand lists are sorted by name before comparing.

use crate::common;

use common::Conn;

/// Deliberate differences, each with its reason. Everything else must match exactly.
///
/// Subcommands Redis 7.0 has and deadbolt does not implement (ACL SETUSER, CLIENT TRACKING,
/// COMMAND GETKEYS, LATENCY DOCTOR, SCRIPT DEBUG...) are out of scope: they are dropped from
/// Redis's subcommand list before comparing, and any command Redis has that deadbolt lacks is
/// never asked about (the test walks deadbolt's COMMAND LIST).
///
/// Subcommands deadbolt has that Redis 7.0 does not:
const OURS_ONLY_SUBCOMMANDS: &[&str] = &[
    // Redis 7.2's CLIENT SETINFO, which 7.2-era clients send at connect; 7.0 lacks it.
    "client|setinfo",
];

/// Commands deadbolt has that Redis 7.0 does not (lock insight's LOCKS): listed and documented
/// by COMMAND, checked in tests/ops/lock_insight.rs, and left out of the comparison here.
const OURS_ONLY_COMMANDS: &[&str] = &["locks"];

fn ours_only(name: &str) -> bool {
    OURS_ONLY_SUBCOMMANDS.contains(&name)
        || OURS_ONLY_COMMANDS.contains(&name.split('|').next().unwrap_or(name))
}

/// A parsed reply: the type byte and its content (maps are flattened into key, value, ...).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum R {
    Line(u8, Vec<u8>),
    Bulk(u8, Option<Vec<u8>>),
    Agg(u8, Option<Vec<R>>),
}

fn line(b: &[u8], at: &mut usize) -> Vec<u8> {
    let end = b[*at..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .expect("unterminated line")
        + *at;
    let l = b[*at..end].to_vec();
    *at = end + 2;
    l
}

fn parse(b: &[u8], at: &mut usize) -> R {
    let t = b[*at];
    *at += 1;
    let head = line(b, at);
    let n = || -> i64 { std::str::from_utf8(&head).unwrap().parse().unwrap() };
    match t {
        b'$' | b'=' | b'!' => {
            let n = n();
            if n < 0 {
                return R::Bulk(t, None);
            }
            let s = b[*at..*at + n as usize].to_vec();
            *at += n as usize + 2;
            R::Bulk(t, Some(s))
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = n();
            if n < 0 {
                return R::Agg(t, None);
            }
            let n = if matches!(t, b'%' | b'|') { n * 2 } else { n };
            R::Agg(t, Some((0..n).map(|_| parse(b, at)).collect()))
        }
        _ => R::Line(t, head),
    }
}

fn parse_all(b: &[u8]) -> R {
    let mut at = 0;
    let r = parse(b, &mut at);
    assert_eq!(at, b.len(), "trailing bytes after one reply");
    r
}

fn items(r: &mut R) -> &mut Vec<R> {
    match r {
        R::Agg(_, Some(v)) => v,
        other => panic!("not an aggregate: {other:?}"),
    }
}

fn text(r: &R) -> String {
    match r {
        R::Line(_, s) | R::Bulk(_, Some(s)) => String::from_utf8_lossy(s).into_owned(),
        other => format!("{other:?}"),
    }
}

/// Sorts (recursively) the subcommand list of one COMMAND INFO entry; `keep` filters it.
fn normalise(entry: &mut R, keep: &dyn Fn(&str) -> bool) {
    let fields = items(entry);
    if let Some(R::Agg(_, Some(subs))) = fields.get_mut(9) {
        subs.retain(|s| match s {
            R::Agg(_, Some(f)) => keep(&text(&f[0])),
            _ => true,
        });
        for s in subs.iter_mut() {
            normalise(s, keep);
        }
        subs.sort();
    }
}

/// COMMAND LIST's top-level names (subcommands are compared through their parent's INFO).
fn names(c: &mut Conn) -> Vec<String> {
    all_names(c)
        .into_iter()
        .filter(|n| !n.contains('|'))
        .collect()
}

/// COMMAND LIST as it is: every command, each followed by its `parent|sub` subcommands.
fn all_names(c: &mut Conn) -> Vec<String> {
    let mut list = parse_all(&c.cmd(&["COMMAND", "LIST"]));
    items(&mut list).iter().map(text).collect()
}

#[test]
fn command_list_names_subcommands_after_their_command_as_redis() {
    let ours = common::deadbolt(&[]);
    let theirs = common::redis_server(&[]);
    let (mut a, mut b) = (ours.conn(), theirs.conn());
    let listed = all_names(&mut a);
    let redis: Vec<String> = all_names(&mut b);
    let mut parent = String::new();
    for name in &listed {
        match name.split_once('|') {
            Some((p, sub)) => {
                assert_eq!(p, parent, "{name} does not follow its command");
                let _ = sub;
                assert!(
                    redis.contains(name) || ours_only(name),
                    "{name} is not a Redis 7.0 subcommand"
                );
            }
            None => parent = name.clone(),
        }
    }
    for filter in [
        &["COMMAND", "LIST", "FILTERBY", "PATTERN", "client|*"][..],
        &["COMMAND", "LIST", "FILTERBY", "PATTERN", "XA*"],
        &["COMMAND", "LIST", "FILTERBY", "MODULE", "x"],
        &["COMMAND", "LIST", "FILTERBY", "NOSUCH", "x"],
        &["COMMAND", "LIST", "FILTERBY"],
    ] {
        let sorted = |c: &mut Conn| {
            let reply = c.cmd(filter);
            if reply.starts_with(b"-") {
                return vec![String::from_utf8_lossy(&reply).into_owned()];
            }
            let mut r = parse_all(&reply);
            let mut v: Vec<String> = items(&mut r)
                .iter()
                .map(text)
                .filter(|n| !ours_only(n))
                .collect();
            v.sort();
            v
        };
        let mine = sorted(&mut a);
        let mut theirs = sorted(&mut b);
        // Only what deadbolt implements is compared.
        theirs.retain(|n| n.starts_with('-') || listed.contains(n));
        assert_eq!(mine, theirs, "{filter:?}");
    }
}

#[test]
fn command_info_matches_redis_for_every_listed_command() {
    let ours = common::deadbolt(&[]);
    let theirs = common::redis_server(&[]);
    let (mut a, mut b) = (ours.conn(), theirs.conn());
    let listed = names(&mut a);
    let redis_listed = names(&mut b);
    assert!(listed.len() > 100, "{listed:?}");
    let mut failures = Vec::new();
    for proto in ["2", "3"] {
        a.cmd(&["HELLO", proto]);
        b.cmd(&["HELLO", proto]);
        // Unknown names and subcommands answer null; a subcommand by its `parent|sub` name.
        let probe = [
            "COMMAND",
            "INFO",
            "no-such-command",
            "get|nothing",
            "config|get",
        ];
        assert_eq!(a.cmd(&probe[..4]), b.cmd(&probe[..4]), "RESP{proto}");
        let (mut m, mut r) = (parse_all(&a.cmd(&probe)), parse_all(&b.cmd(&probe)));
        assert_eq!(items(&mut m)[2], items(&mut r)[2], "RESP{proto}");
        for name in listed.iter().filter(|n| !ours_only(n)) {
            assert!(
                redis_listed.contains(name),
                "{name} is not a Redis 7.0 command"
            );
            let mine = a.cmd(&["COMMAND", "INFO", name]);
            let real = b.cmd(&["COMMAND", "INFO", name]);
            let (mut m, mut r) = (parse_all(&mine), parse_all(&real));
            let (me, re) = (&mut items(&mut m)[0], &mut items(&mut r)[0]);
            normalise(me, &|sub| !OURS_ONLY_SUBCOMMANDS.contains(&sub));
            // Keep only the subcommands deadbolt implements (the rest are out of scope).
            let mut ours_subs: Vec<String> = Vec::new();
            if let Some(R::Agg(_, Some(subs))) = items(me).get(9) {
                for s in subs {
                    if let R::Agg(_, Some(f)) = s {
                        ours_subs.push(text(&f[0]));
                    }
                }
            }
            normalise(re, &|sub| ours_subs.iter().any(|s| s == sub));
            if m != r {
                failures.push(format!(
                    "RESP{proto} COMMAND INFO {name}\n  deadbolt: {}\n  redis:    {}",
                    String::from_utf8_lossy(&mine).replace("\r\n", " "),
                    String::from_utf8_lossy(&real).replace("\r\n", " ")
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn command_count_list_and_all_agree() {
    let ours = common::deadbolt(&[]);
    let mut a = ours.conn();
    let listed = names(&mut a);
    let count = a.cmd(&["COMMAND", "COUNT"]);
    assert_eq!(count, format!(":{}\r\n", listed.len()).into_bytes());
    let mut sorted = listed.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), listed.len(), "COMMAND LIST repeats a name");
    // COMMAND INFO without names and bare COMMAND (what clients send at start-up) describe the
    // same commands, in the same order as COMMAND LIST, each entry equal to its own COMMAND INFO.
    assert_eq!(a.cmd(&["COMMAND"]), a.cmd(&["COMMAND", "INFO"]));
    {
        let all = a.cmd(&["COMMAND", "INFO"]);
        let mut all = parse_all(&all);
        let entries = items(&mut all);
        assert_eq!(entries.len(), listed.len());
        for (e, name) in entries.iter_mut().zip(&listed) {
            assert_eq!(&text(&items(e)[0]), name);
            let mut one = parse_all(&a.cmd(&["COMMAND", "INFO", name]));
            assert_eq!(&items(&mut one)[0], e, "{name}");
        }
    }
}

/// Sorts (recursively) the `subcommands` map of one COMMAND DOCS entry (a flattened field,
/// value list); `keep` filters it.
fn normalise_docs(doc: &mut R, keep: &dyn Fn(&str) -> bool) {
    let fields = items(doc);
    for i in (0..fields.len()).step_by(2) {
        if text(&fields[i]) != "subcommands" {
            continue;
        }
        let flat = std::mem::take(items(&mut fields[i + 1]));
        let mut pairs: Vec<(R, R)> = Vec::new();
        let mut it = flat.into_iter();
        while let (Some(k), Some(mut v)) = (it.next(), it.next()) {
            if keep(&text(&k)) {
                normalise_docs(&mut v, keep);
                pairs.push((k, v));
            }
        }
        pairs.sort();
        *items(&mut fields[i + 1]) = pairs.into_iter().flat_map(|(k, v)| [k, v]).collect();
    }
}

/// The subcommand names under one COMMAND DOCS entry's `subcommands`.
fn doc_subcommands(doc: &mut R) -> Vec<String> {
    let fields = items(doc);
    let mut out = Vec::new();
    for i in (0..fields.len()).step_by(2) {
        if text(&fields[i]) == "subcommands" {
            out.extend(items(&mut fields[i + 1]).iter().step_by(2).map(text));
        }
    }
    out
}

/// COMMAND DOCS of every listed command (and of each subcommand both servers have, under it)
/// is Redis's, byte for byte in both protocols; unknown names are left out as Redis does.
#[test]
fn command_docs_match_redis_for_every_listed_command() {
    let ours = common::deadbolt(&[]);
    let theirs = common::redis_server(&[]);
    let (mut a, mut b) = (ours.conn(), theirs.conn());
    let listed = names(&mut a);
    let everything = all_names(&mut a);
    let mut failures = Vec::new();
    for proto in ["2", "3"] {
        a.cmd(&["HELLO", proto]);
        b.cmd(&["HELLO", proto]);
        for probe in [
            &["COMMAND", "DOCS", "no-such-command", "get|nothing"][..],
            &[
                "COMMAND",
                "DOCS",
                "no-such-command",
                "GET",
                "config|GET",
                "Get",
            ],
        ] {
            assert_eq!(a.cmd(probe), b.cmd(probe), "RESP{proto} {probe:?}");
        }
        // Subcommands too, by their `parent|sub` names.
        for name in everything.iter().filter(|n| !ours_only(n)) {
            let mine = a.cmd(&["COMMAND", "DOCS", name]);
            let real = b.cmd(&["COMMAND", "DOCS", name]);
            let (mut m, mut r) = (parse_all(&mine), parse_all(&real));
            let (me, re) = (&mut items(&mut m)[1], &mut items(&mut r)[1]);
            normalise_docs(me, &|sub| !OURS_ONLY_SUBCOMMANDS.contains(&sub));
            let ours_subs = doc_subcommands(me);
            // Keep only the subcommands deadbolt implements (the rest are out of scope).
            normalise_docs(re, &|sub| ours_subs.iter().any(|s| s == sub));
            if m != r {
                failures.push(format!(
                    "RESP{proto} COMMAND DOCS {name}\n  deadbolt: {}\n  redis:    {}",
                    String::from_utf8_lossy(&mine).replace("\r\n", " "),
                    String::from_utf8_lossy(&real).replace("\r\n", " ")
                ));
            }
        }
        // Without names: every listed command, each as COMMAND DOCS of it alone.
        let mut all = parse_all(&a.cmd(&["COMMAND", "DOCS"]));
        let all = items(&mut all);
        let names_in_all: Vec<String> = all.iter().step_by(2).map(text).collect();
        assert_eq!(names_in_all, listed, "RESP{proto}");
        for pair in all.chunks(2) {
            let name = text(&pair[0]);
            let mut one = parse_all(&a.cmd(&["COMMAND", "DOCS", &name]));
            assert_eq!(items(&mut one)[1], pair[1], "RESP{proto} {name}");
        }
    }
    // Redis 7.0 lacks CLIENT SETINFO; its docs are 7.2's.
    let setinfo = a.cmd(&["COMMAND", "DOCS", "client|setinfo"]);
    let text = String::from_utf8_lossy(&setinfo);
    for want in [
        "Sets information specific to the client",
        "7.2.0",
        "LIB-NAME",
        "LIB-VER",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
