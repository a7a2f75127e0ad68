//! In-backend tests of expiry and leases: an expired record starts over, a processing one is
//! taken over and never purged, finishing extends an expiry and never shortens it, reclaim's
//! grace, leases by the clock. Each test uses its own scope; most name the mutation of
//! scripts/mutants.sh they kill (docs/mutants.md).

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg_tests::helpers::*;

    /// Mutations `reset-recovery-point`, `reset-failure` (survivor 2): a record past its retention
    /// starts over as if purged: nothing of the old request survives.
    #[pg_test]
    fn an_expired_record_starts_over_without_its_old_state() {
        let s = "guard_reset";
        run("SELECT * FROM idem_claim('guard_reset', 'k', 'old', claimed_by => 'worker-a')");
        run("SELECT idem_checkpoint('guard_reset', 'k', 'charged')");
        run("SELECT idem_fail('guard_reset', 'k', true, 'timeout', 'upstream timed out')");
        run(
            "UPDATE idempotency.requests SET expires_at = now() - interval '1 second', \
             created_at = now() - interval '2 days', claimed_at = now() - interval '2 days', \
             updated_at = now() - interval '1 day' WHERE scope = 'guard_reset'",
        );
        let answer = one::<String>(
            "SELECT concat_ws(',', outcome, attempt, recovery_point IS NULL, failure_code IS NULL, \
             failure_message IS NULL, response IS NULL) \
             FROM idem_claim('guard_reset', 'k', 'new', claimed_by => 'worker-b')",
        );
        assert_eq!(answer.as_deref(), Some("new_claim,1,t,t,t,t"));
        assert_eq!(
            rows_of(
                s,
                "request_hash, status, attempt, recovery_point IS NULL, failure_code IS NULL, \
                        failure_message IS NULL, claimed_by, created_at = now(), claimed_at = now()"
            ),
            "k:new,processing,1,t,t,t,worker-b,t,t"
        );
    }

    /// Mutation `purge-inner-processing`: purge picks its candidates among finished records only;
    /// a processing record long past `expires_at` is never deleted, nor does it take a batch slot.
    #[pg_test]
    fn purge_never_takes_a_processing_record_even_first_in_line() {
        let s = "guard_purge";
        seed_record(s, "processing", "processing");
        set_time(s, "processing", "expires_at", "-2 days");
        set_time(s, "processing", "locked_until", "-2 days");
        seed_record(s, "done", "succeeded");
        set_time(s, "done", "expires_at", "-1 second");
        assert_eq!(purge_n(1), 1);
        assert_eq!(statuses(s), "processing=processing");
        assert_eq!(purge_n(1), 0);
        assert_eq!(statuses(s), "processing=processing");
    }

    /// Mutation `expiry-ignores-status`: a processing record past `expires_at` is still the same
    /// request: a stale lease is taken over (attempt 2, recovery point kept), another payload is
    /// P4002 — never a fresh start.
    #[pg_test]
    fn an_expired_processing_record_is_taken_over_not_started_over() {
        let s = "guard_processing_expiry";
        claim(s, "k", "h");
        run("SELECT idem_checkpoint('guard_processing_expiry', 'k', 'step-1')");
        run(
            "UPDATE idempotency.requests SET locked_until = now() - interval '1 minute', \
             expires_at = now() - interval '1 hour', created_at = now() - interval '2 days', \
             claimed_at = now() - interval '2 days' WHERE scope = 'guard_processing_expiry'",
        );
        assert_eq!(
            sqlstate("SELECT * FROM idem_claim('guard_processing_expiry', 'k', 'other')"),
            "P4002"
        );
        let taken = one::<String>(
            "SELECT concat_ws(',', outcome, attempt, recovery_point) FROM idem_claim('guard_processing_expiry', 'k', 'h')",
        );
        assert_eq!(taken.as_deref(), Some("processing_stale,2,step-1"));
    }

    /// complete / fail with `retention => '1 hour'`: on records whose expiry is later than
    /// now() + retention (kept) and earlier (extended to it).
    fn finish_with_expiries(s: &str) {
        let q = pgrx::spi::quote_literal(s);
        for key in [
            "complete_late",
            "complete_early",
            "final_late",
            "final_early",
            "retry_early",
        ] {
            run(&format!(
                "SELECT * FROM idem_claim({q}, '{key}', 'h', retention => '1 hour')"
            ));
        }
        run(&format!(
            "UPDATE idempotency.requests SET expires_at = CASE WHEN key LIKE '%late' \
             THEN now() + interval '10 days' ELSE now() - interval '1 minute' END WHERE scope = {q}"
        ));
        run(&format!("SELECT idem_complete({q}, 'complete_late', '1')"));
        run(&format!(
            "SELECT idem_complete({q}, 'complete_early', '1', 1)"
        ));
        run(&format!("SELECT idem_fail({q}, 'final_late', false, 'E')"));
        run(&format!(
            "SELECT idem_fail({q}, 'final_early', false, 'E', 'm', 1)"
        ));
        run(&format!("SELECT idem_fail({q}, 'retry_early', true, 'E')"));
        assert_eq!(
            rows_of(
                s,
                "status, CASE expires_at WHEN now() + interval '10 days' THEN 'kept' \
                 WHEN now() + interval '1 hour' THEN 'extended' ELSE expires_at::text END"
            ),
            "complete_early:succeeded,extended complete_late:succeeded,kept \
             final_early:failed_final,extended final_late:failed_final,kept \
             retry_early:failed_retryable,extended",
            "{s}"
        );
    }

    /// Mutations `finish-expiry-greatest`, `finish-expiry-kept`: finishing sets
    /// `expires_at = GREATEST(expires_at, now() + retention)` (`Transition::apply`), here directly.
    #[pg_test]
    fn finishing_extends_expiry_but_never_shortens_it() {
        finish_with_expiries("guard_expiry_direct");
    }

    /// Mutations `finish-expiry-greatest`, `sql-update-expiry`, `trigger-fallback`: the same through
    /// SQL (a user trigger on the table).
    #[pg_test]
    fn finishing_through_sql_extends_expiry_but_never_shortens_it() {
        // The trigger first: its lock (SHARE ROW EXCLUSIVE) waits for every concurrent test's
        // claims, so it must not wait while holding a claim's lock itself.
        add_audit_trigger("guard_expiry_audit");
        finish_with_expiries("guard_expiry_sql");
        // The second round went through SQL: the trigger saw the 5 inserts, the 5 updates of the
        // expiries, and the 5 finishing updates.
        assert_eq!(
            one::<i64>(
                "SELECT count(*) FROM tests.guard_expiry_audit WHERE scope = 'guard_expiry_sql'"
            ),
            Some(15)
        );
    }

    /// Mutation `reclaim-greatest`: a reclaimed record's expiry is extended like a finished one's,
    /// so that purge does not delete it (and its recovery point) at once.
    #[pg_test]
    fn reclaim_extends_an_ended_expiry() {
        let s = "guard_reclaim_expiry";
        seed_record(s, "k", "processing");
        run("SELECT idem_checkpoint('guard_reclaim_expiry', 'k', 'step-1')");
        set_time(s, "k", "locked_until", "-1 minute");
        set_time(s, "k", "expires_at", "-1 hour");
        assert_eq!(reclaim_n(10), 1);
        assert_eq!(
            rows_of(s, "status, recovery_point, expires_at = now() + retention"),
            "k:failed_retryable,step-1,t"
        );
        assert_eq!(purge_n(10), 0);
        assert_eq!(statuses(s), "k=failed_retryable");
    }

    /// Mutations `reclaim-grace-sign`, `reclaim-grace-units`, `reclaim-grace-ignored`,
    /// `reclaim-lease-le`: `idem_reclaim` takes a lease only once it ended more than
    /// `idempotency.reclaim_grace` ago (500 ms in the pg_test cluster, lib.rs).
    #[pg_test]
    fn reclaim_waits_out_the_grace() {
        assert_eq!(
            one::<String>("SELECT current_setting('idempotency.reclaim_grace')").as_deref(),
            Some("500ms"),
            "set by pg_test::postgresql_conf_options"
        );
        let s = "guard_grace";
        for (key, ended) in [
            ("a_within", "-200 milliseconds"),
            ("b_at_edge", "-500 milliseconds"),
            ("c_beyond", "-501 milliseconds"),
        ] {
            seed_record(s, key, "processing");
            set_time(s, key, "locked_until", ended);
        }
        assert_eq!(reclaim_n(10), 1);
        assert_eq!(
            statuses(s),
            "a_within=processing b_at_edge=processing c_beyond=failed_retryable"
        );
    }

    /// Mutations `judge-lease-by-txn`, `new-lease-from-txn`, `takeover-lease-from-txn`: leases
    /// start, and are judged, by the clock at the claim, not by the transaction's start.
    #[pg_test]
    fn leases_start_and_end_by_the_clock() {
        let s = "guard_clock";
        run("SELECT pg_sleep(0.01)");
        claim(s, "k", "h");
        assert_eq!(
            rows_of(s, "locked_until > now() + interval '5 minutes'"),
            "k:t"
        );
        // A lease that ended after the transaction began, but before this claim.
        run(
            "UPDATE idempotency.requests SET locked_until = now() + (clock_timestamp() - now()) / 2 \
             WHERE scope = 'guard_clock'",
        );
        run("SELECT pg_sleep(0.01)");
        assert_eq!(claim(s, "k", "h"), ("processing_stale".into(), Some(2)));
        assert_eq!(
            rows_of(s, "locked_until > now() + interval '5 minutes'"),
            "k:t"
        );
    }
}
