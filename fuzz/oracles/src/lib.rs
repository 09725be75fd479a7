//! Reference implementations that are slow but follow Redis's C code line by line, kept as
//! oracles for deadbolt's own versions: the fuzz targets in `fuzz/` and deadbolt's unit tests
//! (a dev-dependency) compare against them. Not part of the daemon.

// ---------------------------------------------------------------------------------------------
// Reference: sdssplitargs (sds.c)

/// C's `isspace` in the C locale.
fn c_isspace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Redis 7.0's `sdssplitargs`, as the inline protocol and the config file use it. The C code
/// walks a NUL-terminated string, so it stops at the first NUL byte: the port truncates there
/// and reads 0 past the end, as the C code reads the terminator.
pub fn redis_split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let line = match line.iter().position(|&b| b == 0) {
        Some(nul) => &line[..nul],
        None => line,
    };
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let is_hex = |c: u8| c.is_ascii_hexdigit();
    let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
    let mut p = 0usize;
    let mut out = Vec::new();
    loop {
        while at(p) != 0 && c_isspace(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Some(out);
        }
        let (mut inq, mut insq, mut done) = (false, false, false);
        let mut cur = Vec::new();
        while !done {
            let c = at(p);
            if inq {
                if c == b'\\' && at(p + 1) == b'x' && is_hex(at(p + 2)) && is_hex(at(p + 3)) {
                    cur.push(hex(at(p + 2)) * 16 + hex(at(p + 3)));
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
                    if at(p + 1) != 0 && !c_isspace(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    cur.push(c);
                }
            } else if insq {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !c_isspace(at(p + 1)) {
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
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    other => cur.push(other),
                }
            }
            if at(p) != 0 {
                p += 1;
            }
        }
        out.push(cur);
    }
}

// ---------------------------------------------------------------------------------------------
// Reference: stringmatchlen (util.c)

/// Redis 7.0's `stringmatchlen`, memoised on (pattern offset, string offset) so it runs in
/// polynomial time. The C recursion is a pure function of the two suffixes (its
/// `skipLongerMatches` flag only prunes work whose answer is already known), so memoising does
/// not change an answer. C details kept: reads past the pattern's end see the NUL terminator,
/// `[a-z]` ranges compare `char`s, which are signed on the platforms Redis ships for, and
/// `tolower` leaves bytes above 0x7f alone.
pub fn redis_glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    let mut memo = vec![None; (pattern.len() + 1) * (string.len() + 1)];
    glob_ref(pattern, string, nocase, 0, 0, &mut memo)
}

fn glob_ref(
    pat: &[u8],
    s: &[u8],
    nocase: bool,
    p0: usize,
    s0: usize,
    memo: &mut Vec<Option<bool>>,
) -> bool {
    let slot = p0 * (s.len() + 1) + s0;
    if let Some(r) = memo[slot] {
        return r;
    }
    let r = glob_ref_uncached(pat, s, nocase, p0, s0, memo);
    memo[slot] = Some(r);
    r
}

