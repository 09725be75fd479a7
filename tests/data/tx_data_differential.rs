//! Differential tests: the same command sequences against deadbolt and a real redis-server 7.0,
//! reply bytes compared one by one. Lines starting with `~` have a reply whose element order Redis
//! leaves unspecified (hash-table sets): its top-level elements are compared sorted.

use crate::common;

use common::{reply_len, split_line, Conn};

/// Top-level elements of an aggregate reply, sorted, with the header kept.
fn sorted_elements(reply: &[u8]) -> Vec<Vec<u8>> {
    let eol = reply.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
    let mut out = vec![reply[..eol].to_vec()];
    let mut items = Vec::new();
    let mut pos = eol;
    while pos < reply.len() {
        let n = reply_len(reply, pos).unwrap();
        items.push(reply[pos..pos + n].to_vec());
        pos += n;
    }
    items.sort();
    out.extend(items);
    out
}

fn run_script(name: &str, script: &str, ours: &mut Conn, theirs: &mut Conn) {
    for c in [&mut *ours, &mut *theirs] {
        assert_eq!(c.cmd(&["HELLO", "2"]).first(), Some(&b'*'));
        assert_eq!(c.cmd(&["SELECT", "0"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["FLUSHALL"]), b"+OK\r\n");
    }
    for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (unordered, line) = match line.strip_prefix('~') {
            Some(rest) => (true, rest.trim()),
            None => (false, line),
        };
        let argv = split_line(line);
        let a = ours.cmd(&argv);
        let b = theirs.cmd(&argv);
        if line.to_ascii_lowercase().starts_with("hello") {
            // Server identity fields differ (id, version string); only the shape must match.
            assert_eq!(a[0], b[0], "{name}: {line}");
            continue;
        }
        let (a_cmp, b_cmp) = if unordered {
            (sorted_elements(&a), sorted_elements(&b))
        } else {
            (vec![a.clone()], vec![b.clone()])
        };
        assert_eq!(
            a_cmp,
            b_cmp,
            "{name}: `{line}`\n deadbolt: {:?}\n    redis: {:?}",
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b)
        );
    }
}

const LISTS: &str = r#"
    lpush l a b c
    rpush l d e
    lrange l 0 -1
    lrange l -100 100
    lrange l 3 1
    lrange l a b
    lrange nokey 0 -1
    llen l
    llen nokey
    lindex l 0
    lindex l -1
    lindex l 99
    lindex l abc
    lindex nokey abc
    lset l 1 B
    lset l 99 x
    lset l abc x
    lset nokey 0 x
    lrange l 0 -1
    linsert l before a A
    linsert l after e E
    linsert l middle a x
    linsert l before zz x
    linsert nokey before a x
    lrange l 0 -1
    rpush dup x y x z x
    lrem dup 2 x
    lrange dup 0 -1
    rpush dup x y x
    lrem dup -1 x
    lrange dup 0 -1
    lrem dup 0 x
    lrem dup abc x
    lrem nokey 0 x
    lrange dup 0 -1
    ltrim dup 0 0
    lrange dup 0 -1
    ltrim dup 5 10
    exists dup
    ltrim dup a b
    lpushx nokey a
    rpushx nokey a
    lpushx l first
    rpushx l last
    lpop l
    rpop l
    lpop l 2
    rpop l 2
    lpop l 0
    lpop l -1
    lpop l abc
    lpop nokey
    lpop nokey 2
    lpop nokey 0
    lpop l 1 2
    lrange l 0 -1
    lpop l 100
    exists l
    rpush p a b c a b c a
    lpos p a
    lpos p a rank 2
    lpos p a rank -1
    lpos p a rank -2
    lpos p a count 0
    lpos p a count 2
    lpos p a rank -1 count 0
    lpos p a maxlen 1
    lpos p a maxlen 3 count 0
    lpos p c rank 2 count 0 maxlen 5
    lpos p zz
    lpos p zz count 0
    lpos p a rank 0
    lpos p a count -1
    lpos p a maxlen -1
    lpos p a rank abc
    lpos p a foo 1
    lpos p a rank
    lpos nokey a
    lpos nokey a count 2
    rpush src 1 2 3
    lmove src dst left right
    lmove src dst right left
    lmove src src left right
    lrange src 0 -1
    lrange dst 0 -1
    lmove src dst up left
    lmove nokey dst left left
    rpoplpush src dst
    rpoplpush src dst
    exists src
    lrange dst 0 -1
    set str x
    lmove dst str left left
    lmove str dst left left
    lpush str x
    lrange str 0 -1
    llen str
    rpoplpush dst str
    lrange dst 0 -1
    lmpop 1 dst left
    lmpop 2 nokey dst right count 10
    lmpop 1 nokey left
    lmpop 0 a left
    lmpop abc a left
    lmpop 1 a middle
    lmpop 1 a left count 0
    lmpop 1 a left count 1 count 2
    lmpop 2 a
    lmpop 1 str left
    type dst
