//! The claim path's first read: one record by primary key, straight through the index.
//!
//! A replay is the most common call and must cost little more than the index lookup it is, so
//! this read skips SPI and the executor: it opens `idempotency.requests` and its primary key,
//! scans with a fresh snapshot (as a READ COMMITTED statement would) and reads the columns from
//! the slot.
//!
//! Decide after the lock: the relation is locked first (which processes the invalidations of
//! everything committed before), and only then are privileges, row-level security and the
//! table's shape (`shape.rs`) judged. The catalog facts are cached per backend; a relcache
//! callback drops them and bumps [`GENERATION`], so a cache built while an invalidation arrived
//! is never kept, and a writer that takes a stronger lock later re-checks that nothing changed.

use core::ffi::CStr;
use std::cell::Cell;

use pgrx::pg_sys::{self, Datum, Oid};

use crate::compat;
use crate::errors::{self, IdemError, Result};
use crate::shape::{self, Shape};

/// `idem_status` labels in enum order.
pub const STATUS_LABELS: [&CStr; 4] = [
    c"processing",
    c"succeeded",
    c"failed_retryable",
    c"failed_final",
];

/// Column numbers (1-based) the claim path reads; fixed because the shape is checked.
mod attno {
    pub const REQUEST_HASH: usize = 3;
    pub const STATUS: usize = 4;
    pub const ATTEMPT: usize = 5;
    pub const RESPONSE: usize = 6;
    pub const RECOVERY_POINT: usize = 7;
    pub const FAILURE_CODE: usize = 8;
    pub const FAILURE_MESSAGE: usize = 9;
    pub const LOCKED_UNTIL: usize = 12;
    pub const EXPIRES_AT: usize = 17;
}

#[derive(Clone, Copy)]
pub struct Catalog {
    pub namespace: Oid,
    pub table: Oid,
    index: Oid,
    pub statuses: [Oid; 4],
    pub shape: Shape,
    /// A Citus table (`pg_dist_partition` lists its OID): on the coordinator an empty shell,
    /// on a worker a shell over hidden shards. Never read or written directly (`citus.rs`).
    pub distributed: bool,
}

thread_local! {
    static CATALOG: Cell<Option<Catalog>> = const { Cell::new(None) };
    /// Bumped by every invalidation of the watched relations (or of all relations).
    static GENERATION: Cell<u64> = const { Cell::new(0) };
    /// (table, index) whose invalidation matters, including while a catalog is being built.
    static WATCHED: Cell<(Oid, Oid)> = const { Cell::new((pg_sys::InvalidOid, pg_sys::InvalidOid)) };
    static CALLBACK_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

#[pgrx::pg_guard]
extern "C-unwind" fn forget_catalog(_arg: Datum, relid: Oid) {
    let (table, index) = WATCHED.with(Cell::get);
    if relid == pg_sys::InvalidOid || relid == table || relid == index {
        CATALOG.with(|c| c.set(None));
        GENERATION.with(|g| g.set(g.get().wrapping_add(1)));
    }
}

fn generation() -> u64 {
    GENERATION.with(Cell::get)
}

fn missing(what: &str) -> IdemError {
    IdemError::new(
        errors::INTERNAL_ERROR,
        format!("idempotency: {what} not found"),
    )
    .hint("Is the idempotency extension installed in this database?")
}

/// The OIDs of schema `idempotency`, its table and primary key, by name (no lock yet).
pub(crate) fn resolve() -> Result<(Oid, Oid, Oid)> {
    // SAFETY: catalog lookups by name; every result is checked.
    unsafe {
        let nsp = pg_sys::get_namespace_oid(c"idempotency".as_ptr(), true);
        let table = pg_sys::get_relname_relid(c"requests".as_ptr(), nsp);
        let index = pg_sys::get_relname_relid(c"requests_pkey".as_ptr(), nsp);
        if nsp == pg_sys::InvalidOid || table == pg_sys::InvalidOid || index == pg_sys::InvalidOid {
            return Err(missing("table idempotency.requests"));
        }
        Ok((nsp, table, index))
    }
}

/// The extension's `idem_status`: `status`'s type, if it is the extension's own type.
unsafe fn status_type(rel: pg_sys::Relation) -> Option<Oid> {
    // SAFETY: an open relation's descriptor; catalog lookups of existing objects.
    unsafe {
        if (*(*rel).rd_att).natts < attno::STATUS as i32 {
            return None;
        }
        let typ = pgrx::PgTupleDesc::from_pg_unchecked((*rel).rd_att)
            .get(attno::STATUS - 1)?
            .atttypid;
        let extension = pg_sys::get_extension_oid(c"idempotency".as_ptr(), true);
        let owner = pg_sys::getExtensionOfObject(pg_sys::TypeRelationId, typ);
        let tuple =
            pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::TYPEOID as _, Datum::from(typ));
        if tuple.is_null() {
            return None;
        }
        let form = pg_sys::GETSTRUCT(tuple) as pg_sys::Form_pg_type;
        let name = CStr::from_ptr((*form).typname.data.as_ptr()) == c"idem_status"
            && (*form).typtype == pg_sys::TYPTYPE_ENUM as core::ffi::c_char;
        pg_sys::ReleaseSysCache(tuple);
        (extension != pg_sys::InvalidOid && owner == extension && name).then_some(typ)
    }
}

