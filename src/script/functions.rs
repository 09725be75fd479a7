//! Redis 7.0 functions (functions.c, function_lua.c): libraries of Lua functions loaded with
//! FUNCTION LOAD into their own Lua state (a second `Engine`, same sandbox and `redis.*` API as
//! EVAL's), registered with `redis.register_function`, and called by name with FCALL.

use super::{shebang, Engine, RunState};
use crate::cmd::Ctx;
use crate::error::CmdError;
use crate::machine::State;
use bytes::Bytes;
use mlua::{Function, Lua, MultiValue, Value};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// Redis's LOAD_TIMEOUT_MS: a library's code only registers functions.
pub const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

pub const NAME_ERR: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// A function as `redis.register_function` gave it.
pub struct Registered {
    pub name: Bytes,
    pub desc: Option<Bytes>,
    pub flags: u32,
    pub func: Function,
}

pub struct Library {
    pub name: Bytes,
    /// The whole code given to FUNCTION LOAD, shebang included (LIST WITHCODE, DUMP).
    pub code: Bytes,
    pub functions: Vec<Registered>,
}

/// Redis's functionsLibCtx: libraries by name, and every function by its name (looked up
/// case-insensitively, as Redis's functions dict) to its library.
#[derive(Default)]
pub struct Libraries {
    pub libs: BTreeMap<Bytes, Library>,
    by_fn: HashMap<Vec<u8>, Bytes>,
    n_functions: usize,
}

impl Libraries {
    fn unlink(&mut self, name: &[u8]) -> Option<Library> {
        let lib = self.libs.remove(name)?;
        for f in &lib.functions {
            self.by_fn.remove(&f.name.to_ascii_lowercase());
        }
        self.n_functions -= lib.functions.len();
        Some(lib)
    }

    fn link(&mut self, lib: Library) {
        for f in &lib.functions {
            self.by_fn
                .entry(f.name.to_ascii_lowercase())
                .or_insert_with(|| lib.name.clone());
        }
        self.n_functions += lib.functions.len();
        self.libs.insert(lib.name.clone(), lib);
    }

    /// FUNCTION DELETE: false if there is no such library.
    pub fn remove(&mut self, name: &[u8]) -> bool {
        self.unlink(name).is_some()
    }

    fn has_function(&self, name: &[u8]) -> bool {
        self.by_fn.contains_key(&name.to_ascii_lowercase())
    }

    /// The function called `name` (any case).
    pub fn function(&self, name: &[u8]) -> Option<&Registered> {
        let lib = if name.iter().any(u8::is_ascii_uppercase) {
            self.by_fn.get(&name.to_ascii_lowercase())
        } else {
            self.by_fn.get(name)
        }?;
        self.libs
            .get(lib)?
            .functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
    }

    pub fn num_libraries(&self) -> usize {
        self.libs.len()
    }

    pub fn num_functions(&self) -> usize {
        self.n_functions
    }
}

/// The functions engine and its libraries (`State::functions`).
pub struct Functions {
    pub engine: Engine,
    pub libs: Libraries,
}

fn functions_of(state: &State) -> Option<&Functions> {
    state.functions.as_ref()?.downcast_ref::<Functions>()
}

/// Runs `f` with the server's functions (created on first use), taken out of the state while
/// `f` runs, as `script::with_engine`.
pub fn with_functions<R>(
    ctx: &mut Ctx,
    f: impl FnOnce(&mut Functions, &mut Ctx) -> R,
) -> Result<R, CmdError> {
    let taken = ctx
        .srv
        .functions
        .take()
        .and_then(|e| e.downcast::<Functions>().ok());
    let mut funcs = match taken {
        Some(e) => e,
        None => Box::new(Functions {
            engine: Engine::new(
                ctx.srv.shared.clone(),
                ctx.srv.busy.clone(),
                ctx.srv.config.lua_memory_limit as usize,
            )
            .map_err(|e| CmdError::erf(format!("Failed to initialize the Lua engine: {e}")))?,
            libs: Libraries::default(),
        }),
    };
    funcs.engine.adopt_memory_limit(ctx);
    let r = f(&mut funcs, ctx);
    ctx.srv.functions = Some(funcs);
    Ok(r)
}

/// The flags of a loaded function, None if there is none by that name (or a function is
/// running: the caller then keeps the command's own flags).
pub fn function_flags(state: &State, name: &[u8]) -> Option<u32> {
    functions_of(state)?.libs.function(name).map(|f| f.flags)
}

