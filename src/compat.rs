//! Differences between the Postgres majors we build for, in one place.

use core::ffi::{CStr, c_int};

use pgrx::pg_sys;

/// Reserve the `idempotency.` GUC prefix: unknown `idempotency.*` settings are reported.
pub fn reserve_guc_prefix(prefix: &'static CStr) {
    // SAFETY: called from _PG_init with a static, NUL-terminated name.
    unsafe {
        #[cfg(any(feature = "pg13", feature = "pg14"))]
        pg_sys::EmitWarningsOnPlaceholders(prefix.as_ptr());
        #[cfg(not(any(feature = "pg13", feature = "pg14")))]
        pg_sys::MarkGUCPrefixReserved(prefix.as_ptr());
    }
}

/// Install a signal handler (backend flavour: `pqsignal_be` from Postgres 18 on).
pub fn pqsignal(signal: u32, handler: pg_sys::pqsigfunc) {
    // SAFETY: installs a C signal handler in this (single-threaded) backend.
    unsafe {
        #[cfg(feature = "pg18")]
        pg_sys::pqsignal_be(signal as c_int, handler);
        #[cfg(not(feature = "pg18"))]
        pg_sys::pqsignal(signal as c_int, handler);
    }
}
