//! `OPERATOR(pg_catalog.x)` has one precedence whatever `x` is, and groups to the left, so
//! `a OPERATOR(pg_catalog.-) b OPERATOR(pg_catalog./) 4` is `(a - b) / 4`. The portable edition
//! cut an outbox error to 2,048 bytes instead of 8,192, and printed intervals wrong in its
//! DETAILs, that way (tests/integration/upkeep/units.rs). Every product or quotient that follows
//! a sum or difference in the same expression must be in parentheses of its own: checked in
//! every SQL file of both editions and in the SQL strings of src/. Needs no server.

use crate::common::repo_file;

use std::path::Path;

const ADDITIVE: [&str; 2] = ["+", "-"];
const MULTIPLICATIVE: [&str; 3] = ["*", "/", "%"];
/// Words and marks that end an operand list: what follows them is another expression.
const ENDS: [&str; 27] = [
    ",", ";", ":=", "AND", "OR", "NOT", "THEN", "ELSE", "WHEN", "END", "CASE", "WHERE", "SELECT",
    "FROM", "AS", "IS", "IN", "INTO", "USING", "LIMIT", "BY", "ON", "SET", "RETURN", "VALUES",
    "LOOP", "IF",
];

/// (line, what) of every multiplicative OPERATOR(...) after an additive one in the same
/// expression of `sql`, where the first line is `first_line`.
fn mixed(sql: &str, first_line: usize) -> Vec<(usize, String)> {
    let b = sql.as_bytes();
    let mut levels: Vec<Vec<&str>> = vec![Vec::new()];
    let mut found = Vec::new();
    let (mut i, mut line) = (0, first_line);
    while i < b.len() {
        let rest = &sql[i..];
        if b[i] == b'\n' {
            line += 1;
        }
        if rest.starts_with("--") {
            i += rest.find('\n').unwrap_or(rest.len());
            continue;
        }
        if b[i] == b'\'' {
            // A literal, '' inside it included.
            let mut j = i + 1;
            while j < b.len() && !(b[j] == b'\'' && b.get(j + 1) != Some(&b'\'')) {
                j += if b[j] == b'\'' { 2 } else { 1 };
            }
            line += sql[i..j.min(b.len())].matches('\n').count();
            i = j + 1;
            continue;
        }
        if let Some(after) = rest.strip_prefix("OPERATOR(pg_catalog.") {
            let op = &after[..after.find(')').unwrap_or(0)];
            let level = levels.last_mut().expect("a level");
            if MULTIPLICATIVE.contains(&op) && level.iter().any(|p| ADDITIVE.contains(p)) {
                found.push((line, format!("{} then {op}", level.join(" "))));
            }
            level.push(op);
            i += "OPERATOR(pg_catalog.".len() + op.len() + 1;
            continue;
        }
        match b[i] {
            b'(' | b'[' => levels.push(Vec::new()),
            b')' | b']' if levels.len() > 1 => {
                levels.pop();
            }
            b',' | b';' => levels.last_mut().expect("a level").clear(),
            b':' if rest.starts_with(":=") => levels.last_mut().expect("a level").clear(),
            c if c.is_ascii_alphabetic() && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) => {
                let word: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if ENDS.contains(&word.to_ascii_uppercase().as_str()) {
                    levels.last_mut().expect("a level").clear();
                }
                i += word.len();
                continue;
            }
            _ => {}
        }
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    found
}

/// The string literals of a Rust file, each with its first line (SQL lives in them).
fn rust_strings(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    let mut line = 1;
    while let Some((_, c)) = chars.next() {
        match c {
            '\n' => line += 1,
            '/' if chars.peek().is_some_and(|(_, n)| *n == '/') => {
                for (_, c) in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '"' => {
                let (start, mut s) = (line, String::new());
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, e)) = chars.next() {
                                if e == '\n' {
                                    line += 1;
                                }
                                s.push(if e == 'n' { '\n' } else { ' ' });
                            }
                        }
                        '"' => break,
                        c => {
                            if c == '\n' {
                                line += 1;
                            }
                            s.push(c);
                        }
                    }
                }
                out.push((start, s));
            }
            _ => {}
        }
    }
    out
}

fn files(dir: &str, ext: &str, out: &mut Vec<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for entry in std::fs::read_dir(root.join(dir)).expect(dir).flatten() {
        let path = entry.path();
        let rel = path
            .strip_prefix(root)
            .expect("in the repo")
            .to_string_lossy()
            .into_owned();
        if path.is_dir() {
            files(&rel, ext, out);
        } else if rel.ends_with(ext) {
            out.push(rel);
        }
    }
}

#[test]
fn the_check_sees_what_it_must() {
    let op = |o: &str| format!("OPERATOR(pg_catalog.{o})");
    let bad = format!("SELECT a {} (b {} 8192) {} 4", op("-"), op("-"), op("/"));
    assert_eq!(mixed(&bad, 1).len(), 1, "{bad}");
    for good in [
        format!("SELECT a {} ((b {} 8192) {} 4)", op("-"), op("-"), op("/")),
        format!("SELECT f(a {} b, c {} d)", op("+"), op("*")),
        format!("SELECT a {} b {} c", op("*"), op("+")),
        format!("x := a {} b; y := c {} d", op("+"), op("*")),
        format!("SELECT a[i {} 1] {} m", op("+"), op("%")),
        format!("SELECT a {} '*' -- {} \n", op("+"), op("*")),
    ] {
        assert_eq!(mixed(&good, 1), vec![], "{good}");
    }
}

#[test]
fn no_product_follows_a_sum_without_parentheses() {
    let mut sql = Vec::new();
    files("sql", ".sql", &mut sql);
    files("portable", ".sql", &mut sql);
    let mut rust = Vec::new();
    files("src", ".rs", &mut rust);
    assert!(
        sql.len() > 20 && rust.len() > 40,
        "{} sql, {} rs",
        sql.len(),
        rust.len()
    );
    let mut bad = Vec::new();
    for f in &sql {
        for (line, what) in mixed(&repo_file(f), 1) {
            bad.push(format!("{f}:{line}: {what}"));
        }
    }
    for f in &rust {
        for (first, text) in rust_strings(&repo_file(f)) {
            for (line, what) in mixed(&text, first) {
                bad.push(format!("{f}:{line}: {what}"));
            }
        }
    }
    assert!(bad.is_empty(), "parenthesize these:\n{}", bad.join("\n"));
}
