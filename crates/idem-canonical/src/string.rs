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

/// Writes `s` as a canonical JSON string, quotes included: `"` and `\` are escaped, control
/// characters below U+0020 use `\b \t \n \f \r` or lowercase `\u00xx`, everything else
/// (U+007F, U+2028, U+2029, non-ASCII) is written as raw UTF-8.
#[inline]
pub fn write_string<S: Sink + ?Sized>(s: &str, sink: &mut S) {
    sink.write_byte(b'"');
    let bytes = s.as_bytes();
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !needs_escape(b) {
            continue;
        }
        if run < i {
            // `i` and `run` sit at ASCII bytes (or the ends), so these are char boundaries.
            sink.write_str(&s[run..i]);
        }
        match ESCAPE[b as usize] {
            b'u' => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let esc = [
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xF)],
                ];
                if let Ok(text) = core::str::from_utf8(&esc) {
                    sink.write_str(text);
                }
            }
            c => {
                sink.write_byte(b'\\');
                sink.write_byte(c);
            }
        }
        run = i + 1;
    }
    if run < bytes.len() {
        sink.write_str(&s[run..]);
    }
    sink.write_byte(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esc(s: &str) -> String {
        let mut out = String::new();
        write_string(s, &mut out);
        out
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
}
