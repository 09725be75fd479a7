//! Zero-copy request decoding: multibulk (`*N\r\n$len\r\n…`) and inline commands, following
//! Redis 7.0's `processMultibulkBuffer` / `processInlineBuffer` byte for byte.
//!
//! Redis keeps its query buffer NUL-terminated and finds line ends with `strchr`, so a NUL
//! before the line end makes the request look incomplete: the connection waits, and is refused
//! once more than 64 KB are buffered. `strchr_nul` reproduces that, which also means no line
//! handed to `split_args` ever holds a NUL.
//!
//! A multibulk request is scanned once: the argument ranges found so far and the scan position are
//! kept across reads, so a large or slowly arriving request is never rescanned from its start and
//! a declared count or length never decides an allocation. When the request is complete it is
//! split off the buffer with one `split_to().freeze()` and every argument is a `slice()` of it.

use bytes::{Bytes, BytesMut};
use std::fmt;

/// Longest inline request or `*`/`$` length line Redis accepts (PROTO_INLINE_MAX_SIZE).
const INLINE_MAX: usize = 64 * 1024;
/// Redis refuses multibulk counts above INT_MAX.
const MAX_MULTIBULK: i64 = i32::MAX as i64;
/// Before authentication Redis accepts at most this many arguments…
const UNAUTH_MAX_ARGS: i64 = 10;
/// …and bulks of at most this many bytes (networking.c, `authRequired`).
const UNAUTH_MAX_BULK: i64 = 16384;

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

/// Malformed input: the connection answers `-ERR <text>` and closes, as Redis does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    InvalidMultibulkLength,
    InvalidBulkLength,
    ExpectedDollar(u8),
    TooBigInline,
    TooBigMbulkCount,
    TooBigBulkCount,
    UnbalancedQuotes,
    UnauthenticatedMultibulkLength,
    UnauthenticatedBulkLength,
}

impl ProtocolError {
    /// The whole reply line, `-ERR …\r\n`. Bytes rather than text: the `'%c'` of "expected '$'"
    /// is the raw byte Redis saw (CR or LF turned into a space, as `addReplyErrorFormat` does).
    pub fn reply(&self) -> Vec<u8> {
        let mut out = b"-ERR ".to_vec();
        match self {
            ProtocolError::ExpectedDollar(c) => {
                out.extend_from_slice(b"Protocol error: expected '$', got '");
                out.push(if matches!(c, b'\r' | b'\n') { b' ' } else { *c });
                out.push(b'\'');
            }
            other => out.extend_from_slice(other.text().as_bytes()),
        }
        out.extend_from_slice(b"\r\n");
        out
    }

    fn text(&self) -> &'static str {
        match self {
            ProtocolError::InvalidMultibulkLength => "Protocol error: invalid multibulk length",
            ProtocolError::InvalidBulkLength => "Protocol error: invalid bulk length",
            ProtocolError::ExpectedDollar(_) => "Protocol error: expected '$'",
            ProtocolError::TooBigInline => "Protocol error: too big inline request",
            ProtocolError::TooBigMbulkCount => "Protocol error: too big mbulk count string",
            ProtocolError::TooBigBulkCount => "Protocol error: too big bulk count string",
            ProtocolError::UnbalancedQuotes => "Protocol error: unbalanced quotes in request",
            ProtocolError::UnauthenticatedMultibulkLength => {
                "Protocol error: unauthenticated multibulk length"
            }
            ProtocolError::UnauthenticatedBulkLength => {
                "Protocol error: unauthenticated bulk length"
            }
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // For logs: the byte escaped.
            ProtocolError::ExpectedDollar(c) => write!(
                f,
                "Protocol error: expected '$', got '{}'",
                std::ascii::escape_default(*c)
            ),
            other => f.write_str(other.text()),
        }
    }
}

impl std::error::Error for ProtocolError {}

pub type Decoded = Vec<Bytes>;

