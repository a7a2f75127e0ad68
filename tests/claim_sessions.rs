//! The claim protocol across real, separate client sessions of a running cluster.

mod common;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::{claim_attempt, cluster, sqlstate};

#[test]
fn uncommitted_claim_is_processing_active_for_others_at_once() {
    let mut a = cluster().session();
    let mut b = cluster().session();
    let mut ta = a.transaction().expect("begin");
    let (o, _) = claim_attempt(&mut ta, "s1", "k", "h");
    assert_eq!(o, "new_claim");

    let started = Instant::now();
    let (o, attempt) = claim_attempt(&mut b, "s1", "k", "h");
    let waited = started.elapsed();
    assert_eq!(o, "processing_active");
    assert_eq!(attempt, None, "an uncommitted claim shows no attempt");
    assert!(
        waited < Duration::from_millis(500),
        "the claim waited {waited:?}"
    );

    // A retryable failure being taken over by A is also not waited for.
    ta.commit().expect("commit");
    a.execute("SELECT idem_fail('s1', 'k', true, 'boom')", &[])
        .expect("fail");
    let mut ta = a.transaction().expect("begin");
    assert_eq!(
        claim_attempt(&mut ta, "s1", "k", "h"),
        ("retryable_failure".into(), Some(2))
    );
    let started = Instant::now();
    assert_eq!(claim_attempt(&mut b, "s1", "k", "h").0, "processing_active");
    assert!(started.elapsed() < Duration::from_millis(500));
    ta.commit().expect("commit");
    // Committed now: a live lease.
    assert_eq!(
        claim_attempt(&mut b, "s1", "k", "h"),
        ("processing_active".into(), Some(2))
    );
}

#[test]
fn rolled_back_claim_leaves_nothing() {
    let mut a = cluster().session();
    let mut tx = a.transaction().expect("begin");
    assert_eq!(claim_attempt(&mut tx, "s2", "k", "h").0, "new_claim");
    tx.rollback().expect("rollback");
    let n: i64 = a
        .query_one(
            "SELECT count(*) FROM idempotency.requests WHERE scope = 's2'",
            &[],
        )
        .expect("count")
        .get(0);
    assert_eq!(n, 0);
    let mut b = cluster().session();
    assert_eq!(
        claim_attempt(&mut b, "s2", "k", "other-hash"),
        ("new_claim".into(), Some(1))
    );
}

