//! The `idem_metrics()` counters are the cluster's, so a test that compares them
//! (`fixtures::direct_paths`) is wrong as soon as any other test writes in the same cluster
//! meanwhile (CI, pg17: `writes_direct` 3 where 2 were made, while an upgrade test that held no
//! turn claimed a key). Every test of a module on `common::counted_cluster` therefore starts by
//! taking `common::counted_turn()`, and holds it to its end.

use std::path::Path;

const MARK: &str = "own_database!(crate::common::counted_cluster)";

/// The `#[test]` functions of `source` whose first statement (after `use` lines) does not take
/// the turn.
fn without_turn(source: &str) -> Vec<String> {
    let mut missing = Vec::new();
    for part in source.split("#[test]").skip(1) {
        let mut lines = part.lines().map(str::trim).filter(|l| !l.is_empty());
        let Some(signature) = lines.find(|l| l.starts_with("fn ")) else {
            continue;
        };
        let first = lines.find(|l| !l.starts_with("use ") && !l.starts_with("//"));
        if !first.is_some_and(|l| l.starts_with("let _turn = common::counted_turn();")) {
            missing.push(signature.to_string());
        }
    }
    missing
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_test_on_the_counted_cluster_holds_the_turn() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("tests/integration"), &mut files);
    rust_files(&root.join("tests/clusters"), &mut files);
    let mut counted = 0;
    let mut missing = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("read a test file");
        if !source.contains(MARK) {
            continue;
        }
        counted += 1;
        for f in without_turn(&source) {
            missing.push(format!(
                "{}: {f}",
                file.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(
        counted >= 3,
        "only {counted} modules use the counted cluster"
    );
    assert!(
        missing.is_empty(),
        "tests on the counted cluster that do not start with \
         `let _turn = common::counted_turn();`:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_test_without_the_turn_is_found() {
    let planted = "#[test]\nfn a() {\n    use x::y;\n    let _turn = common::counted_turn();\n}\n\
                   #[test]\nfn b() {\n    let mut c = cluster().session();\n    let _turn = common::counted_turn();\n}\n";
    assert_eq!(without_turn(planted), ["fn b() {"]);
}
