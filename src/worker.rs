//! The background worker: a launcher and, per database, a short-lived maintenance worker
//! (the shape of pg_partman's worker).
//!
//! - The launcher (`idempotency launcher`) is registered in `_PG_init` while preloading. It is
//!   connected to no database (it reads only the shared catalog `pg_database`, in one short
//!   transaction), so it holds no database while it sleeps. Every `idempotency.naptime` it
//!   starts one maintenance worker per database that allows connections (templates excluded:
//!   a connection to one would make `CREATE DATABASE` fail), optionally restricted to
//!   `idempotency.databases`, one at a time, and waits for it to finish.
//! - A maintenance worker (`idempotency maintenance`) connects to its database, returns at
//!   once if the extension is not installed there, and otherwise reclaims, then purges, a
//!   batch per transaction while batches come back full. Any error ends the worker with a
//!   WARNING naming the database; the launcher goes on with the next database.
//!
//! Signals the way core's auxiliary processes and pg_cron handle them: the handlers only set
//! flags (`ConfigReloadPending`, `ShutdownRequestPending`) and the latch; the loops act on
//! them. A maintenance worker uses `die`, so SIGTERM also interrupts a running batch.

use core::ffi::{CStr, c_int};
use std::time::{Duration, Instant};

use pgrx::bgworkers::BackgroundWorkerBuilder;
use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};

use crate::compat;
use crate::errors::{IdemError, Result, SqlState};
use crate::maintenance;
use crate::plans::Conn;
use crate::settings;

const LIBRARY: &str = "idempotency";
pub const LAUNCHER_NAME: &str = "idempotency launcher";
pub const MAINTENANCE_NAME: &str = "idempotency maintenance";
/// After a crash or `pg_terminate_backend`, the postmaster starts the launcher again this
/// much later.
const LAUNCHER_RESTART: Duration = Duration::from_secs(5);
/// A maintenance transaction gives up on a table lock after this long (e.g. behind DDL),
/// rather than hold up the launcher's round; the next round tries again.
const LOCK_TIMEOUT: &CStr = c"1s";

unsafe extern "C-unwind" {
    // Core's flag-only signal handlers (postmaster/interrupt.c, tcop/postgres.c), declared
    // here because pgrx exposes only guarded Rust wrappers, which are not C function pointers.
    fn SignalHandlerForConfigReload(signal: c_int);
    fn SignalHandlerForShutdownRequest(signal: c_int);
    fn die(signal: c_int);
}

/// Register the launcher. Only from `_PG_init` while preloading.
pub fn register_launcher() {
    BackgroundWorkerBuilder::new(LAUNCHER_NAME)
        .set_type(LAUNCHER_NAME)
        .set_library(LIBRARY)
        .set_function("idem_launcher_main")
        // A database connection (to no database) for pg_database; started once recovery has
        // finished, so no round runs on a standby.
        .enable_spi_access()
        .set_restart_time(Some(LAUNCHER_RESTART))
        .load();
}

fn shutdown_requested() -> bool {
    // SAFETY: a sig_atomic_t flag set by the signal handler.
    unsafe { core::ptr::read_volatile(&raw const pg_sys::ShutdownRequestPending) != 0 }
}

/// Reload the configuration if a SIGHUP arrived; true if it did.
fn reload_if_requested() -> bool {
    // SAFETY: the flag is a sig_atomic_t set by the handler; ProcessConfigFile is how every
    // Postgres process rereads postgresql.conf.
    unsafe {
        if core::ptr::read_volatile(&raw const pg_sys::ConfigReloadPending) == 0 {
            return false;
        }
        core::ptr::write_volatile(&raw mut pg_sys::ConfigReloadPending, 0);
        pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
    }
    true
}

/// Sleep on the latch for at most `timeout`; exits the process if the postmaster dies.
fn wait_latch(timeout: Duration) {
    let millis = timeout.as_millis().min(i32::MAX as u128) as core::ffi::c_long;
    // SAFETY: the standard WaitLatch / ResetLatch / CHECK_FOR_INTERRUPTS sequence.
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as c_int,
            millis,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
    pg_sys::check_for_interrupts!();
}

