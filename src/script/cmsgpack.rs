//! `cmsgpack` as Redis bundles it (lua-cmsgpack): pack, unpack, unpack_one, unpack_limit.
//! Errors are returned as text; the Lua wrapper raises them at the script's position.

use mlua::{Lua, MultiValue, Table, Value};

/// Tables nested deeper than this are packed as nil, as lua-cmsgpack does.
const MAX_NESTING: usize = 16;

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2147483648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_number(n: f64, out: &mut Vec<u8>) {
    // Integral values that survive a round trip through int64 are packed as integers.
    let i = n as i64;
    if i as f64 == n && n.is_finite() {
        encode_int(i, out);
    } else if (n as f32) as f64 == n || n.is_nan() {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_len(len: usize, fix: u8, fixmax: usize, codes: [u8; 3], out: &mut Vec<u8>) {
    if len <= fixmax {
        out.push(fix | len as u8);
    } else if codes[0] != 0 && len <= 0xff {
        out.extend_from_slice(&[codes[0], len as u8]);
    } else if len <= 0xffff {
        out.push(codes[1]);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(codes[2]);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

fn is_array(t: &Table) -> mlua::Result<Option<usize>> {
    let mut count = 0usize;
    let mut max = 0usize;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(None),
        };
        if n.floor() != n || n <= 0.0 || n > i32::MAX as f64 {
            return Ok(None);
        }
        max = max.max(n as usize);
        count += 1;
    }
    Ok((max == count).then_some(count))
}

fn encode(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::String(s) => {
            let b = s.as_bytes();
            encode_len(b.len(), 0xa0, 31, [0xd9, 0xda, 0xdb], out);
            out.extend_from_slice(&b);
        }
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_int(*i, out),
        Value::Number(n) => encode_number(*n, out),
        Value::Table(t) if level < MAX_NESTING => match is_array(t)? {
            Some(len) => {
                encode_len(len, 0x90, 15, [0, 0xdc, 0xdd], out);
                for i in 1..=len {
                    let item: Value = t.raw_get(i)?;
                    encode(&item, level + 1, out)?;
                }
            }
            None => {
                let n = t.pairs::<Value, Value>().count();
                encode_len(n, 0x80, 15, [0, 0xde, 0xdf], out);
                for pair in t.pairs::<Value, Value>() {
                    let (k, val) = pair?;
                    encode(&k, level + 1, out)?;
                    encode(&val, level + 1, out)?;
                }
            }
        },
        _ => out.push(0xc0),
    }
    Ok(())
}

enum DecodeError {
    Eof,
    BadFormat,
    /// lua-cmsgpack's `luaL_checkstack` failing: "stack overflow (<what>)".
    Stack(&'static str),
    Lua(mlua::Error),
}

/// Lua 5.1's LUAI_MAXCSTACK: the most stack slots a C function may use.
const MAX_C_STACK: usize = 8000;

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
    /// The Lua stack slots lua-cmsgpack's C decoder would hold at this point (its arguments,
    /// the values decoded so far, one table and one key per open level). Its
    /// `luaL_checkstack` calls fail at the same points here, which also bounds the recursion.
    used: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        if self.b.len() - self.pos < n {
            return Err(DecodeError::Eof);
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn uint(&mut self, n: usize) -> Result<u64, DecodeError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &c| (acc << 8) | c as u64))
    }

    /// Decodes one value; like the C decoder, it then occupies one more stack slot.
    fn value(&mut self, lua: &Lua) -> Result<Value, DecodeError> {
        // Checked before the input is, as in mp_decode_to_lua_type.
        if self.b.len() > self.pos && self.used + 1 > MAX_C_STACK {
            return Err(DecodeError::Stack(
                "too many return values at once; use unpack_one or unpack_limit instead.",
            ));
        }
        let v = self.value_inner(lua)?;
        self.used += 1;
        Ok(v)
    }

    fn value_inner(&mut self, lua: &Lua) -> Result<Value, DecodeError> {
        let c = self.take(1)?[0];
        Ok(match c {
            0x00..=0x7f => Value::Number(c as f64),
            0x80..=0x8f => self.map(lua, (c & 0x0f) as usize)?,
            0x90..=0x9f => self.array(lua, (c & 0x0f) as usize)?,
            0xa0..=0xbf => self.string(lua, (c & 0x1f) as usize)?,
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xc4 | 0xd9 => {
                let n = self.uint(1)? as usize;
                self.string(lua, n)?
            }
            0xc5 | 0xda => {
                let n = self.uint(2)? as usize;
                self.string(lua, n)?
            }
            0xc6 | 0xdb => {
                let n = self.uint(4)? as usize;
                self.string(lua, n)?
            }
            0xca => Value::Number(f32::from_bits(self.uint(4)? as u32) as f64),
            0xcb => Value::Number(f64::from_bits(self.uint(8)?)),
            0xcc => Value::Number(self.uint(1)? as f64),
            0xcd => Value::Number(self.uint(2)? as f64),
            0xce => Value::Number(self.uint(4)? as f64),
            0xcf => Value::Number(self.uint(8)? as f64),
            0xd0 => Value::Number(self.uint(1)? as u8 as i8 as f64),
            0xd1 => Value::Number(self.uint(2)? as u16 as i16 as f64),
            0xd2 => Value::Number(self.uint(4)? as u32 as i32 as f64),
            0xd3 => Value::Number(self.uint(8)? as i64 as f64),
            0xdc => {
                let n = self.uint(2)? as usize;
                self.array(lua, n)?
            }
            0xdd => {
                let n = self.uint(4)? as usize;
                self.array(lua, n)?
            }
            0xde => {
                let n = self.uint(2)? as usize;
                self.map(lua, n)?
            }
            0xdf => {
                let n = self.uint(4)? as usize;
                self.map(lua, n)?
            }
            0xe0..=0xff => Value::Number(c as i8 as f64),
            _ => return Err(DecodeError::BadFormat),
        })
    }

    fn string(&mut self, lua: &Lua, n: usize) -> Result<Value, DecodeError> {
        let s = self.take(n)?;
        lua.create_string(s)
            .map(Value::String)
            .map_err(DecodeError::Lua)
    }

    fn array(&mut self, lua: &Lua, n: usize) -> Result<Value, DecodeError> {
        // A declared length is not trusted for allocation.
        let t = lua
            .create_table_with_capacity(n.min(1024), 0)
            .map_err(DecodeError::Lua)?;
        let base = self.used;
        self.used += 1;
        if self.used + 1 > MAX_C_STACK {
            return Err(DecodeError::Stack("in function mp_decode_to_lua_array"));
        }
        for i in 1..=n {
            self.used += 1;
            let v = self.value(lua)?;
            self.used -= 2;
            t.raw_set(i, v).map_err(DecodeError::Lua)?;
        }
        self.used = base;
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize) -> Result<Value, DecodeError> {
        let t = lua
            .create_table_with_capacity(0, n.min(1024))
            .map_err(DecodeError::Lua)?;
        let base = self.used;
        self.used += 1;
        for _ in 0..n {
            let k = self.value(lua)?;
            let v = self.value(lua)?;
            self.used -= 2;
            if !k.is_nil() {
                t.raw_set(k, v).map_err(DecodeError::Lua)?;
            }
        }
        self.used = base;
        Ok(Value::Table(t))
    }
}

