//! RFC 8785 (JSON Canonicalization Scheme) canonical JSON, its SHA-256, and the idempotency
//! advisory-lock key layout. Pure Rust: no Postgres types, so it can be unit-tested, fuzzed
//! and reused by Rust clients.
//!
//! * JSON text: [`canonicalize_json_text`], [`hash_json_text`] (parse into a flat token tree,
//!   then serialize with members sorted by UTF-16 code units).
//! * Producers that can deliver members in canonical order themselves (the extension's jsonb
//!   walker): [`Emitter`] over any [`Sink`], with [`cmp_utf16`] for the order and
//!   [`HashSink`] to hash without building the text.
//! * `serde_json::Value`: [`canonicalize_value`], [`hash_value`].
//! * Pieces: [`number_from_decimal_text`], [`write_number`], [`write_string`].
//! * [`lock_key`]: `XXH3-64(u32_le(len(scope)) ‖ scope ‖ key) as i64`.
//!
//! Everything is iterative, never bounded by the call stack; nesting deeper than
//! [`MAX_DEPTH`] is refused ([`ErrorKind::TooDeep`]) before anything else is checked.

mod depth;
mod emit;
mod error;
pub mod interrupt;
mod lock_key;
mod number;
mod sink;
mod sort;
mod string;
mod text;
mod value;

pub use depth::{MAX_DEPTH, check_text_depth};
pub use emit::Emitter;
pub use error::{Error, ErrorKind, Result};
pub use interrupt::set_interrupt_hook;
pub use lock_key::{lock_key, lock_key_bytes};
pub use number::{format_number, number_from_decimal_text, number_from_parts_fast, write_number};
pub use sink::{HashSink, Sink, to_hex};
pub use sort::{cmp_utf16, cmp_utf16_str};
pub use string::write_string;
pub use text::Document;
pub use value::write_value_canonical;

/// The canonical form of a JSON text.
pub fn canonicalize_json_text(text: &str) -> Result<String> {
    into_string(Document::parse(text)?.write_canonical(Vec::with_capacity(text.len()))?)
}

/// Canonical text written from `&str` pieces is UTF-8; checked once rather than trusted.
fn into_string(bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes)
        .map_err(|_| Error::new(ErrorKind::Untranslatable, "canonical text is not UTF-8"))
}

/// SHA-256 of the canonical form of a JSON text (the text itself is never materialized).
pub fn hash_json_text(text: &str) -> Result<[u8; 32]> {
    Ok(Document::parse(text)?
        .write_canonical(HashSink::new())?
        .finish())
}

/// [`hash_json_text`] as lowercase hex.
pub fn hash_json_text_hex(text: &str) -> Result<String> {
    hash_json_text(text).map(|digest| to_hex(&digest))
}

/// The canonical form of a `serde_json::Value`.
pub fn canonicalize_value(value: &serde_json::Value) -> Result<String> {
    into_string(write_value_canonical(value, Vec::new())?)
}

/// SHA-256 of the canonical form of a `serde_json::Value`.
pub fn hash_value(value: &serde_json::Value) -> Result<[u8; 32]> {
    Ok(write_value_canonical(value, HashSink::new())?.finish())
}

/// The same as `hash_json_text` for UTF-8 bytes; bytes that are not UTF-8 are an error
/// ([`ErrorKind::Untranslatable`]).
pub fn hash_json_bytes(bytes: &[u8]) -> Result<[u8; 32]> {
    hash_json_text(str_from_utf8(bytes)?)
}

/// `bytes` as `&str`, or an [`ErrorKind::Untranslatable`] error naming the first bad byte.
pub fn str_from_utf8(bytes: &[u8]) -> Result<&str> {
    core::str::from_utf8(bytes).map_err(|e| {
        Error::new(
            ErrorKind::Untranslatable,
            format!("invalid UTF-8 byte sequence at byte {}", e.valid_up_to()),
        )
    })
}
