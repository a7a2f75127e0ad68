//! In-backend tests of canonical JSON, idem_hash and idem_lock_key.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg_tests::helpers::*;

    macro_rules! vector {
        ($name:literal) => {
            (
                $name,
                include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/tests/vectors/jcs/input/",
                    $name,
                    ".json"
                )),
                include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/tests/vectors/jcs/output/",
                    $name,
                    ".json"
                )),
            )
        };
    }

    /// Every RFC 8785 reference vector (tests/vectors/jcs, see its SOURCE.md).
    const VECTORS: [(&str, &str, &str); 6] = [
        vector!("arrays"),
        vector!("french"),
        vector!("structures"),
        vector!("unicode"),
        vector!("values"),
        vector!("weird"),
    ];

    const ES6_NUMBERS: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/idem-canonical/tests/data/es6-numbers.txt"
    ));

    fn assert_sqlstate(sql: &str, code: &str) {
        let got = outcome(sql);
        assert!(
            got.starts_with(&format!("{code}: ")),
            "{sql}: expected {code}, got {got}"
        );
    }

    #[pg_test]
    fn reference_vectors_through_json_and_jsonb() {
        for (name, input, output) in VECTORS {
            for ty in ["json", "jsonb"] {
                let got = text(&format!("SELECT idem_canonical({}::{ty})", quote(input)));
                assert_eq!(got.as_bytes(), output.as_bytes(), "{name} via {ty}");
                let hash = text(&format!("SELECT idem_hash({}::{ty})", quote(input)));
                let expected = text(&format!(
                    "SELECT encode(sha256(convert_to({}, 'UTF8')), 'hex')",
                    quote(output)
                ));
                assert_eq!(hash, expected, "{name} hash via {ty}");
            }
        }
    }

    #[pg_test]
    fn numbers_match_javascript_through_json_and_jsonb() {
        let texts: Vec<&str> = ES6_NUMBERS
            .lines()
            .filter_map(|l| l.split_once(','))
            .map(|(_, t)| t)
            .collect();
        assert!(texts.len() > 10_000);
        let array = format!("[{}]", texts.join(","));
        for ty in ["json", "jsonb"] {
            let got = text(&format!("SELECT idem_canonical({}::{ty})", quote(&array)));
            assert!(got == array, "numbers via {ty} differ");
        }
        // Non-canonical spellings, long mantissas, halfway cases, 2^53 neighbours.
        let cases = [
            ("1.0", "1"),
            ("-0", "0"),
            ("-0.000", "0"),
            ("1e21", "1e+21"),
            ("1E+21", "1e+21"),
            ("100000000000000000000", "100000000000000000000"),
            ("0.000001", "0.000001"),
            ("1e-7", "1e-7"),
            ("12345678901234567890", "12345678901234567000"),
            ("9007199254740993", "9007199254740992"),
            ("9007199254740995", "9007199254740996"),
            (
                "-9007199254740993.0000000000000000000001",
                "-9007199254740994",
            ),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("4.9406564584124654e-324", "5e-324"),
            ("2.4703282292062327e-324", "0"),
            ("2.2250738585072011e-308", "2.225073858507201e-308"),
            (
                "0.30000000000000001665334536937734810635447502136230468750",
                "0.30000000000000004",
            ),
            ("333333333.33333329", "333333333.3333333"),
            ("19.99", "19.99"),
            ("-123456.789e3", "-123456789"),
            ("1e-400", "0"),
            ("0.1e1", "1"),
            ("10000", "10000"),
            ("100000000", "100000000"),
            ("0.0001", "0.0001"),
            ("123456789012345678901234567890e-30", "0.12345678901234568"),
        ];
        for (input, expected) in cases {
            for ty in ["json", "jsonb"] {
                let got = text(&format!("SELECT idem_canonical('{input}'::{ty})"));
                assert_eq!(got, expected, "{input} via {ty}");
                let got = text(&format!("SELECT idem_canonical('[{input}]'::{ty})"));
                assert_eq!(got, format!("[{expected}]"), "[{input}] via {ty}");
            }
        }
    }

    #[pg_test]
    fn members_sort_by_utf16_code_units() {
        let input =
            r#"{"\ue000":1,"😂":2,"a":3,"\ud83d\ude01":4,"ab":5,"b":6,"ÿ":7,"\uffff":8,"":9}"#;
        let expected = "{\"\":9,\"a\":3,\"ab\":5,\"b\":6,\"ÿ\":7,\"😁\":4,\"😂\":2,\"\u{e000}\":1,\"\u{ffff}\":8}";
        for ty in ["json", "jsonb"] {
            assert_eq!(
                text(&format!("SELECT idem_canonical({}::{ty})", quote(input))),
                expected,
                "{ty}"
            );
        }
    }

    #[pg_test]
    fn strings_are_escaped_as_jcs_says() {
        let input = r#"["\u0000\u0001\u001f", "\b\t\n\f\r", "\"\\/", "\u007f\u2028\u2029", "é😂"]"#;
        let expected = "[\"\\u0000\\u0001\\u001f\",\"\\b\\t\\n\\f\\r\",\"\\\"\\\\/\",\"\u{7f}\u{2028}\u{2029}\",\"é😂\"]";
        assert_eq!(
            text(&format!("SELECT idem_canonical({}::json)", quote(input))),
            expected
        );
        // jsonb cannot hold \u0000; the rest must agree.
        let input = input.replace("\\u0000", "\\u0002");
        let expected = expected.replace("\\u0000", "\\u0002");
        assert_eq!(
            text(&format!("SELECT idem_canonical({}::jsonb)", quote(&input))),
            expected
        );
    }

    #[pg_test]
    fn any_value_at_the_top_level() {
        for (input, expected) in [
            ("1.50", "1.5"),
            (r#""x""#, r#""x""#),
            ("true", "true"),
            ("false", "false"),
            ("null", "null"),
            ("[]", "[]"),
            ("{}", "{}"),
            (" [ 1 , { } ] ", "[1,{}]"),
        ] {
            for ty in ["json", "jsonb"] {
                assert_eq!(
                    text(&format!("SELECT idem_canonical('{input}'::{ty})")),
                    expected
                );
            }
        }
    }

    /// The direct jsonb reader agrees with canonicalizing jsonb's own text output, on
    /// documents that exercise every container shape: more than 32 children (JEntries with
    /// stored offsets), nested containers, long strings, numerics of every header form.
    #[pg_test]
    fn jsonb_reader_agrees_with_jsonb_text() {
        let mismatches = Spi::get_one::<i64>(
            "WITH docs AS (
           SELECT jsonb_build_object(
             'id', g,
             'n', (g * 7919) % 1000 - 500,
             'price', ((g * 31) % 100000) / 100.0,
             'big', (g::numeric * 123456789012345678) ^ 3,
             'tiny', 1 / (g::numeric * 1000000007),
             'neg_weight', g * 0.00000001,
             'str', repeat(chr(32 + g % 90) || 'é😂\"\\', g % 50),
             'arr', (SELECT jsonb_agg(i * g) FROM generate_series(1, 40 + g % 30) i),
             'obj', (SELECT jsonb_object_agg('k' || i || repeat('x', i % 7), i % 3 = 0)
                       FROM generate_series(1, 35 + g % 10) i),
             'nested', jsonb_build_array(jsonb_build_object('a', jsonb_build_array(null, true, g)))
           ) AS d
           FROM generate_series(1, 300) g
         )
         SELECT count(*) FROM docs
         WHERE idem_canonical(d) IS DISTINCT FROM idem_canonical(d::text::json)
            OR idem_hash(d) IS DISTINCT FROM idem_hash(d::text::json)",
        );
        assert_eq!(mismatches, Ok(Some(0)));
    }

    #[pg_test]
    fn stored_values_short_headers_and_toast() {
        Spi::run(
        "CREATE TEMP TABLE t (id int, d jsonb);
         INSERT INTO t VALUES
           (1, '{\"b\":1,\"a\":[1.0,\"x\"]}'),
           (2, (SELECT jsonb_object_agg('key' || i, repeat('v', i)) FROM generate_series(1, 2000) i)),
           (3, (SELECT jsonb_agg(md5(i::text)) FROM generate_series(1, 20000) i))",
    )
    .unwrap();
        let mismatches = Spi::get_one::<i64>(
            "SELECT count(*) FROM t WHERE idem_canonical(d) <> idem_canonical(d::text::json)",
        );
        assert_eq!(mismatches, Ok(Some(0)));
        assert_eq!(
            text("SELECT idem_canonical(d) FROM t WHERE id = 1"),
            r#"{"a":[1,"x"],"b":1}"#
        );
    }

    #[pg_test]
    fn hash_of_selected_fields() {
        let whole = text(r#"SELECT idem_hash('{"amount":10,"currency":"EUR"}'::jsonb)"#);
        let picked = text(
            r#"SELECT idem_hash('{"currency":"EUR","ts":"2026-11-22T10:00:00Z","amount":10.0,"trace":"abc"}'::jsonb,
                             ARRAY['amount','currency','missing','amount'])"#,
        );
        assert_eq!(picked, whole);
        let none = text(r#"SELECT idem_hash('{"a":1}'::jsonb, '{}'::text[])"#);
        assert_eq!(none, text("SELECT idem_hash('{}'::jsonb)"));
        // Only the top level is filtered.
        let nested = text(r#"SELECT idem_canonical('{"a":{"ts":1,"b":2}}'::jsonb)"#);
        assert_eq!(nested, r#"{"a":{"b":2,"ts":1}}"#);
        assert_eq!(
            text(r#"SELECT idem_hash('{"a":{"ts":1,"b":2},"ts":3}'::jsonb, ARRAY['a'])"#),
            text(r#"SELECT idem_hash('{"a":{"b":2,"ts":1}}'::json)"#)
        );
    }

    #[pg_test]
    fn bad_input_gives_clear_errors() {
        assert_sqlstate(r#"SELECT idem_canonical('{"a":1,"a":2}'::json)"#, "22030");
        assert_sqlstate(
            r#"SELECT idem_hash('[{"a":1,"b":{"x":1,"x":1}}]'::json)"#,
            "22030",
        );
        assert_sqlstate(r#"SELECT idem_hash('{"a":1,"\u0061":2}'::json)"#, "22030");
        for ty in ["json", "jsonb"] {
            assert_sqlstate(&format!("SELECT idem_canonical('1e400'::{ty})"), "22003");
            assert_sqlstate(&format!("SELECT idem_hash('[-1e309]'::{ty})"), "22003");
            assert_sqlstate(
                &format!("SELECT idem_hash('{{\"a\":1.8e308}}'::{ty})"),
                "22003",
            );
        }
        assert_sqlstate(r#"SELECT idem_hash('[1,2]'::jsonb, ARRAY['a'])"#, "22023");
        assert_sqlstate(r#"SELECT idem_hash('"x"'::jsonb, ARRAY['a'])"#, "22023");
        assert_sqlstate(
            r#"SELECT idem_hash('{"a":1}'::jsonb, ARRAY['a', NULL])"#,
            "22004",
        );
        // Postgres' own parsers refuse 100 000 levels (stack depth check, 54001); nothing
        // reaches us, and the backend survives.
        for ty in ["json", "jsonb"] {
            assert_sqlstate(
                &format!("SELECT idem_hash((repeat('[', 100000) || repeat(']', 100000))::{ty})"),
                "54001",
            );
            assert_sqlstate(
                &format!("SELECT idem_hash(repeat('[', 100000)::{ty})"),
                "54001",
            );
        }
        // The messages are ours, with no Rust backtrace.
        let msg = outcome(r#"SELECT idem_canonical('{"k":1,"k":2}'::json)"#);
        assert_eq!(msg, r#"22030: duplicate JSON object key "k""#);
    }

    /// Up to idem_canonical::MAX_DEPTH nested arrays and objects; one more is 54001 with its
    /// message and hint, before any other error in the value, in every form.
    #[pg_test]
    fn nesting_depth_limit() {
        let max = idem_canonical::MAX_DEPTH;
        let chain =
            |d: usize, open: &str, close: &str| format!("{}1{}", open.repeat(d), close.repeat(d));
        for (open, close) in [("[", "]"), (r#"{"a":"#, "}"), (r#"[{"a":"#, "}]")] {
            let per = open.matches(['[', '{']).count();
            let at = chain(max / per, open, close);
            let over = format!("[{at}]");
            for ty in ["json", "jsonb"] {
                assert_eq!(text(&format!("SELECT idem_canonical('{at}'::{ty})")), at);
                for call in ["idem_canonical", "idem_hash"] {
                    assert_sqlstate(&format!("SELECT {call}('{over}'::{ty})"), "54001");
                }
                // Depth comes first: a number beyond the doubles before it does not win.
                assert_sqlstate(
                    &format!("SELECT idem_hash('[1e400,{over}]'::{ty})"),
                    "54001",
                );
            }
            let fields = format!(r#"SELECT idem_hash('{{"b":{over}}}'::jsonb, ARRAY['a'])"#);
            assert_sqlstate(&fields, "54001");
        }
        let msg = outcome(&format!(
            "SELECT idem_hash('{}'::jsonb)",
            chain(max + 1, "[", "]")
        ));
        assert_eq!(
            msg,
            format!("54001: JSON value nested deeper than {max} levels of arrays and objects")
        );
    }

    #[pg_test]
    fn lone_surrogates() {
        // json keeps the text, so the escape reaches us: UTF-8 cannot carry it (22P05).
        let got = outcome(r#"SELECT idem_hash('["\udc00", 1]'::json)"#);
        assert!(got.starts_with("22P05: "), "{got}");
        let got = outcome(r#"SELECT idem_canonical('"\ud800"'::json)"#);
        assert!(got.starts_with("22P05: "), "{got}");
        // jsonb input refuses it itself.
        let got = outcome(r#"SELECT idem_hash('"\ud800"'::jsonb)"#);
        assert!(got.starts_with("22P02: "), "{got}");
        // \u0000 is valid JSON text and canonicalizes to itself.
        assert_eq!(
            text(r#"SELECT idem_canonical('"a\u0000b"'::json)"#),
            r#""a\u0000b""#
        );
    }

    /// The pairs at the edges of the surrogate ranges through both input types, and their
    /// order (UTF-16 code units: U+10FFFF before U+E000).
    #[pg_test]
    fn surrogate_pairs_at_the_edges() {
        for (escaped, ch) in [
            (r"\ud800\udc00", "\u{10000}"),
            (r"\ud800\udfff", "\u{103ff}"),
            (r"\udbff\udc00", "\u{10fc00}"),
            (r"\udbff\udfff", "\u{10ffff}"),
            (r"\ud7ff", "\u{d7ff}"),
            (r"\ue000", "\u{e000}"),
        ] {
            for ty in ["json", "jsonb"] {
                let got = text(&format!("SELECT idem_canonical('\"{escaped}\"'::{ty})"));
                assert_eq!(got, format!("\"{ch}\""), "{escaped} {ty}");
            }
        }
        let doc = r#"{"\ue000":1,"\udbff\udfff":2,"\ud800\udc00":3}"#;
        let want = "{\"\u{10000}\":3,\"\u{10ffff}\":2,\"\u{e000}\":1}";
        for ty in ["json", "jsonb"] {
            assert_eq!(text(&format!("SELECT idem_canonical('{doc}'::{ty})")), want);
        }
        let got = outcome(r#"SELECT idem_canonical('"\udbff\ue000"'::json)"#);
        assert!(got.starts_with("22P05: "), "{got}");
    }

    #[pg_test]
    fn out_of_range_messages_show_the_number() {
        let got = outcome("SELECT idem_hash('[-1e400]'::jsonb)");
        assert!(
            got.starts_with("22003: JSON number -1e400 is out of range"),
            "{got}"
        );
        let got = outcome("SELECT idem_hash('[1.5e309]'::json)");
        assert!(
            got.starts_with("22003: JSON number 1.5e309 is out of range"),
            "{got}"
        );
    }

    #[pg_test]
    fn functions_are_immutable_strict_parallel_safe() {
        let bad = Spi::get_one::<i64>(
            "SELECT count(*) FROM pg_proc
         WHERE proname IN ('idem_canonical', 'idem_hash', 'idem_lock_key')
           AND NOT (provolatile = 'i' AND proisstrict AND proparallel = 's')",
        );
        assert_eq!(bad, Ok(Some(0)));
        let n = Spi::get_one::<i64>(
            "SELECT count(*) FROM pg_proc WHERE proname IN ('idem_canonical', 'idem_hash', 'idem_lock_key')",
        );
        assert_eq!(n, Ok(Some(7)));
    }

    /// The size limit of idem_canonical at a small scale (the 1 GB case runs in
    /// tests/integration/catalog/canonical_limits.rs): exactly `limit` bytes fit, one more is 54000 with the limit in
    /// the message, whether the text grows token by token or by one long string.
    #[pg_test]
    fn canonical_limit_is_54000_at_any_size() {
        use crate::entry::canonical::json_text_canonical;
        let numbers = b"[1e20,1e20]";
        let expected = "[100000000000000000000,100000000000000000000]";
        let limit = expected.len();
        assert_eq!(
            json_text_canonical(numbers, limit).map_err(|e| e.code),
            Ok(expected.to_owned())
        );
        let err = json_text_canonical(numbers, limit - 1).unwrap_err();
        assert_eq!(err.code.as_str(), "54000");
        assert!(
            err.message.contains(&format!("longer than {}", limit - 1)),
            "{}",
            err.message
        );
        // One string of 3 MiB against a 2 MiB limit: refused before it is all written.
        let long = format!("\"{}\"", "x".repeat(3 << 20));
        let err = json_text_canonical(long.as_bytes(), 2 << 20).unwrap_err();
        assert_eq!(err.code.as_str(), "54000");
        assert_eq!(
            json_text_canonical(long.as_bytes(), long.len()).map(|t| t.len()),
            Ok(long.len())
        );
        // Other errors keep their own SQLSTATE under a limit.
        let err = json_text_canonical(br#"{"a":1,"a":2}"#, 100).unwrap_err();
        assert_eq!(err.code.as_str(), "22030");
    }
}
