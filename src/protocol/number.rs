//! Number parsing and printing with the exact rules Redis applies (string2ll, %.17g, ...).

/// Redis's `string2ll`: optional '-', no '+', no leading zeros, no spaces, fits in i64.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = if s[0] == b'-' {
        (true, &s[1..])
    } else {
        (false, s)
    };
    if digits.is_empty() || digits[0] == b'0' {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > (i64::MAX as u64) + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

/// Redis's `string2ld`/`strtod` acceptance for float arguments: no spaces, not empty, not NaN.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s.len() > 5120 {
        return None;
    }
    if s[0].is_ascii_whitespace() || s[s.len() - 1].is_ascii_whitespace() {
        return None;
    }
    let text = std::str::from_utf8(s).ok()?;
    let lower = text.to_ascii_lowercase();
    let v = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => {
            // Rust accepts "nan"/"inf" spellings handled above; reject anything strtod would not.
            if lower.contains("nan") || lower.contains("inf") {
                return None;
            }
            if lower.starts_with("0x") || lower.starts_with("-0x") || lower.starts_with("+0x") {
                return parse_hex_float(&lower);
            }
            lower.parse::<f64>().ok()?
        }
    };
    if v.is_nan() {
        None
    } else {
        Some(v)
    }
}

fn parse_hex_float(s: &str) -> Option<f64> {
    let (neg, rest) = match s.as_bytes()[0] {
        b'-' => (true, &s[3..]),
        b'+' => (false, &s[3..]),
        _ => (false, &s[2..]),
    };
    if rest.is_empty() || rest.contains(['p', '.']) {
        return None;
    }
    let v = u64::from_str_radix(rest, 16).ok()? as f64;
    Some(if neg { -v } else { v })
}

/// C's `printf("%.17g", v)`, which Redis 7.0 uses for doubles in replies and Lua arguments.
pub fn fmt_g17(v: f64) -> String {
    fmt_g(v, 17)
}

