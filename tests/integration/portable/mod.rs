//! The portable edition (issue 21): `scripts/portable.sh` installed with no library preloaded,
//! by a database owner who is not a superuser, then the README's examples, the claim protocol
//! (outcomes, fencing, expiry, takeovers), a claim that never blocks with two real sessions,
//! the `wait =>` poll, the consumers, docs/errors.md's table, and a hostile `search_path` at
//! install and at call time. Moving up to the native extension: move_up.rs.

use crate::common;

use std::sync::OnceLock;
use std::time::Duration;

use common::{Client, sql_block_after, sqlstate};

mod canonical;
mod catalog;
mod contract;
mod cron;
mod differential;
pub(crate) mod move_up;
mod move_up_hostile;
mod pg_cron;
mod planted;
mod race;
mod sessions;
mod tenants;

/// The portable edition's cluster: no library loaded (shared by this module's tests, except
/// those comparing with the native extension: canonical, differential, move_up).
fn cluster() -> &'static common::Cluster {
    common::bare_cluster()
}

/// `scripts/portable.sh` (plain), run once.
fn portable_sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| common::portable_script(&[]))
}

/// A new database `name` of `c`, owned by the new non-superuser role `{name}_owner`: a
/// session of that role in it.
pub(crate) fn owned_database(c: &common::Cluster, name: &str) -> Client {
    let owner = format!("{name}_owner");
    c.drop_database(name);
    let mut admin = c.connect("postgres");
    for sql in [
        format!("DROP ROLE IF EXISTS {owner}"),
        format!("CREATE ROLE {owner} LOGIN NOSUPERUSER"),
        format!("CREATE DATABASE {name} OWNER {owner}"),
    ] {
        admin.batch_execute(&sql).expect("owner and database");
    }
    c.connect_as(name, &owner)
}

/// Database `name` owned by the new non-superuser role `{name}_owner`, with the portable
/// edition installed by that role: a session of it.
pub(crate) fn install(name: &str) -> Client {
    let mut db = owned_database(cluster(), name);
    db.batch_execute(portable_sql())
        .expect("the portable edition installs");
    db
}

fn outcome(db: &mut Client, sql: &str) -> (String, Option<i32>) {
    let row = db
        .query_one(&format!("SELECT outcome::text, attempt FROM {sql}"), &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    (row.get(0), row.get(1))
}

fn error(db: &mut Client, sql: &str) -> String {
    match db.batch_execute(sql) {
        Ok(()) => panic!("{sql} succeeded"),
        Err(e) => sqlstate(&e),
    }
}

#[test]
fn readme_examples_run_on_a_stock_server_as_the_database_owner() {
    let mut db = install("portable_readme");
    let superuser = db
        .query_one(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user",
            &[],
        )
        .expect("role");
    assert!(!superuser.get::<_, bool>(0), "installed by a non-superuser");
    let mut admin = cluster().connect("portable_readme");
    assert_eq!(
        common::answer(&mut admin, "SHOW shared_preload_libraries"),
        "",
        "no library preloaded"
    );
    // Nothing of the edition is C: SQL and PL/pgSQL only.
    let c_functions = common::count(
        &mut db,
        "SELECT count(*) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang \
         WHERE p.proname LIKE 'idem%' AND l.lanname NOT IN ('sql', 'plpgsql')",
    );
    assert_eq!(c_functions, 0);
    let readme = common::repo_file("README.md");
    db.batch_execute(&sql_block_after(
        &readme,
        "## The claim protocol in one screen",
    ))
    .expect("the README's claim example");
    let replay = db
        .query_one(
            "SELECT outcome::text, response::text FROM idem_claim('payments', 'order-42', \
             idem_hash('{\"amount\": 10, \"currency\": \"EUR\"}'::jsonb))",
            &[],
        )
        .expect("replay");
    assert_eq!(replay.get::<_, String>(0), "replay_success");
    assert_eq!(replay.get::<_, String>(1), "{\"payment_id\": 17}");
    db.batch_execute(&sql_block_after(&readme, "## The consumers"))
        .expect("the README's consumers example");
    assert_eq!(
        common::answer(
            &mut db,
            "SELECT response::text FROM idem_call('charges', 'c-1', '{\"amount\": 10}', 'charge(jsonb)')"
        ),
        "{\"charged\": 10}"
    );
    let metrics = error(&mut db, "SELECT * FROM idem_metrics()");
    assert_eq!(metrics, "55000", "no counters without shared memory");
}

#[test]
fn outcomes_fencing_expiry_and_takeovers() {
    let mut db = install("portable_protocol");
    assert_eq!(
        outcome(&mut db, "idem_claim('s', 'k', 'h', lease => '1 ms')"),
        ("new_claim".into(), Some(1))
    );
    assert_eq!(
        error(&mut db, "SELECT idem_claim('s', 'k', 'other')"),
        "P4002"
    );
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        outcome(&mut db, "idem_claim('s', 'k', 'h', lease => '1 hour')"),
        ("processing_stale".into(), Some(2))
    );
    assert_eq!(
        outcome(&mut db, "idem_claim('s', 'k', 'h')"),
        ("processing_active".into(), Some(2))
    );
    // The late worker of attempt 1 is fenced off, whatever it tries.
    assert_eq!(
        error(
            &mut db,
            "SELECT idem_complete('s', 'k', '{}', attempt => 1)"
        ),
        "P4012"
    );
    assert_eq!(
        error(&mut db, "SELECT idem_fail('s', 'k', true, attempt => 1)"),
        "P4012"
    );
    assert_eq!(
        error(
            &mut db,
            "SELECT idem_checkpoint('s', 'k', 'p', attempt => 1)"
        ),
        "P4012"
    );
    db.batch_execute("SELECT idem_checkpoint('s', 'k', 'step-1', attempt => 2)")
        .expect("checkpoint");
    db.batch_execute("SELECT idem_fail('s', 'k', true, 'E1', 'down', attempt => 2)")
        .expect("fail");
    db.batch_execute("SELECT idem_fail('s', 'k', true, 'E1', 'down', attempt => 2)")
        .expect("the same failure again is a no-op");
    let row = db
        .query_one("SELECT outcome::text, attempt, recovery_point, failure_code FROM idem_claim('s', 'k', 'h')", &[])
        .expect("retry");
    assert_eq!(row.get::<_, String>(0), "retryable_failure");
    assert_eq!(row.get::<_, i32>(1), 3);
    assert_eq!(row.get::<_, String>(2), "step-1");
    assert_eq!(row.get::<_, String>(3), "E1");
    db.batch_execute("SELECT idem_complete('s', 'k', '{\"ok\": 1}', attempt => 3)")
        .expect("complete");
    db.batch_execute("SELECT idem_complete('s', 'k', '{\"ok\": 1}')")
        .expect("the same completion is a no-op");
    assert_eq!(
        error(&mut db, "SELECT idem_complete('s', 'k', '{\"ok\": 2}')"),
        "P4010"
    );
    assert_eq!(
        outcome(&mut db, "idem_claim('s', 'k', 'h')"),
        ("replay_success".into(), Some(3))
    );
    // Past its retention a finished record is free again, even for another request.
    db.batch_execute("UPDATE idempotency.requests SET expires_at = now() - interval '1 s', created_at = now() - interval '2 days', claimed_at = now() - interval '2 days', updated_at = now() - interval '2 days'")
        .expect("age the record");
    assert_eq!(
        outcome(&mut db, "idem_claim('s', 'k', 'new')"),
        ("new_claim".into(), Some(1))
    );
    db.batch_execute("SELECT idem_fail('s', 'k', false, 'E2')")
        .expect("final failure");
    assert_eq!(
        outcome(&mut db, "idem_claim('s', 'k', 'new')"),
        ("final_failure".into(), Some(1))
    );
    assert_eq!(
        common::answer(&mut db, "SELECT idem_forget('s', 'k')::text"),
        "true"
    );
    assert_eq!(
        common::answer(&mut db, "SELECT idem_forget('s', 'k')::text"),
        "false"
    );
    // Upkeep: a lease that ended becomes a retryable failure, then is purged after retention.
    outcome(
        &mut db,
        "idem_claim('u', 'k', 'h', lease => '1 ms', retention => '1 ms')",
    );
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(common::count(&mut db, "SELECT idem_reclaim()"), 1);
    assert_eq!(
        common::answer(
            &mut db,
            "SELECT failure_code FROM idempotency.requests WHERE scope = 'u'"
        ),
        "lease_expired"
    );
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(common::count(&mut db, "SELECT idem_purge()"), 1);
    let round = db
        .query_one("SELECT reclaimed, purged FROM idem_upkeep()", &[])
        .expect("idem_upkeep");
    assert_eq!((round.get::<_, i64>(0), round.get::<_, i64>(1)), (0, 0));
}

