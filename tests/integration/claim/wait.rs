//! `idem_claim(..., wait => ...)` across real, separate sessions of a running cluster.

use crate::common;

use std::thread;
use std::time::{Duration, Instant};

use common::{claim, sqlstate, wait_for};

crate::own_database!();

const HASH: &str = "h";

/// A claim with `wait` in its own session, on its own thread: (outcome, elapsed).
fn claim_waiting(
    scope: &'static str,
    key: &'static str,
    wait: &'static str,
) -> thread::JoinHandle<(String, Duration)> {
    thread::spawn(move || {
        let mut b = cluster().session();
        b.execute(
            "SELECT set_config('application_name', 'wait-' || $1, false)",
            &[&scope],
        )
        .expect("name the session");
        let started = Instant::now();
        let row = b
            .query_one(
                "SELECT outcome::text FROM idem_claim($1, $2, $3, wait => $4::text::interval)",
                &[&scope, &key, &HASH, &wait],
            )
            .expect("claim with wait");
        (row.get(0), started.elapsed())
    })
}

/// Wait until the session named `wait-<scope>` sleeps inside idem_claim (on its latch).
fn waiter_pid(observer: &mut postgres::Client, scope: &str) -> i32 {
    let mut pid = None;
    wait_for(
        &format!("a session waiting in {scope}"),
        Duration::from_secs(10),
        || {
            pid = observer
                .query(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Extension' \
                     AND application_name = 'wait-' || $1",
                    &[&scope],
                )
                .expect("pg_stat_activity")
                .first()
                .map(|row| row.get(0));
            pid.is_some()
        },
    );
    pid.expect("a waiting session")
}

#[test]
fn waits_for_an_uncommitted_claim_that_commits_success() {
    let mut a = cluster().session();
    let mut ta = a.transaction().expect("begin");
    assert_eq!(claim(&mut ta, "w1", "k", HASH), "new_claim");
    let waiter = claim_waiting("w1", "k", "20s");
    thread::sleep(Duration::from_millis(500));
    ta.execute("SELECT idem_complete('w1', 'k', '{\"done\": true}')", &[])
        .expect("complete");
    ta.commit().expect("commit");
    let (outcome, elapsed) = waiter.join().expect("waiter");
    assert_eq!(outcome, "replay_success");
    assert!(
        elapsed >= Duration::from_millis(400) && elapsed < Duration::from_secs(5),
        "{elapsed:?}"
    );
}

#[test]
fn takes_the_key_over_when_the_holder_rolls_back() {
    let mut a = cluster().session();
    let mut ta = a.transaction().expect("begin");
    assert_eq!(claim(&mut ta, "w2", "k", HASH), "new_claim");
    let waiter = claim_waiting("w2", "k", "20s");
    thread::sleep(Duration::from_millis(500));
    ta.rollback().expect("rollback");
    let (outcome, elapsed) = waiter.join().expect("waiter");
    assert_eq!(outcome, "new_claim");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
}

#[test]
fn waits_for_a_committed_processing_record_holding_nothing() {
    let mut a = cluster().session();
    assert_eq!(claim(&mut a, "w3", "k", HASH), "new_claim"); // committed, live lease
    let waiter = claim_waiting("w3", "k", "20s");
    let mut observer = cluster().session();
    let pid = waiter_pid(&mut observer, "w3");
    // While it waits it holds no key lock: no advisory, tuple or transaction-id lock.
    let held: i64 = observer
        .query_one(
            "SELECT count(*) FROM pg_locks WHERE pid = $1 AND locktype IN ('advisory', 'tuple', 'transactionid')",
            &[&pid],
        )
        .expect("pg_locks")
        .get(0);
    assert_eq!(held, 0, "the waiting claim holds key locks");
    // So the holder finishes without waiting for the waiter.
    let started = Instant::now();
    a.execute("SELECT idem_complete('w3', 'k', '{}')", &[])
        .expect("complete");
    assert!(started.elapsed() < Duration::from_millis(500));
    let (outcome, _) = waiter.join().expect("waiter");
    assert_eq!(outcome, "replay_success");
}

#[test]
fn a_holder_still_working_when_wait_runs_out_is_processing_active() {
    let mut a = cluster().session();
    let mut ta = a.transaction().expect("begin");
    assert_eq!(claim(&mut ta, "w4", "k", HASH), "new_claim");
    let (outcome, elapsed) = claim_waiting("w4", "k", "700ms").join().expect("waiter");
    assert_eq!(outcome, "processing_active");
    assert!(
        elapsed >= Duration::from_millis(690) && elapsed < Duration::from_millis(1500),
        "{elapsed:?}"
    );
    ta.rollback().expect("rollback");
}

