//! The one place where code differs between Postgres 13 and 18.
//!
//! Everything else in the crate calls these shims and stays free of `#[cfg(feature = "pgNN")]`.
//! Each shim keeps the newest Postgres' shape and meaning; older versions adapt to it.
//!
//! Differences in pgrx 0.18.1's `pg_sys` (from its pre-generated bindings, 13..18) that this
//! project is likely to meet, and how to handle them:
//!
//! | item | difference | here |
//! | --- | --- | --- |
//! | `ERROR` (elog level) | named `pg_sys::PGERROR` in pgrx; value 20 on PG13, 21 from PG14 | use `pg_sys::PGERROR`, never a literal |
//! | `MarkGUCPrefixReserved` | PG15+; PG13/14 call it `EmitWarningsOnPlaceholders` | [`mark_guc_prefix_reserved`] |
//! | `pqsignal` | PG18's backends call it `pqsignal_be` | [`pqsignal`] |
//! | `index_beginscan` | PG18 adds `instrument: *mut IndexScanInstrumentation` (3rd arg) | [`index_beginscan`] |
//! | `ReThrowError` | declared `-> !` for 13..17, but returning `()` for 18 (PG18's `pg_noreturn`) | not used: errors go up as `Result`s or pgrx panics |
//! | `ExecutorRun_hook` / `standard_ExecutorRun` | PG18 drops the `execute_once: bool` argument | add a shim when a hook is written |
//! | `ProcessUtility_hook` / `standard_ProcessUtility` | PG14+ add `readOnlyTree: bool` (3rd arg) | add a shim when a hook is written |
//! | `SPI_execute_extended`, `SPI_prepare_extended`, `SPI_execute_plan_extended` | PG14+ only | use `SPI_execute_with_args` / pgrx's `Spi` |
//! | `heap_form_tuple`, `heap_fill_tuple`, ... | `values`/`isnull` are `*mut` before 17, `*const` from 17 | pass `as_mut_ptr()`: coerces to both |
//! | `ExecInsertIndexTuples` | PG13 takes the relation from `estate`; PG14 adds `resultRelInfo`, `update`; PG16 adds `onlySummarizing` | [`insert_index_tuples`] |
//! | table AM `tuple_update` | `update_indexes` is a `bool` before 16, a `TU_UpdateIndexes` from 16 | [`tuple_update`] |
//! | `pg_namespace_aclcheck` | replaced by `object_aclcheck(NamespaceRelationId, ...)` in PG16 | [`namespace_usage`] |
//! | `shmem_request_hook` | PG15+; before, request shmem directly in `_PG_init` | pgrx's `pg_shmem_init!` handles it |
//! | `escape_json` | same in all; PG18 adds `escape_json_with_len`/`escape_json_text` | use `escape_json` |
//! | `JsonbIteratorInit`/`JsonbIteratorNext`, `pushJsonbValue` | same signatures 13..18 | no shim needed |
//! | `findJsonbValueFromContainer`, `getIthJsonbValueFromContainer` | only a parameter renamed (16) | no shim needed |
//!
//! A shim is tested on every version by `pgrx-config/test.sh` (see the tests below).

use core::ffi::{CStr, c_int};
use pgrx::pg_sys;

/// Reserve a GUC prefix (`idempotency.`): later unknown `idempotency.*` settings get a WARNING
/// and are removed. Call from `_PG_init` after defining the extension's GUCs.
pub fn mark_guc_prefix_reserved(prefix: &CStr) {
    // SAFETY: takes a NUL-terminated string that it copies; valid in the postmaster and backends.
    unsafe {
        #[cfg(any(feature = "pg13", feature = "pg14"))]
        pg_sys::EmitWarningsOnPlaceholders(prefix.as_ptr());
        #[cfg(not(any(feature = "pg13", feature = "pg14")))]
        pg_sys::MarkGUCPrefixReserved(prefix.as_ptr());
    }
}

/// Install a signal handler (backend flavour: `pqsignal_be` from Postgres 18 on).
pub fn pqsignal(signal: u32, handler: pg_sys::pqsigfunc) {
    // SAFETY: installs a C signal handler in this (single-threaded) backend.
    unsafe {
        #[cfg(feature = "pg18")]
        pg_sys::pqsignal_be(signal as c_int, handler);
        #[cfg(not(feature = "pg18"))]
        pg_sys::pqsignal(signal as c_int, handler);
    }
}

