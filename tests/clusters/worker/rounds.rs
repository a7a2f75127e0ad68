//! The background worker against a cluster that preloads the library, with a short naptime.
//!
//! Tests that change the server's configuration, stop the launcher or need exact metric
//! deltas hold the write side of [`SERIAL`]; the others share its read side and run in
//! parallel, each in its own scope or database.

use crate::common;

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use common::{Client, claim, count, metrics, records, sqlstate, wait_for, worker_cluster};

pub(super) const NAPTIME: Duration = Duration::from_millis(200);

static SERIAL: RwLock<()> = RwLock::new(());

pub(super) fn shared() -> RwLockReadGuard<'static, ()> {
    SERIAL.read().unwrap_or_else(|e| e.into_inner())
}

fn exclusive() -> RwLockWriteGuard<'static, ()> {
    SERIAL.write().unwrap_or_else(|e| e.into_inner())
}

fn reload(client: &mut Client, setting: &str, value: &str) {
    // One statement per call: ALTER SYSTEM cannot run in the implicit transaction of a batch.
    client
        .batch_execute(&format!("ALTER SYSTEM SET {setting} = '{value}'"))
        .expect("alter system");
    client
        .batch_execute("SELECT pg_reload_conf()")
        .expect("reload");
}

/// Wait until this session sees `setting` = `shown`, i.e. the postmaster has reloaded (it
/// does before it signals the backends), so new maintenance workers see it too.
fn wait_for_setting(client: &mut Client, setting: &str, shown: &str) {
    wait_for(
        &format!("{setting} = {shown}"),
        Duration::from_secs(10),
        || {
            let value: String = client
                .query_one(&format!("SHOW {setting}"), &[])
                .expect("show")
                .get(0);
            value == shown
        },
    );
}

/// A fresh database, with the extension or without.
pub(super) fn create_database(name: &str, with_extension: bool) -> Client {
    if with_extension {
        worker_cluster().database(name)
    } else {
        worker_cluster().empty_database(name)
    }
}

fn drop_database(name: &str) {
    worker_cluster().drop_database(name);
}

/// Records of `scope` whose retention has ended, one per finished state.
pub(super) fn expired_finished_records(client: &mut Client, scope: &str) {
    client
        .batch_execute(&format!(
            "SELECT idem_claim('{scope}', 'ok', 'h', retention => '1 millisecond');
             SELECT idem_complete('{scope}', 'ok', '{{}}');
             SELECT idem_claim('{scope}', 'final', 'h', retention => '1 millisecond');
             SELECT idem_fail('{scope}', 'final', false, 'no');
             SELECT idem_claim('{scope}', 'retry', 'h', retention => '1 millisecond');
             SELECT idem_fail('{scope}', 'retry', true, 'later');"
        ))
        .expect("expired records");
}

