//! `cjson` as Redis bundles it (lua-cjson 2.1.0): encode and decode with its rules and error
//! texts. Errors are returned as text; the Lua wrapper raises them at the script's position.

use crate::protocol::number::fmt_g;
use mlua::{LightUserData, Lua, Table, Value};
use std::cell::Cell;
use std::rc::Rc;

/// lua-cjson's settings (per Lua state, shared by all scripts, as in Redis).
#[derive(Clone, Copy)]
pub struct Config {
    pub encode_max_depth: usize,
    pub decode_max_depth: usize,
    pub precision: usize,
    pub sparse_convert: bool,
    pub sparse_ratio: usize,
    pub sparse_safe: usize,
    /// 0: error, 1: allowed, 2: encoded as null.
    pub encode_invalid_numbers: u8,
    pub decode_invalid_numbers: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            precision: 14,
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: true,
        }
    }
}

pub type Shared = Rc<Cell<Config>>;

pub fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::LightUserData(_) | Value::UserData(_) => "userdata",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

pub fn encode(v: &Value, cfg: &Config) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    append(v, cfg, 0, &mut out)?;
    Ok(out)
}

fn append_number(n: f64, cfg: &Config, out: &mut Vec<u8>) -> Result<(), String> {
    if n.is_nan() || n.is_infinite() {
        match cfg.encode_invalid_numbers {
            0 => return Err("Cannot serialise number: must not be NaN or Inf".into()),
            2 => {
                out.extend_from_slice(b"null");
                return Ok(());
            }
            _ => {
                let s = if n.is_nan() {
                    "nan"
                } else if n > 0.0 {
                    "inf"
                } else {
                    "-inf"
                };
                out.extend_from_slice(s.as_bytes());
                return Ok(());
            }
        }
    }
    out.extend_from_slice(fmt_g(n, cfg.precision).as_bytes());
    Ok(())
}

fn append_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

/// lua-cjson's `lua_array_length`: Some(max index) for an array, None for an object. Its
/// `max` is a C `int` assigned from the double key: a key of 2^31 or more converts (on x86-64)
/// to INT_MIN, which every later key exceeds and which, left last, makes the table an object
/// (`{[1]=1,[2^31]=2}` encodes as `{"1":1,"2147483648":2}` in Redis).
fn array_length(t: &Table, cfg: &Config) -> Result<Option<usize>, String> {
    let mut max: i32 = 0;
    let mut items: i64 = 0;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair.map_err(|e| e.to_string())?;
        let k = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(None),
        };
        if k.floor() == k && k >= 1.0 {
            if k > f64::from(max) {
                max = if k < 2_147_483_648.0 {
                    k as i32
                } else {
                    i32::MIN
                };
            }
            items += 1;
        } else {
            return Ok(None);
        }
    }
    let max = i64::from(max);
    if cfg.sparse_ratio > 0
        && max > items.saturating_mul(cfg.sparse_ratio as i64)
        && max > cfg.sparse_safe as i64
    {
        if !cfg.sparse_convert {
            return Err("Cannot serialise table: excessively sparse array".into());
        }
        return Ok(None);
    }
    Ok(if max > 0 { Some(max as usize) } else { None })
}

