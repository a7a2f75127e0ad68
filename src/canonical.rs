//! `idem_canonical` and `idem_hash`: RFC 8785 canonical JSON of `json`/`jsonb` values and its
//! SHA-256.
//!
//! The canonicalizer itself is the pure crate `idem-canonical`. This module feeds it:
//! * `json`: the stored text, parsed by the crate (duplicate names are seen and refused).
//! * `jsonb`: the binary container is read directly (no jsonb -> text -> parse round trip):
//!   object members are re-sorted by UTF-16 code units (jsonb keeps them by length, then
//!   bytes), strings are borrowed from the detoasted datum, numerics are decoded from their
//!   base-10000 digits to the nearest double. The walk is iterative (explicit stack), so any
//!   nesting depth Postgres could build is accepted.
//!
//! Rust callers (the claim path) use [`hash_jsonb_datum`] / [`jsonb_hash_hex`].

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::marker::PhantomData;

use idem_canonical::{
    Document, Emitter, ErrorKind, HashSink, Sink, cmp_utf16, number_from_decimal_text,
    number_from_parts_fast, to_hex,
};
use pgrx::datum::Array;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{FromDatum, vardata_any, varsize_any_exhdr};

use crate::errors::{self, IdemError, OrRaise, SqlState};

/// `XX001` data_corrupted: a jsonb datum whose structure does not add up.
const DATA_CORRUPTED: SqlState = SqlState(*b"XX001");
/// `54000` program_limit_exceeded.
const PROGRAM_LIMIT_EXCEEDED: SqlState = SqlState(*b"54000");

/// The error the extension raises for a canonicalizer error.
pub fn canonical_error(err: idem_canonical::Error) -> IdemError {
    let code = match err.kind() {
        ErrorKind::DuplicateKey => errors::DUPLICATE_JSON_KEY,
        ErrorKind::NumberOutOfRange => errors::NUMERIC_VALUE_OUT_OF_RANGE,
        ErrorKind::Syntax => errors::INVALID_TEXT_REPRESENTATION,
        ErrorKind::Untranslatable => errors::UNTRANSLATABLE_CHARACTER,
        ErrorKind::TooLarge => PROGRAM_LIMIT_EXCEEDED,
    };
    let hint = match err.kind() {
        ErrorKind::DuplicateKey => Some(
            "RFC 8785 canonical JSON requires unique member names; cast to jsonb to keep the last one.",
        ),
        ErrorKind::NumberOutOfRange => {
            Some("RFC 8785 numbers are IEEE 754 doubles; send such values as strings.")
        }
        _ => None,
    };
    let e = IdemError::new(code, err.message().to_owned());
    match hint {
        Some(h) => e.hint(h),
        None => e,
    }
}

fn corrupt(what: &str) -> IdemError {
    IdemError::new(DATA_CORRUPTED, format!("corrupted jsonb value: {what}"))
}

// ---------------------------------------------------------------------------------------------
// Arguments taken as raw bytes.

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

// ---------------------------------------------------------------------------------------------
// Server encoding -> UTF-8.

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
                let len = i32::try_from(bytes.len())
                    .map_err(|_| IdemError::new(PROGRAM_LIMIT_EXCEEDED, "string too long"))?;
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

// ---------------------------------------------------------------------------------------------
// The jsonb binary format (src/include/utils/jsonb.h; stable on disk since 9.4).

const JB_CMASK: u32 = 0x0FFF_FFFF;
const JB_FSCALAR: u32 = 0x1000_0000;
const JB_FOBJECT: u32 = 0x2000_0000;
const JB_FARRAY: u32 = 0x4000_0000;
const JENTRY_OFFLENMASK: u32 = 0x0FFF_FFFF;
const JENTRY_TYPEMASK: u32 = 0x7000_0000;
const JENTRY_HAS_OFF: u32 = 0x8000_0000;
const JENTRY_ISSTRING: u32 = 0x0000_0000;
const JENTRY_ISNUMERIC: u32 = 0x1000_0000;
const JENTRY_ISBOOL_FALSE: u32 = 0x2000_0000;
const JENTRY_ISBOOL_TRUE: u32 = 0x3000_0000;
const JENTRY_ISNULL: u32 = 0x4000_0000;
const JENTRY_ISCONTAINER: u32 = 0x5000_0000;

