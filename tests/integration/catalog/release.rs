//! Released scripts are frozen: `sql/released.sha256` lists the sha256 of every install and
//! upgrade script of a released version (`sha256sum` format, so `cd sql && sha256sum -c
//! released.sha256` checks it too), and this test fails when one of them changes or goes
//! missing. It also checks that the scripts in sql/ form an update path from every released
//! version to this build's (docs/releasing.md).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use sha2::{Digest, Sha256};

const EXT: &str = "idempotency";
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn sql_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sql")
}

/// `released.sha256`: file name -> sha256 in hex.
fn released() -> BTreeMap<String, String> {
    let list =
        std::fs::read_to_string(sql_dir().join("released.sha256")).expect("sql/released.sha256");
    list.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let (sum, name) = line
                .split_once("  ")
                .unwrap_or_else(|| panic!("not `SHA256  FILE`: {line:?}"));
            (name.to_string(), sum.to_string())
        })
        .collect()
}

/// The versioned scripts in sql/: `idempotency--V.sql` and `idempotency--A--B.sql`.
fn scripts() -> BTreeSet<String> {
    std::fs::read_dir(sql_dir())
        .expect("sql/")
        .map(|entry| {
            entry
                .expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.starts_with(&format!("{EXT}--")) && name.ends_with(".sql"))
        .collect()
}

/// `idempotency--A--B.sql` -> (A, B); `idempotency--V.sql` -> (V, V).
fn versions_of(name: &str) -> (String, String) {
    let middle = &name[EXT.len() + 2..name.len() - 4];
    match middle.split_once("--") {
        Some((from, to)) => (from.to_string(), to.to_string()),
        None => (middle.to_string(), middle.to_string()),
    }
}

#[test]
fn released_scripts_are_unchanged() {
    let released = released();
    assert!(
        released.contains_key("idempotency--0.1.0.sql"),
        "0.1.0's install script must stay listed"
    );
    for (name, sum) in &released {
        let text = std::fs::read(sql_dir().join(name))
            .unwrap_or_else(|e| panic!("released script {name} is gone: {e}"));
        let actual = format!("{:x}", Sha256::digest(&text));
        assert_eq!(
            &actual, sum,
            "{name} was edited after its release: never edit a released script, write an \
             upgrade script instead (docs/releasing.md)"
        );
    }
}

#[test]
fn only_this_versions_upgrade_script_is_unreleased() {
    let released = released();
    for name in scripts() {
        if released.contains_key(&name) {
            continue;
        }
        let (from, to) = versions_of(&name);
        assert!(
            from != to && to == VERSION,
            "{name} is not in sql/released.sha256, but only the upgrade script to this \
             version ({VERSION}) may be unreleased; `cargo pgrx` generates this version's \
             install script, so sql/ must not hold one"
        );
    }
}

#[test]
fn every_released_version_updates_to_this_one() {
    let edges: Vec<(String, String)> = scripts()
        .iter()
        .map(|name| versions_of(name))
        .filter(|(from, to)| from != to)
        .collect();
    let installable: BTreeSet<String> = released()
        .keys()
        .map(|name| versions_of(name))
        .filter(|(from, to)| from == to)
        .map(|(v, _)| v)
        .collect();
    for start in installable {
        // Breadth-first over the upgrade scripts, as Postgres looks for an update path.
        let mut seen = BTreeSet::from([start.clone()]);
        let mut frontier = vec![start.clone()];
        while let Some(v) = frontier.pop() {
            for (from, to) in &edges {
                if *from == v && seen.insert(to.clone()) {
                    frontier.push(to.clone());
                }
            }
        }
        assert!(
            seen.contains(VERSION),
            "no chain of sql/{EXT}--A--B.sql scripts from {start} to {VERSION}"
        );
    }
}

#[test]
fn meta_json_is_valid_pgxn_metadata_of_this_version() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/META.json");
    let text = std::fs::read_to_string(path).expect("META.json");
    let meta: serde_json::Value = serde_json::from_str(&text).expect("META.json is JSON");
    let spec = pgxn_meta::valid::Validator::new()
        .validate(&meta)
        .unwrap_or_else(|e| panic!("META.json is not valid PGXN metadata: {e}"));
    assert_eq!(spec, 1, "META.json follows meta spec 1.0.0");
    assert_eq!(meta["version"], VERSION, "META.json version");
    assert_eq!(
        meta["provides"][EXT]["version"], VERSION,
        "META.json provides.{EXT}.version"
    );
}
