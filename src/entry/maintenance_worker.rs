//! The maintenance worker of one database (`idempotency maintenance`), started by the launcher
//! (`worker.rs`): it connects to its database, returns at once if the extension is not
//! installed there, and otherwise reclaims, then purges (or, in the generations layout,
//! rotates: docs/retention.md), a batch per transaction while batches
//! come back full, each batch as the table's owner (`as_owner.rs`). An error in one step is a
//! WARNING naming the database, and the next steps still run.

use core::ffi::{CStr, c_int};
use std::ffi::CString;
use std::time::{Duration, Instant};

use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};

use crate::base::compat;
use crate::base::errors::{IdemError, Result, SqlState};
use crate::base::settings;
use crate::entry::maintenance;
use crate::entry::worker::{
    LOCK_TIMEOUT, SignalHandlerForConfigReload, die, in_recovery, reload_if_requested,
    report_activity, wait_latch,
};
use crate::spi::Conn;
use crate::steps::citus::Upkeep;

// The maintenance worker of one database

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idem_maintenance_main(arg: Datum) {
    compat::pqsignal(pg_sys::SIGHUP, Some(SignalHandlerForConfigReload));
    compat::pqsignal(pg_sys::SIGTERM, Some(die));
    let database = Oid::from(arg.value() as u32);
    // SAFETY: the bgworker start-up sequence.
    unsafe {
        pg_sys::BackgroundWorkerUnblockSignals();
        pg_sys::BackgroundWorkerInitializeConnectionByOid(database, pg_sys::InvalidOid, 0);
        pg_sys::pgstat_report_appname(c"idempotency maintenance".as_ptr());
        pg_sys::SetConfigOption(
            c"lock_timeout".as_ptr(),
            LOCK_TIMEOUT.as_ptr(),
            pg_sys::GucContext::PGC_SUSET,
            pg_sys::GucSource::PGC_S_SESSION,
        );
    }
    let failure = PgTryBuilder::new(|| maintain().err().map(Failure::from))
        .catch_others(|caught| Some(Failure::from(caught)))
        .execute();
    if let Some(failure) = failure {
        // SAFETY: ends whatever transaction the error interrupted (a no-op if none).
        unsafe { pg_sys::AbortCurrentTransaction() };
        let name = database_name();
        pgrx::ereport!(
            PgLogLevel::WARNING,
            PgSqlErrorCode::from(failure.code.packed_code()),
            format!(
                "idempotency: maintenance of database \"{name}\" failed: {} (SQLSTATE {})",
                failure.message,
                failure.code.as_str()
            ),
            "The launcher goes on with the other databases and tries this one again next round."
        );
    }
}

/// Why a maintenance round failed.
struct Failure {
    code: SqlState,
    message: String,
}

impl From<IdemError> for Failure {
    fn from(err: IdemError) -> Self {
        Failure {
            code: err.code,
            message: err.message,
        }
    }
}

impl From<pg_sys::panic::CaughtError> for Failure {
    fn from(caught: pg_sys::panic::CaughtError) -> Self {
        use pg_sys::panic::CaughtError;
        let report = match &caught {
            CaughtError::PostgresError(report)
            | CaughtError::ErrorReport(report)
            | CaughtError::RustPanic {
                ereport: report, ..
            } => report,
        };
        Failure {
            code: SqlState::unpack(report.sql_error_code() as c_int),
            message: report.message().to_owned(),
        }
    }
}

/// This worker's database name, as the launcher passed it in `bgw_extra`.
fn database_name() -> String {
    // SAFETY: MyBgworkerEntry is this worker's registration; bgw_extra is NUL-terminated
    // (the launcher wrote at most 63 bytes of name into its 128).
    unsafe {
        let entry = pg_sys::MyBgworkerEntry;
        if entry.is_null() {
            return String::new();
        }
        CStr::from_ptr((*entry).bgw_extra.as_ptr())
            .to_string_lossy()
            .into_owned()
    }
}

/// Run `body` in its own transaction, shown in pg_stat_activity as `what`.
fn in_transaction<T>(what: &CStr, body: impl FnOnce() -> Result<T>) -> Result<T> {
    // SAFETY: the bgworker transaction sequence (as worker_spi and pgrx's
    // BackgroundWorker::transaction do); an error in `body` unwinds to the caller's catch,
    // which aborts the transaction.
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
    }
    report_activity(pg_sys::BackendState::STATE_RUNNING, Some(what));
    let result = body();
    // SAFETY: pairs with the above.
    unsafe {
        pg_sys::PopActiveSnapshot();
        if result.is_ok() {
            pg_sys::CommitTransactionCommand();
        } else {
            pg_sys::AbortCurrentTransaction();
        }
    }
    report_activity(pg_sys::BackendState::STATE_IDLE, None);
    result
}

/// Between batches: act on a reload or a stop. False: end the round now.
fn keep_going() -> bool {
    pg_sys::check_for_interrupts!();
    reload_if_requested();
    settings::WORKER_ENABLED.get() && !in_recovery()
}

