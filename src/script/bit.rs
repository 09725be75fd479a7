//! LuaBitOp (`bit`), the library Redis bundles: 32-bit operations on Lua numbers.

use mlua::{Lua, Table, Variadic};

/// LuaBitOp's number → int32 conversion: round to nearest (ties to even) and wrap modulo 2^32,
/// done with the same 2^52 + 2^51 addition trick.
pub fn tobit(n: f64) -> i32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32 as i32
}

fn fold(args: &Variadic<f64>, init: i32, op: fn(i32, i32) -> i32) -> f64 {
    args.iter().fold(init, |acc, &x| op(acc, tobit(x))) as f64
}

pub fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "tobit",
        lua.create_function(|_, x: f64| Ok(tobit(x) as f64))?,
    )?;
    t.set(
        "bnot",
        lua.create_function(|_, x: f64| Ok(!tobit(x) as f64))?,
    )?;
    t.set(
        "band",
        lua.create_function(|_, a: Variadic<f64>| Ok(fold(&a, -1, |x, y| x & y)))?,
    )?;
    t.set(
        "bor",
        lua.create_function(|_, a: Variadic<f64>| Ok(fold(&a, 0, |x, y| x | y)))?,
    )?;
    t.set(
        "bxor",
        lua.create_function(|_, a: Variadic<f64>| Ok(fold(&a, 0, |x, y| x ^ y)))?,
    )?;
    t.set(
        "lshift",
        lua.create_function(|_, (x, n): (f64, f64)| {
            Ok(((tobit(x) as u32) << (tobit(n) & 31)) as i32 as f64)
        })?,
    )?;
    t.set(
        "rshift",
        lua.create_function(|_, (x, n): (f64, f64)| {
            Ok(((tobit(x) as u32) >> (tobit(n) & 31)) as i32 as f64)
        })?,
    )?;
    t.set(
        "arshift",
        lua.create_function(|_, (x, n): (f64, f64)| Ok((tobit(x) >> (tobit(n) & 31)) as f64))?,
    )?;
    t.set(
        "rol",
        lua.create_function(|_, (x, n): (f64, f64)| {
            Ok((tobit(x) as u32).rotate_left((tobit(n) & 31) as u32) as i32 as f64)
        })?,
    )?;
    t.set(
        "ror",
        lua.create_function(|_, (x, n): (f64, f64)| {
            Ok((tobit(x) as u32).rotate_right((tobit(n) & 31) as u32) as i32 as f64)
        })?,
    )?;
    t.set(
        "bswap",
        lua.create_function(|_, x: f64| Ok((tobit(x) as u32).swap_bytes() as i32 as f64))?,
    )?;
    t.set(
        "tohex",
        lua.create_function(|lua, (x, n): (f64, Option<f64>)| {
            let mut b = tobit(x) as u32;
            let mut n = n.map(tobit).unwrap_or(8);
            let digits: &[u8; 16] = if n < 0 {
                n = n.saturating_neg();
                b"0123456789ABCDEF"
            } else {
                b"0123456789abcdef"
            };
            let n = n.min(8) as usize;
            let mut buf = [0u8; 8];
            for i in (0..n).rev() {
                buf[i] = digits[(b & 15) as usize];
                b >>= 4;
            }
            lua.create_string(&buf[..n])
        })?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::tobit;

    #[test]
    fn tobit_wraps_and_rounds() {
        assert_eq!(tobit(4294967295.0), -1);
        assert_eq!(tobit(2147483648.0), i32::MIN);
        assert_eq!(tobit(1.5), 2);
        assert_eq!(tobit(2.5), 2);
        assert_eq!(tobit(-1.0), -1);
    }
}
