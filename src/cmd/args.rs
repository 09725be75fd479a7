//! Typed access to a command's arguments, each getter failing with the Redis error for it.

use crate::error::CmdError;
use crate::protocol::number::{parse_f64, parse_i64};
use bytes::Bytes;

pub struct Args<'a> {
    argv: &'a [Bytes],
    pos: usize,
}

impl<'a> Args<'a> {
    /// A cursor positioned after the command name.
    pub fn new(argv: &'a [Bytes]) -> Self {
        Args { argv, pos: 1 }
    }

    pub fn all(&self) -> &'a [Bytes] {
        self.argv
    }

    pub fn remaining(&self) -> usize {
        self.argv.len().saturating_sub(self.pos)
    }

    pub fn has_more(&self) -> bool {
        self.pos < self.argv.len()
    }

    pub fn next_arg(&mut self) -> Option<&'a Bytes> {
        let a = self.argv.get(self.pos)?;
        self.pos += 1;
        Some(a)
    }

    /// The next argument; a missing one is a syntax error (arity was checked before).
    pub fn bytes(&mut self) -> Result<&'a Bytes, CmdError> {
        self.next_arg().ok_or(CmdError::Syntax)
    }

    pub fn int(&mut self) -> Result<i64, CmdError> {
        int_arg(self.bytes()?)
    }

    pub fn float(&mut self) -> Result<f64, CmdError> {
        float_arg(self.bytes()?)
    }

    pub fn rest(&mut self) -> &'a [Bytes] {
        let r = &self.argv[self.pos.min(self.argv.len())..];
        self.pos = self.argv.len();
        r
    }
}

pub fn int_arg(b: &[u8]) -> Result<i64, CmdError> {
    parse_i64(b).ok_or(CmdError::NotInteger)
}

pub fn float_arg(b: &[u8]) -> Result<f64, CmdError> {
    parse_f64(b).ok_or(CmdError::NotFloat)
}

/// Redis's start/end index rule (LRANGE, ZRANGE by rank, ...): negative counts from the end,
/// clamped to the length; None for an empty range.
pub fn clamp_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    if end >= len {
        end = len - 1;
    }
    Some((start as usize, end as usize))
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
#[inline]
pub fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// Redis's `stringmatchlen`: glob matching with `*`, `?`, `[...]` (ranges, `^` negation) and `\`
/// escapes, optionally case-insensitive.
pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    glob_inner(pattern, string, nocase, 0)
}

fn glob_inner(mut p: &[u8], mut s: &[u8], nocase: bool, depth: usize) -> bool {
    // Redis bounds recursion too; a pathological pattern must not blow the stack.
    if depth > 1000 {
        return false;
    }
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    while !p.is_empty() && !s.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if glob_inner(&p[1..], s, nocase, depth + 1) {
                        return true;
                    }
                    s = &s[1..];
                }
                return false;
            }
            b'?' => {
                s = &s[1..];
            }
            b'[' => {
                p = &p[1..];
                let not = !p.is_empty() && p[0] == b'^';
                if not {
                    p = &p[1..];
                }
                let mut matched = false;
                loop {
                    if p.is_empty() {
                        break;
                    }
                    if p[0] == b'\\' && p.len() >= 2 {
                        p = &p[1..];
                        if eq(p[0], s[0]) {
                            matched = true;
                        }
                    } else if p[0] == b']' {
                        break;
                    } else if p.len() >= 3 && p[1] == b'-' {
                        let (mut start, mut end) = (p[0], p[2]);
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        let mut c = s[0];
                        if nocase {
                            start = start.to_ascii_lowercase();
                            end = end.to_ascii_lowercase();
                            c = c.to_ascii_lowercase();
                        }
                        p = &p[2..];
                        if c >= start && c <= end {
                            matched = true;
                        }
                    } else if eq(p[0], s[0]) {
                        matched = true;
                    }
                    p = &p[1..];
                }
                let matched = if not { !matched } else { matched };
                if !matched {
                    return false;
                }
                s = &s[1..];
                if p.is_empty() {
                    // Unterminated class: Redis treats the end of pattern as the end of the class.
                    return s.is_empty();
                }
            }
            b'\\' if p.len() >= 2 => {
                p = &p[1..];
                if !eq(p[0], s[0]) {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                if !eq(c, s[0]) {
                    return false;
                }
                s = &s[1..];
            }
        }
        p = &p[1..];
        if s.is_empty() {
            while !p.is_empty() && p[0] == b'*' {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn ranges_like_redis() {
        use super::clamp_range;
        assert_eq!(clamp_range(0, -1, 3), Some((0, 2)));
        assert_eq!(clamp_range(-100, 100, 3), Some((0, 2)));
        assert_eq!(clamp_range(2, 1, 3), None);
        assert_eq!(clamp_range(5, 10, 3), None);
        assert_eq!(clamp_range(0, 0, 0), None);
    }

    #[test]
    fn glob() {
        assert!(glob_match(b"*", b"anything", false));
        assert!(glob_match(b"lock:*", b"lock:a", false));
        assert!(!glob_match(b"lock:*", b"lack:a", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"a\\*b", b"a*b", false));
        assert!(glob_match(b"*b", b"b", false));
        assert!(glob_match(b"a*", b"a", false));
        assert!(!glob_match(b"a?", b"a", false));
        assert!(glob_match(b"HELLO", b"hello", true));
        assert!(!glob_match(b"", b"a", false));
        assert!(glob_match(b"", b"", false));
    }
}
