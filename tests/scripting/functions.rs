//! Redis 7.0 functions (FUNCTION …, FCALL, FCALL_RO), ported from Redis's
//! tests/unit/functions.tcl: every reply compared byte for byte with a real redis-server.

use crate::common;

use common::{Conn, Server, TempDir};
use std::time::{Duration, Instant};

/// `#!lua name=<lib>` + `redis.register_function('<f>', function(KEYS, ARGV) <body> end)`, as
/// functions.tcl's get_function_code.
fn code(lib: &str, f: &str, body: &str) -> String {
    format!("#!lua name={lib}\nredis.register_function('{f}', function(KEYS, ARGV)\n {body} \nend)")
}

/// The same with the no-writes flag (get_no_writes_function_code).
fn ro_code(lib: &str, f: &str, body: &str) -> String {
    format!("#!lua name={lib}\nredis.register_function{{function_name='{f}', callback=function(KEYS, ARGV)\n {body} \nend, flags={{'no-writes'}}}}")
}

/// Runs `script` on one connection to each of deadbolt and redis-server (fresh, started with
/// `extra`) and asserts every reply is the same bytes; returns deadbolt's replies. A command
/// whose first word starts with `~` (removed before sending) lists several libraries or
/// functions, which Redis orders by a hash seeded at random: its reply is compared as the
/// multiset of its lines.
fn same_on_both(extra: &[&str], script: &[Vec<String>]) -> Vec<String> {
    let mut runs = Vec::new();
    for (_, srv) in common::deadbolt_and_redis(extra) {
        let mut c = srv.conn();
        runs.push(
            script
                .iter()
                .map(|cmd| {
                    let mut cmd = cmd.clone();
                    let unordered = cmd[0].starts_with('~');
                    if unordered {
                        cmd[0].remove(0);
                    }
                    let r = String::from_utf8_lossy(&c.cmd(&cmd)).into_owned();
                    if cmd[0] == "HELLO" {
                        // Its reply holds the connection's id.
                        r[..2].to_string()
                    } else if unordered {
                        let mut lines: Vec<&str> = r.split("\r\n").collect();
                        lines.sort_unstable();
                        lines.join("\n")
                    } else {
                        r
                    }
                })
                .collect::<Vec<_>>(),
        );
    }
    for (i, cmd) in script.iter().enumerate() {
        assert_eq!(
            runs[0][i], runs[1][i],
            "deadbolt vs redis-server for {cmd:?}"
        );
    }
    runs.swap_remove(0)
}

/// A command whose reply has an order Redis leaves to its hash (see `same_on_both`).
fn unordered(mut c: Vec<String>) -> Vec<String> {
    c[0].insert(0, '~');
    c
}

fn cmd(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn load(code: &str) -> Vec<String> {
    cmd(&["FUNCTION", "LOAD", code])
}

fn load_replace(code: &str) -> Vec<String> {
    cmd(&["FUNCTION", "LOAD", "REPLACE", code])
}

#[test]
fn load_call_list_delete_flush() {
    let t = code("test", "test", "return 'hello'");
    let script = vec![
        load(&t),
        cmd(&["FCALL", "test", "0"]),
        cmd(&["fcall", "TEST", "0"]),
        load(&t),
        load_replace(&code("test", "test", "return 'hello1'")),
        cmd(&["FCALL", "test", "0"]),
        load(&code("bad-name", "test", "return 1")),
        load(&code("test1", "test", "return 1")),
        load(&code("test1", "test1", "return 1")),
        cmd(&["FUNCTION", "LOAD", "#!bad_engine name=x\nreturn 1"]),
        cmd(&["FUNCTION", "LOAD", "return 1"]),
        cmd(&["FUNCTION", "LOAD", "#!lua name=x"]),
        cmd(&["FUNCTION", "LOAD", "#! name=test\nreturn 1"]),
        cmd(&["FUNCTION", "LOAD", "#!lua name=test foo=bar\nreturn 1"]),
        cmd(&["FUNCTION", "LOAD", "#!lua\nreturn 1"]),
        cmd(&["FUNCTION", "LOAD", "#!lua name=foo name=bar\nreturn 1"]),
        cmd(&["FUNCTION", "LOAD", "#!lua name=\"a\nreturn 1"]),
        cmd(&[
            "FUNCTION",
            "LOAD",
            "#!LUA NAME=upper\nredis.register_function('up', function() return 1 end)",
        ]),
        cmd(&["FUNCTION", "LOAD", "bad_option", "x"]),
        cmd(&["FUNCTION", "LOAD", "b\u{e9}d\0tail", "x"]),
        cmd(&["FUNCTION", "LIST", "b\u{e9}d"]),
        cmd(&[
            "FUNCTION",
            "LOAD",
            "REPLACE",
            "REPLACE",
            &code("rr", "rr", "return 2"),
        ]),
        cmd(&["FCALL", "rr", "0"]),
        cmd(&["FUNCTION", "LOAD", "#!lua name=ce\nreturn 1 +"]),
        cmd(&["FCALL", "nosuch", "0"]),
        cmd(&["FCALL", "test", "x"]),
        cmd(&["FCALL", "test", "2", "a"]),
        cmd(&["FCALL", "test", "-1"]),
        unordered(cmd(&["FUNCTION", "LIST"])),
        unordered(cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "te*"])),
        cmd(&["FUNCTION", "LIST", "libraryname", "test", "WITHCODE"]),
        cmd(&["FUNCTION", "LIST", "bad_argument"]),
        cmd(&["FUNCTION", "LIST", "libraryname"]),
        cmd(&["FUNCTION", "LIST", "withcode", "withcode"]),
        cmd(&[
            "FUNCTION",
            "LIST",
            "withcode",
            "libraryname",
            "foo",
            "libraryname",
            "foo",
        ]),
        cmd(&["FUNCTION", "DELETE", "test"]),
        cmd(&["FUNCTION", "DELETE", "test"]),
        cmd(&["FCALL", "test", "0"]),
        cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "te*"]),
        cmd(&["FUNCTION", "FLUSH", "bad_arg"]),
        cmd(&["FUNCTION", "FLUSH", "sync", "extra_arg"]),
        cmd(&["FUNCTION", "FLUSH", "ASYNC"]),
        cmd(&["FUNCTION", "LIST"]),
        load(&t),
        cmd(&["FUNCTION", "FLUSH", "SYNC"]),
        load(&t),
        cmd(&["FUNCTION", "FLUSH"]),
        cmd(&["FUNCTION", "STATS"]),
        cmd(&["FUNCTION", "KILL"]),
        cmd(&["FUNCTION", "HELP"]),
        cmd(&["FUNCTION", "NOSUCH"]),
        cmd(&["FUNCTION"]),
        cmd(&["FUNCTION", "DELETE"]),
        cmd(&["FUNCTION", "DELETE", "a", "b"]),
        cmd(&["FUNCTION", "HELP", "x"]),
        cmd(&["FUNCTION", "KILL", "x"]),
        cmd(&["FUNCTION", "STATS", "x"]),
        cmd(&["FUNCTION", "DUMP", "x"]),
        cmd(&["FUNCTION", "LOAD"]),
        cmd(&["FUNCTION", "LOAD", "REPLACE"]),
        cmd(&["FUNCTION", "LOAD", "replace", "replace"]),
        cmd(&["FUNCTION", "RESTORE"]),
        cmd(&["FCALL", "test"]),
        cmd(&["FCALL_RO"]),
        cmd(&["FCALL", "test", "99999999999999999999"]),
        cmd(&["FCALL", "test", "1.5", "a"]),
        cmd(&["FCALL", "test", " 1", "a"]),
        cmd(&["HELLO", "3"]),
        load(&ro_code("ro", "ro", "return redis.call('get', KEYS[1])")),
        cmd(&["FUNCTION", "LIST", "WITHCODE"]),
        cmd(&["FUNCTION", "STATS"]),
    ];
    same_on_both(&[], &script);
}

