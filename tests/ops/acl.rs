//! ACL (Redis 7.0's acl.c): users with every rule, selectors, command/key/channel checks (at top
//! level, in MULTI, in scripts), ACL LOG, DRYRUN, GENPASS, CAT, aclfile with LOAD/SAVE,
//! compared byte for byte with a real redis-server (cases ported from Redis's
//! tests/unit/acl.tcl and acl-v2.tcl). Two things differ by design and are normalised: the
//! order Redis prints single-command rules in (its command dict's random hash order) and ACL
//! LOG's age and client line.

use crate::common;

use common::{Conn, Server};
use std::time::Duration;

fn pair(extra: &[&str]) -> (Server, Server) {
    (common::deadbolt(extra), common::redis_server(extra))
}

/// Sorts the trailing single-command rules of each selector (`+get -set|x …`), the only part
/// of Redis's rule strings whose order is random.
fn norm_rules(line: &str) -> String {
    fn flush(seg: &mut Vec<String>, out: &mut Vec<String>) {
        let closes = seg.last().is_some_and(|t| t.ends_with(')'));
        if closes {
            let last = seg.pop().unwrap();
            seg.push(last.trim_end_matches(')').to_string());
        }
        let single =
            |t: &String| (t.starts_with('+') || t.starts_with('-')) && !t[1..].starts_with('@');
        let start = seg.iter().rposition(|t| !single(t)).map_or(0, |i| i + 1);
        seg[start..].sort_by(|a, b| a[1..].cmp(&b[1..]));
        if closes {
            let last = seg.pop().unwrap();
            seg.push(format!("{last})"));
        }
        out.append(seg);
    }
    let mut out = Vec::new();
    let mut seg: Vec<String> = Vec::new();
    for t in line.split(' ') {
        if t.starts_with('(') && !seg.is_empty() {
            flush(&mut seg, &mut out);
        }
        seg.push(t.to_string());
        if t.ends_with(')') {
            flush(&mut seg, &mut out);
        }
    }
    flush(&mut seg, &mut out);
    out.join(" ")
}

/// A reply as text lines, rule strings normalised, ACL LOG's age and client line masked.
fn normalize(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply);
    let mut out = Vec::new();
    let mut mask_next = false;
    let mut skip = false;
    for line in text.split("\r\n") {
        if skip {
            skip = false;
            continue;
        }
        if mask_next && (line.starts_with('$') || line.starts_with(',') || line.starts_with(':')) {
            mask_next = false;
            skip = line.starts_with('$');
            out.push("<masked>".to_string());
            continue;
        }
        if line == "age-seconds" || line == "client-info" || line == "id" {
            mask_next = true;
        }
        if line.contains("@all") {
            out.push(norm_rules(line));
        } else {
            out.push(line.to_string());
        }
    }
    out.join("\n")
}

/// Runs each session (commands on one fresh connection) on both servers and compares.
fn same(ours: &Server, redis: &Server, sessions: &[&[&[&str]]]) {
    for session in sessions {
        let (mut a, mut b) = (ours.conn(), redis.conn());
        for cmd in *session {
            let (x, y) = (normalize(&a.cmd(cmd)), normalize(&b.cmd(cmd)));
            assert_eq!(x, y, "{cmd:?} in session {session:?}");
        }
    }
}

fn same_with(extra: &[&str], sessions: &[&[&[&str]]]) {
    let (ours, redis) = pair(extra);
    same(&ours, &redis, sessions);
}

