//! The nesting limit (idem_canonical::MAX_DEPTH) in both editions: at the limit the same
//! bytes, one level more the same 54001, message and hint, before any other error of the
//! value, for arrays, objects and both mixed, json and jsonb, every function; and documents
//! 10,000 deep (1 MiB) or 100,000 deep refused at once, where the portable walk took minutes.

use std::time::{Duration, Instant};

use idem_canonical::MAX_DEPTH;

use super::{compare, pair};

fn chain(depth: usize, open: &str, close: &str, leaf: &str) -> String {
    format!("{}{leaf}{}", open.repeat(depth), close.repeat(depth))
}

/// Each call on each document, in both editions: equal outcomes (compare), and the native one.
fn outcomes(call: &str, docs: &[String]) -> Vec<String> {
    compare(call, docs);
    let mut guard = pair().lock().unwrap_or_else(|e| e.into_inner());
    let call = call.replace("{s}", "public");
    docs.iter()
        .map(|d| {
            let row = guard
                .native
                .query_one("SELECT public.try_call($1, $2)", &[&call, d])
                .expect("try_call");
            row.get::<_, Option<String>>(0).unwrap_or_default()
        })
        .collect()
}

const CALLS: [&str; 4] = [
    "{s}.idem_canonical($1::jsonb)",
    "{s}.idem_canonical($1::json)",
    "{s}.idem_hash($1::jsonb)",
    "{s}.idem_hash($1::json)",
];

#[test]
fn at_the_limit_and_one_more() {
    let shapes = [("[", "]", 1), ("{\"a\": ", "}", 1), ("[{\"[\": ", "}]", 2)];
    let mut at = Vec::new();
    let mut over = Vec::new();
    for (open, close, per) in shapes {
        for leaf in ["1", "[]", "{}", "\"x\""] {
            let inner = usize::from(leaf.starts_with(['[', '{']));
            let n = (MAX_DEPTH - inner) / per;
            let doc = chain(n, open, close, leaf);
            at.push(doc.clone());
            // wrapped in as many arrays as make it MAX_DEPTH + 1 deep
            let wrap = MAX_DEPTH + 1 - (n * per + inner);
            let doc = chain(wrap, "[", "]", &doc);
            over.push(doc.clone());
            // Other errors in the same value: the depth is named first.
            over.push(format!("[1e400, {{\"d\": 1, \"d\": 2}}, {doc}]"));
        }
    }
    over.push(format!(
        "[\"\\ud800\", \"\\u0000\", {}]",
        chain(MAX_DEPTH, "[", "]", "1")
    ));
    for call in CALLS {
        for (doc, got) in at.iter().zip(outcomes(call, &at)) {
            assert!(!got.starts_with("ERROR"), "{call} on {doc}: {got}");
        }
        for (doc, got) in over.iter().zip(outcomes(call, &over)) {
            if call.contains("jsonb") && doc.contains("ud800") {
                // jsonb input refuses the escape itself, before either edition runs
                assert!(got.starts_with("ERROR 22P02 "), "{call} on {doc}: {got}");
                continue;
            }
            let want = format!(
                "ERROR 54001 JSON value nested deeper than {MAX_DEPTH} levels of arrays and objects |  | \
                 Canonical JSON takes at most {MAX_DEPTH} nested arrays and objects; send a deeper part as a JSON string."
            );
            assert_eq!(got, want, "{call} on {doc}");
        }
    }
    // The fields form checks the whole payload, kept fields or not.
    let docs = vec![format!("{{\"a\": 1, \"b\": {}}}", over[0])];
    let got = outcomes("{s}.idem_hash($1::jsonb, ARRAY['a'])", &docs);
    assert!(got[0].starts_with("ERROR 54001 "), "{got:?}");
}

/// 1 MiB of chains 10,000 deep (the portable walk ran for minutes), and 100,000 deep, which
/// Postgres' own parsers refuse (54001, stack depth) before either edition runs.
#[test]
fn far_too_deep_is_refused_at_once() {
    let deep = chain(10_000, "[", "]", "1");
    let mib = format!("[{}]", vec![deep.as_str(); 52].join(","));
    let docs = vec![
        mib,
        chain(10_000, "{\"a\":", "}", "1"),
        chain(5_000, "[{\"a\":", "}]", "[]"),
        chain(100_000, "[", "]", "1"),
    ];
    for call in CALLS {
        let started = Instant::now();
        for got in outcomes(call, &docs) {
            assert!(got.starts_with("ERROR 54001 "), "{call}: {got:.80}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{call}: {:?} for 2 x 4 refusals",
            started.elapsed()
        );
    }
}

/// idem_call hashes its request first: one nested too deep is 54001 in both editions, and
/// nothing is claimed, run or recorded.
#[test]
fn a_call_with_a_too_deep_request_writes_nothing() {
    let native = super::cluster().database("deep_call_native");
    let portable = crate::portable::install("deep_call_portable");
    for (edition, mut db) in [("native", native), ("portable", portable)] {
        db.batch_execute(
            "CREATE TABLE effects (n int); \
             CREATE FUNCTION eff(r jsonb) RETURNS jsonb LANGUAGE sql \
             AS $$ INSERT INTO effects VALUES (1) RETURNING '{}'::jsonb $$;",
        )
        .expect("callee");
        let deep = chain(MAX_DEPTH + 1, "{\"a\":", "}", "1");
        let err = db
            .query_one(
                "SELECT outcome::text FROM idem_call('s', 'k', $1::text::jsonb, 'eff(jsonb)')",
                &[&deep],
            )
            .expect_err("too deep");
        assert_eq!(crate::common::sqlstate(&err), "54001", "{edition}: {err}");
        let left = crate::common::count(
            &mut db,
            "SELECT (SELECT count(*) FROM idempotency.requests) + (SELECT count(*) FROM effects)",
        );
        assert_eq!(left, 0, "{edition}");
    }
}