/// C's `%.<prec>g`.
pub fn fmt_g(v: f64, prec: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf".into() } else { "inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let prec = prec.max(1);
    let sci = format!("{:.*e}", prec - 1, v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= prec as i32 {
        let mantissa = strip_fraction_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", mantissa, sign, exp.abs())
    } else {
        let decimals = (prec as i32 - 1 - exp).max(0) as usize;
        let fixed = format!("{:.*}", decimals, v);
        strip_fraction_zeros(&fixed).to_string()
    }
}

fn strip_fraction_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Redis's `MAX_LONG_DOUBLE_CHARS`: the longest long double text Redis parses (exclusive) or
/// prints.
pub const MAX_LONG_DOUBLE_CHARS: usize = 5 * 1024;

/// A C `long double` (x86-64: 80-bit extended precision), held in the 16 bytes of storage it
/// occupies. Redis computes INCRBYFLOAT and HINCRBYFLOAT in long double, which decides both the
/// printed text (`1000.7 + 0.9` prints `1001.59999999999999998`) and which sums overflow
/// (`1e308 + 1e308` is finite). Rust has no such type, so src/long_double.c does the parsing,
/// the addition and the printing; only these bytes cross the boundary.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub struct LongDouble([u8; 16]);

extern "C" {
    fn deadbolt_ld_parse(s: *const std::ffi::c_char, len: usize, out: *mut u8) -> std::ffi::c_int;
    fn deadbolt_ld_is_inf(v: *const u8) -> std::ffi::c_int;
    fn deadbolt_ld_ceil_millis(v: *const u8) -> std::ffi::c_longlong;
    fn deadbolt_ld_add_human(
        a: *const u8,
        b: *const u8,
        out: *mut std::ffi::c_char,
        out_len: usize,
    ) -> std::ffi::c_long;
}

impl LongDouble {
    /// +0.0: all bits zero in every IEEE-style format, the x87 extended one included.
    pub const ZERO: LongDouble = LongDouble([0; 16]);

    /// Redis's `string2ld`: strtold over the whole text; no leading space, no NaN, nothing
    /// that overflows or underflows to zero, shorter than `MAX_LONG_DOUBLE_CHARS`. `inf` is
    /// accepted.
    pub fn parse(s: &[u8]) -> Option<LongDouble> {
        if s.is_empty() || s.len() >= MAX_LONG_DOUBLE_CHARS {
            return None;
        }
        let mut out = LongDouble::ZERO;
        // SAFETY: `s` is valid for `s.len()` bytes, which the C side copies (it refuses lengths
        // of its 5 KB buffer or more, as checked above too) before reading; `out` is 16
        // writable bytes, and the C side writes at most sizeof(long double) <= 16 of them.
        let ok = unsafe { deadbolt_ld_parse(s.as_ptr().cast(), s.len(), out.0.as_mut_ptr()) };
        (ok == 1).then_some(out)
    }

    pub fn is_infinite(&self) -> bool {
        // SAFETY: reads the 16 bytes of `self`, which hold a long double written by the C side
        // (or ZERO).
        unsafe { deadbolt_ld_is_inf(self.0.as_ptr()) == 1 }
    }

    /// Seconds to whole milliseconds as Redis's `(long long) ceill(self * 1000.0)`; a value
    /// outside i64's range (inf included) gives `i64::MIN`, as the conversion does on x86-64.
    pub fn ceil_millis(&self) -> i64 {
        // SAFETY: reads the 16 bytes of `self`, which hold a long double written by the C side
        // (or ZERO).
        unsafe { deadbolt_ld_ceil_millis(self.0.as_ptr()) }
    }

    /// `self + other` in long double, printed as Redis's `ld2string(LD_STR_HUMAN)` (`%.17Lf`,
    /// trailing zeros and point removed, `-0` as `0`). None when the sum is NaN or infinite.
    pub fn add_human(&self, other: &LongDouble) -> Option<Vec<u8>> {
        let mut buf = [0u8; MAX_LONG_DOUBLE_CHARS];
        // SAFETY: both operands are 16 readable bytes; `buf` is writable for its full length,
        // which is passed, and snprintf on the C side never writes more than that.
        let n = unsafe {
            deadbolt_ld_add_human(
                self.0.as_ptr(),
                other.0.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        let n = usize::try_from(n).ok()?;
        Some(buf[..n.min(buf.len())].to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string2ll_rules() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        for bad in [
            &b""[..],
            b"+1",
            b"01",
            b" 1",
            b"1 ",
            b"-",
            b"-0",
            b"1.0",
            b"abc",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", bad);
        }
    }

    #[test]
    fn g17_matches_printf() {
        assert_eq!(fmt_g17(1.0), "1");
        assert_eq!(fmt_g17(1.5), "1.5");
        assert_eq!(fmt_g17(0.1), "0.10000000000000001");
        assert_eq!(fmt_g17(1e20), "1e+20");
        assert_eq!(fmt_g17(123456789012345678.0), "1.2345678901234568e+17");
        assert_eq!(fmt_g17(0.0001), "0.0001");
        assert_eq!(fmt_g17(0.00001), "1.0000000000000001e-05");
        assert_eq!(fmt_g17(-2.5), "-2.5");
        assert_eq!(fmt_g17(f64::INFINITY), "inf");
        assert_eq!(fmt_g(1e15, 14), "1e+15");
        assert_eq!(fmt_g(100.0, 14), "100");
    }

    fn human_sum(a: &str, b: &str) -> Option<String> {
        let (a, b) = (
            LongDouble::parse(a.as_bytes())?,
            LongDouble::parse(b.as_bytes())?,
        );
        a.add_human(&b).map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn long_double_matches_redis() {
        // Replies of redis-server 7.0.15 on x86-64.
        assert_eq!(human_sum("10.5", "0.1").as_deref(), Some("10.6"));
        assert_eq!(
            human_sum("1000.7", "0.9").as_deref(),
            Some("1001.60000000000000003")
        );
        assert_eq!(
            human_sum("1000", "1.6").as_deref(),
            Some("1001.59999999999999998")
        );
        assert_eq!(human_sum("3", "0").as_deref(), Some("3"));
        assert_eq!(human_sum("-0.0", "0").as_deref(), Some("0"));
        assert_eq!(human_sum("1e-30", "0").as_deref(), Some("0"));
        assert_eq!(human_sum("-1e-30", "0").as_deref(), Some("0"));
        assert!(human_sum("1e308", "1e308").is_some());
        assert_eq!(human_sum("inf", "1"), None);
        assert_eq!(human_sum("inf", "-inf"), None);
        for bad in ["", " 1", "1 ", "nan", "abc", "1e99999", "1\x002"] {
            assert!(LongDouble::parse(bad.as_bytes()).is_none(), "{bad:?}");
        }
        assert!(LongDouble::parse(b"inf").is_some_and(|v| v.is_infinite()));
        assert!(LongDouble::parse(b"0x1p3").is_some());
        let long = "1".repeat(MAX_LONG_DOUBLE_CHARS - 1);
        assert!(LongDouble::parse(&long.as_bytes()[..4931]).is_some());
        assert!(LongDouble::parse(long.as_bytes()).is_none(), "overflows");
        assert!(LongDouble::parse("1".repeat(MAX_LONG_DOUBLE_CHARS).as_bytes()).is_none());
        // The largest finite long double prints in full (4933 digits) and fits the buffer.
        let max = human_sum("1.18973149535723176502e+4932", "0").unwrap();
        assert_eq!(max.len(), 4933, "{max}");
        let min = human_sum("-1.18973149535723176502e+4932", "0").unwrap();
        assert_eq!(min.len(), 4934);
    }

    #[test]
    fn float_parsing() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"abc"), None);
        assert_eq!(parse_f64(b""), None);
    }
}
