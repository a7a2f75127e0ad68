//! The consumers, docs/errors.md's table and a hostile `search_path`, on the portable edition.

use super::{cluster, error, install, outcome, portable_sql};
use crate::common::{self, Client, sql_block_after, sqlstate};

#[test]
fn consumers_inbox_versions_outbox_and_call() {
    let mut db = install("portable_consumers");
    let q = |db: &mut Client, sql: &str| common::answer(db, sql);
    assert_eq!(
        q(&mut db, "SELECT idem_inbox_accept('c', 'm', 'h')::text"),
        "true"
    );
    assert_eq!(
        q(&mut db, "SELECT idem_inbox_accept('c', 'm', 'h')::text"),
        "false"
    );
    assert_eq!(
        q(&mut db, "SELECT idem_inbox_accept('c', 'm', 'x')::text"),
        "ERROR P4050"
    );
    db.batch_execute("UPDATE idempotency.inbox SET processed_at = now() - interval '8 days', expires_at = now() - interval '1 day'").expect("age");
    assert_eq!(
        q(&mut db, "SELECT idem_inbox_accept('c', 'm', 'x')::text"),
        "true",
        "an expired row counts as absent"
    );
    assert_eq!(
        q(&mut db, "SELECT idem_advance('st', 'e', 2)::text"),
        "true"
    );
    assert_eq!(
        q(&mut db, "SELECT idem_advance('st', 'e', 2)::text"),
        "false"
    );
    assert_eq!(
        q(&mut db, "SELECT idem_advance('st', 'e', 3)::text"),
        "true"
    );
    let id = common::count(
        &mut db,
        "SELECT idem_outbox_put('t', '{\"a\": 1}', dedupe_key => 'd')",
    );
    assert_eq!(
        common::count(
            &mut db,
            "SELECT idem_outbox_put('t', '{\"a\": 2}', dedupe_key => 'd')"
        ),
        id
    );
    common::count(&mut db, "SELECT idem_outbox_put('t', '{\"b\": 1}')");
    assert_eq!(
        common::count(
            &mut db,
            "SELECT count(*) FROM idem_outbox_take(1, '1 hour', 't')"
        ),
        1
    );
    assert_eq!(
        common::count(
            &mut db,
            "SELECT count(*) FROM idem_outbox_take(10, '1 hour')"
        ),
        1,
        "the first is leased"
    );
    db.batch_execute(&format!("SELECT idem_outbox_nack({id}, 'down', '0 s')"))
        .expect("nack");
    assert_eq!(
        common::count(&mut db, "SELECT count(*) FROM idem_outbox_take(10)"),
        1,
        "a nacked message comes back"
    );
    assert_eq!(
        common::count(
            &mut db,
            &format!("SELECT idem_outbox_ack(ARRAY[{id}]::bigint[])")
        ),
        1
    );
    assert_eq!(
        common::count(
            &mut db,
            &format!("SELECT idem_outbox_ack(ARRAY[{id}]::bigint[])")
        ),
        0
    );
    db.batch_execute(
        "CREATE TABLE effects (n int); \
         CREATE FUNCTION eff(r jsonb) RETURNS jsonb LANGUAGE sql AS $$ INSERT INTO effects VALUES (1) RETURNING '{\"ok\": 1}'::jsonb $$; \
         CREATE FUNCTION bad(r jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$ BEGIN INSERT INTO effects VALUES (2); RAISE EXCEPTION 'no' USING ERRCODE = '23514'; END $$; \
         CREATE FUNCTION busy(r jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'later' USING ERRCODE = '40001'; END $$; \
         CREATE FUNCTION asserts(r jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$ BEGIN ASSERT false, 'nope'; RETURN r; END $$;",
    )
    .expect("callees");
    assert_eq!(
        outcome(&mut db, "idem_call('call', '1', '{}', 'eff(jsonb)')").0,
        "new_claim"
    );
    assert_eq!(
        outcome(&mut db, "idem_call('call', '1', '{}', 'eff(jsonb)')").0,
        "replay_success"
    );
    assert_eq!(
        common::count(&mut db, "SELECT count(*) FROM effects"),
        1,
        "called once"
    );
    let failed = db
        .query_one(
            "SELECT outcome::text, failure_code FROM idem_call('call', '2', '{}', 'bad(jsonb)')",
            &[],
        )
        .expect("bad");
    assert_eq!(
        (failed.get::<_, String>(0), failed.get::<_, String>(1)),
        ("final_failure".into(), "23514".into())
    );
    assert_eq!(
        common::count(&mut db, "SELECT count(*) FROM effects"),
        1,
        "the failed call's writes are undone"
    );
    assert_eq!(
        error(
            &mut db,
            "SELECT idem_call('call', '3', '{}', 'busy(jsonb)')"
        ),
        "40001",
        "a transient failure is re-raised"
    );
    assert_eq!(
        common::answer(
            &mut db,
            "SELECT failure_code FROM idem_call('call', '4', '{}', 'asserts(jsonb)')"
        ),
        "P0004"
    );
    assert_eq!(q(&mut db, "SELECT idem_retryable('40P01')::text"), "true");
    assert_eq!(q(&mut db, "SELECT idem_retryable('23505')::text"), "false");
}