/// (Lua heap of the functions engine, functions, libraries) for INFO; zeros before the first
/// FUNCTION command.
pub fn stats(state: &State) -> (usize, usize, usize) {
    functions_of(state).map_or((0, 0, 0), |f| {
        (
            f.engine.lua.used_memory(),
            f.libs.num_functions(),
            f.libs.num_libraries(),
        )
    })
}

/// Memory the libraries take outside the Lua heap (Redis's `used_memory_functions`: its
/// structures; here their names, codes and descriptions).
pub fn overhead(state: &State) -> usize {
    functions_of(state).map_or(0, |f| {
        f.libs
            .libs
            .values()
            .map(|l| {
                l.name.len()
                    + l.code.len()
                    + l.functions
                        .iter()
                        .map(|x| x.name.len() + x.desc.as_ref().map_or(0, |d| d.len()))
                        .sum::<usize>()
            })
            .sum()
    })
}

/// Every library's code, for a rewrite or a snapshot (`FUNCTION LOAD` of each).
pub fn library_codes(state: &State) -> Vec<Bytes> {
    functions_of(state).map_or_else(Vec::new, |f| {
        f.libs.libs.values().map(|l| l.code.clone()).collect()
    })
}

/// Redis's functionsVerifyName.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

const FLAG_NAMES: &[(&str, u32)] = &[
    ("no-writes", shebang::NO_WRITES),
    ("allow-oom", shebang::ALLOW_OOM),
    ("allow-stale", shebang::ALLOW_STALE),
    ("no-cluster", shebang::NO_CLUSTER),
    ("allow-cross-slot-keys", shebang::ALLOW_CROSS_SLOT),
];

/// A function's flags by name, in Redis's order (FUNCTION LIST).
pub fn flag_names(flags: u32) -> impl Iterator<Item = &'static str> {
    FLAG_NAMES
        .iter()
        .filter(move |(_, bit)| flags & bit != 0)
        .map(|(n, _)| *n)
}

fn string_of(lua: &Lua, v: Value) -> Option<Bytes> {
    match v {
        Value::String(s) => Some(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Integer(_) | Value::Number(_) => lua
            .coerce_string(v)
            .ok()
            .flatten()
            .map(|s| Bytes::copy_from_slice(&s.as_bytes())),
        _ => None,
    }
}

/// `redis.register_function`'s arguments (luaRegisterFunctionReadArgs), then
/// functionLibCreateFunction's checks; the error text without `ERR `.
pub(super) fn register(lua: &Lua, st: &RunState, args: MultiValue) -> Result<(), String> {
    if st.registered.borrow().is_none() {
        return Err("redis.register_function can only be called on FUNCTION LOAD command".into());
    }
    let mut args = args.into_vec();
    let r = match args.len() {
        1 => named_args(lua, args.pop().unwrap_or(Value::Nil))?,
        2 => {
            let func = args.pop().unwrap_or(Value::Nil);
            let Some(name) = string_of(lua, args.pop().unwrap_or(Value::Nil)) else {
                return Err("first argument to redis.register_function must be a string".into());
            };
            let Value::Function(func) = func else {
                return Err("second argument to redis.register_function must be a function".into());
            };
            Registered {
                name,
                desc: None,
                flags: 0,
                func,
            }
        }
        _ => return Err("wrong number of arguments to redis.register_function".into()),
    };
    if !valid_name(&r.name) {
        return Err(NAME_ERR.into());
    }
    let mut reg = st.registered.borrow_mut();
    let Some(list) = reg.as_mut() else {
        return Err("redis.register_function can only be called on FUNCTION LOAD command".into());
    };
    if list.iter().any(|f| f.name == r.name) {
        return Err("Function already exists in the library".into());
    }
    list.push(r);
    Ok(())
}

/// luaRegisterFunctionReadNamedArgs.
fn named_args(lua: &Lua, t: Value) -> Result<Registered, String> {
    let Value::Table(t) = t else {
        return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).".into());
    };
    let (mut name, mut desc, mut func, mut flags) = (None, None, None, 0);
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair.map_err(|e| e.to_string())?;
        let Some(key) = string_of(lua, k) else {
            return Err(
                "named argument key given to redis.register_function is not a string".into(),
            );
        };
        if key.eq_ignore_ascii_case(b"function_name") {
            name = Some(string_of(lua, v).ok_or(
                "function_name argument given to redis.register_function must be a string",
            )?);
        } else if key.eq_ignore_ascii_case(b"description") {
            desc =
                Some(string_of(lua, v).ok_or(
                    "description argument given to redis.register_function must be a string",
                )?);
        } else if key.eq_ignore_ascii_case(b"callback") {
            let Value::Function(f) = v else {
                return Err(
                    "callback argument given to redis.register_function must be a function".into(),
                );
            };
            func = Some(f);
        } else if key.eq_ignore_ascii_case(b"flags") {
            let Value::Table(ft) = v else {
                return Err("flags argument to redis.register_function must be a table representing function flags".into());
            };
            flags = read_flags(lua, &ft).ok_or("unknown flag given")?;
        } else {
            return Err("unknown argument given to redis.register_function".into());
        }
    }
    let Some(name) = name else {
        return Err("redis.register_function must get a function name argument".into());
    };
    let Some(func) = func else {
        return Err("redis.register_function must get a callback argument".into());
    };
    Ok(Registered {
        name,
        desc,
        flags,
        func,
    })
}