#[test]
fn statement_timeout_and_cancel_end_the_wait() {
    let mut a = cluster().session();
    let mut ta = a.transaction().expect("begin");
    assert_eq!(claim(&mut ta, "w5", "k", HASH), "new_claim");

    let mut b = cluster().session();
    b.batch_execute("SET statement_timeout = '300ms'")
        .expect("set");
    let started = Instant::now();
    let err = b
        .query_one(
            "SELECT outcome FROM idem_claim('w5', 'k', 'h', wait => '30s')",
            &[],
        )
        .expect_err("statement_timeout");
    assert_eq!(sqlstate(&err), "57014");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    let mut c = cluster().session();
    c.batch_execute("SET application_name = 'wait-w5'")
        .expect("name the session");
    let cancel = c.cancel_token();
    let canceller = thread::spawn(move || {
        let mut observer = cluster().session();
        waiter_pid(&mut observer, "w5");
        cancel.cancel_query(postgres::NoTls).expect("cancel");
    });
    let started = Instant::now();
    let err = c
        .query_one(
            "SELECT outcome FROM idem_claim('w5', 'k', 'h', wait => '30s')",
            &[],
        )
        .expect_err("cancelled");
    canceller.join().expect("canceller");
    assert_eq!(sqlstate(&err), "57014");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    ta.rollback().expect("rollback");
}

#[test]
fn wait_null_or_zero_never_blocks_and_negative_is_rejected() {
    let mut a = cluster().session();
    let mut ta = a.transaction().expect("begin");
    assert_eq!(claim(&mut ta, "w6", "k", HASH), "new_claim");
    let mut b = cluster().session();
    for wait in [None, Some("0")] {
        let started = Instant::now();
        let row = b
            .query_one(
                "SELECT outcome::text FROM idem_claim('w6', 'k', 'h', wait => $1::text::interval)",
                &[&wait],
            )
            .expect("claim");
        assert_eq!(row.get::<_, String>(0), "processing_active");
        assert!(started.elapsed() < Duration::from_millis(300));
    }
    let err = b
        .query_one(
            "SELECT outcome FROM idem_claim('w6', 'k', 'h', wait => '-1 second')",
            &[],
        )
        .expect_err("negative wait");
    assert_eq!(sqlstate(&err), "22023");
    ta.rollback().expect("rollback");
}

/// An error inside the wait's probe (a fail point inside the claim's direct insert, which the
/// probe reaches; catalog/sql_fuzz/ first found it with a retention past the timestamp range, which
/// is now refused before the probe) rolls the probe's subtransaction back: the session goes on
/// working. Before the fix it stayed in an aborted subtransaction and refused every later
/// statement with 25P02.
#[test]
fn an_error_inside_the_probe_leaves_the_session_usable() {
    let mut a = cluster().session();
    for key in ["probe-err-1", "probe-err-2"] {
        a.batch_execute("SET idempotency_test.fail_at = 'claim.direct:22008'")
            .expect("fail point");
        let err = a
            .query_one(
                "SELECT outcome::text FROM idem_claim('probe-err', $1, 'h', wait => '15 ms')",
                &[&key],
            )
            .expect_err("the fail point");
        a.batch_execute("RESET idempotency_test.fail_at")
            .expect("reset");
        assert_eq!(sqlstate(&err), "22008", "{key}");
        let one: i32 = a
            .query_one("SELECT 1", &[])
            .unwrap_or_else(|e| panic!("the session after {key}: {e:?}"))
            .get(0);
        assert_eq!(one, 1);
        // Nothing of the failed claim was written.
        let rows: i64 = a
            .query_one(
                "SELECT count(*) FROM idempotency.requests WHERE scope = 'probe-err'",
                &[],
            )
            .expect("count")
            .get(0);
        assert_eq!(rows, 0);
    }
    // In an explicit transaction: the error aborts it, ROLLBACK ends it, the session goes on.
    a.batch_execute("BEGIN; SET LOCAL idempotency_test.fail_at = 'claim.direct:22008'")
        .expect("begin");
    let err = a
        .query_one(
            "SELECT outcome::text FROM idem_claim('probe-err', 'k3', 'h', wait => '15 ms')",
            &[],
        )
        .expect_err("the fail point");
    assert_eq!(sqlstate(&err), "22008");
    a.batch_execute("ROLLBACK").expect("rollback");
    assert_eq!(claim(&mut a, "probe-err", "k3", HASH), "new_claim");
    // Intervals past the bound are refused before any probe, writing nothing.
    let err = a
        .query_one(
            "SELECT outcome::text FROM idem_claim('probe-err', 'k4', 'h', \
             retention => '178000000 years', wait => '15 ms')",
            &[],
        )
        .expect_err("over 100 years");
    assert_eq!(sqlstate(&err), "22023");
}