#[test]
fn the_error_table_of_docs_errors_md() {
    let mut db = install("portable_errors");
    let page = common::repo_file("docs/errors.md");
    db.batch_execute(&sql_block_after(&page, "\n## Setup\n"))
        .expect("the page's setup block");
    let body = page
        .split("\n## Input rules\n")
        .nth(1)
        .expect("input rules");
    let body = body.split("\n## ").next().expect("section");
    let span = |cell: &str| -> String {
        let start = cell.find('`').expect("backtick") + 1;
        let len = cell[start..].find('`').expect("closing backtick");
        cell[start..start + len].to_string()
    };
    let mut checked = 0;
    let mut failures = Vec::new();
    for line in body.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        let (example, code, message) = (span(cells[2]), span(cells[3]), span(cells[4]));
        checked += 1;
        match db.query_one(&format!("SELECT ({example}) IS NULL"), &[]) {
            Ok(_) => failures.push(format!("{example}: succeeded")),
            Err(e) => {
                let got = e
                    .as_db_error()
                    .map(|d| d.message().to_string())
                    .unwrap_or_default();
                if sqlstate(&e) != code || got != message {
                    failures.push(format!(
                        "{example}: {} `{got}`, the page says {code} `{message}`",
                        sqlstate(&e)
                    ));
                }
            }
        }
    }
    assert!(checked >= 70, "only {checked} rows");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Look-alikes of what the edition calls, planted first on the installer's and the caller's
