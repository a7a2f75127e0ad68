//! Input rules shared by every entry point: what a scope, key or hash may be.
//! A rule that fails raises before anything is read or written.

use pgrx::datum::Interval;

use idem_protocol::OutOfBounds;

use crate::base::errors::{self, IdemError, Result, SqlState};

/// Longest scope, key, request hash, claimed_by or failure code, in bytes.
pub const MAX_NAME_BYTES: usize = 255;
/// Longest recovery point or failure message, in bytes.
pub const MAX_TEXT_BYTES: usize = 8192;

fn is_blank(value: &[u8]) -> bool {
    value.iter().all(u8::is_ascii_whitespace)
}

fn too_long(what: &str, value: &[u8], limit: usize) -> IdemError {
    IdemError::new(errors::VALUE_TOO_LONG, format!("{what} is too long")).detail(format!(
        "{what} is {} bytes; the limit is {limit} bytes.",
        value.len()
    ))
}

/// A required identifier: not NULL, not blank, at most [`MAX_NAME_BYTES`].
pub fn name<'a>(what: &str, code: SqlState, value: Option<&'a [u8]>) -> Result<&'a [u8]> {
    match value {
        None => Err(IdemError::new(code, format!("{what} must not be null"))),
        // Length first: a blank check would scan a value of any size.
        Some(v) if v.len() > MAX_NAME_BYTES => Err(too_long(what, v, MAX_NAME_BYTES)),
        Some(v) if is_blank(v) => Err(IdemError::new(code, format!("{what} must not be blank"))),
        Some(v) => Ok(v),
    }
}

pub fn scope(value: Option<&[u8]>) -> Result<&[u8]> {
    name("scope", errors::INVALID_SCOPE, value)
}

pub fn key(value: Option<&[u8]>) -> Result<&[u8]> {
    name("key", errors::INVALID_KEY, value)
}

pub fn request_hash(value: Option<&[u8]>) -> Result<&[u8]> {
    name("request_hash", errors::INVALID_REQUEST_HASH, value)
}

/// An optional text no longer than `limit` bytes.
pub fn optional<'a>(what: &str, value: Option<&'a [u8]>, limit: usize) -> Result<Option<&'a [u8]>> {
    match value {
        Some(v) if v.len() > limit => Err(too_long(what, v, limit)),
        other => Ok(other),
    }
}

/// A lease or retention: present, longer than zero and at most 100 years.
pub fn positive_interval<T>(what: &str, value: Option<(T, Interval)>) -> Result<T> {
    match value {
        None => Err(IdemError::new(
            errors::NULL_VALUE_NOT_ALLOWED,
            format!("{what} must not be null"),
        )),
        // The bounds are the protocol's (`idem_protocol::check_interval`).
        Some((raw, interval)) => match idem_protocol::check_interval(interval.as_micros()) {
            Ok(()) => Ok(raw),
            Err(OutOfBounds::NotPositive) => Err(IdemError::new(
                errors::INVALID_PARAMETER_VALUE,
                format!("{what} must be positive"),
            )
            .detail(format!("{what} was {interval:?}."))),
            Err(OutOfBounds::TooLong) => Err(IdemError::new(
                errors::INVALID_PARAMETER_VALUE,
                format!("{what} must be at most 100 years"),
            )
            .detail(format!("{what} was {interval:?}."))),
        },
    }
}

/// Bytes from a text column or argument, for messages.
pub fn lossy(value: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(value)
}

/// A delay: present and not negative (zero means "now").
pub fn non_negative_interval<T>(what: &str, value: Option<(T, Interval)>) -> Result<T> {
    match value {
        None => Err(IdemError::new(
            errors::NULL_VALUE_NOT_ALLOWED,
            format!("{what} must not be null"),
        )),
        Some((_, interval)) if interval.as_micros() < 0 => Err(IdemError::new(
            errors::INVALID_PARAMETER_VALUE,
            format!("{what} must not be negative"),
        )
        .detail(format!("{what} was {interval:?}."))),
        Some((raw, _)) => Ok(raw),
    }
}

/// A batch size: present and at least 1.
pub fn batch(what: &str, value: Option<i32>) -> Result<i32> {
    match value {
        None => Err(IdemError::new(
            errors::NULL_VALUE_NOT_ALLOWED,
            format!("{what} must not be null"),
        )),
        Some(n) if n < 1 => Err(IdemError::new(
            errors::INVALID_PARAMETER_VALUE,
            format!("{what} must be at least 1"),
        )
        .detail(format!("{what} was {n}."))),
        Some(n) => Ok(n),
    }
}

/// `bytes` cut to at most `limit` bytes without splitting a character (server encoding).
pub fn clip(bytes: &[u8], limit: usize) -> &[u8] {
    if bytes.len() <= limit {
        return bytes;
    }
    // SAFETY: pg_mbcliplen reads at most `len` bytes of `bytes`.
    let cut =
        unsafe { pgrx::pg_sys::pg_mbcliplen(bytes.as_ptr().cast(), bytes.len() as _, limit as _) };
    &bytes[..(cut.max(0) as usize).min(limit)]
}
