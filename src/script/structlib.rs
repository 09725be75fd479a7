//! `struct` as Redis bundles it (Roberto Ierusalimschy's lua_struct): pack, unpack, size.
//! Errors are returned as text; the Lua wrapper raises them at the script's position.

use mlua::{Lua, MultiValue, Table, Value};

const MAXINTSIZE: usize = 32;
const MAXALIGN: usize = 8;

#[derive(Clone, Copy)]
struct Header {
    big: bool,
    align: usize,
}

struct Fmt<'a> {
    f: &'a [u8],
    pos: usize,
    func: &'static str,
}

fn typename(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::Integer(_)) | Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        _ => "userdata",
    }
}

fn argerror(n: usize, func: &str, msg: &str) -> String {
    format!("bad argument #{n} to '{func}' ({msg})")
}

fn check_number(args: &[Value], i: usize, func: &str) -> Result<f64, String> {
    match args.get(i) {
        Some(Value::Number(n)) => Ok(*n),
        Some(Value::Integer(n)) => Ok(*n as f64),
        Some(Value::String(s)) => std::str::from_utf8(&s.as_bytes())
            .ok()
            .and_then(|t| t.trim().parse::<f64>().ok())
            .ok_or_else(|| argerror(i + 1, func, "number expected, got string")),
        other => Err(argerror(
            i + 1,
            func,
            &format!("number expected, got {}", typename(other)),
        )),
    }
}

fn check_bytes(args: &[Value], i: usize, func: &str) -> Result<Vec<u8>, String> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Number(n)) => Ok(crate::protocol::number::fmt_g(*n, 14).into_bytes()),
        Some(Value::Integer(n)) => Ok(n.to_string().into_bytes()),
        other => Err(argerror(
            i + 1,
            func,
            &format!("string expected, got {}", typename(other)),
        )),
    }
}

impl Fmt<'_> {
    fn getnum(&mut self, df: usize) -> Result<usize, String> {
        if !self.f.get(self.pos).is_some_and(|c| c.is_ascii_digit()) {
            return Ok(df);
        }
        let mut a: usize = 0;
        while let Some(c) = self.f.get(self.pos).filter(|c| c.is_ascii_digit()) {
            let d = (c - b'0') as usize;
            if a > (i32::MAX as usize) / 10 || a * 10 > (i32::MAX as usize) - d {
                return Err("integral size overflow".into());
            }
            a = a * 10 + d;
            self.pos += 1;
        }
        Ok(a)
    }

    fn optsize(&mut self, opt: u8) -> Result<usize, String> {
        Ok(match opt {
            b'B' | b'b' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' => 8,
            b'f' => 4,
            b'd' => 8,
            b'x' => 1,
            b'c' => self.getnum(1)?,
            b'i' | b'I' => {
                let sz = self.getnum(4)?;
                if sz > MAXINTSIZE {
                    return Err(format!(
                        "integral size {sz} is larger than limit of {MAXINTSIZE}"
                    ));
                }
                sz
            }
            _ => 0,
        })
    }

    fn toalign(&self, len: usize, h: &Header, opt: u8, size: usize) -> Result<usize, String> {
        let mut align = size;
        if align <= 1 || opt == b'c' {
            return Ok(0);
        }
        if align > h.align {
            align = h.align;
        }
        if align & (align - 1) != 0 {
            return Err(argerror(
                1,
                self.func,
                "format asks for alignment not power of 2",
            ));
        }
        Ok((align - (len & (align - 1))) & (align - 1))
    }

    fn control(&mut self, opt: u8, h: &mut Header) -> Result<(), String> {
        match opt {
            b' ' => {}
            b'>' => h.big = true,
            b'<' => h.big = false,
            b'!' => {
                let a = self.getnum(MAXALIGN)?;
                if a == 0 || a & (a - 1) != 0 {
                    return Err(format!("alignment {a} is not a power of 2"));
                }
                h.align = a;
            }
            _ => {
                return Err(argerror(
                    1,
                    self.func,
                    &format!("invalid format option '{}'", opt as char),
                ))
            }
        }
        Ok(())
    }
}

