//! Forged logical-decoding messages (issue 32, finding 5): any role may call
//! `pg_logical_emit_message`, so a cdc_message put's id is keyed by a secret only the tables'
//! owner reads and its content is signed; the consumer of docs/cdc.md verifies before it
//! deduplicates, so a forgery is dropped without taking the genuine message's id.

use super::replay::{delivered, recvlogical};
use super::*;

/// RFC 4231's HMAC-SHA256 test cases 1-4, 6 and 7 (key hex, data hex, HMAC hex); case 5 is
/// a truncated output, checked as the first 16 bytes.
const RFC_4231: [(&str, &str, &str); 7] = [
    (
        "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b",
        "4869205468657265",
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
    ),
    (
        "4a656665",
        "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
    ),
    (
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd",
        "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
    ),
    (
        "0102030405060708090a0b0c0d0e0f10111213141516171819",
        "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd",
        "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
    ),
    (
        "0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c",
        "546573742057697468205472756e636174696f6e",
        "a3b6167473100ee06e0c796c2955552b",
    ),
    (
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669727374",
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
    ),
    (
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "5468697320697320612074657374207573696e672061206c6172676572207468616e20626c6f636b2d73697a65206b657920616e642061206c6172676572207468616e20626c6f636b2d73697a6520646174612e20546865206b6579206e6565647320746f20626520686173686564206265666f7265206265696e6720757365642062792074686520484d414320616c676f726974686d2e",
        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
    ),
];

fn hmac_hex(db: &mut Client, key: &str, data: &str) -> String {
    db.query_one(
        "SELECT encode(idempotency.cdc_hmac(decode($1, 'hex'), decode($2, 'hex')), 'hex')",
        &[&key, &data],
    )
    .expect("cdc_hmac")
    .get(0)
}

/// Both editions' HMAC-SHA256 (Rust's `hmac` crate, and SQL over `sha256`) give RFC 4231's
/// answers, and the same bytes as each other for keys around the 64-byte block.
#[test]
fn cdc_hmac_is_rfc_4231_on_both_editions_byte_for_byte() {
    let mut native = database("native", "cdc_hmac");
    let mut portable = database("portable", "cdc_hmac");
    for (key, data, want) in RFC_4231 {
        for (edition, db) in [("native", &mut native), ("portable", &mut portable)] {
            let got = hmac_hex(db, key, data);
            assert!(got.starts_with(want), "{edition}: {got} for key {key}");
        }
    }
    for len in [0usize, 1, 31, 32, 63, 64, 65, 127, 128, 200] {
        let key: String = (0..len)
            .map(|i| format!("{:02x}", (i * 37 + 11) % 256))
            .collect();
        let data: String = (0..len * 3)
            .map(|i| format!("{:02x}", (i * 91) % 256))
            .collect();
        assert_eq!(
            hmac_hex(&mut native, &key, &data),
            hmac_hex(&mut portable, &key, &data),
            "a key of {len} bytes"
        );
    }
}

/// The roles are the cluster's and two tests make them at once: a concurrent CREATE ROLE
/// fails with unique_violation rather than duplicate_object.
fn roles(db: &mut Client) {
    db.batch_execute(
        "DO $$ BEGIN CREATE ROLE cdc_forge_app LOGIN;
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
         DO $$ BEGIN CREATE ROLE cdc_forger LOGIN;
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
         SELECT idem_grant('cdc_forge_app', 'app');",
    )
    .expect("roles");
}

on_both_editions! {
    /// The secret and what reads it are the tables' owner's: the app role (and a role with no
    /// grant) may not read idempotency.cdc_secret (42501); a role with no grant may not call
    /// idempotency.cdc_message nor idem_cdc_verify (42501), while the app role puts and verifies.
    fn only_the_owner_reads_the_cdc_secret => only_the_owner_reads_the_cdc_secret_in;
}

