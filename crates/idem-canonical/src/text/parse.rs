//! The parser: JSON text (RFC 8259) into `Document`'s flat preorder nodes, iteratively.

use super::{Document, Node, Span};
use crate::error::{Error, ErrorKind, Result};
use crate::number::number_from_decimal_text;

pub(super) struct Parser<'a> {
    input: &'a str,
    bytes: &'a [u8],
    pos: usize,
    decoded: String,
    nodes: Vec<Node>,
    /// Indices of the containers being filled.
    open: Vec<u32>,
}

#[inline]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    let mut v = 0u32;
    for &d in digits {
        v = v * 16 + char::from(d).to_digit(16)?;
    }
    Some(v)
}

impl<'a> Parser<'a> {
    pub(super) fn new(input: &'a str) -> Result<Self> {
        if input.len() >= u32::MAX as usize {
            return Err(Error::new(
                ErrorKind::TooLarge,
                "JSON text longer than 4 GiB",
            ));
        }
        Ok(Self {
            input,
            bytes: input.as_bytes(),
            pos: 0,
            decoded: String::new(),
            // A node per ~6 input bytes is typical; avoid most regrowth.
            nodes: Vec::with_capacity(input.len() / 6 + 1),
            open: Vec::new(),
        })
    }

    #[inline]
    fn skip_ws(&mut self) {
        while self.pos < self.bytes.len() && is_ws(self.bytes[self.pos]) {
            self.pos += 1;
            crate::interrupt::at_byte(self.pos);
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn err(&self, what: &str) -> Error {
        if self.pos >= self.bytes.len() {
            Error::syntax(self.pos, &format!("unexpected end of input, {what}"))
        } else {
            Error::syntax(self.pos, what)
        }
    }

    pub(super) fn run(mut self) -> Result<Document<'a>> {
        let mut work = 0;
        'value: loop {
            crate::interrupt::tick(&mut work);
            self.skip_ws();
            match self.peek() {
                Some(b'{') | Some(b'[') => {
                    let object = self.peek() == Some(b'{');
                    self.pos += 1;
                    self.open.push(self.nodes.len() as u32);
                    self.nodes.push(if object {
                        Node::Object { len: 0, end: 0 }
                    } else {
                        Node::Array { len: 0, end: 0 }
                    });
                    self.skip_ws();
                    let close = if object { b'}' } else { b']' };
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        self.close();
                    } else {
                        if object {
                            self.member_name()?;
                        }
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    let span = self.string()?;
                    self.nodes.push(Node::Str(span));
                }
                Some(b't') => self.literal("true", Node::True)?,
                Some(b'f') => self.literal("false", Node::False)?,
                Some(b'n') => self.literal("null", Node::Null)?,
                Some(b'-' | b'0'..=b'9') => self.number()?,
                _ => return Err(self.err("expected a JSON value")),
            }
            // A value is complete: continue the enclosing containers.
            loop {
                self.skip_ws();
                let Some(&top) = self.open.last() else {
                    if self.pos != self.bytes.len() {
                        return Err(self.err("unexpected text after the JSON value"));
                    }
                    return Ok(Document {
                        input: self.input,
                        decoded: self.decoded,
                        nodes: self.nodes,
                    });
                };
                let object = matches!(self.nodes[top as usize], Node::Object { .. });
                match (self.peek(), object) {
                    (Some(b','), _) => {
                        self.pos += 1;
                        self.count_element(top);
                        if object {
                            self.member_name()?;
                        }
                        continue 'value;
                    }
                    (Some(b']'), false) | (Some(b'}'), true) => {
                        self.pos += 1;
                        self.count_element(top);
                        self.close();
                    }
                    (_, false) => return Err(self.err("expected ',' or ']'")),
                    (_, true) => return Err(self.err("expected ',' or '}'")),
                }
            }
        }
    }

    fn count_element(&mut self, container: u32) {
        if let Node::Array { len, .. } | Node::Object { len, .. } =
            &mut self.nodes[container as usize]
        {
            *len += 1;
        }
    }

    fn close(&mut self) {
        let end = self.nodes.len() as u32;
        if let Some(index) = self.open.pop()
            && let Node::Array { end: e, .. } | Node::Object { end: e, .. } =
                &mut self.nodes[index as usize]
        {
            *e = end;
        }
    }

