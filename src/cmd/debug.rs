//! DEBUG: Redis 7.0's debugging subcommands (debug.c), behind `enable-debug-command`.
//!
//! Each subcommand answers as Redis's does. Those that would crash or restart the process
//! (SEGFAULT, PANIC, ASSERT, OOM, RESTART, CRASH-AND-RECOVER), that tune an allocator or a
//! structure deadbolt does not have (MALLCTL, HTSTATS, SDSLEN, QUICKLIST, CLIENT-EVICTION,
//! REPLYBUFFER, AOF-FLUSH-SLEEP…), or that need replication deadbolt does not speak
//! (REPLICATE), answer Redis's error for an unknown subcommand: never an OK that did nothing.

use super::args::{int_arg, is};
use super::spec::{flags::*, CommandSpec, Ctx, NO_KEYS};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use crate::store::{encoding, Value};
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec::leaf(
    "debug",
    -2,
    ADMIN | NOSCRIPT | LOADING | STALE | PROTECTED,
    NO_KEYS,
    &[],
    debug,
)];

/// Redis's `addReplySubcommandSyntaxError` for DEBUG (it has no subcommand table).
fn syntax_error(sub: &[u8]) -> CmdError {
    let sub = &sub[..sub.len().min(128)];
    let sub = match sub.iter().position(|&c| c == 0) {
        Some(n) => &sub[..n],
        None => sub,
    };
    let text = String::from_utf8_lossy(sub).replace(['\r', '\n'], " ");
    CmdError::erf(format!(
        "unknown subcommand or wrong number of arguments for '{text}'. Try DEBUG HELP."
    ))
}

fn debug(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if !super::support::protected_action_allowed(ctx.srv.config.enable_debug_command, ctx) {
        return Err(CmdError::err(super::support::DEBUG_REFUSED));
    }
    let sub = &argv[1];
    let argc = argv.len();
    let on = |name: &str| is(sub, name);
    if argc == 2 && on("help") {
        Ok(help())
    } else if on("sleep") && argc == 3 {
        std::thread::sleep(sleep_time(&argv[2]));
        Ok(Frame::ok())
    } else if on("clock-offset") && argc == 3 {
        clock_offset(&argv[2])
    } else if on("log") && argc == 3 {
        tracing::warn!("DEBUG LOG: {}", String::from_utf8_lossy(c_str(&argv[2])));
        Ok(Frame::ok())
    } else if on("reload") {
        reload(ctx, &argv[2..])
    } else if on("loadaof") {
        loadaof(ctx)
    } else if on("object") && argc == 3 {
        object(ctx, &argv[2])
    } else if on("listpack") && argc == 3 {
        listpack(ctx, &argv[2])
    } else if on("populate") && (3..=5).contains(&argc) {
        populate(ctx, argv)
    } else if on("digest") && argc == 2 {
        Ok(Frame::Simple(
            crate::config::users::hex(&dataset_digest(ctx)).into(),
        ))
    } else if on("digest-value") {
        Ok(Frame::Array(
            argv[2..]
                .iter()
                .map(|k| {
                    let mut d = [0u8; 20];
                    // As Redis: the stored value, even if logically expired.
                    if let Some(e) = ctx.srv.dbs[ctx.client.db].peek(k) {
                        value_digest(&mut d, &e.value, e.expires_at != 0);
                    }
                    Frame::Simple(crate::config::users::hex(&d).into())
                })
                .collect(),
        ))
    } else if on("protocol") && argc == 3 {
        protocol(ctx, &argv[2])
    } else if on("set-active-expire") && argc == 3 {
        ctx.srv.debug.active_expire = atoi(&argv[2]) != 0;
        Ok(Frame::ok())
    } else if on("quicklist-packed-threshold") && argc == 3 {
        packed_threshold(&argv[2])
    } else if on("stringmatch-test") && argc == 2 {
        stringmatch_test();
        Ok(Frame::simple("Apparently Redis did not crash: test passed"))
    } else if on("set-disable-deny-scripts") && argc == 3 {
        ctx.srv.debug.disable_deny_scripts = atoi(&argv[2]) != 0;
        Ok(Frame::ok())
    } else if on("pause-cron") && argc == 3 {
        ctx.srv.debug.pause_cron = atoi(&argv[2]) != 0;
        Ok(Frame::ok())
    } else if on("change-repl-id") && argc == 2 {
        tracing::warn!("Changing replication IDs after receiving DEBUG change-repl-id");
        ctx.srv.repl_id = crate::machine::random_hex40();
        Ok(Frame::ok())
    } else if on("error") && argc == 3 {
        let text: Vec<u8> = argv[2]
            .iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect();
        Ok(Frame::Error(text.into()))
    } else {
        Err(syntax_error(sub))
    }
}

