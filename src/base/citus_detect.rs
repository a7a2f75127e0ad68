//! Is `idempotency.requests` a Citus table, and is this node a Citus worker? Read from the
//! catalog by OID without SQL; a database without Citus has no `pg_dist_*` tables, so the
//! answer there is always "no".

use pgrx::pg_sys::{self, Datum, Oid};

/// Is relation `table` a Citus table (distributed, reference or Citus-managed local), i.e. does
/// `pg_catalog.pg_dist_partition` have a row for its OID? `false` without Citus.
///
/// # Safety
/// Inside a transaction; `table` is locked by the caller (decide after the lock).
pub unsafe fn is_citus_table(table: Oid) -> bool {
    // SAFETY: the caller's.
    unsafe { any_citus_table(&[table]) }
}

/// Is any of `tables` a Citus table? One lookup of Citus's catalog for all of them.
///
/// # Safety
/// Inside a transaction; `tables` are locked by the caller (decide after the lock).
pub unsafe fn any_citus_table(tables: &[Oid]) -> bool {
    // SAFETY: catalog lookups; the relation is opened with a lock and closed again.
    unsafe {
        let dist = pg_sys::get_relname_relid(
            c"pg_dist_partition".as_ptr(),
            Oid::from(pg_sys::PG_CATALOG_NAMESPACE),
        );
        if dist == pg_sys::InvalidOid {
            return false;
        }
        let rel = pg_sys::try_relation_open(dist, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        if rel.is_null() {
            return false;
        }
        // Citus's unique index on logicalrelid, when it is there: a coordinator may hold
        // thousands of rows.
        let index = pg_sys::get_relname_relid(
            c"pg_dist_partition_logical_relid_index".as_ptr(),
            Oid::from(pg_sys::PG_CATALOG_NAMESPACE),
        );
        let found = tables.iter().any(|table| {
            let mut key: pg_sys::ScanKeyData = core::mem::zeroed();
            // Column 1 of pg_dist_partition is logicalrelid (regclass, compared as an oid).
            pg_sys::ScanKeyInit(
                &mut key,
                1,
                pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
                pg_sys::RegProcedure::from(pg_sys::F_OIDEQ),
                Datum::from(*table),
            );
            let scan = pg_sys::systable_beginscan(
                rel,
                index,
                index != pg_sys::InvalidOid,
                core::ptr::null_mut(),
                1,
                &mut key,
            );
            let hit = !pg_sys::systable_getnext(scan).is_null();
            pg_sys::systable_endscan(scan);
            hit
        });
        pg_sys::table_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        found
    }
}

/// This node's Citus group: 0 on the coordinator, > 0 on a worker, `None` without Citus.
pub fn local_group() -> Option<i32> {
    // SAFETY: catalog lookups inside a transaction; the relation is opened and closed here.
    unsafe {
        let group = pg_sys::get_relname_relid(
            c"pg_dist_local_group".as_ptr(),
            Oid::from(pg_sys::PG_CATALOG_NAMESPACE),
        );
        if group == pg_sys::InvalidOid {
            return None;
        }
        let rel = pg_sys::try_relation_open(group, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        if rel.is_null() {
            return None;
        }
        let scan = pg_sys::systable_beginscan(
            rel,
            pg_sys::InvalidOid,
            false,
            core::ptr::null_mut(),
            0,
            core::ptr::null_mut(),
        );
        let tuple = pg_sys::systable_getnext(scan);
        let mut value = None;
        if !tuple.is_null() {
            let mut isnull = false;
            let datum = pg_sys::heap_getattr(tuple, 1, (*rel).rd_att, &mut isnull);
            if !isnull {
                value = Some(datum.value() as i32);
            }
        }
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        value
    }
}

#[cfg(any(test, feature = "pg_test"))]
thread_local! {
    /// Tests only: take the distributed paths on a plain table (`tests.assume_distributed`),
    /// so that tests/integration/security/search_path/ prepares and checks their statements without Citus and
    /// the #[pg_test]s compare their answers with the single-server paths.
    static ASSUMED: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Tests only: from now on in this backend, treat `idempotency.requests` as distributed
/// (`on`) or not; the previous value.
#[cfg(any(test, feature = "pg_test"))]
pub fn assume_distributed(on: bool) -> bool {
    ASSUMED.with(|a| a.replace(on))
}

/// Whether a test asked for the distributed paths (always `false` in a release build).
pub fn assumed() -> bool {
    #[cfg(any(test, feature = "pg_test"))]
    {
        ASSUMED.with(core::cell::Cell::get)
    }
    #[cfg(not(any(test, feature = "pg_test")))]
    {
        false
    }
}
