//! docs/reference.md and docs/functions.md against the installed catalog: every function (with
//! its exact arguments, defaults and result), type, table, view and setting of the extension
//! has a `###` heading there and every heading is an object; every enum label, composite attribute and column is
//! named in its section; and the SQLSTATE table lists exactly the codes of src/base/errors.rs.

use std::collections::{BTreeMap, BTreeSet};

crate::own_database!();

/// `## section` -> `### `object`` -> body, from docs/reference.md, and from docs/functions.md,
/// whose `##` areas are all section `Functions`.
fn reference() -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (page, every_section) in [("reference.md", None), ("functions.md", Some("Functions"))] {
        let path = format!("{}/docs/{page}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        read_page(&text, every_section, &mut out);
    }
    out
}

fn read_page(
    text: &str,
    every_section: Option<&str>,
    out: &mut BTreeMap<String, BTreeMap<String, String>>,
) {
    let (mut section, mut object) = (every_section.unwrap_or("").to_string(), None::<String>);
    for line in text.lines() {
        if let Some(title) = line.strip_prefix("## ") {
            section = every_section.unwrap_or(title.trim()).to_string();
            object = None;
        } else if let Some(heading) = line.strip_prefix("### ") {
            let name = heading.trim().trim_matches('`').to_string();
            let entries = out.entry(section.clone()).or_default();
            assert!(
                entries.insert(name.clone(), String::new()).is_none(),
                "{name} is listed twice"
            );
            object = Some(name);
        } else if let Some(name) = &object {
            let body = out
                .get_mut(&section)
                .and_then(|s| s.get_mut(name))
                .expect("current object");
            body.push_str(line);
            body.push('\n');
        } else {
            let intro = out.entry(section.clone()).or_default();
            let body = intro.entry(String::new()).or_default();
            body.push_str(line);
            body.push('\n');
        }
    }
}

fn headings(section: &str) -> BTreeSet<String> {
    reference()
        .remove(section)
        .unwrap_or_else(|| panic!("docs/reference.md has no `## {section}`"))
        .into_keys()
        .filter(|k| !k.is_empty())
        .collect()
}

fn assert_same(section: &str, documented: BTreeSet<String>, installed: BTreeSet<String>) {
    let missing: Vec<_> = installed.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&installed).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/reference.md (functions: docs/functions.md) `## {section}`:\n  undocumented: {missing:#?}\n  not installed: {stale:#?}"
    );
}

/// Member objects of the extension, the test-only schema `tests` left out.
const MEMBER: &str = "EXISTS (SELECT FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
    WHERE e.extname = 'idempotency' AND d.deptype = 'e' AND d.classid = CLASS AND d.objid = OBJ)";

fn member(class: &str, obj: &str) -> String {
    MEMBER.replace("CLASS", class).replace("OBJ", obj)
}

#[test]
fn reference_lists_every_function() {
    let sql = format!(
        "SELECT p.proname || '(' || pg_get_function_arguments(p.oid) || ') → ' \
         || pg_get_function_result(p.oid) FROM pg_proc p \
         WHERE {} AND p.pronamespace::regnamespace::text <> 'tests'",
        member("'pg_proc'::regclass", "p.oid")
    );
    let installed = cluster()
        .session()
        .query(&sql, &[])
        .expect("functions")
        .iter()
        .map(|r| r.get(0))
        .collect::<BTreeSet<String>>();
    assert!(installed.len() >= 20, "{installed:?}");
    assert_same("Functions", headings("Functions"), installed);
}

#[test]
fn reference_lists_every_type_with_its_labels_and_attributes() {
    let sql = format!(
        "SELECT format_type(t.oid, NULL), \
         coalesce((SELECT array_agg(enumlabel::text ORDER BY enumsortorder) FROM pg_enum \
                   WHERE enumtypid = t.oid), \
                  (SELECT array_agg(attname::text ORDER BY attnum) FROM pg_attribute \
                   WHERE attrelid = t.typrelid AND attnum > 0 AND NOT attisdropped)) \
         FROM pg_type t WHERE {} AND t.typnamespace::regnamespace::text <> 'tests' \
           AND (t.typtype = 'e' OR (t.typtype = 'c' AND \
                (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c'))",
        member("'pg_type'::regclass", "t.oid")
    );
    let installed: BTreeMap<String, Vec<String>> = cluster()
        .session()
        .query(&sql, &[])
        .expect("types")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_same(
        "Types",
        headings("Types"),
        installed.keys().cloned().collect(),
    );
    let docs = reference().remove("Types").unwrap_or_default();
    for (name, parts) in installed {
        for part in parts {
            assert!(
                docs[&name].contains(&format!("`{part}`")),
                "docs/reference.md, functions.md: {name} does not name `{part}`"
            );
        }
    }
}

#[test]
fn reference_lists_every_table_and_view_with_its_columns() {
    let installed: BTreeMap<String, Vec<String>> = cluster()
        .session()
        .query(
            "SELECT 'idempotency.' || c.relname, \
             (SELECT array_agg(attname::text ORDER BY attnum) FROM pg_attribute \
              WHERE attrelid = c.oid AND attnum > 0 AND NOT attisdropped) \
             FROM pg_class c WHERE c.relnamespace = 'idempotency'::regnamespace \
               AND c.relkind IN ('r', 'p', 'v', 'm')",
            &[],
        )
        .expect("relations")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_same(
        "Tables and views",
        headings("Tables and views"),
        installed.keys().cloned().collect(),
    );
    let docs = reference().remove("Tables and views").unwrap_or_default();
    for (name, columns) in installed {
        for column in columns {
            assert!(
                docs[&name].contains(&format!("`{column}`")),
                "docs/reference.md, functions.md: {name} does not name column `{column}`"
            );
        }
    }
}

#[test]
fn reference_lists_every_setting() {
    let installed = cluster()
        .session()
        .query(
            "SELECT name FROM pg_settings WHERE name LIKE 'idempotency.%'",
            &[],
        )
        .expect("settings")
        .iter()
        .map(|r| r.get(0))
        .collect::<BTreeSet<String>>();
    assert!(!installed.is_empty(), "no idempotency.* settings");
    assert_same("Settings", headings("Settings"), installed);
}

#[test]
fn reference_lists_every_sqlstate() {
    let errors = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/base/errors.rs"));
    let raised: BTreeSet<String> = errors
        .lines()
        .filter(|l| l.trim_start().starts_with("pub const") && l.contains("SqlState(*b\""))
        .filter_map(|l| l.split("SqlState(*b\"").nth(1))
        .map(|rest| rest[..5].to_string())
        .collect();
    assert!(raised.len() >= 20, "{raised:?}");
    let docs = reference().remove("SQLSTATEs").expect("## SQLSTATEs");
    let documented: BTreeSet<String> = docs
        .values()
        .flat_map(|body| body.lines())
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|rest| rest[..5].to_string())
        .collect();
    assert_same("SQLSTATEs", documented, raised);
}