/// `scripts/portable.sh --update` over an earlier release (here one whose idem_version says
/// 0.1.9): every function replaced, every row kept.
#[test]
fn the_update_script_replaces_the_functions_and_keeps_the_rows() {
    let mut db = install("portable_update");
    cluster()
        .connect("postgres")
        .batch_execute(
            "DO $$ BEGIN CREATE ROLE portable_update_app; \
             EXCEPTION WHEN duplicate_object THEN NULL; END $$",
        )
        .expect("role");
    db.batch_execute(
        "SELECT idem_claim('u', 'k', 'h'); SELECT idem_complete('u', 'k', '{\"id\": 3}'); \
         CREATE OR REPLACE FUNCTION public.idem_version() RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE \
         SET search_path = pg_catalog, pg_temp AS $$ SELECT '0.1.9'::text $$; \
         DROP FUNCTION idempotency.cdc_message(text, text, jsonb, jsonb), public.idem_cdc_verify(jsonb), \
                       public.idem_cdc_verified(text), idempotency.outbox_put_check(text, jsonb, text, jsonb); \
         DROP TABLE idempotency.cdc_secret; \
         GRANT USAGE ON SCHEMA idempotency TO portable_update_app; \
         GRANT SELECT, INSERT ON idempotency.outbox TO portable_update_app;",
    )
    .expect("an earlier release, without the CDC secret (issue 32)");
    db.batch_execute(&common::portable_script(&["--update"]))
        .expect("the update");
    // The update brings the secret, and EXECUTE to whoever may already put into the outbox.
    let secret = common::answer(
        &mut db,
        "SELECT string_agg(secret::text, ',') FROM idempotency.cdc_secret",
    );
    assert_eq!(secret.len(), 66, "one secret of 32 bytes: {secret}");
    assert_eq!(
        common::answer(
            &mut db,
            "SELECT has_function_privilege('portable_update_app', \
             'idempotency.cdc_message(text, text, jsonb, jsonb)', 'EXECUTE')::text"
        ),
        "true"
    );
    db.batch_execute(&common::portable_script(&["--update"]))
        .expect("the update again");
    assert_eq!(
        common::answer(
            &mut db,
            "SELECT string_agg(secret::text, ',') FROM idempotency.cdc_secret"
        ),
        secret,
        "a second update keeps the secret"
    );
    assert_eq!(
        common::answer(&mut db, "SELECT idem_version()"),
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(
        common::answer(
            &mut db,
            "SELECT outcome::text || ' ' || response::text FROM idem_claim('u', 'k', 'h')"
        ),
        "replay_success {\"id\": 3}"
    );
}
