//! docs/tenants.md's row-level security recipe, run word for word: one pool role serving two
//! tenants sees, claims, finishes and forgets only its own scopes, through every function,
//! whether the direct paths were warm before the policies came or not.

use crate::common;

use common::{Client, answer, as_tenant, fingerprint_sql, repo_file, sql_block_after, sqlstate};

crate::own_database!();

/// The ```sql block under "## The recipe" of docs/tenants.md.
fn recipe() -> String {
    sql_block_after(&repo_file("docs/tenants.md"), "## The recipe")
}

fn fingerprint(owner: &mut Client) -> String {
    answer(owner, &fingerprint_sql("public.effects"))
}

fn setup(name: &str, warm_first: bool) -> (Client, Client) {
    let mut owner = cluster().database(name);
    // Roles are cluster-wide: one per test, since the tests run at once.
    let role = format!("{name}_pool");
    owner
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN;"
        ))
        .expect("role");
    owner
        .batch_execute(&format!(
            "SELECT idem_grant('{role}', 'app');
             SELECT idem_grant('{role}', 'publisher');
             CREATE TABLE public.effects (request jsonb);
             GRANT INSERT, SELECT ON public.effects TO {role};
             CREATE FUNCTION public.effect(r jsonb) RETURNS jsonb LANGUAGE sql
               AS $$ INSERT INTO public.effects VALUES (r) RETURNING '{{\"done\": true}}'::jsonb $$;",
        ))
        .expect("grants and effects");
    let mut pool = cluster().connect_as(name, &role);
    if warm_first {
        // The direct paths' caches are built before the policies exist.
        for tenant in ["acme", "globex"] {
            let sql = format!("SELECT outcome::text FROM idem_claim('{tenant}/warm', 'w', 'h')");
            assert_eq!(as_tenant(&mut pool, None, &sql), "new_claim");
        }
    }
    owner.batch_execute(&recipe()).expect("the recipe");
    (owner, pool)
}

