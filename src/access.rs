//! Privilege checks that SQL makes while parsing, which a direct read or a kept plan skips.
//!
//! A statement that names `idempotency.requests` needs USAGE on schema `idempotency`; Postgres
//! checks it when the name is looked up, i.e. when a plan is first made. A direct read makes no
//! plan, and a kept plan is not looked up again for the next role in the same backend, so every
//! entry point checks it here, as name lookup would.

use pgrx::pg_sys::{self, Oid};

use crate::errors::{self, IdemError, Result};

/// Does the current role have USAGE on `namespace`?
fn has_usage(namespace: Oid) -> bool {
    // SAFETY: an ACL check of an existing namespace OID.
    unsafe {
        #[cfg(any(feature = "pg13", feature = "pg14", feature = "pg15"))]
        let acl = pg_sys::pg_namespace_aclcheck(
            namespace,
            pg_sys::GetUserId(),
            pg_sys::ACL_USAGE as pg_sys::AclMode,
        );
        #[cfg(not(any(feature = "pg13", feature = "pg14", feature = "pg15")))]
        let acl = pg_sys::object_aclcheck(
            pg_sys::NamespaceRelationId,
            namespace,
            pg_sys::GetUserId(),
            pg_sys::ACL_USAGE as pg_sys::AclMode,
        );
        acl == pg_sys::AclResult::ACLCHECK_OK
    }
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
