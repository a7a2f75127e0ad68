//! Inbox, outbox and idem_call across real, separate client sessions of a running cluster.
//! Every test uses its own consumer / topic / scope names (tests run in parallel threads).

use crate::common;

use std::collections::HashSet;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::{Client, count, sql_block_after, sqlstate, wait_for};

crate::own_database!();

/// Wait until some session is blocked on a lock in a statement containing `marker`.
fn wait_until_blocked(observer: &mut Client, marker: &str) {
    wait_for(
        &format!("a session blocked on {marker}"),
        Duration::from_secs(20),
        || {
            let waiting: i64 = observer
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                     AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid() \
                     AND datname = current_database()",
                    &[&marker],
                )
                .expect("pg_stat_activity")
                .get(0);
            waiting > 0
        },
    );
}

/// Deliver one message from a fresh session (on another thread); the statement text names the
/// consumer, so `wait_until_blocked` can find it.
fn deliver_in_background(consumer: &'static str) -> std::thread::JoinHandle<bool> {
    std::thread::spawn(move || {
        let mut b = cluster().session();
        b.query_one(
            &format!("SELECT idem_inbox_accept('{consumer}', 'm-1', 'hash-1')"),
            &[],
        )
        .expect("second delivery")
        .get(0)
    })
}

#[test]
fn inbox_second_delivery_waits_and_is_a_duplicate_once_the_first_commits() {
    let mut a = cluster().session();
    let mut observer = cluster().session();
    let mut tx = a.transaction().expect("begin");
    let first: bool = tx
        .query_one(
            "SELECT idem_inbox_accept('it_inbox_commit', 'm-1', 'hash-1')",
            &[],
        )
        .expect("first delivery")
        .get(0);
    assert!(first);
    let second = deliver_in_background("it_inbox_commit");
    wait_until_blocked(&mut observer, "it_inbox_commit");
    assert!(!second.is_finished(), "the second delivery must wait");
    tx.commit().expect("commit");
    assert!(
        !second.join().expect("thread"),
        "a duplicate once the first committed"
    );
    let rows: i64 = observer
        .query_one(
            "SELECT count(*) FROM idempotency.inbox WHERE consumer = 'it_inbox_commit'",
            &[],
        )
        .expect("count")
        .get(0);
    assert_eq!(rows, 1);
}

#[test]
fn inbox_second_delivery_is_the_first_if_the_first_rolls_back() {
    let mut a = cluster().session();
    let mut observer = cluster().session();
    let mut tx = a.transaction().expect("begin");
    let first: bool = tx
        .query_one(
            "SELECT idem_inbox_accept('it_inbox_rollback', 'm-1', 'hash-1')",
            &[],
        )
        .expect("first delivery")
        .get(0);
    assert!(first);
    let second = deliver_in_background("it_inbox_rollback");
    wait_until_blocked(&mut observer, "it_inbox_rollback");
    tx.rollback().expect("rollback");
    assert!(
        second.join().expect("thread"),
        "the first delivery rolled back"
    );
}

#[test]
fn parallel_publishers_never_take_one_row_twice() {
    const MESSAGES: i64 = 300;
    const PUBLISHERS: usize = 4;
    let mut setup = cluster().session();
    setup
        .execute(
            "SELECT idem_outbox_put('it_take_parallel', to_jsonb(i)) FROM generate_series(1, $1::int8) i",
            &[&MESSAGES],
        )
        .expect("put");
    let barrier = Arc::new(Barrier::new(PUBLISHERS));
    let handles: Vec<_> = (0..PUBLISHERS)
        .map(|publisher| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut client = cluster().session();
                barrier.wait();
                let mut taken = Vec::new();
                loop {
                    // Half the publishers hold their batch's row locks a little while, so
                    // the others run into locked rows (SKIP LOCKED), not only into leases.
                    let mut tx = client.transaction().expect("begin");
                    let rows = tx
                        .query(
                            "SELECT id, attempts FROM idem_outbox_take(7, '1 minute', 'it_take_parallel')",
                            &[],
                        )
                        .expect("take");
                    if publisher % 2 == 0 {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    tx.commit().expect("commit");
                    if rows.is_empty() {
                        break;
                    }
                    for row in rows {
                        assert_eq!(row.get::<_, i32>(1), 1, "handed out once");
                        taken.push(row.get::<_, i64>(0));
                    }
                }
                taken
            })
        })
        .collect();
    let mut all = Vec::new();
    for handle in handles {
        all.extend(handle.join().expect("publisher"));
    }
    let distinct: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(
        all.len() as i64,
        MESSAGES,
        "every message handed out exactly once"
    );
    assert_eq!(distinct.len() as i64, MESSAGES);
    let acked: i64 = setup
        .query_one("SELECT idem_outbox_ack($1)", &[&all])
        .expect("ack")
        .get(0);
    assert_eq!(acked, MESSAGES);
}

