//! Streams and consumer groups (Redis 7.0's t_stream.c): XADD XLEN XRANGE XREVRANGE XREAD
//! XDEL XTRIM XSETID XGROUP XREADGROUP XACK XPENDING XCLAIM XAUTOCLAIM XINFO. The data layer is
//! store/stream.rs; blocking reads park through cmd/blocking.rs like BLPOP.

use super::args::{int_arg, is};
use super::blocking;
use super::spec::{event, Ctx};
use super::spec::{flags::*, CommandSpec, KeySpec, KeySpecDoc, KEY1, NO_KEYS};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Frame;
use crate::store::stream::{
    AppendError, Fields, Group, Nack, Stream, StreamId, Trim, INVALID_ENTRIES_READ,
};
use crate::store::value::own;
use crate::store::waiters::WaitKind;
use crate::store::Value;
use bytes::Bytes;

const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: super::spec::Handler,
) -> CommandSpec {
    CommandSpec::leaf(name, arity, flags, keys, &["stream"], handler)
}

const KEY2: KeySpec = KeySpec {
    first: 2,
    last: 2,
    step: 1,
};

pub static COMMANDS: &[CommandSpec] = &[
    spec("xadd", -5, WRITE | DENYOOM | FAST, KEY1, xadd),
    spec("xlen", 2, READONLY | FAST, KEY1, xlen),
    spec("xrange", -4, READONLY, KEY1, xrange),
    spec("xrevrange", -4, READONLY, KEY1, xrevrange),
    spec(
        "xread",
        -4,
        READONLY | BLOCKING | MOVABLE_KEYS,
        NO_KEYS,
        xread,
    ),
    spec(
        "xreadgroup",
        -7,
        WRITE | BLOCKING | MOVABLE_KEYS,
        NO_KEYS,
        xreadgroup,
    ),
    spec("xdel", -3, WRITE | FAST, KEY1, xdel),
    spec("xtrim", -4, WRITE, KEY1, xtrim),
    spec("xsetid", -3, WRITE | DENYOOM | FAST, KEY1, xsetid),
    spec("xack", -4, WRITE | FAST, KEY1, xack),
    spec("xpending", -3, READONLY, KEY1, xpending),
    spec("xclaim", -6, WRITE | FAST, KEY1, xclaim),
    spec("xautoclaim", -6, WRITE | FAST, KEY1, xautoclaim),
    CommandSpec {
        name: "xgroup",
        arity: -2,
        flags: 0,
        keys: NO_KEYS,
        acl: &[],
        handler: xgroup_help,
        subcommands: &[
            spec("create", -5, WRITE | DENYOOM, KEY2, xgroup_create),
            spec(
                "createconsumer",
                5,
                WRITE | DENYOOM,
                KEY2,
                xgroup_createconsumer,
            ),
            spec("delconsumer", 5, WRITE, KEY2, xgroup_delconsumer),
            spec("destroy", 4, WRITE, KEY2, xgroup_destroy),
            spec("setid", -5, WRITE, KEY2, xgroup_setid),
            spec("help", 2, LOADING | STALE, NO_KEYS, xgroup_help),
        ],
    },
    CommandSpec {
        name: "xinfo",
        arity: -2,
        flags: 0,
        keys: NO_KEYS,
        acl: &[],
        handler: xinfo_help,
        subcommands: &[
            spec("consumers", 4, READONLY, KEY2, xinfo_consumers),
            spec("groups", 3, READONLY, KEY2, xinfo_groups),
            spec("stream", -3, READONLY, KEY2, xinfo_stream),
            spec("help", 2, LOADING | STALE, NO_KEYS, xinfo_help),
        ],
    },
];

pub static KEY_SPECS: &[(&str, &[KeySpecDoc])] = &[
    (
        "xadd",
        &[KeySpecDoc::range(&["RW", "update"], 1, 0)
            .with_notes("UPDATE instead of INSERT because of the optional trimming feature")],
    ),
    ("xlen", &[KeySpecDoc::range(&["RO"], 1, 0)]),
    ("xrange", &[KeySpecDoc::range(&["RO", "access"], 1, 0)]),
    ("xrevrange", &[KeySpecDoc::range(&["RO", "access"], 1, 0)]),
    (
        "xread",
        &[KeySpecDoc::keyword_range(
            &["RO", "access"],
            "STREAMS",
            1,
            -1,
            2,
        )],
    ),
    (
        "xreadgroup",
        &[KeySpecDoc::keyword_range(
            &["RO", "access"],
            "STREAMS",
            4,
            -1,
            2,
        )],
    ),
    ("xdel", &[KeySpecDoc::range(&["RW", "delete"], 1, 0)]),
    ("xtrim", &[KeySpecDoc::range(&["RW", "delete"], 1, 0)]),
    ("xsetid", &[KeySpecDoc::range(&["RW", "update"], 1, 0)]),
    ("xack", &[KeySpecDoc::range(&["RW", "update"], 1, 0)]),
    ("xpending", &[KeySpecDoc::range(&["RO", "access"], 1, 0)]),
    ("xclaim", &[KeySpecDoc::range(&["RW", "update"], 1, 0)]),
    ("xautoclaim", &[KeySpecDoc::range(&["RW", "delete"], 1, 0)]),
    (
        "xgroup|create",
        &[KeySpecDoc::range(&["RW", "insert"], 2, 0)],
    ),
    (
        "xgroup|createconsumer",
        &[KeySpecDoc::range(&["RW", "insert"], 2, 0)],
    ),
    (
        "xgroup|delconsumer",
        &[KeySpecDoc::range(&["RW", "delete"], 2, 0)],
    ),
    (
        "xgroup|destroy",
        &[KeySpecDoc::range(&["RW", "delete"], 2, 0)],
    ),
    (
        "xgroup|setid",
        &[KeySpecDoc::range(&["RW", "update"], 2, 0)],
    ),
    (
        "xinfo|consumers",
        &[KeySpecDoc::range(&["RO", "access"], 2, 0)],
    ),
    (
        "xinfo|groups",
        &[KeySpecDoc::range(&["RO", "access"], 2, 0)],
    ),
    (
        "xinfo|stream",
        &[KeySpecDoc::range(&["RO", "access"], 2, 0)],
    ),
];

pub static TIPS: &[(&str, &[&str])] = &[
    ("xadd", &["nondeterministic_output"]),
    ("xtrim", &["nondeterministic_output"]),
    ("xpending", &["nondeterministic_output"]),
    ("xclaim", &["nondeterministic_output"]),
    ("xautoclaim", &["nondeterministic_output"]),
    ("xinfo|consumers", &["nondeterministic_output"]),
];

// ---- IDs ---------------------------------------------------------------------------------------

fn invalid_id() -> CmdError {
    CmdError::err("ERR Invalid stream ID specified as stream command argument")
}

/// What C string functions see of an argument: the bytes before the first NUL.
fn cstr(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(n) => &b[..n],
        None => b,
    }
}