#[test]
fn users_passwords_and_rules_match_redis() {
    let h = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"; // "password"
    let add_hash = format!("#{h}");
    let del_hash = format!("!{h}");
    same_with(
        &[],
        &[
            &[
                &["ACL", "WHOAMI"],
                &["ACL", "SETUSER", "newuser"],
                &["ACL", "USERS"],
                &["ACL", "SETUSER", "a b"],
                &["ACL", "SETUSER", "a\0b"],
                &["ACL", "SETUSER", "", "on"],
                &["ACL", "LIST"],
                &["ACL", "DELUSER", ""],
                &["AUTH", "newuser", "passwd1"],
                &["ACL", "SETUSER", "newuser", "on", ">passwd1", ">passwd2"],
                &["ACL", "GETUSER", "newuser"],
                &["AUTH", "newuser", "passwd1"],
                &["ACL", "WHOAMI"],
                &["AUTH", "newuser", "passwd2"],
                &["AUTH", "newuser", "passwd3"],
                &["AUTH", "default", ""],
                &["ACL", "SETUSER", "newuser", "<passwd1"],
                &["ACL", "SETUSER", "newuser", "<nope"],
                &["ACL", "SETUSER", "newuser", &add_hash],
                &["ACL", "SETUSER", "newuser", "#abc"],
                &[
                    "ACL",
                    "SETUSER",
                    "newuser",
                    "#ZZ4898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
                ],
                &["ACL", "GETUSER", "newuser"],
                &["ACL", "SETUSER", "newuser", &del_hash],
                &["ACL", "SETUSER", "newuser", &del_hash],
                &["ACL", "SETUSER", "newuser", "nopass"],
                &["ACL", "GETUSER", "newuser"],
                &[
                    "ACL",
                    "SETUSER",
                    "newuser",
                    "resetpass",
                    "skip-sanitize-payload",
                ],
                &["ACL", "LIST"],
                &["ACL", "SETUSER", "newuser", "reset"],
                &["ACL", "LIST"],
                &["ACL", "SETUSER", "newuser", "off", "on", "", "~*", "~x"],
                &["ACL", "SETUSER", "newuser", "&*", "&x"],
                &["ACL", "SETUSER", "newuser", "bogus"],
                &["ACL", "SETUSER", "newuser", "~a b"],
                &["ACL", "SETUSER", "newuser", "%X~a"],
                &["ACL", "SETUSER", "newuser", "%R"],
                &["ACL", "LIST"],
            ],
            &[
                // Key patterns with read/write flags merge; categories and single commands.
                &[
                    "ACL", "SETUSER", "k", "%R~r*", "%W~w*", "~b*", "%RW~r*", "%w~b*", "%rW~x",
                ],
                &["ACL", "GETUSER", "k"],
                &["ACL", "SETUSER", "k", "allkeys", "allchannels"],
                &["ACL", "GETUSER", "k"],
                &[
                    "ACL",
                    "SETUSER",
                    "k",
                    "resetkeys",
                    "resetchannels",
                    "&a*",
                    "&b",
                    "&a*",
                ],
                &["ACL", "GETUSER", "k"],
                &["ACL", "SETUSER", "c1", "+@all", "-@dangerous"],
                &["ACL", "SETUSER", "c2", "-@all", "+@read", "-@keyspace"],
                &["ACL", "SETUSER", "c2b", "-@all", "+@hyperloglog", "-pfadd"],
                &[
                    "ACL",
                    "SETUSER",
                    "c3",
                    "+@hash",
                    "+@string",
                    "-hset",
                    "+client|id",
                ],
                &[
                    "ACL",
                    "SETUSER",
                    "c4",
                    "+@all",
                    "-client",
                    "+client|id",
                    "-config|set",
                ],
                &[
                    "ACL",
                    "SETUSER",
                    "c5",
                    "-@all",
                    "+select|0",
                    "+select|1",
                    "+select|0",
                    "+set",
                ],
                &[
                    "ACL",
                    "SETUSER",
                    "c6",
                    "+@all",
                    "-@geo",
                    "+geoadd",
                    "-@hyperloglog",
                ],
                &[
                    "ACL",
                    "SETUSER",
                    "c7",
                    "allcommands",
                    "nocommands",
                    "+@transaction",
                ],
                &[
                    "ACL",
                    "SETUSER",
                    "c8",
                    "+get",
                    "-get",
                    "+@set",
                    "+@sortedset",
                    "-zadd",
                ],
                &["ACL", "SETUSER", "c9", "+@ALL", "-@Read"],
                &["ACL", "LIST"],
                &["ACL", "GETUSER", "c5"],
                &["ACL", "SETUSER", "e", "+nope"],
                &["ACL", "SETUSER", "e", "-nope"],
                &["ACL", "SETUSER", "e", "+@nope"],
                &["ACL", "SETUSER", "e", "+config|get|x"],
                &["ACL", "SETUSER", "e", "+config|nope"],
                &["ACL", "SETUSER", "e", "+get|"],
                &["ACL", "SETUSER", "e", "-select|0"],
                &["ACL", "SETUSER", "e", "+"],
                &["ACL", "USERS"],
                &["ACL", "GETUSER", "nobody"],
            ],
            &[
                // Selectors (acl-v2.tcl).
                &[
                    "ACL",
                    "SETUSER",
                    "s",
                    "on",
                    "nopass",
                    "(~key1 +get)",
                    "(~key2 +set)",
                ],
                &["ACL", "GETUSER", "s"],
                &["ACL", "SETUSER", "s", "(", "~key3", "+lpush", ")"],
                &[
                    "ACL",
                    "SETUSER",
                    "s",
                    "(~key4",
                    "+@hash)",
                    "(%R~key5 &ch +get)",
                ],
                &["ACL", "LIST"],
                &["ACL", "SETUSER", "s", "(~key6", "+nope)"],
                &["ACL", "SETUSER", "s", "(~key6", "+get"],
                &["ACL", "SETUSER", "s", "(on)"],
                &["ACL", "SETUSER", "s", "clearselectors"],
                &["ACL", "GETUSER", "s"],
                &["ACL", "SETUSER", "s", "()"],
                &["ACL", "GETUSER", "s"],
                &["ACL", "DELUSER", "s", "nobody", "k"],
                &["ACL", "DELUSER", "default"],
                &["ACL", "DELUSER", "x", "default"],
                &["ACL", "USERS"],
            ],
        ],
    );
}

/// Rules written back give the same rules (acl-v2.tcl's idempotency), and mean what Redis's do.
#[test]
fn described_rules_read_back_the_same() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    let sets: &[&[&str]] = &[
        &["-@all", "+@read", "-@keyspace"],
        &["+@all", "-@slow", "+@write", "-@admin"],
        &["allcommands", "nocommands", "+@scripting", "+@pubsub"],
        &[
            "+@all",
            "-client",
            "+client|id",
            "-select",
            "+select|0",
            "(~a +@list -lpush)",
        ],
        &[
            "%R~r",
            "%W~w",
            "~b",
            "&c",
            "-@all",
            "+@hash",
            "-hset",
            "+config|get",
        ],
    ];
    for rules in sets {
        let mut cmd = vec!["ACL", "SETUSER", "u", "reset"];
        cmd.extend_from_slice(rules);
        assert_eq!(c.cmd(&cmd), b"+OK\r\n");
        let first = list(&c.cmd(&["ACL", "LIST"])).remove(1);
        let words: Vec<&str> = first.split(' ').skip(2).collect();
        let mut again = vec!["ACL", "SETUSER", "u", "reset"];
        again.extend(words);
        assert_eq!(c.cmd(&again), b"+OK\r\n", "{first}");
        assert_eq!(list(&c.cmd(&["ACL", "LIST"])).remove(1), first);
    }
    // The meaning, command by command, is Redis's: `-@all +@read -@keyspace` allows GET and
    // refuses SET, DEL and EXISTS.
    assert_eq!(
        c.cmd(&[
            "ACL",
            "SETUSER",
            "m",
            "on",
            "nopass",
            "~*",
            "-@all",
            "+@read",
            "-@keyspace"
        ]),
        b"+OK\r\n"
    );
    let r = |c: &mut Conn, args: &[&str]| c.cmd_str(args);
    let mut cmd = vec!["ACL", "DRYRUN", "m"];
    for (args, ok) in [
        (&["GET", "a"][..], true),
        (&["SET", "a", "b"], false),
        (&["EXISTS", "a"], false),
        (&["HGET", "a", "b"], true),
    ] {
        cmd.truncate(3);
        cmd.extend_from_slice(args);
        assert_eq!(r(&mut c, &cmd) == "+OK\r\n", ok, "{args:?}");
    }
}

