//! The modules of `src/` are the layers docs/architecture.md lists: a module uses (by a
//! `crate::` path, or `super::`/`self::` inside a folder module) only modules of the layers
//! below it, or modules listed after it in its own layer. That rules out import cycles, and it
//! keeps the map and the code from drifting apart: a module missing from the table fails too.
//! Needs no Postgres.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::repo_file;

/// (layer, position in its layer) of every module, from the first `text` block of
/// docs/architecture.md whose lines are `N. module module ...`.
fn layers() -> BTreeMap<String, (usize, usize)> {
    let doc = repo_file("docs/architecture.md");
    let mut table = BTreeMap::new();
    for line in doc.lines() {
        let Some((number, modules)) = line.split_once(". ") else {
            continue;
        };
        let Ok(layer) = number.parse::<usize>() else {
            continue;
        };
        if !modules.split_whitespace().all(|m| {
            m.chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c == ':')
        }) {
            continue;
        }
        for (position, module) in modules.split_whitespace().enumerate() {
            let previous = table.insert(module.to_string(), (layer, position));
            assert!(previous.is_none(), "{module} is listed twice");
        }
    }
    assert!(
        table.len() > 20,
        "the layer table of docs/architecture.md: {table:?}"
    );
    table
}

/// Every module of src/ (but `lib`, `pg_tests` and the bin) and its text, without comments.
fn modules() -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = BTreeMap::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src").flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(&root).expect("under src");
            let first = rel.components().next().expect("a name");
            if ["pg_tests", "bin"]
                .iter()
                .any(|skip| first.as_os_str() == *skip)
            {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || rel == Path::new("lib.rs") {
                continue;
            }
            let name = rel
                .with_extension("")
                .to_string_lossy()
                .trim_end_matches("/mod")
                .replace('/', "::");
            let text = std::fs::read_to_string(&path).expect("read");
            let code: Vec<&str> = text
                .lines()
                .map(|l| l.split("//").next().unwrap_or_default())
                .collect();
            found.insert(name, code.join("\n"));
        }
    }
    found
}

/// The modules `text` (module `name`) uses.
fn uses(name: &str, text: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let folder = name.split("::").next().unwrap_or_default();
    let mut used = BTreeSet::new();
    let mut paths = Vec::new();
    for (prefix, base) in [
        ("crate::", String::new()),
        ("super::", format!("{folder}::")),
    ] {
        for (i, _) in text.match_indices(prefix) {
            let rest = &text[i + prefix.len()..];
            let path: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_' || *c == ':')
                .collect();
            paths.push(format!("{base}{path}"));
        }
    }
    for path in paths {
        let parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
        // The longest prefix that is a module.
        let found = (1..=parts.len())
            .rev()
            .map(|n| parts[..n].join("::"))
            .find(|candidate| known.contains(candidate));
        if let Some(module) = found
            && module != name
            && !name.starts_with(&format!("{module}::"))
        {
            used.insert(module);
        }
    }
    used
}

#[test]
fn modules_use_only_the_layers_below() {
    let table = layers();
    let modules = modules();
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    let listed: BTreeSet<String> = table.keys().cloned().collect();
    assert_eq!(
        known, listed,
        "docs/architecture.md's layer table must list exactly the modules of src/"
    );
    let mut upward = Vec::new();
    for (name, text) in &modules {
        let (layer, position) = table[name];
        for used in uses(name, text, &known) {
            let (their_layer, their_position) = table[&used];
            let below = their_layer > layer || (their_layer == layer && their_position > position);
            if !below {
                upward.push(format!(
                    "{name} (layer {layer}) uses {used} (layer {their_layer})"
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports up the layers:\n{}",
        upward.join("\n")
    );
}