fn report_activity(state: pg_sys::BackendState::Type, what: Option<&CStr>) {
    // SAFETY: pg_stat_activity's state and query of this process.
    unsafe {
        pg_sys::pgstat_report_activity(state, what.map_or(core::ptr::null(), CStr::as_ptr));
    }
}

fn in_recovery() -> bool {
    // SAFETY: reads shared recovery state.
    unsafe { pg_sys::RecoveryInProgress() }
}

// ---------------------------------------------------------------------------------------------
// The launcher

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idem_launcher_main(_arg: Datum) {
    compat::pqsignal(pg_sys::SIGHUP, Some(SignalHandlerForConfigReload));
    compat::pqsignal(pg_sys::SIGTERM, Some(SignalHandlerForShutdownRequest));
    // SAFETY: the bgworker start-up sequence; a NULL database connects to shared catalogs only.
    unsafe {
        pg_sys::BackgroundWorkerUnblockSignals();
        pg_sys::BackgroundWorkerInitializeConnection(core::ptr::null(), core::ptr::null(), 0);
        pg_sys::pgstat_report_appname(c"idempotency launcher".as_ptr());
    }
    pgrx::log!("idempotency launcher started");

    while !shutdown_requested() {
        reload_if_requested();
        let started = Instant::now();
        if settings::WORKER_ENABLED.get() && !in_recovery() {
            run_round();
        }
        report_activity(pg_sys::BackendState::STATE_IDLE, None);
        sleep_until_next_round(started);
    }

    pgrx::log!("idempotency launcher shutting down");
    // Exit code 1 so that after a pg_terminate_backend the postmaster starts it again; at
    // server shutdown the postmaster restarts nothing.
    // SAFETY: no Rust value with a destructor is alive here.
    unsafe { pg_sys::proc_exit(1) }
}

/// Sleep until `naptime` after `started`, following a reloaded naptime at once.
fn sleep_until_next_round(started: Instant) {
    loop {
        if shutdown_requested() {
            return;
        }
        reload_if_requested();
        let naptime = Duration::from_millis(settings::NAPTIME.get().max(1) as u64);
        let Some(left) = (started + naptime).checked_duration_since(Instant::now()) else {
            return;
        };
        if left.is_zero() {
            return;
        }
        wait_latch(left);
    }
}

struct Database {
    oid: Oid,
    name: String,
}

/// Databases that allow connections and are not templates, in one short catalog scan.
fn databases() -> Vec<Database> {
    let mut found = Vec::new();
    // SAFETY: a heap scan of the shared catalog pg_database in its own transaction, as
    // autovacuum's get_database_list() does; names are copied out before the commit.
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        pg_sys::GetTransactionSnapshot();
        let rel = pg_sys::table_open(
            pg_sys::DatabaseRelationId,
            pg_sys::AccessShareLock as pg_sys::LOCKMODE,
        );
        let scan = pg_sys::table_beginscan_catalog(rel, 0, core::ptr::null_mut());
        loop {
            let tuple = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tuple.is_null() {
                break;
            }
            let db = &*(pg_sys::GETSTRUCT(tuple) as pg_sys::Form_pg_database);
            // -2: a database whose DROP was interrupted (DATCONNLIMIT_INVALID_DB).
            if db.datallowconn && !db.datistemplate && db.datconnlimit != -2 {
                found.push(Database {
                    oid: db.oid,
                    name: CStr::from_ptr(db.datname.data.as_ptr())
                        .to_string_lossy()
                        .into_owned(),
                });
            }
        }
        pg_sys::heap_endscan(scan);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        pg_sys::CommitTransactionCommand();
    }
    found
}

/// One maintenance round: each selected database in turn.
fn run_round() {
    report_activity(
        pg_sys::BackendState::STATE_RUNNING,
        Some(c"maintenance round"),
    );
    let wanted = settings::database_names();
    for db in databases() {
        if !wanted.is_empty() && !wanted.contains(&db.name) {
            continue;
        }
        if shutdown_requested() || !maintain_database(&db) {
            return;
        }
    }
}

