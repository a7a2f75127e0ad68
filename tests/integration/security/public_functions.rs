//! Every function either edition lets PUBLIC execute, pinned and justified (the attacker's
//! review, F9), and none of the internal ones lets a role queue for a table's lock before its
//! rights are checked.

use crate::common;

use common::Client;

crate::own_database!();

/// The API, in the extension's schema, executable by PUBLIC in both editions: each checks the
/// caller's rights on the tables before it locks one (privileges.rs), or reads no table (the
/// hashes, canonical form, lock keys, HTTP helpers, grant statements, version), or does what
/// only the tables' owner may (idem_grant, idem_revoke, idem_set_layout, idem_rotate: GRANT
/// and DDL as the caller). SECURITY INVOKER all: the caller's rights and policies apply.
const API: &[&str] = &[
    "idem_advance",
    "idem_call",
    "idem_canonical",
    "idem_checkpoint",
    "idem_claim",
    "idem_complete",
    "idem_fail",
    "idem_forget",
    "idem_grant",
    "idem_grant_statements",
    "idem_hash",
    "idem_http_fail",
    "idem_http_headers",
    "idem_http_replay",
    "idem_http_response",
    "idem_inbox_accept",
    "idem_inbox_purge",
    "idem_lock_key",
    "idem_outbox_ack",
    "idem_outbox_nack",
    "idem_outbox_purge",
    "idem_outbox_put",
    "idem_outbox_take",
    "idem_purge",
    "idem_reclaim",
    "idem_retryable",
    "idem_revoke",
    "idem_rotate",
    "idem_set_layout",
    "idem_version",
];

/// The portable edition's own API: its upkeep by hand or by pg_cron (the caller's rights), and
/// the canonical form's helpers (pure).
const PORTABLE_API: &[&str] = &[
    "_idem_jcs_container",
    "_idem_jcs_depth",
    "_idem_jcs_fast",
    "_idem_jcs_number",
    "_idem_jcs_rows",
    "_idem_jcs_sort_key",
    "idem_schedule_upkeep",
    "idem_upkeep",
];

/// Helpers in schema idempotency, reachable only with USAGE on it (a profile of idem_grant),
/// SECURITY INVOKER: pure (cdc_hmac, outbox_put_check), or reading what the caller may read,
/// each checking the rights first (the test below).
const HELPERS: &[&str] = &[
    "cdc_hmac",
    "claim_policy_probe",
    "layout_begin",
    "layout_bounded",
    "layout_claim_generation",
    "layout_columns",
    "layout_guard",
    "layout_on_citus",
    "layout_refusal",
    "layout_refuse",
    "layout_table",
    "layout_truncated_since_snapshot",
    "outbox_put_check",
];

/// The portable edition's helpers: its claim, call, upkeep and finish steps (the caller's
/// rights), argument checks and formatting (pure).
const PORTABLE_HELPERS: &[&str] = &[
    "portable_access",
    "portable_batch",
    "portable_batch_parts",
    "portable_call",
    "portable_call_overloaded",
    "portable_check_batch",
    "portable_clip",
    "portable_diagnose",
    "portable_foreign_trigger",
    "portable_insert_generation",
    "portable_interval",
    "portable_interval_debug",
    "portable_moved",
    "portable_name",
    "portable_optional",
    "portable_outbox_size",
    "portable_outbox_take",
    "portable_quote",
    "portable_setting",
];

/// (schema, name, a call with NULL arguments) of each function of the edition PUBLIC may run.
fn public_functions(db: &mut Client) -> Vec<(String, String, String)> {
    db.query(
        "SELECT n.nspname::text, p.proname::text,
                format('SELECT %s(%s)', p.oid::regproc::text,
                       (SELECT string_agg(format('NULL::%s', t::regtype), ', ')
                          FROM unnest(p.proargtypes::oid[]) AS t))
           FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
          WHERE (n.nspname = 'idempotency' OR p.proname LIKE 'idem\\_%' OR p.proname LIKE '\\_idem\\_%')
            AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'tests')
            AND has_function_privilege('public', p.oid, 'EXECUTE')
          ORDER BY 1, 2",
        &[],
    )
    .expect("functions")
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect()
}

/// `db`: the owner's session; `connect(role)`: a session of `role` in that database.
fn check(edition: &str, db: &mut Client, connect: &dyn Fn(&str) -> Client) {
    let found = public_functions(db);
    let mut names: Vec<&str> = found.iter().map(|(_, n, _)| n.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let mut want: Vec<&str> = API.iter().chain(HELPERS).copied().collect();
    if edition == "portable" {
        want.extend(PORTABLE_API.iter().chain(PORTABLE_HELPERS));
    }
    want.sort_unstable();
    assert_eq!(names, want, "{edition}: the functions PUBLIC may execute");
    // The internal ones, called with NULL arguments by a role with USAGE on the schema and no
    // other right while the tables are locked: each refuses (or answers) at once, none waits
    // for the lock (portable_diagnose did). NULLs stop some before any table: a first pass.
    connect("postgres")
        .batch_execute(
            "DO $$ BEGIN CREATE ROLE public_fn_usage LOGIN;
                 EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;",
        )
        .expect("role");
    db.batch_execute("GRANT USAGE ON SCHEMA idempotency TO public_fn_usage")
        .expect("usage");
    db.batch_execute(
        "BEGIN; LOCK TABLE idempotency.requests, idempotency.inbox, idempotency.outbox,
                           idempotency.versions IN ACCESS EXCLUSIVE MODE;",
    )
    .expect("lock");
    let mut c = connect("public_fn_usage");
    c.batch_execute("SET lock_timeout = '2s'").expect("timeout");
    for (schema, name, call) in &found {
        if schema != "idempotency" {
            continue;
        }
        let state = match c.batch_execute(call) {
            Ok(()) => "ok".to_string(),
            Err(e) => common::sqlstate(&e),
        };
        assert_ne!(
            state, "55P03",
            "{edition}: {name} waited for the lock: {call}"
        );
    }
    db.batch_execute("ROLLBACK").expect("rollback");
}

#[test]
fn every_function_public_may_execute_is_pinned_and_checks_rights_first() {
    let name = "sec_public_native";
    let mut native = cluster().database(name);
    check("native", &mut native, &|role| {
        cluster().connect_as(name, role)
    });
    let c = common::bare_cluster();
    let name = "sec_public_portable";
    let mut db = crate::portable::owned_database(c, name);
    db.batch_execute(&common::portable_script(&[]))
        .expect("install");
    check("portable", &mut db, &|role| c.connect_as(name, role));
}
