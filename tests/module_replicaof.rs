//! MODULE (none loaded, none loadable), REPLICAOF/SLAVEOF NO ONE and CONFIG RESETSTAT, compared
//! with redis-server.

mod common;

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
    // Following a Redis master is refused, not acknowledged.
    let d = deadbolt(&[]);
    let reply = d.conn().cmd_str(&["REPLICAOF", "127.0.0.1", "6379"]);
    assert!(
        reply.starts_with("-ERR deadbolt does not replicate"),
        "{reply}"
    );
    assert!(d
        .conn()
        .cmd_str(&["ROLE"])
        .starts_with("*3\r\n$6\r\nmaster"));
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
