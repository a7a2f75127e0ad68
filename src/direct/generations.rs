//! The generations layout (sql/layout.sql) as the direct path sees it: the three child tables of
//! `idempotency.requests`, found and judged after the table is locked, and the current one,
//! read from `idempotency.layout` for a new record.
//!
//! A record may be in the table itself (from before the switch) or in any generation, so a
//! lookup probes each one's primary key; a key has one record across them because a claim
//! inserts only under the key's lock, after a look through all of them. A new record goes into
//! the current generation. That generation cannot change while the caller holds its lookup's
//! locks: a rotation changes it only while it holds the oldest generation's ACCESS EXCLUSIVE
//! lock, which waits for the ACCESS SHARE lock [`lock`] takes on every generation.

use core::ffi::CStr;

use pgrx::pg_sys::{self, Oid};

use crate::direct::shape::{self, Shape};

/// The tables of the generations layout; `tables[g - 1]` is generation `g`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generations {
    pub tables: [Oid; 3],
    pub indexes: [Oid; 3],
    /// `idempotency.layout`, the row that names the current generation.
    pub layout: Oid,
}

/// The child tables of `idempotency.requests`.
pub enum Children {
    /// None: the flat layout (also after a switch back, while `relhassubclass` is still set).
    None,
    Generations(Generations),
    /// Tables the extension did not make, or not all of its own: SQL reads through the table.
    Other,
}

const NAMES: [(&CStr, &CStr); 3] = [
    (c"requests_g1", c"requests_g1_pkey"),
    (c"requests_g2", c"requests_g2_pkey"),
    (c"requests_g3", c"requests_g3_pkey"),
];

/// `pg_inherits` and its index on (inhparent, inhseqno): fixed catalog OIDs.
const INHERITS: Oid = Oid::from_u32(2611);
const INHERITS_PARENT: Oid = Oid::from_u32(2187);
const INHPARENT: pg_sys::AttrNumber = 2;

/// The children of `parent` (in schema `nsp`), from `pg_inherits` as the catalog is now.
///
/// # Safety
/// Inside a transaction, with `parent` locked.
pub unsafe fn find(nsp: Oid, parent: Oid) -> Children {
    // SAFETY: a catalog scan and name lookups by syscache, inside a transaction.
    unsafe {
        // Column 1 of pg_inherits is inhrelid.
        let mut children = first_oids(INHERITS, INHERITS_PARENT, INHPARENT, parent, usize::MAX);
        if children.is_empty() {
            return Children::None;
        }
        let by_name = |name: &CStr| pg_sys::get_relname_relid(name.as_ptr(), nsp);
        let mut found = Generations {
            tables: [pg_sys::InvalidOid; 3],
            indexes: [pg_sys::InvalidOid; 3],
            layout: by_name(c"layout"),
        };
        for (g, (table, index)) in NAMES.iter().enumerate() {
            found.tables[g] = by_name(table);
            found.indexes[g] = by_name(index);
        }
        children.sort_unstable_by_key(|o| o.to_u32());
        let mut expected = found.tables;
        expected.sort_unstable_by_key(|o| o.to_u32());
        let complete = found.layout != pg_sys::InvalidOid
            && found.indexes.iter().all(|i| *i != pg_sys::InvalidOid)
            && children == expected;
        if complete {
            Children::Generations(found)
        } else {
            Children::Other
        }
    }
}

/// Lock every generation with `lockmode`, in OID order after the table, as a statement through
/// the table locks its children.
pub fn lock(generations: &Generations, lockmode: u32) {
    let mut tables = generations.tables;
    tables.sort_unstable_by_key(|o| o.to_u32());
    for table in tables {
        // SAFETY: a lock by OID, held to the end of the transaction.
        unsafe { pg_sys::LockRelationOid(table, lockmode as pg_sys::LOCKMODE) };
    }
}