#[test]
fn registration_rules() {
    let cases = [
        "#!lua name=lib2\nredis.register_function('f1', function(keys, args) return 1 end)\nredis.register_function('f1', function(keys, args) return 1 end)",
        "#!lua name=lib2\nredis.register_function()",
        "#!lua name=lib2\nredis.register_function('f1')",
        "#!lua name=lib2\nredis.register_function('f1', function() return 1 end, {}, 'description', 'extra arg')",
        "#!lua name=lib2\nredis.register_function(nil, function() return 1 end)",
        "#!lua name=lib2\nredis.register_function('f1', 'x')",
        "#!lua name=lib2\nredis.register_function('test\\0test', function() return 1 end)",
        "#!lua name=lib2\nredis.register_function('', function() return 1 end)",
        "#!lua name=lib2\nredis.register_function('a-b', function() return 1 end)",
        "#!lua name=lib2\nreturn math.random()",
        "#!lua name=lib2\nreturn redis.call('ping')",
        "#!lua name=lib2\nreturn redis.setresp(3)",
        "#!lua name=lib2\nreturn redis.set_repl(redis.REPL_NONE)",
        "#!lua name=lib2\nerror('boom')",
        "#!lua name=lib2\na = 1",
        "#!lua name=lib2\nlocal x = nil + 1",
        "#!lua name=lib2\nreturn 1",
        "#!lua name=lib2\nredis.register_function{function_name='f1', callback=function() return 1 end, flags={'no-writes', 'bad-flag'}}",
        "#!lua name=lib2\nredis.register_function{function_name='f1', callback=function() return 1 end, flags='no-writes'}",
        "#!lua name=lib2\nredis.register_function{function_name='f1', callback='x'}",
        "#!lua name=lib2\nredis.register_function{function_name=function() end, callback=function() end}",
        "#!lua name=lib2\nredis.register_function{function_name='f1', description={}, callback=function() end}",
        "#!lua name=lib2\nredis.register_function{function_name='f1', bad=1, callback=function() end}",
        "#!lua name=lib2\nredis.register_function{callback=function() end}",
        "#!lua name=lib2\nredis.register_function{function_name='f1'}",
        "#!lua name=lib2\nredis.register_function{[1]='f1'}",
        "#!lua name=lib2\nredis.log(redis.LOG_NOTICE, 'loading', redis.REDIS_VERSION)\nredis.register_function{function_name='f1', callback=function() return redis.REDIS_VERSION_NUM end, flags={'NO-WRITES', 'allow-stale', 'allow-oom', 'no-cluster', 'allow-cross-slot-keys'}, description='all flags'}",
    ];
    let mut script: Vec<Vec<String>> = cases.iter().map(|code| load_replace(code)).collect();
    script.push(unordered(cmd(&["FUNCTION", "LIST"])));
    script.push(cmd(&["FCALL_RO", "f1", "0"]));
    same_on_both(&[], &script);
}

