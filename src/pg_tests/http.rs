//! In-backend tests of the HTTP response helpers (sql/http.sql): what a replay sends is checked
//! again, a look-alike function never runs, and header names are lower-cased and kept.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg_tests::helpers::*;

    /// What idem_http_replay gives for a fresh claim of (scope, key), as jsonb text
    /// (`keep` "NULL": called without it, as before the parameter existed).
    fn replay(scope: &str, key: &str, keep: &str) -> String {
        let keep = if keep == "NULL" {
            String::new()
        } else {
            format!(", {keep}")
        };
        text(&format!(
            "SELECT coalesce(idem_http_replay(c{keep})::text, 'null') FROM idem_claim({}, {}, 'h') AS c",
            quote(scope),
            quote(key)
        ))
    }

    fn field(doc: &str, path: &str) -> String {
        text(&format!(
            "SELECT coalesce(({}::jsonb #>> {}::text[]), 'null')",
            quote(doc),
            quote(path)
        ))
    }

    /// A role that may create functions in the extension's schema (every role on `public` in
    /// a database created under PG 14 or older) plants `idem_http_response(int4, text, text)`:
    /// an untyped literal in idem_http_replay would pick it and run it as the caller.
    #[pg_test]
    fn a_planted_look_alike_is_never_called() {
        let schema = text(
            "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'idempotency'",
        );
        run("CREATE ROLE http_planter");
        run(&format!(
            "GRANT USAGE, CREATE ON SCHEMA {schema} TO http_planter"
        ));
        run("SET LOCAL ROLE http_planter");
        run(&format!(
            "CREATE FUNCTION {schema}.idem_http_response(int4, text, text) RETURNS jsonb \
             LANGUAGE sql AS $f$ SELECT '{{\"status\": 200, \"headers\": {{}}, \"body\": \"planted\"}}'::jsonb $f$"
        ));
        run("RESET ROLE");
        run(&format!("SET LOCAL search_path = {schema}, pg_catalog"));
        let s = "http_planted";
        claim(s, "ok", "h");
        run(&format!(
            "SELECT idem_complete({}, 'ok', '{{\"plain\": true}}')",
            quote(s)
        ));
        let ok = replay(s, "ok", "NULL");
        assert_eq!(field(&ok, "{status}"), "200", "{ok}");
        assert_eq!(field(&ok, "{body}"), r#"{"plain": true}"#, "{ok}");
        claim(s, "failed", "h");
        run(&format!(
            "SELECT idem_fail({}, 'failed', false, 'card_declined', 'declined')",
            quote(s)
        ));
        let failed = replay(s, "failed", "NULL");
        assert_eq!(field(&failed, "{status}"), "500", "{failed}");
        assert!(!failed.contains("planted"), "{failed}");
        claim(s, "http", "h");
        run(&format!(
            "SELECT idem_http_fail({}, 'http', idem_http_response(404, '{{}}'::jsonb, 'gone'::text))",
            quote(s)
        ));
        assert_eq!(field(&replay(s, "http", "NULL"), "{body}"), "gone");
        run("RESET search_path");
    }

    /// Documents stored by hand (idem_complete, idem_fail with 'http_response') are filtered
    /// again on replay: never-listed names, names off the allow-list, values with line breaks.
    #[pg_test]
    fn replay_filters_what_was_stored_by_hand() {
        let s = "http_filter";
        let stored = r#"{"status": 201, "body": "ok", "headers": {"Set-Cookie": "s=1",
            "refresh": "0;url=https://evil.example", "location": "/a\r\nSet-Cookie: x=1",
            "Content-Type": "text/plain", "x-extra": "1", "etag": 5, "cache-control": "a\u0001\nb",
            "x-bare-cr": "1\rSet-Cookie: x=1"}}"#;
        claim(s, "ok", "h");
        run(&format!(
            "SELECT idem_complete({}, 'ok', {}::jsonb)",
            quote(s),
            quote(stored)
        ));
        let plain = replay(s, "ok", "NULL");
        assert_eq!(
            field(&plain, "{headers}"),
            r#"{"content-type": "text/plain"}"#
        );
        assert_eq!(field(&plain, "{status}"), "201");
        assert_eq!(field(&plain, "{body}"), "ok");
        // keep adds names, never one of the never-list, nor a value with a CR or LF.
        let kept = replay(
            s,
            "ok",
            "ARRAY['X-Extra', 'set-cookie', 'Refresh', 'X-Bare-CR']::text[]",
        );
        assert_eq!(
            field(&kept, "{headers}"),
            r#"{"x-extra": "1", "content-type": "text/plain"}"#
        );
        claim(s, "final", "h");
        run(&format!(
            "SELECT idem_fail({}, 'final', false, 'http_response', {})",
            quote(s),
            quote(
                r#"{"status": 402, "headers": {"set-cookie": "s=1", "content-type": "application/problem+json", "www-authenticate": "Basic"}, "body": "{}"}"#
            )
        ));
        let fin = replay(s, "final", "ARRAY['www-authenticate']::text[]");
        assert_eq!(field(&fin, "{status}"), "402");
        assert_eq!(
            field(&fin, "{headers}"),
            r#"{"content-type": "application/problem+json"}"#
        );
        // A success stored with a status outside 100-599 is not a response: its JSON is sent.
        for status in ["0", "99", "600"] {
            let key = format!("status{status}");
            claim(s, &key, "h");
            let doc = format!(r#"{{"status": {status}, "headers": {{}}, "body": "b"}}"#);
            run(&format!(
                "SELECT idem_complete({}, {}, {}::jsonb)",
                quote(s),
                quote(&key),
                quote(&doc)
            ));
            let sent = replay(s, &key, "NULL");
            assert_eq!(field(&sent, "{status}"), "200", "{sent}");
            assert_eq!(field(&sent, "{headers,content-type}"), "application/json");
            assert_eq!(field(&field(&sent, "{body}"), "{status}"), status, "{sent}");
        }
    }

    /// The 500 problem built for a failure that is not an HTTP response carries no stored code
    /// or message (SQL error text, secrets), nor does one built for a broken 'http_response'.
    #[pg_test]
    fn the_500_problem_has_no_internal_text() {
        let s = "http_internal";
        for (key, code, message) in [
            (
                "sql",
                "XX000",
                "ERROR: relation secret_ledger: password=hunter2",
            ),
            ("notjson", "http_response", "not json: password=hunter2"),
            (
                "badstatus",
                "http_response",
                r#"{"status": 700, "headers": {}, "body": "hunter2"}"#,
            ),
            // Statuses outside 100-599 (a bare 0 or 99 is not a response line to send).
            (
                "status0",
                "http_response",
                r#"{"status": 0, "headers": {}, "body": "hunter2"}"#,
            ),
            (
                "status99",
                "http_response",
                r#"{"status": 99, "headers": {}, "body": "hunter2"}"#,
            ),
            (
                "status600",
                "http_response",
                r#"{"status": 600, "headers": {}, "body": "hunter2"}"#,
            ),
            (
                "badbody",
                "http_response",
                r#"{"status": 400, "headers": {}, "body": {"hunter2": 1}}"#,
            ),
        ] {
            claim(s, key, "h");
            run(&format!(
                "SELECT idem_fail({}, {}, false, {}, {})",
                quote(s),
                quote(key),
                quote(code),
                quote(message)
            ));
            let doc = replay(s, key, "NULL");
            assert_eq!(field(&doc, "{status}"), "500", "{key}: {doc}");
            assert_eq!(
                field(&doc, "{headers,content-type}"),
                "application/problem+json",
                "{key}: {doc}"
            );
            let body = field(&doc, "{body}");
            assert_eq!(field(&body, "{title}"), "Internal Server Error", "{key}");
            for secret in ["hunter2", "secret", "XX000", "http_response", "ERROR"] {
                assert!(!doc.contains(secret), "{key}: {secret} in {doc}");
            }
        }
    }

    /// Issue 25 item 15: mixed-case allow-listed names are stored lower-cased, not dropped.
    #[pg_test]
    fn mixed_case_names_are_lower_cased_and_kept() {
        let doc = text(
            r#"SELECT idem_http_response(201, '{"Content-Type": "application/json", "Location": "/p/1",
                "X-Custom": "no", "SET-COOKIE": "a=1", "ETag": "\"v1\""}'::jsonb, 'x')::text"#,
        );
        assert_eq!(
            field(&doc, "{headers}"),
            r#"{"etag": "\"v1\"", "location": "/p/1", "content-type": "application/json"}"#
        );
        let kept = text(
            r#"SELECT idem_http_response(201, '{"X-Custom": "yes", "Set-Cookie": "a=1", "Date": "d"}'::jsonb,
                NULL, ARRAY['X-CUSTOM', 'set-cookie', 'date'])::text"#,
        );
        assert_eq!(field(&kept, "{headers}"), r#"{"x-custom": "yes"}"#);
        // Through idem_http_fail (which keeps what its maker kept) and a replay with the same keep.
        let s = "http_case";
        claim(s, "k", "h");
        run(&format!(
            "SELECT idem_http_fail({}, 'k', idem_http_response(404, \
             '{{\"Content-Type\": \"text/plain\", \"X-Request-Id\": \"r1\", \"Location\": \"/x\"}}'::jsonb, \
             'nope', ARRAY['x-request-id']))",
            quote(s)
        ));
        let with = replay(s, "k", "ARRAY['x-request-id']::text[]");
        assert_eq!(
            field(&with, "{headers}"),
            r#"{"location": "/x", "content-type": "text/plain", "x-request-id": "r1"}"#
        );
        let without = replay(s, "k", "NULL");
        assert_eq!(
            field(&without, "{headers}"),
            r#"{"location": "/x", "content-type": "text/plain"}"#
        );
    }

    #[pg_test]
    fn bad_responses_have_their_sqlstates() {
        for (sql, code) in [
            ("SELECT idem_http_response(NULL)", "22004"),
            ("SELECT idem_http_response(99)", "22023"),
            ("SELECT idem_http_response(600)", "22023"),
            ("SELECT idem_http_response(200, '[]'::jsonb)", "22023"),
            (
                r#"SELECT idem_http_response(200, '{"location": 1}'::jsonb)"#,
                "22023",
            ),
            (
                r#"SELECT idem_http_response(200, '{"Location": "/a\r\nSet-Cookie: x=1"}'::jsonb)"#,
                "22023",
            ),
            (
                r#"SELECT idem_http_response(200, '{"x-a": "\n"}'::jsonb, NULL, ARRAY['x-a'])"#,
                "22023",
            ),
            (
                "SELECT idem_http_fail('http_codes', 'k', idem_http_response(201))",
                "22023",
            ),
            (
                r#"SELECT idem_http_fail('http_codes', 'k', '{"status": "500"}'::jsonb)"#,
                "22023",
            ),
        ] {
            let state = table_state();
            assert_eq!(sqlstate(sql), code, "{sql}");
            assert_eq!(table_state(), state, "{sql} wrote something");
        }
        assert_eq!(
            one::<bool>("SELECT idem_http_replay(NULL::idem_claim_result) IS NULL"),
            Some(true)
        );
    }
}