fn u32_at(b: &[u8], at: usize) -> errors::Result<u32> {
    let end = at
        .checked_add(4)
        .ok_or_else(|| corrupt("offset overflow"))?;
    let s = b
        .get(at..end)
        .ok_or_else(|| corrupt("header beyond the end"))?;
    let mut a = [0u8; 4];
    a.copy_from_slice(s);
    Ok(u32::from_ne_bytes(a))
}

fn intalign(off: usize) -> usize {
    (off + 3) & !3
}

/// A child of a container: its JEntry and its data's byte range (relative to `base`).
#[derive(Clone, Copy)]
struct Child {
    jentry: u32,
    base: usize,
    start: usize,
    end: usize,
}

/// A container's header, children JEntry array and data base, all absolute offsets.
struct Container {
    header: u32,
    count: usize,
    entries: usize,
    base: usize,
}

fn container_at(b: &[u8], at: usize) -> errors::Result<Container> {
    let header = u32_at(b, at)?;
    let count = (header & JB_CMASK) as usize;
    let nentries = if header & JB_FOBJECT != 0 {
        count * 2
    } else {
        count
    };
    let entries = at + 4;
    let base = nentries
        .checked_mul(4)
        .and_then(|n| n.checked_add(entries))
        .filter(|&base| base <= b.len())
        .ok_or_else(|| corrupt("children beyond the end"))?;
    if header & (JB_FOBJECT | JB_FARRAY) == 0 || header & JB_FOBJECT != 0 && header & JB_FARRAY != 0
    {
        return Err(corrupt("container is neither array nor object"));
    }
    Ok(Container {
        header,
        count,
        entries,
        base,
    })
}

/// The next child given the running data offset `off` (JBE_ADVANCE_OFFSET).
fn next_child(b: &[u8], c: &Container, index: usize, off: &mut usize) -> errors::Result<Child> {
    let jentry = u32_at(b, c.entries + 4 * index)?;
    let field = (jentry & JENTRY_OFFLENMASK) as usize;
    let start = *off;
    let end = if jentry & JENTRY_HAS_OFF != 0 {
        field
    } else {
        start + field
    };
    if end < start || c.base + end > b.len() {
        return Err(corrupt("child data beyond the end"));
    }
    *off = end;
    Ok(Child {
        jentry,
        base: c.base,
        start,
        end,
    })
}

/// Decodes a `numeric` (varlena; base-10000 digits) to the nearest double.
fn numeric_to_f64(num: &[u8], scratch: &mut String) -> errors::Result<f64> {
    let first = *num.first().ok_or_else(|| corrupt("empty numeric"))?;
    #[cfg(target_endian = "little")]
    let (hdr, total) = if first & 0x01 != 0 {
        (1usize, usize::from(first >> 1))
    } else {
        (4usize, (u32_at(num, 0)? >> 2) as usize)
    };
    #[cfg(target_endian = "big")]
    let (hdr, total) = if first & 0x80 != 0 {
        (1usize, usize::from(first & 0x7F))
    } else {
        (4usize, (u32_at(num, 0)? & 0x3FFF_FFFF) as usize)
    };
    let body = num
        .get(hdr..total)
        .filter(|body| body.len() >= 2)
        .ok_or_else(|| corrupt("numeric length"))?;
    let n_header = u16::from_ne_bytes([body[0], body[1]]);
    let (negative, weight, digits) = match n_header & 0xC000 {
        0xC000 => {
            return Err(IdemError::new(
                errors::NUMERIC_VALUE_OUT_OF_RANGE,
                "NaN and infinite numerics have no JSON form",
            ));
        }
        0x8000 => {
            let magnitude = i32::from(n_header & 0x003F);
            let weight = if n_header & 0x0040 != 0 {
                magnitude | !0x3F
            } else {
                magnitude
            };
            (n_header & 0x2000 != 0, weight, &body[2..])
        }
        sign => {
            let w = body.get(2..4).ok_or_else(|| corrupt("numeric weight"))?;
            (
                sign == 0x4000,
                i32::from(i16::from_ne_bytes([w[0], w[1]])),
                &body[4..],
            )
        }
    };
    let ndigits = digits.len() / 2;
    let digit = |i: usize| u64::from(u16::from_ne_bytes([digits[2 * i], digits[2 * i + 1]]));
    if ndigits == 0 {
        return Ok(0.0);
    }
    // value = sum digit[i] * 10000^(weight - i) = mantissa * 10^(4 * (weight - ndigits + 1))
    let exp10 = 4 * (weight - (ndigits as i32 - 1));
    if ndigits <= 4 {
        let mantissa = (0..ndigits).fold(0u64, |m, i| m * 10_000 + digit(i));
        if let Some(v) = number_from_parts_fast(negative, mantissa, exp10) {
            return Ok(v);
        }
    }
    scratch.clear();
    if negative {
        scratch.push('-');
    }
    for i in 0..ndigits {
        let d = digit(i);
        if d > 9999 {
            return Err(corrupt("numeric digit out of range"));
        }
        if i == 0 {
            // No leading zeros: the text also serves error messages.
            scratch.push_str(&d.to_string());
            continue;
        }
        let bytes = [
            b'0' + (d / 1000) as u8,
            b'0' + (d / 100 % 10) as u8,
            b'0' + (d / 10 % 10) as u8,
            b'0' + (d % 10) as u8,
        ];
        for b in bytes {
            scratch.push(char::from(b));
        }
    }
    scratch.push('e');
    scratch.push_str(&exp10.to_string());
    number_from_decimal_text(scratch).map_err(canonical_error)
}

