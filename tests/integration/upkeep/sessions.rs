//! idem_purge / idem_reclaim against claims in real concurrent sessions: neither waits for
//! the other. (The background worker is off in this cluster; the calls are made by hand.)
//! idem_purge / idem_reclaim act on every scope, so these tests run one at a time.

use crate::common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{Client, GenericClient, claim_attempt, serial};

crate::own_database!();

const NO_WAIT: Duration = Duration::from_millis(500);

static SERIAL: Mutex<()> = Mutex::new(());

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let value = f();
    let took = started.elapsed();
    assert!(took < NO_WAIT, "{what} waited {took:?}");
    value
}

/// (outcome, attempt), attempt 0 while another session's claim is uncommitted.
fn claim(client: &mut impl GenericClient, scope: &str, key: &str) -> (String, i32) {
    let (outcome, attempt) = claim_attempt(client, scope, key, "h");
    (outcome, attempt.unwrap_or(0))
}

fn state(client: &mut Client, scope: &str, key: &str) -> Option<(String, i32)> {
    client
        .query_opt(
            "SELECT status::text, attempt FROM idempotency.requests WHERE scope = $1 AND key = $2",
            &[&scope, &key],
        )
        .expect("state")
        .map(|row| (row.get(0), row.get(1)))
}

/// Finished records of `scope` whose retention has ended.
fn expired(client: &mut Client, scope: &str, keys: &[&str]) {
    for key in keys {
        client
            .execute(
                "SELECT idem_complete($1, $2, '{}') FROM idem_claim($1, $2, 'h', retention => '1 millisecond')",
                &[&scope, key],
            )
            .expect("expired record");
    }
    std::thread::sleep(Duration::from_millis(5));
}

/// Processing records of `scope` whose lease has ended.
fn stale(client: &mut Client, scope: &str, keys: &[&str]) {
    for key in keys {
        client
            .execute(
                "SELECT idem_claim($1, $2, 'h', lease => '1 millisecond')",
                &[&scope, key],
            )
            .expect("stale record");
    }
    std::thread::sleep(Duration::from_millis(5));
}

#[test]
fn a_claim_does_not_wait_for_a_purge_batch() {
    let _serial = serial(&SERIAL);
    let mut a = cluster().session();
    let mut b = cluster().session();
    expired(&mut a, "ms_purge", &["k1", "k2"]);
    let mut purge = a.transaction().expect("begin");
    let purged: i64 = purge
        .query_one("SELECT idem_purge(100000)", &[])
        .expect("purge")
        .get(0);
    assert!(purged >= 2, "{purged}");
    // The purge holds k1 and k2 until it commits: a claim of one is told to come back.
    let (outcome, _) = timed("claim of a key being purged", || {
        claim(&mut b, "ms_purge", "k1")
    });
    assert_eq!(outcome, "processing_active");
    assert_eq!(
        timed("claim of a new key", || claim(&mut b, "ms_purge", "new")),
        ("new_claim".to_string(), 1)
    );
    purge.commit().expect("commit");
    assert_eq!(state(&mut b, "ms_purge", "k2"), None);
    assert_eq!(
        claim(&mut b, "ms_purge", "k1"),
        ("new_claim".to_string(), 1)
    );
}

#[test]
fn a_purge_does_not_wait_for_a_claim_and_leaves_its_row() {
    let _serial = serial(&SERIAL);
    let mut a = cluster().session();
    let mut b = cluster().session();
    expired(&mut a, "ms_skip", &["taken", "free"]);
    // A claim takes over the expired record `taken` and has not committed yet.
    let mut tx = a.transaction().expect("begin");
    assert_eq!(
        claim(&mut tx, "ms_skip", "taken"),
        ("new_claim".to_string(), 1)
    );
    timed("purge beside a claim", || {
        b.execute("SELECT idem_purge(100000)", &[]).expect("purge")
    });
    assert_eq!(state(&mut b, "ms_skip", "free"), None);
    tx.commit().expect("commit");
    assert_eq!(
        state(&mut b, "ms_skip", "taken"),
        Some(("processing".to_string(), 1))
    );
}

#[test]
fn reclaim_and_claim_do_not_wait_for_each_other() {
    let _serial = serial(&SERIAL);
    let mut a = cluster().session();
    let mut b = cluster().session();
    stale(&mut a, "ms_reclaim", &["taken", "left"]);

    // A claim is taking `taken` over (uncommitted): the reclaim skips it and does not wait.
    let mut tx = a.transaction().expect("begin");
    assert_eq!(
        claim(&mut tx, "ms_reclaim", "taken"),
        ("processing_stale".to_string(), 2)
    );
    timed("reclaim beside a claim", || {
        b.execute("SELECT idem_reclaim(100000)", &[])
            .expect("reclaim")
    });
    assert_eq!(
        state(&mut b, "ms_reclaim", "left"),
        Some(("failed_retryable".to_string(), 1))
    );
    tx.commit().expect("commit");
    assert_eq!(
        state(&mut b, "ms_reclaim", "taken"),
        Some(("processing".to_string(), 2))
    );

    // A reclaim batch not committed yet: a claim of its row does not wait either.
    stale(&mut a, "ms_reclaim", &["late"]);
    let mut batch = a.transaction().expect("begin");
    batch
        .execute("SELECT idem_reclaim(100000)", &[])
        .expect("reclaim");
    let (outcome, _) = timed("claim of a key being reclaimed", || {
        claim(&mut b, "ms_reclaim", "late")
    });
    assert_eq!(outcome, "processing_active");
    batch.commit().expect("commit");
    assert_eq!(
        claim(&mut b, "ms_reclaim", "late"),
        ("retryable_failure".to_string(), 2)
    );
}
