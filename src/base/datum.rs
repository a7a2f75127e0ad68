//! Arguments taken as the bytes of their datum, and server-encoding -> UTF-8.
//!
//! `json`, `jsonb` and `text` arguments are read as the bytes of the detoasted datum: no copy
//! unless the value was toasted or compressed, no text round trip, no UTF-8 assumption.

use std::borrow::Cow;
use std::marker::PhantomData;

use idem_canonical::ErrorKind;
use pgrx::pg_sys;
use pgrx::{FromDatum, vardata_any, varsize_any_exhdr};

use crate::base::errors::{self, IdemError, canonical_error};

/// A `json`, `jsonb` or `text` argument as the bytes of its detoasted datum (no copy unless
/// the value was toasted or compressed; no text round trip; no UTF-8 assumption). Lives as
/// long as the function call. `KIND` only selects the SQL type.
pub struct VarlenaBytes<'fcx, const KIND: u8> {
    ptr: *const u8,
    len: usize,
    _fcx: PhantomData<&'fcx [u8]>,
}

/// A `jsonb` argument read as its binary container.
pub type JsonbBytes<'fcx> = VarlenaBytes<'fcx, 0>;
/// A `json` argument read as its stored text.
pub type JsonBytes<'fcx> = VarlenaBytes<'fcx, 1>;
/// A `text` argument in the server encoding.
pub type TextBytes<'fcx> = VarlenaBytes<'fcx, 2>;

impl<const KIND: u8> VarlenaBytes<'_, KIND> {
    pub fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: ptr/len describe the detoasted datum, alive for the function call ('fcx).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// # Safety
    /// `datum` must be a non-null varlena datum that outlives `'fcx`.
    pub unsafe fn from_varlena_datum(datum: pg_sys::Datum) -> Self {
        // SAFETY: per the caller's contract; detoasting copies into the current memory context.
        unsafe {
            let varlena = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
            Self {
                ptr: vardata_any(varlena).cast(),
                len: varsize_any_exhdr(varlena),
                _fcx: PhantomData,
            }
        }
    }
}

impl<const KIND: u8> FromDatum for VarlenaBytes<'_, KIND> {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _typoid: pg_sys::Oid,
    ) -> Option<Self> {
        if is_null || datum.is_null() {
            None
        } else {
            // SAFETY: a non-null datum of our argument's type, alive for the call.
            Some(unsafe { Self::from_varlena_datum(datum) })
        }
    }
}

// SAFETY: the value is read from the argument's own datum (through FromDatum above), and it
// borrows nothing that outlives the call: `'fcx` ties it to the function call's arguments, which
// Postgres keeps alive until the call returns.
unsafe impl<'fcx, const KIND: u8> pgrx::callconv::ArgAbi<'fcx> for VarlenaBytes<'fcx, KIND> {
    unsafe fn unbox_arg_unchecked(arg: pgrx::callconv::Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        // SAFETY: pgrx hands us the argument's datum; our functions are STRICT.
        unsafe {
            arg.unbox_arg_using_from_datum()
                .unwrap_or_else(|| panic!("argument {index} must not be null"))
        }
    }
}

