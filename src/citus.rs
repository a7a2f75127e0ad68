//! Citus: `idempotency.requests` as a distributed table (see docs/scale-out.md).
//!
//! The extension never depends on Citus: everything here is decided from the catalog
//! (`pg_catalog.pg_dist_partition`, looked up by name in `pg_catalog` and read by relation OID
//! without SQL), and a database without Citus has no such table, so nothing here runs there.
//!
//! What changes when the table is distributed (Citus lists it in `pg_dist_partition`, on the
//! coordinator and, with metadata sync, on every worker):
//! - the direct (heap/index) paths of `lookup.rs` / `write.rs` are never used: on the
//!   coordinator the relation is an empty shell, and on a worker it is a shell too (the rows
//!   are in hidden shard tables). Every function goes through SQL, which Citus routes by the
//!   distribution column to the one shard that holds the key (locally when a delegated call
//!   runs on that shard's worker).
//! - Citus rejects STABLE functions with column references (and VOLATILE ones) in UPDATE
//!   statements, so the updates that computed `now() + retention` or
//!   `clock_timestamp() + lease` in SQL read the row first (`FOR UPDATE`, the row lock the
//!   UPDATE would take), compute the same values here with the same Postgres functions, and
//!   bind them as parameters ([`end_attempt`], [`checkpoint`]).
//! - upkeep (`idem_reclaim`, `idem_purge`) picks candidate rows with a multi-shard SELECT and
//!   changes each with a single-shard statement that repeats the row's condition after locking
//!   it with `SKIP LOCKED` ([`reclaim_batch`], [`purge_batch`]). The background worker does this
//!   on the coordinator only; on a worker node it leaves `idempotency.requests` alone, so each
//!   row is reclaimed or purged once, by the coordinator.

use pgrx::pg_sys::{self, Datum, Oid};

use crate::claim::{
    INT4, INTERVAL, JSONB, TEXT, TIMESTAMPTZ, add_interval, by_key, datum_bytes, text_arg,
};
use crate::errors::Result;
use crate::plans::{Arg, Conn, Statement};