/// What the direct paths may do with the locked generations, on top of the table's own `shape`:
/// read them if each has the table's columns and primary key and no children; write them if
/// each is also exactly as created (no triggers, so no foreign key to it either), neither the
/// table nor a generation has row-level security, policies, or a unique index or exclusion
/// constraint besides its primary key, and `idempotency.layout` reads as expected. Whatever is
/// left out goes through SQL, which refuses what the layout refuses (0A000: row-level
/// security, triggers, a foreign key, another unique index; sql/layout.sql) and writes the
/// rest.
/// Citus is judged per call (`rules::may_write`).
///
/// # Safety
/// Inside a transaction, with `table_rel` and the generations locked ([`lock`]); `status_type`
/// is `idem_status`.
pub unsafe fn shape(
    generations: &Generations,
    table_rel: pg_sys::Relation,
    table: Shape,
    status_type: Oid,
) -> Shape {
    let mut out = table;
    // SAFETY: an open relation; a catalog scan.
    out.writable &= unsafe {
        !(*(*table_rel).rd_rel).relrowsecurity
            && !has_policies((*table_rel).rd_id)
            && !other_unique((*table_rel).rd_id)
    };
    // SAFETY: each relation is opened under the lock held and closed again.
    unsafe {
        for (heap, index) in generations.tables.iter().zip(generations.indexes) {
            let rel = pg_sys::try_relation_open(*heap, pg_sys::NoLock as pg_sys::LOCKMODE);
            if rel.is_null() {
                return Shape::default();
            }
            let idx = pg_sys::try_relation_open(index, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
            let own = if idx.is_null()
                || (*(*idx).rd_rel).relkind != pg_sys::RELKIND_INDEX as core::ffi::c_char
                || (*(*rel).rd_rel).relhassubclass
            {
                Shape::default()
            } else {
                shape::of(rel, idx, status_type)
            };
            let secured = (*(*rel).rd_rel).relrowsecurity;
            if !idx.is_null() {
                pg_sys::relation_close(idx, pg_sys::NoLock as pg_sys::LOCKMODE);
            }
            pg_sys::relation_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
            out.readable &= own.readable;
            out.writable &= own.writable && !secured && !other_unique(*heap);
        }
        out.writable &= out.readable && layout_readable(generations.layout);
    }
    out
}

/// `pg_policy` and its index on (polrelid, polname): fixed catalog OIDs.
const POLICY: Oid = Oid::from_u32(3256);
const POLICY_RELID: Oid = Oid::from_u32(3258);

/// Does `table` have policies (row-level security enabled or not: the layout refuses both)?
unsafe fn has_policies(table: Oid) -> bool {
    // Column 3 of pg_policy is polrelid (after oid and polname).
    // SAFETY: a catalog scan inside a transaction.
    unsafe { !first_oids(POLICY, POLICY_RELID, 3, table, 1).is_empty() }
}

/// The first column (an oid) of at most `limit` rows of the catalog `catalog` whose column
/// `attno` is `key`, read through its index `index` as the catalog is now.
///
/// # Safety
/// Inside a transaction; `index` is an index of `catalog` that leads with `attno`.
unsafe fn first_oids(
    catalog: Oid,
    index: Oid,
    attno: pg_sys::AttrNumber,
    key: Oid,
    limit: usize,
) -> Vec<Oid> {
    let mut found = Vec::new();
    // SAFETY: the caller's; each row's first column is an oid.
    unsafe {
        scan(catalog, index, attno, key, |tuple| {
            found.push(*(pg_sys::GETSTRUCT(tuple) as *const Oid));
            found.len() < limit
        });
    }
    found
}

/// `visit` each row of the catalog `catalog` whose column `attno` is `key`, read through its
/// index `index` as the catalog is now, until it answers `false`.
///
/// # Safety
/// Inside a transaction; `index` is an index of `catalog` that leads with `attno`.
unsafe fn scan(
    catalog: Oid,
    index: Oid,
    attno: pg_sys::AttrNumber,
    key: Oid,
    mut visit: impl FnMut(pg_sys::HeapTuple) -> bool,
) {
    // SAFETY: the catalog is opened, scanned and closed here.
    unsafe {
        let rel = pg_sys::table_open(catalog, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let mut scankey: pg_sys::ScanKeyData = core::mem::zeroed();
        pg_sys::ScanKeyInit(
            &mut scankey,
            attno,
            pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
            pg_sys::RegProcedure::from(pg_sys::F_OIDEQ),
            pg_sys::Datum::from(key),
        );
        let scan =
            pg_sys::systable_beginscan(rel, index, true, core::ptr::null_mut(), 1, &mut scankey);
        loop {
            let tuple = pg_sys::systable_getnext(scan);
            if tuple.is_null() || !visit(tuple) {
                break;
            }
        }
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    }
}

/// `pg_index` and its index on indrelid: fixed catalog OIDs.
const INDEX: Oid = Oid::from_u32(2610);
const INDEX_RELID: Oid = Oid::from_u32(2678);

/// Has `table` a unique index or an exclusion constraint besides its primary key? SQL inserts
/// into a generation with a bare ON CONFLICT DO NOTHING, which would swallow their
/// violations, so the layout refuses them (0A000; sql/layout.sql).
unsafe fn other_unique(table: Oid) -> bool {
    let mut found = false;
    // Column 2 of pg_index is indrelid.
    // SAFETY: a catalog scan inside a transaction; the rows are pg_index's.
    unsafe {
        scan(INDEX, INDEX_RELID, 2, table, |tuple| {
            let form = pg_sys::GETSTRUCT(tuple) as *const pg_sys::FormData_pg_index;
            found = ((*form).indisunique || (*form).indisexclusion) && !(*form).indisprimary;
            !found
        });
    }
    found
}

/// Is the table or a generation a Citus table? SQL refuses the layout then (sql/layout.sql,
/// `layout_on_citus`), so its claims go through SQL. Asked per write, as distributing a
/// table later invalidates none of the relations the catalog watches in every backend.
///
/// # Safety
/// Inside a transaction, with `table` and the generations locked (decide after the lock).
pub unsafe fn on_citus(table: Oid, generations: &Generations) -> bool {
    let [g1, g2, g3] = generations.tables;
    // SAFETY: the caller's locks.
    unsafe { crate::base::citus_detect::any_citus_table(&[table, g1, g2, g3]) }
}

/// Column 2 of `idempotency.layout`.
const CURRENT: usize = 1;

/// Is `idempotency.layout` a heap table whose column 2 is `current_generation int2`, without
/// row-level security (which SQL would apply to the caller's read)?
unsafe fn layout_readable(layout: Oid) -> bool {
    // SAFETY: opened with a lock (held to the end of the transaction) and closed again.
    unsafe {
        let rel = pg_sys::try_relation_open(layout, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        if rel.is_null() {
            return false;
        }
        let form = (*rel).rd_rel;
        let tupdesc = pgrx::PgTupleDesc::from_pg_unchecked((*rel).rd_att);
        let ok = (*form).relkind == pg_sys::RELKIND_RELATION as core::ffi::c_char
            && (*form).relam == pg_sys::HEAP_TABLE_AM_OID
            && !(*form).relrowsecurity
            && tupdesc.get(CURRENT).is_some_and(|attr| {
                !attr.attisdropped
                    && attr.atttypid == pg_sys::INT2OID
                    && CStr::from_ptr(attr.attname.data.as_ptr()) == c"current_generation"
            });
        pg_sys::relation_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        ok
    }
}

/// The current generation (1 to 3) as `snapshot` sees `idempotency.layout`, or `None` (no row,
/// a value out of range, no SELECT on it, or the table gone): SQL then reads it as the caller
/// and says why.
///
/// # Safety
/// Inside a transaction; `snapshot` is registered; the layout passed [`shape`]'s checks.
pub unsafe fn current(generations: &Generations, snapshot: pg_sys::Snapshot) -> Option<usize> {
    // SAFETY: a heap scan of a locked heap table (checked by `layout_readable`; a table
    // replaced since has invalidated the catalog, which `may_write_locked` sees), ended and
    // closed before returning.
    unsafe {
        let rel = pg_sys::try_relation_open(
            generations.layout,
            pg_sys::AccessShareLock as pg_sys::LOCKMODE,
        );
        if rel.is_null() {
            return None;
        }
        let select = pg_sys::pg_class_aclcheck(
            generations.layout,
            pg_sys::GetUserId(),
            pg_sys::ACL_SELECT as pg_sys::AclMode,
        );
        if select != pg_sys::AclResult::ACLCHECK_OK {
            pg_sys::relation_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
            return None;
        }
        let flags = pg_sys::ScanOptions::SO_TYPE_SEQSCAN | pg_sys::ScanOptions::SO_ALLOW_PAGEMODE;
        let scan = pg_sys::heap_beginscan(
            rel,
            snapshot,
            0,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            flags,
        );
        let slot = pg_sys::table_slot_create(rel, core::ptr::null_mut());
        let mut current = None;
        if pg_sys::heap_getnextslot(scan, pg_sys::ScanDirection::ForwardScanDirection, slot) {
            pg_sys::slot_getsomeattrs_int(slot, CURRENT as i32 + 1);
            if !*(*slot).tts_isnull.add(CURRENT) {
                let g = (*(*slot).tts_values.add(CURRENT)).value() as i16;
                current = (1..=3).contains(&g).then_some(g as usize);
            }
        }
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        pg_sys::heap_endscan(scan);
        pg_sys::relation_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        current
    }
}
