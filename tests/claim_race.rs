//! Races of the claim path made to happen every time, with the test-only injection point
//! `idempotency_test.pause_before_key_lock` (src/test_points.rs, `pg_test` builds only): a new
//! key's claim stops between its first read (no record) and its try-lock on the key, while
//! another session commits a claim of the same key. Without the re-read after the lock
//! (`claim_new_key` in src/claim.rs) the paused claim inserts a second record: 23505.

mod common;

use std::thread;
use std::time::Duration;

use common::{Client, claim_attempt, cluster, records, sqlstate, wait_for_every};

/// Advisory lock keys the paused claims wait on, one per test (tests run in parallel).
const PAUSE_COMMITTED: i32 = 740_101;
const PAUSE_COMPLETED: i32 = 740_102;
const PAUSE_UNCOMMITTED: i32 = 740_103;

/// What a paused claim ends with: Ok((outcome, attempt, response)) or its SQLSTATE.
type ClaimResult = Result<(String, Option<i32>, Option<String>), String>;

/// Start `idem_claim(scope, key, 'h')` in a session paused before its key lock; returns the
/// thread that finishes it: Ok((outcome, attempt, response)) or the SQLSTATE it failed with.
fn paused_claim(
    pause: i32,
    scope: &'static str,
    key: &'static str,
) -> (i32, thread::JoinHandle<ClaimResult>) {
    let mut a = cluster().session();
    a.batch_execute(&format!(
        "SET idempotency_test.pause_before_key_lock = {pause}"
    ))
    .expect("the injection point (a pg_test build of the extension)");
    let pid: i32 = a
        .query_one("SELECT pg_backend_pid()", &[])
        .expect("pid")
        .get(0);
    let handle = thread::spawn(move || {
        a.query_one(
            "SELECT outcome::text, attempt, response::text FROM idem_claim($1, $2, 'h')",
            &[&scope, &key],
        )
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .map_err(|e| sqlstate(&e))
    });
    (pid, handle)
}

/// Wait until backend `pid` waits for the advisory lock `pause` (the injection point).
fn wait_until_paused(observer: &mut Client, pid: i32, pause: i32) {
    wait_for_every(
        "the claim reaching the injection point",
        Duration::from_secs(60),
        Duration::from_millis(5),
        || {
            observer
                .query_one(
                    "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND pid = $1 \
                     AND NOT granted AND objsubid = 1 AND classid = 0 AND objid = $2::int8::oid)",
                    &[&pid, &(pause as i64)],
                )
                .expect("pg_locks")
                .get(0)
        },
    );
}

fn hold(controller: &mut Client, pause: i32) {
    controller
        .execute("SELECT pg_advisory_lock($1::int8)", &[&(pause as i64)])
        .expect("pause lock");
}

fn release(controller: &mut Client, pause: i32) {
    controller
        .execute("SELECT pg_advisory_unlock($1::int8)", &[&(pause as i64)])
        .expect("unpause");
}

/// Mutation `claim-no-reread` (the sixth survivor of the first campaign).
#[test]
fn a_claim_committed_before_the_key_lock_is_seen_as_active() {
    let mut controller = cluster().session();
    let mut b = cluster().session();
    hold(&mut controller, PAUSE_COMMITTED);
    let (pid, a) = paused_claim(PAUSE_COMMITTED, "race_committed", "k");
    wait_until_paused(&mut controller, pid, PAUSE_COMMITTED);
    // The first read of A found nothing; B's claim commits now.
    assert_eq!(
        claim_attempt(&mut b, "race_committed", "k", "h"),
        ("new_claim".into(), Some(1))
    );
    release(&mut controller, PAUSE_COMMITTED);
    let answer = a.join().expect("session A");
    assert_eq!(answer, Ok(("processing_active".into(), Some(1), None)));
    assert_eq!(records(&mut controller, "race_committed"), 1);
}

#[test]
fn a_claim_completed_before_the_key_lock_is_replayed() {
    let mut controller = cluster().session();
    let mut b = cluster().session();
    hold(&mut controller, PAUSE_COMPLETED);
    let (pid, a) = paused_claim(PAUSE_COMPLETED, "race_completed", "k");
    wait_until_paused(&mut controller, pid, PAUSE_COMPLETED);
    b.batch_execute(
        "BEGIN; SELECT * FROM idem_claim('race_completed', 'k', 'h');
         SELECT idem_complete('race_completed', 'k', '{\"by\": \"b\"}'); COMMIT;",
    )
    .expect("claim and complete");
    release(&mut controller, PAUSE_COMPLETED);
    let answer = a.join().expect("session A");
    assert_eq!(
        answer,
        Ok((
            "replay_success".into(),
            Some(1),
            Some(r#"{"by": "b"}"#.into())
        ))
    );
    assert_eq!(records(&mut controller, "race_completed"), 1);
}

/// The other order: B's claim is not committed when A resumes, so A's try-lock fails.
#[test]
fn a_claim_uncommitted_at_the_key_lock_is_active_without_waiting() {
    let mut controller = cluster().session();
    let mut b = cluster().session();
    hold(&mut controller, PAUSE_UNCOMMITTED);
    let (pid, a) = paused_claim(PAUSE_UNCOMMITTED, "race_uncommitted", "k");
    wait_until_paused(&mut controller, pid, PAUSE_UNCOMMITTED);
    let mut tx = b.transaction().expect("begin");
    let outcome: String = tx
        .query_one(
            "SELECT outcome::text FROM idem_claim('race_uncommitted', 'k', 'h')",
            &[],
        )
        .expect("claim")
        .get(0);
    assert_eq!(outcome, "new_claim");
    release(&mut controller, PAUSE_UNCOMMITTED);
    let answer = a.join().expect("session A");
    assert_eq!(answer, Ok(("processing_active".into(), None, None)));
    tx.commit().expect("commit");
    assert_eq!(records(&mut controller, "race_uncommitted"), 1);
}