"#;

const BLOCKING_IMMEDIATE: &str = r#"
    rpush l a b c
    blpop l 0
    brpop l 0
    blpop nokey l 1
    blpop nokey 0.01
    brpop nokey 0.01
    blpop nokey -1
    blpop nokey abc
    blpop nokey inf
    blpop nokey 1e300
    rpush l2 x y
    blmove l2 d left right 0
    brpoplpush l2 d 0
    blmove nokey d left right 0.01
    brpoplpush nokey d 0.01
    blmove l2 d up right 0
    blmpop 0.01 1 nokey left
    blmpop 0 2 nokey d right count 5
    blmpop abc 1 d left
    blmpop 0 0 d left
    set s x
    blpop s 0
    blpop nokey s 0
    zadd z 1 a 2 b
    bzpopmin z 0
    bzpopmax z 0
    bzpopmin nokey 0.01
    bzpopmin s 0
    bzpopmin z -1
    multi
    blpop nokey 0
    brpoplpush nokey d 0
    blmove nokey d left right 0
    blmpop 0 1 nokey left
    bzpopmax nokey 0
    exec
"#;

const SETS: &str = r#"
    sadd s a b c
    sadd s a d
    scard s
    scard nokey
    sismember s a
    sismember s zz
    sismember nokey a
    smismember s a zz b
    smismember nokey a b
    ~smembers s
    smembers nokey
    srem s a zz
    srem nokey a
    ~smembers s
    sadd n 3 1 2 10 -5
    smembers n
    sscan n 0
    sscan n 0 match 1*
    sscan n abc
    sscan n 0 count 0
    sscan nokey 0
    srandmember n 0
    srandmember n 100
    srandmember nokey
    srandmember nokey 5
    srandmember n abc
    srandmember n -9223372036854775808
    srandmember n 1 2
    spop n 100
    exists n
    spop nokey
    spop nokey 3
    spop s -1
    spop s abc
    spop s 0
    spop s 1 2
    srem s b c d
    exists s
    set str x
    sadd str a
    smembers str
    spop str
    type s
    sadd t x
    type t
"#;

