//! The unreleased upgrade script is derived (issue 35, part 3), as paradedb derives its own
//! from the schema: sql/upgrade/<from>--<to>.sql holds what only a person can write (tables,
//! data, dropped signatures, grants to roles that exist), and its line `-- @functions` becomes
//! every function of sql/ whose declaration differs from the released install script's, as its
//! file declares it (CREATE OR REPLACE), with the COMMENT, REVOKE and GRANT statements that
//! follow it there. pgrx installs sql/idempotency--<from>--<to>.sql as committed: it must be
//! exactly that derivation, which `IDEM_BLESS=1 cargo test --test layers upgrade` writes.
//! In this binary because it needs no server.

use std::collections::BTreeSet;

const TEMPLATE: &str = "sql/upgrade/0.1.0--0.2.0.sql";
const UPGRADE: &str = "sql/idempotency--0.1.0--0.2.0.sql";
const RELEASED: &str = "sql/idempotency--0.1.0.sql";
const MARKER: &str = "-- @functions\n";

/// `text` cut after each `;` outside comments, quotes and dollar quotes; the last piece is
/// what follows the last `;`.
fn statements(text: &str) -> Vec<&str> {
    let (b, mut out, mut start, mut i) = (text.as_bytes(), Vec::new(), 0, 0);
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("--") {
            i += rest.find('\n').map_or(rest.len(), |n| n + 1);
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |n| n + 2);
        } else if b[i] == b'"' {
            i += 1 + rest[1..].find('"').map_or(rest.len() - 1, |n| n + 1);
        } else if b[i] == b'\'' {
            // E'...' takes backslash escapes; '' is a quote in either.
            let escapes = i > 0 && b[i - 1].eq_ignore_ascii_case(&b'e');
            let mut j = i + 1;
            while j < b.len() && (b[j] != b'\'' || b.get(j + 1) == Some(&b'\'')) {
                j += if b[j] == b'\'' || (escapes && b[j] == b'\\') {
                    2
                } else {
                    1
                };
            }
            i = j + 1;
        } else if let Some(tag) = dollar_tag(rest) {
            let close = rest[tag.len()..].find(tag).expect("closing dollar quote");
            i += 2 * tag.len() + close;
        } else {
            if b[i] == b';' {
                out.push(&text[start..=i]);
                start = i + 1;
            }
            i += 1;
        }
    }
    out.push(&text[start..]);
    out
}

/// `$tag$` at the start of `s`.
fn dollar_tag(s: &str) -> Option<&str> {
    let body = s.strip_prefix('$')?;
    let end = body.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
    (body[end..].starts_with('$') && !body[..end].starts_with(|c: char| c.is_ascii_digit()))
        .then(|| &s[..end + 2])
}

