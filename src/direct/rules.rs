//! When SQL takes over from the direct path: every rule, with its reason. All are judged after
//! the table is locked. The rules themselves are the protocol's (`idem_protocol::may_read`,
//! `may_write`, `may_write_locked`, `may_change_directly`); this reads the facts they ask for
//! from Postgres, only as far as they ask.
//! - Reading ([`may_read`]):
//!   - no USAGE on schema `idempotency` or no SELECT on the table: the error SQL would raise;
//!   - the first 17 columns or the primary key are not as created: SQL reads whatever is there;
//!   - child tables other than the generations layout's three, or a generation not as created
//!     (`generations.rs`): SQL reads through the table;
//!   - a Citus table: the rows are in shards, which only SQL reaches;
//!   - row-level security applies: SQL applies the policies.
//! - Writing ([`may_write`], then [`may_write_locked`] under `RowExclusiveLock`):
//!   - the table is not exactly as created (columns, NOT NULLs, no defaults, the 8 CHECKs by
//!     expression, no triggers or rules): only the executor runs those; in the generations
//!     layout, the same for every generation, none has row-level security or a foreign key to
//!     it, the table has no policies, and none is a Citus table (SQL refuses those, 0A000);
//!   - a read-only transaction (SQL raises 25006, also on a standby), or REPEATABLE READ and
//!     stricter (SQL raises serialization failures);
//!   - something about the table was invalidated since the read: the read's decisions are void;
//!   - the caller lacks the privilege: SQL raises the error.
//! - Updating a read record (`idem_protocol::may_update`): it was claimed after this
//!   transaction began (SQL reports `requests_times_check`). And if someone changed the row
//!   since it was read, `Writer::update` writes nothing and SQL re-reads it, as UPDATE does.

use core::ffi::c_int;

use idem_protocol::{Isolation, ReadFacts, WriteFacts};
use pgrx::pg_sys;

use crate::base::errors::{self, IdemError, Result};
use crate::direct::catalog::{Catalog, changed_since};

/// The locked table, as the protocol's rules ask about it.
struct Table<'a>(&'a Catalog);

impl ReadFacts for Table<'_> {
    fn shape_readable(&self) -> bool {
        self.0.shape.readable
    }

    fn distributed(&self) -> bool {
        self.0.distributed
    }

    fn citus_assumed(&self) -> bool {
        crate::base::citus_detect::assumed()
    }

    fn rls_applies(&self) -> bool {
        // SAFETY: the RLS check of a locked relation.
        unsafe {
            pg_sys::check_enable_rls(self.0.table, pg_sys::InvalidOid, false)
                == pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32
        }
    }
}

impl WriteFacts for Table<'_> {
    fn shape_writable(&self) -> bool {
        self.0.shape.writable
    }

    fn read_only(&self) -> bool {
        // SAFETY: reads the transaction's read-only flag.
        unsafe { pg_sys::XactReadOnly }
    }

    fn isolation(&self) -> Isolation {
        // SAFETY: reads the transaction's isolation level.
        let level = unsafe { pg_sys::XactIsoLevel };
        match level {
            l if l == pg_sys::XACT_READ_UNCOMMITTED as c_int => Isolation::ReadUncommitted,
            l if l == pg_sys::XACT_READ_COMMITTED as c_int => Isolation::ReadCommitted,
            l if l == pg_sys::XACT_REPEATABLE_READ as c_int => Isolation::RepeatableRead,
            _ => Isolation::Serializable,
        }
    }
}

/// May the locked table described by `catalog` be read directly? An error is the one SQL would
/// raise.
pub fn may_read(catalog: &Catalog) -> Result<bool> {
    crate::base::access::require_schema_usage(catalog.namespace)?;
    // SAFETY: a privilege check of a locked relation.
    let select = unsafe {
        pg_sys::pg_class_aclcheck(
            catalog.table,
            pg_sys::GetUserId(),
            pg_sys::ACL_SELECT as pg_sys::AclMode,
        )
    };
    if select != pg_sys::AclResult::ACLCHECK_OK {
        return Err(IdemError::new(
            errors::INSUFFICIENT_PRIVILEGE,
            "permission denied for table requests",
        )
        .hint(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency.requests TO the calling role.",
        ));
    }
    Ok(idem_protocol::may_read(&Table(catalog)))
}

/// May this transaction write the table directly (before the write lock is taken, with the
/// read's locks held)? In the generations layout, not when the table or a generation is a
/// Citus table (SQL refuses it, 0A000).
pub fn may_write(catalog: &Catalog) -> bool {
    idem_protocol::may_write(&Table(catalog))
        && catalog.generations.is_none_or(|g| {
            // SAFETY: the read locked the table and its generations.
            !unsafe { crate::direct::generations::on_citus(catalog.table, &g) }
        })
}

/// With the write lock held: do the decisions of the read made at `generation` still stand,
/// and does the caller hold `privilege` on `table` (the table, or a generation)?
pub fn may_write_locked(generation: u64, privilege: u32, table: pg_sys::Oid) -> bool {
    idem_protocol::may_write_locked(changed_since(generation), || {
        // SAFETY: a privilege check of a locked relation.
        unsafe {
            pg_sys::pg_class_aclcheck(table, pg_sys::GetUserId(), privilege as pg_sys::AclMode)
                == pg_sys::AclResult::ACLCHECK_OK
        }
    })
}