/// acl.tcl's "ACL GETUSER provides reasonable results": one category added to `-@all` or taken
/// from `+@all` is written back as just that, for every category (some have only commands
/// deadbolt lacks, such as @stream).
#[test]
fn every_category_is_written_back_as_itself() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    for cat in list(&c.cmd(&["ACL", "CAT"])) {
        for (start, op) in [("+@all", "-"), ("-@all", "+")] {
            let rule = format!("{op}@{cat}");
            assert_eq!(
                c.cmd(&["ACL", "SETUSER", "u", "reset", start, &rule]),
                b"+OK\r\n"
            );
            let r = c.cmd_str(&["ACL", "GETUSER", "u"]);
            let want = format!("{start} {rule}");
            assert!(
                r.contains(&format!("${}\r\n{want}\r\n", want.len())),
                "{want}: {r}"
            );
        }
    }
}

#[test]
fn resp3_getuser_matches_redis() {
    same_with(
        &[],
        &[&[
            &["HELLO", "3"],
            &[
                "ACL",
                "SETUSER",
                "r3",
                "on",
                ">p",
                "%R~a",
                "&c",
                "+get",
                "(~b +set)",
            ],
            &["ACL", "GETUSER", "r3"],
            &["ACL", "GETUSER", "default"],
        ]],
    );
}

#[test]
fn acl_cat_matches_redis_for_the_commands_deadbolt_has() {
    let (ours, redis) = pair(&[]);
    let (mut a, mut b) = (ours.conn(), redis.conn());
    assert_eq!(a.cmd(&["ACL", "CAT"]), b.cmd(&["ACL", "CAT"]));
    assert_eq!(
        a.cmd(&["ACL", "CAT", "nope"]),
        b.cmd(&["ACL", "CAT", "nope"])
    );
    assert_eq!(
        a.cmd(&["ACL", "CAT", "read", "x"]),
        b.cmd(&["ACL", "CAT", "read", "x"])
    );
    let cats = list(&a.cmd(&["ACL", "CAT"]));
    assert_eq!(cats.len(), 21);
    // Every command deadbolt has, with its subcommands (what ACL CAT can list).
    let mut ours_all = std::collections::BTreeSet::new();
    for c in &cats {
        ours_all.extend(list(&a.cmd(&["ACL", "CAT", c])));
    }
    for c in &cats {
        // deadbolt's own commands (RAFT, CLIENT SETINFO of 7.2) are not Redis 7.0's.
        let mut mine: Vec<String> = list(&a.cmd(&["ACL", "CAT", c.to_uppercase().as_str()]))
            .into_iter()
            .filter(|n| {
                let mut cmd = vec!["ACL", "DRYRUN", "default"];
                cmd.extend(n.split('|'));
                !b.cmd_str(&cmd).starts_with("-ERR Command '")
            })
            .collect();
        let mut theirs: Vec<String> = list(&b.cmd(&["ACL", "CAT", c]))
            .into_iter()
            .filter(|n| {
                // A command Redis has and deadbolt lacks is "not found" by DRYRUN.
                let mut cmd = vec!["ACL", "DRYRUN", "default"];
                cmd.extend(n.split('|'));
                !a.cmd_str(&cmd).starts_with("-ERR Command '")
            })
            .collect();
        mine.sort();
        theirs.sort();
        assert_eq!(mine, theirs, "@{c}");
    }
    assert!(ours_all.contains("get") && ours_all.contains("config|get"));
}

/// The elements of a flat RESP2 array of bulk strings.
fn list(reply: &[u8]) -> Vec<String> {
    let s = String::from_utf8_lossy(reply);
    let mut lines = s.split("\r\n");
    let head = lines.next().unwrap_or("");
    assert!(head.starts_with('*'), "{s}");
    let mut out = Vec::new();
    while let Some(l) = lines.next() {
        if l.starts_with('$') {
            out.push(lines.next().unwrap_or("").to_string());
        }
    }
    out
}

const RESTRICTED: &[&str] = &[
    "--user",
    "k",
    "on",
    "nopass",
    "~obj:*",
    "%R~read*",
    "%W~write*",
    "&chan*",
    "+@all",
    "--user",
    "c",
    "on",
    "nopass",
    "allkeys",
    "allchannels",
    "-@all",
    "+get",
    "+config|get",
    "+select|0",
    "+client",
    "-client|kill",
    "+acl|whoami",
    "+multi",
    "+exec",
    "+eval",
    "--user",
    "sel",
    "on",
    "nopass",
    "%R~r*",
    "+get",
    "(~w* +set)",
    "(%W~x* +@write +@read)",
];

