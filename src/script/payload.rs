//! FUNCTION DUMP / RESTORE payloads in Redis 7.0's format (`functionDumpCommand`,
//! `rdbSaveFunctions`): per library `RDB_OPCODE_FUNCTION2` and its code as an RDB string (LZF
//! compressed when that saves 4 bytes, as `rdbSaveRawString` does with `rdbcompression yes`),
//! then the RDB version (2 bytes, little endian) and the CRC64 of everything before it (8
//! bytes, little endian), so a dump moves between Redis 7.0 and deadbolt either way.

pub const RDB_VERSION: u16 = 10;
const OPCODE_FUNCTION2: u8 = 245;
/// The 7.0-rc layout (name, engine, description, code): still accepted by Redis 7.0.
const OPCODE_FUNCTION: u8 = 246;
const ENC_INT8: u8 = 0;
const ENC_INT16: u8 = 1;
const ENC_INT32: u8 = 2;
const ENC_LZF: u8 = 3;
/// Largest string a payload may claim once decompressed: Redis's proto-max-bulk-len default.
const MAX_STRING: usize = 512 << 20;

/// Redis's crc64 (Jones polynomial, reflected, as `crc64(0, …)`): store/rdb.rs's, which DUMP
/// uses too.
pub fn crc64(data: &[u8]) -> u64 {
    crate::store::rdb::crc64(0, data)
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(((len >> 8) as u8 & 0x3f) | 0x40);
        out.push(len as u8);
    } else if len <= u32::MAX as usize {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// `rdbTryIntegerEncoding`: a string that is exactly a small integer's canonical form.
fn int_encoding(s: &[u8]) -> Option<i64> {
    let v: i64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    (itoa::Buffer::new().format(v).as_bytes() == s).then_some(v)
}

/// `rdbSaveRawString`.
fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 11 {
        if let Some(v) = int_encoding(s) {
            if let Ok(b) = i8::try_from(v) {
                out.extend_from_slice(&[0xc0 | ENC_INT8, b as u8]);
                return;
            }
            if let Ok(b) = i16::try_from(v) {
                out.push(0xc0 | ENC_INT16);
                out.extend_from_slice(&b.to_le_bytes());
                return;
            }
            if let Ok(b) = i32::try_from(v) {
                out.push(0xc0 | ENC_INT32);
                out.extend_from_slice(&b.to_le_bytes());
                return;
            }
        }
    }
    if s.len() > 20 && s.len() <= u32::MAX as usize {
        // Redis's compressor, byte for byte (store/rdb.rs), when it saves at least 4 bytes.
        if let Some(buf) = crate::store::rdb::lzf_compress(s, s.len() - 4) {
            out.push(0xc0 | ENC_LZF);
            put_len(out, buf.len());
            put_len(out, s.len());
            out.extend_from_slice(&buf);
            return;
        }
    }
    put_len(out, s.len());
    out.extend_from_slice(s);
}

/// The payload for these library codes.
pub fn dump<'a>(codes: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        put_string(&mut out, code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// `verifyDumpPayload`: version not newer than ours and the checksum right.
pub fn verify(p: &[u8]) -> bool {
    if p.len() < 10 {
        return false;
    }
    let footer = &p[p.len() - 10..];
    let ver = u16::from_le_bytes([footer[0], footer[1]]);
    if ver > RDB_VERSION {
        return false;
    }
    crc64(&p[..p.len() - 8]).to_le_bytes() == footer[2..]
}

