//! The worker in the generations layout (docs/retention.md): it rotates instead of deleting.
//! Expired records stay until their generation is the oldest and is emptied whole; a
//! processing record is moved, never dropped.

use super::rounds::{NAPTIME, create_database, expired_finished_records, shared};
use crate::common;

use std::time::Duration;

use common::{answer, count, wait_for};

#[test]
fn in_the_generations_layout_the_worker_rotates_instead_of_deleting() {
    let _g = shared();
    let mut db = create_database("w_generations", true);
    assert_eq!(
        answer(&mut db, "SELECT idem_set_layout('generations')"),
        "generations"
    );
    db.batch_execute("UPDATE idempotency.layout SET generation_window = '2 s'")
        .expect("a short window");
    expired_finished_records(&mut db, "w_gen");
    db.batch_execute(
        "SELECT idem_claim('w_gen', 'busy', 'h', lease => '1 hour', retention => '1 ms')",
    )
    .expect("a processing record");
    // Rounds go by, and no DELETE takes the expired records: they are in the current generation.
    std::thread::sleep(5 * NAPTIME);
    assert_eq!(
        count(
            &mut db,
            "SELECT count(*) FROM idempotency.requests WHERE scope = 'w_gen'"
        ),
        4
    );
    // Generations 2 and 3 take their turns; then generation 1 is the oldest: emptied whole,
    // the processing record moved.
    wait_for("generation 1 emptied", Duration::from_secs(30), || {
        count(&mut db, "SELECT count(*) FROM idempotency.requests_g1") == 0
    });
    assert_eq!(
        answer(
            &mut db,
            "SELECT string_agg(key || ' ' || status || ' ' || attempt, ',') FROM idempotency.requests \
              WHERE scope = 'w_gen'"
        ),
        "busy processing 1"
    );
}
