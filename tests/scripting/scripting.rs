//! Lua scripting conformance: every row of the conversion and error tables of
//! lua-semantics.md, as exact bytes, asserted against deadbolt AND a real redis-server.

use crate::common;

use common::Conn;
use deadbolt::script::sha1hex;

/// One row: the command (a script is `EVAL <script> 0` unless given whole) and the expected
/// reply, where `{sha}` stands for the SHA1 of the script.
struct Row {
    argv: Vec<Vec<u8>>,
    expect: String,
}

/// `$?` as the start of `expect` stands for the length of the bulk string that follows.
fn ev(script: &str, expect: &str) -> Row {
    let sha = String::from_utf8(sha1hex(script.as_bytes()).to_vec()).unwrap();
    let expect = match expect.strip_prefix("$?\r\n") {
        Some(body) => format!("${}\r\n{body}", body.len() - 2),
        None => expect.to_string(),
    };
    Row {
        argv: vec![b"EVAL".to_vec(), script.as_bytes().to_vec(), b"0".to_vec()],
        expect: expect.replace("{sha}", &sha),
    }
}

fn cmd(args: &[&str], expect: &str) -> Row {
    Row {
        argv: args.iter().map(|a| a.as_bytes().to_vec()).collect(),
        expect: expect.to_string(),
    }
}