struct Reader<'a> {
    p: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.p.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.p.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    /// `rdbLoadLenByRef`: (length or encoding, is an encoding).
    fn len(&mut self) -> Option<(u64, bool)> {
        let b = self.byte()?;
        Some(match b >> 6 {
            0 => ((b & 0x3f) as u64, false),
            1 => ((((b & 0x3f) as u64) << 8) | self.byte()? as u64, false),
            3 => ((b & 0x3f) as u64, true),
            _ => match b {
                0x80 => (
                    u32::from_be_bytes(self.take(4)?.try_into().ok()?) as u64,
                    false,
                ),
                0x81 => (u64::from_be_bytes(self.take(8)?.try_into().ok()?), false),
                _ => return None,
            },
        })
    }

    /// `rdbGenericLoadStringObject`.
    fn string(&mut self) -> Option<Vec<u8>> {
        let (len, encoded) = self.len()?;
        if !encoded {
            return Some(self.take(usize::try_from(len).ok()?)?.to_vec());
        }
        let int = |v: i64| Some(itoa::Buffer::new().format(v).as_bytes().to_vec());
        match len as u8 {
            ENC_INT8 => int(self.byte()? as i8 as i64),
            ENC_INT16 => int(i16::from_le_bytes(self.take(2)?.try_into().ok()?) as i64),
            ENC_INT32 => int(i32::from_le_bytes(self.take(4)?.try_into().ok()?) as i64),
            ENC_LZF => {
                // rdbLoadLen(rdb, NULL): an "encoded" length byte reads as its low 6 bits.
                let clen = usize::try_from(self.len()?.0).ok()?;
                let ulen = usize::try_from(self.len()?.0).ok()?;
                let c = self.take(clen)?;
                if ulen == 0 {
                    // lzf_decompress into nothing returns 0: the expected length.
                    return Some(Vec::new());
                }
                // An LZF back reference yields at most 264 bytes from 3: a length past that
                // ratio is a lie (Redis would allocate it and then fail), refused before
                // allocating for it.
                if ulen > MAX_STRING || ulen > clen.saturating_mul(132) {
                    return None;
                }
                crate::store::rdb::lzf_decompress(c, ulen).ok()
            }
            _ => None,
        }
    }
}

/// Hands each library code of a verified payload to `each`, in order, as Redis reads and
/// loads one record after the other (so a library that fails to load is reported before a
/// later record that cannot be read); the error is Redis's text (without `ERR `).
pub fn parse(
    p: &[u8],
    mut each: impl FnMut(Vec<u8>) -> Result<(), Vec<u8>>,
) -> Result<(), Vec<u8>> {
    // As Redis's rio over the whole payload: a record is read while more than the footer's 10
    // bytes are left, and a damaged length may read into the footer.
    let mut r = Reader { p, pos: 0 };
    while p.len() - r.pos > 10 {
        let Some(t) = r.byte() else {
            return Err("can not read data type".into());
        };
        match t {
            OPCODE_FUNCTION2 => match r.string() {
                Some(code) => each(code)?,
                None => return Err("Failed loading library payload".into()),
            },
            OPCODE_FUNCTION => {
                let name = r.string().ok_or("Failed loading library name")?;
                let engine = r.string().ok_or("Failed loading engine name")?;
                let (has_desc, _) = r
                    .len()
                    .ok_or("Failed loading library description indicator")?;
                if has_desc != 0 {
                    r.string().ok_or("Failed loading library description")?;
                }
                let blob = r.string().ok_or("Failed loading library blob")?;
                let mut code = b"#!".to_vec();
                code.extend_from_slice(&engine);
                code.extend_from_slice(b" name=");
                code.extend_from_slice(&name);
                code.push(b'\n');
                code.extend_from_slice(&blob);
                each(code)?;
            }
            _ => return Err("given type is not a function".into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_check_value() {
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn round_trip() {
        let long = b"#!lua name=lib\nredis.register_function('f', function() return 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' end)".to_vec();
        let codes = [&b"#!lua name=x\n"[..], &long[..], b"12"];
        let p = dump(codes.iter().copied());
        assert!(verify(&p));
        let mut got = Vec::new();
        parse(&p, |c| {
            got.push(c);
            Ok(())
        })
        .unwrap();
        assert_eq!(got, codes.iter().map(|c| c.to_vec()).collect::<Vec<_>>());
        let mut bad = p.clone();
        bad[3] ^= 1;
        assert!(!verify(&bad));
    }

    #[test]
    fn lies_are_refused() {
        // LZF record claiming 1 GB from 2 bytes.
        let mut p = vec![OPCODE_FUNCTION2, 0xc3, 2, 0x80];
        p.extend_from_slice(&(1u32 << 30).to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(&RDB_VERSION.to_le_bytes());
        let crc = crc64(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        assert!(verify(&p));
        assert_eq!(
            parse(&p, |_| Ok(())),
            Err(b"Failed loading library payload".to_vec())
        );
    }
}