/// Argument tables a small request may take (`whole_small_request`), and at most how many
/// empty ones this thread keeps for the next requests.
const SPARE_ARGVS: usize = 256;

thread_local! {
    /// Emptied argument tables of `SMALL_ARGS` places: a pipelined request takes one instead of
    /// an allocation, and `recycle` gives it back once the command ran (an allocation
    /// and a free per request: 3 % of the instructions of a pipelined GET, callgrind).
    static SPARE: std::cell::RefCell<Vec<Decoded>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An empty argument table with room for `SMALL_ARGS` arguments.
#[inline]
fn spare_argv() -> Decoded {
    SPARE
        .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.pop()))
        .ok()
        .flatten()
        .unwrap_or_else(|| Vec::with_capacity(SMALL_ARGS))
}

/// Hands a request's argument table back for the next request once its command ran (its
/// arguments are dropped now, as they would be with it).
#[inline]
pub fn recycle(mut argv: Decoded) {
    if argv.capacity() != SMALL_ARGS {
        return;
    }
    argv.clear();
    let _ = SPARE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            if s.len() < SPARE_ARGVS {
                s.push(argv);
            }
        }
    });
}

/// Per-connection decoder state: where the scan of a partial multibulk request stopped.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Arguments still expected by the multibulk request in progress (0: none in progress).
    remaining: usize,
    /// Scan position inside the buffer for the request in progress.
    pos: usize,
    ranges: Vec<(usize, usize)>,
    /// The bulk whose length line was accepted and whose payload is still arriving: (start,
    /// end). Kept so the length is checked once, as Redis keeps `c->bulklen`.
    bulk: Option<(usize, usize)>,
    /// Do not look at the buffer again before it holds this many bytes (a large bulk in flight).
    need: usize,
    /// Redis's `authRequired(c)`: the default user needs a password (or is off) and this client
    /// has not authenticated. Caps requests at 10 arguments of 16 KB.
    auth_required: bool,
}

