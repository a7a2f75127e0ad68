//! Paths that exist (issue 35, part 5): every `src/`, `tests/`, `sql/`, `portable/`, `crates/`,
//! `scripts/`, `bench/`, `docs/`, `clients/` or `examples/` path that a doc (`*.md`) or a
//! comment (of `*.rs`, `*.sql`, `*.sh`, `*.py`, `*.js`, `*.ts`, `*.c`, `*.toml`, `.ci/run`) names is a file
//! or folder of the repo. Strings in code are not read: a test's made-up paths live there.
//!
//! A path is looked up from the folder of the file naming it and each folder above, up to the
//! repo's root (a crate's `tests/` folder is its own), or from the folder `../` leads to.
//! `*`, `**`, `<name>` and `{name}` stand for any name; a trailing `/` names a folder. A path a
//! `.gitignore` lists (`bench/.venv`, a packed `*.tgz`) is made by a command, not kept: it
//! passes. Not read: `target/`, `node_modules/`, hidden folders but `.ci/`, the vendored
//! vectors (`tests/vectors/`), and the released scripts, frozen by `sql/released.sha256`.

use std::path::{Path, PathBuf};

use super::comments::{comments, lang};

const ROOTS: [&str; 10] = [
    "src", "tests", "sql", "portable", "crates", "scripts", "bench", "docs", "clients", "examples",
];

/// Every path `text` names: (line, `../` steps before it, the path).
fn named_paths(text: &str) -> Vec<(usize, usize, String)> {
    let path_char = |c: char| c.is_ascii_alphanumeric() || "_-./$".contains(c);
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let rest: String = chars[i..].iter().collect();
            let Some(root) = ROOTS.iter().find(|r| rest.starts_with(&format!("{r}/"))) else {
                i += 1;
                continue;
            };
            // What stands before: nothing of a path, or `./`, or `../` steps.
            let mut start = i;
            let mut ups = 0;
            while start >= 3 && chars[start - 3..start] == ['.', '.', '/'] {
                start -= 3;
                ups += 1;
            }
            if ups == 0 && start >= 2 && chars[start - 2..start] == ['.', '/'] {
                start -= 2;
            }
            if start > 0 && path_char(chars[start - 1]) {
                i += root.len();
                continue;
            }
            let mut j = i;
            while j < chars.len() {
                let c = chars[j];
                if c.is_ascii_alphanumeric() || "_-./*".contains(c) {
                    j += 1;
                } else if let Some(close) = match c {
                    '<' => Some('>'),
                    '{' => Some('}'),
                    _ => None,
                } {
                    let len = chars[j + 1..]
                        .iter()
                        .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                        .count();
                    if len == 0 || chars.get(j + 1 + len) != Some(&close) {
                        break;
                    }
                    j += len + 2;
                } else {
                    break;
                }
            }
            let path: String = chars[i..j].iter().collect();
            found.push((n + 1, ups, path.trim_end_matches('.').to_string()));
            i = j.max(i + 1);
        }
    }
    found
}

/// Whether `name` matches `pattern`, whose `*`, `<x>` and `{x}` stand for any text.
fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        let close = match c {
            '*' => None,
            '<' => Some('>'),
            '{' => Some('}'),
            _ => {
                literal.push(c);
                continue;
            }
        };
        if let Some(close) = close {
            chars.by_ref().find(|c| *c == close);
        }
        parts.push(std::mem::take(&mut literal));
    }
    // parts: the literals before each wildcard; `literal`: the one after the last.
    if parts.is_empty() {
        return pattern == name;
    }
    let (first, middle) = parts.split_first().expect("a wildcard");
    let Some(mut rest) = name.strip_prefix(first.as_str()) else {
        return false;
    };
    for part in middle {
        match rest.find(part.as_str()) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= literal.len() && rest.ends_with(literal.as_str())
}

/// Whether `segments` (a folder, if `dir`) name something under `base`.
fn exists(base: &Path, segments: &[&str], dir: bool) -> bool {
    let Some((first, rest)) = segments.split_first() else {
        return !dir || base.is_dir();
    };
    if *first == "**" {
        return exists(base, rest, dir)
            || children(base)
                .iter()
                .any(|c| c.is_dir() && exists(c, segments, dir));
    }
    if !first.contains(['*', '<', '{']) {
        return exists(&base.join(first), rest, dir) && base.join(first).exists();
    }
    children(base).iter().any(|c| {
        c.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| matches(first, n))
            && exists(c, rest, dir)
    })
}

fn children(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// The patterns of the `.gitignore` files among `files`: (its folder, pattern).
fn ignore_rules(root: &Path, files: &[PathBuf]) -> Vec<(PathBuf, String)> {
    let ignores = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n == ".gitignore"));
    ignores
        .flat_map(|f| {
            let folder = f.parent().unwrap_or(Path::new("")).to_path_buf();
            let text = std::fs::read_to_string(root.join(f)).unwrap_or_default();
            let rules: Vec<(PathBuf, String)> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with(['#', '!']))
                .map(|l| (folder.clone(), l.trim_end_matches('/').to_string()))
                .collect();
            rules
        })
        .collect()
}

