//! Races of the claim path made to happen every time, with the test-only injection point
//! `idempotency_test.pause_before_key_lock` (src/base/test_points.rs, `pg_test` builds only): a new
//! key's claim stops between its first read (no record) and its try-lock on the key, while
//! another session commits a claim of the same key. Without the re-read after the lock
//! (`Store::insert`, in src/direct/store.rs and src/spi/record_sql.rs) the paused claim inserts a
//! second record: 23505.

use crate::permutation::Spec;

crate::own_database!();

/// Advisory lock keys the paused claims wait on, one per test (tests run in parallel).
const PAUSE_COMMITTED: i32 = 740_101;
const PAUSE_COMPLETED: i32 = 740_102;
const PAUSE_UNCOMMITTED: i32 = 740_103;

/// The steps on `scope`: session `a` claims with the injection point armed on `pause` (it waits
/// there while `ctl` holds that advisory lock); session `b` claims (and completes) the same key.
fn spec(pause: i32, scope: &str) -> Spec {
    let claim = format!("SELECT outcome, attempt, response FROM idem_claim('{scope}', 'k', 'h')");
    Spec::new(&[
        ("ctl hold", &format!("SELECT pg_advisory_lock({pause})")),
        (
            "ctl release",
            &format!("SELECT pg_advisory_unlock({pause})"),
        ),
        (
            "ctl records",
            &format!("SELECT count(*) FROM idempotency.requests WHERE scope = '{scope}'"),
        ),
        (
            "a arm",
            &format!("SET idempotency_test.pause_before_key_lock = {pause}"),
        ),
        ("a claim", &claim),
        ("b begin", "BEGIN"),
        ("b claim", &claim),
        (
            "b complete",
            &format!("SELECT idem_complete('{scope}', 'k', '{{\"by\": \"b\"}}')"),
        ),
        ("b commit", "COMMIT"),
    ])
}

/// Mutation `claim-no-reread` (the sixth survivor of the first campaign).
#[test]
fn a_claim_committed_before_the_key_lock_is_seen_as_active() {
    spec(PAUSE_COMMITTED, "race_committed").permutation(
        || cluster().session(),
        &[
            ("ctl hold", ""),
            ("a arm", ""),
            // A's first read finds nothing; it stops before its key lock.
            ("a claim", "waiting"),
            // B's claim commits now.
            ("b claim", "new_claim 1 NULL"),
            ("ctl release", "t"),
            ("a", "processing_active 1 NULL"),
            ("ctl records", "1"),
        ],
    );
}

#[test]
fn a_claim_completed_before_the_key_lock_is_replayed() {
    spec(PAUSE_COMPLETED, "race_completed").permutation(
        || cluster().session(),
        &[
            ("ctl hold", ""),
            ("a arm", ""),
            ("a claim", "waiting"),
            ("b begin", ""),
            ("b claim", "new_claim 1 NULL"),
            ("b complete", ""),
            ("b commit", ""),
            ("ctl release", "t"),
            ("a", r#"replay_success 1 {"by": "b"}"#),
            ("ctl records", "1"),
        ],
    );
}

/// The other order: B's claim is not committed when A resumes, so A's try-lock fails.
#[test]
fn a_claim_uncommitted_at_the_key_lock_is_active_without_waiting() {
    spec(PAUSE_UNCOMMITTED, "race_uncommitted").permutation(
        || cluster().session(),
        &[
            ("ctl hold", ""),
            ("a arm", ""),
            ("a claim", "waiting"),
            ("b begin", ""),
            ("b claim", "new_claim 1 NULL"),
            ("ctl release", "t"),
            // No attempt shown: B's claim is uncommitted; and A does not wait for it.
            ("a", "processing_active NULL NULL"),
            ("b commit", ""),
            ("ctl records", "1"),
        ],
    );
}
