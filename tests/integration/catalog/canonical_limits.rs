//! The canonicalizer's limits in a real session (security audit, issue #11, finding 8):
//! `statement_timeout` cancels idem_hash / idem_canonical on large documents of every input
//! kind (jsonb, json, text cast to json) promptly, and a canonical text longer than a text
//! value can hold is 54000 (it was a Rust assertion, XX000) with the session still usable.

use crate::common;

use std::time::{Duration, Instant};

use common::{Client, sqlstate};

crate::own_database!();

/// Documents, each in three columns: `b` jsonb, `t` json, `s` text. Every one takes seconds
/// to canonicalize in a debug build (checked below), each in a different loop: a wide object
/// (member collection and sort), many small objects (the token walk), a long string with
/// escapes (string scan and output). The parser's scans of white space and digits are too
/// fast to time at a reasonable size; crates/idem-canonical/tests/limits.rs counts their
/// checks instead.
const DOCUMENTS: &str = "
    CREATE TABLE docs (name text, b jsonb, t json, s text);
    INSERT INTO docs (name, b)
      SELECT 'wide', pg_catalog.jsonb_object_agg('key-' || g, g) FROM pg_catalog.generate_series(1, 400000) g;
    INSERT INTO docs (name, b)
      SELECT 'many', pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('k', g, 'v', 'xyz'))
        FROM pg_catalog.generate_series(1, 1000000) g;
    INSERT INTO docs (name, b)
      SELECT 'string', pg_catalog.to_jsonb(pg_catalog.repeat('a\"' || pg_catalog.chr(1), 3000000));
    UPDATE docs SET s = b::text, t = b::text::json;
";

const CALLS: [&str; 6] = [
    "idem_hash(b)",
    "idem_hash(t)",
    "idem_hash(s::json)",
    "pg_catalog.length(idem_canonical(b))",
    "pg_catalog.length(idem_canonical(t))",
    "pg_catalog.length(idem_canonical(s::json))",
];

fn timed(db: &mut Client, sql: &str) -> (Result<(), common::Error>, Duration) {
    let started = Instant::now();
    let result = db.batch_execute(sql);
    (result, started.elapsed())
}

#[test]
fn statement_timeout_cancels_canonicalization() {
    let mut db = cluster().database("canon_cancel");
    db.batch_execute(DOCUMENTS).expect("documents");
    let names: Vec<String> = db
        .query("SELECT name FROM docs ORDER BY name", &[])
        .expect("names")
        .iter()
        .map(|row| row.get(0))
        .collect();
    for name in &names {
        // Relative, not absolute: the machine may be idle or loaded. A cancelled call must
        // stop well before the time the whole call takes, which must be long enough to tell.
        let sql =
            format!("SELECT idem_hash(b) FROM docs WHERE name OPERATOR(pg_catalog.=) '{name}'");
        let (result, whole) = timed(&mut db, &sql);
        result.unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert!(
            whole > Duration::from_millis(300),
            "{sql}: the document is too small to test cancellation ({whole:?})"
        );
        // The canonicalizer checks for a cancel every 4096 tokens, every MiB scanned and every
        // MiB of output, each a few milliseconds of work even in a debug build on a busy machine.
        let timeout = (whole / 10).max(Duration::from_millis(20));
        for call in CALLS {
            let sql = format!("SELECT {call} FROM docs WHERE name OPERATOR(pg_catalog.=) '{name}'");
            db.batch_execute(&format!("SET statement_timeout = {}", timeout.as_millis()))
                .expect("timeout");
            let (result, cut) = timed(&mut db, &sql);
            db.batch_execute("RESET statement_timeout").expect("reset");
            eprintln!("{sql}: whole {whole:?}, cancelled after {cut:?}");
            let err = result.expect_err("cancelled");
            assert_eq!(sqlstate(&err), "57014", "{sql}: {err}");
            assert!(
                cut < whole / 2,
                "{sql}: cancelled after {cut:?} (the whole call takes {whole:?})"
            );
        }
    }
}

/// 180 M control characters: 180 MB of jsonb whose canonical text (`\u0001` each) is 1.08 GB,
/// more than a text value holds. It is measured before it is built: 54000, no 1 GB buffer.
#[test]
fn oversized_canonical_text_is_54000_and_the_session_goes_on() {
    let mut db = cluster().database("canon_limit");
    db.batch_execute(
        "CREATE TABLE big AS SELECT pg_catalog.to_jsonb(pg_catalog.repeat(pg_catalog.chr(1), 180000000)) AS b",
    )
    .expect("document");
    let pid: i32 = db
        .query_one("SELECT pg_catalog.pg_backend_pid()", &[])
        .expect("pid")
        .get(0);
    let err = db
        .batch_execute("SELECT pg_catalog.length(idem_canonical(b)) FROM big")
        .expect_err("too large");
    assert_eq!(sqlstate(&err), "54000", "{err}");
    let message = err.as_db_error().map(|e| e.message().to_owned());
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("longer than 1073741819 bytes")),
        "{message:?}"
    );
    // The same session, the same backend: later calls work, hashing the same value included.
    let row = db
        .query_one(
            "SELECT pg_catalog.pg_backend_pid(), idem_canonical('{\"b\":1,\"a\":[2e0]}'::jsonb),
                    pg_catalog.length(idem_hash(b)) FROM big",
            &[],
        )
        .expect("next call");
    assert_eq!(row.get::<_, i32>(0), pid);
    assert_eq!(row.get::<_, String>(1), r#"{"a":[2],"b":1}"#);
    assert_eq!(row.get::<_, i32>(2), 64);
}