/// Whether `rel` (relative to the root), or a folder it is in, is one `rules` ignore.
fn ignored(rules: &[(PathBuf, String)], rel: &Path) -> bool {
    rules.iter().any(|(folder, pattern)| {
        let Ok(rest) = rel.strip_prefix(folder) else {
            return false;
        };
        let names: Vec<&str> = rest.iter().filter_map(|n| n.to_str()).collect();
        let pattern = pattern.trim_start_matches("**/");
        if pattern.contains('/') {
            let parts: Vec<&str> = pattern.trim_start_matches('/').split('/').collect();
            parts.len() <= names.len() && parts.iter().zip(&names).all(|(p, n)| matches(p, n))
        } else {
            names.iter().any(|n| matches(pattern, n))
        }
    })
}

/// The paths the file `rel` (under `root`) names that do not exist, as "file:line: path".
fn missing(root: &Path, rel: &Path, rules: &[(PathBuf, String)]) -> Vec<String> {
    let Some(lang) = lang(rel) else {
        return Vec::new();
    };
    let Ok(text) = std::fs::read_to_string(root.join(rel)) else {
        return Vec::new();
    };
    let folder = rel.parent().unwrap_or(Path::new(""));
    let mut found = Vec::new();
    for (line, ups, path) in named_paths(&comments(lang, &text)) {
        let bases: Vec<PathBuf> = if ups > 0 {
            vec![root.join(folder).join("../".repeat(ups))]
        } else {
            folder.ancestors().map(|a| root.join(a)).collect()
        };
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let made = |b: &PathBuf| {
            b.strip_prefix(root)
                .is_ok_and(|b| ignored(rules, &normal(&b.join(&path))))
        };
        if !bases
            .iter()
            .any(|b| exists(b, &segments, path.ends_with('/')) || made(b))
        {
            found.push(format!(
                "{}:{line}: {}{path}",
                rel.display(),
                "../".repeat(ups)
            ));
        }
    }
    found
}

/// `path` without its `..` steps (`a/b/../c` is `a/c`).
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The files of the repo at `root` the check reads (paths relative to `root`).
fn files(root: &Path) -> Vec<PathBuf> {
    let frozen: Vec<String> = std::fs::read_to_string(root.join("sql/released.sha256"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .last()
                .map(|f| f.trim_start_matches('*').to_string())
        })
        .collect();
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for path in children(&dir) {
            let rel = path
                .strip_prefix(root)
                .expect("under the root")
                .to_path_buf();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                let skipped = ["target", "node_modules", "__pycache__"].contains(&name)
                    || (name.starts_with('.') && name != ".ci")
                    || rel == Path::new("tests/vectors");
                if !skipped {
                    dirs.push(path);
                }
            } else if !frozen
                .iter()
                .any(|f| rel == Path::new("sql").join(f) || rel == Path::new(f))
            {
                found.push(rel);
            }
        }
    }
    found.sort();
    found
}

#[test]
fn every_path_named_in_a_comment_or_doc_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = files(root);
    assert!(files.len() > 100, "the repo's files: {files:?}");
    let rules = ignore_rules(root, &files);
    let missing: Vec<String> = files
        .iter()
        .flat_map(|f| missing(root, f, &rules))
        .collect();
    assert!(
        missing.is_empty(),
        "paths that do not exist:\n{}",
        missing.join("\n")
    );
}

/// Writes `files` (path, text) under a fresh folder and returns what the check finds there.
fn check_planted(files: &[(&str, &str)]) -> Vec<String> {
    let root = std::env::temp_dir().join(format!("idem-paths-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    let files = self::files(&root);
    let rules = ignore_rules(&root, &files);
    let found = files
        .iter()
        .flat_map(|f| missing(&root, f, &rules))
        .collect();
    std::fs::remove_dir_all(&root).expect("clean up");
    found
}

#[test]
fn the_path_check_sees_planted_bad_paths() {
    let found = check_planted(&[
        (".gitignore", "/bench/.venv\n*.tgz\n"),
        (
            "src/a.rs",
            "//! src/b.rs, src/<name>.rs, `src/*.rs`, tests/**/main.rs, ../docs/x.md, bench/.venv\n\
             // see src/gone.rs\n\
             fn f() { let s = \"src/string.rs\"; let r = r#\"\" src/raw.rs\"#; }\n\
             fn g() { let q = '\"'; } // src/after_char.rs, bench/x.tgz\n",
        ),
        ("src/b.rs", ""),
        ("tests/t/main.rs", "/* ../../src/c.rs */"),
        (
            "docs/x.md",
            "`sql/none.sql`, [a](../src/a.rs), `docs/gone/`, `src/b.rs/`, `docs/`.\n",
        ),
        (
            "sql/x.sql",
            "SELECT 'sql/string.sql'; -- sql/missing.sql\n/* src/block.rs\n */\n",
        ),
        (
            "scripts/x.sh",
            "echo \"#\" src/string.rs ${#a} # scripts/gone.sh\n",
        ),
        ("sql/released.sha256", "00  idempotency--0.1.0.sql\n"),
        ("sql/idempotency--0.1.0.sql", "-- src/frozen.rs\n"),
        ("tests/vectors/SOURCE.md", "src/vendored.rs\n"),
    ]);
    assert_eq!(
        found,
        [
            "docs/x.md:1: sql/none.sql",
            "docs/x.md:1: docs/gone/",
            "docs/x.md:1: src/b.rs/",
            "scripts/x.sh:1: scripts/gone.sh",
            "sql/x.sql:1: sql/missing.sql",
            "sql/x.sql:2: src/block.rs",
            "src/a.rs:2: src/gone.rs",
            "src/a.rs:4: src/after_char.rs",
            "tests/t/main.rs:1: ../../src/c.rs",
        ]
    );
}
