//! Value introspection: OBJECT (ENCODING FREQ IDLETIME REFCOUNT HELP) and MEMORY (USAGE STATS
//! DOCTOR MALLOC-STATS PURGE HELP).
//!
//! Encodings and sizes are the ones Redis 7.0 would have for the same data under the live
//! thresholds (store/encoding.rs). OBJECT IDLETIME reads the key's LRU clock, kept beside its
//! bytes in the entry (store/keymap.rs); OBJECT FREQ answers as Redis does without an LFU
//! policy (deadbolt only has noeviction).

use super::args::{int_arg, is};
use super::spec::Ctx;
use super::spec::{flags::*, CommandSpec, KeySpec, KeySpecDoc, NO_KEYS};
use super::support::{limits, overhead, Overhead};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use crate::store::encoding;
use bytes::Bytes;

const KEY2: KeySpec = KeySpec {
    first: 2,
    last: 2,
    step: 1,
};

const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    acl: &'static [&'static str],
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, keys, acl, handler)
}

const KEY_READ: &[&str] = &["keyspace", "read", "slow"];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "object",
        arity: -2,
        flags: 0,
        keys: NO_KEYS,
        acl: &["slow"],
        handler: object_help,
        subcommands: &[
            sub("encoding", 3, READONLY, KEY2, KEY_READ, object_encoding),
            sub("freq", 3, READONLY, KEY2, KEY_READ, object_freq),
            sub("idletime", 3, READONLY, KEY2, KEY_READ, object_idletime),
            sub("refcount", 3, READONLY, KEY2, KEY_READ, object_refcount),
            sub(
                "help",
                2,
                LOADING | STALE,
                NO_KEYS,
                &["keyspace", "slow"],
                object_help,
            ),
        ],
    },
    CommandSpec {
        name: "memory",
        arity: -2,
        flags: 0,
        keys: NO_KEYS,
        acl: &["slow"],
        handler: memory_help,
        subcommands: &[
            sub("usage", -3, READONLY, KEY2, &["read", "slow"], memory_usage),
            sub("stats", 2, 0, NO_KEYS, &["slow"], memory_stats),
            sub("doctor", 2, 0, NO_KEYS, &["slow"], memory_doctor),
            sub(
                "malloc-stats",
                2,
                0,
                NO_KEYS,
                &["slow"],
                memory_malloc_stats,
            ),
            sub("purge", 2, 0, NO_KEYS, &["slow"], memory_purge),
            sub("help", 2, LOADING | STALE, NO_KEYS, &["slow"], memory_help),
        ],
    },
];

pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    ("object|encoding", &[KeySpecDoc::range(&["RO"], 2, 0)]),
    ("object|freq", &[KeySpecDoc::range(&["RO"], 2, 0)]),
    ("object|idletime", &[KeySpecDoc::range(&["RO"], 2, 0)]),
    ("object|refcount", &[KeySpecDoc::range(&["RO"], 2, 0)]),
    ("memory|usage", &[KeySpecDoc::range(&["RO"], 2, 0)]),
];

pub static TIPS: &[(&str, &[&str])] = &[
    ("object|encoding", &["nondeterministic_output"]),
    ("object|freq", &["nondeterministic_output"]),
    ("object|idletime", &["nondeterministic_output"]),
    ("object|refcount", &["nondeterministic_output"]),
    (
        "memory|stats",
        &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
    ),
    (
        "memory|doctor",
        &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
    ),
    (
        "memory|malloc-stats",
        &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
    ),
    (
        "memory|purge",
        &["request_policy:all_shards", "response_policy:all_succeeded"],
    ),
];

fn help(lines: &[&'static str]) -> Frame {
    Frame::Array(lines.iter().map(|l| Frame::simple(l)).collect())
}

fn object_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(help(&[
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Prints this help.",
    ]))
}

/// The live value at argv[2] (expired keys are dropped first), or the null OBJECT answers.
/// Redis's objectCommandLookup: LOOKUP_NOTOUCH, so looking does not reset the idle time.
fn lookup<'a>(ctx: &'a mut Ctx, argv: &[Bytes]) -> Option<&'a crate::store::Value> {
    let now = ctx.now;
    ctx.db().get_untouched(&argv[2], now).map(|e| &e.value)
}

