//! docs/tenants.md's row-level security recipe on the portable edition, word for word: one pool
//! role serving two tenants gets, on the other tenant's scopes, exactly the answers the page's
//! table gives (42501 for new rows, P4010/P4011/P4013 for records it cannot see, `false` from
//! idem_forget), its own scopes work as without RLS, and another tenant's in-flight key answers
//! like a free one in every field a driver shows.

use crate::common;

use common::{Client, repo_file, sql_block_after};

fn as_tenant(c: &mut Client, tenant: &str, sql: &str) -> String {
    common::as_tenant(c, Some(tenant), sql)
}

#[test]
fn the_tenant_recipe_isolates_tenants_on_the_portable_edition() {
    let c = super::cluster();
    c.drop_database("portable_tenants");
    let mut admin = c.connect("postgres");
    for sql in [
        "DROP ROLE IF EXISTS portable_tenants_owner",
        "DROP ROLE IF EXISTS portable_tenants_pool",
        "CREATE ROLE portable_tenants_owner LOGIN",
        "CREATE ROLE portable_tenants_pool LOGIN",
        "CREATE DATABASE portable_tenants OWNER portable_tenants_owner",
    ] {
        admin.batch_execute(sql).expect(sql);
    }
    let mut owner = c.connect_as("portable_tenants", "portable_tenants_owner");
    let out =
        std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/portable.sh"))
            .output()
            .expect("scripts/portable.sh");
    owner
        .batch_execute(std::str::from_utf8(&out.stdout).expect("utf8"))
        .expect("install");
    owner
        .batch_execute(
            "SELECT idem_grant('portable_tenants_pool', 'app'); SELECT idem_grant('portable_tenants_pool', 'publisher'); \
             CREATE FUNCTION public.effect(r jsonb) RETURNS jsonb LANGUAGE sql AS $$ SELECT r $$",
        )
        .expect("grants");
    owner
        .batch_execute(&sql_block_after(
            &repo_file("docs/tenants.md"),
            "## The recipe",
        ))
        .expect("the recipe");
    let mut pool = c.connect_as("portable_tenants", "portable_tenants_pool");
    let q = |p: &mut Client, t: &str, sql: &str| as_tenant(p, t, sql);
    assert_eq!(
        q(
            &mut pool,
            "acme",
            "SELECT outcome::text FROM idem_claim('acme', 'k', 'h1')"
        ),
        "new_claim"
    );
    assert_eq!(
        q(
            &mut pool,
            "acme",
            "SELECT idem_outbox_put('acme', '{}')::text"
        ),
        "1"
    );
    // globex, on acme's scopes:
    for (sql, want) in [
        (
            "SELECT outcome::text FROM idem_claim('acme', 'k', 'h1')",
            "ERROR 42501",
        ),
        (
            "SELECT outcome::text FROM idem_claim('acme', 'new', 'h1')",
            "ERROR 42501",
        ),
        (
            "SELECT outcome::text FROM idem_call('acme', 'c', '{}', 'public.effect(jsonb)')",
            "ERROR 42501",
        ),
        (
            "SELECT idem_inbox_accept('acme', 'm', 'h')::text",
            "ERROR 42501",
        ),
        ("SELECT idem_advance('acme', 'e', 1)::text", "ERROR 42501"),
        ("SELECT idem_outbox_put('acme', '{}')::text", "ERROR 42501"),
        (
            "SELECT idem_complete('acme', 'k', '{}')::text",
            "ERROR P4010",
        ),
        ("SELECT idem_fail('acme', 'k', true)::text", "ERROR P4011"),
        (
            "SELECT idem_checkpoint('acme', 'k', 'p')::text",
            "ERROR P4013",
        ),
        ("SELECT idem_forget('acme', 'k')::text", "false"),
        ("SELECT count(*)::text FROM idem_outbox_take()", "0"),
        ("SELECT count(*)::text FROM idempotency.requests", "0"),
        (
            "SELECT outcome::text FROM idem_claim('globex', 'k', 'h2')",
            "new_claim",
        ),
        (
            "SELECT outcome::text FROM idem_claim('globex', 'k', 'h3')",
            "ERROR P4002",
        ),
    ] {
        assert_eq!(q(&mut pool, "globex", sql), want, "globex: {sql}");
    }
    // acme's record is untouched and replays nothing else but its own.
    assert_eq!(
        q(
            &mut pool,
            "acme",
            "SELECT outcome::text FROM idem_claim('acme', 'k', 'h1')"
        ),
        "processing_active"
    );
    assert_eq!(
        common::count(&mut owner, "SELECT count(*) FROM idempotency.requests"),
        2
    );
    // An in-flight key of acme and a free one answer globex alike, in every field a driver
    // shows (the CONTEXT included: both come from the policy probe).
    let mut holder = c.connect_as("portable_tenants", "portable_tenants_pool");
    common::in_flight_and_free_keys_look_alike(&mut holder, &mut pool);
}