    /// `"name"` and `:`, leaving the position at the value.
    fn member_name(&mut self) -> Result<()> {
        self.skip_ws();
        if self.peek() != Some(b'"') {
            return Err(self.err("expected a member name"));
        }
        let span = self.string()?;
        self.nodes.push(Node::Str(span));
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(self.err("expected ':'"));
        }
        self.pos += 1;
        Ok(())
    }

    fn literal(&mut self, word: &str, node: Node) -> Result<()> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            self.nodes.push(node);
            Ok(())
        } else {
            Err(self.err("invalid literal"))
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
            crate::interrupt::at_byte(self.pos);
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<()> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.err("invalid number")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.err("invalid number: digits expected after '.'"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("invalid number: digits expected in the exponent"));
            }
        }
        let value = number_from_decimal_text(&self.input[start..self.pos])?;
        self.nodes.push(Node::Number(value));
        Ok(())
    }

    /// A string starting at the opening quote; leaves the position after the closing one.
    fn string(&mut self) -> Result<Span> {
        let start = self.pos + 1;
        let mut i = start;
        // Fast path: no escapes, borrow from the input.
        loop {
            match self.bytes.get(i) {
                None => {
                    self.pos = i;
                    return Err(self.err("unterminated string"));
                }
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(Span {
                        start: start as u32,
                        end: i as u32,
                        decoded: false,
                    });
                }
                Some(b'\\') => break,
                Some(&b) if b < 0x20 => {
                    self.pos = i;
                    return Err(self.err("control character in string"));
                }
                Some(_) => {
                    i += 1;
                    if i & 0xF_FFFF == 0 {
                        crate::interrupt::check();
                    }
                }
            }
        }
        // Slow path: decode into the side buffer.
        if self.decoded.len() + (i - start) >= u32::MAX as usize {
            return Err(Error::new(
                ErrorKind::TooLarge,
                "decoded JSON strings exceed 4 GiB",
            ));
        }
        let out_start = self.decoded.len();
        self.decoded.push_str(&self.input[start..i]);
        let mut run = i;
        loop {
            match self.bytes.get(i) {
                None => {
                    self.pos = i;
                    return Err(self.err("unterminated string"));
                }
                Some(b'"') => {
                    self.decoded.push_str(&self.input[run..i]);
                    self.pos = i + 1;
                    if self.decoded.len() >= u32::MAX as usize {
                        return Err(Error::new(
                            ErrorKind::TooLarge,
                            "decoded JSON strings exceed 4 GiB",
                        ));
                    }
                    return Ok(Span {
                        start: out_start as u32,
                        end: self.decoded.len() as u32,
                        decoded: true,
                    });
                }
                Some(b'\\') => {
                    self.decoded.push_str(&self.input[run..i]);
                    let at = i;
                    i = self.escape(i)?;
                    run = i;
                    // Escapes skip 2 to 12 bytes: check on crossing a MiB, not landing on one.
                    if at / crate::interrupt::BYTES != i / crate::interrupt::BYTES {
                        crate::interrupt::check();
                    }
                }
                Some(&b) if b < 0x20 => {
                    self.pos = i;
                    return Err(self.err("control character in string"));
                }
                Some(_) => {
                    i += 1;
                    if i & 0xF_FFFF == 0 {
                        crate::interrupt::check();
                    }
                }
            }
        }
    }

    /// Decodes the escape at `at` (a backslash) into `decoded`; returns the index after it.
    fn escape(&mut self, at: usize) -> Result<usize> {
        let c = match self.bytes.get(at + 1) {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                let bad = |p: &mut Self| {
                    p.pos = at;
                    p.err("invalid \\u escape")
                };
                let Some(unit) = hex4(self.bytes, at + 2) else {
                    return Err(bad(self));
                };
                let (code, next) = match unit {
                    0xD800..=0xDBFF => {
                        let low = if self.bytes.get(at + 6..at + 8) == Some(b"\\u") {
                            match hex4(self.bytes, at + 8) {
                                Some(low) => Some(low),
                                None => {
                                    self.pos = at + 6;
                                    return Err(self.err("invalid \\u escape"));
                                }
                            }
                        } else {
                            None
                        };
                        match low {
                            Some(low @ 0xDC00..=0xDFFF) => {
                                (0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00), at + 12)
                            }
                            _ => return Err(Error::lone_surrogate(at, unit)),
                        }
                    }
                    0xDC00..=0xDFFF => return Err(Error::lone_surrogate(at, unit)),
                    _ => (unit, at + 6),
                };
                let Some(ch) = char::from_u32(code) else {
                    return Err(bad(self));
                };
                self.decoded.push(ch);
                return Ok(next);
            }
            _ => {
                self.pos = at;
                return Err(self.err("invalid escape"));
            }
        };
        self.decoded.push(c);
        Ok(at + 2)
    }
}
