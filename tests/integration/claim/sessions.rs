//! The claim protocol across real, separate client sessions of a running cluster.

use crate::common;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::permutation::Spec;
use common::{claim_attempt, sqlstate};

crate::own_database!();

/// `SELECT outcome, attempt{more} FROM idem_claim('{scope}', 'k', '{hash}'{args})`.
fn claim(scope: &str, hash: &str, more: &str, args: &str) -> String {
    format!("SELECT outcome, attempt{more} FROM idem_claim('{scope}', 'k', '{hash}'{args})")
}

#[test]
fn uncommitted_claim_is_processing_active_for_others_at_once() {
    let c = claim("s1", "h", "", "");
    // Every step answers at once: a claim never waits for another session's claim.
    Spec::new(&[
        ("a begin", "BEGIN"),
        ("a claim", &c),
        ("a commit", "COMMIT"),
        ("a fail", "SELECT idem_fail('s1', 'k', true, 'boom')"),
        ("b claim", &c),
    ])
    .quick(Duration::from_millis(500))
    .permutation(
        || cluster().session(),
        &[
            ("a begin", ""),
            ("a claim", "new_claim 1"),
            // An uncommitted claim shows no attempt.
            ("b claim", "processing_active NULL"),
            ("a commit", ""),
            ("a fail", ""),
            // A retryable failure being taken over by A is not waited for either.
            ("a begin", ""),
            ("a claim", "retryable_failure 2"),
            ("b claim", "processing_active 1"),
            ("a commit", ""),
            // Committed now: a live lease.
            ("b claim", "processing_active 2"),
        ],
    );
}

#[test]
fn rolled_back_claim_leaves_nothing() {
    Spec::new(&[
        ("a begin", "BEGIN"),
        ("a claim", &claim("s2", "h", "", "")),
        ("a rollback", "ROLLBACK"),
        (
            "a records",
            "SELECT count(*) FROM idempotency.requests WHERE scope = 's2'",
        ),
        ("b claim", &claim("s2", "other-hash", "", "")),
    ])
    .permutation(
        || cluster().session(),
        &[
            ("a begin", ""),
            ("a claim", "new_claim 1"),
            ("a rollback", ""),
            ("a records", "0"),
            ("b claim", "new_claim 1"),
        ],
    );
}

#[test]
fn expired_lease_is_taken_over_and_the_late_attempt_is_fenced() {
    Spec::new(&[
        (
            "a claim",
            &claim("s3", "h", "", ", lease => '300 milliseconds'"),
        ),
        (
            "a checkpoint",
            "SELECT idem_checkpoint('s3', 'k', 'step-1', 1) IS NOT NULL",
        ),
        (
            "a complete",
            r#"SELECT idem_complete('s3', 'k', '{"late": true}', 1)"#,
        ),
        ("a replay", &claim("s3", "h", ", response", "")),
        ("b claim", &claim("s3", "h", "", "")),
        ("b sleep", "SELECT pg_sleep(0.7)"),
        ("b takeover", &claim("s3", "h", ", recovery_point", "")),
        (
            "b complete",
            r#"SELECT idem_complete('s3', 'k', '{"by": 2}', 2)"#,
        ),
    ])
    .permutation(
        || cluster().session(),
        &[
            ("a claim", "new_claim 1"),
            ("a checkpoint", "t"),
            ("b claim", "processing_active 1"),
            // The 300 ms lease runs out.
            ("b sleep", ""),
            ("b takeover", "processing_stale 2 step-1"),
            // The late attempt is fenced.
            ("a complete", "ERROR P4012"),
            ("b complete", ""),
            ("a replay", r#"replay_success 2 {"by": 2}"#),
        ],
    );
}

#[test]
fn replay_is_a_read_no_xid_no_row_lock() {
    Spec::new(&[
        ("a claim", &claim("s4", "h", "", "")),
        ("a complete", "SELECT idem_complete('s4', 'k', '[1, 2]')"),
        ("a begin", "BEGIN"),
        ("a replay", &claim("s4", "h", "", "")),
        ("a xid", "SELECT pg_current_xact_id_if_assigned()"),
        ("a commit", "COMMIT"),
        (
            "b lock",
            "SET lock_timeout = '100ms'; \
             SELECT 1 FROM idempotency.requests WHERE scope = 's4' FOR UPDATE NOWAIT",
        ),
    ])
    .permutation(
        || cluster().session(),
        &[
            ("a claim", "new_claim 1"),
            ("a complete", ""),
            ("a begin", ""),
            ("a replay", "replay_success 1"),
            // A replay must not write,
            ("a xid", "NULL"),
            // nor hold a row lock: another session locks the row without waiting.
            ("b lock", "1"),
            ("a commit", ""),
        ],
    );
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
