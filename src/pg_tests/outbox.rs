//! In-backend tests of the outbox. Each test uses its own
//! topic; inside one transaction now() stands still, so leases and delays are moved by editing
//! the rows' timestamps.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg_tests::helpers::*;

    #[pg_test]
    fn outbox_put_enqueues_a_pending_row() {
        let id = put("outbox_put", r#"{"order": 1}"#, None);
        assert_eq!(
            one::<bool>(&format!(
                "SELECT status = 'pending' AND attempts = 0 AND message_id IS NOT NULL \
                 AND payload = '{{\"order\": 1}}' AND headers IS NULL AND available_at = now() \
                 AND created_at = now() AND leased_until IS NULL AND published_at IS NULL \
                 AND dedupe_key IS NULL FROM idempotency.outbox WHERE id = {id}"
            )),
            Some(true)
        );
        let later = one::<i64>(
            "SELECT idem_outbox_put('outbox_put', '2', headers => '{\"trace\": \"t\"}', \
             available_at => now() + interval '1 hour')",
        )
        .unwrap_or_default();
        assert!(later > id);
        assert_eq!(
            one::<bool>(&format!(
                "SELECT available_at = now() + interval '1 hour' AND headers = '{{\"trace\": \"t\"}}' \
                 FROM idempotency.outbox WHERE id = {later}"
            )),
            Some(true)
        );
        // NULL available_at means now.
        let now = one::<i64>("SELECT idem_outbox_put('outbox_put', '3', available_at => NULL)")
            .unwrap_or_default();
        assert_eq!(
            one::<bool>(&format!(
                "SELECT available_at = now() FROM idempotency.outbox WHERE id = {now}"
            )),
            Some(true)
        );
    }

    #[pg_test]
    fn outbox_dedupe_key_returns_the_existing_id() {
        let first = put("outbox_dedupe", "1", Some("order-7"));
        assert_eq!(put("outbox_dedupe", "2", Some("order-7")), first);
        assert_ne!(
            put("outbox_dedupe_other", "1", Some("order-7")),
            first,
            "per topic"
        );
        let a = put("outbox_dedupe", "1", None);
        let b = put("outbox_dedupe", "1", None);
        assert_ne!(a, b, "no dedupe key: no deduplication");
        assert_eq!(
            one::<i64>("SELECT count(*) FROM idempotency.outbox WHERE topic = 'outbox_dedupe'"),
            Some(3)
        );
        assert_eq!(
            one::<String>(&format!(
                "SELECT payload::text FROM idempotency.outbox WHERE id = {first}"
            ))
            .as_deref(),
            Some("1"),
            "the first payload is kept"
        );
    }

    #[pg_test]
    fn outbox_put_input_rules() {
        let cases = [
            ("NULL, '1'", "P4000"),
            ("' ', '1'", "P4000"),
            ("repeat('t', 256), '1'", "P4004"),
            ("'outbox_put_input_rules', NULL", "22004"),
            ("'outbox_put_input_rules', '1', ''", "P4001"),
            ("'outbox_put_input_rules', '1', repeat('k', 256)", "P4004"),
            ("'outbox_put_input_rules', '1', NULL, '[1]'", "22023"),
            ("'outbox_put_input_rules', '1', NULL, '\"text\"'", "22023"),
        ];
        for (args, code) in cases {
            assert_eq!(
                sqlstate(&format!("SELECT idem_outbox_put({args})")),
                code,
                "{args}"
            );
        }
        assert_eq!(
            one::<i64>(
                "SELECT count(*) FROM idempotency.outbox WHERE topic = 'outbox_put_input_rules'"
            ),
            Some(0)
        );
    }

    #[pg_test]
    fn outbox_take_leases_oldest_first_and_skips_leased_rows() {
        let t = "outbox_take";
        let ids: Vec<i64> = (0..3).map(|i| put(t, &i.to_string(), None)).collect();
        let future = one::<i64>(
        "SELECT idem_outbox_put('outbox_take', '9', available_at => now() + interval '1 minute')",
    )
    .unwrap_or_default();
        put("outbox_take_other", "1", None);
        assert_eq!(take(t, 2), vec![(ids[0], 1), (ids[1], 1)]);
        assert_eq!(
            one::<bool>(&format!(
                "SELECT bool_and(leased_until = now() + interval '30 seconds') FROM idempotency.outbox \
                 WHERE id IN ({}, {})",
                ids[0], ids[1]
            )),
            Some(true)
        );
        assert_eq!(
            take(t, 10),
            vec![(ids[2], 1)],
            "leased rows and future rows are not handed out"
        );
        assert_eq!(take(t, 10), vec![]);
        // The lease of the first row runs out without an ack: it is handed out again.
        run(&format!(
            "UPDATE idempotency.outbox SET leased_until = now() - interval '1 second' WHERE id = {}",
            ids[0]
        ));
        assert_eq!(take(t, 10), vec![(ids[0], 2)]);
        // The delayed row once it is due.
        run(&format!(
            "UPDATE idempotency.outbox SET available_at = now() WHERE id = {future}"
        ));
        assert_eq!(take(t, 10), vec![(future, 1)]);
        // The returned columns.
        let id = put("outbox_take_columns", r#"{"p": 1}"#, Some("k"));
        run(&format!(
            "UPDATE idempotency.outbox SET headers = '{{\"h\": 2}}' WHERE id = {id}"
        ));
        assert_eq!(
            one::<bool>(&format!(
                "SELECT t.id = {id} AND t.message_id = o.message_id AND t.topic = 'outbox_take_columns' \
                 AND t.payload = '{{\"p\": 1}}' AND t.headers = '{{\"h\": 2}}' AND t.attempts = 1 \
                 FROM idem_outbox_take(topic => 'outbox_take_columns') t, idempotency.outbox o WHERE o.id = {id}"
            )),
            Some(true)
        );
        assert_eq!(sqlstate("SELECT * FROM idem_outbox_take(0)"), "22023");
        assert_eq!(sqlstate("SELECT * FROM idem_outbox_take(NULL)"), "22004");
        assert_eq!(
            sqlstate("SELECT * FROM idem_outbox_take(1, '0 seconds')"),
            "22023"
        );
        assert_eq!(sqlstate("SELECT * FROM idem_outbox_take(1, NULL)"), "22004");
    }

    #[pg_test]
    fn outbox_ack_publishes_and_nack_delays() {
        let t = "outbox_ack";
        let a = put(t, "1", None);
        let b = put(t, "2", None);
        let c = put(t, "3", None);
        assert_eq!(take(t, 10).len(), 3);
        assert_eq!(
            one::<i64>(&format!(
                "SELECT idem_outbox_ack(ARRAY[{a}, {b}, NULL, -1])"
            )),
            Some(2)
        );
        assert_eq!(
            one::<i64>(&format!("SELECT idem_outbox_ack(ARRAY[{a}])")),
            Some(0),
            "already published"
        );
        assert_eq!(one::<i64>("SELECT idem_outbox_ack(NULL)"), None, "STRICT");
        assert_eq!(one::<i64>("SELECT idem_outbox_ack('{}')"), Some(0));
        assert_eq!(
            one::<bool>(&format!(
                "SELECT bool_and(status = 'published' AND published_at = now() AND leased_until IS NULL) \
                 FROM idempotency.outbox WHERE id IN ({a}, {b})"
            )),
            Some(true)
        );
        run(&format!("SELECT idem_outbox_nack({c}, 'broker down')"));
        assert_eq!(
            one::<bool>(&format!(
                "SELECT last_error = 'broker down' AND leased_until IS NULL \
                 AND available_at = now() + interval '1 minute' AND status = 'pending' \
                 FROM idempotency.outbox WHERE id = {c}"
            )),
            Some(true)
        );
        assert_eq!(take(t, 10), vec![], "not before retry_after");
        run(&format!("SELECT idem_outbox_nack({c}, NULL, '0 seconds')"));
        assert_eq!(
            take(t, 10),
            vec![(c, 2)],
            "nack with no delay: available at once"
        );
        // A published row is left alone by nack.
        run(&format!("SELECT idem_outbox_nack({a}, 'late', '1 hour')"));
        assert_eq!(
            one::<bool>(&format!(
                "SELECT status = 'published' AND last_error IS NULL FROM idempotency.outbox WHERE id = {a}"
            )),
            Some(true)
        );
        // Long errors are cut at a character boundary ('€' is 3 bytes).
        run(&format!("SELECT idem_outbox_nack({c}, repeat('€', 5000))"));
        assert_eq!(
            one::<i32>(&format!(
                "SELECT octet_length(last_error) FROM idempotency.outbox WHERE id = {c}"
            )),
            Some(8190)
        );
        assert_eq!(
            sqlstate(&format!("SELECT idem_outbox_nack({c}, 'x', '-1 second')")),
            "22023"
        );
        assert_eq!(
            sqlstate(&format!("SELECT idem_outbox_nack({c}, 'x', NULL)")),
            "22004"
        );
        assert_eq!(sqlstate("SELECT idem_outbox_nack(NULL, 'x')"), "22004");
    }

    #[pg_test]
    fn outbox_purge_deletes_old_published_rows() {
        let t = "outbox_purge";
        let ids: Vec<i64> = (0..4).map(|i| put(t, &i.to_string(), None)).collect();
        let pending = put(t, r#""pending""#, None);
        run(&format!(
            "SELECT idem_outbox_ack(ARRAY[{}, {}, {}, {}])",
            ids[0], ids[1], ids[2], ids[3]
        ));
        // Three published 8 days ago, one 2 hours ago.
        run(&format!(
            "UPDATE idempotency.outbox SET published_at = now() - interval '8 days' WHERE id IN ({}, {}, {})",
            ids[0], ids[1], ids[2]
        ));
        run(&format!(
            "UPDATE idempotency.outbox SET published_at = now() - interval '2 hours' WHERE id = {}",
            ids[3]
        ));
        assert_eq!(one::<i64>("SELECT idem_outbox_purge(2)"), Some(2));
        assert_eq!(one::<i64>("SELECT idem_outbox_purge()"), Some(1));
        assert_eq!(
            one::<i64>("SELECT idem_outbox_purge()"),
            Some(0),
            "7 days by default"
        );
        run("SET LOCAL idempotency.outbox_retention = '1h'");
        assert_eq!(one::<i64>("SELECT idem_outbox_purge()"), Some(1));
        assert_eq!(
            one::<i64>(&format!(
                "SELECT id FROM idempotency.outbox WHERE topic = '{t}'"
            )),
            Some(pending),
            "pending rows are never purged"
        );
        assert_eq!(
            one::<String>("SELECT current_setting('idempotency.outbox_retention')").as_deref(),
            Some("1h")
        );
        assert_eq!(sqlstate("SELECT idem_outbox_purge(0)"), "22023");
        assert_eq!(sqlstate("SELECT idem_outbox_purge(NULL)"), "22004");
    }

    /// A CDC delivery streams through logical decoding: on a server that does not decode
    /// (wal_level below logical) the put is refused with 55000 and writes nothing, instead of
    /// a message no one will ever see. An unknown delivery is refused by the setting itself.
    #[pg_test]
    fn cdc_delivery_without_logical_decoding_is_55000_and_writes_nothing() {
        if one::<String>("SELECT current_setting('wal_level')").as_deref() == Some("logical") {
            return;
        }
        let before = one::<i64>("SELECT count(*) FROM idempotency.outbox");
        for delivery in ["cdc_table", "cdc_message"] {
            run(&format!(
                "SET LOCAL idempotency.outbox_delivery = {delivery}"
            ));
            assert_eq!(
                sqlstate("SELECT idem_outbox_put('cdc', '{}')"),
                "55000",
                "{delivery}"
            );
        }
        assert_eq!(
            one::<i64>("SELECT count(*) FROM idempotency.outbox"),
            before
        );
        assert_eq!(
            sqlstate("SET LOCAL idempotency.outbox_delivery = kafka"),
            "22023"
        );
        run("SET LOCAL idempotency.outbox_delivery = poll");
        assert!(one::<i64>("SELECT idem_outbox_put('cdc', '{}')").is_some());
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
}