/// path: none may ever run.
#[test]
fn a_hostile_search_path_at_install_and_at_call_time() {
    let c = cluster();
    let mut admin = c.connect("postgres");
    for sql in [
        "DROP DATABASE IF EXISTS portable_hostile WITH (FORCE)",
        "DROP ROLE IF EXISTS portable_hostile_owner",
        "CREATE ROLE portable_hostile_owner LOGIN",
        "CREATE DATABASE portable_hostile OWNER portable_hostile_owner",
    ] {
        admin.batch_execute(sql).expect("database");
    }
    let mut attacker = c.connect("portable_hostile");
    attacker
        .batch_execute(
            "CREATE SCHEMA evil; CREATE TABLE evil.ran (what text); GRANT ALL ON SCHEMA evil TO PUBLIC; GRANT ALL ON evil.ran TO PUBLIC; \
             CREATE FUNCTION evil.trap(a text, b text) RETURNS bool LANGUAGE plpgsql AS $$ BEGIN INSERT INTO evil.ran VALUES ('op'); RETURN a::text = b::text; END $$; \
             CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.trap); \
             CREATE OPERATOR evil.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.trap); \
             CREATE FUNCTION evil.btrim(text, text) RETURNS text LANGUAGE plpgsql AS $$ BEGIN INSERT INTO evil.ran VALUES ('btrim'); RETURN ''; END $$; \
             CREATE FUNCTION evil.octet_length(text) RETURNS int LANGUAGE plpgsql AS $$ BEGIN INSERT INTO evil.ran VALUES ('octet_length'); RETURN 0; END $$; \
             CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql AS $$ BEGIN INSERT INTO evil.ran VALUES ('now'); RETURN pg_catalog.now(); END $$; \
             CREATE FUNCTION evil.jsonb_typeof(jsonb) RETURNS text LANGUAGE plpgsql AS $$ BEGIN INSERT INTO evil.ran VALUES ('jsonb_typeof'); RETURN 'object'; END $$; \
             CREATE FUNCTION evil.to_regclass(text) RETURNS regclass LANGUAGE plpgsql AS $$ BEGIN INSERT INTO evil.ran VALUES ('to_regclass'); RETURN NULL; END $$; \
             CREATE FUNCTION evil.has_table_privilege(oid, text) RETURNS bool LANGUAGE plpgsql AS $$ BEGIN INSERT INTO evil.ran VALUES ('has_table_privilege'); RETURN true; END $$; \
             CREATE FUNCTION evil.set_config(text, text, bool) RETURNS text LANGUAGE plpgsql AS $$ BEGIN INSERT INTO evil.ran VALUES ('set_config'); RETURN ''; END $$; \
             ALTER ROLE portable_hostile_owner SET search_path = evil, public, pg_catalog",
        )
        .expect("plant look-alikes");
    let mut db = c.connect_as("portable_hostile", "portable_hostile_owner");
    db.batch_execute(portable_sql())
        .expect("install on a hostile path");
    db.batch_execute("CREATE FUNCTION public.cb(r jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT r'")
        .expect("a callee");
    db.batch_execute(
        "SET search_path = evil, public, pg_catalog; \
         SELECT idem_call('s', 'c', '{}', 'public.cb(jsonb)'); SELECT idem_call('s', 'c', '{}', 'public.cb(jsonb)'); \
         SELECT idem_claim('s', 'k', 'h'); SELECT idem_checkpoint('s', 'k', 'p'); SELECT idem_complete('s', 'k', '{}'); \
         SELECT idem_claim('s', 'k', 'h'); SELECT idem_claim('s', 'f', 'h'); SELECT idem_fail('s', 'f', true); \
         SELECT idem_claim('s', 'f', 'h'); SELECT idem_forget('s', 'f'); \
         SELECT idem_inbox_accept('c', 'm', 'h'); SELECT idem_advance('st', 'e', 1); \
         SELECT idem_outbox_put('t', '{}', 'd', '{}'); SELECT * FROM idem_outbox_take(); SELECT idem_outbox_ack('{1}'); \
         SELECT idem_reclaim(); SELECT idem_purge(); SELECT idem_inbox_purge(); SELECT idem_outbox_purge(); \
         SELECT * FROM idempotency.stats;",
    )
    .expect("calls on a hostile path");
    // The generations layout's functions too: the switch both ways, claims into a generation,
    // forced rotations and the upkeep's rotation step (docs/retention.md).
    db.batch_execute(
        "SET search_path = evil, public, pg_catalog; \
         SELECT idem_set_layout('generations'); SELECT idem_claim('s', 'g', 'h'); \
         SELECT idem_complete('s', 'g', '{}'); SELECT idem_claim('s', 'g', 'h'); \
         SELECT idem_rotate(force => true); SELECT idem_rotate(force => true); \
         SELECT * FROM idem_upkeep(); SELECT idem_purge(); SELECT idem_reclaim(); \
         SELECT idem_set_layout('flat');",
    )
    .expect("the layout's calls on a hostile path");
    assert_eq!(
        common::count(&mut db, "SELECT pg_catalog.count(*) FROM evil.ran"),
        0,
        "a look-alike ran"
    );
    // Every function of the edition pins its search_path, but idem_call's SQL wrapper, which
    // hands the caller's path to the callee (portable/call.sql).
    db.batch_execute("SET search_path = pg_catalog")
        .expect("plain path");
    let unpinned = common::count(
        &mut db,
        "SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace \
         WHERE (n.nspname = 'idempotency' OR p.proname LIKE 'idem%') AND p.proname <> 'idem_call' \
           AND NOT ('search_path=pg_catalog, pg_temp' = ANY (coalesce(p.proconfig, '{}')))",
    );
    assert_eq!(unpinned, 0, "a function without SET search_path");
    // SECURITY INVOKER, but the two that read the CDC secret (docs/cdc.md), which PUBLIC may
    // not call.
    let definers = common::answer(
        &mut db,
        "SELECT pg_catalog.string_agg(p.proname || ' ' || pg_catalog.has_function_privilege('public', p.oid, 'EXECUTE'), \
                ',' ORDER BY p.proname) \
         FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace \
         WHERE p.prosecdef AND (n.nspname = 'idempotency' OR p.proname LIKE 'idem%')",
    );
    assert_eq!(
        definers, "cdc_message false,idem_cdc_verify false",
        "SECURITY INVOKER only, but the CDC secret's readers"
    );
}
