//! Lua scripting as in Redis 7.0: one Lua 5.1 state on the executor thread, compiled functions
//! cached by the SHA1 of their body, `redis.call` through the same dispatch as the network,
//! Redis's sandbox and error texts, and a count hook for busy scripts and SCRIPT KILL.

pub mod bit;
pub mod busy;
pub mod cjson;
pub mod cmsgpack;
pub mod convert;
pub mod functions;
pub mod native;
pub mod payload;
mod raw;
pub mod structlib;

use crate::cmd::Ctx;
use crate::error::CmdError;
use crate::machine::busy::BusyState;
use crate::machine::{Shared, State, REDIS_VERSION};
use crate::protocol::Frame;
use bytes::Bytes;
use mlua::{chunk::ChunkMode, Function, Lua, LuaOptions, StdLib, Value, VmState};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::os::raw::c_int;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

const BOOTSTRAP: &str = include_str!("bootstrap.lua");

/// 7.0.15 as Redis encodes it (0x07000f).
const REDIS_VERSION_NUM: f64 = 458767.0;

/// Instructions between two runs of the busy/kill hook. Redis runs it every 100000, which lets
/// a loop of slow C calls go unchecked for hours: `for i = 1, 20000 do s:upper() end` on a
/// 10 MB string (5 instructions and 44 ms an iteration) never reached the hook, so no client
/// got -BUSY and SCRIPT KILL was not heard for 15 minutes. Every 1000 instructions bounds the
/// wait at 1000 C calls; the hook is a plain C function (raw::count_hook), which costs ~2% on
/// a tight Lua loop where mlua's hook callback cost 60%.
const HOOK_EVERY: c_int = 1_000;

/// Least time between two turns of the event loop from the hook while a script is busy.
const BUSY_TURN_EVERY: std::time::Duration = std::time::Duration::from_millis(1);

pub type Sha = [u8; 40];

/// Shebang flags (`#!lua flags=…`). Without a shebang a script is in compatibility mode.
pub mod shebang {
    pub const COMPAT: u32 = 1 << 0;
    pub const NO_WRITES: u32 = 1 << 1;
    pub const ALLOW_OOM: u32 = 1 << 2;
    pub const ALLOW_STALE: u32 = 1 << 3;
    pub const NO_CLUSTER: u32 = 1 << 4;
    pub const ALLOW_CROSS_SLOT: u32 = 1 << 5;

    const NAMES: &[(&str, u32)] = &[
        ("no-writes", NO_WRITES),
        ("allow-oom", ALLOW_OOM),
        ("allow-stale", ALLOW_STALE),
        ("no-cluster", NO_CLUSTER),
        ("allow-cross-slot-keys", ALLOW_CROSS_SLOT),
    ];

    /// Redis's `evalExtractShebangFlags`: (flags, length of the shebang line without its
    /// newline), or the error text (without the `ERR ` Redis adds).
    pub fn parse(body: &[u8]) -> Result<(u32, usize), String> {
        if !body.starts_with(b"#!") {
            return Ok((COMPAT, 0));
        }
        let Some(end) = body.iter().position(|&b| b == b'\n') else {
            return Err("Invalid script shebang".into());
        };
        let parts = match crate::protocol::decode::split_args(&body[..end]) {
            Some(p) if !p.is_empty() => p,
            _ => return Err("Invalid engine in script shebang".into()),
        };
        if parts[0] != b"#!lua" {
            return Err(format!(
                "Unexpected engine in script shebang: {}",
                String::from_utf8_lossy(&parts[0])
            ));
        }
        let mut flags = 0;
        for part in &parts[1..] {
            let Some(list) = part.strip_prefix(b"flags=") else {
                return Err(format!(
                    "Unknown lua shebang option: {}",
                    String::from_utf8_lossy(part)
                ));
            };
            if list.is_empty() {
                continue;
            }
            for f in list.split(|&b| b == b',') {
                match NAMES.iter().find(|(n, _)| n.as_bytes() == f) {
                    Some((_, bit)) => flags |= bit,
                    None => {
                        return Err(format!(
                            "Unexpected flag in script shebang: {}",
                            String::from_utf8_lossy(f)
                        ))
                    }
                }
            }
        }
        Ok((flags, end))
    }
}

struct Script {
    func: Function,
    flags: u32,
    /// Set when the body is one of the lock clients' scripts that run natively (native.rs).
    native: Option<native::Program>,
}