#[test]
fn runtime_rules() {
    let malicious = "#!lua name=lib1
            local lib = redis
            lib.register_function('f1', function ()
                lib.redis = redis
                lib.math = math
                return {ok='OK'}
            end)

            lib.register_function('f2', function ()
                lib.register_function('f1', function ()
                    lib.redis = redis
                    lib.math = math
                    return {ok='OK'}
                end)
            end)";
    let script = vec![
        load(malicious),
        cmd(&["FCALL", "f1", "0"]),
        cmd(&["FCALL", "f2", "0"]),
        load("#!lua name=lib2\nredis.redis.call('ping')"),
        load("#!lua name=lib2\nredis.math.random()"),
        cmd(&["FUNCTION", "DELETE", "lib1"]),
        load("#!lua name=lib\nredis.register_function('f1', function(keys, args)\n  redis.register_function('f2', function(key, args) return 2 end)\n  return 1\nend)"),
        cmd(&["FCALL", "f1", "0"]),
        cmd(&["FUNCTION", "FLUSH"]),
        // Keys and arguments are the callback's parameters, not globals.
        load(&code("kv", "kv", "return {KEYS[1], ARGV[1], #KEYS, #ARGV}")),
        cmd(&["FCALL", "kv", "2", "k1", "k2", "a1"]),
        load_replace("#!lua name=kv\nredis.register_function('kv', function() return KEYS end)"),
        cmd(&["FCALL", "kv", "0"]),
        load_replace(&code("kv", "kv", "return redis.call('set', KEYS[1], ARGV[1])")),
        cmd(&["FCALL", "kv", "1", "x", "1"]),
        cmd(&["FCALL_RO", "kv", "1", "x", "2"]),
        cmd(&["GET", "x"]),
        load(&ro_code("rol", "rof", "return redis.call('set', KEYS[1], ARGV[1])")),
        cmd(&["FCALL", "rof", "1", "x", "3"]),
        cmd(&["FCALL_RO", "rof", "1", "x", "3"]),
        load_replace(&ro_code("rol", "rof", "return redis.call('get', KEYS[1])")),
        cmd(&["FCALL_RO", "rof", "1", "x"]),
        load_replace(&code("kv", "kv", "return error('x')")),
        cmd(&["FCALL", "kv", "0"]),
        load_replace(&code("kv", "kv", "return redis.call('nosuch')")),
        cmd(&["FCALL", "kv", "0"]),
        load_replace(&code("kv", "kv", "return redis.pcall('nosuch')")),
        cmd(&["FCALL", "kv", "0"]),
        load_replace(&code("kv", "kv", "return redis.error_reply('MY err')")),
        cmd(&["FCALL", "kv", "0"]),
        load_replace(&code("kv", "kv", "return {1, 2.5, 'x', {ok='fine'}}")),
        cmd(&["FCALL", "kv", "0"]),
        load_replace(&code("kv", "kv", "redis.setresp(3) return redis.call('hgetall', KEYS[1])")),
        cmd(&["HSET", "h", "f", "v"]),
        cmd(&["FCALL", "kv", "1", "h"]),
        load_replace(&code("kv", "kv", "return redis.call('fcall', 'kv', 0)")),
        cmd(&["FCALL", "kv", "0"]),
        load_replace(&code("kv", "kv", "return redis.call('function', 'list')")),
        cmd(&["FCALL", "kv", "0"]),
        load_replace(&code("kv", "kv", "return redis.call('eval', 'return 1', 0)")),
        cmd(&["FCALL", "kv", "0"]),
        // Functions and EVAL scripts live apart: SCRIPT FLUSH leaves libraries alone.
        cmd(&["SCRIPT", "FLUSH"]),
        cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "rol"]),
        cmd(&["FCALL_RO", "rof", "1", "x"]),
        load_replace(&code("kv", "kv", "return redis.call('function', 'help')")),
        cmd(&["FCALL", "kv", "0"]),
        load_replace(&code("kv", "kv", "return redis.call('function', 'stats')")),
        cmd(&["FCALL", "kv", "0"]),
        // A library's globals are read-only, and its functions share nothing through them.
        load("#!lua name=glob\nlocal n = 0\nredis.register_function('count', function() n = n + 1 return n end)"),
        cmd(&["FCALL", "count", "0"]),
        cmd(&["FCALL", "count", "0"]),
        load_replace("#!lua name=glob\nredis.register_function('count', function() x = 1 return 1 end)"),
        cmd(&["FCALL", "count", "0"]),
    ];
    same_on_both(&[], &script);
}

#[test]
fn fcall_in_multi_and_collisions() {
    let script = vec![
        load(&code("lib1", "f1", "return 1")),
        load(&code("lib2", "f1", "return 2")),
        load("#!lua name=lib2\nredis.register_function('f2', function() return 2 end)\nredis.register_function('F1', function() return 3 end)"),
        cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "lib2"]),
        load_replace("#!lua name=lib1\nredis.register_function('f1', function() return 1 end)\nredis.register_function('f2', function() return 1 end)"),
        cmd(&["FCALL", "f1", "0"]),
        cmd(&["MULTI"]),
        load(&code("lib3", "f3", "return 3")),
        cmd(&["FCALL", "f3", "0"]),
        cmd(&["FUNCTION", "DELETE", "lib2"]),
        cmd(&["FCALL", "f2", "0"]),
        cmd(&["EXEC"]),
        // FLUSHALL empties the databases, not the libraries.
        cmd(&["FLUSHALL"]),
        cmd(&["FCALL", "f3", "0"]),
    ];
    same_on_both(&[], &script);
}