fn pack(args: &[Value]) -> Result<Vec<u8>, String> {
    let fmt = check_bytes(args, 0, "pack")?;
    // lua_struct pushes a nil after the arguments: a missing one reads as nil, not "no value".
    let mut args = args.to_vec();
    args.push(Value::Nil);
    let args = &args[..];
    let mut f = Fmt {
        f: &fmt,
        pos: 0,
        func: "pack",
    };
    let mut h = Header {
        big: false,
        align: 1,
    };
    let mut out = Vec::new();
    let mut arg = 1;
    // lua_struct reads a C string: a NUL ends the format.
    while let Some(&opt) = f.f.get(f.pos).filter(|&&c| c != 0) {
        f.pos += 1;
        let size = f.optsize(opt)?;
        let toalign = f.toalign(out.len(), &h, opt, size)?;
        out.resize(out.len() + toalign, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = check_number(args, arg, "pack")?;
                arg += 1;
                let mut value: u64 = if n < 0.0 { (n as i64) as u64 } else { n as u64 };
                let mut buf = [0u8; MAXINTSIZE];
                if h.big {
                    for i in (0..size).rev() {
                        buf[i] = (value & 0xff) as u8;
                        value = value.checked_shr(8).unwrap_or(0);
                    }
                } else {
                    for b in buf.iter_mut().take(size) {
                        *b = (value & 0xff) as u8;
                        value = value.checked_shr(8).unwrap_or(0);
                    }
                }
                out.extend_from_slice(&buf[..size]);
            }
            b'x' => out.push(0),
            b'f' => {
                let v = check_number(args, arg, "pack")? as f32;
                arg += 1;
                out.extend_from_slice(&if h.big {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                });
            }
            b'd' => {
                let v = check_number(args, arg, "pack")?;
                arg += 1;
                out.extend_from_slice(&if h.big {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                });
            }
            b'c' | b's' => {
                let s = check_bytes(args, arg, "pack")?;
                arg += 1;
                let n = if size == 0 { s.len() } else { size };
                if s.len() < n {
                    return Err(argerror(arg + 1, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..n]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => f.control(opt, &mut h)?,
        }
    }
    Ok(out)
}

fn getinteger(b: &[u8], big: bool, signed: bool) -> f64 {
    let size = b.len();
    let mut l: u64 = 0;
    if big {
        for &c in b {
            l = (l << 8) | c as u64;
        }
    } else {
        for &c in b.iter().rev() {
            l = (l << 8) | c as u64;
        }
    }
    if !signed {
        return l as f64;
    }
    let shift = (size * 8).saturating_sub(1).min(63);
    let mask = u64::MAX << shift;
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: &[Value]) -> Result<MultiValue, String> {
    let fmt = check_bytes(args, 0, "unpack")?;
    let data = check_bytes(args, 1, "unpack")?;
    let ld = data.len();
    let start = match args.get(2) {
        None | Some(Value::Nil) => 1.0,
        _ => check_number(args, 2, "unpack")?,
    };
    // lua_struct keeps the offset in a size_t: only 0 is refused; a negative one wraps to a
    // huge position, refused below as "data string too short" (or handed back).
    let start = start as i64;
    if start == 0 {
        return Err(argerror(3, "unpack", "offset must be 1 or greater"));
    }
    let mut pos = (start as u64).wrapping_sub(1) as usize;
    let mut f = Fmt {
        f: &fmt,
        pos: 0,
        func: "unpack",
    };
    let mut h = Header {
        big: false,
        align: 1,
    };
    let mut out: Vec<Value> = Vec::new();
    let too_short = || argerror(2, "unpack", "data string too short");
    let map = |e: mlua::Error| e.to_string();
    while let Some(&opt) = f.f.get(f.pos).filter(|&&c| c != 0) {
        f.pos += 1;
        let mut size = f.optsize(opt)?;
        pos = pos.wrapping_add(f.toalign(pos, &h, opt, size)?);
        if size > ld || pos > ld - size {
            return Err(too_short());
        }
        // luaL_checkstack(L, 2, "too many results") over the arguments and results so far.
        if args.len() + out.len() + 2 > 8000 {
            return Err("stack overflow (too many results)".into());
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                out.push(Value::Number(getinteger(
                    &data[pos..pos + size],
                    h.big,
                    signed,
                )));
            }
            b'x' => {}
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&data[pos..pos + 4]);
                let v = if h.big {
                    f32::from_be_bytes(b)
                } else {
                    f32::from_le_bytes(b)
                };
                out.push(Value::Number(v as f64));
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[pos..pos + 8]);
                let v = if h.big {
                    f64::from_be_bytes(b)
                } else {
                    f64::from_le_bytes(b)
                };
                out.push(Value::Number(v));
            }
            b'c' => {
                if size == 0 {
                    let prev = match out.last() {
                        Some(Value::Number(n)) => *n,
                        _ => return Err("format 'c0' needs a previous size".into()),
                    };
                    out.pop();
                    size = prev.max(0.0) as usize;
                    if size > ld || pos > ld - size {
                        return Err(too_short());
                    }
                }
                out.push(Value::String(
                    lua.create_string(&data[pos..pos + size]).map_err(map)?,
                ));
            }
            b's' => {
                let Some(e) = data[pos..].iter().position(|&c| c == 0) else {
                    return Err("unfinished string in data".into());
                };
                size = e + 1;
                out.push(Value::String(
                    lua.create_string(&data[pos..pos + e]).map_err(map)?,
                ));
            }
            _ => f.control(opt, &mut h)?,
        }
        pos += size;
    }
    out.push(Value::Number(pos.wrapping_add(1) as i64 as f64));
    Ok(MultiValue::from_iter(out))
}

fn size(args: &[Value]) -> Result<f64, String> {
    let fmt = check_bytes(args, 0, "size")?;
    let mut f = Fmt {
        f: &fmt,
        pos: 0,
        func: "size",
    };
    let mut h = Header {
        big: false,
        align: 1,
    };
    let mut pos = 0usize;
    while let Some(&opt) = f.f.get(f.pos).filter(|&&c| c != 0) {
        f.pos += 1;
        let size = f.optsize(opt)?;
        pos += f.toalign(pos, &h, opt, size)?;
        if opt == b's' {
            return Err(argerror(1, "size", "option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(argerror(1, "size", "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            f.control(opt, &mut h)?;
        }
        pos += size;
    }
    Ok(pos as f64)
}

/// The Rust half of `struct`: each function returns (ok, results… | error text).
pub fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            let args: Vec<Value> = args.into_iter().collect();
            Ok(match pack(&args) {
                Ok(b) => (true, Value::String(lua.create_string(b)?)),
                Err(e) => (false, Value::String(lua.create_string(e)?)),
            })
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| {
            let args: Vec<Value> = args.into_iter().collect();
            let mut out = MultiValue::new();
            match unpack(lua, &args) {
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
        })?,
    )?;
    t.set(
        "size",
        lua.create_function(|lua, args: MultiValue| {
            let args: Vec<Value> = args.into_iter().collect();
            Ok(match size(&args) {
                Ok(n) => (true, Value::Number(n)),
                Err(e) => (false, Value::String(lua.create_string(e)?)),
            })
        })?,
    )?;
    Ok(t)
}
