//! A hook the host calls back into while long work runs: a database server uses it to honour
//! cancellation and `statement_timeout` (Postgres' CHECK_FOR_INTERRUPTS). The crate stays free
//! of any host: without a hook, nothing is called.
//!
//! The hook may unwind (a cancelled statement): everything here is unwind-safe, no state
//! outlives the call that was interrupted.

use std::sync::OnceLock;

static HOOK: OnceLock<fn()> = OnceLock::new();

/// Install the hook, once per process (later calls are ignored).
pub fn set_interrupt_hook(hook: fn()) {
    let _ = HOOK.set(hook);
}

/// Units of work (tokens, nodes) between two calls of the hook.
pub const EVERY: u32 = 4096;

/// Count one unit of work; every [`EVERY`] units, call the hook.
#[inline]
pub fn tick(counter: &mut u32) {
    *counter += 1;
    if *counter >= EVERY {
        *counter = 0;
        check();
    }
}

/// Bytes scanned inside one token (a long string, number or run of white space) between two
/// calls of the hook.
pub const BYTES: usize = 1 << 20;

/// Call the hook when a scan inside one token reaches a multiple of [`BYTES`].
#[inline]
pub fn at_byte(pos: usize) {
    if pos & (BYTES - 1) == 0 {
        check();
    }
}

/// Call the hook now.
#[inline]
pub fn check() {
    if let Some(hook) = HOOK.get() {
        hook();
    }
}
