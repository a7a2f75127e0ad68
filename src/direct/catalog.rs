//! What the direct paths know about `idempotency.requests`, learnt after the table is locked.
//!
//! Decide after the lock: the relation is locked first (which processes the invalidations of
//! everything committed before), and only then are privileges, row-level security and the
//! table's shape (`shape.rs`) judged. The catalog facts are cached per backend; a relcache
//! callback drops them and bumps [`GENERATION`], so a cache built while an invalidation arrived
//! is never kept, and a writer that takes a stronger lock later re-checks that nothing changed.

use core::ffi::CStr;
use std::cell::Cell;

use pgrx::pg_sys::{self, Datum, Oid};

use crate::base::errors::{self, IdemError, Result};
use crate::base::record::{self, Status, col};
use crate::direct::generations::{self, Children, Generations};
use crate::direct::shape::{self, Shape};

#[derive(Clone, Copy)]
pub struct Catalog {
    pub namespace: Oid,
    pub table: Oid,
    pub index: Oid,
    /// `idem_status` label OIDs in [`Status::ALL`] order.
    pub statuses: [Oid; 4],
    pub shape: Shape,
    /// A Citus table (`pg_dist_partition` lists its OID): on the coordinator an empty shell,
    /// on a worker a shell over hidden shards. Never read or written directly (`src/steps/citus.rs`).
    pub distributed: bool,
    /// The generations layout's tables, when the table has them (`generations.rs`).
    pub generations: Option<Generations>,
}

thread_local! {
    static CATALOG: Cell<Option<Catalog>> = const { Cell::new(None) };
    /// Bumped by every invalidation of the watched relations (or of all relations).
    static GENERATION: Cell<u64> = const { Cell::new(0) };
    /// The relations whose invalidation matters, including while a catalog is being built: the
    /// table, its primary key, then the generations layout's tables and theirs.
    static WATCHED: Cell<[Oid; WATCHED_LEN]> = const { Cell::new([pg_sys::InvalidOid; WATCHED_LEN]) };
    static CALLBACK_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

const WATCHED_LEN: usize = 9;

fn watch(table: Oid, index: Oid, generations: Option<&Generations>) {
    let mut watched = [pg_sys::InvalidOid; WATCHED_LEN];
    watched[0] = table;
    watched[1] = index;
    if let Some(g) = generations {
        watched[2..5].copy_from_slice(&g.tables);
        watched[5..8].copy_from_slice(&g.indexes);
        watched[8] = g.layout;
    }
    WATCHED.with(|w| w.set(watched));
}

#[pgrx::pg_guard]
extern "C-unwind" fn forget_catalog(_arg: Datum, relid: Oid) {
    let watched = WATCHED.with(Cell::get);
    if relid == pg_sys::InvalidOid || watched.contains(&relid) {
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
pub fn resolve() -> Result<(Oid, Oid, Oid)> {
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
        if (*(*rel).rd_att).natts <= col::STATUS as i32 {
            return None;
        }
        let typ = pgrx::PgTupleDesc::from_pg_unchecked((*rel).rd_att)
            .get(col::STATUS)?
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

/// Build the catalog of the locked `rel`; locks the generations (with `lockmode`) if it has
/// them. With it, whether it may be cached: not when the table has children other than the
/// generations, as dropping one of them does not invalidate the table.
unsafe fn build(
    nsp: Oid,
    rel: pg_sys::Relation,
    index: Oid,
    lockmode: u32,
) -> Result<(Catalog, bool)> {
    // SAFETY: `rel` is open and locked; the index is opened under that lock and closed again.
    unsafe {
        let idx = pg_sys::try_relation_open(index, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        if idx.is_null() {
            return Err(missing("index idempotency.requests_pkey"));
        }
        let status = status_type(rel);
        let mut statuses = [pg_sys::InvalidOid; 4];
        let mut shape = Shape::default();
        let mut layout = None;
        let mut keep = true;
        if let Some(typ) = status {
            for (slot, status) in statuses.iter_mut().zip(Status::ALL) {
                *slot = record::enum_label_oid(typ, status.label())?;
            }
            if (*(*idx).rd_rel).relkind == pg_sys::RELKIND_INDEX as core::ffi::c_char {
                shape = shape::of(rel, idx, typ);
            }
            if (*(*rel).rd_rel).relhassubclass {
                match generations::find(nsp, (*rel).rd_id) {
                    Children::None => {}
                    Children::Other => {
                        shape = Shape::default();
                        keep = false;
                    }
                    Children::Generations(found) => {
                        watch((*rel).rd_id, index, Some(&found));
                        generations::lock(&found, lockmode);
                        shape = generations::shape(&found, rel, shape, typ);
                        layout = Some(found);
                    }
                }
            }
        }
        pg_sys::relation_close(idx, pg_sys::NoLock as pg_sys::LOCKMODE);
        // Citus invalidates the relation's relcache entry when it distributes (or undistributes)
        // it, which drops this cached catalog (`forget_catalog`).
        let distributed = crate::base::citus_detect::is_citus_table((*rel).rd_id);
        let catalog = Catalog {
            namespace: nsp,
            table: (*rel).rd_id,
            index,
            statuses,
            shape,
            distributed,
            generations: layout,
        };
        Ok((catalog, keep))
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
        let layout = cached.and_then(|c| c.generations);
        watch(table, index, layout.as_ref());
        // Privileges before the lock, as a statement's name lookup checks them: a role with no
        // rights must not queue for the table behind another session's lock. Every decision
        // still waits for the lock (`rules.rs` checks the exact privilege again).
        crate::base::access::require_schema_usage(nsp)?;
        crate::base::access::require_some_table_privilege(table)?;
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
        if let Some(g) = &layout {
            // As a statement through the table locks its children, after it.
            generations::lock(g, lockmode);
        }
        if generation() != before {
            close(rel);
            continue;
        }
        if let Some(catalog) = cached {
            return Ok(Some((catalog, rel, before)));
        }
        // SAFETY: `rel` is open and locked.
        let (catalog, keep) = match unsafe { build(nsp, rel, index, lockmode) } {
            Ok(built) => built,
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
        if keep {
            CATALOG.with(|c| c.set(Some(catalog)));
        }
        return Ok(Some((catalog, rel, before)));
    }
    Ok(None)
}

/// Has anything about the table been invalidated since `seen` (a [`lock_table`] generation)?
pub fn changed_since(seen: u64) -> bool {
    generation() != seen
}

impl Catalog {
    /// The `idem_status` value of `status`, as a datum.
    pub fn status_datum(&self, status: Status) -> Datum {
        Datum::from(self.statuses[status.index()])
    }
}
