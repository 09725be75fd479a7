//! Argument parsers shared by the handlers, each failing with the Redis error for its argument.

use crate::error::CmdError;
use crate::protocol::number::{parse_f64, parse_i64};

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

/// Largest negative SRANDMEMBER/ZRANDMEMBER/HRANDFIELD count answered. Redis 7.0.15 builds a
/// reply of any size (2^31 picks: tens of GB). Each pick costs us a reply frame (two with
/// scores) before a byte is sent, and the executor serves no one else meanwhile: a 64M bound
/// measured 5.8 GB of RSS and a 90 s stall for one `ZRANDMEMBER z -67108864` (debug build).
/// 1M picks is a reply of tens of MB; beyond it we answer "value is out of range", the error
/// Redis gives for the counts it does refuse.
pub const MAX_RANDOM_REPEATS: usize = 1 << 20;

/// Case-insensitive comparison of an argument with an ASCII keyword.
#[inline]
pub fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

pub use crate::glob::glob_match;

#[cfg(test)]
mod tests {
    use super::glob_match;
    // Redis 7.0.15's `stringmatchlen` (util.c), the oracle the fuzz targets use too.
    use deadbolt_oracles::redis_glob_match as redis_match;

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

    /// Bytes that exercise every branch: the metacharacters, letters of both cases around the
    /// range bounds, NUL and high bytes (signed in Redis's ranges).
    const ALPHABET: &[u8] = b"*?[]^-\\aAbBzZ_\x00\x7f\x80\xff";

    fn random_bytes(rng: &mut fastrand::Rng, alphabet: &[u8], max: usize) -> Vec<u8> {
        let n = rng.usize(0..=max);
        (0..n)
            .map(|_| alphabet[rng.usize(0..alphabet.len())])
            .collect()
    }

    /// A pattern derived from `string` so that about half the pairs match, with random noise
    /// so that the other half fail in interesting places.
    fn pattern_from(rng: &mut fastrand::Rng, string: &[u8]) -> Vec<u8> {
        let mut p = Vec::new();
        for &b in string {
            match rng.u8(0..10) {
                0 => p.push(b'?'),
                1 => p.push(b'*'),
                2 => p.extend_from_slice(&[b'[', b, b']']),
                3 => {
                    p.extend_from_slice(&[b'[', b'^', ALPHABET[rng.usize(0..ALPHABET.len())], b']'])
                }
                4 => p.extend_from_slice(&[b'\\', b]),
                5 => p.extend_from_slice(&[
                    b'[',
                    b'a',
                    b'-',
                    ALPHABET[rng.usize(0..ALPHABET.len())],
                    b']',
                ]),
                6 => p.push(ALPHABET[rng.usize(0..ALPHABET.len())]),
                _ => p.push(b),
            }
            if rng.u8(0..8) == 0 {
                p.push(b'*');
            }
        }
        p
    }

    #[test]
    fn glob_matches_redis_on_random_inputs() {
        let mut rng = fastrand::Rng::with_seed(0x5eed_0015);
        let text = b"aAbBzZ_-]^\\\x00\x7f\x80\xff";
        let mut hits = 0usize;
        for round in 0..400_000 {
            let string = random_bytes(&mut rng, text, 8);
            let pattern = if round % 4 < 2 {
                random_bytes(&mut rng, ALPHABET, 10)
            } else {
                pattern_from(&mut rng, &string)
            };
            let nocase = round % 2 == 1;
            let want = redis_match(&pattern, &string, nocase);
            hits += want as usize;
            assert_eq!(
                glob_match(&pattern, &string, nocase),
                want,
                "pattern {:?} string {:?} nocase {nocase}",
                String::from_utf8_lossy(&pattern),
                String::from_utf8_lossy(&string)
            );
        }
        // The generator must produce matches too, or the comparison proves little.
        assert!(hits > 60_000, "only {hits} matches");
    }

    #[test]
    fn glob_quirks_like_redis() {
        let cases: &[(&[u8], &[u8], bool)] = &[
            (b"*", b"", false),
            (b"[", b"a", false),
            (b"[^", b"a", false),
            (b"[abc", b"b", false),
            (b"[z-a]", b"m", false),
            (b"[a-]", b"]", false),
            (b"[a-]x]", b"bx", false),
            (b"a\\", b"a\\", false),
            (b"[\\]]", b"]", false),
            (b"[\\A]", b"a", true),
            (b"[A-z]", b"_", true),
            (b"[A-z]", b"_", false),
            (b"[a-\xff]", b"A", false),
            (b"[a-\xff]", b"\x80", false),
            (b"a*", b"a", false),
            (b"a**", b"a", false),
            (b"?*?", b"a", false),
        ];
        for (p, s, nocase) in cases {
            assert_eq!(
                glob_match(p, s, *nocase),
                redis_match(p, s, *nocase),
                "{p:?} {s:?}"
            );
        }
        assert!(!glob_match(b"*", b"", false));
        assert!(glob_match(b"[a-]", b"]", false));
        assert!(glob_match(b"[a-\xff]", b"A", false));
        assert!(!glob_match(b"[a-\xff]", b"b", false));
        assert!(!glob_match(b"[\\A]", b"a", true));
    }

    #[test]
    fn pathological_globs_are_fast() {
        let start = std::time::Instant::now();
        let key = [b'a'; 40];
        let mut almost = key.to_vec();
        almost.push(b'b');
        for stars in [10usize, 20, 100, 1000] {
            let mut p = b"a*".repeat(stars);
            p.push(b'b');
            assert!(!glob_match(&p, &key, false));
            assert!(glob_match(&p, &almost, false) == (stars <= 40));
        }
        let long = vec![b'a'; 100_000];
        let mut p = b"*a".repeat(500);
        p.extend_from_slice(b"*b");
        assert!(!glob_match(&p, &long, false));
        assert!(
            start.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
    }
}