#[test]
fn a_lease_that_runs_out_hands_the_row_out_again() {
    let mut crashed = cluster().session();
    let mut other = cluster().session();
    let id: i64 = crashed
        .query_one("SELECT idem_outbox_put('it_lease', '{\"n\": 1}')", &[])
        .expect("put")
        .get(0);
    let take = |client: &mut Client| -> Vec<(i64, i32)> {
        client
            .query(
                "SELECT id, attempts FROM idem_outbox_take(10, '300 milliseconds', 'it_lease')",
                &[],
            )
            .expect("take")
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    };
    assert_eq!(take(&mut crashed), vec![(id, 1)]);
    // The publisher "crashes" without an ack: nobody gets the row while the lease lives ...
    drop(crashed);
    assert_eq!(take(&mut other), vec![]);
    std::thread::sleep(Duration::from_millis(500));
    // ... and another publisher gets it once the lease ran out.
    assert_eq!(take(&mut other), vec![(id, 2)]);
    let acked: i64 = other
        .query_one("SELECT idem_outbox_ack(ARRAY[$1::bigint])", &[&id])
        .expect("ack")
        .get(0);
    assert_eq!(acked, 1);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        take(&mut other),
        vec![],
        "a published row is never handed out again"
    );
}

/// Create a function `name(jsonb) -> jsonb` that counts its calls in sequence `<name>_calls`
/// (sequences do not roll back) and then runs `body`.
fn create_counted_fn(client: &mut Client, name: &str, body: &str) {
    client
        .batch_execute(&format!(
            "CREATE SEQUENCE {name}_calls; \
             CREATE FUNCTION {name}(request jsonb) RETURNS jsonb LANGUAGE plpgsql AS $fn$ \
             BEGIN PERFORM nextval('{name}_calls'); {body} END $fn$;"
        ))
        .expect("create function");
}

fn calls(client: &mut Client, name: &str) -> i64 {
    client
        .query_one(
            &format!("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {name}_calls"),
            &[],
        )
        .expect("calls")
        .get(0)
}

#[test]
fn idem_call_transient_error_reaches_the_client_and_records_nothing() {
    let mut a = cluster().session();
    create_counted_fn(
        &mut a,
        "it_call_serialization",
        "RAISE EXCEPTION 'could not serialize (test)' USING ERRCODE = '40001';",
    );
    let err = a
        .query_one(
            "SELECT * FROM idem_call('it_call_40001', 'k', '{}', 'it_call_serialization(jsonb)')",
            &[],
        )
        .expect_err("40001 is re-raised");
    assert_eq!(sqlstate(&err), "40001");
    let db = err.as_db_error().expect("db error");
    assert_eq!(db.message(), "could not serialize (test)");
    let detail = db.detail().unwrap_or_default();
    assert!(!detail.contains(".rs:"), "no Rust backtrace: {detail}");
    let recorded: i64 = a
        .query_one(
            "SELECT count(*) FROM idempotency.requests WHERE scope = 'it_call_40001'",
            &[],
        )
        .expect("count")
        .get(0);
    assert_eq!(
        recorded, 0,
        "nothing recorded: the client retries the whole transaction"
    );
    assert_eq!(calls(&mut a, "it_call_serialization"), 1);
}

#[test]
fn idem_call_failures_commit_with_the_caller_and_are_replayed() {
    let mut a = cluster().session();
    let mut b = cluster().session();
    create_counted_fn(
        &mut a,
        "it_call_custom",
        "RAISE EXCEPTION 'unknown sku %', request->>'sku' USING ERRCODE = 'AB123';",
    );
    let row = a
        .query_one(
            "SELECT outcome::text, failure_code, failure_message, attempt \
             FROM idem_call('it_call_ab123', 'k', '{\"sku\": \"x-1\"}', 'it_call_custom(jsonb)')",
            &[],
        )
        .expect("a failure is returned, not raised");
    assert_eq!(row.get::<_, String>(0), "final_failure");
    assert_eq!(row.get::<_, String>(1), "AB123");
    assert_eq!(row.get::<_, String>(2), "unknown sku x-1");
    assert_eq!(row.get::<_, i32>(3), 1);
    // Committed with the caller's (autocommit) transaction: another session sees it ...
    let stored = b
        .query_one(
            "SELECT status::text, failure_code FROM idempotency.requests WHERE scope = 'it_call_ab123'",
            &[],
        )
        .expect("record");
    assert_eq!(stored.get::<_, String>(0), "failed_final");
    assert_eq!(stored.get::<_, String>(1), "AB123");
    // ... and gets the failure back without a second call.
    let replay = b
        .query_one(
            "SELECT outcome::text, failure_code FROM idem_call('it_call_ab123', 'k', '{\"sku\": \"x-1\"}', 'it_call_custom(jsonb)')",
            &[],
        )
        .expect("replay");
    assert_eq!(replay.get::<_, String>(0), "final_failure");
    assert_eq!(replay.get::<_, String>(1), "AB123");
    assert_eq!(calls(&mut b, "it_call_custom"), 1);
}

