//! `idempotency`: exactly-once-ish effects for PostgreSQL. The modules, as layers from the SQL
//! surface down (docs/architecture.md draws them; a module imports only from its own layer's
//! lower modules or from layers below):
//!
//! 1. SQL-facing entry points: `claim` (`idem_claim`, with `claim_wait`), `finish` (complete,
//!    fail, checkpoint, forget), `call` (`idem_call`, with `call_target`), `inbox`, `versions`,
//!    `outbox`, `maintenance` (reclaim, purge), `metrics`, `canonical`, `lock_key`;
//! 2. the protocol's shared steps: `change` (change an attempt, direct or SQL), `result_row`
//!    (the result-row cache), `args` and `input` (arguments and their checks);
//! 3. the record and its transitions: `record` (columns, `Status`, `Outcome`, `Record`),
//!    `transition` (every state change, computed once);
//! 4. the two ways to the table: `direct/` (catalog cache, index lookup, heap/index writer and
//!    the rules for when SQL takes over) and `record_sql` over `spi` (kept plans);
//! 5. beneath: `access` (privilege checks), `citus` (`detect`: is the table distributed;
//!    upkeep of a distributed table), `compat` (differences between majors), `errors`,
//!    `settings`, `schema` (the SQL files), `canonical_limits`, `jsonb`, `datum`;
//! 6. background: `worker` (launcher), `maintenance_worker`, `as_owner`.
//!
//! Test builds (`pg_test` feature) add `test_points` (injection and fail points) and
//! `pg_tests` (the `#[pg_test]`s, in schema `tests`).

use pgrx::prelude::*;

/// A fail point of test builds (`test_points::fail_point`); nothing in a release build.
macro_rules! fail_point {
    ($point:literal) => {
        #[cfg(feature = "pg_test")]
        crate::test_points::fail_point($point)?;
    };
}

mod access;
mod args;
mod as_owner;
mod call;
mod call_target;
mod canonical;
mod canonical_limits;
mod change;
mod citus;
mod claim;
mod claim_wait;
mod compat;
mod datum;
mod direct;
mod errors;
mod finish;
mod inbox;
mod input;
mod jsonb;
mod lock_key;
mod maintenance;
mod maintenance_worker;
mod metrics;
mod outbox;
mod record;
mod record_sql;
mod result_row;
mod schema;
mod settings;
mod spi;
#[cfg(feature = "pg_test")]
mod test_points;
mod transition;
mod versions;
mod worker;

::pgrx::pg_module_magic!(name, version);

/// Settings always; shared memory and the background worker only while preloading
/// (`shared_preload_libraries`), the one time they can be set up.
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    settings::init();
    canonical_limits::init();
    #[cfg(feature = "pg_test")]
    test_points::init();
    // Last: reserving the prefix drops any idempotency.* value not defined by then.
    compat::mark_guc_prefix_reserved(c"idempotency");
    // SAFETY: a flag Postgres sets while it loads shared_preload_libraries.
    if unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress } {
        metrics::init_shared_memory();
        worker::register_launcher();
    }
}

#[pg_extern(immutable, parallel_safe)]
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
        // honoured (pg_tests/guards.rs: reclaim_waits_out_the_grace); the other reclaim tests
        // end their leases seconds ago.
        vec!["idempotency.reclaim_grace = 500"]
    }
}