fn setup(c: &mut Conn) {
    assert_eq!(c.cmd(&["FLUSHALL"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "strkey", "abc"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "lk2", "held"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["HSET", "h", "f", "v"]), b":1\r\n");
}

fn hello3(c: &mut Conn) {
    let r = c.cmd(&["HELLO", "3"]);
    assert!(r.starts_with(b"%"), "{}", String::from_utf8_lossy(&r));
}

/// Runs the rows on a fresh connection to each server; each reply must be the expected bytes.
fn check(rows: &[Row], resp3: bool) {
    let db = common::deadbolt(&[]);
    let rs = common::redis_server(&[]);
    for (name, srv) in [("deadbolt", &db), ("redis-server", &rs)] {
        let mut c = srv.conn();
        setup(&mut c);
        if resp3 {
            hello3(&mut c);
        }
        for row in rows {
            let got = c.cmd(&row.argv);
            assert_eq!(
                String::from_utf8_lossy(&got),
                row.expect,
                "{name}: {:?}",
                row.argv
                    .iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
            );
        }
    }
}

#[test]
fn lua_to_reply_resp2() {
    check(
        &[
            ev("return 'hello'", "$5\r\nhello\r\n"),
            ev("return 3.99", ":3\r\n"),
            ev("return -3.99", ":-3\r\n"),
            ev("return 2^53+1", ":9007199254740992\r\n"),
            ev("return 1e20", ":-9223372036854775808\r\n"),
            ev("return 0/0", ":-9223372036854775808\r\n"),
            ev("return 1/0", ":-9223372036854775808\r\n"),
            ev("return true", ":1\r\n"),
            ev("return false", "$-1\r\n"),
            ev("return nil", "$-1\r\n"),
            ev("local x = 1", "$-1\r\n"),
            ev("return function() end", "$-1\r\n"),
            ev("return coroutine.create(function() end)", "$-1\r\n"),
            ev("return {err='My Error'}", "-My Error\r\n"),
            ev("return {err='-FOO bar'}", "--FOO bar\r\n"),
            ev("return {ok='a\\r\\nb'}", "+a  b\r\n"),
            ev("return {ok='fine'}", "+fine\r\n"),
            ev("return {double=3.14}", "$18\r\n3.1400000000000001\r\n"),
            ev("return {big_number='123'}", "$3\r\n123\r\n"),
            ev(
                "return {verbatim_string={format='txt',string='hi'}}",
                "$2\r\nhi\r\n",
            ),
            ev("return {map={a=1}}", "*2\r\n$1\r\na\r\n:1\r\n"),
            ev("return {set={a=true}}", "*1\r\n$1\r\na\r\n"),
            ev("return {1,2,3,nil,5}", "*3\r\n:1\r\n:2\r\n:3\r\n"),
            ev(
                "return {1,'a',{2,3},true,false,3.7}",
                "*6\r\n:1\r\n$1\r\na\r\n*2\r\n:2\r\n:3\r\n:1\r\n$-1\r\n:3\r\n",
            ),
            ev("return {x=1,y=2}", "*0\r\n"),
            ev("return {err=5}", "*0\r\n"),
            ev("return {ok=5}", "*0\r\n"),
            ev("return {1,x=2}", "*1\r\n:1\r\n"),
            ev(
                "return {1,{err='inner'},{ok='st'}}",
                "*3\r\n:1\r\n-inner\r\n+st\r\n",
            ),
            ev(
                "return redis.error_reply('MYERR custom')",
                "-MYERR custom\r\n",
            ),
            ev(
                "return redis.error_reply('-MYERR custom2')",
                "-MYERR custom2\r\n",
            ),
            ev("return redis.error_reply('nocode')", "-ERR nocode\r\n"),
            ev("return redis.error_reply('')", "-ERR \r\n"),
            ev(
                "return redis.error_reply()",
                "-ERR wrong number or type of arguments\r\n",
            ),
            ev(
                "return redis.error_reply('a','b')",
                "-ERR wrong number or type of arguments\r\n",
            ),
            ev(
                "return redis.error_reply({})",
                "-ERR wrong number or type of arguments\r\n",
            ),
            ev("return redis.status_reply('fine')", "+fine\r\n"),
            ev(
                "return redis.status_reply()",
                "-ERR wrong number or type of arguments\r\n",
            ),
        ],
        false,
    );
}

#[test]
fn lua_to_reply_resp3() {
    check(
        &[
            ev("return true", ":1\r\n"),
            ev("return false", "_\r\n"),
            ev("return nil", "_\r\n"),
            ev("redis.setresp(3) return true", "#t\r\n"),
            ev("redis.setresp(3) return false", "#f\r\n"),
            ev("return {double=3.14}", ",3.1400000000000001\r\n"),
            ev(
                "return {verbatim_string={format='txt',string='hi'}}",
                "=6\r\ntxt:hi\r\n",
            ),
            ev("return {map={a=1}}", "%1\r\n$1\r\na\r\n:1\r\n"),
            ev("return {set={a=true}}", "~1\r\n$1\r\na\r\n"),
            ev(
                "return {1,'a',{2,3},true,false,3.7}",
                "*6\r\n:1\r\n$1\r\na\r\n*2\r\n:2\r\n:3\r\n:1\r\n_\r\n:3\r\n",
            ),
            ev("return 3.99", ":3\r\n"),
            ev("return {err='My Error'}", "-My Error\r\n"),
        ],
        true,
    );
}

#[test]
fn reply_to_lua() {
    check(
        &[
            ev(
                "local r = redis.call('get','nokey') return type(r)..tostring(r)",
                "$12\r\nbooleanfalse\r\n",
            ),
            ev(
                "local r = redis.call('set','lk2','x','NX') return type(r)..tostring(r)",
                "$12\r\nbooleanfalse\r\n",
            ),
            ev(
                "local r = redis.call('set','lk3','tok','NX','PX',30000) return type(r)..':'..r.ok",
                "$8\r\ntable:OK\r\n",
            ),
            ev(
                "local r = redis.pcall('incr','strkey') return type(r)..':'..r.err",
                "$49\r\ntable:ERR value is not an integer or out of range\r\n",
            ),
            ev(
                "local r = redis.call('incr','cnt') return type(r)..':'..r",
                "$8\r\nnumber:1\r\n",
            ),
            ev(
                "local r = redis.call('mget','strkey','nokey') return {#r, r[1], type(r[2])..tostring(r[2])}",
                "*3\r\n:2\r\n$3\r\nabc\r\n$12\r\nbooleanfalse\r\n",
            ),
            ev(
                "local r = redis.call('hgetall','h') return {#r, r[1], r[2]}",
                "*3\r\n:2\r\n$1\r\nf\r\n$1\r\nv\r\n",
            ),
            ev(
                "redis.setresp(3) return type(redis.call('get','nokey'))",
                "$3\r\nnil\r\n",
            ),
            ev(
                "redis.setresp(3) local r = redis.call('hgetall','h') return r.map.f",
                "$1\r\nv\r\n",
            ),
            ev(
                "redis.setresp(3) local r = redis.call('mget','nokey') return type(r[1])..tostring(r[1])",
                "$6\r\nnilnil\r\n",
            ),
            ev(
                "redis.setresp(3) local r = redis.call('set','lk4','x') return r.ok",
                "$2\r\nOK\r\n",
            ),
            // Arguments: numbers are formatted with %.17g.
            ev(
                "redis.call('set','n1',0.1) return redis.call('get','n1')",
                "$19\r\n0.10000000000000001\r\n",
            ),
            ev(
                "redis.call('set','n2',1.5) return redis.call('get','n2')",
                "$3\r\n1.5\r\n",
            ),
            ev(
                "redis.call('set','n3',12345678901234567) return redis.call('get','n3')",
                "$17\r\n12345678901234568\r\n",
            ),
            ev(
                "redis.call('set','n4',30000) return redis.call('get','n4')",
                "$5\r\n30000\r\n",
            ),
            // pcall override.
            ev(
                "local ok, e = pcall(redis.call,'incr','strkey') return {tostring(ok), type(e), e}",
                "*3\r\n$5\r\nfalse\r\n$6\r\nstring\r\n$43\r\nERR value is not an integer or out of range\r\n",
            ),
            ev(
                "return select(2, pcall(error, {err='E1'}))",
                "$2\r\nE1\r\n",
            ),
            ev(
                "local ok, e = pcall(error, {foo=1}) return type(e)",
                "$5\r\ntable\r\n",
            ),
            ev(
                "local ok, e = pcall(error, 'plain') return e",
                "$5\r\nplain\r\n",
            ),
            ev(
                "local ok, e = xpcall(function() error({err='X1'}) end, function(e) return e end) return type(e)",
                "$5\r\ntable\r\n",
            ),
            ev("return tostring(1e15)..' '..tostring(0.1)..' '..tostring(1/3)..' '..(3.0 .. '')..' '..tostring(2^63)",
               "$48\r\n1e+15 0.1 0.33333333333333 3 9.2233720368548e+18\r\n"),
        ],
        false,
    );
}

#[test]
fn script_errors() {
    check(
        &[
            ev("return x", "-ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: {sha}, on @user_script:1.\r\n"),
            ev("x = 5", "-ERR user_script:1: Attempt to modify a readonly table script: {sha}, on @user_script:1.\r\n"),
            ev("_G.x=1", "-ERR user_script:1: Attempt to modify a readonly table script: {sha}, on @user_script:1.\r\n"),
            ev("redis.call=nil", "-ERR user_script:1: Attempt to modify a readonly table script: {sha}, on @user_script:1.\r\n"),
            ev("string.foo=1", "-ERR user_script:1: Attempt to modify a readonly table script: {sha}, on @user_script:1.\r\n"),
            ev("KEYS = {}", "-ERR user_script:1: Attempt to modify a readonly table script: {sha}, on @user_script:1.\r\n"),
            ev("getmetatable('').__index={}", "-ERR user_script:1: Attempt to modify a readonly table script: {sha}, on @user_script:1.\r\n"),
            ev("rawset(_G,'y',1)", "-ERR Attempt to modify a readonly table script: {sha}, on @user_script:1.\r\n"),
            ev("setmetatable(_G,nil)", "-ERR Attempt to modify a readonly table script: {sha}, on @user_script:1.\r\n"),
            ev("rawset(redis,'call',1)", "-ERR Attempt to modify a readonly table script: {sha}, on @user_script:1.\r\n"),
            ev("local t=nil; return t.x", "-ERR user_script:1: attempt to index local 't' (a nil value) script: {sha}, on @user_script:1.\r\n"),
            ev("return redis.call('incr','strkey')", "-ERR value is not an integer or out of range script: {sha}, on @user_script:1.\r\n"),
            ev("return redis.pcall('incr','strkey')", "-ERR value is not an integer or out of range\r\n"),
            ev("error('boom')", "-ERR user_script:1: boom script: {sha}, on @user_script:1.\r\n"),
            ev("error('boom',0)", "-ERR boom script: {sha}, on @user_script:1.\r\n"),
            ev("error({err='CUSTOM table err'})", "-CUSTOM table err script: {sha}, on @user_script:1.\r\n"),
            ev("error()", "-ERR nil script: {sha}, on @user_script:1.\r\n"),
            ev("error(nil)", "-ERR nil script: {sha}, on @user_script:1.\r\n"),
            ev("error(123)", "-ERR user_script:1: 123 script: {sha}, on @user_script:1.\r\n"),
            ev("local a = 1\nlocal b = 2\nreturn nil + a", "-ERR user_script:3: attempt to perform arithmetic on a nil value script: {sha}, on @user_script:3.\r\n"),
            ev("local function f()\n  error('x')\nend\nf()", "-ERR user_script:2: x script: {sha}, on @user_script:2.\r\n"),
            ev("local function f()\n  return redis.call('incr','strkey')\nend\nreturn f()", "-ERR value is not an integer or out of range script: {sha}, on @user_script:2.\r\n"),
            ev("loadstring('x = 1')()", "-ERR [string \"x = 1\"]:1: Attempt to modify a readonly table script: {sha}, on x = 1:1.\r\n"),
            ev("redis.call('nosuchcmd')", "-ERR Unknown Redis command called from script script: {sha}, on @user_script:1.\r\n"),
            ev("redis.call('get')", "-ERR Wrong number of args calling Redis command from script script: {sha}, on @user_script:1.\r\n"),
            ev("redis.call()", "-ERR Please specify at least one argument for this redis lib call script: {sha}, on @user_script:1.\r\n"),
            ev("redis.call('get', {})", "-ERR Lua redis lib command arguments must be strings or integers script: {sha}, on @user_script:1.\r\n"),
            ev("redis.call('get', true)", "-ERR Lua redis lib command arguments must be strings or integers script: {sha}, on @user_script:1.\r\n"),
            ev("redis.call('get', nil)", "-ERR Lua redis lib command arguments must be strings or integers script: {sha}, on @user_script:1.\r\n"),
            ev("return redis.pcall('get', {})", "-ERR Lua redis lib command arguments must be strings or integers\r\n"),
            ev("redis.call('eval','return 1','0')", "-ERR This Redis command is not allowed from script script: {sha}, on @user_script:1.\r\n"),
            ev("redis.call('script','load','return 1')", "-ERR This Redis command is not allowed from script script: {sha}, on @user_script:1.\r\n"),
            ev("redis.call('config','get','port')", "-ERR This Redis command is not allowed from script script: {sha}, on @user_script:1.\r\n"),
            ev("return +", "-ERR Error compiling script (new function): user_script:1: unexpected symbol near '+'\r\n"),
            ev("return 'unterminated", "-ERR Error compiling script (new function): user_script:1: unfinished string near '<eof>'\r\n"),
            ev("return os", "-ERR user_script:1: Script attempted to access nonexistent global variable 'os' script: {sha}, on @user_script:1.\r\n"),
            ev("return io", "-ERR user_script:1: Script attempted to access nonexistent global variable 'io' script: {sha}, on @user_script:1.\r\n"),
            ev("print('x')", "-ERR user_script:1: Script attempted to access nonexistent global variable 'print' script: {sha}, on @user_script:1.\r\n"),
            ev("return loadfile", "-ERR user_script:1: Script attempted to access nonexistent global variable 'loadfile' script: {sha}, on @user_script:1.\r\n"),
            ev("return dofile", "-ERR user_script:1: Script attempted to access nonexistent global variable 'dofile' script: {sha}, on @user_script:1.\r\n"),
            ev("return require", "-ERR user_script:1: Script attempted to access nonexistent global variable 'require' script: {sha}, on @user_script:1.\r\n"),
            ev("return debug", "-ERR user_script:1: Script attempted to access nonexistent global variable 'debug' script: {sha}, on @user_script:1.\r\n"),
            // Tables the script makes are its own; KEYS/ARGV too.
            ev("local t = {} t.x = 1 rawset(t,'y',2) setmetatable(t, {}) return t.x + t.y", ":3\r\n"),
            ev("KEYS[1] = 'x' return KEYS[1]", "$1\r\nx\r\n"),
            // The write in a read-only script.
            cmd(&["EVAL_RO", "redis.call('set','a','b')", "0"], &format!("-ERR Write commands are not allowed from read-only scripts. script: {}, on @user_script:1.\r\n", hex("redis.call('set','a','b')"))),
            cmd(&["EVAL_RO", "return redis.call('get','strkey')", "0"], "$3\r\nabc\r\n"),
        ],
        false,
    );
}

fn hex(s: &str) -> String {
    String::from_utf8(sha1hex(s.as_bytes()).to_vec()).unwrap()
}

#[test]
fn redis_api() {
    check(
        &[
            ev("return redis.sha1hex('')", "$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n"),
            ev("return redis.sha1hex(123)", "$40\r\n40bd001563085fc35165329ea1ff5c5ecbdbbeef\r\n"),
            ev("return redis.sha1hex()", "-ERR wrong number of arguments script: {sha}, on @user_script:1.\r\n"),
            ev("return redis.log(redis.LOG_WARNING, 'from a script', 1)", "$-1\r\n"),
            ev("redis.log()", "-ERR redis.log() requires two arguments or more. script: {sha}, on @user_script:1.\r\n"),
            ev("redis.log('x','y')", "-ERR First argument must be a number (log level). script: {sha}, on @user_script:1.\r\n"),
            ev("redis.log(9,'y')", "-ERR Invalid debug level. script: {sha}, on @user_script:1.\r\n"),
            ev("redis.setresp()", "-ERR redis.setresp() requires one argument. script: {sha}, on @user_script:1.\r\n"),
            ev("redis.setresp(4)", "-ERR RESP version must be 2 or 3. script: {sha}, on @user_script:1.\r\n"),
            ev("return redis.set_repl(redis.REPL_ALL)", "$-1\r\n"),
            ev("redis.set_repl()", "-ERR redis.set_repl() requires two arguments. script: {sha}, on @user_script:1.\r\n"),
            ev("redis.set_repl(8)", "-ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE. script: {sha}, on @user_script:1.\r\n"),
            ev("return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}", "*5\r\n:0\r\n:1\r\n:2\r\n:2\r\n:3\r\n"),
            ev("return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}", "*4\r\n:0\r\n:1\r\n:2\r\n:3\r\n"),
            ev("return redis.replicate_commands()", ":1\r\n"),
            ev("return redis.breakpoint()", "$-1\r\n"),
            ev("return redis.debug('x')", "$-1\r\n"),
            ev("return redis.acl_check_cmd('get','x')", ":1\r\n"),
            ev("return redis.acl_check_cmd('nosuch')", "-ERR Invalid command passed to redis.acl_check_cmd() script: {sha}, on @user_script:1.\r\n"),
            ev("return redis.acl_check_cmd()", "-ERR Please specify at least one argument for this redis lib call script: {sha}, on @user_script:1.\r\n"),
            ev("return redis.REDIS_VERSION", "$6\r\n7.0.15\r\n"),
            ev("return redis.REDIS_VERSION_NUM", ":458767\r\n"),
            ev("local n = 0 for k in pairs(redis) do n = n + 1 end return n", ":23\r\n"),
            ev("return _VERSION", "$7\r\nLua 5.1\r\n"),
            ev("return type(unpack)", "$8\r\nfunction\r\n"),
            ev("return {unpack({1,2,3})}", "*3\r\n:1\r\n:2\r\n:3\r\n"),
            ev("return bit.tohex(255)", "$8\r\n000000ff\r\n"),
            ev("return bit.tohex(-1, -4)", "$4\r\nFFFF\r\n"),
            ev("return bit.lshift(1,31)", ":-2147483648\r\n"),
            ev("return {bit.band(0xff, 0x0f), bit.bor(1, 2, 4), bit.bxor(3, 1), bit.bnot(0), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.rol(1, 33), bit.ror(1, 1), bit.bswap(1), bit.tobit(2^32 + 5)}",
               "*10\r\n:15\r\n:7\r\n:2\r\n:-1\r\n:15\r\n:-16\r\n:2\r\n:-2147483648\r\n:16777216\r\n:5\r\n"),
            ev("return string.format('%d %s', 5, 'x')", "$3\r\n5 x\r\n"),
            ev("return redis.call('time') ~= nil and redis.call('set','t','1').ok", "$2\r\nOK\r\n"),
            ev("return {math.floor(3.7), math.max(1, '5'), tonumber('1.7e12')}", "*3\r\n:3\r\n:5\r\n:1700000000000\r\n"),
            ev("local s = 0 for c = '3', 1, -1 do s = s + c end return s", ":6\r\n"),
            ev("return #ARGV", ":0\r\n"),
        ],
        false,
    );
}

#[test]
fn eval_evalsha_script_commands() {
    let body = "return {#KEYS, #ARGV, KEYS[1], ARGV[1]}";
    let sha = hex(body);
    let upper = sha.to_uppercase();
    check(
        &[
            cmd(&["EVAL", "return 1"], "-ERR wrong number of arguments for 'eval' command\r\n"),
            cmd(&["EVAL", "return 1", "abc"], "-ERR value is not an integer or out of range\r\n"),
            cmd(&["EVAL", "return 1", "1.5"], "-ERR value is not an integer or out of range\r\n"),
            cmd(&["EVAL", "return 1", "99999999999999999999"], "-ERR value is not an integer or out of range\r\n"),
            cmd(&["EVAL", "return 1", "1"], "-ERR Number of keys can't be greater than number of args\r\n"),
            cmd(&["EVAL", "return 1", "-1"], "-ERR Number of keys can't be negative\r\n"),
            cmd(&["EVALSHA", &sha, "1", "k", "a"], "-NOSCRIPT No matching script. Please use EVAL.\r\n"),
            cmd(&["EVALSHA", "abc", "x"], "-NOSCRIPT No matching script. Please use EVAL.\r\n"),
            cmd(&["EVALSHA", &sha, "abc"], "-ERR value is not an integer or out of range\r\n"),
            cmd(&["EVAL", body, "1", "k", "a", "b"], "*4\r\n:1\r\n:2\r\n$1\r\nk\r\n$1\r\na\r\n"),
            cmd(&["EVALSHA", &sha, "0", "a"], "*2\r\n:0\r\n:1\r\n"),
            cmd(&["EVALSHA", &upper, "2", "k1", "k2"], "*3\r\n:2\r\n:0\r\n$2\r\nk1\r\n"),
            cmd(&["EVALSHA_RO", &sha, "0"], "*2\r\n:0\r\n:0\r\n"),
            cmd(&["SCRIPT", "EXISTS", &sha, &upper, "ffffffffffffffffffffffffffffffffffffffff", "x"], "*4\r\n:1\r\n:1\r\n:0\r\n:0\r\n"),
            cmd(&["SCRIPT", "LOAD", "return 'loaded'"], &format!("$40\r\n{}\r\n", hex("return 'loaded'"))),
            cmd(&["EVALSHA", &hex("return 'loaded'"), "0"], "$6\r\nloaded\r\n"),
            cmd(&["SCRIPT", "LOAD", "return +"], "-ERR Error compiling script (new function): user_script:1: unexpected symbol near '+'\r\n"),
            cmd(&["SCRIPT", "LOAD"], "-ERR wrong number of arguments for 'script|load' command\r\n"),
            cmd(&["SCRIPT", "FLUSH", "BAD"], "-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n"),
            cmd(&["SCRIPT", "FLUSH", "ASYNC"], "+OK\r\n"),
            cmd(&["EVALSHA", &sha, "0"], "-NOSCRIPT No matching script. Please use EVAL.\r\n"),
            cmd(&["SCRIPT", "EXISTS", &sha], "*1\r\n:0\r\n"),
            cmd(&["SCRIPT", "FLUSH"], "+OK\r\n"),
            cmd(&["SCRIPT", "FLUSH", "sync"], "+OK\r\n"),
            cmd(&["SCRIPT", "KILL"], "-NOTBUSY No scripts in execution right now.\r\n"),
            cmd(&["SCRIPT", "FOO"], "-ERR unknown subcommand 'FOO'. Try SCRIPT HELP.\r\n"),
            // Shebang flags.
            cmd(&["EVAL", "#!lua", "0"], "-ERR Invalid script shebang\r\n"),
            cmd(&["EVAL", "#!python\nreturn 1", "0"], "-ERR Unexpected engine in script shebang: #!python\r\n"),
            cmd(&["EVAL", "#!lua flags=foo\nreturn 1", "0"], "-ERR Unexpected flag in script shebang: foo\r\n"),
            cmd(&["EVAL", "#!lua name=foo\nreturn 1", "0"], "-ERR Unknown lua shebang option: name=foo\r\n"),
            cmd(&["EVAL", "#!lua\nreturn 1", "0"], ":1\r\n"),
            cmd(&["EVAL", "#!lua flags=no-writes,allow-oom\nreturn redis.call('get','strkey')", "0"], "$3\r\nabc\r\n"),
            cmd(&["EVAL", "#!lua flags=no-writes\n\nredis.call('set','a','b')", "0"],
                &format!("-ERR Write commands are not allowed from read-only scripts. script: {}, on @user_script:3.\r\n", hex("#!lua flags=no-writes\n\nredis.call('set','a','b')"))),
            cmd(&["EVAL_RO", "#!lua\nreturn 1", "0"], "-ERR Can not execute a script with write flag using *_ro command.\r\n"),
            cmd(&["EVAL_RO", "#!lua flags=no-writes\nreturn 2", "0"], ":2\r\n"),
            cmd(&["EVAL", "#!lua\nreturn x", "0"],
                &format!("-ERR user_script:2: Script attempted to access nonexistent global variable 'x' script: {}, on @user_script:2.\r\n", hex("#!lua\nreturn x"))),
            // SELECT inside a script changes only the script's database.
            cmd(&["EVAL", "redis.call('select', 1) redis.call('set', 'in1', 'x') return redis.call('get', 'in1')", "0"], "$1\r\nx\r\n"),
            cmd(&["GET", "in1"], "$-1\r\n"),
            cmd(&["SELECT", "1"], "+OK\r\n"),
            cmd(&["GET", "in1"], "$1\r\nx\r\n"),
        ],
        false,
    );
}

#[test]
fn cjson_matches_redis() {
    check(
        &[
            ev("return cjson.encode({})", "$?\r\n{}\r\n"),
            ev("return cjson.encode({a=cjson.null,b=0.1,c=1e20})", "$?\r\n{\"a\":null,\"c\":1e+20,\"b\":0.1}\r\n"),
            ev("return cjson.encode({1,2,nil,4})", "$?\r\n[1,2,null,4]\r\n"),
            ev("return cjson.encode({a={b={c=1}}, d='x/y\"z'})", "$?\r\n{\"a\":{\"b\":{\"c\":1}},\"d\":\"x\\/y\\\"z\"}\r\n"),
            ev("return cjson.encode('\\1\\127\\n')", "$?\r\n\"\\u0001\\u007f\\n\"\r\n"),
            ev("return cjson.encode({[1.5]=1})", "$?\r\n{\"1.5\":1}\r\n"),
            ev("return cjson.encode(function() end)", "-ERR user_script:1: Cannot serialise function: type not supported script: {sha}, on @user_script:1.\r\n"),
            ev("return cjson.encode({[1]=1,[20]=2})", "-ERR user_script:1: Cannot serialise table: excessively sparse array script: {sha}, on @user_script:1.\r\n"),
            ev("return cjson.encode({[true]=1})", "-ERR user_script:1: Cannot serialise boolean: table key must be a number or string script: {sha}, on @user_script:1.\r\n"),
            ev("return cjson.encode(0/0)", "-ERR user_script:1: Cannot serialise number: must not be NaN or Inf script: {sha}, on @user_script:1.\r\n"),
            ev("local t = {} local c = t for i=1,1001 do c[1] = {} c = c[1] end return cjson.encode(t)", "-ERR user_script:1: Cannot serialise, excessive nesting (1001) script: {sha}, on @user_script:1.\r\n"),
            ev("return cjson.decode('{\"a\":[1,2,{\"b\":null}]}').a[3].b == cjson.null", ":1\r\n"),
            ev("return cjson.decode('{bad')", "-ERR user_script:1: Expected object key string but found invalid token at character 2 script: {sha}, on @user_script:1.\r\n"),
            ev("return cjson.decode('[1,')", "-ERR user_script:1: Expected value but found T_END at character 4 script: {sha}, on @user_script:1.\r\n"),
            ev("return cjson.decode('[1, 2] x')", "-ERR user_script:1: Expected the end but found invalid token at character 8 script: {sha}, on @user_script:1.\r\n"),
            ev("return cjson.decode('{\"a\" 1}')", "-ERR user_script:1: Expected colon but found T_NUMBER at character 6 script: {sha}, on @user_script:1.\r\n"),
            ev("return cjson.decode('\"abc')", "-ERR user_script:1: Expected value but found unexpected end of string at character 5 script: {sha}, on @user_script:1.\r\n"),
            ev("return cjson.decode('[' .. string.rep('[', 1001) .. ']')", "-ERR user_script:1: Found too many nested data structures (1001) at character 1001 script: {sha}, on @user_script:1.\r\n"),
            ev("return cjson.decode()", "-ERR user_script:1: bad argument #1 to 'decode' (expected 1 argument) script: {sha}, on @user_script:1.\r\n"),
            ev("return cjson.decode('\"\\\\u00e9\\\\ud83d\\\\ude00\"')", "$?\r\n\u{e9}\u{1f600}\r\n"),
            ev("return {cjson.decode('true'), cjson.decode(' 12 '), cjson.decode('1e5'), cjson.decode('-0.5')}", "*4\r\n:1\r\n:12\r\n:100000\r\n:0\r\n"),
            ev("return cjson.encode({cjson.decode('{\"k\":[true,false,null,1.5,\"s\"]}')})", "$?\r\n[{\"k\":[true,false,null,1.5,\"s\"]}]\r\n"),
            ev("return {cjson._NAME, cjson._VERSION, cjson.encode_max_depth(), cjson.decode_max_depth()}", "*4\r\n$5\r\ncjson\r\n$5\r\n2.1.0\r\n:1000\r\n:1000\r\n"),
            ev("cjson.foo = 1", "-ERR user_script:1: Attempt to modify a readonly table script: {sha}, on @user_script:1.\r\n"),
        ],
        false,
    );
}

#[test]
fn struct_matches_redis() {
    check(
        &[
            ev("return struct.pack('>I2',258)", "$2\r\n\x01\x02\r\n"),
            ev("return {struct.unpack('<i4', struct.pack('<i4', -2))}", "*2\r\n:-2\r\n:5\r\n"),
            ev("return {struct.unpack('>I2', struct.pack('>I2',258))}", "*2\r\n:258\r\n:3\r\n"),
            ev("return struct.size('>I2bd')", ":11\r\n"),
            ev("return struct.size('!8 b d')", ":16\r\n"),
            ev("return {struct.unpack('bc0', struct.pack('bc0', 3, 'abc'))}", "*2\r\n$3\r\nabc\r\n:5\r\n"),
            ev("return {struct.unpack('c0', 'abc')}", "-ERR user_script:1: format 'c0' needs a previous size script: {sha}, on @user_script:1.\r\n"),
            ev("return {struct.unpack('s', 'ab\\0cd')}", "*2\r\n$2\r\nab\r\n:4\r\n"),
            ev("return {struct.unpack('>d', struct.pack('>d', 1.5))}", "*2\r\n:1\r\n:9\r\n"),
            ev("return {struct.unpack('>h', '\\255\\254')}", "*2\r\n:-2\r\n:3\r\n"),
            ev("return {struct.unpack('b', 'a', 0)}", "-ERR user_script:1: bad argument #3 to 'unpack' (offset must be 1 or greater) script: {sha}, on @user_script:1.\r\n"),
            ev("return {struct.unpack('i4', 'ab')}", "-ERR user_script:1: bad argument #2 to 'unpack' (data string too short) script: {sha}, on @user_script:1.\r\n"),
            ev("return struct.size('s')", "-ERR user_script:1: bad argument #1 to 'size' (option 's' has no fixed size) script: {sha}, on @user_script:1.\r\n"),
            ev("return struct.pack('i')", "-ERR user_script:1: bad argument #2 to 'pack' (number expected, got nil) script: {sha}, on @user_script:1.\r\n"),
            ev("return struct.pack('c3', 'ab')", "-ERR user_script:1: bad argument #3 to 'pack' (string too short) script: {sha}, on @user_script:1.\r\n"),
            ev("return struct.pack('q', 1)", "-ERR user_script:1: bad argument #1 to 'pack' (invalid format option 'q') script: {sha}, on @user_script:1.\r\n"),
            ev("return struct.pack('i33', 1)", "-ERR user_script:1: integral size 33 is larger than limit of 32 script: {sha}, on @user_script:1.\r\n"),
            ev("return struct.pack('!3i', 1)", "-ERR user_script:1: alignment 3 is not a power of 2 script: {sha}, on @user_script:1.\r\n"),
            ev("return {struct.unpack('s', 'ab')}", "-ERR user_script:1: unfinished string in data script: {sha}, on @user_script:1.\r\n"),
        ],
        false,
    );
}

#[test]
fn cmsgpack_matches_redis() {
    check(
        &[
            ev("return cmsgpack.pack({1,2,3}) == '\\147\\1\\2\\3'", ":1\r\n"),
            ev("return {cmsgpack.unpack(cmsgpack.pack({1,{2,'x'}}, 5))}", "*2\r\n*2\r\n:1\r\n*2\r\n:2\r\n$1\r\nx\r\n:5\r\n"),
            ev("local t = cmsgpack.unpack(cmsgpack.pack({a=1,b={c=2}})) return t.b.c", ":2\r\n"),
            ev("return {cmsgpack.unpack_one(cmsgpack.pack(1,2,3))}", "*2\r\n:1\r\n:1\r\n"),
            ev("return {cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 2)}", "*3\r\n:2\r\n:1\r\n:2\r\n"),
            ev("return #cmsgpack.pack(1.5, -1, -200, 70000, 2^40, 'abc', true, nil, 0.1)", ":38\r\n"),
            ev("return cmsgpack.unpack('\\205')", "-ERR user_script:1: Missing bytes in input. script: {sha}, on @user_script:1.\r\n"),
            ev("return cmsgpack.unpack('\\193')", "-ERR user_script:1: Bad data format in input. script: {sha}, on @user_script:1.\r\n"),
            ev("return cmsgpack.pack()", "-ERR user_script:1: bad argument #0 to 'pack' (MessagePack pack needs input.) script: {sha}, on @user_script:1.\r\n"),
            ev("local t = {} local c = t for i=1,20 do c[1] = {} c = c[1] end return #cmsgpack.pack(t)", ":17\r\n"),
        ],
        false,
    );
}

/// The global environment and the library tables list exactly what Redis 7.0 has (hardened:
/// no getfenv/setfenv/newproxy, as 7.2.11+/8.2.2+ and Debian's 7.0.15).
#[test]
fn environment_matches_redis() {
    let names = |t: &str| {
        format!("local r = {{}} for k in pairs({t}) do r[#r+1] = tostring(k) end table.sort(r) return table.concat(r, ' ')")
    };
    let rows: Vec<Row> = [
        "_G",
        "redis",
        "string",
        "table",
        "math",
        "coroutine",
        "bit",
        "cjson",
        "struct",
        "cmsgpack",
    ]
    .iter()
    .map(|t| {
        let body = names(t);
        let sha = hex(&body);
        Row {
            argv: vec![b"EVAL".to_vec(), body.into_bytes(), b"0".to_vec()],
            expect: sha,
        }
    })
    .collect();
    // The expected text is what redis-server answers; deadbolt must answer the same.
    let rs = common::redis_server(&[]);
    let db = common::deadbolt(&[]);
    let mut rc = rs.conn();
    let mut dc = db.conn();
    for row in &rows {
        let want = rc.cmd(&row.argv);
        assert!(want.starts_with(b"$"), "{}", String::from_utf8_lossy(&want));
        assert_eq!(
            String::from_utf8_lossy(&dc.cmd(&row.argv)),
            String::from_utf8_lossy(&want),
            "{}",
            String::from_utf8_lossy(&row.argv[1])
        );
    }
    assert_eq!(
        dc.cmd_str(&["EVAL", "return rawget(_G, 'KEYS')[1]", "1", "k"]),
        "$1\r\nk\r\n"
    );
}

/// A deeply nested return value: Redis converts 7995 levels, then `reached lua stack limit`.
#[test]
fn deep_reply_nesting_matches_redis() {
    let body = "local t = {} local c = t for i=1,9000 do c[1] = {} c = c[1] end return t";
    let mut want = "*1\r\n".repeat(7995);
    want.push_str("-ERR reached lua stack limit\r\n");
    let db = common::deadbolt(&[]);
    let rs = common::redis_server(&[]);
    for srv in [&db, &rs] {
        // Read raw bytes: the harness's recursive reply parser is not meant for 8000 levels.
        use std::io::Read;
        let mut c = srv.conn();
        c.send(&["EVAL", body, "0"]);
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        while got.len() < want.len() {
            let n = c.stream.read(&mut buf).unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(String::from_utf8(got).unwrap(), want);
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    }
}

#[test]
fn math_random_sequence_matches_redis() {
    check(
        &[
            ev("return math.random(1000)", ":397\r\n"),
            ev("return math.random(1000)", ":841\r\n"),
            ev(
                "math.randomseed(42) return {math.random(1000), math.random(1000)}",
                "*2\r\n:745\r\n:343\r\n",
            ),
            ev("return math.random(5, 6) >= 5", ":1\r\n"),
            ev("return math.random(0)", "-ERR user_script:1: bad argument #1 to 'random' (interval is empty) script: {sha}, on @user_script:1.\r\n"),
            ev("return math.random(3, 2)", "-ERR user_script:1: bad argument #2 to 'random' (interval is empty) script: {sha}, on @user_script:1.\r\n"),
            ev("return math.random(1,2,3)", "-ERR user_script:1: wrong number of arguments script: {sha}, on @user_script:1.\r\n"),
            ev("return math.random('x')", "-ERR user_script:1: bad argument #1 to 'random' (number expected, got string) script: {sha}, on @user_script:1.\r\n"),
            ev("math.randomseed()", "-ERR user_script:1: bad argument #1 to 'randomseed' (number expected, got no value) script: {sha}, on @user_script:1.\r\n"),
            ev("return bit.tohex('x')", "-ERR user_script:1: bad argument #1 to 'tohex' (number expected, got string) script: {sha}, on @user_script:1.\r\n"),
            ev("return bit.band(1, {})", "-ERR user_script:1: bad argument #2 to 'band' (number expected, got table) script: {sha}, on @user_script:1.\r\n"),
            ev("return bit.lshift(1)", "-ERR user_script:1: bad argument #2 to 'lshift' (number expected, got no value) script: {sha}, on @user_script:1.\r\n"),
            ev("return bit.tobit('0x10')", ":16\r\n"),
        ],
        false,
    );
}

/// `error({})` crashes Redis 7.0.15 (SIGSEGV); deadbolt answers an error and keeps serving.
#[test]
fn error_with_empty_table_does_not_crash() {
    let db = common::deadbolt(&[]);
    let mut c = db.conn();
    let sha = hex("error({})");
    assert_eq!(
        c.cmd_str(&["EVAL", "error({})", "0"]),
        format!("-ERR unknown error script: {sha}, on @user_script:1.\r\n")
    );
    let sha = hex("error({err=5})");
    assert_eq!(
        c.cmd_str(&["EVAL", "error({err=5})", "0"]),
        format!("-ERR unknown error script: {sha}, on @user_script:1.\r\n")
    );
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
}

/// Bytecode would let a script corrupt the VM: only text chunks load.
#[test]
fn bytecode_is_refused() {
    let db = common::deadbolt(&[]);
    let mut c = db.conn();
    assert_eq!(
        c.cmd_str(&[
            "EVAL",
            "local f, e = loadstring(string.dump(function() return 1 end)) return {tostring(f), e}",
            "0"
        ]),
        "*2\r\n$3\r\nnil\r\n$29\r\nbinary chunks are not allowed\r\n"
    );
    let r = c.cmd_str(&["EVAL", "\x1bLua", "0"]);
    assert!(
        r.starts_with("-ERR Error compiling script (new function): "),
        "{r}"
    );
}

/// A runaway allocation hits lua-memory-limit and fails; the server stays up and the Lua
/// state stays usable.
#[test]
fn lua_memory_limit() {
    let db = common::deadbolt(&["--lua-memory-limit", "4mb"]);
    let mut c = db.conn();
    let body = "local t = {} for i = 1, 1e8 do t[i] = i end return 1";
    let r = c.cmd_str(&["EVAL", body, "0"]);
    assert_eq!(
        r,
        format!(
            "-ERR Error running script {}, not enough memory\r\n",
            hex(body)
        )
    );
    assert_eq!(c.cmd(&["EVAL", "return 1", "0"]), b":1\r\n");
    // Replies of redis.call that no longer fit fail inside the script, which can catch it.
    let big = "x".repeat(1 << 20);
    assert_eq!(c.cmd(&["SET", "big", &big]), b"+OK\r\n");
    let body = "local t = {} for i = 1, 100 do t[i] = redis.call('get', 'big') .. i end return #t";
    let r = c.cmd_str(&["EVAL", body, "0"]);
    assert!(r.starts_with("-ERR "), "{r}");
    assert!(r.contains("not enough memory"), "{r}");
    // Here the reply itself is what no longer fits (each GET returns a new 1 MB string).
    let body = "local t = {} local ok, e = pcall(function() for i = 1, 100 do redis.call('append', 'big', 'y') t[i] = redis.call('get', 'big') end end) t = nil return tostring(ok) .. ' ' .. e";
    assert_eq!(
        c.cmd_str(&["EVAL", body, "0"]),
        "$23\r\nfalse not enough memory\r\n"
    );
    assert_eq!(
        c.cmd(&["EVAL", "return redis.call('del', 'big')", "0"]),
        b":1\r\n"
    );
    assert_eq!(
        c.cmd_str(&["CONFIG", "GET", "lua-memory-limit"]),
        "*2\r\n$16\r\nlua-memory-limit\r\n$7\r\n4194304\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "lua-memory-limit", "64mb"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd(&[
            "EVAL",
            "local t = {} for i = 1, 1e5 do t[i] = i end return #t",
            "0"
        ]),
        b":100000\r\n"
    );
}

