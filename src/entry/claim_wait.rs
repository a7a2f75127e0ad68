//! `idem_claim(..., wait => interval)`: a claim that finds its key in flight
//! (`processing_active`) waits at most `wait` for the holder to finish, then judges again.
//!
//! How it waits, for both kinds of holder (a claim another transaction has not committed yet,
//! and a committed `processing` record with a live lease):
//! - it *probes*: one claim inside a subtransaction that is then rolled back, so whatever the
//!   probe locked or wrote (a row lock, the key's advisory lock, an insert) is undone and the
//!   probe's outcome is all that is kept;
//! - while the probe says `processing_active`, it sleeps on its own latch with exponential
//!   backoff (1 ms doubling up to [`MAX_SLEEP_MS`]), never past the deadline, and probes again:
//!   between probes it holds no lock on the key and no scan, SPI connection or memory of them;
//! - once a probe says anything else, or the time is up, it claims for real, exactly as a claim
//!   without `wait` does, and returns that answer (a holder that committed success gives
//!   `replay_success`; one that rolled back lets this claim take the key over);
//! - the latch wakes on cancel, `statement_timeout` and postmaster death, and interrupts are
//!   checked after every sleep, so the wait is as cancellable as any statement.
//!
//! `wait => NULL` (the default) or zero is the claim as it always was: one try, no probe.

use std::panic::AssertUnwindSafe;

use pgrx::pg_sys;
use pgrx::{PgMemoryContexts, PgTryBuilder};

use crate::base::errors::{self, IdemError, Result};
use crate::base::record::Outcome;
use crate::steps::args;

/// The longest single sleep: how late a waiter may notice that its holder finished.
const MAX_SLEEP_MS: i64 = 50;
/// Argument position of `wait` in `idem_claim` (sql/claim.sql).
pub(crate) const WAIT_ARG: usize = 6;

/// `wait` in microseconds: None for NULL or zero; negative is `22023`.
///
/// # Safety
/// `fcinfo` is a call of `idem_claim` as declared in sql/claim.sql.
pub(crate) unsafe fn wait_arg(fcinfo: pg_sys::FunctionCallInfo) -> Result<Option<i64>> {
    // The 0.1.0 declaration of idem_claim has no `wait`: that SQL still calls this library
    // until `ALTER EXTENSION idempotency UPDATE` runs.
    // SAFETY: reads the call's argument count.
    if unsafe { (*fcinfo).nargs } as usize <= WAIT_ARG {
        return Ok(None);
    }
    // SAFETY: the caller guarantees argument WAIT_ARG is an interval.
    let Some((_, wait)) = (unsafe { args::interval(fcinfo, WAIT_ARG) }) else {
        return Ok(None);
    };
    let micros = wait.as_micros();
    if micros < 0 {
        return Err(
            IdemError::new(errors::INVALID_PARAMETER_VALUE, "wait must not be negative")
                .hint("Pass NULL (the default) not to wait."),
        );
    }
    // 'infinity' and the like: wait until cancelled or statement_timeout.
    Ok((micros > 0).then(|| micros.min(i64::MAX as i128 / 4) as i64))
}

/// Wait up to `wait` microseconds while `probe_claim` (a claim whose effects are rolled back)
/// answers `processing_active`; the caller then claims for real.
pub(crate) fn wait_while_active(
    wait: Option<i64>,
    mut probe_claim: impl FnMut() -> Result<Option<Outcome>>,
) -> Result<()> {
    let Some(wait) = wait else {
        return Ok(());
    };
    // SAFETY: reads the clock.
    let deadline = unsafe { pg_sys::GetCurrentTimestamp() }.saturating_add(wait);
    // Each probe allocates here; the context is reset after it and deleted at the end.
    let mut memory = PgMemoryContexts::new("idem_claim wait");
    let mut sleep_ms: i64 = 1;
    loop {
        let outcome = probe(&mut probe_claim, &mut memory)?;
        // SAFETY: reads the clock.
        let left_ms = (deadline - unsafe { pg_sys::GetCurrentTimestamp() }) / 1000;
        if outcome != Some(Outcome::ProcessingActive) || left_ms <= 0 {
            return Ok(());
        }
        sleep(sleep_ms.min(left_ms));
        sleep_ms = (sleep_ms * 2).min(MAX_SLEEP_MS);
    }
}

/// What `probe_claim` answers now, leaving nothing behind: it runs in a subtransaction that is
/// rolled back, in `memory`, which is reset afterwards. A Postgres error inside (say, a lease
/// past the timestamp range) rolls the subtransaction back too before it goes on up: left
/// open, it would leave the session in an aborted subtransaction that nothing ends.
fn probe(
    probe_claim: &mut impl FnMut() -> Result<Option<Outcome>>,
    memory: &mut PgMemoryContexts,
) -> Result<Option<Outcome>> {
    // SAFETY: the memory context and resource owner of the caller, restored after the
    // subtransaction as PL/pgSQL's exception blocks do.
    let (context, owner) = unsafe { (pg_sys::CurrentMemoryContext, pg_sys::CurrentResourceOwner) };
    let end = move || {
        // SAFETY: ends the subtransaction begun below, then restores the caller's state.
        unsafe {
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
            pg_sys::MemoryContextSwitchTo(context);
            pg_sys::CurrentResourceOwner = owner;
        }
    };
    // SAFETY: begins the subtransaction that `end` rolls back on every path.
    unsafe { pg_sys::BeginInternalSubTransaction(core::ptr::null()) };
    // The claim's scans and SPI connection are closed when the closure returns or unwinds.
    // AssertUnwindSafe: after an unwind nothing of the closure's state is used again.
    let outcome = PgTryBuilder::new(AssertUnwindSafe(|| {
        // SAFETY: `memory` is a live context of this call; the claim's values are not kept.
        unsafe { memory.switch_to(|_| probe_claim()) }
    }))
    .catch_others(|caught| {
        end();
        caught.rethrow()
    })
    .execute();
    end();
    // SAFETY: nothing allocated in `memory` is used after the probe.
    unsafe { memory.reset() };
    outcome
}

/// Sleep on this backend's latch; wakes early for interrupts, which are then served.
fn sleep(ms: i64) {
    // SAFETY: MyLatch is this backend's own latch; WaitLatch and ResetLatch are the documented
    // way to sleep interruptibly (WL_EXIT_ON_PM_DEATH: a dead postmaster ends the backend).
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
            ms as _,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
    pgrx::check_for_interrupts!();
}
