//! `idem_claim(..., wait => interval)`: a claim that finds its key in flight
//! (`processing_active`) waits at most `wait` for the holder to finish, then judges again.
//!
//! How it waits, for both kinds of holder (a claim another transaction has not committed yet,
//! and a committed `processing` record with a live lease):
//! - it sleeps on its own latch with exponential backoff (1 ms doubling up to
//!   [`MAX_SLEEP_MS`]), never longer than what is left of `wait`, then claims again from
//!   scratch; the first answer that is not `processing_active` is returned (a holder that
//!   committed success gives `replay_success`; a holder that rolled back lets this claim take
//!   the key; a failure or an expired lease is taken over as usual);
//! - between two tries it holds nothing: each try's scans and SPI connection are closed and its
//!   memory is freed before it sleeps, and a try that found the key busy took no key lock;
//! - the latch wakes on cancel, `statement_timeout` and postmaster death, and interrupts are
//!   checked after every sleep, so the wait is as cancellable as any statement.
//! `wait => NULL` (the default) or zero is the claim as it always was: one try, no sleep.

use pgrx::PgMemoryContexts;
use pgrx::pg_sys;

use crate::args;
use crate::claim::{ClaimArgs, Claimed, Held, Outcome, claim_held};
use crate::errors::{self, IdemError, Result};

/// The longest single sleep: how late a waiter may notice that its holder finished.
const MAX_SLEEP_MS: i64 = 50;
/// Argument position of `wait` in `idem_claim` (sql/claim.sql).
const WAIT_ARG: usize = 6;

/// A claim's answer, with what must stay open while it is used.
pub(crate) struct Waited {
    // Dropped in this order: the try's scans and SPI first, then the memory they used.
    _held: Held,
    _memory: Option<PgMemoryContexts>,
}

/// `wait` in microseconds: None for NULL or zero; negative is `22023`.
///
/// # Safety
/// `fcinfo` is a call of `idem_claim` as declared in sql/claim.sql.
pub(crate) unsafe fn wait_arg(fcinfo: pg_sys::FunctionCallInfo) -> Result<Option<i64>> {
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

/// Claim `args`, waiting up to `wait` microseconds while the key is `processing_active`.
pub(crate) fn claim_waiting(args: &ClaimArgs<'_>, wait: Option<i64>) -> Result<(Claimed, Waited)> {
    let Some(wait) = wait else {
        let (claimed, held) = claim_held(args)?;
        return Ok((
            claimed,
            Waited {
                _held: held,
                _memory: None,
            },
        ));
    };
    // SAFETY: reads the clock.
    let deadline = unsafe { pg_sys::GetCurrentTimestamp() }.saturating_add(wait);
    // Each try allocates here; the context is reset between tries and kept for the answer.
    // SAFETY: reads the current memory context.
    let caller = unsafe { pg_sys::CurrentMemoryContext };
    let mut memory = PgMemoryContexts::new("idem_claim wait");
    let mut sleep_ms: i64 = 1;
    loop {
        let left_ms = {
            // SAFETY: switches to a context this function owns and back.
            let (claimed, held) = unsafe { memory.switch_to(|_| claim_held(args)) }?;
            // SAFETY: reads the clock.
            let left_ms = (deadline - unsafe { pg_sys::GetCurrentTimestamp() }) / 1000;
            if claimed.outcome != Some(Outcome::ProcessingActive) || left_ms <= 0 {
                return Ok((
                    claimed,
                    Waited {
                        _held: held,
                        _memory: Some(memory),
                    },
                ));
            }
            left_ms
            // Hold nothing while asleep: this try's scans and SPI close here.
        };
        // SAFETY: closing SPI may have left `memory` current; nothing in it is referenced.
        unsafe {
            pg_sys::MemoryContextSwitchTo(caller);
            memory.reset();
        }
        sleep(sleep_ms.min(left_ms));
        sleep_ms = (sleep_ms * 2).min(MAX_SLEEP_MS);
    }
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
