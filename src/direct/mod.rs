//! The direct path: `idempotency.requests` read and written without SPI or the planner, for
//! the calls that dominate (a replay, a new claim, a complete or fail).
//!
//! - `catalog`: the table's OIDs, `idem_status` labels and shape, learnt after the lock and
//!   cached per backend;
//! - `shape`: what "the table as the extension created it" means;
//! - `lookup`: one record by primary key through the index;
//! - `writer`: a row inserted or updated through the table AM and its indexes.
//!
//! Every rule for when SQL takes over is here, each with its reason. All are judged after the
//! table is locked.
//! - Reading ([`may_read`]):
//!   - no USAGE on schema `idempotency` or no SELECT on the table: the error SQL would raise;
//!   - the first 17 columns or the primary key are not as created: SQL reads whatever is there;
//!   - a Citus table: the rows are in shards, which only SQL reaches;
//!   - row-level security applies: SQL applies the policies.
//! - Writing ([`may_write`], then [`may_write_locked`] under `RowExclusiveLock`):
//!   - the table is not exactly as created (columns, NOT NULLs, no defaults, the 8 CHECKs by
//!     expression, no triggers or rules): only the executor runs those;
//!   - a read-only transaction (SQL raises 25006, also on a standby), or REPEATABLE READ and
//!     stricter (SQL raises serialization failures);
//!   - something about the table was invalidated since the read: the read's decisions are void;
//!   - the caller lacks the privilege: SQL raises the error.
//! - Updating a read record ([`may_update`]): it was claimed after this transaction began (SQL
//!   reports `requests_times_check`). And if someone changed the row since it was read,
//!   `Writer::update` writes nothing and SQL re-reads it, as UPDATE does.

pub mod catalog;
pub mod lookup;
pub mod shape;
pub mod writer;

use core::ffi::c_int;

use pgrx::pg_sys;

use crate::errors::{self, IdemError, Result};
use crate::record::Record;
use crate::transition::Clock;
pub use catalog::{Catalog, changed_since, lock_table, resolve};
pub use lookup::Lookup;
pub use writer::Writer;

/// May the locked table described by `catalog` be read directly? An error is the one SQL would
/// raise.
pub fn may_read(catalog: &Catalog) -> Result<bool> {
    crate::access::require_schema_usage(catalog.namespace)?;
    // SAFETY: privilege and RLS checks of a locked relation.
    unsafe {
        let user = pg_sys::GetUserId();
        if pg_sys::pg_class_aclcheck(catalog.table, user, pg_sys::ACL_SELECT as pg_sys::AclMode)
            != pg_sys::AclResult::ACLCHECK_OK
        {
            return Err(IdemError::new(
                errors::INSUFFICIENT_PRIVILEGE,
                "permission denied for table requests",
            )
            .hint(
                "GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency.requests TO the calling role.",
            ));
        }
        Ok(catalog.shape.readable
            && !catalog.distributed
            && !crate::citus::detect::assumed()
            && pg_sys::check_enable_rls(catalog.table, pg_sys::InvalidOid, false)
                != pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32)
    }
}

/// May this transaction write the table directly (before the write lock is taken)?
pub fn may_write(catalog: &Catalog) -> bool {
    // SAFETY: reads the transaction's isolation level and read-only flag.
    unsafe {
        catalog.shape.writable
            && !pg_sys::XactReadOnly
            && pg_sys::XactIsoLevel < pg_sys::XACT_REPEATABLE_READ as c_int
    }
}

/// With the write lock held: do the read's decisions still stand, and does the caller hold
/// `privilege`?
pub fn may_write_locked(lookup: &Lookup, privilege: u32) -> bool {
    // SAFETY: a privilege check of a locked relation.
    !changed_since(lookup.generation)
        && unsafe {
            pg_sys::pg_class_aclcheck(
                lookup.catalog.table,
                pg_sys::GetUserId(),
                privilege as pg_sys::AclMode,
            ) == pg_sys::AclResult::ACLCHECK_OK
        }
}

/// May `stored`, read directly, be updated directly at `clock`?
pub fn may_update(stored: &Record, clock: Clock) -> bool {
    clock.txn >= stored.created_at
}

/// (constraint name, canonical expression) of every CHECK of `idempotency.requests`, then
/// ("readable"/"writable", flag), for tests.
#[cfg(any(test, feature = "pg_test"))]
pub fn describe_requests() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(Some((catalog, rel, _))) = lock_table(pg_sys::AccessShareLock) else {
        return out;
    };
    // SAFETY: the locked relation's constraints, as `checks_match` reads them.
    unsafe {
        let constr = (*(*rel).rd_att).constr;
        if !constr.is_null() {
            let checks = core::slice::from_raw_parts((*constr).check, (*constr).num_check as usize);
            let status = pgrx::PgTupleDesc::from_pg_unchecked((*rel).rd_att)
                .get(3)
                .map_or(pg_sys::InvalidOid, |attr| attr.atttypid);
            for check in checks {
                let expr = shape::canonical(pg_sys::stringToNode(check.ccbin).cast(), status);
                out.push((
                    core::ffi::CStr::from_ptr(check.ccname)
                        .to_string_lossy()
                        .into_owned(),
                    expr.unwrap_or_else(|| "?".into()),
                ));
            }
        }
        pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
    }
    out.push(("readable".into(), catalog.shape.readable.to_string()));
    out.push(("writable".into(), catalog.shape.writable.to_string()));
    out
}
