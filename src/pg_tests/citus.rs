//! In-backend tests of the Citus paths of src/steps/citus.rs, taken on this plain table with
//! tests.assume_distributed. Each sequence runs twice, on the
//! single-server paths (scope `<name>-plain`) and on the distributed ones (`<name>-dist`): the
//! stored records must be the same, column for column.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg_tests::helpers::*;

    /// Every column of `scope`'s records that the protocol sets, as text, in key order (times as
    /// offsets from now(), so that the two scopes compare).
    fn citus_records(scope: &str) -> String {
        Spi::get_one_with_args::<String>(
        "SELECT coalesce(string_agg(concat_ws('|', key, request_hash, status, attempt, response,
                recovery_point, failure_code, replace(failure_message, scope, '<s>'), claimed_by,
                lease, retention, locked_until IS NULL, expires_at - now(), updated_at - now()),
                E'\\n' ORDER BY key), '')
         FROM idempotency.requests WHERE scope = $1",
        &[scope.into()],
    )
    .unwrap_or_else(|e| panic!("records: {e}"))
    .unwrap_or_default()
    }

    fn citus_sequence(scope: &str, distributed: bool) -> Vec<String> {
        crate::steps::citus::assume_distributed(distributed);
        let s = scope;
        let mut answers = Vec::new();
        let mut call = |sql: &str| {
            let sql = sql.replace("{s}", s);
            answers.push(sqlstate(&sql));
        };
        call("SELECT idem_claim('{s}', 'a', 'h', retention => '2 hours')");
        call("SELECT idem_complete('{s}', 'a', '{\"r\": 1}')");
        call("SELECT idem_complete('{s}', 'a', '{\"r\": 1}')");
        call("SELECT idem_complete('{s}', 'a', '{\"r\": 2}')");
        call("SELECT idem_claim('{s}', 'b', 'h')");
        call("SELECT idem_fail('{s}', 'b', true, 'E1', 'boom')");
        call("SELECT idem_claim('{s}', 'b', 'h')");
        call("SELECT idem_fail('{s}', 'b', false, 'E2', 'final', attempt => 1)");
        call("SELECT idem_fail('{s}', 'b', false, 'E2', 'final', attempt => 2)");
        call("SELECT idem_fail('{s}', 'b', false, 'E2', 'final')");
        call("SELECT idem_claim('{s}', 'c', 'h', claimed_by => 'w1')");
        call("SELECT idem_checkpoint('{s}', 'c', 'p1', 1, '10 minutes')");
        call("SELECT idem_checkpoint('{s}', 'c', 'p2')");
        call("SELECT idem_checkpoint('{s}', 'nokey', 'p')");
        call("SELECT idem_claim('{s}', 'd', 'h', claimed_by => 'w2')");
        call("SELECT idem_complete('{s}', 'nokey', '{}')");
        call("SELECT idem_fail('{s}', 'nokey', true)");
        // Expired lease of d: reclaimed (message, expires_at) the same way on both paths.
        set_time(s, "d", "locked_until", "-1 hour");
        // Finished e, expired: purged.
        call("SELECT idem_claim('{s}', 'e', 'h')");
        call("SELECT idem_complete('{s}', 'e', 'null')");
        set_time(s, "e", "expires_at", "-1 hour");
        crate::steps::citus::assume_distributed(false);
        answers
    }

    #[pg_test]
    fn citus_paths_store_what_the_single_server_paths_store() {
        let plain = citus_sequence("cit-plain", false);
        let plain_upkeep = (reclaim_n(100000), purge_n(100000));
        let dist = citus_sequence("cit-dist", true);
        crate::steps::citus::assume_distributed(true);
        let dist_upkeep = (reclaim_n(100000), purge_n(100000));
        crate::steps::citus::assume_distributed(false);
        assert_eq!(plain, dist);
        assert!(plain.contains(&"P4010".to_string()), "{plain:?}");
        assert!(plain.contains(&"P4012".to_string()), "{plain:?}");
        assert_eq!(plain_upkeep, (1, 1));
        assert_eq!(dist_upkeep, (1, 1));
        assert_eq!(citus_records("cit-plain"), citus_records("cit-dist"));
        assert_eq!(
            statuses("cit-dist"),
            "a=succeeded b=failed_final c=processing d=failed_retryable"
        );
        // The reclaim message is maintenance.rs' format(), to the character.
        let message = one::<String>(
        "SELECT failure_message FROM idempotency.requests WHERE scope = 'cit-dist' AND key = 'd'",
    )
    .unwrap_or_default();
        let expected = one::<String>(
        "SELECT pg_catalog.format('the lease of attempt %s%s ended at %s', 1, ' (claimed by w2)', now() - interval '1 hour')",
    )
    .unwrap_or_default();
        assert_eq!(message, expected);
    }

    /// `idem_distribute`'s first parameter is `distribution_column`, as Citus names it: named
    /// notation works without quoting (without Citus the call is P4060, not a syntax error).
    #[pg_test]
    fn idem_distribute_takes_distribution_column_by_name() {
        assert_eq!(
            text("SELECT proargnames::text FROM pg_proc WHERE proname = 'idem_distribute'"),
            "{distribution_column,colocate_with,shard_count}"
        );
        assert_eq!(
            sqlstate("SELECT idem_distribute(distribution_column => 'scope', shard_count => 4)"),
            "P4060"
        );
    }
}