/// `index_beginscan` with PG18's extra `instrument` argument left out (NULL: no statistics).
///
/// # Safety
/// As `index_beginscan`: open, suitably locked relations and a registered or active snapshot.
pub unsafe fn index_beginscan(
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
    nkeys: c_int,
    norderbys: c_int,
) -> pg_sys::IndexScanDesc {
    // SAFETY: forwarded to the caller.
    unsafe {
        #[cfg(feature = "pg18")]
        return pg_sys::index_beginscan(
            heap,
            index,
            snapshot,
            core::ptr::null_mut(),
            nkeys,
            norderbys,
        );
        #[cfg(not(feature = "pg18"))]
        return pg_sys::index_beginscan(heap, index, snapshot, nkeys, norderbys);
    }
}

/// Which index entries an updated row version needs (PG16's `TU_UpdateIndexes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexUpdate {
    /// A HOT update: none.
    None,
    All,
    /// Only summarizing indexes (BRIN), PG16+.
    #[cfg_attr(
        any(feature = "pg13", feature = "pg14", feature = "pg15"),
        allow(dead_code, reason = "tuple_update returns it from PG16 on")
    )]
    Summarizing,
}

/// The table AM's `tuple_update` (what `table_tuple_update` calls), waiting for a concurrent
/// writer, without a crosscheck snapshot; with the index entries the new version needs.
///
/// # Safety
/// As `table_tuple_update`: `rel` open with RowExclusiveLock, `slot` of its descriptor.
pub unsafe fn tuple_update(
    rel: pg_sys::Relation,
    tid: &mut pg_sys::ItemPointerData,
    slot: *mut pg_sys::TupleTableSlot,
    cid: pg_sys::CommandId,
    snapshot: pg_sys::Snapshot,
) -> (pg_sys::TM_Result::Type, IndexUpdate) {
    // SAFETY: forwarded to the caller.
    unsafe {
        let Some(update) = (*(*rel).rd_tableam).tuple_update else {
            return (pg_sys::TM_Result::TM_Invisible, IndexUpdate::None);
        };
        let mut tmfd: pg_sys::TM_FailureData = core::mem::zeroed();
        let mut lockmode: pg_sys::LockTupleMode::Type = 0;
        let mut indexes = UpdateIndexes::default();
        // Through the FFI boundary, as pgrx calls every pg_sys function: an ERROR inside the
        // table AM becomes a Rust panic that unwinds the callers' frames (pgrx re-raises it at
        // the #[pg_guard] entry), instead of a longjmp over them.
        let result = pg_sys::ffi::pg_guard_ffi_boundary(|| {
            #[allow(ffi_unwind_calls, reason = "guarded by pg_guard_ffi_boundary")]
            update(
                rel,
                tid,
                slot,
                cid,
                snapshot,
                core::ptr::null_mut(),
                true,
                &mut tmfd,
                &mut lockmode,
                &mut indexes,
            )
        });
        (result, index_update(indexes))
    }
}

/// What the table AM's `tuple_update` says about index entries: a flag before 16.
#[cfg(any(feature = "pg13", feature = "pg14", feature = "pg15"))]
type UpdateIndexes = bool;
#[cfg(not(any(feature = "pg13", feature = "pg14", feature = "pg15")))]
type UpdateIndexes = pg_sys::TU_UpdateIndexes::Type;

#[cfg(any(feature = "pg13", feature = "pg14", feature = "pg15"))]
fn index_update(indexes: UpdateIndexes) -> IndexUpdate {
    if indexes {
        IndexUpdate::All
    } else {
        IndexUpdate::None
    }
}

#[cfg(not(any(feature = "pg13", feature = "pg14", feature = "pg15")))]
fn index_update(indexes: UpdateIndexes) -> IndexUpdate {
    match indexes {
        pg_sys::TU_UpdateIndexes::TU_All => IndexUpdate::All,
        pg_sys::TU_UpdateIndexes::TU_Summarizing => IndexUpdate::Summarizing,
        _ => IndexUpdate::None,
    }
}

/// Does `role` have USAGE on `namespace`? (`object_aclcheck` from PG16, before it
/// `pg_namespace_aclcheck`.)
pub fn namespace_usage(namespace: pg_sys::Oid, role: pg_sys::Oid) -> bool {
    // SAFETY: an ACL check of an existing namespace OID.
    unsafe {
        #[cfg(any(feature = "pg13", feature = "pg14", feature = "pg15"))]
        let acl =
            pg_sys::pg_namespace_aclcheck(namespace, role, pg_sys::ACL_USAGE as pg_sys::AclMode);
        #[cfg(not(any(feature = "pg13", feature = "pg14", feature = "pg15")))]
        let acl = pg_sys::object_aclcheck(
            pg_sys::NamespaceRelationId,
            namespace,
            role,
            pg_sys::ACL_USAGE as pg_sys::AclMode,
        );
        acl == pg_sys::AclResult::ACLCHECK_OK
    }
}