#[test]
fn command_key_and_channel_refusals_match_redis() {
    same_with(
        RESTRICTED,
        &[
            &[
                &["AUTH", "c", "x"],
                &["GET", "a"],
                &["SET", "a", "1"],
                &["CONFIG", "GET", "maxmemory"],
                &["CONFIG", "SET", "maxmemory", "0"],
                &["SELECT", "0"],
                &["SELECT", "1"],
                &["CLIENT", "GETNAME"],
                &["CLIENT", "KILL", "ID", "999"],
                &["ACL", "WHOAMI"],
                &["ACL", "LIST"],
                &["PING"],
                &["HELLO", "2"],
                &["AUTH", "c", "y"],
                &["DEL", "a"],
                &["PUBLISH", "x", "y"],
            ],
            &[
                &["AUTH", "k", "x"],
                &["SET", "obj:1", "v"],
                &["GET", "obj:1"],
                &["SET", "other", "v"],
                &["GET", "read1"],
                &["SET", "read1", "v"],
                &["SET", "write1", "v"],
                &["GET", "write1"],
                &["SET", "write1", "v", "GET"],
                &["APPEND", "write1", "v"],
                &["EXISTS", "write1", "read1"],
                &["TYPE", "write1"],
                &["STRLEN", "write1"],
                &["DEL", "read1"],
                &["DEL", "write1"],
                &["LMOVE", "read1", "write1", "LEFT", "RIGHT"],
                &["LMOVE", "write1", "read1", "LEFT", "RIGHT"],
                &["RENAME", "obj:1", "write1"],
                &["RENAME", "read1", "write1"],
                &["MSET", "obj:a", "1", "write2", "2", "read3", "3"],
                &["MGET", "obj:a", "read2", "write3"],
                &["SINTERCARD", "2", "read1", "read2"],
                &["SINTERSTORE", "write9", "read1", "obj:2"],
                &["SINTERSTORE", "read9", "read1", "obj:2"],
                &["ZUNIONSTORE", "write9", "2", "read1", "write2"],
                &["ZUNIONSTORE", "write9", "2", "read1", "read2"],
                &["ZUNIONSTORE", "write9", "x", "read1", "write2"],
                &["BITFIELD", "read1", "GET", "u8", "0"],
                &["BITFIELD", "read1", "SET", "u8", "0", "1"],
                &["BITFIELD", "write1", "GET", "u8", "0"],
                &["BITFIELD_RO", "read1", "GET", "u8", "0"],
                &["SORT", "read1"],
                &["SORT", "read1", "STORE", "write1"],
                &["SORT", "read1", "STORE", "read2"],
                &["SORT", "write1"],
                &["SORT_RO", "read1"],
                &[
                    "GEOSEARCHSTORE",
                    "write1",
                    "read1",
                    "FROMLONLAT",
                    "0",
                    "0",
                    "BYRADIUS",
                    "1",
                    "km",
                ],
                &["GEORADIUS", "read1", "0", "0", "1", "km", "STORE", "read2"],
                &["GEORADIUS", "read1", "0", "0", "1", "km", "STORE", "write2"],
                &["PUBLISH", "chan1", "m"],
                &["PUBLISH", "other", "m"],
                &["SPUBLISH", "chan1", "m"],
                &["SPUBLISH", "other", "m"],
                &["PFCOUNT", "read1", "write1"],
                &["KEYS", "*"],
                &["FLUSHDB"],
            ],
            &[&["AUTH", "k", "x"], &["SUBSCRIBE", "chan1", "other"]],
            &[&["AUTH", "k", "x"], &["SSUBSCRIBE", "other"]],
            &[&["AUTH", "k", "x"], &["PSUBSCRIBE", "chan*", "chan1*"]],
            &[
                &["AUTH", "k", "x"],
                &["PSUBSCRIBE", "chan*"],
                &["PUNSUBSCRIBE", "zz"],
            ],
            &[
                // Selectors: each one is tried; read/write permissions of different
                // selectors do not add up (acl-v2.tcl).
                &["AUTH", "sel", "x"],
                &["GET", "r1"],
                &["SET", "r1", "v"],
                &["SET", "w1", "v"],
                &["GET", "w1"],
                &["SET", "x1", "v"],
                &["GET", "x1"],
                &["APPEND", "x1", "v"],
                &["LPUSH", "x1", "v"],
                &["MSET", "w1", "1", "x1", "2"],
                &["RENAME", "r1", "x1"],
                &["DEL", "w1"],
            ],
        ],
    );
}

#[test]
fn scripts_and_transactions_match_redis() {
    same_with(
        &[
            "--user",
            "s",
            "on",
            "nopass",
            "~lock:*",
            "&ch*",
            "-@all",
            "+eval",
            "+evalsha",
            "+set",
            "+get",
            "+multi",
            "+exec",
            "+discard",
            "+publish",
            "+ping",
            "+auth",
            "+acl|setuser",
            "--user",
            "t",
            "on",
            "nopass",
            "allkeys",
            "+@all",
            "-set",
        ],
        &[
            &[
                &["AUTH", "s", "x"],
                &[
                    "EVAL",
                    "return redis.call('set', KEYS[1], 'v')",
                    "1",
                    "lock:a",
                ],
                &[
                    "EVAL",
                    "return redis.call('set', KEYS[1], 'v')",
                    "1",
                    "other",
                ],
                &["EVAL", "return redis.call('set', 'other', 'v')", "0"],
                &["EVAL", "return redis.call('del', 'lock:a')", "0"],
                &["EVAL", "return redis.pcall('del', 'lock:a')", "0"],
                &["EVAL", "return redis.call('publish', 'ch1', 'x')", "0"],
                &["EVAL", "return redis.call('publish', 'zz', 'x')", "0"],
                &["EVAL", "return redis.call('get', 'lock:a')", "0"],
                &["EVAL", "return redis.call('get', 'lock:a')", "1", "other"],
                &["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"],
                &["ACL", "LOG", "2"],
            ],
            &[
                // A refused command while queuing aborts EXEC.
                &["AUTH", "s", "x"],
                &["MULTI"],
                &["SET", "lock:b", "1"],
                &["DEL", "lock:b"],
                &["SET", "other", "1"],
                &["EXEC"],
                &["MULTI"],
                &["PUBLISH", "zz", "x"],
                &["EXEC"],
            ],
            &[
                // Rules that change between queuing and EXEC.
                &["AUTH", "t", "x"],
                &["MULTI"],
                &["GET", "a"],
                &["AUTH", "s", "x"],
                &["GET", "a"],
                &["GET", "lock:a"],
                &["EXEC"],
            ],
            &[
                &["AUTH", "t", "x"],
                &["MULTI"],
                &["ACL", "SETUSER", "t", "-get"],
                &["GET", "a"],
                &["EXEC"],
                &["GET", "a"],
                &["ACL", "LOG", "1"],
            ],
        ],
    );
}

