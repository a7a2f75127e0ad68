//! Member order: names compared as arrays of UTF-16 code units (RFC 8785 section 3.2.3).

use core::cmp::Ordering;

/// Compares two UTF-8 strings as their UTF-16 code-unit sequences would compare, without
/// transcoding.
///
/// UTF-8 byte order equals code-point order, and UTF-16 order differs from code-point order
/// in one place only: a supplementary character (U+10000.., surrogates 0xD800..0xDBFF in
/// UTF-16, lead byte 0xF0..=0xF4 in UTF-8) sorts *below* U+E000..U+FFFF (lead byte 0xEE or
/// 0xEF). The first differing byte of two valid UTF-8 strings that share a prefix is either
/// inside one character (both continuation bytes, or lead bytes of the same length class,
/// where byte order is right) or at the lead bytes of two characters; only the pair
/// {0xEE|0xEF, 0xF0..} needs its order flipped.
#[inline]
pub fn cmp_utf16(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (pa, pb) = (&a[..n], &b[..n]);
    match pa.iter().zip(pb).position(|(x, y)| x != y) {
        None => a.len().cmp(&b.len()),
        Some(i) => {
            let (x, y) = (pa[i], pb[i]);
            match (x, y) {
                (0xF0..=0xFF, 0xEE..=0xEF) => Ordering::Less,
                (0xEE..=0xEF, 0xF0..=0xFF) => Ordering::Greater,
                _ => x.cmp(&y),
            }
        }
    }
}

/// [`cmp_utf16`] on `&str`.
#[inline]
pub fn cmp_utf16_str(a: &str, b: &str) -> Ordering {
    cmp_utf16(a.as_bytes(), b.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(a: &str, b: &str) -> Ordering {
        a.encode_utf16().cmp(b.encode_utf16())
    }

    #[test]
    fn astral_sorts_below_private_use_area() {
        assert_eq!(cmp_utf16_str("😂", "\u{e000}"), Ordering::Less);
        assert_eq!(cmp_utf16_str("\u{ffff}", "\u{10000}"), Ordering::Greater);
        assert_eq!(cmp_utf16_str("\u{d7ff}", "\u{10000}"), Ordering::Less);
        assert_eq!(cmp_utf16_str("\u{fb33}", "😂"), Ordering::Greater);
        assert_eq!(cmp_utf16_str("a", "ab"), Ordering::Less);
        assert_eq!(cmp_utf16_str("", ""), Ordering::Equal);
        assert_eq!(cmp_utf16_str("é", "ê"), Ordering::Less);
    }

    /// Exhaustive over a set of characters chosen at every UTF-8 and UTF-16 boundary.
    #[test]
    fn agrees_with_encode_utf16() {
        let chars = [
            '\0',
            'A',
            '\u{7f}',
            '\u{80}',
            '\u{7ff}',
            '\u{800}',
            '\u{d7ff}',
            '\u{e000}',
            '\u{efff}',
            '\u{f000}',
            '\u{fb33}',
            '\u{ffff}',
            '\u{10000}',
            '\u{1f602}',
            '\u{fffff}',
            '\u{10ffff}',
        ];
        let mut strings = vec![String::new()];
        for a in chars {
            strings.push(a.to_string());
            for b in chars {
                strings.push(format!("{a}{b}"));
                strings.push(format!("x{a}{b}"));
            }
        }
        for a in &strings {
            for b in &strings {
                assert_eq!(cmp_utf16_str(a, b), reference(a, b), "{a:?} vs {b:?}");
            }
        }
    }
}
