//! The layer check on made-up modules: each test plants one kind of use and asserts the check
//! sees it (or rightly ignores it).

use std::collections::BTreeMap;

use super::{misplaced, parse_layers, parse_table, violations};

/// The check itself, on made-up modules: layer 1 `top`, layer 2 `mid` and `mid::low`, layer 3
/// `base` and the crate `ext`.
fn check(module: &str, source: &str) -> Vec<String> {
    let table = parse_table("1. top\n2. mid mid::low\n3. base ext\n");
    let mut modules: BTreeMap<String, String> =
        table.keys().map(|m| (m.clone(), String::new())).collect();
    modules.insert(module.to_string(), source.to_string());
    violations(&table, &modules)
}

#[test]
fn the_check_sees_grouped_imports() {
    assert_eq!(
        check("mid", "use crate::{base, mid::low};"),
        Vec::<String>::new()
    );
    assert_eq!(
        check("mid", "use crate::{base::{self, x}, top::{Y as Z}};"),
        ["mid (layer 2) uses top (layer 1)"]
    );
    assert_eq!(
        check("base", "use crate::{*, mid::*};"),
        ["base (layer 3) uses mid (layer 2)"]
    );
    assert_eq!(
        check("base", "use ::ext::A; use top;"),
        ["base (layer 3) uses top (layer 1)"]
    );
}

#[test]
fn the_check_sees_paths_in_macros_and_attributes() {
    assert_eq!(
        check("base", r#"fn f() { println!("{}", crate::top::X); }"#),
        ["base (layer 3) uses top (layer 1)"]
    );
    assert_eq!(
        check(
            "base",
            "some_sql!(\"f.sql\", requires = [\"b\", top::idem_f]);"
        ),
        ["base (layer 3) uses top (layer 1)"]
    );
    assert_eq!(
        check(
            "base",
            "#[cfg_attr(test, doc = \"x\")] #[my(with = mid::low::f)] fn f() {}"
        ),
        ["base (layer 3) uses mid::low (layer 2)"]
    );
    assert_eq!(
        check("base", "fn f() { vec![(1, Some(::top::g()))]; }"),
        ["base (layer 3) uses top (layer 1)"]
    );
    assert_eq!(
        check("top", "fn f() { m!(crate::mid::low::f, base::g); }"),
        Vec::<String>::new()
    );
}

#[test]
fn the_check_resolves_relative_paths() {
    // `super::` from a folder's module, from an inline module, and `self::`.
    assert_eq!(
        check("mid::low", "fn f() { super::g(); }"),
        ["mid::low (layer 2) uses mid (layer 2)"]
    );
    assert_eq!(
        check("base", "mod tests { use super::super::top; }"),
        ["base (layer 3) uses top (layer 1)"]
    );
    assert_eq!(
        check("base", "mod tests { use super::*; fn f() { self::g(); } }"),
        Vec::<String>::new()
    );
    assert_eq!(
        check("mid", "pub use self::low::F; fn f() { low::g(); }"),
        Vec::<String>::new()
    );
    // A bare path: the child module if there is one, else the top-level module.
    let table = parse_table("1. top::low\n2. top\n");
    let mut modules = BTreeMap::from([("top::low".to_string(), String::new())]);
    modules.insert("top".into(), "fn f() { low::g(); }".into());
    assert_eq!(
        violations(&table, &modules),
        ["top (layer 2) uses top::low (layer 1)"]
    );
    assert_eq!(
        check("base", "fn f() { let t = mid::low::T; t.f(); }"),
        ["base (layer 3) uses mid::low (layer 2)"]
    );
    // Not ours: other crates' paths and names that are no module.
    assert_eq!(
        check(
            "base",
            "use std::fmt; fn f() { pgrx::pg_sys::x(); Status::A; }"
        ),
        Vec::<String>::new()
    );
}

#[test]
fn the_check_sees_a_file_in_the_wrong_folder() {
    let (table, folders) = parse_layers("1. top/ top top::a\n2. base/ base base::b\n");
    let mut modules: BTreeMap<String, String> =
        table.keys().map(|m| (m.clone(), String::new())).collect();
    assert_eq!(misplaced(&table, &folders, &modules), Vec::<String>::new());
    // base/b.rs moved to top/, and a new file at the top of src/.
    modules.remove("base::b");
    modules.insert("top::b".into(), String::new());
    modules.insert("loose".into(), String::new());
    let found = misplaced(&table, &folders, &modules);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].starts_with("src/loose.rs (module loose)"),
        "{found:?}"
    );
    assert!(
        found[1].starts_with("src/top/b.rs (module top::b)"),
        "{found:?}"
    );
    // A module listed in a layer whose folder it is not in.
    let listed = std::panic::catch_unwind(|| parse_layers("1. top/ top::a base::c\n"));
    assert!(listed.is_err(), "base::c listed under top/");
}