/// luaRegisterFunctionReadFlags: `flags[1..]` up to the first nil, each a known flag name
/// (any case); None for anything else.
fn read_flags(lua: &Lua, t: &mlua::Table) -> Option<u32> {
    let mut flags = 0;
    for j in 1i64.. {
        let v: Value = t.get(j).ok()?;
        if v.is_nil() {
            break;
        }
        let s = string_of(lua, v)?;
        let (_, bit) = FLAG_NAMES
            .iter()
            .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(&s))?;
        flags |= bit;
    }
    Some(flags)
}

/// functionExtractLibMetaData: (engine, library name, where the code after the shebang line
/// starts — at its newline, so line numbers stay the user's).
fn metadata(code: &[u8]) -> Result<(Vec<u8>, Vec<u8>, usize), Vec<u8>> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    // Redis reads the code as a C string.
    let cstr = &code[..code.iter().position(|&b| b == 0).unwrap_or(code.len())];
    let Some(end) = cstr.iter().position(|&b| b == b'\n') else {
        return Err("Invalid library metadata".into());
    };
    let parts = match crate::protocol::decode::split_args(&code[..end]) {
        Some(p) if !p.is_empty() => p,
        _ => return Err("Invalid library metadata".into()),
    };
    let engine = parts[0].get(2..).unwrap_or_default().to_vec();
    let mut name: Option<Vec<u8>> = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(part[5..].to_vec());
            continue;
        }
        return Err(cat(&[b"Invalid metadata value given: ", cstr_of(part)]));
    }
    let Some(name) = name else {
        return Err("Library name was not given".into());
    };
    Ok((engine, name, end))
}

/// Error texts are bytes: they echo the client's code and names (and Lua's messages about
/// them) as Redis does, whatever those bytes are.
fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn cstr_of(b: &[u8]) -> &[u8] {
    &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]
}

impl Engine {
    /// Compiles a library's code and runs it with only the library API as globals (Redis's
    /// luaEngineCreate): the functions it registered, or the error text (without `ERR `).
    fn load_code(
        &mut self,
        body: &[u8],
        timeout: Option<Duration>,
    ) -> Result<Vec<Registered>, Vec<u8>> {
        // Lua's own loadstring (the body starts at the shebang's newline, so it is never a
        // binary chunk): its message comes back as the bytes Lua made, unlike mlua's errors.
        let compiled = self.lua.create_string(body).and_then(|s| {
            self.compile
                .call::<(Option<Function>, Option<mlua::LuaString>)>((s, "@user_function"))
        });
        let chunk = match compiled {
            Ok((Some(f), _)) => f,
            Ok((None, msg)) => {
                let msg = msg.map(|m| m.as_bytes().to_vec()).unwrap_or_default();
                return Err(cat(&[b"Error compiling function: ", &msg]));
            }
            Err(e) => return Err(format!("Error compiling function: {e}").into_bytes()),
        };
        *self.st.registered.borrow_mut() = Some(Vec::new());
        self.st
            .load_deadline
            .set(timeout.map(|t| Instant::now() + t));
        let r = self.load_library.call::<Option<mlua::LuaString>>(chunk);
        self.st.load_deadline.set(None);
        let registered = self.st.registered.borrow_mut().take().unwrap_or_default();
        // What a failed load allocated is garbage now; Lua 5.1 would leave it at the limit
        // (see `Engine::run_with`).
        if self.memory_limit != 0 && self.lua.used_memory() > self.memory_limit / 2 {
            self.collect_garbage();
        }
        match r {
            Ok(None) => Ok(registered),
            Ok(Some(e)) => Err(cat(&[b"Error registering functions: ", &e.as_bytes()])),
            Err(e) => Err(format!("Error registering functions: ERR {e}").into_bytes()),
        }
    }
}

