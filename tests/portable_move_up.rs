//! Moving up (issue 21): a database that started on the portable edition moves to the native
//! extension with `scripts/portable.sh --move-up`, in place, and every record still replays:
//! succeeded records replay their response, a live lease stays processing_active and is
//! completed by its attempt, a retryable failure is taken over as the next attempt, inbox
//! duplicates stay duplicates, versions stay ordered, the outbox keeps its ids and pending rows.

mod common;

use common::{answer, count};

fn script(args: &[&str]) -> String {
    let out =
        std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/portable.sh"))
            .args(args)
            .output()
            .expect("scripts/portable.sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf8")
}

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
    owner.batch_execute(&script(&[])).expect("portable edition");
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
    drop(owner);

    let mut admin = c.connect("portable_up");
    admin
        .batch_execute(&script(&["--move-up"]))
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
    assert_eq!(
        answer(&mut db, "SELECT idem_inbox_accept('c', 'm1', 'h')::text"),
        "false"
    );
    assert_eq!(
        answer(&mut db, "SELECT idem_advance('s', 'e', 4)::text"),
        "false"
    );
    assert_eq!(
        answer(&mut db, "SELECT idem_outbox_put('t', '{}', 'd1')::text"),
        "1",
        "dedupe keys kept"
    );
    assert_eq!(
        answer(&mut db, "SELECT idem_outbox_put('t', '{}')::text"),
        "4",
        "ids go on (the deduplicated put used 3)"
    );
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