fn isolation(name: &str, warm_first: bool) {
    let (mut owner, mut pool) = setup(name, warm_first);
    let acme = Some("acme");
    let globex = Some("globex");
    let q = |s: &str| s.to_string();

    // acme works as without RLS.
    assert_eq!(
        as_tenant(
            &mut pool,
            acme,
            "SELECT outcome::text FROM idem_claim('acme', 'k', 'h1')"
        ),
        "new_claim"
    );
    assert_eq!(
        as_tenant(
            &mut pool,
            acme,
            "SELECT 'done' FROM idem_complete('acme', 'k', '{\"n\": 1}')"
        ),
        "done"
    );
    assert_eq!(
        as_tenant(
            &mut pool,
            acme,
            "SELECT outcome::text FROM idem_claim('acme', 'k', 'h1')"
        ),
        "replay_success"
    );
    assert_eq!(
        as_tenant(
            &mut pool,
            acme,
            "SELECT outcome::text FROM idem_claim('acme/payments', 'k', 'h1')"
        ),
        "new_claim"
    );
    assert_eq!(
        as_tenant(
            &mut pool,
            acme,
            "SELECT outcome::text FROM idem_claim('acme', 'open', 'h1')"
        ),
        "new_claim"
    );
    assert_eq!(
        as_tenant(
            &mut pool,
            acme,
            "SELECT idem_inbox_accept('acme', 'm1', 'mh')::text"
        ),
        "true"
    );
    assert_eq!(
        as_tenant(&mut pool, acme, "SELECT idem_advance('acme', 'e', 3)::text"),
        "true"
    );
    assert_eq!(
        as_tenant(
            &mut pool,
            acme,
            "SELECT (idem_outbox_put('acme/events', '{\"x\": 1}') IS NOT NULL)::text"
        ),
        "true"
    );
    assert_eq!(
        as_tenant(
            &mut pool,
            acme,
            "SELECT outcome::text FROM idem_call('acme', 'call', '{\"a\": 1}', 'public.effect(jsonb)')"
        ),
        "new_claim"
    );
    // The P4002 DETAIL names this request's hash only.
    match pool.query_one("SELECT set_config('app.tenant', 'acme', false)", &[]) {
        Ok(_) => {}
        Err(e) => panic!("set tenant: {e}"),
    }
    let err = pool
        .query_one(
            "SELECT outcome::text FROM idem_claim('acme', 'k', 'h-other')",
            &[],
        )
        .expect_err("hash mismatch");
    assert_eq!(sqlstate(&err), "P4002");
    let detail = err
        .as_db_error()
        .and_then(|d| d.detail())
        .unwrap_or_default()
        .to_string();
    assert!(
        !detail.contains("h1"),
        "P4002 DETAIL shows the stored hash: {detail}"
    );
    pool.batch_execute("RESET app.tenant").expect("reset");

    let before = fingerprint(&mut owner);
    // globex, against every one of acme's rows: refused or not found, nothing written.
    let refused = [
        "SELECT outcome::text FROM idem_claim('acme', 'k', 'h1')",
        "SELECT outcome::text FROM idem_claim('acme', 'k', 'h-other')",
        "SELECT outcome::text FROM idem_claim('acme', 'new', 'h1')",
        "SELECT outcome::text FROM idem_claim('acme/payments', 'k', 'h1')",
        "SELECT outcome::text FROM idem_call('acme', 'call', '{\"a\": 1}', 'public.effect(jsonb)')",
        "SELECT outcome::text FROM idem_call('acme', 'other', '{\"a\": 1}', 'public.effect(jsonb)')",
        "SELECT idem_inbox_accept('acme', 'm1', 'mh')::text",
        "SELECT idem_inbox_accept('acme', 'm2', 'mh')::text",
        "SELECT idem_advance('acme', 'e', 4)::text",
        "SELECT idem_outbox_put('acme/events', '{}')::text",
    ];
    for sql in refused {
        assert_eq!(
            as_tenant(&mut pool, globex, sql),
            "ERROR 42501",
            "globex: {sql}"
        );
    }
    let not_found = [
        (
            "SELECT 'done' FROM idem_complete('acme', 'open', '{}')",
            "ERROR P4010",
        ),
        (
            "SELECT 'done' FROM idem_fail('acme', 'open', false, 'x', 'y')",
            "ERROR P4011",
        ),
        (
            "SELECT (idem_checkpoint('acme', 'open', 'step') IS NOT NULL)::text",
            "ERROR P4013",
        ),
        ("SELECT idem_forget('acme', 'k')::text", "false"),
        ("SELECT idem_forget('acme', 'open')::text", "false"),
        ("SELECT count(*)::text FROM idempotency.requests", "0"),
        ("SELECT count(*)::text FROM idempotency.inbox", "0"),
        ("SELECT count(*)::text FROM idempotency.versions", "0"),
        ("SELECT count(*)::text FROM idem_outbox_take(100)", "0"),
    ];
    for (sql, want) in not_found {
        let want = if warm_first && sql.contains("FROM idempotency.requests") {
            "1"
        } else {
            want
        };
        assert_eq!(as_tenant(&mut pool, globex, sql), q(want), "globex: {sql}");
    }
    // No tenant at all: nothing visible, nothing writable.
    assert_eq!(
        as_tenant(
            &mut pool,
            None,
            "SELECT count(*)::text FROM idempotency.requests"
        ),
        "0"
    );
    assert_eq!(
        as_tenant(
            &mut pool,
            None,
            "SELECT outcome::text FROM idem_claim('acme', 'x', 'h')"
        ),
        "ERROR 42501"
    );
    assert_eq!(
        as_tenant(
            &mut pool,
            Some(""),
            "SELECT outcome::text FROM idem_claim('/x', 'x', 'h')"
        ),
        "ERROR 42501"
    );
    assert_eq!(
        fingerprint(&mut owner),
        before,
        "globex changed acme's rows"
    );

    // globex's own scopes, keys that acme also uses: independent.
    assert_eq!(
        as_tenant(
            &mut pool,
            globex,
            "SELECT outcome::text FROM idem_claim('globex', 'k', 'h2')"
        ),
        "new_claim"
    );
    assert_eq!(
        as_tenant(
            &mut pool,
            globex,
            "SELECT 'done' FROM idem_complete('globex', 'k', '{\"g\": 1}')"
        ),
        "done"
    );
    assert_eq!(
        as_tenant(
            &mut pool,
            globex,
            "SELECT response::text FROM idem_claim('globex', 'k', 'h2')"
        ),
        "{\"g\": 1}"
    );
    assert_eq!(
        as_tenant(
            &mut pool,
            acme,
            "SELECT response::text FROM idem_claim('acme', 'k', 'h1')"
        ),
        "{\"n\": 1}"
    );
    // Each takes only its own outbox messages.
    assert_eq!(
        as_tenant(
            &mut pool,
            acme,
            "SELECT string_agg(topic, ',') FROM idem_outbox_take(100)"
        ),
        "acme/events"
    );
    // acme forgets its own record; globex's stays.
    assert_eq!(
        as_tenant(&mut pool, acme, "SELECT idem_forget('acme', 'k')::text"),
        "true"
    );
    assert_eq!(
        answer(
            &mut owner,
            "SELECT string_agg(scope, ',' ORDER BY scope) FROM idempotency.requests WHERE key = 'k'"
        ),
        "acme/payments,globex"
    );
    // One effect: globex's idem_call attempts ran nothing.
    assert_eq!(
        answer(&mut owner, "SELECT count(*)::text FROM public.effects"),
        "1"
    );
}