/// Top-level members to keep (`idem_hash(jsonb, text[])`).
pub type FieldSet<'a> = BTreeSet<&'a [u8]>;

/// Writes the canonical form of a jsonb value (`root`: the bytes after the varlena header).
/// With `fields`, the top level must be an object and only those members are written.
pub fn write_jsonb<S: Sink>(
    root: &[u8],
    fields: Option<&FieldSet<'_>>,
    encoding: ServerEncoding,
    sink: S,
) -> errors::Result<S> {
    struct Member<'a> {
        name: Cow<'a, [u8]>,
        value: Child,
    }
    enum Frame {
        Array {
            c: Container,
            index: usize,
            off: usize,
        },
        Object {
            from: usize,
            at: usize,
            to: usize,
        },
    }

    let mut out = Emitter::new(sink);
    let mut stack: Vec<Frame> = Vec::new();
    let mut members: Vec<Member<'_>> = Vec::new();
    let mut scratch = String::new();

    let top = container_at(root, 0)?;
    if fields.is_some() && top.header & JB_FOBJECT == 0 {
        return Err(IdemError::new(
            errors::INVALID_PARAMETER_VALUE,
            "idem_hash(payload, fields) needs a JSON object as payload",
        )
        .detail(format!(
            "The payload is {}.",
            if top.header & JB_FSCALAR != 0 {
                "a scalar"
            } else {
                "an array"
            }
        )));
    }
    let mut pending = if top.header & JB_FSCALAR != 0 {
        // A top-level scalar is stored as a one-element "raw scalar" array.
        if top.count != 1 || top.header & JB_FARRAY == 0 {
            return Err(corrupt("raw scalar"));
        }
        Some(next_child(root, &top, 0, &mut 0)?)
    } else {
        // The root container, as if it were a child at offset 0.
        Some(Child {
            jentry: JENTRY_ISCONTAINER,
            base: 0,
            start: 0,
            end: root.len(),
        })
    };
    let mut depth0 = true;

    loop {
        if let Some(child) = pending.take() {
            let data = root
                .get(child.base + child.start..child.base + child.end)
                .ok_or_else(|| corrupt("child data beyond the end"))?;
            match child.jentry & JENTRY_TYPEMASK {
                JENTRY_ISSTRING => out.string_utf8(&encoding.to_utf8(data)?),
                JENTRY_ISNUMERIC => {
                    let at = intalign(child.start) - child.start;
                    let num = data.get(at..).ok_or_else(|| corrupt("numeric offset"))?;
                    let value = numeric_to_f64(num, &mut scratch)?;
                    out.number(value).map_err(canonical_error)?;
                }
                JENTRY_ISBOOL_FALSE => out.bool(false),
                JENTRY_ISBOOL_TRUE => out.bool(true),
                JENTRY_ISNULL => out.null(),
                JENTRY_ISCONTAINER => {
                    let at = child.base + intalign(child.start);
                    let c = container_at(root, at)?;
                    if c.header & JB_FOBJECT != 0 {
                        out.begin_object();
                        let from = members.len();
                        let mut off = 0;
                        for i in 0..c.count {
                            let key = next_child(root, &c, i, &mut off)?;
                            if key.jentry & JENTRY_TYPEMASK != JENTRY_ISSTRING {
                                return Err(corrupt("object key is not a string"));
                            }
                            let name = root
                                .get(key.base + key.start..key.base + key.end)
                                .ok_or_else(|| corrupt("key beyond the end"))?;
                            members.push(Member {
                                name: encoding.to_utf8(name)?,
                                value: key,
                            });
                        }
                        for i in 0..c.count {
                            members[from + i].value = next_child(root, &c, c.count + i, &mut off)?;
                        }
                        if depth0 && let Some(keep) = fields {
                            let mut w = from;
                            for r in from..members.len() {
                                if keep.contains(members[r].name.as_ref()) {
                                    members.swap(w, r);
                                    w += 1;
                                }
                            }
                            members.truncate(w);
                        }
                        members[from..].sort_unstable_by(|a, b| cmp_utf16(&a.name, &b.name));
                        let to = members.len();
                        stack.push(Frame::Object { from, at: from, to });
                    } else {
                        out.begin_array();
                        stack.push(Frame::Array {
                            c,
                            index: 0,
                            off: 0,
                        });
                    }
                }
                _ => return Err(corrupt("unknown JEntry type")),
            }
            depth0 = false;
        }
        let Some(frame) = stack.last_mut() else { break };
        match frame {
            Frame::Array { c, index, off } => {
                if *index < c.count {
                    pending = Some(next_child(root, c, *index, off)?);
                    *index += 1;
                } else {
                    out.end_array();
                    stack.pop();
                }
            }
            Frame::Object { from, at, to } => {
                if *at < *to {
                    let m = &members[*at];
                    out.key_utf8(&m.name);
                    pending = Some(m.value);
                    *at += 1;
                } else {
                    out.end_object();
                    members.truncate(*from);
                    stack.pop();
                }
            }
        }
    }
    Ok(out.into_sink())
}

