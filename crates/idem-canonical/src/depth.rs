//! The nesting limit of canonical JSON: at most [`MAX_DEPTH`] arrays and objects inside one
//! another. The native extension and the portable edition refuse a deeper value with the same
//! SQLSTATE (54001), message and hint, before any other check of the value: the portable
//! edition's walk costs grow with depth (docs/portable-canonical.md), and one bound for both
//! keeps a request's outcome the same whichever edition hashes it.

use crate::error::{Error, Result};

/// The deepest nesting accepted: `[[1]]` is 2 deep, a scalar 0. RFC 8259 allows a limit;
/// serde_json's parser stops near the same depth (its recursion limit, 128), and real request
/// bodies nest far less.
pub const MAX_DEPTH: usize = 128;

/// An error unless the JSON text nests at most [`MAX_DEPTH`] arrays and objects. Linear,
/// cancellable, and blind to syntax: it counts the brackets outside strings (the parser checks the rest).
pub fn check_text_depth(text: &str) -> Result<()> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (pos, &b) in text.as_bytes().iter().enumerate() {
        crate::interrupt::at_byte(pos); // a cancel is honoured every MiB, here as in the parser
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(Error::too_deep());
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn nested(depth: usize, open: &str, close: &str) -> String {
        format!("{}1{}", open.repeat(depth), close.repeat(depth))
    }

    #[test]
    fn the_limit_itself_passes_one_more_does_not() {
        // (a name holding a bracket: not counted)
        for (open, close, per) in [("[", "]", 1), ("{\"a\":", "}", 1), ("[{\"[\":", "}]", 2)] {
            let at = nested(MAX_DEPTH / per, open, close);
            assert!(check_text_depth(&at).is_ok(), "{open}");
            let over = format!("[{at}]");
            let err = check_text_depth(&over).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::TooDeep);
            assert_eq!(err.sqlstate(), "54001");
        }
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let s = format!("[\"{}\\\"{}\"]", "[".repeat(1000), "{".repeat(1000));
        assert!(check_text_depth(&s).is_ok());
    }

    #[test]
    fn serde_values_too() {
        let at = nested(MAX_DEPTH, "[", "]");
        // built by hand: serde_json's own parser stops at 128 levels
        let mut value = serde_json::json!(1);
        for _ in 0..MAX_DEPTH {
            value = serde_json::Value::Array(vec![value]);
        }
        assert_eq!(crate::canonicalize_value(&value).unwrap(), at);
        let over = serde_json::Value::Array(vec![value]);
        let err = crate::canonicalize_value(&over).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TooDeep);
    }

    #[test]
    fn siblings_do_not_add_up() {
        let one = nested(MAX_DEPTH - 1, "[", "]");
        let many = format!("[{}]", vec![one; 50].join(","));
        assert!(check_text_depth(&many).is_ok());
    }
}