impl Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Set by the connection before decoding (see `auth_required`).
    pub fn set_auth_required(&mut self, required: bool) {
        self.auth_required = required;
    }

    /// True while a request has started but is not complete (its bytes are in the buffer).
    pub fn in_progress(&self) -> bool {
        self.remaining > 0
    }

    /// While a bulk argument's payload is arriving: how many bytes the buffer must hold for it
    /// to be complete (0 otherwise). The reader sizes its buffer for it once, as Redis does
    /// for big arguments, instead of growing block by block.
    pub fn bulk_end(&self) -> usize {
        if self.bulk.is_some() {
            self.need
        } else {
            0
        }
    }

    /// Memory the request in progress holds besides the buffer (its argument table), for the
    /// query buffer limit: a request of millions of empty arguments costs more here than on
    /// the wire.
    pub fn overhead(&self) -> usize {
        self.ranges.capacity() * std::mem::size_of::<(usize, usize)>()
    }

    /// Decodes the next complete request. `Ok(None)`: more bytes are needed. Empty requests
    /// (`*0`, `*-1`, blank inline lines) are consumed silently, as Redis does.
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
                self.decode_multibulk(buf, limits)
            } else {
                decode_inline(buf)
            };
            match step {
                Ok(Step::Incomplete) => return Ok(None),
                Ok(Step::Skip) => continue,
                Ok(Step::Done(args)) => return Ok(Some(args)),
                Err(e) => {
                    self.reset();
                    return Err(e);
                }
            }
        }
    }

    fn decode_multibulk(
        &mut self,
        buf: &mut BytesMut,
        limits: &DecodeLimits,
    ) -> Result<Step, ProtocolError> {
        if self.remaining == 0 {
            if let Some(args) = whole_small_request(buf, limits, self.auth_required) {
                return Ok(Step::Done(args));
            }
            if let Some((count, eol)) = digits_line(buf, 1) {
                if count > 0
                    && count <= MAX_MULTIBULK
                    && !(count > UNAUTH_MAX_ARGS && self.auth_required)
                {
                    self.remaining = count as usize;
                    self.pos = eol + 2;
                    self.ranges.clear();
                    self.ranges.reserve((count as usize).min(1024));
                    return self.decode_bulks(buf, limits);
                }
            }
            let Some(eol) = strchr_nul(buf, 1, b'\r') else {
                if buf.len() > INLINE_MAX {
                    return Err(ProtocolError::TooBigMbulkCount);
                }
                return Ok(Step::Incomplete);
            };
            // Like Redis, the byte after the CR must have arrived but is not checked.
            if eol + 1 >= buf.len() {
                return Ok(Step::Incomplete);
            }
            let count = match crate::protocol::number::parse_i64(&buf[1..eol]) {
                Some(n) if n <= MAX_MULTIBULK => n,
                _ => return Err(ProtocolError::InvalidMultibulkLength),
            };
            if count > UNAUTH_MAX_ARGS && self.auth_required {
                return Err(ProtocolError::UnauthenticatedMultibulkLength);
            }
            if count <= 0 {
                let _ = buf.split_to(eol + 2);
                return Ok(Step::Skip);
            }
            self.remaining = count as usize;
            self.pos = eol + 2;
            self.ranges.clear();
            // Never from the declared count alone: the table grows with arguments that arrive.
            self.ranges.reserve((count as usize).min(1024));
        }
        self.decode_bulks(buf, limits)
    }

    /// The arguments of the multibulk request in progress, from `pos` on.
    fn decode_bulks(
        &mut self,
        buf: &mut BytesMut,
        limits: &DecodeLimits,
    ) -> Result<Step, ProtocolError> {
        while self.remaining > 0 {
            let (start, end) = match self.bulk {
                Some(b) => b,
                None => {
                    let b = self.bulk_header(buf, limits)?;
                    match b {
                        Some(b) => b,
                        None => return Ok(Step::Incomplete),
                    }
                }
            };
            // Like Redis, the two bytes after the payload are skipped, not checked.
            let after = end.saturating_add(2);
            if buf.len() < after {
                self.bulk = Some((start, end));
                self.need = after;
                return Ok(Step::Incomplete);
            }
            self.bulk = None;
            self.ranges.push((start, end));
            self.pos = after;
            self.remaining -= 1;
        }
        let frozen = buf.split_to(self.pos).freeze();
        let mut args = Vec::with_capacity(self.ranges.len());
        args.extend(self.ranges.iter().map(|&(s, e)| frozen.slice(s..e)));
        self.reset();
        Ok(Step::Done(args))
    }

    /// Reads the `$len` line at `pos`: the payload's range, None if the line is incomplete.
    fn bulk_header(
        &mut self,
        buf: &BytesMut,
        limits: &DecodeLimits,
    ) -> Result<Option<(usize, usize)>, ProtocolError> {
        let pos = self.pos;
        if pos >= buf.len() {
            self.need = pos + 1;
            return Ok(None);
        }
        if buf[pos] == b'$' {
            if let Some((len, eol)) = digits_line(buf, pos + 1) {
                if len <= limits.max_bulk_len && !(len > UNAUTH_MAX_BULK && self.auth_required) {
                    let start = eol + 2;
                    if let Some(end) = usize::try_from(len).ok().and_then(|l| start.checked_add(l))
                    {
                        return Ok(Some((start, end)));
                    }
                }
            }
        }
        let Some(eol) = strchr_nul(buf, pos, b'\r') else {
            if buf.len() - pos > INLINE_MAX {
                return Err(ProtocolError::TooBigBulkCount);
            }
            return Ok(None);
        };
        if eol + 1 >= buf.len() {
            return Ok(None);
        }
        // Checked only once the line is complete, as Redis does.
        if buf[pos] != b'$' {
            return Err(ProtocolError::ExpectedDollar(buf[pos]));
        }
        let len = match crate::protocol::number::parse_i64(&buf[pos + 1..eol]) {
            Some(n) if n >= 0 && n <= limits.max_bulk_len => n,
            _ => return Err(ProtocolError::InvalidBulkLength),
        };
        if len > UNAUTH_MAX_BULK && self.auth_required {
            return Err(ProtocolError::UnauthenticatedBulkLength);
        }
        let start = eol + 2;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| start.checked_add(l))
            .ok_or(ProtocolError::InvalidBulkLength)?;
        Ok(Some((start, end)))
    }

    fn reset(&mut self) {
        self.remaining = 0;
        self.pos = 0;
        self.need = 0;
        self.bulk = None;
        self.ranges.clear();
        if self.ranges.capacity() > 1024 {
            self.ranges = Vec::new();
        }
    }
}

