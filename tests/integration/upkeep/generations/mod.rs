//! The generations layout (issue 24, sql/layout.sql, docs/retention.md), in both editions: the
//! rotation keeping processing records and per-call retention while the rest goes with a
//! TRUNCATE (its WAL against idem_purge's, from EXPLAIN's WAL counters), and the switch of the
//! current generation waiting for claims in flight, with the claims behind it inserting into
//! the new one. The switch of the layout both ways, its refusals, grants and pg_dump:
//! switch.rs; the generations' grants and the upkeep through the table: grants.rs; under load:
//! load.rs.

use crate::common;

use std::time::Duration;

use common::{Client, answer, count};

mod grants;
mod load;
mod survivors;
mod switch;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Edition {
    Native,
    Portable,
}

impl Edition {
    pub(crate) fn cluster(self) -> &'static common::Cluster {
        match self {
            Edition::Native => common::cluster(),
            Edition::Portable => common::bare_cluster(),
        }
    }

    /// The role that owns the tables (the native extension's: the superuser who created it).
    pub(crate) fn owner(self, db: &str) -> String {
        match self {
            Edition::Native => "postgres".into(),
            Edition::Portable => format!("{db}_owner"),
        }
    }

    /// A new database `db` with the edition, in the flat layout: a session of the owner.
    pub(crate) fn install(self, db: &str) -> Client {
        match self {
            Edition::Native => self.cluster().database(db),
            Edition::Portable => crate::portable::install(db),
        }
    }

    /// Another session of the tables' owner in `db`.
    pub(crate) fn session(self, db: &str) -> Client {
        self.cluster().connect_as(db, &self.owner(db))
    }

    /// A new database `db` switched to generations.
    fn generations(self, db: &str) -> Client {
        let mut c = self.install(db);
        assert_eq!(
            answer(&mut c, "SELECT idem_set_layout('generations')"),
            "generations"
        );
        c
    }
}

/// Each test once per edition, on databases named after its short name (identifiers are cut
/// at 63 bytes, and roles are named after the database).
macro_rules! both_editions {
    ($($test:ident => $short:literal),* $(,)?) => {
        mod native {
            $(#[test]
            fn $test() {
                super::$test(super::Edition::Native, concat!("gn_", $short));
            })*
        }
        mod portable {
            $(#[test]
            fn $test() {
                super::$test(super::Edition::Portable, concat!("gp_", $short));
            })*
        }
    };
}
pub(crate) use both_editions;

both_editions!(
    rotation_keeps_survivors_and_truncates_the_rest => "rotate",
    a_switch_waits_for_claims_in_flight_and_claims_behind_it_insert_into_the_new_generation => "switch",
    a_finish_that_waited_for_a_move_follows_the_record => "follow",
);