/// A statement without its comment lines, whitespace collapsed: what it does.
fn code(statement: &str) -> String {
    let lines = statement
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"));
    let text = lines.collect::<Vec<_>>().join(" ");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The statement as written, its leading blank and comment lines dropped.
fn written(statement: &str) -> &str {
    let mut s = statement.trim_start();
    while s.starts_with("--") {
        s = s[s.find('\n').map_or(s.len(), |n| n + 1)..].trim_start();
    }
    s
}

/// The sql/ files in install order: as src/entry/schema.rs loads them.
fn install_order() -> Vec<String> {
    let schema = super::repo_file("src/entry/schema.rs");
    schema
        .split("\"../../")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(str::to_string)
        .collect()
}

/// The statements of a file: each function's (its CREATE and the COMMENT, REVOKE and GRANT
/// statements right after it that name it), and the rest.
fn split(text: &str) -> (Vec<Vec<&str>>, Vec<&str>) {
    let (list, mut functions, mut rest) = (statements(text), Vec::new(), Vec::new());
    let mut k = 0;
    while k < list.len() {
        let c = code(list[k]);
        let Some(name) = c
            .strip_prefix("CREATE FUNCTION ")
            .or_else(|| c.strip_prefix("CREATE OR REPLACE FUNCTION "))
        else {
            if !c.is_empty() {
                rest.push(list[k]);
            }
            k += 1;
            continue;
        };
        let name = name[..name.find('(').expect("(")].trim().to_string();
        let mut group = vec![list[k]];
        k += 1;
        while let Some(next) = list.get(k).map(|s| code(s)) {
            let on = |p: &str| next.starts_with(p) && next.contains(&format!("FUNCTION {name}"));
            if !(on("COMMENT ON FUNCTION ") || on("REVOKE ") || on("GRANT ")) {
                break;
            }
            group.push(list[k]);
            k += 1;
        }
        functions.push(group);
    }
    (functions, rest)
}

/// The generated part: every function of `sources` (in order) not declared as in `released`.
fn functions(sources: &[(String, String)], released: &str) -> String {
    let as_created = |c: String| c.replacen("CREATE OR REPLACE FUNCTION ", "CREATE FUNCTION ", 1);
    let old: BTreeSet<String> = statements(released)
        .into_iter()
        .map(|s| as_created(code(s)))
        .collect();
    let mut out = String::from(
        "-- ==== Derived from sql/ (tests/layers/upgrade_script.rs): every function whose declaration\n\
         -- differs from sql/idempotency--0.1.0.sql's. Edit sql/, never this part.\n",
    );
    for (file, text) in sources {
        let mut part = String::new();
        for group in split(text).0 {
            // Derived when its CREATE, COMMENT, REVOKE or GRANT is not 0.1.0's.
            if group.iter().all(|s| old.contains(&as_created(code(s)))) {
                continue;
            }
            let create = written(group[0]);
            let create = match create.strip_prefix("CREATE FUNCTION ") {
                Some(rest) => format!("CREATE OR REPLACE FUNCTION {rest}"),
                None => create.to_string(),
            };
            part += &format!("\n{create}\n");
            for s in &group[1..] {
                part += &format!("{}\n", written(s));
            }
        }
        if !part.is_empty() {
            out += &format!("\n-- {file}{part}");
        }
    }
    out + "-- ==== End of the derived part.\n"
}

/// `template` with its `-- @functions` line derived, and each `-- @rest sql/<file>.sql` line
/// replaced by that file's statements other than its functions (a file that is run again).
fn derive(template: &str, sources: &[(String, String)], released: &str) -> String {
    assert_eq!(template.matches(MARKER).count(), 1, "one {MARKER}");
    let mut out = String::new();
    for line in template.split_inclusive('\n') {
        if line == MARKER {
            out += &functions(sources, released);
        } else if let Some(file) = line.strip_prefix("-- @rest ").map(str::trim) {
            let (_, text) = sources
                .iter()
                .find(|(f, _)| f == file)
                .expect("@rest of a sql/ file");
            let rest: Vec<&str> = split(text).1.iter().map(|s| s.trim_matches('\n')).collect();
            out += &format!(
                "-- ==== Derived: the rest of {file}, run again.\n{}\n",
                rest.join("\n\n")
            );
        } else {
            out += line;
        }
    }
    out
}

fn derived() -> String {
    let sources: Vec<(String, String)> = install_order()
        .into_iter()
        .map(|f| {
            let text = super::repo_file(&f);
            (f, text)
        })
        .collect();
    derive(
        &super::repo_file(TEMPLATE),
        &sources,
        &super::repo_file(RELEASED),
    )
}

#[test]
fn the_upgrade_script_is_derived_from_sql() {
    let want = format!(
        "-- Derived from {TEMPLATE} and sql/ by tests/layers/upgrade_script.rs: edit those.\n{}",
        derived()
    );
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(UPGRADE);
    if std::env::var_os("IDEM_BLESS").is_some() {
        std::fs::write(&path, &want).expect("write the upgrade script");
    }
    assert!(
        super::repo_file(UPGRADE) == want,
        "{UPGRADE} is not derived from {TEMPLATE} and sql/: run \
         IDEM_BLESS=1 cargo test --no-default-features --features \"pg16 pg_test\" --test layers upgrade"
    );
}

#[test]
fn only_changed_functions_are_derived_with_their_grants() {
    let released = "CREATE FUNCTION s.kept(a int) RETURNS int LANGUAGE sql AS $$ SELECT a; $$;\n\
                    COMMENT ON FUNCTION s.kept(int) IS 'k;';\n";
    let source = "-- about kept\nCREATE FUNCTION s.kept(a int)\n  RETURNS int LANGUAGE sql AS $$ SELECT a; $$;\n\
                  COMMENT ON FUNCTION s.kept(int) IS 'k;';\n\
                  CREATE FUNCTION s.new(a int) RETURNS int LANGUAGE sql AS $q$ SELECT 1; $q$;\n\
                  REVOKE ALL ON FUNCTION s.new(int) FROM PUBLIC;\n\
                  COMMENT ON FUNCTION s.new(int) IS 'it''s; new';\n\
                  REVOKE ALL ON FUNCTION s.other(int) FROM PUBLIC;\n";
    let got = functions(&[("sql/a.sql".into(), source.into())], released);
    let body: Vec<&str> = got
        .lines()
        .skip(2)
        .filter(|l| !l.starts_with("-- ===="))
        .collect();
    assert_eq!(
        body,
        [
            "",
            "-- sql/a.sql",
            "CREATE OR REPLACE FUNCTION s.new(a int) RETURNS int LANGUAGE sql AS $q$ SELECT 1; $q$;",
            "REVOKE ALL ON FUNCTION s.new(int) FROM PUBLIC;",
            "COMMENT ON FUNCTION s.new(int) IS 'it''s; new';",
        ]
    );
    // A changed comment derives its function again, as does a changed body.
    let commented = functions(
        &[("sql/a.sql".into(), source.replace("IS 'k;'", "IS 'k2'"))],
        released,
    );
    assert!(commented.contains("CREATE OR REPLACE FUNCTION s.kept(a int)"));
    let changed = functions(
        &[(
            "sql/a.sql".into(),
            source.replace("SELECT a;", "SELECT a + 1;"),
        )],
        released,
    );
    assert!(changed.contains("CREATE OR REPLACE FUNCTION s.kept(a int)"));
    assert!(changed.contains("COMMENT ON FUNCTION s.kept(int) IS 'k;';"));
}

#[test]
fn the_splitter_skips_what_is_not_code() {
    let text = "SELECT E'a\\';' ; SELECT \"x;y\" ; /* ; */ SELECT $t$;$t$; -- ;\nSELECT 1;";
    let codes: Vec<String> = statements(text).into_iter().map(code).collect();
    assert_eq!(
        codes,
        [
            "SELECT E'a\\';' ;",
            "SELECT \"x;y\" ;",
            "/* ; */ SELECT $t$;$t$;",
            "SELECT 1;",
            ""
        ]
    );
}

#[test]
fn a_rest_line_is_the_files_other_statements() {
    let source = "CREATE FUNCTION s.f() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$;\n\
                  COMMENT ON FUNCTION s.f() IS 'f';\n\n-- why\nDO $d$ BEGIN NULL; END $d$;\n";
    let sources = [("sql/a.sql".to_string(), source.to_string())];
    let got = derive("a\n-- @functions\n-- @rest sql/a.sql\nb\n", &sources, "");
    assert!(got.starts_with("a\n-- ==== Derived from sql/"), "{got}");
    assert!(got.contains("CREATE OR REPLACE FUNCTION s.f()"), "{got}");
    assert!(
        got.ends_with(
            "-- ==== Derived: the rest of sql/a.sql, run again.\n-- why\nDO $d$ BEGIN NULL; END $d$;\nb\n"
        ),
        "{got}"
    );
}

/// The statement of `sql` that starts with `start`, through its `;`, whitespace collapsed.
fn statement(sql: &str, start: &str) -> Option<String> {
    let at = sql.find(start)?;
    let end = at + sql[at..].find(';')?;
    Some(
        sql[at..=end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// The CDC secret's table and its first row are written three times (the install, the
/// portable edition's update, the upgrade script): the same statements in each.
#[test]
fn the_cdc_secret_is_made_alike_everywhere() {
    let source = super::repo_file("sql/cdc.sql");
    for copy in [TEMPLATE, "portable/cdc_update.sql"] {
        let text = super::repo_file(copy);
        for start in [
            "CREATE TABLE idempotency.cdc_secret (",
            "REVOKE ALL ON idempotency.cdc_secret FROM PUBLIC;",
            "INSERT INTO idempotency.cdc_secret (secret)",
        ] {
            let want = statement(&source, start).expect("in sql/cdc.sql");
            assert_eq!(statement(&text, start), Some(want), "{copy}: {start}");
        }
    }
}
