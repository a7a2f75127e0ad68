//! `idempotency`: exactly-once-ish effects for PostgreSQL.
//!
//! - `claim`: the claim / complete / fail / checkpoint protocol (the request path);
//! - `schema`: the extension's tables and types; `errors`: the SQLSTATEs it raises.

use pgrx::prelude::*;

mod args;
pub mod canonical;
pub mod claim;
pub mod compat;
mod datum;
pub mod errors;
mod input;
mod jsonb;
pub mod lock_key;
mod lookup;
mod metrics;
mod plans;
mod schema;

::pgrx::pg_module_magic!(name, version);

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
