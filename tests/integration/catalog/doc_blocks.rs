//! Every ```sql block of README.md and docs/*.md runs as documented: one fresh database per file
//! (with the extension, unless the file's own blocks create it), the file's blocks in order,
//! each block as one batch (one implicit transaction unless it says BEGIN / COMMIT). A failing
//! block fails the test with its file, line and error.
//!
//! A block that cannot run as it stands says so in its fence, with the reason:
//! ```` ```sql no-run (needs pg_cron) ````. GitHub still renders it as SQL. The roles that the
//! grant examples name are created first (roles belong to the cluster; the pages say so).

use crate::common;

use std::path::{Path, PathBuf};

use common::sqlstate;

crate::own_database!();
use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

/// The roles the documented grants name.
const ROLES: &[&str] = &["app", "publisher", "ops", "grafana"];

struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    text: String,
    /// `Some(reason)` for a block marked `no-run`.
    no_run: Option<String>,
}

fn line_of(doc: &str, offset: usize) -> usize {
    doc[..offset].matches('\n').count() + 1
}

/// The fenced `sql` blocks of a markdown text. Panics on an unknown fence attribute or a
/// `no-run` without a reason, and on an untagged block that looks like SQL, so that no block
/// is skipped by accident.
fn sql_blocks(file: &str, doc: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Option<(Block, String)> = None;
    for (event, range) in Parser::new(doc).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let line = line_of(doc, range.start);
                let mut words = info.split_whitespace();
                let lang = words.next().unwrap_or("");
                let no_run = match words.next() {
                    None => None,
                    Some("no-run") => {
                        let reason = words.collect::<Vec<_>>().join(" ");
                        assert!(
                            !reason.is_empty(),
                            "{file}:{line}: `no-run` needs a reason in the fence"
                        );
                        Some(reason)
                    }
                    Some(other) if lang == "sql" => {
                        panic!("{file}:{line}: unknown fence attribute `{other}`")
                    }
                    Some(_) => None,
                };
                let block = Block {
                    line,
                    text: String::new(),
                    no_run,
                };
                current = Some((block, lang.to_string()));
            }
            Event::Text(text) => {
                if let Some((block, _)) = current.as_mut() {
                    block.text.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((block, lang)) = current.take() {
                    if lang == "sql" {
                        blocks.push(block);
                    } else if lang.is_empty() {
                        let upper = block.text.to_uppercase();
                        assert!(
                            !["SELECT ", "CREATE ", "ALTER ", "GRANT "]
                                .iter()
                                .any(|word| upper
                                    .lines()
                                    .any(|l| l.trim_start().starts_with(word))),
                            "{file}:{}: an untagged code block with SQL in it: tag it ```sql",
                            block.line
                        );
                    }
                }
            }
            _ => {}
        }
    }
    blocks
}

fn doc_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The line in the markdown file of a 1-based character position in a block.
fn error_line(block: &Block, position: usize) -> usize {
    let before: String = block
        .text
        .chars()
        .take(position.saturating_sub(1))
        .collect();
    block.line + 1 + before.matches('\n').count()
}

fn describe(err: &postgres::Error, block: &Block) -> String {
    match err.as_db_error() {
        Some(db) => {
            let line = match db.position() {
                Some(postgres::error::ErrorPosition::Original(pos)) => {
                    format!(" (at line {})", error_line(block, *pos as usize))
                }
                _ => String::new(),
            };
            format!("{} {}{line}", sqlstate(err), db.message())
        }
        None => err.to_string(),
    }
}

#[test]
fn doc_blocks_every_sql_block_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut admin = cluster().connect("postgres");
    for role in ROLES {
        admin
            .batch_execute(&format!("CREATE ROLE {role}"))
            .unwrap_or_else(|e| panic!("create role {role}: {e}"));
    }
    let (mut ran, mut marked, mut failures) = (0usize, Vec::new(), Vec::new());
    for path in doc_files() {
        let file = path
            .strip_prefix(root)
            .expect("under the crate")
            .display()
            .to_string();
        let doc = std::fs::read_to_string(&path).expect("read a doc");
        let blocks = sql_blocks(&file, &doc);
        let (runnable, skipped): (Vec<&Block>, Vec<&Block>) =
            blocks.iter().partition(|b| b.no_run.is_none());
        for block in &skipped {
            marked.push(format!(
                "{file}:{}: {}",
                block.line,
                block.no_run.as_deref().unwrap_or_default()
            ));
        }
        if runnable.is_empty() {
            continue;
        }
        let dbname = format!(
            "doc_{}",
            file.trim_end_matches(".md")
                .replace(|c: char| !c.is_ascii_alphanumeric(), "_")
                .to_lowercase()
        );
        admin
            .batch_execute(&format!("CREATE DATABASE {dbname}"))
            .unwrap_or_else(|e| panic!("create database {dbname}: {e}"));
        let mut db = cluster().connect(&dbname);
        let creates_it = runnable.iter().any(|b| {
            b.text
                .to_uppercase()
                .contains("CREATE EXTENSION IDEMPOTENCY")
        });
        if !creates_it {
            db.batch_execute("CREATE EXTENSION idempotency")
                .expect("create extension");
        }
        for block in runnable {
            match db.batch_execute(&block.text) {
                Ok(()) => ran += 1,
                Err(err) => {
                    failures.push(format!(
                        "{file}:{}: {}\n{}",
                        block.line,
                        describe(&err, block),
                        block.text
                    ));
                    // Later blocks of the page may build on this one.
                    break;
                }
            }
        }
    }
    println!(
        "doc blocks: {ran} ran, {} marked no-run:\n  {}",
        marked.len(),
        marked.join("\n  ")
    );
    assert!(
        failures.is_empty(),
        "{} doc block(s) failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(ran > 0, "no sql block ran");
}
