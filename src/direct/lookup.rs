//! The direct read: one record by primary key, straight through the index.
//!
//! A replay is the most common call and must cost little more than the index lookup it is, so
//! this read skips SPI and the executor: it opens `idempotency.requests` and its primary key,
//! scans with a fresh snapshot (as a READ COMMITTED statement would) and reads the columns from
//! the slot.

use pgrx::pg_sys::{self, Datum, Oid};

use crate::base::compat;
use crate::base::errors::Result;
use crate::base::record::{self, NATTS, Record, Values};
use crate::direct::catalog::{Catalog, lock_table};

/// An open index scan of `idempotency.requests`; closed when dropped.
pub struct Lookup {
    pub catalog: Catalog,
    /// [`lock_table`]'s generation: what the decisions above were made on.
    pub generation: u64,
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
    scan: pg_sys::IndexScanDesc,
    slot: *mut pg_sys::TupleTableSlot,
}

impl Lookup {
    /// Open the table and its primary key for reading, or `Ok(None)` when the read must go
    /// through SQL (row-level security applies, or the table is not as the extension made it).
    /// Everything is decided after the table is locked.
    pub fn open() -> Result<Option<Lookup>> {
        let lock = pg_sys::AccessShareLock;
        let Some((catalog, heap, generation)) = lock_table(lock)? else {
            return Ok(None);
        };
        // SAFETY: opened by lock_table; the lock stays to the end of the transaction.
        let close = || unsafe { pg_sys::table_close(heap, pg_sys::NoLock as pg_sys::LOCKMODE) };
        match crate::direct::rules::may_read(&catalog) {
            Ok(true) => {}
            refused => {
                close();
                return refused.map(|_| None);
            }
        }
        // SAFETY: the index is opened under the table's lock (kept to the end of the
        // transaction, as the executor does); the scan's snapshot is registered.
        unsafe {
            let index = pg_sys::index_open(catalog.index, lock as pg_sys::LOCKMODE);
            let snapshot = pg_sys::RegisterSnapshot(pg_sys::GetTransactionSnapshot());
            let scan = compat::index_beginscan(heap, index, snapshot, 2, 0);
            let slot = pg_sys::table_slot_create(heap, core::ptr::null_mut());
            Ok(Some(Lookup {
                catalog,
                generation,
                heap,
                index,
                snapshot,
                scan,
                slot,
            }))
        }
    }

    /// Read with a new snapshot from now on (under READ COMMITTED: one that sees everything
    /// committed so far).
    pub fn refresh(&mut self) {
        // SAFETY: replaces the scan and its registered snapshot with new ones.
        unsafe {
            pg_sys::index_endscan(self.scan);
            pg_sys::UnregisterSnapshot(self.snapshot);
            self.snapshot = pg_sys::RegisterSnapshot(pg_sys::GetTransactionSnapshot());
            self.scan = compat::index_beginscan(self.heap, self.index, self.snapshot, 2, 0);
        }
    }

    /// The row version the last [`Lookup::find`] returned, and the snapshot it was read with:
    /// what an update of it needs.
    pub fn found(&self) -> (pg_sys::ItemPointerData, pg_sys::Snapshot) {
        // SAFETY: the slot holds the row `find` returned.
        (unsafe { (*self.slot).tts_tid }, self.snapshot)
    }

    /// The record of (scope, key) as of the scan's snapshot (taken at `open` or `refresh`), if any.
    pub fn find(&mut self, scope: Datum, key: Datum) -> Result<Option<Record>> {
        // SAFETY: an open scan; keys use the index's collations and text equality.
        unsafe {
            let collations = (*self.index).rd_indcollation;
            let mut keys: [pg_sys::ScanKeyData; 2] = core::mem::zeroed();
            for (i, value) in [scope, key].into_iter().enumerate() {
                pg_sys::ScanKeyEntryInitialize(
                    &mut keys[i],
                    0,
                    (i + 1) as pg_sys::AttrNumber,
                    pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
                    pg_sys::InvalidOid,
                    *collations.add(i),
                    Oid::from(pg_sys::F_TEXTEQ),
                    value,
                );
            }
            pg_sys::index_rescan(self.scan, keys.as_mut_ptr(), 2, core::ptr::null_mut(), 0);
            if !pg_sys::index_getnext_slot(
                self.scan,
                pg_sys::ScanDirection::ForwardScanDirection,
                self.slot,
            ) {
                return Ok(None);
            }
            if ((*self.slot).tts_nvalid as usize) < NATTS {
                pg_sys::slot_getsomeattrs_int(self.slot, NATTS as i32);
            }
            let mut values: Values = [None; NATTS];
            for (i, value) in values.iter_mut().enumerate() {
                if !*(*self.slot).tts_isnull.add(i) {
                    *value = Some(*(*self.slot).tts_values.add(i));
                }
            }
            let statuses = &self.catalog.statuses;
            let record = record::from_values(&values, |d| {
                record::status_of_oid(Oid::from(d.value() as u32), statuses)
            })?;
            Ok(Some(record))
        }
    }
}

impl Drop for Lookup {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The transaction is aborting: its resource owner releases all of this.
            return;
        }
        // SAFETY: each resource was acquired in `open` and is released once, in reverse.
        unsafe {
            pg_sys::ExecDropSingleTupleTableSlot(self.slot);
            pg_sys::index_endscan(self.scan);
            pg_sys::UnregisterSnapshot(self.snapshot);
            pg_sys::index_close(self.index, pg_sys::NoLock as pg_sys::LOCKMODE);
            pg_sys::table_close(self.heap, pg_sys::NoLock as pg_sys::LOCKMODE);
        }
    }
}
