//! maxmemory with noeviction: -OOM for commands that add data, reads and deletes keep working,
//! used_memory follows reality, CONFIG SET of bad values keeps the old value.

use crate::common;

use common::Conn;

fn info_field(c: &mut Conn, section: &str, field: &str) -> String {
    let reply = c.cmd_str(&["INFO", section]);
    reply
        .split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {reply}"))
        .to_string()
}

fn used(c: &mut Conn) -> u64 {
    info_field(c, "memory", "used_memory").parse().unwrap()
}

const OOM: &[u8] = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n";

#[test]
fn over_the_limit_writes_fail_reads_and_deletes_work_like_redis() {
    let ours = common::deadbolt(&[]);
    let redis = common::redis_server(&[]);
    for s in [&ours, &redis] {
        let mut c = s.conn();
        assert_eq!(c.cmd(&["SET", "lock", "token"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["SET", "n", "1"]), b"+OK\r\n");
    }
    let script: &[&[&str]] = &[
        &["CONFIG", "SET", "maxmemory", "1"],
        &["SET", "other", "x"],
        &["SET", "lock", "token2", "XX"],
        &["INCR", "n"],
        &["HSET", "h", "f", "v"],
        &["GET", "lock"],
        &["EXISTS", "lock"],
        &["PEXPIRE", "lock", "100000"],
        &["DEL", "lock"],
        &["DEL", "lock"],
        &["PING"],
        &["CONFIG", "GET", "maxmemory"],
        &["CONFIG", "SET", "maxmemory", "0"],
        &["SET", "other", "x"],
    ];
    let (mut a, mut b) = (ours.conn(), redis.conn());
    for cmd in script {
        assert_eq!(
            String::from_utf8_lossy(&a.cmd(cmd)),
            String::from_utf8_lossy(&b.cmd(cmd)),
            "{cmd:?}"
        );
    }
    assert_eq!(info_field(&mut a, "errorstats", "errorstat_OOM"), "count=4");
    assert_eq!(info_field(&mut b, "errorstats", "errorstat_OOM"), "count=4");
    let stats = a.cmd_str(&["INFO", "commandstats"]);
    assert!(stats.contains("cmdstat_set:calls=3,"), "{stats}");
    assert!(stats.contains("rejected_calls=2,failed_calls=0"), "{stats}");
}

#[test]
fn used_memory_tracks_data_and_deleting_makes_room() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    let before = used(&mut c);
    let value = "v".repeat(256 * 1024);
    for i in 0..20 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), &value]), b"+OK\r\n");
    }
    let full = used(&mut c);
    assert!(
        full >= before + 20 * 256 * 1024,
        "used_memory {before} -> {full} after storing 5 MiB"
    );
    // A limit 1 MiB below what is used: writes fail, with Redis's INFO fields showing why.
    let limit = (full - 1024 * 1024).to_string();
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", &limit]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "lock", "me", "NX", "PX", "1000"]), OOM);
    assert_eq!(info_field(&mut c, "memory", "maxmemory"), limit);
    assert_eq!(
        info_field(&mut c, "memory", "maxmemory_policy"),
        "noeviction"
    );
    assert!(info_field(&mut c, "memory", "maxmemory_human").ends_with('M'));
    // Reads still work; deleting half the data brings usage under the limit again.
    assert_eq!(c.cmd(&["STRLEN", "k0"]), b":262144\r\n");
    for i in 0..10 {
        assert_eq!(c.cmd(&["DEL", &format!("k{i}")]), b":1\r\n");
    }
    let after = used(&mut c);
    assert!(after + 2 * 1024 * 1024 <= full, "{full} -> {after}");
    assert_eq!(
        c.cmd(&["SET", "lock", "me", "NX", "PX", "1000"]),
        b"+OK\r\n"
    );
    // Nothing was evicted to make room.
    assert_eq!(c.cmd(&["DBSIZE"]), b":11\r\n");
    assert_eq!(info_field(&mut c, "stats", "evicted_keys"), "0");
}

#[test]
fn invalid_values_are_refused_and_the_old_value_kept() {
    let ours = common::deadbolt(&[]);
    let redis = common::redis_server(&[]);
    let (mut a, mut b) = (ours.conn(), redis.conn());
    for cmd in [
        &["CONFIG", "SET", "maxmemory", "100mb"][..],
        &["CONFIG", "SET", "maxmemory", "abc"],
        &["CONFIG", "SET", "maxmemory", "-1"],
        &["CONFIG", "SET", "maxmemory", "1.5mb"],
        &["CONFIG", "SET", "maxmemory", "10zb"],
        &["CONFIG", "GET", "maxmemory"],
        &["CONFIG", "SET", "maxmemory-policy", "foo"],
        &["CONFIG", "SET", "maxmemory-policy", "NOEVICTION"],
        &["CONFIG", "GET", "maxmemory-policy"],
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            "1gb",
            "maxmemory-policy",
            "bad",
        ],
        &["CONFIG", "GET", "maxmemory"],
    ] {
        assert_eq!(
            String::from_utf8_lossy(&a.cmd(cmd)),
            String::from_utf8_lossy(&b.cmd(cmd)),
            "{cmd:?}"
        );
    }
    // Eviction policies other than noeviction are refused (a lock must never be evicted).
    assert_eq!(
        a.cmd_str(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]),
        "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - deadbolt never evicts keys (they are locks): 'allkeys-lru' is not supported, only noeviction\r\n"
    );
    assert_eq!(
        a.cmd(&["CONFIG", "GET", "maxmemory-policy"]),
        b"*2\r\n$16\r\nmaxmemory-policy\r\n$10\r\nnoeviction\r\n"
    );
}

/// Connections that once received a large reply do not keep a buffer of its size: after 100
/// idle connections each read a ~216 KB reply (a list of 2 000 elements of 100 bytes, encoded
/// into the connection's output), used_memory is back near where it was (21 MB would stay if
/// each kept its write buffer).
#[test]
fn a_large_reply_leaves_no_buffer_behind() {
    let s = common::deadbolt(&[]);
    let mut c0 = s.conn();
    let element = "x".repeat(100);
    for _ in 0..20 {
        let mut args = vec!["RPUSH", "biglist"];
        args.extend(std::iter::repeat_n(element.as_str(), 100));
        c0.cmd(&args);
    }
    let reply_len = c0.cmd(&["LRANGE", "biglist", "0", "-1"]).len();
    assert_eq!(reply_len, 7 + 2000 * 108);
    let mut conns: Vec<Conn> = (0..100).map(|_| s.conn()).collect();
    for c in &mut conns {
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    }
    let before = used(&mut c0);
    for c in &mut conns {
        assert_eq!(c.cmd(&["LRANGE", "biglist", "0", "-1"]).len(), reply_len);
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    }
    let after = used(&mut c0);
    assert!(
        after < before + 4_000_000,
        "used_memory {before} -> {after} after 100 connections read {reply_len} bytes each"
    );
}
