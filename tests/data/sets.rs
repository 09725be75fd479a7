//! Sets: exact reply bytes per command, error cases included (expected bytes captured from
//! redis-server 7.0.15; tx_data_differential.rs checks the same against a live redis-server).

use crate::common;

/// (command line, exact reply); None: only sent (HELLO, whose reply names the server).
const CASES: &[(&str, Option<&str>)] = &[
        ("sadd s 3 1 2", Some(":3\r\n")),
        ("sadd s 2", Some(":0\r\n")),
        ("smembers s", Some("*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n")),
        ("scard s", Some(":3\r\n")),
        ("sismember s 1", Some(":1\r\n")),
        ("smismember s 1 9", Some("*2\r\n:1\r\n:0\r\n")),
        ("srem s 1 9", Some(":1\r\n")),
        ("sscan s 0", Some("*2\r\n$1\r\n0\r\n*2\r\n$1\r\n2\r\n$1\r\n3\r\n")),
        ("sscan s abc", Some("-ERR invalid cursor\r\n")),
        ("spop s 5", Some("*2\r\n$1\r\n2\r\n$1\r\n3\r\n")),
        ("exists s", Some(":0\r\n")),
        ("spop nokey", Some("$-1\r\n")),
        ("spop nokey 2", Some("*0\r\n")),
        ("spop s -1", Some("-ERR value is out of range, must be positive\r\n")),
        ("srandmember nokey 2", Some("*0\r\n")),
        ("srandmember s -9223372036854775808", Some("-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n")),
        ("sadd s x", Some(":1\r\n")),
        ("set str v", Some("+OK\r\n")),
        ("sadd str a", Some("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n")),
        ("hello 3", None),
        ("smembers s", Some("~1\r\n$1\r\nx\r\n")),
        ("spop nokey 1", Some("~0\r\n")),
        ("srandmember nokey 1", Some("*0\r\n")),
];

#[test]
fn exact_replies() {
    let s = common::deadbolt(&[]);
    common::assert_replies(&mut s.conn(), CASES);
}
