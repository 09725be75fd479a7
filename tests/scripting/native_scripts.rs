//! The lock clients' scripts that deadbolt runs without Lua (src/script/native.rs) answer and
//! change exactly what the scripts do on redis-server, in every state of their keys, including
//! the ones where a call fails and Lua has to raise the error (wrong type, not an integer,
//! read-only run, ACL, over maxmemory). Each run is also checked to take the path it should:
//! INFO's `lock_scripts_native` moves for a native run and stays for a run Lua makes.

use crate::common;

use common::{Conn, Server};
use std::time::Duration;

fn lua(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("lua")
        .join(file);
    std::fs::read_to_string(path).unwrap()
}

fn native_runs(c: &mut Conn) -> u64 {
    let info = c.cmd_str(&["INFO", "locks"]);
    info.lines()
        .find_map(|l| l.strip_prefix("lock_scripts_native:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no lock_scripts_native in {info}"))
}

/// One transcript line per command; PTTL-like integers within a lease of 100 s are masked.
struct Run<'a> {
    c: Conn,
    deadbolt: bool,
    out: Vec<String>,
    server: &'a Server,
}

impl Run<'_> {
    fn cmd(&mut self, args: &[&str]) -> String {
        let r = self.c.cmd_str(args);
        let shown = match r
            .strip_prefix(':')
            .and_then(|n| n.trim_end().parse::<i64>().ok())
        {
            Some(n) if (90_000..=100_000).contains(&n) => ":<lease>".to_string(),
            // HELLO's reply carries the connection id, which differs between the servers.
            _ if args[0] == "HELLO" => r[..1].to_string(),
            _ => r.clone(),
        };
        self.out.push(format!("{} -> {shown}", args.join(" ")));
        r
    }

    /// Runs a script command and checks (on deadbolt) whether it ran natively.
    fn script(&mut self, native: bool, args: &[&str]) -> String {
        let before = self.deadbolt.then(|| native_runs(&mut self.c));
        let r = self.cmd(args);
        if let Some(before) = before {
            let after = native_runs(&mut self.c);
            assert_eq!(
                after - before,
                native as u64,
                "{args:?} -> {r}: expected native={native}"
            );
        }
        r
    }
}

fn on_both(scenario: impl Fn(&mut Run)) {
    let mut transcripts = Vec::new();
    for (name, server) in common::deadbolt_and_redis(&[]) {
        let mut run = Run {
            c: server.conn(),
            deadbolt: name == "deadbolt",
            out: Vec::new(),
            server: &server,
        };
        scenario(&mut run);
        let stats = run.c.cmd_str(&["INFO", "commandstats"]);
        let mut stats: Vec<String> = stats
            .lines()
            .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
            .filter(|l| !l.starts_with("cmdstat_config:") && !l.starts_with("cmdstat_acl"))
            .map(|l| {
                // calls, rejected and failed counts; not the times.
                let (name, rest) = l.split_once(':').unwrap_or((l, ""));
                let keep: Vec<&str> = rest.split(',').filter(|f| !f.starts_with("usec")).collect();
                format!("{name}:{}", keep.join(","))
            })
            .collect();
        stats.sort();
        run.out.extend(stats);
        transcripts.push(run.out);
    }
    for (ours, theirs) in transcripts[0].iter().zip(&transcripts[1]) {
        assert_eq!(ours, theirs, "deadbolt vs redis-server");
    }
    assert_eq!(transcripts[0].len(), transcripts[1].len());
}

