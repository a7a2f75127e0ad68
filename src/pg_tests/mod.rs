//! In-backend tests (`#[pg_test]`), built with the `pg_test` feature; `cargo pgrx test` runs
//! them, each in its own transaction of one test database.
//!
//! Everything SQL sees lives in schema `tests`: `cargo pgrx test` calls `tests.<test>()`, and
//! the integration tests (`tests/`) call the helpers below. pgrx puts a function in a
//! `#[pg_schema] mod tests` schema only if the function is defined in that very module (it
//! compares module paths exactly, not by prefix), and `#[pg_schema]` only takes a module
//! written inline. So each file of this directory wraps its tests in its own
//! `#[pg_schema] mod tests { ... }`, and [`helpers`] holds what several of them share.

mod bounds;
mod call;
mod call_site;
mod canonical;
mod citus;
mod claim;
mod expiry;
mod finish;
mod grants;
mod helpers;
mod http;
mod inbox;
mod maintenance;
mod outbox;
mod signatures;
mod transitions;
mod writes;

#[pgrx::pg_schema]
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

    /// Every statement the extension prepared in this backend (the search_path test).
    #[pg_extern]
    fn prepared_statements() -> SetOfIterator<'static, &'static str> {
        SetOfIterator::new(crate::spi::prepared_statements())
    }

    /// Take the Citus code paths (src/steps/citus.rs) on this plain server from now on in this
    /// backend (`true`) or not; the previous value.
    #[pg_extern]
    fn assume_distributed(on: bool) -> bool {
        crate::base::citus_detect::assume_distributed(on)
    }

    /// The CHECK constraints of idempotency.requests in direct/shape.rs' canonical form, and the
    /// table's shape as the direct paths judge it.
    #[pg_extern]
    fn requests_shape() -> TableIterator<'static, (name!(item, String), name!(value, String))> {
        TableIterator::new(crate::direct::describe_requests())
    }
}