#[test]
fn a_tenant_sees_and_changes_only_its_scopes() {
    isolation("tenants_cold", false);
}

#[test]
fn caches_built_before_the_policies_do_not_bypass_them() {
    isolation("tenants_warm", true);
}

/// While globex holds an uncommitted claim of one of its keys, acme's claim of that key gets
/// the same 42501 as of any globex key, not `processing_active`: a tenant cannot learn which
/// keys another is working on (the policy answers before the key's lock does).
#[test]
fn another_tenants_in_flight_key_looks_like_any_other() {
    let name = "tenants_in_flight";
    let (mut owner, mut globex) = setup(name, false);
    let mut acme = cluster().connect_as(name, &format!("{name}_pool"));
    globex.batch_execute("BEGIN").expect("begin");
    globex
        .execute(
            "SELECT pg_catalog.set_config('app.tenant', 'globex', true)",
            &[],
        )
        .expect("tenant");
    assert_eq!(
        answer(
            &mut globex,
            "SELECT outcome::text FROM idem_claim('globex', 'busy', 'h')"
        ),
        "new_claim"
    );
    for key in ["busy", "idle"] {
        let sql = format!("SELECT outcome::text FROM idem_claim('globex', '{key}', 'h')");
        assert_eq!(
            as_tenant(&mut acme, Some("acme"), &sql),
            "ERROR 42501",
            "acme's claim of globex's {key} key"
        );
        let call = format!(
            "SELECT (idem_call('globex', '{key}', '{{}}', 'public.effect(jsonb)')).outcome::text"
        );
        assert_eq!(
            as_tenant(&mut acme, Some("acme"), &call),
            "ERROR 42501",
            "idem_call of globex's {key} key"
        );
    }
    // Its own in-flight key still answers processing_active to globex's other sessions.
    let mut globex2 = cluster().connect_as(name, &format!("{name}_pool"));
    assert_eq!(
        as_tenant(
            &mut globex2,
            Some("globex"),
            "SELECT outcome::text FROM idem_claim('globex', 'busy', 'h')"
        ),
        "processing_active"
    );
    globex.batch_execute("COMMIT").expect("commit");
    assert_eq!(
        answer(
            &mut owner,
            "SELECT count(*)::text FROM idempotency.requests WHERE scope = 'globex'"
        ),
        "1"
    );
    // Not by the SQLSTATE alone: every field a driver shows.
    let mut holder = cluster().connect_as(name, &format!("{name}_pool"));
    common::in_flight_and_free_keys_look_alike(&mut holder, &mut acme);
}
