//! Canonical form of an in-memory `serde_json::Value`, for Rust clients that build their
//! request bodies with serde_json and want the same hash as the database computes.

use serde_json::Value;

use crate::emit::Emitter;
use crate::error::{Error, ErrorKind, Result};
use crate::sink::Sink;
use crate::sort::cmp_utf16_str;

/// Writes the canonical form of `value` (iteratively; at most [`crate::MAX_DEPTH`] deep). Numbers are taken as
/// `Number::as_f64` (integers beyond 2^53 round to the nearest double, as RFC 8785 wants).
pub fn write_value_canonical<S: Sink>(value: &Value, sink: S) -> Result<S> {
    enum Frame<'v> {
        Array(core::slice::Iter<'v, Value>),
        Object(std::vec::IntoIter<(&'v String, &'v Value)>),
    }
    let mut out = Emitter::new(sink);
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut pending = Some(value);
    let mut work = 0;
    loop {
        crate::interrupt::tick(&mut work);
        out.check_room()?;
        if let Some(v) = pending.take() {
            match v {
                Value::Null => out.null(),
                Value::Bool(b) => out.bool(*b),
                Value::Number(n) => {
                    let f = n.as_f64().ok_or_else(|| {
                        Error::new(
                            ErrorKind::NumberOutOfRange,
                            format!("JSON number {n} is not a double"),
                        )
                    })?;
                    out.number(f)?;
                }
                Value::String(s) => out.string(s),
                Value::Array(_) | Value::Object(_) if stack.len() >= crate::MAX_DEPTH => {
                    return Err(Error::too_deep());
                }
                Value::Array(items) => {
                    out.begin_array();
                    stack.push(Frame::Array(items.iter()));
                }
                Value::Object(map) => {
                    out.begin_object();
                    let mut members: Vec<(&String, &Value)> = map.iter().collect();
                    members.sort_unstable_by(|a, b| {
                        crate::interrupt::tick(&mut work);
                        cmp_utf16_str(a.0, b.0)
                    });
                    stack.push(Frame::Object(members.into_iter()));
                }
            }
        }
        match stack.last_mut() {
            None => break,
            Some(Frame::Array(items)) => match items.next() {
                Some(item) => pending = Some(item),
                None => {
                    out.end_array();
                    stack.pop();
                }
            },
            Some(Frame::Object(members)) => match members.next() {
                Some((name, item)) => {
                    out.key(name);
                    pending = Some(item);
                }
                None => {
                    out.end_object();
                    stack.pop();
                }
            },
        }
    }
    Ok(out.into_sink())
}