// ---------------------------------------------------------------------------------------------
// Rust API for other modules.

/// SHA-256 of the canonical form of a `jsonb` datum.
///
/// # Safety
/// `datum` must be a non-null `jsonb` datum valid for the current memory context.
pub unsafe fn hash_jsonb_datum(datum: pg_sys::Datum) -> errors::Result<[u8; 32]> {
    // SAFETY: per the caller's contract.
    let bytes = unsafe { JsonbBytes::from_varlena_datum(datum) };
    jsonb_hash(bytes.bytes(), None)
}

/// SHA-256 of the canonical form of a jsonb value given as its container bytes.
pub fn jsonb_hash(root: &[u8], fields: Option<&FieldSet<'_>>) -> errors::Result<[u8; 32]> {
    Ok(write_jsonb(root, fields, ServerEncoding::current(), HashSink::new())?.finish())
}

/// [`jsonb_hash`] as lowercase hex (the `idem_hash` result).
pub fn jsonb_hash_hex(root: &[u8], fields: Option<&FieldSet<'_>>) -> errors::Result<String> {
    jsonb_hash(root, fields).map(|d| to_hex(&d))
}

/// SHA-256 of the canonical form of a `json` value's text (in the server encoding).
pub fn json_text_hash(text: &[u8]) -> errors::Result<[u8; 32]> {
    let text = ServerEncoding::current().to_utf8_str(text)?;
    let doc = Document::parse(&text).map_err(canonical_error)?;
    let sink = doc
        .write_canonical(HashSink::new())
        .map_err(canonical_error)?;
    Ok(sink.finish())
}

fn json_text_canonical(text: &[u8]) -> errors::Result<String> {
    let text = ServerEncoding::current().to_utf8_str(text)?;
    let doc = Document::parse(&text).map_err(canonical_error)?;
    let out = doc
        .write_canonical(Vec::with_capacity(text.len()))
        .map_err(canonical_error)?;
    utf8_string(out)
}

fn jsonb_canonical(root: &[u8]) -> errors::Result<String> {
    let out = write_jsonb(
        root,
        None,
        ServerEncoding::current(),
        Vec::with_capacity(root.len()),
    )?;
    utf8_string(out)
}

