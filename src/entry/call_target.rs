//! The function `idem_call` is asked to call: that it is a plain `(jsonb) -> jsonb` function
//! and that the caller may call it as a call by name would allow.

use core::ffi::{CStr, c_int};

use pgrx::pg_sys::{self, Datum, Oid};

use crate::base::errors::{self, IdemError, Result};

unsafe extern "C-unwind" {
    // csrc/call_guard.c
    fn idem_call_denied(fn_oid: Oid, namespace: Oid) -> c_int;
}

fn undefined_function(message: String) -> IdemError {
    IdemError::new(errors::UNDEFINED_FUNCTION, message)
        .hint("idem_call needs a function taking (jsonb) and returning jsonb.")
}

/// `format_procedure` / `format_type_be` output, for messages.
fn name_of(formatted: *mut core::ffi::c_char) -> String {
    if formatted.is_null() {
        return String::from("?");
    }
    // SAFETY: a palloc'd C string from Postgres.
    unsafe { CStr::from_ptr(formatted) }
        .to_string_lossy()
        .into_owned()
}

/// `idem_call_denied`'s answers (csrc/call_guard.c).
const ALLOWED: c_int = 0;
const NO_EXECUTE: c_int = 1;
const NO_USAGE: c_int = 2;

/// Check that `fn_oid` is a plain function `(jsonb) -> jsonb` the caller may call by name:
/// EXECUTE on it and USAGE on its schema (a numeric regprocedure skips the name lookup that
/// checks the latter).
pub(crate) fn check_function(fn_oid: Oid) -> Result<()> {
    // SAFETY: a syscache lookup by OID; the tuple is released before returning.
    let (kind, retset, nargs, arg0, rettype, namespace) = unsafe {
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::PROCOID as _,
            Datum::from(fn_oid),
        );
        if tuple.is_null() {
            return Err(undefined_function(format!(
                "function with OID {} does not exist",
                fn_oid.to_u32()
            )));
        }
        let proc = &*(pg_sys::GETSTRUCT(tuple) as pg_sys::Form_pg_proc);
        let nargs = proc.pronargs as usize;
        let arg0 = if nargs >= 1 {
            *proc.proargtypes.values.as_ptr()
        } else {
            pg_sys::InvalidOid
        };
        let found = (
            proc.prokind as u8,
            proc.proretset,
            nargs,
            arg0,
            proc.prorettype,
            proc.pronamespace,
        );
        pg_sys::ReleaseSysCache(tuple);
        found
    };
    // SAFETY: formats an existing function's name and signature.
    let name = || name_of(unsafe { pg_sys::format_procedure(fn_oid) });
    if kind != b'f' {
        return Err(undefined_function(format!(
            "{} is not a plain function",
            name()
        )));
    }
    if nargs != 1 || arg0 != pg_sys::JSONBOID || rettype != pg_sys::JSONBOID || retset {
        // SAFETY: formats an existing type's name.
        let returns = name_of(unsafe { pg_sys::format_type_be(rettype) });
        let setof = if retset { "setof " } else { "" };
        return Err(undefined_function(format!(
            "function {} returning {setof}{returns} cannot be called by idem_call",
            name()
        )));
    }
    #[allow(
        ffi_unwind_calls,
        reason = "inside pg_guard_ffi_boundary: a Postgres error becomes a Rust panic"
    )]
    // SAFETY: ACL checks of an existing function and schema; wrapped so an error raised by a
    // security hook reaches the client as a Postgres error.
    let denied =
        unsafe { pg_sys::ffi::pg_guard_ffi_boundary(|| idem_call_denied(fn_oid, namespace)) };
    match denied {
        ALLOWED => Ok(()),
        NO_EXECUTE => Err(IdemError::new(
            errors::INSUFFICIENT_PRIVILEGE,
            format!("permission denied for function {}", name()),
        )),
        NO_USAGE => {
            // SAFETY: names an existing schema.
            let schema = name_of(unsafe { pg_sys::get_namespace_name(namespace) });
            Err(IdemError::new(
                errors::INSUFFICIENT_PRIVILEGE,
                format!("permission denied for schema {schema}"),
            )
            .detail(format!("idem_call was asked to call {}.", name()))
            .hint("Calling a function needs USAGE on its schema, even when given by OID."))
        }
        other => Err(IdemError::new(
            errors::INTERNAL_ERROR,
            format!("unexpected privilege check result {other}"),
        )),
    }
}
