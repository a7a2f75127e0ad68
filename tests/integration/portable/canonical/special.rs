//! Look-alikes planted on the caller's path, the documented json exception, a LATIN1 database.

use super::{pair, script};
use crate::common::{self, Client, cluster};

/// The body of every planted look-alike.
const PLANTED: &str = "$$ BEGIN RAISE EXCEPTION 'planted look-alike ran'; END $$";

#[test]
fn planted_lookalikes_never_run() {
    let c = cluster();
    let mut db = c.empty_database("pc_hostile");
    db.batch_execute("CREATE SCHEMA idempotency")
        .expect("schema");
    db.batch_execute(script()).expect("script");
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
    latin1.batch_execute(script()).expect("script");
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
