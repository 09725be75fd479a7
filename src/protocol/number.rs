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

/// INCRBYFLOAT / HINCRBYFLOAT output. Redis computes in `long double` and prints `%.17Lf` with
/// trailing zeros removed; the extra precision of long double hides the binary noise of the last
/// digits (10.5 + 0.1 prints `10.6`). With f64 we get the same text by rounding to 15 significant
/// digits, the precision an f64 carries exactly, and never using an exponent.
pub fn fmt_incrbyfloat(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let magnitude = v.abs().log10().floor() as i32;
    let decimals = (14 - magnitude).clamp(0, 17) as usize;
    let s = format!("{:.*}", decimals, v);
    let s = strip_fraction_zeros(&s);
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
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

    #[test]
    fn incrbyfloat_format() {
        assert_eq!(fmt_incrbyfloat(10.5), "10.5");
        assert_eq!(fmt_incrbyfloat(3.0), "3");
        assert_eq!(fmt_incrbyfloat(5.0e3), "5000");
        assert_eq!(fmt_incrbyfloat(10.5 + 0.1), "10.6");
        assert_eq!(fmt_incrbyfloat(0.1 + 0.2), "0.3");
        assert_eq!(fmt_incrbyfloat(1e20), "100000000000000000000");
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
