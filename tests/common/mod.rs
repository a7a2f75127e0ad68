//! What the integration tests share: real Postgres clusters ([`cluster`] and the others in
//! cluster.rs: started on first use, stopped by a watchdog when the test process exits), a
//! database per test module ([`own_database!`]), and the helpers every test binary used to
//! write for itself (a statement's answer or SQLSTATE, a claim's outcome, counts, polling
//! loops), so that each is written once and behaves the same everywhere.
//!
//! It uses the Postgres that `cargo pgrx test pgNN` built and installed the extension for
//! (found through `~/.pgrx/config.toml`). As root, the server runs as the `postgres` user.
// Each test binary compiles this module and uses only some of it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use postgres::{Client, Error, GenericClient, NoTls};

mod cluster;
pub use cluster::*;
pub mod planted;

/// The SQLSTATE of a failed statement.
pub fn sqlstate(err: &Error) -> String {
    err.code()
        .map(|c| c.code().to_string())
        .unwrap_or_else(|| format!("no SQLSTATE: {err}"))
}

/// A statement's first column as text (`NULL` for SQL NULL), or `ERROR <sqlstate>` when it
/// fails: lets one assertion cover both the answers and the errors a test expects.
pub fn answer(client: &mut impl GenericClient, sql: &str) -> String {
    match client.query_one(sql, &[]) {
        Ok(row) => row
            .get::<_, Option<String>>(0)
            .unwrap_or_else(|| "NULL".into()),
        Err(e) => format!("ERROR {}", sqlstate(&e)),
    }
}

/// The outcome of `idem_claim(scope, key, hash)`, in a session or inside its open transaction.
pub fn claim(client: &mut impl GenericClient, scope: &str, key: &str, hash: &str) -> String {
    claim_attempt(client, scope, key, hash).0
}

/// (outcome, attempt) of `idem_claim(scope, key, hash)`; the attempt is NULL while another
/// session's claim of the key is uncommitted.
pub fn claim_attempt(
    client: &mut impl GenericClient,
    scope: &str,
    key: &str,
    hash: &str,
) -> (String, Option<i32>) {
    let row = client
        .query_one(
            "SELECT outcome::text, attempt FROM idem_claim($1, $2, $3)",
            &[&scope, &key, &hash],
        )
        .expect("claim");
    (row.get(0), row.get(1))
}

/// The single bigint a query returns (a count); panics with the query on error.
pub fn count(client: &mut impl GenericClient, sql: &str) -> i64 {
    client
        .query_one(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// How many records `scope` has in idempotency.requests.
pub fn records(client: &mut impl GenericClient, scope: &str) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM idempotency.requests WHERE scope = $1",
            &[&scope],
        )
        .expect("count")
        .get(0)
}

