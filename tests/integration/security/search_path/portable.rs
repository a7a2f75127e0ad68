//! The look-alike attack of `mod.rs` against the portable edition (issue 32: one suite, both
//! editions). Its statements are PL/pgSQL and SQL in the generated script rather than prepared
//! statements of src/, so the operators and `pg_catalog` functions to imitate are read from
//! that script; the calls are `mod.rs`'s, but for the native test hooks. An attacker plants a
//! look-alike of each in a schema that a victim and a superuser put first on their path: the
//! answers must not change, no look-alike may run, and the attacker must stay what it was.

use crate::common;

use std::collections::BTreeSet;

use super::{CALLS, exercise_calls, hijacked_runs, plant};

/// `mod.rs`'s calls that the portable edition has: not the native test hooks (`tests.`).
fn calls() -> Vec<&'static str> {
    CALLS
        .iter()
        .copied()
        .filter(|c| !c.contains("tests."))
        .collect()
}

/// The operator symbols and `pg_catalog` function names the script uses, and the comparison
/// and text operators any statement might use unqualified.
fn what_to_imitate(script: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut symbols: BTreeSet<String> = ["=", "<>", "<", ">", "<=", ">=", "||", "+", "-"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for (at, _) in script.match_indices("OPERATOR(pg_catalog.") {
        let rest = &script[at + "OPERATOR(pg_catalog.".len()..];
        if let Some(end) = rest.find(')') {
            symbols.insert(rest[..end].to_string());
        }
    }
    let mut names = BTreeSet::new();
    for (at, _) in script.match_indices("pg_catalog.") {
        let rest = &script[at + "pg_catalog.".len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if rest[end..].starts_with('(') && end > 0 {
            names.insert(rest[..end].to_string());
        }
    }
    (symbols, names)
}

#[test]
fn no_function_of_the_portable_edition_resolves_through_search_path() {
    let c = common::bare_cluster();
    let name = "search_path_portable";
    let script = common::portable_script(&[]);
    let mut owner = crate::portable::owned_database(c, name);
    owner
        .batch_execute(&script)
        .expect("the portable edition installs");
    let mut admin = c.connect(name);
    admin
        .batch_execute(
            "DO $$ BEGIN
                 IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'victim') THEN CREATE ROLE victim LOGIN; END IF;
                 IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'attacker') THEN CREATE ROLE attacker LOGIN; END IF;
             END $$;
             CREATE SCHEMA hijack AUTHORIZATION attacker;
             GRANT USAGE ON SCHEMA hijack TO PUBLIC;",
        )
        .expect("roles and the attacker's schema");
    owner
        .batch_execute(
            "GRANT USAGE ON SCHEMA idempotency TO victim;
             GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA idempotency TO victim;
             ALTER TABLE idempotency.requests ENABLE ROW LEVEL SECURITY;
             CREATE POLICY everything ON idempotency.requests USING (true) WITH CHECK (true);
             CREATE FUNCTION public.effect(r jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT r';
             CREATE FUNCTION public.refuse(r jsonb) RETURNS jsonb LANGUAGE plpgsql
               AS 'BEGIN RAISE EXCEPTION USING ERRCODE = ''22023''; END';",
        )
        .expect("the victim's grants, a policy, the callees");
    // A claim that stays uncommitted for the whole test: ('held', 'k') is being inserted.
    let mut holder = c.connect_as(name, &format!("{name}_owner"));
    holder
        .batch_execute("BEGIN; SELECT idem_claim('held', 'k', 'h');")
        .expect("held key");

    let calls = calls();
    let (mut victim, _) = c.connect_collecting(name, "victim");
    let baseline = exercise_calls(&mut victim, "base", &calls);
    assert!(
        baseline.iter().filter(|a| a.starts_with("ok")).count() > calls.len() / 2,
        "most calls answer: {baseline:?}"
    );

    let (symbols, names) = what_to_imitate(&script);
    let mut attacker = c.connect(name);
    attacker.batch_execute("SET ROLE attacker").expect("role");
    let planted = plant(&mut attacker, &symbols, &names);
    assert!(planted > 100, "only {planted} look-alikes planted");

    let hijacks = hijacked_runs(c, name, "", &calls, &baseline);
    let escalated: bool = admin
        .query_one(
            "SELECT rolsuper FROM pg_roles WHERE rolname = 'attacker'",
            &[],
        )
        .expect("rolsuper")
        .get(0);
    assert!(
        !escalated && hijacks.is_empty(),
        "attacker became superuser: {escalated}\nlook-alikes run: {hijacks:#?}"
    );
}
