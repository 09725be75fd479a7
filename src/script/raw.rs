//! The hot path of scripting in the Lua C API: `redis.call` and KEYS/ARGV building.
//!
//! mlua protects every allocation it makes when a memory limit is set (one C closure and one
//! `lua_pcall` per string or table), which cost more than the script itself. Here each
//! `redis.call` does its Rust work first, then builds the whole reply in a single protected call
//! (`lua_pcall` of a prebuilt C function), so a memory error can never skip a Rust destructor: Lua only ever raises
//! (longjmp) through frames that own nothing.

use super::RunState;
use crate::cmd::{dispatch, Ctx};
use crate::protocol::number::fmt_g17;
use crate::protocol::Frame;
use bytes::Bytes;
use mlua::ffi;
use std::os::raw::{c_int, c_void};

/// What `redis.call` hands to the protected pusher: the reply (or error text) to turn into Lua.
struct PushJob<'a> {
    ok: bool,
    frame: &'a Frame,
    resp3: bool,
    slot: c_int,
}

/// The Rust side of `redis.call`/`redis.pcall`: returns `ok, value` (value = the reply, or the
/// error text when not ok). Upvalue 1: the RunState; upvalue 2: the registry slot (integer)
/// used to pass the built value out of the protected call; upvalue 3: `push`.
pub unsafe extern "C-unwind" fn rcall(l: *mut ffi::lua_State) -> c_int {
    let st = &*(ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const RunState);
    let slot = ffi::lua_tonumber(l, ffi::lua_upvalueindex(2)) as c_int;
    let (status, ok) = {
        // Everything owning memory lives in this block and is dropped before Lua may raise.
        let (ok, frame) =
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(l, st))) {
                Ok(r) => r,
                Err(_) => (
                    false,
                    Frame::Error(Bytes::from_static(b"ERR internal error in redis.call")),
                ),
            };
        let mut job = PushJob {
            ok,
            frame: &frame,
            resp3: st.resp3.get(),
            slot,
        };
        // The pusher is a C function made once (upvalue 3), so the protected call allocates
        // nothing itself; lightuserdata is an immediate value.
        ffi::lua_pushvalue(l, ffi::lua_upvalueindex(3));
        ffi::lua_pushlightuserdata(l, &mut job as *mut PushJob as *mut c_void);
        let status = ffi::lua_pcall(l, 1, 0, 0);
        (status, ok)
    };
    if status != 0 {
        // The memory error message is on the stack.
        ffi::lua_error(l);
    }
    ffi::lua_pushboolean(l, ok as c_int);
    ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, slot as ffi::lua_Integer);
    2
}

fn err(text: &'static str) -> (bool, Frame) {
    (false, Frame::Error(Bytes::from_static(text.as_bytes())))
}

