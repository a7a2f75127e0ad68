//! Upkeep of `idempotency.requests`: `idem_reclaim` and `idem_purge`, one batch per call.
//! The background worker (src/entry/worker.rs) runs exactly these, a batch per transaction.
//!
//! Why they never make a claim wait: each batch picks its rows with `FOR UPDATE SKIP LOCKED`
//! (a row a claim is taking over is left for the next round), and the change repeats the
//! row's condition, so a row a claim changed meanwhile is not touched. The claim path takes
//! rows over with `SKIP LOCKED` too, and treats an expired finished record as free.

use pgrx::pg_sys::{self, Datum};
use pgrx::prelude::*;

use crate::base::errors::{self, IdemError, OrRaise, Result};
use crate::base::settings;
use crate::spi::{Conn, Statement, run_text};

/// A batch statement for each layout: `$verb` (UPDATE or DELETE FROM) `idempotency.requests`
/// `$set` on the rows that `$pick` (WHERE ... LIMIT $1 FOR UPDATE SKIP LOCKED) picks, where
/// `$still` still holds. [`FLAT`] names a picked row by its ctid, in the table's own rows; in
/// the generations layout a ctid names a row only within one table, so [`GENERATIONS`] names
/// it by its table and ctid, and picks across the generations through the table in one order,
/// with the table's privileges (sql/layout.sql).
macro_rules! batch {
    ($verb:literal, $set:literal, $pick:literal, $still:literal, $args:expr) => {
        [
            Statement {
                sql: concat!(
                    $verb,
                    " ONLY idempotency.requests",
                    $set,
                    " WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid \
                     FROM ONLY idempotency.requests ",
                    $pick,
                    ")) AND ",
                    $still
                ),
                args: $args,
            },
            Statement {
                sql: concat!(
                    "WITH picked AS MATERIALIZED (SELECT tableoid AS t, ctid AS c \
                     FROM idempotency.requests ",
                    $pick,
                    ") ",
                    $verb,
                    " idempotency.requests",
                    $set,
                    " WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT p.c FROM picked AS p)) \
                     AND EXISTS (SELECT FROM picked AS p WHERE p.t OPERATOR(pg_catalog.=) \
                     requests.tableoid AND p.c OPERATOR(pg_catalog.=) requests.ctid) AND ",
                    $still
                ),
                args: $args,
            },
        ]
    };
}

/// Which of a [`batch!`] pair.
const FLAT: usize = 0;
const GENERATIONS: usize = 1;

/// processing → failed_retryable for leases that ended before `$2` (now − reclaim_grace).
/// The recovery point stays, so the next claim can resume.
static RECLAIM: [Statement; 2] = batch!(
    "UPDATE",
    " SET status = 'failed_retryable', failure_code = 'lease_expired', \
     failure_message = pg_catalog.format('the lease of attempt %s%s ended at %s', attempt, \
       CASE WHEN claimed_by IS NULL THEN '' \
            ELSE pg_catalog.format(' (claimed by %s)', claimed_by) END, \
       locked_until), \
     locked_until = NULL, updated_at = pg_catalog.now(), \
     expires_at = GREATEST(expires_at, pg_catalog.now() OPERATOR(pg_catalog.+) \
       LEAST(retention, '100 years'::pg_catalog.interval))",
    "WHERE status OPERATOR(pg_catalog.=) 'processing' \
       AND locked_until OPERATOR(pg_catalog.<) $2 \
     ORDER BY locked_until LIMIT $1 FOR UPDATE SKIP LOCKED",
    "status OPERATOR(pg_catalog.=) 'processing' AND locked_until OPERATOR(pg_catalog.<) $2",
    &[pg_sys::INT4OID, pg_sys::TIMESTAMPTZOID]
);

/// Finished records past their retention. A processing row is never purged.
static PURGE: [Statement; 2] = batch!(
    "DELETE FROM",
    "",
    "WHERE status OPERATOR(pg_catalog.<>) 'processing' \
       AND expires_at OPERATOR(pg_catalog.<) pg_catalog.now() \
     ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED",
    "status OPERATOR(pg_catalog.<>) 'processing' \
     AND expires_at OPERATOR(pg_catalog.<) pg_catalog.now()",
    &[pg_sys::INT4OID]
);

/// Leases that ended before this are reclaimed: now() less `idempotency.reclaim_grace`.
fn reclaim_cutoff() -> i64 {
    // SAFETY: the current transaction's start, i.e. now().
    let now = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() };
    idem_protocol::reclaim_cutoff(now, settings::RECLAIM_GRACE.get())
}

/// Reclaim at most `batch` expired leases in the current transaction; the number reclaimed.
pub fn reclaim_batch(conn: &Conn, batch: i32) -> Result<i64> {
    let cutoff = reclaim_cutoff();
    if crate::steps::citus::requests_distributed()? {
        let reclaimed = crate::steps::citus::reclaim_batch(conn, batch, cutoff)?;
        crate::entry::metrics::count_reclaimed(reclaimed as u64);
        return Ok(reclaimed);
    }
    let reclaimed = in_layout(
        conn,
        &RECLAIM,
        [Some(Datum::from(batch)), Some(Datum::from(cutoff))],
    )?;
    crate::entry::metrics::count_reclaimed(reclaimed as u64);
    Ok(reclaimed)
}

/// 0A000 when a generation has row-level security, triggers or a foreign key to it.
const REFUSAL: &str = "SELECT idempotency.layout_refuse(idempotency.layout_refusal(true))";