#[test]
fn expired_lease_is_taken_over_and_the_late_attempt_is_fenced() {
    let mut a = cluster().session();
    let mut b = cluster().session();
    a.query_one(
        "SELECT * FROM idem_claim('s3', 'k', 'h', lease => '300 milliseconds')",
        &[],
    )
    .expect("claim");
    a.execute("SELECT idem_checkpoint('s3', 'k', 'step-1', 1)", &[])
        .expect("checkpoint");
    assert_eq!(claim_attempt(&mut b, "s3", "k", "h").0, "processing_active");
    std::thread::sleep(Duration::from_millis(700));
    let row = b
        .query_one(
            "SELECT outcome::text, attempt, recovery_point FROM idem_claim('s3', 'k', 'h')",
            &[],
        )
        .expect("takeover");
    assert_eq!(row.get::<_, String>(0), "processing_stale");
    assert_eq!(row.get::<_, i32>(1), 2);
    assert_eq!(row.get::<_, String>(2), "step-1");

    let err = a
        .execute(
            "SELECT idem_complete('s3', 'k', '{\"late\": true}', 1)",
            &[],
        )
        .expect_err("late completion must fail");
    assert_eq!(sqlstate(&err), "P4012");
    b.execute("SELECT idem_complete('s3', 'k', '{\"by\": 2}', 2)", &[])
        .expect("complete");
    let row = a
        .query_one(
            "SELECT outcome::text, attempt, response::text FROM idem_claim('s3', 'k', 'h')",
            &[],
        )
        .expect("replay");
    assert_eq!(row.get::<_, String>(0), "replay_success");
    assert_eq!(row.get::<_, i32>(1), 2);
    assert_eq!(row.get::<_, String>(2), r#"{"by": 2}"#);
}

#[test]
fn replay_is_a_read_no_xid_no_row_lock() {
    let mut a = cluster().session();
    let mut b = cluster().session();
    a.query_one("SELECT * FROM idem_claim('s4', 'k', 'h')", &[])
        .expect("claim");
    a.execute("SELECT idem_complete('s4', 'k', '[1, 2]')", &[])
        .expect("complete");

    let mut tx = a.transaction().expect("begin");
    assert_eq!(claim_attempt(&mut tx, "s4", "k", "h").0, "replay_success");
    let xid: Option<String> = tx
        .query_one("SELECT pg_current_xact_id_if_assigned()::text", &[])
        .expect("xid")
        .get(0);
    assert_eq!(xid, None, "a replay must not write");
    // No row lock held either: another session can lock the row without waiting.
    b.execute("SET lock_timeout = '100ms'", &[]).expect("set");
    b.query(
        "SELECT 1 FROM idempotency.requests WHERE scope = 's4' FOR UPDATE NOWAIT",
        &[],
    )
    .expect("row is not locked by the replay");
    tx.commit().expect("commit");
}

#[test]
fn payload_mismatch_across_sessions_is_p4002() {
    let mut a = cluster().session();
    let mut b = cluster().session();
    claim_attempt(&mut a, "s5", "k", "hash-a");
    let err = b
        .query_one("SELECT * FROM idem_claim('s5', 'k', 'hash-b')", &[])
        .expect_err("mismatch");
    assert_eq!(sqlstate(&err), "P4002");
    let db = err.as_db_error().expect("db error");
    let detail = db.detail().unwrap_or_default();
    assert!(
        !detail.contains("hash-a") && detail.contains("hash-b"),
        "only this request's hash: {detail}"
    );
    assert!(
        !detail.contains("backtrace") && !detail.contains(".rs:"),
        "no Rust backtrace: {detail}"
    );
}

/// 16 sessions race over 40 keys; each attempt does claim + an effect row + complete in one
/// transaction, retrying while the key is busy. Exactly one effect per key must result.
#[test]
fn racing_sessions_produce_exactly_one_effect_per_key() {
    const SESSIONS: usize = 16;
    const KEYS: usize = 40;
    let mut setup = cluster().session();
    setup
        .batch_execute("CREATE TABLE race_effects (key text, session int, at timestamptz DEFAULT clock_timestamp())")
        .expect("effects table");
    let barrier = Arc::new(Barrier::new(SESSIONS));
    let handles: Vec<_> = (0..SESSIONS)
        .map(|session| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut client = cluster().session();
                barrier.wait();
                let mut replays = 0;
                for round in 0..KEYS {
                    // Sessions walk the keys in different orders to collide often.
                    let key = format!("key-{}", (round * 7 + session * 3) % KEYS);
                    let deadline = Instant::now() + Duration::from_secs(30);
                    loop {
                        let mut tx = client.transaction().expect("begin");
                        let (o, _) = claim_attempt(&mut tx, "race", &key, "same-request");
                        match o.as_str() {
                            "new_claim" | "retryable_failure" | "processing_stale" => {
                                tx.execute(
                                    "INSERT INTO race_effects (key, session) VALUES ($1, $2)",
                                    &[&key, &(session as i32)],
                                )
                                .expect("effect");
                                tx.execute(
                                    "SELECT idem_complete('race', $1, to_jsonb($2::int))",
                                    &[&key, &(session as i32)],
                                )
                                .expect("complete");
                                tx.commit().expect("commit");
                                break;
                            }
                            "replay_success" => {
                                replays += 1;
                                tx.commit().expect("commit");
                                break;
                            }
                            "processing_active" => {
                                tx.rollback().expect("rollback");
                                assert!(Instant::now() < deadline, "key {key} stayed busy");
                                std::thread::sleep(Duration::from_millis(2));
                            }
                            other => panic!("unexpected outcome {other}"),
                        }
                    }
                }
                replays
            })
        })
        .collect();
    let replays: usize = handles
        .into_iter()
        .map(|h| h.join().expect("session"))
        .sum();
    let effects: i64 = setup
        .query_one("SELECT count(*) FROM race_effects", &[])
        .expect("count")
        .get(0);
    let distinct: i64 = setup
        .query_one("SELECT count(DISTINCT key) FROM race_effects", &[])
        .expect("count")
        .get(0);
    assert_eq!((effects, distinct), (KEYS as i64, KEYS as i64));
    assert_eq!(replays, SESSIONS * KEYS - KEYS);
    // Each stored response names the session whose effect row exists.
    let mismatched: i64 = setup
        .query_one(
            "SELECT count(*) FROM idempotency.requests r JOIN race_effects e ON e.key = r.key \
             WHERE r.scope = 'race' AND (r.status <> 'succeeded' OR r.response <> to_jsonb(e.session))",
            &[],
        )
        .expect("check")
        .get(0);
    assert_eq!(mismatched, 0);
}
