//! JSON text (RFC 8259) -> a flat preorder token tree -> canonical text.
//!
//! Both the parser and the serializer are iterative (explicit stacks on the heap), so nesting
//! depth is limited by memory only, never by the thread's stack. Strings without escapes are
//! borrowed from the input; escaped ones are decoded once into a side buffer. Duplicate member
//! names are detected on the decoded names while sorting (RFC 8785 requires unique names).

use crate::emit::Emitter;
use crate::error::{Error, ErrorKind, Result};
use crate::number::number_from_decimal_text;
use crate::sink::Sink;
use crate::sort::cmp_utf16;

/// Where a string's (decoded) text lives.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: u32,
    end: u32,
    /// In `Document::decoded` rather than in the input.
    decoded: bool,
}

#[derive(Clone, Copy, Debug)]
enum Node {
    Null,
    False,
    True,
    Number(f64),
    /// A string value or a member name.
    Str(Span),
    /// `len` elements follow; `end` is the index just past the subtree.
    Array {
        len: u32,
        end: u32,
    },
    /// `len` members follow, each a `Str` name node then the value's subtree.
    Object {
        len: u32,
        end: u32,
    },
}

/// A parsed JSON text.
pub struct Document<'a> {
    input: &'a str,
    decoded: String,
    nodes: Vec<Node>,
}

impl<'a> Document<'a> {
    /// Parses one JSON text (any value at the top level, surrounding white space allowed).
    pub fn parse(input: &'a str) -> Result<Self> {
        Parser::new(input)?.run()
    }

    fn str(&self, span: Span) -> &str {
        let (s, e) = (span.start as usize, span.end as usize);
        if span.decoded {
            &self.decoded[s..e]
        } else {
            &self.input[s..e]
        }
    }

    fn end_of(&self, index: usize) -> usize {
        match self.nodes[index] {
            Node::Array { end, .. } | Node::Object { end, .. } => end as usize,
            _ => index + 1,
        }
    }

    fn name_of(&self, index: usize) -> &str {
        match self.nodes[index] {
            Node::Str(span) => self.str(span),
            _ => "",
        }
    }

    /// Writes the canonical form to `sink`. On error (a duplicate member name), part of the
    /// text may already have been written.
    pub fn write_canonical<S: Sink>(&self, sink: S) -> Result<S> {
        enum Frame {
            /// Next element index, index past the array.
            Array { next: usize, end: usize },
            /// Members are `order[from..to]` (name, index of its node); next is `order[at]`.
            Object { from: usize, at: usize, to: usize },
        }
        let mut out = Emitter::new(sink);
        let mut stack: Vec<Frame> = Vec::new();
        let mut order: Vec<(&[u8], usize)> = Vec::new();
        let mut pending = Some(0usize);
        let mut work = 0;
        loop {
            crate::interrupt::tick(&mut work);
            out.check_room()?;
            if let Some(index) = pending.take() {
                match self.nodes[index] {
                    Node::Null => out.null(),
                    Node::False => out.bool(false),
                    Node::True => out.bool(true),
                    Node::Number(v) => out.number(v)?,
                    Node::Str(span) => out.string(self.str(span)),
                    Node::Array { end, .. } => {
                        out.begin_array();
                        stack.push(Frame::Array {
                            next: index + 1,
                            end: end as usize,
                        });
                    }
                    Node::Object { len, .. } => {
                        out.begin_object();
                        let from = order.len();
                        let mut member = index + 1;
                        for _ in 0..len {
                            crate::interrupt::tick(&mut work);
                            order.push((self.name_of(member).as_bytes(), member));
                            member = self.end_of(member + 1);
                        }
                        let members = &mut order[from..];
                        // A huge object's sort is the longest step: it checks too.
                        members.sort_unstable_by(|a, b| {
                            crate::interrupt::tick(&mut work);
                            cmp_utf16(a.0, b.0)
                        });
                        if let Some(pair) = members.windows(2).find(|w| w[0].0 == w[1].0) {
                            return Err(Error::duplicate_key(self.name_of(pair[0].1)));
                        }
                        stack.push(Frame::Object {
                            from,
                            at: from,
                            to: order.len(),
                        });
                    }
                }
            }
            let Some(top) = stack.last_mut() else { break };
            match top {
                Frame::Array { next, end } => {
                    if *next < *end {
                        pending = Some(*next);
                        *next = self.end_of(*next);
                    } else {
                        out.end_array();
                        stack.pop();
                    }
                }
                Frame::Object { from, at, to } => {
                    if *at < *to {
                        let (name, index) = order[*at];
                        *at += 1;
                        out.key_utf8(name);
                        pending = Some(index + 1);
                    } else {
                        out.end_object();
                        order.truncate(*from);
                        stack.pop();
                    }
                }
            }
        }
        Ok(out.into_sink())
    }
}