/// C's `atoi`: leading spaces, a sign, then digits; anything else ends the number (0 if none).
fn atoi(arg: &[u8]) -> i64 {
    let s = arg.iter().skip_while(|b| b.is_ascii_whitespace());
    let mut neg = false;
    let mut n: i64 = 0;
    let mut first = true;
    for &b in s {
        if first && (b == b'-' || b == b'+') {
            neg = b == b'-';
            first = false;
            continue;
        }
        first = false;
        if !b.is_ascii_digit() {
            break;
        }
        n = n.wrapping_mul(10).wrapping_add((b - b'0') as i64);
    }
    // atoi returns an int: the low 32 bits, as on x86-64.
    let n = if neg { n.wrapping_neg() } else { n };
    n as i32 as i64
}

/// What C's `%s` prints of an argument: up to its first NUL.
fn c_str(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(n) => &b[..n],
        None => b,
    }
}

const HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "AOF-FLUSH-SLEEP <microsec>",
    "    Server will sleep before flushing the AOF, this is used for testing.",
    "ASSERT",
    "    Crash by assertion failed.",
    "CHANGE-REPL-ID",
    "    Change the replication IDs of the instance.",
    "    Dangerous: should be used only for testing the replication subsystem.",
    "CONFIG-REWRITE-FORCE-ALL",
    "    Like CONFIG REWRITE but writes all configuration options, including",
    "    keywords not listed in original configuration file or default values.",
    "CRASH-AND-RECOVER [<milliseconds>]",
    "    Hard crash and restart after a <milliseconds> delay (default 0).",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate Redis errors.",
    "LEAK <string>",
    "    Create a memory leak of the input string.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "HTSTATS <dbid>",
    "    Return hash table statistics of the specified Redis database.",
    "HTSTATS-KEY <key>",
    "    Like HTSTATS but for the hash table stored at <key>'s value.",
    "LOADAOF",
    "    Flush the AOF buffers on disk and reload the AOF in memory.",
    "REPLICATE <string>",
    "    Replicates the provided string to replicas, allowing data divergence.",
    "MALLCTL <key> [<val>]",
    "    Get or set a malloc tuning integer.",
    "MALLCTL-STR <key> [<val>]",
    "    Get or set a malloc tuning string.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "DROP-CLUSTER-PACKET-FILTER <packet-type>",
    "    Drop all packets that match the filtered type. Set to -1 allow all packets.",
    "OOM",
    "    Crash the server simulating an out-of-memory error.",
    "PANIC",
    "    Crash the server simulating a panic.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix. These are not propagated to",
    "    replicas. Cluster slots are not respected so keys not belonging to the",
    "    current node can be created in cluster mode.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "RELOAD [option ...]",
    "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
    "    * MERGE: conflicting keys will be loaded from RDB.",
    "    * NOFLUSH: the existing database will not be removed before load, but",
    "      conflicting keys will generate an exception and kill the server.",
    "    * NOSAVE: the database will be loaded from an existing RDB file.",
    "    Examples:",
    "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
    "      the database.",
    "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
    "      existing RDB file.",
    "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
    "      file to the database.",
    "RESTART [<milliseconds>]",
    "    Graceful restart: save config, db, restart after a <milliseconds> delay (default 0).",
    "SDSLEN <key>",
    "    Show low level SDS string info representing `key` and value.",
    "SEGFAULT",
    "    Crash the server with sigsegv.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Sets the threshold for elements to be inserted as plain vs packed nodes",
    "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
    "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
    "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "STRINGMATCH-TEST",
    "    Run a fuzz tester against the stringmatchlen() function.",
    "STRUCTSIZE",
    "    Return the size of different Redis core C structures.",
    "LISTPACK <key>",
    "    Show low level info about the listpack encoding of <key>.",
    "QUICKLIST <key> [<0|1>]",
    "    Show low level info about the quicklist encoding of <key>.",
    "    The optional argument (0 by default) sets the level of detail",
    "CLIENT-EVICTION",
    "    Show low level client eviction pools info (maxmemory-clients).",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing.",
    "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
    "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
    "    In case NEVER is provided the last observed peak will never be reset",
    "    In case RESET is provided the peak reset time will be restored to the default value",
    "REPLYBUFFER RESIZING <0|1>",
    "    Enable or disable the reply buffer resize cron job",
    "CLUSTERLINK KILL <to|from|all> <node-id>",
    "    Kills the link based on the direction to/from (both) with the provided node.",
    "HELP",
    "    Prints this help.",
];

