//! The jsonb binary format, read directly (Postgres's utils/jsonb.h; stable on disk since
//! 9.4): containers and their entries, numerics decoded from base-10000 digits to the nearest
//! double, and the canonical writer over them. Every offset is bounds-checked; the walk is
//! iterative (explicit stack). Nesting beyond `idem_canonical::MAX_DEPTH` is refused (54001)
//! by a first pass over the containers alone, before any other check, as the portable edition does.

use std::borrow::Cow;
use std::collections::BTreeSet;

use idem_canonical::{Emitter, Sink, cmp_utf16, number_from_decimal_text, number_from_parts_fast};

use crate::base::datum::ServerEncoding;
use crate::base::errors::{self, IdemError, canonical_error};

fn corrupt(what: &str) -> IdemError {
    IdemError::new(
        errors::DATA_CORRUPTED,
        format!("corrupted jsonb value: {what}"),
    )
}

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

/// 54001 unless at most `idem_canonical::MAX_DEPTH` containers nest: a walk of the container
/// headers only (no scalar is decoded), stopping at the first one too deep.
fn check_depth(root: &[u8], top: &Container) -> errors::Result<()> {
    if top.header & JB_FSCALAR != 0 {
        return Ok(());
    }
    let mut stack = vec![(container_at(root, 0)?, 0usize, 0usize)];
    let mut work = 0;
    while let Some((c, index, off)) = stack.last_mut() {
        idem_canonical::interrupt::tick(&mut work);
        let entries = if c.header & JB_FOBJECT != 0 {
            2 * c.count
        } else {
            c.count
        };
        if *index == entries {
            stack.pop();
            continue;
        }
        let child = next_child(root, c, *index, off)?;
        *index += 1;
        if child.jentry & JENTRY_TYPEMASK == JENTRY_ISCONTAINER {
            if stack.len() >= idem_canonical::MAX_DEPTH {
                return Err(canonical_error(idem_canonical::Error::too_deep()));
            }
            stack.push((
                container_at(root, child.base + intalign(child.start))?,
                0,
                0,
            ));
        }
    }
    Ok(())
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
    check_depth(root, &top)?;
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
    let mut work = 0;

    loop {
        idem_canonical::interrupt::tick(&mut work);
        out.check_room().map_err(canonical_error)?;
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
                            idem_canonical::interrupt::tick(&mut work);
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
                        // A huge object's sort is the longest step: it checks too.
                        members[from..].sort_unstable_by(|a, b| {
                            idem_canonical::interrupt::tick(&mut work);
                            cmp_utf16(&a.name, &b.name)
                        });
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
