//! Bounds on what a row may hold, so that no row can make upkeep or a consumer fail for
//! everyone (docs/security.md, round 6): leases and retentions are at most 100 years, and the
//! outbox's attempt counter stops at the largest int4 instead of overflowing.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg_tests::helpers::*;

    #[pg_test]
    fn leases_and_retentions_over_100_years_are_22023_and_write_nothing() {
        run("CREATE FUNCTION tests.bd_echo(r jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT r'");
        for sql in [
            "SELECT idem_claim('bd-args', 'k', 'h', lease => '100 years 1 day')",
            "SELECT idem_claim('bd-args', 'k', 'h', retention => '1000000 years')",
            "SELECT idem_claim('bd-args', 'k', 'h', retention => '36001 days')",
            "SELECT idem_call('bd-args', 'k', '{}', 'tests.bd_echo(jsonb)', retention => '101 years')",
            "SELECT idem_inbox_accept('bd-args', 'm', 'h', '101 years')",
            "SELECT idem_outbox_take(1, '101 years')",
        ] {
            assert_eq!(sqlstate(sql), "22023", "{sql}");
        }
        assert_eq!(
            one::<i64>(
                "SELECT count(*) FROM idempotency.requests WHERE scope OPERATOR(pg_catalog.=) 'bd-args'"
            ),
            Some(0)
        );
        run(
            "SELECT idem_claim('bd-args', 'k', 'h', lease => '100 years', retention => '100 years')",
        );
        assert_eq!(
            sqlstate(
                "SELECT idem_checkpoint('bd-args', 'k', 'p', lease => '1200 months 1 second')"
            ),
            "22023"
        );
    }

    #[pg_test]
    fn a_row_cannot_be_given_an_interval_that_overflows_upkeep() {
        seed_record("bd-row", "k", "processing");
        for set in [
            "retention = '1000000 years'",
            "lease = '1000000 years'",
            "retention = '100 years 1 microsecond'",
        ] {
            let sql = format!(
                "UPDATE idempotency.requests SET {set} WHERE scope OPERATOR(pg_catalog.=) 'bd-row'"
            );
            assert_eq!(sqlstate(&sql), "23514", "{sql}");
        }
    }

    /// The longest retention on a lease that ended at -infinity: the row sorts first in every
    /// reclaim batch, which must still go through.
    #[pg_test]
    fn reclaim_goes_through_a_row_at_the_bounds() {
        seed_record("bd-reclaim", "edge", "processing");
        run(
            "UPDATE idempotency.requests SET retention = '100 years', locked_until = '-infinity' \
             WHERE scope OPERATOR(pg_catalog.=) 'bd-reclaim'",
        );
        seed_record("bd-reclaim", "plain", "processing");
        set_time("bd-reclaim", "plain", "locked_until", "-1 hour");
        assert!(one::<i64>("SELECT idem_reclaim()").unwrap_or_default() >= 2);
        assert_eq!(
            statuses("bd-reclaim"),
            "edge=failed_retryable plain=failed_retryable"
        );
        assert_eq!(
            one::<bool>(
                "SELECT expires_at OPERATOR(pg_catalog.=) (now() OPERATOR(pg_catalog.+) interval '100 years') FROM idempotency.requests \
                 WHERE scope OPERATOR(pg_catalog.=) 'bd-reclaim' AND key OPERATOR(pg_catalog.=) 'edge'"
            ),
            Some(true)
        );
    }

    /// A message whose attempt counter is at the largest int4 is still taken, with its counter
    /// kept there, and does not stop the other messages of the batch.
    #[pg_test]
    fn an_outbox_counter_at_its_limit_does_not_stop_take() {
        let full = put("bd-topic", "{\"n\": 1}", None);
        let next = put("bd-topic", "{\"n\": 2}", None);
        run(&format!(
            "UPDATE idempotency.outbox SET attempts = 2147483647 WHERE id = {full}"
        ));
        let taken = take("bd-topic", 10);
        assert_eq!(taken, vec![(full, i32::MAX), (next, 1)]);
    }
}
