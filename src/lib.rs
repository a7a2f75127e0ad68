//! `idempotency`: exactly-once-ish effects for PostgreSQL. The modules are layers, each a
//! folder of src/; the one list of them is the table in docs/architecture.md, which
//! `tests/layers/` checks every file and path against. The protocol's decisions are
//! `crates/idem-protocol`; the claim path is `entry/claim.rs`, finishing an attempt
//! `entry/finish.rs`, and the choice between the direct path and SQL `steps/seam.rs`.
//!
//! Test builds (`pg_test` feature) add `base::test_points` (injection and fail points) and
//! `pg_tests` (the `#[pg_test]`s, in schema `tests`).

use pgrx::prelude::*;

/// A fail point of test builds (`test_points::fail_point`); nothing in a release build.
macro_rules! fail_point {
    ($point:literal) => {
        #[cfg(feature = "pg_test")]
        crate::base::test_points::fail_point($point)?;
    };
}

mod base;
mod direct;
mod entry;
mod spi;
mod steps;

::pgrx::pg_module_magic!(name, version);

/// Settings always; shared memory and the background worker only while preloading
/// (`shared_preload_libraries`), the one time they can be set up.
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    base::settings::init();
    base::canonical_limits::init();
    #[cfg(feature = "pg_test")]
    base::test_points::init();
    // Last: reserving the prefix drops any idempotency.* value not defined by then.
    base::compat::mark_guc_prefix_reserved(c"idempotency");
    // SAFETY: a flag Postgres sets while it loads shared_preload_libraries.
    if unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress } {
        entry::metrics::init_shared_memory();
        entry::worker::register_launcher();
    }
}

/// sql/metrics.sql declares it.
#[pg_extern(immutable, parallel_safe, sql = false)]
fn idem_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The in-backend tests, in schema `tests` (src/pg_tests/mod.rs).
#[cfg(any(test, feature = "pg_test"))]
mod pg_tests;

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        // A reclaim grace other than the default 0, so that #[pg_test]s can show it is
        // honoured (pg_tests/expiry.rs: reclaim_waits_out_the_grace); the other reclaim tests
        // end their leases seconds ago.
        vec!["idempotency.reclaim_grace = 500"]
    }
}
