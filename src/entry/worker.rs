//! The background worker: a launcher and, per database, a short-lived maintenance worker
//! (the shape of pg_partman's worker).
//!
//! - The launcher (`idempotency launcher`) is registered in `_PG_init` while preloading. It is
//!   connected to no database (it reads only the shared catalog `pg_database`, in one short
//!   transaction), so it holds no database while it sleeps. Every `idempotency.naptime` it
//!   starts one maintenance worker per database that allows connections (templates excluded:
//!   a connection to one would make `CREATE DATABASE` fail), optionally restricted to
//!   `idempotency.databases`, one at a time, and waits for it to finish.
//! - A maintenance worker (`idempotency maintenance`, `maintenance_worker.rs`) does one
//!   database's upkeep.
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

use crate::base::compat;
use crate::base::settings;

pub(crate) const LIBRARY: &str = "idempotency";
pub const LAUNCHER_NAME: &str = "idempotency launcher";
pub const MAINTENANCE_NAME: &str = "idempotency maintenance";
/// After a crash or `pg_terminate_backend`, the postmaster starts the launcher again this
/// much later.
const LAUNCHER_RESTART: Duration = Duration::from_secs(5);
/// A maintenance transaction gives up on a table lock after this long (e.g. behind DDL),
/// rather than hold up the launcher's round; the next round tries again.
pub(crate) const LOCK_TIMEOUT: &CStr = c"1s";

unsafe extern "C-unwind" {
    // Core's flag-only signal handlers (postmaster/interrupt.c, tcop/postgres.c), declared
    // here because pgrx exposes only guarded Rust wrappers, which are not C function pointers.
    pub(crate) fn SignalHandlerForConfigReload(signal: c_int);
    fn SignalHandlerForShutdownRequest(signal: c_int);
    pub(crate) fn die(signal: c_int);
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

pub(crate) fn shutdown_requested() -> bool {
    // SAFETY: a sig_atomic_t flag set by the signal handler.
    unsafe { core::ptr::read_volatile(&raw const pg_sys::ShutdownRequestPending) != 0 }
}

/// Reload the configuration if a SIGHUP arrived; true if it did.
pub(crate) fn reload_if_requested() -> bool {
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
pub(crate) fn wait_latch(timeout: Duration) {
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

pub(crate) fn report_activity(state: pg_sys::BackendState::Type, what: Option<&CStr>) {
    // SAFETY: pg_stat_activity's state and query of this process.
    unsafe {
        pg_sys::pgstat_report_activity(state, what.map_or(core::ptr::null(), CStr::as_ptr));
    }
}

pub(crate) fn in_recovery() -> bool {
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
