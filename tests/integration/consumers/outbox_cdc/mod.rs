//! The outbox for change data capture (docs/cdc.md): `idempotency.outbox_delivery` =
//! `cdc_table` or `cdc_message`, read back through real logical decoding on a cluster with
//! `wal_level = logical` — pgoutput (what Debezium reads) and `pg_recvlogical` with
//! test_decoding as the consumer that crashes and is replayed.

use crate::common;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Client, count, wait_for};

/// The shared cluster: it has `wal_level = logical` (see `common::cluster`).
fn logical() -> &'static common::Cluster {
    common::cluster()
}

/// The editions under test: the native extension, and the portable edition
/// (`scripts/portable.sh`) in a database of its own on the same server.
const EDITIONS: [&str; 2] = ["native", "portable"];

/// `#[test] fn $name`, which runs `$each` on each edition in turn.
macro_rules! on_both_editions {
    ($(#[$doc:meta])* fn $name:ident => $each:ident;) => {
        $(#[$doc])*
        #[test]
        fn $name() {
            for edition in EDITIONS {
                $each(edition);
            }
        }
    };
}

fn database(edition: &str, name: &str) -> Client {
    let name = format!("{name}_{edition}");
    if edition == "native" {
        return logical().database(&name);
    }
    let mut db = logical().empty_database(&name);
    db.batch_execute(&common::portable_script(&[]))
        .expect("the portable edition installs");
    db
}

/// Publication `idem_outbox` of the outbox's inserts, and pgoutput slot `slot`: each in its
/// own transaction (a slot is not created in one that has written).
fn publish_to_slot(db: &mut Client, slot: &str) {
    db.batch_execute(
        "CREATE PUBLICATION idem_outbox FOR TABLE idempotency.outbox WITH (publish = 'insert')",
    )
    .expect("publication");
    db.batch_execute(&format!(
        "SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')"
    ))
    .expect("slot");
}

/// pgoutput's messages for `slot` (not consumed), as (kind byte, bytes).
fn pgoutput(db: &mut Client, slot: &str, messages: bool) -> Vec<(u8, Vec<u8>)> {
    let messages = if messages { ", 'messages', 'true'" } else { "" };
    db.query(
        &format!(
            "SELECT data FROM pg_logical_slot_peek_binary_changes('{slot}', NULL, NULL, \
             'proto_version', '1', 'publication_names', 'idem_outbox'{messages})"
        ),
        &[],
    )
    .expect("peek pgoutput")
    .iter()
    .map(|r| {
        let data: Vec<u8> = r.get(0);
        (data[0], data)
    })
    .collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

on_both_editions! {
    /// cdc_table: each put is one published row, streamed as one insert through a publication of
    /// inserts only (purges are never streamed); a repeated dedupe_key streams nothing; no
    /// publisher takes the row.
    fn cdc_table_streams_each_put_once_through_pgoutput => cdc_table_streams_each_put_once_through_pgoutput_in;
}

fn cdc_table_streams_each_put_once_through_pgoutput_in(edition: &str) {
    let mut db = database(edition, "cdc_table");
    let slot = format!("cdc_table_{edition}");
    publish_to_slot(&mut db, &slot);
    db.batch_execute(
        "
         SET idempotency.outbox_delivery = cdc_table;
         BEGIN;
         SELECT idem_outbox_put('orders', '{\"n\": 1}', 'order-1');
         SELECT idem_outbox_put('orders', '{\"n\": 2}', 'order-2');
         COMMIT;
         SELECT idem_outbox_put('orders', '{\"n\": 1, \"again\": true}', 'order-1');
         BEGIN;
         SELECT idem_outbox_put('orders', '{\"n\": 3}', 'order-3');
         ROLLBACK;",
    )
    .expect("puts");
    let inserts: Vec<Vec<u8>> = pgoutput(&mut db, &slot, false)
        .into_iter()
        .filter(|(kind, _)| *kind == b'I')
        .map(|(_, data)| data)
        .collect();
    assert_eq!(inserts.len(), 2, "one insert per distinct message");
    assert!(contains(&inserts[0], b"order-1") && contains(&inserts[1], b"order-2"));
    assert!(
        !inserts
            .iter()
            .any(|d| contains(d, b"again") || contains(d, b"order-3"))
    );
    assert_eq!(
        count(
            &mut db,
            "SELECT count(*) FROM idempotency.outbox WHERE status = 'published' AND published_at IS NOT NULL"
        ),
        2
    );
    assert_eq!(count(&mut db, "SELECT count(*) FROM idem_outbox_take()"), 0);
    // Purged like any published row, and the purge is not streamed.
    db.batch_execute(
        "UPDATE idempotency.outbox SET published_at = now() - interval '30 days';
         SELECT idem_outbox_purge();",
    )
    .expect("purge");
    let kinds: BTreeSet<u8> = pgoutput(&mut db, &slot, false)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert!(!kinds.contains(&b'D'), "a purge was streamed: {kinds:?}");
    db.batch_execute(&format!("SELECT pg_drop_replication_slot('{slot}')"))
        .expect("drop slot");
}

on_both_editions! {
    /// cdc_message: no row; a committed put is one transactional message with prefix
    /// idempotency.outbox carrying topic, dedupe key, payload, headers and a message_id; a rolled
    /// back put is never decoded. pgoutput carries them with `messages` on (Postgres 14+).
    #[cfg_attr(feature = "pg13", ignore = "pgoutput carries logical-decoding messages from 14")]
    fn cdc_message_is_transactional_and_leaves_no_row => cdc_message_is_transactional_and_leaves_no_row_in;
}

fn cdc_message_is_transactional_and_leaves_no_row_in(edition: &str) {
    let mut db = database(edition, "cdc_message");
    let slot = format!("cdc_message_{edition}");
    publish_to_slot(&mut db, &slot);
    db.batch_execute(
        "
         SET idempotency.outbox_delivery = cdc_message;
         BEGIN;
         SELECT idem_outbox_put('orders', '{\"n\": 1}', 'order-1', '{\"trace\": \"t1\"}');
         COMMIT;
         BEGIN;
         SELECT idem_outbox_put('orders', '{\"n\": 2}', 'order-2');
         ROLLBACK;
         SELECT idem_outbox_put('orders', '{\"n\": 1, \"again\": true}', 'order-1');",
    )
    .expect("puts");
    let ids: Vec<i64> = db
        .query(
            "SELECT idem_outbox_put('orders', '{\"n\": 4}') UNION ALL SELECT idem_outbox_put('orders', '{\"n\": 5}')",
            &[],
        )
        .expect("ids")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(
        ids[0] > 0 && ids[1] > ids[0],
        "ids are WAL positions: {ids:?}"
    );
    assert_eq!(count(&mut db, "SELECT count(*) FROM idempotency.outbox"), 0);
    let messages: Vec<Vec<u8>> = pgoutput(&mut db, &slot, true)
        .into_iter()
        .filter(|(kind, _)| *kind == b'M')
        .map(|(_, data)| data)
        .collect();
    assert_eq!(messages.len(), 4, "committed puts only");
    // Every put of one (topic, dedupe_key) carries one message_id, for consumers to dedupe by.
    let id_of = |m: &[u8]| {
        let text = String::from_utf8_lossy(m).into_owned();
        let at = text.find("\"message_id\": \"").expect("message_id") + 15;
        text[at..at + 36].to_string()
    };
    assert_eq!(id_of(&messages[0]), id_of(&messages[1]), "same dedupe key");
    assert_ne!(
        id_of(&messages[2]),
        id_of(&messages[3]),
        "no dedupe key: random"
    );
    assert_ne!(id_of(&messages[0]), id_of(&messages[2]));
    let first = &messages[0];
    assert!(contains(&messages[1], b"\"again\": true"));
    assert_eq!(first[1], 1, "transactional");
    for part in [
        &b"idempotency.outbox\0"[..],
        b"\"topic\": \"orders\"",
        b"\"dedupe_key\": \"order-1\"",
        b"\"payload\": {\"n\": 1}",
        b"\"headers\": {\"trace\": \"t1\"}",
        b"\"message_id\": \"",
    ] {
        assert!(
            contains(first, part),
            "{:?}",
            String::from_utf8_lossy(first)
        );
    }
    assert!(!messages.iter().any(|m| contains(m, b"order-2")));
    db.batch_execute(&format!("SELECT pg_drop_replication_slot('{slot}')"))
        .expect("drop slot");
}

on_both_editions! {
    /// A stream has no "available at": a put for later is refused (0A000) in both CDC deliveries
    /// and writes nothing; a put for now (the default) goes through.
    fn a_message_for_later_cannot_be_streamed => a_message_for_later_cannot_be_streamed_in;
}

fn a_message_for_later_cannot_be_streamed_in(edition: &str) {
    let mut db = database(edition, "cdc_later");
    for delivery in ["cdc_table", "cdc_message"] {
        db.batch_execute(&format!("SET idempotency.outbox_delivery = {delivery}"))
            .expect("set");
        let err = db
            .query_one(
                "SELECT idem_outbox_put('t', '{}', NULL, NULL, now() + interval '1 hour')",
                &[],
            )
            .expect_err("later");
        assert_eq!(common::sqlstate(&err), "0A000", "{edition} {delivery}");
        db.query_one("SELECT idem_outbox_put('t', '{}', NULL, NULL, now())", &[])
            .expect("now");
    }
    assert_eq!(
        count(&mut db, "SELECT count(*) FROM idempotency.outbox"),
        1,
        "the cdc_table put for now only"
    );
}

on_both_editions! {
    /// A CDC put needs INSERT on the outbox, as a polled put does (42501 before anything else);
    /// cdc_message writes no row for the table's row-level security policies to check, so under
    /// them it is refused (0A000), while cdc_table's rows are checked by them.
    fn cdc_puts_check_rights_and_policies => cdc_puts_check_rights_and_policies_in;
}

fn cdc_puts_check_rights_and_policies_in(edition: &str) {
    let mut db = database(edition, "cdc_rights");
    let name = format!("cdc_rights_{edition}");
    db.batch_execute(
        "DO $$ BEGIN CREATE ROLE cdc_reader LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         DO $$ BEGIN CREATE ROLE cdc_nobody LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         DO $$ BEGIN CREATE ROLE cdc_tenant LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         GRANT USAGE ON SCHEMA idempotency TO cdc_reader, cdc_tenant;
         GRANT SELECT ON idempotency.outbox TO cdc_reader;
         GRANT SELECT, INSERT ON idempotency.outbox TO cdc_tenant;
         ALTER TABLE idempotency.outbox ENABLE ROW LEVEL SECURITY;
         CREATE POLICY own_topics ON idempotency.outbox
           USING (topic LIKE 'acme/%') WITH CHECK (topic LIKE 'acme/%');",
    )
    .expect("roles and policy");
    let attempt = |role: &str, delivery: &str, topic: &str| -> String {
        let mut c = logical().connect_as(&name, role);
        c.batch_execute(&format!("SET idempotency.outbox_delivery = {delivery}"))
            .expect("set");
        match c.query_one(&format!("SELECT idem_outbox_put('{topic}', '{{}}')"), &[]) {
            Ok(_) => "ok".to_string(),
            Err(e) => common::sqlstate(&e),
        }
    };
    for delivery in ["cdc_table", "cdc_message"] {
        for role in ["cdc_reader", "cdc_nobody"] {
            assert_eq!(
                attempt(role, delivery, "acme/x"),
                "42501",
                "{edition} {delivery} {role}"
            );
        }
    }
    assert_eq!(
        attempt("cdc_tenant", "cdc_message", "acme/x"),
        "0A000",
        "{edition}"
    );
    assert_eq!(
        attempt("cdc_tenant", "cdc_table", "acme/x"),
        "ok",
        "{edition}"
    );
    assert_eq!(
        attempt("cdc_tenant", "cdc_table", "globex/x"),
        "42501",
        "{edition}"
    );
    assert_eq!(
        count(&mut db, "SELECT count(*) FROM idempotency.outbox"),
        1,
        "{edition}: only the tenant's own cdc_table put"
    );
}

// After the macro and the helpers it uses (macros are seen in textual order).
mod forged;
mod replay;
mod secret;
