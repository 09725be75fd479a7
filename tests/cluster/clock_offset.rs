//! `DEBUG CLOCK-OFFSET <ms>` (deadbolt's own, test-only): moves the server's wall clock, so a
//! failover test can give one node a clock ahead of another's. Reachable only where
//! `enable-debug-command` lets DEBUG run, with Redis's own refusal otherwise.

use crate::common;

use common::Conn;

/// TIME's reply as microseconds since the epoch.
fn time_us(c: &mut Conn) -> u64 {
    let reply = c.cmd_str(&["TIME"]);
    let parts: Vec<&str> = reply.split("\r\n").collect();
    // *2 $n secs $n micros
    assert_eq!(parts.len(), 6, "{reply:?}");
    let secs: u64 = parts[2].parse().expect("TIME seconds");
    let micros: u64 = parts[4].parse().expect("TIME microseconds");
    secs * 1_000_000 + micros
}

fn int_reply(c: &mut Conn, args: &[&str]) -> i64 {
    let reply = c.cmd_str(args);
    reply
        .strip_prefix(':')
        .and_then(|r| r.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("{args:?}: {reply:?}"))
}

#[test]
fn a_forward_offset_expires_keys_early_and_moves_time() {
    let s = common::deadbolt(&["--enable-debug-command", "local"]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["SET", "lock", "owner", "PX", "60000"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "held", "owner", "PX", "60000"]), b"+OK\r\n");
    let before = time_us(&mut c);

    // 30 s ahead: the lock has about 30 s left, and TIME says so.
    assert_eq!(c.cmd(&["DEBUG", "CLOCK-OFFSET", "30000"]), b"+OK\r\n");
    let pttl = int_reply(&mut c, &["PTTL", "held"]);
    assert!((20_000..=30_000).contains(&pttl), "PTTL {pttl}");
    let ahead = time_us(&mut c);
    assert!(ahead >= before + 30_000_000, "TIME {before} -> {ahead}");
    assert!(ahead < before + 40_000_000, "TIME {before} -> {ahead}");

    // 120 s ahead: a 60 s lock is gone long before its real deadline.
    assert_eq!(c.cmd(&["DEBUG", "CLOCK-OFFSET", "120000"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["GET", "lock"]), b"$-1\r\n");
    assert_eq!(c.cmd(&["EXISTS", "held"]), b":0\r\n");
    // A new lock's deadline is taken from the moved clock, so it lives its full span.
    assert_eq!(c.cmd(&["SET", "new", "owner", "PX", "5000"]), b"+OK\r\n");
    let pttl = int_reply(&mut c, &["PTTL", "new"]);
    assert!((4_000..=5_000).contains(&pttl), "PTTL {pttl}");

    // Back to the real clock (and a negative offset moves it back the other way).
    assert_eq!(c.cmd(&["DEBUG", "CLOCK-OFFSET", "0"]), b"+OK\r\n");
    let now = time_us(&mut c);
    assert!(now >= before && now < before + 10_000_000, "TIME {now}");
    assert_eq!(c.cmd(&["DEBUG", "CLOCK-OFFSET", "-60000"]), b"+OK\r\n");
    let behind = time_us(&mut c);
    assert!(behind + 50_000_000 < before, "TIME {before} -> {behind}");
}

#[test]
fn bad_offsets_are_refused_and_change_nothing() {
    let s = common::deadbolt(&["--enable-debug-command", "yes"]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd(&["DEBUG", "CLOCK-OFFSET", "soon"]),
        b"-ERR value is not an integer or out of range\r\n"
    );
    let refused = c.cmd_str(&["DEBUG", "CLOCK-OFFSET", "9223372036854775807"]);
    assert!(
        refused.starts_with("-ERR clock offset must be between"),
        "{refused:?}"
    );
    let before = time_us(&mut c);
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_micros() as u64;
    assert!(before.abs_diff(real) < 10_000_000, "the clock did not move");
    // Missing argument: DEBUG's unknown-subcommand answer, as for any malformed subcommand.
    assert_eq!(
        c.cmd_str(&["DEBUG", "CLOCK-OFFSET"]),
        "-ERR unknown subcommand or wrong number of arguments for 'CLOCK-OFFSET'. Try DEBUG HELP.\r\n"
    );
}

/// Without `enable-debug-command`, DEBUG is refused before its subcommand is read: the same
/// bytes as redis-server, and the clock does not move.
#[test]
fn refused_where_debug_is_disabled_like_redis() {
    let mut replies = Vec::new();
    for (name, s) in common::deadbolt_and_redis(&[]) {
        let mut c = s.conn();
        assert_eq!(c.cmd(&["SET", "lock", "owner", "PX", "60000"]), b"+OK\r\n");
        let reply = c.cmd_str(&["DEBUG", "CLOCK-OFFSET", "120000"]);
        assert_eq!(c.cmd(&["GET", "lock"]), b"$5\r\nowner\r\n", "{name}");
        replies.push(reply);
    }
    assert!(
        replies[0].starts_with("-ERR DEBUG command not allowed."),
        "{:?}",
        replies[0]
    );
    assert_eq!(replies[0], replies[1]);
}