fn append(v: &Value, cfg: &Config, depth: usize, out: &mut Vec<u8>) -> Result<(), String> {
    match v {
        Value::String(s) => append_string(&s.as_bytes(), out),
        Value::Integer(i) => append_number(*i as f64, cfg, out)?,
        Value::Number(n) => append_number(*n, cfg, out)?,
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > cfg.encode_max_depth {
                return Err(format!("Cannot serialise, excessive nesting ({depth})"));
            }
            match array_length(t, cfg)? {
                Some(len) => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        let item: Value = t.raw_get(i).map_err(|e| e.to_string())?;
                        append(&item, cfg, depth, out)?;
                    }
                    out.push(b']');
                }
                None => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.pairs::<Value, Value>() {
                        let (k, val) = pair.map_err(|e| e.to_string())?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &k {
                            Value::String(s) => append_string(&s.as_bytes(), out),
                            Value::Integer(_) | Value::Number(_) => {
                                out.push(b'"');
                                let n = match k {
                                    Value::Integer(i) => i as f64,
                                    Value::Number(n) => n,
                                    _ => 0.0,
                                };
                                append_number(n, cfg, out)?;
                                out.push(b'"');
                            }
                            other => {
                                return Err(format!(
                                    "Cannot serialise {}: table key must be a number or string",
                                    type_name(other)
                                ))
                            }
                        }
                        out.push(b':');
                        append(&val, cfg, depth, out)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                type_name(other)
            ))
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Tok {
    fn name(&self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Num(_) => "T_NUMBER",
            Tok::Bool(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(e) => e,
        }
    }
}

struct Parser<'a> {
    data: &'a [u8],
    pos: usize,
    /// The text of the last string token.
    buf: Vec<u8>,
    cfg: Config,
    depth: usize,
}

fn is_invalid_number(p: &[u8]) -> bool {
    let mut i = 0;
    if p.first() == Some(&b'+') {
        return true;
    }
    if p.first() == Some(&b'-') {
        i = 1;
    }
    match p.get(i) {
        Some(b'0') => {
            let c2 = p.get(i + 1).copied().unwrap_or(0);
            (c2 | 0x20) == b'x' || c2.is_ascii_digit()
        }
        Some(c) if *c <= b'9' => false,
        _ => {
            let rest = &p[i.min(p.len())..];
            rest.len() >= 3
                && (rest[..3].eq_ignore_ascii_case(b"inf")
                    || rest[..3].eq_ignore_ascii_case(b"nan"))
        }
    }
}

/// The longest prefix C's strtod would read as a decimal number; (value, length).
fn strtod(p: &[u8]) -> Option<(f64, usize)> {
    let mut i = 0;
    if matches!(p.first(), Some(b'-') | Some(b'+')) {
        i += 1;
    }
    let int_start = i;
    while p.get(i).is_some_and(|c| c.is_ascii_digit()) {
        i += 1;
    }
    let mut digits = i - int_start;
    if p.get(i) == Some(&b'.') {
        let mut j = i + 1;
        while p.get(j).is_some_and(|c| c.is_ascii_digit()) {
            j += 1;
        }
        digits += j - i - 1;
        if digits > 0 {
            i = j;
        }
    }
    if digits == 0 {
        // strtod also reads inf/nan; lua-cjson only gets here when those are allowed.
        let rest = &p[int_start..];
        for (word, v) in [
            (&b"infinity"[..], f64::INFINITY),
            (b"inf", f64::INFINITY),
            (b"nan", f64::NAN),
        ] {
            if rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word) {
                let v = if p.first() == Some(&b'-') { -v } else { v };
                return Some((v, int_start + word.len()));
            }
        }
        return None;
    }
    if matches!(p.get(i), Some(b'e') | Some(b'E')) {
        let mut j = i + 1;
        if matches!(p.get(j), Some(b'+') | Some(b'-')) {
            j += 1;
        }
        let start = j;
        while p.get(j).is_some_and(|c| c.is_ascii_digit()) {
            j += 1;
        }
        if j > start {
            i = j;
        }
    }
    let text = std::str::from_utf8(&p[..i]).ok()?;
    text.parse::<f64>().ok().map(|v| (v, i))
}