#[test]
fn acl_log_matches_redis() {
    same_with(
        &[
            "--user",
            "antirez",
            "on",
            ">foo",
            "~object:*",
            "&chan*",
            "-@all",
            "+set",
            "+get",
            "+publish",
            "+multi",
            "+exec",
            "+eval",
            "+auth",
        ],
        &[
            &[
                &["ACL", "LOG", "RESET"],
                &["AUTH", "antirez", "foo"],
                &["GET", "foo"],
                &["INCR", "object:1"],
                &["GET", "object:1"],
                &["INCR", "object:1"],
                &["INCR", "object:1"],
                &["SET", "somekey", "v"],
                &["PUBLISH", "somechannel", "m"],
                &["MULTI"],
                &["INCR", "object:1"],
                &["EXEC"],
                &["EVAL", "redis.call('incr', 'object:1')", "0"],
                &["AUTH", "antirez", "wrong"],
                &["AUTH", "nobody", "wrong"],
                &["ACL", "LOG"],
            ],
            &[
                &["ACL", "LOG"],
                &["ACL", "LOG", "2"],
                &["ACL", "LOG", "0"],
                &["ACL", "LOG", "-5"],
                &["ACL", "LOG", "x"],
                &["ACL", "LOG", "1", "2"],
                &["HELLO", "3", "AUTH", "antirez", "bad"],
                &["HELLO", "3"],
                &["ACL", "LOG", "1"],
                &["ACL", "LOG", "RESET"],
                &["ACL", "LOG"],
            ],
        ],
    );
    // At most acllog-max-len entries, newest first.
    same_with(
        &["--acllog-max-len", "3"],
        &[&[
            &["AUTH", "u1", "x"],
            &["AUTH", "u2", "x"],
            &["AUTH", "u3", "x"],
            &["AUTH", "u4", "x"],
            &["ACL", "LOG"],
            &["CONFIG", "SET", "acllog-max-len", "1"],
            &["CONFIG", "GET", "acllog-max-len"],
            &["AUTH", "u5", "x"],
            &["ACL", "LOG"],
        ]],
    );
}

