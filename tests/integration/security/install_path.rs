//! What runs while the extension is installed. `CREATE EXTENSION` and `ALTER EXTENSION UPDATE`
//! run their script with `search_path` set to the extension's schema, and a CHECK constraint,
//! a partial index, a default or a view binds its operators once, at creation. 0.1.0 compared
//! the status enum with untyped literals (`status = 'processing'`): an `=(anyenum, text)` that
//! a role with CREATE on that schema planted before a superuser installed won, and every later
//! write ran it, as whoever wrote (the worker, a superuser's move-up). Checked here: a fresh
//! install of each edition and an update from 0.1.0 (`catalog/upgrade.rs`) bind nothing of
//! the planter's, and nothing of the planter's runs when the functions are used.

use crate::common;

use common::{Client, planted};

pub(crate) use planted::{bound_to_planted, exercise, planted_calls};

crate::own_database!();

/// The role `planter` and its look-alikes in schema public of database `dbname`.
pub(crate) fn plant(cluster: &common::Cluster, admin: &mut Client, dbname: &str) {
    admin.batch_execute(planted::PLANTER).expect("role planter");
    cluster
        .connect_as(dbname, "planter")
        .batch_execute(planted::PLANT)
        .expect("planter plants its operators");
}

/// A fresh database `name` with `planter`'s look-alikes: a superuser's session in it.
fn planted_database(name: &str) -> Client {
    let mut db = cluster().empty_database(name);
    plant(cluster(), &mut db, name);
    db
}

#[test]
fn create_extension_binds_no_planted_operator() {
    let mut db = planted_database("install_path_native");
    db.batch_execute("CREATE EXTENSION idempotency")
        .expect("create extension");
    assert_eq!(bound_to_planted(&mut db), Vec::<String>::new());
    exercise(&mut db);
    assert_eq!(planted_calls(&mut db), 0, "a planted operator ran");
}

#[test]
fn the_portable_install_binds_no_planted_operator() {
    let name = "install_path_portable";
    let mut db = crate::portable::owned_database(common::bare_cluster(), name);
    let mut admin = common::bare_cluster().connect(name);
    plant(common::bare_cluster(), &mut admin, name);
    db.batch_execute(&common::portable_script(&[]))
        .expect("the portable edition installs");
    assert_eq!(bound_to_planted(&mut db), Vec::<String>::new());
    exercise(&mut db);
    assert_eq!(planted_calls(&mut db), 0, "a planted operator ran");
}

/// The files whose DDL an install or an update runs (the frozen 0.1.0 script aside).
const DDL_FILES: [&str; 9] = [
    "sql/cdc.sql",
    "portable/cdc_update.sql",
    "sql/cdc_sign.sql",
    "sql/bootstrap.sql",
    "sql/consumers.sql",
    "sql/layout.sql",
    "sql/maintenance.sql",
    "sql/citus.sql",
    "sql/idempotency--0.1.0--0.2.0.sql",
];
const DDL: [&str; 5] = [
    "CREATE TABLE ",
    "CREATE INDEX ",
    "CREATE UNIQUE INDEX ",
    "CREATE VIEW ",
    "ALTER TABLE ",
];
/// What resolves an operator through `search_path` besides a bare symbol.
const HIDDEN: [&str; 6] = [
    " BETWEEN ",
    " IN (",
    " IS DISTINCT ",
    "NULLIF(",
    " LIKE ",
    " ILIKE ",
];

/// Each DDL statement of `sql` (to its `;`), without comments, and literals emptied to `''`.
fn ddl_statements(sql: &str) -> Vec<String> {
    let mut clean = String::new();
    let (mut in_literal, mut chars) = (false, sql.chars().peekable());
    while let Some(c) = chars.next() {
        if !in_literal && c == '-' && chars.peek() == Some(&'-') {
            for c in chars.by_ref() {
                if c == '\n' {
                    break;
                }
            }
            clean.push('\n');
        } else if c == '\'' {
            in_literal = !in_literal;
            clean.push('\'');
        } else if !in_literal {
            clean.push(c);
        }
    }
    let mut found = Vec::new();
    for start in DDL {
        for (at, _) in clean.match_indices(start) {
            let end = clean[at..].find(';').map_or(clean.len(), |e| at + e);
            found.push(clean[at..end].replace('\n', " "));
        }
    }
    found
}

/// Is there a `CASE x WHEN y` (a comparison with a bare `=`) in `text` (comments removed)?
fn simple_case(text: &str) -> bool {
    let upper = text.to_uppercase();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    upper.match_indices("CASE").any(|(at, _)| {
        !upper[..at].ends_with(ident)
            && !upper[at + 4..].starts_with(ident)
            && !upper[at + 4..].trim_start().starts_with("WHEN")
    })
}

