//! The direct write: a new record inserted, a processing record changed, without SPI or a
//! second executor (the way logical replication's apply worker writes rows).
//!
//! Through SQL, a new claim + complete costs two more executor cycles, two SPI connections and
//! the parsing of the table's eight CHECK constraints, which `ExecConstraints` does again for
//! every statement (~40 µs of ~250; see docs/benchmarks.md). Here the row goes straight to the
//! table AM and its index entries to `ExecInsertIndexTuples`. The rows written here satisfy the
//! CHECK constraints by construction: every input is validated first, and the conditions that
//! depend on the stored row are checked before (`idem_protocol::may_change_directly`). When to
//! write through SQL instead is decided in one place: `direct/rules.rs`.

use pgrx::pg_sys;

use crate::base::compat::{self, IndexUpdate};
use crate::base::errors::{self, IdemError, Result};
use crate::base::record::Values;
use crate::direct::lookup::Lookup;

/// The table opened for writing, with its indexes; closed when dropped.
pub struct Writer {
    heap: pg_sys::Relation,
    estate: *mut pg_sys::EState,
    rri: *mut pg_sys::ResultRelInfo,
    slot: *mut pg_sys::TupleTableSlot,
}

impl Writer {
    /// The table opened for writes with `privilege`, or `None` when the caller must write
    /// through SQL (`direct/rules.rs` lists when). `lookup` is the read this write follows: its
    /// decisions stand only if nothing was invalidated by the time the write lock is held.
    /// An insert goes into [`Lookup::insert_target`] and needs INSERT there, as an INSERT into
    /// that table would, and on `idempotency.requests` (whose grants a generation's follow only
    /// at the next rotation step, sql/layout.sql); an update changes the row where `lookup`
    /// found it and needs UPDATE on `idempotency.requests`, as an UPDATE through the table
    /// would.
    pub fn open(lookup: &Lookup, privilege: u32) -> Option<Writer> {
        let catalog = &lookup.catalog;
        if !crate::direct::rules::may_write(catalog) {
            return None;
        }
        let insert = privilege == pg_sys::ACL_INSERT;
        let table = if insert {
            lookup.insert_target()?
        } else {
            lookup.found_in()
        };
        // SAFETY: RowExclusiveLock (held to the end of the transaction) processes whatever was
        // committed since the read; then the privileges are checked on the locked relations.
        // An update through the table locks the table too.
        let heap = unsafe {
            if !insert && table != catalog.table {
                pg_sys::LockRelationOid(
                    catalog.table,
                    pg_sys::RowExclusiveLock as pg_sys::LOCKMODE,
                );
            }
            pg_sys::table_open(table, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE)
        };
        let may = |on| crate::direct::rules::may_write_locked(lookup.generation, privilege, on);
        let allowed = if insert {
            may(table) && (table == catalog.table || may(catalog.table))
        } else {
            may(catalog.table)
        };
        if !allowed {
            // SAFETY: opened above; the lock stays to the end of the transaction.
            unsafe { pg_sys::table_close(heap, pg_sys::NoLock as pg_sys::LOCKMODE) };
            return None;
        }
        // SAFETY: the executor's set-up for writing one relation, in an executor state of its
        // own (freed in Drop).
        unsafe {
            let estate = pg_sys::CreateExecutorState();
            let old = pg_sys::MemoryContextSwitchTo((*estate).es_query_cxt);
            let rri = pg_sys::palloc0(core::mem::size_of::<pg_sys::ResultRelInfo>())
                as *mut pg_sys::ResultRelInfo;
            pg_sys::InitResultRelInfo(rri, heap, 1, core::ptr::null_mut(), 0);
            pg_sys::ExecOpenIndices(rri, false);
            let slot = pg_sys::table_slot_create(heap, core::ptr::null_mut());
            pg_sys::MemoryContextSwitchTo(old);
            Some(Writer {
                heap,
                estate,
                rri,
                slot,
            })
        }
    }

    fn store(&mut self, values: &Values) {
        // SAFETY: a slot of this table's descriptor, which has exactly these 17 columns.
        unsafe {
            pg_sys::ExecClearTuple(self.slot);
            let datums = (*self.slot).tts_values;
            let nulls = (*self.slot).tts_isnull;
            for (i, value) in values.iter().enumerate() {
                *datums.add(i) = value.unwrap_or(pg_sys::Datum::from(0));
                *nulls.add(i) = value.is_none();
            }
            pg_sys::ExecStoreVirtualTuple(self.slot);
        }
    }

    /// Insert a row and its index entries; visible to the transaction's next command.
    pub fn insert(&mut self, values: &Values) -> Result<()> {
        self.store(values);
        // SAFETY: the table AM's insert and the executor's index insertion, as ExecInsert
        // does them for a table without triggers.
        unsafe {
            let cid = pg_sys::GetCurrentCommandId(true);
            let insert = (*(*self.heap).rd_tableam).tuple_insert.ok_or_else(|| {
                IdemError::new(
                    errors::INTERNAL_ERROR,
                    "the table's access method cannot insert",
                )
            })?;
            // A table AM callback is not behind pgrx's guard: an ERROR in it must unwind as a
            // panic (this writer and the caller's scan are dropped), not longjmp over them.
            #[allow(
                ffi_unwind_calls,
                reason = "inside pg_guard_ffi_boundary: a Postgres error becomes a Rust panic"
            )]
            pg_sys::ffi::pg_guard_ffi_boundary(|| {
                insert(self.heap, self.slot, cid, 0, core::ptr::null_mut())
            });
            compat::insert_index_tuples(self.rri, self.slot, self.estate, IndexUpdate::All, false);
            pg_sys::CommandCounterIncrement();
        }
        Ok(())
    }

    /// Replace the row version `tid` (read with `snapshot`) by `values`. `false`: someone
    /// changed or deleted that version first (after we waited for them); nothing was written.
    pub fn update(
        &mut self,
        mut tid: pg_sys::ItemPointerData,
        snapshot: pg_sys::Snapshot,
        values: &Values,
    ) -> bool {
        self.store(values);
        // SAFETY: the table AM's update, waiting for a concurrent writer as UPDATE does, then
        // new index entries unless the update was HOT.
        unsafe {
            pg_sys::CheckCmdReplicaIdentity(self.heap, pg_sys::CmdType::CMD_UPDATE);
            let cid = pg_sys::GetCurrentCommandId(true);
            let (result, indexes) =
                compat::tuple_update(self.heap, &mut tid, self.slot, cid, snapshot);
            if result != pg_sys::TM_Result::TM_Ok {
                return false;
            }
            // `update = false`: true would have Postgres read the updated columns from the
            // executor's range table, which a direct write does not have. It only withholds
            // a hint from btree's bottom-up deletion.
            compat::insert_index_tuples(self.rri, self.slot, self.estate, indexes, false);
            pg_sys::CommandCounterIncrement();
            true
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The transaction is aborting: its resource owner releases all of this.
            return;
        }
        // SAFETY: each resource was acquired in `open` and is released once, in reverse.
        unsafe {
            pg_sys::ExecDropSingleTupleTableSlot(self.slot);
            pg_sys::ExecCloseIndices(self.rri);
            pg_sys::FreeExecutorState(self.estate);
            pg_sys::table_close(self.heap, pg_sys::NoLock as pg_sys::LOCKMODE);
        }
    }
}