const ZSETS: &str = r#"
    zadd z 1 a 2.5 b inf c -inf d 0.1 e
    zrange z 0 -1 withscores
    zadd z nx xx 1 a
    zadd z gt lt 1 a
    zadd z nx gt 1 a
    zadd z incr 1 a 2 b
    zadd z 1 a 2
    zadd z abc a
    zadd z nx
    zadd z incr nan a
    zadd z incr -inf c
    zadd z nx incr 1 a
    zadd z xx incr 1 nosuch
    zadd z incr 1 a
    zadd z ch 5 a 6 f
    zadd z gt 1 a
    zadd z gt ch 10 a
    zadd z lt ch 20 a
    zadd z xx 7 newone
    zadd nokey xx 1 a
    zadd nokey xx incr 1 a
    exists nokey
    zrange z 0 -1 withscores
    zscore z a
    zscore z c
    zscore z nosuch
    zscore nokey a
    zmscore z a nosuch b
    zmscore nokey a
    zincrby z 1.5 b
    zincrby z abc b
    zincrby z -inf c
    zincrby z 1 newmember
    zincrby nokey2 3 m
    zcard z
    zcard nokey
    zcount z -inf +inf
    zcount z (1 3
    zcount z 3 1
    zcount z x 1
    zcount nokey 0 1
    zrank z a
    zrank z nosuch
    zrank nokey a
    zrevrank z a
    zrange z 0 -1
    zrange z 1 2 withscores
    zrange z -2 -1 withscores
    zrange z 5 1
    zrange z a b
    zrange z 0 -1 rev withscores
    zrange z 0 -1 limit 0 1
    zrange z (1 +inf byscore withscores
    zrange z +inf (1 byscore rev withscores
    zrange z -inf +inf byscore limit 1 2
    zrange z -inf +inf byscore limit -1 2
    zrange z -inf +inf byscore limit 0 -1
    zrange z x 1 byscore
    zrange z 0 -1 byscore bylex
    zrange z 0 -1 rev rev
    zrange z 0 -1 foo
    zrange nokey 0 -1
    zrangebyscore z -inf +inf withscores
    zrangebyscore z (0.1 2.5
    zrangebyscore z -inf +inf limit 1 1
    zrangebyscore z 0 1 rev
    zrangebyscore z x 1
    zrevrangebyscore z +inf -inf withscores
    zrevrangebyscore z 2.5 (0.1
    zrevrangebyscore z +inf -inf limit 1 2 withscores
    zrevrange z 0 1 withscores
    zrevrange z 0 -1
    zadd lex 0 a 0 b 0 c 0 d 0 e
    zrangebylex lex - +
    zrangebylex lex [b (d
    zrangebylex lex (a [c limit 1 5
    zrangebylex lex a b
    zrangebylex lex - + withscores
    zrevrangebylex lex + -
    zrevrangebylex lex [d (a
    zrange lex [b [d bylex
    zrange lex [d [b bylex rev
    zrange lex - + bylex withscores
    zremrangebyscore z (2 +inf
    zremrangebyscore z x 1
    zremrangebyscore nokey 0 1
    zrange z 0 -1 withscores
    zremrangebyrank z 0 0
    zremrangebyrank z a b
    zremrangebyrank nokey 0 1
    zrange z 0 -1 withscores
    zadd p 1 a 2 b 3 c 4 d
    zpopmin p
    zpopmax p
    zpopmin p 0
    zpopmin p -1
    zpopmin p abc
    zpopmin p 1 2
    zpopmin p 10
    exists p
    zpopmin nokey
    zpopmax nokey 2
    zrem lex a zz
    zrem lex b c d e
    exists lex
    zrem nokey a
    set str x
    zadd str 1 a
    zscore str a
    zrange str 0 -1
    zadd d 1.0 a 1e3 b 0.30000000000000004 c 123456789012345678 e -0.0 f
    zrange d 0 -1 withscores
    type d
"#;

const TX: &str = r#"
    multi
    multi
    set a 1
    incr a
    lpush a x
    get a
    exec
    multi
    watch x
    exec
    multi
    foo
    set a 2
    exec
    get a
    multi
    set a
    exec
    discard
    exec
    multi
    discard
    watch a b
    unwatch
    multi
    unwatch
    exec
    watch a
    set a 5
    multi
    get a
    exec
    watch a
    multi
    ping
    exec
"#;

fn resp3(script: &str) -> String {
    format!("hello 3\n{script}")
}

#[test]
fn replies_match_redis_byte_for_byte() {
    let ours = common::deadbolt(&[]);
    let theirs = common::redis_server(&[]);
    let (mut a, mut b) = (ours.conn(), theirs.conn());
    for (name, script) in [
        ("lists", LISTS),
        ("blocking-immediate", BLOCKING_IMMEDIATE),
        ("sets", SETS),
        ("zsets", ZSETS),
        ("tx", TX),
    ] {
        run_script(name, script, &mut a, &mut b);
        run_script(&format!("{name} (RESP3)"), &resp3(script), &mut a, &mut b);
    }
}

#[test]
fn big_sets_and_zsets_match_redis() {
    let ours = common::deadbolt(&[]);
    let theirs = common::redis_server(&[]);
    let (mut a, mut b) = (ours.conn(), theirs.conn());
    let mut script = String::new();
    for i in 0..600 {
        script.push_str(&format!("sadd big m{i} {i}\n"));
        script.push_str(&format!("zadd bz {} m{i}\n", (i * 7919) % 1000));
        script.push_str(&format!("rpush bl {i}\n"));
    }
    script.push_str(
        "~smembers big\nscard big\nzrange bz 0 -1 withscores\nzrank bz m599\nzrevrank bz m1\n\
         zrange bz 100 110\nzrangebyscore bz 500 600 withscores limit 3 5\nzcount bz 100 (200\n\
         zremrangebyrank bz 10 500\nzrange bz 0 -1 withscores\nlrange bl 100 120\n\
         lpos bl 599\nltrim bl 50 -50\nllen bl\nlindex bl 250\n",
    );
    run_script("big", &script, &mut a, &mut b);
}

const EVENTS: &str = r#"
    rpush l a b c d
    lpush l z
    lpushx l y
    rpushx nokey y
    lpop l
    rpop l 2
    lset l 0 Q
    linsert l before Q P
    lrem l 1 P
    ltrim l 0 0
    lmove l l left right
    lmove l dst right left
    rpoplpush dst l
    rpush m 1 2 3
    lmpop 1 m right count 2
    blpop m 0
    brpoplpush l other 0
    sadd s a b c
    sadd s a
    srem s a
    sadd one x
    spop one
    sadd n 1 2 3
    spop n 5
    zadd z 1 a 2 b 3 c 4 d 5 e
    zadd z xx 1 nosuch
    zadd z incr 5 a
    zincrby z 1 b
    zrem z c
    zpopmin z
    zpopmax z 1
    bzpopmin z 0
    zremrangebyscore z -inf 0
    zremrangebyrank z 0 0
    exists z
    multi
    rpush t 1
    lpop t
    sadd u x
    exec
"#;

/// Keyspace and keyevent notifications (names, order, channels) for the data commands.
#[test]
fn keyspace_events_match_redis() {
    let ours = common::deadbolt(&[]);
    let theirs = common::redis_server(&[]);
    let mut transcripts = Vec::new();
    for s in [&ours, &theirs] {
        let (mut sub, mut c) = (s.conn(), s.conn());
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]),
            b"+OK\r\n"
        );
        sub.cmd(&["PSUBSCRIBE", "__key*__:*"]);
        sub.cmd(&["SUBSCRIBE", "done"]);
        let mut replies = Vec::new();
        for line in EVENTS.lines().map(str::trim).filter(|l| !l.is_empty()) {
            replies.push(c.cmd(&split_line(line)));
        }
        c.cmd(&["PUBLISH", "done", "1"]);
        let mut events = Vec::new();
        loop {
            let m = sub.read_reply();
            if m.ends_with(b"$4\r\ndone\r\n$1\r\n1\r\n") {
                break;
            }
            events.push(String::from_utf8_lossy(&m).into_owned());
        }
        transcripts.push((replies, events));
    }
    let (a, b) = (&transcripts[0], &transcripts[1]);
    assert_eq!(a.0, b.0, "replies");
    for (i, (x, y)) in a.1.iter().zip(&b.1).enumerate() {
        assert_eq!(x, y, "event {i}");
    }
    assert_eq!(a.1.len(), b.1.len());
    assert!(a.1.len() > 60);
}