enum Step {
    Incomplete,
    Skip,
    Done(Decoded),
}

/// Arguments a request may have to take `whole_small_request`.
const SMALL_ARGS: usize = 8;

/// The common case of a pipelined client, decoded in one pass with no state: a request of at
/// most `SMALL_ARGS` arguments, all of it already in the buffer, every length line plain digits
/// within the limits. Anything else (incomplete, malformed, larger) is None and goes through
/// the general path, which starts from the same place, so the outcome is the same either way;
/// this only skips the resumable state machine (decoding was ~30 % of the user-space
/// instructions of a pipelined GET or DEL).
#[inline]
fn whole_small_request(
    buf: &mut BytesMut,
    limits: &DecodeLimits,
    auth_required: bool,
) -> Option<Decoded> {
    let (count, eol) = digits_line(buf, 1)?;
    if count < 1 || count as usize > SMALL_ARGS {
        return None;
    }
    let count = count as usize;
    let max_len = if auth_required {
        limits.max_bulk_len.min(UNAUTH_MAX_BULK)
    } else {
        limits.max_bulk_len
    };
    let mut ranges = [(0usize, 0usize); SMALL_ARGS];
    let mut pos = eol + 2;
    for range in ranges.iter_mut().take(count) {
        if *buf.get(pos)? != b'$' {
            return None;
        }
        let (len, eol) = digits_line(buf, pos + 1)?;
        if len > max_len {
            return None;
        }
        let start = eol + 2;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        // The payload and the two bytes after it (skipped unchecked, as Redis does).
        if end.checked_add(2)? > buf.len() {
            return None;
        }
        *range = (start, end);
        pos = end + 2;
    }
    let mut frozen = buf.split_to(pos).freeze();
    let mut args = spare_argv();
    // Every argument but the last is a slice (a reference count each); the last is the request
    // itself, cut down to it: one `slice` fewer (~80 instructions with its clone).
    let (last_start, last_end) = ranges[count - 1];
    args.extend(ranges[..count - 1].iter().map(|&(s, e)| frozen.slice(s..e)));
    frozen.truncate(last_end);
    bytes::Buf::advance(&mut frozen, last_start);
    args.push(frozen);
    Some(args)
}

/// The common shape of a `*N` or `$len` line: from `from`, 1 to 18 decimal digits without a
/// leading zero (or a lone `0`), then CR and at least one more byte. Gives the number and the
/// CR's position, exactly what `strchr_nul` + `parse_i64` give for such a line (a digit is
/// neither CR nor NUL, and 18 digits cannot overflow); None for anything else, which then takes
/// the general path with its errors.
#[inline(always)]
fn digits_line(buf: &[u8], from: usize) -> Option<(i64, usize)> {
    let rest = buf.get(from..)?;
    let mut v: i64 = 0;
    let mut i = 0;
    while i < rest.len() {
        let c = rest[i];
        if c.is_ascii_digit() {
            if i == 18 {
                return None;
            }
            v = v * 10 + (c - b'0') as i64;
            i += 1;
            continue;
        }
        let shape_ok = c == b'\r' && i > 0 && (rest[0] != b'0' || i == 1);
        return (shape_ok && i + 1 < rest.len()).then_some((v, from + i));
    }
    None
}