/// `idem_metrics()` as a map. Its counters are the cluster's: tests that compare them take
/// turns (see [`serial`]).
pub fn metrics(client: &mut impl GenericClient) -> HashMap<String, i64> {
    client
        .query("SELECT name, value FROM idem_metrics()", &[])
        .expect("idem_metrics")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

/// Take a test binary's turn on `lock`; a test that panicked while holding it does not stop
/// the others (its own failure is reported already).
pub fn serial(lock: &'static Mutex<()>) -> MutexGuard<'static, ()> {
    lock.lock().unwrap_or_else(|e| e.into_inner())
}

/// Call `check` every 20 ms until it holds; how long that took. Panics with `what` after
/// `limit`. Every polling loop of the tests (lock waits, worker rounds, reloads) is this one
/// or [`wait_for_every`].
pub fn wait_for(what: &str, limit: Duration, check: impl FnMut() -> bool) -> Duration {
    wait_for_every(what, limit, Duration::from_millis(20), check)
}

/// [`wait_for`], calling `check` every `every` (shorter to catch a brief state, longer where
/// each check is costly).
pub fn wait_for_every(
    what: &str,
    limit: Duration,
    every: Duration,
    mut check: impl FnMut() -> bool,
) -> Duration {
    let started = Instant::now();
    loop {
        if check() {
            return started.elapsed();
        }
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(every);
    }
}

/// The text of the first ```sql block after `marker` in `doc` (a Markdown page's text).
pub fn sql_block_after(doc: &str, marker: &str) -> String {
    let after = doc
        .split_once(marker)
        .unwrap_or_else(|| panic!("{marker}"))
        .1;
    let start = after.split_once("```sql\n").expect("a sql block").1;
    start.split_once("```").expect("its end").0.to_string()
}

/// A repository file's text, by its path from the repository's top.
pub fn repo_file(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every row of the extension's four tables and of `effects` (a table of the test's own), as
/// one text: equal fingerprints before and after a refused call mean it wrote nothing.
pub fn fingerprint_sql(effects: &str) -> String {
    format!(
        "SELECT concat_ws('|', \
           (SELECT string_agg(r::text, ';' ORDER BY scope, key) FROM idempotency.requests r), \
           (SELECT string_agg(r::text, ';' ORDER BY consumer, message_id) FROM idempotency.inbox r), \
           (SELECT string_agg(r::text, ';' ORDER BY stream, entity) FROM idempotency.versions r), \
           (SELECT string_agg(r::text, ';' ORDER BY id) FROM idempotency.outbox r), \
           (SELECT string_agg(r::text, ';' ORDER BY r::text) FROM {effects} r))"
    )
}

/// `sql` in a transaction serving `tenant` (None: no tenant set, as the tenant recipe's
/// `app.tenant`), committed when it worked.
pub fn as_tenant(c: &mut Client, tenant: Option<&str>, sql: &str) -> String {
    c.batch_execute("BEGIN").expect("begin");
    if let Some(t) = tenant {
        c.execute(
            "SELECT pg_catalog.set_config('app.tenant', $1, true)",
            &[&t],
        )
        .expect("set tenant");
    }
    let out = answer(c, sql);
    c.batch_execute(if out.starts_with("ERROR") {
        "ROLLBACK"
    } else {
        "COMMIT"
    })
    .expect("end");
    out
}

/// Every field of the error a driver shows for `sql`, run as `tenant` in a transaction rolled
/// back after: SQLSTATE, message, DETAIL, HINT, CONTEXT, position, the schema, table, column,
/// type and constraint names, and Postgres' source file, line and routine.
pub fn tenant_error_fields(c: &mut Client, tenant: &str, sql: &str) -> String {
    c.batch_execute("BEGIN").expect("begin");
    c.execute(
        "SELECT pg_catalog.set_config('app.tenant', $1, true)",
        &[&tenant],
    )
    .expect("set tenant");
    let out = match c.batch_execute(sql) {
        Ok(()) => "no error".to_string(),
        Err(e) => match e.as_db_error() {
            Some(d) => format!(
                "{} | {} | {:?} | {:?} | {:?} | {:?} | {:?} {:?} {:?} {:?} {:?} | {:?} {:?} {:?}",
                d.code().code(),
                d.message(),
                d.detail(),
                d.hint(),
                d.where_(),
                d.position(),
                d.schema(),
                d.table(),
                d.column(),
                d.datatype(),
                d.constraint(),
                d.file(),
                d.line(),
                d.routine()
            ),
            None => format!("not a server error: {e}"),
        },
    };
    c.batch_execute("ROLLBACK").expect("rollback");
    out
}

/// docs/tenants.md's promise under the recipe (both editions): a key of tenant acme that
/// `holder` (acme's session) is claiming right now, uncommitted, and a key nobody has answer
/// tenant globex's claim (through `pool`) with the same 42501 in every field a driver shows.
pub fn in_flight_and_free_keys_look_alike(holder: &mut Client, pool: &mut Client) {
    holder.batch_execute("BEGIN").expect("begin");
    holder
        .execute(
            "SELECT pg_catalog.set_config('app.tenant', 'acme', true)",
            &[],
        )
        .expect("tenant");
    assert_eq!(claim(holder, "acme", "in-flight", "h"), "new_claim");
    let in_flight = tenant_error_fields(
        pool,
        "globex",
        "SELECT idem_claim('acme', 'in-flight', 'h')",
    );
    let free = tenant_error_fields(pool, "globex", "SELECT idem_claim('acme', 'free', 'h')");
    holder.batch_execute("ROLLBACK").expect("rollback");
    assert!(in_flight.starts_with("42501 |"), "{in_flight}");
    assert_eq!(
        in_flight, free,
        "an in-flight key (left) and a free one (right) differ"
    );
}