#[test]
fn compare_and_delete_scripts_match_redis() {
    let release = lua("redis-py/lua_release_script.lua");
    let del_reply = lua("pottery/release_script.lua");
    let redsync = lua("redsync/deletescript.lua");
    on_both(|r| {
        for body in [&release, &del_reply, &redsync] {
            r.cmd(&["SET", "k", "tok"]);
            r.script(true, &["EVAL", body, "1", "k", "tok"]);
            r.cmd(&["EXISTS", "k"]);
            r.script(true, &["EVAL", body, "1", "k", "tok"]); // missing
            r.cmd(&["SET", "k", "other"]);
            r.script(true, &["EVAL", body, "1", "k", "tok"]); // held by another
            r.cmd(&["GET", "k"]);
            // Extra keys and arguments are ignored by the script.
            r.cmd(&["SET", "k", "tok"]);
            r.script(true, &["EVAL", body, "2", "k", "x", "tok", "y"]);
            // A lease that ran out: the key is gone when the script looks.
            r.cmd(&["SET", "k", "tok", "PX", "1"]);
            std::thread::sleep(Duration::from_millis(5));
            r.script(true, &["EVAL", body, "1", "k", "tok"]);
            // Lua's cases: another type (GET raises), no key, no argument, read-only.
            r.cmd(&["HSET", "h", "f", "v"]);
            r.script(false, &["EVAL", body, "1", "h", "tok"]);
            r.script(false, &["EVAL", body, "0"]);
            r.cmd(&["SET", "k", "tok"]);
            r.script(false, &["EVAL", body, "1", "k"]);
            r.script(false, &["EVAL_RO", body, "1", "k", "tok"]);
            r.cmd(&["GET", "k"]);
            // EVALSHA, in a transaction, with RESP3.
            let sha = r.cmd(&["SCRIPT", "LOAD", body]);
            let sha = sha.lines().nth(1).unwrap_or("").to_string();
            r.cmd(&["MULTI"]);
            r.cmd(&["EVALSHA", &sha, "1", "k", "tok"]);
            r.cmd(&["EXEC"]);
            r.cmd(&["HELLO", "3"]);
            r.cmd(&["SET", "k", "tok"]);
            r.script(true, &["EVALSHA", &sha, "1", "k", "tok"]);
            r.script(true, &["EVALSHA", &sha, "1", "k", "tok"]);
            r.cmd(&["HELLO", "2"]);
            r.cmd(&["DEL", "h", "k"]);
        }
        // Over maxmemory GET and DEL still run (neither is deny-oom).
        r.cmd(&["SET", "k", "tok"]);
        r.cmd(&["CONFIG", "SET", "maxmemory", "1"]);
        r.script(true, &["EVAL", &release, "1", "k", "tok"]);
        r.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
    });
}

#[test]
fn redisson_acquire_matches_redis() {
    let acquire = lua("redisson/rlock_trylockinnerasync.lua");
    const ME: &str = "8f3b6a44-1c0e-4a8e-9a43-0c0d1e2f3a4b:1";
    const OTHER: &str = "8f3b6a44-1c0e-4a8e-9a43-0c0d1e2f3a4b:2";
    on_both(|r| {
        let a = |r: &mut Run, native: bool, key: &str, lease: &str, owner: &str| {
            r.script(native, &["EVAL", &acquire, "1", key, lease, owner]);
        };
        a(r, true, "lock", "100000", ME); // free
        r.cmd(&["HGETALL", "lock"]);
        r.cmd(&["PTTL", "lock"]);
        a(r, true, "lock", "100000", ME); // re-entry
        r.cmd(&["HGET", "lock", ME]);
        a(r, true, "lock", "100000", OTHER); // held by another: its PTTL
        r.cmd(&["HGETALL", "lock"]);
        // RESP3: the nil of an acquire.
        r.cmd(&["HELLO", "3"]);
        a(r, true, "lock2", "100000", ME);
        r.cmd(&["HELLO", "2"]);
        // A lease of 0 or less deletes the key, as PEXPIRE does.
        a(r, true, "gone", "-5", ME);
        r.cmd(&["EXISTS", "gone"]);
        // Lua's cases: each makes one call fail, after the calls before it took effect.
        r.cmd(&["SET", "str", "x"]);
        a(r, false, "str", "100000", ME); // WRONGTYPE from HEXISTS
        r.cmd(&["HSET", "bad", ME, "abc"]);
        a(r, false, "bad", "100000", ME); // hash value is not an integer
        r.cmd(&["HSET", "max", ME, "9223372036854775807"]);
        a(r, false, "max", "100000", ME); // increment would overflow
        a(r, false, "lease", "soon", ME); // PEXPIRE's argument
        r.cmd(&["HGETALL", "lease"]);
        a(r, false, "far", "9223372036854775807", ME); // deadline overflows
        r.cmd(&["HGETALL", "far"]);
        r.script(false, &["EVAL", &acquire, "1", "lock3", "100000"]);
        r.script(false, &["EVAL_RO", &acquire, "1", "lock3", "100000", ME]);
        // Over maxmemory HINCRBY, the first deny-oom call, is refused inside the script.
        r.cmd(&["CONFIG", "SET", "maxmemory", "1"]);
        a(r, false, "lock4", "100000", ME);
        r.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
        r.cmd(&["EXISTS", "lock4"]);
        let _ = r.server;
    });
}

