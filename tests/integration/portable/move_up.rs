//! Moving up (issue 21): a database that started on the portable edition moves to the native
//! extension with `scripts/portable.sh --move-up`, in place, and every record still replays:
//! succeeded records replay their response, a live lease stays processing_active and is
//! completed by its attempt, a retryable failure is taken over as the next attempt, inbox
//! duplicates stay duplicates, versions stay ordered, the outbox keeps its ids and pending rows.

use crate::common;

use common::{answer, count};

/// A cdc_message id, keyed by the database's secret (docs/cdc.md): moving up keeps it.
const CDC_ID: &str = "SELECT idempotency.cdc_message('t', 'k', '{}', NULL)::jsonb->>'message_id'";

#[test]
fn a_portable_database_moves_up_to_the_native_extension_in_place() {
    let c = common::cluster();
    c.drop_database("portable_up");
    let mut admin = c.connect("postgres");
    for sql in [
        "DROP ROLE IF EXISTS portable_up_owner",
        "CREATE ROLE portable_up_owner LOGIN",
        "CREATE DATABASE portable_up OWNER portable_up_owner",
    ] {
        admin.batch_execute(sql).expect("database");
    }
    drop(admin);
    let mut owner = c.connect_as("portable_up", "portable_up_owner");
    owner
        .batch_execute(&common::portable_script(&[]))
        .expect("portable edition");
    owner
        .batch_execute(
            "SELECT idem_claim('pay', 'done', 'h1'); SELECT idem_complete('pay', 'done', '{\"id\": 7}'); \
             SELECT idem_claim('pay', 'live', 'h1', lease => '1 hour', claimed_by => 'w1'); \
             SELECT idem_claim('pay', 'retry', 'h1'); SELECT idem_checkpoint('pay', 'retry', 'step-2'); \
             SELECT idem_fail('pay', 'retry', true, 'E1', 'down'); \
             SELECT idem_claim('pay', 'final', 'h1'); SELECT idem_fail('pay', 'final', false, 'E9', 'no'); \
             SELECT idem_inbox_accept('c', 'm1', 'h'); SELECT idem_advance('s', 'e', 5); \
             SELECT idem_outbox_put('t', '{\"n\": 1}', 'd1'); SELECT idem_outbox_put('t', '{\"n\": 2}'); \
             SELECT idem_outbox_ack('{1}');",
        )
        .expect("portable state");
    let before = count(&mut owner, "SELECT count(*) FROM idempotency.requests");
    let cdc_id = answer(&mut owner, CDC_ID);
    let signed = answer(&mut owner, &CDC_ID.replace("::jsonb->>'message_id'", ""));
    drop(owner);

    let mut admin = c.connect("portable_up");
    admin
        .batch_execute(&common::portable_script(&["--move-up"]))
        .expect("move up");
    assert_eq!(
        answer(
            &mut admin,
            "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'"
        ),
        "0.2.0"
    );
    assert_eq!(
        count(
            &mut admin,
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'idempotency_portable'"
        ),
        0
    );
    admin.batch_execute("SELECT idem_grant('portable_up_owner', 'app'); SELECT idem_grant('portable_up_owner', 'publisher')").expect("grants again");
    assert_eq!(
        answer(&mut admin, CDC_ID),
        cdc_id,
        "the same CDC message id"
    );
    let verified = admin
        .query_one("SELECT idem_cdc_verify($1::text::jsonb)", &[&signed])
        .expect("verify")
        .get::<_, bool>(0);
    assert!(
        verified,
        "a message signed before the move verifies after it"
    );
    let mut db = c.connect_as("portable_up", "portable_up_owner");
    assert_eq!(
        count(&mut db, "SELECT count(*) FROM idempotency.requests"),
        before
    );
    let replay = db
        .query_one(
            "SELECT outcome::text, response::text, attempt FROM idem_claim('pay', 'done', 'h1')",
            &[],
        )
        .expect("replay");
    assert_eq!(replay.get::<_, String>(0), "replay_success");
    assert_eq!(replay.get::<_, String>(1), "{\"id\": 7}");
    assert_eq!(
        answer(
            &mut db,
            "SELECT outcome::text FROM idem_claim('pay', 'live', 'h1')"
        ),
        "processing_active"
    );
    db.batch_execute("SELECT idem_complete('pay', 'live', '{}', attempt => 1)")
        .expect("the live attempt completes");
    let retry = db
        .query_one(
            "SELECT outcome::text, attempt, recovery_point FROM idem_claim('pay', 'retry', 'h1')",
            &[],
        )
        .expect("retry");
    assert_eq!(
        (retry.get::<_, String>(0), retry.get::<_, i32>(1)),
        ("retryable_failure".into(), 2)
    );
    assert_eq!(retry.get::<_, String>(2), "step-2");
    assert_eq!(
        answer(
            &mut db,
            "SELECT failure_code FROM idem_claim('pay', 'final', 'h1')"
        ),
        "E9"
    );
    assert_eq!(
        answer(
            &mut db,
            "SELECT outcome::text FROM idem_claim('pay', 'done', 'h2')"
        ),
        "ERROR P4002"
    );
    consumers_remember(&mut db, "in place");
    assert_eq!(
        answer(
            &mut db,
            "SELECT string_agg(id::text, ',') FROM idem_outbox_take(10)"
        ),
        "2,4"
    );
    // The native functions are C now.
    assert_eq!(
        answer(
            &mut db,
            "SELECT l.lanname::text FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.proname = 'idem_claim'"
        ),
        "c"
    );
}

