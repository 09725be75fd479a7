//! Reply encoding for one connection's protocol version (RESP2 or RESP3).

use super::frame::Frame;
use super::number::fmt_g17;
use bytes::{BufMut, BytesMut};

fn put_len(out: &mut BytesMut, prefix: u8, n: usize) {
    out.put_u8(prefix);
    let mut b = itoa::Buffer::new();
    out.extend_from_slice(b.format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn put_bulk(out: &mut BytesMut, data: &[u8]) {
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

pub fn encode(frame: &Frame, resp3: bool, out: &mut BytesMut) {
    match frame {
        Frame::Simple(s) => put_line(out, b'+', s),
        Frame::Error(e) => put_line(out, b'-', e),
        Frame::Integer(i) => {
            out.put_u8(b':');
            let mut b = itoa::Buffer::new();
            out.extend_from_slice(b.format(*i).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Frame::Bulk(b) => put_bulk(out, b),
        Frame::Null => out.extend_from_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" }),
        Frame::NullArray => out.extend_from_slice(if resp3 { b"_\r\n" } else { b"*-1\r\n" }),
        Frame::Array(items) => {
            put_len(out, b'*', items.len());
            for f in items {
                encode(f, resp3, out);
            }
        }
        Frame::Set(items) => {
            put_len(out, if resp3 { b'~' } else { b'*' }, items.len());
            for f in items {
                encode(f, resp3, out);
            }
        }
        Frame::Push(items) => {
            put_len(out, if resp3 { b'>' } else { b'*' }, items.len());
            for f in items {
                encode(f, resp3, out);
            }
        }
        Frame::Map(pairs) => {
            if resp3 {
                put_len(out, b'%', pairs.len());
            } else {
                put_len(out, b'*', pairs.len() * 2);
            }
            for (k, v) in pairs {
                encode(k, resp3, out);
                encode(v, resp3, out);
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

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
}
