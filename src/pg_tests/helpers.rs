//! Helpers shared by the in-backend tests: SPI shortcuts, the error of a statement, and the
//! protocol steps (claim, seed, reclaim, purge, outbox put / take) several test files take.

use pgrx::prelude::*;

pub(super) fn one<T: pgrx::IntoDatum + pgrx::FromDatum>(sql: &str) -> Option<T> {
    Spi::get_one::<T>(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

pub(super) fn run(sql: &str) {
    Spi::run(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The SQLSTATE `sql` fails with, or "ok".
pub(super) fn sqlstate(sql: &str) -> String {
    let quoted = pgrx::spi::quote_literal(sql);
    one::<String>(&format!("SELECT tests.sqlstate_of({quoted})")).unwrap_or_default()
}

pub(super) fn text(sql: &str) -> String {
    Spi::get_one::<String>(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .unwrap_or_else(|| panic!("{sql}: NULL"))
}

pub(super) fn quote(s: &str) -> String {
    assert!(!s.contains("$q$"));
    format!("$q${s}$q$")
}

/// `SQLSTATE: message` of the error `sql` raises (or `ok`), caught in PL/pgSQL.
pub(super) fn outcome(sql: &str) -> String {
    text(&format!("SELECT tests.outcome_of({})", quote(sql)))
}

/// (outcome, attempt) of a claim.
pub(super) fn claim(scope: &str, key: &str, hash: &str) -> (String, Option<i32>) {
    let row = Spi::get_two_with_args::<String, i32>(
        "SELECT outcome::text, attempt FROM idem_claim($1, $2, $3)",
        &[scope.into(), key.into(), hash.into()],
    )
    .unwrap_or_else(|e| panic!("claim: {e}"));
    (row.0.unwrap_or_default(), row.1)
}

pub(super) fn status(scope: &str, key: &str) -> Option<String> {
    Spi::get_one_with_args::<String>(
        "SELECT status::text FROM idempotency.requests WHERE scope = $1 AND key = $2",
        &[scope.into(), key.into()],
    )
    .unwrap_or_else(|e| panic!("status: {e}"))
}

/// A fingerprint of the whole table, to show that a failed call wrote nothing.
pub(super) fn table_state() -> String {
    one::<String>("SELECT coalesce(string_agg(t::text, ';' ORDER BY scope, key), '') FROM idempotency.requests t")
        .unwrap_or_default()
}

pub(super) fn record(scope: &str) -> String {
    one::<String>(&format!(
        "SELECT coalesce((SELECT concat_ws('|', status, coalesce(response::text, '-'), \
         coalesce(failure_code, '-'), coalesce(failure_message, '-'), attempt) \
         FROM idempotency.requests WHERE scope = {}), 'none')",
        pgrx::spi::quote_literal(scope)
    ))
    .unwrap_or_default()
}

/// Status of every key of `scope`, as "key=status" in key order.
pub(super) fn statuses(scope: &str) -> String {
    Spi::get_one_with_args::<String>(
        "SELECT coalesce(string_agg(key || '=' || status, ' ' ORDER BY key), '') \
         FROM idempotency.requests WHERE scope = $1",
        &[scope.into()],
    )
    .unwrap_or_else(|e| panic!("statuses: {e}"))
    .unwrap_or_default()
}

/// A record of `scope`/`key` in `state` ('processing', 'succeeded', 'failed_final',
/// 'failed_retryable'), made through the protocol.
pub(super) fn seed_record(scope: &str, key: &str, state: &str) {
    claim(scope, key, "h");
    let finish = match state {
        "processing" => return,
        "succeeded" => "SELECT idem_complete($1, $2, '{\"ok\": true}')",
        "failed_final" => "SELECT idem_fail($1, $2, false, 'bad')",
        "failed_retryable" => "SELECT idem_fail($1, $2, true, 'later')",
        other => panic!("no state {other}"),
    };
    Spi::run_with_args(finish, &[scope.into(), key.into()]).unwrap_or_else(|e| panic!("{e}"));
}

/// Move a record's lease end (`locked_until`) or expiry (`expires_at`) to `at`.
pub(super) fn set_time(scope: &str, key: &str, column: &str, at: &str) {
    let sql = match column {
        "locked_until" => {
            "UPDATE idempotency.requests SET locked_until = now() + $3::interval \
             WHERE scope = $1 AND key = $2"
        }
        "expires_at" => {
            "UPDATE idempotency.requests SET expires_at = now() + $3::interval \
             WHERE scope = $1 AND key = $2"
        }
        other => panic!("no column {other}"),
    };
    Spi::run_with_args(sql, &[scope.into(), key.into(), at.into()])
        .unwrap_or_else(|e| panic!("{e}"));
}

pub(super) fn reclaim_n(batch: i32) -> i64 {
    Spi::get_one_with_args::<i64>("SELECT idem_reclaim($1)", &[batch.into()])
        .unwrap_or_else(|e| panic!("idem_reclaim: {e}"))
        .unwrap_or(-1)
}

pub(super) fn purge_n(batch: i32) -> i64 {
    Spi::get_one_with_args::<i64>("SELECT idem_purge($1)", &[batch.into()])
        .unwrap_or_else(|e| panic!("idem_purge: {e}"))
        .unwrap_or(-1)
}

pub(super) fn put(topic: &str, payload: &str, dedupe_key: Option<&str>) -> i64 {
    Spi::get_one_with_args::<i64>(
        "SELECT idem_outbox_put($1, $2::jsonb, $3)",
        &[topic.into(), payload.into(), dedupe_key.into()],
    )
    .unwrap_or_else(|e| panic!("put: {e}"))
    .unwrap_or_else(|| panic!("put returned NULL"))
}

/// (id, attempts) of what a take of `topic` hands out.
pub(super) fn take(topic: &str, batch: i32) -> Vec<(i64, i32)> {
    let ids = one::<String>(&format!(
        "SELECT coalesce(string_agg(id || ':' || attempts, ',' ORDER BY id), '') \
         FROM idem_outbox_take({batch}, '30 seconds', {})",
        pgrx::spi::quote_literal(topic)
    ))
    .unwrap_or_default();
    ids.split(',')
        .filter(|s| !s.is_empty())
        .map(|pair| {
            let (id, attempts) = pair.split_once(':').unwrap_or_default();
            (id.parse().unwrap_or(-1), attempts.parse().unwrap_or(-1))
        })
        .collect()
}

/// `idempotency.requests` rows of `scope` as "key:column=value,..." for the given columns.
pub(super) fn rows_of(scope: &str, columns: &str) -> String {
    one::<String>(&format!(
    "SELECT coalesce(string_agg(format('%s:%s', key, concat_ws(',', {columns})), ' ' ORDER BY key), '') \
         FROM idempotency.requests WHERE scope = {}",
    pgrx::spi::quote_literal(scope)
))
.unwrap_or_default()
}

/// A trigger on idempotency.requests (until the test's transaction ends) that notes every
/// row it sees in tests.`audit`: the table now needs SQL for every write.
pub(super) fn add_audit_trigger(audit: &str) {
    catalog_turn();
    run(&format!(
        "CREATE TABLE tests.{audit} (op text, scope text, key text)"
    ));
    run(&format!(
        "CREATE FUNCTION tests.{audit}_fn() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN INSERT INTO tests.{audit} VALUES (TG_OP, NEW.scope, NEW.key); RETURN NEW; END $$"
    ));
    run(&format!(
        "CREATE TRIGGER {audit} AFTER INSERT OR UPDATE ON idempotency.requests \
         FOR EACH ROW EXECUTE FUNCTION tests.{audit}_fn()"
    ));
}

/// What the audit trigger saw for `scope`: "op:key ..." in order of arrival.
pub(super) fn audited(audit: &str, scope: &str) -> String {
    one::<String>(&format!(
        "SELECT coalesce(string_agg(op || ':' || key, ' ' ORDER BY ctid), '') FROM tests.{audit} \
         WHERE scope = {}",
        pgrx::spi::quote_literal(scope)
    ))
    .unwrap_or_default()
}

/// First thing in a test that changes the catalog rows of the extension's tables (GRANT or
/// REVOKE on them, a trigger, row security): such tests take turns. Two at once deadlock: one
/// holds a table lock while it waits to update a catalog row the other has changed.
pub(super) fn catalog_turn() {
    run("SELECT pg_advisory_xact_lock(4242)");
}
