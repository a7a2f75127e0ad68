//! In-backend guards of decisions that, before these tests, only one test (often a slow one
//! with real sessions) or none at all would notice breaking. Each names the mutation of
//! scripts/mutants.sh it kills (docs/mutants.md). Each test uses its own scope.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg_tests::helpers::*;

    /// `idempotency.requests` rows of `scope` as "key:column=value,..." for the given columns.
    fn rows_of(scope: &str, columns: &str) -> String {
        one::<String>(&format!(
        "SELECT coalesce(string_agg(format('%s:%s', key, concat_ws(',', {columns})), ' ' ORDER BY key), '') \
             FROM idempotency.requests WHERE scope = {}",
        pgrx::spi::quote_literal(scope)
    ))
    .unwrap_or_default()
    }

    /// A trigger on idempotency.requests (until the test's transaction ends) that notes every
    /// row it sees in tests.`audit`: the table now needs SQL for every write.
    fn add_audit_trigger(audit: &str) {
        run(&format!(
            "CREATE TABLE tests.{audit} (op text, scope text, key text)"
        ));
        run(&format!(
            "CREATE FUNCTION tests.{audit}_fn() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN INSERT INTO tests.{audit} VALUES (TG_OP, NEW.scope, NEW.key); RETURN NEW; END $$"
        ));
        run(&format!(
            "CREATE TRIGGER {audit} AFTER INSERT OR UPDATE ON idempotency.requests \
             FOR EACH ROW EXECUTE FUNCTION tests.{audit}_fn()"
        ));
    }

    /// What the audit trigger saw for `scope`: "op:key ..." in order of arrival.
    fn audited(audit: &str, scope: &str) -> String {
        one::<String>(&format!(
        "SELECT coalesce(string_agg(op || ':' || key, ' ' ORDER BY ctid), '') FROM tests.{audit} \
             WHERE scope = {}",
        pgrx::spi::quote_literal(scope)
    ))
    .unwrap_or_default()
    }

    // ---------------------------------------------------------------------------------------------
    // The six the first outside campaign missed.

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

    /// Mutation `outbox-dedupe-topic` (survivor 3): a repeated put finds the message of its own
    /// topic, not another topic's message with the same dedupe key.
    #[pg_test]
    fn outbox_dedupe_finds_the_message_of_its_own_topic() {
        let a = put("guard_dedupe_a", "1", Some("same-key"));
        let b = put("guard_dedupe_b", "2", Some("same-key"));
        assert_ne!(a, b, "dedupe keys are per topic");
        assert_eq!(put("guard_dedupe_b", "3", Some("same-key")), b);
        assert_eq!(put("guard_dedupe_a", "4", Some("same-key")), a);
        assert_eq!(
            one::<i64>("SELECT count(*) FROM idempotency.outbox WHERE topic LIKE 'guard_dedupe_%'"),
            Some(2)
        );
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

    // ---------------------------------------------------------------------------------------------
    // Branches one test guarded: processing never expires, finishing extends expiry, reclaim
    // grace, trigger fallback.

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
    // Tests that add a trigger do it first: its lock (SHARE ROW EXCLUSIVE) waits for every
    // concurrent test's claims, so it must not wait while holding a claim's lock itself.
    #[pg_test]
    fn finishing_through_sql_extends_expiry_but_never_shortens_it() {
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

    // ---------------------------------------------------------------------------------------------
    // More decisions of the claim path.

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