/// Over maxmemory: FUNCTION LOAD / RESTORE and functions that may write are refused; a
/// no-writes or allow-oom function runs.
#[test]
fn maxmemory_rules() {
    let f1 = "#!lua name=test\nredis.register_function('f1', function() return 1 end)";
    let script = vec![
        load(f1),
        load(&code("w", "w", "return redis.call('set', 'x', '1')")),
        load("#!lua name=oom\nredis.register_function{function_name='oomf', callback=function() return redis.call('set', 'x', '2') end, flags={'allow-oom'}}"),
        load(&ro_code("ro", "ro", "return 'hello'")),
        cmd(&["CONFIG", "SET", "maxmemory", "1"]),
        load_replace(f1),
        cmd(&["FCALL", "w", "1", "x"]),
        cmd(&["FCALL", "oomf", "1", "x"]),
        cmd(&["GET", "x"]),
        cmd(&["FCALL", "ro", "1", "k"]),
        cmd(&["FCALL_RO", "ro", "1", "k"]),
        cmd(&["FCALL", "nosuch", "0"]),
        cmd(&["CONFIG", "SET", "maxmemory", "0"]),
    ];
    same_on_both(&[], &script);
}

#[test]
fn load_timeout() {
    let script = vec![
        load("#!lua name=test\nlocal a = 1\nwhile 1 do a = a + 1 end"),
        cmd(&["PING"]),
    ];
    same_on_both(&[], &script);
}

/// FUNCTION DUMP gives Redis's bytes, and a payload moves both ways.
#[test]
fn dump_and_restore_between_redis_and_deadbolt() {
    let servers = common::deadbolt_and_redis(&[]);
    let long = code(
        "big",
        "big",
        "return 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'",
    );
    let mut dumps = Vec::new();
    for (_, srv) in &servers {
        let mut c = srv.conn();
        c.cmd(&["FUNCTION", "LOAD", &long]);
        dumps.push(bulk(&c.cmd(&["FUNCTION", "DUMP"])));
    }
    assert_eq!(dumps[0], dumps[1], "one library dumps to the same bytes");
    // Two libraries (Redis orders them by its hash): each side restores the other's dump.
    let mut both = Vec::new();
    for (_, srv) in &servers {
        let mut c = srv.conn();
        c.cmd(&["FUNCTION", "LOAD", &code("small", "small", "return 1")]);
        c.cmd(&["FUNCTION", "LOAD", &ro_code("x1", "x1", "return 2")]);
        both.push(bulk(&c.cmd(&["FUNCTION", "DUMP"])));
    }
    for (i, (_, srv)) in servers.iter().enumerate() {
        let theirs = &both[1 - i];
        let mut c = srv.conn();
        let mut rows = vec![
            c.cmd(&[&b"FUNCTION"[..], b"RESTORE", theirs]),
            c.cmd(&[&b"FUNCTION"[..], b"RESTORE", theirs, b"REPLACE"]),
            c.cmd(&["FUNCTION", "FLUSH"]),
            c.cmd(&[&b"FUNCTION"[..], b"RESTORE", theirs]),
            c.cmd(&["FCALL", "big", "0"]),
            c.cmd(&["FCALL", "small", "0"]),
            c.cmd(&["FCALL_RO", "x1", "0"]),
            c.cmd(&["FUNCTION", "LOAD", &code("other", "big", "return 0")]),
            c.cmd(&[&b"FUNCTION"[..], b"RESTORE", &dumps[0], b"FLUSH"]),
            c.cmd(&["FCALL", "small", "0"]),
            c.cmd(&["FCALL", "big", "0"]),
        ];
        rows.push(c.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "big"]));
        let rows: Vec<String> = rows
            .iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect();
        // The first colliding library in Redis's (hash) order.
        assert!(
            rows[0].starts_with("-ERR Library ") && rows[0].ends_with(" already exists\r\n"),
            "{rows:?}"
        );
        assert_eq!(
            rows[1..],
            [
                "+OK\r\n",
                "+OK\r\n",
                "+OK\r\n",
                "$83\r\naaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
                ":1\r\n",
                ":2\r\n",
                "-ERR Function big already exists\r\n",
                "+OK\r\n",
                "-ERR Function not found\r\n",
                "$83\r\naaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
                "*1\r\n*6\r\n$12\r\nlibrary_name\r\n$3\r\nbig\r\n$6\r\nengine\r\n$3\r\nLUA\r\n$9\r\nfunctions\r\n*1\r\n*6\r\n$4\r\nname\r\n$3\r\nbig\r\n$11\r\ndescription\r\n$-1\r\n$5\r\nflags\r\n*0\r\n",
            ],
            "server {i}"
        );
    }
}

fn bulk(reply: &[u8]) -> Vec<u8> {
    assert_eq!(reply[0], b'$', "{}", String::from_utf8_lossy(reply));
    let nl = reply.iter().position(|&b| b == b'\n').unwrap();
    let n: usize = std::str::from_utf8(&reply[1..nl - 1])
        .unwrap()
        .parse()
        .unwrap();
    reply[nl + 1..nl + 1 + n].to_vec()
}

/// A payload framed as Redis frames it: body, RDB version 10, CRC64.
fn framed(body: &[u8]) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&10u16.to_le_bytes());
    let crc = deadbolt::script::payload::crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