#[test]
fn redisson_unlock_matches_redis() {
    let unlock = lua("redisson/rlock_unlockinnerasync.lua");
    const ME: &str = "8f3b6a44-1c0e-4a8e-9a43-0c0d1e2f3a4b:1";
    on_both(|r| {
        let mut sub = r.server.conn();
        sub.cmd(&["SUBSCRIBE", "redisson_lock__channel:{lock}"]);
        // KEYS: lock, channel, latch; ARGV: message, lease, owner, publish command, latch ms.
        let u = |r: &mut Run, native: bool, latch: &str, publish: &str, lease: &str, ms: &str| {
            r.script(
                native,
                &[
                    "EVAL",
                    &unlock,
                    "3",
                    "lock",
                    "redisson_lock__channel:{lock}",
                    latch,
                    "0",
                    lease,
                    ME,
                    publish,
                    ms,
                ],
            );
        };
        r.cmd(&["HSET", "lock", ME, "2"]);
        r.cmd(&["PEXPIRE", "lock", "5000"]);
        u(r, true, "latch:1", "PUBLISH", "100000", "10000"); // 2 -> 1: lease renewed
        r.cmd(&["HGETALL", "lock"]);
        r.cmd(&["PTTL", "lock"]);
        r.cmd(&["GET", "latch:1"]);
        u(r, true, "latch:1", "PUBLISH", "100000", "10000"); // the latch answers a repeat
        u(r, true, "latch:2", "publish", "100000", "10000"); // 1 -> 0: deleted, published
        r.cmd(&["EXISTS", "lock"]);
        r.cmd(&["GET", "latch:2"]);
        let message = String::from_utf8_lossy(&sub.read_reply()).into_owned();
        r.out.push(message);
        u(r, true, "latch:3", "PUBLISH", "100000", "10000"); // not held: nil
        r.cmd(&["HELLO", "3"]);
        u(r, true, "latch:4", "PUBLISH", "100000", "10000");
        r.cmd(&["HELLO", "2"]);
        // Lua's cases.
        r.cmd(&["SET", "latch:5", "abc"]);
        u(r, false, "latch:5", "PUBLISH", "100000", "10000"); // tonumber("abc") is nil
        r.cmd(&["SET", "latch:6", " 12"]);
        u(r, false, "latch:6", "PUBLISH", "100000", "10000"); // Lua reads " 12" as 12
        r.cmd(&["HSET", "latch:7", "f", "v"]);
        u(r, false, "latch:7", "PUBLISH", "100000", "10000");
        r.cmd(&["SET", "lock", "x"]);
        u(r, false, "latch:8", "PUBLISH", "100000", "10000"); // WRONGTYPE from HEXISTS
        r.cmd(&["DEL", "lock"]);
        r.cmd(&["HSET", "lock", ME, "2"]);
        u(r, false, "latch:9", "NOSUCH", "100000", "10000");
        u(r, false, "latch:10", "PUBLISH", "soon", "10000");
        u(r, false, "latch:11", "PUBLISH", "100000", "0");
        u(
            r,
            false,
            "latch:12",
            "PUBLISH",
            "100000",
            "9223372036854775807",
        );
        r.cmd(&["HGETALL", "lock"]);
        r.cmd(&["HSET", "lock", ME, "notanumber"]);
        u(r, false, "latch:13", "PUBLISH", "100000", "10000");
        r.script(
            false,
            &[
                "EVAL", &unlock, "2", "lock", "c", "0", "1", ME, "PUBLISH", "1",
            ],
        );
        // Over maxmemory the unlock's HINCRBY (its first write) is refused inside the script;
        // a latch still answers, since that takes no write.
        r.cmd(&["DEL", "lock"]);
        r.cmd(&["HSET", "lock", ME, "1"]);
        r.cmd(&["CONFIG", "SET", "maxmemory", "1"]);
        u(r, false, "latch:14", "PUBLISH", "100000", "10000");
        u(r, true, "latch:1", "PUBLISH", "100000", "10000");
        r.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
        r.cmd(&["HGETALL", "lock"]);
    });
}

#[test]
fn restricted_users_and_events_take_the_lua_path_or_match_it() {
    let release = lua("redis-py/lua_release_script.lua");
    on_both(|r| {
        r.cmd(&["ACL", "SETUSER", "svc", "on", ">pw", "~lock:*", "+@all"]);
        r.cmd(&["SET", "other:1", "tok"]);
        r.cmd(&["SET", "lock:1", "tok"]);
        r.cmd(&["AUTH", "svc", "pw"]);
        r.script(false, &["EVAL", &release, "1", "other:1", "tok"]);
        r.script(false, &["EVAL", &release, "1", "lock:1", "tok"]);
        r.cmd(&["AUTH", "default", ""]);
        r.cmd(&["EXISTS", "other:1", "lock:1"]);
    });
    // Keyspace events of a native release are Redis's.
    let events = common::keyevents_like_redis(&[
        &["SET", "k", "tok"],
        &["EVAL", &release, "1", "k", "tok"],
        &["SET", "end", "1"],
    ]);
    assert!(events.iter().any(|e| common::keyevent_name(e) == "del"));
}