/// What the Rust callbacks and the hook see of the script being run.
struct RunState {
    /// The running script's `Ctx`, type-erased; null outside a script run. See `Engine::run`.
    ///
    /// A pointer, kept for a measured reason: redis.call/pcall are Lua C functions (raw.rs),
    /// which reach Rust state only through a pointer (Redis keeps its own in the global
    /// `curr_run_ctx`). The safe alternative, a closure borrowing the context made per run with
    /// `Lua::scope`, cost +550 ns per EVAL for a single callback against 148 ns for a whole
    /// `return redis.call('x')` run this way (mlua 0.12.2, release build, this project's
    /// 2-core machine, 200k runs each): several percent of a lock script, on every EVAL.
    ctx: Cell<*mut ()>,
    resp3: Cell<bool>,
    read_only: Cell<bool>,
    dirty: Cell<bool>,
    /// Over maxmemory when the script started and not `allow-oom` (Redis's
    /// `pre_command_oom_state` without `SCRIPT_ALLOW_OOM`): its first deny-oom call is refused.
    oom_at_start: Cell<bool>,
    /// lua-memory-limit in bytes (0: none), for checks made before a large allocation.
    memory_limit: Cell<usize>,
    killed: Cell<bool>,
    /// Set by the runner's error handler: the run is over and only the handler's few steps
    /// remain, which the hook must let finish (raising again would re-enter the handler).
    unwinding: Cell<bool>,
    run_id: Cell<u64>,
    started: Cell<Instant>,
    /// When the hook last served other clients while busy (see `hook`).
    last_turn: Cell<Instant>,
    threshold_ms: Cell<u64>,
    busy: Cell<bool>,
    sha: Cell<Sha>,
    /// The function being run (FCALL); None for EVAL, named by `sha` then.
    fname: RefCell<Option<Bytes>>,
    /// The running FCALL's whole argv (pointer, length), for FUNCTION STATS once it is busy.
    argv: Cell<(*const Bytes, usize)>,
    /// FUNCTION LOAD's deadline while a library's code runs (Redis's 500 ms load timeout).
    load_deadline: Cell<Option<Instant>>,
    /// What `redis.register_function` registered; Some only while a library loads.
    registered: RefCell<Option<Vec<functions::Registered>>>,
    /// KEYS and ARGV of the run about to start (pointer, length each), read by `raw::setup`.
    pending: Cell<(*const Bytes, usize, *const Bytes, usize)>,
    /// Redis's rand48 state (`redisLrand48`), shared by all scripts and not reset per run.
    rand: Cell<u64>,
    shared: Arc<Shared>,
    /// What the loop answering other clients reads while this script is busy (`State::busy`).
    busy_state: Rc<BusyState>,
}

