//! Reply encoding for one connection's protocol version (RESP2 or RESP3).

use super::frame::Frame;
use super::number::fmt_g17;
use bytes::{BufMut, Bytes, BytesMut};

/// The longest `<prefix><i64>\r\n` line: 1 + 20 + 2 bytes.
const LINE_MAX: usize = 24;

/// `<prefix><n>\r\n` (a length or an integer reply) in one append. Every reply has one and a
/// pipelined GET is little else: formatting into a fixed array and copying the whole array
/// (a constant-size copy, inlined) replaced three appends and a `memcpy` call, ~60
/// instructions of ~190 for a bulk reply (callgrind).
#[inline]
fn put_line_int(out: &mut BytesMut, prefix: u8, n: i64) {
    let mut line = [0u8; LINE_MAX];
    let mut b = itoa::Buffer::new();
    let digits = b.format(n).as_bytes();
    line[0] = prefix;
    line[1..1 + digits.len()].copy_from_slice(digits);
    let len = 1 + digits.len();
    line[len..len + 2].copy_from_slice(b"\r\n");
    put_prefix_of(out, &line, len + 2);
}

/// Appends the first `n` bytes of `bytes`, copying all of it (see `put_line_int`).
#[inline(always)]
fn put_prefix_of(out: &mut BytesMut, bytes: &[u8; LINE_MAX], n: usize) {
    out.reserve(LINE_MAX);
    let n = n.min(LINE_MAX);
    // SAFETY: `reserve` left at least LINE_MAX writable bytes in `chunk_mut()`; all of them
    // are written, and the length grows by n <= LINE_MAX of those initialised bytes.
    unsafe {
        let dst = out.chunk_mut().as_mut_ptr();
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, LINE_MAX);
        out.advance_mut(n);
    }
}

fn put_len(out: &mut BytesMut, prefix: u8, n: usize) {
    put_line_int(out, prefix, n as i64);
}

/// A bulk body at least this large is referenced rather than copied into the output (the
/// connection's chain takes the stored value itself: machine/output.rs `BIG`).
pub const REFERENCED: usize = 16 * 1024;

/// `$<len>\r\n`: the header of a bulk whose body travels by reference (a large reply appended
/// to the connection's chain as the stored value itself, machine/output.rs).
pub fn bulk_header(out: &mut BytesMut, len: usize) {
    put_len(out, b'$', len);
}

