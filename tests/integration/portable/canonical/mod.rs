//! The portable edition's pure functions (portable/canonical.sql, portable/lock_key.sql)
//! against the native ones, in one cluster: database `pc_native` has the extension (functions
//! in `public`), `pc_portable` runs the script (functions in schema `idempotency`). Results,
//! SQLSTATEs, messages, DETAILs and HINTs must be byte-identical on the RFC 8785 vectors, the
//! ECMAScript number corpus, edge cases and 20,000 seeded random documents; idem_lock_key on
//! random (scope, key) pairs of every XXH3 length class; and the portable functions never run
//! look-alikes planted on the caller's search_path (special.rs).

use crate::common;

use common::Client;

crate::own_database!();
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::OnceLock;

mod depth;
mod fast;
mod lists;
mod random;
mod special;

use random::{any_char, random_doc};

/// The pure functions of the portable edition (`scripts/portable.sh --pure`: sql/canonical.sql
/// with the bodies of portable/canonical.sql and portable/lock_key.sql, in schema idempotency),
/// generated when the tests run, so that a mutation of them needs no build.
fn script() -> &'static str {
    static SCRIPT: OnceLock<String> = OnceLock::new();
    SCRIPT.get_or_init(|| common::portable_script(&["--pure"]))
}

/// In each database, `try_call(sql_call, arg)`: the call's result, or its error as
/// `ERROR <sqlstate> <message> | <detail> | <hint>`. Test scaffolding, not part of either edition.
const TRY_CALL: &str = r#"
CREATE FUNCTION public.try_call(call text, arg text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE result text; state text; msg text; detail text; hint text;
BEGIN
    EXECUTE pg_catalog.format('SELECT (%s)::text', call) INTO result USING arg;
    RETURN result;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
        detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RETURN pg_catalog.concat_ws(' ', 'ERROR', state, msg, '|', detail, '|', hint);
END $$;
"#;

struct Pair {
    native: Client,
    portable: Client,
}

fn pair() -> &'static std::sync::Mutex<Pair> {
    static PAIR: OnceLock<std::sync::Mutex<Pair>> = OnceLock::new();
    PAIR.get_or_init(|| {
        let c = cluster();
        let mut native = c.database("pc_native");
        native.batch_execute(TRY_CALL).expect("try_call (native)");
        let mut portable = c.empty_database("pc_portable");
        portable
            .batch_execute("CREATE SCHEMA idempotency")
            .expect("schema");
        portable
            .batch_execute(script())
            .expect("scripts/portable.sh --pure");
        portable
            .batch_execute(TRY_CALL)
            .expect("try_call (portable)");
        std::sync::Mutex::new(Pair { native, portable })
    })
}

/// `call` is an expression of `$1` (text) with `{s}.` where the schema goes, e.g.
/// `{s}.idem_canonical($1::jsonb)`. Returns how many arguments were compared.
fn compare(call: &str, args: &[String]) -> usize {
    compare_with("", call, args)
}

/// [`compare`], each session first running `setup` (a `SET`), reset at the end.
fn compare_with(setup: &str, call: &str, args: &[String]) -> usize {
    let mut guard = pair().lock().unwrap_or_else(|e| e.into_inner());
    let p = &mut *guard;
    let sql = "SELECT public.try_call($1, a) FROM pg_catalog.unnest($2::text[]) WITH ORDINALITY u(a, i) ORDER BY i";
    for db in [&mut p.native, &mut p.portable] {
        db.batch_execute(setup).expect("setup");
    }
    for chunk in args.chunks(250) {
        let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let run = |db: &mut Client, schema: &str| -> Vec<Option<String>> {
            let call = call.replace("{s}", schema);
            db.query(sql, &[&call, &chunk])
                .unwrap_or_else(|e| panic!("{call}: {e}"))
                .iter()
                .map(|r| r.get(0))
                .collect()
        };
        let native = run(&mut p.native, "public");
        let portable = run(&mut p.portable, "idempotency");
        for ((arg, n), q) in chunk.iter().zip(&native).zip(&portable) {
            assert_eq!(
                n, q,
                "{call} on {arg:?}: native (left) and portable (right) differ"
            );
        }
    }
    for db in [&mut p.native, &mut p.portable] {
        db.batch_execute("RESET standard_conforming_strings")
            .expect("reset");
    }
    args.len()
}

