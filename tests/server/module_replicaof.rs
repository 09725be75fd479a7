//! MODULE (none loaded, none loadable), REPLICAOF/SLAVEOF NO ONE and CONFIG RESETSTAT, compared
//! with redis-server.

use crate::common;

use common::*;

#[test]
fn module_answers_as_a_redis_without_modules() {
    for extra in [&[][..], &["--enable-module-command", "yes"]] {
        both_with(extra, |s| {
            let mut c = s.conn();
            [
                &["MODULE", "LIST"][..],
                &["MODULE", "HELP"],
                &["MODULE", "LOAD", "/nonexistent/module.so"],
                &["MODULE", "LOADEX", "/nonexistent/module.so", "ARGS", "x"],
                &["MODULE", "UNLOAD", "nosuch"],
                &["MODULE"],
                &["MODULE", "nosuch"],
                &["MODULE", "LIST", "extra"],
                &["COMMAND", "LIST", "FILTERBY", "MODULE", "nosuch"],
            ]
            .iter()
            .map(|a| c.cmd(a))
            .collect()
        });
    }
}

#[test]
fn replicaof_no_one_is_ok_and_bad_ports_are_refused() {
    both(|s| {
        let mut c = s.conn();
        [
            &["REPLICAOF", "NO", "ONE"][..],
            &["SLAVEOF", "no", "one"],
            &["REPLICAOF", "127.0.0.1", "port"],
            &["REPLICAOF", "127.0.0.1", "70000"],
            &["REPLICAOF", "NO"],
            &["ROLE"],
        ]
        .iter()
        .map(|a| c.cmd(a))
        .collect()
    });
    // Following a master that cannot be reached: OK, ROLE says the link is being made, writes
    // are refused, and NO ONE makes it a master again (as a redis-server does).
    let d = deadbolt(&[]);
    let mut c = d.conn();
    let port = common::free_port().to_string();
    assert_eq!(c.cmd_str(&["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    assert_eq!(
        c.cmd_str(&["REPLICAOF", "127.0.0.1", &port]),
        "+OK Already connected to specified master\r\n"
    );
    let role = c.cmd_str(&["ROLE"]);
    assert!(
        role.starts_with(&format!(
            "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:{port}\r\n"
        )) && role.ends_with(":-1\r\n"),
        "{role}"
    );
    assert_eq!(
        c.cmd_str(&["SET", "k", "v"]),
        "-READONLY You can't write against a read only replica.\r\n"
    );
    let info = c.cmd_str(&["INFO", "replication"]);
    assert!(
        info.contains("role:slave\r\n") && info.contains("master_link_status:down\r\n"),
        "{info}"
    );
    assert_eq!(c.cmd_str(&["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    assert!(c.cmd_str(&["ROLE"]).starts_with("*3\r\n$6\r\nmaster"));
    assert_eq!(c.cmd_str(&["SET", "k", "v"]), "+OK\r\n");
}

#[test]
fn config_resetstat_resets_the_counters_redis_resets() {
    both(|s| {
        let mut c = s.conn();
        for _ in 0..5 {
            c.cmd(&["GET", "k"]);
        }
        c.cmd(&["SET", "e", "1", "PX", "1"]);
        std::thread::sleep(std::time::Duration::from_millis(5));
        c.cmd(&["GET", "e"]); // expires it
        let before = c.cmd_str(&["INFO", "stats"]);
        assert!(!before.contains("total_commands_processed:0\r\n"));
        let mut t = vec![c.cmd(&["CONFIG", "RESETSTAT"])];
        let after = c.cmd_str(&["INFO", "stats"]);
        for field in [
            "total_commands_processed",
            "total_connections_received",
            "expired_keys",
            "keyspace_misses",
            "keyspace_hits",
            "total_error_replies",
        ] {
            let line = after
                .lines()
                .find(|l| l.starts_with(&format!("{field}:")))
                .unwrap()
                .to_string();
            t.push(line.into_bytes());
        }
        t
    });
}

#[test]
fn command_getkeys_and_list_by_category_as_redis() {
    both(|s| {
        let mut c = s.conn();
        let mut t: Vec<Vec<u8>> = [
            &["COMMAND", "GETKEYS", "MSET", "a", "b", "c", "d"][..],
            &["COMMAND", "GETKEYS", "GET"],
            &["COMMAND", "GETKEYS", "PING", "x"],
            &["COMMAND", "GETKEYS", "NOSUCH", "x"],
            &["COMMAND", "GETKEYS", "EVAL", "x", "0"],
            &["COMMAND", "GETKEYS", "EVAL", "x", "2", "k1", "k2", "a"],
            &["COMMAND", "GETKEYS", "ZUNIONSTORE", "d", "0"],
            &[
                "COMMAND",
                "GETKEYS",
                "ZUNIONSTORE",
                "d",
                "2",
                "a",
                "b",
                "WEIGHTS",
                "1",
                "2",
            ],
            &[
                "COMMAND",
                "GETKEYSANDFLAGS",
                "LMOVE",
                "a",
                "b",
                "LEFT",
                "RIGHT",
            ],
            &["COMMAND", "GETKEYS", "XINFO", "STREAM", "k"],
            &["COMMAND", "GETKEYS", "XINFO", "NOSUCH", "k"],
            &[
                "COMMAND", "GETKEYS", "XREAD", "COUNT", "2", "STREAMS", "a", "b", "1", "2",
            ],
            &["COMMAND", "GETKEYS", "SET", "a", "b"],
            &["COMMAND", "GETKEYSANDFLAGS", "SET", "a", "b", "GET"],
            &["COMMAND", "GETKEYSANDFLAGS", "SET", "a", "b"],
            &["COMMAND", "GETKEYS", "SORT", "k", "STORE", "d"],
            &[
                "COMMAND",
                "GETKEYSANDFLAGS",
                "SORT",
                "k",
                "BY",
                "w*",
                "STORE",
                "d",
            ],
            &[
                "COMMAND",
                "GETKEYS",
                "GEORADIUS",
                "k",
                "1",
                "2",
                "3",
                "km",
                "STORE",
                "d",
            ],
            &[
                "COMMAND",
                "GETKEYSANDFLAGS",
                "BITFIELD",
                "k",
                "GET",
                "u8",
                "0",
            ],
            &[
                "COMMAND",
                "GETKEYSANDFLAGS",
                "BITFIELD",
                "k",
                "SET",
                "u8",
                "0",
                "1",
            ],
            &["COMMAND", "GETKEYS", "FCALL", "f", "1", "k", "a"],
            &["COMMAND", "HELP"],
            &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "nosuch"],
        ]
        .iter()
        .map(|a| c.cmd(a))
        .collect();
        // Category listings, order-insensitive (Redis's dict order) and only over what both have.
        let mine = |c: &mut Conn, cat: &str| {
            let r =
                String::from_utf8(c.cmd(&["COMMAND", "LIST", "FILTERBY", "ACLCAT", cat])).unwrap();
            let mut v: Vec<String> = r
                .split("\r\n")
                .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
                // Left out of deadbolt on purpose (docs/commands.md): Redis's self-test and Lua debugger.
                .filter(|l| *l != "pfselftest" && *l != "script|debug")
                .map(str::to_string)
                .collect();
            v.sort();
            v.join(",").into_bytes()
        };
        for cat in ["hyperloglog", "string", "scripting", "blocking"] {
            t.push(mine(&mut c, cat));
        }
        t
    });
}
