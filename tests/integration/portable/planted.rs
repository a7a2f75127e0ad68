//! What another role plants where the portable edition looks (issue 32, findings 6 to 8): a
//! schema named `cron` that is not pg_cron's, an overload beside `idem_call`'s callee, and a
//! schema of another role given to `--schema`. Each is refused before anything of the planter
//! runs or anything is recorded.

use super::{cluster, install};
use crate::common;

use common::{Client, answer};

/// A new login role `role` (dropped first), with `CREATE` on database `db`.
fn planter(db: &str, role: &str) -> Client {
    let mut admin = cluster().connect("postgres");
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN; GRANT CREATE ON DATABASE {db} TO {role}"
        ))
        .expect("planter");
    cluster().connect_as(db, role)
}

/// Without pg_cron, a schema named `cron` with a `schedule` function is someone else's:
/// `idem_schedule_upkeep` answers 55000 and never calls it.
#[test]
fn a_schema_named_cron_is_not_pg_cron() {
    let name = "portable_planted_cron";
    let mut owner = install(name);
    let mut p = planter(name, &format!("{name}_planter"));
    p.batch_execute(
        "CREATE SCHEMA cron; GRANT USAGE ON SCHEMA cron TO PUBLIC;
         CREATE TABLE cron.ran (who text); GRANT INSERT ON cron.ran TO PUBLIC;
         CREATE FUNCTION cron.schedule(a text, b text, c text) RETURNS bigint LANGUAGE sql
           AS $$ INSERT INTO cron.ran VALUES (current_user) RETURNING 1::bigint $$;",
    )
    .expect("the planted cron.schedule");
    assert_eq!(
        answer(&mut owner, "SELECT idem_schedule_upkeep()::text"),
        "ERROR 55000"
    );
    assert_eq!(common::count(&mut p, "SELECT count(*) FROM cron.ran"), 0);
}

/// An overload with a defaulted argument, added beside the callee by a role that may create
/// functions in its schema, would make the call by name ambiguous: refused with 42725 before
/// the claim, so the key is not recorded and works once the overload is gone. (The native
/// edition calls the function by its OID and is not affected: docs/managed.md.)
#[test]
fn an_overload_beside_the_callee_records_nothing() {
    let name = "portable_planted_call";
    let mut owner = install(name);
    let role = format!("{name}_planter");
    let mut p = planter(name, &role);
    owner
        .batch_execute(&format!(
            "CREATE SCHEMA app; GRANT USAGE, CREATE ON SCHEMA app TO {role};
             CREATE FUNCTION app.effect(r jsonb) RETURNS jsonb LANGUAGE sql AS $$ SELECT r $$;"
        ))
        .expect("the callee");
    p.batch_execute(
        "CREATE FUNCTION app.effect(r jsonb, x int DEFAULT 0) RETURNS jsonb LANGUAGE sql
           AS $$ SELECT '{\"planted\": true}'::jsonb $$",
    )
    .expect("the overload");
    let call = "SELECT (idem_call('s', 'k', '{}', 'app.effect(jsonb)')).outcome::text";
    // Refused by the check before the claim, not by the ambiguous call after it.
    let err = owner.query_one(call, &[]).expect_err("refused");
    assert_eq!(common::sqlstate(&err), "42725", "{err}");
    let message = err.as_db_error().map(|d| d.message().to_string());
    assert_eq!(
        message.as_deref(),
        Some(
            "idem_call cannot call app.effect(jsonb): another function of that name is in its schema"
        )
    );
    assert_eq!(
        common::count(&mut owner, "SELECT count(*) FROM idempotency.requests"),
        0
    );
    p.batch_execute("DROP FUNCTION app.effect(jsonb, int)")
        .expect("drop the overload");
    assert_eq!(answer(&mut owner, call), "new_claim");
}

/// `--schema NAME` where NAME is another role's schema (which granted CREATE): refused with
/// 42501, and nothing is installed.
#[test]
fn a_schema_another_role_owns_is_refused() {
    let name = "portable_planted_schema";
    let owner = format!("{name}_owner");
    let mut db = super::owned_database(cluster(), name);
    let mut p = planter(name, &format!("{name}_planter"));
    p.batch_execute(&format!(
        "CREATE SCHEMA api; GRANT USAGE, CREATE ON SCHEMA api TO {owner}"
    ))
    .expect("the other role's schema");
    let script = common::portable_script(&["--schema", "api"]);
    let err = db.batch_execute(&script).expect_err("refused");
    assert_eq!(common::sqlstate(&err), "42501", "{err}");
    assert_eq!(
        common::count(
            &mut db,
            "SELECT count(*) FROM pg_proc WHERE pronamespace = 'api'::regnamespace"
        ),
        0
    );
    // Its own schema is fine.
    let script = common::portable_script(&["--schema", "mine"]);
    db.batch_execute(&script)
        .expect("installs into a schema of its own");
}
