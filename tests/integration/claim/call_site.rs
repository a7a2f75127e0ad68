//! The result-row cache of idem_claim and idem_call (src/steps/result_row.rs) when a cache
//! invalidation arrives while a backend is building it: the calls of that backend must return
//! correct rows in that transaction and in every later one (security audit, finding 3: the
//! cache used to keep a pointer into memory freed at the end of the transaction).
//!
//! Needs the `pg_test` build that `cargo pgrx test` installs (for the test hook
//! `tests.invalidate_during_next_build()`).

use crate::common;

use std::time::{Duration, Instant};

use common::Client;

crate::own_database!();

/// SQLSTATE and message of a failed statement.
fn message(e: &common::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    }
}

/// idem_claim's row as text, called as a plain expression: its descriptor is then first
/// needed inside the call (a FROM-clause call would look it up while parsing).
fn claim_text(client: &mut Client, scope: &str, key: &str) -> String {
    client
        .query_one("SELECT idem_claim($1, $2, 'h')::text", &[&scope, &key])
        .unwrap_or_else(|e| panic!("claim {scope}/{key}: {}", message(&e)))
        .get(0)
}

fn call_text(client: &mut Client, scope: &str, key: &str, function: &str) -> String {
    client
        .query_one(
            "SELECT idem_call($1, $2, '{\"v\": 1}', $3::text::regprocedure)::text",
            &[&scope, &key, &function],
        )
        .unwrap_or_else(|e| panic!("call {scope}/{key}: {}", message(&e)))
        .get(0)
}

/// (outcome, attempt, response) through a FROM-clause call.
fn claim_columns(client: &mut Client, scope: &str, key: &str) -> (String, i32, Option<String>) {
    let row = client
        .query_one(
            "SELECT outcome::text, attempt, response::text FROM idem_claim($1, $2, 'h')",
            &[&scope, &key],
        )
        .unwrap_or_else(|e| panic!("claim {scope}/{key}: {}", message(&e)));
    (row.get(0), row.get(1), row.get(2))
}

/// A new claim: outcome, attempt 1, no response / recovery point / failure; then the lease and
/// expiry timestamps.
fn assert_new_claim(row: &str) {
    assert!(row.starts_with("(new_claim,1,,,,,\""), "{row}");
}