/// Redis's string2ull: string2ll's strict form (non-negative), else strtoull's lenient one
/// (leading spaces, a sign, all of the rest digits, no overflow).
fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(v) = crate::protocol::number::parse_i64(s) {
        return (v >= 0).then_some(v as u64);
    }
    let mut p = 0;
    while p < s.len() && matches!(s[p], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        p += 1;
    }
    let mut neg = false;
    if p < s.len() && (s[p] == b'+' || s[p] == b'-') {
        neg = s[p] == b'-';
        p += 1;
    }
    if p >= s.len() {
        return None;
    }
    let mut v: u64 = 0;
    for &d in &s[p..] {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Redis's streamGenericParseIDOrReply. `star`: accept `<ms>-*` (XADD), reporting whether the
/// sequence was given.
fn parse_id_full(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    star: bool,
) -> CmdResult<(StreamId, bool)> {
    if arg.len() > 127 {
        return Err(invalid_id());
    }
    let s = cstr(arg);
    if strict && (s == b"-" || s == b"+") {
        return Err(invalid_id());
    }
    if s == b"-" {
        return Ok((StreamId::MIN, true));
    }
    if s == b"+" {
        return Ok((StreamId::MAX, true));
    }
    let (ms_part, seq_part) = match s.iter().position(|&c| c == b'-') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let ms = string2ull(ms_part).ok_or_else(invalid_id)?;
    match seq_part {
        Some(b"*") if star => Ok((StreamId::new(ms, 0), false)),
        Some(q) => Ok((
            StreamId::new(ms, string2ull(q).ok_or_else(invalid_id)?),
            true,
        )),
        None => Ok((StreamId::new(ms, missing_seq), true)),
    }
}

fn parse_id(arg: &[u8], missing_seq: u64) -> CmdResult<StreamId> {
    Ok(parse_id_full(arg, missing_seq, false, false)?.0)
}

fn parse_strict_id(arg: &[u8]) -> CmdResult<StreamId> {
    Ok(parse_id_full(arg, 0, true, false)?.0)
}

/// A range bound: `(` makes it exclusive (then `-`/`+` are refused).
fn parse_interval(arg: &[u8], missing_seq: u64) -> CmdResult<(StreamId, bool)> {
    if arg.len() > 1 && arg[0] == b'(' {
        Ok((parse_id_full(&arg[1..], missing_seq, true, false)?.0, true))
    } else {
        Ok((parse_id(arg, missing_seq)?, false))
    }
}

fn range_start(arg: &[u8]) -> CmdResult<StreamId> {
    let (id, ex) = parse_interval(arg, 0)?;
    if ex {
        return id
            .incr()
            .ok_or_else(|| CmdError::err("ERR invalid start ID for the interval"));
    }
    Ok(id)
}

fn range_end(arg: &[u8]) -> CmdResult<StreamId> {
    let (id, ex) = parse_interval(arg, u64::MAX)?;
    if ex {
        return id
            .decr()
            .ok_or_else(|| CmdError::err("ERR invalid end ID for the interval"));
    }
    Ok(id)
}

fn id_frame(id: StreamId) -> Frame {
    Frame::Bulk(id.to_bytes())
}

fn entry_frame(id: StreamId, fields: Fields) -> Frame {
    let mut kv = Vec::with_capacity(fields.len() * 2);
    for (f, v) in fields {
        kv.push(Frame::Bulk(f));
        kv.push(Frame::Bulk(v));
    }
    Frame::Array(vec![id_frame(id), Frame::Array(kv)])
}

/// Live entries `start..=end` as reply frames, at most `count` (0: all).
fn entries(s: &Stream, start: StreamId, end: StreamId, count: usize, rev: bool) -> Vec<Frame> {
    let mut out = Vec::new();
    s.range(start, end, rev, |id, fields| {
        out.push(entry_frame(id, fields));
        count == 0 || out.len() < count
    });
    out
}

fn ll(arg: &[u8]) -> CmdResult<i64> {
    int_arg(arg)
}

fn ll_or(arg: &[u8], msg: &'static str) -> CmdResult<i64> {
    int_arg(arg).map_err(|_| CmdError::err(msg))
}

fn nogroup(text: String) -> CmdError {
    CmdError::Other(std::borrow::Cow::Owned(format!("NOGROUP {text}")))
}

fn lossy(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(cstr(b))
}

/// Redis's `addReplySubcommandSyntaxError`.
fn subcommand_syntax(argv: &[Bytes]) -> CmdError {
    CmdError::erf(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        String::from_utf8_lossy(cstr(&argv[1][..argv[1].len().min(128)])),
        String::from_utf8_lossy(&argv[0]).to_uppercase()
    ))
}

// ---- lookups -----------------------------------------------------------------------------------

/// The stream for any write other than appends and head trims: the log will write its whole
/// state (see `Journal`).
fn stream_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a mut Stream>> {
    let mut s = ctx.value_mut(key, Value::as_stream_mut)?;
    if let Some(s) = s.as_deref_mut() {
        s.journal.break_off();
    }
    Ok(s)
}

/// Notes in the stream's journal what a consumer-group write touched (see `Journal`):
/// the group (its last ID and entries-read), pending entries and consumers.
fn touch(
    s: &mut Stream,
    logged: bool,
    group: &[u8],
    existed: bool,
    ids: &[StreamId],
    consumers: &[&[u8]],
) {
    if !logged {
        return;
    }
    if let Some(t) = s.journal.group(group, existed) {
        t.ids.extend(ids.iter().copied());
        for c in consumers {
            if !t.consumers.contains(*c) {
                t.consumers.insert(Bytes::copy_from_slice(c));
            }
        }
    }
}

/// The stream for writes the journal can follow (XADD, XTRIM, XDEL, consumer groups), with
/// whether it is kept (an append-only file reads it).
fn stream_mut_journaled<'a>(
    ctx: &'a mut Ctx,
    key: &[u8],
) -> CmdResult<Option<(&'a mut Stream, bool)>> {
    // Only the append-only file reads journals (a replicated log writes whole states; the
    // loader's replay has no log to write to).
    let logged = ctx.srv.dbs.records_changes() && ctx.host.aof().is_some();
    let s = ctx.value_mut(key, Value::as_stream_mut)?;
    Ok(s.map(|s| {
        if !logged {
            s.journal.break_off();
        }
        (s, logged)
    }))
}