impl RunState {
    fn hook(&self) -> mlua::Result<VmState> {
        if self.ctx.get().is_null() || self.unwinding.get() {
            return Ok(VmState::Continue);
        }
        if self.killed.get() {
            return Err(mlua::Error::runtime("script killed"));
        }
        // A shutdown (SIGTERM/SIGINT) stops a script before busy-reply-threshold too: waiting
        // for the threshold would leave it to the shutdown watchdog's hard exit.
        if self.shared.script.shutdown.load(Ordering::Acquire) {
            self.killed.set(true);
            return Err(mlua::Error::runtime("script killed"));
        }
        let mut first = false;
        if !self.busy.get() {
            let elapsed = self.started.get().elapsed().as_millis() as u64;
            if elapsed < self.threshold_ms.get() {
                return Ok(VmState::Continue);
            }
            self.busy.set(true);
            first = true;
            // SAFETY: non-null (checked above) only while the script runs, inside
            // `runner.call` (see `Engine::run`); the hook runs between Lua instructions on
            // this thread, never inside a callback that holds its own `&mut Ctx`, so this is
            // the only reference made from the pointer while it lives.
            let ctx = unsafe { &*(self.ctx.get() as *const Ctx<'static>) };
            // Nothing changes the users while the script runs (ACL and CONFIG are noscript).
            self.busy_state.set_users(&ctx.srv.config.users);
            let fname = self.fname.borrow().clone();
            let is_function = fname.is_some();
            if let Some(name) = &fname {
                let (p, n) = self.argv.get();
                // SAFETY: set by `Engine::run_with` from the FCALL's live argv for the
                // duration of the run; this hook runs inside that run.
                let argv = if p.is_null() {
                    Vec::new()
                } else {
                    unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
                };
                *self.busy_state.running_function.borrow_mut() =
                    Some(crate::machine::busy::RunningFunction {
                        name: name.clone(),
                        argv,
                        started: self.started.get(),
                    });
            }
            self.busy_state.function.set(is_function);
            // Other clients get -BUSY from here on; the log line comes after, so whoever sees
            // it can rely on the flag.
            self.busy_state.busy.set(self.run_id.get());
            let name = match &fname {
                Some(n) => String::from_utf8_lossy(n).into_owned(),
                None => String::from_utf8_lossy(&self.sha.get()).into_owned(),
            };
            tracing::warn!(
                "Slow script detected: still in execution after {elapsed} milliseconds. You can try killing the script using the {} KILL command. Script name is: {name}.",
                if is_function { "FUNCTION" } else { "SCRIPT" }
            );
        }
        // Other connections are read and answered from here, as Redis's
        // processEventsWhileBlocked (SCRIPT KILL and SHUTDOWN NOSAVE arrive this way). That
        // is a poll syscall: at most one a millisecond, now that the hook runs every
        // HOOK_EVERY instructions instead of Redis's 100000.
        let now = Instant::now();
        if first || now.duration_since(self.last_turn.get()) >= BUSY_TURN_EVERY {
            self.last_turn.set(now);
            // SAFETY: non-null (checked above) only while the script runs, inside
            // `runner.call` (see `Engine::run`); the hook runs between Lua instructions on this
            // thread, never inside a callback that holds its own `&mut Ctx`, so this is the
            // only reference made from the pointer while it lives.
            let ctx = unsafe { &*(self.ctx.get() as *const Ctx<'static>) };
            ctx.host.while_busy();
        }
        if self.busy_state.kill.get() == self.run_id.get()
            || self.shared.script.shutdown.load(Ordering::Acquire)
        {
            self.killed.set(true);
            return Err(mlua::Error::runtime("script killed"));
        }
        Ok(VmState::Continue)
    }

    fn lrand(&self) -> f64 {
        const MASK: u64 = (1 << 48) - 1;
        let x = (self.rand.get().wrapping_mul(0x5DEE_CE66D).wrapping_add(0xB)) & MASK;
        self.rand.set(x);
        let v = (x >> 17) as u32 as u64;
        const MAX: u64 = i32::MAX as u64;
        (v % MAX) as f64 / MAX as f64
    }
}

/// An error table made from a failed `redis.call` / `redis.pcall`, whose error was counted in
/// errorstats when the call failed (Redis's `ignore_error_stats_update`).
fn counted_error(v: &Value) -> bool {
    match v {
        Value::Table(t) => {
            t.raw_get::<bool>("ignore_error_stats_update")
                .unwrap_or(false)
                && matches!(t.raw_get::<Value>("err"), Ok(Value::String(_)))
        }
        _ => false,
    }
}

/// What is being run: a cached script (by its SHA) or a library's function (by its name).
#[derive(Clone, Copy)]
enum RunName<'a> {
    Eval(&'a Sha),
    Function(&'a Bytes),
}

pub struct Engine {
    lua: Lua,
    scripts: HashMap<Sha, Script, ahash::RandomState>,
    /// The bootstrap's `function(f) return xpcall(f, handler) end`.
    runner: Function,
    /// The same for a function: `f(keys, args)` under the handler, no KEYS/ARGV globals.
    frunner: Function,
    /// The bootstrap's `load_library(chunk)`: runs a library's code with only the library API
    /// as globals; nil or the error text.
    load_library: Function,
    /// Lua's own `loadstring`, for compiling a library (see `functions`).
    compile: Function,
    /// `raw::FIELDS` as a Lua table (keys for reading returned tables without allocating).
    fields: mlua::Table,
    st: Rc<RunState>,
    memory_limit: usize,
    /// Runs since the last collection step (Redis's LUA_GC_CYCLE_PERIOD counter).
    gc_count: Cell<u32>,
}

/// Every this many script runs, one incremental collection step of this many KB, as Redis's
/// luaCallFunction does: the garbage of many short scripts is reclaimed steadily instead of
/// piling up to Lua's own collection threshold (twice the live heap).
const GC_CYCLE_PERIOD: u32 = 50;

/// The engine `State::scripting` holds, if it has been created.
fn engine_of(state: &State) -> Option<&Engine> {
    state.scripting.as_ref()?.downcast_ref::<Engine>()
}

/// Runs `f` with the server's engine (`State::scripting`), creating it on first use. It is
/// taken out of the state while `f` runs, so nothing reaches it re-entrantly (a script can't
/// run script commands: they are flagged noscript).
pub fn with_engine<R>(
    ctx: &mut Ctx,
    f: impl FnOnce(&mut Engine, &mut Ctx) -> R,
) -> Result<R, CmdError> {
    let taken = ctx
        .srv
        .scripting
        .take()
        .and_then(|e| e.downcast::<Engine>().ok());
    let mut engine = match taken {
        Some(e) => e,
        None => Box::new(
            Engine::new(
                ctx.srv.shared.clone(),
                ctx.srv.busy.clone(),
                ctx.srv.config.lua_memory_limit as usize,
            )
            .map_err(|e| CmdError::erf(format!("Failed to initialize the Lua engine: {e}")))?,
        ),
    };
    let r = f(&mut engine, ctx);
    ctx.srv.scripting = Some(engine);
    Ok(r)
}

/// The shebang flags of a cached script; None if it is not cached (or a script is running:
/// the engine is then taken out, and the caller falls back to the command's own flags).
pub fn cached_flags(state: &State, sha: &Sha) -> Option<u32> {
    engine_of(state)?.scripts.get(sha).map(|s| s.flags)
}

/// Lua heap in use and number of cached scripts, for INFO (`used_memory_lua`,
/// `number_of_cached_scripts`); zeros before the first script.
pub fn memory_and_scripts(state: &State) -> (usize, usize) {
    // Whole KB, as Redis's lua_gc(LUA_GCCOUNT) * 1024.
    engine_of(state).map_or((0, 0), |e| {
        (e.lua.used_memory() / 1024 * 1024, e.scripts.len())
    })
}

/// SCRIPT FLUSH: drops the whole state (and every cached function) like Redis does.
pub fn flush(state: &mut State) {
    state.scripting = None;
}

pub fn sha1hex(body: &[u8]) -> Sha {
    let digest = sha1_smol::Sha1::from(body).digest().bytes();
    let mut out = [0u8; 40];
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in digest.iter().enumerate() {
        out[2 * i] = HEX[(b >> 4) as usize];
        out[2 * i + 1] = HEX[(b & 15) as usize];
    }
    out
}

/// A user-supplied SHA as a cache key (matched case-insensitively); None if not 40 bytes.
pub fn sha_key(s: &[u8]) -> Option<Sha> {
    let mut out: Sha = [0; 40];
    if s.len() != 40 {
        return None;
    }
    for (d, c) in out.iter_mut().zip(s) {
        *d = c.to_ascii_lowercase();
    }
    Some(out)
}

/// Calls its upvalue with its arguments. The API functions that raise errors are Lua code
/// wrapped in this C function: a script's `return redis.call(…)` is then a call to a C
/// function, which Lua 5.1 does not turn into a tail call, so the script's frame (its line in
/// the error) survives, as with Redis's C implementations.
unsafe extern "C-unwind" fn trampoline(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    use mlua::ffi;
    let n = ffi::lua_gettop(l);
    ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
    ffi::lua_insert(l, 1);
    // Errors propagate (longjmp) through this frame, which owns nothing to drop.
    ffi::lua_call(l, n, ffi::LUA_MULTRET);
    ffi::lua_gettop(l)
}

impl Engine {
    fn new(shared: Arc<Shared>, busy: Rc<BusyState>, memory_limit: usize) -> mlua::Result<Engine> {
        // SAFETY: `debug` is needed by the bootstrap's error handler; the bootstrap removes it
        // from the globals before any script runs, as Redis does.
        let lua = unsafe {
            Lua::unsafe_new_with(
                StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG,
                LuaOptions::new(),
            )
        };
        let st = Rc::new(RunState {
            ctx: Cell::new(std::ptr::null_mut()),
            resp3: Cell::new(false),
            read_only: Cell::new(false),
            dirty: Cell::new(false),
            oom_at_start: Cell::new(false),
            memory_limit: Cell::new(memory_limit),
            killed: Cell::new(false),
            unwinding: Cell::new(false),
            run_id: Cell::new(0),
            started: Cell::new(Instant::now()),
            last_turn: Cell::new(Instant::now()),
            threshold_ms: Cell::new(5000),
            busy: Cell::new(false),
            sha: Cell::new([b'0'; 40]),
            fname: RefCell::new(None),
            argv: Cell::new((std::ptr::null(), 0)),
            load_deadline: Cell::new(None),
            registered: RefCell::new(None),
            pending: Cell::new((std::ptr::null(), 0, std::ptr::null(), 0)),
            rand: Cell::new(0x1234_ABCD_330E),
            busy_state: busy,
            shared,
        });
        let rs = lua.create_table()?;
        // SAFETY: the registry slot and the C closure are made with plain API calls; the
        // RunState pointer stays valid as long as the engine (which owns an Rc of it) and is
        // only dereferenced while a script runs.
        let slot: i64 = unsafe {
            lua.exec_raw((), |l| {
                mlua::ffi::lua_pushboolean(l, 1);
                let r = mlua::ffi::luaL_ref(l, mlua::ffi::LUA_REGISTRYINDEX);
                mlua::ffi::lua_pushinteger(l, r as mlua::ffi::lua_Integer);
            })?
        };
        let st_ptr = Rc::as_ptr(&st) as *mut std::os::raw::c_void;
        let call: Function = unsafe {
            lua.exec_raw((), |l| {
                mlua::ffi::lua_pushlightuserdata(l, st_ptr);
                mlua::ffi::lua_pushnumber(l, slot as f64);
                mlua::ffi::lua_pushcclosure(l, raw::push, 0);
                mlua::ffi::lua_pushcclosure(l, raw::rcall, 3);
            })?
        };
        rs.set("call", call)?;
        // The globals, KEYS and ARGV included, live in `vars` (global lookups fall through to
        // it, see bootstrap.lua); `setup` puts KEYS and ARGV there from `RunState::pending` at
        // the start of each run, inside the run's protected call.
        let vars = lua.create_table()?;
        let setup: Function = unsafe {
            lua.exec_raw(&vars, |l| {
                mlua::ffi::lua_pushlightuserdata(l, st_ptr);
                mlua::ffi::lua_insert(l, 1);
                // The two names, interned once rather than looked up at every run.
                mlua::ffi::lua_pushlstring(l, c"KEYS".as_ptr(), 4);
                mlua::ffi::lua_pushlstring(l, c"ARGV".as_ptr(), 4);
                mlua::ffi::lua_pushcclosure(l, raw::setup, 4);
            })?
        };
        rs.set("vars", vars)?;
        // SAFETY: pushes a plain C function (no upvalues).
        let unpack: Function =
            unsafe { lua.exec_raw((), |l| mlua::ffi::lua_pushcfunction(l, raw::unpack))? };
        rs.set("unpack", unpack)?;
        // SAFETY: one C closure over the RunState pointer (see `call` above).
        let unwinding: Function = unsafe {
            lua.exec_raw((), |l| {
                mlua::ffi::lua_pushlightuserdata(l, st_ptr);
                mlua::ffi::lua_pushcclosure(l, raw::unwinding, 1);
            })?
        };
        rs.set("unwinding", unwinding)?;
        // SAFETY: as `unwinding`.
        let pcall: Function = unsafe {
            lua.exec_raw((), |l| {
                mlua::ffi::lua_pushlightuserdata(l, st_ptr);
                mlua::ffi::lua_pushcclosure(l, raw::pcall, 1);
            })?
        };
        rs.set("pcall", pcall)?;
        // SAFETY: as `unwinding`.
        let xpcall: Function = unsafe {
            lua.exec_raw((), |l| {
                mlua::ffi::lua_pushlightuserdata(l, st_ptr);
                mlua::ffi::lua_pushcclosure(l, raw::xpcall, 1);
            })?
        };
        rs.set("xpcall", xpcall)?;
        // SAFETY: as `unwinding`, with Lua's own coroutine.resume (a C function) as upvalue 2.
        let resume: Function = unsafe {
            lua.exec_raw((), |l| {
                mlua::ffi::lua_pushlightuserdata(l, st_ptr);
                mlua::ffi::lua_getfield(l, mlua::ffi::LUA_GLOBALSINDEX, c"coroutine".as_ptr());
                mlua::ffi::lua_getfield(l, -1, c"resume".as_ptr());
                mlua::ffi::lua_remove(l, -2);
                mlua::ffi::lua_pushcclosure(l, raw::resume, 2);
            })?
        };
        rs.set("resume", resume)?;
        // SAFETY: as `unwinding`, with Lua's own string.rep as upvalue 2 for `rep`.
        let (tinsert, rep): (Function, Function) = unsafe {
            (
                lua.exec_raw((), |l| {
                    mlua::ffi::lua_pushlightuserdata(l, st_ptr);
                    mlua::ffi::lua_pushcclosure(l, raw::tinsert, 1);
                })?,
                lua.exec_raw((), |l| {
                    mlua::ffi::lua_pushlightuserdata(l, st_ptr);
                    mlua::ffi::lua_getfield(l, mlua::ffi::LUA_GLOBALSINDEX, c"string".as_ptr());
                    mlua::ffi::lua_getfield(l, -1, c"rep".as_ptr());
                    mlua::ffi::lua_remove(l, -2);
                    mlua::ffi::lua_pushcclosure(l, raw::rep, 2);
                })?,
            )
        };
        rs.set("tinsert", tinsert)?;
        rs.set("rep", rep)?;
        for (name, f) in [
            ("find", raw::deadbolt_str_find as mlua::ffi::lua_CFunction),
            ("match", raw::deadbolt_str_match),
            ("gmatch", raw::deadbolt_gmatch),
            ("gsub", raw::deadbolt_str_gsub),
        ] {
            // SAFETY: as `unwinding`: a C closure over the RunState's address.
            let func: Function = unsafe {
                lua.exec_raw((), |l| {
                    mlua::ffi::lua_pushlightuserdata(l, st_ptr);
                    mlua::ffi::lua_pushcclosure(l, f, 1);
                })?
            };
            rs.set(name, func)?;
        }

        let s = st.clone();
        rs.set("lrand", lua.create_function(move |_, ()| Ok(s.lrand()))?)?;
        let s = st.clone();
        rs.set(
            "srand",
            lua.create_function(move |_, seed: f64| {
                let seed = seed as i64 as i32 as u32 as u64;
                s.rand.set((seed << 16) | 0x330E);
                Ok(())
            })?,
        )?;
        rs.set(
            "sha1hex",
            lua.create_function(|lua, s: mlua::LuaString| {
                lua.create_string(sha1hex(&s.as_bytes()))
            })?,
        )?;
        rs.set(
            "log",
            lua.create_function(|_, (level, msg): (u8, mlua::LuaString)| {
                let msg = String::from_utf8_lossy(&msg.as_bytes()).into_owned();
                match level {
                    0 => tracing::debug!("{msg}"),
                    1 => tracing::debug!("{msg}"),
                    2 => tracing::info!("{msg}"),
                    _ => tracing::warn!("{msg}"),
                }
                Ok(())
            })?,
        )?;
        let s = st.clone();
        rs.set(
            "setresp",
            lua.create_function(move |_, v: u8| {
                s.resp3.set(v == 3);
                Ok(())
            })?,
        )?;
        let s = st.clone();
        rs.set(
            "acl_check",
            lua.create_function(move |_, argv: mlua::Variadic<mlua::LuaString>| {
                let ptr = s.ctx.get();
                if ptr.is_null() || argv.is_empty() {
                    return Ok(None);
                }
                // SAFETY: non-null only while the script runs (see `Engine::run`); this
                // callback holds no other reference made from the pointer, and the shared one
                // made here ends before it returns.
                let ctx = unsafe { &*(ptr as *const Ctx<'static>) };
                let argv: Vec<Bytes> = argv
                    .iter()
                    .map(|a| Bytes::copy_from_slice(&a.as_bytes()))
                    .collect();
                // Redis's lookupCommand: a container with arguments names its subcommand.
                let t = crate::cmd::registry::table();
                let Some(mut id) = t.lookup(&argv[0]) else {
                    return Ok(None);
                };
                if !t.entries[id].subs.is_empty() && argv.len() > 1 {
                    let Some(sub) = t.lookup_sub(id, &argv[1]) else {
                        return Ok(None);
                    };
                    id = sub;
                }
                // The user running the script (ACLCheckAllUserCommandPerm).
                Ok(Some(ctx.client.perms.as_ref().is_none_or(|u| {
                    crate::cmd::dispatch::check_user(u, id, &argv).is_ok()
                })))
            })?,
        )?;
        rs.set("version", REDIS_VERSION)?;
        rs.set("version_num", REDIS_VERSION_NUM)?;
        rs.set("bit", bit::create(&lua)?)?;
        rs.set("cjson", cjson::create(&lua)?)?;
        rs.set("struct", structlib::create(&lua)?)?;
        rs.set("cmsgpack", cmsgpack::create(&lua)?)?;
        rs.set(
            "cjson_new",
            lua.create_function(|lua, ()| cjson::create(lua))?,
        )?;
        rs.set(
            "cwrap",
            lua.create_function(|lua, f: Function| {
                // SAFETY: pushes one C closure over the function given as the only argument.
                unsafe {
                    lua.exec_raw::<Function>(f, |l| mlua::ffi::lua_pushcclosure(l, trampoline, 1))
                }
            })?,
        )?;
        let reg = st.clone();
        rs.set(
            "register",
            lua.create_function(move |lua, args: mlua::MultiValue| {
                Ok(functions::register(lua, &reg, args).err())
            })?,
        )?;
        let handler: Function = lua
            .load(BOOTSTRAP)
            .set_name("=deadbolt")
            .set_mode(ChunkMode::Text)
            .call(rs.clone())?;
        let load_library: Function = rs.get("load_library")?;
        let compile: Function = rs.get("compile")?;
        // SAFETY: one C closure over the RunState pointer, `setup` and the bootstrap's handler.
        let runner: Function = unsafe {
            lua.exec_raw((&setup, &handler), |l| {
                mlua::ffi::lua_pushlightuserdata(l, st_ptr);
                mlua::ffi::lua_insert(l, 1);
                mlua::ffi::lua_pushcclosure(l, raw::run, 3);
            })?
        };
        // SAFETY: one C closure over the RunState pointer and the bootstrap's handler.
        let frunner: Function = unsafe {
            lua.exec_raw(&handler, |l| {
                mlua::ffi::lua_pushlightuserdata(l, st_ptr);
                mlua::ffi::lua_insert(l, 1);
                mlua::ffi::lua_pushcclosure(l, raw::frun, 2);
            })?
        };
        // SAFETY: the RunState's address goes to the registry under raw::HOOK_KEY (the engine
        // owns an Rc of it for as long as the Lua state lives) and the hook is a plain C
        // function; threads the script creates inherit it (lua_newthread copies the hook).
        unsafe {
            lua.exec_raw::<()>((), |l| {
                mlua::ffi::lua_pushlightuserdata(l, raw::hook_key());
                mlua::ffi::lua_pushlightuserdata(l, st_ptr);
                mlua::ffi::lua_rawset(l, mlua::ffi::LUA_REGISTRYINDEX);
                mlua::ffi::lua_sethook(
                    l,
                    Some(raw::count_hook),
                    mlua::ffi::LUA_MASKCOUNT,
                    HOOK_EVERY,
                );
            })?
        };
        let fields = lua.create_sequence_from(raw::FIELDS)?;
        lua.set_memory_limit(memory_limit)?;
        Ok(Engine {
            lua,
            scripts: HashMap::default(),
            runner,
            frunner,
            load_library,
            compile,
            fields,
            st,
            memory_limit,
            gc_count: Cell::new(0),
        })
    }

    pub fn exists(&self, sha: &[u8]) -> bool {
        sha_key(sha).is_some_and(|k| self.scripts.contains_key(&k))
    }

    pub fn contains(&self, sha: &Sha) -> bool {
        self.scripts.contains_key(sha)
    }

    /// Compiles `body` into the cache (EVAL of a new body, SCRIPT LOAD); its SHA.
    pub fn create(&mut self, body: &[u8]) -> Result<Sha, CmdError> {
        let sha = sha1hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let (flags, shebang_len) = shebang::parse(body).map_err(CmdError::erf)?;
        // The shebang line is cut but its newline kept, so line numbers stay the user's.
        let func = self
            .lua
            .load(&body[shebang_len..])
            .set_name("@user_script")
            .set_mode(ChunkMode::Text)
            .into_function()
            .map_err(|e| {
                let msg = match e {
                    mlua::Error::SyntaxError { message, .. } => message,
                    mlua::Error::MemoryError(m) => m,
                    other => other.to_string(),
                };
                CmdError::erf(format!(
                    "Error compiling script (new function): {}",
                    msg.replace(['\r', '\n'], " ")
                ))
            })?;
        let native = native::recognise(body);
        self.scripts.insert(
            sha,
            Script {
                func,
                flags,
                native,
            },
        );
        Ok(sha)
    }

    /// Runs a cached script with its KEYS and ARGV; `ro` for EVAL_RO / EVALSHA_RO.
    pub fn run(
        &mut self,
        ctx: &mut Ctx,
        sha: &Sha,
        keys: &[Bytes],
        args: &[Bytes],
        ro: bool,
    ) -> Frame {
        self.adopt_memory_limit(ctx);
        let Some(script) = self.scripts.get(sha) else {
            return Frame::Error(Bytes::from_static(
                b"NOSCRIPT No matching script. Please use EVAL.",
            ));
        };
        if let Some(program) = script.native {
            if let Some(reply) = native::run(program, ctx, keys, args, ro) {
                return reply;
            }
        }
        self.run_with(
            ctx,
            &script.func,
            script.flags,
            RunName::Eval(sha),
            (keys, args, &[]),
            ro,
        )
    }

    fn adopt_memory_limit(&mut self, ctx: &Ctx) {
        let limit = ctx.srv.config.lua_memory_limit as usize;
        if limit != self.memory_limit && self.lua.set_memory_limit(limit).is_ok() {
            self.memory_limit = limit;
        }
    }

    /// Runs a library's function (FCALL / FCALL_RO): `f(keys, args)`; `argv` is the whole
    /// command, for FUNCTION STATS.
    #[allow(clippy::too_many_arguments)]
    pub fn run_function(
        &mut self,
        ctx: &mut Ctx,
        func: &Function,
        flags: u32,
        name: &Bytes,
        keys: &[Bytes],
        args: &[Bytes],
        argv: &[Bytes],
        ro: bool,
    ) -> Frame {
        self.adopt_memory_limit(ctx);
        self.run_with(
            ctx,
            func,
            flags,
            RunName::Function(name),
            (keys, args, argv),
            ro,
        )
    }

    /// Redis's scriptPrepareForRun + luaCallFunction + scriptResetRun for one script or
    /// function.
    fn run_with(
        &self,
        ctx: &mut Ctx,
        func: &Function,
        flags: u32,
        name: RunName,
        (keys, args, argv): (&[Bytes], &[Bytes], &[Bytes]),
        ro: bool,
    ) -> Frame {
        let compat = flags & shebang::COMPAT != 0;
        let no_writes = flags & shebang::NO_WRITES != 0;
        if !compat && !no_writes && ro {
            return Frame::Error(Bytes::from_static(
                b"ERR Can not execute a script with write flag using *_ro command.",
            ));
        }
        // Redis's scriptPrepareForRun, after the *_ro check: a shebang script that may write
        // is refused while over maxmemory (EVAL and EVALSHA were already refused by the
        // command's deny-oom check; this covers the rest, e.g. a script queued in MULTI).
        let max = ctx.srv.config.maxmemory;
        let oom = max != 0 && crate::alloc::used_memory() as u64 > max;
        let allow_oom = !compat && flags & shebang::ALLOW_OOM != 0;
        if oom && !compat && !allow_oom && !no_writes {
            return Frame::Error(Bytes::from_static(
                b"OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'",
            ));
        }
        let st = &self.st;
        st.oom_at_start.set(oom && !allow_oom);
        st.memory_limit.set(self.memory_limit);
        st.resp3.set(false);
        st.read_only.set(ro || (!compat && no_writes));
        st.dirty.set(false);
        st.killed.set(false);
        st.unwinding.set(false);
        st.busy.set(false);
        // Numbered across both engines (EVAL's and the functions'), so a kill meant for one
        // run never matches a later run of the other.
        let run_id = st.busy_state.runs.get() + 1;
        st.busy_state.runs.set(run_id);
        st.run_id.set(run_id);
        match name {
            RunName::Eval(sha) => st.sha.set(*sha),
            RunName::Function(n) => *st.fname.borrow_mut() = Some(n.clone()),
        }
        st.argv.set((argv.as_ptr(), argv.len()));
        st.threshold_ms.set(ctx.srv.config.busy_reply_threshold);
        st.started.set(Instant::now());
        let saved_db = ctx.client.db;
        let result = {
            // Commands called by the script run in their own context (in_script, the caller's
            // frozen `now`) over the same server and client.
            let mut sctx = Ctx {
                srv: &mut *ctx.srv,
                host: &mut *ctx.host,
                client: &mut *ctx.client,
                now: ctx.now,
                in_script: true,
            };
            // SAFETY: the pointer is valid for exactly the duration of `runner.call`: `sctx`
            // outlives the call, nothing else touches `ctx` meanwhile (this function holds the
            // only borrow), and it is cleared before `sctx` goes away. Callbacks run on this
            // thread, inside the call, one at a time (Lua is single-threaded), so the `&mut Ctx`
            // they make never coexists with another. The engine itself is not reachable
            // through `Ctx` (it lives in a thread-local, taken out while running).
            st.ctx.set(&mut sctx as *mut Ctx as *mut ());
            st.pending
                .set((keys.as_ptr(), keys.len(), args.as_ptr(), args.len()));
            let runner = match name {
                RunName::Eval(_) => &self.runner,
                RunName::Function(_) => &self.frunner,
            };
            let r = runner.call::<(bool, Value)>(func);
            st.pending.set((std::ptr::null(), 0, std::ptr::null(), 0));
            st.ctx.set(std::ptr::null_mut());
            r
        };
        ctx.client.db = saved_db;
        let busy = &st.busy_state;
        if st.busy.get() {
            busy.busy.set(0);
            busy.function.set(false);
            *busy.running_function.borrow_mut() = None;
            *busy.users.borrow_mut() = None;
        }
        st.argv.set((std::ptr::null(), 0));
        if matches!(name, RunName::Function(_)) {
            *st.fname.borrow_mut() = None;
        }
        let label: &[u8] = match name {
            RunName::Eval(sha) => sha,
            RunName::Function(n) => n,
        };
        if st.dirty.get() {
            busy.dirty.set(false);
        }
        if st.shared.script.shutdown.load(Ordering::Acquire) {
            // SHUTDOWN NOSAVE: the caller gets no reply; the server is going away.
            ctx.client.skip_reply = true;
            ctx.client.close_after_reply = true;
            return Frame::Null;
        }
        let frame = match result {
            // Scalars convert here as `raw::to_frame` converts them, without a second protected
            // call into Lua (lock scripts mostly return 0, 1 or nil).
            Ok((true, Value::Integer(i))) => Frame::Integer(i),
            Ok((true, Value::Number(n))) => Frame::Integer(convert::truncate(n)),
            Ok((true, Value::Nil)) => Frame::Null,
            Ok((true, Value::Boolean(b))) => match (self.st.resp3.get(), b) {
                (true, b) => Frame::Boolean(b),
                (false, true) => Frame::Integer(1),
                (false, false) => Frame::Null,
            },
            Ok((true, v)) => {
                if counted_error(&v) {
                    ctx.srv.stats.error_already_counted = true;
                }
                self.reply_of(v)
            }
            Ok((false, e)) => {
                if !self.st.killed.get() && counted_error(&e) {
                    ctx.srv.stats.error_already_counted = true;
                }
                self.error_frame(e, label)
            }
            Err(e) => Frame::Error(Bytes::from(format!(
                "ERR Error running script {}, {:.100}",
                String::from_utf8_lossy(label),
                e.to_string().replace(['\r', '\n'], " ")
            ))),
        };
        st.killed.set(false);
        // Lua 5.1 has no emergency collection: a script that ran out of memory leaves its
        // garbage at the limit, and every later allocation (even compiling `return 1` or
        // calling a cached script) fails until a collection that nothing triggers. Collect
        // whenever the run left the heap over half the limit; what a script allocated is
        // garbage once it returns (globals are read-only), so this is cheap.
        if self.memory_limit != 0 && self.lua.used_memory() > self.memory_limit / 2 {
            self.collect_garbage();
        }
        let runs = self.gc_count.get() + 1;
        if runs == GC_CYCLE_PERIOD {
            // SAFETY: lua_gc only runs the collector of this state; it leaves the stack as it
            // found it, and exec_raw runs it protected (a finaliser's error is returned).
            let _ = unsafe {
                self.lua.exec_raw::<()>((), |l| {
                    mlua::ffi::lua_gc(l, mlua::ffi::LUA_GCSTEP, GC_CYCLE_PERIOD as _);
                })
            };
            self.gc_count.set(0);
        } else {
            self.gc_count.set(runs);
        }
        frame
    }

    /// A full collection with the memory limit lifted, since the collection itself may need
    /// a little memory (its protected call) when the heap is at the limit.
    fn collect_garbage(&self) {
        let _ = self.lua.set_memory_limit(0);
        let _ = self.lua.gc_collect();
        let _ = self.lua.set_memory_limit(self.memory_limit);
    }

    /// The script's return value as its reply (see `raw::to_frame`).
    fn reply_of(&self, v: Value) -> Frame {
        let resp3 = self.st.resp3.get();
        let mut out = Frame::Null;
        // SAFETY: `to_frame` only reads (raw gets, lua_next, lua_checkstack): it neither
        // allocates in Lua nor raises, so no Rust value is ever skipped by a longjmp.
        let r = unsafe {
            self.lua.exec_raw::<()>((&self.fields, v), |l| {
                out = raw::to_frame(l, 1, resp3);
                mlua::ffi::lua_settop(l, 0);
            })
        };
        match r {
            Ok(()) => out,
            Err(e) => Frame::Error(Bytes::from(format!("ERR {e}").replace(['\r', '\n'], " "))),
        }
    }

    /// The reply for a script that raised: Redis's `-<err> script: <sha>, on <source>:<line>.`
    fn error_frame(&self, e: Value, sha: &[u8]) -> Frame {
        let sha = String::from_utf8_lossy(sha);
        let text = match e {
            Value::Table(t) => {
                let msg = if self.st.killed.get() {
                    "ERR Script killed by user with SCRIPT KILL...".to_string()
                } else {
                    match t.raw_get::<Value>("err") {
                        Ok(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                        // `error({})` crashes Redis 7.0 (a NULL message); we answer instead.
                        _ => "ERR unknown error".to_string(),
                    }
                };
                let source = t
                    .raw_get::<Option<mlua::LuaString>>("source")
                    .ok()
                    .flatten();
                let line = t.raw_get::<Option<i64>>("line").ok().flatten();
                match (source, line) {
                    (Some(src), Some(line)) => format!(
                        "{msg} script: {sha}, on {}:{line}.",
                        String::from_utf8_lossy(&src.as_bytes())
                    ),
                    _ => msg,
                }
            }
            // Memory errors bypass the error handler: Lua hands back its message as is.
            Value::String(s) => format!(
                "ERR Error running script {sha}, {:.100}",
                String::from_utf8_lossy(&s.as_bytes())
            ),
            _ => format!("ERR Error running script {sha}, execution failure"),
        };
        Frame::Error(Bytes::from(text.replace(['\r', '\n'], " ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_of_empty() {
        assert_eq!(&sha1hex(b""), b"da39a3ee5e6b4b0d3255bfef95601890afd80709");
    }

    #[test]
    fn shebang_rules() {
        assert_eq!(shebang::parse(b"return 1"), Ok((shebang::COMPAT, 0)));
        assert_eq!(shebang::parse(b"#!lua\nreturn 1"), Ok((0, 5)));
        assert_eq!(
            shebang::parse(b"#!lua flags=no-writes,allow-oom\nreturn 1"),
            Ok((shebang::NO_WRITES | shebang::ALLOW_OOM, 31))
        );
        assert_eq!(
            shebang::parse(b"#!lua"),
            Err("Invalid script shebang".to_string())
        );
        assert_eq!(
            shebang::parse(b"#!python\n"),
            Err("Unexpected engine in script shebang: #!python".to_string())
        );
        assert_eq!(
            shebang::parse(b"#!lua flags=foo\n"),
            Err("Unexpected flag in script shebang: foo".to_string())
        );
        assert_eq!(
            shebang::parse(b"#!lua name=foo\n"),
            Err("Unknown lua shebang option: name=foo".to_string())
        );
    }
}