/// idem_claim's first call in `a` was the build that saw an invalidation: check that call's
/// row and the calls of later transactions.
fn check_claims_after(a: &mut Client, scope: &str, first: &str) {
    assert_new_claim(first);
    for n in 1..=3 {
        assert_new_claim(&claim_text(a, scope, &format!("k{n}")));
    }
    a.execute(
        "SELECT idem_complete($1, 'k1', '{\"done\": true}')",
        &[&scope],
    )
    .expect("complete");
    assert_eq!(
        claim_columns(a, scope, "k1"),
        ("replay_success".into(), 1, Some(r#"{"done": true}"#.into()))
    );
    let mut tx = a.transaction().expect("begin");
    for n in 4..=5 {
        let row = tx
            .query_one(
                "SELECT idem_claim($1, $2, 'h')::text",
                &[&scope, &format!("k{n}")],
            )
            .expect("claim");
        assert_new_claim(row.get(0));
    }
    tx.commit().expect("commit");
    assert_eq!(
        claim_columns(a, scope, "k0"),
        ("processing_active".into(), 1, None)
    );
}

fn check_calls_after(a: &mut Client, scope: &str, function: &str, first: &str) {
    let new = r#"(new_claim,"{""v"": 1}",,,1)"#;
    assert_eq!(first, new);
    for n in 1..=3 {
        assert_eq!(call_text(a, scope, &format!("k{n}"), function), new);
    }
    assert_eq!(
        call_text(a, scope, "k0", function),
        r#"(replay_success,"{""v"": 1}",,,1)"#
    );
    // And idem_claim, whose site this backend builds afterwards.
    assert_new_claim(&claim_text(a, scope, "claim"));
    assert_new_claim(&claim_text(a, scope, "claim2"));
}

fn create_echo(name: &str) {
    cluster()
        .session()
        .batch_execute(&format!(
            "CREATE FUNCTION public.{name}(jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT $1'"
        ))
        .expect("create function");
}

#[test]
fn claim_site_built_during_an_invalidation_stays_valid_in_later_transactions() {
    let mut a = cluster().session();
    a.batch_execute("SELECT tests.invalidate_during_next_build()")
        .expect("hook");
    let first = claim_text(&mut a, "inject_claim", "k0");
    check_claims_after(&mut a, "inject_claim", &first);
}

#[test]
fn call_site_built_during_an_invalidation_stays_valid_in_later_transactions() {
    create_echo("inject_call_echo");
    let mut a = cluster().session();
    a.batch_execute("SELECT tests.invalidate_during_next_build()")
        .expect("hook");
    let first = call_text(
        &mut a,
        "inject_call",
        "k0",
        "public.inject_call_echo(jsonb)",
    );
    check_calls_after(
        &mut a,
        "inject_call",
        "public.inject_call_echo(jsonb)",
        &first,
    );
}

/// Session B commits a CREATE FUNCTION while session A's first `first_call` of its backend
/// is building its site: B also holds an exclusive lock on `row_type` (taken by a no-op
/// ALTER TYPE ... OWNER there and back), which A's `get_call_result_type` must wait for;
/// acquiring it, A processes B's invalidations in the middle of the build. Returns A and the
/// first call's row.
fn first_call_during_ddl(
    row_type: &str,
    owner: &str,
    new_function: &str,
    first_call: impl FnOnce(&mut Client) -> String + Send + 'static,
) -> (Client, String) {
    let mut a = cluster().session();
    let a_pid: i32 = a
        .query_one("SELECT pg_backend_pid()", &[])
        .expect("pid")
        .get(0);
    let mut b = cluster().session();
    b.batch_execute(&format!("CREATE ROLE {owner}"))
        .expect("create role");
    b.batch_execute(&format!(
        "BEGIN; \
         CREATE FUNCTION public.{new_function}(jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT $1'; \
         ALTER TYPE public.{row_type} OWNER TO {owner}; \
         ALTER TYPE public.{row_type} OWNER TO postgres;"
    ))
    .expect("session B");
    let first = std::thread::spawn(move || {
        let row = first_call(&mut a);
        (a, row)
    });
    // Wait until A waits for B's lock on the row type, inside its call.
    let mut watcher = cluster().session();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let waiting: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_type t \
                 ON l.relation = t.typrelid \
                 WHERE l.pid = $1 AND NOT l.granted AND t.oid = $2::text::regtype",
                &[&a_pid, &format!("public.{row_type}")],
            )
            .expect("pg_locks")
            .get(0);
        if waiting == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "session A never waited for the lock on {row_type}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    b.batch_execute("COMMIT").expect("commit B");
    first.join().expect("session A")
}

#[test]
fn claim_site_survives_a_create_function_committed_during_its_build() {
    let (mut a, first) = first_call_during_ddl(
        "idem_claim_result",
        "call_site_claim_owner",
        "ddl_claim_new_fn",
        |a| claim_text(a, "ddl_claim", "k0"),
    );
    check_claims_after(&mut a, "ddl_claim", &first);
}

#[test]
fn call_site_survives_a_create_function_committed_during_its_build() {
    create_echo("ddl_call_echo");
    let function = "public.ddl_call_echo(jsonb)";
    let (mut a, first) = first_call_during_ddl(
        "idem_call_result",
        "call_site_call_owner",
        "ddl_call_new_fn",
        move |a| call_text(a, "ddl_call", "k0", function),
    );
    check_calls_after(&mut a, "ddl_call", function, &first);
}
