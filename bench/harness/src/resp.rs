//! A minimal blocking RESP2 client: enough for SET/GET/EVAL/WAIT/SENTINEL, with a source
//! address so that a client sits on one side of a network partition.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

/// Opens a TCP connection from `src` (port chosen by the kernel) with a connect timeout; every
/// read and write then times out after `io_timeout`, which the workload turns into "unknown".
pub fn connect_from(
    src: Ipv4Addr,
    dst: SocketAddr,
    connect: Duration,
    io_timeout: Duration,
) -> io::Result<TcpStream> {
    let sock = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    sock.bind(&SocketAddr::new(src.into(), 0).into())?;
    sock.connect_timeout(&dst.into(), connect)?;
    let s: TcpStream = sock.into();
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(io_timeout))?;
    s.set_write_timeout(Some(io_timeout))?;
    Ok(s)
}

pub struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    pub fn connect(
        src: Ipv4Addr,
        dst: SocketAddr,
        connect: Duration,
        io_timeout: Duration,
    ) -> io::Result<Conn> {
        let s = connect_from(src, dst, connect, io_timeout)?;
        Ok(Conn {
            r: BufReader::new(s.try_clone()?),
            w: s,
        })
    }

    pub fn cmd(&mut self, args: &[&[u8]]) -> io::Result<Reply> {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            buf.extend_from_slice(a);
            buf.extend_from_slice(b"\r\n");
        }
        self.w.write_all(&buf)?;
        read_reply(&mut self.r, 0)
    }
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

fn read_line(r: &mut BufReader<TcpStream>) -> io::Result<String> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    if line.len() < 2 || !line.ends_with(b"\r\n") {
        return Err(bad("malformed line"));
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).map_err(|_| bad("non-utf8 line"))
}

fn read_reply(r: &mut BufReader<TcpStream>, depth: usize) -> io::Result<Reply> {
    if depth > 8 {
        return Err(bad("reply nested too deep"));
    }
    let line = read_line(r)?;
    let (kind, rest) = line.split_at(1.min(line.len()));
    let num = || rest.parse::<i64>().map_err(|_| bad("bad length"));
    Ok(match kind {
        "+" => Reply::Simple(rest.to_string()),
        "-" => Reply::Error(rest.to_string()),
        ":" => Reply::Int(num()?),
        "$" => {
            let n = num()?;
            if n < 0 {
                Reply::Bulk(None)
            } else if n > 64 << 20 {
                return Err(bad("bulk too large"));
            } else {
                let mut b = vec![0u8; n as usize + 2];
                r.read_exact(&mut b)?;
                b.truncate(n as usize);
                Reply::Bulk(Some(b))
            }
        }
        "*" => {
            let n = num()?;
            if n < 0 {
                Reply::Array(None)
            } else if n > 1 << 16 {
                return Err(bad("array too large"));
            } else {
                let mut v = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    v.push(read_reply(r, depth + 1)?);
                }
                Reply::Array(Some(v))
            }
        }
        _ => return Err(bad("unknown reply type")),
    })
}
