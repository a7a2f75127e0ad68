//! The portable edition's pure functions (portable/canonical.sql) against the native ones, in
//! one cluster: database `pc_native` has the extension (functions in `public`), `pc_portable`
//! runs the script (functions in schema `idempotency`). Results, SQLSTATEs, messages, DETAILs
//! and HINTs must be byte-identical on the RFC 8785 vectors, the ECMAScript number corpus,
//! edge cases and 20,000 seeded random documents; idem_lock_key on random (scope, key) pairs of
//! every XXH3 length class; and the portable functions never run look-alikes planted on the
//! caller's search_path.

mod common;

use common::{Client, cluster};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::OnceLock;

const SCRIPT: &str = include_str!("../portable/canonical.sql");

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
            .batch_execute(SCRIPT)
            .expect("portable/canonical.sql");
        portable
            .batch_execute(TRY_CALL)
            .expect("try_call (portable)");
        std::sync::Mutex::new(Pair { native, portable })
    })
}

/// `call` is an expression of `$1` (text) with `{s}.` where the schema goes, e.g.
/// `{s}.idem_canonical($1::jsonb)`. Returns how many arguments were compared.
fn compare(call: &str, args: &[String]) -> usize {
    let mut guard = pair().lock().unwrap_or_else(|e| e.into_inner());
    let p = &mut *guard;
    let sql = "SELECT public.try_call($1, a) FROM pg_catalog.unnest($2::text[]) WITH ORDINALITY u(a, i) ORDER BY i";
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
    args.len()
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
    let corpus = include_str!("../crates/idem-canonical/tests/data/es6-numbers.txt");
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
    // Wide, and deep: arrays and objects nested 1,000 levels.
    cases.push(format!(
        "{{{}}}",
        (0..3000)
            .map(|i| format!("\"k{i}\": {i}"))
            .collect::<Vec<_>>()
            .join(",")
    ));
    cases.push(format!("{}1{}", "[".repeat(1000), "]".repeat(1000)));
    cases.push(format!("{}1{}", "{\"a\":".repeat(1000), "}".repeat(1000)));
    cases.push(format!("\"{}\"", "x\\\"\\u0001".repeat(10000)));
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

/// A JSON text: random structure, names and strings from pools that hit the UTF-16 order's
/// corners, escapes in several spellings, numbers across the double range.
fn random_doc(rng: &mut StdRng, depth: u32, out: &mut String) {
    let kind = if depth >= 4 {
        rng.random_range(0..4)
    } else {
        rng.random_range(0..7)
    };
    match kind {
        0 => out.push_str(["null", "true", "false"][rng.random_range(0..3)]),
        1 | 2 => random_number(rng, out),
        3 => random_string(rng, out),
        4 => {
            out.push('[');
            for i in 0..rng.random_range(0..5) {
                if i > 0 {
                    out.push_str(if rng.random_bool(0.5) { "," } else { " , " });
                }
                random_doc(rng, depth + 1, out);
            }
            out.push(']');
        }
        _ => {
            out.push('{');
            let mut names = std::collections::HashSet::new();
            for _ in 0..rng.random_range(0..7) {
                let mut name = String::new();
                random_string(rng, &mut name);
                let decoded: serde_json::Value = serde_json::from_str(&name).expect("name");
                if !names.insert(decoded.as_str().expect("str").to_string()) {
                    continue;
                }
                if names.len() > 1 {
                    out.push(',');
                }
                out.push_str(&name);
                out.push_str(if rng.random_bool(0.5) { ":" } else { " : " });
                random_doc(rng, depth + 1, out);
            }
            out.push('}');
        }
    }
}

fn random_number(rng: &mut StdRng, out: &mut String) {
    if rng.random_bool(0.5) {
        out.push('-');
    }
    match rng.random_range(0..4) {
        0 => out.push_str(&rng.random_range(0..100_000u64).to_string()),
        1 => out.push_str(&format!(
            "{}",
            rng.random::<f64>() * 10f64.powi(rng.random_range(-8..22))
        )),
        2 => out.push_str(&format!(
            "{:e}",
            f64::from_bits(rng.random_range(0..0x7FEF_FFFF_FFFF_FFFFu64))
        )),
        _ => {
            let digits: String = (0..rng.random_range(1..30))
                .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
                .collect();
            let digits = digits.trim_start_matches('0');
            out.push_str(if digits.is_empty() { "0" } else { digits });
            if rng.random_bool(0.5) {
                out.push_str(&format!(".{}", rng.random_range(0..1_000_000u32)));
            }
            out.push_str(&format!("e{}", rng.random_range(-340..300)));
        }
    }
}

/// Characters that hit the corners: escapes, controls, U+007F, U+2028, the last before the
/// surrogates, U+E000..U+FFFF, and characters above U+FFFF up to U+10FFFF.
const CHARS: &str =
    "abZ0 \"\\/\u{1}\n\u{1f}\u{7f}éß€\u{2028}\u{d7ff}\u{e000}\u{fffd}\u{ffff}\u{10000}😂\u{10ffff}";

fn any_char(rng: &mut StdRng) -> char {
    let n = CHARS.chars().count();
    CHARS.chars().nth(rng.random_range(0..n)).expect("char")
}

fn random_string(rng: &mut StdRng, out: &mut String) {
    out.push('"');
    for _ in 0..rng.random_range(0..6) {
        let c = any_char(rng);
        let escape = rng.random_bool(0.3);
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || escape => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{:04X}", u));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
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

/// The body of every planted look-alike.
const PLANTED: &str = "$$ BEGIN RAISE EXCEPTION 'planted look-alike ran'; END $$";

#[test]
fn planted_lookalikes_never_run() {
    let c = cluster();
    let mut db = c.empty_database("pc_hostile");
    db.batch_execute("CREATE SCHEMA idempotency")
        .expect("schema");
    db.batch_execute(SCRIPT).expect("script");
    // Look-alikes of everything the functions call, each of which fails loudly if run.
    let mut plant = String::new();
    // name(argument types) result type, of every function the portable code calls
    let functions = "jsonb_typeof(jsonb) text; json_typeof(json) text; length(text) int4; \
        octet_length(text) int4; chr(int4) text; to_json(text) json; ltrim(text, text) text; \
        rtrim(text, text) text; strpos(text, text) int4; starts_with(text, text) bool; \
        replace(text, text, text) text; regexp_replace(text, text, text, text) text; \
        convert_to(text, name) bytea; convert_from(bytea, name) text; sha256(bytea) bytea; \
        encode(bytea, text) text; decode(text, text) bytea; int4send(int4) bytea; \
        substr(text, int4, int4) text; reverse(text) text; lpad(text, int4, text) text; \
        to_hex(int8) text; to_hex(int4) text; split_part(text, text, int4) text; \
        abs(numeric) numeric; div(numeric, numeric) numeric; left(text, int4) text; \
        repeat(text, int4) text; array_position(text[], text) int4; cardinality(int4[]) int4";
    for f in functions.split("; ") {
        let (signature, ret) = f.rsplit_once(' ').expect("signature result");
        plant.push_str(&format!(
            "CREATE FUNCTION public.{signature} RETURNS {ret} LANGUAGE plpgsql AS {PLANTED};\n"
        ));
    }
    plant.push_str(&format!(
        "CREATE FUNCTION public.planted_sfunc(text, text, text) RETURNS text LANGUAGE plpgsql AS {PLANTED};\n\
         CREATE AGGREGATE public.string_agg(text, text) (SFUNC = public.planted_sfunc, STYPE = text);\n"
    ));
    // operator left right result
    let operators = "= text text bool; <> text text bool; || text text text; || bytea bytea bytea; \
        + int4 int4 int4; - int4 int4 int4; * int4 int4 int4; / int4 int4 int4; <= int4 int4 bool; \
        < int4 int4 bool; > int4 int4 bool; = int4 int4 bool; # int8 int8 int8; & int8 int8 int8; \
        >> int8 int4 int8; << int8 int4 int8; | int8 int8 int8; + numeric numeric numeric; \
        * numeric numeric numeric; % numeric numeric numeric; < numeric numeric bool; \
        > numeric numeric bool; >= numeric numeric bool; = int8 int8 bool; < int8 int8 bool";
    for (i, o) in operators.split("; ").enumerate() {
        let [op, l, r, ret]: [&str; 4] = o
            .split(' ')
            .collect::<Vec<_>>()
            .try_into()
            .expect("4 words");
        plant.push_str(&format!(
            "CREATE FUNCTION public.planted_op_{i}({l}, {r}) RETURNS {ret} LANGUAGE plpgsql AS {PLANTED};\n\
             CREATE OPERATOR public.{op} (LEFTARG = {l}, RIGHTARG = {r}, FUNCTION = public.planted_op_{i});\n"
        ));
    }
    db.batch_execute(&plant).expect("plant look-alikes");
    db.batch_execute(
        "DROP ROLE IF EXISTS pc_caller; CREATE ROLE pc_caller LOGIN;
         GRANT USAGE ON SCHEMA idempotency TO pc_caller;",
    )
    .expect("role");
    let mut caller = c.connect_as("pc_hostile", "pc_caller");
    caller
        .batch_execute("SET search_path = public, pg_catalog, idempotency")
        .expect("search_path");
    // The planted operators do run when the caller's own SQL uses them unqualified.
    let err = caller
        .batch_execute("SELECT 'a'::text || 'b'::text")
        .expect_err("planted ||");
    let message = err
        .as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_default();
    assert_eq!(message, "planted look-alike ran", "{err:?}");
    let doc = r#"{"b": [1.50, 1e21, 1e-7, 12345678901234567890, "\u0001é😂"], "\uE000": null, "😂": {}, "a": true}"#;
    let calls = [
        (
            "idempotency.idem_canonical($1::text::pg_catalog.jsonb)",
            "{\"a\":true,\"b\":[1.5,1e+21,1e-7,12345678901234567000,\"\\u0001é😂\"],\"😂\":{},\"\u{e000}\":null}",
        ),
        (
            "idempotency.idem_canonical($1::text::pg_catalog.json)",
            "{\"a\":true,\"b\":[1.5,1e+21,1e-7,12345678901234567000,\"\\u0001é😂\"],\"😂\":{},\"\u{e000}\":null}",
        ),
        ("idempotency.idem_hash($1::text::pg_catalog.jsonb)", ""),
        ("idempotency.idem_hash($1::text::pg_catalog.json)", ""),
        (
            "idempotency.idem_hash($1::text::pg_catalog.jsonb, ARRAY['a', 'b']::pg_catalog.text[])",
            "",
        ),
        ("idempotency.idem_lock_key($1::text)::pg_catalog.text", ""),
        (
            "idempotency.idem_lock_key('payments'::pg_catalog.text, pg_catalog.repeat($1::text, 9))::pg_catalog.text",
            "",
        ),
    ];
    for (call, expected) in calls {
        let got: String = caller
            .query_one(&format!("SELECT {call}"), &[&doc])
            .unwrap_or_else(|e| panic!("{call} with look-alikes planted: {e:?}"))
            .get(0);
        if !expected.is_empty() {
            assert_eq!(got, expected, "{call}");
        }
    }
    let sum: String = caller
        .query_one(
            "SELECT idempotency.idem_hash('[1e400]'::pg_catalog.jsonb)",
            &[],
        )
        .map(|r| r.get(0))
        .unwrap_or_else(|e| {
            e.as_db_error()
                .map(|d| d.message().to_string())
                .unwrap_or_default()
        });
    assert_eq!(
        sum,
        "JSON number 1e400 is out of range for an IEEE 754 double"
    );
}

/// The documented exception (docs/portable-canonical.md): a json value with both a \u0000 and
/// a \u0001 escape is refused by the portable idem_canonical(json) with 0A000, where the
/// native function canonicalizes it. The jsonb forms cannot hold U+0000 at all.
#[test]
fn json_with_nul_and_soh_is_refused() {
    let mut guard = pair().lock().unwrap_or_else(|e| e.into_inner());
    let doc = r#"["\u0000", "\u0001"]"#;
    let native: String = guard
        .native
        .query_one("SELECT public.idem_canonical($1::text::json)", &[&doc])
        .expect("native")
        .get(0);
    assert_eq!(native, r#"["\u0000","\u0001"]"#);
    let err = guard
        .portable
        .query_one("SELECT idempotency.idem_canonical($1::text::json)", &[&doc])
        .expect_err("portable refuses");
    assert_eq!(common::sqlstate(&err), "0A000", "{err}");
}

/// A single-byte database (LATIN1) gives the UTF8 database's results: names and strings are
/// converted to UTF-8 for sorting, hashing and the lock key, as the native functions do.
#[test]
fn latin1_database_matches() {
    let c = cluster();
    c.drop_database("pc_latin1");
    c.connect("postgres")
        .batch_execute("CREATE DATABASE pc_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
        .expect("latin1 database");
    let mut latin1 = c.connect("pc_latin1");
    latin1
        .batch_execute("CREATE SCHEMA idempotency")
        .expect("schema");
    latin1.batch_execute(SCRIPT).expect("script");
    let doc = r#"{"é": [1.50, "ÿ\u0001"], "a": {"ß": true, "Z": null}, "b": "àé", "\u00ff": 1e-7}"#;
    let sql = "SELECT idem_canonical($1::text::jsonb), idem_hash($1::text::jsonb), \
               idem_hash($1::text::json), idem_lock_key('tenant:é', $1::text)::text";
    let mut guard = pair().lock().unwrap_or_else(|e| e.into_inner());
    let row = |db: &mut Client, schema: &str| -> Vec<String> {
        let r = db
            .query_one(&sql.replace("idem_", &format!("{schema}.idem_")), &[&doc])
            .unwrap_or_else(|e| panic!("{schema}: {e:?}"));
        (0..4).map(|i| r.get::<_, String>(i)).collect()
    };
    let native = row(&mut guard.native, "public");
    assert_eq!(row(&mut latin1, "idempotency"), native);
}
