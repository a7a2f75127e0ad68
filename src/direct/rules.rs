//! When SQL takes over from the direct path: every rule, with its reason. All are judged after
//! the table is locked.
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

use core::ffi::c_int;

use pgrx::pg_sys;

use crate::direct::catalog::{Catalog, changed_since};
use crate::errors::{self, IdemError, Result};
use crate::record::Record;

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

/// With the write lock held: do the decisions of the read made at `generation` still stand,
/// and does the caller hold `privilege`?
pub fn may_write_locked(catalog: &Catalog, generation: u64, privilege: u32) -> bool {
    // SAFETY: a privilege check of a locked relation.
    !changed_since(generation)
        && unsafe {
            pg_sys::pg_class_aclcheck(
                catalog.table,
                pg_sys::GetUserId(),
                privilege as pg_sys::AclMode,
            ) == pg_sys::AclResult::ACLCHECK_OK
        }
}

/// May `stored`, read directly, be updated directly by a transaction that began at `txn`?
pub fn may_update(stored: &Record, txn: i64) -> bool {
    txn >= stored.created_at
}
