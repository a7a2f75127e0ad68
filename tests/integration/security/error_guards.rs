//! Errors are raised only in the outermost frame of each C function, after every Rust value of
//! its body is dropped (`args::c_function!`, `errors::raise`; docs/architecture.md).
//!
//! Test builds have fail points (src/base/test_points.rs, `idempotency_test.fail_at =
//! 'POINT:SQLSTATE'`) deep inside the claim, the change of an attempt and `idem_call`, where a
//! direct index scan, a direct writer, an SPI connection and its result rows are alive. For
//! every SQLSTATE the extension raises (src/base/errors.rs) at every point, the call must fail with
//! exactly that SQLSTATE and leave no warning, and the next calls in the same backend must
//! work: a value dropped by a longjmp instead of by Rust would leave a scan, a snapshot or an
//! SPI connection behind for them to trip over.

use crate::common;

use common::{answer, repo_file};

crate::own_database!();

/// Every SQLSTATE of src/base/errors.rs.
fn sqlstates() -> Vec<String> {
    let text = repo_file("src/base/errors.rs");
    let mut codes: Vec<String> = text
        .split("SqlState(*b\"")
        .skip(1)
        .filter_map(|rest| rest.get(..5).map(str::to_string))
        .collect();
    codes.sort();
    codes.dedup();
    assert!(
        codes.len() >= 20,
        "errors.rs lists its SQLSTATEs: {codes:?}"
    );
    codes
}

/// (fail point, statements that reach it with `{k}` a fresh key; the last one hits the point).
const POINTS: &[(&str, &[&str])] = &[
    (
        "claim.direct",
        &["SELECT idem_claim('g', '{k}', 'h')::text"],
    ),
    (
        "claim.sql",
        &[
            "SELECT idem_claim('g', '{k}', 'h', lease => '1 millisecond')::text",
            "SELECT pg_sleep(0.01)::text",
            "SELECT idem_claim('g', '{k}', 'h')::text",
        ],
    ),
    (
        "change.direct",
        &[
            "SELECT idem_claim('g', '{k}', 'h')::text",
            "SELECT idem_complete('g', '{k}', '{}')::text",
        ],
    ),
    (
        "change.sql",
        &[
            "SELECT idem_claim('g', '{k}', 'h')::text",
            "!SET default_transaction_isolation = 'repeatable read'",
            "SELECT idem_complete('g', '{k}', '{}')::text",
        ],
    ),
    (
        "hash.fields",
        &["SELECT idem_hash('{\"a\": \"{k}\"}'::jsonb, ARRAY['a'])"],
    ),
    (
        "call.after_callee",
        &["SELECT (idem_call('g', '{k}', '{}', 'public.echo(jsonb)'::regprocedure)).outcome::text"],
    ),
];

#[test]
fn every_sqlstate_is_raised_after_the_guards_are_dropped() {
    let cluster = cluster();
    let mut admin = cluster.database("error_guards");
    admin
        .batch_execute(
            "CREATE FUNCTION public.echo(r jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT r'",
        )
        .expect("set-up");
    drop(admin);
    let (mut db, notices) = cluster.connect_collecting("error_guards", "postgres");
    let mut n = 0;
    for (point, steps) in POINTS {
        for code in sqlstates() {
            n += 1;
            let key = format!("{point}-{code}-{n}");
            let (last, setup) = steps.split_last().expect("steps");
            for step in setup {
                if let Some(setting) = step.strip_prefix('!') {
                    db.batch_execute(setting).expect(setting);
                    continue;
                }
                let got = answer(&mut db, &step.replace("{k}", &key));
                assert!(!got.starts_with("ERROR"), "{point} {code}: {step}: {got}");
            }
            db.batch_execute(&format!("SET idempotency_test.fail_at = '{point}:{code}'"))
                .expect("set fail_at");
            let got = answer(&mut db, &last.replace("{k}", &key));
            db.batch_execute("RESET ALL").expect("reset");
            assert_eq!(got, format!("ERROR {code}"), "{point} must raise {code}");
            // The same backend goes on: a new claim, its replay, its complete.
            let next = format!("next-{n}");
            let claim = format!("SELECT outcome::text FROM idem_claim('g', '{next}', 'h')");
            assert_eq!(answer(&mut db, &claim), "new_claim", "after {point} {code}");
            assert_eq!(
                answer(&mut db, &claim),
                "processing_active",
                "after {point} {code}"
            );
            let complete = format!("SELECT idem_complete('g', '{next}', '1')::text");
            assert_eq!(answer(&mut db, &complete), "", "after {point} {code}");
            assert_eq!(
                answer(&mut db, &claim),
                "replay_success",
                "after {point} {code}"
            );
            let warned = notices.lock().expect("notices").clone();
            assert!(
                warned.is_empty(),
                "{point} {code} left warnings: {warned:?}"
            );
        }
    }
}

