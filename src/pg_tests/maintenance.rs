//! In-backend tests of idem_reclaim / idem_purge, idempotency.stats and idem_metrics.
//! pg_tests run concurrently, each in its own never-committed transaction: other tests' rows
//! are invisible here, and every assertion looks at its own scope only.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg_tests::helpers::*;

    #[pg_test]
    fn reclaim_turns_only_expired_leases_into_retryable_failures() {
        let s = "mt_reclaim";
        seed_record(s, "expired", "processing");
        run("SELECT idem_checkpoint('mt_reclaim', 'expired', 'phase-2')");
        run(
            "UPDATE idempotency.requests SET claimed_by = 'worker-a' WHERE scope = 'mt_reclaim' AND key = 'expired'",
        );
        set_time(s, "expired", "locked_until", "-1 second");
        seed_record(s, "live", "processing");
        for state in ["succeeded", "failed_final", "failed_retryable"] {
            seed_record(s, state, state);
            set_time(s, state, "expires_at", "-1 hour");
        }
        let before = table_state();

        assert_eq!(one::<i64>("SELECT idem_reclaim()"), Some(1));
        assert_eq!(
            statuses(s),
            "expired=failed_retryable failed_final=failed_final failed_retryable=failed_retryable \
             live=processing succeeded=succeeded"
        );
        let reclaimed = one::<bool>(
            "SELECT failure_code = 'lease_expired' \
               AND failure_message = format('the lease of attempt 1 (claimed by worker-a) ended at %s', now() - interval '1 second') \
               AND locked_until IS NULL AND recovery_point = 'phase-2' AND attempt = 1 \
               AND updated_at = now() AND expires_at >= now() + retention \
             FROM idempotency.requests WHERE scope = 'mt_reclaim' AND key = 'expired'",
        );
        assert_eq!(reclaimed, Some(true), "{before}");
        assert_eq!(one::<i64>("SELECT idem_reclaim()"), Some(0), "nothing left");

        // The next claim takes it over as a retryable failure, with the recovery point.
        let row = Spi::get_three::<String, i32, String>(
        "SELECT outcome::text, attempt, recovery_point FROM idem_claim('mt_reclaim', 'expired', 'h')",
    )
    .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            row,
            (
                Some("retryable_failure".into()),
                Some(2),
                Some("phase-2".into())
            )
        );
    }

    #[pg_test]
    fn reclaim_message_without_claimed_by() {
        seed_record("mt_reclaim_anon", "k", "processing");
        set_time("mt_reclaim_anon", "k", "locked_until", "-5 minutes");
        assert_eq!(reclaim_n(10), 1);
        assert_eq!(
            one::<bool>(
                "SELECT failure_message = format('the lease of attempt 1 ended at %s', now() - interval '5 minutes') \
                 FROM idempotency.requests WHERE scope = 'mt_reclaim_anon'"
            ),
            Some(true)
        );
    }

    #[pg_test]
    fn reclaim_takes_at_most_a_batch() {
        let s = "mt_reclaim_batch";
        for key in ["a", "b", "c"] {
            seed_record(s, key, "processing");
        }
        // Oldest lease end first.
        set_time(s, "a", "locked_until", "-3 seconds");
        set_time(s, "b", "locked_until", "-2 seconds");
        set_time(s, "c", "locked_until", "-1 second");
        assert_eq!(reclaim_n(2), 2);
        assert_eq!(
            statuses(s),
            "a=failed_retryable b=failed_retryable c=processing"
        );
        assert_eq!(reclaim_n(2), 1);
        assert_eq!(reclaim_n(2), 0);
    }

    #[pg_test]
    fn purge_deletes_only_finished_records_past_their_expiry() {
        let s = "mt_purge";
        for state in ["succeeded", "failed_final", "failed_retryable"] {
            let expired = format!("{state}_old");
            seed_record(s, &expired, state);
            set_time(s, &expired, "expires_at", "-1 second");
            let fresh = format!("{state}_new");
            seed_record(s, &fresh, state);
        }
        // Processing past its retention, with a live and with an ended lease: never purged.
        seed_record(s, "processing_old", "processing");
        set_time(s, "processing_old", "expires_at", "-1 day");
        seed_record(s, "processing_older", "processing");
        set_time(s, "processing_older", "expires_at", "-2 days");
        set_time(s, "processing_older", "locked_until", "-2 days");

        assert_eq!(one::<i64>("SELECT idem_purge()"), Some(3));
        assert_eq!(
            statuses(s),
            "failed_final_new=failed_final failed_retryable_new=failed_retryable \
             processing_old=processing processing_older=processing succeeded_new=succeeded"
        );
        assert_eq!(purge_n(100), 0);
        // A purged key is free again.
        assert_eq!(
            claim(s, "succeeded_old", "other"),
            ("new_claim".into(), Some(1))
        );
    }

    #[pg_test]
    fn purge_takes_at_most_a_batch() {
        let s = "mt_purge_batch";
        for key in ["a", "b", "c", "d", "e"] {
            seed_record(s, key, "succeeded");
            set_time(s, key, "expires_at", "-1 minute");
        }
        assert_eq!(purge_n(2), 2);
        assert_eq!(purge_n(2), 2);
        assert_eq!(purge_n(2), 1);
        assert_eq!(purge_n(2), 0);
        assert_eq!(statuses(s), "");
    }

    #[pg_test]
    fn maintenance_batch_must_be_positive() {
        assert_eq!(sqlstate("SELECT idem_reclaim(0)"), "22023");
        assert_eq!(sqlstate("SELECT idem_purge(-1)"), "22023");
        assert_eq!(sqlstate("SELECT idem_reclaim(NULL)"), "22004");
        assert_eq!(sqlstate("SELECT idem_purge(NULL)"), "22004");
    }

    #[pg_test]
    fn stats_view_counts_per_scope_and_status() {
        let s = "mt_stats";
        seed_record(s, "p1", "processing");
        seed_record(s, "p2", "processing");
        set_time(s, "p2", "locked_until", "-1 second");
        seed_record(s, "ok1", "succeeded");
        seed_record(s, "ok2", "succeeded");
        run(
            "UPDATE idempotency.requests SET attempt = 3, created_at = now() - interval '1 day', \
             claimed_at = now() WHERE scope = 'mt_stats' AND key = 'ok2'",
        );
        let rows = one::<String>(
            "SELECT string_agg(format('%s:%s:%s:%s:%s', status, records, max_attempt, expired_leases, \
                    oldest_created_at = now() - CASE status WHEN 'succeeded' THEN interval '1 day' ELSE interval '0' END), \
                    ' ' ORDER BY status) \
             FROM idempotency.stats WHERE scope = 'mt_stats'",
        );
        assert_eq!(
            rows.as_deref(),
            Some("processing:2:1:1:t succeeded:2:3:0:t")
        );
    }

    #[pg_test]
    fn metrics_need_the_library_preloaded() {
        let preloaded = one::<bool>(
            "SELECT 'idempotency' = ANY(string_to_array(replace(current_setting('shared_preload_libraries'), ' ', ''), ','))",
        );
        if preloaded == Some(true) {
            assert_eq!(one::<i64>("SELECT count(*) FROM idem_metrics()"), Some(14));
        } else {
            assert_eq!(sqlstate("SELECT * FROM idem_metrics()"), "55000");
            let hint = one::<String>("SELECT tests.error_hint_of('SELECT * FROM idem_metrics()')");
            assert!(
                hint.as_deref()
                    .is_some_and(|h| h.contains("shared_preload_libraries")),
                "{hint:?}"
            );
            // The claim path does not count then, and does not fail either.
            assert_eq!(claim("mt_metrics", "k", "h"), ("new_claim".into(), Some(1)));
        }
    }

    #[pg_test]
    fn settings_are_defined_with_units() {
        assert_eq!(
            one::<String>("SELECT current_setting('idempotency.naptime')").as_deref(),
            Some("10s")
        );
        // The defaults (boot_val): the pg_test cluster sets reclaim_grace (lib.rs, pg_test).
        assert_eq!(
        one::<String>(
            "SELECT string_agg(name || '=' || boot_val || coalesce(unit, '') || ':' || context, ' ' ORDER BY name) \
                 FROM pg_settings WHERE name IN ('idempotency.batch_size', 'idempotency.databases', \
                 'idempotency.naptime', 'idempotency.reclaim_grace', 'idempotency.worker_enabled')"
        )
        .as_deref(),
        Some(
            "idempotency.batch_size=10000:sighup idempotency.databases=:sighup \
                 idempotency.naptime=10000ms:sighup idempotency.reclaim_grace=0ms:sighup \
                 idempotency.worker_enabled=on:sighup"
        )
    );
        // Reloadable only: a session cannot change them.
        assert_eq!(sqlstate("SET idempotency.naptime = '1s'"), "55P02");
    }
}