/// `ExecInsertIndexTuples` for the row in `slot` (just inserted, or the new version of an
/// update when `update`), as `which` says; no ON CONFLICT arbiters.
///
/// # Safety
/// `rri` initialised with its indexes open (`ExecOpenIndices`), `slot` holding a stored row.
pub unsafe fn insert_index_tuples(
    rri: *mut pg_sys::ResultRelInfo,
    slot: *mut pg_sys::TupleTableSlot,
    estate: *mut pg_sys::EState,
    which: IndexUpdate,
    update: bool,
) {
    if which == IndexUpdate::None {
        return;
    }
    // SAFETY: forwarded to the caller.
    unsafe {
        let (no_conflict, no_arbiters) = (core::ptr::null_mut(), core::ptr::null_mut());
        #[cfg(feature = "pg13")]
        {
            let _ = update;
            (*estate).es_result_relation_info = rri;
            pg_sys::ExecInsertIndexTuples(slot, estate, false, no_conflict, no_arbiters);
        }
        #[cfg(any(feature = "pg14", feature = "pg15"))]
        pg_sys::ExecInsertIndexTuples(rri, slot, estate, update, false, no_conflict, no_arbiters);
        #[cfg(not(any(feature = "pg13", feature = "pg14", feature = "pg15")))]
        pg_sys::ExecInsertIndexTuples(
            rri,
            slot,
            estate,
            update,
            false,
            no_conflict,
            no_arbiters,
            which == IndexUpdate::Summarizing,
        );
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// Raises P4002 through `errors::raise`, whose ERROR level (`pg_sys::PGERROR`) is 20 on
    /// PG13 and 21 from PG14 (21 on PG13 would be FATAL and end the session).
    #[pg_extern]
    fn compat_raise_p4002() {
        crate::base::errors::raise(crate::base::errors::IdemError::new(
            crate::base::errors::HASH_MISMATCH,
            "compat test",
        ));
    }

    #[pg_test]
    fn raise_is_a_catchable_error_with_our_sqlstate() {
        Spi::run(
            "DO $$ BEGIN
               PERFORM tests.compat_raise_p4002();
               RAISE EXCEPTION 'not raised';
             EXCEPTION WHEN SQLSTATE 'P4002' THEN
               IF SQLERRM <> 'compat test' THEN RAISE EXCEPTION 'message: %', SQLERRM; END IF;
             END $$",
        )
        .unwrap();
    }

    /// From PG15 a reserved prefix drops the placeholders already set under it, and refuses
    /// new ones (42602); PG13/14 only warn about them.
    #[pg_test]
    fn mark_guc_prefix_reserved_reserves_the_prefix() {
        Spi::run("SET idempotency_compat_test.before = 'x'").unwrap();
        super::mark_guc_prefix_reserved(c"idempotency_compat_test");
        let kept = Spi::get_one::<String>(
            "SELECT current_setting('idempotency_compat_test.before', true)",
        )
        .unwrap();
        let refused = Spi::get_one::<String>(
            "SELECT tests.sqlstate_of('SET idempotency_compat_test.after = ''y''')",
        )
        .unwrap();
        if pg_sys::PG_VERSION_NUM >= 150000 {
            assert_eq!((kept, refused.as_deref()), (None, Some("42602")));
        } else {
            assert_eq!(
                (kept.as_deref(), refused.as_deref()),
                (Some("x"), Some("ok"))
            );
        }
    }

    /// Looks up pg_class's own row through pg_class_oid_index with the shim.
    #[pg_test]
    fn index_beginscan_finds_a_catalog_row() {
        let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
        // SAFETY: catalog relations opened and closed here, under the test's transaction snapshot.
        let found = unsafe {
            let heap = pg_sys::table_open(pg_sys::RelationRelationId, lock);
            let index = pg_sys::index_open(pg_sys::Oid::from(pg_sys::ClassOidIndexId), lock);
            let mut key: pg_sys::ScanKeyData = core::mem::zeroed();
            pg_sys::ScanKeyInit(
                &mut key,
                pg_sys::Anum_pg_class_oid as pg_sys::AttrNumber,
                pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
                pg_sys::Oid::from(pg_sys::F_OIDEQ),
                pg_sys::Datum::from(pg_sys::RelationRelationId),
            );
            let scan = super::index_beginscan(heap, index, pg_sys::GetTransactionSnapshot(), 1, 0);
            pg_sys::index_rescan(scan, &mut key, 1, core::ptr::null_mut(), 0);
            let slot = pg_sys::table_slot_create(heap, core::ptr::null_mut());
            let found =
                pg_sys::index_getnext_slot(scan, pg_sys::ScanDirection::ForwardScanDirection, slot);
            pg_sys::ExecDropSingleTupleTableSlot(slot);
            pg_sys::index_endscan(scan);
            pg_sys::index_close(index, lock);
            pg_sys::table_close(heap, lock);
            found
        };
        assert!(found, "pg_class has a row for pg_class");
    }
}
