//! Arguments of the hand-written (`LANGUAGE c`) functions, read straight from `fcinfo`.
//!
//! The hot functions take their arguments as raw datums: text as bytes (no UTF-8 copy),
//! jsonb and interval without conversion to Rust values.

use pgrx::datum::Interval;
use pgrx::fcinfo::{pg_get_nullable_datum, pg_getarg};
use pgrx::pg_sys;

/// The calling convention record Postgres looks up as `pg_finfo_<name>`.
pub static V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };

/// Declare `pg_finfo_<name>` for a V1 C function.
macro_rules! function_info_v1 {
    ($finfo:ident) => {
        #[unsafe(no_mangle)]
        #[doc(hidden)]
        pub extern "C" fn $finfo() -> &'static ::pgrx::pg_sys::Pg_finfo_record {
            &$crate::steps::args::V1
        }
    };
}
pub(crate) use function_info_v1;

/// What a C function's body returns, as the function's result datum.
pub trait IntoReturn {
    fn into_return(self) -> pg_sys::Datum;
}

impl IntoReturn for pg_sys::Datum {
    fn into_return(self) -> pg_sys::Datum {
        self
    }
}

impl IntoReturn for () {
    fn into_return(self) -> pg_sys::Datum {
        pg_sys::Datum::from(0)
    }
}

impl IntoReturn for i64 {
    fn into_return(self) -> pg_sys::Datum {
        pg_sys::Datum::from(self)
    }
}

impl IntoReturn for bool {
    fn into_return(self) -> pg_sys::Datum {
        pg_sys::Datum::from(self)
    }
}

/// Declare the V1 C function `$name` (and its `$finfo` record) whose body is
/// `$body(fcinfo) -> Result<impl IntoReturn>`. An error is raised here, in the outermost
/// frame, after the body has returned and every Rust value it made is dropped
/// (`errors::raise` longjmps).
macro_rules! c_function {
    ($name:ident, $finfo:ident, $body:path) => {
        $crate::steps::args::function_info_v1!($finfo);
        #[::pgrx::pg_guard]
        #[unsafe(no_mangle)]
        pub extern "C-unwind" fn $name(
            fcinfo: ::pgrx::pg_sys::FunctionCallInfo,
        ) -> ::pgrx::pg_sys::Datum {
            let result = $body(fcinfo);
            $crate::steps::args::IntoReturn::into_return($crate::base::errors::OrRaise::or_raise(
                result,
            ))
        }
    };
}
pub(crate) use c_function;

/// Argument `n` of a text-like type, as bytes (detoasted, not copied when short).
///
/// # Safety
/// `fcinfo` must be a valid call whose argument `n` is text (or varchar, bytea).
pub unsafe fn bytes<'a>(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Option<&'a [u8]> {
    // SAFETY: the caller's promise: argument `n` exists and is text-like.
    unsafe { pg_getarg::<&'a [u8]>(fcinfo, n) }
}

/// Argument `n` as a raw datum, `None` for NULL.
///
/// # Safety
/// `fcinfo` must be a valid call with at least `n + 1` arguments.
pub unsafe fn datum(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Option<pg_sys::Datum> {
    // SAFETY: the caller's promise: argument `n` exists.
    let arg = unsafe { pg_get_nullable_datum(fcinfo, n) };
    (!arg.isnull).then_some(arg.value)
}

/// # Safety
/// `fcinfo` must be a valid call whose argument `n` is int4.
pub unsafe fn int4(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Option<i32> {
    // SAFETY: the caller's promise: argument `n` exists and is int4.
    unsafe { pg_getarg::<i32>(fcinfo, n) }
}

/// # Safety
/// `fcinfo` must be a valid call whose argument `n` is bool.
pub unsafe fn boolean(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Option<bool> {
    // SAFETY: the caller's promise: argument `n` exists and is bool.
    unsafe { pg_getarg::<bool>(fcinfo, n) }
}

/// # Safety
/// `fcinfo` must be a valid call whose argument `n` is interval.
pub unsafe fn interval(
    fcinfo: pg_sys::FunctionCallInfo,
    n: usize,
) -> Option<(pg_sys::Datum, Interval)> {
    // SAFETY: the caller's promise: argument `n` exists and is interval.
    let raw = unsafe { datum(fcinfo, n) }?;
    // SAFETY: as above.
    let value = unsafe { pg_getarg::<Interval>(fcinfo, n) }?;
    Some((raw, value))
}

/// A C function's SQL signature, declared next to its body: the body reads its arguments by
/// these positions, and the #[pg_test] `c_function_signatures_match_pg_proc` checks the types
/// against `pg_proc`, so a changed declaration in `sql/` cannot silently shift an argument.
pub struct Signature {
    // Read by the test only; the positions are what the body relies on.
    #[cfg_attr(not(feature = "pg_test"), allow(dead_code))]
    pub name: &'static str,
    /// Argument types by position, as SQL spells them (`regtype` input).
    pub args: &'static [&'static str],
}

impl Signature {
    /// Is argument `position` of type `ty`? For compile-time checks of named positions.
    pub const fn is(&self, position: usize, ty: &str) -> bool {
        if position >= self.args.len() {
            return false;
        }
        let (a, b) = (self.args[position].as_bytes(), ty.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
    }
}
