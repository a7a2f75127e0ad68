//! The direct read: one record by primary key, straight through the index.
//!
//! A replay is the most common call and must cost little more than the index lookup it is, so
//! this read skips SPI and the executor: it opens `idempotency.requests` and its primary key,
//! scans with a fresh snapshot (as a READ COMMITTED statement would) and reads the columns from
//! the slot. In the generations layout it probes each generation's primary key too, with the
//! same snapshot, the one that hit last first.

use std::cell::Cell;

use pgrx::pg_sys::{self, Datum, Oid};

use crate::base::compat;
use crate::base::errors::Result;
use crate::base::record::{self, NATTS, Record, Values};
use crate::direct::catalog::{Catalog, lock_table};
use crate::direct::generations;

/// One table a record may be in: the table itself, or a generation. Its index, scan and slot
/// are opened at its first probe.
struct Part {
    heap: pg_sys::Relation,
    index_oid: Oid,
    index: pg_sys::Relation,
    scan: pg_sys::IndexScanDesc,
    slot: *mut pg_sys::TupleTableSlot,
}

thread_local! {
    /// The part the last lookup of this backend found a record in: probed first.
    static LAST_HIT: Cell<usize> = const { Cell::new(0) };
}

/// Open index scans of `idempotency.requests` (and of its generations); closed when dropped.
pub struct Lookup {
    pub catalog: Catalog,
    /// [`lock_table`]'s generation: what the decisions above were made on.
    pub generation: u64,
    /// The table itself first, then generations 1 to 3 in the generations layout.
    parts: Vec<Part>,
    snapshot: pg_sys::Snapshot,
    /// The part the last [`Lookup::find`] returned a row from.
    hit: usize,
}