/// Redis's text, line for line (the subcommands deadbolt answers as unknown included: the
/// help is Redis 7.0.15's, as clients and operators read it).
fn help() -> Frame {
    Frame::Array(HELP.iter().map(|l| Frame::simple(l)).collect())
}

/// deadbolt's own, for tests: every wall-clock read (deadlines, TIME) moves by this many
/// milliseconds from now on; 0 puts the clock back.
fn clock_offset(arg: &[u8]) -> CmdResult {
    let ms = int_arg(arg)?;
    if !crate::clock::set_offset_ms(ms) {
        return Err(CmdError::err(format!(
            "ERR clock offset must be between -{0} and {0} milliseconds",
            crate::clock::MAX_OFFSET_MS
        )));
    }
    tracing::warn!("DEBUG CLOCK-OFFSET: the wall clock is now offset by {ms} ms");
    Ok(Frame::ok())
}

/// How long `DEBUG SLEEP <seconds>` stops the server, as Redis's debug.c computes it:
/// `strtod(arg, NULL)` (any prefix, leading spaces, nothing read is 0), then
/// `(long long)(secs * 1e6)` microseconds, which on x86-64 is i64::MIN when out of range (inf,
/// 1e308, NaN); a negative time fails nanosleep with EINVAL, so it returns at once. Capped at an
/// hour (Redis would sleep up to 292 thousand years).
fn sleep_time(arg: &[u8]) -> std::time::Duration {
    let mut text: Vec<u8> = arg.iter().copied().take_while(|&b| b != 0).collect();
    text.push(0);
    // SAFETY: `text` is NUL-terminated and outlives the call; a null end pointer is allowed.
    let secs = unsafe { libc::strtod(text.as_ptr().cast(), std::ptr::null_mut()) };
    let us = secs * 1e6;
    let us = if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&us) {
        us as i64
    } else {
        i64::MIN
    };
    std::time::Duration::from_micros(us.clamp(0, 3_600_000_000) as u64)
}

// ---------------------------------------------------------------------------------------------
// DIGEST, DIGEST-VALUE: Redis's computeDatasetDigest / xorObjectDigest, so equal datasets give
// equal digests on deadbolt and on Redis.

/// `digest ^= SHA1(data)`: order-independent accumulation (sets, hash fields, keys).
fn xor_digest(digest: &mut [u8; 20], data: &[u8]) {
    let h = sha1_smol::Sha1::from(data).digest().bytes();
    for (d, h) in digest.iter_mut().zip(h) {
        *d ^= h;
    }
}

/// `digest = SHA1(digest ^ SHA1(data))`: order-dependent accumulation (list elements).
fn mix_digest(digest: &mut [u8; 20], data: &[u8]) {
    xor_digest(digest, data);
    *digest = sha1_smol::Sha1::from(&digest[..]).digest().bytes();
}

/// Redis's object type numbers (OBJ_STRING… OBJ_STREAM), hashed big-endian.
fn type_number(v: &Value) -> u32 {
    match v {
        Value::Str(_) => 0,
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::ZSet(_) => 3,
        Value::Hash(_) => 4,
        Value::Stream(_) => 6,
    }
}

