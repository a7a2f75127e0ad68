//! Strings: RFC 8785 section 3.2.2.2 escaping.

use crate::sink::Sink;

/// What each ASCII byte becomes inside a canonical string: 0 = itself, `b'u'` = `\u00xx`,
/// anything else = a backslash followed by that byte.
const ESCAPE: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0A] = b'n';
    t[0x0C] = b'f';
    t[0x0D] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

#[inline]
fn needs_escape(b: u8) -> bool {
    b < 0x80 && ESCAPE[b as usize] != 0
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Whether any of the 8 bytes in `w` may need escaping (no false negatives).
#[inline]
fn word_may_need_escape(w: u64) -> bool {
    let below_space = w.wrapping_sub(ONES * 0x20) & !w;
    let q = w ^ (ONES * u64::from(b'"'));
    let quote = q.wrapping_sub(ONES) & !q;
    let b = w ^ (ONES * u64::from(b'\\'));
    let backslash = b.wrapping_sub(ONES) & !b;
    (below_space | quote | backslash) & HIGHS != 0
}

/// Index of the first byte at or after `from` that needs escaping, or `bytes.len()`.
#[inline]
fn next_escape(bytes: &[u8], mut from: usize) -> usize {
    let len = bytes.len();
    while from + 8 <= len {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[from..from + 8]);
        if word_may_need_escape(u64::from_le_bytes(word)) {
            break;
        }
        from += 8;
    }
    while from < len && !needs_escape(bytes[from]) {
        from += 1;
    }
    from
}

/// Writes the UTF-8 string `s` as a canonical JSON string, quotes included: `"` and `\` are
/// escaped, control characters below U+0020 use `\b \t \n \f \r` or lowercase `\u00xx`,
/// everything else (U+007F, U+2028, U+2029, non-ASCII) is copied as raw UTF-8. Bytes are
/// not validated: the caller vouches that `s` is UTF-8.
#[inline]
pub fn write_string<S: Sink + ?Sized>(s: &[u8], sink: &mut S) {
    sink.write_byte(b'"');
    let mut run = 0;
    loop {
        let i = next_escape(s, run);
        if run < i {
            sink.write(&s[run..i]);
        }
        let Some(&b) = s.get(i) else { break };
        match ESCAPE[usize::from(b)] {
            b'u' => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                sink.write(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xF)],
                ]);
            }
            c => sink.write(&[b'\\', c]),
        }
        run = i + 1;
    }
    sink.write_byte(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esc(s: &str) -> String {
        let mut out = Vec::new();
        write_string(s.as_bytes(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escapes_exactly_what_jcs_says() {
        assert_eq!(esc(""), r#""""#);
        assert_eq!(esc("abc"), r#""abc""#);
        assert_eq!(esc("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(esc("\u{8}\t\n\u{c}\r"), r#""\b\t\n\f\r""#);
        assert_eq!(
            esc("\u{0}\u{1}\u{f}\u{1f}"),
            r#""\u0000\u0001\u000f\u001f""#
        );
        assert_eq!(esc("/"), r#""/""#);
        assert_eq!(esc("\u{7f}\u{2028}\u{2029}"), "\"\u{7f}\u{2028}\u{2029}\"");
        assert_eq!(esc("€😂"), "\"€😂\"");
        assert_eq!(esc("x\ny"), r#""x\ny""#);
    }

    /// The word-at-a-time scan agrees with the byte table at every position and value.
    #[test]
    fn word_scan_agrees_with_byte_scan() {
        for b in 0..=255u8 {
            for at in 0..20 {
                let mut s = vec![b'a'; 20];
                s[at] = b;
                let expected = s.iter().position(|&c| needs_escape(c)).unwrap_or(s.len());
                assert_eq!(next_escape(&s, 0), expected, "byte {b:#x} at {at}");
                let mut out = Vec::new();
                write_string(&s, &mut out);
                let mut reference = vec![b'"'];
                for &c in &s {
                    match c {
                        b'"' => reference.extend_from_slice(b"\\\""),
                        b'\\' => reference.extend_from_slice(b"\\\\"),
                        0x08 => reference.extend_from_slice(b"\\b"),
                        0x09 => reference.extend_from_slice(b"\\t"),
                        0x0A => reference.extend_from_slice(b"\\n"),
                        0x0C => reference.extend_from_slice(b"\\f"),
                        0x0D => reference.extend_from_slice(b"\\r"),
                        c if c < 0x20 => {
                            reference.extend_from_slice(format!("\\u{c:04x}").as_bytes())
                        }
                        c => reference.push(c),
                    }
                }
                reference.push(b'"');
                assert_eq!(out, reference, "byte {b:#x} at {at}");
            }
        }
    }
}
