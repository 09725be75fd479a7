//! Redis's glob patterns (KEYS, SCAN MATCH, PSUBSCRIBE, CONFIG GET, ACL key patterns): one
//! matcher for every layer that needs it (its tests: cmd/args.rs).

/// Redis's `stringmatchlen`: glob matching with `*`, `?`, `[...]` (ranges, `^` negation) and `\`
/// escapes, optionally case-insensitive, with exactly Redis 7.0's answers (quirks included: an
/// unterminated `[` runs to the end of the pattern, `[a-]` is a range up to `]`, a `\` escape
/// inside brackets compares case-sensitively, range bounds compare as C's signed `char`, and an
/// empty string matches only the empty pattern).
///
/// Redis recurses at every `*`; even with its CVE-2022-36021 cut-off a client-chosen pattern costs
/// far more than linear. Every token other than `*` consumes exactly one byte, so the classic
/// single-backtrack-point algorithm is exact here: on a mismatch only the most recent `*` needs to
/// absorb one more byte, because any earlier `*` taking more would leave the same tail to match a
/// suffix the later `*` already tried. Cost is O(len(pattern) * len(string)), no recursion, no
/// allocation.
pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    let (p, s) = (pattern, string);
    if s.is_empty() {
        // Redis's loop never runs on an empty string, so even `*` does not match it.
        return p.is_empty();
    }
    let (mut pi, mut si) = (0usize, 0usize);
    // The most recent `*`: pattern index just past it, and the string index it resumes from.
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && p[pi] == b'*' {
            while pi < p.len() && p[pi] == b'*' {
                pi += 1;
            }
            if pi == p.len() {
                return true;
            }
            star = Some((pi, si));
            continue;
        }
        if pi < p.len() {
            let (next, ok) = glob_token(p, pi, s[si], nocase);
            if ok {
                pi = next;
                si += 1;
                continue;
            }
        }
        match star {
            Some((sp, ss)) => {
                // The tail after the star must consume at least one byte, so it cannot start at
                // the end of the string.
                if ss + 1 >= s.len() {
                    return false;
                }
                star = Some((sp, ss + 1));
                pi = sp;
                si = ss + 1;
            }
            None => return false,
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// Matches byte `c` against the single-byte token at `p[pi]` (anything but `*`); returns the index
/// after the token and whether it matched. Where the token ends never depends on `c`, which is
/// what makes single-point backtracking exact.
fn glob_token(p: &[u8], pi: usize, c: u8, nocase: bool) -> (usize, bool) {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    match p[pi] {
        b'?' => (pi + 1, true),
        b'[' => {
            let mut i = pi + 1;
            let not = i < p.len() && p[i] == b'^';
            if not {
                i += 1;
            }
            let mut matched = false;
            loop {
                let rest = p.len() - i;
                if rest >= 2 && p[i] == b'\\' {
                    i += 1;
                    // Redis compares an escaped class member exactly, even under NOCASE.
                    if p[i] == c {
                        matched = true;
                    }
                } else if rest == 0 {
                    // Unterminated class: the token runs to the end of the pattern.
                    return (p.len(), matched != not);
                } else if p[i] == b']' {
                    break;
                } else if rest >= 3 && p[i + 1] == b'-' {
                    // C's `char` is signed on the platforms Redis ships for, so bytes >= 0x80
                    // sort below ASCII in a range.
                    let (mut start, mut end) = (p[i] as i8 as i32, p[i + 2] as i8 as i32);
                    if start > end {
                        std::mem::swap(&mut start, &mut end);
                    }
                    let mut ch = c as i8 as i32;
                    if nocase {
                        start = c_tolower(start);
                        end = c_tolower(end);
                        ch = c_tolower(ch);
                    }
                    i += 2;
                    if ch >= start && ch <= end {
                        matched = true;
                    }
                } else if eq(p[i], c) {
                    matched = true;
                }
                i += 1;
            }
            (i + 1, matched != not)
        }
        b'\\' if p.len() - pi >= 2 => (pi + 2, eq(p[pi + 1], c)),
        lit => (pi + 1, eq(lit, c)),
    }
}

/// `tolower` in the C locale (Redis never sets LC_CTYPE): ASCII only, other values unchanged.
fn c_tolower(v: i32) -> i32 {
    if (b'A' as i32..=b'Z' as i32).contains(&v) {
        v + 32
    } else {
        v
    }
}