/// Reads the arguments (no Lua call here can raise) and runs the command.
unsafe fn call(l: *mut ffi::lua_State, st: &RunState) -> (bool, Frame) {
    let ptr = st.ctx.get();
    if ptr.is_null() {
        return err("ERR redis.call/pcall can only be called inside a script invocation");
    }
    let n = ffi::lua_gettop(l);
    if n == 0 {
        return err("ERR Please specify at least one argument for this redis lib call");
    }
    let mut argv = Vec::with_capacity(n as usize);
    for i in 1..=n {
        match ffi::lua_type(l, i) {
            ffi::LUA_TSTRING => {
                let mut len = 0usize;
                let p = ffi::lua_tolstring(l, i, &mut len) as *const u8;
                argv.push(Bytes::copy_from_slice(std::slice::from_raw_parts(p, len)));
            }
            ffi::LUA_TNUMBER => argv.push(number_arg(ffi::lua_tonumber(l, i))),
            _ => return err("ERR Lua redis lib command arguments must be strings or integers"),
        }
    }
    // SAFETY: see `Engine::run`: non-null only while the script runs, inside `runner.call`;
    // Lua is single-threaded, so this is the only live reference.
    let ctx = &mut *(ptr as *mut Ctx<'static>);
    let deny_oom = st.oom_at_start.get() && !st.dirty.get();
    let (frame, write) = dispatch::script_call(ctx, &argv, st.read_only.get(), deny_oom);
    if write && !st.dirty.get() {
        st.dirty.set(true);
        st.busy_state.dirty.set(true);
    }
    match frame {
        Frame::Error(_) => (false, frame),
        // Doubles become strings in RESP2; format them here, where allocating is safe.
        Frame::Double(d) if !st.resp3.get() => (true, Frame::Bulk(Bytes::from(fmt_g17(d)))),
        Frame::DoubleText(_, text) if !st.resp3.get() => (true, Frame::Bulk(text)),
        f => (true, f),
    }
}

/// A number argument as Redis formats it (`%.17g`); integers, the common case (`hincrby …
/// 1`, leases), skip the general formatter.
fn number_arg(n: f64) -> Bytes {
    if n.fract() == 0.0 && n.abs() < 1e15 && !(n == 0.0 && n.is_sign_negative()) {
        let mut b = itoa::Buffer::new();
        Bytes::copy_from_slice(b.format(n as i64).as_bytes())
    } else {
        Bytes::from(fmt_g17(n))
    }
}

/// Runs under `lua_pcall`: builds the value and stores it in the registry slot.
pub unsafe extern "C-unwind" fn push(l: *mut ffi::lua_State) -> c_int {
    let job = &*(ffi::lua_touserdata(l, 1) as *const PushJob);
    if job.ok {
        push_frame(l, job.frame, job.resp3, 0);
    } else if let Frame::Error(e) = job.frame {
        push_bytes(l, e);
    } else {
        ffi::lua_pushnil(l);
    }
    ffi::lua_rawseti(l, ffi::LUA_REGISTRYINDEX, job.slot as ffi::lua_Integer);
    0
}

unsafe fn push_bytes(l: *mut ffi::lua_State, b: &[u8]) {
    ffi::lua_pushlstring(l, b.as_ptr() as *const _, b.len());
}

unsafe fn push_field(l: *mut ffi::lua_State, name: &[u8]) {
    // Value on top; wraps it as {name = value}.
    ffi::lua_createtable(l, 0, 1);
    push_bytes(l, name);
    ffi::lua_pushvalue(l, -3);
    ffi::lua_rawset(l, -3);
    ffi::lua_remove(l, -2);
}

/// Redis's reply → Lua conversion (lua-semantics.md §1.2), with raw API calls only: a memory
/// error longjmps out of here, and these frames own nothing.
unsafe fn push_frame(l: *mut ffi::lua_State, f: &Frame, resp3: bool, depth: usize) {
    ffi::luaL_checkstack(l, 4, c"reply too deep".as_ptr());
    match f {
        Frame::Integer(i) => ffi::lua_pushnumber(l, *i as f64),
        Frame::Bulk(b) => push_bytes(l, b),
        Frame::Simple(s) => {
            push_bytes(l, s);
            push_field(l, b"ok");
        }
        Frame::Error(e) => {
            push_bytes(l, e);
            push_field(l, b"err");
        }
        Frame::Null | Frame::NullArray => {
            if resp3 {
                ffi::lua_pushnil(l)
            } else {
                ffi::lua_pushboolean(l, 0)
            }
        }
        Frame::Array(items) | Frame::Push(items) => push_array(l, items, resp3, depth),
        Frame::Set(items) => {
            if resp3 {
                ffi::lua_createtable(l, 0, items.len().min(1 << 16) as c_int);
                for it in items {
                    push_frame(l, it, resp3, depth + 1);
                    ffi::lua_pushboolean(l, 1);
                    set_unless_nil_key(l);
                }
                push_field(l, b"set");
            } else {
                push_array(l, items, resp3, depth)
            }
        }
        Frame::Map(pairs) => {
            if resp3 {
                ffi::lua_createtable(l, 0, pairs.len().min(1 << 16) as c_int);
                for (k, v) in pairs {
                    push_frame(l, k, resp3, depth + 1);
                    push_frame(l, v, resp3, depth + 1);
                    set_unless_nil_key(l);
                }
                push_field(l, b"map");
            } else {
                ffi::lua_createtable(l, (pairs.len() * 2).min(1 << 16) as c_int, 0);
                for (i, (k, v)) in pairs.iter().enumerate() {
                    push_frame(l, k, resp3, depth + 1);
                    ffi::lua_rawseti(l, -2, (2 * i + 1) as ffi::lua_Integer);
                    push_frame(l, v, resp3, depth + 1);
                    ffi::lua_rawseti(l, -2, (2 * i + 2) as ffi::lua_Integer);
                }
            }
        }
        Frame::DoubleText(_, text) if !resp3 => push_bytes(l, text),
        Frame::Double(d) | Frame::DoubleText(d, _) => {
            // RESP2 doubles were turned into bulk strings before (see `call`).
            ffi::lua_pushnumber(l, *d);
            push_field(l, b"double");
        }
        Frame::Boolean(b) => {
            if resp3 {
                ffi::lua_pushboolean(l, *b as c_int)
            } else {
                ffi::lua_pushnumber(l, if *b { 1.0 } else { 0.0 })
            }
        }
        Frame::BigNumber(text) => {
            if resp3 {
                push_bytes(l, text);
                push_field(l, b"big_number");
            } else {
                push_bytes(l, text)
            }
        }
        // Redis's Lua conversion skips attributes and converts the reply that follows.
        Frame::Attribute(_, reply) => push_frame(l, reply, resp3, depth),
        Frame::Verbatim(text) => {
            if resp3 {
                ffi::lua_createtable(l, 0, 2);
                push_bytes(l, b"string");
                push_bytes(l, text);
                ffi::lua_rawset(l, -3);
                push_bytes(l, b"format");
                push_bytes(l, b"txt");
                ffi::lua_rawset(l, -3);
                push_field(l, b"verbatim_string");
            } else {
                push_bytes(l, text)
            }
        }
    }
}

unsafe fn push_array(l: *mut ffi::lua_State, items: &[Frame], resp3: bool, depth: usize) {
    ffi::lua_createtable(l, items.len().min(1 << 16) as c_int, 0);
    for (i, it) in items.iter().enumerate() {
        // A RESP3 null element leaves a hole, as in Redis.
        push_frame(l, it, resp3, depth + 1);
        ffi::lua_rawseti(l, -2, (i + 1) as ffi::lua_Integer);
    }
}

/// t[k] = v for the key and value on top of the stack (a nil key is dropped: Lua can't store it).
unsafe fn set_unless_nil_key(l: *mut ffi::lua_State) {
    if ffi::lua_type(l, -2) == ffi::LUA_TNIL {
        ffi::lua_pop(l, 2);
    } else {
        ffi::lua_rawset(l, -3);
    }
}

/// Fills fresh KEYS and ARGV tables into `vars` (upvalue 2) from the run's pending slices
/// (upvalue 1: the RunState). Called by the runner inside the run's protected call, so a memory
/// error here is the script's error; nothing here owns memory.
pub unsafe extern "C-unwind" fn setup(l: *mut ffi::lua_State) -> c_int {
    let st = &*(ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const RunState);
    let (kp, kn, ap, an) = st.pending.get();
    // Upvalues 3 and 4: the strings "KEYS" and "ARGV".
    let lists: [(c_int, *const Bytes, usize); 2] = [(3, kp, kn), (4, ap, an)];
    for (name, ptr, len) in lists {
        let list: &[Bytes] = if ptr.is_null() {
            &[]
        } else {
            // SAFETY: set by `Engine::run` from live slices for the duration of the run.
            std::slice::from_raw_parts(ptr, len)
        };
        ffi::lua_pushvalue(l, ffi::lua_upvalueindex(name));
        ffi::lua_createtable(l, list.len().min(1 << 24) as c_int, 0);
        for (i, k) in list.iter().enumerate() {
            push_bytes(l, k);
            ffi::lua_rawseti(l, -2, (i + 1) as ffi::lua_Integer);
        }
        ffi::lua_rawset(l, ffi::lua_upvalueindex(2));
    }
    0
}

/// Field names looked up in returned tables, in a table made once (`FIELDS` order), so that
/// the conversion pushes them without allocating.
pub const FIELDS: [&str; 8] = [
    "err",
    "ok",
    "double",
    "big_number",
    "map",
    "set",
    "verbatim_string",
    "string",
];
const F_ERR: ffi::lua_Integer = 1;
const F_OK: ffi::lua_Integer = 2;
const F_DOUBLE: ffi::lua_Integer = 3;
const F_BIG: ffi::lua_Integer = 4;
const F_MAP: ffi::lua_Integer = 5;
const F_SET: ffi::lua_Integer = 6;
const F_VERBATIM: ffi::lua_Integer = 7;
const F_STRING: ffi::lua_Integer = 8;

/// The script's return value (top of the stack) as a reply: Redis's `luaReplyToRedisReply`,
/// including where it gives up (`lua_checkstack` failing: `reached lua stack limit`). `fields`
/// is the stack index of the FIELDS table. Only raw reads: nothing here allocates in Lua or
/// raises. The stack is left as found.
pub unsafe fn to_frame(l: *mut ffi::lua_State, fields: c_int, resp3: bool) -> Frame {
    if ffi::lua_checkstack(l, 4) == 0 {
        return Frame::Error(Bytes::from_static(b"ERR reached lua stack limit"));
    }
    match ffi::lua_type(l, -1) {
        ffi::LUA_TSTRING => Frame::Bulk(Bytes::copy_from_slice(bytes_at(l, -1))),
        ffi::LUA_TNUMBER => Frame::Integer(super::convert::truncate(ffi::lua_tonumber(l, -1))),
        ffi::LUA_TBOOLEAN => {
            let b = ffi::lua_toboolean(l, -1) != 0;
            if resp3 {
                Frame::Boolean(b)
            } else if b {
                Frame::Integer(1)
            } else {
                Frame::Null
            }
        }
        ffi::LUA_TTABLE => table_to_frame(l, fields, resp3),
        _ => Frame::Null,
    }
}

unsafe fn bytes_at<'a>(l: *mut ffi::lua_State, idx: c_int) -> &'a [u8] {
    let mut len = 0usize;
    let p = ffi::lua_tolstring(l, idx, &mut len) as *const u8;
    std::slice::from_raw_parts(p, len)
}

/// Pushes t[FIELDS[f]] for the table on top; its Lua type.
unsafe fn get_field(l: *mut ffi::lua_State, fields: c_int, f: ffi::lua_Integer) -> c_int {
    ffi::lua_rawgeti(l, fields, f);
    ffi::lua_rawget(l, -2);
    ffi::lua_type(l, -1)
}

fn one_line(s: &[u8]) -> Bytes {
    let mut v = s.to_vec();
    for b in v.iter_mut() {
        if *b == b'\r' || *b == b'\n' {
            *b = b' ';
        }
    }
    Bytes::from(v)
}

unsafe fn table_to_frame(l: *mut ffi::lua_State, fields: c_int, resp3: bool) -> Frame {
    if get_field(l, fields, F_ERR) == ffi::LUA_TSTRING {
        let f = Frame::Error(one_line(bytes_at(l, -1)));
        ffi::lua_pop(l, 1);
        return f;
    }
    ffi::lua_pop(l, 1);
    if get_field(l, fields, F_OK) == ffi::LUA_TSTRING {
        let f = Frame::Simple(one_line(bytes_at(l, -1)));
        ffi::lua_pop(l, 1);
        return f;
    }
    ffi::lua_pop(l, 1);
    if get_field(l, fields, F_DOUBLE) == ffi::LUA_TNUMBER {
        let f = Frame::Double(ffi::lua_tonumber(l, -1));
        ffi::lua_pop(l, 1);
        return f;
    }
    ffi::lua_pop(l, 1);
    if get_field(l, fields, F_BIG) == ffi::LUA_TSTRING {
        let f = Frame::BigNumber(one_line(bytes_at(l, -1)));
        ffi::lua_pop(l, 1);
        return f;
    }
    ffi::lua_pop(l, 1);
    if get_field(l, fields, F_MAP) == ffi::LUA_TTABLE {
        let mut pairs = Vec::new();
        ffi::lua_pushnil(l);
        while ffi::lua_next(l, -2) != 0 {
            // map, key, value. The key is converted from a copy on top, as Redis does: the
            // stack height decides where a deep reply hits the stack limit.
            ffi::lua_pushvalue(l, -2);
            let k = to_frame(l, fields, resp3);
            ffi::lua_pop(l, 1);
            let v = to_frame(l, fields, resp3);
            ffi::lua_pop(l, 1);
            pairs.push((k, v));
        }
        ffi::lua_pop(l, 1);
        return Frame::Map(pairs);
    }
    ffi::lua_pop(l, 1);
    if get_field(l, fields, F_SET) == ffi::LUA_TTABLE {
        let mut items = Vec::new();
        ffi::lua_pushnil(l);
        while ffi::lua_next(l, -2) != 0 {
            ffi::lua_pop(l, 1);
            ffi::lua_pushvalue(l, -1);
            items.push(to_frame(l, fields, resp3));
            ffi::lua_pop(l, 1);
        }
        ffi::lua_pop(l, 1);
        return Frame::Set(items);
    }
    ffi::lua_pop(l, 1);
    if get_field(l, fields, F_VERBATIM) == ffi::LUA_TTABLE {
        if get_field(l, fields, F_STRING) == ffi::LUA_TSTRING {
            let f = Frame::Verbatim(Bytes::copy_from_slice(bytes_at(l, -1)));
            ffi::lua_pop(l, 2);
            return f;
        }
        ffi::lua_pop(l, 1);
    }
    ffi::lua_pop(l, 1);
    let mut items = Vec::new();
    let mut i: ffi::lua_Integer = 1;
    loop {
        ffi::lua_rawgeti(l, -1, i);
        if ffi::lua_type(l, -1) == ffi::LUA_TNIL {
            ffi::lua_pop(l, 1);
            break;
        }
        items.push(to_frame(l, fields, resp3));
        ffi::lua_pop(l, 1);
        i += 1;
    }
    Frame::Array(items)
}

/// `pcall`, as Redis 7.0 replaces it (`luaRedisPcall`): the status placeholder is pushed
/// before the call, so a call returning as many values as the stack holds still has room for
/// it (Lua 5.1's own pcall pushes it afterwards, past the frame's stack, when a pcall chain
/// returns more than LUA_MINSTACK values); an error table's `err` string is returned instead
/// of the table. A killed script's error is raised again: a kill cannot be caught. Upvalue 1:
/// the RunState.
pub unsafe extern "C-unwind" fn pcall(l: *mut ffi::lua_State) -> c_int {
    let st = &*(ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const RunState);
    let argc = ffi::lua_gettop(l);
    if argc == 0 {
        // Redis then calls its own placeholder.
        ffi::lua_pushboolean(l, 0);
        ffi::lua_pushstring(l, c"attempt to call a boolean value".as_ptr());
        return 2;
    }
    ffi::lua_pushboolean(l, 1);
    ffi::lua_insert(l, 1);
    if ffi::lua_pcall(l, argc - 1, ffi::LUA_MULTRET, 0) != 0 {
        if st.killed.get() {
            ffi::lua_error(l);
        }
        // The placeholder's slot makes room for the field read below.
        ffi::lua_remove(l, 1);
        if ffi::lua_type(l, -1) == ffi::LUA_TTABLE {
            ffi::lua_pushstring(l, c"err".as_ptr());
            ffi::lua_rawget(l, -2);
            if ffi::lua_type(l, -1) == ffi::LUA_TSTRING {
                ffi::lua_replace(l, -2);
            } else {
                ffi::lua_pop(l, 1);
            }
        }
        ffi::lua_pushboolean(l, 0);
        ffi::lua_insert(l, 1);
    }
    ffi::lua_gettop(l)
}

/// `xpcall(f, handler)` for scripts, and (as `run`) the runner of every script: Lua 5.1's
/// xpcall pushes its status after the call, one slot past the frame when the callee returned
/// a full stack of values. Here the status slot is reserved first. A killed script's error is
/// raised again. Upvalue 1: the RunState.
pub unsafe extern "C-unwind" fn xpcall(l: *mut ffi::lua_State) -> c_int {
    let st = &*(ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const RunState);
    ffi::luaL_checkany(l, 2);
    ffi::lua_settop(l, 2);
    // [f, h] -> [h, f]
    ffi::lua_insert(l, 1);
    call_under_handler(l, Some(st))
}

/// The stack is `[handler, f]`: calls `f` under `handler`, the status slot reserved first,
/// and returns `ok, results... | ok, error`. With a RunState, a killed script's error is
/// raised again instead.
unsafe fn call_under_handler(l: *mut ffi::lua_State, st: Option<&RunState>) -> c_int {
    call_under_handler_n(l, st, 0)
}

/// `call_under_handler` with `nargs` arguments above `f` (`[handler, f, args...]`).
unsafe fn call_under_handler_n(
    l: *mut ffi::lua_State,
    st: Option<&RunState>,
    nargs: c_int,
) -> c_int {
    // [h, f, args...] -> [true, h, f, args...]
    ffi::lua_pushboolean(l, 1);
    ffi::lua_insert(l, 1);
    if ffi::lua_pcall(l, nargs, ffi::LUA_MULTRET, 2) != 0 {
        if st.is_some_and(|st| st.killed.get()) {
            ffi::lua_error(l);
        }
        ffi::lua_pushboolean(l, 0);
        ffi::lua_replace(l, 1);
    }
    ffi::lua_remove(l, 2);
    ffi::lua_gettop(l)
}

/// Runs one script: `setup` (upvalue 2: KEYS and ARGV), then the script under the handler
/// (upvalue 3), returning `ok, result | error` as xpcall does (see `xpcall` for why not
/// xpcall itself). Upvalue 1: the RunState.
pub unsafe extern "C-unwind" fn run(l: *mut ffi::lua_State) -> c_int {
    ffi::lua_settop(l, 1);
    ffi::lua_pushvalue(l, ffi::lua_upvalueindex(2));
    ffi::lua_call(l, 0, 0);
    // [f] -> [handler, f]
    ffi::lua_pushvalue(l, ffi::lua_upvalueindex(3));
    ffi::lua_insert(l, 1);
    call_under_handler(l, None)
}

/// Runs one library function (FCALL): `f(keys, args)` under the handler (upvalue 2), the two
/// tables made from `RunState::pending`, as Redis's luaCallFunction in function mode (no KEYS
/// or ARGV globals). Upvalue 1: the RunState.
pub unsafe extern "C-unwind" fn frun(l: *mut ffi::lua_State) -> c_int {
    let st = &*(ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const RunState);
    ffi::lua_settop(l, 1);
    // [f] -> [handler, f]
    ffi::lua_pushvalue(l, ffi::lua_upvalueindex(2));
    ffi::lua_insert(l, 1);
    let (kp, kn, ap, an) = st.pending.get();
    for (ptr, len) in [(kp, kn), (ap, an)] {
        let list: &[Bytes] = if ptr.is_null() {
            &[]
        } else {
            // SAFETY: set by `Engine::run_with` from live slices for the duration of the run.
            std::slice::from_raw_parts(ptr, len)
        };
        ffi::lua_createtable(l, list.len().min(1 << 24) as c_int, 0);
        for (i, k) in list.iter().enumerate() {
            push_bytes(l, k);
            ffi::lua_rawseti(l, -2, (i + 1) as ffi::lua_Integer);
        }
    }
    call_under_handler_n(l, None, 2)
}

/// `coroutine.resume`: Lua's own (upvalue 2, a C function) called directly as a C function,
/// so it costs no extra C call level and its argument errors name the script's position, as
/// in Redis; a killed script's error surfacing from the coroutine is raised again.
/// Upvalue 1: the RunState.
pub unsafe extern "C-unwind" fn resume(l: *mut ffi::lua_State) -> c_int {
    let st = &*(ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const RunState);
    let Some(orig) = ffi::lua_tocfunction(l, ffi::lua_upvalueindex(2)) else {
        return ffi::luaL_error(l, c"coroutine.resume is not available".as_ptr());
    };
    let n = orig(l);
    if st.killed.get() && n >= 2 && ffi::lua_toboolean(l, -n) == 0 {
        ffi::lua_pushvalue(l, -n + 1);
        ffi::lua_error(l);
    }
    n
}

/// `table.insert`, as Lua 5.1's `tinsert`, except that its element-moving loop (up to 2^31
/// steps for `table.insert(t, 2^31, v)`, where the position wraps to INT_MIN) runs the busy
/// hook every 2^16 steps: other clients get -BUSY and SCRIPT KILL stops it, which Lua's C
/// loop allowed neither in Redis nor here. Upvalue 1: the RunState.
pub unsafe extern "C-unwind" fn tinsert(l: *mut ffi::lua_State) -> c_int {
    let st = &*(ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const RunState);
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    let mut e = ffi::lua_objlen(l, 1) as c_int as i64 + 1;
    let pos = match ffi::lua_gettop(l) {
        2 => e,
        3 => {
            let pos = ffi::luaL_checkinteger(l, 2) as c_int as i64;
            if pos > e {
                e = pos;
            }
            let mut i = e;
            while i > pos {
                if (e - i) & 0xffff == 0xffff && st.hook().is_err() {
                    return ffi::luaL_error(
                        l,
                        c"Script killed by user with SCRIPT KILL...".as_ptr(),
                    );
                }
                ffi::lua_rawgeti(l, 1, (i - 1) as ffi::lua_Integer);
                ffi::lua_rawseti(l, 1, i as ffi::lua_Integer);
                i -= 1;
            }
            pos
        }
        _ => return ffi::luaL_error(l, c"wrong number of arguments to 'insert'".as_ptr()),
    };
    ffi::lua_rawseti(l, 1, pos as ffi::lua_Integer);
    0
}

/// `string.rep`: Lua's own (upvalue 2) after two checks Lua lacks. An empty string or count
/// gives "" at once (Lua loops n times even then: `string.rep('', 2^31-1)` ran for seconds
/// beyond the reach of SCRIPT KILL), and a result larger than lua-memory-limit is refused
/// before it is built. Upvalue 1: the RunState.
pub unsafe extern "C-unwind" fn rep(l: *mut ffi::lua_State) -> c_int {
    let st = &*(ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const RunState);
    let mut len = 0usize;
    ffi::luaL_checklstring(l, 1, &mut len);
    let n = ffi::luaL_checkinteger(l, 2) as c_int;
    if len == 0 || n <= 0 {
        ffi::lua_pushstring(l, c"".as_ptr());
        return 1;
    }
    let limit = st.memory_limit.get();
    if limit != 0 && len.saturating_mul(n as usize) > limit {
        return ffi::luaL_error(l, c"not enough memory".as_ptr());
    }
    match ffi::lua_tocfunction(l, ffi::lua_upvalueindex(2)) {
        Some(orig) => orig(l),
        None => ffi::luaL_error(l, c"string.rep is not available".as_ptr()),
    }
}

/// The registry key (its address) under which `count_hook` finds the RunState.
static HOOK_KEY: u8 = 0;

pub fn hook_key() -> *mut c_void {
    &HOOK_KEY as *const u8 as *mut c_void
}

/// The count hook (every `HOOK_EVERY` instructions): the busy hook, and the kill error when
/// the script must stop (SCRIPT KILL, shutdown), raised as the library loops do.
pub unsafe extern "C-unwind" fn count_hook(l: *mut ffi::lua_State, _ar: *mut ffi::lua_Debug) {
    // A hook runs with LUA_MINSTACK free slots (luaD_callhook), so this push needs no check.
    ffi::lua_pushlightuserdata(l, hook_key());
    ffi::lua_rawget(l, ffi::LUA_REGISTRYINDEX);
    let st = ffi::lua_touserdata(l, -1) as *const RunState;
    ffi::lua_pop(l, 1);
    if st.is_null() {
        return;
    }
    let st = &*st;
    if let Some(deadline) = st.load_deadline.get() {
        // A library's code is running (FUNCTION LOAD): Redis's luaEngineLoadHook.
        if std::time::Instant::now() > deadline {
            ffi::lua_createtable(l, 0, 1);
            ffi::lua_pushstring(l, c"ERR FUNCTION LOAD timeout".as_ptr());
            ffi::lua_setfield(l, -2, c"err".as_ptr());
            ffi::lua_error(l);
        }
        return;
    }
    // No Rust unwinding through Lua's C frames: a panic in the hook stops the script.
    let stop = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| st.hook().is_err()))
        .unwrap_or(true);
    if stop {
        ffi::luaL_error(l, c"Script killed by user with SCRIPT KILL...".as_ptr());
    }
}