/// Corrupt payloads get Redis's errors (and never hurt the server).
#[test]
fn corrupt_payloads() {
    let q = b"#!lua name=q\nredis.register_function('q', function() return 1 end)";
    let mut body = vec![0xf5, q.len() as u8];
    body.extend_from_slice(q);
    let good = framed(&body);
    // A string shorter than its code: compiled (and refused) before the rest is read.
    let short = framed(&[&b"\xf5\x1e"[..], q, b"\xf5"].concat());
    let mut payloads: Vec<Vec<u8>> = vec![
        b"bad_payload".to_vec(),
        Vec::new(),
        framed(b""),
        framed(b"\x00"),
        framed(b"\xf5"),
        framed(b"\xf5\x40"),
        framed(b"\xf5\xc3\x02\x80\x40\x00\x00\x00\x00\x00"),
        framed(b"\xf5\xc3\x05\x10\x00abcde"),
        framed(b"\xf5\xc0\x05"),
        framed(b"\xf5\x05hello"),
        framed(b"\xf5\x0e#!lua name=q\nx"),
        framed(b"\xf6\x01q\x03lua\x00\x4fredis.register_function('q6', function() return 6 end)"),
        short,
        framed(&[&body[..], b"\x07"].concat()),
        framed(&[&body[..], &body[..]].concat()),
        good.clone(),
    ];
    let mut newer = good[..good.len() - 10].to_vec();
    newer.extend_from_slice(&11u16.to_le_bytes());
    let crc = deadbolt::script::payload::crc64(&newer);
    newer.extend_from_slice(&crc.to_le_bytes());
    payloads.push(newer);
    let mut flipped = good.clone();
    flipped[5] ^= 0x20;
    payloads.push(flipped);
    let mut script: Vec<Vec<Vec<u8>>> = payloads
        .iter()
        .map(|p| vec![b"FUNCTION".to_vec(), b"RESTORE".to_vec(), p.clone()])
        .collect();
    script.push(vec![
        b"FUNCTION".to_vec(),
        b"RESTORE".to_vec(),
        good.clone(),
        b"BAD".to_vec(),
    ]);
    script.push(vec![
        b"FUNCTION".to_vec(),
        b"RESTORE".to_vec(),
        good,
        b"FLUSH".to_vec(),
        b"x".to_vec(),
    ]);
    script.push(vec![b"FCALL".to_vec(), b"q".to_vec(), b"0".to_vec()]);
    script.push(vec![b"FCALL".to_vec(), b"q6".to_vec(), b"0".to_vec()]);
    let [ours, theirs] = common::transcripts_on_both(&script);
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(b),
            "payload {i}"
        );
    }
}

/// Starts FCALL of `f` on a connection and returns it once the server logs it as slow.
fn start_busy(srv: &Server, f: &str) -> Conn {
    let mut a = srv.conn();
    a.send(&["FCALL", f, "0"]);
    srv.wait_log("Slow script detected", Duration::from_secs(10));
    a
}

const BUSY_FUNCTION: &str =
    "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";
const BUSY_EVAL: &str =
    "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";