fn put_bulk(out: &mut BytesMut, data: &[u8]) {
    out.reserve(data.len() + LINE_MAX + 2);
    put_len(out, b'$', data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// A status or error line. A CR or LF inside would end the line early and let whatever follows
/// read as further replies (a client's bytes echoed in an error could forge them), so they go out
/// as spaces, as Redis's addReplyErrorFormat does; handlers already avoid them, this is the guard.
fn put_line(out: &mut BytesMut, kind: u8, line: &[u8]) {
    out.put_u8(kind);
    let start = out.len();
    out.extend_from_slice(line);
    for b in &mut out[start..] {
        if *b == b'\r' || *b == b'\n' {
            *b = b' ';
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// Where a reply's bulk strings go: copied into the output, or, when large, referenced.
trait Bodies {
    /// Takes `body` by reference if it is to travel that way: writes its `$<len>` header,
    /// records (offset, body) for the body's place and writes the CRLF after it; false, with
    /// nothing written, when the body is to be copied.
    fn take(&mut self, out: &mut BytesMut, body: &Bytes) -> bool;
}

/// Every bulk is copied.
struct CopyAll;

impl Bodies for CopyAll {
    #[inline(always)]
    fn take(&mut self, _: &mut BytesMut, _: &Bytes) -> bool {
        false
    }
}

/// Bulks of `output::BIG` bytes or more are referenced, (offset, body) in offset order: the
/// connection's chain puts each body between `out[..offset]` and `out[offset..]`
/// (`OutBuf::put_with`).
impl Bodies for Vec<(usize, Bytes)> {
    #[inline(always)]
    fn take(&mut self, out: &mut BytesMut, body: &Bytes) -> bool {
        if body.len() < REFERENCED {
            return false;
        }
        bulk_header(out, body.len());
        self.push((out.len(), body.clone()));
        out.extend_from_slice(b"\r\n");
        true
    }
}

/// Encodes `frame` into `out`, copying every bulk.
pub fn encode(frame: &Frame, resp3: bool, out: &mut BytesMut) {
    encode_with(frame, resp3, out, &mut CopyAll);
}

/// Encodes a reply for a connection's output: as `encode`, except that bulk strings of
/// `output::BIG` bytes or more, at the top or nested at any depth (GET, MGET, LRANGE,
/// HGETALL, XRANGE, EXEC and script replies), are not copied: their headers and CRLFs go
/// into `out` and the bodies into `bodies` with their offsets, for `OutBuf::put_with`.
pub fn encode_referencing(
    frame: &Frame,
    resp3: bool,
    out: &mut BytesMut,
    bodies: &mut Vec<(usize, Bytes)>,
) {
    encode_with(frame, resp3, out, bodies);
}

fn encode_with<B: Bodies>(frame: &Frame, resp3: bool, out: &mut BytesMut, bodies: &mut B) {
    match frame {
        // The reply of every SET: no scan for line breaks, one constant-size append.
        Frame::Simple(s) if s[..] == b"OK"[..] => out.extend_from_slice(b"+OK\r\n"),
        Frame::Simple(s) => put_line(out, b'+', s),
        Frame::Error(e) => put_line(out, b'-', e),
        Frame::Integer(i) => put_line_int(out, b':', *i),
        Frame::Bulk(b) => {
            if !bodies.take(out, b) {
                put_bulk(out, b)
            }
        }
        Frame::Null => out.extend_from_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" }),
        Frame::NullArray => out.extend_from_slice(if resp3 { b"_\r\n" } else { b"*-1\r\n" }),
        Frame::Array(items) => {
            put_len(out, b'*', items.len());
            for f in items {
                encode_with(f, resp3, out, bodies);
            }
        }
        Frame::Set(items) => {
            put_len(out, if resp3 { b'~' } else { b'*' }, items.len());
            for f in items {
                encode_with(f, resp3, out, bodies);
            }
        }
        Frame::Push(items) => {
            put_len(out, if resp3 { b'>' } else { b'*' }, items.len());
            for f in items {
                encode_with(f, resp3, out, bodies);
            }
        }
        Frame::Map(pairs) => {
            if resp3 {
                put_len(out, b'%', pairs.len());
            } else {
                put_len(out, b'*', pairs.len() * 2);
            }
            for (k, v) in pairs {
                encode_with(k, resp3, out, bodies);
                encode_with(v, resp3, out, bodies);
            }
        }
        Frame::Double(d) => {
            let text = fmt_g17(*d);
            if resp3 {
                out.put_u8(b',');
                out.extend_from_slice(text.as_bytes());
                out.extend_from_slice(b"\r\n");
            } else {
                put_bulk(out, text.as_bytes());
            }
        }
        Frame::DoubleText(_, text) => {
            if resp3 {
                out.put_u8(b',');
                out.extend_from_slice(text);
                out.extend_from_slice(b"\r\n");
            } else {
                put_bulk(out, text);
            }
        }
        Frame::Boolean(b) => {
            if resp3 {
                out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
            } else {
                out.extend_from_slice(if *b { b":1\r\n" } else { b":0\r\n" });
            }
        }
        Frame::BigNumber(text) => {
            if resp3 {
                put_line(out, b'(', text);
            } else {
                put_bulk(out, text);
            }
        }
        Frame::Verbatim(text) => {
            if resp3 {
                put_len(out, b'=', text.len() + 4);
                out.extend_from_slice(b"txt:");
                out.extend_from_slice(text);
                out.extend_from_slice(b"\r\n");
            } else {
                put_bulk(out, text);
            }
        }
        Frame::Attribute(pairs, reply) => {
            if resp3 {
                put_len(out, b'|', pairs.len());
                for (k, v) in pairs {
                    encode_with(k, resp3, out, bodies);
                    encode_with(v, resp3, out, bodies);
                }
            }
            encode_with(reply, resp3, out, bodies);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(f: &Frame, resp3: bool) -> String {
        let mut out = BytesMut::new();
        encode(f, resp3, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn status_and_error_lines_cannot_carry_line_breaks() {
        let forged = Frame::Error(Bytes::from_static(b"ERR x\r\n+OK\nmore"));
        assert_eq!(enc(&forged, false), "-ERR x  +OK more\r\n");
        let simple = Frame::Simple(Bytes::from_static(b"a\rb"));
        assert_eq!(enc(&simple, true), "+a b\r\n");
    }

    #[test]
    fn integers_and_lengths_at_their_extremes() {
        for i in [0, 7, -1, 10, -10, 99, 1_000_000, i64::MAX, i64::MIN] {
            assert_eq!(enc(&Frame::Integer(i), false), format!(":{i}\r\n"));
        }
        let big = vec![b'x'; 1000];
        let got = enc(&Frame::Bulk(Bytes::from(big.clone())), false);
        assert_eq!(got, format!("$1000\r\n{}\r\n", "x".repeat(1000)));
        assert_eq!(enc(&Frame::bulk_static(""), false), "$0\r\n\r\n");
        // Many small replies into one buffer: each append lands after the last.
        let mut out = BytesMut::new();
        for i in 0..100 {
            encode(&Frame::Integer(i), false, &mut out);
        }
        let want: String = (0..100).map(|i| format!(":{i}\r\n")).collect();
        assert_eq!(String::from_utf8_lossy(&out), want);
    }

    #[test]
    fn resp2_and_resp3_shapes() {
        let map = Frame::Map(vec![(Frame::bulk_static("a"), Frame::Integer(1))]);
        assert_eq!(enc(&map, false), "*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&map, true), "%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&Frame::Null, false), "$-1\r\n");
        assert_eq!(enc(&Frame::NullArray, false), "*-1\r\n");
        assert_eq!(enc(&Frame::Null, true), "_\r\n");
        assert_eq!(enc(&Frame::Double(1.5), false), "$3\r\n1.5\r\n");
        assert_eq!(enc(&Frame::Double(1.5), true), ",1.5\r\n");
        let t = Frame::DoubleText(13.5, Bytes::from_static(b"13.50"));
        assert_eq!(enc(&t, false), "$5\r\n13.50\r\n");
        assert_eq!(enc(&t, true), ",13.50\r\n");
        assert_eq!(
            enc(&Frame::Verbatim(Bytes::from_static(b"x")), true),
            "=5\r\ntxt:x\r\n"
        );
        assert_eq!(
            enc(&Frame::Push(vec![Frame::Integer(1)]), true),
            ">1\r\n:1\r\n"
        );
    }

    /// Large bulks at any depth are referenced, small ones copied, and putting the bodies
    /// back at their offsets gives exactly what `encode` writes.
    #[test]
    fn large_bulks_are_referenced_at_any_depth() {
        const BIG: usize = REFERENCED;
        let big = Bytes::from(vec![b'v'; BIG]);
        let bigger = Bytes::from(vec![b'w'; BIG * 3 + 1]);
        let small = Bytes::from(vec![b's'; BIG - 1]);
        let frame = Frame::Array(vec![
            Frame::Bulk(big.clone()),
            Frame::Null,
            Frame::Array(vec![
                Frame::bulk_static("id"),
                Frame::Map(vec![(
                    Frame::Bulk(small.clone()),
                    Frame::Bulk(bigger.clone()),
                )]),
            ]),
            Frame::Bulk(small.clone()),
        ]);
        for resp3 in [false, true] {
            let mut out = BytesMut::new();
            let mut bodies = Vec::new();
            encode_referencing(&frame, resp3, &mut out, &mut bodies);
            assert_eq!(bodies.len(), 2);
            assert_eq!(bodies[0].1.as_ptr(), big.as_ptr());
            assert_eq!(bodies[1].1.as_ptr(), bigger.as_ptr());
            assert!(bodies[0].0 < bodies[1].0);
            let mut joined = Vec::new();
            let mut at = 0;
            for (offset, body) in &bodies {
                joined.extend_from_slice(&out[at..*offset]);
                joined.extend_from_slice(body);
                at = *offset;
            }
            joined.extend_from_slice(&out[at..]);
            let mut want = BytesMut::new();
            encode(&frame, resp3, &mut want);
            assert_eq!(joined, &want[..]);
            // The small bulks were copied in place: only the two large bodies are missing.
            assert_eq!(out.len(), want.len() - big.len() - bigger.len());
        }
        // A top-level bulk of exactly BIG bytes is referenced; one byte less is not.
        let mut out = BytesMut::new();
        let mut bodies = Vec::new();
        encode_referencing(&Frame::Bulk(small), false, &mut out, &mut bodies);
        assert!(bodies.is_empty() && out.len() == BIG - 1 + 10);
        encode_referencing(&Frame::Bulk(big), false, &mut out, &mut bodies);
        assert_eq!(bodies.len(), 1);
    }
}