impl Parser<'_> {
    fn peek(&self) -> u8 {
        // lua-cjson reads a C string: a NUL byte ends the input.
        self.data.get(self.pos).copied().unwrap_or(0)
    }

    /// The next token and the 1-based character position it starts at.
    fn next(&mut self) -> (Tok, usize) {
        while matches!(self.peek(), b' ' | b'\t' | b'\r' | b'\n') {
            self.pos += 1;
        }
        let at = self.pos + 1;
        let c = self.peek();
        let single = match c {
            0 => return (Tok::End, at),
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b':' => Some(Tok::Colon),
            b',' => Some(Tok::Comma),
            _ => None,
        };
        if let Some(t) = single {
            self.pos += 1;
            return (t, at);
        }
        let rest = &self.data[self.pos..];
        match c {
            b'"' => {
                let t = self.string();
                match t {
                    // String errors point at where the string went wrong.
                    Tok::Error(_) => (t, self.pos + 1),
                    _ => (t, at),
                }
            }
            b'-' | b'0'..=b'9' => {
                if !self.cfg.decode_invalid_numbers && is_invalid_number(rest) {
                    return (Tok::Error("invalid number"), at);
                }
                self.number(at)
            }
            b't' if rest.starts_with(b"true") => {
                self.pos += 4;
                (Tok::Bool(true), at)
            }
            b'f' if rest.starts_with(b"false") => {
                self.pos += 5;
                (Tok::Bool(false), at)
            }
            b'n' if rest.starts_with(b"null") => {
                self.pos += 4;
                (Tok::Null, at)
            }
            b'i' | b'I' | b'N' | b'n'
                if self.cfg.decode_invalid_numbers && is_invalid_number(rest) =>
            {
                self.number(at)
            }
            _ => (Tok::Error("invalid token"), at),
        }
    }

    fn number(&mut self, at: usize) -> (Tok, usize) {
        match strtod(&self.data[self.pos..]) {
            Some((v, n)) => {
                self.pos += n;
                (Tok::Num(v), at)
            }
            None => (Tok::Error("invalid number"), at),
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let h = self.data.get(at..at + 4)?;
        let s = std::str::from_utf8(h).ok()?;
        if !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(s, 16).ok()
    }

    fn string(&mut self) -> Tok {
        self.buf.clear();
        self.pos += 1;
        loop {
            let c = self.peek();
            if c == 0 {
                return Tok::Error("unexpected end of string");
            }
            if c == b'"' {
                self.pos += 1;
                return Tok::Str;
            }
            if c != b'\\' {
                self.buf.push(c);
                self.pos += 1;
                continue;
            }
            let esc = self.data.get(self.pos + 1).copied().unwrap_or(0);
            let out = match esc {
                b'"' => b'"',
                b'\\' => b'\\',
                b'/' => b'/',
                b'b' => 0x08,
                b'f' => 0x0c,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'u' => {
                    let Some(mut cp) = self.hex4(self.pos + 2) else {
                        return Tok::Error("invalid unicode escape code");
                    };
                    let mut len = 6;
                    if (0xD800..0xDC00).contains(&cp) {
                        // A high surrogate must be followed by \u and a low surrogate.
                        if self.data.get(self.pos + 6) != Some(&b'\\')
                            || self.data.get(self.pos + 7) != Some(&b'u')
                        {
                            return Tok::Error("invalid unicode escape code");
                        }
                        match self.hex4(self.pos + 8) {
                            Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                len = 12;
                            }
                            _ => return Tok::Error("invalid unicode escape code"),
                        }
                    } else if (0xDC00..0xE000).contains(&cp) {
                        return Tok::Error("invalid unicode escape code");
                    }
                    let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                    let mut b = [0u8; 4];
                    self.buf
                        .extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                    self.pos += len;
                    continue;
                }
                _ => return Tok::Error("invalid escape code"),
            };
            self.buf.push(out);
            self.pos += 2;
        }
    }

    fn error(exp: &str, tok: Tok, at: usize) -> String {
        format!("Expected {exp} but found {} at character {at}", tok.name())
    }

    fn value(&mut self, lua: &Lua, tok: Tok, at: usize) -> Result<Value, String> {
        let map = |e: mlua::Error| e.to_string();
        match tok {
            Tok::Str => Ok(Value::String(lua.create_string(&self.buf).map_err(map)?)),
            Tok::Num(n) => Ok(Value::Number(n)),
            Tok::Bool(b) => Ok(Value::Boolean(b)),
            Tok::Null => Ok(null()),
            Tok::ObjBegin => self.object(lua, at),
            Tok::ArrBegin => self.array(lua, at),
            other => Err(Self::error("value", other, at)),
        }
    }

    fn enter(&mut self, at: usize) -> Result<(), String> {
        self.depth += 1;
        if self.depth > self.cfg.decode_max_depth {
            return Err(format!(
                "Found too many nested data structures ({}) at character {at}",
                self.depth
            ));
        }
        Ok(())
    }

    fn object(&mut self, lua: &Lua, at: usize) -> Result<Value, String> {
        let map = |e: mlua::Error| e.to_string();
        self.enter(at)?;
        let t = lua.create_table().map_err(map)?;
        let (mut tok, mut at) = self.next();
        if tok == Tok::ObjEnd {
            self.depth -= 1;
            return Ok(Value::Table(t));
        }
        loop {
            if tok != Tok::Str {
                return Err(Self::error("object key string", tok, at));
            }
            let key = lua.create_string(&self.buf).map_err(map)?;
            let (t2, a2) = self.next();
            if t2 != Tok::Colon {
                return Err(Self::error("colon", t2, a2));
            }
            let (t3, a3) = self.next();
            let v = self.value(lua, t3, a3)?;
            t.raw_set(key, v).map_err(map)?;
            (tok, at) = self.next();
            if tok == Tok::ObjEnd {
                self.depth -= 1;
                return Ok(Value::Table(t));
            }
            if tok != Tok::Comma {
                return Err(Self::error("comma or object end", tok, at));
            }
            (tok, at) = self.next();
        }
    }

    fn array(&mut self, lua: &Lua, at: usize) -> Result<Value, String> {
        let map = |e: mlua::Error| e.to_string();
        self.enter(at)?;
        let t = lua.create_table().map_err(map)?;
        let (mut tok, mut at) = self.next();
        if tok == Tok::ArrEnd {
            self.depth -= 1;
            return Ok(Value::Table(t));
        }
        let mut i = 1;
        loop {
            let v = self.value(lua, tok, at)?;
            t.raw_seti(i, v).map_err(map)?;
            i += 1;
            (tok, at) = self.next();
            if tok == Tok::ArrEnd {
                self.depth -= 1;
                return Ok(Value::Table(t));
            }
            if tok != Tok::Comma {
                return Err(Self::error("comma or array end", tok, at));
            }
            (tok, at) = self.next();
        }
    }
}