/// xorObjectDigest: mixes the value (and whether it has a TTL) into `digest`.
fn value_digest(digest: &mut [u8; 20], v: &Value, has_expire: bool) {
    mix_digest(digest, &type_number(v).to_be_bytes());
    match v {
        Value::Str(s) => mix_digest(digest, s),
        Value::List(l) => {
            for e in l {
                mix_digest(digest, e);
            }
        }
        Value::Set(s) => {
            for m in s.iter() {
                xor_digest(digest, m);
            }
        }
        Value::ZSet(z) => {
            for (m, score) in z.iter_from(0) {
                let mut ele = [0u8; 20];
                mix_digest(&mut ele, m);
                mix_digest(&mut ele, crate::protocol::number::fmt_g17(score).as_bytes());
                xor_digest(digest, &ele);
            }
        }
        Value::Hash(h) => {
            for (f, val) in h.iter() {
                let mut ele = [0u8; 20];
                mix_digest(&mut ele, f);
                mix_digest(&mut ele, val);
                xor_digest(digest, &ele);
            }
        }
        Value::Stream(s) => {
            use crate::store::stream::StreamId;
            let all = StreamId {
                ms: u64::MAX,
                seq: u64::MAX,
            };
            s.range(StreamId { ms: 0, seq: 0 }, all, false, |id, fields| {
                mix_digest(digest, format!("{}.{}", id.ms, id.seq).as_bytes());
                for (f, val) in &fields {
                    mix_digest(digest, f);
                    mix_digest(digest, val);
                }
                true
            });
        }
    }
    if has_expire {
        xor_digest(digest, b"!!expire!!");
    }
}

/// computeDatasetDigest: every stored key (logically expired ones too, as Redis iterates its
/// dict), xor-ed together, each database's index mixed in before its keys.
pub fn dataset_digest(ctx: &Ctx) -> [u8; 20] {
    let mut fin = [0u8; 20];
    for (i, db) in ctx.srv.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        mix_digest(&mut fin, &(i as u32).to_be_bytes());
        for (key, e) in db.iter() {
            let mut d = [0u8; 20];
            mix_digest(&mut d, key);
            value_digest(&mut d, &e.value, e.expires_at != 0);
            xor_digest(&mut fin, &d);
        }
    }
    fin
}

// ---------------------------------------------------------------------------------------------
// RELOAD, LOADAOF

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: saves the RDB file (unless NOSAVE), empties the
/// dataset (unless NOFLUSH) and loads the file back. The reload counts as a change of every key
/// it loads, so the append-only log and a cluster's followers end with what memory holds.
fn reload(ctx: &mut Ctx, opts: &[Bytes]) -> CmdResult {
    let (mut merge, mut flush, mut save) = (false, true, true);
    for o in opts {
        if is(o, "merge") {
            merge = true;
        } else if is(o, "noflush") {
            flush = false;
        } else if is(o, "nosave") {
            save = false;
        } else {
            return Err(CmdError::err(
                "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
            ));
        }
    }
    if save {
        ctx.host.rdb_save(ctx.srv, false).map_err(CmdError::err)?;
    }
    let path = crate::persist::rdb_file::path(
        &ctx.srv.config.dir,
        ctx.srv.config.compat_value("dbfilename"),
    );
    let load_error = || CmdError::err("ERR Error trying to load the RDB dump");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!("Fatal error loading the DB: {e}. Exiting.");
            if flush {
                empty_data(ctx);
            }
            return Err(load_error());
        }
    };
    // Decoded whole before anything changes: a damaged file leaves the data as it was (Redis
    // would have emptied it first and then exited).
    let now = ctx.now;
    let databases = ctx.srv.dbs.len();
    let mut loaded: Vec<(usize, Bytes, Value, u64)> = Vec::new();
    let functions =
        match crate::persist::rdb_file::decode(&bytes, now, databases, |db, k, v, at| {
            loaded.push((db, k, v, at))
        }) {
            Ok(l) => l.functions,
            Err(e) => {
                tracing::warn!("{e}");
                return Err(load_error());
            }
        };
    if !flush && !merge {
        // Redis stops the server on a key it holds already; here the load is refused whole.
        if let Some((_, k, _, _)) = loaded
            .iter()
            .find(|(db, k, _, _)| ctx.srv.dbs[*db].peek(k).is_some())
        {
            tracing::warn!(
                "RDB has duplicated key '{}' in DB 0",
                String::from_utf8_lossy(k)
            );
            return Err(load_error());
        }
    }
    if flush {
        empty_data(ctx);
    }
    // The libraries come first in the file, as Redis loads them: one that exists already
    // fails the load unless MERGE (RDBFLAGS_ALLOW_DUP) lets it replace the old one.
    for code in functions {
        let mut load = vec![Bytes::from_static(b"FUNCTION"), Bytes::from_static(b"LOAD")];
        if merge {
            load.push(Bytes::from_static(b"REPLACE"));
        }
        load.push(code);
        let error = match super::dispatch::call_handler(ctx, &load) {
            Err(e) => Some(e.to_string()),
            Ok(Frame::Error(e)) => Some(String::from_utf8_lossy(&e).into_owned()),
            Ok(_) => None,
        };
        if let Some(e) = error {
            tracing::warn!("Failed loading library, {}", e.trim_start_matches("ERR "));
            return Err(load_error());
        }
    }
    for (db, k, v, at) in loaded {
        ctx.srv.dbs[db].set(&k, v, at);
    }
    tracing::warn!("DB reloaded by DEBUG RELOAD");
    Ok(Frame::ok())
}

