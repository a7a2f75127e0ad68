//! `idem_canonical` and `idem_hash`: RFC 8785 canonical JSON of `json`/`jsonb` values and its
//! SHA-256.
//!
//! The canonicalizer itself is the pure crate `idem-canonical`. This module feeds it:
//! * `json`: the stored text, parsed by the crate (duplicate names are seen and refused).
//! * `jsonb`: the binary container is read directly by [`crate::base::jsonb`] (no jsonb -> text ->
//!   parse round trip): object members are re-sorted by UTF-16 code units (jsonb keeps them by
//!   length, then bytes), strings are borrowed from the detoasted datum.
//!
//! Rust callers (the claim path) use [`hash_jsonb_datum`] / [`jsonb_hash_hex`]. sql/canonical.sql
//! declares the SQL functions, for both editions.

use idem_canonical::{Document, HashSink, to_hex};
use pgrx::datum::Array;
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::base::canonical_limits::{Discard, Guarded, MAX_TEXT, may_exceed};
use crate::base::datum::{JsonBytes, JsonbBytes, ServerEncoding};
use crate::base::errors::{self, IdemError, OrRaise, canonical_error};
use crate::base::jsonb::{FieldSet, write_jsonb};

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
    let sink = Guarded::new(HashSink::new(), usize::MAX);
    Ok(write_jsonb(root, fields, ServerEncoding::current(), sink)?
        .into_inner()
        .finish())
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
        .write_canonical(Guarded::new(HashSink::new(), usize::MAX))
        .map_err(canonical_error)?;
    Ok(sink.into_inner().finish())
}

/// The canonical text of a `json` value, at most `limit` bytes long (else 54000).
pub(crate) fn json_text_canonical(text: &[u8], limit: usize) -> errors::Result<String> {
    let text = ServerEncoding::current().to_utf8_str(text)?;
    let doc = Document::parse(&text).map_err(canonical_error)?;
    // A text that might not fit is measured first, so that it fails before any allocation.
    let capacity = if may_exceed(text.len(), limit) {
        let mut measure = Guarded::new(Discard, limit);
        let written = doc
            .write_canonical(&mut measure)
            .map(drop)
            .map_err(canonical_error);
        measure.outcome(written)?;
        measure.written()
    } else {
        text.len()
    };
    let mut out = Guarded::new(Vec::with_capacity(capacity), limit);
    let written = doc
        .write_canonical(&mut out)
        .map(drop)
        .map_err(canonical_error);
    out.outcome(written)?;
    utf8_string(out.into_inner())
}

/// The canonical text of a `jsonb` value, at most `limit` bytes long (else 54000).
pub(crate) fn jsonb_canonical(root: &[u8], limit: usize) -> errors::Result<String> {
    let encoding = ServerEncoding::current();
    let capacity = if may_exceed(root.len(), limit) {
        let mut measure = Guarded::new(Discard, limit);
        let written = write_jsonb(root, None, encoding, &mut measure).map(drop);
        measure.outcome(written)?;
        measure.written()
    } else {
        root.len()
    };
    let mut out = Guarded::new(Vec::with_capacity(capacity), limit);
    let written = write_jsonb(root, None, encoding, &mut out).map(drop);
    out.outcome(written)?;
    utf8_string(out.into_inner())
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
    let mut work = 0;
    for field in fields.iter() {
        idem_canonical::interrupt::tick(&mut work);
        let Some(name) = field else {
            return Err(IdemError::new(
                errors::NULL_VALUE_NOT_ALLOWED,
                "idem_hash(payload, fields): fields must not contain NULL",
            ));
        };
        set.insert(name.as_bytes());
    }
    fail_point!("hash.fields");
    jsonb_hash_hex(root, Some(&set))
}

/// RFC 8785 canonical text of a `jsonb` value.
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn idem_canonical_jsonb(payload: JsonbBytes<'_>) -> String {
    jsonb_canonical(payload.bytes(), MAX_TEXT).or_raise()
}

/// RFC 8785 canonical text of a `json` value (duplicate member names are an error, 22030).
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn idem_canonical_json(payload: JsonBytes<'_>) -> String {
    json_text_canonical(payload.bytes(), MAX_TEXT).or_raise()
}

/// Lowercase hex SHA-256 of the canonical text of a `jsonb` value.
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn idem_hash_jsonb(payload: JsonbBytes<'_>) -> String {
    jsonb_hash_hex(payload.bytes(), None).or_raise()
}

/// Lowercase hex SHA-256 of the canonical text of a `json` value.
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn idem_hash_json(payload: JsonBytes<'_>) -> String {
    json_text_hash(payload.bytes())
        .map(|d| to_hex(&d))
        .or_raise()
}

/// The hash of the object made of only the listed top-level members of `payload`.
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn idem_hash_jsonb_fields(payload: JsonbBytes<'_>, fields: Array<'_, &str>) -> String {
    let hashed = jsonb_fields_hash_hex(payload.bytes(), &fields);
    // `fields` owns a decoder and a detoasted copy: dropped before an error longjmps past it.
    drop(fields);
    hashed.or_raise()
}