#[test]
fn expired_lease_is_reclaimed_within_three_naptimes() {
    let _g = shared();
    let mut db = worker_cluster().session();
    db.batch_execute(
        "SELECT idem_claim('w_reclaim', 'k', 'h', lease => '50 milliseconds', claimed_by => 'w1')",
    )
    .expect("claim");
    wait_for("the lease reclaimed", Duration::from_secs(5), || {
        count(
            &mut db,
            "SELECT count(*) FROM idempotency.requests WHERE scope = 'w_reclaim' AND status = 'failed_retryable'",
        ) == 1
    });
    // The lease ended at claimed_at + lease; the reclaim happened at updated_at.
    let row = db
        .query_one(
            "SELECT failure_code, failure_message, \
                    extract(epoch FROM updated_at - (claimed_at + lease))::float8 \
             FROM idempotency.requests WHERE scope = 'w_reclaim'",
            &[],
        )
        .expect("record");
    let (code, message, late): (String, String, f64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(code, "lease_expired");
    assert!(
        message.starts_with("the lease of attempt 1 (claimed by w1) ended at "),
        "{message}"
    );
    assert!(
        late > 0.0 && late < 3.0 * NAPTIME.as_secs_f64(),
        "reclaimed {late}s after the lease ended"
    );
    assert_eq!(claim(&mut db, "w_reclaim", "k", "h"), "retryable_failure");
}

#[test]
fn expired_finished_records_are_purged_and_the_rest_kept() {
    let _g = shared();
    let mut db = worker_cluster().session();
    expired_finished_records(&mut db, "w_purge");
    db.batch_execute(
        "SELECT idem_claim('w_purge', 'fresh', 'h', retention => '1 hour');
         SELECT idem_complete('w_purge', 'fresh', '{}');
         -- processing long past its retention, its lease still live: never purged
         SELECT idem_claim('w_purge', 'busy', 'h', lease => '1 hour', retention => '1 millisecond');",
    )
    .expect("records");
    wait_for("expired records purged", Duration::from_secs(5), || {
        records(&mut db, "w_purge") == 2
    });
    std::thread::sleep(3 * NAPTIME);
    let left: String = db
        .query_one(
            "SELECT string_agg(key || '=' || status, ' ' ORDER BY key) \
             FROM idempotency.requests WHERE scope = 'w_purge'",
            &[],
        )
        .expect("left")
        .get(0);
    assert_eq!(left, "busy=processing fresh=succeeded");
}

#[test]
fn the_round_also_purges_expired_inbox_rows_and_old_published_messages() {
    let _g = shared();
    let mut db = worker_cluster().session();
    db.batch_execute(
        "SELECT idem_inbox_accept('w_inbox', 'old', 'h', retention => '1 millisecond');
         SELECT idem_inbox_accept('w_inbox', 'new', 'h', retention => '1 hour');
         SELECT idem_outbox_ack(ARRAY[idem_outbox_put('w_topic', '1'), idem_outbox_put('w_topic', '2')]);
         SELECT idem_outbox_put('w_topic', '3');
         -- one published message past idempotency.outbox_retention (7 days by default)
         UPDATE idempotency.outbox SET created_at = now() - interval '9 days',
                published_at = now() - interval '8 days'
          WHERE topic = 'w_topic' AND payload = '1';",
    )
    .expect("rows");
    wait_for("expired inbox row purged", Duration::from_secs(5), || {
        count(
            &mut db,
            "SELECT count(*) FROM idempotency.inbox WHERE consumer = 'w_inbox'",
        ) == 1
    });
    wait_for(
        "old published message purged",
        Duration::from_secs(5),
        || {
            count(
                &mut db,
                "SELECT count(*) FROM idempotency.outbox WHERE topic = 'w_topic'",
            ) == 2
        },
    );
    std::thread::sleep(3 * NAPTIME);
    let left: String = db
        .query_one(
            "SELECT (SELECT string_agg(message_id, ' ') FROM idempotency.inbox WHERE consumer = 'w_inbox') \
             || ' / ' || (SELECT string_agg(payload::text || ':' || status, ' ' ORDER BY id) \
             FROM idempotency.outbox WHERE topic = 'w_topic')",
            &[],
        )
        .expect("left")
        .get(0);
    assert_eq!(left, "new / 2:published 3:pending");
}

#[test]
fn every_database_with_the_extension_is_maintained_and_others_left_alone() {
    let _g = shared();
    let mut a = create_database("w_db_a", true);
    let mut b = create_database("w_db_b", true);
    // Looks like ours, but the extension is not installed: must stay untouched.
    let mut c = create_database("w_db_c", false);
    c.batch_execute(
        "CREATE SCHEMA idempotency;
         CREATE TABLE idempotency.requests (scope text, key text, status text, expires_at timestamptz);
         INSERT INTO idempotency.requests VALUES ('s', 'k', 'succeeded', now() - interval '1 day');",
    )
    .expect("lookalike");
    expired_finished_records(&mut a, "s");
    expired_finished_records(&mut b, "s");
    wait_for("both databases purged", Duration::from_secs(5), || {
        records(&mut a, "s") == 0 && records(&mut b, "s") == 0
    });
    std::thread::sleep(2 * NAPTIME);
    assert_eq!(records(&mut c, "s"), 1);
    assert!(
        !worker_cluster().log().contains("w_db_c"),
        "{}",
        worker_cluster().log()
    );
    drop(c);
    drop_database("w_db_c");
}

#[test]
fn a_failing_database_is_logged_and_the_others_are_still_maintained() {
    let _g = shared();
    let mut broken = create_database("w_broken", true);
    broken
        .batch_execute("ALTER TABLE idempotency.requests RENAME TO requests_moved")
        .expect("break");
    let mut db = worker_cluster().session();
    expired_finished_records(&mut db, "w_after_failure");
    let expected = "idempotency: idem_reclaim in database \"w_broken\" failed: \
                    relation \"idempotency.requests\" does not exist (SQLSTATE 42P01)";
    wait_for("the failure logged", Duration::from_secs(5), || {
        worker_cluster().log().contains(expected)
    });
    wait_for("the others purged", Duration::from_secs(5), || {
        records(&mut db, "w_after_failure") == 0
    });
    drop(broken);
    drop_database("w_broken");
}

#[test]
fn both_processes_show_in_pg_stat_activity_and_a_lock_times_out() {
    let _g = exclusive();
    let mut db = worker_cluster().session();
    wait_for("the launcher", Duration::from_secs(10), || {
        count(
            &mut db,
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idempotency launcher' \
             AND application_name = 'idempotency launcher' AND datname IS NULL",
        ) == 1
    });
    // A table lock makes the maintenance worker of that database wait (visibly), then give
    // up after its lock_timeout with a logged 55P03.
    let mut locked = create_database("w_locked", true);
    let mut tx = locked.transaction().expect("begin");
    tx.batch_execute("LOCK TABLE idempotency.requests IN EXCLUSIVE MODE")
        .expect("lock");
    wait_for(
        "the maintenance worker waiting",
        Duration::from_secs(10),
        || {
            count(
                &mut db,
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idempotency maintenance' \
             AND application_name = 'idempotency maintenance' AND datname = 'w_locked' \
             AND wait_event_type = 'Lock'",
            ) == 1
        },
    );
    let expected = "idempotency: idem_reclaim in database \"w_locked\" failed: \
                    canceling statement due to lock timeout (SQLSTATE 55P03)";
    wait_for("the lock timeout logged", Duration::from_secs(10), || {
        worker_cluster().log().contains(expected)
    });
    tx.rollback().expect("rollback");
    drop(locked);
    drop_database("w_locked");
}

#[test]
fn a_reloaded_naptime_takes_effect() {
    let _g = exclusive();
    let mut db = worker_cluster().session();
    let rounds = |db: &mut Client| metrics(db)["maintenance_rounds"];
    let before = rounds(&mut db);
    wait_for("rounds at 200ms", Duration::from_secs(5), || {
        rounds(&mut db) >= before + 2
    });

    reload(&mut db, "idempotency.naptime", "1h");
    wait_for_setting(&mut db, "idempotency.naptime", "1h");
    std::thread::sleep(Duration::from_secs(1)); // a round under way may finish
    let paused = rounds(&mut db);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(rounds(&mut db), paused, "rounds went on with naptime = 1h");

    // Back to 200ms: the sleeping launcher wakes up for it.
    reload(&mut db, "idempotency.naptime", "200ms");
    wait_for_setting(&mut db, "idempotency.naptime", "200ms");
    let waited = wait_for("rounds again", Duration::from_secs(5), || {
        rounds(&mut db) > paused
    });
    assert!(waited < Duration::from_secs(2), "took {waited:?}");
}

#[test]
fn a_worker_switched_off_by_reload_does_nothing() {
    let _g = exclusive();
    let mut db = worker_cluster().session();
    reload(&mut db, "idempotency.worker_enabled", "off");
    wait_for_setting(&mut db, "idempotency.worker_enabled", "off");
    std::thread::sleep(Duration::from_secs(1));
    let rounds = metrics(&mut db)["maintenance_rounds"];
    expired_finished_records(&mut db, "w_off");
    std::thread::sleep(5 * NAPTIME);
    assert_eq!(records(&mut db, "w_off"), 3);
    assert_eq!(metrics(&mut db)["maintenance_rounds"], rounds);
    reload(&mut db, "idempotency.worker_enabled", "on");
    wait_for("purged once on again", Duration::from_secs(5), || {
        records(&mut db, "w_off") == 0
    });
}

#[test]
fn the_databases_setting_restricts_the_rounds() {
    let _g = exclusive();
    let mut db = worker_cluster().session();
    let mut other = create_database("w_db_other", true);
    reload(&mut db, "idempotency.databases", "idem_test, w_db_x");
    wait_for_setting(&mut db, "idempotency.databases", "idem_test, w_db_x");
    std::thread::sleep(Duration::from_secs(1));
    expired_finished_records(&mut db, "w_listed");
    expired_finished_records(&mut other, "w_unlisted");
    wait_for("the listed database purged", Duration::from_secs(5), || {
        records(&mut db, "w_listed") == 0
    });
    std::thread::sleep(3 * NAPTIME);
    assert_eq!(records(&mut other, "w_unlisted"), 3);
    reload(&mut db, "idempotency.databases", "");
    wait_for("all databases again", Duration::from_secs(5), || {
        records(&mut other, "w_unlisted") == 0
    });
    drop(other);
    drop_database("w_db_other");
}

#[test]
fn reclaim_grace_holds_back_reclaiming() {
    let _g = exclusive();
    let mut db = worker_cluster().session();
    reload(&mut db, "idempotency.reclaim_grace", "1h");
    wait_for_setting(&mut db, "idempotency.reclaim_grace", "1h");
    db.batch_execute("SELECT idem_claim('w_grace', 'k', 'h', lease => '1 millisecond')")
        .expect("claim");
    std::thread::sleep(5 * NAPTIME);
    assert_eq!(count(&mut db, "SELECT idem_reclaim()"), 0);
    assert_eq!(
        count(
            &mut db,
            "SELECT count(*) FROM idempotency.requests WHERE scope = 'w_grace' AND status = 'processing'"
        ),
        1
    );
    reload(&mut db, "idempotency.reclaim_grace", "0");
    wait_for("reclaimed without grace", Duration::from_secs(5), || {
        count(
            &mut db,
            "SELECT count(*) FROM idempotency.requests WHERE scope = 'w_grace' AND status = 'failed_retryable'",
        ) == 1
    });
}

#[test]
fn the_launcher_comes_back_after_pg_terminate_backend() {
    let _g = exclusive();
    let mut db = worker_cluster().session();
    let launcher = "SELECT coalesce(max(pid), 0) FROM pg_stat_activity \
                    WHERE backend_type = 'idempotency launcher'";
    let mut first = 0;
    wait_for("the launcher", Duration::from_secs(10), || {
        first = db.query_one(launcher, &[]).expect("pid").get::<_, i32>(0);
        first != 0
    });
    let terminated: bool = db
        .query_one("SELECT pg_terminate_backend($1)", &[&first])
        .expect("terminate")
        .get(0);
    assert!(terminated);
    let back = wait_for("a new launcher", Duration::from_secs(15), || {
        let pid: i32 = db.query_one(launcher, &[]).expect("pid").get(0);
        pid != 0 && pid != first
    });
    assert!(back < Duration::from_secs(10), "back after {back:?}");
    // And it works.
    let rounds = metrics(&mut db)["maintenance_rounds"];
    wait_for("a round", Duration::from_secs(5), || {
        metrics(&mut db)["maintenance_rounds"] > rounds
    });
}

#[test]
fn metrics_move_as_claims_happen() {
    let _g = exclusive();
    let mut a = worker_cluster().session();
    let mut b = worker_cluster().session();
    let before = metrics(&mut a);

    assert_eq!(claim(&mut a, "w_metrics", "k1", "h"), "new_claim");
    assert_eq!(claim(&mut b, "w_metrics", "k1", "h"), "processing_active");
    a.batch_execute("SELECT idem_complete('w_metrics', 'k1', '{}')")
        .expect("complete");
    assert_eq!(claim(&mut b, "w_metrics", "k1", "h"), "replay_success");
    let err = b
        .query_one("SELECT * FROM idem_claim('w_metrics', 'k1', 'other')", &[])
        .expect_err("mismatch");
    assert_eq!(sqlstate(&err), "P4002");

    assert_eq!(claim(&mut a, "w_metrics", "k2", "h"), "new_claim");
    a.batch_execute("SELECT idem_fail('w_metrics', 'k2', true, 'later')")
        .expect("fail");
    assert_eq!(claim(&mut b, "w_metrics", "k2", "h"), "retryable_failure");
    b.batch_execute("SELECT idem_fail('w_metrics', 'k2', false, 'no')")
        .expect("fail");
    assert_eq!(claim(&mut a, "w_metrics", "k2", "h"), "final_failure");

    let after = metrics(&mut a);
    let delta = |name: &str| after[name] - before[name];
    assert_eq!(delta("claims_new_claim"), 2);
    assert_eq!(delta("claims_processing_active"), 1);
    assert_eq!(delta("claims_replay_success"), 1);
    assert_eq!(delta("claims_retryable_failure"), 1);
    assert_eq!(delta("claims_final_failure"), 1);
    assert_eq!(delta("claims_processing_stale"), 0);
    assert_eq!(delta("hash_mismatches"), 1);
    assert_eq!(delta("completions"), 1);
    assert_eq!(delta("failures"), 2);
    // Two inserts, a completion and two failures written directly; the takeover through SQL.
    assert_eq!(delta("writes_direct"), 5);
    assert_eq!(delta("writes_sql"), 1);
    assert_eq!(after.len(), 15);
}