#[test]
fn idem_call_in_flight_elsewhere_is_p4029_at_once() {
    let mut a = cluster().session();
    let mut b = cluster().session();
    create_counted_fn(&mut a, "it_call_slow", "RETURN '{\"ok\": true}';");
    let call = "SELECT outcome::text, response::text FROM idem_call('it_call_busy', 'k', '{}', 'it_call_slow(jsonb)')";
    let mut tx = a.transaction().expect("begin");
    let row = tx.query_one(call, &[]).expect("first call");
    assert_eq!(row.get::<_, String>(0), "new_claim");
    let started = Instant::now();
    let err = b.query_one(call, &[]).expect_err("in flight elsewhere");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "P4029 must not wait"
    );
    assert_eq!(sqlstate(&err), "P4029");
    let hint = err
        .as_db_error()
        .and_then(|e| e.hint())
        .unwrap_or_default()
        .to_string();
    assert!(hint.contains("short delay"), "{hint}");
    tx.commit().expect("commit");
    let row = b.query_one(call, &[]).expect("replay");
    assert_eq!(row.get::<_, String>(0), "replay_success");
    assert_eq!(row.get::<_, String>(1), r#"{"ok": true}"#);
    assert_eq!(calls(&mut b, "it_call_slow"), 1);
}

/// The `sql` block after `marker` in README.md, or else in docs/consumers.md (whichever has
/// the marker: the consumers doc may be folded into the README).
fn doc_block(marker: &str) -> String {
    let doc = ["README.md", "docs/consumers.md"]
        .iter()
        .filter_map(|file| {
            std::fs::read_to_string(format!("{}/{file}", env!("CARGO_MANIFEST_DIR"))).ok()
        })
        .find(|text| text.contains(marker))
        .expect("a doc with the example marker");
    sql_block_after(&doc, marker)
}

#[test]
fn documented_create_order_example_works() {
    let mut app = cluster().session();
    app.batch_execute(&doc_block("<!-- example: create-order"))
        .expect("the documented example");
    let place = |client: &mut Client, key: &str, request: &str| -> String {
        client
            .query_one(
                "SELECT place_order($1, $2::text::jsonb)::text",
                &[&key, &request],
            )
            .expect("place_order")
            .get(0)
    };
    let created = place(&mut app, "7c1e", r#"{"customer": "ada", "total": 42}"#);
    assert_eq!(created, r#"{"status": "created", "order_id": 1}"#);
    // A retry, spelled differently, from another session: the same answer, no second order.
    let mut retry = cluster().session();
    assert_eq!(
        place(&mut retry, "7c1e", r#"{"total": 42, "customer": "ada"}"#),
        created
    );
    let rejected = place(&mut app, "9f00", r#"{"customer": "bob", "total": 0}"#);
    assert_eq!(
        rejected,
        r#"{"error": "22023", "message": "total must be positive"}"#
    );
    assert_eq!(
        place(&mut retry, "9f00", r#"{"customer": "bob", "total": 0}"#),
        rejected
    );
    assert_eq!(count(&mut app, "SELECT count(*) FROM orders"), 1);
    // The event was enqueued once; a publisher delivers it twice (say its ack was lost) and
    // the consumer applies it once.
    let mut publisher = cluster().session();
    let taken = publisher
        .query(
            "SELECT id, message_id::text, payload::text \
             FROM idem_outbox_take(10, '30 seconds', 'orders.created')",
            &[],
        )
        .expect("take");
    assert_eq!(taken.len(), 1);
    let (id, message_id, payload): (i64, String, String) =
        (taken[0].get(0), taken[0].get(1), taken[0].get(2));
    let mut consumer = cluster().session();
    let applied: Vec<bool> = (0..2)
        .map(|_| {
            consumer
                .query_one(
                    "SELECT on_order_created($1::text::uuid, $2::text::jsonb)",
                    &[&message_id, &payload],
                )
                .expect("consume")
                .get(0)
        })
        .collect();
    assert_eq!(applied, vec![true, false]);
    assert_eq!(count(&mut app, "SELECT count(*) FROM invoices"), 1);
    let acked: i64 = publisher
        .query_one("SELECT idem_outbox_ack(ARRAY[$1::bigint])", &[&id])
        .expect("ack")
        .get(0);
    assert_eq!(acked, 1);
}
