//! Zero-copy request decoding: multibulk (`*N\r\n$len\r\n…`) and inline commands.
//!
//! A multibulk request is scanned once: the argument ranges found so far and the scan position are
//! kept across reads, so a large or slowly arriving request is never rescanned from its start and
//! a declared length never decides an allocation. When the request is complete it is split off the
//! buffer with one `split_to().freeze()` and every argument is a `slice()` of it.

use bytes::{Bytes, BytesMut};
use std::fmt;

/// Longest inline request or `*`/`$` length line Redis accepts (PROTO_INLINE_MAX_SIZE).
const INLINE_MAX: usize = 64 * 1024;
/// Redis refuses multibulk counts above INT_MAX.
const MAX_MULTIBULK: i64 = i32::MAX as i64;

#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    /// `proto-max-bulk-len`.
    pub max_bulk_len: i64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_bulk_len: 512 * 1024 * 1024,
        }
    }
}

/// Malformed input: the connection answers `-ERR <Display>` and closes, as Redis does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    InvalidMultibulkLength,
    InvalidBulkLength,
    ExpectedDollar(u8),
    TooBigInline,
    TooBigMbulkCount,
    TooBigBulkCount,
    UnbalancedQuotes,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::InvalidMultibulkLength => {
                f.write_str("Protocol error: invalid multibulk length")
            }
            ProtocolError::InvalidBulkLength => f.write_str("Protocol error: invalid bulk length"),
            ProtocolError::ExpectedDollar(c) => {
                write!(f, "Protocol error: expected '$', got '{}'", *c as char)
            }
            ProtocolError::TooBigInline => f.write_str("Protocol error: too big inline request"),
            ProtocolError::TooBigMbulkCount => {
                f.write_str("Protocol error: too big mbulk count string")
            }
            ProtocolError::TooBigBulkCount => {
                f.write_str("Protocol error: too big bulk count string")
            }
            ProtocolError::UnbalancedQuotes => {
                f.write_str("Protocol error: unbalanced quotes in request")
            }
        }
    }
}

impl std::error::Error for ProtocolError {}

pub type Decoded = Vec<Bytes>;

/// Per-connection decoder state: where the scan of a partial multibulk request stopped.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Arguments still expected by the multibulk request in progress (0: none in progress).
    remaining: usize,
    /// Scan position inside the buffer for the request in progress.
    pos: usize,
    ranges: Vec<(usize, usize)>,
    /// Do not look at the buffer again before it holds this many bytes (a large bulk in flight).
    need: usize,
}

impl Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// True while a request has started but is not complete (its bytes are in the buffer).
    pub fn in_progress(&self) -> bool {
        self.remaining > 0
    }

    /// Decodes the next complete request. `Ok(None)`: more bytes are needed. Empty requests
    /// (`*0`, blank inline lines) are consumed silently, as Redis does.
    pub fn decode(
        &mut self,
        buf: &mut BytesMut,
        limits: &DecodeLimits,
    ) -> Result<Option<Decoded>, ProtocolError> {
        loop {
            if buf.len() < self.need || buf.is_empty() {
                return Ok(None);
            }
            self.need = 0;
            let step = if self.remaining > 0 || buf[0] == b'*' {
                self.decode_multibulk(buf, limits)?
            } else {
                decode_inline(buf)?
            };
            match step {
                Step::Incomplete => return Ok(None),
                Step::Skip => continue,
                Step::Done(args) => return Ok(Some(args)),
            }
        }
    }

    fn decode_multibulk(
        &mut self,
        buf: &mut BytesMut,
        limits: &DecodeLimits,
    ) -> Result<Step, ProtocolError> {
        if self.remaining == 0 {
            let Some(eol) = find_crlf(buf, 1) else {
                if buf.len() > INLINE_MAX {
                    return Err(ProtocolError::TooBigMbulkCount);
                }
                return Ok(Step::Incomplete);
            };
            let count = match crate::protocol::number::parse_i64(&buf[1..eol]) {
                Some(n) if n <= MAX_MULTIBULK => n,
                _ => return Err(ProtocolError::InvalidMultibulkLength),
            };
            if count <= 0 {
                let _ = buf.split_to(eol + 2);
                return Ok(Step::Skip);
            }
            self.remaining = count as usize;
            self.pos = eol + 2;
            self.ranges.clear();
            self.ranges.reserve((count as usize).min(1024));
        }
        while self.remaining > 0 {
            if self.pos >= buf.len() {
                self.need = self.pos + 1;
                return Ok(Step::Incomplete);
            }
            if buf[self.pos] != b'$' {
                let got = buf[self.pos];
                self.reset();
                return Err(ProtocolError::ExpectedDollar(got));
            }
            let Some(eol) = find_crlf(buf, self.pos + 1) else {
                if buf.len() - self.pos > INLINE_MAX {
                    self.reset();
                    return Err(ProtocolError::TooBigBulkCount);
                }
                return Ok(Step::Incomplete);
            };
            let len = match crate::protocol::number::parse_i64(&buf[self.pos + 1..eol]) {
                Some(n) if n >= 0 && n <= limits.max_bulk_len => n as usize,
                _ => {
                    self.reset();
                    return Err(ProtocolError::InvalidBulkLength);
                }
            };
            let start = eol + 2;
            let end = start + len;
            // Like Redis, the two bytes after the payload are skipped, not checked.
            if buf.len() < end + 2 {
                self.need = end + 2;
                return Ok(Step::Incomplete);
            }
            self.ranges.push((start, end));
            self.pos = end + 2;
            self.remaining -= 1;
        }
        let frozen = buf.split_to(self.pos).freeze();
        let args = self
            .ranges
            .iter()
            .map(|&(s, e)| frozen.slice(s..e))
            .collect();
        self.reset();
        Ok(Step::Done(args))
    }

    fn reset(&mut self) {
        self.remaining = 0;
        self.pos = 0;
        self.need = 0;
        self.ranges.clear();
    }
}