/// The static half: an error becomes a Postgres ERROR (a longjmp) only in an entry point's
/// outermost frame. `errors::raise` is called only by `OrRaise::or_raise`, and `or_raise()` only
/// in `args::c_function!`, in a `#[pg_extern]` function, or in an `extern "C-unwind"` entry
/// point, never deeper, where Rust values with destructors would be jumped over.
#[test]
fn errors_are_raised_only_by_entry_points() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut dirs = vec![root.clone()];
    let mut wrong = Vec::new();
    let mut seen = 0;
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src").flatten() {
            let path = entry.path();
            if path.is_dir() {
                if !path.ends_with("pg_tests") {
                    dirs.push(path);
                }
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            // Test modules at the end of a file may raise as they like.
            let code = text
                .split("#[cfg(any(test, feature = \"pg_test\"))]\n#[pgrx::pg_schema]")
                .next()
                .unwrap_or_default();
            let code = code
                .split("#[cfg(test)]\nmod tests")
                .next()
                .unwrap_or_default();
            let lines: Vec<&str> = code.lines().collect();
            let name = path.strip_prefix(&root).expect("src").display().to_string();
            for (i, line) in lines.iter().enumerate() {
                let line = line.split("//").next().unwrap_or_default();
                if line.contains("raise(")
                    && !line.contains("or_raise")
                    && !line.contains("fn raise")
                    && name != "base/errors.rs"
                {
                    wrong.push(format!("{name}:{}: calls errors::raise", i + 1));
                }
                if !line.contains("or_raise(") || line.contains("fn or_raise") {
                    continue;
                }
                seen += 1;
                if name == "steps/args.rs" {
                    continue; // c_function!'s outermost frame
                }
                // The function this line is in, and the attributes above it.
                let Some(start) = (0..=i).rev().find(|&j| {
                    let l = lines[j].trim_start();
                    l.starts_with("fn ")
                        || l.starts_with("pub fn ")
                        || l.starts_with("pub extern ")
                        || l.starts_with("pub(crate) fn ")
                }) else {
                    wrong.push(format!("{name}:{}: or_raise outside a function", i + 1));
                    continue;
                };
                let attributes = lines[start.saturating_sub(4)..start].join("\n");
                let pg_extern = attributes.contains("#[pg_extern");
                let entry = lines[start].contains("extern \"C-unwind\"") || pg_extern;
                if !entry {
                    wrong.push(format!(
                        "{name}:{}: or_raise in {}",
                        i + 1,
                        lines[start].trim()
                    ));
                }
                if pg_extern {
                    for owned in owned_arguments(&lines[start..=i]) {
                        if !dropped_before(&lines[start..i], &owned) {
                            wrong.push(format!(
                                "{name}:{}: or_raise while argument `{owned}` (which has a \
                                 destructor) is alive",
                                i + 1
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(seen >= 10, "or_raise call sites found: {seen}");
    assert!(
        wrong.is_empty(),
        "errors raised below the outermost frame:\n{}",
        wrong.join("\n")
    );
}

/// Argument types of a `#[pg_extern]` that own nothing (no destructor): borrowed bytes of a
/// datum, and plain numbers. Any other argument (pgrx's `Array`, `String`, `JsonB`, ...) must
/// be dropped before the function raises.
const BORROWED: &[&str] = &[
    "TextBytes<",
    "JsonbBytes<",
    "JsonBytes<",
    "VarlenaBytes<",
    "i16",
    "i32",
    "i64",
    "bool",
    "f64",
    "Option<i32>",
    "default!(Option<i32>",
];

/// The names of the arguments of the function whose lines start at `lines[0]` that own
/// something with a destructor.
fn owned_arguments(lines: &[&str]) -> Vec<String> {
    let text = lines.join("\n");
    let Some(open) = text.find('(') else {
        return Vec::new();
    };
    // The parameter list ends at the `)` that closes the first `(`.
    let mut depth = 0;
    let mut end = open;
    for (k, c) in text[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    end = open + k;
                    break;
                }
            }
            _ => {}
        }
    }
    let params = &text[open + 1..end];
    let mut owned = Vec::new();
    // Split on top-level commas only (types contain `<'_, &str>`).
    let (mut depth, mut from) = (0i32, 0);
    let mut pieces = Vec::new();
    for (k, c) in params.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ',' if depth == 0 => {
                pieces.push(&params[from..k]);
                from = k + 1;
            }
            _ => {}
        }
    }
    pieces.push(&params[from..]);
    for piece in pieces {
        let Some((name, ty)) = piece.split_once(':') else {
            continue;
        };
        let (name, ty) = (name.trim(), ty.trim());
        if !name.is_empty() && !BORROWED.iter().any(|b| ty.starts_with(b)) {
            owned.push(name.to_string());
        }
    }
    owned
}

/// Whether one of `lines` is the statement `drop(owned);` (code, not a comment).
fn dropped_before(lines: &[&str], owned: &str) -> bool {
    let statement = format!("drop({owned});");
    lines.iter().any(|l| {
        let code = l.split("//").next().unwrap_or_default().trim();
        code == statement
    })
}

#[test]
fn a_drop_counts_only_as_code() {
    assert!(dropped_before(&["    drop(fields);"], "fields"));
    assert!(dropped_before(
        &["    drop(fields); // before raising"],
        "fields"
    ));
    for line in [
        "    // drop(fields);",
        "    /// drop(fields);",
        "    let x = 1; // drop(fields);",
        "    maybe_drop(fields);",
        "    drop(fields_too);",
    ] {
        assert!(!dropped_before(&[line], "fields"), "{line}");
    }
}

#[test]
fn the_owned_argument_check_sees_an_array() {
    let lines = [
        "fn f(payload: JsonbBytes<'_>, fields: Array<'_, &str>) -> String {",
        "    g(&fields).or_raise()",
    ];
    assert_eq!(owned_arguments(&lines), vec!["fields".to_string()]);
    let lines = ["fn f(batch: default!(Option<i32>, 10000)) -> i64 {"];
    assert!(owned_arguments(&lines).is_empty());
}
