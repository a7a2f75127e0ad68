//! The edges of the portable idem_canonical(jsonb)'s fast path (jsonb's own text, its spaces
//! taken out), which one regular expression allows only when no object has a second member, no
//! string holds ", " or ": " and every number prints canonically: each case here sits on one
//! side of one of those conditions, alone or inside containers, and must give the native bytes.
//! The walk that takes over when the payload fails uses the same test on containers at most half
//! the payload's size: each case is also placed twice next to a number that fails it.

use super::compare;

/// `doc` at the top, as an array element, as a member value, 3 levels down; and where the
/// payload fails the fast test but `doc` is tested on its own (at most half the payload).
fn placed(doc: &str) -> [String; 6] {
    [
        doc.to_string(),
        format!("[{doc}]"),
        format!("{{\"a\": {doc}}}"),
        format!("[{{\"a\": [{doc}, 1]}}]"),
        format!("[1.50, [{doc}], [{doc}]]"),
        format!("{{\"bb\": [{{\"c\": {doc}}}, [{doc}]], \"a\": 1.0}}"),
    ]
}

#[test]
fn fast_path_edges() {
    let mut cases: Vec<String> = Vec::new();
    // Members to reorder (jsonb sorts names by length first), at several depths, next to
    // single-member objects that need none; names at and above U+E000 and above U+FFFF.
    for doc in [
        r#"{"bb": 1, "a": 2}"#,
        r#"{"a": 1, "bb": 2}"#,
        r#"{"a": {"a": {"ccc": [1, {"dd": 1, "c": {"x": 2}}]}}}"#,
        r#"[{"a": 1}, {"b": {"amount": 12.5, "id": 7}}]"#,
        r#"{"a": {"a": {"a": {"zz": 1, "y": 2}}}}"#,
        r#"{"\uE000": 1, "\uD83D\uDE00": 2}"#,
        r#"{"\uD83D\uDE00\uD83D\uDE00": 1, "\uFFFF": 2, "z": 3}"#,
        r#"{"\uE000": {"\uD800\uDC00": [1]}}"#,
        r#"{"\uD83D\uDE00": {"\uFFFD": "\uE000"}}"#,
    ] {
        cases.extend(placed(doc));
    }
    // Strings holding the separators, escaped quotes, backslashes before a quote, and text that
    // looks like a member or a number; names holding them too.
    for doc in [
        r#""a, b""#,
        r#""a: b""#,
        r#"": a""#,
        r#"", ""#,
        r#""\", \"""#,
        r#""\": \"""#,
        r#""\\""#,
        r#"["\\", ": "]"#,
        r#"["\\\"", ", ", 1.0]"#,
        r#"["x\\", "y"]"#,
        r#"{"a\\": ": "}"#,
        r#"{"\\": [", "]}"#,
        r#"{"a, b": 1}"#,
        r#"{"a: b": {"c": 2}}"#,
        r#"["\", \"k\": ", 2]"#,
        r#"["1.50", "1234567890123456", "0.0000001", 1.5]"#,
        r#"["{\"b\": 1, \"a\": 2}"]"#,
        r#""\u0002\u0003\"""#,
    ] {
        cases.extend(placed(doc));
    }
    // Numbers on each side of the rule "as numeric prints it": 15 and 16 significant digits,
    // 1e-6 and below, 1e21 and up, trailing zeros, -0, exponents.
    for doc in [
        "123456789012345",
        "1234567890123456",
        "-123456789012345",
        "-1234567890123456",
        "0.123456789012345",
        "0.1234567890123456",
        "1.23456789012345",
        "12345678.12345678",
        "1234567.12345678",
        "100000000000000000000",
        "1e20",
        "1e21",
        "999999999999999999999",
        "0.000001",
        "0.0000015",
        "0.0000001",
        "-0.000001",
        "-0.0000009",
        "10.000001",
        "10.0000001",
        "1.50",
        "1.0",
        "0.0",
        "10",
        "100",
        "-0",
        "-0.0",
        "1E2",
        "1e+2",
        "-1.5E-7",
        "2.5e-3",
        "1e15",
        "999999999999999",
        "9999999999999999",
        "[1, 2.10, 3]",
        "[0, -1, 0.5, 1e-7]",
    ] {
        cases.extend(placed(doc));
    }
    // Empty containers everywhere, scalars at the top.
    for doc in [
        "{}",
        "[]",
        "[{}, []]",
        r#"{"a": {}, "b": []}"#,
        r#"{"a": [{}, [[]], {"b": {}}]}"#,
        "true",
        "false",
        "null",
        "\"\"",
        "0",
    ] {
        cases.extend(placed(doc));
    }
    // A realistic body: records of mixed name lengths, decimals, separators inside strings.
    cases.push(format!(
        "[{}]",
        (0..300)
            .map(|i| format!(
                r#"{{"id": {i}, "amount": {i}.{:02}, "currency": "EUR", "note": "a, b: \"c\"", "qty": {}, "ok": {}, "x": null, "tags": ["t{i}", "u, v"]}}"#,
                i % 100,
                i % 7,
                i % 2 == 0
            ))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let n = compare("{s}.idem_canonical($1::jsonb)", &cases);
    compare("{s}.idem_canonical($1::json)", &cases);
    compare("{s}.idem_hash($1::jsonb)", &cases);
    eprintln!("fast_path_edges: {n} documents");
}
