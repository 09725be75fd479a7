//! Lists: exact reply bytes per command, error cases included (expected bytes captured from
//! redis-server 7.0.15; tx_data_differential.rs checks the same against a live redis-server).

use crate::common;

/// (command line, exact reply); None: only sent (HELLO, whose reply names the server).
const CASES: &[(&str, Option<&str>)] = &[
        ("rpush l a b c", Some(":3\r\n")),
        ("lpush l z", Some(":4\r\n")),
        ("lrange l 0 -1", Some("*4\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n")),
        ("lpop l 2", Some("*2\r\n$1\r\nz\r\n$1\r\na\r\n")),
        ("rpop l", Some("$1\r\nc\r\n")),
        ("lpop nokey 2", Some("*-1\r\n")),
        ("lpop nokey", Some("$-1\r\n")),
        ("lpop l -1", Some("-ERR value is out of range, must be positive\r\n")),
        ("llen l", Some(":1\r\n")),
        ("lindex l 0", Some("$1\r\nb\r\n")),
        ("lset nokey 0 x", Some("-ERR no such key\r\n")),
        ("lset l 5 x", Some("-ERR index out of range\r\n")),
        ("linsert l middle a b", Some("-ERR syntax error\r\n")),
        ("linsert l after b c", Some(":2\r\n")),
        ("lrem l 0 zz", Some(":0\r\n")),
        ("ltrim l 0 -1", Some("+OK\r\n")),
        ("lpos l c", Some(":1\r\n")),
        ("lpos l a rank 0", Some("-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n")),
        ("lpos l a count -1", Some("-ERR COUNT can't be negative\r\n")),
        ("lpos l a maxlen -1", Some("-ERR MAXLEN can't be negative\r\n")),
        ("lpushx nokey x", Some(":0\r\n")),
        ("rpushx l d", Some(":3\r\n")),
        ("lmove l d left right", Some("$1\r\nb\r\n")),
        ("rpoplpush l d", Some("$1\r\nd\r\n")),
        ("lrange d 0 -1", Some("*2\r\n$1\r\nd\r\n$1\r\nb\r\n")),
        ("lmpop 2 nokey d right count 5", Some("*2\r\n$1\r\nd\r\n*2\r\n$1\r\nb\r\n$1\r\nd\r\n")),
        ("lmpop 0 l left", Some("-ERR numkeys should be greater than 0\r\n")),
        ("lmpop 1 l left count 0", Some("-ERR count should be greater than 0\r\n")),
        ("blpop l -1", Some("-ERR timeout is negative\r\n")),
        ("blpop l abc", Some("-ERR timeout is not a float or out of range\r\n")),
        ("rpush l x y", Some(":3\r\n")),
        ("blpop l 0", Some("*2\r\n$1\r\nl\r\n$1\r\nc\r\n")),
        ("brpop l 0", Some("*2\r\n$1\r\nl\r\n$1\r\ny\r\n")),
        ("blpop l 0.01", Some("*2\r\n$1\r\nl\r\n$1\r\nx\r\n")),
        ("blmove l d left right 0.01", Some("*-1\r\n")),
        ("lmove l d up left", Some("-ERR syntax error\r\n")),
        ("set s v", Some("+OK\r\n")),
        ("lpush s x", Some("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n")),
        ("lrange s 0 -1", Some("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n")),
        ("hello 3", None),
        ("lpop nokey 1", Some("_\r\n")),
        ("blpop nokey 0.01", Some("_\r\n")),
        ("lmpop 1 nokey left", Some("_\r\n")),
];

#[test]
fn exact_replies() {
    let s = common::deadbolt(&[]);
    common::assert_replies(&mut s.conn(), CASES);
}
