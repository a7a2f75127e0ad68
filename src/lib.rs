//! `idempotency`: exactly-once-ish effects for PostgreSQL.
use pgrx::prelude::*;

pub mod canonical;
pub mod errors;
pub mod lock_key;

::pgrx::pg_module_magic!(name, version);

#[pg_extern]
fn idem_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn version_is_reported() {
        assert_eq!(Spi::get_one::<&str>("SELECT idem_version()").unwrap(), Some(env!("CARGO_PKG_VERSION")));
    }
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
