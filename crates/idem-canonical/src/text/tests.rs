use crate::canonicalize_json_text as canon;

fn kind(text: &str) -> &'static str {
    canon(text).unwrap_err().sqlstate()
}

#[test]
fn scalars_at_top_level() {
    assert_eq!(canon(" 1.0 ").unwrap(), "1");
    assert_eq!(canon("\"a\\u00e9\"").unwrap(), "\"aé\"");
    assert_eq!(canon("true").unwrap(), "true");
    assert_eq!(canon("null").unwrap(), "null");
    assert_eq!(canon("[]").unwrap(), "[]");
    assert_eq!(canon("{}").unwrap(), "{}");
    assert_eq!(canon("\"\\u0000\"").unwrap(), "\"\\u0000\"");
}

#[test]
fn nesting_and_sorting() {
    assert_eq!(
        canon(r#"{"b":[1,{"z":null,"a":[]}],"a":{"y":2,"x":1}}"#).unwrap(),
        r#"{"a":{"x":1,"y":2},"b":[1,{"a":[],"z":null}]}"#
    );
    assert_eq!(
        canon("{\"\u{e000}\":1,\"😂\":2,\"\\ud83d\\ude01\":3}").unwrap(),
        "{\"😁\":3,\"😂\":2,\"\u{e000}\":1}"
    );
}

/// The pairs at the edges of the surrogate ranges, and the code points next to them.
#[test]
fn surrogate_pairs_at_the_edges() {
    for (escaped, ch) in [
        (r"\ud800\udc00", '\u{10000}'),
        (r"\ud800\udfff", '\u{103ff}'),
        (r"\udbff\udc00", '\u{10fc00}'),
        (r"\udbff\udfff", '\u{10ffff}'),
        (r"\uDBFF\uDFFF", '\u{10ffff}'),
        (r"\ud7ff", '\u{d7ff}'),
        (r"\ue000", '\u{e000}'),
        (r"\uffff", '\u{ffff}'),
    ] {
        assert_eq!(
            canon(&format!("\"{escaped}\"")).unwrap(),
            format!("\"{ch}\""),
            "{escaped}"
        );
    }
    // Sorted by UTF-16 code units: U+10FFFF (0xDBFF 0xDFFF) before U+E000, U+FFFF after.
    assert_eq!(
        canon(r#"{"\uffff":1,"\ue000":2,"\udbff\udfff":3,"\ud800\udc00":4,"\ud7ff":5}"#).unwrap(),
        "{\"\u{d7ff}\":5,\"\u{10000}\":4,\"\u{10ffff}\":3,\"\u{e000}\":2,\"\u{ffff}\":1}"
    );
    for lone in [
        r"\udfff",
        r"\udbff",
        r"\udbff\ue000",
        r"\ud800\udbff",
        r"\udc00\ud800",
    ] {
        assert_eq!(kind(&format!("\"{lone}\"")), "22P05", "{lone}");
    }
}

#[test]
fn errors() {
    assert_eq!(kind(r#"{"a":1,"a":2}"#), "22030");
    // Duplicates are found after unescaping.
    assert_eq!(kind(r#"{"a":1,"\u0061":2}"#), "22030");
    assert_eq!(kind(r#"[{"x":{"k":1,"k":1}}]"#), "22030");
    assert_eq!(kind("[1e400]"), "22003");
    assert_eq!(kind("-1e309"), "22003");
    assert_eq!(kind(r#""\ud800""#), "22P05");
    assert_eq!(kind(r#""\udc00x""#), "22P05");
    assert_eq!(kind(r#""\ud800\u0041""#), "22P05");
    for bad in [
        "",
        " ",
        "[",
        "]",
        "{",
        "[1,]",
        "[,1]",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\" 1}",
        "{1:2}",
        "01",
        "1.",
        ".5",
        "1e",
        "+1",
        "-",
        "tru",
        "nul",
        "[1 2]",
        "1 2",
        "\"abc",
        "\"\\x\"",
        "\"\\u12\"",
        "\"a\nb\"",
        "{\"a\":1,}",
        "[1]]",
        "NaN",
        "Infinity",
    ] {
        assert_eq!(kind(bad), "22P02", "{bad:?}");
    }
}

#[test]
fn deep_nesting_up_to_the_limit() {
    let depth = crate::MAX_DEPTH;
    let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    assert_eq!(canon(&text).unwrap(), text);
    let text = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
    assert_eq!(canon(&text).unwrap(), text);
    // One more, or far more (even unclosed, or with a bad number first): 54001, at once.
    for deep in [depth + 1, 100_000, 10_000_000] {
        assert_eq!(
            kind(&format!("{}{}", "[".repeat(deep), "]".repeat(deep))),
            "54001"
        );
        assert_eq!(kind(&format!("[1e400,{}", "{\"a\":".repeat(deep))), "54001");
    }
}
