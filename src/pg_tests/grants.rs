//! idem_grant profiles: each gives exactly what its name says, checked against every table of
//! schema idempotency and every function of the extension (issue #16, roles).

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg_tests::helpers::*;

    /// (profile, table, the privileges it must have there, exactly).
    const TABLE_PRIVILEGES: &[(&str, &str, &str)] = &[
        ("app", "requests", "SELECT,INSERT,UPDATE,DELETE"),
        ("app", "inbox", "SELECT,INSERT,UPDATE"),
        ("app", "versions", "SELECT,INSERT,UPDATE"),
        ("app", "outbox", "SELECT,INSERT"),
        ("publisher", "outbox", "SELECT,UPDATE"),
        ("upkeep", "requests", "SELECT,UPDATE,DELETE"),
        ("upkeep", "inbox", "SELECT,UPDATE,DELETE"),
        ("upkeep", "outbox", "SELECT,UPDATE,DELETE"),
        ("monitor", "stats", "SELECT"),
    ];

    /// A call of each function of the extension, and the profiles that may make it (any answer
    /// but 42501); every other profile gets 42501. Functions that touch no table are open to all.
    /// `upkeep` holds UPDATE and DELETE to reclaim and purge, which also end, forget and take what
    /// those privileges allow: table privileges cannot tell these apart (documented).
    /// Every profile, and a role with none.
    const EVERYONE: &[&str] = &["app", "publisher", "upkeep", "monitor", "none"];

    const CALLS: &[(&str, &str, &[&str])] = &[
        (
            "idem_claim",
            "SELECT idem_claim('g', 'k-' || pg_backend_pid() || clock_timestamp(), 'h')",
            &["app"],
        ),
        (
            "idem_complete",
            "SELECT idem_complete('g', 'none', '{}')",
            &["app", "upkeep"],
        ),
        (
            "idem_fail",
            "SELECT idem_fail('g', 'none', true)",
            &["app", "upkeep"],
        ),
        (
            "idem_checkpoint",
            "SELECT idem_checkpoint('g', 'none', 'p')",
            &["app", "upkeep"],
        ),
        (
            "idem_forget",
            "SELECT idem_forget('g', 'none')",
            &["app", "upkeep"],
        ),
        (
            "idem_call",
            "SELECT idem_call('g', 'c-' || clock_timestamp(), '{}', 'tests.grants_fn(jsonb)')",
            &["app"],
        ),
        (
            "idem_inbox_accept",
            "SELECT idem_inbox_accept('g', 'm-' || clock_timestamp(), 'h')",
            &["app"],
        ),
        (
            "idem_advance",
            "SELECT idem_advance('g', 'e', (extract(epoch from clock_timestamp()) * 1e6)::int8)",
            &["app"],
        ),
        (
            "idem_outbox_put",
            "SELECT idem_outbox_put('g', '{}')",
            &["app"],
        ),
        (
            "idem_outbox_take",
            "SELECT * FROM idem_outbox_take(1, topic => 'g-none')",
            &["publisher", "upkeep"],
        ),
        (
            "idem_outbox_ack",
            "SELECT idem_outbox_ack(ARRAY[-1]::int8[])",
            &["publisher", "upkeep"],
        ),
        (
            "idem_outbox_nack",
            "SELECT idem_outbox_nack(-1, 'e')",
            &["publisher", "upkeep"],
        ),
        // The app may delete its records (idem_forget), so it can purge and reclaim them too.
        ("idem_reclaim", "SELECT idem_reclaim(1)", &["app", "upkeep"]),
        ("idem_purge", "SELECT idem_purge(1)", &["app", "upkeep"]),
        (
            "idem_inbox_purge",
            "SELECT idem_inbox_purge(1)",
            &["upkeep"],
        ),
        (
            "idem_outbox_purge",
            "SELECT idem_outbox_purge(1)",
            &["upkeep"],
        ),
        (
            "idem_metrics",
            "SELECT count(*) FROM idem_metrics()",
            &["monitor"],
        ),
        ("idem_hash", "SELECT idem_hash('{}'::jsonb)", EVERYONE),
        (
            "idem_canonical",
            "SELECT idem_canonical('{}'::jsonb)",
            EVERYONE,
        ),
        ("idem_lock_key", "SELECT idem_lock_key('s', 'k')", EVERYONE),
        ("idem_retryable", "SELECT idem_retryable('40001')", EVERYONE),
        ("idem_version", "SELECT idem_version()", EVERYONE),
        (
            "idem_grant_statements",
            "SELECT idem_grant_statements('app')",
            EVERYONE,
        ),
        ("idem_http_headers", "SELECT idem_http_headers()", EVERYONE),
        (
            "idem_http_response",
            "SELECT idem_http_response(201, '{}', 'x')",
            EVERYONE,
        ),
        (
            "idem_http_replay",
            "SELECT idem_http_replay(NULL::idem_claim_result)",
            EVERYONE,
        ),
        (
            "idem_http_fail",
            "SELECT idem_http_fail('g', 'none', idem_http_response(400, '{}', 'x'))",
            &["app", "upkeep"],
        ),
        // Granting needs the grant option on the objects: only their owner has it.
        ("idem_grant", "SELECT idem_grant('grants_none', 'app')", &[]),
        (
            "idem_revoke",
            "SELECT idem_revoke('grants_none', 'app')",
            &[],
        ),
        // Distributing the table (Citus) is for its owner; without Citus it raises P4060.
        ("idem_distribute", "SELECT idem_distribute('key')", &[]),
        // The generations layout (sql/layout.sql): switching and rotating are the table
        // owner's; its steps are not PUBLIC's; the helpers a claim calls need only the schema.
        ("idem_set_layout", "SELECT idem_set_layout('flat')", &[]),
        ("idem_rotate", "SELECT idem_rotate()", &[]),
        (
            "layout_bounded",
            "SELECT idempotency.layout_bounded('1 s', 'x', 'rotate', NULL, false, 1)",
            &[],
        ),
        (
            "layout_switch",
            "SELECT idempotency.layout_switch('flat')",
            &[],
        ),
        (
            "layout_rotate",
            "SELECT idempotency.layout_rotate(false, 1)",
            &[],
        ),
        (
            "layout_sync_grants",
            "SELECT idempotency.layout_sync_grants()",
            &[],
        ),
        (
            "layout_begin",
            "SELECT idempotency.layout_begin('x', '1 s')",
            &[],
        ),
        (
            "layout_table",
            "SELECT idempotency.layout_table(1::int2, true)",
            &["app", "publisher", "upkeep", "monitor"],
        ),
        // A trigger function: called directly, 0A000 for whoever may reach the schema.
        (
            "layout_guard",
            "SELECT idempotency.layout_guard()",
            &["app", "publisher", "upkeep", "monitor"],
        ),
        (
            "layout_columns",
            "SELECT idempotency.layout_columns()",
            &["app", "publisher", "upkeep", "monitor"],
        ),
        (
            "layout_truncated_since_snapshot",
            "SELECT idempotency.layout_truncated_since_snapshot()",
            &["app", "publisher", "upkeep", "monitor"],
        ),
        (
            "layout_claim_generation",
            "SELECT idempotency.layout_claim_generation()",
            &["app", "publisher", "upkeep", "monitor"],
        ),
        (
            "layout_refusal",
            "SELECT idempotency.layout_refusal(true)",
            &["app", "publisher", "upkeep", "monitor"],
        ),
        (
            "layout_on_citus",
            "SELECT idempotency.layout_on_citus()",
            &["app", "publisher", "upkeep", "monitor"],
        ),
        (
            "layout_refuse",
            "SELECT idempotency.layout_refuse(NULL)",
            &["app", "publisher", "upkeep", "monitor"],
        ),
        // A claim's policy probe (row-level security) needs what a new claim needs.
        (
            "claim_policy_probe",
            "SELECT idempotency.claim_policy_probe('g', 'probe', 'h', NULL)",
            &["app"],
        ),
        // CDC messages (docs/cdc.md): signing and verifying read the secret, so they are the
        // app profile's; the HMAC itself is pure.
        (
            "cdc_hmac",
            "SELECT idempotency.cdc_hmac('k', 'm')",
            &["app", "publisher", "upkeep", "monitor"],
        ),
        (
            "cdc_message",
            "SELECT idempotency.cdc_message('t', 'k', '{}', NULL)",
            &["app"],
        ),
        ("idem_cdc_verify", "SELECT idem_cdc_verify('{}')", &["app"]),
        // The HMAC under the secret: its owner's, through the two above.
        ("cdc_sign", "SELECT idempotency.cdc_sign('m')", &[]),
        (
            "idem_cdc_verified",
            "SELECT idem_cdc_verified('{}')",
            &["app"],
        ),
        // The put's argument checks read nothing.
        (
            "outbox_put_check",
            "SELECT idempotency.outbox_put_check('t', '{}', NULL, NULL)",
            &["app", "publisher", "upkeep", "monitor"],
        ),
    ];

    #[pg_test]
    fn grant_profiles_give_exactly_what_they_say() {
        catalog_turn();
        run("CREATE FUNCTION tests.grants_fn(r jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT r'");
        // Every function of the extension has a row above.
        let functions = one::<String>(
            "SELECT string_agg(DISTINCT p.proname, ',' ORDER BY p.proname) FROM pg_proc p
         JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
         JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
         WHERE p.pronamespace <> 'tests'::regnamespace",
        )
        .unwrap_or_default();
        for name in functions.split(',') {
            assert!(
                CALLS.iter().any(|(f, _, _)| *f == name),
                "{name} has no row in CALLS"
            );
        }
        let profiles = ["app", "publisher", "upkeep", "monitor", "none"];
        for profile in profiles {
            let role = format!("grants_{profile}");
            run(&format!("CREATE ROLE {role}"));
            run(&format!("GRANT USAGE ON SCHEMA tests TO {role}"));
            if profile != "none" {
                run(&format!("SELECT idem_grant('{role}', '{profile}')"));
            }
        }
        for profile in profiles {
            let role = format!("grants_{profile}");
            // Tables and views of schema idempotency: exactly the listed privileges.
            let tables = one::<String>(
                "SELECT string_agg(relname, ',') FROM pg_class
             WHERE relnamespace = 'idempotency'::regnamespace AND relkind IN ('r', 'v')",
            )
            .unwrap_or_default();
            for table in tables.split(',') {
                let expected = TABLE_PRIVILEGES
                    .iter()
                    .find(|(p, t, _)| *p == profile && *t == table)
                    .map_or("", |(_, _, privileges)| privileges);
                let has = one::<String>(&format!(
                    "SELECT coalesce(string_agg(p, ',' ORDER BY o), '') FROM unnest(
                   ARRAY['SELECT','INSERT','UPDATE','DELETE','TRUNCATE','REFERENCES','TRIGGER'])
                   WITH ORDINALITY AS u(p, o)
                 WHERE has_table_privilege('{role}', 'idempotency.{table}', p)"
                ))
                .unwrap_or_default();
                assert_eq!(has, expected, "{profile} on {table}");
            }
            for (name, call, allowed) in CALLS {
                run(&format!("SET LOCAL ROLE {role}"));
                let got = sqlstate(call);
                run("RESET ROLE");
                // Allowed: anything but a privilege error (P4010 for a key that is not there is
                // an answer, not a refusal).
                if allowed.contains(&profile) {
                    assert!(
                        got != "42501" && !got.starts_with("XX"),
                        "{profile}: {name}: {got}"
                    );
                } else {
                    assert_eq!(got, "42501", "{profile}: {name}");
                }
            }
        }
        // Revoking takes back exactly that.
        run("SELECT idem_revoke('grants_app', 'app')");
        assert_eq!(
            one::<bool>(
                "SELECT has_table_privilege('grants_app', 'idempotency.requests', 'SELECT')"
            ),
            Some(false)
        );
        assert_eq!(
            sqlstate("SELECT idem_grant('grants_app', 'admin')"),
            "22023"
        );
    }

    /// The table privileges `role` holds itself, as `table:PRIV,...;` for every table and view
    /// of schema idempotency, and whether it has USAGE on the schema.
    fn held(role: &str) -> String {
        one::<String>(&format!(
            "SELECT has_schema_privilege('{role}', 'idempotency', 'USAGE') || ' ' ||
                    coalesce(string_agg(c.relname || ':' || e.privilege_type, ','
                             ORDER BY c.relname, e.privilege_type), '')
             FROM pg_class c, aclexplode(c.relacl) e
             WHERE c.relnamespace = 'idempotency'::regnamespace
               AND e.grantee = '{role}'::regrole"
        ))
        .unwrap_or_default()
    }

    /// Revoking one profile keeps what the role's other profiles need (round 6, finding 7).
    #[pg_test]
    fn revoking_a_profile_keeps_what_the_others_need() {
        catalog_turn();
        run("CREATE ROLE grants_two");
        run("SELECT idem_grant('grants_two', 'app')");
        let app_only = held("grants_two");
        run("SELECT idem_grant('grants_two', 'upkeep')");
        run("SELECT idem_revoke('grants_two', 'upkeep')");
        // A profile counts as held when all of its privileges are: upkeep's include all of
        // publisher's, so publisher's UPDATE on the outbox stays until publisher is revoked.
        assert_eq!(
            held("grants_two"),
            app_only.replace("outbox:SELECT", "outbox:SELECT,outbox:UPDATE"),
            "app's and publisher's privileges after revoking upkeep"
        );
        run("SELECT idem_revoke('grants_two', 'publisher')");
        assert_eq!(
            held("grants_two"),
            app_only,
            "app's privileges after revoking publisher"
        );
        run("SELECT idem_revoke('grants_two', 'app')");
        assert_eq!(held("grants_two"), "false ");

        // Two profiles that share only USAGE: the schema stays usable for the one kept.
        run("CREATE ROLE grants_mp");
        run("SELECT idem_grant('grants_mp', 'monitor')");
        run("SELECT idem_grant('grants_mp', 'publisher')");
        run("SELECT idem_revoke('grants_mp', 'publisher')");
        assert_eq!(held("grants_mp"), "true stats:SELECT");
        run("SELECT idem_revoke('grants_mp', 'monitor')");
        assert_eq!(held("grants_mp"), "false ");
    }
}