#[test]
fn dryrun_genpass_and_errors_match_redis() {
    same_with(
        &[
            "--user",
            "d",
            "on",
            "nopass",
            "%R~r*",
            "~w*",
            "&ch",
            "-@all",
            "+get",
            "+set",
            "+publish",
            "+subscribe",
            "+config|get",
        ],
        &[&[
            &["ACL", "DRYRUN", "d", "GET", "r1"],
            &["ACL", "DRYRUN", "d", "SET", "r1", "v"],
            &["ACL", "DRYRUN", "d", "SET", "w1", "v"],
            &["ACL", "DRYRUN", "d", "DEL", "w1"],
            &["ACL", "DRYRUN", "d", "PUBLISH", "ch", "m"],
            &["ACL", "DRYRUN", "d", "PUBLISH", "other", "m"],
            &["ACL", "DRYRUN", "d", "SUBSCRIBE", "ch", "other"],
            &["ACL", "DRYRUN", "d", "CONFIG", "GET", "x"],
            &["ACL", "DRYRUN", "d", "CONFIG", "SET", "x", "y"],
            &["ACL", "DRYRUN", "d", "CONFIG", "NOPE"],
            &["ACL", "DRYRUN", "d", "CONFIG"],
            &["ACL", "DRYRUN", "d", "NOPE"],
            &["ACL", "DRYRUN", "d", "GET"],
            &["ACL", "DRYRUN", "d", "GET", "a", "b"],
            &["ACL", "DRYRUN", "nobody", "GET", "a"],
            &["ACL", "DRYRUN", "d"],
            &["ACL", "GENPASS", "0"],
            &["ACL", "GENPASS", "4097"],
            &["ACL", "GENPASS", "x"],
            &["ACL", "GENPASS", "1", "2"],
            &["ACL", "LOAD"],
            &["ACL", "SAVE"],
            &["ACL", "GETUSER"],
            &["ACL", "SETUSER"],
        ]],
    );
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    for (bits, len) in [
        (None, 64),
        (Some("1"), 1),
        (Some("5"), 2),
        (Some("4096"), 1024),
    ] {
        let mut cmd = vec!["ACL", "GENPASS"];
        cmd.extend(bits);
        let r = c.cmd_str(&cmd);
        let pass = r.split("\r\n").nth(1).unwrap();
        assert_eq!(pass.len(), len, "{r}");
        assert!(pass
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    }
    assert_ne!(c.cmd(&["ACL", "GENPASS"]), c.cmd(&["ACL", "GENPASS"]));
}

/// Whether `c` was disconnected by the server.
fn closed(c: &mut Conn) -> bool {
    c.is_closed(Duration::from_secs(2))
}

#[test]
fn deleting_a_user_or_revoking_channels_disconnects_as_redis_does() {
    for s in [common::deadbolt(&[]), common::redis_server(&[])] {
        let mut admin = s.conn();
        let ok = b"+OK\r\n".to_vec();
        assert_eq!(
            admin.cmd(&["ACL", "SETUSER", "u", "on", "nopass", "+@all", "~*", "&chan*"]),
            ok
        );
        let mut user = s.conn();
        assert_eq!(user.cmd(&["AUTH", "u", "x"]), ok);
        assert_eq!(admin.cmd(&["ACL", "DELUSER", "u"]), b":1\r\n");
        assert!(closed(&mut user));
        // A client deleting its own user gets the reply, then is disconnected.
        assert_eq!(
            admin.cmd(&["ACL", "SETUSER", "u", "on", "nopass", "+@all", "~*", "&chan*"]),
            ok
        );
        let mut me = s.conn();
        assert_eq!(me.cmd(&["AUTH", "u", "x"]), ok);
        assert_eq!(me.cmd(&["ACL", "DELUSER", "u"]), b":1\r\n");
        assert!(closed(&mut me));
        // Subscribers lose their connection with their channels, not otherwise.
        assert_eq!(
            admin.cmd(&[
                "ACL",
                "SETUSER",
                "u",
                "on",
                "nopass",
                "+@all",
                "~*",
                "resetchannels",
                "&chan*",
                "&news"
            ]),
            ok
        );
        let mut sub = s.conn();
        assert_eq!(sub.cmd(&["AUTH", "u", "x"]), ok);
        sub.cmd(&["SUBSCRIBE", "chan1"]);
        let mut psub = s.conn();
        assert_eq!(psub.cmd(&["AUTH", "u", "x"]), ok);
        psub.cmd(&["PSUBSCRIBE", "chan*"]);
        let mut other = s.conn();
        assert_eq!(other.cmd(&["AUTH", "u", "x"]), ok);
        // Keeping the patterns (and adding one) keeps everyone.
        assert_eq!(admin.cmd(&["ACL", "SETUSER", "u", "&more"]), ok);
        assert_eq!(admin.cmd(&["PUBLISH", "chan1", "m"]), b":2\r\n");
        // Losing `chan*` drops both subscribers, not the client that subscribed to nothing.
        assert_eq!(
            admin.cmd(&["ACL", "SETUSER", "u", "resetchannels", "&chan1"]),
            ok
        );
        assert!(closed(&mut psub));
        assert_eq!(admin.cmd(&["ACL", "SETUSER", "u", "resetchannels"]), ok);
        assert!(closed(&mut sub));
        assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n");
    }
}

#[test]
fn acl_pubsub_default_matches_redis() {
    same_with(
        &["--acl-pubsub-default", "allchannels"],
        &[&[
            &["CONFIG", "GET", "acl-pubsub-default"],
            &["ACL", "SETUSER", "a", "on"],
            &["CONFIG", "SET", "acl-pubsub-default", "resetchannels"],
            &["ACL", "SETUSER", "b", "on"],
            &["ACL", "SETUSER", "a", "reset"],
            &["CONFIG", "SET", "acl-pubsub-default", "allchannels"],
            &["ACL", "SETUSER", "b", "reset"],
            &["ACL", "SETUSER", "b", "&x"],
            &["CONFIG", "SET", "acl-pubsub-default", "nope"],
            &["ACL", "LIST"],
        ]],
    );
}

#[test]
fn aclfile_load_and_save_match_redis() {
    let dir = common::TempDir::new("ops-acl-file");
    let write = |name: &str, text: &str| {
        let p = dir.0.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    let text = "user alice on allcommands allkeys &* >alice\nuser bob on -@all +@set +acl ~set* &* >bob\nuser default on nopass ~* &* +@all\n";
    let ours_file = write("ours.acl", text);
    let theirs_file = write("theirs.acl", text);
    let ours = common::deadbolt(&["--aclfile", &ours_file]);
    let theirs = common::redis_server(&["--aclfile", &theirs_file]);
    let bob: &[&[&str]] = &[
        &["ACL", "LIST"],
        &["AUTH", "bob", "bob"],
        &["SADD", "set1", "a"],
        &["GET", "x"],
        &["ACL", "SETUSER", "eve", "on", ">e", "~e*", "+get"],
        &["ACL", "SAVE"],
        &["ACL", "SETUSER", "zed", "on"],
        &["ACL", "LOAD"],
    ];
    same(&ours, &theirs, &[bob]);
    let mut kept = [ours.conn(), theirs.conn()];
    for c in kept.iter_mut() {
        assert_eq!(c.cmd(&["AUTH", "alice", "alice"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["ACL", "LOAD"]), b"+OK\r\n");
        // ACL LOAD renews every user but default: their clients are disconnected, this one
        // after its reply.
        assert!(closed(c));
    }
    let admin: &[&[&str]] = &[
        &["ACL", "LIST"],
        &["AUTH", "eve", "e"],
        &["GET", "e1"],
        &["CONFIG", "GET", "aclfile"],
        &["CONFIG", "SET", "aclfile", "x"],
    ];
    same(&ours, &theirs, &[admin]);
    // ACL SAVE wrote the same users.
    let saved = |p: &str| {
        let t = std::fs::read_to_string(p).unwrap();
        t.lines().map(norm_rules).collect::<Vec<_>>()
    };
    assert_eq!(saved(&ours_file), saved(&theirs_file));
    // Errors leave the users as they were, with Redis's messages.
    let bad = "user alice on +nope\nfoo bar\nuser alice on\nuser x (~a\nuser y on bogus\n";
    std::fs::write(&ours_file, bad).unwrap();
    std::fs::write(&theirs_file, bad.replace("ours.acl", "theirs.acl")).unwrap();
    let (mut a, mut b) = (ours.conn(), theirs.conn());
    let (x, y) = (a.cmd_str(&["ACL", "LOAD"]), b.cmd_str(&["ACL", "LOAD"]));
    assert_eq!(x.replace("ours.acl", "F"), y.replace("theirs.acl", "F"));
    assert_eq!(
        normalize(&a.cmd(&["ACL", "LIST"])),
        normalize(&b.cmd(&["ACL", "LIST"]))
    );
    std::fs::remove_file(&ours_file).unwrap();
    std::fs::remove_file(&theirs_file).unwrap();
    let (x, y) = (a.cmd_str(&["ACL", "LOAD"]), b.cmd_str(&["ACL", "LOAD"]));
    assert_eq!(x.replace("ours.acl", "F"), y.replace("theirs.acl", "F"));
}

#[test]
fn users_in_both_the_config_and_an_aclfile_are_refused() {
    let dir = common::TempDir::new("ops-acl-both");
    let acl = dir.0.join("users.acl");
    std::fs::write(&acl, "user a on nopass +@all ~*\n").unwrap();
    let out = std::process::Command::new(common::deadbolt_bin())
        .args([
            "--aclfile",
            acl.to_str().unwrap(),
            "--user",
            "b",
            "on",
            "--port",
            "0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "define either an ACL file or declare users directly in your redis.conf, but not both"
        ),
        "{err}"
    );
    // A relative aclfile is found in `dir`, where Redis reads it from.
    let s = common::deadbolt(&["--dir", dir.0.to_str().unwrap(), "--aclfile", "users.acl"]);
    assert_eq!(
        s.conn().cmd(&["ACL", "USERS"]),
        b"*2\r\n$1\r\na\r\n$7\r\ndefault\r\n"
    );
    // A missing aclfile stops the start, as in Redis.
    let out = std::process::Command::new(common::deadbolt_bin())
        .args(["--aclfile", "/nonexistent/users.acl", "--port", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "Error loading ACLs, opening file '/nonexistent/users.acl': No such file or directory"
        ),
        "{err}"
    );
}

/// The issue's user line in a config file: the server starts and enforces it.
#[test]
fn the_orders_user_from_a_config_file_is_enforced() {
    let dir = common::TempDir::new("ops-acl-orders");
    let conf = dir.0.join("deadbolt.conf");
    std::fs::write(
        &conf,
        "user orders on >pw ~lock:orders:* &lock:orders:* +@scripting +set +del\n",
    )
    .unwrap();
    let ours = common::deadbolt_with_file(&conf, &[]);
    let theirs = common::redis_server(&[
        "--user",
        "orders",
        "on",
        ">pw",
        "~lock:orders:*",
        "&lock:orders:*",
        "+@scripting",
        "+set",
        "+del",
    ]);
    same(
        &ours,
        &theirs,
        &[&[
            &["ACL", "LIST"],
            &["AUTH", "orders", "pw"],
            &["SET", "lock:orders:1", "me", "NX", "PX", "30000"],
            &["SET", "lock:other:1", "me", "NX", "PX", "30000"],
            &["GET", "lock:orders:1"],
            &[
                "EVAL",
                "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
                "1",
                "lock:orders:1",
                "me",
            ],
            &["EVAL", "return redis.call('get', KEYS[1])", "1", "lock:orders:1"],
            &["EVAL", "return redis.call('del', KEYS[1])", "1", "lock:payments:1"],
            &["DEL", "lock:orders:1", "lock:payments:1"],
            &["PUBLISH", "lock:orders:1", "released"],
            &["SCRIPT", "FLUSH"],
            &["CONFIG", "GET", "port"],
        ]],
    );
}

/// CONFIG REWRITE writes the users as they are now (Redis's rewriteConfigUserOption).
#[test]
fn config_rewrite_writes_the_users_as_redis_does() {
    let dir = common::TempDir::new("ops-acl-rewrite");
    let text = "user alice on >a ~a* +get\nuser bob on nopass +@all ~*\n";
    let mut files = Vec::new();
    for name in ["ours.conf", "theirs.conf"] {
        let p = dir.0.join(name);
        std::fs::write(&p, text).unwrap();
        let mut ours = None;
        let mut c = if name == "ours.conf" {
            let s = common::deadbolt_with_file(&p, &[]);
            let c = s.conn();
            ours = Some(s);
            c
        } else {
            // redis-server takes the file as its first argument.
            let port = common::free_port();
            let child = std::process::Command::new("redis-server")
                .arg(&p)
                .args([
                    "--port",
                    &port.to_string(),
                    "--save",
                    "",
                    "--bind",
                    "127.0.0.1",
                ])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "redis-server did not start"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            let c = Conn::connect(port);
            // Stopped by SHUTDOWN below.
            drop(child);
            c
        };
        assert_eq!(
            c.cmd(&["ACL", "SETUSER", "alice", "%R~b*", "+set"]),
            b"+OK\r\n"
        );
        assert_eq!(c.cmd(&["ACL", "DELUSER", "bob"]), b":1\r\n");
        assert_eq!(
            c.cmd(&["ACL", "SETUSER", "carol", "on", ">c", "&ch"]),
            b"+OK\r\n"
        );
        assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), b"+OK\r\n");
        let users: Vec<String> = std::fs::read_to_string(&p)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("user "))
            .map(norm_rules)
            .collect();
        if ours.is_none() {
            c.send(&["SHUTDOWN", "NOSAVE"]);
            assert!(closed(&mut c));
        }
        files.push(users);
    }
    assert_eq!(files[0], files[1]);
    assert_eq!(files[0].len(), 3, "{:?}", files[0]);
}

