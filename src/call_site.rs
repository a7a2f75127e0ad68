//! The result rows of `idem_claim` and `idem_call`: their descriptor and the `idem_outcome`
//! label OIDs, looked up once per backend and function.
//!
//! `fn_extra` would keep them for one execution only (a prepared statement gets a new FmgrInfo
//! each time), so they live here, keyed by function OID, each in a memory context of its own.
//! A syscache callback forgets them when a function or type changes; the memory of forgotten
//! entries is freed at the end of the transaction, when no call can still be using it.
//!
//! Building a site looks up catalogs, which can process invalidations, so the callback can run
//! in the middle of a build. A site whose build saw one (the generation moved) is used for that
//! call only and retired with the others: it is never cached.

use core::ffi::{CStr, c_int, c_void};
use std::cell::{Cell, RefCell};

use pgrx::PgTupleDesc;
use pgrx::pg_guard;
use pgrx::pg_sys::{self, Datum, Oid};

use crate::claim::Outcome;
use crate::errors::{self, IdemError, Result};

/// A result row's descriptor and the `idem_outcome` label OIDs, in [`Outcome::ALL`] order.
pub(crate) struct CallSite {
    pub(crate) tupdesc: pg_sys::TupleDesc,
    outcomes: [Oid; 6],
}

impl CallSite {
    /// The `idem_outcome` label OID of `outcome`, as a datum.
    pub(crate) fn outcome_datum(&self, outcome: Outcome) -> Datum {
        let index = Outcome::ALL.iter().position(|o| *o == outcome).unwrap_or(0);
        Datum::from(self.outcomes[index])
    }
}

/// A cached site: its function, the site, and the memory context that holds it.
type Entry = (Oid, *const CallSite, pg_sys::MemoryContext);

thread_local! {
    static SITES: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
    /// Contexts of forgotten sites, deleted at the end of the transaction.
    static RETIRED: RefCell<Vec<pg_sys::MemoryContext>> = const { RefCell::new(Vec::new()) };
    /// Bumped by every invalidation: a build during which it moved is not cached.
    static GENERATION: Cell<u64> = const { Cell::new(0) };
    static CALLBACKS_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

/// A function or type changed: forget every site (rebuilding one costs a few µs).
#[pg_guard]
extern "C-unwind" fn forget_sites(_arg: Datum, _cache: c_int, _hash: u32) {
    GENERATION.with(|g| g.set(g.get().wrapping_add(1)));
    let forgotten = SITES.with(|sites| core::mem::take(&mut *sites.borrow_mut()));
    RETIRED.with(|retired| {
        retired
            .borrow_mut()
            .extend(forgotten.into_iter().map(|(_, _, context)| context))
    });
}

#[pg_guard]
extern "C-unwind" fn free_retired(_event: pg_sys::XactEvent::Type, _arg: *mut c_void) {
    let retired = RETIRED.with(|retired| core::mem::take(&mut *retired.borrow_mut()));
    for context in retired {
        // SAFETY: no call is running at transaction end, so nothing points into it any more.
        unsafe { pg_sys::MemoryContextDelete(context) };
    }
}

fn register_callbacks() {
    if CALLBACKS_REGISTERED.with(Cell::get) {
        return;
    }
    // SAFETY: plain functions registered for the life of the backend.
    unsafe {
        for cache in [
            pg_sys::SysCacheIdentifier::PROCOID,
            pg_sys::SysCacheIdentifier::TYPEOID,
        ] {
            pg_sys::CacheRegisterSyscacheCallback(
                cache as c_int,
                Some(forget_sites),
                Datum::from(0),
            );
        }
        pg_sys::RegisterXactCallback(Some(free_retired), core::ptr::null_mut());
    }
    CALLBACKS_REGISTERED.with(|c| c.set(true));
}

/// A small context of one site under CacheMemoryContext, deleted only by `free_retired`.
fn new_context() -> pg_sys::MemoryContext {
    // SAFETY: creates a child of CacheMemoryContext, which lives as long as the backend.
    unsafe {
        pg_sys::AllocSetContextCreateExtended(
            pg_sys::CacheMemoryContext,
            c"idempotency result row".as_ptr(),
            0,
            1024,
            8192,
        )
    }
}

fn retire(context: pg_sys::MemoryContext) {
    RETIRED.with(|retired| retired.borrow_mut().push(context));
}

/// The site of the function `fcinfo` calls, which returns a row whose first column is
/// `idem_outcome`.
///
/// # Safety
/// `fcinfo` is a call of such a function.
pub(crate) unsafe fn call_site(fcinfo: pg_sys::FunctionCallInfo) -> Result<&'static CallSite> {
    // SAFETY: a call's FmgrInfo.
    let fn_oid = unsafe { (*(*fcinfo).flinfo).fn_oid };
    let found = SITES.with(|sites| {
        sites
            .borrow()
            .iter()
            .find(|(oid, _, _)| *oid == fn_oid)
            .map(|(_, site, _)| *site)
    });
    if let Some(site) = found {
        // SAFETY: allocated in its own context, which outlives every call of this transaction.
        return Ok(unsafe { &*site });
    }
    register_callbacks();
    let before = GENERATION.with(Cell::get);
    let context = new_context();
    // SAFETY: builds the site in its own context from the call's declared result type.
    let site = match unsafe { build(fcinfo, context) } {
        Ok(site) => site,
        Err(err) => {
            retire(context);
            return Err(err);
        }
    };
    if GENERATION.with(Cell::get) == before {
        SITES.with(|sites| sites.borrow_mut().push((fn_oid, site, context)));
    } else {
        // Built while something changed: good for this call, never kept.
        retire(context);
    }
    // SAFETY: the context outlives this call (it is deleted at transaction end at the earliest).
    Ok(unsafe { &*site })
}