/// Start the maintenance worker of `db` and wait until it exits. False: stop the round.
fn maintain_database(db: &Database) -> bool {
    // bgw_name holds 95 bytes; a database name has at most 63.
    let name = format!("{MAINTENANCE_NAME} for {}", db.name);
    let name = truncate(&name, 95);
    let builder = BackgroundWorkerBuilder::new(name)
        .set_type(MAINTENANCE_NAME)
        .set_library(LIBRARY)
        .set_function("idem_maintenance_main")
        .enable_spi_access()
        .set_restart_time(None)
        .set_argument(Some(Datum::from(db.oid)))
        // The name, for messages after a failure, when the catalog is out of reach.
        .set_extra(&db.name)
        // SAFETY: this process's pid, so the postmaster tells us when the worker starts/stops.
        .set_notify_pid(unsafe { pg_sys::MyProcPid });
    let mut worker: pg_sys::BackgroundWorker = (&builder).into();
    let mut handle: *mut pg_sys::BackgroundWorkerHandle = core::ptr::null_mut();
    // SAFETY: registers a copy of `worker`; `handle` is palloc'd on success.
    let registered = unsafe { pg_sys::RegisterDynamicBackgroundWorker(&mut worker, &mut handle) };
    if !registered || handle.is_null() {
        pgrx::ereport!(
            PgLogLevel::WARNING,
            PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            format!(
                "idempotency: could not start the maintenance of database \"{}\": no free background worker slot",
                db.name
            ),
            "Raise max_worker_processes."
        );
        return false;
    }
    let go_on = wait_for_exit(handle);
    // SAFETY: the handle was palloc'd by RegisterDynamicBackgroundWorker and is ours.
    unsafe { pg_sys::pfree(handle.cast()) };
    go_on
}

/// Wait for a maintenance worker to exit. On SIGTERM, stop it and return false.
fn wait_for_exit(handle: *mut pg_sys::BackgroundWorkerHandle) -> bool {
    loop {
        let mut pid: pg_sys::pid_t = 0;
        // SAFETY: a handle from RegisterDynamicBackgroundWorker.
        let status = unsafe { pg_sys::GetBackgroundWorkerPid(handle, &mut pid) };
        if status == pg_sys::BgwHandleStatus::BGWH_STOPPED {
            return true;
        }
        if status == pg_sys::BgwHandleStatus::BGWH_POSTMASTER_DIED {
            // SAFETY: nothing to clean up; the postmaster is gone.
            unsafe { pg_sys::proc_exit(1) }
        }
        if shutdown_requested() {
            // SAFETY: as above.
            unsafe { pg_sys::TerminateBackgroundWorker(handle) };
            return false;
        }
        // The postmaster sets our latch when the worker starts or stops.
        wait_latch(Duration::from_secs(1));
    }
}

fn truncate(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

// ---------------------------------------------------------------------------------------------
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
    step: fn(&Conn, i32) -> Result<i64>,
) -> Result<i64> {
    let mut total = 0;
    while keep_going() {
        let started = Instant::now();
        let done = in_transaction(what, || {
            crate::as_owner::run(table, || step(&Conn::open()?, batch))
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
fn isolated(what: &CStr, table: &CStr, batch: i32, step: fn(&Conn, i32) -> Result<i64>) -> i64 {
    let outcome = PgTryBuilder::new(|| drain(what, table, batch, step).map_err(Failure::from))
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
    let reclaimed = isolated(
        c"idem_reclaim",
        c"requests",
        batch,
        maintenance::reclaim_batch,
    );
    let purged = isolated(c"idem_purge", c"requests", batch, maintenance::purge_batch);
    isolated(
        c"idem_inbox_purge",
        c"inbox",
        batch,
        crate::inbox::purge_batch,
    );
    isolated(
        c"idem_outbox_purge",
        c"outbox",
        batch,
        crate::outbox::purge_batch,
    );
    crate::metrics::count_round();
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