/// With `standard_conforming_strings` off a plain literal's backslashes are escapes, and a
/// PL/pgSQL body is parsed with the caller's setting: every path must still give the native
/// bytes (the walk's bytea steps, the json form's string patterns, the U+0000 refusal).
#[test]
fn nonstandard_strings() {
    let cases = [
        r#"{"b": 1, "a": [1.50]}"#.to_string(),
        r#"["\\", "a\"b", {"\\": 1, "a": 2}]"#.to_string(),
        r#"{"a": "\ud800"}"#.to_string(),
        r#"["\u0000", "a"]"#.to_string(),
        r#"["x", 1e400]"#.to_string(),
        // Over 4 kB: a list of arrays, and a list of records with a nested column.
        format!("[{}[0, 1.50]]", "[1, 1.50], ".repeat(400)),
        format!(
            "[{}{{}}]",
            r#"{"id": 7, "amount": 1.50, "n": {"b": [1], "a": "\\"}}, "#.repeat(100)
        ),
    ];
    let off = "SET standard_conforming_strings = off";
    let n = compare_with(off, "{s}.idem_canonical($1::jsonb)", &cases);
    compare_with(off, "{s}.idem_canonical($1::json)", &cases);
    compare_with(off, "{s}.idem_hash($1::jsonb)", &cases);
    eprintln!("nonstandard_strings: {n} documents");
}

fn read_dir_sorted(dir: &str) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    files
}

#[test]
fn rfc8785_vectors() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut count = 0;
    for dir in [
        format!("{root}/tests/vectors/jcs"),
        format!("{root}/../shared/jcs-vectors"),
    ] {
        if !std::path::Path::new(&dir).exists() {
            assert!(dir.contains("shared"), "{dir} is missing");
            continue;
        }
        for input in read_dir_sorted(&format!("{dir}/input")) {
            let text = std::fs::read_to_string(&input).expect("input");
            let name = input
                .file_name()
                .expect("name")
                .to_string_lossy()
                .to_string();
            let expected = std::fs::read_to_string(format!("{dir}/output/{name}")).expect("output");
            let args = vec![text];
            for call in [
                "{s}.idem_canonical($1::jsonb)",
                "{s}.idem_canonical($1::json)",
            ] {
                compare(call, &args);
                let mut guard = pair().lock().unwrap_or_else(|e| e.into_inner());
                let got: Option<String> = guard
                    .portable
                    .query_one(
                        "SELECT public.try_call($1, $2)",
                        &[&call.replace("{s}", "idempotency"), &args[0]],
                    )
                    .expect("portable")
                    .get(0);
                assert_eq!(
                    got.as_deref(),
                    Some(expected.trim_end_matches('\n')),
                    "{name} {call}"
                );
            }
            compare("{s}.idem_hash($1::jsonb)", &args);
            compare("{s}.idem_hash($1::json)", &args);
            count += 1;
        }
    }
    assert!(count >= 6, "{count} vectors");
    eprintln!("rfc8785_vectors: {count} vector files, each through json and jsonb");
}

#[test]
fn ecmascript_number_corpus() {
    let corpus = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/idem-canonical/tests/data/es6-numbers.txt"
    ));
    let mut plain = Vec::new();
    let mut long = Vec::new();
    for line in corpus.lines() {
        let (bits, text) = line.split_once(',').expect("bits,text");
        let v = f64::from_bits(u64::from_str_radix(bits, 16).expect("hex"));
        if !v.is_finite() {
            continue;
        }
        plain.push(text.to_string());
        // 17 significant digits: the double's own digits, rounded back by the functions.
        long.push(format!("{v:.16e}"));
    }
    let numbers = plain.len();
    let docs: Vec<String> = plain
        .chunks(100)
        .chain(long.chunks(100))
        .map(|c| format!("[{}]", c.join(",")))
        .collect();
    compare("{s}.idem_canonical($1::jsonb)", &docs);
    compare("{s}.idem_canonical($1::json)", &docs);
    eprintln!("ecmascript_number_corpus: {numbers} numbers, each in two spellings");
}

