//! A tiny RESP2 client: encode a command, parse one reply, one connection.
//!
//! Only what the load generator needs. Reads go through a temporary buffer that is appended to the
//! parse buffer after the read completes, so a `read_reply` dropped by `select!` loses nothing.

use std::io;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Simple(Vec<u8>),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    pub fn is_bulk(&self, want: &[u8]) -> bool {
        matches!(self, Reply::Bulk(Some(b)) if b == want)
    }
}

pub fn encode(buf: &mut Vec<u8>, args: &[&[u8]]) {
    buf.push(b'*');
    buf.extend_from_slice(args.len().to_string().as_bytes());
    buf.extend_from_slice(b"\r\n");
    for a in args {
        buf.push(b'$');
        buf.extend_from_slice(a.len().to_string().as_bytes());
        buf.extend_from_slice(b"\r\n");
        buf.extend_from_slice(a);
        buf.extend_from_slice(b"\r\n");
    }
}

fn line(buf: &[u8], from: usize) -> Option<usize> {
    buf[from..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| from + p)
}

fn int(b: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad integer {:?}", String::from_utf8_lossy(b)))
}

/// Parses one reply starting at `at`; `Ok(None)` = need more bytes.
pub fn parse(buf: &[u8], at: usize) -> Result<Option<(Reply, usize)>, String> {
    if at >= buf.len() {
        return Ok(None);
    }
    let Some(end) = line(buf, at + 1) else {
        return Ok(None);
    };
    let body = &buf[at + 1..end];
    let next = end + 2;
    match buf[at] {
        b'+' => Ok(Some((Reply::Simple(body.to_vec()), next))),
        b'-' => Ok(Some((
            Reply::Error(String::from_utf8_lossy(body).into_owned()),
            next,
        ))),
        b':' => Ok(Some((Reply::Int(int(body)?), next))),
        b'$' => {
            let n = int(body)?;
            if n < 0 {
                return Ok(Some((Reply::Bulk(None), next)));
            }
            let n = n as usize;
            if buf.len() < next + n + 2 {
                return Ok(None);
            }
            Ok(Some((
                Reply::Bulk(Some(buf[next..next + n].to_vec())),
                next + n + 2,
            )))
        }
        // RESP3 push/array are read the same way (the generator speaks RESP2, but be lenient).
        b'*' | b'>' => {
            let n = int(body)?;
            if n < 0 {
                return Ok(Some((Reply::Array(None), next)));
            }
            let mut items = Vec::with_capacity((n as usize).min(64));
            let mut pos = next;
            for _ in 0..n {
                match parse(buf, pos)? {
                    Some((r, p)) => {
                        items.push(r);
                        pos = p;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((Reply::Array(Some(items)), pos)))
        }
        b'_' => Ok(Some((Reply::Bulk(None), next))),
        c => Err(format!("unexpected reply type byte {c:#x}")),
    }
}

pub struct Conn {
    stream: TcpStream,
    rbuf: Vec<u8>,
    rpos: usize,
    tmp: Vec<u8>,
    wbuf: Vec<u8>,
}

fn proto_err(e: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl Conn {
    pub async fn connect(addr: &str) -> io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            rbuf: Vec::with_capacity(1024),
            rpos: 0,
            tmp: vec![0; 4096],
            wbuf: Vec::with_capacity(256),
        })
    }

    pub fn queue(&mut self, args: &[&[u8]]) {
        encode(&mut self.wbuf, args);
    }

    pub async fn flush(&mut self) -> io::Result<()> {
        if !self.wbuf.is_empty() {
            self.stream.write_all(&self.wbuf).await?;
            self.wbuf.clear();
        }
        Ok(())
    }

    /// Cancel-safe: bytes are only appended once a read has completed.
    pub async fn read_reply(&mut self) -> io::Result<Reply> {
        loop {
            if let Some((r, p)) = parse(&self.rbuf, self.rpos).map_err(proto_err)? {
                self.rpos = p;
                if self.rpos == self.rbuf.len() {
                    self.rbuf.clear();
                    self.rpos = 0;
                }
                return Ok(r);
            }
            if self.rpos > 0 {
                self.rbuf.drain(..self.rpos);
                self.rpos = 0;
            }
            let n = self.stream.read(&mut self.tmp).await?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "server closed the connection",
                ));
            }
            self.rbuf.extend_from_slice(&self.tmp[..n]);
        }
    }

    pub async fn cmd(&mut self, args: &[&[u8]]) -> io::Result<Reply> {
        self.queue(args);
        self.flush().await?;
        self.read_reply().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_types_and_partials() {
        let b = b"+OK\r\n-ERR x y\r\n:-12\r\n$3\r\nabc\r\n$-1\r\n*2\r\n$1\r\na\r\n:1\r\n";
        let mut at = 0;
        let mut got = vec![];
        while let Some((r, p)) = parse(b, at).unwrap() {
            got.push(r);
            at = p;
        }
        assert_eq!(at, b.len());
        assert_eq!(
            got,
            vec![
                Reply::Simple(b"OK".to_vec()),
                Reply::Error("ERR x y".into()),
                Reply::Int(-12),
                Reply::Bulk(Some(b"abc".to_vec())),
                Reply::Bulk(None),
                Reply::Array(Some(vec![Reply::Bulk(Some(b"a".to_vec())), Reply::Int(1)])),
            ]
        );
        for cut in 0..b.len() {
            // Every strict prefix of a complete reply parses as "need more" or as earlier replies.
            let _ = parse(&b[..cut], 0).unwrap();
        }
        assert_eq!(parse(b"$3\r\nab", 0).unwrap(), None);
        assert_eq!(parse(b"*2\r\n:1\r\n", 0).unwrap(), None);
    }

    #[test]
    fn encodes_multibulk() {
        let mut v = vec![];
        encode(&mut v, &[b"SET", b"k", b""]);
        assert_eq!(v, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }
}