extern "C-unwind" {
    // src/lua_match.c: Lua 5.1's string.find / match / gmatch / gsub, whose matcher runs the
    // busy hook (`deadbolt_match_busy`) every 2^16 steps and nests at most 10000 levels.
    // Upvalue 1 of each: the RunState.
    pub fn deadbolt_str_find(l: *mut ffi::lua_State) -> c_int;
    pub fn deadbolt_str_match(l: *mut ffi::lua_State) -> c_int;
    pub fn deadbolt_gmatch(l: *mut ffi::lua_State) -> c_int;
    pub fn deadbolt_str_gsub(l: *mut ffi::lua_State) -> c_int;
}

/// The busy hook for Lua's pattern matcher (src/lua_match.c), which is C and so never seen by
/// the instruction hook: other clients get -BUSY past busy-reply-threshold and SCRIPT KILL is
/// heard. Nonzero: the script must stop (the C side raises the kill error).
#[no_mangle]
pub extern "C" fn deadbolt_match_busy(run_state: *mut c_void) -> c_int {
    if run_state.is_null() {
        return 0;
    }
    // SAFETY: the matcher's upvalue 1 is the RunState's address, which lives as long as the
    // Lua state that holds the closure (see `Engine::new`); only the executor thread runs Lua.
    let st = unsafe { &*(run_state as *const RunState) };
    // No unwinding into C: a panic in the hook stops the script instead.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| st.hook().is_err())) {
        Ok(stop) => stop as c_int,
        Err(_) => 1,
    }
}