unsafe fn build(
    fcinfo: pg_sys::FunctionCallInfo,
    context: pg_sys::MemoryContext,
) -> Result<*const CallSite> {
    // SAFETY: allocations go to `context`; catalog lookups are checked.
    unsafe {
        let old = pg_sys::MemoryContextSwitchTo(context);
        let built = (|| {
            let mut tupdesc: pg_sys::TupleDesc = core::ptr::null_mut();
            let kind = pg_sys::get_call_result_type(fcinfo, core::ptr::null_mut(), &mut tupdesc);
            if kind != pg_sys::TypeFuncClass::TYPEFUNC_COMPOSITE || tupdesc.is_null() {
                return Err(IdemError::new(
                    errors::INTERNAL_ERROR,
                    "the function must return a row",
                ));
            }
            let tupdesc = pg_sys::BlessTupleDesc(tupdesc);
            let outcome_type = PgTupleDesc::from_pg_unchecked(tupdesc)
                .get(0)
                .map(|attr| attr.atttypid)
                .ok_or_else(|| {
                    IdemError::new(errors::INTERNAL_ERROR, "the result row has no columns")
                })?;
            let mut outcomes = [pg_sys::InvalidOid; 6];
            for (slot, outcome) in outcomes.iter_mut().zip(Outcome::ALL) {
                *slot = enum_label_oid(outcome_type, outcome.label())?;
            }
            let site = pg_sys::palloc(core::mem::size_of::<CallSite>()) as *mut CallSite;
            site.write(CallSite { tupdesc, outcomes });
            Ok(site as *const CallSite)
        })();
        pg_sys::MemoryContextSwitchTo(old);
        built
    }
}

pub(crate) fn enum_label_oid(enum_type: Oid, label: &CStr) -> Result<Oid> {
    // SAFETY: a syscache lookup by (enum type, label); the tuple is released before returning.
    unsafe {
        let tuple = pg_sys::SearchSysCache(
            pg_sys::SysCacheIdentifier::ENUMTYPOIDNAME as _,
            Datum::from(enum_type),
            Datum::from(label.as_ptr()),
            Datum::from(0),
            Datum::from(0),
        );
        if tuple.is_null() {
            return Err(IdemError::new(
                errors::INTERNAL_ERROR,
                format!("enum type {enum_type:?} has no label {label:?}"),
            ));
        }
        let oid = (*(pg_sys::GETSTRUCT(tuple) as pg_sys::Form_pg_enum)).oid;
        pg_sys::ReleaseSysCache(tuple);
        Ok(oid)
    }
}
