//! Sorted sets: exact reply bytes per command, error cases included (expected bytes captured from
//! redis-server 7.0.15; tx_data_differential.rs checks the same against a live redis-server).

use crate::common;

/// (command line, exact reply); None: only sent (HELLO, whose reply names the server).
const CASES: &[(&str, Option<&str>)] = &[
        ("zadd z 1 a 2.5 b inf c 0.1 d", Some(":4\r\n")),
        ("zadd z nx xx 1 a", Some("-ERR XX and NX options at the same time are not compatible\r\n")),
        ("zadd z gt lt 1 a", Some("-ERR GT, LT, and/or NX options at the same time are not compatible\r\n")),
        ("zadd z incr 1 a 2 b", Some("-ERR INCR option supports a single increment-element pair\r\n")),
        ("zadd z 1 a 2", Some("-ERR syntax error\r\n")),
        ("zadd z abc a", Some("-ERR value is not a valid float\r\n")),
        ("zadd z incr -inf c", Some("-ERR resulting score is not a number (NaN)\r\n")),
        ("zadd z nx incr 1 a", Some("$-1\r\n")),
        ("zadd z ch gt 3 a 1 b", Some(":1\r\n")),
        ("zincrby z 1 d", Some("$18\r\n1.1000000000000001\r\n")),
        ("zincrby z abc d", Some("-ERR value is not a valid float\r\n")),
        ("zscore z d", Some("$18\r\n1.1000000000000001\r\n")),
        ("zmscore z a nosuch", Some("*2\r\n$1\r\n3\r\n$-1\r\n")),
        ("zcard z", Some(":4\r\n")),
        ("zcount z (1 +inf", Some(":4\r\n")),
        ("zrank z a", Some(":2\r\n")),
        ("zrevrank z a", Some(":1\r\n")),
        ("zrank z nosuch", Some("$-1\r\n")),
        ("zrange z 0 -1 withscores", Some("*8\r\n$1\r\nd\r\n$18\r\n1.1000000000000001\r\n$1\r\nb\r\n$3\r\n2.5\r\n$1\r\na\r\n$1\r\n3\r\n$1\r\nc\r\n$3\r\ninf\r\n")),
        ("zrange z (1 3 byscore limit 0 1", Some("*1\r\n$1\r\nd\r\n")),
        ("zrange z 3 (1 byscore rev withscores", Some("*6\r\n$1\r\na\r\n$1\r\n3\r\n$1\r\nb\r\n$3\r\n2.5\r\n$1\r\nd\r\n$18\r\n1.1000000000000001\r\n")),
        ("zrange z 0 -1 limit 0 1", Some("-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n")),
        ("zrange z a b bylex withscores", Some("-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n")),
        ("zrangebyscore z x 1", Some("-ERR min or max is not a float\r\n")),
        ("zrangebylex z a b", Some("-ERR min or max not valid string range item\r\n")),
        ("zrevrange z 0 1", Some("*2\r\n$1\r\nc\r\n$1\r\na\r\n")),
        ("zrevrangebyscore z +inf 3", Some("*2\r\n$1\r\nc\r\n$1\r\na\r\n")),
        ("zremrangebyscore z inf inf", Some(":1\r\n")),
        ("zremrangebyrank z -1 -1", Some(":1\r\n")),
        ("zpopmin z", Some("*2\r\n$1\r\nd\r\n$18\r\n1.1000000000000001\r\n")),
        ("zpopmax z 5", Some("*2\r\n$1\r\nb\r\n$3\r\n2.5\r\n")),
        ("zpopmin z -1", Some("-ERR value is out of range, must be positive\r\n")),
        ("zpopmin nokey", Some("*0\r\n")),
        ("bzpopmin nokey 0.01", Some("*-1\r\n")),
        ("zadd z 1 a", Some(":1\r\n")),
        ("bzpopmax z 0", Some("*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n")),
        ("exists z", Some(":0\r\n")),
        ("hello 3", None),
        ("zadd z 1 a 2.5 b inf c", Some(":3\r\n")),
        ("zscore z b", Some(",2.5\r\n")),
        ("zmscore z a x", Some("*2\r\n,1\r\n_\r\n")),
        ("zincrby z 1 a", Some(",2\r\n")),
        ("zadd z incr 1 a", Some(",3\r\n")),
        ("zrange z 0 -1 withscores", Some("*3\r\n*2\r\n$1\r\nb\r\n,2.5\r\n*2\r\n$1\r\na\r\n,3\r\n*2\r\n$1\r\nc\r\n,inf\r\n")),
        ("zrangebyscore z 2 +inf withscores", Some("*3\r\n*2\r\n$1\r\nb\r\n,2.5\r\n*2\r\n$1\r\na\r\n,3\r\n*2\r\n$1\r\nc\r\n,inf\r\n")),
        ("zpopmin z", Some("*2\r\n$1\r\nb\r\n,2.5\r\n")),
        ("zpopmax z 1", Some("*1\r\n*2\r\n$1\r\nc\r\n,inf\r\n")),
        ("bzpopmin z 0", Some("*3\r\n$1\r\nz\r\n$1\r\na\r\n,3\r\n")),
        ("bzpopmin z 0.01", Some("_\r\n")),
];

#[test]
fn exact_replies() {
    let s = common::deadbolt(&[]);
    common::assert_replies(&mut s.conn(), CASES);
}
