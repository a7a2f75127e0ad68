//! No statement of the extension resolves anything through `search_path` (issue #11, finding 1).
//!
//! 1. Every function is run through its SQL paths (row-level security on, REPEATABLE READ), and
//!    the backend reports the text of every statement it prepared (`tests.prepared_statements`).
//!    Their number must equal the `static …: Statement` definitions in src/.
//! 2. From that text alone, every operator symbol and every function name the statements use is
//!    found, and an attacker plants look-alikes of each (on every type pair `pg_catalog` has for
//!    the symbol among the extension's column types, and on each of the extension's enums) in a
//!    schema that victims put first on their `search_path`. Each look-alike raises a WARNING and
//!    tries `ALTER ROLE attacker SUPERUSER`; a boolean one answers `true`.
//! 3. The same calls are run again, by a superuser and by an ordinary role, with the look-alikes
//!    first on the path: the answers must be the same, no look-alike may run, and the attacker
//!    must not become superuser. Statically, no operator may appear unqualified in the text and
//!    no construct that hides one (`IN (`, `IS DISTINCT FROM`, `NULLIF`, a simple `CASE`).

use crate::common;

use std::collections::BTreeSet;

use common::{Client, sqlstate};

mod plant;
mod portable;
mod sql_text;
use plant::plant;
use sql_text::{CONSTRUCTS, functions, operators, statement_table_alias, without_literals};

crate::own_database!();

