//! Two real sessions on the portable edition: a claim never blocks, and `wait =>` polls.

use std::time::{Duration, Instant};

use super::{cluster, error, install, outcome};

#[test]
fn a_claim_never_blocks_and_wait_polls() {
    let c = cluster();
    let mut owner = install("portable_sessions");
    drop(owner.batch_execute("SELECT 1"));
    let mut a = c.connect_as("portable_sessions", "portable_sessions_owner");
    let mut b = c.connect_as("portable_sessions", "portable_sessions_owner");
    b.batch_execute("SET statement_timeout = '3s'")
        .expect("timeout");
    // A new key another transaction has not committed: processing_active at once.
    a.batch_execute("BEGIN; SELECT idem_claim('race', 'k1', 'h')")
        .expect("a claims");
    let started = Instant::now();
    assert_eq!(
        outcome(&mut b, "idem_claim('race', 'k1', 'h')"),
        ("processing_active".into(), None)
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "waited {:?}",
        started.elapsed()
    );
    a.batch_execute("COMMIT").expect("commit");
    // A takeover another transaction holds the row of: processing_active, no wait.
    a.batch_execute("SELECT idem_fail('race', 'k1', true)")
        .expect("fail");
    a.batch_execute("BEGIN; SELECT idem_claim('race', 'k1', 'h')")
        .expect("a takes over");
    let started = Instant::now();
    assert_eq!(
        outcome(&mut b, "idem_claim('race', 'k1', 'h')").0,
        "processing_active"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    // wait => polls until the holder commits its completion.
    let holder = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        a.batch_execute("SELECT idem_complete('race', 'k1', '{\"done\": true}'); COMMIT")
            .expect("complete");
    });
    let started = Instant::now();
    assert_eq!(
        outcome(&mut b, "idem_claim('race', 'k1', 'h', wait => '5 s')"),
        ("replay_success".into(), Some(2))
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(3),
        "waited {waited:?}"
    );
    holder.join().expect("holder");
    // A wait that runs out answers processing_active, and its probes left no lock behind.
    owner
        .batch_execute("SELECT idem_claim('race', 'k2', 'h', lease => '1 hour')")
        .expect("live lease");
    assert_eq!(
        outcome(&mut b, "idem_claim('race', 'k2', 'h', wait => '100 ms')").0,
        "processing_active"
    );
    assert_eq!(
        error(
            &mut b,
            "SELECT idem_claim('race', 'k2', 'h', wait => '-1 s')"
        ),
        "22023"
    );
}
