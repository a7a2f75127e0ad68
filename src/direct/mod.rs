//! The direct path: `idempotency.requests` read and written without SPI or the planner, for
//! the calls that dominate (a replay, a new claim, a complete or fail).
//!
//! - `catalog`: the table's OIDs, `idem_status` labels and shape, learnt after the lock and
//!   cached per backend;
//! - `shape`: what "the table as the extension created it" means;
//! - `generations`: the generations layout's tables, where a record may also be;
//! - `lookup`: one record by primary key through the index;
//! - `writer`: a row inserted or updated through the table AM and its indexes;
//! - `rules`: every rule for when SQL takes over, with its reason;
//! - `store`: all of it as the seam's direct implementation (`store.rs`).

pub mod catalog;
pub mod generations;
pub mod lookup;
pub mod rules;
pub mod shape;
pub mod store;
pub mod writer;

pub use catalog::{lock_table, resolve};
pub use store::Direct;

/// (constraint name, canonical expression) of every CHECK of `idempotency.requests`, then
/// ("readable"/"writable", flag), for tests.
#[cfg(any(test, feature = "pg_test"))]
pub fn describe_requests() -> Vec<(String, String)> {
    use pgrx::pg_sys;

    let mut out = Vec::new();
    let Ok(Some((catalog, rel, _))) = lock_table(pg_sys::AccessShareLock) else {
        return out;
    };
    // SAFETY: the locked relation's constraints, as `checks_match` reads them.
    unsafe {
        let constr = (*(*rel).rd_att).constr;
        if !constr.is_null() {
            let checks = core::slice::from_raw_parts((*constr).check, (*constr).num_check as usize);
            let status = pgrx::PgTupleDesc::from_pg_unchecked((*rel).rd_att)
                .get(3)
                .map_or(pg_sys::InvalidOid, |attr| attr.atttypid);
            for check in checks {
                let expr = shape::canonical(pg_sys::stringToNode(check.ccbin).cast(), status);
                out.push((
                    core::ffi::CStr::from_ptr(check.ccname)
                        .to_string_lossy()
                        .into_owned(),
                    expr.unwrap_or_else(|| "?".into()),
                ));
            }
        }
        pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
    }
    out.push(("readable".into(), catalog.shape.readable.to_string()));
    out.push(("writable".into(), catalog.shape.writable.to_string()));
    out
}
