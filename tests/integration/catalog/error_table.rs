//! docs/errors.md, walked: every row's example, run after the page's setup block, raises the
//! row's SQLSTATE with the row's message and writes nothing. Every SQLSTATE the extension
//! raises (src/base/errors.rs, and the `ERRCODE`s of its SQL functions) has a row, or is listed under
//! "Other SQLSTATEs" with its reason; Postgres' own input errors are listed under "Before the
//! call" (catalog/sql_fuzz/ accepts those and nothing else beyond the reference's table).

use crate::common;

use std::collections::BTreeSet;

use common::{Client, fingerprint_sql, sql_block_after, sqlstate};

crate::own_database!();

const PAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/errors.md");

struct Rule {
    function: String,
    rule: String,
    example: String,
    code: String,
    message: String,
}

/// The text between the first pair of backticks of a table cell.
fn code_span(cell: &str) -> Option<String> {
    let start = cell.find('`')? + 1;
    let len = cell[start..].find('`')?;
    Some(cell[start..start + len].to_string())
}

/// Table rows `| function | rule | `example` | `code` | `message` |` of a section.
fn rows(section: &str) -> Vec<Vec<String>> {
    let doc = std::fs::read_to_string(PAGE).expect("docs/errors.md");
    let body = doc
        .split(&format!("\n## {section}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("docs/errors.md has no `## {section}`"));
    let body = body.split("\n## ").next().unwrap_or(body);
    body.lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---") && !l.starts_with("| function"))
        .filter(|l| !l.starts_with("| SQLSTATE") && !l.starts_with("| code"))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

fn rules() -> Vec<Rule> {
    rows("Input rules")
        .into_iter()
        .map(|cells| {
            assert_eq!(cells.len(), 5, "a row of five cells: {cells:?}");
            Rule {
                function: code_span(&cells[0]).unwrap_or_else(|| cells[0].clone()),
                rule: cells[1].clone(),
                example: code_span(&cells[2]).expect("an example in backticks"),
                code: code_span(&cells[3]).expect("a SQLSTATE in backticks"),
                message: code_span(&cells[4]).expect("a message in backticks"),
            }
        })
        .collect()
}

/// The ```sql block under "## Setup".
fn setup_sql() -> String {
    sql_block_after(
        &std::fs::read_to_string(PAGE).expect("docs/errors.md"),
        "\n## Setup\n",
    )
}

fn database() -> Client {
    let mut db = cluster().database("error_table");
    db.batch_execute(&setup_sql())
        .expect("the page's setup block");
    db
}

#[test]
fn every_documented_rule_raises_its_sqlstate_and_writes_nothing() {
    let mut db = database();
    let rules = rules();
    assert!(rules.len() >= 50, "only {} rules", rules.len());
    let fingerprint = fingerprint_sql("public.demo_effects");
    let mut failures = Vec::new();
    for r in &rules {
        assert!(
            r.example.contains(&format!("{}(", r.function)),
            "the example of `{}` ({}) does not call it: {}",
            r.function,
            r.rule,
            r.example
        );
        let before: Option<String> = db.query_one(&fingerprint, &[]).expect("fingerprint").get(0);
        let got = db.query_one(&format!("SELECT ({}) IS NULL", r.example), &[]);
        let after: Option<String> = db.query_one(&fingerprint, &[]).expect("fingerprint").get(0);
        match got {
            Ok(_) => failures.push(format!(
                "{} ({}): `{}` succeeded",
                r.function, r.rule, r.example
            )),
            Err(e) => {
                let message = e
                    .as_db_error()
                    .map(|d| d.message().to_string())
                    .unwrap_or_default();
                if sqlstate(&e) != r.code || message != r.message {
                    failures.push(format!(
                        "{} ({}): `{}` raised {} `{}`; the page says {} `{}`",
                        r.function,
                        r.rule,
                        r.example,
                        sqlstate(&e),
                        message,
                        r.code,
                        r.message
                    ));
                }
            }
        }
        if before != after {
            failures.push(format!(
                "{} ({}): `{}` wrote",
                r.function, r.rule, r.example
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "docs/errors.md:\n{}",
        failures.join("\n")
    );
}

/// Every SQLSTATE of src/base/errors.rs and of the ERRCODEs in sql/.
fn raised_codes() -> BTreeSet<String> {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut codes = BTreeSet::new();
    let errors =
        std::fs::read_to_string(format!("{root}/src/base/errors.rs")).expect("src/base/errors.rs");
    for line in errors.lines().filter(|l| l.starts_with("pub const ")) {
        if let Some(part) = line.split("SqlState(*b\"").nth(1) {
            codes.insert(part[..5].to_string());
        }
    }
    for entry in std::fs::read_dir(format!("{root}/sql")).expect("sql/") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        // Released scripts are frozen history; the current SQL is in the other files.
        if name.starts_with("idempotency--") || !name.ends_with(".sql") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("sql file");
        for part in text.split("ERRCODE = '").skip(1) {
            codes.insert(part[..5].to_string());
        }
    }
    codes
}

#[test]
fn every_sqlstate_the_extension_raises_has_a_row() {
    let documented: BTreeSet<String> = rules().into_iter().map(|r| r.code).collect();
    let exempt: BTreeSet<String> = rows("Other SQLSTATEs")
        .into_iter()
        .map(|cells| code_span(&cells[0]).expect("a SQLSTATE in backticks"))
        .collect();
    let missing: Vec<_> = raised_codes()
        .into_iter()
        .filter(|c| !documented.contains(c) && !exempt.contains(c))
        .collect();
    assert!(
        missing.is_empty(),
        "raised by the extension but not in docs/errors.md: {missing:?}"
    );
    // Every P4xxx has an example of its own, not only an exemption.
    let p4_exempt: Vec<_> = exempt.iter().filter(|c| c.starts_with("P4")).collect();
    assert!(
        p4_exempt.is_empty(),
        "P4xxx codes need an example: {p4_exempt:?}"
    );
}