/// Every call of the extension, in an order that takes each statement's path; `{s}` is the
/// run's scope. Each answer is recorded as text.
pub(super) const CALLS: &[&str] = &[
    "SELECT outcome::text FROM idem_claim('{s}', 'k1', 'h1')",
    "SELECT outcome::text FROM idem_claim('{s}', 'k1', 'h1')",
    // A key another session is inserting (HELD_KEY): under RLS, the policy probe.
    "SELECT outcome::text FROM idem_claim('held', 'k', 'h')",
    "SELECT pg_catalog.num_nulls(idem_checkpoint('{s}', 'k1', 'p1'))::text",
    "SELECT idem_complete('{s}', 'k1', '{\"a\": 1}')::text",
    "SELECT idem_complete('{s}', 'k1', '{\"a\": 1}')::text",
    "SELECT idem_complete('{s}', 'k1', '{\"a\": 2}')::text",
    "SELECT pg_catalog.concat(outcome, ' ', response) FROM idem_claim('{s}', 'k1', 'h1')",
    "SELECT outcome::text FROM idem_claim('{s}', 'k1', 'other')",
    "SELECT outcome::text FROM idem_claim('{s}', 'k2', 'h2')",
    "SELECT idem_fail('{s}', 'k2', true, 'E1', 'boom')::text",
    "SELECT pg_catalog.concat(outcome, ' ', attempt) FROM idem_claim('{s}', 'k2', 'h2')",
    "SELECT idem_complete('{s}', 'k2', '{}', attempt => 1)::text",
    "SELECT idem_fail('{s}', 'k2', false, 'E2', 'final')::text",
    "SELECT idem_fail('{s}', 'k2', false, 'E2', 'final')::text",
    "SELECT pg_catalog.num_nulls(idem_checkpoint('{s}', 'k2', 'p'))::text",
    "SELECT outcome::text FROM idem_claim('{s}', 'k3', 'h3', lease => '1 millisecond')",
    "SELECT pg_catalog.pg_sleep(0.02)::text",
    "SELECT pg_catalog.concat(outcome, ' ', attempt) FROM idem_claim('{s}', 'k3', 'h3')",
    "SELECT outcome::text FROM idem_claim('{s}', 'k4', 'h4', retention => '1 millisecond')",
    "SELECT idem_complete('{s}', 'k4', 'null')::text",
    "SELECT pg_catalog.pg_sleep(0.02)::text",
    "SELECT outcome::text FROM idem_claim('{s}', 'k4', 'h4-new')",
    "SELECT idem_forget('{s}', 'k4')::text",
    "SELECT idem_forget('{s}', 'k4')::text",
    "SELECT pg_catalog.int8ge(idem_reclaim(), 0)::text",
    "SELECT pg_catalog.int8ge(idem_purge(), 0)::text",
    "SELECT idem_inbox_accept('{s}', 'm1', 'h')::text",
    "SELECT idem_inbox_accept('{s}', 'm1', 'h')::text",
    "SELECT idem_inbox_accept('{s}', 'm1', 'other')::text",
    "SELECT idem_inbox_accept('{s}', 'm2', 'h', retention => '1 millisecond')::text",
    "SELECT pg_catalog.pg_sleep(0.02)::text",
    "SELECT idem_inbox_accept('{s}', 'm2', 'h')::text",
    "SELECT pg_catalog.int8ge(idem_inbox_purge(), 0)::text",
    "SELECT idem_advance('{s}', 'e', 2)::text",
    "SELECT idem_advance('{s}', 'e', 1)::text",
    "SELECT pg_catalog.int8gt(idem_outbox_put('{s}', '{}', dedupe_key => 'd'), 0)::text",
    "SELECT pg_catalog.int8gt(idem_outbox_put('{s}', '{}', dedupe_key => 'd'), 0)::text",
    "SELECT idem_outbox_ack(ARRAY(SELECT id FROM idem_outbox_take(10, topic => '{s}')))::text",
    "SELECT pg_catalog.int8gt(idem_outbox_put('{s}', '{\"n\": 2}'), 0)::text",
    "SELECT idem_outbox_nack((SELECT id FROM idem_outbox_take(10, topic => '{s}')), 'e')::text",
    "SELECT pg_catalog.int8ge(idem_outbox_purge(), 0)::text",
    // The CDC deliveries (src/entry/outbox_cdc.rs).
    "SELECT pg_catalog.set_config('idempotency.outbox_delivery', 'cdc_table', false)",
    "SELECT pg_catalog.int8gt(idem_outbox_put('{s}', '{}', dedupe_key => 'cdc'), 0)::text",
    "SELECT pg_catalog.int8gt(idem_outbox_put('{s}', '{}', dedupe_key => 'cdc'), 0)::text",
    "SELECT pg_catalog.set_config('idempotency.outbox_delivery', 'cdc_message', false)",
    "SELECT pg_catalog.int8gt(idem_outbox_put('{s}', '{\"n\": 3}', 'cdc-m', '{}'), 0)::text",
    "SELECT pg_catalog.set_config('idempotency.outbox_delivery', 'poll', false)",
    "SELECT outcome::text FROM idem_call('{s}', 'c1', '{}', 'public.effect(jsonb)')",
    "SELECT outcome::text FROM idem_call('{s}', 'c1', '{}', 'public.effect(jsonb)')",
    "SELECT pg_catalog.concat(outcome, ' ', failure_code) FROM idem_call('{s}', 'c2', '{}', 'public.refuse(jsonb)')",
    // The Citus paths (src/steps/citus.rs), taken here on the plain table.
    "SELECT tests.assume_distributed(true)::text",
    "SELECT outcome::text FROM idem_claim('{s}', 'd1', 'h1', lease => '1 millisecond')",
    "SELECT pg_catalog.num_nulls(idem_checkpoint('{s}', 'd1', 'p1', 1))::text",
    "SELECT pg_catalog.pg_sleep(0.02)::text",
    "SELECT pg_catalog.int8ge(idem_reclaim(), 0)::text",
    "SELECT pg_catalog.concat(outcome, ' ', attempt, ' ', failure_code) FROM idem_claim('{s}', 'd1', 'h1')",
    "SELECT outcome::text FROM idem_claim('{s}', 'd2', 'h')",
    "SELECT idem_complete('{s}', 'd2', '{}')::text",
    "SELECT idem_complete('{s}', 'd2', '{\"b\": 1}')::text",
    "SELECT outcome::text FROM idem_claim('{s}', 'd3', 'h')",
    "SELECT idem_fail('{s}', 'd3', true, 'E', 'm')::text",
    "SELECT pg_catalog.concat(outcome, ' ', attempt) FROM idem_claim('{s}', 'd3', 'h')",
    "SELECT idem_fail('{s}', 'd3', false, 'E', 'm', attempt => 1)::text",
    "SELECT idem_fail('{s}', 'd3', false, 'E', 'm')::text",
    "SELECT outcome::text FROM idem_claim('{s}', 'd4', 'h', retention => '1 millisecond')",
    "SELECT idem_complete('{s}', 'd4', 'null')::text",
    "SELECT pg_catalog.pg_sleep(0.02)::text",
    "SELECT pg_catalog.int8ge(idem_purge(), 0)::text",
    "SELECT outcome::text FROM idem_claim('{s}', 'd4', 'h')",
    "SELECT tests.assume_distributed(false)::text",
];

/// Run every call; the answers (`ok: …` or `err: SQLSTATE`).
fn exercise(client: &mut Client, scope: &str) -> Vec<String> {
    exercise_calls(client, scope, CALLS)
}