/// Redis's emptyData: every database emptied, watchers and tracking clients told.
fn empty_data(ctx: &mut Ctx) {
    // Redis's emptyData drops the function libraries with the keys.
    ctx.srv.functions = None;
    ctx.srv.signal_flushed_db(None);
    for db in ctx.srv.dbs.iter_mut() {
        db.clear();
    }
}

/// DEBUG LOADAOF: writes the log's buffer to its file, empties the dataset and replays the
/// append-only files, as a start-up would. What it loads is what the log already holds, so
/// nothing of it is logged again.
fn loadaof(ctx: &mut Ctx) -> CmdResult {
    if ctx.host.cluster().is_some() {
        // A cluster's log is the raft log: there is no append-only file to load.
        return Err(syntax_error(b"loadaof"));
    }
    if !ctx.host.aof_flush() {
        return Err(CmdError::err(
            "ERR Error writing to the AOF file: DEBUG LOADAOF did not load it",
        ));
    }
    // With `appendonly no` Redis loads what the directory holds (a BGREWRITEAOF writes it).
    let dir = std::path::Path::new(&ctx.srv.config.dir).join(&ctx.srv.config.appenddirname);
    let files = match crate::persist::aof::Aof::files_to_load(&dir, &ctx.srv.config.appendfilename)
    {
        Ok(files) => files,
        // Redis exits here (no manifest to load); deadbolt refuses and keeps serving.
        Err(_) if ctx.host.aof().is_none() => {
            return Err(CmdError::err(
                "ERR DEBUG LOADAOF found no append only file to load (appendonly no and no BGREWRITEAOF yet)",
            ))
        }
        Err(e) => return Err(CmdError::erf(e)),
    };
    empty_data(ctx);
    let mut loader = crate::persist::load::Loader::new(files, ctx.srv.config.aof_load_truncated)
        .knowing(|a| super::dispatch::resolve(a).is_ok());
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let nowhere: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
    let mut client =
        crate::machine::client::Client::new(0, nowhere, nowhere, tx, Default::default());
    // The log's writes were acknowledged before: lock-restart-delay does not refuse them.
    let refused_until = ctx.srv.writes_refused_until.take();
    let result = loop {
        match loader.next_unit() {
            Ok(crate::persist::load::Step::Apply(cmds)) => {
                for argv in cmds {
                    let Ok(id) = super::dispatch::resolve(&argv) else {
                        continue;
                    };
                    let mut inner = Ctx {
                        srv: &mut *ctx.srv,
                        host: &mut *ctx.host,
                        client: &mut client,
                        now: crate::clock::unix_ms(),
                        in_script: false,
                    };
                    super::dispatch::run(&mut inner, id, &argv);
                }
            }
            Ok(crate::persist::load::Step::Done) => break Ok(()),
            Err(crate::persist::load::LoadError::Fatal(msg)) => break Err(msg),
        }
    };
    ctx.srv.writes_refused_until = refused_until;
    // The data now is the log's: nothing of this unit goes to the log again.
    ctx.srv.dbs.discard_changes();
    match result {
        Ok(()) => {
            tracing::warn!("Append Only File loaded by DEBUG LOADAOF");
            Ok(Frame::ok())
        }
        Err(msg) => {
            tracing::warn!("DEBUG LOADAOF: {msg}");
            Err(CmdError::erf(format!("DEBUG LOADAOF failed: {msg}")))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// OBJECT, LISTPACK, POPULATE, PROTOCOL, QUICKLIST-PACKED-THRESHOLD, STRINGMATCH-TEST

/// DEBUG OBJECT: the stored value (expired or not, as Redis's dictFind), with Redis's fields.
fn object(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    let lim = ctx.srv.config.encoding_limits();
    let now = ctx.now;
    let db = &ctx.srv.dbs[ctx.client.db];
    let Some(e) = db.peek(key) else {
        return Err(CmdError::NoSuchKey);
    };
    let v = &e.value;
    let str_enc = db.str_enc(key);
    let enc = encoding::name_as(v, str_enc, &lim);
    let refcount: i64 = match v {
        Value::Str(s)
            if str_enc == crate::store::keyspace::StrEnc::ByContent
                && encoding::str_encoding(s) == "int"
                && crate::protocol::number::parse_i64(s)
                    .is_some_and(|n| (0..10000).contains(&n)) =>
        {
            i32::MAX as i64
        }
        _ => 1,
    };
    // rdbSavedObjectLen: the value's RDB serialization (a DUMP payload less its type byte,
    // 2-byte version and 8-byte checksum).
    let serialized = crate::store::rdb::dump(v, &lim).len().saturating_sub(11);
    let lru = db.lru_of(key).unwrap_or(0);
    let idle = crate::store::keyspace::idle_seconds(lru, crate::store::keyspace::lru_clock(now));
    let mut extra = String::new();
    if let Value::List(l) = v {
        let nodes = crate::store::rdb::quicklist_nodes(l.iter().map(|b| &b[..]), lim.list_fill);
        let count: usize = nodes.iter().map(|n| n.0).sum();
        let size: usize = nodes.iter().map(|n| n.1).sum();
        let n = nodes.len().max(1);
        extra = format!(
            " ql_nodes:{} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:{} ql_uncompressed_size:{}",
            nodes.len(),
            count as f64 / n as f64,
            lim.list_fill,
            (ctx.srv.config.compat_value("list-compress-depth") != "0") as u8,
            size
        );
    }
    Ok(Frame::Simple(
        format!(
            "Value at:{:p} refcount:{refcount} encoding:{enc} serializedlength:{serialized} lru:{lru} lru_seconds_idle:{idle}{extra}",
            v as *const Value
        )
        .into(),
    ))
}

/// DEBUG LISTPACK: Redis prints the listpack's structure on its standard output.
fn listpack(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    let lim = ctx.srv.config.encoding_limits();
    let now = ctx.now;
    let Some(e) = ctx.srv.dbs[ctx.client.db].get_untouched(key, now) else {
        return Err(CmdError::NoSuchKey);
    };
    if encoding::name(&e.value, &lim) != "listpack" {
        return Err(CmdError::err("ERR Not a listpack encoded object."));
    }
    let mut out = String::new();
    let mut n = 0;
    let mut entry = |b: &[u8]| {
        out.push_str(&format!(
            "{{\n\t[{n}] element: {}\n}}\n",
            String::from_utf8_lossy(b)
        ));
        n += 1;
    };
    match &e.value {
        Value::Hash(h) => h.iter().for_each(|(f, v)| {
            entry(f);
            entry(v);
        }),
        Value::ZSet(z) => z.iter_from(0).for_each(|(m, s)| {
            entry(m);
            entry(crate::protocol::number::fmt_g17(s).as_bytes());
        }),
        Value::Set(s) => s.iter().for_each(|m| entry(m)),
        _ => {}
    }
    use std::io::Write;
    let _ = std::io::stdout().write_all(out.as_bytes());
    Ok(Frame::simple("Listpack structure printed on stdout"))
}

/// DEBUG POPULATE <count> [<prefix>] [<size>]: string keys `prefix:N` holding `value:N`
/// (padded with NULs or cut to `size`); existing keys are left alone.
fn populate(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    // getPositiveLongFromObjectOrReply: one message for a non-number and a negative one.
    let positive = |a: &[u8]| -> CmdResult<u64> {
        int_arg(a)
            .ok()
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| CmdError::err("ERR value is out of range, must be positive"))
    };
    let count = positive(&argv[2])?;
    let size = match argv.get(4) {
        Some(a) => positive(a)?,
        None => 0,
    };
    // Redis allocates the value at once: bounded here by proto-max-bulk-len, as any value.
    if size > ctx.srv.config.proto_max_bulk_len.max(0) as u64 {
        return Err(CmdError::err("ERR value is out of range, must be positive"));
    }
    let prefix: &[u8] = argv.get(3).map_or(b"key", |p| c_str(p));
    let now = ctx.now;
    for j in 0..count {
        let mut key = Vec::with_capacity(prefix.len() + 21);
        key.extend_from_slice(prefix);
        key.push(b':');
        key.extend_from_slice(itoa::Buffer::new().format(j).as_bytes());
        let key: Vec<u8> = key.into_iter().take(127).collect();
        if ctx.srv.dbs[ctx.client.db].contains(&key, now) {
            continue;
        }
        let text = format!("value:{j}");
        let val = if size == 0 {
            Bytes::from(text)
        } else {
            let mut v = vec![0u8; size as usize];
            let n = text.len().min(size as usize);
            v[..n].copy_from_slice(&text.as_bytes()[..n]);
            Bytes::from(v)
        };
        ctx.srv.dbs[ctx.client.db].set(&key, Value::Str(val), 0);
        ctx.srv.signal_modified_key(ctx.client.db, &key);
    }
    Ok(Frame::ok())
}

fn protocol(ctx: &mut Ctx, name: &[u8]) -> CmdResult {
    let int = Frame::Integer;
    let bulk = Frame::bulk_static;
    Ok(if is(name, "string") {
        bulk("Hello World")
    } else if is(name, "integer") {
        int(12345)
    } else if is(name, "double") {
        // Redis's literal, not π.
        #[allow(clippy::approx_constant)]
        Frame::Double(3.141)
    } else if is(name, "bignum") {
        Frame::BigNumber(Bytes::from_static(b"1234567999999999999999999999999999999"))
    } else if is(name, "null") {
        Frame::Null
    } else if is(name, "array") {
        Frame::Array((0..3).map(int).collect())
    } else if is(name, "set") {
        Frame::Set((0..3).map(int).collect())
    } else if is(name, "map") {
        Frame::Map((0..3).map(|j| (int(j), Frame::Boolean(j == 1))).collect())
    } else if is(name, "attrib") {
        Frame::Attribute(
            vec![(
                bulk("key-popularity"),
                Frame::Array(vec![bulk("key:123"), int(90)]),
            )],
            Box::new(bulk("Some real reply following the attribute")),
        )
    } else if is(name, "push") {
        // From a script the push would reach the calling connection, not the script: refused
        // there as for a RESP2 client.
        if !ctx.client.resp3() || ctx.in_script {
            return Err(CmdError::err("ERR RESP2 is not supported by this command"));
        }
        ctx.srv
            .self_pushes
            .push(Frame::Push(vec![bulk("server-cpu-usage"), int(42)]));
        bulk("Some real reply following the push reply")
    } else if is(name, "true") {
        Frame::Boolean(true)
    } else if is(name, "false") {
        Frame::Boolean(false)
    } else if is(name, "verbatim") {
        Frame::Verbatim(Bytes::from_static(b"This is a verbatim\nstring"))
    } else {
        return Err(CmdError::err("ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false"));
    })
}

/// DEBUG QUICKLIST-PACKED-THRESHOLD <size>: elements of at least `size` bytes are plain
/// quicklist nodes of their own, as DEBUG OBJECT's node counts, DUMP and the RDB file show
/// (store/rdb.rs); 0 restores 1 GB, up to 4 GB is accepted, as Redis's
/// quicklistisSetPackedThreshold. deadbolt lays out nodes when it serializes a list, Redis when
/// it inserts: a list written under another threshold is laid out by the one in force now.
fn packed_threshold(arg: &[u8]) -> CmdResult {
    let range =
        || CmdError::err("ERR argument must be a memory value bigger than 1 and smaller than 4gb");
    let text = std::str::from_utf8(arg).map_err(|_| range())?;
    let sz = crate::config::parse_memory(text).ok_or_else(range)?;
    if !crate::store::rdb::set_packed_threshold(sz) {
        return Err(range());
    }
    Ok(Frame::ok())
}

/// DEBUG STRINGMATCH-TEST: Redis's fuzz of stringmatchlen, here of the glob matcher: random
/// patterns against random strings must return, whatever they are.
fn stringmatch_test() {
    let mut pat = [0u8; 32];
    let mut s = [0u8; 32];
    for _ in 0..1000 {
        let pl = fastrand::usize(..pat.len());
        let sl = fastrand::usize(..s.len());
        pat[..pl].iter_mut().for_each(|b| *b = fastrand::u8(..));
        s[..sl].iter_mut().for_each(|b| *b = fastrand::u8(..));
        let _ = super::args::glob_match(&pat[..pl], &s[..sl], false);
    }
}
