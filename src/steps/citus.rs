//! Citus: `idempotency.requests` as a distributed table (see docs/scale-out.md).
//!
//! The extension never depends on Citus: everything here is decided from the catalog
//! (`pg_catalog.pg_dist_partition`, looked up by name in `pg_catalog` and read by relation OID
//! without SQL), and a database without Citus has no such table, so nothing here runs there.
//!
//! What changes when the table is distributed (Citus lists it in `pg_dist_partition`, on the
//! coordinator and, with metadata sync, on every worker):
//! - the direct paths (`src/direct/`) are never used: on the coordinator the relation is an
//!   empty shell, and on a worker it is a shell too (the rows are in hidden shard tables).
//!   Every function goes through SQL, which Citus routes by the distribution column to the one
//!   shard that holds the key (locally when a delegated call runs on that shard's worker).
//! - Citus rejects STABLE functions with column references (and VOLATILE ones) in UPDATE
//!   statements. None of the record's statements has any: every value is computed by a
//!   `Transition` after the row is locked and bound as a parameter (`record_sql.rs`).
//! - upkeep (`idem_reclaim`, `idem_purge`) picks candidate rows with a multi-shard SELECT and
//!   changes each with a single-shard statement that repeats the row's condition after locking
//!   it with `SKIP LOCKED` ([`reclaim_batch`], [`purge_batch`]). By default the background
//!   worker does this on the coordinator only, and a worker node leaves the table alone; with
//!   `idempotency.citus_upkeep = shards` every node's worker runs the set-based statements of
//!   `maintenance.rs` on the placements it holds ([`upkeep_plan`]). Each row is reclaimed or
//!   purged once either way.

use pgrx::pg_sys::{self, Datum};

#[cfg(any(test, feature = "pg_test"))]
pub use crate::base::citus_detect::assume_distributed;
use crate::base::citus_detect::{assumed, is_citus_table, local_group};
use crate::base::datum::datum_bytes;
use crate::base::errors::Result;
use crate::base::record::add_interval;
use crate::base::settings::{self, CitusUpkeep};
use crate::direct;
use crate::spi::record_sql::by_key;
use crate::spi::{Conn, INT4, Rows, Statement, TEXT, TIMESTAMPTZ, run_text, text_arg};
use crate::steps::transition;

/// Is `idempotency.requests` a Citus table here? (Locks it for reading, as the caller's next
/// statement would, and answers from the per-backend catalog cache of `direct/catalog.rs`.)
pub fn requests_distributed() -> Result<bool> {
    let Some((catalog, rel, _)) = direct::lock_table(pg_sys::AccessShareLock)? else {
        // The table kept changing: answer from the catalog directly.
        let (_, table, _) = direct::resolve()?;
        // SAFETY: a catalog scan inside the caller's transaction.
        return Ok(unsafe { is_citus_table(table) } || assumed());
    };
    // SAFETY: opened by lock_table; the lock stays to the end of the transaction.
    unsafe { pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE) };
    Ok(catalog.distributed || assumed())
}

/// What this node's background worker does with `idempotency.requests`.
pub enum Upkeep {
    /// The whole table (one server, or the coordinator of a distributed table).
    Whole,
    /// Nothing: a worker node while the coordinator does every shard.
    Elsewhere,
    /// The shard placements this node holds (`idempotency.citus_upkeep = shards`), by name.
    Shards(Vec<String>),
}

/// Every placement of idempotency.requests' shards: its shard's name, whether this node holds
/// it, and whether its shard has other placements (statement replication: then only the
/// coordinator may change rows, to keep the copies equal).
///
/// Plain text, not a kept [`Statement`]: Citus' catalog exists only where Citus is installed,
/// so tests/integration/security/search_path/ cannot prepare it; tests/clusters/citus/upkeep.rs runs it on a real cluster.
const PLACEMENTS: &str = "SELECT pg_catalog.format('requests_%s'::pg_catalog.text, s.shardid), \
            p.groupid OPERATOR(pg_catalog.=) (SELECT l.groupid FROM pg_catalog.pg_dist_local_group AS l), \
            (SELECT pg_catalog.count(*) FROM pg_catalog.pg_dist_placement AS a \
              WHERE a.shardid OPERATOR(pg_catalog.=) s.shardid) OPERATOR(pg_catalog.>) 1::pg_catalog.int8 \
          FROM pg_catalog.pg_dist_shard AS s \
          JOIN pg_catalog.pg_dist_placement AS p ON p.shardid OPERATOR(pg_catalog.=) s.shardid \
          WHERE s.logicalrelid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass \
          ORDER BY s.shardid";