struct Parser<'a> {
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
    fn new(input: &'a str) -> Result<Self> {
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

    fn run(mut self) -> Result<Document<'a>> {
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

#[cfg(test)]
mod tests {
    use crate::canonicalize_json_text as canon;

    fn kind(text: &str) -> &'static str {
        canon(text).unwrap_err().sqlstate()
    }

    #[test]
    fn scalars_at_top_level() {
        assert_eq!(canon(" 1.0 ").unwrap(), "1");
        assert_eq!(canon("\"a\\u00e9\"").unwrap(), "\"aé\"");
        assert_eq!(canon("true").unwrap(), "true");
        assert_eq!(canon("null").unwrap(), "null");
        assert_eq!(canon("[]").unwrap(), "[]");
        assert_eq!(canon("{}").unwrap(), "{}");
        assert_eq!(canon("\"\\u0000\"").unwrap(), "\"\\u0000\"");
    }

    #[test]
    fn nesting_and_sorting() {
        assert_eq!(
            canon(r#"{"b":[1,{"z":null,"a":[]}],"a":{"y":2,"x":1}}"#).unwrap(),
            r#"{"a":{"x":1,"y":2},"b":[1,{"a":[],"z":null}]}"#
        );
        assert_eq!(
            canon("{\"\u{e000}\":1,\"😂\":2,\"\\ud83d\\ude01\":3}").unwrap(),
            "{\"😁\":3,\"😂\":2,\"\u{e000}\":1}"
        );
    }

    /// The pairs at the edges of the surrogate ranges, and the code points next to them.
    #[test]
    fn surrogate_pairs_at_the_edges() {
        for (escaped, ch) in [
            (r"\ud800\udc00", '\u{10000}'),
            (r"\ud800\udfff", '\u{103ff}'),
            (r"\udbff\udc00", '\u{10fc00}'),
            (r"\udbff\udfff", '\u{10ffff}'),
            (r"\uDBFF\uDFFF", '\u{10ffff}'),
            (r"\ud7ff", '\u{d7ff}'),
            (r"\ue000", '\u{e000}'),
            (r"\uffff", '\u{ffff}'),
        ] {
            assert_eq!(
                canon(&format!("\"{escaped}\"")).unwrap(),
                format!("\"{ch}\""),
                "{escaped}"
            );
        }
        // Sorted by UTF-16 code units: U+10FFFF (0xDBFF 0xDFFF) before U+E000, U+FFFF after.
        assert_eq!(
            canon(r#"{"\uffff":1,"\ue000":2,"\udbff\udfff":3,"\ud800\udc00":4,"\ud7ff":5}"#)
                .unwrap(),
            "{\"\u{d7ff}\":5,\"\u{10000}\":4,\"\u{10ffff}\":3,\"\u{e000}\":2,\"\u{ffff}\":1}"
        );
        for lone in [
            r"\udfff",
            r"\udbff",
            r"\udbff\ue000",
            r"\ud800\udbff",
            r"\udc00\ud800",
        ] {
            assert_eq!(kind(&format!("\"{lone}\"")), "22P05", "{lone}");
        }
    }

    #[test]
    fn errors() {
        assert_eq!(kind(r#"{"a":1,"a":2}"#), "22030");
        // Duplicates are found after unescaping.
        assert_eq!(kind(r#"{"a":1,"\u0061":2}"#), "22030");
        assert_eq!(kind(r#"[{"x":{"k":1,"k":1}}]"#), "22030");
        assert_eq!(kind("[1e400]"), "22003");
        assert_eq!(kind("-1e309"), "22003");
        assert_eq!(kind(r#""\ud800""#), "22P05");
        assert_eq!(kind(r#""\udc00x""#), "22P05");
        assert_eq!(kind(r#""\ud800\u0041""#), "22P05");
        for bad in [
            "",
            " ",
            "[",
            "]",
            "{",
            "[1,]",
            "[,1]",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\" 1}",
            "{1:2}",
            "01",
            "1.",
            ".5",
            "1e",
            "+1",
            "-",
            "tru",
            "nul",
            "[1 2]",
            "1 2",
            "\"abc",
            "\"\\x\"",
            "\"\\u12\"",
            "\"a\nb\"",
            "{\"a\":1,}",
            "[1]]",
            "NaN",
            "Infinity",
        ] {
            assert_eq!(kind(bad), "22P02", "{bad:?}");
        }
    }

    #[test]
    fn deep_nesting_is_iterative() {
        let depth = 100_000;
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(canon(&text).unwrap(), text);
        let text = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
        assert_eq!(canon(&text).unwrap(), text);
        assert_eq!(kind(&"[".repeat(depth)), "22P02");
    }
}