/// Run `calls`; the answers (`ok: …` or `err: SQLSTATE`).
pub(super) fn exercise_calls(client: &mut Client, scope: &str, calls: &[&str]) -> Vec<String> {
    calls
        .iter()
        .map(|call| {
            let sql = call.replace("{s}", scope);
            match client.query_opt(&sql, &[]) {
                Ok(Some(row)) => format!("ok: {:?}", row.get::<_, Option<String>>(0)),
                Ok(None) => "ok: no row".into(),
                Err(e) => format!("err: {}", sqlstate(&e)),
            }
        })
        .collect()
}

#[test]
fn no_statement_resolves_through_search_path() {
    // The CDC outbox's statements run only where changes are decoded (docs/cdc.md): the
    // shared cluster has wal_level = logical.
    let cluster = cluster();
    let mut admin = cluster.session();
    admin
        .batch_execute(
            "CREATE ROLE victim LOGIN; CREATE ROLE attacker LOGIN;
             GRANT USAGE ON SCHEMA idempotency TO victim;
             GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA idempotency TO victim;
             GRANT EXECUTE ON FUNCTION idempotency.cdc_message(text, text, jsonb, jsonb) TO victim;
             ALTER TABLE idempotency.requests ENABLE ROW LEVEL SECURITY;
             CREATE POLICY everything ON idempotency.requests USING (true) WITH CHECK (true);
             CREATE FUNCTION public.effect(r jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT r';
             CREATE FUNCTION public.refuse(r jsonb) RETURNS jsonb LANGUAGE plpgsql
               AS 'BEGIN RAISE EXCEPTION USING ERRCODE = ''22023''; END';
             CREATE SCHEMA hijack AUTHORIZATION attacker;
             GRANT USAGE ON SCHEMA hijack TO PUBLIC; GRANT USAGE ON SCHEMA tests TO victim;",
        )
        .expect("set-up");

    // 1. The statements, from a backend that ran every call (as `victim`: RLS on, so SQL).
    let (mut victim, _) = cluster.connect_collecting(&cluster.name, "victim");
    victim
        .batch_execute("SET default_transaction_isolation = 'repeatable read'")
        .expect("rr");
    // The generations layout's inserts (sql/layout.sql): without row-level security, which it
    // refuses; a new key in generations 1, 2 and 3. Then flat and RLS again.
    let switch = |admin: &mut Client, sql: &str| admin.batch_execute(sql).expect("layout");
    switch(
        &mut admin,
        "DROP POLICY everything ON idempotency.requests;
         ALTER TABLE idempotency.requests DISABLE ROW LEVEL SECURITY;
         SELECT idem_set_layout('generations');",
    );
    let generation = "SELECT outcome::text FROM idem_claim('gen', $1, 'h')";
    let new_key = |victim: &mut Client, key: &str| -> String {
        victim.query_one(generation, &[&key]).expect("claim").get(0)
    };
    assert_eq!(new_key(&mut victim, "in-g1"), "new_claim");
    switch(&mut admin, "SELECT idem_rotate(force => true)");
    assert_eq!(new_key(&mut victim, "in-g2"), "new_claim");
    switch(&mut admin, "SELECT idem_rotate(force => true)");
    assert_eq!(new_key(&mut victim, "in-g3"), "new_claim");
    // The upkeep's batches in this layout, picked across the generations through the table.
    victim
        .batch_execute("SELECT idem_purge(); SELECT idem_reclaim();")
        .expect("upkeep in the generations layout");
    switch(
        &mut admin,
        "SELECT idem_set_layout('flat');
         ALTER TABLE idempotency.requests ENABLE ROW LEVEL SECURITY;
         CREATE POLICY everything ON idempotency.requests USING (true) WITH CHECK (true);",
    );
    // A claim that stays uncommitted for the whole test: ('held', 'k') is being inserted.
    let mut holder = cluster.session();
    holder
        .batch_execute("BEGIN; SELECT idem_claim('held', 'k', 'h');")
        .expect("held key");

    let baseline = exercise(&mut victim, "base");
    let statements: BTreeSet<String> = victim
        .query("SELECT s FROM tests.prepared_statements() AS s", &[])
        .expect("prepared_statements")
        .iter()
        .map(|row| row.get(0))
        .collect();
    let defined = count_statement_definitions();
    assert_eq!(
        statements.len(),
        defined,
        "every Statement of src/ must be prepared by the calls; got:\n{statements:#?}"
    );

    // 2. From the text: no unqualified operator, no construct hiding one.
    let mut symbols = BTreeSet::new();
    let mut names = BTreeSet::new();
    let mut problems = Vec::new();
    for sql in &statements {
        for (symbol, qualified) in operators(sql) {
            if !qualified {
                problems.push(format!("unqualified operator {symbol:?} in: {sql}"));
            }
            symbols.insert(symbol);
        }
        let upper = without_literals(sql).to_uppercase();
        for hidden in [
            " IN (",
            "IS DISTINCT FROM",
            "IS NOT DISTINCT FROM",
            "NULLIF(",
        ] {
            if upper.contains(hidden) {
                problems.push(format!("{hidden:?} hides an operator in: {sql}"));
            }
        }
        for (i, _) in upper.match_indices("CASE") {
            if !upper[i + 4..].trim_start().starts_with("WHEN") {
                problems.push(format!("a simple CASE hides an operator in: {sql}"));
            }
        }
        for (name, schema) in functions(sql) {
            match schema.as_deref() {
                Some("pg_catalog") => {
                    names.insert(name);
                }
                Some(_) => {}
                None => {
                    if !(CONSTRUCTS.contains(&name.to_uppercase().as_str())
                        || statement_table_alias(sql, &name))
                    {
                        problems.push(format!("unqualified function {name:?} in: {sql}"));
                    }
                }
            }
        }
    }
    assert!(
        symbols.contains("=") && names.contains("now"),
        "{symbols:?} {names:?}"
    );

    // The attacker plants a look-alike of each, found from the text above.
    let mut attacker = cluster.connect(&cluster.name);
    attacker.batch_execute("SET ROLE attacker").expect("role");
    let planted = plant(&mut attacker, &symbols, &names);
    assert!(planted > 20, "only {planted} look-alikes planted");

    // 3. Victims with the look-alikes first on their path.
    let hijacks = hijacked_runs(
        cluster,
        &cluster.name,
        "SET default_transaction_isolation = 'repeatable read';",
        CALLS,
        &baseline,
    );
    let escalated: bool = admin
        .query_one(
            "SELECT rolsuper FROM pg_roles WHERE rolname = 'attacker'",
            &[],
        )
        .expect("rolsuper")
        .get(0);
    assert!(
        !escalated && hijacks.is_empty() && problems.is_empty(),
        "attacker became superuser: {escalated}\nlook-alikes run: {hijacks:#?}\nin the text: {problems:#?}"
    );
}

/// The calls run by `victim` and by a superuser with the look-alikes first on their path
/// (after `setup`): what differed from `baseline`, and which look-alikes ran.
pub(super) fn hijacked_runs(
    cluster: &common::Cluster,
    db: &str,
    setup: &str,
    calls: &[&str],
    baseline: &[String],
) -> Vec<String> {
    let mut hijacks = Vec::new();
    for (user, scope) in [
        ("victim", "hijacked-victim"),
        ("postgres", "hijacked-superuser"),
    ] {
        let (mut client, notices) = cluster.connect_collecting(db, user);
        client
            .batch_execute(&format!(
                "{setup} SET search_path = hijack, pg_catalog, public"
            ))
            .expect("victim session");
        let answers = exercise_calls(&mut client, scope, calls);
        if answers != baseline {
            hijacks.push(format!(
                "{user}: answers changed: {answers:?}, not {baseline:?}"
            ));
        }
        let ran: Vec<String> = notices
            .lock()
            .map(|n| {
                n.iter()
                    .filter(|m| m.contains("HIJACKED"))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        if !ran.is_empty() {
            hijacks.push(format!("{user} ran look-alikes: {ran:?}"));
        }
    }
    hijacks
}

/// `static NAME: Statement =` definitions in src/.
fn count_statement_definitions() -> usize {
    let mut count = 0;
    let mut dirs = vec![std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src"
    ))];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("read");
                // `static X: Statement =` is one; `static X: [Statement; N] =` is N.
                count += text
                    .lines()
                    .map(str::trim_start)
                    .filter(|l| l.starts_with("static ") || l.starts_with("pub(crate) static "))
                    .map(|l| {
                        if l.contains(": Statement =") {
                            return 1;
                        }
                        l.split_once(": [Statement; ")
                            .and_then(|(_, rest)| rest.split_once("] ="))
                            .map_or(0, |(n, _)| n.parse::<usize>().expect("array length"))
                    })
                    .sum::<usize>();
            }
        }
    }
    count
}