/// The canonical text as a `String`: one UTF-8 check over the whole output.
fn utf8_string(bytes: Vec<u8>) -> errors::Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        IdemError::new(
            errors::UNTRANSLATABLE_CHARACTER,
            format!(
                "invalid UTF-8 in JSON value (byte {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// `idem_hash(payload, fields)`: NULL elements are an error (22004), duplicates are harmless.
fn jsonb_fields_hash_hex(root: &[u8], fields: &Array<'_, &str>) -> errors::Result<String> {
    let mut set = FieldSet::new();
    for field in fields.iter() {
        let Some(name) = field else {
            return Err(IdemError::new(
                errors::NULL_VALUE_NOT_ALLOWED,
                "idem_hash(payload, fields): fields must not contain NULL",
            ));
        };
        set.insert(name.as_bytes());
    }
    jsonb_hash_hex(root, Some(&set))
}

// ---------------------------------------------------------------------------------------------
// SQL functions.

/// RFC 8785 canonical text of a `jsonb` value.
#[pg_extern(immutable, strict, parallel_safe, name = "idem_canonical")]
fn idem_canonical_jsonb(payload: JsonbBytes<'_>) -> String {
    jsonb_canonical(payload.bytes()).or_raise()
}

/// RFC 8785 canonical text of a `json` value (duplicate member names are an error, 22030).
#[pg_extern(immutable, strict, parallel_safe, name = "idem_canonical")]
fn idem_canonical_json(payload: JsonBytes<'_>) -> String {
    json_text_canonical(payload.bytes()).or_raise()
}

/// Lowercase hex SHA-256 of the canonical text of a `jsonb` value.
#[pg_extern(immutable, strict, parallel_safe, name = "idem_hash")]
fn idem_hash_jsonb(payload: JsonbBytes<'_>) -> String {
    jsonb_hash_hex(payload.bytes(), None).or_raise()
}

/// Lowercase hex SHA-256 of the canonical text of a `json` value.
#[pg_extern(immutable, strict, parallel_safe, name = "idem_hash")]
fn idem_hash_json(payload: JsonBytes<'_>) -> String {
    json_text_hash(payload.bytes())
        .map(|d| to_hex(&d))
        .or_raise()
}

/// The hash of the object made of only the listed top-level members of `payload`.
#[pg_extern(immutable, strict, parallel_safe, name = "idem_hash")]
fn idem_hash_jsonb_fields(payload: JsonbBytes<'_>, fields: Array<'_, &str>) -> String {
    jsonb_fields_hash_hex(payload.bytes(), &fields).or_raise()
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    macro_rules! vector {
        ($name:literal) => {
            (
                $name,
                include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../shared/jcs-vectors/input/",
                    $name,
                    ".json"
                )),
                include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../shared/jcs-vectors/output/",
                    $name,
                    ".json"
                )),
            )
        };
    }

    /// Every RFC 8785 reference vector (../shared/jcs-vectors, see its SOURCE.md).
    const VECTORS: [(&str, &str, &str); 6] = [
        vector!("arrays"),
        vector!("french"),
        vector!("structures"),
        vector!("unicode"),
        vector!("values"),
        vector!("weird"),
    ];

    const ES6_NUMBERS: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/idem-canonical/tests/data/es6-numbers.txt"
    ));

    fn text(sql: &str) -> String {
        Spi::get_one::<String>(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .unwrap_or_else(|| panic!("{sql}: NULL"))
    }

    fn quote(s: &str) -> String {
        assert!(!s.contains("$q$"));
        format!("$q${s}$q$")
    }

    /// `SQLSTATE: message` of the error `sql` raises (or `ok`), caught in PL/pgSQL.
    fn outcome(sql: &str) -> String {
        Spi::run(
            "CREATE OR REPLACE FUNCTION pg_temp.outcome(q text) RETURNS text LANGUAGE plpgsql AS $f$
             BEGIN EXECUTE q; RETURN 'ok';
             EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE || ': ' || SQLERRM; END $f$",
        )
        .unwrap();
        text(&format!("SELECT pg_temp.outcome({})", quote(sql)))
    }

    fn assert_sqlstate(sql: &str, code: &str) {
        let got = outcome(sql);
        assert!(
            got.starts_with(&format!("{code}: ")),
            "{sql}: expected {code}, got {got}"
        );
    }

    #[pg_test]
    fn reference_vectors_through_json_and_jsonb() {
        for (name, input, output) in VECTORS {
            for ty in ["json", "jsonb"] {
                let got = text(&format!("SELECT idem_canonical({}::{ty})", quote(input)));
                assert_eq!(got.as_bytes(), output.as_bytes(), "{name} via {ty}");
                let hash = text(&format!("SELECT idem_hash({}::{ty})", quote(input)));
                let expected = text(&format!(
                    "SELECT encode(sha256(convert_to({}, 'UTF8')), 'hex')",
                    quote(output)
                ));
                assert_eq!(hash, expected, "{name} hash via {ty}");
            }
        }
    }

    #[pg_test]
    fn numbers_match_javascript_through_json_and_jsonb() {
        let texts: Vec<&str> = ES6_NUMBERS
            .lines()
            .filter_map(|l| l.split_once(','))
            .map(|(_, t)| t)
            .collect();
        assert!(texts.len() > 10_000);
        let array = format!("[{}]", texts.join(","));
        for ty in ["json", "jsonb"] {
            let got = text(&format!("SELECT idem_canonical({}::{ty})", quote(&array)));
            assert!(got == array, "numbers via {ty} differ");
        }
        // Non-canonical spellings, long mantissas, halfway cases, 2^53 neighbours.
        let cases = [
            ("1.0", "1"),
            ("-0", "0"),
            ("-0.000", "0"),
            ("1e21", "1e+21"),
            ("1E+21", "1e+21"),
            ("100000000000000000000", "100000000000000000000"),
            ("0.000001", "0.000001"),
            ("1e-7", "1e-7"),
            ("12345678901234567890", "12345678901234567000"),
            ("9007199254740993", "9007199254740992"),
            ("9007199254740995", "9007199254740996"),
            (
                "-9007199254740993.0000000000000000000001",
                "-9007199254740994",
            ),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("4.9406564584124654e-324", "5e-324"),
            ("2.4703282292062327e-324", "0"),
            ("2.2250738585072011e-308", "2.225073858507201e-308"),
            (
                "0.30000000000000001665334536937734810635447502136230468750",
                "0.30000000000000004",
            ),
            ("333333333.33333329", "333333333.3333333"),
            ("19.99", "19.99"),
            ("-123456.789e3", "-123456789"),
            ("1e-400", "0"),
            ("0.1e1", "1"),
            ("10000", "10000"),
            ("100000000", "100000000"),
            ("0.0001", "0.0001"),
            ("123456789012345678901234567890e-30", "0.12345678901234568"),
        ];
        for (input, expected) in cases {
            for ty in ["json", "jsonb"] {
                let got = text(&format!("SELECT idem_canonical('{input}'::{ty})"));
                assert_eq!(got, expected, "{input} via {ty}");
                let got = text(&format!("SELECT idem_canonical('[{input}]'::{ty})"));
                assert_eq!(got, format!("[{expected}]"), "[{input}] via {ty}");
            }
        }
    }

    #[pg_test]
    fn members_sort_by_utf16_code_units() {
        let input =
            r#"{"\ue000":1,"😂":2,"a":3,"\ud83d\ude01":4,"ab":5,"b":6,"ÿ":7,"\uffff":8,"":9}"#;
        let expected = "{\"\":9,\"a\":3,\"ab\":5,\"b\":6,\"ÿ\":7,\"😁\":4,\"😂\":2,\"\u{e000}\":1,\"\u{ffff}\":8}";
        for ty in ["json", "jsonb"] {
            assert_eq!(
                text(&format!("SELECT idem_canonical({}::{ty})", quote(input))),
                expected,
                "{ty}"
            );
        }
    }

    #[pg_test]
    fn strings_are_escaped_as_jcs_says() {
        let input = r#"["\u0000\u0001\u001f", "\b\t\n\f\r", "\"\\/", "\u007f\u2028\u2029", "é😂"]"#;
        let expected = "[\"\\u0000\\u0001\\u001f\",\"\\b\\t\\n\\f\\r\",\"\\\"\\\\/\",\"\u{7f}\u{2028}\u{2029}\",\"é😂\"]";
        assert_eq!(
            text(&format!("SELECT idem_canonical({}::json)", quote(input))),
            expected
        );
        // jsonb cannot hold \u0000; the rest must agree.
        let input = input.replace("\\u0000", "\\u0002");
        let expected = expected.replace("\\u0000", "\\u0002");
        assert_eq!(
            text(&format!("SELECT idem_canonical({}::jsonb)", quote(&input))),
            expected
        );
    }

    #[pg_test]
    fn any_value_at_the_top_level() {
        for (input, expected) in [
            ("1.50", "1.5"),
            (r#""x""#, r#""x""#),
            ("true", "true"),
            ("false", "false"),
            ("null", "null"),
            ("[]", "[]"),
            ("{}", "{}"),
            (" [ 1 , { } ] ", "[1,{}]"),
        ] {
            for ty in ["json", "jsonb"] {
                assert_eq!(
                    text(&format!("SELECT idem_canonical('{input}'::{ty})")),
                    expected
                );
            }
        }
    }

    /// The direct jsonb reader agrees with canonicalizing jsonb's own text output, on
    /// documents that exercise every container shape: more than 32 children (JEntries with
    /// stored offsets), nested containers, long strings, numerics of every header form.
    #[pg_test]
    fn jsonb_reader_agrees_with_jsonb_text() {
        let mismatches = Spi::get_one::<i64>(
            "WITH docs AS (
               SELECT jsonb_build_object(
                 'id', g,
                 'n', (g * 7919) % 1000 - 500,
                 'price', ((g * 31) % 100000) / 100.0,
                 'big', (g::numeric * 123456789012345678) ^ 3,
                 'tiny', 1 / (g::numeric * 1000000007),
                 'neg_weight', g * 0.00000001,
                 'str', repeat(chr(32 + g % 90) || 'é😂\"\\', g % 50),
                 'arr', (SELECT jsonb_agg(i * g) FROM generate_series(1, 40 + g % 30) i),
                 'obj', (SELECT jsonb_object_agg('k' || i || repeat('x', i % 7), i % 3 = 0)
                           FROM generate_series(1, 35 + g % 10) i),
                 'nested', jsonb_build_array(jsonb_build_object('a', jsonb_build_array(null, true, g)))
               ) AS d
               FROM generate_series(1, 300) g
             )
             SELECT count(*) FROM docs
             WHERE idem_canonical(d) IS DISTINCT FROM idem_canonical(d::text::json)
                OR idem_hash(d) IS DISTINCT FROM idem_hash(d::text::json)",
        );
        assert_eq!(mismatches, Ok(Some(0)));
    }

    #[pg_test]
    fn stored_values_short_headers_and_toast() {
        Spi::run(
            "CREATE TEMP TABLE t (id int, d jsonb);
             INSERT INTO t VALUES
               (1, '{\"b\":1,\"a\":[1.0,\"x\"]}'),
               (2, (SELECT jsonb_object_agg('key' || i, repeat('v', i)) FROM generate_series(1, 2000) i)),
               (3, (SELECT jsonb_agg(md5(i::text)) FROM generate_series(1, 20000) i))",
        )
        .unwrap();
        let mismatches = Spi::get_one::<i64>(
            "SELECT count(*) FROM t WHERE idem_canonical(d) <> idem_canonical(d::text::json)",
        );
        assert_eq!(mismatches, Ok(Some(0)));
        assert_eq!(
            text("SELECT idem_canonical(d) FROM t WHERE id = 1"),
            r#"{"a":[1,"x"],"b":1}"#
        );
    }

    #[pg_test]
    fn hash_of_selected_fields() {
        let whole = text(r#"SELECT idem_hash('{"amount":10,"currency":"EUR"}'::jsonb)"#);
        let picked = text(
            r#"SELECT idem_hash('{"currency":"EUR","ts":"2026-11-22T10:00:00Z","amount":10.0,"trace":"abc"}'::jsonb,
                                 ARRAY['amount','currency','missing','amount'])"#,
        );
        assert_eq!(picked, whole);
        let none = text(r#"SELECT idem_hash('{"a":1}'::jsonb, '{}'::text[])"#);
        assert_eq!(none, text("SELECT idem_hash('{}'::jsonb)"));
        // Only the top level is filtered.
        let nested = text(r#"SELECT idem_canonical('{"a":{"ts":1,"b":2}}'::jsonb)"#);
        assert_eq!(nested, r#"{"a":{"b":2,"ts":1}}"#);
        assert_eq!(
            text(r#"SELECT idem_hash('{"a":{"ts":1,"b":2},"ts":3}'::jsonb, ARRAY['a'])"#),
            text(r#"SELECT idem_hash('{"a":{"b":2,"ts":1}}'::json)"#)
        );
    }

    #[pg_test]
    fn bad_input_gives_clear_errors() {
        assert_sqlstate(r#"SELECT idem_canonical('{"a":1,"a":2}'::json)"#, "22030");
        assert_sqlstate(
            r#"SELECT idem_hash('[{"a":1,"b":{"x":1,"x":1}}]'::json)"#,
            "22030",
        );
        assert_sqlstate(r#"SELECT idem_hash('{"a":1,"\u0061":2}'::json)"#, "22030");
        for ty in ["json", "jsonb"] {
            assert_sqlstate(&format!("SELECT idem_canonical('1e400'::{ty})"), "22003");
            assert_sqlstate(&format!("SELECT idem_hash('[-1e309]'::{ty})"), "22003");
            assert_sqlstate(
                &format!("SELECT idem_hash('{{\"a\":1.8e308}}'::{ty})"),
                "22003",
            );
        }
        assert_sqlstate(r#"SELECT idem_hash('[1,2]'::jsonb, ARRAY['a'])"#, "22023");
        assert_sqlstate(r#"SELECT idem_hash('"x"'::jsonb, ARRAY['a'])"#, "22023");
        assert_sqlstate(
            r#"SELECT idem_hash('{"a":1}'::jsonb, ARRAY['a', NULL])"#,
            "22004",
        );
        // Postgres' own parsers refuse 100 000 levels (stack depth check, 54001); nothing
        // reaches us, and the backend survives.
        for ty in ["json", "jsonb"] {
            assert_sqlstate(
                &format!("SELECT idem_hash((repeat('[', 100000) || repeat(']', 100000))::{ty})"),
                "54001",
            );
            assert_sqlstate(
                &format!("SELECT idem_hash(repeat('[', 100000)::{ty})"),
                "54001",
            );
        }
        // The messages are ours, with no Rust backtrace.
        let msg = outcome(r#"SELECT idem_canonical('{"k":1,"k":2}'::json)"#);
        assert_eq!(msg, r#"22030: duplicate JSON object key "k""#);
    }

    /// As deep as Postgres lets us build (our walkers are iterative: no limit of their own).
    #[pg_test]
    fn deep_nesting_within_postgres_limits() {
        let depth = 2000;
        let doc = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        for ty in ["json", "jsonb"] {
            assert_eq!(text(&format!("SELECT idem_canonical('{doc}'::{ty})")), doc);
        }
        let doc = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
        for ty in ["json", "jsonb"] {
            assert_eq!(text(&format!("SELECT idem_canonical('{doc}'::{ty})")), doc);
        }
    }

    #[pg_test]
    fn lone_surrogates() {
        // json keeps the text, so the escape reaches us: UTF-8 cannot carry it (22P05).
        let got = outcome(r#"SELECT idem_hash('["\udc00", 1]'::json)"#);
        assert!(got.starts_with("22P05: "), "{got}");
        let got = outcome(r#"SELECT idem_canonical('"\ud800"'::json)"#);
        assert!(got.starts_with("22P05: "), "{got}");
        // jsonb input refuses it itself.
        let got = outcome(r#"SELECT idem_hash('"\ud800"'::jsonb)"#);
        assert!(got.starts_with("22P02: "), "{got}");
        // \u0000 is valid JSON text and canonicalizes to itself.
        assert_eq!(
            text(r#"SELECT idem_canonical('"a\u0000b"'::json)"#),
            r#""a\u0000b""#
        );
    }

    #[pg_test]
    fn out_of_range_messages_show_the_number() {
        let got = outcome("SELECT idem_hash('[-1e400]'::jsonb)");
        assert!(
            got.starts_with("22003: JSON number -1e400 is out of range"),
            "{got}"
        );
        let got = outcome("SELECT idem_hash('[1.5e309]'::json)");
        assert!(
            got.starts_with("22003: JSON number 1.5e309 is out of range"),
            "{got}"
        );
    }

    #[pg_test]
    fn functions_are_immutable_strict_parallel_safe() {
        let bad = Spi::get_one::<i64>(
            "SELECT count(*) FROM pg_proc
             WHERE proname IN ('idem_canonical', 'idem_hash', 'idem_lock_key')
               AND NOT (provolatile = 'i' AND proisstrict AND proparallel = 's')",
        );
        assert_eq!(bad, Ok(Some(0)));
        let n = Spi::get_one::<i64>(
            "SELECT count(*) FROM pg_proc WHERE proname IN ('idem_canonical', 'idem_hash', 'idem_lock_key')",
        );
        assert_eq!(n, Ok(Some(7)));
    }
}
