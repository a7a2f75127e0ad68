//! JSON text (RFC 8259) -> a flat preorder token tree -> canonical text.
//!
//! Both the parser and the serializer are iterative (explicit stacks on the heap), never
//! bounded by the thread's stack; nesting beyond [`crate::MAX_DEPTH`] is refused first. Strings without escapes are
//! borrowed from the input; escaped ones are decoded once into a side buffer. Duplicate member
//! names are detected on the decoded names while sorting (RFC 8785 requires unique names).

mod parse;

use crate::emit::Emitter;
use crate::error::{Error, Result};
use crate::sink::Sink;
use crate::sort::cmp_utf16;
use parse::Parser;

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
        crate::depth::check_text_depth(input)?;
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

#[cfg(test)]
mod tests;
