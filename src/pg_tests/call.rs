//! In-backend tests of idem_call / idem_retryable.
//! Each test creates its own functions; a sequence counts the calls of a function, because a
//! sequence does not roll back with a failed call's subtransaction.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg_tests::helpers::*;

    /// Create `<name>(jsonb) RETURNS jsonb` that counts its calls in sequence `<name>_calls`,
    /// inserts the request into table `<name>_effects`, then runs `body` (PL/pgSQL statements).
    fn create_counted_fn(name: &str, body: &str) {
        run(&format!("CREATE SEQUENCE {name}_calls"));
        run(&format!("CREATE TABLE {name}_effects (request jsonb)"));
        run(&format!(
            "CREATE FUNCTION {name}(request jsonb) RETURNS jsonb LANGUAGE plpgsql AS $fn$ \
             BEGIN PERFORM nextval('{name}_calls'); INSERT INTO {name}_effects VALUES (request); {body} END $fn$"
        ));
    }

    /// How many times `<name>` was called.
    fn calls(name: &str) -> i64 {
        one::<i64>(&format!(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {name}_calls"
        ))
        .unwrap_or(-1)
    }

    fn effects(name: &str) -> i64 {
        one::<i64>(&format!("SELECT count(*) FROM {name}_effects")).unwrap_or(-1)
    }

    /// `outcome|response|failure_code|failure_message|attempt` of an idem_call.
    fn call_fn(scope: &str, key: &str, request: &str, function: &str) -> String {
        one::<String>(&format!(
        "SELECT concat_ws('|', outcome, coalesce(response::text, '-'), coalesce(failure_code, '-'), \
             coalesce(failure_message, '-'), coalesce(attempt::text, '-')) \
             FROM idem_call({}, {}, {}::jsonb, {})",
        pgrx::spi::quote_literal(scope),
        pgrx::spi::quote_literal(key),
        pgrx::spi::quote_literal(request),
        pgrx::spi::quote_literal(format!("{function}(jsonb)"))
    ))
    .unwrap_or_default()
    }

    #[pg_test]
    fn call_success_is_recorded_and_replayed_without_a_second_call() {
        let f = "call_ok_fn";
        create_counted_fn(f, "RETURN jsonb_build_object('echo', request);");
        let s = "call_success";
        assert_eq!(
            call_fn(s, "k", r#"{"a": 1}"#, f),
            r#"new_claim|{"echo": {"a": 1}}|-|-|1"#
        );
        assert_eq!(record(s), r#"succeeded|{"echo": {"a": 1}}|-|-|1"#);
        assert_eq!(
            (calls(f), effects(f)),
            (1, 1),
            "the function's effect is kept"
        );
        // The same request, spelled differently: a replay, without calling the function.
        assert_eq!(
            call_fn(s, "k", r#"{ "a" : 1 }"#, f),
            r#"replay_success|{"echo": {"a": 1}}|-|-|1"#
        );
        assert_eq!(calls(f), 1);
        // Another request under the same key.
        assert_eq!(
            sqlstate(&format!(
                "SELECT * FROM idem_call('{s}', 'k', '{{\"a\": 2}}', '{f}(jsonb)')"
            )),
            "P4002"
        );
        // A NULL response is a success too.
        let n = "call_null_fn";
        create_counted_fn(n, "RETURN NULL;");
        assert_eq!(call_fn(s, "null", "{}", n), "new_claim|-|-|-|1");
        assert_eq!(call_fn(s, "null", "{}", n), "replay_success|-|-|-|1");
        assert_eq!(calls(n), 1);
    }

    #[pg_test]
    fn call_validation_error_is_recorded_as_final_failure_and_replayed() {
        let f = "call_invalid_fn";
        create_counted_fn(
            f,
            "RAISE EXCEPTION 'amount must be positive' USING ERRCODE = '22023';",
        );
        let s = "call_validation";
        assert_eq!(
            call_fn(s, "k", r#"{"amount": -1}"#, f),
            "final_failure|-|22023|amount must be positive|1"
        );
        assert_eq!(record(s), "failed_final|-|22023|amount must be positive|1");
        assert_eq!(
            (calls(f), effects(f)),
            (1, 0),
            "the failed call's effect is rolled back"
        );
        assert_eq!(
            call_fn(s, "k", r#"{"amount": -1}"#, f),
            "final_failure|-|22023|amount must be positive|1"
        );
        assert_eq!(
            calls(f),
            1,
            "a stored final failure does not call the function again"
        );
    }

    #[pg_test]
    fn call_custom_sqlstate_is_recorded_as_is() {
        let f = "call_custom_fn";
        create_counted_fn(f, "RAISE EXCEPTION 'no such sku' USING ERRCODE = 'AB123';");
        assert_eq!(
            call_fn("call_custom", "k", "{}", f),
            "final_failure|-|AB123|no such sku|1"
        );
        let g = "call_plain_raise_fn";
        create_counted_fn(g, "RAISE EXCEPTION 'plain';");
        assert_eq!(
            call_fn("call_custom", "k2", "{}", g),
            "final_failure|-|P0001|plain|1"
        );
        let h = "call_builtin_error_fn";
        create_counted_fn(h, "RETURN jsonb_build_object('x', 1 / 0);");
        assert_eq!(
            call_fn("call_custom", "k3", "{}", h),
            "final_failure|-|22012|division by zero|1"
        );
    }

    #[pg_test]
    fn call_transient_error_is_reraised_and_nothing_is_recorded() {
        for (n, code) in ["40001", "40P01", "55P03", "08006", "53200"]
            .iter()
            .enumerate()
        {
            let f = format!("call_transient_fn_{n}");
            create_counted_fn(
                &f,
                &format!("RAISE EXCEPTION 'transient {code}' USING ERRCODE = '{code}';"),
            );
            let sql =
                format!("SELECT * FROM idem_call('call_transient', 'k{n}', '{{}}', '{f}(jsonb)')");
            assert_eq!(sqlstate(&sql), *code);
            assert_eq!(calls(&f), 1);
        }
        // The message comes through as the function raised it.
        let message = one::<String>(
            "DO $$ BEGIN PERFORM * FROM idem_call('call_transient', 'm', '{}', 'call_transient_fn_0(jsonb)'); \
             EXCEPTION WHEN serialization_failure THEN PERFORM set_config('tests.msg', SQLERRM, true); END $$; \
             SELECT current_setting('tests.msg')",
        );
        assert_eq!(message.as_deref(), Some("transient 40001"));
        assert_eq!(record("call_transient"), "none");
    }

    #[pg_test]
    fn call_query_canceled_is_reraised() {
        let f = "call_canceled_fn";
        create_counted_fn(f, "RAISE EXCEPTION 'canceled' USING ERRCODE = '57014';");
        // PL/pgSQL's WHEN OTHERS does not catch query_canceled: name it.
        let code = one::<String>(
            "DO $$ BEGIN PERFORM * FROM idem_call('call_canceled', 'k', '{}', 'call_canceled_fn(jsonb)'); \
             EXCEPTION WHEN query_canceled THEN PERFORM set_config('tests.code', SQLSTATE, true); END $$; \
             SELECT current_setting('tests.code')",
        );
        assert_eq!(code.as_deref(), Some("57014"));
        assert_eq!(record("call_canceled"), "none");
    }

    #[pg_test]
    fn call_stored_outcomes_and_takeovers() {
        let f = "call_takeover_fn";
        create_counted_fn(f, "RETURN '\"done\"';");
        let s = "call_takeover";
        let hash = |request: &str| {
            // The hash idem_call claimed with, read back from its record.
            one::<String>(&format!(
            "SELECT request_hash FROM idempotency.requests WHERE scope = '{s}' AND key = '{request}'"
        ))
        .unwrap_or_default()
        };
        // A live claim by someone else: P4029, with a hint to retry.
        assert_eq!(call_fn(s, "seed", "{}", f), r#"new_claim|"done"|-|-|1"#);
        let h = hash("seed");
        run(&format!("SELECT * FROM idem_claim('{s}', 'busy', '{h}')"));
        let busy = format!("SELECT * FROM idem_call('{s}', 'busy', '{{}}', '{f}(jsonb)')");
        assert_eq!(sqlstate(&busy), "P4029");
        let hint = one::<String>(&format!(
            "SELECT tests.error_hint_of({})",
            pgrx::spi::quote_literal(&busy)
        ));
        assert!(hint.unwrap_or_default().contains("short delay"));
        // A retryable failure is taken over: attempt 2 runs the function.
        run(&format!(
            "SELECT idem_fail('{s}', 'busy', true, 'E1', 'flaky')"
        ));
        assert_eq!(
            call_fn(s, "busy", "{}", f),
            r#"retryable_failure|"done"|-|-|2"#
        );
        // A stale lease too.
        run(&format!("SELECT * FROM idem_claim('{s}', 'stale', '{h}')"));
        run(&format!(
            "UPDATE idempotency.requests SET locked_until = now() - interval '1 second' \
             WHERE scope = '{s}' AND key = 'stale'"
        ));
        assert_eq!(
            call_fn(s, "stale", "{}", f),
            r#"processing_stale|"done"|-|-|2"#
        );
        // A final failure recorded by idem_fail is returned without a call.
        run(&format!("SELECT * FROM idem_claim('{s}', 'final', '{h}')"));
        run(&format!(
            "SELECT idem_fail('{s}', 'final', false, 'E2', 'gone')"
        ));
        let before = calls(f);
        assert_eq!(call_fn(s, "final", "{}", f), "final_failure|-|E2|gone|1");
        assert_eq!(calls(f), before);
        // Lease and retention are used for the claim.
        run(&format!(
            "SELECT * FROM idem_call('{s}', 'times', '{{}}', '{f}(jsonb)', '1 minute', '2 hours')"
        ));
        assert_eq!(
            one::<bool>(&format!(
                "SELECT lease = '1 minute' AND retention = '2 hours' AND expires_at = now() + interval '2 hours' \
                 FROM idempotency.requests WHERE scope = '{s}' AND key = 'times'"
            )),
            Some(true)
        );
    }

    #[pg_test]
    fn call_long_failure_message_is_cut_at_a_character() {
        let f = "call_long_message_fn";
        create_counted_fn(
            f,
            "RAISE EXCEPTION '%', repeat('€', 5000) USING ERRCODE = 'AB001';",
        );
        let got = call_fn("call_long_message", "k", "{}", f);
        assert!(
            got.starts_with("final_failure|-|AB001|€"),
            "{}",
            got.chars().take(30).collect::<String>()
        );
        assert_eq!(
            one::<i32>(
                "SELECT octet_length(failure_message) FROM idempotency.requests WHERE scope = 'call_long_message'"
            ),
            Some(8190)
        );
    }

    #[pg_test]
    fn call_checks_the_function_and_its_inputs() {
        run(
            "CREATE FUNCTION call_check_int(integer) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb'",
        );
        run(
            "CREATE FUNCTION call_check_text(jsonb) RETURNS text LANGUAGE sql AS 'SELECT NULL::text'",
        );
        run(
            "CREATE FUNCTION call_check_two(jsonb, jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT $1'",
        );
        run(
            "CREATE FUNCTION call_check_set(jsonb) RETURNS SETOF jsonb LANGUAGE sql AS 'SELECT $1'",
        );
        run("CREATE PROCEDURE call_check_proc(jsonb) LANGUAGE sql AS 'SELECT 1'");
        run("CREATE FUNCTION call_check_ok(jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT $1'");
        let cases = [
            ("'s', 'k', '{}', 'call_check_int(integer)'", "42883"),
            ("'s', 'k', '{}', 'call_check_text(jsonb)'", "42883"),
            ("'s', 'k', '{}', 'call_check_two(jsonb, jsonb)'", "42883"),
            ("'s', 'k', '{}', 'call_check_set(jsonb)'", "42883"),
            ("'s', 'k', '{}', 'call_check_proc(jsonb)'", "42883"),
            ("'s', 'k', '{}', 'jsonb_agg(anyelement)'", "42883"),
            ("'s', 'k', '{}', 4294967290::oid::regprocedure", "42883"),
            ("'s', 'k', '{}', NULL", "22004"),
            ("NULL, 'k', '{}', 'call_check_ok(jsonb)'", "P4000"),
            ("'s', ' ', '{}', 'call_check_ok(jsonb)'", "P4001"),
            ("'s', 'k', NULL, 'call_check_ok(jsonb)'", "P4003"),
            (
                "repeat('s', 256), 'k', '{}', 'call_check_ok(jsonb)'",
                "P4004",
            ),
            (
                "'s', 'k', '{}', 'call_check_ok(jsonb)', '0 seconds'",
                "22023",
            ),
            (
                "'s', 'k', '{}', 'call_check_ok(jsonb)', '1 minute', NULL",
                "22004",
            ),
        ];
        for (args, code) in cases {
            assert_eq!(
                sqlstate(&format!("SELECT * FROM idem_call({args})")),
                code,
                "{args}"
            );
        }
        let message = one::<String>(
        "DO $$ BEGIN PERFORM * FROM idem_call('s', 'k', '{}', 'call_check_text(jsonb)'); \
             EXCEPTION WHEN undefined_function THEN PERFORM set_config('tests.msg', SQLERRM, true); END $$; \
             SELECT current_setting('tests.msg')",
    )
    .unwrap_or_default();
        assert!(
            message.contains("call_check_text(jsonb)") && message.contains("returning text"),
            "{message}"
        );
        assert_eq!(
            one::<i64>("SELECT count(*) FROM idempotency.requests WHERE scope = 's'"),
            Some(0)
        );
    }

    #[pg_test]
    fn call_needs_execute_on_the_function() {
        catalog_turn();
        run("CREATE ROLE call_privileges_role");
        run("GRANT USAGE ON SCHEMA idempotency, tests TO call_privileges_role");
        run("GRANT SELECT, INSERT, UPDATE ON idempotency.requests TO call_privileges_role");
        run("CREATE FUNCTION call_private_fn(jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT $1'");
        run("REVOKE EXECUTE ON FUNCTION call_private_fn(jsonb) FROM PUBLIC");
        run("SET LOCAL ROLE call_privileges_role");
        let denied = sqlstate(
            "SELECT * FROM idem_call('call_privileges', 'k', '{}', 'call_private_fn(jsonb)')",
        );
        run("RESET ROLE");
        assert_eq!(denied, "42501");
        run("GRANT EXECUTE ON FUNCTION call_private_fn(jsonb) TO call_privileges_role");
        run("SET LOCAL ROLE call_privileges_role");
        let allowed = sqlstate(
            "SELECT * FROM idem_call('call_privileges', 'k', '{}', 'call_private_fn(jsonb)')",
        );
        run("RESET ROLE");
        assert_eq!(allowed, "ok");
    }

    /// A function given by OID skips the name lookup, which is what checks USAGE on its schema:
    /// idem_call checks it itself (security audit, finding 6).
    #[pg_test]
    fn call_needs_usage_on_the_functions_schema() {
        catalog_turn();
        run("CREATE ROLE call_usage_role");
        run("GRANT USAGE ON SCHEMA idempotency, tests TO call_usage_role");
        run("GRANT SELECT, INSERT, UPDATE ON idempotency.requests TO call_usage_role");
        run("CREATE SCHEMA call_hidden");
        run("CREATE TABLE call_hidden.effects (request jsonb)");
        run(
            "CREATE FUNCTION call_hidden.definer_fn(request jsonb) RETURNS jsonb LANGUAGE plpgsql \
             SECURITY DEFINER SET search_path = pg_catalog AS $fn$ \
             BEGIN INSERT INTO call_hidden.effects VALUES (request); RETURN request; END $fn$",
        );
        run("REVOKE EXECUTE ON FUNCTION call_hidden.definer_fn(jsonb) FROM PUBLIC");
        run("GRANT EXECUTE ON FUNCTION call_hidden.definer_fn(jsonb) TO call_usage_role");
        let oid = one::<i64>("SELECT 'call_hidden.definer_fn(jsonb)'::regprocedure::oid::int8")
            .unwrap_or_default();
        let by_oid = format!(
            "SELECT * FROM idem_call('call_usage', 'oid', '{{}}', {oid}::oid::regprocedure)"
        );
        let by_name =
            "SELECT * FROM idem_call('call_usage', 'name', '{}', 'call_hidden.definer_fn(jsonb)')";
        run("SET LOCAL ROLE call_usage_role");
        let denied = (sqlstate(&by_oid), sqlstate(by_name));
        let message = one::<String>(&format!(
            "SELECT tests.outcome_of({})",
            pgrx::spi::quote_literal(&by_oid)
        ));
        run("RESET ROLE");
        assert_eq!(denied, ("42501".into(), "42501".into()));
        assert_eq!(
            message.as_deref(),
            Some("42501: permission denied for schema call_hidden")
        );
        let written = "SELECT (SELECT count(*) FROM idempotency.requests WHERE scope = 'call_usage') \
                       + (SELECT count(*) FROM call_hidden.effects)";
        assert_eq!(one::<i64>(written), Some(0), "nothing is recorded or done");
        // With USAGE, the same call by OID runs.
        run("GRANT USAGE ON SCHEMA call_hidden TO call_usage_role");
        run("SET LOCAL ROLE call_usage_role");
        let allowed = sqlstate(&by_oid);
        run("RESET ROLE");
        assert_eq!(allowed, "ok");
        assert_eq!(record("call_usage"), "succeeded|{}|-|-|1");
        assert_eq!(
            one::<i64>("SELECT count(*) FROM call_hidden.effects"),
            Some(1)
        );
    }

    #[pg_test]
    fn retryable_classifies_sqlstates() {
        for code in [
            "40001", "40P01", "55P03", "57014", "08000", "08006", "53000", "53300",
        ] {
            assert_eq!(
                one::<bool>(&format!("SELECT idem_retryable('{code}')")),
                Some(true),
                "{code}"
            );
        }
        for code in [
            "23505", "22023", "P0001", "AB123", "40002", "57P01", "XX000", "P4029",
        ] {
            assert_eq!(
                one::<bool>(&format!("SELECT idem_retryable('{code}')")),
                Some(false),
                "{code}"
            );
        }
        assert_eq!(one::<bool>("SELECT idem_retryable(NULL)"), None);
        assert_eq!(sqlstate("SELECT idem_retryable('4000')"), "22023");
        assert_eq!(sqlstate("SELECT idem_retryable('40p01')"), "22023");
        assert_eq!(
        one::<String>(
            "SELECT provolatile::text || proparallel::text || proisstrict::text FROM pg_proc WHERE proname = 'idem_retryable'"
        )
        .as_deref(),
        Some("istrue")
    );
    }
}
