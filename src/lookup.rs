//! The claim path's first read: one record by primary key, straight through the index.
//!
//! A replay is the most common call and must cost little more than the index lookup it is, so
//! this read skips SPI and the executor: it opens `idempotency.requests` and its primary key,
//! scans with a fresh snapshot (as a READ COMMITTED statement would) and reads the columns from
//! the slot. Privileges are checked as a SELECT would; a table with row-level security enabled
//! is read through SQL instead (the caller falls back to SPI when [`Lookup::open`] says so).
//!
//! The catalog facts (OIDs, column numbers, `idem_status` labels) are cached per backend and
//! dropped by a relcache callback whenever the table or index changes.

use core::ffi::CStr;
use std::cell::Cell;

use pgrx::pg_sys::{self, AttrNumber, Datum, Oid};

use crate::compat;
use crate::errors::{self, IdemError, Result};

/// Columns the claim path reads, in [`Record`] order.
const COLUMNS: [&CStr; 9] = [
    c"request_hash",
    c"status",
    c"attempt",
    c"response",
    c"recovery_point",
    c"failure_code",
    c"failure_message",
    c"locked_until",
    c"expires_at",
];

/// `idem_status` labels in enum order.
pub const STATUS_LABELS: [&CStr; 4] = [
    c"processing",
    c"succeeded",
    c"failed_retryable",
    c"failed_final",
];

#[derive(Clone, Copy)]
pub struct Catalog {
    pub table: Oid,
    index: Oid,
    attnums: [AttrNumber; COLUMNS.len()],
    max_attnum: AttrNumber,
    pub statuses: [Oid; 4],
    /// The table is exactly as the extension created it: `write.rs` may write it directly.
    pub direct_writes: bool,
}