impl Lookup {
    /// Open the table and its primary key for reading, or `Ok(None)` when the read must go
    /// through SQL (row-level security applies, or the table is not as the extension made it).
    /// Everything is decided after the table (and its generations) are locked.
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
        let part = |heap, index_oid| Part {
            heap,
            index_oid,
            index: core::ptr::null_mut(),
            scan: core::ptr::null_mut(),
            slot: core::ptr::null_mut(),
        };
        let mut parts = vec![part(heap, catalog.index)];
        if let Some(g) = &catalog.generations {
            for (table, index) in g.tables.iter().zip(g.indexes) {
                // SAFETY: locked by lock_table (`generations::lock`) to the end of the transaction.
                let heap =
                    unsafe { pg_sys::table_open(*table, pg_sys::NoLock as pg_sys::LOCKMODE) };
                parts.push(part(heap, index));
            }
        }
        // SAFETY: a registered snapshot, taken after every lock.
        let snapshot = unsafe { pg_sys::RegisterSnapshot(pg_sys::GetTransactionSnapshot()) };
        Ok(Some(Lookup {
            catalog,
            generation,
            parts,
            snapshot,
            hit: 0,
        }))
    }

    /// Read with a new snapshot from now on (under READ COMMITTED: one that sees everything
    /// committed so far).
    pub fn refresh(&mut self) {
        // SAFETY: ends the scans of the old snapshot (begun again at their next probe) and
        // replaces the registered snapshot.
        unsafe {
            for part in &mut self.parts {
                if !part.scan.is_null() {
                    pg_sys::index_endscan(part.scan);
                    part.scan = core::ptr::null_mut();
                }
            }
            pg_sys::UnregisterSnapshot(self.snapshot);
            self.snapshot = pg_sys::RegisterSnapshot(pg_sys::GetTransactionSnapshot());
        }
    }

    /// The row version the last [`Lookup::find`] returned, and the snapshot it was read with:
    /// what an update of it needs.
    pub fn found(&self) -> (pg_sys::ItemPointerData, pg_sys::Snapshot) {
        // SAFETY: the slot holds the row `find` returned.
        (
            unsafe { (*self.parts[self.hit].slot).tts_tid },
            self.snapshot,
        )
    }

    /// The table the last [`Lookup::find`] returned a row from.
    pub fn found_in(&self) -> Oid {
        // SAFETY: an open relation.
        unsafe { (*self.parts[self.hit].heap).rd_id }
    }

    /// The table a new record goes into: the current generation in the generations layout
    /// (as this lookup's snapshot reads it), else the table; `None`: SQL decides.
    pub fn insert_target(&self) -> Option<Oid> {
        match &self.catalog.generations {
            None => Some(self.catalog.table),
            Some(g) => {
                // SAFETY: the layout passed the catalog's checks; the snapshot is registered.
                let current = unsafe { generations::current(g, self.snapshot) }?;
                Some(g.tables[current - 1])
            }
        }
    }

    /// The record of (scope, key) as of the scan's snapshot (taken at `open` or `refresh`), if any.
    pub fn find(&mut self, scope: Datum, key: Datum) -> Result<Option<Record>> {
        let first = LAST_HIT.with(Cell::get).min(self.parts.len() - 1);
        let order = core::iter::once(first).chain((0..self.parts.len()).filter(|p| *p != first));
        for p in order {
            // SAFETY: a part of this lookup, probed with its snapshot.
            if unsafe { self.probe(p, scope, key) } {
                self.hit = p;
                LAST_HIT.with(|h| h.set(p));
                // SAFETY: the slot holds the row just found.
                return unsafe { self.read(p) }.map(Some);
            }
        }
        Ok(None)
    }

    /// Look (scope, key) up in part `p`'s primary key; true: its slot holds the row.
    unsafe fn probe(&mut self, p: usize, scope: Datum, key: Datum) -> bool {
        let snapshot = self.snapshot;
        let part = &mut self.parts[p];
        // SAFETY: the index is opened under its table's lock (kept to the end of the
        // transaction, as the executor does); keys use the index's collations and text equality.
        unsafe {
            if part.index.is_null() {
                part.index =
                    pg_sys::index_open(part.index_oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
                part.slot = pg_sys::table_slot_create(part.heap, core::ptr::null_mut());
            }
            if part.scan.is_null() {
                part.scan = compat::index_beginscan(part.heap, part.index, snapshot, 2, 0);
            }
            let collations = (*part.index).rd_indcollation;
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
            pg_sys::index_rescan(part.scan, keys.as_mut_ptr(), 2, core::ptr::null_mut(), 0);
            pg_sys::index_getnext_slot(
                part.scan,
                pg_sys::ScanDirection::ForwardScanDirection,
                part.slot,
            )
        }
    }

    /// The record in part `p`'s slot.
    unsafe fn read(&self, p: usize) -> Result<Record> {
        let slot = self.parts[p].slot;
        // SAFETY: the slot holds a row of a table with the 17 columns (`shape.rs`).
        unsafe {
            if ((*slot).tts_nvalid as usize) < NATTS {
                pg_sys::slot_getsomeattrs_int(slot, NATTS as i32);
            }
            let mut values: Values = [None; NATTS];
            for (i, value) in values.iter_mut().enumerate() {
                if !*(*slot).tts_isnull.add(i) {
                    *value = Some(*(*slot).tts_values.add(i));
                }
            }
            let statuses = &self.catalog.statuses;
            record::from_values(&values, |d| {
                record::status_of_oid(Oid::from(d.value() as u32), statuses)
            })
        }
    }
}

impl Drop for Lookup {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The transaction is aborting: its resource owner releases all of this.
            return;
        }
        // SAFETY: each resource was acquired once and is released once, in reverse.
        unsafe {
            for part in self.parts.iter().rev() {
                if !part.scan.is_null() {
                    pg_sys::index_endscan(part.scan);
                }
                if !part.index.is_null() {
                    pg_sys::ExecDropSingleTupleTableSlot(part.slot);
                    pg_sys::index_close(part.index, pg_sys::NoLock as pg_sys::LOCKMODE);
                }
                pg_sys::table_close(part.heap, pg_sys::NoLock as pg_sys::LOCKMODE);
            }
            pg_sys::UnregisterSnapshot(self.snapshot);
        }
    }
}