/// Rotation steps until the oldest generation became the current one; the steps, but for
/// `busy` ones (the worker or autovacuum held a lock for longer than the step's 100 ms).
fn switch(db: &mut Client) -> Vec<String> {
    let mut steps = Vec::new();
    for _ in 0..100 {
        let step = answer(db, "SELECT idem_rotate(force => true)");
        if step != "busy" {
            steps.push(step.clone());
        }
        if step == "switched" {
            return steps;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no switch: {steps:?}");
}

fn current(db: &mut Client) -> i64 {
    count(
        db,
        "SELECT current_generation::int8 FROM idempotency.layout",
    )
}

/// Every record of `scope` as key:table, the table without its schema.
fn where_are(db: &mut Client, scope: &str) -> String {
    answer(
        db,
        &format!(
            "SELECT string_agg(key || ':' || c.relname, ',' ORDER BY key) \
               FROM idempotency.requests AS r JOIN pg_class AS c ON c.oid = r.tableoid \
              WHERE scope = '{scope}'"
        ),
    )
}

/// Wait until `n` sessions of this database whose query is LIKE `query` wait for a lock.
fn wait_for_locks(db: &mut Client, what: &str, query: &str, n: i64) {
    common::wait_for(what, Duration::from_secs(10), || {
        count(
            db,
            &format!(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Lock' AND query LIKE '{query}'"
            ),
        ) == n
    });
}

/// WAL bytes the statement wrote, from EXPLAIN (ANALYZE, WAL): its own, not the cluster's
/// (the top node's "WAL: ... bytes=N" line; none when it wrote nothing).
fn wal_bytes(db: &mut Client, sql: &str) -> i64 {
    let lines: Vec<String> = db
        .query(
            &format!("EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF) {sql}"),
            &[],
        )
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .iter()
        .map(|r| r.get(0))
        .collect();
    lines
        .iter()
        .find_map(|l| l.trim().strip_prefix("WAL:"))
        .and_then(|w| w.split_whitespace().find_map(|f| f.strip_prefix("bytes=")))
        .map_or(0, |b| b.parse().expect("bytes"))
}

/// `n` expired succeeded records of scope 'bulk' written straight into `table` (the claims
/// that would make them are not what is measured).
fn expired_records(db: &mut Client, table: &str, n: i64) {
    db.batch_execute(&format!(
        "INSERT INTO {table} (scope, key, request_hash, status, attempt, response, claimed_at, lease, \
                              retention, created_at, updated_at, expires_at) \
         SELECT 'bulk', i::text, 'h', 'succeeded', 1, '{{\"ok\": true}}', now() - interval '2 days', \
                '5 minutes', '1 day', now() - interval '2 days', now() - interval '2 days', now() - interval '1 day' \
           FROM generate_series(1, {n}) AS i"
    ))
    .expect("expired records");
}

fn rotation_keeps_survivors_and_truncates_the_rest(ed: Edition, name: &str) {
    const EXPIRED: i64 = 20000;
    let mut db = ed.generations(name);
    db.batch_execute(
        "SELECT idem_claim('s', 'busy', 'h', lease => '1 hour', retention => '1 ms'); \
         SELECT idem_claim('s', 'kept', 'h', retention => '1 hour'); SELECT idem_complete('s', 'kept', '{}')",
    )
    .expect("records in generation 1");
    expired_records(&mut db, "idempotency.requests_g1", EXPIRED);
    assert_eq!(
        count(&mut db, "SELECT count(*) FROM idempotency.requests_g1"),
        EXPIRED + 2
    );

    // Generations 2 and 3 become current in turn; then generation 1 is the oldest.
    switch(&mut db);
    switch(&mut db);
    assert_eq!(current(&mut db), 3);
    // A survivor whose row someone holds stays where it is, and so does its generation.
    let mut holder = ed.session(name);
    holder
        .batch_execute("BEGIN; SELECT FROM idempotency.requests WHERE key = 'busy' FOR UPDATE")
        .expect("the row's lock");
    assert_eq!(
        answer(&mut db, "SELECT idem_rotate(force => true)"),
        "moved 1"
    );
    assert_eq!(answer(&mut db, "SELECT idem_rotate(force => true)"), "busy");
    assert_eq!(current(&mut db), 3);
    holder.batch_execute("COMMIT").expect("commit");
    // EXPLAIN hides the function's answer: the layout says when it switched.
    let mut wal = 0;
    for round in 0.. {
        wal += wal_bytes(&mut db, "SELECT idem_rotate(force => true)");
        if current(&mut db) == 1 {
            break;
        }
        assert!(round < 50, "no switch to generation 1");
    }
    assert_eq!(
        where_are(&mut db, "s"),
        "busy:requests_g3,kept:requests_g3",
        "the survivors moved to the current generation"
    );
    assert_eq!(
        count(
            &mut db,
            "SELECT count(*) FROM idempotency.requests WHERE scope = 'bulk'"
        ),
        0
    );
    let per_record = wal as f64 / EXPIRED as f64;
    eprintln!(
        "{ed:?} rotation: {wal} WAL bytes for {EXPIRED} expired records ({per_record:.2} per record)"
    );
    assert!(
        per_record < 5.0,
        "{per_record} WAL bytes per expired record"
    );

    // The processing record is the same attempt, and finishes; the other replays; a key of an
    // emptied generation is new again, in the current generation.
    assert_eq!(
        answer(
            &mut db,
            "SELECT idem_complete('s', 'busy', '{}', attempt => 1)::text"
        ),
        ""
    );
    assert_eq!(common::claim(&mut db, "s", "kept", "h"), "replay_success");
    assert_eq!(common::claim(&mut db, "bulk", "1", "h"), "new_claim");
    assert_eq!(where_are(&mut db, "bulk"), "1:requests_g1");

    // The same expired records purged by batched DELETE on the flat layout, for comparison.
    let flat_name = format!("{name}_flat");
    let mut flat = ed.install(&flat_name);
    expired_records(&mut flat, "idempotency.requests", EXPIRED);
    let purge = wal_bytes(&mut flat, "SELECT idem_purge(100000)");
    assert_eq!(
        count(&mut flat, "SELECT count(*) FROM idempotency.requests"),
        0
    );
    let purge_per_record = purge as f64 / EXPIRED as f64;
    eprintln!(
        "{ed:?} idem_purge: {purge} WAL bytes ({purge_per_record:.1} per record, before its VACUUM)"
    );
    assert!(
        purge_per_record > 20.0 * per_record.max(1.0),
        "purge {purge_per_record} vs rotation {per_record}"
    );
}

fn a_switch_waits_for_claims_in_flight_and_claims_behind_it_insert_into_the_new_generation(
    ed: Edition,
    name: &str,
) {
    let mut db = ed.generations(name);
    // A claim past its look holds a lock on every generation: the switch cannot come.
    let mut open = ed.session(name);
    open.batch_execute("BEGIN; SELECT idem_claim('s', 'open', 'h')")
        .expect("claim");
    assert_eq!(answer(&mut db, "SELECT idem_rotate(force => true)"), "busy");
    open.batch_execute("COMMIT").expect("commit");

    // A switch in progress (its transaction open): a claim of a new key waits behind its lock,
    // then reads the layout under the key's lock and inserts into the new current generation.
    let mut rotator = ed.session(name);
    rotator.batch_execute("BEGIN").expect("begin");
    assert_eq!(
        answer(&mut rotator, "SELECT idem_rotate(force => true)"),
        "switched"
    );
    let mut claimer = ed.session(name);
    let claim = std::thread::spawn(move || common::claim(&mut claimer, "s", "behind", "h"));
    wait_for_locks(&mut db, "the claim waits for the switch", "%idem_claim%", 1);
    rotator.batch_execute("COMMIT").expect("commit");
    assert_eq!(claim.join().expect("claim"), "new_claim");
    assert_eq!(current(&mut db), 2);
    assert_eq!(
        where_are(&mut db, "s"),
        "behind:requests_g2,open:requests_g1"
    );

    // A repeatable read snapshot taken before a switch cannot see where claims under the new
    // layout insert: a new key is a serialization failure (retry); a replay needs no layout.
    let mut rr = ed.session(name);
    rr.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1")
        .expect("rr");
    switch(&mut db);
    assert_eq!(
        answer(
            &mut rr,
            "SELECT outcome::text FROM idem_claim('s', 'open', 'h')"
        ),
        "processing_active"
    );
    assert_eq!(
        answer(
            &mut rr,
            "SELECT outcome::text FROM idem_claim('s', 'rr', 'h')"
        ),
        "ERROR 40001"
    );
    rr.batch_execute("ROLLBACK").expect("rollback");
    rr.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .expect("rr");
    assert_eq!(
        answer(
            &mut rr,
            "SELECT outcome::text FROM idem_claim('s', 'rr', 'h')"
        ),
        "new_claim"
    );
    rr.batch_execute("COMMIT").expect("commit");
    assert_eq!(
        where_are(&mut db, "s"),
        "behind:requests_g2,open:requests_g1,rr:requests_g3"
    );
    // lock_wait is the rotation's own: the caller's lock_timeout is as it was.
    db.batch_execute("BEGIN; SET LOCAL lock_timeout = '7s'")
        .expect("begin");
    assert_eq!(
        answer(&mut db, "SELECT idem_rotate(force => true)"),
        "moved 1"
    );
    assert_eq!(
        answer(&mut db, "SELECT idem_rotate(force => true)"),
        "switched"
    );
    assert_eq!(answer(&mut db, "SHOW lock_timeout"), "7s");
    db.batch_execute("COMMIT").expect("commit");
}

/// The portable edition's upkeep round (pg_cron's job) rotates in this layout, as the native
/// worker does (tests/clusters/worker/generations.rs): no DELETE takes the expired records of
/// the current generation, and the oldest is emptied whole once its window has passed.
#[test]
fn the_portable_upkeep_rotates_instead_of_deleting() {
    let name = "gp_upkeep";
    let mut db = Edition::Portable.generations(name);
    db.batch_execute("UPDATE idempotency.layout SET generation_window = '1 ms'")
        .expect("window");
    // The table's own rows (from before the switch) go first, then the oldest generation.
    expired_records(&mut db, "idempotency.requests", 10);
    db.batch_execute("UPDATE idempotency.requests SET key = 'g2-' || key")
        .expect("other keys");
    expired_records(&mut db, "idempotency.requests_g2", 20);
    db.batch_execute(
        "SELECT idem_claim('s', 'live', 'h', retention => '1 ms'); SELECT idem_complete('s', 'live', '{}')",
    )
    .expect("an expired record in generation 1, which a DELETE would take");
    assert_eq!(
        answer(&mut db, "SELECT purged::text FROM idem_upkeep()"),
        "0"
    );
    assert_eq!(
        count(&mut db, "SELECT count(*) FROM ONLY idempotency.requests"),
        0
    );
    assert_eq!(
        count(&mut db, "SELECT count(*) FROM idempotency.requests_g2"),
        20
    );
    assert_eq!(
        answer(&mut db, "SELECT purged::text FROM idem_upkeep()"),
        "0"
    );
    assert_eq!(current(&mut db), 2);
    assert_eq!(
        count(&mut db, "SELECT count(*) FROM idempotency.requests_g2"),
        0
    );
    assert_eq!(
        where_are(&mut db, "s"),
        "live:requests_g1",
        "no DELETE took it"
    );
}

/// A survivor moves as a DELETE and an INSERT under its row lock: a finish that waited for that
/// lock finds no row, and goes on to the record where it went (no false P4010 or P4013).
fn a_finish_that_waited_for_a_move_follows_the_record(ed: Edition, name: &str) {
    let mut db = ed.generations(name);
    db.batch_execute(
        "SELECT idem_claim('s', 'p', 'h', lease => '1 hour'); \
         SELECT idem_claim('s', 'q', 'h', lease => '1 hour'); \
         SELECT idem_claim('s', 'r', 'h', lease => '1 hour')",
    )
    .expect("processing records in generation 1");
    switch(&mut db);
    switch(&mut db);
    // The rotation moves both, its transaction open: their rows stay locked until it commits.
    let mut rotator = ed.session(name);
    rotator.batch_execute("BEGIN").expect("begin");
    assert_eq!(
        answer(&mut rotator, "SELECT idem_rotate(force => true)"),
        "moved 3"
    );
    let mut completer = ed.session(name);
    let complete = std::thread::spawn(move || {
        answer(
            &mut completer,
            "SELECT idem_complete('s', 'p', '{}', attempt => 1)::text",
        )
    });
    let mut checkpointer = ed.session(name);
    let checkpoint = std::thread::spawn(move || {
        answer(
            &mut checkpointer,
            "SELECT (idem_checkpoint('s', 'q', 'half') IS NOT NULL)::text",
        )
    });
    let mut forgetter = ed.session(name);
    let forget =
        std::thread::spawn(move || answer(&mut forgetter, "SELECT idem_forget('s', 'r')::text"));
    wait_for_locks(&mut db, "the finishes wait for the move", "%", 3);
    rotator.batch_execute("COMMIT").expect("commit");
    assert_eq!(complete.join().expect("complete"), "");
    assert_eq!(checkpoint.join().expect("checkpoint"), "true");
    assert_eq!(forget.join().expect("forget"), "true");
    assert_eq!(where_are(&mut db, "s"), "p:requests_g3,q:requests_g3");
    assert_eq!(
        answer(
            &mut db,
            "SELECT string_agg(key || ' ' || status || ' ' || coalesce(recovery_point, '-'), ',' ORDER BY key) \
               FROM idempotency.requests"
        ),
        "p succeeded -,q processing half"
    );
}