thread_local! {
    static WARNED_REPLICATED: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Who does the upkeep of `idempotency.requests` on this node. Without Citus, or when the
/// table is not distributed, the whole table. Distributed, by `idempotency.citus_upkeep`:
/// `coordinator` (default) leaves every shard to the coordinator, which changes rows one by
/// one through itself; `shards` has each node change the placements it holds, set-based and
/// locally, so the purge rate grows with the workers. Each row lives in one placement, so it
/// is reclaimed or purged once either way; a table with replicated shards stays with the
/// coordinator (its writes must go through it to keep the copies equal).
///
/// When the table cannot be found the answer is `Whole`: the upkeep steps then run and report
/// that themselves (42P01), as on a single server.
pub fn upkeep_plan() -> Result<Upkeep> {
    let Some(group) = local_group() else {
        return Ok(Upkeep::Whole);
    };
    let distributed = match direct::resolve() {
        // SAFETY: the table is locked (to the end of the transaction) before it is judged; a
        // table dropped meanwhile gives NULL.
        Ok((_, table, _)) => unsafe {
            let rel = pg_sys::try_relation_open(table, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
            if rel.is_null() {
                return Ok(Upkeep::Whole);
            }
            let distributed = is_citus_table(table) || assumed();
            pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
            distributed
        },
        Err(_missing) => return Ok(Upkeep::Whole),
    };
    let by_coordinator = if group == 0 {
        Upkeep::Whole
    } else {
        Upkeep::Elsewhere
    };
    if !distributed || settings::CITUS_UPKEEP.get() == CitusUpkeep::Coordinator {
        return Ok(if distributed {
            by_coordinator
        } else {
            Upkeep::Whole
        });
    }
    let conn = Conn::open()?;
    let rows = run_text(&conn, PLACEMENTS, &[], &[])?;
    let mut shards = Vec::new();
    for i in 0..rows.len() {
        if rows.required(i, 3)?.value() != 0 {
            // Once per worker process, not every round.
            if !WARNED_REPLICATED.replace(true) {
                pgrx::warning!(
                    "idempotency: idempotency.citus_upkeep = shards, but idempotency.requests has replicated shards: the coordinator does its upkeep"
                );
            }
            return Ok(by_coordinator);
        }
        if rows.required(i, 2)?.value() != 0 {
            // SAFETY: column 1 is text.
            let name = unsafe { datum_bytes(rows.required(i, 1)?) };
            shards.push(String::from_utf8_lossy(name).into_owned());
        }
    }
    Ok(Upkeep::Shards(shards))
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

/// A candidate row's (scope, key, attempt), copied out of SPI's result.
type Candidate = (Vec<u8>, Vec<u8>, i32);

/// The candidates of `rows`.
fn keys(rows: &Rows<'_>, with_attempt: bool) -> Result<Vec<Candidate>> {
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
    let now = transition::now().txn;
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
                Some(d) => {
                    // SAFETY: column 2 is text, in SPI memory until the connection closes.
                    let name = unsafe { datum_bytes(d) };
                    format!(" (claimed by {})", String::from_utf8_lossy(name))
                }
                None => String::new(),
            };
            let locked_until = timestamptz_text(row.required(0, 3)?);
            let expires_at =
                (row.required(0, 4)?.value() as i64).max(add_interval(now, row.required(0, 5)?)?);
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
    let now = Some(Datum::from(transition::now().txn));
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
