//! The result-row cache of `idem_claim` and `idem_call`: their descriptor and the
//! `idem_outcome` label OIDs, looked up once per backend and function, and the rows formed.
//!
//! `fn_extra` would keep them for one execution only (a prepared statement gets a new FmgrInfo
//! each time), so they live here, keyed by function OID, each in a memory context of its own.
//! A syscache callback forgets them when a function or type changes; the memory of forgotten
//! entries is freed at the end of the transaction, when no call can still be using it.
//!
//! An invalidation can arrive in the middle of a build: `get_call_result_type` may wait for a
//! lock, and acquiring it processes other sessions' committed DDL. Such a build may describe
//! the catalog as it was, and the callback that would have forgotten it has already run, so
//! it serves only the call that made it: its context is freed at the end of the transaction
//! and the next call builds again.

use core::ffi::{c_int, c_void};
use std::cell::{Cell, RefCell};

use pgrx::pg_guard;
use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::{PgMemoryContexts, PgTupleDesc};

use crate::base::errors::{self, IdemError, Result};
use crate::base::record::{Outcome, enum_label_oid};

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

    /// Form a result row of `values` (one per column, `None` for NULL) in `target` (the
    /// caller's memory), copying them out of wherever they were read.
    pub(crate) fn form<const N: usize>(
        &self,
        values: &[Option<Datum>; N],
        target: pg_sys::MemoryContext,
    ) -> Datum {
        let mut datums = values.map(|v| v.unwrap_or(Datum::from(0)));
        let mut nulls = values.map(|v| v.is_none());
        // SAFETY: the descriptor has one column per value, of these types; heap_form_tuple
        // copies the values, and HeapTupleHeaderGetDatum flattens a toasted one.
        unsafe {
            PgMemoryContexts::For(target).switch_to(|_| {
                let tuple =
                    pg_sys::heap_form_tuple(self.tupdesc, datums.as_mut_ptr(), nulls.as_mut_ptr());
                pg_sys::HeapTupleHeaderGetDatum((*tuple).t_data)
            })
        }
    }
}

/// A cached site and the memory context it was built in (and nothing else).
struct Cached {
    fn_oid: Oid,
    site: *const CallSite,
    context: pg_sys::MemoryContext,
}

thread_local! {
    static SITES: RefCell<Vec<Cached>> = const { RefCell::new(Vec::new()) };
    /// Contexts no cached site points into: forgotten sites, builds under way, builds that
    /// failed or saw an invalidation. Deleted at the end of the transaction.
    static RETIRED: RefCell<Vec<pg_sys::MemoryContext>> = const { RefCell::new(Vec::new()) };
    /// How many invalidations this backend has seen; a build caches its site only if this did
    /// not change while it ran.
    static INVALIDATIONS: Cell<u64> = const { Cell::new(0) };
    static CALLBACKS_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

/// A function or type changed: forget every site (rebuilding one costs a few µs).
#[pg_guard]
extern "C-unwind" fn forget_sites(_arg: Datum, _cache: c_int, _hash: u32) {
    INVALIDATIONS.with(|n| n.set(n.get().wrapping_add(1)));
    let forgotten = SITES.with(|sites| core::mem::take(&mut *sites.borrow_mut()));
    RETIRED.with(|retired| {
        retired
            .borrow_mut()
            .extend(forgotten.into_iter().map(|cached| cached.context))
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

/// A new context for one site, retired from the start: freed at the end of the transaction
/// unless [`call_site`] adopts it, so a build that fails (even by a Postgres error) leaks
/// nothing.
fn retired_context() -> pg_sys::MemoryContext {
    // SAFETY: a small context under CacheMemoryContext, deleted only by `free_retired`.
    let context = unsafe {
        pg_sys::AllocSetContextCreateExtended(
            pg_sys::CacheMemoryContext,
            c"idempotency result row".as_ptr(),
            0,
            1024,
            8192,
        )
    };
    RETIRED.with(|retired| retired.borrow_mut().push(context));
    context
}

/// The site of the function `fcinfo` calls, which returns a row whose first column is
/// `idem_outcome`. It stays valid until the end of the current transaction.
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
            .find(|cached| cached.fn_oid == fn_oid)
            .map(|cached| cached.site)
    });
    if let Some(site) = found {
        // SAFETY: its context is deleted at the earliest at the end of this transaction.
        return Ok(unsafe { &*site });
    }
    register_callbacks();
    let seen = INVALIDATIONS.with(Cell::get);
    let context = retired_context();
    // SAFETY: builds the site in `context` from the call's declared result type.
    let site = unsafe { build(fcinfo, context)? };
    if INVALIDATIONS.with(Cell::get) == seen {
        RETIRED.with(|retired| retired.borrow_mut().retain(|c| *c != context));
        SITES.with(|sites| {
            sites.borrow_mut().push(Cached {
                fn_oid,
                site,
                context,
            })
        });
    }
    // SAFETY: as above; a site not cached stays in a retired context until transaction end.
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
            injected_invalidation();
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

#[cfg(any(test, feature = "pg_test"))]
thread_local! {
    static INVALIDATE_NEXT_BUILD: Cell<bool> = const { Cell::new(false) };
}

/// Test hook: invalidate every cache now (so the next call builds its site again), and again
/// in the middle of that build, as when a lock wait inside `get_call_result_type` processes
/// another session's committed DDL.
#[cfg(any(test, feature = "pg_test"))]
pub(crate) fn invalidate_during_next_build() {
    // SAFETY: as in `injected_invalidation`.
    unsafe { pg_sys::InvalidateSystemCaches() };
    INVALIDATE_NEXT_BUILD.with(|flag| flag.set(true));
}

fn injected_invalidation() {
    #[cfg(any(test, feature = "pg_test"))]
    if INVALIDATE_NEXT_BUILD.with(|flag| flag.replace(false)) {
        // SAFETY: what AcceptInvalidationMessages does after a sinval queue overflow, which can
        // happen at any lock acquisition.
        unsafe { pg_sys::InvalidateSystemCaches() };
    }
}