/// functionsCreateWithLibraryCtx: loads `code` into `libs` (replacing a library of the same
/// name when `replace`); the library's name, or the error text (without `ERR `).
pub fn create(
    engine: &mut Engine,
    libs: &mut Libraries,
    code: &Bytes,
    replace: bool,
    timeout: Option<Duration>,
) -> Result<Bytes, Vec<u8>> {
    let (engine_name, name, body_at) = metadata(code)?;
    if !valid_name(&name) {
        return Err(NAME_ERR.into());
    }
    if !engine_name.eq_ignore_ascii_case(b"lua") {
        return Err(cat(&[b"Engine '", &engine_name, b"' not found"]));
    }
    if libs.libs.contains_key(&name[..]) && !replace {
        return Err(cat(&[b"Library '", &name, b"' already exists"]));
    }
    let old = libs.unlink(&name);
    let result = engine.load_code(&code[body_at..], timeout).and_then(|fs| {
        if fs.is_empty() {
            return Err(b"No functions registered".to_vec());
        }
        if let Some(f) = fs.iter().find(|f| libs.has_function(&f.name)) {
            return Err(cat(&[b"Function ", &f.name, b" already exists"]));
        }
        Ok(fs)
    });
    match result {
        Ok(functions) => {
            let name = Bytes::from(name);
            libs.link(Library {
                name: name.clone(),
                code: code.clone(),
                functions,
            });
            Ok(name)
        }
        Err(e) => {
            if let Some(old) = old {
                libs.link(old);
            }
            Err(e)
        }
    }
}

/// libraryJoin: moves every library of `src` into `dst`; on a name collision, replaces the old
/// library when `replace`, else fails; a function name collision fails. On failure `dst` is
/// as it was.
pub fn join(dst: &mut Libraries, src: Libraries, replace: bool) -> Result<(), String> {
    let mut old = Vec::new();
    let mut err = None;
    for name in src.libs.keys() {
        if dst.libs.contains_key(name) {
            if !replace {
                err = Some(format!(
                    "Library {} already exists",
                    String::from_utf8_lossy(name)
                ));
                break;
            }
            old.extend(dst.unlink(name));
        }
    }
    if err.is_none() {
        err = src
            .libs
            .values()
            .flat_map(|l| l.functions.iter())
            .find(|f| dst.has_function(&f.name))
            .map(|f| {
                format!(
                    "Function {} already exists",
                    String::from_utf8_lossy(cstr_of(&f.name))
                )
            });
    }
    if let Some(e) = err {
        for lib in old {
            dst.link(lib);
        }
        return Err(e);
    }
    for (_, lib) in src.libs {
        dst.link(lib);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_rules() {
        assert_eq!(
            metadata(b"#!lua name=x\nreturn"),
            Ok((b"lua".to_vec(), b"x".to_vec(), 12))
        );
        assert_eq!(
            metadata(b"return 1"),
            Err("Missing library metadata".as_bytes().to_vec())
        );
        assert_eq!(
            metadata(b"#!lua name=x"),
            Err("Invalid library metadata".as_bytes().to_vec())
        );
        assert_eq!(
            metadata(b"#!lua\n"),
            Err("Library name was not given".as_bytes().to_vec())
        );
        assert_eq!(
            metadata(b"#!lua name=a NAME=b\n"),
            Err(
                "Invalid metadata value, name argument was given multiple times"
                    .as_bytes()
                    .to_vec()
            )
        );
        assert_eq!(
            metadata(b"#!lua foo=bar name=a\n"),
            Err("Invalid metadata value given: foo=bar".as_bytes().to_vec())
        );
    }

    #[test]
    fn names() {
        assert!(valid_name(b"a_1"));
        assert!(!valid_name(b""));
        assert!(!valid_name(b"a-b"));
        assert!(!valid_name(b"a\0b"));
    }
}