/// Changing the default user changes what a new connection must do, as requirepass does.
#[test]
fn changing_the_default_user_matches_redis() {
    same_with(
        &[],
        &[
            &[&["ACL", "SETUSER", "default", ">pw"], &["PING"]],
            &[
                &["PING"],
                &["AUTH", "pw"],
                &["PING"],
                &["ACL", "SETUSER", "default", "nopass", "-get"],
            ],
            &[
                &["PING"],
                &["GET", "a"],
                &["ACL", "SETUSER", "default", "off", "+get"],
            ],
            &[
                &["PING"],
                &["HELLO", "2", "AUTH", "default", "x"],
                &["ACL", "LOG", "1"],
            ],
        ],
    );
}

/// acl-v2.tcl's key-permission cases through ACL DRYRUN, and SORT's BY/GET, which need a user
/// that may read every key.
#[test]
fn key_permissions_of_odd_commands_match_redis() {
    let mut s: Vec<Vec<&str>> = vec![vec![
        "ACL",
        "SETUSER",
        "command-test",
        "+@all",
        "%R~read*",
        "%W~write*",
        "%RW~rw*",
    ]];
    let dry = |args: &[&'static str]| {
        let mut v = vec!["ACL", "DRYRUN", "command-test"];
        v.extend_from_slice(args);
        v
    };
    for args in [
        &["GET", "read"][..],
        &["SORT", "read", "STORE", "write"],
        &["SORT", "read", "STORE", "read"],
        &["SORT", "write", "STORE", "write"],
        &[
            "SORT", "read", "BY", "x", "LIMIT", "0", "1", "STORE", "rw", "STORE", "write",
        ],
        &["EVAL", "", "1", "rw1"],
        &["EVAL", "", "1", "read"],
        &["EVAL_RO", "", "1", "rw1"],
        &["EVAL_RO", "", "1", "read"],
        &["EVAL", "", "0", "read"],
        &["EVAL", "", "-1", "read"],
        &["EVAL", "", "3", "rw", "rw"],
        &["EVAL", "", "3", "rw", "read"],
        &[
            "GEORADIUS",
            "read",
            "0",
            "0",
            "1",
            "M",
            "STOREDIST",
            "write",
        ],
        &[
            "GEORADIUS",
            "read1",
            "0",
            "0",
            "1",
            "M",
            "STOREDIST",
            "read2",
        ],
        &[
            "GEORADIUS",
            "write1",
            "0",
            "0",
            "1",
            "M",
            "STOREDIST",
            "write2",
        ],
        &["GEORADIUS", "read", "0", "0", "1", "M", "STORE", "write"],
        &["GEORADIUS", "read1", "0", "0", "1", "M", "STORE", "read2"],
        &["GEORADIUSBYMEMBER", "read", "m", "1", "M", "STORE"],
        &["HEXISTS", "write", "f"],
        &["HEXISTS", "nothing", "f"],
        &["SISMEMBER", "write", "f"],
        &["SINTERCARD", "2", "read", "read"],
        &["SINTERCARD", "2", "write", "read"],
        &["SINTERCARD", "2", "nothing", "read"],
        &["ZINTERCARD", "2", "write", "read"],
        &["ZCOUNT", "write", "0", "1"],
        &["PFCOUNT", "write", "read"],
        &["TOUCH", "write"],
        &["EXISTS", "nothing"],
        &["TYPE", "write"],
        &["STRLEN", "write"],
        &["LLEN", "nothing"],
        &["LMPOP", "2", "read", "rw", "LEFT"],
        &["LMPOP", "2", "rw", "write", "LEFT"],
        &["BLMPOP", "0", "1", "rw", "LEFT"],
        &["ZMPOP", "1", "read", "MIN"],
        &["SET", "read", "v"],
        &["SET", "write", "v"],
        &["SET", "write", "v", "GET"],
        &["SET", "rw", "v", "get"],
        &["BITFIELD", "read", "GET", "u8", "0"],
        &["BITFIELD", "write", "GET", "u8", "0"],
        &["BITFIELD", "read", "GET", "u8", "0", "OVERFLOW", "SAT"],
        &["BITFIELD", "read", "INCRBY", "u8", "0", "1"],
        &["BITFIELD", "read", "NOPE"],
        &["SPUBLISH", "ch", "m"],
        &["SSUBSCRIBE", "ch"],
        &["SUNSUBSCRIBE", "ch"],
    ] {
        s.push(dry(args));
    }
    s.extend([
        vec![
            "ACL",
            "SETUSER",
            "test-channels",
            "+@all",
            "resetchannels",
            "&channel",
        ],
        vec![
            "ACL",
            "DRYRUN",
            "test-channels",
            "spublish",
            "channel",
            "foo",
        ],
        vec![
            "ACL",
            "DRYRUN",
            "test-channels",
            "ssubscribe",
            "otherchannel",
            "foo",
        ],
        vec![
            "ACL",
            "DRYRUN",
            "test-channels",
            "sunsubscribe",
            "otherchannel",
        ],
        vec!["ACL", "DRYRUN", "test-channels", "psubscribe", "chan*"],
        vec!["ACL", "DRYRUN", "test-channels", "punsubscribe", "chan*"],
    ]);
    let session: Vec<&[&str]> = s.iter().map(|v| v.as_slice()).collect();
    same_with(&[], &[&session]);
    // SORT BY/GET (acl-v2.tcl "Test sort with ACL permissions").
    same_with(
        &[],
        &[
            &[
                &["SET", "v1", "1"],
                &["LPUSH", "mylist", "1"],
                &["ACL", "SETUSER", "t", "on", "nopass", "(+sort ~mylist)"],
            ],
            &[
                &["AUTH", "t", "x"],
                &["SORT", "mylist", "BY", "v*"],
                &["SORT", "mylist", "GET", "v*"],
                &["SORT", "mylist", "BY", "nosort"],
                &["SORT", "mylist", "GET", "#"],
            ],
            &[&["ACL", "SETUSER", "t", "(+sort ~mylist ~v*)"]],
            &[&["AUTH", "t", "x"], &["SORT", "mylist", "BY", "v*"]],
            &[&["ACL", "SETUSER", "t", "(+sort ~mylist %W~*)"]],
            &[&["AUTH", "t", "x"], &["SORT", "mylist", "GET", "v*"]],
            &[&["ACL", "SETUSER", "t", "(+sort ~mylist %R~*)"]],
            &[
                &["AUTH", "t", "x"],
                &["SORT", "mylist", "BY", "v*"],
                &["SORT", "mylist", "BY", "v*", "GET", "#", "GET", "v*"],
                &[
                    "EVAL",
                    "return redis.call('sort', 'mylist', 'by', 'v*')",
                    "0",
                ],
            ],
        ],
    );
}

/// A refused AUTH answered while a script is busy is in ACL LOG too (once that client's next
/// command runs, when the executor takes what the busy answers did).
#[test]
fn a_refused_auth_during_a_busy_script_is_logged() {
    for s in [
        common::deadbolt(&["--busy-reply-threshold", "100"]),
        common::redis_server(&["--busy-reply-threshold", "100"]),
    ] {
        let mut a = s.conn();
        a.send(&["EVAL", "while true do end", "0"]);
        s.wait_log("Slow script detected", Duration::from_secs(10));
        let mut b = s.conn();
        assert_eq!(
            b.cmd_str(&["AUTH", "nobody", "x"]),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        );
        assert_eq!(b.cmd_str(&["SCRIPT", "KILL"]), "+OK\r\n");
        a.read_reply();
        assert_eq!(b.cmd_str(&["PING"]), "+PONG\r\n");
        let log = b.cmd_str(&["ACL", "LOG"]);
        assert!(log.starts_with("*1\r\n"), "{log}");
        assert!(
            log.contains("$4\r\nauth\r\n") && log.contains("$6\r\nnobody\r\n"),
            "{log}"
        );
    }
}