/// The pair's statement for the table's layout, run with at most `batch` rows.
fn in_layout<const N: usize>(
    conn: &Conn,
    pair: &'static [Statement; 2],
    args: [Option<Datum>; N],
) -> Result<i64> {
    if !crate::spi::record_sql::generations_layout() {
        return Ok(pair[FLAT].run(conn, &args)?.len() as i64);
    }
    // Not on generations that carry code or policies this layout does not take yet (the
    // worker runs this as the table's owner).
    run_text(conn, REFUSAL, &[], &[])?;
    Ok(pair[GENERATIONS].run(conn, &args)?.len() as i64)
}

/// Purge at most `batch` expired finished records in the current transaction.
pub fn purge_batch(conn: &Conn, batch: i32) -> Result<i64> {
    if crate::steps::citus::requests_distributed()? {
        let purged = crate::steps::citus::purge_batch(conn, batch)?;
        crate::entry::metrics::count_purged(purged as u64);
        return Ok(purged);
    }
    let purged = in_layout(conn, &PURGE, [Some(Datum::from(batch))])?;
    crate::entry::metrics::count_purged(purged as u64);
    Ok(purged)
}

/// One step of the generations layout's rotation (sql/layout.sql), as `idem_rotate()` with
/// `batch`: what the worker does there instead of deleting expired records.
const ROTATE: &str = "SELECT idempotency.layout_bounded('100 ms'::pg_catalog.interval, \
     'rotate'::pg_catalog.text, 'rotate'::pg_catalog.text, NULL::pg_catalog.text, false, $1)";

/// The worker's retention step: [`purge_batch`] in the flat layout; in the generations layout
/// one rotation step (a whole generation emptied with TRUNCATE, no DELETE), whose answer gives
/// the survivors it moved (0 when it switched, emptied, was busy or idle: nothing more this
/// round).
pub fn purge_or_rotate(conn: &Conn, batch: i32) -> Result<i64> {
    if !crate::spi::record_sql::generations_layout() {
        return purge_batch(conn, batch);
    }
    let rows = run_text(
        conn,
        ROTATE,
        &[pg_sys::INT4OID],
        &[Some(Datum::from(batch))],
    )?;
    // SAFETY: the function returns text.
    let step = unsafe { crate::base::datum::datum_bytes(rows.required(0, 1)?) };
    let moved = std::str::from_utf8(step)
        .ok()
        .and_then(|s| s.strip_prefix("moved "))
        .and_then(|n| n.parse().ok());
    Ok(moved.unwrap_or(0))
}

/// `statement` on one shard placement of a distributed table, `idempotency.<shard>` (a name
/// `citus::upkeep_plan` read from Citus' catalog), run locally by the node that holds it.
fn on_shard(statement: &Statement, shard: &str) -> String {
    let quoted = format!("idempotency.\"{}\"", shard.replace('"', "\"\""));
    statement.sql.replace("idempotency.requests", &quoted)
}

/// [`reclaim_batch`] on one local shard placement (`idempotency.citus_upkeep = shards`).
pub fn reclaim_shard(conn: &Conn, batch: i32, shard: &str) -> Result<i64> {
    let cutoff = reclaim_cutoff();
    let args = [Some(Datum::from(batch)), Some(Datum::from(cutoff))];
    let rows = run_text(
        conn,
        &on_shard(&RECLAIM[FLAT], shard),
        RECLAIM[FLAT].args,
        &args,
    )?;
    crate::entry::metrics::count_reclaimed(rows.len() as u64);
    Ok(rows.len() as i64)
}

/// [`purge_batch`] on one local shard placement (`idempotency.citus_upkeep = shards`).
pub fn purge_shard(conn: &Conn, batch: i32, shard: &str) -> Result<i64> {
    let args = [Some(Datum::from(batch))];
    let rows = run_text(
        conn,
        &on_shard(&PURGE[FLAT], shard),
        PURGE[FLAT].args,
        &args,
    )?;
    crate::entry::metrics::count_purged(rows.len() as u64);
    Ok(rows.len() as i64)
}

fn checked_batch(batch: Option<i32>) -> Result<i32> {
    match batch {
        None => Err(IdemError::new(
            errors::NULL_VALUE_NOT_ALLOWED,
            "batch must not be null",
        )),
        Some(n) if n <= 0 => Err(IdemError::new(
            errors::INVALID_PARAMETER_VALUE,
            format!("batch must be positive, not {n}"),
        )),
        Some(n) => Ok(n),
    }
}

fn reclaim(batch: Option<i32>) -> Result<i64> {
    let batch = checked_batch(batch)?;
    let conn = Conn::open_for(c"requests")?;
    reclaim_batch(&conn, batch)
}

fn purge(batch: Option<i32>) -> Result<i64> {
    let batch = checked_batch(batch)?;
    let conn = Conn::open_for(c"requests")?;
    purge_batch(&conn, batch)
}

/// Processing records whose lease ended more than `idempotency.reclaim_grace` ago become
/// `failed_retryable` ('lease_expired'); at most `batch` of them. Returns how many.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn idem_reclaim(batch: default!(Option<i32>, 10000)) -> i64 {
    reclaim(batch).or_raise()
}

/// Deletes at most `batch` finished records past `expires_at`. Returns how many.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn idem_purge(batch: default!(Option<i32>, 10000)) -> i64 {
    purge(batch).or_raise()
}
