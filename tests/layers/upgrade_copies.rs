//! The unreleased upgrade script's copies (issue 35, part 3): every `CREATE [OR REPLACE]
//! FUNCTION` of sql/idempotency--0.1.0--0.2.0.sql whose name a sql/*.sql source also creates
//! is the source's statement word for word (`OR REPLACE` aside), through its body's closing
//! `;`. In this binary because it needs no server.

use std::collections::BTreeMap;

const UPGRADE: &str = "sql/idempotency--0.1.0--0.2.0.sql";

/// name -> the CREATE FUNCTION statements of that name, `OR REPLACE` dropped.
fn functions(sql: &str) -> BTreeMap<String, Vec<String>> {
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut rest = sql;
    while let Some(at) = rest.find("\nCREATE ") {
        rest = &rest[at + 1..];
        let head = rest.replacen("CREATE OR REPLACE FUNCTION ", "CREATE FUNCTION ", 1);
        let Some(after) = head.strip_prefix("CREATE FUNCTION ") else {
            rest = &rest[1..];
            continue;
        };
        let name = after[..after.find('(').expect("(")].trim().to_string();
        let semi = head.find(';').expect(";");
        let end = match head.find('$').filter(|open| *open < semi) {
            // No dollar-quoted body (LANGUAGE c): the statement ends at its `;`.
            None => semi + 1,
            Some(open) => {
                let tag_end = open + 1 + head[open + 1..].find('$').expect("tag");
                let tag = &head[open..=tag_end];
                let close = tag_end + 1 + head[tag_end + 1..].find(tag).expect("closing tag");
                close + head[close..].find(';').expect(";") + 1
            }
        };
        found.entry(name).or_default().push(head[..end].to_string());
        rest = &rest[1..];
    }
    found
}

/// Each copy in `upgrade` that differs from its source, by name.
fn differing(upgrade: &str, sources: &[(String, String)]) -> Vec<String> {
    let copies = functions(upgrade);
    let mut out = Vec::new();
    for (file, text) in sources {
        for (name, statements) in functions(text) {
            if let Some(copied) = copies.get(&name) {
                for c in copied {
                    if !statements.contains(c) {
                        out.push(format!("{name} differs from {file}"));
                    }
                }
            }
        }
    }
    out
}

fn sources() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("sql/").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".sql") && !name.starts_with("idempotency--") {
            let text = std::fs::read_to_string(entry.path()).expect("read");
            out.push((format!("sql/{name}"), text));
        }
    }
    out
}

#[test]
fn the_upgrade_copies_equal_their_sources() {
    let upgrade = super::repo_file(UPGRADE);
    let sources = sources();
    let checked: usize = sources
        .iter()
        .map(|(_, t)| {
            functions(t)
                .keys()
                .filter(|n| functions(&upgrade).contains_key(*n))
                .count()
        })
        .sum();
    assert!(
        checked >= 25,
        "only {checked} copies found: the parser lost them"
    );
    let found = differing(&upgrade, &sources);
    assert!(found.is_empty(), "{UPGRADE}:\n{}", found.join("\n"));
}

#[test]
fn a_changed_copy_fails() {
    let source = "x\nCREATE FUNCTION s.f(a int) RETURNS int LANGUAGE sql AS $$ SELECT a $$;\n";
    let copy =
        "x\nCREATE OR REPLACE FUNCTION s.f(a int) RETURNS int LANGUAGE sql AS $$ SELECT a $$;\n";
    let sources = [("sql/f.sql".to_string(), source.to_string())];
    assert!(differing(copy, &sources).is_empty());
    let changed = copy.replace("SELECT a", "SELECT a + 1");
    assert_eq!(
        differing(&changed, &sources),
        vec!["s.f differs from sql/f.sql"]
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
    for copy in [UPGRADE, "portable/cdc_update.sql"] {
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