fn only_the_owner_reads_the_cdc_secret_in(edition: &str) {
    let mut db = database(edition, "cdc_secret");
    let name = format!("cdc_secret_{edition}");
    roles(&mut db);
    assert_eq!(
        count(
            &mut db,
            "SELECT count(*) FROM idempotency.cdc_secret WHERE octet_length(secret) = 32"
        ),
        1,
        "{edition}: one secret made at install"
    );
    let state = |role: &str, sql: &str| -> String {
        let mut c = logical().connect_as(&name, role);
        match c.query(sql, &[]) {
            Ok(_) => "ok".to_string(),
            Err(e) => common::sqlstate(&e),
        }
    };
    for role in ["cdc_forge_app", "cdc_forger"] {
        assert_eq!(
            state(role, "SELECT secret FROM idempotency.cdc_secret"),
            "42501",
            "{edition} {role}"
        );
    }
    let content = "SELECT idempotency.cdc_message('orders', 'order-1', '{}', NULL)";
    let verify = "SELECT idem_cdc_verify('{}')";
    assert_eq!(state("cdc_forger", content), "42501", "{edition}");
    assert_eq!(state("cdc_forger", verify), "42501", "{edition}");
    assert_eq!(state("cdc_forge_app", verify), "ok", "{edition}");
    let mut app = logical().connect_as(&name, "cdc_forge_app");
    app.batch_execute(
        "SET idempotency.outbox_delivery = cdc_message;
         SELECT idem_outbox_put('orders', '{\"n\": 1}', 'order-1');",
    )
    .expect("the app role puts a cdc_message");
    // Without its secret a put refuses (55000) rather than emit an unkeyed message.
    db.batch_execute("DELETE FROM idempotency.cdc_secret")
        .expect("the owner deletes the secret");
    let err = app
        .query_one("SELECT idem_outbox_put('orders', '{}', 'order-2')", &[])
        .expect_err("no secret");
    assert_eq!(common::sqlstate(&err), "55000", "{edition}");
    let signed: bool = app
        .query_one("SELECT idem_cdc_verify('{\"signature\": \"00\"}')", &[])
        .expect("verify")
        .get(0);
    assert!(!signed, "{edition}");
}

/// The consumer of docs/cdc.md: idem_cdc_verified parses and checks the text (NULL for junk
/// and forgeries, never an error) before idem_inbox_accept records the id (CASE keeps the
/// order; MATERIALIZED checks once).
const CONSUME: &str = "WITH m AS MATERIALIZED (SELECT idem_cdc_verified($1::text) AS doc)
     INSERT INTO effects (message_id, n)
     SELECT (doc->>'message_id')::uuid, (doc->'payload'->>'n')::int FROM m
     WHERE CASE WHEN doc IS NOT NULL
                THEN idem_inbox_accept('sink', doc->>'message_id', idem_hash(doc->'payload'))
                ELSE false END";

/// A consumer that casts and records without checking (the finding).
const NAIVE: &str = "WITH m AS (SELECT $1::text::jsonb AS doc)
     INSERT INTO naive_effects (message_id, n)
     SELECT (doc->>'message_id')::uuid, (doc->'payload'->>'n')::int FROM m
     WHERE idem_inbox_accept('naive', doc->>'message_id', idem_hash(doc->'payload'))";

on_both_editions! {
    /// End to end through pg_recvlogical: a role with no grant emits a message with the id of a
    /// put still to come (the id it could compute before the key, and the real one) and, after
    /// the put, the real id with another payload and the genuine signature, then text that is
    /// not JSON and the genuine message truncated. The consumer, run twice over the whole
    /// stream, applies the genuine message once, no forgery, and never stops at the junk.
    #[cfg_attr(idem_no_test_decoding, ignore = "contrib's test_decoding is not installed")]
    fn a_forged_message_is_dropped_and_the_genuine_one_applied => a_forged_message_is_dropped_and_the_genuine_one_applied_in;
}

