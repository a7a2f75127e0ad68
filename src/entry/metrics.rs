//! Counters of what the extension did since the server started, in shared memory.
//!
//! Shared memory exists only when the library is in `shared_preload_libraries`: then
//! `_PG_init` reserves it and every backend inherits the pointer. Without preloading the
//! pointer stays null, the `count_*` functions do nothing and `idem_metrics()` says why.
//! Counting is one relaxed atomic add: no lock on the claim path.

use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use pgrx::prelude::*;
use pgrx::{PgSharedMemoryInitialization, pg_shmem_init, pg_sys};

use crate::base::errors::{self, IdemError, OrRaise, Result};
use crate::base::record::Outcome;

/// Every counter, in the order `idem_metrics()` lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
enum Counter {
    ClaimsNewClaim,
    ClaimsReplaySuccess,
    ClaimsProcessingActive,
    ClaimsProcessingStale,
    ClaimsRetryableFailure,
    ClaimsFinalFailure,
    HashMismatches,
    Completions,
    Failures,
    Reclaimed,
    Purged,
    MaintenanceRounds,
    WritesDirect,
    WritesSql,
    MaintenanceRefused,
}

const COUNTERS: usize = 15;

const NAMES: [&str; COUNTERS] = [
    "claims_new_claim",
    "claims_replay_success",
    "claims_processing_active",
    "claims_processing_stale",
    "claims_retryable_failure",
    "claims_final_failure",
    "hash_mismatches",
    "completions",
    "failures",
    "reclaimed",
    "purged",
    "maintenance_rounds",
    "writes_direct",
    "writes_sql",
    "maintenance_refused",
];

/// The counters.
type Values = [AtomicU64; COUNTERS];

/// The counters' place in shared memory; null in a process that did not preload us.
pub struct SharedCounters {
    values: AtomicPtr<Values>,
}

static SHARED: SharedCounters = SharedCounters {
    values: AtomicPtr::new(core::ptr::null_mut()),
};

impl PgSharedMemoryInitialization for SharedCounters {
    type Value = Values;

    unsafe fn on_shmem_request(&'static self) {
        // SAFETY: called from the shmem request hook (or _PG_init while preloading on 13/14).
        unsafe { pg_sys::RequestAddinShmemSpace(core::mem::size_of::<Values>()) }
    }

    unsafe fn on_shmem_startup(&'static self, value: Values) {
        // SAFETY: Postgres' ShmemInitStruct protocol under AddinShmemInitLock, which is
        // MainLWLockArray[21] (as in pgrx's own PgAtomic). The struct is MAXALIGNed.
        unsafe {
            let lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
            pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
            let mut found = false;
            let values = pg_sys::ShmemInitStruct(
                c"idempotency counters".as_ptr(),
                core::mem::size_of::<Values>(),
                &mut found,
            )
            .cast::<Values>();
            if !found {
                values.write(value);
            }
            self.values.store(values, Ordering::Release);
            pg_sys::LWLockRelease(lock);
        }
    }
}

/// Reserve the counters. Only from `_PG_init` while preloading.
pub fn init_shared_memory() {
    pg_shmem_init!(SHARED);
}

#[inline]
fn values() -> Option<&'static Values> {
    // SAFETY: non-null only once it points at initialized shared memory that lives as long
    // as the server.
    unsafe { SHARED.values.load(Ordering::Acquire).as_ref() }
}

#[inline]
fn add(counter: Counter, n: u64) {
    if let Some(values) = values() {
        values[counter as usize].fetch_add(n, Ordering::Relaxed);
    }
}

/// A maintenance step refused a table (`as_owner.rs`). True the first time this worker process
/// refused this (database, table): an exact set per process, so that no table's warning is
/// lost to another's (a shared 64-bit filter let unrelated tables share a bit).
pub fn count_refused(database: pg_sys::Oid, table: pg_sys::Oid) -> bool {
    add(Counter::MaintenanceRefused, 1);
    REFUSED.with(|seen| {
        seen.borrow_mut()
            .insert((u32::from(database), u32::from(table)))
    })
}

thread_local! {
    static REFUSED: std::cell::RefCell<std::collections::HashSet<(u32, u32)>> =
        std::cell::RefCell::new(std::collections::HashSet::new());
}

#[inline]
pub fn count_claim(outcome: Option<Outcome>) {
    let counter = match outcome {
        Some(Outcome::NewClaim) => Counter::ClaimsNewClaim,
        Some(Outcome::ReplaySuccess) => Counter::ClaimsReplaySuccess,
        Some(Outcome::ProcessingActive) => Counter::ClaimsProcessingActive,
        Some(Outcome::ProcessingStale) => Counter::ClaimsProcessingStale,
        Some(Outcome::RetryableFailure) => Counter::ClaimsRetryableFailure,
        Some(Outcome::FinalFailure) => Counter::ClaimsFinalFailure,
        None => return,
    };
    add(counter, 1);
}

#[inline]
pub fn count_hash_mismatch() {
    add(Counter::HashMismatches, 1);
}

#[inline]
pub fn count_completion() {
    add(Counter::Completions, 1);
}

#[inline]
pub fn count_failure() {
    add(Counter::Failures, 1);
}

pub fn count_reclaimed(rows: u64) {
    add(Counter::Reclaimed, rows);
}

pub fn count_purged(rows: u64) {
    add(Counter::Purged, rows);
}

pub fn count_round() {
    add(Counter::MaintenanceRounds, 1);
}

/// A record written by the claim path: directly (`direct/writer.rs`) or through SQL (takeovers, and
/// what the direct path leaves to SQL).
#[inline]
pub fn count_write(direct: bool) {
    add(
        if direct {
            Counter::WritesDirect
        } else {
            Counter::WritesSql
        },
        1,
    );
}

fn snapshot() -> Result<Vec<(String, i64)>> {
    let values = values().ok_or_else(|| {
        IdemError::new(
            errors::OBJECT_NOT_IN_PREREQUISITE_STATE,
            "idempotency metrics are not available: the library was not preloaded",
        )
        .detail("The counters live in shared memory, which is reserved only at server start.")
        .hint("Add idempotency to shared_preload_libraries in postgresql.conf and restart the server.")
    })?;
    Ok(NAMES
        .iter()
        .zip(values.iter())
        .map(|(name, value)| ((*name).to_owned(), value.load(Ordering::Relaxed) as i64))
        .collect())
}

/// What the extension did since the server started: one row per counter (sql/metrics.sql
/// declares it).
#[pg_extern(volatile, parallel_safe, sql = false)]
fn idem_metrics() -> TableIterator<'static, (name!(name, String), name!(value, i64))> {
    TableIterator::new(snapshot().or_raise())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_has_its_name() {
        assert_eq!(NAMES[Counter::ClaimsNewClaim as usize], "claims_new_claim");
        assert_eq!(NAMES[Counter::HashMismatches as usize], "hash_mismatches");
        assert_eq!(
            NAMES[Counter::MaintenanceRounds as usize],
            "maintenance_rounds"
        );
        assert_eq!(NAMES[Counter::WritesSql as usize], "writes_sql");
        assert_eq!(Counter::MaintenanceRefused as usize + 1, COUNTERS);
    }
}