/// `strchr(buf + from, c)` on Redis's NUL-terminated query buffer: the first `c` at or after
/// `from`, or None when a NUL (or the end of what arrived) comes first.
fn strchr_nul(buf: &[u8], from: usize, c: u8) -> Option<usize> {
    let rest = buf.get(from..)?;
    let at = rest.iter().position(|&b| b == c || b == 0)?;
    (rest[at] == c).then_some(from + at)
}

fn decode_inline(buf: &mut BytesMut) -> Result<Step, ProtocolError> {
    let Some(nl) = strchr_nul(buf, 0, b'\n') else {
        if buf.len() > INLINE_MAX {
            return Err(ProtocolError::TooBigInline);
        }
        return Ok(Step::Incomplete);
    };
    let end = if nl > 0 && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    let args = split_args(&buf[..end]).ok_or(ProtocolError::UnbalancedQuotes)?;
    let _ = buf.split_to(nl + 1);
    if args.is_empty() {
        return Ok(Step::Skip);
    }
    Ok(Step::Done(args.into_iter().map(Bytes::from).collect()))
}

/// C's `isspace` in the "C" locale (Redis never sets LC_CTYPE): unlike
/// `u8::is_ascii_whitespace` it includes the vertical tab.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Redis's `sdssplitargs`, case for case: words separated by C whitespace, "double quotes" with
/// C escapes (`\n \r \t \b \a \xHH`, any other `\c` is `c`) and 'single quotes' with `\'`; a
/// closing quote must be followed by whitespace or the end. The line ends at its first NUL, as
/// the C string does. `None` for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let line = match line.iter().position(|&b| b == 0) {
        Some(n) => &line[..n],
        None => line,
    };
    // The C string's bytes, with the terminating NUL past the end.
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut out = Vec::new();
    let mut p = 0;
    loop {
        while p < line.len() && is_c_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Some(out);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        let mut done = false;
        while !done {
            let c = at(p);
            if in_dq {
                if c == b'\\' && at(p + 1) == b'x' && is_hex(at(p + 2)) && is_hex(at(p + 3)) {
                    cur.push(hex_val(at(p + 2)) * 16 + hex_val(at(p + 3)));
                    p += 3;
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    cur.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(p + 1) != 0 && !is_c_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_c_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    cur.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    _ => cur.push(c),
                }
            }
            // Every step consumes a byte until the end of the string: the loop always ends.
            if c != 0 {
                p += 1;
            }
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

    #[test]
    fn bulk_end_says_where_a_large_argument_ends() {
        let limits = DecodeLimits {
            max_bulk_len: 512 << 20,
        };
        let mut d = Decoder::new();
        let mut buf = BytesMut::from(&b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\nabc"[..]);
        assert_eq!(d.bulk_end(), 0);
        assert!(matches!(d.decode(&mut buf, &limits), Ok(None)));
        let head = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n".len();
        assert_eq!(d.bulk_end(), head + 100_000 + 2);
        buf.extend_from_slice(&vec![b'x'; 100_000 - 3]);
        buf.extend_from_slice(b"\r\n");
        let args = d.decode(&mut buf, &limits).unwrap().unwrap();
        assert_eq!(args[2].len(), 100_000);
        assert_eq!(d.bulk_end(), 0);
    }

    /// The fast line reader agrees with the general one wherever it answers.
    #[test]
    fn digits_line_agrees_with_the_general_path() {
        let lines: &[&[u8]] = &[
            b"*3\r\n",
            b"*0\r\n",
            b"*00\r\n",
            b"*01\r\n",
            b"*-1\r\n",
            b"*+1\r\n",
            b"* 1\r\n",
            b"*1\r",
            b"*1\n",
            b"*\r\n",
            b"*1\x002\r\n",
            b"*123456789012345678\r\n",
            b"*1234567890123456789\r\n",
            b"*99999999999999999999\r\n",
            b"*9223372036854775807\r\n",
            b"$0\r\n",
            b"$36\r\nx",
            b"$3a\r\n",
            b"$1\rx",
        ];
        for line in lines {
            let general = strchr_nul(line, 1, b'\r')
                .filter(|&eol| eol + 1 < line.len())
                .map(|eol| (crate::protocol::number::parse_i64(&line[1..eol]), eol));
            match digits_line(line, 1) {
                Some((v, eol)) => assert_eq!(general, Some((Some(v), eol)), "{line:?}"),
                None => assert!(
                    !matches!(general, Some((Some(v), _)) if v >= 0 && line[1].is_ascii_digit() && line.len() < 22),
                    "{line:?}"
                ),
            }
        }
    }

    /// A request's argument table, handed back, serves a later request: emptied (its
    /// arguments, which pin the read buffer, are gone) and no request sees another's arguments.
    #[test]
    fn recycled_argument_tables_come_back_empty() {
        let mut buf = BytesMut::from(
            &b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"[..],
        );
        let mut d = Decoder::new();
        let limits = DecodeLimits::default();
        let first = d.decode(&mut buf, &limits).unwrap().unwrap();
        assert_eq!(first.capacity(), SMALL_ARGS);
        let table = first.as_ptr();
        let arg = first[1].clone();
        recycle(first);
        let second = d.decode(&mut buf, &limits).unwrap().unwrap();
        assert_eq!(second.as_ptr(), table, "the table was not reused");
        assert_eq!(
            second,
            vec![Bytes::from_static(b"GET"), Bytes::from_static(b"k")]
        );
        assert_eq!(arg, Bytes::from_static(b"k"));
        // A table of another size (a large request's) is not kept.
        recycle(Vec::with_capacity(SMALL_ARGS * 4));
        let third = spare_argv();
        assert!(third.is_empty());
        assert_eq!(third.capacity(), SMALL_ARGS);
    }

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

    /// The one-pass path for whole small requests and the resumable path give the same
    /// requests, errors and leftovers: whole buffers take the first, the same bytes fed one at a
    /// time the second (a request is never whole before its last byte).
    #[test]
    fn whole_requests_decode_as_the_resumable_path_does() {
        let inputs: &[&[u8]] = &[
            b"*2\r\n$3\r\nGET\r\n$16\r\nkey:000000001234\r\n",
            b"*8\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n$1\r\nh\r\n",
            b"*9\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n$1\r\nh\r\n$1\r\ni\r\n",
            b"*1\r\n$0\r\n\r\n*1\r\n$4\r\nPINGxx",
            b"*2\r\n$3\r\nGET\r\n$01\r\nk\r\n",
            b"*2\r\n$3\r\nGET\r\n$-1\r\n",
            b"*2\r\n$3\r\nGET\r\n:1\r\n",
            b"*02\r\n$3\r\nGET\r\n$1\r\nk\r\n",
            b"*1\r\n$999999999999999999\r\nx\r\n",
            b"*1\r\n$3\r\nabc\r\n*1\r\n$3\r\nabc",
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$20000\r\n",
        ];
        let run = |input: &[u8], whole: bool, auth: bool| {
            let mut buf = BytesMut::new();
            let mut d = Decoder::new();
            d.set_auth_required(auth);
            let mut out: Vec<Result<Vec<Vec<u8>>, ProtocolError>> = Vec::new();
            let chunks: Vec<&[u8]> = if whole {
                vec![input]
            } else {
                input.chunks(1).collect()
            };
            'feed: for chunk in chunks {
                buf.extend_from_slice(chunk);
                loop {
                    match d.decode(&mut buf, &DecodeLimits::default()) {
                        Ok(Some(args)) => out.push(Ok(args.iter().map(|a| a.to_vec()).collect())),
                        Ok(None) => break,
                        Err(e) => {
                            out.push(Err(e));
                            break 'feed;
                        }
                    }
                }
            }
            // After an error the connection closes: what is left unread then does not matter.
            let rest = if out.iter().any(|r| r.is_err()) {
                Vec::new()
            } else {
                buf.to_vec()
            };
            (out, rest)
        };
        for input in inputs {
            for auth in [false, true] {
                assert_eq!(
                    run(input, true, auth),
                    run(input, false, auth),
                    "{:?} auth={auth}",
                    String::from_utf8_lossy(input)
                );
            }
        }
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

    /// The decoder's outcome after all of `input` arrived: requests, then the error if any.
    fn outcome(input: &[u8]) -> (Vec<Vec<Vec<u8>>>, Option<ProtocolError>, usize) {
        let mut buf = BytesMut::from(input);
        let mut d = Decoder::new();
        let mut out = Vec::new();
        loop {
            match d.decode(&mut buf, &DecodeLimits::default()) {
                Ok(Some(args)) => out.push(args.iter().map(|a| a.to_vec()).collect()),
                Ok(None) => return (out, None, buf.len()),
                Err(e) => return (out, Some(e), buf.len()),
            }
        }
    }

    #[test]
    fn nul_before_the_line_end_waits_like_strchr() {
        // The request looks incomplete: nothing decoded, nothing consumed, no loop.
        for input in [
            &b"\x00\r\n"[..],
            b"GET k\x00\r\n",
            b"*1\x00\r\n$4\r\nPING\r\n",
            b"*1\r\n$4\x00\r\nPING\r\n",
            b"*1\r\n\x00\r\n",
        ] {
            let (reqs, err, left) = outcome(input);
            assert!(reqs.is_empty() && err.is_none(), "{input:?}");
            assert_eq!(left, input.len());
        }
        // Requests before the NUL are served.
        let (reqs, err, _) = outcome(b"PING\r\nGET k\x00\r\n");
        assert_eq!(reqs, vec![vec![b"PING".to_vec()]]);
        assert!(err.is_none());
        // More than 64 KB behind the NUL: refused, as Redis does.
        let mut big = b"GET k\x00\r\n".to_vec();
        big.resize(INLINE_MAX + 1, b'a');
        assert_eq!(outcome(&big).1, Some(ProtocolError::TooBigInline));
        let mut big = b"*1\x00".to_vec();
        big.resize(INLINE_MAX + 1, b'a');
        assert_eq!(outcome(&big).1, Some(ProtocolError::TooBigMbulkCount));
        let mut big = b"*1\r\n$\x00".to_vec();
        big.resize(INLINE_MAX + 10, b'a');
        assert_eq!(outcome(&big).1, Some(ProtocolError::TooBigBulkCount));
        // A NUL inside a bulk payload is data.
        let (reqs, _, _) = outcome(b"*2\r\n$3\r\nGET\r\n$3\r\na\x00b\r\n");
        assert_eq!(reqs, vec![vec![b"GET".to_vec(), b"a\x00b".to_vec()]]);
    }

    #[test]
    fn multibulk_follows_redis() {
        // Only the CR is looked for; the byte after it is skipped unchecked.
        let (reqs, err, _) = outcome(b"*1\rX$4\rYPING\r\n");
        assert_eq!(reqs, vec![vec![b"PING".to_vec()]]);
        assert!(err.is_none());
        assert_eq!(
            outcome(b"*1\r\r\n$4\r\nPING\r\n").1,
            Some(ProtocolError::ExpectedDollar(b'\n'))
        );
        // The '$' is checked once the line is complete.
        assert_eq!(outcome(b"*1\r\nfoo").1, None);
        assert_eq!(outcome(b"*1\r\nfoo\r").1, None);
        assert_eq!(
            outcome(b"*1\r\nfoo\r\n").1,
            Some(ProtocolError::ExpectedDollar(b'f'))
        );
        for bad in [
            &b"*\r\n"[..],
            b"*+1\r\n",
            b"*01\r\n",
            b"* 1\r\n",
            b"*2147483648\r\n",
            b"*99999999999999999999\r\n",
            b"*1a\r\n",
        ] {
            assert_eq!(
                outcome(bad).1,
                Some(ProtocolError::InvalidMultibulkLength),
                "{bad:?}"
            );
        }
        for bad in [
            &b"*1\r\n$-1\r\n"[..],
            b"*1\r\n$\r\n",
            b"*1\r\n$+1\r\n",
            b"*1\r\n$9223372036854775808\r\n",
            b"*1\r\n$536870913\r\n",
        ] {
            assert_eq!(
                outcome(bad).1,
                Some(ProtocolError::InvalidBulkLength),
                "{bad:?}"
            );
        }
        // Empty and negative counts are skipped.
        let (reqs, err, left) = outcome(b"*0\r\n*-1\r\n*-9223372036854775808\r\nPING\r\n");
        assert_eq!(reqs, vec![vec![b"PING".to_vec()]]);
        assert!(err.is_none() && left == 0);
        // A huge declared count allocates nothing up front.
        let mut buf = BytesMut::from(&b"*2147483647\r\n$1\r\na\r\n"[..]);
        let mut d = Decoder::new();
        assert_eq!(d.decode(&mut buf, &DecodeLimits::default()), Ok(None));
        assert!(d.overhead() <= 1024 * 16);
    }

    #[test]
    fn unauthenticated_limits() {
        let limits = DecodeLimits::default();
        let mut d = Decoder::new();
        d.set_auth_required(true);
        let mut buf = BytesMut::from(&b"*11\r\n"[..]);
        assert_eq!(
            d.decode(&mut buf, &limits),
            Err(ProtocolError::UnauthenticatedMultibulkLength)
        );
        let mut buf = BytesMut::from(&b"*10\r\n$16385\r\n"[..]);
        assert_eq!(
            d.decode(&mut buf, &limits),
            Err(ProtocolError::UnauthenticatedBulkLength)
        );
        // Invalid lengths are reported first, as in Redis.
        let mut buf = BytesMut::from(&b"*1\r\n$-5\r\n"[..]);
        assert_eq!(
            d.decode(&mut buf, &limits),
            Err(ProtocolError::InvalidBulkLength)
        );
        let mut buf = BytesMut::from(&b"*10\r\n$16384\r\n"[..]);
        assert_eq!(d.decode(&mut buf, &limits), Ok(None));
    }

    #[test]
    fn split_args_matches_sdssplitargs() {
        let ok = |line: &[u8], want: &[&[u8]]| {
            let got = split_args(line).unwrap_or_else(|| panic!("{line:?}"));
            let want: Vec<Vec<u8>> = want.iter().map(|w| w.to_vec()).collect();
            assert_eq!(got, want, "{line:?}");
        };
        ok(b"", &[]);
        ok(b"   \t ", &[]);
        ok(b"\x00set a b", &[]);
        ok(b"get k\x00junk", &[b"get", b"k"]);
        ok(b"\x0bget\x0ck", &[b"get\x0ck"]);
        ok(b"a\x0bb", &[b"a\x0bb"]);
        ok(b"\"\" ''", &[b"", b""]);
        ok(b"ab\"c d\"", &[b"abc d"]);
        ok(b"\"\\x4a\\x4\\xZZ\"", &[b"Jx4xZZ"]);
        ok(b"\"\\q\\\"\\\\\"", &[b"q\"\\"]);
        ok(b"'a\\b\\'c'", &[b"a\\b'c"]);
        ok(b"\"a\"\x0bb", &[b"a", b"b"]);
        ok(b"a\rb", &[b"a", b"b"]);
        for bad in [
            &b"\"abc"[..],
            b"'abc",
            b"\"a\"b",
            b"'a'b",
            b"\"abc\\",
            b"\"\\\"",
            b"\"ab\x00c\"",
        ] {
            assert_eq!(split_args(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn random_input_never_panics() {
        let mut rng = fastrand::Rng::with_seed(7);
        let alphabet = b"*$\r\n0123456789-abc \"'\\x\x00\x0b";
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