/// Run `step` on `idempotency.<table>`, as its owner (`as_owner.rs`), in short transactions of
/// one batch each while batches come back full, resting between batches so that working takes
/// `idempotency.maintenance_share` percent of the time.
fn drain(
    what: &CStr,
    table: &CStr,
    batch: i32,
    step: impl Fn(&Conn, i32) -> Result<i64> + Copy,
) -> Result<i64> {
    let mut total = 0;
    while keep_going() {
        let started = Instant::now();
        let done = in_transaction(what, || {
            crate::entry::as_owner::run(table, || step(&Conn::open()?, batch))
        })?;
        let Some(n) = done else {
            break;
        };
        total += n;
        if n < i64::from(batch) {
            break;
        }
        wait_latch(rest_after(
            started.elapsed(),
            settings::MAINTENANCE_SHARE.get(),
        ));
    }
    Ok(total)
}

/// How long to rest after working `worked` to keep to `share` percent (capped at 10 s).
fn rest_after(worked: Duration, share: i32) -> Duration {
    let share = share.clamp(1, 100) as u32;
    (worked * (100 - share) / share).min(Duration::from_secs(10))
}

/// [`drain`], its failure caught: a WARNING with the SQLSTATE, and the round goes on with the
/// next step (a lock timeout on one table must not stop the purges of the others).
fn isolated(
    what: &CStr,
    table: &CStr,
    batch: i32,
    step: impl Fn(&Conn, i32) -> Result<i64> + Copy + std::panic::UnwindSafe,
) -> i64 {
    let outcome = PgTryBuilder::new(move || drain(what, table, batch, step).map_err(Failure::from))
        .catch_others(|caught| Err(Failure::from(caught)))
        .execute();
    match outcome {
        Ok(n) => n,
        Err(failure) => {
            // SAFETY: ends whatever transaction the error interrupted (a no-op if none).
            unsafe { pg_sys::AbortCurrentTransaction() };
            pgrx::ereport!(
                PgLogLevel::WARNING,
                PgSqlErrorCode::from(failure.code.packed_code()),
                format!(
                    "idempotency: {} in database \"{}\" failed: {} (SQLSTATE {})",
                    what.to_string_lossy(),
                    database_name(),
                    failure.message,
                    failure.code.as_str()
                ),
                "The other steps of this round go on; this one is tried again next round."
            );
            0
        }
    }
}

/// One maintenance round in this database.
fn maintain() -> Result<()> {
    let installed = in_transaction(c"idempotency: is the extension installed?", || {
        // SAFETY: a catalog lookup inside a transaction.
        Ok(
            unsafe { pg_sys::get_extension_oid(c"idempotency".as_ptr(), true) }
                != pg_sys::InvalidOid,
        )
    })?;
    if !installed || !keep_going() {
        return Ok(());
    }
    let batch = settings::BATCH_SIZE.get();
    // A distributed idempotency.requests: the coordinator does every shard, or each node the
    // placements it holds (src/steps/citus.rs); never both, so each row's work is done once.
    let plan = in_transaction(c"idempotency: who keeps idempotency.requests?", || {
        crate::steps::citus::upkeep_plan()
    })?;
    let (mut reclaimed, mut purged) = (0, 0);
    match plan {
        Upkeep::Elsewhere => {}
        Upkeep::Whole => {
            reclaimed = isolated(
                c"idem_reclaim",
                c"requests",
                batch,
                maintenance::reclaim_batch,
            );
            purged = isolated(
                c"idem_purge",
                c"requests",
                batch,
                maintenance::purge_or_rotate,
            );
        }
        Upkeep::Shards(shards) => {
            for shard in &shards {
                let Ok(table) = CString::new(shard.as_str()) else {
                    continue;
                };
                let shard = shard.as_str();
                reclaimed += isolated(c"idem_reclaim", &table, batch, |conn, n| {
                    maintenance::reclaim_shard(conn, n, shard)
                });
                purged += isolated(c"idem_purge", &table, batch, |conn, n| {
                    maintenance::purge_shard(conn, n, shard)
                });
            }
        }
    }
    isolated(
        c"idem_inbox_purge",
        c"inbox",
        batch,
        crate::entry::inbox::purge_batch,
    );
    isolated(
        c"idem_outbox_purge",
        c"outbox",
        batch,
        crate::entry::outbox::purge_batch,
    );
    crate::entry::metrics::count_round();
    if reclaimed > 0 || purged > 0 {
        pgrx::debug1!("idempotency: reclaimed {reclaimed} and purged {purged} records");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::rest_after;
    use std::time::Duration;

    #[test]
    fn rest_keeps_work_to_its_share() {
        let worked = Duration::from_millis(40);
        assert_eq!(rest_after(worked, 25), Duration::from_millis(120));
        assert_eq!(rest_after(worked, 50), Duration::from_millis(40));
        assert_eq!(rest_after(worked, 100), Duration::ZERO);
        assert_eq!(
            rest_after(Duration::from_secs(5), 1),
            Duration::from_secs(10)
        );
    }
}
