//! Numbers: decimal text -> IEEE-754 double (correctly rounded), double -> ECMAScript text.

use crate::error::{Error, Result};
use crate::sink::Sink;

/// The double nearest to the decimal number `text` (JSON number syntax; a leading `+` is
/// tolerated). Rounding is correct (round-half-even) for any length of input, because Rust's
/// `str::parse::<f64>` is. `-0` gives `-0.0` (printed as `0`); values too small for a
/// subnormal round to zero, as in ECMAScript; values beyond the largest double are an error.
pub fn number_from_decimal_text(text: &str) -> Result<f64> {
    // Checked a MiB at a time: a number's text can be as long as the document.
    let plausible = !text.is_empty()
        && text
            .as_bytes()
            .chunks(crate::interrupt::BYTES)
            .enumerate()
            .all(|(i, chunk)| {
                if i > 0 {
                    crate::interrupt::check();
                }
                chunk
                    .iter()
                    .all(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            });
    if !plausible {
        return Err(Error::syntax(0, "not a decimal number"));
    }
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err(Error::out_of_range(text)),
        Err(_) => Err(Error::syntax(0, "not a decimal number")),
    }
}

/// Powers of ten that are exact doubles.
const EXACT_POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// `±mantissa × 10^exp10` when it can be computed exactly with one IEEE operation
/// (Clinger's fast path: mantissa ≤ 2^53 and |exp10| ≤ 22), else `None`: then format the
/// number as text and use [`number_from_decimal_text`].
#[inline]
pub fn number_from_parts_fast(negative: bool, mantissa: u64, exp10: i32) -> Option<f64> {
    if mantissa > (1u64 << 53) {
        return None;
    }
    let m = mantissa as f64; // exact: mantissa ≤ 2^53
    let v = match exp10 {
        0 => m,
        1..=22 => m * EXACT_POW10[exp10 as usize],
        -22..=-1 => m / EXACT_POW10[(-exp10) as usize],
        _ => return None,
    };
    Some(if negative { -v } else { v })
}

/// Writes `value` as ECMAScript's `Number.prototype.toString` does (RFC 8785 section 3.2.2.3),
/// with `-0` as `0`. NaN and infinities have no JSON form and are an error.
#[inline]
pub fn write_number<S: Sink + ?Sized>(value: f64, sink: &mut S) -> Result<()> {
    if !value.is_finite() {
        return Err(Error::out_of_range(&format!("{value}")));
    }
    if value == 0.0 {
        sink.write_byte(b'0');
        return Ok(());
    }
    // Integers below 2^53 in magnitude: their only round-tripping digits are their own, so
    // ECMAScript prints them exactly as an integer formatter does.
    if value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 {
        let mut buf = itoa::Buffer::new();
        sink.write(buf.format(value as i64).as_bytes());
        return Ok(());
    }
    let mut buf = ryu_js::Buffer::new();
    sink.write(buf.format_finite(value).as_bytes());
    Ok(())
}

/// [`write_number`] into a new string.
pub fn format_number(value: f64) -> Result<String> {
    let mut s = Vec::new();
    write_number(value, &mut s)?;
    String::from_utf8(s).map_err(|_| Error::syntax(0, "number formatting produced non-UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(v: f64) -> String {
        format_number(v).unwrap()
    }

    fn canon(text: &str) -> String {
        fmt(number_from_decimal_text(text).unwrap())
    }

    #[test]
    fn es6_boundaries() {
        assert_eq!(canon("1.0"), "1");
        assert_eq!(canon("-0"), "0");
        assert_eq!(canon("-0.0e5"), "0");
        assert_eq!(canon("1e21"), "1e+21");
        assert_eq!(canon("999999999999999900000"), "999999999999999900000");
        assert_eq!(canon("1e20"), "100000000000000000000");
        assert_eq!(canon("0.000001"), "0.000001");
        assert_eq!(canon("1e-6"), "0.000001");
        assert_eq!(canon("1e-7"), "1e-7");
        assert_eq!(canon("0.0000001"), "1e-7");
        assert_eq!(canon("1.5e-7"), "1.5e-7");
        assert_eq!(canon("123e-9"), "1.23e-7");
        assert_eq!(canon("12345678901234567890"), "12345678901234567000");
        assert_eq!(canon("9007199254740992"), "9007199254740992");
        assert_eq!(canon("9007199254740993"), "9007199254740992");
        assert_eq!(canon("9007199254740994"), "9007199254740994");
        assert_eq!(canon("9007199254740995"), "9007199254740996");
        assert_eq!(canon("-9007199254740993"), "-9007199254740992");
        assert_eq!(canon("1.7976931348623157e308"), "1.7976931348623157e+308");
        assert_eq!(canon("5e-324"), "5e-324");
        assert_eq!(canon("2.2250738585072014e-308"), "2.2250738585072014e-308");
        assert_eq!(canon("2.225073858507201e-308"), "2.225073858507201e-308");
        assert_eq!(canon("1e-400"), "0");
        assert_eq!(canon("333333333.33333329"), "333333333.3333333");
        assert_eq!(canon("4.50"), "4.5");
        assert_eq!(canon("2e-3"), "0.002");
        assert_eq!(canon("1E30"), "1e+30");
        assert_eq!(canon("0.1"), "0.1");
        assert_eq!(canon("100"), "100");
        assert_eq!(canon("-1.5"), "-1.5");
    }

    #[test]
    fn out_of_range_and_garbage() {
        let e = number_from_decimal_text("1e400").unwrap_err();
        assert_eq!(e.sqlstate(), "22003");
        assert_eq!(
            number_from_decimal_text("-1.8e308").unwrap_err().sqlstate(),
            "22003"
        );
        // Above the midpoint between the largest double and 2^1024: infinity.
        assert_eq!(
            number_from_decimal_text("1.7976931348623159e308")
                .unwrap_err()
                .sqlstate(),
            "22003"
        );
        for bad in ["", "NaN", "inf", "infinity", "1x", "--1", "e5", "0x10"] {
            assert_eq!(
                number_from_decimal_text(bad).unwrap_err().sqlstate(),
                "22P02",
                "{bad}"
            );
        }
        assert!(write_number(f64::NAN, &mut Vec::new()).is_err());
        assert!(write_number(f64::INFINITY, &mut Vec::new()).is_err());
    }

    #[test]
    fn fast_path_agrees_with_parse() {
        let cases: &[(bool, u64, i32)] = &[
            (false, 0, 0),
            (false, 1999, -2),
            (true, 123456789, -4),
            (false, 1 << 53, 22),
            (false, 1 << 53, -22),
            (false, 7, 5),
            (false, 4_503_599_627_370_497, -22),
        ];
        for &(neg, m, e) in cases {
            let fast = number_from_parts_fast(neg, m, e).unwrap();
            let text = format!("{}{m}e{e}", if neg { "-" } else { "" });
            assert_eq!(
                fast.to_bits(),
                text.parse::<f64>().unwrap().to_bits(),
                "{text}"
            );
        }
        assert_eq!(number_from_parts_fast(false, (1 << 53) + 1, 0), None);
        assert_eq!(number_from_parts_fast(false, 1, 23), None);
        assert_eq!(number_from_parts_fast(false, 1, -23), None);
    }
}
