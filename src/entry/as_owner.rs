//! Upkeep runs as the table's owner, the way VACUUM and ANALYZE do.
//!
//! The maintenance worker connects as the bootstrap superuser. Writing a table fires its
//! triggers with the writer's rights, and a role with only the `TRIGGER` privilege can add one,
//! so each batch runs as the table's owner under `SECURITY_RESTRICTED_OPERATION` with
//! `search_path = pg_catalog, pg_temp`, all restored afterwards (by the transaction's abort
//! too). The owner is usually a superuser as well, so a table is refused while it has an
//! enabled trigger whose function the owner does not own, or that is built in (`pg_catalog`)
//! or belongs to an extension (a superuser owns those too), or with a WHEN condition (it can call
//! any function), or with arguments (they can steer even the owner's function: contrib's
//! `check_foreign_key` runs SQL built from them). A WARNING (once per table and worker
//! process) and the `maintenance_refused` counter say so, and the other tables go on.
//! Everything is decided after the table is locked.

use core::ffi::{CStr, c_int};

use pgrx::pg_sys::{self, Datum, Oid};

use crate::base::errors::{self, IdemError, Result};

/// A trigger of `rel` that could run code the owner did not write: (trigger, why).
unsafe fn foreign_trigger(rel: pg_sys::Relation, owner: Oid) -> Option<(String, String)> {
    // SAFETY: the trigger descriptor of an open relation; a syscache lookup per function.
    unsafe {
        let desc = (*rel).trigdesc;
        if desc.is_null() {
            return None;
        }
        let triggers = core::slice::from_raw_parts((*desc).triggers, (*desc).numtriggers as usize);
        for trigger in triggers {
            if trigger.tgisinternal || trigger.tgenabled == pg_sys::TRIGGER_DISABLED as i8 {
                continue;
            }
            let tuple = pg_sys::SearchSysCache1(
                pg_sys::SysCacheIdentifier::PROCOID as _,
                Datum::from(trigger.tgfoid),
            );
            let (function_owner, namespace) = if tuple.is_null() {
                (pg_sys::InvalidOid, pg_sys::InvalidOid)
            } else {
                let proc = &*(pg_sys::GETSTRUCT(tuple) as pg_sys::Form_pg_proc);
                let found = (proc.proowner, proc.pronamespace);
                pg_sys::ReleaseSysCache(tuple);
                found
            };
            let extension =
                pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, trigger.tgfoid);
            let why = if function_owner != owner {
                format!(
                    "runs {}, which the table's owner does not own",
                    procedure_name(trigger.tgfoid)
                )
            } else if namespace == pg_sys::PG_CATALOG_NAMESPACE.into()
                || extension != pg_sys::InvalidOid
            {
                // A superuser owner owns every built-in and contrib function: owning it does
                // not make the owner its author (contrib's tcn would NOTIFY every purged row).
                format!(
                    "runs {}, a built-in or extension function the owner did not write",
                    procedure_name(trigger.tgfoid)
                )
            } else if !trigger.tgqual.is_null() {
                "has a WHEN condition, which can call any function".to_string()
            } else if trigger.tgnargs > 0 {
                "passes arguments to its function, which can steer it".to_string()
            } else {
                continue;
            };
            let name = CStr::from_ptr(trigger.tgname)
                .to_string_lossy()
                .into_owned();
            return Some((name, why));
        }
        None
    }
}

/// Run `body` as the owner of `idempotency.<table>` under a security-restricted operation,
/// inside the caller's transaction. `Ok(None)`: the table was refused.
pub fn run<T>(table: &CStr, body: impl FnOnce() -> Result<T>) -> Result<Option<T>> {
    // SAFETY: catalog lookups, then the relation locked before anything is decided (the
    // statements in `body` take the same RowExclusiveLock).
    let (rel, relid, owner) = unsafe {
        let nsp = pg_sys::get_namespace_oid(c"idempotency".as_ptr(), true);
        let relid = pg_sys::get_relname_relid(table.as_ptr(), nsp);
        let rel = if relid == pg_sys::InvalidOid {
            core::ptr::null_mut()
        } else {
            pg_sys::try_relation_open(relid, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE)
        };
        if rel.is_null() {
            return Err(IdemError::new(
                errors::UNDEFINED_TABLE,
                format!(
                    "relation \"idempotency.{}\" does not exist",
                    table.to_string_lossy()
                ),
            ));
        }
        (rel, relid, (*(*rel).rd_rel).relowner)
    };
    // SAFETY: `rel` is open; closed (keeping the lock) right after.
    let refused = unsafe {
        let refused = foreign_trigger(rel, owner);
        pg_sys::relation_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        refused
    };
    if let Some((trigger, why)) = refused {
        // SAFETY: reads this backend's database OID.
        let database = unsafe { pg_sys::MyDatabaseId };
        if crate::entry::metrics::count_refused(database, relid) {
            warn_refused(table, &trigger, &why);
        }
        return Ok(None);
    }
    let mut saved_user = pg_sys::InvalidOid;
    let mut saved_context: c_int = 0;
    // SAFETY: the VACUUM sequence (vacuum_rel): switch to the owner in a security-restricted
    // operation with a safe search_path in a GUC nest level; undone below, or by the abort of
    // the transaction if `body` raises.
    let nest = unsafe {
        pg_sys::GetUserIdAndSecContext(&mut saved_user, &mut saved_context);
        pg_sys::SetUserIdAndSecContext(
            owner,
            saved_context | pg_sys::SECURITY_RESTRICTED_OPERATION as c_int,
        );
        let nest = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            c"search_path".as_ptr(),
            c"pg_catalog, pg_temp".as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        nest
    };
    let result = body();
    // SAFETY: pairs with the above.
    unsafe {
        pg_sys::AtEOXact_GUC(false, nest);
        pg_sys::SetUserIdAndSecContext(saved_user, saved_context);
    }
    result.map(Some)
}

/// `name(args)` of a function, for messages.
fn procedure_name(function: Oid) -> String {
    // SAFETY: formats a function's name (NULL if it vanished).
    unsafe {
        let name = pg_sys::format_procedure(function);
        if name.is_null() {
            String::from("?")
        } else {
            CStr::from_ptr(name).to_string_lossy().into_owned()
        }
    }
}

fn warn_refused(table: &CStr, trigger: &str, why: &str) {
    let table = table.to_string_lossy();
    pgrx::ereport!(
        pgrx::PgLogLevel::WARNING,
        pgrx::PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!(
            "idempotency: the maintenance worker does not touch idempotency.{table}: trigger \"{trigger}\" {why}"
        ),
        "Drop the trigger, or make it the table owner's own (a function the owner owns, no WHEN condition, no arguments); until then run the upkeep of this table by hand (idem_purge, idem_reclaim, idem_inbox_purge, idem_outbox_purge) as a role you trust with that trigger."
    );
}