fn a_forged_message_is_dropped_and_the_genuine_one_applied_in(edition: &str) {
    let mut db = database(edition, "cdc_forged");
    let name = format!("cdc_forged_{edition}");
    roles(&mut db);
    db.batch_execute(&format!(
        "SELECT pg_create_logical_replication_slot('{name}', 'test_decoding');
         CREATE TABLE effects (message_id uuid NOT NULL, n int NOT NULL);
         CREATE TABLE naive_effects (message_id uuid NOT NULL, n int NOT NULL);
         GRANT INSERT ON effects, naive_effects TO cdc_forge_app;
         ALTER DATABASE {name} SET idempotency.outbox_delivery = cdc_message;"
    ))
    .expect("set-up");
    // The id the next put of (orders, order-1) will carry, as only the owner can compute it.
    let real_id: String = db
        .query_one(
            "SELECT idempotency.cdc_message('orders', 'order-1', '{}', NULL)::jsonb->>'message_id'",
            &[],
        )
        .expect("the owner computes the id")
        .get(0);
    let mut forger = logical().connect_as(&name, "cdc_forger");
    // What the forger could compute before the key: the unkeyed hash. It is not the id now.
    let old_id: String = forger
        .query_one(
            "SELECT substr(encode(sha256(convert_to(format('%s:%s:%s', 6, 'orders', 'order-1'), 'UTF8')), 'hex'), 1, 32)::uuid::text",
            &[],
        )
        .expect("old id")
        .get(0);
    assert_ne!(old_id, real_id, "{edition}: the id is keyed");
    let forge = |c: &mut Client, id: &str, n: i32, signature: &str| {
        c.query_one(
            "SELECT pg_logical_emit_message(true, 'idempotency.outbox', jsonb_build_object(
               'message_id', $1::text, 'topic', 'orders', 'dedupe_key', 'order-1',
               'payload', jsonb_build_object('n', $2::int), 'headers', NULL,
               'created_at', now(), 'signature', $3::text)::text)",
            &[&id, &n, &signature],
        )
        .expect("any role emits a message");
    };
    forge(&mut forger, &old_id, 666, &"0".repeat(64));
    forge(&mut forger, &real_id, 667, &"0".repeat(64));
    let mut app = logical().connect_as(&name, "cdc_forge_app");
    app.execute(
        "SELECT idem_outbox_put('orders', '{\"n\": 1}', 'order-1')",
        &[],
    )
    .expect("the genuine put");
    // The genuine message, read back: its id and signature re-used over another payload.
    let out_dir =
        std::env::temp_dir().join(format!("idem-forged-{}-{edition}", std::process::id()));
    std::fs::create_dir_all(&out_dir).expect("dir");
    let out = out_dir.join("stream.txt");
    let mut stream = recvlogical(&name, &name, &out);
    wait_for("three messages", Duration::from_secs(60), || {
        delivered(&out).len() >= 3
    });
    let genuine: serde_json::Value =
        serde_json::from_str(&delivered(&out)[2]).expect("the genuine message is JSON");
    assert_eq!(genuine["message_id"], real_id.as_str(), "{edition}");
    let signature = genuine["signature"].as_str().expect("signed").to_string();
    forge(&mut forger, &real_id, 668, &signature);
    let whole = delivered(&out)[2].clone();
    for junk in ["{\"message_id\": ", &whole[..whole.len() - 5]] {
        forger
            .execute(
                "SELECT pg_logical_emit_message(true, 'idempotency.outbox', $1::text)",
                &[&junk],
            )
            .expect("any role emits junk");
    }
    wait_for("six messages", Duration::from_secs(60), || {
        delivered(&out).len() >= 6
    });
    stream.kill().expect("kill");
    stream.wait().expect("reap");
    let deliveries = delivered(&out);
    assert_eq!(deliveries.len(), 6, "{edition}: {deliveries:?}");
    for _replay in 0..2 {
        for content in &deliveries {
            let mut tx = app.transaction().expect("begin");
            tx.execute(CONSUME, &[content])
                .expect("apply, junk included");
            tx.commit().expect("commit");
        }
    }
    // The recipe that cast first stalled at the junk for good (22P02 on every retry).
    let err = app.execute(NAIVE, &[&deliveries[4]]).expect_err("not JSON");
    assert_eq!(common::sqlstate(&err), "22P02", "{edition}");
    // The finding: a consumer that does not verify applies the forgery with the real id and
    // then drops the genuine message as a duplicate.
    for content in &deliveries[..4] {
        // The genuine message is refused: a duplicate id with another hash (P4050).
        let _ = app.execute(NAIVE, &[content]);
    }
    assert_eq!(
        count(
            &mut db,
            "SELECT count(*) FROM naive_effects WHERE n = 667 AND message_id::text = (SELECT message_id::text FROM effects)"
        ),
        1,
        "{edition}: without the check, the forgery with the real id is applied"
    );
    assert_eq!(
        count(&mut db, "SELECT count(*) FROM naive_effects WHERE n = 1"),
        0,
        "{edition}: and the genuine message is lost"
    );
    let effects: Vec<(String, i32)> = db
        .query("SELECT message_id::text, n FROM effects", &[])
        .expect("effects")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(effects, vec![(real_id.clone(), 1)], "{edition}");
    assert_eq!(
        count(
            &mut db,
            "SELECT count(*) FROM idempotency.inbox WHERE consumer = 'sink'"
        ),
        1,
        "{edition}: no forged id recorded"
    );
    db.batch_execute(&format!("SELECT pg_drop_replication_slot('{name}')"))
        .expect("drop slot");
    let _ = std::fs::remove_dir_all(&out_dir);
}
