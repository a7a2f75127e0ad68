//! In-backend tests of how a record is written: the direct path steps aside for SQL where it
//! must (a claim newer than the transaction, a user trigger, a read-only transaction), a new
//! claim holds the documented key lock, a takeover records its own claimer. Each test uses its
//! own scope; most name the mutation of scripts/mutants.sh they kill (docs/mutants.md).

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg_tests::helpers::*;

    /// Mutation `finish-created-at` (survivor 1): the direct finish must step aside when the claim
    /// was made after this transaction began (another session's claim, committed meanwhile), so
    /// that SQL raises `requests_times_check` instead of a row that breaks it being written.
    #[pg_test]
    fn finishing_a_claim_newer_than_the_transaction_is_a_check_violation() {
        let s = "guard_times";
        for key in ["complete", "fail_final", "fail_retryable"] {
            claim(s, key, "h");
        }
        // As another session's claim looks to a transaction that began before it.
        run(
            "UPDATE idempotency.requests SET created_at = now() + interval '1 hour', \
             claimed_at = now() + interval '1 hour', updated_at = now() + interval '1 hour' \
             WHERE scope = 'guard_times'",
        );
        let before = table_state();
        assert_eq!(
            sqlstate("SELECT idem_complete('guard_times', 'complete', '{}')"),
            "23514"
        );
        assert_eq!(
            sqlstate("SELECT idem_fail('guard_times', 'fail_final', false, 'E')"),
            "23514"
        );
        assert_eq!(
            sqlstate("SELECT idem_fail('guard_times', 'fail_retryable', true, 'E')"),
            "23514"
        );
        assert_eq!(
            sqlstate("SELECT idem_complete('guard_times', 'complete', '{}', 1)"),
            "23514"
        );
        assert_eq!(table_state(), before);
    }

    /// Mutations `takeover-claimed-by`, `takeover-claimed-at` (survivor 4): a takeover records
    /// who took over, and when; the old claimer's name must not stay (the reclaim message and
    /// operators read it).
    #[pg_test]
    fn a_takeover_records_its_own_claimer() {
        let s = "guard_takeover";
        run("SELECT * FROM idem_claim('guard_takeover', 'k', 'h', claimed_by => 'worker-a')");
        run(
            "UPDATE idempotency.requests SET locked_until = now() - interval '1 second', \
             created_at = now() - interval '1 hour', claimed_at = now() - interval '1 hour' \
             WHERE scope = 'guard_takeover'",
        );
        let taken = one::<String>(
            "SELECT outcome || ',' || attempt FROM idem_claim('guard_takeover', 'k', 'h', claimed_by => 'worker-b')",
        );
        assert_eq!(taken.as_deref(), Some("processing_stale,2"));
        assert_eq!(rows_of(s, "claimed_by, claimed_at = now()"), "k:worker-b,t");
        // A retryable failure taken over by an anonymous claimer: no name.
        run("SELECT idem_fail('guard_takeover', 'k', true, 'E')");
        assert_eq!(claim(s, "k", "h"), ("retryable_failure".into(), Some(3)));
        assert_eq!(rows_of(s, "coalesce(claimed_by, '<null>')"), "k:<null>");
    }

    /// The claim's key lock of (scope, key), as pg_locks shows it: class 18756 (`objsubid`), the
    /// two halves of `idem_lock_key(scope, key)` (`classid`, `objid`), held by this backend.
    fn holds_key_lock(scope: &str, key: &str) -> bool {
        let (s, k) = (
            pgrx::spi::quote_literal(scope),
            pgrx::spi::quote_literal(key),
        );
        one::<i64>(&format!(
            "SELECT count(*) FROM pg_catalog.pg_locks l \
             WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.objsubid = 18756 \
               AND l.granted AND l.mode = 'ExclusiveLock' \
               AND l.classid::int8 = (idem_lock_key({s}, {k}) >> 32) & 4294967295 \
               AND l.objid::int8 = idem_lock_key({s}, {k}) & 4294967295"
        )) == Some(1)
    }

    /// Mutation `lock-key-swapped` (survivor 5): the lock a new claim holds is the one documented,
    /// `idem_lock_key(scope, key)` (docs/security.md).
    #[pg_test]
    fn a_new_claim_holds_the_documented_key_lock() {
        assert_eq!(
            claim("guard_lock_scope", "guard-lock-key", "h").0,
            "new_claim"
        );
        assert!(holds_key_lock("guard_lock_scope", "guard-lock-key"));
        assert!(!holds_key_lock("guard-lock-key", "guard_lock_scope"));
        // Through SQL: in a_user_trigger_fires_for_every_write.
    }

    /// Mutations `trigger-fallback`, `fail-sql-retryable`, `lock-key-swapped`: with a user trigger on the table, every
    /// write of the protocol goes through SQL, so the trigger fires, and the SQL statements do
    /// what the direct writes do.
    #[pg_test]
    fn a_user_trigger_fires_for_every_write() {
        let s = "guard_trigger";
        add_audit_trigger("guard_trigger_audit");
        claim(s, "done", "h");
        // The SQL path takes the documented key lock too (lock-key-swapped).
        assert!(holds_key_lock(s, "done"));
        assert!(!holds_key_lock("done", s));
        run(r#"SELECT idem_complete('guard_trigger', 'done', '{"ok": true}')"#);
        claim(s, "final", "h");
        run("SELECT idem_fail('guard_trigger', 'final', false, 'E', 'no')");
        claim(s, "retry", "h");
        run("SELECT idem_fail('guard_trigger', 'retry', true, 'E', 'later', 1)");
        assert_eq!(
            audited("guard_trigger_audit", s),
            "INSERT:done UPDATE:done INSERT:final UPDATE:final INSERT:retry UPDATE:retry"
        );
        assert_eq!(
            rows_of(
                s,
                "status, response, failure_code, failure_message, locked_until IS NULL"
            ),
            r#"done:succeeded,{"ok": true},t final:failed_final,E,no,t retry:failed_retryable,E,later,t"#
        );
        assert_eq!(
        one::<String>("SELECT concat_ws(',', outcome, attempt, response) FROM idem_claim('guard_trigger', 'done', 'h')")
            .as_deref(),
        Some(r#"replay_success,1,{"ok": true}"#)
    );
    }

    /// Mutation `read-only-direct`: a read-only transaction gets no direct write; SQL raises 25006.
    #[pg_test]
    fn a_read_only_transaction_writes_nothing() {
        claim("guard_read_only", "old", "h");
        run("SELECT idem_complete('guard_read_only', 'old', '1')");
        claim("guard_read_only", "open", "h");
        run("SET LOCAL transaction_read_only = on");
        assert_eq!(claim("guard_read_only", "old", "h").0, "replay_success");
        assert_eq!(
            sqlstate("SELECT * FROM idem_claim('guard_read_only', 'new', 'h')"),
            "25006"
        );
        assert_eq!(
            sqlstate("SELECT idem_complete('guard_read_only', 'open', '1')"),
            "25006"
        );
    }
}
