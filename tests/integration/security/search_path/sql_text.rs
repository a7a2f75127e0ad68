//! Reading a statement's text: its operators, the functions it calls, and what only looks
//! like a call.

use std::collections::BTreeSet;

/// `text` without its string literals.
pub(super) fn without_literals(text: &str) -> String {
    let mut out = String::new();
    let mut in_literal = false;
    for c in text.chars() {
        if c == '\'' {
            in_literal = !in_literal;
            out.push(' ');
        } else if !in_literal {
            out.push(c);
        }
    }
    out
}

const OPERATOR_CHARS: &str = "+-*/<>=~!@#%^&|`?";

/// Byte offsets of the `=` that assign in `SET a = …, b = …` (top level of the SET list).
fn assignments(text: &str) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    for (set, _) in text.match_indices(" SET ") {
        let mut depth = 0i32;
        let list = &text[set + 5..];
        for (i, c) in list.char_indices() {
            let tail = &list[i..];
            if depth == 0
                && [" WHERE ", " FROM ", " RETURNING "]
                    .iter()
                    .any(|k| tail.starts_with(k))
            {
                break;
            }
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                '=' if depth == 0 => {
                    out.insert(set + 5 + i);
                }
                _ => {}
            }
        }
    }
    out
}

/// The operator symbols of a statement: (symbol, qualified?). Assignments are not operators.
pub(super) fn operators(sql: &str) -> Vec<(String, bool)> {
    let text = without_literals(sql);
    let assigning = assignments(&text);
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(offset) = text[at..].find(|c| OPERATOR_CHARS.contains(c)) {
        let start = at + offset;
        let len = text[start..]
            .find(|c| !OPERATOR_CHARS.contains(c))
            .unwrap_or(text.len() - start);
        let symbol = &text[start..start + len];
        let qualified = text[..start].ends_with("OPERATOR(pg_catalog.");
        if !(symbol == "=" && assigning.contains(&start)) {
            found.push((symbol.to_string(), qualified));
        }
        at = start + len;
    }
    found
}

/// Names called as functions: (name, schema if qualified).
pub(super) fn functions(sql: &str) -> Vec<(String, Option<String>)> {
    let text = without_literals(sql);
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    for (i, _) in text.match_indices('(') {
        let before = text[..i].trim_end();
        let start = before
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .map_or(0, |p| p + 1);
        let word = &before[start..];
        if word.is_empty() || bytes[start].is_ascii_digit() {
            continue;
        }
        match word.split_once('.') {
            Some((schema, name)) => found.push((name.to_string(), Some(schema.to_string()))),
            None => found.push((word.to_string(), None)),
        }
    }
    found
}

/// SQL's own constructs that look like calls; none of them looks an operator up by name.
pub(super) const CONSTRUCTS: &[&str] = &[
    "VALUES",
    "ANY",
    "ARRAY",
    "COALESCE",
    "GREATEST",
    "LEAST",
    "OPERATOR",
    "AS",
    "AND",
    "OR",
    "FILTER",
    "EXISTS",
    "IN",
    "NULLIF",
    "CONFLICT",
    "WHERE",
    "NOT",
    // Keywords before a parenthesised expression or list.
    "SELECT",
    "ON",
    "USING",
    "RETURNING",
    "SET",
    "THEN",
    "ELSE",
    "WHEN",
    "FROM",
    "JOIN",
    "BY",
    "LIMIT",
    "WITH",
    "UPDATE",
    "DELETE",
    "INSERT",
    "INTO",
    "IS",
    "NULL",
    "DO",
    "LOCKED",
];

/// `name(` is the column list of `INSERT INTO t AS name (…)` / `INTO schema.table (…)`.
pub(super) fn statement_table_alias(sql: &str, name: &str) -> bool {
    sql.contains(&format!("AS {name} ("))
        || sql.contains(&format!(".{name} ("))
        || sql.contains(&format!("{name} AS ("))
}