fn stream_ref<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<Option<&'a Stream>> {
    let now = ctx.now;
    match ctx.db().get(key, now).map(|e| &e.value) {
        None => Ok(None),
        Some(Value::Stream(s)) => Ok(Some(s)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// `stream-node-max-bytes` and `stream-node-max-entries`.
fn node_limits(ctx: &Ctx) -> (u64, u64) {
    let get = |name: &str, default: u64| {
        ctx.srv
            .config
            .compat
            .get(name)
            .and_then(|v| parse_mem(v))
            .unwrap_or(default)
    };
    (
        get("stream-node-max-bytes", 4096),
        get("stream-node-max-entries", 100),
    )
}

/// A memory amount as the config writes it (`4096`, `4kb`, `1mb`, `1gb`, `1k`...).
fn parse_mem(v: &str) -> Option<u64> {
    let v = v.to_ascii_lowercase();
    let (num, mul) = [
        ("gb", 1u64 << 30),
        ("mb", 1 << 20),
        ("kb", 1 << 10),
        ("g", 1_000_000_000),
        ("m", 1_000_000),
        ("k", 1000),
        ("b", 1),
    ]
    .iter()
    .find_map(|(s, m)| v.strip_suffix(s).map(|n| (n.to_string(), *m)))
    .unwrap_or((v.clone(), 1));
    let n: i64 = num.parse().ok()?;
    u64::try_from(n).ok().map(|n| n.saturating_mul(mul))
}

/// The time a consumer is seen at: a follower applies the log at time 0 (exec/cluster.rs), and
/// a consumer's seen-time is this node's own reading, as on a Redis replica.
fn seen_clock(ctx: &Ctx) -> u64 {
    if ctx.now == 0 {
        crate::clock::unix_ms()
    } else {
        ctx.now
    }
}

// ---- XADD / XTRIM ------------------------------------------------------------------------------

struct AddTrim {
    id: Option<StreamId>,
    seq_given: bool,
    no_mkstream: bool,
    trim: Option<Trim>,
    approx: bool,
    limit: u64,
}

/// Redis's streamParseAddOrTrimArgsOrReply: the options and (XADD) the ID's position.
fn parse_add_trim(ctx: &Ctx, argv: &[Bytes], xadd: bool) -> CmdResult<(AddTrim, usize)> {
    let mut a = AddTrim {
        id: None,
        seq_given: true,
        no_mkstream: false,
        trim: None,
        approx: false,
        limit: 0,
    };
    let mut limit_given = false;
    let mut i = 2;
    let argc = argv.len();
    while i < argc {
        let more = argc - 1 - i;
        let opt = &argv[i][..];
        if xadd && cstr(opt) == b"*" {
            break;
        } else if is(opt, "maxlen") && more > 0 {
            if a.trim.is_some() {
                return Err(CmdError::err("ERR syntax error, MAXLEN and MINID options at the same time are not compatible"));
            }
            a.approx = false;
            let next = cstr(&argv[i + 1]);
            if more >= 2 && next == b"~" {
                a.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let n = ll(&argv[i + 1])?;
            if n < 0 {
                return Err(CmdError::err("ERR The MAXLEN argument must be >= 0."));
            }
            i += 1;
            a.trim = Some(Trim::MaxLen(n as u64));
        } else if is(opt, "minid") && more > 0 {
            if a.trim.is_some() {
                return Err(CmdError::err("ERR syntax error, MAXLEN and MINID options at the same time are not compatible"));
            }
            a.approx = false;
            let next = cstr(&argv[i + 1]);
            if more >= 2 && next == b"~" {
                a.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let id = parse_strict_id(&argv[i + 1])?;
            i += 1;
            a.trim = Some(Trim::MinId(id));
        } else if is(opt, "limit") && more > 0 {
            let n = ll(&argv[i + 1])?;
            if n < 0 {
                return Err(CmdError::err("ERR The LIMIT argument must be >= 0."));
            }
            a.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && is(opt, "nomkstream") {
            a.no_mkstream = true;
        } else if xadd {
            let (id, seq_given) = parse_id_full(opt, 0, true, true)?;
            a.id = Some(id);
            a.seq_given = seq_given;
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if a.limit != 0 && a.trim.is_none() {
        return Err(CmdError::err(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && a.trim.is_none() {
        return Err(CmdError::err(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    // The log holds final states (XADD with explicit IDs), never a trim to replay, so
    // Redis's mustObeyClient case does not arise.
    if limit_given {
        if !a.approx {
            return Err(CmdError::err(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else if a.approx {
        let max_entries = node_limits(ctx).1 as i64;
        let mut l = max_entries.saturating_mul(100);
        if l <= 0 {
            l = 10000;
        }
        a.limit = l.min(1_000_000) as u64;
    } else {
        a.limit = 0;
    }
    Ok((a, i))
}

fn xadd(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (a, idpos) = parse_add_trim(ctx, argv, true)?;
    let field_pos = idpos + 1;
    if argv.len() < field_pos + 2 || (argv.len() - field_pos) % 2 == 1 {
        return Err(CmdError::WrongArity("xadd".into()));
    }
    if a.seq_given && a.id == Some(StreamId::MIN) {
        return Err(CmdError::err(
            "ERR The ID specified in XADD must be greater than 0-0",
        ));
    }
    let (max_bytes, max_entries) = node_limits(ctx);
    let now = ctx.now;
    let key = &argv[1];
    if stream_ref(ctx, key)?.is_none() {
        if a.no_mkstream {
            return Ok(Frame::Null);
        }
        ctx.db().set(key, Value::Stream(Box::default()), 0);
    }
    let Some((s, logged)) = stream_mut_journaled(ctx, key)? else {
        return Ok(Frame::Null);
    };
    if s.last_id == StreamId::MAX {
        return Err(CmdError::err(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let fields: Vec<Bytes> = argv[field_pos..].iter().map(own).collect();
    let id =
        match s.append(&fields, a.id, a.seq_given, now, max_bytes, max_entries) {
            Ok(id) => id,
            Err(AppendError::NotGreater) => return Err(CmdError::err(
                "ERR The ID specified in XADD is equal or smaller than the target stream top item",
            )),
            Err(AppendError::TooLarge) => {
                return Err(CmdError::err("ERR Elements are too large to be stored"))
            }
        };
    if logged {
        s.journal.added(id, fields);
    }
    let trimmed = match a.trim {
        Some(t) => s.trim(t, a.approx, a.limit),
        None => 0,
    };
    if logged && trimmed > 0 {
        let first = s.edge_id(true);
        s.journal.trimmed(first);
    }
    ctx.changed(event::STREAM, "xadd", key);
    if trimmed > 0 {
        ctx.notify(event::STREAM, "xtrim", key);
    }
    Ok(id_frame(id))
}

fn xtrim(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (a, _) = parse_add_trim(ctx, argv, false)?;
    let key = &argv[1];
    let Some((s, logged)) = stream_mut_journaled(ctx, key)? else {
        return Ok(Frame::Integer(0));
    };
    let Some(t) = a.trim else {
        return Ok(Frame::Integer(0));
    };
    let deleted = s.trim(t, a.approx, a.limit);
    if logged && deleted > 0 {
        let first = s.edge_id(true);
        s.journal.trimmed(first);
    }
    if deleted > 0 {
        ctx.changed(event::STREAM, "xtrim", key);
    }
    Ok(Frame::Integer(deleted as i64))
}

// ---- reads -------------------------------------------------------------------------------------

fn xlen(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    Ok(Frame::Integer(
        stream_ref(ctx, &argv[1])?.map_or(0, |s| s.length as i64),
    ))
}

fn xrange_generic(ctx: &mut Ctx, argv: &[Bytes], rev: bool) -> CmdResult {
    let (sa, ea) = if rev {
        (&argv[3], &argv[2])
    } else {
        (&argv[2], &argv[3])
    };
    let start = range_start(sa)?;
    let end = range_end(ea)?;
    let mut count: i64 = -1;
    let mut j = 4;
    while j < argv.len() {
        if is(&argv[j], "count") && j + 1 < argv.len() {
            count = ll(&argv[j + 1])?.max(0);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(s) = stream_ref(ctx, &argv[1])? else {
        return Ok(Frame::Array(vec![]));
    };
    if count == 0 {
        return Ok(Frame::NullArray);
    }
    let count = if count < 0 { 0 } else { count as usize };
    Ok(Frame::Array(entries(s, start, end, count, rev)))
}

fn xrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    xrange_generic(ctx, argv, false)
}

fn xrevrange(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    xrange_generic(ctx, argv, true)
}

/// Redis's XREAD_BLOCKED_DEFAULT_COUNT: a served blocked read without COUNT gets at most this.
const BLOCKED_DEFAULT_COUNT: usize = 1000;

/// `>` in XREADGROUP: new entries (the ID Redis uses for it).
const NEW_ENTRIES: StreamId = StreamId::MAX;

struct ReadArgs {
    timeout: Option<u64>,
    count: usize,
    streams_at: usize,
    nstreams: usize,
    group: Option<(Bytes, Bytes)>,
    noack: bool,
}

fn parse_read(ctx: &Ctx, argv: &[Bytes], group_cmd: bool) -> CmdResult<ReadArgs> {
    let mut r = ReadArgs {
        timeout: None,
        count: 0,
        streams_at: 0,
        nstreams: 0,
        group: None,
        noack: false,
    };
    let mut i = 1;
    while i < argv.len() {
        let more = argv.len() - i - 1;
        let o = &argv[i][..];
        if is(o, "block") && more > 0 {
            if ctx.in_script {
                return Err(CmdError::erf(format!(
                    "{} command is not allowed with BLOCK option from scripts",
                    lossy(&argv[0])
                )));
            }
            i += 1;
            r.timeout = Some(parse_block_ms(&argv[i], ctx.now)?);
        } else if is(o, "count") && more > 0 {
            i += 1;
            let c = ll(&argv[i])?;
            r.count = usize::try_from(c.max(0)).unwrap_or(usize::MAX);
        } else if is(o, "streams") && more > 0 {
            r.streams_at = i + 1;
            let n = argv.len() - r.streams_at;
            if n % 2 != 0 {
                return Err(CmdError::err("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."));
            }
            r.nstreams = n / 2;
            break;
        } else if is(o, "group") && more >= 2 {
            if !group_cmd {
                return Err(CmdError::err(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.group = Some((argv[i + 1].clone(), argv[i + 2].clone()));
            i += 2;
        } else if is(o, "noack") {
            if !group_cmd {
                return Err(CmdError::err(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.noack = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if r.streams_at == 0 {
        return Err(CmdError::Syntax);
    }
    if group_cmd && r.group.is_none() {
        return Err(CmdError::err("ERR Missing GROUP option for XREADGROUP"));
    }
    Ok(r)
}

/// BLOCK's milliseconds (Redis's getTimeoutFromObjectOrReply in UNIT_MILLISECONDS).
fn parse_block_ms(arg: &[u8], now: u64) -> CmdResult<u64> {
    let ms = crate::protocol::number::parse_i64(arg)
        .ok_or_else(|| CmdError::err("ERR timeout is not an integer or out of range"))?;
    super::blocking::millis_timeout(ms, now)
}

fn xread(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    read_generic(ctx, argv, false)
}

fn xreadgroup(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    read_generic(ctx, argv, true)
}

fn read_generic(ctx: &mut Ctx, argv: &[Bytes], group_cmd: bool) -> CmdResult {
    let r = parse_read(ctx, argv, group_cmd)?;
    // A blocked read run again because one of its keys was written.
    let served = ctx.client.block_deadline.is_some();
    let keys = &argv[r.streams_at..r.streams_at + r.nstreams];
    let id_args = &argv[r.streams_at + r.nstreams..];
    let mut ids = Vec::with_capacity(r.nstreams);
    for (key, arg) in keys.iter().zip(id_args) {
        let s = match stream_ref(ctx, key) {
            Ok(s) => s,
            Err(_) if served && !group_cmd => {
                ids.push(StreamId::MAX);
                continue;
            }
            Err(_) if served => {
                return Err(CmdError::err("UNBLOCKED the stream key no longer exists"))
            }
            Err(e) => return Err(e),
        };
        if let Some((group, _)) = &r.group {
            let has_group = s.is_some_and(|s| s.groups.contains_key(&group[..]));
            if !has_group {
                if served {
                    return Err(match s {
                        None => CmdError::err("UNBLOCKED the stream key no longer exists"),
                        Some(_) => nogroup(
                            "the consumer group this client was blocked on no longer exists".into(),
                        ),
                    });
                }
                return Err(nogroup(format!(
                    "No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    lossy(key),
                    lossy(group)
                )));
            }
        }
        let a = cstr(arg);
        if a == b"$" {
            if group_cmd {
                return Err(CmdError::err("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
            }
            ids.push(s.map_or(StreamId::MIN, |s| s.last_id));
        } else if a == b">" {
            if !group_cmd {
                return Err(CmdError::err("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."));
            }
            ids.push(NEW_ENTRIES);
        } else {
            ids.push(parse_strict_id(arg)?);
        }
    }
    let count = if served && r.count == 0 {
        BLOCKED_DEFAULT_COUNT
    } else {
        r.count
    };
    let now = ctx.now;
    let mut out: Vec<(Bytes, Frame)> = Vec::new();
    let woken_by = ctx.client.block_ready_key.clone();
    for (i, key) in keys.iter().enumerate() {
        if woken_by.as_ref().is_some_and(|k| k != key) {
            continue;
        }
        let gt = ids[i];
        let reply = match &r.group {
            None => {
                let Ok(Some(s)) = stream_ref(ctx, key) else {
                    continue;
                };
                // Served after a write, Redis compares the stream's last ID (so entries added
                // and deleted since give an empty read); at once, the last live entry.
                let has_new = if served {
                    s.last_id > gt
                } else {
                    s.length > 0 && s.edge_id(false).is_some_and(|max| max > gt)
                };
                if !has_new {
                    continue;
                }
                let Some(start) = gt.incr() else {
                    continue;
                };
                Frame::Array(entries(s, start, StreamId::MAX, count, false))
            }
            Some((group, consumer)) => {
                // Nothing new for `>`: the stream is only read, so it is not a changed key
                // (a Redis replica gets nothing for it).
                if gt == NEW_ENTRIES {
                    let Some(s) = stream_ref(ctx, key)? else {
                        continue;
                    };
                    let newest = if served {
                        Some(s.last_id)
                    } else {
                        s.edge_id(false)
                    };
                    let last = s.groups.get(&group[..]).map(|g| g.last_id);
                    let ready = matches!((newest, last), (Some(n), Some(l)) if n > l);
                    if !ready {
                        continue;
                    }
                }
                let Some((s, logged)) = stream_mut_journaled(ctx, key)? else {
                    continue;
                };
                let Some((frame, created, ids)) =
                    group_read(s, group, consumer, gt, count, r.noack, now, served)
                else {
                    continue;
                };
                touch(s, logged, group, true, &ids, &[consumer]);
                // Redis's `server.dirty++` for each group's stream served (no key signal:
                // readers and WATCH do not see a group read).
                ctx.srv.changes_since_save += 1;
                if created {
                    ctx.srv.redis_master.consumer_created(key);
                    ctx.notify(event::STREAM, "xgroup-createconsumer", key);
                }
                frame
            }
        };
        out.push((key.clone(), reply));
        if served {
            // Redis serves a woken reader from the one key that became ready.
            break;
        }
    }
    if !out.is_empty() {
        return Ok(if ctx.client.resp3() {
            Frame::Map(out.into_iter().map(|(k, v)| (Frame::Bulk(k), v)).collect())
        } else {
            Frame::Array(
                out.into_iter()
                    .map(|(k, v)| Frame::Array(vec![Frame::Bulk(k), v]))
                    .collect(),
            )
        });
    }
    let Some(timeout) = r.timeout else {
        return Ok(Frame::NullArray);
    };
    if !blocking::may_block(ctx) {
        return Ok(Frame::NullArray);
    }
    // `$` means the last ID when the read blocked: the command run again must not re-read it.
    let mut again: Vec<Bytes> = argv.to_vec();
    for (i, arg) in id_args.iter().enumerate() {
        if cstr(arg) == b"$" {
            again[r.streams_at + r.nstreams + i] = ids[i].to_bytes();
        }
    }
    let kind = if group_cmd {
        WaitKind::StreamGroup
    } else {
        WaitKind::Stream
    };
    blocking::block(ctx, keys, timeout, kind, &again)
}

/// One stream's part of XREADGROUP: history from the consumer's PEL, or new entries (`gt` is
/// `>`). None when there is nothing to serve; else the reply, whether a consumer was created,
/// and the pending entries it changed.
#[allow(clippy::too_many_arguments)]
fn group_read(
    s: &mut Stream,
    group: &[u8],
    consumer: &[u8],
    gt: StreamId,
    count: usize,
    noack: bool,
    now: u64,
    served: bool,
) -> Option<(Frame, bool, Vec<StreamId>)> {
    let history = gt != NEW_ENTRIES;
    let mut start = gt;
    if !history {
        let last = s.groups.get(group)?.last_id;
        let newest = if served { s.last_id } else { s.edge_id(false)? };
        if newest <= last {
            return None;
        }
        start = last;
    }
    let start = start.incr().unwrap_or(StreamId::MAX);
    let g = s.groups.get_mut(group)?;
    let created = g.create_consumer(consumer, now);
    if let Some(c) = g.consumers.get_mut(consumer) {
        c.seen_time = now;
    }
    if history {
        let ids: Vec<StreamId> = g.consumers.get(consumer).map_or_else(Vec::new, |c| {
            c.pel
                .range(start..)
                .take(if count == 0 { usize::MAX } else { count })
                .copied()
                .collect()
        });
        let mut out = Vec::with_capacity(ids.len());
        let mut touched = Vec::new();
        for id in ids {
            match s.get(id) {
                Some(fields) => {
                    out.push(entry_frame(id, fields));
                    if let Some(n) = s.groups.get_mut(group).and_then(|g| g.pel.get_mut(&id)) {
                        n.delivery_time = now;
                        n.delivery_count += 1;
                        touched.push(id);
                    }
                }
                None => out.push(Frame::Array(vec![id_frame(id), Frame::NullArray])),
            }
        }
        return Some((Frame::Array(out), created, touched));
    }
    let mut got: Vec<(StreamId, Fields)> = Vec::new();
    s.range(start, StreamId::MAX, false, |id, fields| {
        got.push((id, fields));
        count == 0 || got.len() < count
    });
    let mut out = Vec::with_capacity(got.len());
    let mut touched = Vec::new();
    for (id, fields) in got {
        let tomb = s.range_has_tombstones(id, StreamId::MAX);
        let estimate = s.estimate_distance(id);
        let added = s.entries_added;
        let g = s.groups.get_mut(group)?;
        if id > g.last_id {
            if g.entries_read != INVALID_ENTRIES_READ && !tomb {
                g.entries_read += 1;
            } else if added != 0 {
                g.entries_read = estimate.unwrap_or(INVALID_ENTRIES_READ);
            }
            g.last_id = id;
        }
        if !noack {
            let name = own(consumer);
            if let Some(old) = g.pel.get(&id).map(|n| n.consumer.clone()) {
                if let Some(c) = g.consumers.get_mut(&old) {
                    c.pel.remove(&id);
                }
            }
            g.pel.insert(
                id,
                Nack {
                    delivery_time: now,
                    delivery_count: 1,
                    consumer: name,
                },
            );
            if let Some(c) = g.consumers.get_mut(consumer) {
                c.pel.insert(id);
            }
            touched.push(id);
        }
        out.push(entry_frame(id, fields));
    }
    Some((Frame::Array(out), created, touched))
}

/// Whether a client blocked in XREAD/XREADGROUP on `key` can be served now (Redis's
/// serveClientsBlockedOnStreamKey's test): new entries past its ID or its group's last ID, or
/// (XREADGROUP) the key or group is gone, which it must be told.
pub fn waiter_ready(argv: &[Bytes], key: &[u8], value: Option<&Value>) -> bool {
    let group_cmd = argv.first().is_some_and(|a| is(a, "xreadgroup"));
    let s = match value {
        Some(Value::Stream(s)) => s,
        _ => return group_cmd,
    };
    let Some(at) = argv.iter().position(|a| is(a, "streams")) else {
        return false;
    };
    let rest = &argv[at + 1..];
    let n = rest.len() / 2;
    let Some(i) = rest[..n].iter().position(|k| &k[..] == key) else {
        return false;
    };
    if group_cmd {
        let Some(g) = argv
            .iter()
            .position(|a| is(a, "group"))
            .and_then(|g| argv.get(g + 1))
        else {
            return false;
        };
        return match s.groups.get(&g[..]) {
            None => true,
            Some(g) => s.last_id > g.last_id,
        };
    }
    match parse_strict_id(&rest[n + i]) {
        Ok(gt) => s.last_id > gt,
        Err(_) => false,
    }
}

// ---- XDEL / XSETID -----------------------------------------------------------------------------

fn xdel(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    if stream_ref(ctx, key)?.is_none() {
        return Ok(Frame::Integer(0));
    }
    let ids = argv[2..]
        .iter()
        .map(|a| parse_strict_id(a))
        .collect::<CmdResult<Vec<_>>>()?;
    let Some((s, logged)) = stream_mut_journaled(ctx, key)? else {
        return Ok(Frame::Integer(0));
    };
    let mut deleted = 0;
    let mut first_entry = false;
    let mut gone = Vec::new();
    for id in ids {
        if s.delete(id) {
            if id == s.first_id {
                first_entry = true;
            }
            if id > s.max_deleted {
                s.max_deleted = id;
            }
            deleted += 1;
            if logged {
                gone.push(id);
            }
        }
    }
    if logged && !gone.is_empty() {
        s.journal.deleted(gone);
    }
    if deleted > 0 {
        if s.length == 0 {
            s.first_id = StreamId::MIN;
        } else if first_entry {
            s.first_id = s.edge_id(true).unwrap_or(StreamId::MAX);
        }
        ctx.changed(event::STREAM, "xdel", key);
    }
    Ok(Frame::Integer(deleted))
}

fn xsetid(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let id = parse_strict_id(&argv[2])?;
    let mut entries_added: i64 = -1;
    let mut max_xdel = StreamId::MIN;
    let mut i = 3;
    while i < argv.len() {
        let more = argv.len() - 1 - i;
        if is(&argv[i], "entriesadded") && more > 0 {
            entries_added = ll(&argv[i + 1])?;
            if entries_added < 0 {
                return Err(CmdError::err("ERR entries_added must be positive"));
            }
            i += 2;
        } else if is(&argv[i], "maxdeletedid") && more > 0 {
            max_xdel = parse_strict_id(&argv[i + 1])?;
            if id < max_xdel {
                return Err(CmdError::err("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"));
            }
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let key = &argv[1];
    if stream_ref(ctx, key)?.is_none() {
        return Err(CmdError::NoSuchKey);
    }
    let Some(s) = stream_mut(ctx, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    if s.length > 0 {
        let maxid = s.edge_id(false).unwrap_or(StreamId::MIN);
        if id < maxid {
            return Err(CmdError::err(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if entries_added != -1 && s.length > entries_added as u64 {
            return Err(CmdError::err("ERR The entries_added specified in XSETID is smaller than the target stream length"));
        }
    }
    s.last_id = id;
    if entries_added != -1 {
        s.entries_added = entries_added as u64;
    }
    if !max_xdel.is_zero() {
        s.max_deleted = max_xdel;
    }
    ctx.notify(event::STREAM, "xsetid", key);
    Ok(Frame::ok())
}

// ---- XGROUP ------------------------------------------------------------------------------------

fn xgroup_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::help(&[
        "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CREATE <key> <groupname> <id|$> [option]",
        "    Create a new consumer group. Options are:",
        "    * MKSTREAM",
        "      Create the empty stream if it does not exist.",
        "    * ENTRIESREAD entries_read",
        "      Set the group's entries_read counter (internal use).",
        "CREATECONSUMER <key> <groupname> <consumer>",
        "    Create a new consumer in the specified group.",
        "DELCONSUMER <key> <groupname> <consumer>",
        "    Remove the specified consumer.",
        "DESTROY <key> <groupname>",
        "    Remove the specified group.",
        "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        "    Set the current group ID and entries_read counter.",
        "HELP",
        "    Prints this help.",
    ]))
}

/// The checks every XGROUP subcommand shares (Redis's xgroupCommand prologue): options of
/// CREATE/SETID, the key's type and existence, the group's existence for SETID,
/// CREATECONSUMER and DELCONSUMER. Returns (mkstream, entries_read).
fn xgroup_prologue(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult<(bool, i64)> {
    let create = is(&argv[1], "create");
    let setid = is(&argv[1], "setid");
    let mut mkstream = false;
    let mut entries_read = INVALID_ENTRIES_READ;
    let mut i = 5;
    while i < argv.len() {
        if create && is(&argv[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if (create || setid) && is(&argv[i], "entriesread") && i + 1 < argv.len() {
            entries_read = ll(&argv[i + 1])?;
            if entries_read < 0 && entries_read != INVALID_ENTRIES_READ {
                return Err(CmdError::err(
                    "ERR value for ENTRIESREAD must be positive or -1",
                ));
            }
            i += 2;
        } else {
            return Err(subcommand_syntax(argv));
        }
    }
    let key = &argv[2];
    let s = stream_ref(ctx, key)?;
    if !mkstream {
        let Some(s) = s else {
            return Err(CmdError::err("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."));
        };
        if !s.groups.contains_key(&argv[3][..])
            && (setid || is(&argv[1], "createconsumer") || is(&argv[1], "delconsumer"))
        {
            return Err(nogroup(format!(
                "No such consumer group '{}' for key name '{}'",
                lossy(&argv[3]),
                lossy(key)
            )));
        }
    }
    Ok((mkstream, entries_read))
}

fn xgroup_create(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (_, entries_read) = xgroup_prologue(ctx, argv)?;
    if argv.len() > 8 {
        return Err(subcommand_syntax(argv));
    }
    let key = &argv[2];
    let id = if cstr(&argv[4]) == b"$" {
        stream_ref(ctx, key)?.map_or(StreamId::MIN, |s| s.last_id)
    } else {
        parse_strict_id(&argv[4])?
    };
    if stream_ref(ctx, key)?.is_none() {
        ctx.db().set(key, Value::Stream(Box::default()), 0);
        let db = ctx.client.db;
        ctx.srv.signal_modified_key(db, key);
    }
    let Some((s, logged)) = stream_mut_journaled(ctx, key)? else {
        return Ok(Frame::Null);
    };
    if s.groups.contains_key(&argv[3][..]) {
        return Err(CmdError::err(
            "BUSYGROUP Consumer Group name already exists",
        ));
    }
    s.groups.insert(own(&argv[3]), Group::new(id, entries_read));
    touch(s, logged, &argv[3], false, &[], &[]);
    ctx.srv.changes_since_save += 1;
    ctx.notify(event::STREAM, "xgroup-create", key);
    Ok(Frame::ok())
}

fn xgroup_setid(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let (_, entries_read) = xgroup_prologue(ctx, argv)?;
    if argv.len() != 5 && argv.len() != 7 {
        return Err(subcommand_syntax(argv));
    }
    let key = &argv[2];
    let Some((s, logged)) = stream_mut_journaled(ctx, key)? else {
        return Err(subcommand_syntax(argv));
    };
    let id = if cstr(&argv[4]) == b"$" {
        s.last_id
    } else {
        parse_id(&argv[4], 0)?
    };
    if let Some(g) = s.groups.get_mut(&argv[3][..]) {
        g.last_id = id;
        g.entries_read = entries_read;
    }
    touch(s, logged, &argv[3], true, &[], &[]);
    ctx.srv.changes_since_save += 1;
    ctx.notify(event::STREAM, "xgroup-setid", key);
    Ok(Frame::ok())
}

fn xgroup_destroy(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    xgroup_prologue(ctx, argv)?;
    let key = &argv[2];
    let Some(s) = stream_mut(ctx, key)? else {
        return Ok(Frame::Integer(0));
    };
    if s.groups.remove(&argv[3][..]).is_none() {
        return Ok(Frame::Integer(0));
    }
    ctx.srv.changes_since_save += 1;
    ctx.notify(event::STREAM, "xgroup-destroy", key);
    // Clients blocked in XREADGROUP on this group learn it is gone.
    let db = ctx.client.db;
    ctx.srv.waiters.signal(db, key);
    Ok(Frame::Integer(1))
}

fn xgroup_createconsumer(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    xgroup_prologue(ctx, argv)?;
    let key = &argv[2];
    let now = seen_clock(ctx);
    let Some((s, logged)) = stream_mut_journaled(ctx, key)? else {
        return Ok(Frame::Integer(0));
    };
    let created = s
        .groups
        .get_mut(&argv[3][..])
        .is_some_and(|g| g.create_consumer(&argv[4], now));
    if created {
        touch(s, logged, &argv[3], true, &[], &[&argv[4]]);
        ctx.srv.changes_since_save += 1;
        ctx.notify(event::STREAM, "xgroup-createconsumer", key);
    }
    Ok(Frame::Integer(created as i64))
}

fn xgroup_delconsumer(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    xgroup_prologue(ctx, argv)?;
    let key = &argv[2];
    let Some((s, logged)) = stream_mut_journaled(ctx, key)? else {
        return Ok(Frame::Integer(0));
    };
    let Some(g) = s.groups.get_mut(&argv[3][..]) else {
        return Ok(Frame::Integer(0));
    };
    let Some(c) = g.consumers.remove(&argv[4][..]) else {
        return Ok(Frame::Integer(0));
    };
    for id in &c.pel {
        g.pel.remove(id);
    }
    let ids: Vec<StreamId> = c.pel.iter().copied().collect();
    touch(s, logged, &argv[3], true, &ids, &[&argv[4]]);
    ctx.srv.changes_since_save += 1;
    ctx.notify(event::STREAM, "xgroup-delconsumer", key);
    Ok(Frame::Integer(c.pel.len() as i64))
}

// ---- XACK / XPENDING / XCLAIM / XAUTOCLAIM -----------------------------------------------------

fn xack(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let has = stream_ref(ctx, key)?.is_some_and(|s| s.groups.contains_key(&argv[2][..]));
    if !has {
        return Ok(Frame::Integer(0));
    }
    let ids = argv[3..]
        .iter()
        .map(|a| parse_strict_id(a))
        .collect::<CmdResult<Vec<_>>>()?;
    let Some((s, logged)) = stream_mut_journaled(ctx, key)? else {
        return Ok(Frame::Integer(0));
    };
    let Some(g) = s.groups.get_mut(&argv[2][..]) else {
        return Ok(Frame::Integer(0));
    };
    let acked: Vec<StreamId> = ids
        .into_iter()
        .filter(|id| g.remove_nack(*id).is_some())
        .collect();
    touch(s, logged, &argv[2], true, &acked, &[]);
    Ok(Frame::Integer(acked.len() as i64))
}

fn no_key_or_group(key: &[u8], group: &[u8]) -> CmdError {
    nogroup(format!(
        "No such key '{}' or consumer group '{}'",
        lossy(key),
        lossy(group)
    ))
}

fn xpending(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let argc = argv.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(CmdError::Syntax);
    }
    let mut range = None;
    let mut consumer = None;
    let mut minidle = 0i64;
    if argc >= 6 {
        let mut at = 3;
        if is(&argv[3], "idle") {
            minidle = ll(&argv[4])?;
            if argc < 8 {
                return Err(CmdError::Syntax);
            }
            at += 2;
        }
        let count = ll(&argv[at + 2])?.max(0);
        let start = range_start(&argv[at])?;
        let end = range_end(&argv[at + 1])?;
        if at + 3 < argc {
            consumer = Some(&argv[at + 3]);
        }
        range = Some((start, end, count as u64));
    }
    let key = &argv[1];
    let now = ctx.now;
    let s = stream_ref(ctx, key)?;
    let Some(g) = s.and_then(|s| s.groups.get(&argv[2][..])) else {
        return Err(no_key_or_group(key, &argv[2]));
    };
    let Some((start, end, mut count)) = range else {
        if g.pel.is_empty() {
            return Ok(Frame::Array(vec![
                Frame::Integer(0),
                Frame::Null,
                Frame::Null,
                Frame::NullArray,
            ]));
        }
        let first = g.pel.keys().next().copied().unwrap_or_default();
        let last = g.pel.keys().next_back().copied().unwrap_or_default();
        let consumers = g
            .consumers
            .iter()
            .filter(|(_, c)| !c.pel.is_empty())
            .map(|(n, c)| {
                Frame::Array(vec![
                    Frame::Bulk(n.clone()),
                    Frame::Bulk(Bytes::from(c.pel.len().to_string())),
                ])
            })
            .collect();
        return Ok(Frame::Array(vec![
            Frame::Integer(g.pel.len() as i64),
            id_frame(first),
            id_frame(last),
            Frame::Array(consumers),
        ]));
    };
    let ids: Box<dyn Iterator<Item = StreamId> + '_> = match consumer {
        Some(name) => match g.consumers.get(&name[..]) {
            None => return Ok(Frame::Array(vec![])),
            Some(c) => Box::new(c.pel.range(start..).copied()),
        },
        None => Box::new(g.pel.range(start..).map(|(k, _)| *k)),
    };
    let mut out = Vec::new();
    for id in ids {
        if count == 0 || id > end {
            break;
        }
        let Some(n) = g.pel.get(&id) else {
            continue;
        };
        let idle = now as i64 - n.delivery_time as i64;
        if minidle != 0 && idle < minidle {
            continue;
        }
        count -= 1;
        out.push(Frame::Array(vec![
            id_frame(id),
            Frame::Bulk(n.consumer.clone()),
            Frame::Integer(idle.max(0)),
            Frame::Integer(n.delivery_count as i64),
        ]));
    }
    Ok(Frame::Array(out))
}

/// Gives the pending entry `id` to `consumer` (creating the consumer on first use): what
/// XCLAIM and XAUTOCLAIM do to each claimed entry.
fn claim(g: &mut Group, id: StreamId, consumer: &[u8], now: u64, created: &mut bool) {
    if g.create_consumer(consumer, now) {
        *created = true;
    } else if let Some(c) = g.consumers.get_mut(consumer) {
        c.seen_time = now;
    }
    let Some(n) = g.pel.get_mut(&id) else {
        return;
    };
    let old = std::mem::replace(&mut n.consumer, own(consumer));
    if &old[..] != consumer {
        if let Some(c) = g.consumers.get_mut(&old) {
            c.pel.remove(&id);
        }
    }
    if let Some(c) = g.consumers.get_mut(consumer) {
        c.pel.insert(id);
    }
}

fn xclaim(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let key = &argv[1];
    let has = stream_ref(ctx, key)?.is_some_and(|s| s.groups.contains_key(&argv[2][..]));
    if !has {
        return Err(no_key_or_group(key, &argv[2]));
    }
    let minidle = ll_or(&argv[4], "ERR Invalid min-idle-time argument for XCLAIM")?.max(0);
    let mut j = 5;
    let mut ids = Vec::new();
    while j < argv.len() {
        match parse_strict_id(&argv[j]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.now as i64;
    let mut retrycount: i64 = -1;
    let mut deliverytime: i64 = -1;
    let mut force = false;
    let mut justid = false;
    let mut last_id = StreamId::MIN;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        let opt = &argv[j];
        if is(opt, "force") {
            force = true;
        } else if is(opt, "justid") {
            justid = true;
        } else if is(opt, "idle") && more > 0 {
            j += 1;
            deliverytime = now.wrapping_sub(ll_or(
                &argv[j],
                "ERR Invalid IDLE option argument for XCLAIM",
            )?);
        } else if is(opt, "time") && more > 0 {
            j += 1;
            deliverytime = ll_or(&argv[j], "ERR Invalid TIME option argument for XCLAIM")?;
        } else if is(opt, "retrycount") && more > 0 {
            j += 1;
            retrycount = ll_or(
                &argv[j],
                "ERR Invalid RETRYCOUNT option argument for XCLAIM",
            )?;
        } else if is(opt, "lastid") && more > 0 {
            j += 1;
            last_id = parse_strict_id(&argv[j])?;
        } else {
            return Err(CmdError::erf(format!(
                "Unrecognized XCLAIM option '{}'",
                lossy(opt)
            )));
        }
        j += 1;
    }
    // A follower applies the log at time 0 (exec/cluster.rs): the leader's TIME stands.
    if deliverytime < 0 || (now != 0 && deliverytime > now) {
        deliverytime = now;
    }
    let seen = seen_clock(ctx);
    let consumer = &argv[3];
    let nowu = now as u64;
    let Some((s, logged)) = stream_mut_journaled(ctx, key)? else {
        return Err(no_key_or_group(key, &argv[2]));
    };
    let touched = ids.clone();
    let exists: Vec<Option<Fields>> = ids
        .iter()
        .map(|id| {
            if justid {
                s.exists(*id).then(Vec::new)
            } else {
                s.get(*id)
            }
        })
        .collect();
    let Some(g) = s.groups.get_mut(&argv[2][..]) else {
        return Err(no_key_or_group(key, &argv[2]));
    };
    if last_id > g.last_id {
        g.last_id = last_id;
    }
    let mut out = Vec::new();
    let mut created = false;
    for (id, fields) in ids.into_iter().zip(exists) {
        let Some(fields) = fields else {
            g.remove_nack(id);
            continue;
        };
        let fresh = if force && !g.pel.contains_key(&id) {
            g.pel.insert(
                id,
                Nack {
                    delivery_time: nowu,
                    delivery_count: 1,
                    consumer: Bytes::new(),
                },
            );
            true
        } else {
            false
        };
        let Some(n) = g.pel.get(&id) else {
            continue;
        };
        if !fresh && minidle != 0 && now - (n.delivery_time as i64) < minidle {
            continue;
        }
        claim(g, id, consumer, seen, &mut created);
        if let Some(n) = g.pel.get_mut(&id) {
            n.delivery_time = deliverytime as u64;
            if retrycount >= 0 {
                n.delivery_count = retrycount as u64;
            } else if !justid {
                n.delivery_count += 1;
            }
        }
        out.push(if justid {
            id_frame(id)
        } else {
            entry_frame(id, fields)
        });
    }
    touch(s, logged, &argv[2], true, &touched, &[consumer]);
    if created {
        ctx.notify(event::STREAM, "xgroup-createconsumer", key);
    }
    Ok(Frame::Array(out))
}

fn xautoclaim(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let minidle = ll_or(
        &argv[4],
        "ERR Invalid min-idle-time argument for XAUTOCLAIM",
    )?
    .max(0);
    let start = range_start(&argv[5])?;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        if is(&argv[j], "count") && more > 0 {
            let max = i64::MAX / 16;
            count = match int_arg(&argv[j + 1]) {
                Ok(c) if (1..=max).contains(&c) => c,
                _ => return Err(CmdError::err("ERR COUNT must be > 0")),
            };
            j += 1;
        } else if is(&argv[j], "justid") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let key = &argv[1];
    let has = stream_ref(ctx, key)?.is_some_and(|s| s.groups.contains_key(&argv[2][..]));
    if !has {
        return Err(no_key_or_group(key, &argv[2]));
    }
    let now = ctx.now;
    let consumer = &argv[3];
    let Some((s, logged)) = stream_mut_journaled(ctx, key)? else {
        return Err(no_key_or_group(key, &argv[2]));
    };
    let mut touched = Vec::new();
    let mut attempts = count.saturating_mul(10);
    let mut out = Vec::new();
    let mut deleted = Vec::new();
    let mut created = false;
    let mut cursor = start;
    let mut next = None;
    while let Some(g) = s.groups.get(&argv[2][..]) {
        let Some((&id, n)) = g.pel.range(cursor..).next() else {
            next = None;
            break;
        };
        if attempts == 0 || count == 0 {
            next = Some(id);
            break;
        }
        attempts -= 1;
        let delivery_time = n.delivery_time;
        cursor = id.incr().unwrap_or(StreamId::MAX);
        let fields = if justid {
            s.exists(id).then(Vec::new)
        } else {
            s.get(id)
        };
        let Some(g) = s.groups.get_mut(&argv[2][..]) else {
            break;
        };
        let Some(fields) = fields else {
            g.remove_nack(id);
            touched.push(id);
            deleted.push(id_frame(id));
            count -= 1;
            if id == StreamId::MAX {
                break;
            }
            continue;
        };
        if minidle != 0 && (now as i64) - (delivery_time as i64) < minidle {
            if id == StreamId::MAX {
                break;
            }
            continue;
        }
        claim(g, id, consumer, now, &mut created);
        touched.push(id);
        if let Some(n) = g.pel.get_mut(&id) {
            n.delivery_time = now;
            if !justid {
                n.delivery_count += 1;
            }
        }
        out.push(if justid {
            id_frame(id)
        } else {
            entry_frame(id, fields)
        });
        count -= 1;
        if id == StreamId::MAX {
            break;
        }
    }
    touch(s, logged, &argv[2], true, &touched, &[consumer]);
    if created {
        ctx.notify(event::STREAM, "xgroup-createconsumer", key);
    }
    Ok(Frame::Array(vec![
        id_frame(next.unwrap_or(StreamId::MIN)),
        Frame::Array(out),
        Frame::Array(deleted),
    ]))
}

// ---- XINFO -------------------------------------------------------------------------------------

fn xinfo_help(_ctx: &mut Ctx, _argv: &[Bytes]) -> CmdResult {
    Ok(Frame::help(&[
        "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CONSUMERS <key> <groupname>",
        "    Show consumers of <groupname>.",
        "GROUPS <key>",
        "    Show the stream consumer groups.",
        "STREAM <key> [FULL [COUNT <count>]",
        "    Show information about the stream.",
        "HELP",
        "    Prints this help.",
    ]))
}

fn info_stream<'a>(ctx: &'a mut Ctx, key: &[u8]) -> CmdResult<&'a Stream> {
    stream_ref(ctx, key)?.ok_or(CmdError::NoSuchKey)
}

fn map(fields: Vec<(&'static str, Frame)>) -> Frame {
    Frame::Map(
        fields
            .into_iter()
            .map(|(k, v)| (Frame::bulk_static(k), v))
            .collect(),
    )
}

fn opt_int(v: Option<i64>) -> Frame {
    v.map_or(Frame::Null, Frame::Integer)
}

fn xinfo_consumers(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let now = ctx.now as i64;
    let s = info_stream(ctx, &argv[2])?;
    let Some(g) = s.groups.get(&argv[3][..]) else {
        return Err(nogroup(format!(
            "No such consumer group '{}' for key name '{}'",
            lossy(&argv[3]),
            lossy(&argv[2])
        )));
    };
    Ok(Frame::Array(
        g.consumers
            .iter()
            .map(|(n, c)| {
                map(vec![
                    ("name", Frame::Bulk(n.clone())),
                    ("pending", Frame::Integer(c.pel.len() as i64)),
                    ("idle", Frame::Integer((now - c.seen_time as i64).max(0))),
                ])
            })
            .collect(),
    ))
}

fn xinfo_groups(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let s = info_stream(ctx, &argv[2])?;
    Ok(Frame::Array(
        s.groups
            .iter()
            .map(|(n, g)| {
                map(vec![
                    ("name", Frame::Bulk(n.clone())),
                    ("consumers", Frame::Integer(g.consumers.len() as i64)),
                    ("pending", Frame::Integer(g.pel.len() as i64)),
                    ("last-delivered-id", id_frame(g.last_id)),
                    (
                        "entries-read",
                        opt_int((g.entries_read != INVALID_ENTRIES_READ).then_some(g.entries_read)),
                    ),
                    ("lag", opt_int(s.lag(g))),
                ])
            })
            .collect(),
    ))
}

fn xinfo_stream(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let opts = &argv[3..];
    let mut full = false;
    let mut count: i64 = 10;
    if !opts.is_empty() {
        if (opts.len() != 1 && opts.len() != 3) || !is(&opts[0], "full") {
            return Err(subcommand_syntax(argv));
        }
        full = true;
        if opts.len() == 3 {
            if !is(&opts[1], "count") {
                return Err(subcommand_syntax(argv));
            }
            count = ll(&opts[2])?;
            if count < 0 {
                count = 10;
            }
        }
    }
    let s = info_stream(ctx, &argv[2])?;
    let mut f = vec![
        ("length", Frame::Integer(s.length as i64)),
        ("radix-tree-keys", Frame::Integer(s.node_count() as i64)),
        ("radix-tree-nodes", Frame::Integer(s.rax_nodes() as i64)),
        ("last-generated-id", id_frame(s.last_id)),
        ("max-deleted-entry-id", id_frame(s.max_deleted)),
        ("entries-added", Frame::Integer(s.entries_added as i64)),
        ("recorded-first-entry-id", id_frame(s.first_id)),
    ];
    if !full {
        f.push(("groups", Frame::Integer(s.groups.len() as i64)));
        let edge = |rev: bool| {
            entries(s, StreamId::MIN, StreamId::MAX, 1, rev)
                .pop()
                .unwrap_or(Frame::Null)
        };
        f.push(("first-entry", edge(false)));
        f.push(("last-entry", edge(true)));
        return Ok(map(f));
    }
    let count = count as usize;
    let limit = |n: usize| count == 0 || n < count;
    f.push((
        "entries",
        Frame::Array(entries(s, StreamId::MIN, StreamId::MAX, count, false)),
    ));
    let groups = s
        .groups
        .iter()
        .map(|(name, g)| {
            let pending: Vec<Frame> = g
                .pel
                .iter()
                .enumerate()
                .take_while(|(i, _)| limit(*i))
                .map(|(_, (id, n))| {
                    Frame::Array(vec![
                        id_frame(*id),
                        Frame::Bulk(n.consumer.clone()),
                        Frame::Integer(n.delivery_time as i64),
                        Frame::Integer(n.delivery_count as i64),
                    ])
                })
                .collect();
            let consumers: Vec<Frame> = g
                .consumers
                .iter()
                .map(|(cn, c)| {
                    let cp: Vec<Frame> = c
                        .pel
                        .iter()
                        .enumerate()
                        .take_while(|(i, _)| limit(*i))
                        .filter_map(|(_, id)| {
                            let n = g.pel.get(id)?;
                            Some(Frame::Array(vec![
                                id_frame(*id),
                                Frame::Integer(n.delivery_time as i64),
                                Frame::Integer(n.delivery_count as i64),
                            ]))
                        })
                        .collect();
                    map(vec![
                        ("name", Frame::Bulk(cn.clone())),
                        ("seen-time", Frame::Integer(c.seen_time as i64)),
                        ("pel-count", Frame::Integer(c.pel.len() as i64)),
                        ("pending", Frame::Array(cp)),
                    ])
                })
                .collect();
            map(vec![
                ("name", Frame::Bulk(name.clone())),
                ("last-delivered-id", id_frame(g.last_id)),
                (
                    "entries-read",
                    opt_int((g.entries_read != INVALID_ENTRIES_READ).then_some(g.entries_read)),
                ),
                ("lag", opt_int(s.lag(g))),
                ("pel-count", Frame::Integer(g.pel.len() as i64)),
                ("pending", Frame::Array(pending)),
                ("consumers", Frame::Array(consumers)),
            ])
        })
        .collect();
    f.push(("groups", Frame::Array(groups)));
    Ok(map(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_like_redis() {
        let p = |s: &str| parse_id_full(s.as_bytes(), 0, true, true).ok();
        assert_eq!(p("1-2"), Some((StreamId::new(1, 2), true)));
        assert_eq!(p("5"), Some((StreamId::new(5, 0), true)));
        assert_eq!(p("5-*"), Some((StreamId::new(5, 0), false)));
        assert_eq!(p("-"), None);
        assert_eq!(p("+5"), Some((StreamId::new(5, 0), true)));
        assert_eq!(p("1-2-3"), None);
        assert_eq!(p("18446744073709551616"), None);
        assert_eq!(p("abc"), None);
        assert_eq!(parse_id(b"+", 0).ok(), Some(StreamId::MAX));
        assert_eq!(parse_mem("4kb"), Some(4096));
    }
}