#[test]
fn edge_cases() {
    let mut cases: Vec<String> = [
        r#"{"\uD800\uDC00": 1, "\uDBFF\uDFFF": 2, "\uD7FF": 3, "\uE000": 4, "\uFFFF": 5, "\uFFFE": 6, "a": 7, "": 8}"#,
        r#"["\uD800\uDC00", "\uDBFF\uDFFF", "\uD7FF", "\uE000", "\uFFFF", "\u007f", "\u2028\u2029", "/"]"#,
        r#"{"\uDBFF\uDFFF\u0001": 1, "\uDBFF\uDFFF": 2, "\uDBFF\uDFFF\uE000": 3, "\uFFFF\uDBFF\uDFFF": 4, "\uE000\uD800\uDC00": 5}"#,
        r#"["\u0000", "\u001f\b\t\n\f\r\"\\", "\\u0000", "\\\u0000"]"#,
        r#"["\u0001\u001f\b\t\n\f\r\"\\", "\\u0000"]"#,
        r#"{"\u0000": 1, "\u0000a": 2, "": 3, "a\u0000": 4}"#,
        "{}", "[]", "[{}, [], [[]], {\"a\": {}}]", "\"\"", "null", "true", "false",
        "-0", "-0.0", "0.000", "1e21", "1e20", "999999999999999999999", "1e-7", "0.000001", "1e-6",
        "5e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "1e-400", "-1e-400",
        "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308",
        "1e400", "-1.8e308", "[1, 1e400]", "[1E400]", "123456789012345678901234567890e300",
        "9007199254740993", "12345678901234567890", "4.50", "1.0", "0.1e1", "100", "1e2", "-1e-7",
        "123.456e-10", "0.30000000000000004", "1e15", "1e16", "123456789012345.6",
        r#"{"a": 1, "a": 2}"#, r#"[{"b": {"x": 1, "x": 2}}, {"a": 1, "a": 2}]"#,
        r#"{"z": {"q": 1, "q": 2}, "a": {"p": 1, "p": 2}}"#,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Wide, and deep: arrays and objects nested as deep as allowed (more: depth.rs).
    cases.push(format!(
        "{{{}}}",
        (0..3000)
            .map(|i| format!("\"k{i}\": {i}"))
            .collect::<Vec<_>>()
            .join(",")
    ));
    let max = idem_canonical::MAX_DEPTH;
    cases.push(format!("{}1{}", "[".repeat(max), "]".repeat(max)));
    cases.push(format!("{}1{}", "{\"a\":".repeat(max), "}".repeat(max)));
    cases.push(format!("\"{}\"", "x\\\"\\u0001".repeat(10000)));
    // Element paths take 1 byte below position 240 and 5 from there: order across the switch.
    cases.push(format!(
        "[{}]",
        (0..600)
            .map(|i| format!("[{i}, {{\"k\": [{i}, []]}}]"))
            .collect::<Vec<_>>()
            .join(",")
    ));
    let n = compare("{s}.idem_canonical($1::jsonb)", &cases);
    compare("{s}.idem_canonical($1::json)", &cases);
    compare("{s}.idem_hash($1::jsonb)", &cases);
    compare("{s}.idem_hash($1::json)", &cases);
    // The fields form: filtering, absent and repeated names, and its own errors.
    let docs = r#"{"a": 1, "b": [2], "c": {"d": 3}, "é": 4}|[1]|1|{}|"s""#;
    let docs: Vec<String> = docs.split('|').map(String::from).collect();
    let fields = "ARRAY['a','c']|ARRAY['a','a','zz','é']|ARRAY[]::text[]|ARRAY['a', NULL]";
    for fields in fields.split('|') {
        compare(&format!("{{s}}.idem_hash($1::jsonb, {fields})"), &docs);
    }
    eprintln!("edge_cases: {n} documents");
}

/// A lone surrogate escape in json (jsonb input refuses it itself): 22P05 and the same message,
/// naming the first lone escape and its byte offset, in both editions.
#[test]
fn lone_surrogates_in_json() {
    let cases: Vec<String> = [
        r#""\ud800""#,
        r#""\udc00""#,
        r#"["\ud800\udc00", "ab\\\ud800x"]"#,
        r#"{"\uDBFF": 1}"#,
        r#""\\ud800""#,
        r#""\ud800\ud800\udc00""#,
        r#""é\ud800""#,
        r#"{"a": 1, "a": "\udfff"}"#,
        r#"[1e400, "\ud800"]"#,
        r#"["1e400", "\ud800"]"#,
        r#"{"x\"1e999": 1, "a": "z\ud800"}"#,
        r#"["\ud800", 1e400]"#,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    compare("{s}.idem_canonical($1::json)", &cases);
    compare("{s}.idem_hash($1::json)", &cases);
}

#[test]
fn random_corpus() {
    let mut rng = StdRng::seed_from_u64(0x1D3_0021);
    let docs: Vec<String> = (0..20_000)
        .map(|_| {
            let mut s = String::new();
            random_doc(&mut rng, 0, &mut s);
            s
        })
        .collect();
    let started = std::time::Instant::now();
    compare("{s}.idem_canonical($1::jsonb)", &docs);
    let json: Vec<String> = docs.iter().step_by(2).cloned().collect();
    compare("{s}.idem_canonical($1::json)", &json);
    let hashed: Vec<String> = docs.iter().step_by(5).cloned().collect();
    compare("{s}.idem_hash($1::jsonb)", &hashed);
    eprintln!(
        "random_corpus: {} documents (jsonb), {} (json), {} hashed, {:?}",
        docs.len(),
        json.len(),
        hashed.len(),
        started.elapsed()
    );
}

#[test]
fn lock_keys() {
    let mut rng = StdRng::seed_from_u64(21);
    let mut args = Vec::new();
    // Every XXH3 length class (4..8, 9..16, 17..128, 129..240, and past 240 with several
    // 1 KiB blocks), in ASCII and multi-byte text.
    for len in (0..300).chain([1000, 1020, 1021, 1024, 1025, 2048, 2049, 5000]) {
        let scope: String = (0..rng.random_range(0..4))
            .map(|_| any_char(&mut rng))
            .collect();
        let key: String = (0..len).map(|_| any_char(&mut rng)).collect();
        args.push(serde_json::json!([scope, key]).to_string());
    }
    compare("{s}.idem_lock_key($1::jsonb->>0, $1::jsonb->>1)", &args);
    compare("{s}.idem_lock_key($1::jsonb->>1)", &args);
    eprintln!("lock_keys: {} (scope, key) pairs", args.len());
}