/// Neither edition's SQL (functions included) has a `CASE x WHEN y`: its `=` is resolved
/// through search_path. Needs no server.
#[test]
fn no_simple_case_in_either_editions_sql() {
    let mut found = Vec::new();
    for (name, sql) in editions_sql() {
        // Comments and literals out (a hint may say "lower case").
        let mut text = String::new();
        for line in sql.lines() {
            let code = line.split("--").next().unwrap_or("");
            text.extend(code.split('\'').step_by(2));
            text.push('\n');
        }
        if simple_case(&text) {
            found.push(name);
        }
    }
    assert!(found.is_empty(), "CASE x WHEN y in {found:?}");
}

/// (path, text) of each SQL file of sql/ and portable/ but the frozen released script
/// (sql/released.sha256).
fn editions_sql() -> Vec<(String, String)> {
    let mut files = Vec::new();
    for dir in ["sql", "portable"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        for entry in std::fs::read_dir(path).expect("dir").flatten() {
            let name = format!("{dir}/{}", entry.file_name().to_string_lossy());
            if name.ends_with(".sql") && name != "sql/idempotency--0.1.0.sql" {
                let text = common::repo_file(&name);
                files.push((name, text));
            }
        }
    }
    files
}

/// The plain string literals (not `E'...'`) of `sql` that hold a backslash. Comments and
/// dollar quotes' delimiters are skipped; a function body's literals are inside them and count.
fn backslash_literals(sql: &str) -> Vec<String> {
    let b = sql.as_bytes();
    let (mut i, mut found) = (0, Vec::new());
    while i < b.len() {
        if b[i..].starts_with(b"--") {
            i = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |j| i + j);
        } else if b[i..].starts_with(b"/*") {
            i = b[i..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(b.len(), |j| i + j + 2);
        } else if b[i] == b'\'' {
            let escaped = i > 0
                && matches!(b[i - 1], b'E' | b'e')
                && (i < 2 || !(b[i - 2].is_ascii_alphanumeric() || b[i - 2] == b'_'));
            let mut j = i + 1;
            while j < b.len() {
                match b[j] {
                    b'\\' if escaped => j += 2,
                    b'\'' if b.get(j + 1) == Some(&b'\'') => j += 2,
                    b'\'' => break,
                    _ => j += 1,
                }
            }
            let literal = &sql[i..(j + 1).min(b.len())];
            if !escaped && literal.contains('\\') {
                found.push(literal.to_string());
            }
            i = j + 1;
        } else {
            i += 1;
        }
    }
    found
}

/// No plain literal of either edition's SQL holds a backslash: with
/// `standard_conforming_strings` off (a session may set it) such a literal is read with
/// escapes, and a function body is parsed with the caller's setting. `E'...'` reads the same
/// either way. Needs no server.
#[test]
fn no_backslash_in_a_plain_literal() {
    let mut found = Vec::new();
    for (name, sql) in editions_sql() {
        for literal in backslash_literals(&sql) {
            found.push(format!("{name}: {literal}"));
        }
    }
    assert!(
        found.is_empty(),
        "plain literals with a backslash (write E'...'):\n{}",
        found.join("\n")
    );
    assert_eq!(
        backslash_literals("SELECT '\\x00', E'\\x00', 'it''s', '-- \\'; -- '\\'"),
        ["'\\x00'", "'-- \\'"]
    );
}

/// No CHECK, index predicate, default or view of either edition names an operator that
/// `search_path` resolves: every one is `OPERATOR(pg_catalog.…)` (no `CASE x WHEN y`, which
/// compares with a bare `=`), every literal typed.
/// Needs no server.
#[test]
fn the_ddl_qualifies_every_operator() {
    let mut bare = Vec::new();
    for file in DDL_FILES {
        for statement in ddl_statements(&common::repo_file(file)) {
            let mut text = statement
                .replace("(*)", "()")
                .replace("@extschema@", "extschema");
            while let Some(at) = text.find("OPERATOR(pg_catalog.") {
                let end = text[at..].find(')').map_or(text.len(), |e| at + e + 1);
                text.replace_range(at..end, " ");
            }
            // `(LIKE table INCLUDING ALL)` copies a table; it is no operator.
            let text = text.replace("(LIKE ", "(");
            let symbol = text.contains(|c| "+-*/<>=~!@#%^&|`?".contains(c));
            if symbol || HIDDEN.iter().any(|h| text.contains(h)) {
                bare.push(format!("{file}: {statement}"));
            }
            // `CASE x WHEN y` compares with an `=` that search_path resolves.
            if simple_case(&text) {
                bare.push(format!("{file} (CASE x WHEN y): {statement}"));
            }
            // A literal is '' here: typed, it is followed by its cast.
            if text
                .match_indices("''")
                .any(|(at, _)| !text[at + 2..].starts_with("::"))
            {
                bare.push(format!("{file} (untyped literal): {statement}"));
            }
        }
    }
    assert!(bare.is_empty(), "unqualified in DDL:\n{}", bare.join("\n"));
}