/// Is relation `table` a Citus table (distributed, reference or Citus-managed local), i.e. does
/// `pg_catalog.pg_dist_partition` have a row for its OID? `false` without Citus.
///
/// # Safety
/// Inside a transaction; `table` is locked by the caller (decide after the lock).
pub unsafe fn is_citus_table(table: Oid) -> bool {
    // SAFETY: catalog lookups; the relation is opened with a lock and closed again.
    unsafe {
        let dist = pg_sys::get_relname_relid(
            c"pg_dist_partition".as_ptr(),
            Oid::from(pg_sys::PG_CATALOG_NAMESPACE),
        );
        if dist == pg_sys::InvalidOid {
            return false;
        }
        let rel = pg_sys::try_relation_open(dist, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        if rel.is_null() {
            return false;
        }
        let mut key: pg_sys::ScanKeyData = core::mem::zeroed();
        // Column 1 of pg_dist_partition is logicalrelid (regclass, compared as an oid).
        pg_sys::ScanKeyInit(
            &mut key,
            1,
            pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
            pg_sys::RegProcedure::from(pg_sys::F_OIDEQ),
            Datum::from(table),
        );
        let scan = pg_sys::systable_beginscan(
            rel,
            pg_sys::InvalidOid,
            false,
            core::ptr::null_mut(),
            1,
            &mut key,
        );
        let found = !pg_sys::systable_getnext(scan).is_null();
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        found
    }
}

/// This node's Citus group: 0 on the coordinator, > 0 on a worker, `None` without Citus.
pub fn local_group() -> Option<i32> {
    // SAFETY: catalog lookups inside a transaction; the relation is opened and closed here.
    unsafe {
        let group = pg_sys::get_relname_relid(
            c"pg_dist_local_group".as_ptr(),
            Oid::from(pg_sys::PG_CATALOG_NAMESPACE),
        );
        if group == pg_sys::InvalidOid {
            return None;
        }
        let rel = pg_sys::try_relation_open(group, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        if rel.is_null() {
            return None;
        }
        let scan = pg_sys::systable_beginscan(
            rel,
            pg_sys::InvalidOid,
            false,
            core::ptr::null_mut(),
            0,
            core::ptr::null_mut(),
        );
        let tuple = pg_sys::systable_getnext(scan);
        let mut value = None;
        if !tuple.is_null() {
            let mut isnull = false;
            let datum = pg_sys::heap_getattr(tuple, 1, (*rel).rd_att, &mut isnull);
            if !isnull {
                value = Some(datum.value() as i32);
            }
        }
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        value
    }
}

#[cfg(any(test, feature = "pg_test"))]
thread_local! {
    /// Tests only: take the distributed paths on a plain table (`tests.assume_distributed`),
    /// so that tests/search_path.rs prepares and checks their statements without Citus and
    /// the #[pg_test]s compare their answers with the single-server paths.
    static ASSUMED: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Tests only: from now on in this backend, treat `idempotency.requests` as distributed
/// (`on`) or not; the previous value.
#[cfg(any(test, feature = "pg_test"))]
pub fn assume_distributed(on: bool) -> bool {
    ASSUMED.with(|a| a.replace(on))
}

/// Whether a test asked for the distributed paths (always `false` in a release build).
pub fn assumed() -> bool {
    #[cfg(any(test, feature = "pg_test"))]
    {
        ASSUMED.with(core::cell::Cell::get)
    }
    #[cfg(not(any(test, feature = "pg_test")))]
    {
        false
    }
}

/// Is `idempotency.requests` a Citus table here? (Locks it for reading, as the caller's next
/// statement would, and answers from the per-backend catalog cache of `lookup.rs`.)
pub fn requests_distributed() -> Result<bool> {
    let Some((catalog, rel, _)) = crate::lookup::lock_table(pg_sys::AccessShareLock)? else {
        // The table kept changing: answer from the catalog directly.
        let (_, table, _) = crate::lookup::resolve()?;
        // SAFETY: a catalog scan inside the caller's transaction.
        return Ok(unsafe { is_citus_table(table) } || assumed());
    };
    // SAFETY: opened by lock_table; the lock stays to the end of the transaction.
    unsafe { pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE) };
    Ok(catalog.distributed || assumed())
}

/// Should this background worker leave `idempotency.requests` to another node? Yes on a
/// Citus worker when the table is distributed: the coordinator's worker does the upkeep of
/// every shard, so no row is reclaimed or purged twice.
///
/// Without Citus, or on the coordinator, this touches nothing. When the table cannot be found
/// the answer is `false`: the upkeep steps then run and report that themselves (42P01), as on
/// a single server.
pub fn upkeep_elsewhere() -> Result<bool> {
    if !local_group().is_some_and(|group| group != 0) {
        return Ok(false);
    }
    match crate::lookup::resolve() {
        // SAFETY: the table is locked (to the end of the transaction) before it is judged; a
        // table dropped meanwhile gives NULL.
        Ok((_, table, _)) => unsafe {
            let rel = pg_sys::try_relation_open(table, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
            if rel.is_null() {
                return Ok(false);
            }
            let distributed = is_citus_table(table) || assumed();
            pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
            Ok(distributed)
        },
        Err(_missing) => Ok(false),
    }
}

// ---------------------------------------------------------------------------------------------
// Statements used only when the table is distributed. Each reads or changes one key, so Citus
// routes it to one shard; none calls a STABLE or VOLATILE function on a column.

/// The row an ending attempt changes, locked as the UPDATE would lock it.
static ROW_FOR_UPDATE: Statement = Statement {
    sql: concat!(
        "SELECT expires_at::pg_catalog.timestamptz, retention::pg_catalog.interval, \
         lease::pg_catalog.interval FROM idempotency.requests",
        by_key!(),
        " FOR UPDATE"
    ),
    args: &[TEXT, TEXT],
};

/// The condition for changing an attempt (as in finish.rs).
macro_rules! current_attempt {
    ($attempt:literal) => {
        concat!(
            " AND status OPERATOR(pg_catalog.=) 'processing' AND (",
            $attempt,
            "::pg_catalog.int4 IS NULL OR attempt OPERATOR(pg_catalog.=) ",
            $attempt,
            ")"
        )
    };
}

/// finish.rs' COMPLETE with `updated_at` ($5) and `expires_at` ($6) computed here.
pub(crate) static COMPLETE: Statement = Statement {
    sql: concat!(
        "UPDATE idempotency.requests SET status = 'succeeded', response = $3, locked_until = NULL, \
         failure_code = NULL, failure_message = NULL, updated_at = $5, expires_at = $6",
        by_key!(),
        current_attempt!("$4"),
        " RETURNING attempt::pg_catalog.int4"
    ),
    args: &[TEXT, TEXT, JSONB, INT4, TIMESTAMPTZ, TIMESTAMPTZ],
};

macro_rules! fail_statement {
    ($status:literal) => {
        Statement {
            sql: concat!(
                "UPDATE idempotency.requests SET status = '",
                $status,
                "', failure_code = $3, failure_message = $4, locked_until = NULL, \
                 updated_at = $6, expires_at = $7",
                by_key!(),
                current_attempt!("$5"),
                " RETURNING attempt::pg_catalog.int4"
            ),
            args: &[TEXT, TEXT, TEXT, TEXT, INT4, TIMESTAMPTZ, TIMESTAMPTZ],
        }
    };
}
/// finish.rs' fail statements with `updated_at` ($6) and `expires_at` ($7) computed here.
pub(crate) static FAIL_RETRYABLE: Statement = fail_statement!("failed_retryable");
pub(crate) static FAIL_FINAL: Statement = fail_statement!("failed_final");

/// finish.rs' CHECKPOINT with the lease ($5), `locked_until` ($6) and `updated_at` ($7)
/// computed here.
static CHECKPOINT: Statement = Statement {
    sql: concat!(
        "UPDATE idempotency.requests SET recovery_point = COALESCE($3, recovery_point), \
         lease = $5, locked_until = $6, updated_at = $7",
        by_key!(),
        current_attempt!("$4"),
        " RETURNING locked_until::pg_catalog.timestamptz"
    ),
    args: &[TEXT, TEXT, TEXT, INT4, INTERVAL, TIMESTAMPTZ, TIMESTAMPTZ],
};

/// The transaction's start: SQL's `now()`.
fn now() -> i64 {
    // SAFETY: reads the transaction's start time.
    unsafe { pg_sys::GetCurrentTransactionStartTimestamp() }
}

/// End an attempt on a distributed table: `statement` is [`COMPLETE`] or one of the fail
/// statements, `args` its leading parameters (as for finish.rs' statements). Locks the row,
/// computes `GREATEST(expires_at, now() + retention)` and runs the update. `false`: nothing
/// changed (no record, not processing, or another attempt).
pub(crate) fn end_attempt(
    conn: &Conn,
    scope: &[u8],
    key: &[u8],
    statement: &'static Statement,
    args: &[Arg],
) -> Result<bool> {
    let row = ROW_FOR_UPDATE.run(conn, &[text_arg(scope), text_arg(key)])?;
    if row.is_empty() {
        return Ok(false);
    }
    let expires_at = row.required(0, 1)?.value() as i64;
    let retention = row.required(0, 2)?;
    let now = now();
    let expires_at = expires_at.max(add_interval(now, retention));
    let mut all: Vec<Arg> = args.to_vec();
    all.push(Some(Datum::from(now)));
    all.push(Some(Datum::from(expires_at)));
    Ok(!statement.run(conn, &all)?.is_empty())
}

/// `idem_checkpoint`'s update on a distributed table: the new `locked_until` is
/// `clock_timestamp() + COALESCE(lease, stored lease)`, computed here after the row is locked.
pub(crate) fn checkpoint(
    conn: &Conn,
    scope: &[u8],
    key: &[u8],
    recovery_point: Arg,
    attempt: Arg,
    lease: Option<Datum>,
) -> Result<Option<Datum>> {
    let row = ROW_FOR_UPDATE.run(conn, &[text_arg(scope), text_arg(key)])?;
    if row.is_empty() {
        return Ok(None);
    }
    let lease = match lease {
        Some(lease) => lease,
        None => row.required(0, 3)?,
    };
    // SAFETY: reads the current time (SQL's clock_timestamp()).
    let clock = unsafe { pg_sys::GetCurrentTimestamp() };
    let locked_until = add_interval(clock, lease);
    let changed = CHECKPOINT.run(
        conn,
        &[
            text_arg(scope),
            text_arg(key),
            recovery_point,
            attempt,
            Some(lease),
            Some(Datum::from(locked_until)),
            Some(Datum::from(now())),
        ],
    )?;
    if changed.is_empty() {
        return Ok(None);
    }
    Ok(Some(changed.required(0, 1)?))
}

// ---------------------------------------------------------------------------------------------
// Upkeep of a distributed table.

/// Expired leases, oldest first: a multi-shard read (no lock; each row is re-checked below).
static RECLAIM_CANDIDATES: Statement = Statement {
    sql: "SELECT scope::pg_catalog.text, key::pg_catalog.text, attempt::pg_catalog.int4 \
          FROM idempotency.requests \
          WHERE status OPERATOR(pg_catalog.=) 'processing' \
            AND locked_until OPERATOR(pg_catalog.<) $2 \
          ORDER BY locked_until LIMIT $1",
    args: &[INT4, TIMESTAMPTZ],
};

/// One candidate, locked unless a claim holds it, if it still has an expired lease.
static RECLAIM_LOCK: Statement = Statement {
    sql: concat!(
        "SELECT attempt::pg_catalog.int4, claimed_by::pg_catalog.text, \
         locked_until::pg_catalog.timestamptz, expires_at::pg_catalog.timestamptz, \
         retention::pg_catalog.interval FROM idempotency.requests",
        by_key!(),
        " AND status OPERATOR(pg_catalog.=) 'processing' \
          AND locked_until OPERATOR(pg_catalog.<) $3 \
          AND attempt OPERATOR(pg_catalog.=) $4 FOR UPDATE SKIP LOCKED"
    ),
    args: &[TEXT, TEXT, TIMESTAMPTZ, INT4],
};

/// maintenance.rs' RECLAIM for one locked row, with the message and times computed here.
static RECLAIM_ONE: Statement = Statement {
    sql: concat!(
        "UPDATE idempotency.requests SET status = 'failed_retryable', \
         failure_code = 'lease_expired', failure_message = $5, \
         locked_until = NULL, updated_at = $6, expires_at = $7",
        by_key!(),
        " AND status OPERATOR(pg_catalog.=) 'processing' \
          AND locked_until OPERATOR(pg_catalog.<) $3 \
          AND attempt OPERATOR(pg_catalog.=) $4 RETURNING 1"
    ),
    args: &[
        TEXT,
        TEXT,
        TIMESTAMPTZ,
        INT4,
        TEXT,
        TIMESTAMPTZ,
        TIMESTAMPTZ,
    ],
};

/// Finished records past their retention, oldest first (multi-shard read, no lock).
static PURGE_CANDIDATES: Statement = Statement {
    sql: "SELECT scope::pg_catalog.text, key::pg_catalog.text FROM idempotency.requests \
          WHERE status OPERATOR(pg_catalog.<>) 'processing' \
            AND expires_at OPERATOR(pg_catalog.<) $2 \
          ORDER BY expires_at LIMIT $1",
    args: &[INT4, TIMESTAMPTZ],
};

/// One candidate, locked unless someone holds it, if it is still finished and expired.
static PURGE_LOCK: Statement = Statement {
    sql: concat!(
        "SELECT 1 FROM idempotency.requests",
        by_key!(),
        " AND status OPERATOR(pg_catalog.<>) 'processing' \
          AND expires_at OPERATOR(pg_catalog.<) $3 FOR UPDATE SKIP LOCKED"
    ),
    args: &[TEXT, TEXT, TIMESTAMPTZ],
};

static PURGE_ONE: Statement = Statement {
    sql: concat!(
        "DELETE FROM idempotency.requests",
        by_key!(),
        " AND status OPERATOR(pg_catalog.<>) 'processing' \
          AND expires_at OPERATOR(pg_catalog.<) $3 RETURNING 1"
    ),
    args: &[TEXT, TEXT, TIMESTAMPTZ],
};

/// (scope, key, attempt) of each candidate row, copied out of SPI's result.
fn keys(rows: &crate::plans::Rows<'_>, with_attempt: bool) -> Result<Vec<(Vec<u8>, Vec<u8>, i32)>> {
    let mut out = Vec::with_capacity(rows.len());
    for i in 0..rows.len() {
        // SAFETY: columns 1 and 2 are text.
        let (scope, key) = unsafe {
            (
                datum_bytes(rows.required(i, 1)?).to_vec(),
                datum_bytes(rows.required(i, 2)?).to_vec(),
            )
        };
        let attempt = if with_attempt {
            rows.required(i, 3)?.value() as i32
        } else {
            0
        };
        out.push((scope, key, attempt));
    }
    Ok(out)
}

/// `timestamptz` as text, as `format('%s', ts)` prints it (the session's DateStyle/TimeZone).
fn timestamptz_text(ts: Datum) -> String {
    // SAFETY: the built-in output function of timestamptz on a timestamptz datum.
    unsafe {
        let cstr =
            pgrx::direct_function_call::<&core::ffi::CStr>(pg_sys::timestamptz_out, &[Some(ts)]);
        cstr.map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// maintenance.rs' `reclaim_batch` on a distributed table: at most `batch` expired leases
/// before `cutoff` become failed_retryable, each exactly once.
pub fn reclaim_batch(conn: &Conn, batch: i32, cutoff: i64) -> Result<i64> {
    let candidates = {
        let rows =
            RECLAIM_CANDIDATES.run(conn, &[Some(Datum::from(batch)), Some(Datum::from(cutoff))])?;
        keys(&rows, true)?
    };
    let now = now();
    let mut reclaimed = 0;
    for (scope, key, attempt) in candidates {
        let cutoff_arg = Some(Datum::from(cutoff));
        let attempt_arg = Some(Datum::from(attempt));
        let (message, expires_at) = {
            let row = RECLAIM_LOCK.run(
                conn,
                &[text_arg(&scope), text_arg(&key), cutoff_arg, attempt_arg],
            )?;
            if row.is_empty() {
                continue; // changed meanwhile, or a claim holds it: next round
            }
            let claimed_by = match row.get(0, 2)? {
                // SAFETY: column 2 is text.
                Some(d) => format!(
                    " (claimed by {})",
                    String::from_utf8_lossy(unsafe { datum_bytes(d) })
                ),
                None => String::new(),
            };
            let locked_until = timestamptz_text(row.required(0, 3)?);
            let expires_at =
                (row.required(0, 4)?.value() as i64).max(add_interval(now, row.required(0, 5)?));
            (
                format!("the lease of attempt {attempt}{claimed_by} ended at {locked_until}"),
                expires_at,
            )
        };
        let changed = RECLAIM_ONE.run(
            conn,
            &[
                text_arg(&scope),
                text_arg(&key),
                cutoff_arg,
                attempt_arg,
                text_arg(message.as_bytes()),
                Some(Datum::from(now)),
                Some(Datum::from(expires_at)),
            ],
        )?;
        reclaimed += changed.len() as i64;
    }
    Ok(reclaimed)
}

/// maintenance.rs' `purge_batch` on a distributed table: at most `batch` finished records
/// past `expires_at`, each deleted once.
pub fn purge_batch(conn: &Conn, batch: i32) -> Result<i64> {
    let now = Some(Datum::from(now()));
    let candidates = {
        let rows = PURGE_CANDIDATES.run(conn, &[Some(Datum::from(batch)), now])?;
        keys(&rows, false)?
    };
    let mut purged = 0;
    for (scope, key, _) in candidates {
        if PURGE_LOCK
            .run(conn, &[text_arg(&scope), text_arg(&key), now])?
            .is_empty()
        {
            continue;
        }
        purged += PURGE_ONE
            .run(conn, &[text_arg(&scope), text_arg(&key), now])?
            .len() as i64;
    }
    Ok(purged)
}

pgrx::extension_sql_file!(
    "../sql/citus.sql",
    name = "citus",
    requires = ["bootstrap", "maintenance"]
);
