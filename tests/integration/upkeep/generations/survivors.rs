//! What a rotation must keep, in both editions: a record a claim revives while the rotation
//! waits for the oldest generation's lock (the count under that lock finds it), and the
//! columns an owner added to the table (a move carries every column).

use std::time::Duration;

use crate::common::answer;

use super::{Edition, both_editions, switch, wait_for_locks, where_are};

both_editions!(
    a_record_revived_while_the_rotation_waits_for_its_lock_is_kept => "revived",
    columns_the_owner_added_move_with_their_records => "columns",
);

/// The survivor pass sees no survivor (the record's committed version has expired); a claim
/// taking the record over holds the generation's lock until it commits, so the rotation's lock
/// waits for it, and the count under the lock sees the processing record: no TRUNCATE.
fn a_record_revived_while_the_rotation_waits_for_its_lock_is_kept(ed: Edition, name: &str) {
    let mut db = ed.generations(name);
    db.batch_execute(
        "SELECT idem_claim('s', 'k', 'h', retention => '1 ms'); SELECT idem_complete('s', 'k', '{}')",
    )
    .expect("a record in generation 1");
    std::thread::sleep(Duration::from_millis(20));
    switch(&mut db);
    switch(&mut db);
    assert_eq!(where_are(&mut db, "s"), "k:requests_g1");

    let mut claimer = ed.session(name);
    claimer.batch_execute("BEGIN").expect("begin");
    assert_eq!(
        answer(
            &mut claimer,
            "SELECT outcome::text FROM idem_claim('s', 'k', 'h2', lease => '1 hour')"
        ),
        "new_claim"
    );
    let mut rotator = ed.session(name);
    let rotation = std::thread::spawn(move || {
        answer(
            &mut rotator,
            "SELECT idem_rotate(force => true, lock_wait => '30s')",
        )
    });
    wait_for_locks(
        &mut db,
        "the rotation waits for the generation's lock",
        "%idem_rotate%",
        1,
    );
    claimer.batch_execute("COMMIT").expect("commit");
    assert_eq!(rotation.join().expect("rotation"), "moved 0");
    assert_eq!(where_are(&mut db, "s"), "k:requests_g1");
    // The next rotation moves it, and it finishes where it went.
    assert_eq!(switch(&mut db), ["moved 1", "switched"]);
    assert_eq!(where_are(&mut db, "s"), "k:requests_g3");
    assert_eq!(
        answer(&mut db, "SELECT idem_complete('s', 'k', '{}')::text"),
        ""
    );
}

/// Columns the owner added keep their values when a rotation moves the record and when the
/// layout goes back to flat (a default would give a new one); a generated column is computed
/// again. An identity column is refused (0A000): each generation would have its own sequence.
fn columns_the_owner_added_move_with_their_records(ed: Edition, name: &str) {
    let mut db = ed.install(name);
    db.batch_execute(
        "ALTER TABLE idempotency.requests ADD COLUMN serial int8 GENERATED ALWAYS AS IDENTITY",
    )
    .expect("an identity column");
    assert_eq!(
        answer(&mut db, "SELECT idem_set_layout('generations')"),
        "ERROR 0A000"
    );
    db.batch_execute(
        "ALTER TABLE idempotency.requests DROP COLUMN serial; \
         ALTER TABLE idempotency.requests ADD COLUMN tenant_note text DEFAULT 'default'; \
         ALTER TABLE idempotency.requests ADD COLUMN key_length int4 GENERATED ALWAYS AS (length(key)) STORED; \
         SELECT idem_claim('s', 'first', 'h', lease => '1 hour')",
    )
    .expect("added columns");
    assert_eq!(
        answer(&mut db, "SELECT idem_set_layout('generations')"),
        "generations"
    );
    db.batch_execute(
        "SELECT idem_claim('s', 'noted', 'h', lease => '1 hour'); \
         UPDATE idempotency.requests SET tenant_note = 'kept' WHERE key = 'noted'",
    )
    .expect("a record with a note");
    let row = "SELECT string_agg(key || ' ' || tenant_note || ' ' || key_length, ',' ORDER BY key) \
               FROM idempotency.requests";
    assert_eq!(answer(&mut db, row), "first default 5,noted kept 5");
    // The table's own row moves first; then the generations turn until 1 is the oldest.
    assert_eq!(switch(&mut db), ["moved 1", "switched"]);
    switch(&mut db);
    assert_eq!(switch(&mut db), ["moved 2", "switched"]);
    assert_eq!(
        where_are(&mut db, "s"),
        "first:requests_g3,noted:requests_g3"
    );
    assert_eq!(answer(&mut db, row), "first default 5,noted kept 5");
    assert_eq!(answer(&mut db, "SELECT idem_set_layout('flat')"), "flat");
    assert_eq!(where_are(&mut db, "s"), "first:requests,noted:requests");
    assert_eq!(answer(&mut db, row), "first default 5,noted kept 5");
}