enum Step {
    Incomplete,
    Skip,
    Done(Decoded),
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let limit = buf.len().min(from.saturating_add(INLINE_MAX + 2));
    if from >= limit {
        return None;
    }
    let mut i = from;
    while let Some(off) = buf[i..limit].iter().position(|&b| b == b'\r') {
        let at = i + off;
        if at + 1 < buf.len() && buf[at + 1] == b'\n' {
            return Some(at);
        }
        if at + 1 >= buf.len() {
            return None;
        }
        i = at + 1;
    }
    None
}

fn decode_inline(buf: &mut BytesMut) -> Result<Step, ProtocolError> {
    let Some(nl) = buf.iter().take(INLINE_MAX + 1).position(|&b| b == b'\n') else {
        if buf.len() > INLINE_MAX {
            return Err(ProtocolError::TooBigInline);
        }
        return Ok(Step::Incomplete);
    };
    let line = buf.split_to(nl + 1);
    let mut text = &line[..nl];
    if text.last() == Some(&b'\r') {
        text = &text[..text.len() - 1];
    }
    let args = split_args(text).ok_or(ProtocolError::UnbalancedQuotes)?;
    if args.is_empty() {
        return Ok(Step::Skip);
    }
    Ok(Step::Done(args.into_iter().map(Bytes::from).collect()))
}

/// Redis's `sdssplitargs`: whitespace-separated words, "double quotes" with C escapes
/// (`\n \r \t \b \a \\ \" \xHH`) and 'single quotes' with `\'`. A closing quote must be followed
/// by a space or the end. `None` for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && is_hex(line[i + 2])
                    && is_hex(line[i + 3])
                {
                    cur.push(hex_val(line[i + 2]) * 16 + hex_val(line[i + 3]));
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }

                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }

                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        out.push(cur);
    }
}

fn is_hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

fn hex_val(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut buf = BytesMut::from(input);
        let mut d = Decoder::new();
        let mut out = Vec::new();
        while let Some(args) = d.decode(&mut buf, &DecodeLimits::default())? {
            out.push(args.iter().map(|a| a.to_vec()).collect());
        }
        Ok(out)
    }

    #[test]
    fn multibulk_and_inline() {
        let got =
            decode_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n\r\n*0\r\nset a \"b c\"\n").unwrap();
        assert_eq!(
            got,
            vec![
                vec![b"GET".to_vec(), b"k".to_vec()],
                vec![b"PING".to_vec()],
                vec![b"set".to_vec(), b"a".to_vec(), b"b c".to_vec()],
            ]
        );
    }

    #[test]
    fn byte_at_a_time_gives_the_same_result() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhe\r\no\r\n*1\r\n$4\r\nPING\r\n";
        let mut buf = BytesMut::new();
        let mut d = Decoder::new();
        let mut out = Vec::new();
        for &b in input.iter() {
            buf.extend_from_slice(&[b]);
            while let Some(args) = d.decode(&mut buf, &DecodeLimits::default()).unwrap() {
                out.push(args);
            }
        }
        assert_eq!(out.len(), 2);
        assert_eq!(&out[0][2][..], b"he\r\no");
        assert!(buf.is_empty());
    }

    #[test]
    fn protocol_errors() {
        assert_eq!(
            decode_all(b"*abc\r\n"),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            decode_all(b"*1\r\n$-1\r\n"),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(
            decode_all(b"*1\r\nfoo\r\n"),
            Err(ProtocolError::ExpectedDollar(b'f'))
        );
        assert_eq!(
            decode_all(b"set a \"b\n"),
            Err(ProtocolError::UnbalancedQuotes)
        );
        assert_eq!(
            decode_all(b"set a \"b\"c\n"),
            Err(ProtocolError::UnbalancedQuotes)
        );
        let limits = DecodeLimits { max_bulk_len: 10 };
        let mut d = Decoder::new();
        let mut buf = BytesMut::from(&b"*1\r\n$11\r\n"[..]);
        assert_eq!(
            d.decode(&mut buf, &limits),
            Err(ProtocolError::InvalidBulkLength)
        );
        let big = vec![b'a'; INLINE_MAX + 10];
        assert_eq!(decode_all(&big), Err(ProtocolError::TooBigInline));
    }

    #[test]
    fn inline_escapes() {
        let args = split_args(br#"a "\x41\n" 'it\'s'"#).unwrap();
        assert_eq!(args, vec![b"a".to_vec(), b"A\n".to_vec(), b"it's".to_vec()]);
    }

    #[test]
    fn random_input_never_panics() {
        let mut rng = fastrand::Rng::with_seed(7);
        let alphabet = b"*$\r\n0123456789-abc \"'\\x";
        for _ in 0..20_000 {
            let len = rng.usize(0..64);
            let input: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.usize(0..alphabet.len())])
                .collect();
            let mut buf = BytesMut::new();
            let mut d = Decoder::new();
            for chunk in input.chunks(rng.usize(1..8)) {
                buf.extend_from_slice(chunk);
                while let Ok(Some(_)) = d.decode(&mut buf, &DecodeLimits { max_bulk_len: 100 }) {}
            }
        }
    }
}