/// Build the catalog of the locked `rel`.
unsafe fn build(nsp: Oid, rel: pg_sys::Relation, index: Oid) -> Result<Catalog> {
    // SAFETY: `rel` is open and locked; the index is opened under that lock and closed again.
    unsafe {
        let idx = pg_sys::try_relation_open(index, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        if idx.is_null() {
            return Err(missing("index idempotency.requests_pkey"));
        }
        let status = status_type(rel);
        let mut statuses = [pg_sys::InvalidOid; 4];
        let mut shape = Shape::default();
        if let Some(typ) = status {
            for (slot, label) in statuses.iter_mut().zip(STATUS_LABELS) {
                *slot = crate::call_site::enum_label_oid(typ, label)?;
            }
            if (*(*idx).rd_rel).relkind == pg_sys::RELKIND_INDEX as core::ffi::c_char {
                shape = shape::of(rel, idx, typ);
            }
        }
        pg_sys::relation_close(idx, pg_sys::NoLock as pg_sys::LOCKMODE);
        // Citus invalidates the relation's relcache entry when it distributes (or undistributes)
        // it, which drops this cached catalog (`forget_catalog`).
        let distributed = crate::citus::is_citus_table((*rel).rd_id);
        Ok(Catalog {
            namespace: nsp,
            table: (*rel).rd_id,
            index,
            statuses,
            shape,
            distributed,
        })
    }
}

/// `idempotency.requests` opened with `lockmode`, and its catalog as of after the lock, or
/// `None` when it kept changing under us (the caller uses SQL).
pub fn lock_table(lockmode: u32) -> Result<Option<(Catalog, pg_sys::Relation, u64)>> {
    if !CALLBACK_REGISTERED.with(Cell::get) {
        // SAFETY: registers a plain function for the life of the backend.
        unsafe { pg_sys::CacheRegisterRelcacheCallback(Some(forget_catalog), Datum::from(0)) };
        CALLBACK_REGISTERED.with(|c| c.set(true));
    }
    for _ in 0..4 {
        let before = generation();
        let cached = CATALOG.with(Cell::get);
        let (nsp, table, index) = match cached {
            Some(c) => (c.namespace, c.table, c.index),
            None => resolve()?,
        };
        WATCHED.with(|w| w.set((table, index)));
        // SAFETY: locking (which processes pending invalidations) before anything is decided;
        // a relation dropped meanwhile gives NULL, not an error.
        let rel = unsafe { pg_sys::try_relation_open(table, lockmode as pg_sys::LOCKMODE) };
        if rel.is_null() {
            CATALOG.with(|c| c.set(None));
            continue;
        }
        let close = |rel| {
            // SAFETY: opened above; the lock stays to the end of the transaction.
            unsafe { pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE) }
        };
        if generation() != before {
            close(rel);
            continue;
        }
        if let Some(catalog) = cached {
            return Ok(Some((catalog, rel, before)));
        }
        // SAFETY: `rel` is open and locked.
        let catalog = match unsafe { build(nsp, rel, index) } {
            Ok(catalog) => catalog,
            Err(err) => {
                close(rel);
                return Err(err);
            }
        };
        if generation() != before {
            // An invalidation arrived while building: never keep or use that catalog.
            close(rel);
            continue;
        }
        CATALOG.with(|c| c.set(Some(catalog)));
        return Ok(Some((catalog, rel, before)));
    }
    Ok(None)
}

/// Has anything about the table been invalidated since `seen` (a [`lock_table`] generation)?
pub fn changed_since(seen: u64) -> bool {
    generation() != seen
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
        // SAFETY: privilege and RLS checks of the locked relation; the index is opened under
        // the table's lock (kept to the end of the transaction, as the executor does).
        unsafe {
            let close = || pg_sys::table_close(heap, pg_sys::NoLock as pg_sys::LOCKMODE);
            if let Err(err) = crate::access::require_schema_usage(catalog.namespace) {
                close();
                return Err(err);
            }
            let user = pg_sys::GetUserId();
            if pg_sys::pg_class_aclcheck(catalog.table, user, pg_sys::ACL_SELECT as pg_sys::AclMode)
                != pg_sys::AclResult::ACLCHECK_OK
            {
                close();
                return Err(IdemError::new(errors::INSUFFICIENT_PRIVILEGE, "permission denied for table requests")
                    .hint("GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency.requests TO the calling role."));
            }
            if !catalog.shape.readable
                || catalog.distributed
                || crate::citus::assumed()
                || pg_sys::check_enable_rls(catalog.table, pg_sys::InvalidOid, false)
                    == pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32
            {
                close();
                return Ok(None);
            }
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
            let natts = shape::NATTS as i32;
            if ((*self.slot).tts_nvalid as i32) < natts {
                pg_sys::slot_getsomeattrs_int(self.slot, natts);
            }
            let values = (*self.slot).tts_values;
            let nulls = (*self.slot).tts_isnull;
            let get = |attno: usize| (!*nulls.add(attno - 1)).then(|| *values.add(attno - 1));
            let required = |attno: usize| {
                get(attno).ok_or_else(|| {
                    IdemError::new(errors::INTERNAL_ERROR, format!("column {attno} is null"))
                })
            };
            let status_oid = Oid::from(required(attno::STATUS)?.value() as u32);
            let status = cat
                .statuses
                .iter()
                .position(|s| *s == status_oid)
                .ok_or_else(|| {
                    IdemError::new(errors::INTERNAL_ERROR, "unknown idem_status value")
                })?;
            Ok(Some(Record {
                request_hash: required(attno::REQUEST_HASH)?,
                status,
                attempt: required(attno::ATTEMPT)?.value() as i32,
                response: get(attno::RESPONSE),
                recovery_point: get(attno::RECOVERY_POINT),
                failure_code: get(attno::FAILURE_CODE),
                failure_message: get(attno::FAILURE_MESSAGE),
                locked_until: get(attno::LOCKED_UNTIL).map(|d| d.value() as i64),
                expires_at: required(attno::EXPIRES_AT)?.value() as i64,
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