pgrx::impl_sql_translatable!(JsonbBytes<'_>, arg_only = "jsonb");
pgrx::impl_sql_translatable!(JsonBytes<'_>, arg_only = "json");
pgrx::impl_sql_translatable!(TextBytes<'_>, arg_only = "text");

/// How strings in this database become UTF-8.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ServerEncoding {
    /// UTF8: used as they are. Postgres verifies the encoding of all text it stores
    /// (input functions, COPY, binary receive), so it is not checked again here.
    Utf8,
    /// SQL_ASCII: bytes taken as UTF-8 after a check (SQL_ASCII stores unchecked bytes).
    SqlAscii,
    /// Anything else: non-ASCII text is converted with `pg_server_to_any`.
    Other,
}

impl ServerEncoding {
    pub fn current() -> Self {
        // SAFETY: reads a backend global.
        let enc = unsafe { pg_sys::GetDatabaseEncoding() };
        if enc == pg_sys::pg_enc::PG_UTF8 as i32 {
            ServerEncoding::Utf8
        } else if enc == pg_sys::pg_enc::PG_SQL_ASCII as i32 {
            ServerEncoding::SqlAscii
        } else {
            ServerEncoding::Other
        }
    }

    /// `bytes` (in the server encoding) as UTF-8 bytes.
    #[inline]
    pub fn to_utf8<'a>(self, bytes: &'a [u8]) -> errors::Result<Cow<'a, [u8]>> {
        if self == ServerEncoding::Utf8 {
            return Ok(Cow::Borrowed(bytes));
        }
        self.convert(bytes)
    }

    #[inline(never)]
    fn convert<'a>(self, bytes: &'a [u8]) -> errors::Result<Cow<'a, [u8]>> {
        match self {
            ServerEncoding::Utf8 => Ok(Cow::Borrowed(bytes)),
            _ if bytes.is_ascii() => Ok(Cow::Borrowed(bytes)),
            ServerEncoding::SqlAscii => idem_canonical::str_from_utf8(bytes)
                .map(|_| Cow::Borrowed(bytes))
                .map_err(canonical_error),
            ServerEncoding::Other => {
                let len = i32::try_from(bytes.len()).map_err(|_| {
                    IdemError::new(errors::PROGRAM_LIMIT_EXCEEDED, "string too long")
                })?;
                // SAFETY: converts `len` bytes; returns the input pointer or a palloc'd,
                // NUL-terminated UTF-8 copy.
                let converted = unsafe {
                    pg_sys::pg_server_to_any(
                        bytes.as_ptr().cast(),
                        len,
                        pg_sys::pg_enc::PG_UTF8 as i32,
                    )
                };
                if converted.cast_const().cast::<u8>() == bytes.as_ptr() {
                    return Ok(Cow::Borrowed(bytes));
                }
                // SAFETY: a NUL-terminated string palloc'd by the conversion.
                let owned = unsafe { std::ffi::CStr::from_ptr(converted) }
                    .to_bytes()
                    .to_vec();
                // SAFETY: palloc'd above and no longer referenced.
                unsafe { pg_sys::pfree(converted.cast()) };
                Ok(Cow::Owned(owned))
            }
        }
    }

    /// A whole text (a `json` value) as `&str`: checked once, or converted.
    pub fn to_utf8_str<'a>(self, bytes: &'a [u8]) -> errors::Result<Cow<'a, str>> {
        match self.to_utf8(bytes)? {
            Cow::Borrowed(b) => idem_canonical::str_from_utf8(b).map(Cow::Borrowed),
            Cow::Owned(v) => String::from_utf8(v).map(Cow::Owned).map_err(|e| {
                idem_canonical::str_from_utf8(e.as_bytes())
                    .err()
                    .unwrap_or_else(|| {
                        idem_canonical::Error::new(ErrorKind::Untranslatable, "not UTF-8")
                    })
            }),
        }
        .map_err(canonical_error)
    }
}

/// `bytes` as a new palloc'd text datum.
pub fn text_datum(bytes: &[u8]) -> pg_sys::Datum {
    // SAFETY: copies `bytes` into a new palloc'd text.
    unsafe {
        pg_sys::Datum::from(pg_sys::cstring_to_text_with_len(
            bytes.as_ptr().cast(),
            bytes.len() as _,
        ))
    }
}

/// Bytes of a text datum (detoasted if needed).
///
/// # Safety
/// `datum` is a text (or bytea) datum that stays valid for `'a`.
pub unsafe fn datum_bytes<'a>(datum: pg_sys::Datum) -> &'a [u8] {
    // SAFETY: the caller's promise.
    unsafe { <&[u8]>::from_datum(datum, false).unwrap_or_default() }
}