/// lua-cmsgpack's `mp_unpack_full`: (values…) or, with a limit or offset, (next offset, values…).
fn unpack_full(lua: &Lua, s: &[u8], limit: i64, offset: i64) -> Result<MultiValue, String> {
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        // lua-cmsgpack prints both through a C `(int)` cast.
        return Err(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32,
            s.len() as i32
        ));
    }
    if offset as usize > s.len() {
        return Err(format!(
            "Start offset {} greater than input length {}.",
            offset as i32,
            s.len() as i32
        ));
    }
    let limit = if decode_all { i64::MAX } else { limit };
    let mut c = Cursor {
        b: s,
        pos: offset as usize,
        // The string argument; unpack_one and unpack_limit pop the others first.
        used: 1,
    };
    let mut out = MultiValue::new();
    let mut cnt = 0;
    while c.pos < s.len() && cnt < limit {
        match c.value(lua) {
            Ok(v) => out.push_back(v),
            Err(DecodeError::Eof) => return Err("Missing bytes in input.".into()),
            Err(DecodeError::BadFormat) => return Err("Bad data format in input.".into()),
            Err(DecodeError::Stack(what)) => return Err(format!("stack overflow ({what})")),
            Err(DecodeError::Lua(e)) => return Err(e.to_string()),
        }
        cnt += 1;
    }
    if !decode_all {
        let next = if c.pos == s.len() { -1 } else { c.pos as i64 };
        out.push_front(Value::Number(next as f64));
    }
    Ok(out)
}

fn result(lua: &Lua, r: Result<MultiValue, String>) -> mlua::Result<MultiValue> {
    let mut out = MultiValue::new();
    match r {
        Ok(vals) => {
            out.push_back(Value::Boolean(true));
            out.extend(vals);
        }
        Err(e) => {
            out.push_back(Value::Boolean(false));
            out.push_back(Value::String(lua.create_string(e)?));
        }
    }
    Ok(out)
}

/// The Rust half of `cmsgpack`: each function returns (ok, results… | error text).
pub fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return result(
                    lua,
                    Err("bad argument #0 to 'pack' (MessagePack pack needs input.)".into()),
                );
            }
            // lua_checkstack(L, nargs) with the nargs arguments already on the stack.
            if args.len() * 2 > MAX_C_STACK {
                return result(
                    lua,
                    Err(
                        "bad argument #0 to 'pack' (Too many arguments for MessagePack pack.)"
                            .into(),
                    ),
                );
            }
            let mut out = Vec::new();
            for a in args.iter() {
                encode(a, 0, &mut out)?;
            }
            result(
                lua,
                Ok(MultiValue::from_iter([Value::String(
                    lua.create_string(out)?,
                )])),
            )
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, s: mlua::LuaString| {
            let r = unpack_full(lua, &s.as_bytes(), 0, 0);
            result(lua, r)
        })?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, (s, offset): (mlua::LuaString, Option<i64>)| {
            let r = unpack_full(lua, &s.as_bytes(), 1, offset.unwrap_or(0));
            result(lua, r)
        })?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(
            |lua, (s, limit, offset): (mlua::LuaString, i64, Option<i64>)| {
                let r = unpack_full(lua, &s.as_bytes(), limit, offset.unwrap_or(0));
                result(lua, r)
            },
        )?,
    )?;
    t.set("_NAME", "cmsgpack")?;
    t.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}
