//! In-backend tests of the claim protocol.
//! Each #[pg_test] runs in one transaction, so time is moved by editing the row's timestamps.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg_tests::helpers::*;

    #[pg_test]
    fn claim_new_key_is_processing_attempt_1() {
        let (outcome, attempt) = claim("orders", "k1", "h1");
        assert_eq!((outcome.as_str(), attempt), ("new_claim", Some(1)));
        assert_eq!(status("orders", "k1").as_deref(), Some("processing"));
        let lease_ok = one::<bool>(
            "SELECT locked_until BETWEEN now() + interval '5 minutes' AND clock_timestamp() + interval '5 minutes' \
             AND expires_at = now() + interval '24 hours' \
             AND lease = interval '5 minutes' AND claimed_at = now() FROM idempotency.requests WHERE key = 'k1'",
        );
        assert_eq!(lease_ok, Some(true));
        run(
            "CREATE TEMP TABLE returned AS SELECT * FROM idem_claim('orders', 'k2', 'h2', '1 minute', '2 hours')",
        );
        let returned = one::<bool>(
            "SELECT r.locked_until = t.locked_until AND r.expires_at = t.expires_at AND r.response IS NULL \
             AND r.attempt = 1 AND r.outcome = 'new_claim' FROM idempotency.requests t, returned r WHERE t.key = 'k2'",
        );
        assert_eq!(returned, Some(true));
        assert_eq!(
            one::<bool>(
                "SELECT locked_until BETWEEN now() + interval '1 minute' AND clock_timestamp() + interval '1 minute' FROM idempotency.requests WHERE key = 'k2'"
            ),
            Some(true)
        );
    }

    #[pg_test]
    fn claim_stores_claimed_by() {
        run(
            "SELECT * FROM idem_claim('claim_stores_claimed_by', 'k', 'h', claimed_by => 'worker-7')",
        );
        assert_eq!(
            one::<String>("SELECT claimed_by FROM idempotency.requests"),
            Some("worker-7".into())
        );
    }

    #[pg_test]
    fn claim_live_lease_is_processing_active() {
        claim("claim_live_lease_is_processing_active", "k", "h");
        let before = table_state();
        let (outcome, attempt) = claim("claim_live_lease_is_processing_active", "k", "h");
        assert_eq!((outcome.as_str(), attempt), ("processing_active", Some(1)));
        assert_eq!(table_state(), before);
    }

    #[pg_test]
    fn replay_returns_stored_response_and_writes_nothing() {
        claim(
            "replay_returns_stored_response_and_writes_nothing",
            "k",
            "h",
        );
        run(
            r#"SELECT idem_complete('replay_returns_stored_response_and_writes_nothing', 'k', '{"order": 42, "ok": true}')"#,
        );
        let before = table_state();
        let replay = one::<String>(
            "SELECT outcome::text || ' ' || attempt || ' ' || response::text FROM idem_claim('replay_returns_stored_response_and_writes_nothing', 'k', 'h')",
        );
        assert_eq!(
            replay.as_deref(),
            Some(r#"replay_success 1 {"ok": true, "order": 42}"#)
        );
        assert_eq!(table_state(), before);
    }

    #[pg_test]
    fn replay_of_a_large_toasted_response() {
        claim("replay_of_a_large_toasted_response", "big", "h");
        run(
            "SELECT idem_complete('replay_of_a_large_toasted_response', 'big', jsonb_build_object('blob', repeat(md5(g::text), 4000))) FROM generate_series(1, 1) g",
        );
        let len = one::<i32>(
            "SELECT length(response->>'blob') FROM idem_claim('replay_of_a_large_toasted_response', 'big', 'h')",
        );
        assert_eq!(len, Some(128_000));
    }

    #[pg_test]
    fn stale_lease_is_taken_over_with_recovery_point() {
        claim("stale_lease_is_taken_over_with_recovery_point", "k", "h");
        run(
            "SELECT idem_checkpoint('stale_lease_is_taken_over_with_recovery_point', 'k', 'charge_created')",
        );
        run("UPDATE idempotency.requests SET locked_until = now() - interval '1 second'");
        let row = one::<String>(
            "SELECT outcome::text || ' ' || attempt || ' ' || recovery_point || ' ' || (locked_until BETWEEN now() + interval '5 minutes' AND clock_timestamp() + interval '5 minutes') \
             FROM idem_claim('stale_lease_is_taken_over_with_recovery_point', 'k', 'h')",
        );
        assert_eq!(
            row.as_deref(),
            Some("processing_stale 2 charge_created true")
        );
        assert_eq!(
            one::<i32>("SELECT attempt FROM idempotency.requests"),
            Some(2)
        );
    }

    #[pg_test]
    fn retryable_failure_is_taken_over() {
        claim("retryable_failure_is_taken_over", "k", "h");
        run(
            "SELECT idem_fail('retryable_failure_is_taken_over', 'k', true, 'timeout', 'upstream timed out')",
        );
        assert_eq!(
            status("retryable_failure_is_taken_over", "k").as_deref(),
            Some("failed_retryable")
        );
        assert_eq!(
            one::<bool>("SELECT locked_until IS NULL FROM idempotency.requests"),
            Some(true)
        );
        let row = one::<String>(
            "SELECT outcome::text || ' ' || attempt || ' ' || failure_code || ' ' || failure_message FROM idem_claim('retryable_failure_is_taken_over', 'k', 'h')",
        );
        assert_eq!(
            row.as_deref(),
            Some("retryable_failure 2 timeout upstream timed out")
        );
        assert_eq!(
            status("retryable_failure_is_taken_over", "k").as_deref(),
            Some("processing")
        );
    }

    #[pg_test]
    fn final_failure_is_replayed_without_writing() {
        claim("final_failure_is_replayed_without_writing", "k", "h");
        run(
            "SELECT idem_fail('final_failure_is_replayed_without_writing', 'k', false, 'card_declined', 'insufficient funds')",
        );
        let before = table_state();
        let row = one::<String>(
            "SELECT outcome::text || ' ' || attempt || ' ' || failure_code || ' ' || failure_message FROM idem_claim('final_failure_is_replayed_without_writing', 'k', 'h')",
        );
        assert_eq!(
            row.as_deref(),
            Some("final_failure 1 card_declined insufficient funds")
        );
        assert_eq!(table_state(), before);
    }

    #[pg_test]
    fn payload_mismatch_is_p4002_with_this_hash_and_writes_nothing() {
        claim(
            "payload_mismatch_is_p4002_with_both_hashes_and_writes_nothing",
            "k",
            "hash-one",
        );
        let before = table_state();
        assert_eq!(
            sqlstate(
                "SELECT * FROM idem_claim('payload_mismatch_is_p4002_with_both_hashes_and_writes_nothing', 'k', 'hash-two')"
            ),
            "P4002"
        );
        let detail = one::<String>(
            "SELECT tests.error_detail_of($$SELECT * FROM idem_claim('payload_mismatch_is_p4002_with_both_hashes_and_writes_nothing', 'k', 'hash-two')$$)",
        );
        let detail = detail.unwrap_or_default();
        // Only this request's hash: the stored one is another caller's.
        assert!(
            !detail.contains("hash-one") && detail.contains("hash-two"),
            "{detail}"
        );
        let hint = one::<String>(
            "SELECT tests.error_hint_of($$SELECT * FROM idem_claim('payload_mismatch_is_p4002_with_both_hashes_and_writes_nothing', 'k', 'hash-two')$$)",
        );
        assert!(
            hint.unwrap_or_default()
                .contains("Reuse an idempotency key only")
        );
        assert_eq!(table_state(), before);
        // Every state checks the hash, not only processing.
        run(
            "SELECT idem_complete('payload_mismatch_is_p4002_with_both_hashes_and_writes_nothing', 'k', '1')",
        );
        assert_eq!(
            sqlstate(
                "SELECT * FROM idem_claim('payload_mismatch_is_p4002_with_both_hashes_and_writes_nothing', 'k', 'hash-two')"
            ),
            "P4002"
        );
    }

    #[pg_test]
    fn expired_record_is_a_new_claim() {
        claim("expired_record_is_a_new_claim", "k", "old");
        run("SELECT idem_complete('expired_record_is_a_new_claim', 'k', '\"done\"')");
        run(
            "UPDATE idempotency.requests SET expires_at = now() - interval '1 second', created_at = now() - interval '2 days'",
        );
        // Past its retention the key is free: even for another payload.
        let row = one::<String>(
            "SELECT outcome::text || ' ' || attempt || ' ' || (response IS NULL) FROM idem_claim('expired_record_is_a_new_claim', 'k', 'new')",
        );
        assert_eq!(row.as_deref(), Some("new_claim 1 true"));
        assert_eq!(
            one::<String>(
                "SELECT request_hash || ' ' || status || ' ' || (response IS NULL) FROM idempotency.requests"
            ),
            Some("new processing true".into())
        );
    }

    #[pg_test]
    fn processing_record_never_expires() {
        claim("processing_record_never_expires", "k", "h");
        run(
            "UPDATE idempotency.requests SET expires_at = now() - interval '1 second', created_at = now() - interval '2 days', claimed_at = now() - interval '2 days'",
        );
        assert_eq!(
            claim("processing_record_never_expires", "k", "h").0,
            "processing_active"
        );
    }

    #[pg_test]
    fn input_rules_raise_and_write_nothing() {
        let cases = [
            ("SELECT * FROM idem_claim(NULL, 'k', 'h')", "P4000"),
            ("SELECT * FROM idem_claim('  ', 'k', 'h')", "P4000"),
            ("SELECT * FROM idem_claim('', 'k', 'h')", "P4000"),
            (
                "SELECT * FROM idem_claim('input_rules_raise_and_write_nothing', NULL, 'h')",
                "P4001",
            ),
            (
                "SELECT * FROM idem_claim('input_rules_raise_and_write_nothing', E'\\t', 'h')",
                "P4001",
            ),
            (
                "SELECT * FROM idem_claim('input_rules_raise_and_write_nothing', 'k', NULL)",
                "P4003",
            ),
            (
                "SELECT * FROM idem_claim('input_rules_raise_and_write_nothing', 'k', ' ')",
                "P4003",
            ),
            (
                "SELECT * FROM idem_claim(repeat('input_rules_raise_and_write_nothing', 256), 'k', 'h')",
                "P4004",
            ),
            (
                "SELECT * FROM idem_claim('input_rules_raise_and_write_nothing', repeat('é', 128), 'h')",
                "P4004",
            ),
            (
                "SELECT * FROM idem_claim('input_rules_raise_and_write_nothing', 'k', repeat('h', 256))",
                "P4004",
            ),
            (
                "SELECT * FROM idem_claim('input_rules_raise_and_write_nothing', 'k', 'h', claimed_by => repeat('w', 256))",
                "P4004",
            ),
            (
                "SELECT * FROM idem_claim('input_rules_raise_and_write_nothing', 'k', 'h', '0 seconds')",
                "22023",
            ),
            (
                "SELECT * FROM idem_claim('input_rules_raise_and_write_nothing', 'k', 'h', '-1 minute')",
                "22023",
            ),
            (
                "SELECT * FROM idem_claim('input_rules_raise_and_write_nothing', 'k', 'h', '1 minute', '0 days')",
                "22023",
            ),
            (
                "SELECT * FROM idem_claim('input_rules_raise_and_write_nothing', 'k', 'h', NULL)",
                "22004",
            ),
            (
                "SELECT * FROM idem_claim('input_rules_raise_and_write_nothing', 'k', 'h', '1 minute', NULL)",
                "22004",
            ),
            ("SELECT idem_complete(NULL, 'k', '{}')", "P4000"),
            (
                "SELECT idem_complete('input_rules_raise_and_write_nothing', '', '{}')",
                "P4001",
            ),
            (
                "SELECT idem_fail('input_rules_raise_and_write_nothing', NULL, true)",
                "P4001",
            ),
            ("SELECT idem_checkpoint(NULL, 'k', 'p')", "P4000"),
            (
                "SELECT idem_forget('input_rules_raise_and_write_nothing', NULL)",
                "P4001",
            ),
        ];
        for (sql, expected) in cases {
            assert_eq!(sqlstate(sql), expected, "{sql}");
        }
        // Exactly 255 bytes is allowed.
        assert_eq!(
            claim(&"s".repeat(255), &"k".repeat(255), &"h".repeat(255)).0,
            "new_claim"
        );
        assert_eq!(
            one::<i64>("SELECT count(*) FROM idempotency.requests"),
            Some(1)
        );
    }

    #[pg_test]
    fn calls_are_immune_to_search_path_tricks() {
        // An operator that would make every key equal, and a shadowing table, first on search_path.
        run("CREATE SCHEMA evil");
        run(
            "CREATE FUNCTION evil.always(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT true'",
        );
        run("CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.always)");
        run("CREATE TABLE evil.requests (LIKE idempotency.requests)");
        run("SET LOCAL search_path = evil, pg_catalog, public");
        assert_eq!(
            claim("calls_are_immune_to_search_path_tricks", "a", "h").0,
            "new_claim"
        );
        assert_eq!(
            claim("calls_are_immune_to_search_path_tricks", "b", "h").0,
            "new_claim"
        );
        run("SELECT idem_complete('calls_are_immune_to_search_path_tricks', 'a', '1')");
        assert_eq!(
            claim("calls_are_immune_to_search_path_tricks", "b", "h").0,
            "processing_active"
        );
        assert_eq!(one::<i64>("SELECT count(*) FROM evil.requests"), Some(0));
        run("RESET search_path");
    }

    #[pg_test]
    fn works_from_plpgsql() {
        let result = one::<String>(
            "DO $$ DECLARE r record; BEGIN \
               SELECT * INTO r FROM idem_claim('plpgsql', 'k', 'h'); \
               IF r.outcome = 'new_claim' THEN PERFORM idem_complete('plpgsql', 'k', '{\"v\": 1}', r.attempt); END IF; \
             END $$; SELECT response::text FROM idem_claim('plpgsql', 'k', 'h')",
        );
        assert_eq!(result.as_deref(), Some(r#"{"v": 1}"#));
    }

    #[pg_test]
    fn custom_sqlstates_can_be_caught_in_a_loop() {
        claim("custom_sqlstates_can_be_caught_in_a_loop", "k", "h1");
        let caught = one::<i32>(
            "DO $$ DECLARE n int := 0; BEGIN \
               FOR i IN 1..500 LOOP \
                 BEGIN PERFORM * FROM idem_claim('custom_sqlstates_can_be_caught_in_a_loop', 'k', 'h2'); EXCEPTION WHEN SQLSTATE 'P4002' THEN n := n + 1; END; \
               END LOOP; \
               PERFORM set_config('tests.caught', n::text, true); \
             END $$; SELECT current_setting('tests.caught')::int",
        );
        assert_eq!(caught, Some(500));
    }

    /// Mutation `write-privilege-direct`: the direct write checks the privilege it uses (INSERT
    /// for a claim, UPDATE for a complete), not only the SELECT of the read before it.
    #[pg_test]
    fn claim_needs_table_privileges() {
        catalog_turn();
        run("CREATE ROLE idem_no_grants");
        run("GRANT USAGE ON SCHEMA idempotency, tests TO idem_no_grants");
        run("SET LOCAL ROLE idem_no_grants");
        assert_eq!(
            sqlstate("SELECT * FROM idem_claim('privileges', 'k', 'h')"),
            "42501"
        );
        assert_eq!(
            sqlstate("SELECT idem_complete('privileges', 'k', '{}')"),
            "42501"
        );
        // May read, not insert: a new key is not claimed.
        run("RESET ROLE");
        run("GRANT SELECT ON idempotency.requests TO idem_no_grants");
        run("SET LOCAL ROLE idem_no_grants");
        assert_eq!(
            sqlstate("SELECT * FROM idem_claim('privileges', 'read_only', 'h')"),
            "42501"
        );
        // May read and insert, not update: the claim is made, its complete is refused.
        run("RESET ROLE");
        run("GRANT INSERT ON idempotency.requests TO idem_no_grants");
        run("SET LOCAL ROLE idem_no_grants");
        assert_eq!(claim("privileges", "no_update", "h").0, "new_claim");
        assert_eq!(
            sqlstate("SELECT idem_complete('privileges', 'no_update', '{}')"),
            "42501"
        );
        run("RESET ROLE");
        assert_eq!(
            one::<String>(
                "SELECT string_agg(key || ':' || status, ' ' ORDER BY key) \
                 FROM idempotency.requests WHERE scope = 'privileges'"
            )
            .as_deref(),
            Some("no_update:processing")
        );
        run("GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency.requests TO idem_no_grants");
        run("SET LOCAL ROLE idem_no_grants");
        assert_eq!(claim("privileges", "k", "h").0, "new_claim");
        run("RESET ROLE");
    }

    #[pg_test]
    fn row_level_security_is_honoured() {
        catalog_turn();
        // A replay the policy hides must not be served by the direct index read.
        claim("rls_other", "k", "h");
        run("SELECT idem_complete('rls_other', 'k', '{}')");
        run("CREATE ROLE rls_tenant");
        run("GRANT USAGE ON SCHEMA idempotency, tests TO rls_tenant");
        run("GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency.requests TO rls_tenant");
        run("ALTER TABLE idempotency.requests ENABLE ROW LEVEL SECURITY");
        run("CREATE POLICY tenant ON idempotency.requests USING (scope = current_user)");
        run("SET LOCAL ROLE rls_tenant");
        assert_eq!(claim("rls_tenant", "k", "h").0, "new_claim");
        assert_eq!(claim("rls_tenant", "k", "h").0, "processing_active");
        assert_eq!(
            sqlstate("SELECT * FROM idem_claim('rls_other', 'k', 'h')"),
            "42501"
        );
        run("RESET ROLE");
    }
}
