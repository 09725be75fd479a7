//! A minimal blocking HTTP/1.1 JSON client for etcd's v3 gRPC gateway (`/v3/...`), with a source
//! address like the RESP client, plus the base64 that the gateway uses for keys and values.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

pub struct HttpConn {
    r: BufReader<TcpStream>,
    w: TcpStream,
    host: String,
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

impl HttpConn {
    pub fn connect(
        src: Ipv4Addr,
        dst: SocketAddr,
        connect: Duration,
        io_timeout: Duration,
    ) -> io::Result<HttpConn> {
        let s = crate::resp::connect_from(src, dst, connect, io_timeout)?;
        Ok(HttpConn {
            r: BufReader::new(s.try_clone()?),
            w: s,
            host: dst.to_string(),
        })
    }

    /// POSTs a JSON body; returns the status code and the parsed JSON answer.
    pub fn post(
        &mut self,
        path: &str,
        body: &serde_json::Value,
    ) -> io::Result<(u16, serde_json::Value)> {
        let body = body.to_string();
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        self.w.write_all(req.as_bytes())?;
        let status_line = self.line()?;
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("bad status line"))?;
        let mut len: Option<usize> = None;
        let mut chunked = false;
        loop {
            let h = self.line()?;
            if h.is_empty() {
                break;
            }
            let lower = h.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = Some(v.trim().parse().map_err(|_| bad("bad content-length"))?);
            } else if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
            }
        }
        let mut payload = Vec::new();
        if chunked {
            loop {
                let sz =
                    usize::from_str_radix(self.line()?.split(';').next().unwrap_or("").trim(), 16)
                        .map_err(|_| bad("bad chunk size"))?;
                if sz > 16 << 20 {
                    return Err(bad("chunk too large"));
                }
                let mut c = vec![0u8; sz + 2];
                self.r.read_exact(&mut c)?;
                if sz == 0 {
                    break;
                }
                payload.extend_from_slice(&c[..sz]);
            }
        } else {
            let n = len.ok_or_else(|| bad("no content-length"))?;
            if n > 16 << 20 {
                return Err(bad("body too large"));
            }
            payload.resize(n, 0);
            self.r.read_exact(&mut payload)?;
        }
        let v = serde_json::from_slice(&payload).map_err(|_| bad("bad json"))?;
        Ok((status, v))
    }

    fn line(&mut self) -> io::Result<String> {
        let mut l = Vec::new();
        self.r.read_until(b'\n', &mut l)?;
        if l.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed",
            ));
        }
        while l.last() == Some(&b'\n') || l.last() == Some(&b'\r') {
            l.pop();
        }
        String::from_utf8(l).map_err(|_| bad("non-utf8 header"))
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn b64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(B64[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub fn unb64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0;
    for ch in s.bytes() {
        if ch == b'=' {
            break;
        }
        let v = B64.iter().position(|&b| b == ch)? as u32;
        acc = acc << 6 | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_round_trips() {
        for s in ["", "f", "fo", "foo", "foob", "fooba", "foobar"] {
            assert_eq!(
                super::unb64(&super::b64(s.as_bytes())).unwrap(),
                s.as_bytes()
            );
        }
        assert_eq!(super::b64(b"foobar"), "Zm9vYmFy");
        assert_eq!(super::b64(b"fo"), "Zm8=");
    }
}
