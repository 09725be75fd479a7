//! Conversions between Lua values and replies, following Redis 7.0's `luaReplyToRedisReply`
//! (script result → reply) and `redisProtocolToLuaType` (command reply → Lua).

use crate::protocol::Frame;
use bytes::Bytes;
use mlua::{Table, Value};

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
