//! In-backend tests of idem_inbox_accept / idem_inbox_purge / idem_advance.
//! Tests run concurrently in one database: each uses its own consumer / stream names.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg_tests::helpers::*;

    fn accept(consumer: &str, message_id: &str, hash: &str) -> bool {
        Spi::get_one_with_args::<bool>(
            "SELECT idem_inbox_accept($1, $2, $3)",
            &[consumer.into(), message_id.into(), hash.into()],
        )
        .unwrap_or_else(|e| panic!("accept: {e}"))
        .unwrap_or_else(|| panic!("accept returned NULL"))
    }

    #[pg_test]
    fn inbox_first_delivery_is_true_then_duplicates_false() {
        let c = "inbox_first_delivery";
        assert!(accept(c, "m1", "h1"));
        assert!(!accept(c, "m1", "h1"));
        assert!(!accept(c, "m1", "h1"));
        assert!(accept(c, "m2", "h1"), "another message id");
        assert!(
            accept("inbox_first_delivery_other", "m1", "h1"),
            "another consumer"
        );
        assert_eq!(
            one::<bool>(
                "SELECT processed_at = now() AND expires_at = now() + interval '7 days' \
                 FROM idempotency.inbox WHERE consumer = 'inbox_first_delivery' AND message_id = 'm1'"
            ),
            Some(true)
        );
        run("SELECT idem_inbox_accept('inbox_first_delivery', 'm3', 'h', '1 hour')");
        assert_eq!(
            one::<bool>(
                "SELECT expires_at = now() + interval '1 hour' FROM idempotency.inbox \
                 WHERE consumer = 'inbox_first_delivery' AND message_id = 'm3'"
            ),
            Some(true)
        );
    }

    #[pg_test]
    fn inbox_same_id_other_hash_is_p4050() {
        let c = "inbox_same_id_other_hash";
        assert!(accept(c, "m", "hash-one"));
        let call = "SELECT idem_inbox_accept('inbox_same_id_other_hash', 'm', 'hash-two')";
        assert_eq!(sqlstate(call), "P4050");
        let detail = one::<String>(&format!(
            "SELECT tests.error_detail_of({})",
            pgrx::spi::quote_literal(call)
        ))
        .unwrap_or_default();
        assert!(
            detail.contains("hash-one") && detail.contains("hash-two"),
            "{detail}"
        );
        // The stored row is unchanged.
        assert_eq!(
        one::<String>(
            "SELECT message_hash FROM idempotency.inbox WHERE consumer = 'inbox_same_id_other_hash'"
        )
        .as_deref(),
        Some("hash-one")
    );
    }

    #[pg_test]
    fn inbox_expired_row_counts_as_absent() {
        let c = "inbox_expired_row";
        assert!(accept(c, "m", "old-hash"));
        run(
            "UPDATE idempotency.inbox SET processed_at = now() - interval '8 days', \
             expires_at = now() - interval '1 day' WHERE consumer = 'inbox_expired_row'",
        );
        // Even with another hash: an expired row is as good as purged.
        assert!(accept(c, "m", "new-hash"));
        assert_eq!(
            one::<bool>(
                "SELECT message_hash = 'new-hash' AND processed_at = now() \
                 AND expires_at = now() + interval '7 days' \
                 FROM idempotency.inbox WHERE consumer = 'inbox_expired_row'"
            ),
            Some(true)
        );
        assert!(!accept(c, "m", "new-hash"));
    }

    #[pg_test]
    fn inbox_input_rules() {
        let cases = [
            ("NULL, 'm', 'h'", "P4000"),
            ("' ', 'm', 'h'", "P4000"),
            ("'inbox_input_rules', NULL, 'h'", "P4001"),
            ("'inbox_input_rules', '', 'h'", "P4001"),
            ("'inbox_input_rules', 'm', NULL", "P4003"),
            ("'inbox_input_rules', 'm', ' '", "P4003"),
            ("repeat('c', 256), 'm', 'h'", "P4004"),
            ("'inbox_input_rules', repeat('m', 256), 'h'", "P4004"),
            ("'inbox_input_rules', 'm', repeat('h', 256)", "P4004"),
            ("'inbox_input_rules', 'm', 'h', NULL", "22004"),
            ("'inbox_input_rules', 'm', 'h', '0 seconds'", "22023"),
            ("'inbox_input_rules', 'm', 'h', '-1 day'", "22023"),
        ];
        for (args, code) in cases {
            assert_eq!(
                sqlstate(&format!("SELECT idem_inbox_accept({args})")),
                code,
                "{args}"
            );
        }
        assert_eq!(
            one::<i64>(
                "SELECT count(*) FROM idempotency.inbox WHERE consumer = 'inbox_input_rules'"
            ),
            Some(0)
        );
        // 255 bytes is fine.
        assert!(accept(&"c".repeat(255), &"m".repeat(255), &"h".repeat(255)));
    }

    #[pg_test]
    fn inbox_purge_deletes_expired_rows_in_batches() {
        run("SELECT idem_inbox_accept('inbox_purge', 'm' || i, 'h') FROM generate_series(1, 5) i");
        run("SELECT idem_inbox_accept('inbox_purge', 'live', 'h')");
        run(
            "UPDATE idempotency.inbox SET processed_at = now() - interval '9 days', \
             expires_at = now() - interval '2 days' WHERE consumer = 'inbox_purge' AND message_id <> 'live'",
        );
        // Other tests' rows are not committed, so this test sees only its own expired rows.
        assert_eq!(one::<i64>("SELECT idem_inbox_purge(2)"), Some(2));
        assert_eq!(one::<i64>("SELECT idem_inbox_purge()"), Some(3));
        assert_eq!(one::<i64>("SELECT idem_inbox_purge()"), Some(0));
        assert_eq!(
        one::<String>("SELECT string_agg(message_id, ',') FROM idempotency.inbox WHERE consumer = 'inbox_purge'")
            .as_deref(),
        Some("live")
    );
        assert_eq!(sqlstate("SELECT idem_inbox_purge(0)"), "22023");
        assert_eq!(sqlstate("SELECT idem_inbox_purge(NULL)"), "22004");
    }

    fn advance(stream: &str, entity: &str, version: i64) -> bool {
        Spi::get_one_with_args::<bool>(
            "SELECT idem_advance($1, $2, $3)",
            &[stream.into(), entity.into(), version.into()],
        )
        .unwrap_or_else(|e| panic!("advance: {e}"))
        .unwrap_or_else(|| panic!("advance returned NULL"))
    }

    #[pg_test]
    fn advance_applies_only_newer_versions() {
        let s = "advance_applies";
        assert!(advance(s, "e1", 5));
        assert!(!advance(s, "e1", 5), "duplicate");
        assert!(!advance(s, "e1", 3), "older, arrived late");
        assert!(advance(s, "e1", 6));
        assert!(advance(s, "e2", -10), "entities are separate; any bigint");
        assert!(
            advance("advance_applies_other", "e1", 1),
            "streams are separate"
        );
        assert_eq!(
            one::<i64>(
                "SELECT version FROM idempotency.versions WHERE stream = 'advance_applies' AND entity = 'e1'"
            ),
            Some(6)
        );
        assert!(advance(s, "e1", i64::MAX));
        assert!(!advance(s, "e1", i64::MAX));
    }

    #[pg_test]
    fn advance_input_rules() {
        let cases = [
            ("NULL, 'e', 1", "P4000"),
            ("'', 'e', 1", "P4000"),
            ("'advance_input_rules', NULL, 1", "P4001"),
            ("'advance_input_rules', '  ', 1", "P4001"),
            ("'advance_input_rules', 'e', NULL", "22004"),
            ("repeat('s', 256), 'e', 1", "P4004"),
            ("'advance_input_rules', repeat('e', 256), 1", "P4004"),
        ];
        for (args, code) in cases {
            assert_eq!(
                sqlstate(&format!("SELECT idem_advance({args})")),
                code,
                "{args}"
            );
        }
        assert_eq!(
            one::<i64>(
                "SELECT count(*) FROM idempotency.versions WHERE stream = 'advance_input_rules'"
            ),
            Some(0)
        );
    }

    #[pg_test]
    fn consumer_calls_are_immune_to_search_path_tricks() {
        // An operator that makes every text equal, and shadowing tables, first on search_path.
        run("CREATE SCHEMA evil_consumers");
        run(
            "CREATE FUNCTION evil_consumers.always(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT true'",
        );
        run(
            "CREATE OPERATOR evil_consumers.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil_consumers.always)",
        );
        run(
            "CREATE OPERATOR evil_consumers.< (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = int8ne)",
        );
        run(
            "CREATE FUNCTION evil_consumers.now() RETURNS timestamptz LANGUAGE sql AS $$SELECT '2000-01-01'::timestamptz$$",
        );
        for table in ["inbox", "versions", "outbox", "requests"] {
            run(&format!(
                "CREATE TABLE evil_consumers.{table} (LIKE idempotency.{table})"
            ));
        }
        run("SET LOCAL search_path = evil_consumers, pg_catalog, public");
        let c = "consumer_search_path";
        assert!(accept(c, "a", "h"));
        assert!(accept(c, "b", "h"));
        assert_eq!(
            sqlstate("SELECT idem_inbox_accept('consumer_search_path', 'a', 'x')"),
            "P4050"
        );
        assert!(advance(c, "e", 2));
        assert!(!advance(c, "e", 1));
        let a = one::<i64>("SELECT idem_outbox_put('consumer_search_path', '{}', 'k1')");
        let b = one::<i64>("SELECT idem_outbox_put('consumer_search_path', '{}', 'k2')");
        assert_ne!(a, b);
        assert_eq!(
            one::<i64>(
                "SELECT count(*) FROM idem_outbox_take(10, '1 minute', 'consumer_search_path')"
            ),
            Some(2)
        );
        assert_eq!(
            one::<i64>(&format!(
                "SELECT idem_outbox_ack(ARRAY[{}])",
                a.unwrap_or_default()
            )),
            Some(1)
        );
        run("CREATE FUNCTION evil_consumers.echo(jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT $1'");
        assert_eq!(
        one::<String>("SELECT outcome::text FROM idem_call('consumer_search_path', 'k', '{}', 'evil_consumers.echo(jsonb)')").as_deref(),
        Some("new_claim")
    );
        assert_eq!(
        one::<String>("SELECT outcome::text FROM idem_call('consumer_search_path', 'k2', '{}', 'evil_consumers.echo(jsonb)')").as_deref(),
        Some("new_claim")
    );
        for table in ["inbox", "versions", "outbox", "requests"] {
            assert_eq!(
                one::<i64>(&format!("SELECT count(*) FROM evil_consumers.{table}")),
                Some(0),
                "{table}"
            );
        }
        run("RESET search_path");
        assert_eq!(
            one::<i64>(
                "SELECT count(*) FROM idempotency.inbox WHERE consumer = 'consumer_search_path' \
                        AND processed_at = now()"
            ),
            Some(2)
        );
    }

    #[pg_test]
    fn consumer_functions_work_with_the_documented_grants() {
        catalog_turn();
        // The GRANTs of docs/consumers.md, for an application role and a publisher role.
        run("CREATE ROLE grants_app");
        run("CREATE ROLE grants_publisher");
        run("GRANT USAGE ON SCHEMA idempotency, tests TO grants_app, grants_publisher");
        run(
            "GRANT SELECT, INSERT, UPDATE ON idempotency.requests, idempotency.inbox, idempotency.versions TO grants_app",
        );
        run("GRANT SELECT, INSERT ON idempotency.outbox TO grants_app");
        run("GRANT SELECT, UPDATE ON idempotency.outbox TO grants_publisher");
        run("CREATE FUNCTION grants_fn(jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT $1'");
        let as_role = |role: &str, sql: &str| -> String {
            run(&format!("SET LOCAL ROLE {role}"));
            let code = sqlstate(sql);
            run("RESET ROLE");
            code
        };
        for sql in [
            "SELECT idem_inbox_accept('grants', 'm', 'h')",
            "SELECT idem_inbox_accept('grants', 'm', 'h')",
            "SELECT idem_advance('grants', 'e', 1)",
            "SELECT idem_advance('grants', 'e', 1)",
            "SELECT idem_outbox_put('grants', '1', 'k')",
            "SELECT idem_outbox_put('grants', '1', 'k')",
            "SELECT * FROM idem_call('grants', 'k', '{}', 'grants_fn(jsonb)')",
            "SELECT * FROM idem_call('grants', 'k', '{}', 'grants_fn(jsonb)')",
        ] {
            assert_eq!(as_role("grants_app", sql), "ok", "{sql}");
        }
        run(
            "UPDATE idempotency.inbox SET processed_at = now() - interval '9 days', expires_at = now() - interval '1 day' WHERE consumer = 'grants'",
        );
        assert_eq!(
            as_role("grants_app", "SELECT idem_inbox_accept('grants', 'm', 'h')"),
            "ok",
            "renew"
        );
        assert_eq!(
            as_role("grants_app", "SELECT * FROM idem_outbox_take()"),
            "42501"
        );
        let id = one::<i64>("SELECT id FROM idempotency.outbox WHERE topic = 'grants'")
            .unwrap_or_default();
        for sql in [
            "SELECT * FROM idem_outbox_take(10, '1 minute', 'grants')".to_string(),
            format!("SELECT idem_outbox_nack({id}, 'x', '0 seconds')"),
            format!("SELECT idem_outbox_ack(ARRAY[{id}])"),
        ] {
            assert_eq!(as_role("grants_publisher", &sql), "ok", "{sql}");
        }
        assert_eq!(
            as_role("grants_publisher", "SELECT idem_outbox_purge()"),
            "42501"
        );
        assert_eq!(as_role("grants_app", "SELECT idem_inbox_purge()"), "42501");
        assert_eq!(
            sqlstate("SELECT idem_inbox_accept('grants_public', 'm', 'h')"),
            "ok",
            "the superuser"
        );
        run("CREATE ROLE grants_nobody");
        run("GRANT USAGE ON SCHEMA tests TO grants_nobody");
        assert_eq!(
            as_role(
                "grants_nobody",
                "SELECT idem_inbox_accept('grants', 'm', 'h')"
            ),
            "42501"
        );
    }
}