/// FUNCTION KILL stops a busy function; SCRIPT KILL refuses it, and FUNCTION KILL / FUNCTION
/// STATS refuse a busy EVAL, with Redis's texts.
#[test]
fn function_kill_and_script_kill() {
    for (name, srv) in common::deadbolt_and_redis(&["--busy-reply-threshold", "100"]) {
        let mut c0 = srv.conn();
        assert_eq!(
            c0.cmd_str(&[
                "FUNCTION",
                "LOAD",
                &code("test", "test", "local a = 1 while true do a = a + 1 end")
            ]),
            "$4\r\ntest\r\n",
            "{name}"
        );
        let started = Instant::now();
        let mut b3 = srv.conn();
        assert!(b3.cmd_str(&["HELLO", "3"]).starts_with('%'));
        let mut a = start_busy(&srv, "test");
        let mut b = srv.conn();
        assert_eq!(b.cmd_str(&["PING"]), BUSY_FUNCTION, "{name}");
        assert_eq!(b.cmd_str(&["SCRIPT", "KILL"]), BUSY_FUNCTION, "{name}");
        let stats = b.cmd_str(&["FUNCTION", "STATS"]);
        let prefix = "*4\r\n$14\r\nrunning_script\r\n*6\r\n$4\r\nname\r\n$4\r\ntest\r\n$7\r\ncommand\r\n*3\r\n$5\r\nFCALL\r\n$4\r\ntest\r\n$1\r\n0\r\n$11\r\nduration_ms\r\n:";
        assert!(stats.starts_with(prefix), "{name}: {stats:?}");
        assert!(
            stats.ends_with("\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:1\r\n"),
            "{name}: {stats:?}"
        );
        let stats3 = b3.cmd_str(&["FUNCTION", "STATS"]);
        assert!(
            stats3.starts_with("%2\r\n$14\r\nrunning_script\r\n%3\r\n"),
            "{name}: {stats3:?}"
        );
        assert_eq!(
            b.cmd_str(&["FUNCTION", "DELETE", "test"]),
            BUSY_FUNCTION,
            "{name}"
        );
        let mut m = srv.conn();
        assert_eq!(m.cmd_str(&["MULTI"]), "+OK\r\n", "{name}");
        assert_eq!(m.cmd_str(&["PING"]), BUSY_FUNCTION, "{name}");
        assert_eq!(
            m.cmd_str(&["EXEC"]),
            "-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n",
            "{name}"
        );
        assert_eq!(b.cmd_str(&["FUNCTION", "KILL"]), "+OK\r\n", "{name}");
        assert_eq!(
            a.read_reply(),
            b"-ERR Script killed by user with SCRIPT KILL... script: test, on @user_function:3.\r\n",
            "{name}"
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{name}");
        assert_eq!(b.cmd_str(&["PING"]), "+PONG\r\n", "{name}");
        assert_eq!(
            b.cmd_str(&["FUNCTION", "KILL"]),
            "-NOTBUSY No scripts in execution right now.\r\n",
            "{name}"
        );
        // A busy EVAL: FUNCTION KILL and FUNCTION STATS are refused, SCRIPT KILL works.
        let mut e = srv.conn();
        e.send(&["EVAL", "local a = 1 while true do a = a + 1 end", "0"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while b.cmd_str(&["PING"]) != BUSY_EVAL {
            assert!(Instant::now() < deadline, "{name}: EVAL never got busy");
        }
        assert_eq!(b.cmd_str(&["FUNCTION", "KILL"]), BUSY_EVAL, "{name}");
        assert_eq!(b.cmd_str(&["FUNCTION", "STATS"]), BUSY_EVAL, "{name}");
        assert_eq!(b.cmd_str(&["SCRIPT", "KILL"]), "+OK\r\n", "{name}");
        assert!(
            e.read_reply().starts_with(b"-ERR Script killed by user"),
            "{name}"
        );
        // A function that wrote cannot be killed.
        c0.cmd(&[
            "FUNCTION",
            "LOAD",
            &code("w", "w", "redis.call('set', 'k', 1) while true do end"),
        ]);
        let mut w = start_busy_again(&srv, &mut b, "w");
        assert!(
            b.cmd_str(&["FUNCTION", "KILL"]).starts_with("-UNKILLABLE"),
            "{name}"
        );
        b.send(&["SHUTDOWN", "NOSAVE"]);
        assert_eq!(b.read_to_close(), b"", "{name}");
        let _ = w.read_to_close();
    }
}

/// Sends FCALL `f` and waits (on `probe`) until other clients get -BUSY.
fn start_busy_again(srv: &Server, probe: &mut Conn, f: &str) -> Conn {
    let mut a = srv.conn();
    a.send(&["FCALL", f, "0"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while probe.cmd_str(&["PING"]) != BUSY_FUNCTION {
        assert!(Instant::now() < deadline, "{f} never got busy");
    }
    a
}

/// Libraries survive a restart, through the log and through a rewrite of it.
#[test]
fn libraries_survive_restart_and_rewrite() {
    let dir = TempDir::new("aof-functions");
    let mut s = common::deadbolt_with_aof(&dir.0, "always", &[]);
    let mut c = s.conn();
    for cmd in [
        load(&code("a", "fa", "return 'a'")),
        load(&code("b", "fb", "return 'b'")),
        load(&code("gone", "fg", "return 'g'")),
        cmd(&["FUNCTION", "DELETE", "gone"]),
        load_replace(&code("a", "fa", "return 'a2'")),
        cmd(&["MULTI"]),
        load(&ro_code("r", "fr", "return redis.call('get', KEYS[1])")),
        cmd(&["SET", "k", "v"]),
        cmd(&["EXEC"]),
    ] {
        let r = c.cmd_str(&cmd);
        assert!(!r.starts_with('-'), "{cmd:?}: {r}");
    }
    let check = |c: &mut Conn| {
        assert_eq!(c.cmd_str(&["FCALL", "fa", "0"]), "$2\r\na2\r\n");
        assert_eq!(c.cmd_str(&["FCALL", "fb", "0"]), "$1\r\nb\r\n");
        assert_eq!(
            c.cmd_str(&["FCALL", "fg", "0"]),
            "-ERR Function not found\r\n"
        );
        assert_eq!(c.cmd_str(&["FCALL_RO", "fr", "1", "k"]), "$1\r\nv\r\n");
        assert_eq!(
            c.cmd_str(&["FUNCTION", "STATS"]),
            "*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:3\r\n$15\r\nfunctions_count\r\n:3\r\n"
        );
    };
    check(&mut c);
    // RESTORE is logged too (its payload is binary): dump, flush, restore.
    let dump = bulk(&c.cmd(&["FUNCTION", "DUMP"]));
    assert_eq!(c.cmd_str(&["FUNCTION", "FLUSH"]), "+OK\r\n");
    assert_eq!(c.cmd(&[&b"FUNCTION"[..], b"RESTORE", &dump]), b"+OK\r\n");
    check(&mut c);
    s.kill9();
    let mut s = common::deadbolt_with_aof(&dir.0, "always", &[]);
    let mut c = s.conn();
    check(&mut c);
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        b"+Background append only file rewriting started\r\n"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while c
        .cmd_str(&["INFO", "persistence"])
        .contains("aof_rewrite_in_progress:1")
    {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    s.kill9();
    let mut s = common::deadbolt_with_aof(&dir.0, "always", &[]);
    let mut c = s.conn();
    check(&mut c);
    assert_eq!(c.cmd_str(&["FUNCTION", "FLUSH"]), "+OK\r\n");
    s.kill9();
    let s = common::deadbolt_with_aof(&dir.0, "always", &[]);
    assert_eq!(s.conn().cmd_str(&["FUNCTION", "LIST"]), "*0\r\n");
}

/// Lock users move their scripts to functions in Redis 7: a Redlock-style acquire/release
/// library, compared with redis-server.
#[test]
fn lock_library() {
    let locks = "#!lua name=locks
local function acquire(keys, args)
  if redis.call('set', keys[1], args[1], 'NX', 'PX', args[2]) then return 1 end
  return 0
end
local function release(keys, args)
  if redis.call('get', keys[1]) == args[1] then return redis.call('del', keys[1]) end
  return 0
end
local function owner(keys, args)
  return redis.call('get', keys[1])
end
redis.register_function('acquire', acquire)
redis.register_function('release', release)
redis.register_function{function_name='owner', callback=owner, flags={'no-writes'}, description='who holds the lock'}";
    let script = vec![
        load(locks),
        cmd(&["FCALL", "acquire", "1", "lock:a", "token1", "30000"]),
        cmd(&["FCALL", "acquire", "1", "lock:a", "token2", "30000"]),
        cmd(&["FCALL_RO", "owner", "1", "lock:a"]),
        cmd(&["FCALL_RO", "acquire", "1", "lock:a", "token2", "30000"]),
        cmd(&["FCALL", "release", "1", "lock:a", "token2"]),
        cmd(&["FCALL", "release", "1", "lock:a", "token1"]),
        cmd(&["FCALL", "acquire", "1", "lock:a", "token2", "30000"]),
        cmd(&["FCALL_RO", "owner", "1", "lock:a"]),
        cmd(&["FCALL", "acquire", "1", "lock:b", "t", "1"]),
        cmd(&["FCALL", "release", "1", "lock:a", "token2"]),
        cmd(&["EXISTS", "lock:a"]),
        unordered(cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "locks"])),
    ];
    same_on_both(&[], &script);
}

/// MONITOR shows the FCALL line first, then the function's commands tagged `lua`.
#[test]
fn monitor_shows_fcall_first() {
    let mut seen = Vec::new();
    for (_, srv) in common::deadbolt_and_redis(&[]) {
        let mut c = srv.conn();
        c.cmd(&[
            "FUNCTION",
            "LOAD",
            &code(
                "m",
                "m",
                "redis.call('set', KEYS[1], ARGV[1]) return redis.call('get', KEYS[1])",
            ),
        ]);
        let mut mon = srv.conn();
        assert_eq!(mon.cmd_str(&["MONITOR"]), "+OK\r\n");
        c.cmd(&["FCALL", "m", "1", "k", "v"]);
        c.cmd(&["FCALL", "nosuch", "0"]);
        c.cmd(&["FCALL_RO", "m", "1", "k", "v"]);
        c.cmd(&["PING"]);
        let mut lines = Vec::new();
        loop {
            let r = String::from_utf8(mon.read_reply()).unwrap();
            // "+<time> [0 <addr>] "cmd" ..." -> the source kind and the command.
            let after = r.split_once(" [0 ").unwrap().1;
            let (src, cmd) = after.split_once("] ").unwrap();
            let src = if src == "lua" { "lua" } else { "client" };
            lines.push(format!("{src} {}", cmd.trim_end()));
            if cmd.starts_with("\"PING\"") {
                break;
            }
        }
        seen.push(lines);
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[0][0], "client \"FCALL\" \"m\" \"1\" \"k\" \"v\"");
}

/// INFO memory has Redis 7.0's function fields.
#[test]
fn info_memory_reports_functions() {
    let db = common::deadbolt(&[]);
    let mut c = db.conn();
    c.cmd(&["FUNCTION", "LOAD", &code("i", "i1", "return 1")]);
    let info = c.cmd_str(&["INFO", "memory"]);
    for field in [
        "used_memory_vm_functions:",
        "used_memory_functions:",
        "number_of_functions:1\r\n",
        "number_of_libraries:1\r\n",
    ] {
        assert!(info.contains(field), "{field} missing: {info}");
    }
    let rs = common::redis_server(&[]);
    let theirs = rs.conn().cmd_str(&["INFO", "memory"]);
    let names = |s: &str| {
        s.lines()
            .filter(|l| l.contains("function") || l.contains("librar"))
            .map(|l| l.split(':').next().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&info), names(&theirs));
}

/// INFO commandstats counts FCALL and the commands its function runs as Redis does (calls,
/// rejected and failed calls), and errorstats the errors.
#[test]
fn commandstats_count_functions_and_their_calls() {
    let mut seen = Vec::new();
    for (_, srv) in common::deadbolt_and_redis(&[]) {
        let mut c = srv.conn();
        c.cmd(&["CONFIG", "RESETSTAT"]);
        for cmd in [
            load(&code(
                "s",
                "s",
                "return redis.call('set', KEYS[1], ARGV[1])",
            )),
            load(&code("s", "s", "return 1")),
            load(&code("e", "e", "return redis.call('incr', KEYS[1])")),
            load(&code("p", "p", "return redis.pcall('get', 'a', 'b')")),
            cmd(&["FCALL", "s", "1", "k", "v"]),
            cmd(&["FCALL", "e", "1", "k"]),
            cmd(&["FCALL", "p", "0"]),
            cmd(&["FCALL_RO", "s", "1", "k", "v"]),
            cmd(&["FCALL", "nosuch", "0"]),
            cmd(&["FCALL", "s", "x"]),
            cmd(&["FUNCTION", "DELETE", "nosuch"]),
            // The same rules hold for EVAL (one engine's rules) and for EXEC.
            cmd(&["EVAL", "return redis.call('incr', KEYS[1])", "1", "k"]),
            cmd(&["EVAL", "return redis.pcall('get', 'a', 'b')", "0"]),
            cmd(&["EVAL", "return redis.call('nosuch')", "0"]),
            cmd(&["EVAL", "return redis.error_reply('MINE x')", "0"]),
            cmd(&["EVAL_RO", "#!lua\nreturn redis.call('set', 'a', 'b')", "0"]),
            cmd(&["EVAL", "return 1", "x"]),
            cmd(&["MULTI"]),
            cmd(&["INCR", "k"]),
            cmd(&["SET", "k2", "1"]),
            cmd(&["EXEC"]),
        ] {
            c.cmd(&cmd);
        }
        let stats = c.cmd_str(&["INFO", "commandstats"]);
        let errors = c.cmd_str(&["INFO", "errorstats"]);
        let mut lines: Vec<String> = stats
            .lines()
            .filter(|l| l.starts_with("cmdstat_"))
            .filter(|l| !l.contains("config") && !l.contains("info"))
            .map(|l| {
                // Times differ; the counts must not.
                let (name, rest) = l.split_once(':').unwrap();
                let counts: Vec<&str> =
                    rest.split(',').filter(|f| !f.starts_with("usec")).collect();
                format!("{name}:{}", counts.join(","))
            })
            .chain(
                errors
                    .lines()
                    .filter(|l| l.starts_with("errorstat_"))
                    .map(str::to_string),
            )
            .collect();
        lines.sort();
        seen.push(lines);
    }
    assert_eq!(seen[0], seen[1]);
    assert!(
        seen[0].iter().any(|l| l.starts_with("cmdstat_fcall:")),
        "{:?}",
        seen[0]
    );
}

/// A library's load code cannot take the server's memory: the Lua heap limit
/// (`lua-memory-limit`) stops it, the error names it, and the engine keeps working.
#[test]
fn load_that_allocates_without_bound_is_stopped() {
    let db = common::deadbolt(&["--lua-memory-limit", "16mb"]);
    let mut c = db.conn();
    let r = c.cmd_str(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=big\nlocal s = 'x'\nwhile true do s = s .. s end",
    ]);
    assert!(
        r.starts_with("-ERR Error registering functions: ERR not enough memory"),
        "{r}"
    );
    assert_eq!(
        c.cmd_str(&["FUNCTION", "LOAD", &code("ok", "ok", "return 'fine'")]),
        "$2\r\nok\r\n"
    );
    assert_eq!(c.cmd_str(&["FCALL", "ok", "0"]), "$4\r\nfine\r\n");
}

/// Payloads damaged at random (bytes flipped, cut short, the checksum made right again) get
/// the same reply from deadbolt as from redis-server, and neither server is hurt.
#[test]
fn damaged_payloads_answer_like_redis() {
    // Two libraries, one compressed by LZF.
    let mut body = Vec::new();
    for code in [
        code(
            "one",
            "one",
            "return 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'",
        ),
        ro_code("two", "two", "return 2"),
    ] {
        let p = common::deadbolt(&[]);
        let mut c = p.conn();
        c.cmd(&["FUNCTION", "LOAD", &code]);
        let d = bulk(&c.cmd(&["FUNCTION", "DUMP"]));
        body.extend_from_slice(&d[..d.len() - 10]);
    }
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let mut script: Vec<Vec<Vec<u8>>> = Vec::new();
    for i in 0..1000 {
        let mut b = body.clone();
        if i % 3 == 0 {
            b.truncate(next(b.len()));
        } else {
            for _ in 0..1 + next(3) {
                let at = next(b.len());
                b[at] ^= 1 << next(8);
            }
        }
        script.push(vec![b"FUNCTION".to_vec(), b"RESTORE".to_vec(), framed(&b)]);
        script.push(vec![b"FUNCTION".to_vec(), b"FLUSH".to_vec()]);
    }
    script.push(vec![b"PING".to_vec()]);
    let [ours, theirs] = common::transcripts_on_both(&script);
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(b),
            "variant {}",
            i / 2
        );
    }
}

/// A payload is client input: its code runs under the load timeout (Redis restores without
/// one, so such a payload would hang it).
#[test]
fn restore_of_a_looping_library_times_out() {
    let code = b"#!lua name=loop\nwhile true do end";
    let mut body = vec![0xf5, code.len() as u8];
    body.extend_from_slice(code);
    let db = common::deadbolt(&[]);
    let mut c = db.conn();
    let started = Instant::now();
    assert_eq!(
        c.cmd_str(&[&b"FUNCTION"[..], b"RESTORE", &framed(&body)]),
        "-ERR Error registering functions: ERR FUNCTION LOAD timeout\r\n"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(c.cmd_str(&["FUNCTION", "LIST"]), "*0\r\n");
}

/// A library loaded from the RDB file at start-up (which creates the functions engine before
/// the event loop runs) still lets the loop answer others while its function is busy: BUSY,
/// then FUNCTION KILL stops it.
#[test]
fn a_busy_function_loaded_from_the_rdb_file_answers_busy_and_is_killed() {
    let dir = common::TempDir::new("busy-fn-rdb");
    let d = dir.0.to_str().unwrap();
    {
        let srv = common::deadbolt(&["--dir", d]);
        let mut c = srv.conn();
        assert_eq!(
            c.cmd_str(&[
                "FUNCTION",
                "LOAD",
                &code("spin", "spin", "local a = 1 while true do a = a + 1 end")
            ]),
            "$4\r\nspin\r\n"
        );
        assert_eq!(c.cmd_str(&["SAVE"]), "+OK\r\n");
    }
    let srv = common::deadbolt(&["--dir", d, "--busy-reply-threshold", "100"]);
    let mut a = start_busy(&srv, "spin");
    let mut b = srv.conn();
    assert_eq!(b.cmd_str(&["PING"]), BUSY_FUNCTION);
    assert_eq!(b.cmd_str(&["FUNCTION", "KILL"]), "+OK\r\n");
    assert!(a.read_reply().starts_with(b"-ERR Script killed by user"));
    assert_eq!(b.cmd_str(&["PING"]), "+PONG\r\n");
}