pub fn decode(lua: &Lua, data: &[u8], cfg: &Config) -> Result<Value, String> {
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Err("JSON parser does not support UTF-16 or UTF-32".into());
    }
    let mut p = Parser {
        data,
        pos: 0,
        buf: Vec::new(),
        cfg: *cfg,
        depth: 0,
    };
    let (tok, at) = p.next();
    let v = p.value(lua, tok, at)?;
    let (tok, at) = p.next();
    if tok != Tok::End {
        return Err(Parser::error("the end", tok, at));
    }
    Ok(v)
}

/// The Rust half of the `cjson` table; `bootstrap.lua` adds the argument checks and raises
/// the errors.
pub fn create(lua: &Lua) -> mlua::Result<Table> {
    let cfg: Shared = Rc::new(Cell::new(Config::default()));
    let t = lua.create_table()?;
    let c = cfg.clone();
    t.set(
        "encode",
        lua.create_function(move |lua, v: Value| match encode(&v, &c.get()) {
            Ok(s) => Ok((Value::String(lua.create_string(s)?), Value::Nil)),
            Err(e) => Ok((Value::Nil, Value::String(lua.create_string(e)?))),
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "decode",
        lua.create_function(move |lua, s: mlua::LuaString| {
            match decode(lua, &s.as_bytes(), &c.get()) {
                Ok(v) => Ok((v, Value::Nil)),
                Err(e) => Ok((Value::Nil, Value::String(lua.create_string(e)?))),
            }
        })?,
    )?;
    // Settings: each takes optional new values and returns the current ones, as lua-cjson.
    let c = cfg.clone();
    t.set(
        "encode_max_depth",
        lua.create_function(move |_, v: Option<f64>| {
            let mut k = c.get();
            if let Some(v) = v {
                k.encode_max_depth = v.clamp(1.0, i32::MAX as f64) as usize;
            }
            c.set(k);
            Ok(k.encode_max_depth as f64)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "decode_max_depth",
        lua.create_function(move |_, v: Option<f64>| {
            let mut k = c.get();
            if let Some(v) = v {
                k.decode_max_depth = v.clamp(1.0, i32::MAX as f64) as usize;
            }
            c.set(k);
            Ok(k.decode_max_depth as f64)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_number_precision",
        lua.create_function(move |_, v: Option<f64>| {
            let mut k = c.get();
            if let Some(v) = v {
                k.precision = v.clamp(1.0, 14.0) as usize;
            }
            c.set(k);
            Ok(k.precision as f64)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_sparse_array",
        lua.create_function(
            move |_, (conv, ratio, safe): (Option<bool>, Option<f64>, Option<f64>)| {
                let mut k = c.get();
                if let Some(b) = conv {
                    k.sparse_convert = b;
                }
                if let Some(r) = ratio {
                    k.sparse_ratio = r.clamp(0.0, i32::MAX as f64) as usize;
                }
                if let Some(s) = safe {
                    k.sparse_safe = s.clamp(0.0, i32::MAX as f64) as usize;
                }
                c.set(k);
                Ok((
                    k.sparse_convert,
                    k.sparse_ratio as f64,
                    k.sparse_safe as f64,
                ))
            },
        )?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_invalid_numbers",
        lua.create_function(move |lua, v: Value| {
            let mut k = c.get();
            match v {
                Value::Boolean(b) => k.encode_invalid_numbers = b as u8,
                Value::String(s) if &s.as_bytes()[..] == b"null" => k.encode_invalid_numbers = 2,
                _ => {}
            }
            c.set(k);
            Ok(match k.encode_invalid_numbers {
                0 => Value::Boolean(false),
                1 => Value::Boolean(true),
                _ => Value::String(lua.create_string("null")?),
            })
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "decode_invalid_numbers",
        lua.create_function(move |_, v: Option<bool>| {
            let mut k = c.get();
            if let Some(b) = v {
                k.decode_invalid_numbers = b;
            }
            c.set(k);
            Ok(k.decode_invalid_numbers)
        })?,
    )?;
    // Buffers are not kept between calls here; the setting is accepted and reported.
    let keep = Rc::new(Cell::new(true));
    t.set(
        "encode_keep_buffer",
        lua.create_function(move |_, v: Option<bool>| {
            if let Some(b) = v {
                keep.set(b);
            }
            Ok(keep.get())
        })?,
    )?;
    t.set("null", null())?;
    t.set("_NAME", "cjson")?;
    t.set("_VERSION", "2.1.0")?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_numbers_and_strtod() {
        assert!(is_invalid_number(b"+1"));
        assert!(is_invalid_number(b"0x10"));
        assert!(is_invalid_number(b"01"));
        assert!(is_invalid_number(b"-inf"));
        assert!(!is_invalid_number(b"0.5"));
        assert!(!is_invalid_number(b"-12"));
        assert_eq!(strtod(b"1.5e3,"), Some((1500.0, 5)));
        assert_eq!(strtod(b"-0"), Some((-0.0, 2)));
        assert_eq!(strtod(b"1e"), Some((1.0, 1)));
        assert_eq!(strtod(b"-"), None);
    }

    #[test]
    fn encode_scalars() {
        let cfg = Config::default();
        assert_eq!(encode(&Value::Number(0.1), &cfg).unwrap(), b"0.1");
        assert_eq!(encode(&Value::Number(1e20), &cfg).unwrap(), b"1e+20");
        assert!(encode(&Value::Number(f64::NAN), &cfg).is_err());
        assert_eq!(encode(&null(), &cfg).unwrap(), b"null");
    }
}