/// One script cannot change the environment another one sees.
#[test]
fn scripts_cannot_leak_into_each_other() {
    let db = common::deadbolt(&[]);
    let mut c = db.conn();
    for s in [
        "string.upper = nil",
        "rawset(string, 'upper', nil)",
        "getmetatable('').__index.upper = nil",
        "local mt = getmetatable('') rawset(mt, '__index', {})",
        "setmetatable(string, {})",
        "math.random = nil",
        "redis.call = function() return 1 end",
        "rawset(_G, 'redis', {})",
    ] {
        let r = c.cmd_str(&["EVAL", s, "0"]);
        assert!(r.contains("Attempt to modify a readonly table"), "{s}: {r}");
    }
    assert_eq!(
        c.cmd_str(&["EVAL", "return ('x'):upper() .. string.upper('y')", "0"]),
        "$2\r\nXY\r\n"
    );
    assert_eq!(
        // Redis hands out _G's (read-only) metatable: a table, so `*0`.
        c.cmd_str(&["EVAL", "return getmetatable(_G)", "0"]),
        "*0\r\n"
    );
}

#[test]
fn info_reports_lua_memory_and_cached_scripts() {
    let s = common::deadbolt(&[]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["EVAL", "return 1", "0"]), b":1\r\n");
    assert_eq!(c.cmd(&["SCRIPT", "LOAD", "return 2"]).len(), 47);
    let info = c.cmd_str(&["INFO", "memory"]);
    assert!(info.contains("number_of_cached_scripts:2\r\n"), "{info}");
    let lua: u64 = info
        .split("used_memory_lua:")
        .nth(1)
        .and_then(|r| r.split("\r\n").next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(lua > 10_000, "{info}");
    assert_eq!(c.cmd(&["SCRIPT", "FLUSH"]), b"+OK\r\n");
    assert!(c
        .cmd_str(&["INFO", "memory"])
        .contains("number_of_cached_scripts:0\r\n"));
}