/// Called first by the runner's error handler (upvalue 1: the RunState): see
/// `RunState::unwinding`. A C function, so that it allocates nothing while a memory error may
/// be what is being handled.
pub unsafe extern "C-unwind" fn unwinding(l: *mut ffi::lua_State) -> c_int {
    let st = &*(ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const RunState);
    st.unwinding.set(true);
    0
}

/// `unpack(t [, i [, j]])`, replacing Lua 5.1.5's `luaB_unpack`. The original computes the
/// count as `e - i + 1` in a C `int` and relies on signed overflow to catch huge ranges; an
/// optimising compiler drops that check (overflow is undefined), so in release builds
/// `unpack({}, -1, 2147483647)` pushed 2^31 values and crashed the server. The count here is
/// computed in 64 bits; the argument conversions (`luaL_checkint`) and the error text are Lua's.
pub unsafe extern "C-unwind" fn unpack(l: *mut ffi::lua_State) -> c_int {
    ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
    // luaL_optint / luaL_checkint: lua_Integer narrowed to a C int, as Lua does.
    let i = if ffi::lua_isnoneornil(l, 2) != 0 {
        1
    } else {
        ffi::luaL_checkinteger(l, 2) as c_int
    };
    let e = if ffi::lua_isnoneornil(l, 3) != 0 {
        ffi::lua_objlen(l, 1) as c_int
    } else {
        ffi::luaL_checkinteger(l, 3) as c_int
    };
    if i > e {
        return 0;
    }
    let n = e as i64 - i as i64 + 1;
    if n > c_int::MAX as i64 || ffi::lua_checkstack(l, n as c_int) == 0 {
        return ffi::luaL_error(l, c"too many results to unpack".as_ptr());
    }
    for k in i as i64..=e as i64 {
        ffi::lua_rawgeti(l, 1, k as ffi::lua_Integer);
    }
    n as c_int
}

#[cfg(test)]
mod tests {
    use super::number_arg;
    use crate::protocol::number::fmt_g17;

    #[test]
    fn number_args_are_g17() {
        for n in [
            0.0,
            -0.0,
            1.0,
            -1.0,
            30000.0,
            1795315046277.0,
            1e15,
            1e16,
            12345678901234567.0,
            0.1,
            2.5,
            1e20,
            -3.5,
        ] {
            assert_eq!(&number_arg(n)[..], fmt_g17(n).as_bytes(), "{n}");
        }
    }
}