/// A client tool of the Postgres under test (pg_dump, pg_restore), run against the cluster.
pub(crate) fn tool(c: &common::Cluster, name: &str, args: &[&str]) {
    let out = std::process::Command::new(c.bindir.join(name))
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &c.port.to_string(),
            "-U",
            "postgres",
        ])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        out.status.success(),
        "{name} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// After a move, the consumers remember what they saw: a delivered message, a version, an
/// outbox dedupe key; and the outbox's ids go on.
fn consumers_remember(db: &mut postgres::Client, how: &str) {
    let delivered = answer(db, "SELECT idem_inbox_accept('c', 'm1', 'h')::text");
    assert_eq!(delivered, "false", "{how}: a delivered message");
    let advanced = answer(db, "SELECT idem_advance('s', 'e', 4)::text");
    assert_eq!(advanced, "false", "{how}: an older version");
    let put = answer(db, "SELECT idem_outbox_put('t', '{}', 'd1')::text");
    assert_eq!(put, "1", "{how}: dedupe keys kept");
    let next = answer(db, "SELECT idem_outbox_put('t', '{}')::text");
    assert_eq!(next, "4", "{how}: ids go on (the deduplicated put used 3)");
}

/// Every record as (scope, key, hash, status, response, failure_code), in key order.
fn records(db: &mut postgres::Client) -> Vec<Vec<Option<String>>> {
    db.query(
        "SELECT scope, key, request_hash, status::text, response::text, failure_code \
         FROM idempotency.requests ORDER BY scope, key",
        &[],
    )
    .expect("records")
    .iter()
    .map(|r| (0..6).map(|i| r.get(i)).collect())
    .collect()
}

