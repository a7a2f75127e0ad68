//! Privilege checks that SQL makes while parsing, which a direct read or a kept plan skips.
//!
//! A statement that names `idempotency.requests` needs USAGE on schema `idempotency`; Postgres
//! checks it when the name is looked up, i.e. when a plan is first made. A direct read makes no
//! plan, and a kept plan is not looked up again for the next role in the same backend, so every
//! entry point checks it here, as name lookup would.

use pgrx::pg_sys::{self, Oid};

use crate::base::errors::{self, IdemError, Result};

/// Does the current role have USAGE on `namespace`?
fn has_usage(namespace: Oid) -> bool {
    // SAFETY: reads the current role's OID.
    crate::base::compat::namespace_usage(namespace, unsafe { pg_sys::GetUserId() })
}

/// 42501 unless the current role may use `namespace` (its USAGE privilege).
pub fn require_schema_usage(namespace: Oid) -> Result<()> {
    if has_usage(namespace) {
        return Ok(());
    }
    // SAFETY: the name of an existing namespace (NULL if it vanished), copied at once.
    let name = unsafe {
        let name = pg_sys::get_namespace_name(namespace);
        if name.is_null() {
            String::from("?")
        } else {
            core::ffi::CStr::from_ptr(name)
                .to_string_lossy()
                .into_owned()
        }
    };
    Err(IdemError::new(
        errors::INSUFFICIENT_PRIVILEGE,
        format!("permission denied for schema {name}"),
    )
    .hint(format!("GRANT USAGE ON SCHEMA {name} TO the calling role.")))
}

/// [`require_schema_usage`] for schema `idempotency` looked up by name; missing is left to
/// the statement that names it.
pub fn require_idempotency_usage() -> Result<()> {
    // SAFETY: a catalog lookup by name.
    let namespace = unsafe { pg_sys::get_namespace_oid(c"idempotency".as_ptr(), true) };
    if namespace == pg_sys::InvalidOid {
        return Ok(());
    }
    require_schema_usage(namespace)
}

/// 42501 unless the current role holds at least one of SELECT, INSERT, UPDATE and DELETE on
/// `table` (what any function of the extension needs), checked before the table is locked.
pub fn require_some_table_privilege(table: Oid) -> Result<()> {
    require_any_table_privilege(
        table,
        (pg_sys::ACL_SELECT | pg_sys::ACL_INSERT | pg_sys::ACL_UPDATE | pg_sys::ACL_DELETE)
            as pg_sys::AclMode,
    )
}

/// 42501 unless the current role holds at least one of the privileges `any` on `table`.
pub fn require_any_table_privilege(table: Oid, any: pg_sys::AclMode) -> Result<()> {
    // SAFETY: catalog lookups of a relation OID; as has_table_privilege does, one dropped
    // meanwhile is left to the statement that names it.
    let (held, name) = unsafe {
        if !pg_sys::SearchSysCacheExists(
            pg_sys::SysCacheIdentifier::RELOID as _,
            table.into(),
            0.into(),
            0.into(),
            0.into(),
        ) {
            return Ok(());
        }
        let held = pg_sys::pg_class_aclmask(
            table,
            pg_sys::GetUserId(),
            any,
            pg_sys::AclMaskHow::ACLMASK_ANY,
        );
        let name = pg_sys::get_rel_name(table);
        let name = if name.is_null() {
            String::from("?")
        } else {
            core::ffi::CStr::from_ptr(name)
                .to_string_lossy()
                .into_owned()
        };
        (held, name)
    };
    if held != 0 {
        return Ok(());
    }
    Err(IdemError::new(
        errors::INSUFFICIENT_PRIVILEGE,
        format!("permission denied for table {name}"),
    )
    .hint(format!(
        "SELECT idem_grant('<role>', 'app') gives the calling role what it needs on idempotency.{name}."
    )))
}

/// Before a statement names `idempotency.<table>` (and so locks it): USAGE on the schema and
/// some privilege on the table, as `require_schema_usage` and `require_some_table_privilege`.
pub fn require_table_access(table: &core::ffi::CStr) -> Result<()> {
    let (nsp, relid) = idempotency_table(table);
    if nsp == pg_sys::InvalidOid {
        return Ok(());
    }
    require_schema_usage(nsp)?;
    if relid == pg_sys::InvalidOid {
        return Ok(());
    }
    require_some_table_privilege(relid)
}

/// Schema `idempotency` and its table `name`, by name (InvalidOid for either that is missing).
pub fn idempotency_table(name: &core::ffi::CStr) -> (Oid, Oid) {
    // SAFETY: catalog lookups by name.
    unsafe {
        let nsp = pg_sys::get_namespace_oid(c"idempotency".as_ptr(), true);
        (nsp, pg_sys::get_relname_relid(name.as_ptr(), nsp))
    }
}

/// Do `table`'s row-level security policies apply to the current role? (`false` for a table
/// that is not there.)
pub fn row_security_applies(table: Oid) -> bool {
    // SAFETY: Postgres' own RLS test of an existing relation.
    table != pg_sys::InvalidOid
        && unsafe { pg_sys::check_enable_rls(table, pg_sys::InvalidOid, true) }
            == pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32
}

/// Do `idempotency.requests`' row-level security policies apply to the current role?
pub fn row_security_applies_to_requests() -> bool {
    row_security_applies(idempotency_table(c"requests").1)
}
