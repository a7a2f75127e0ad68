//! In-backend tests of finishing an attempt: complete, fail, checkpoint, fencing, forget.
//! Each #[pg_test] runs in one transaction, so time is moved by editing the row's timestamps.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg_tests::helpers::*;

    #[pg_test]
    fn complete_rules() {
        assert_eq!(
            sqlstate("SELECT idem_complete('complete_rules', 'missing', '{}')"),
            "P4010"
        );
        claim("complete_rules", "k", "h");
        run(r#"SELECT idem_complete('complete_rules', 'k', '{"a": 1}', 1)"#);
        // Repeating with the same attempt and an identical response is a no-op ...
        assert_eq!(
            sqlstate(r#"SELECT idem_complete('complete_rules', 'k', '{"a":1}', 1)"#),
            "ok"
        );
        assert_eq!(
            sqlstate(r#"SELECT idem_complete('complete_rules', 'k', '{"a":1}')"#),
            "ok"
        );
        // ... another response is not.
        assert_eq!(
            sqlstate(r#"SELECT idem_complete('complete_rules', 'k', '{"a": 2}', 1)"#),
            "P4010"
        );
        // An attempt that is not the record's is fenced off.
        assert_eq!(
            sqlstate(r#"SELECT idem_complete('complete_rules', 'k', '{"a": 1}', 7)"#),
            "P4012"
        );
        claim("complete_rules", "f", "h");
        run("SELECT idem_fail('complete_rules', 'f', false)");
        assert_eq!(
            sqlstate("SELECT idem_complete('complete_rules', 'f', '{}')"),
            "P4010"
        );
        // NULL response is stored as NULL and replayed as NULL.
        claim("complete_rules", "n", "h");
        run("SELECT idem_complete('complete_rules', 'n', NULL)");
        assert_eq!(
            one::<bool>(
                "SELECT response IS NULL AND outcome = 'replay_success' FROM idem_claim('complete_rules', 'n', 'h')"
            ),
            Some(true)
        );
        assert_eq!(
            sqlstate("SELECT idem_complete('complete_rules', 'n', NULL)"),
            "ok"
        );
    }

    #[pg_test]
    fn complete_extends_expiry_to_retention_after_completion() {
        run(
            "SELECT * FROM idem_claim('complete_extends_expiry_to_retention_after_completion', 'k', 'h', retention => '1 hour')",
        );
        run(
            "UPDATE idempotency.requests SET expires_at = now() - interval '1 minute', created_at = now() - interval '2 hours', claimed_at = now() - interval '2 hours'",
        );
        run(
            "SELECT idem_complete('complete_extends_expiry_to_retention_after_completion', 'k', '{}')",
        );
        assert_eq!(
            one::<bool>("SELECT expires_at = now() + interval '1 hour' FROM idempotency.requests"),
            Some(true)
        );
    }

    #[pg_test]
    fn fail_rules() {
        assert_eq!(
            sqlstate("SELECT idem_fail('fail_rules', 'missing', true)"),
            "P4011"
        );
        claim("fail_rules", "k", "h");
        assert_eq!(
            sqlstate("SELECT idem_fail('fail_rules', 'k', NULL)"),
            "22004"
        );
        assert_eq!(
            sqlstate("SELECT idem_fail('fail_rules', 'k', true, 'c', 'm', 3)"),
            "P4012"
        );
        run("SELECT idem_fail('fail_rules', 'k', false, 'c', 'm', 1)");
        assert_eq!(
            sqlstate("SELECT idem_fail('fail_rules', 'k', false, 'c', 'm', 1)"),
            "ok"
        );
        assert_eq!(
            sqlstate("SELECT idem_fail('fail_rules', 'k', false, 'other', 'm', 1)"),
            "P4011"
        );
        assert_eq!(
            sqlstate("SELECT idem_fail('fail_rules', 'k', true, 'c', 'm', 1)"),
            "P4011"
        );
        assert_eq!(
            sqlstate("SELECT idem_complete('fail_rules', 'k', '{}')"),
            "P4010"
        );
        let long = "x".repeat(8193);
        assert_eq!(
            sqlstate(&format!(
                "SELECT idem_fail('fail_rules', 'k', true, 'c', '{long}')"
            )),
            "P4004"
        );
    }

    #[pg_test]
    fn checkpoint_records_phase_and_renews_lease() {
        run(
            "SELECT * FROM idem_claim('checkpoint_records_phase_and_renews_lease', 'k', 'h', lease => '30 seconds')",
        );
        run("UPDATE idempotency.requests SET locked_until = now() + interval '1 second'");
        let renewed = one::<bool>(
            "SELECT idem_checkpoint('checkpoint_records_phase_and_renews_lease', 'k', 'phase-1') BETWEEN now() + interval '30 seconds' AND clock_timestamp() + interval '30 seconds'",
        );
        assert_eq!(renewed, Some(true));
        assert_eq!(
            one::<String>("SELECT recovery_point FROM idempotency.requests"),
            Some("phase-1".into())
        );
        // A new lease length is kept for later renewals.
        run(
            "SELECT idem_checkpoint('checkpoint_records_phase_and_renews_lease', 'k', 'phase-2', 1, '10 minutes')",
        );
        assert_eq!(
            one::<bool>(
                "SELECT idem_checkpoint('checkpoint_records_phase_and_renews_lease', 'k', NULL) BETWEEN now() + interval '10 minutes' AND clock_timestamp() + interval '10 minutes'"
            ),
            Some(true)
        );
        // NULL recovery point renews the lease and keeps the phase.
        assert_eq!(
            one::<String>("SELECT recovery_point FROM idempotency.requests"),
            Some("phase-2".into())
        );
        assert_eq!(
            sqlstate(
                "SELECT idem_checkpoint('checkpoint_records_phase_and_renews_lease', 'k', 'p', 2)"
            ),
            "P4012"
        );
        assert_eq!(
            sqlstate(
                "SELECT idem_checkpoint('checkpoint_records_phase_and_renews_lease', 'k', 'p', lease => '-1 second')"
            ),
            "22023"
        );
        assert_eq!(
            sqlstate(
                "SELECT idem_checkpoint('checkpoint_records_phase_and_renews_lease', 'missing', 'p')"
            ),
            "P4013"
        );
        run("SELECT idem_complete('checkpoint_records_phase_and_renews_lease', 'k', '{}')");
        assert_eq!(
            sqlstate(
                "SELECT idem_checkpoint('checkpoint_records_phase_and_renews_lease', 'k', 'p')"
            ),
            "P4013"
        );
    }

    #[pg_test]
    fn fencing_after_takeover() {
        claim("fencing_after_takeover", "k", "h");
        run("UPDATE idempotency.requests SET locked_until = now() - interval '1 second'");
        assert_eq!(
            claim("fencing_after_takeover", "k", "h"),
            ("processing_stale".into(), Some(2))
        );
        let before = table_state();
        assert_eq!(
            sqlstate("SELECT idem_complete('fencing_after_takeover', 'k', '{}', 1)"),
            "P4012"
        );
        assert_eq!(
            sqlstate("SELECT idem_fail('fencing_after_takeover', 'k', true, attempt => 1)"),
            "P4012"
        );
        assert_eq!(
            sqlstate("SELECT idem_checkpoint('fencing_after_takeover', 'k', 'p', 1)"),
            "P4012"
        );
        assert_eq!(table_state(), before);
        run("SELECT idem_complete('fencing_after_takeover', 'k', '{}', 2)");
        assert_eq!(
            status("fencing_after_takeover", "k").as_deref(),
            Some("succeeded")
        );
    }

    #[pg_test]
    fn forget_deletes_in_any_state() {
        claim("forget_deletes_in_any_state", "k", "h");
        assert_eq!(
            one::<bool>("SELECT idem_forget('forget_deletes_in_any_state', 'k')"),
            Some(true)
        );
        assert_eq!(
            one::<bool>("SELECT idem_forget('forget_deletes_in_any_state', 'k')"),
            Some(false)
        );
        assert_eq!(
            claim("forget_deletes_in_any_state", "k", "other").0,
            "new_claim"
        );
    }
}