thread_local! {
    static CATALOG: Cell<Option<Catalog>> = const { Cell::new(None) };
    static CALLBACK_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

#[pgrx::pg_guard]
extern "C-unwind" fn forget_catalog(_arg: Datum, relid: Oid) {
    let stale = CATALOG.with(|c| {
        c.get().is_none_or(|cat| {
            relid == pg_sys::InvalidOid || relid == cat.table || relid == cat.index
        })
    });
    if stale {
        CATALOG.with(|c| c.set(None));
    }
}

fn missing(what: &str) -> IdemError {
    IdemError::new(
        errors::INTERNAL_ERROR,
        format!("idempotency: {what} not found"),
    )
    .hint("Is the idempotency extension installed in this database?")
}

fn load_catalog() -> Result<Catalog> {
    if !CALLBACK_REGISTERED.with(Cell::get) {
        // SAFETY: registers a plain function for the life of the backend.
        unsafe { pg_sys::CacheRegisterRelcacheCallback(Some(forget_catalog), Datum::from(0)) };
        CALLBACK_REGISTERED.with(|c| c.set(true));
    }
    // SAFETY: catalog lookups by name; every result is checked.
    unsafe {
        let nsp = pg_sys::get_namespace_oid(c"idempotency".as_ptr(), true);
        let table = pg_sys::get_relname_relid(c"requests".as_ptr(), nsp);
        let index = pg_sys::get_relname_relid(c"requests_pkey".as_ptr(), nsp);
        if nsp == pg_sys::InvalidOid || table == pg_sys::InvalidOid || index == pg_sys::InvalidOid {
            return Err(missing("table idempotency.requests"));
        }
        let mut attnums = [0; COLUMNS.len()];
        for (slot, name) in attnums.iter_mut().zip(COLUMNS) {
            *slot = pg_sys::get_attnum(table, name.as_ptr());
            if *slot <= 0 {
                return Err(missing(&format!("column {name:?}")));
            }
        }
        let status_type = pg_sys::get_atttype(table, attnums[1]);
        let mut statuses = [pg_sys::InvalidOid; 4];
        for (slot, label) in statuses.iter_mut().zip(STATUS_LABELS) {
            *slot = crate::call_site::enum_label_oid(status_type, label)?;
        }
        let max_attnum = attnums.iter().copied().max().unwrap_or(0);
        let catalog = Catalog {
            table,
            index,
            attnums,
            max_attnum,
            statuses,
            direct_writes: crate::write::table_is_pristine(table),
        };
        CATALOG.with(|c| c.set(Some(catalog)));
        Ok(catalog)
    }
}

/// A record's columns as datums that point into the scanned buffer; valid while the
/// [`Lookup`] that produced them is alive.
pub struct Record {
    pub request_hash: Datum,
    /// Index into [`STATUS_LABELS`].
    pub status: usize,
    pub attempt: i32,
    pub response: Option<Datum>,
    pub recovery_point: Option<Datum>,
    pub failure_code: Option<Datum>,
    pub failure_message: Option<Datum>,
    pub locked_until: Option<i64>,
    pub expires_at: i64,
}

/// An open index scan of `idempotency.requests`; closed when dropped.
pub struct Lookup {
    pub catalog: Catalog,
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
    scan: pg_sys::IndexScanDesc,
    slot: *mut pg_sys::TupleTableSlot,
}

impl Lookup {
    /// Open the table and its primary key for reading, or `Ok(None)` when the read must go
    /// through SQL (row-level security is enabled on the table).
    pub fn open() -> Result<Option<Lookup>> {
        let catalog = match CATALOG.with(Cell::get) {
            Some(catalog) => catalog,
            None => load_catalog()?,
        };
        // SAFETY: privilege and RLS checks on a relation OID; the relations are opened with
        // AccessShareLock (kept to the end of the transaction, as the executor does).
        unsafe {
            let user = pg_sys::GetUserId();
            if pg_sys::pg_class_aclcheck(catalog.table, user, pg_sys::ACL_SELECT as pg_sys::AclMode)
                != pg_sys::AclResult::ACLCHECK_OK
            {
                return Err(IdemError::new(errors::INSUFFICIENT_PRIVILEGE, "permission denied for table requests")
                    .hint("GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency.requests TO the calling role."));
            }
            if pg_sys::check_enable_rls(catalog.table, pg_sys::InvalidOid, false)
                == pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32
            {
                return Ok(None);
            }
            let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
            let heap = pg_sys::table_open(catalog.table, lock);
            let index = pg_sys::index_open(catalog.index, lock);
            let snapshot = pg_sys::RegisterSnapshot(pg_sys::GetTransactionSnapshot());
            let scan = compat::index_beginscan(heap, index, snapshot, 2, 0);
            let slot = pg_sys::table_slot_create(heap, core::ptr::null_mut());
            Ok(Some(Lookup {
                catalog,
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

    /// The slot holding the row the last [`Lookup::find`] returned, and the snapshot it was
    /// read with.
    pub fn found(&self) -> (*mut pg_sys::TupleTableSlot, pg_sys::Snapshot) {
        (self.slot, self.snapshot)
    }

    /// The record of (scope, key) as of the scan's snapshot (taken at `open` or `refresh`), if any.
    pub fn find(&mut self, scope: Datum, key: Datum) -> Result<Option<Record>> {
        let cat = &self.catalog;
        // SAFETY: an open scan; keys use the index's collations and text equality.
        unsafe {
            let collations = (*self.index).rd_indcollation;
            let mut keys: [pg_sys::ScanKeyData; 2] = core::mem::zeroed();
            for (i, value) in [scope, key].into_iter().enumerate() {
                pg_sys::ScanKeyEntryInitialize(
                    &mut keys[i],
                    0,
                    (i + 1) as AttrNumber,
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
            if (*self.slot).tts_nvalid < cat.max_attnum {
                pg_sys::slot_getsomeattrs_int(self.slot, cat.max_attnum as i32);
            }
            let values = (*self.slot).tts_values;
            let nulls = (*self.slot).tts_isnull;
            let get = |n: usize| {
                let at = (cat.attnums[n] - 1) as usize;
                (!*nulls.add(at)).then(|| *values.add(at))
            };
            let required = |n: usize| {
                get(n).ok_or_else(|| {
                    IdemError::new(errors::INTERNAL_ERROR, format!("{:?} is null", COLUMNS[n]))
                })
            };
            let status_oid = Oid::from(required(1)?.value() as u32);
            let status = cat
                .statuses
                .iter()
                .position(|s| *s == status_oid)
                .ok_or_else(|| {
                    IdemError::new(errors::INTERNAL_ERROR, "unknown idem_status value")
                })?;
            Ok(Some(Record {
                request_hash: required(0)?,
                status,
                attempt: required(2)?.value() as i32,
                response: get(3),
                recovery_point: get(4),
                failure_code: get(5),
                failure_message: get(6),
                locked_until: get(7).map(|d| d.value() as i64),
                expires_at: required(8)?.value() as i64,
            }))
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
