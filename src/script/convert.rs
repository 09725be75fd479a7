//! Conversions between Lua values and replies, following Redis 7.0's `luaReplyToRedisReply`
//! (script result → reply) and `redisProtocolToLuaType` (command reply → Lua).

use crate::protocol::number::fmt_g17;
use crate::protocol::Frame;
use bytes::Bytes;
use mlua::{Lua, Table, Value};

/// Nesting depth at which a returned table stops being converted. Redis stops when the Lua C
/// stack cannot grow (`reached lua stack limit`); a cyclic table must not recurse forever.
const MAX_DEPTH: usize = 1000;

/// A Lua number as Redis returns it: a C `(long long)` cast. Out-of-range values, NaN and
/// infinities give what x86's conversion instruction gives, i64::MIN.
pub fn truncate(n: f64) -> i64 {
    if n.is_nan() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// CR and LF become spaces in error and status replies.
fn one_line(s: &[u8]) -> Bytes {
    if s.iter().any(|&b| b == b'\r' || b == b'\n') {
        Bytes::from(
            s.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
                .collect::<Vec<u8>>(),
        )
    } else {
        Bytes::copy_from_slice(s)
    }
}

/// The script's return value as a reply. `resp3` is the script's own protocol
/// (`redis.setresp`), which decides how booleans come out.
pub fn lua_to_frame(v: &Value, resp3: bool, depth: usize) -> Frame {
    match v {
        Value::String(s) => Frame::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Number(n) => Frame::Integer(truncate(*n)),
        Value::Integer(i) => Frame::Integer(*i),
        Value::Boolean(b) => {
            if resp3 {
                Frame::Boolean(*b)
            } else if *b {
                Frame::Integer(1)
            } else {
                Frame::Null
            }
        }
        Value::Table(t) => {
            if depth >= MAX_DEPTH {
                return Frame::Error(Bytes::from_static(b"ERR reached lua stack limit"));
            }
            table_to_frame(t, resp3, depth)
        }
        _ => Frame::Null,
    }
}

fn field(t: &Table, name: &str) -> Value {
    t.raw_get::<Value>(name).unwrap_or(Value::Nil)
}

fn table_to_frame(t: &Table, resp3: bool, depth: usize) -> Frame {
    if let Value::String(e) = field(t, "err") {
        return Frame::Error(one_line(&e.as_bytes()));
    }
    if let Value::String(s) = field(t, "ok") {
        return Frame::Simple(one_line(&s.as_bytes()));
    }
    match field(t, "double") {
        Value::Number(n) => return Frame::Double(n),
        Value::Integer(i) => return Frame::Double(i as f64),
        _ => {}
    }
    if let Value::String(s) = field(t, "big_number") {
        return Frame::Bulk(Bytes::copy_from_slice(&s.as_bytes()));
    }
    if let Value::Table(m) = field(t, "map") {
        let mut pairs = Vec::new();
        for (k, v) in m.pairs::<Value, Value>().flatten() {
            pairs.push((
                lua_to_frame(&k, resp3, depth + 1),
                lua_to_frame(&v, resp3, depth + 1),
            ));
        }
        return Frame::Map(pairs);
    }
    if let Value::Table(s) = field(t, "set") {
        let mut items = Vec::new();
        for (k, _) in s.pairs::<Value, Value>().flatten() {
            items.push(lua_to_frame(&k, resp3, depth + 1));
        }
        return Frame::Set(items);
    }
    if let Value::Table(v) = field(t, "verbatim_string") {
        if let Value::String(s) = field(&v, "string") {
            return Frame::Verbatim(Bytes::copy_from_slice(&s.as_bytes()));
        }
    }
    let mut items = Vec::new();
    for i in 1.. {
        let v: Value = t.raw_get(i).unwrap_or(Value::Nil);
        if v.is_nil() {
            break;
        }
        items.push(lua_to_frame(&v, resp3, depth + 1));
    }
    Frame::Array(items)
}

/// A command's reply as the Lua value `redis.call` returns. `resp3` is the script's protocol.
/// Errors are handled by the caller (they raise or become `{err=…}`).
pub fn frame_to_lua(lua: &Lua, f: &Frame, resp3: bool) -> mlua::Result<Value> {
    Ok(match f {
        Frame::Integer(i) => Value::Number(*i as f64),
        Frame::Bulk(b) => Value::String(lua.create_string(b)?),
        Frame::Simple(s) => {
            let t = lua.create_table_with_capacity(0, 1)?;
            t.raw_set("ok", lua.create_string(s)?)?;
            Value::Table(t)
        }
        Frame::Error(e) => {
            let t = lua.create_table_with_capacity(0, 1)?;
            t.raw_set("err", lua.create_string(e)?)?;
            Value::Table(t)
        }
        Frame::Null | Frame::NullArray => {
            if resp3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        Frame::Array(items) | Frame::Push(items) => array(lua, items, resp3)?,
        Frame::Set(items) => {
            if resp3 {
                let set = lua.create_table_with_capacity(0, items.len().min(1024))?;
                for it in items {
                    set.raw_set(frame_to_lua(lua, it, resp3)?, true)?;
                }
                wrap(lua, "set", set)?
            } else {
                array(lua, items, resp3)?
            }
        }
        Frame::Map(pairs) => {
            if resp3 {
                let map = lua.create_table_with_capacity(0, pairs.len().min(1024))?;
                for (k, v) in pairs {
                    map.raw_set(frame_to_lua(lua, k, resp3)?, frame_to_lua(lua, v, resp3)?)?;
                }
                wrap(lua, "map", map)?
            } else {
                let t = lua.create_table_with_capacity(pairs.len().min(512) * 2, 0)?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    t.raw_seti(2 * i + 1, frame_to_lua(lua, k, resp3)?)?;
                    t.raw_seti(2 * i + 2, frame_to_lua(lua, v, resp3)?)?;
                }
                Value::Table(t)
            }
        }
        Frame::Double(d) => {
            if resp3 {
                let t = lua.create_table_with_capacity(0, 1)?;
                t.raw_set("double", *d)?;
                Value::Table(t)
            } else {
                Value::String(lua.create_string(fmt_g17(*d))?)
            }
        }
        Frame::Boolean(b) => {
            if resp3 {
                Value::Boolean(*b)
            } else {
                Value::Number(if *b { 1.0 } else { 0.0 })
            }
        }
        Frame::Verbatim(text) => {
            if resp3 {
                let v = lua.create_table_with_capacity(0, 2)?;
                v.raw_set("string", lua.create_string(text)?)?;
                v.raw_set("format", "txt")?;
                wrap(lua, "verbatim_string", v)?
            } else {
                Value::String(lua.create_string(text)?)
            }
        }
    })
}

fn array(lua: &Lua, items: &[Frame], resp3: bool) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(items.len().min(1 << 16), 0)?;
    for (i, it) in items.iter().enumerate() {
        // A RESP3 null element leaves a hole, as in Redis.
        t.raw_seti(i + 1, frame_to_lua(lua, it, resp3)?)?;
    }
    Ok(Value::Table(t))
}

fn wrap(lua: &Lua, name: &str, inner: Table) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set(name, inner)?;
    Ok(Value::Table(t))
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn truncation_like_a_c_cast() {
        assert_eq!(truncate(3.99), 3);
        assert_eq!(truncate(-3.99), -3);
        assert_eq!(truncate(9007199254740993.0), 9007199254740992);
        assert_eq!(truncate(1e20), i64::MIN);
        assert_eq!(truncate(f64::NAN), i64::MIN);
        assert_eq!(truncate(f64::INFINITY), i64::MIN);
        assert_eq!(truncate(-9.223_372_036_854_776e18), i64::MIN);
    }
}