fn glob_ref_uncached(
    pat: &[u8],
    s: &[u8],
    nocase: bool,
    mut p: usize,
    mut si: usize,
    memo: &mut Vec<Option<bool>>,
) -> bool {
    let pc = |i: usize| pat.get(i).copied().unwrap_or(0);
    let lower = |c: u8| c.to_ascii_lowercase();
    let signed = |c: u8| c as i8 as i32;
    let mut plen = pat.len() - p;
    let mut slen = s.len() - si;
    while plen > 0 && slen > 0 {
        match pc(p) {
            b'*' => {
                while plen > 0 && pc(p + 1) == b'*' {
                    p += 1;
                    plen -= 1;
                }
                if plen == 1 {
                    return true;
                }
                while slen > 0 {
                    if glob_ref(pat, s, nocase, p + 1, si, memo) {
                        return true;
                    }
                    si += 1;
                    slen -= 1;
                }
                return false;
            }
            b'?' => {
                si += 1;
                slen -= 1;
            }
            b'[' => {
                p += 1;
                plen -= 1;
                let not = pc(p) == b'^';
                if not {
                    p += 1;
                    plen -= 1;
                }
                let mut matched = false;
                let c = s[si];
                loop {
                    if pc(p) == b'\\' && plen >= 2 {
                        p += 1;
                        plen -= 1;
                        if pc(p) == c {
                            matched = true;
                        }
                    } else if pc(p) == b']' {
                        break;
                    } else if plen == 0 {
                        p -= 1;
                        plen += 1;
                        break;
                    } else if plen >= 3 && pc(p + 1) == b'-' {
                        let (mut start, mut end, mut ch) =
                            (signed(pc(p)), signed(pc(p + 2)), signed(c));
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        if nocase {
                            let low = |v: i32| {
                                if (b'A' as i32..=b'Z' as i32).contains(&v) {
                                    v + 32
                                } else {
                                    v
                                }
                            };
                            start = low(start);
                            end = low(end);
                            ch = low(ch);
                        }
                        p += 2;
                        plen -= 2;
                        if ch >= start && ch <= end {
                            matched = true;
                        }
                    } else if !nocase {
                        if pc(p) == c {
                            matched = true;
                        }
                    } else if lower(pc(p)) == lower(c) {
                        matched = true;
                    }
                    p += 1;
                    plen -= 1;
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                si += 1;
                slen -= 1;
            }
            other => {
                let mut lit = other;
                if other == b'\\' && plen >= 2 {
                    p += 1;
                    plen -= 1;
                    lit = pc(p);
                }
                let equal = if nocase {
                    lower(lit) == lower(s[si])
                } else {
                    lit == s[si]
                };
                if !equal {
                    return false;
                }
                si += 1;
                slen -= 1;
            }
        }
        p += 1;
        plen -= 1;
        if slen == 0 {
            while pc(p) == b'*' {
                p += 1;
                plen = plen.wrapping_sub(1);
            }
            break;
        }
    }
    plen == 0 && slen == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_args_reference_follows_sds() {
        assert_eq!(
            redis_split_args(b"set a \"b c\" 'd\\'e'"),
            Some(vec![
                b"set".to_vec(),
                b"a".to_vec(),
                b"b c".to_vec(),
                b"d'e".to_vec()
            ])
        );
        // The C string ends at the NUL.
        assert_eq!(
            redis_split_args(b"GET k\x00 more"),
            Some(vec![b"GET".to_vec(), b"k".to_vec()])
        );
        assert_eq!(redis_split_args(b"\x00"), Some(vec![]));
        assert_eq!(redis_split_args(b"a\x0bb"), Some(vec![b"a\x0bb".to_vec()]));
        assert_eq!(
            redis_split_args(b"\x0ba b"),
            Some(vec![b"a".to_vec(), b"b".to_vec()])
        );
        assert_eq!(redis_split_args(b"\"a\"b"), None);
        assert_eq!(
            redis_split_args(b"\"\\x41\\n\""),
            Some(vec![b"A\n".to_vec()])
        );
        assert_eq!(redis_split_args(b"'abc"), None);
    }

    #[test]
    fn glob_reference_follows_stringmatchlen() {
        let m = |p: &str, s: &str| redis_glob_match(p.as_bytes(), s.as_bytes(), false);
        assert!(m("*", "anything"));
        assert!(m("a*", "a"));
        assert!(m("a*b", "ab"));
        assert!(!m("a*b", "a"));
        assert!(m("h?llo", "hello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("h[b-a]llo", "hbllo"));
        assert!(m("\\*", "*"));
        assert!(m("[abc", "a"));
        assert!(!m("", "a"));
        assert!(m("", ""));
        assert!(!m("a", ""));
        assert!(m("a**", "a"));
        assert!(redis_glob_match(b"HELLO", b"hello", true));
        let long = "a*".repeat(20);
        assert!(m(&long, &"a".repeat(40)));
        assert!(!m(&format!("{long}b"), &"a".repeat(40)));
    }
}