fn object_encoding(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let lim = limits(ctx);
    let enc = ctx.db().str_enc(&argv[2]);
    Ok(match lookup(ctx, argv) {
        Some(v) => Frame::bulk_static(encoding::name_as(v, enc, &lim)),
        None => Frame::Null,
    })
}

fn object_refcount(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let by_content = ctx.db().str_enc(&argv[2]) == crate::store::keyspace::StrEnc::ByContent;
    Ok(match lookup(ctx, argv) {
        // Redis shares the objects of the integers 0..9999 (OBJ_SHARED_INTEGERS), whose
        // count is OBJ_SHARED_REFCOUNT.
        Some(crate::store::Value::Str(s))
            if encoding::str_encoding(s) == "int"
                && by_content
                && crate::protocol::number::parse_i64(s)
                    .is_some_and(|v| (0..10000).contains(&v)) =>
        {
            Frame::Integer(i32::MAX as i64)
        }
        Some(_) => Frame::Integer(1),
        None => Frame::Null,
    })
}

/// Seconds since the key was last read or written, from its LRU clock (store/keymap.rs). The
/// LFU policies that make Redis refuse this are never accepted here.
fn object_idletime(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now;
    Ok(match ctx.db().idle_seconds(&argv[2], now) {
        Some(idle) => Frame::Integer(idle as i64),
        None => Frame::Null,
    })
}

fn object_freq(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    if lookup(ctx, argv).is_none() {
        return Ok(Frame::Null);
    }
    Err(CmdError::err(
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
    ))
}

fn memory_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(help(&[
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Return memory problems reports.",
        "MALLOC-STATS",
        "    Return internal statistics report from the memory allocator.",
        "PURGE",
        "    Attempt to purge dirty pages for reclamation by the allocator.",
        "STATS",
        "    Return information about the memory usage of the server.",
        "USAGE <key> [SAMPLES <count>]",
        "    Return memory in bytes used by <key> and its value. Nested values are",
        "    sampled up to <count> times (default: 5, 0 means sample all).",
        "HELP",
        "    Prints this help.",
    ]))
}