/// Moving up by dump and restore, with the real pg_dump and pg_restore of this major, both
/// ways docs/managed.md gives: (a) the whole database restored on the new server, then the
/// in-place move-up; (b) only the records (`--data-only --schema=idempotency`) restored into
/// a database where `CREATE EXTENSION idempotency` ran. Then every stored key replays what it
/// stored, and new keys are claimed.
#[test]
fn a_portable_database_moves_up_by_dump_and_restore() {
    let c = common::cluster();
    let mut admin = c.connect("postgres");
    for db in ["portable_dump", "portable_dump_a", "portable_dump_b"] {
        c.drop_database(db);
    }
    for sql in [
        "DROP ROLE IF EXISTS portable_dump_owner",
        "CREATE ROLE portable_dump_owner LOGIN",
        "CREATE DATABASE portable_dump OWNER portable_dump_owner",
        "CREATE DATABASE portable_dump_a OWNER portable_dump_owner",
        "CREATE DATABASE portable_dump_b OWNER portable_dump_owner",
    ] {
        admin.batch_execute(sql).expect("databases");
    }
    let mut src = c.connect_as("portable_dump", "portable_dump_owner");
    src.batch_execute(&common::portable_script(&[]))
        .expect("portable edition");
    src.batch_execute(
        "CREATE TABLE public.orders (id int PRIMARY KEY); INSERT INTO public.orders VALUES (1), (2); \
         SELECT idem_claim('pay', 'k' || i, 'h' || i), \
                idem_complete('pay', 'k' || i, jsonb_build_object('id', i, 'note', 'é ✓ \"q\"', 'items', jsonb_build_array(i, NULL, true))) \
           FROM generate_series(1, 40) AS i; \
         SELECT idem_claim('pay', 'empty', 'h'); SELECT idem_complete('pay', 'empty', NULL); \
         SELECT idem_claim('pay', 'final', 'h'); SELECT idem_fail('pay', 'final', false, 'E9', 'no'); \
         SELECT idem_claim('pay', 'retry', 'h'); SELECT idem_fail('pay', 'retry', true, 'E1', 'down'); \
         SELECT idem_claim('pay', 'live', 'h', lease => '1 hour'); \
         SELECT idem_inbox_accept('c', 'm1', 'h'); SELECT idem_advance('s', 'e', 5); \
         SELECT idem_outbox_put('t', '{\"n\": 1}', 'd1'); SELECT idem_outbox_put('t', '{\"n\": 2}')",
    )
    .expect("portable state");
    let stored = records(&mut src);
    assert_eq!(stored.len(), 44);
    let cdc_id = answer(&mut src, CDC_ID);
    drop(src);
    let dir = std::env::temp_dir().join(format!("idem-dump-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dump dir");
    let whole = dir.join("whole.dump");
    let data = dir.join("data.dump");
    tool(
        c,
        "pg_dump",
        &["-Fc", "-f", whole.to_str().expect("path"), "portable_dump"],
    );
    tool(
        c,
        "pg_dump",
        &[
            "-Fc",
            "--data-only",
            "--schema=idempotency",
            "-f",
            data.to_str().expect("path"),
            "portable_dump",
        ],
    );
    // (a) the whole database, then the move-up in place.
    tool(
        c,
        "pg_restore",
        &["-d", "portable_dump_a", whole.to_str().expect("path")],
    );
    c.connect("portable_dump_a")
        .batch_execute(&common::portable_script(&["--move-up"]))
        .expect("move up the restored database");
    // (b) the records only, into the native extension.
    c.connect("portable_dump_b")
        .batch_execute("CREATE EXTENSION idempotency")
        .expect("native extension");
    tool(
        c,
        "pg_restore",
        &[
            "--data-only",
            "-d",
            "portable_dump_b",
            data.to_str().expect("path"),
        ],
    );
    std::fs::remove_dir_all(&dir).expect("remove the dumps");

    for name in ["portable_dump_a", "portable_dump_b"] {
        let mut su = c.connect(name);
        su.batch_execute("SELECT idem_grant('portable_dump_owner', 'app'); SELECT idem_grant('portable_dump_owner', 'publisher')")
            .expect("grants again");
        assert_eq!(
            answer(
                &mut su,
                "SELECT l.lanname::text FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.proname = 'idem_claim'"
            ),
            "c",
            "{name}: native"
        );
        assert_eq!(
            answer(&mut su, CDC_ID),
            cdc_id,
            "{name}: the same CDC message id"
        );
        let mut db = c.connect_as(name, "portable_dump_owner");
        assert_eq!(records(&mut db), stored, "{name}: the rows");
        for rec in &stored {
            let (scope, key, hash) = (rec[0].as_deref(), rec[1].as_deref(), rec[2].as_deref());
            let row = db
                .query_one(
                    "SELECT outcome::text, response::text, failure_code FROM idem_claim($1, $2, $3)",
                    &[&scope, &key, &hash],
                )
                .unwrap_or_else(|e| panic!("{name}: claim {key:?}: {e}"));
            let want = match rec[3].as_deref() {
                Some("succeeded") => "replay_success",
                Some("failed_final") => "final_failure",
                Some("failed_retryable") => "retryable_failure",
                _ => "processing_active",
            };
            assert_eq!(row.get::<_, String>(0), want, "{name}: {key:?}");
            if want == "replay_success" {
                assert_eq!(
                    row.get::<_, Option<String>>(1),
                    rec[4],
                    "{name}: {key:?} replays its response"
                );
            }
            if want == "final_failure" {
                assert_eq!(row.get::<_, Option<String>>(2), rec[5], "{name}: {key:?}");
            }
        }
        assert_eq!(
            answer(
                &mut db,
                "SELECT outcome::text FROM idem_claim('pay', 'k1', 'other')"
            ),
            "ERROR P4002"
        );
        consumers_remember(&mut db, name);
        assert_eq!(
            answer(
                &mut db,
                "SELECT outcome::text FROM idem_claim('pay', 'new', 'h')"
            ),
            "new_claim"
        );
        db.batch_execute("SELECT idem_complete('pay', 'new', '{\"new\": 1}')")
            .expect("complete a new key");
        assert_eq!(
            answer(
                &mut db,
                "SELECT response::text FROM idem_claim('pay', 'new', 'h')"
            ),
            "{\"new\": 1}"
        );
    }
    assert_eq!(
        count(
            &mut c.connect_as("portable_dump_a", "portable_dump_owner"),
            "SELECT count(*) FROM public.orders"
        ),
        2,
        "the application's tables came along"
    );
}
