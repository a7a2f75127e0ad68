//! Beneath everything else: the record (`record`) and the seam's interface (`store`),
//! privilege checks (`access`), whether a table is a Citus table (`citus_detect`), the
//! differences between majors (`compat`), settings, datums, SQLSTATEs (`errors`).

pub mod access;
pub mod canonical_limits;
pub mod citus_detect;
pub mod compat;
pub mod datum;
pub mod errors;
pub mod jsonb;
pub mod record;
pub mod settings;
pub mod store;
#[cfg(feature = "pg_test")]
pub mod test_points;
