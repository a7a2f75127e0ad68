//! `idempotency`: exactly-once-ish effects for PostgreSQL.
//!
//! - `claim`: the claim / complete / fail / checkpoint protocol (the request path);
//! - `lookup`, `write`, `shape`: the claim path's direct read and write, and what "the table is
//!   as the extension made it" means (judged after the table is locked);
//! - `access`: the privilege checks SQL would make while parsing;
//! - `call`: `idem_call`, the claim protocol around one function call;
//! - `inbox`, `versions`, `outbox`: consumer-side deduplication, ordered updates, the outbox;
//! - `canonical`, `jsonb`, `lock_key`: RFC 8785 hashing and the advisory-lock key;
//! - `maintenance`, `worker`, `maintenance_worker`, `as_owner`, `metrics`, `settings`: upkeep
//!   (reclaim / purge), the launcher and the per-database worker that run it as each table's
//!   owner, counters in shared memory, and the `idempotency.*` settings;
//! - `schema`: the extension's tables and types; `errors`: the SQLSTATEs it raises;
//! - `compat`: the only code that differs between Postgres majors.

use pgrx::prelude::*;

mod access;
mod args;
mod as_owner;
pub mod call;
mod call_site;
mod call_target;
pub mod canonical;
mod canonical_limits;
mod citus;
pub mod claim;
mod claim_wait;
pub mod compat;
mod datum;
pub mod errors;
mod finish;
mod http;
pub mod inbox;
mod input;
mod jsonb;
pub mod lock_key;
mod lookup;
mod maintenance;
mod maintenance_worker;
mod metrics;
pub mod outbox;
mod plans;
mod schema;
mod settings;
mod shape;
#[cfg(feature = "pg_test")]
mod test_points;
pub mod versions;
mod worker;
mod write;

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