fn memory_usage(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let mut samples = 5usize;
    let mut i = 3;
    while i < argv.len() {
        if is(&argv[i], "samples") && i + 1 < argv.len() {
            let n = int_arg(&argv[i + 1])?;
            if n < 0 {
                return Err(CmdError::Syntax);
            }
            samples = usize::try_from(n).unwrap_or(usize::MAX);
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let lim = limits(ctx);
    // Redis finds the entry in the dict directly: a key past its deadline that no lookup has
    // removed yet is still counted.
    let key = &argv[2];
    Ok(match ctx.db().peek(key) {
        Some(e) => Frame::Integer(encoding::memory_usage(key, &e.value, &lim, samples) as i64),
        None => Frame::Null,
    })
}

impl Overhead {
    pub fn total(&self) -> usize {
        self.startup
            + self.clients
            + self.aof_buffer
            + self.lua
            + self.functions
            + self.dbs.iter().map(|d| d.1).sum::<usize>()
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn memory_stats(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let o = overhead(ctx.srv, &*ctx.host);
    let total = o.total();
    let dataset = o.used.saturating_sub(total);
    let net = o.used.saturating_sub(o.startup).max(1);
    let int = |v: usize| Frame::Integer(v as i64);
    let signed = |a: usize, b: usize| Frame::Integer(a as i64 - b as i64);
    let key = |k: &str| Frame::bulk_from(k);
    let mut m = vec![
        (key("peak.allocated"), int(o.peak)),
        (key("total.allocated"), int(o.used)),
        (key("startup.allocated"), int(o.startup)),
        (key("replication.backlog"), int(0)),
        (key("clients.slaves"), int(0)),
        (key("clients.normal"), int(o.clients)),
        (key("cluster.links"), int(0)),
        (key("aof.buffer"), int(o.aof_buffer)),
        (key("lua.caches"), int(o.lua)),
        (key("functions.caches"), int(o.functions)),
    ];
    for &(id, main) in &o.dbs {
        m.push((
            key(&format!("db.{id}")),
            Frame::Map(vec![
                (key("overhead.hashtable.main"), int(main)),
                // Deadlines live in the entries: there is no second table.
                (key("overhead.hashtable.expires"), int(0)),
                (key("overhead.hashtable.slot-to-keys"), int(0)),
            ]),
        ));
    }
    let bytes_per_key = net.checked_div(o.keys).unwrap_or(0);
    let dataset_perc = dataset as f64 * 100.0 / net as f64;
    m.extend([
        (key("overhead.total"), int(total)),
        (key("keys.count"), int(o.keys)),
        (key("keys.bytes-per-key"), int(bytes_per_key)),
        (key("dataset.bytes"), int(dataset)),
        (key("dataset.percentage"), Frame::Double(dataset_perc)),
        (
            key("peak.percentage"),
            Frame::Double(ratio(o.used * 100, o.peak)),
        ),
        (key("allocator.allocated"), int(o.used)),
        (key("allocator.active"), int(o.committed)),
        (key("allocator.resident"), int(o.rss)),
        (
            key("allocator-fragmentation.ratio"),
            Frame::Double(ratio(o.committed, o.used)),
        ),
        (
            key("allocator-fragmentation.bytes"),
            signed(o.committed, o.used),
        ),
        (
            key("allocator-rss.ratio"),
            Frame::Double(ratio(o.rss, o.committed)),
        ),
        (key("allocator-rss.bytes"), signed(o.rss, o.committed)),
        (
            key("rss-overhead.ratio"),
            Frame::Double(ratio(o.rss, o.rss)),
        ),
        (key("rss-overhead.bytes"), int(0)),
        (key("fragmentation"), Frame::Double(ratio(o.rss, o.used))),
        (key("fragmentation.bytes"), signed(o.rss, o.used)),
    ]);
    Ok(Frame::Map(m))
}

/// Redis's getMemoryDoctorReport, over the same figures.
fn memory_doctor(ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    let o = overhead(ctx.srv, &*ctx.host);
    let scripts = crate::script::memory_and_scripts(ctx.srv).1;
    let clients = ctx.srv.local.connected_clients.get().max(1);
    let over = |a: usize, b: usize, r: f64| ratio(a, b) > r && a.saturating_sub(b) > 10 << 20;
    let text = if o.used < 5 << 20 {
        "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n".to_string()
    } else {
        let mut issues: Vec<String> = Vec::new();
        if o.peak as f64 / o.used as f64 > 1.5 {
            issues.push(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n".into());
        }
        if over(o.rss, o.used, 1.4) {
            issues.push(format!(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"{}\".\n\n", crate::alloc::allocator_name()));
        }
        if over(o.committed, o.used, 1.1) {
            issues.push(" * High allocator fragmentation: This instance has an allocator external fragmentation greater than 1.1. This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. You can try enabling 'activedefrag' config option.\n\n".into());
        }
        if over(o.rss, o.committed, 1.1) {
            issues.push(" * High allocator RSS overhead: This instance has an RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the allocator is much larger than the sum what the allocator actually holds). This problem is usually due to a large peak memory (check if there is a peak memory entry above in the report), you can try the MEMORY PURGE command to reclaim it.\n\n".into());
        }
        if o.clients / clients > 1024 * 200 {
            issues.push(" * Big client buffers: The clients output buffers in this instance are greater than 200K per client (on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data piles on the Redis instance output buffer, or clients sending commands with large replies or very large sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, or to understand better why certain clients are using a big amount of memory.\n\n".into());
        }
        if scripts > 1000 {
            issues.push(" * Many scripts: There seem to be many cached scripts in this instance (more than 1000). This may be because scripts are generated and `EVAL`ed, instead of being parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT FLUSH` is called periodically, the scripts' caches may end up consuming most of your memory.\n\n".into());
        }
        if issues.is_empty() {
            "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n".to_string()
        } else {
            let mut s = "Sam, I detected a few issues in this Redis instance memory implants:\n\n"
                .to_string();
            for i in issues {
                s.push_str(&i);
            }
            s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
            s
        }
    };
    Ok(Frame::Verbatim(Bytes::from(text)))
}

fn memory_malloc_stats(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Verbatim(Bytes::from(crate::alloc::stats_text())))
}

fn memory_purge(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    crate::alloc::purge();
    Ok(Frame::ok())
}
