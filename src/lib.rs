//! `idempotency`: exactly-once-ish effects for PostgreSQL.
//!
//! - `claim`: the claim / complete / fail / checkpoint protocol (the request path);
//! - `lookup`: the claim path's first read, straight through the primary key;
//! - `call`: `idem_call`, the claim protocol around one function call;
//! - `inbox`, `versions`, `outbox`: consumer-side deduplication, ordered updates, the outbox;
//! - `canonical`, `jsonb`, `lock_key`: RFC 8785 hashing and the advisory-lock key;
//! - `maintenance`, `worker`, `metrics`, `settings`: upkeep (reclaim / purge), the background
//!   worker that runs it, counters in shared memory, and the `idempotency.*` settings;
//! - `schema`: the extension's tables and types; `errors`: the SQLSTATEs it raises;
//! - `compat`: the only code that differs between Postgres majors.

use pgrx::prelude::*;

mod args;
pub mod call;
mod call_site;
pub mod canonical;
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
mod metrics;
pub mod outbox;
mod plans;
mod schema;
mod settings;
pub mod versions;
mod worker;
mod write;

::pgrx::pg_module_magic!(name, version);

/// Settings always; shared memory and the background worker only while preloading
/// (`shared_preload_libraries`), the one time they can be set up.
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    settings::init();
    outbox::register_gucs();
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

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    extension_sql!(
        r#"
        -- The SQLSTATE a statement fails with ('ok' if it does not), caught in PL/pgSQL so
        -- that custom codes reach the test unchanged.
        CREATE FUNCTION tests.sqlstate_of(sql text) RETURNS text LANGUAGE plpgsql AS $$
        BEGIN EXECUTE sql; RETURN 'ok'; EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE; END $$;
        CREATE FUNCTION tests.outcome_of(sql text) RETURNS text LANGUAGE plpgsql AS $$
        BEGIN EXECUTE sql; RETURN 'ok'; EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE || ': ' || SQLERRM; END $$;
        CREATE FUNCTION tests.error_detail_of(sql text) RETURNS text LANGUAGE plpgsql AS $$
        DECLARE d text; BEGIN EXECUTE sql; RETURN NULL;
        EXCEPTION WHEN OTHERS THEN GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL; RETURN d; END $$;
        CREATE FUNCTION tests.error_hint_of(sql text) RETURNS text LANGUAGE plpgsql AS $$
        DECLARE h text; BEGIN EXECUTE sql; RETURN NULL;
        EXCEPTION WHEN OTHERS THEN GET STACKED DIAGNOSTICS h = PG_EXCEPTION_HINT; RETURN h; END $$;
        "#,
        name = "test_helpers",
    );

    #[pg_test]
    fn version_is_reported() {
        assert_eq!(
            Spi::get_one::<&str>("SELECT idem_version()").unwrap(),
            Some(env!("CARGO_PKG_VERSION"))
        );
    }

    include!("pg_tests/helpers.rs");
    include!("pg_tests/claim.rs");
    include!("pg_tests/canonical.rs");
    include!("pg_tests/inbox.rs");
    include!("pg_tests/outbox.rs");
    include!("pg_tests/call.rs");
    include!("pg_tests/maintenance.rs");
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
