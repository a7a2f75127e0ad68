//! A streaming writer of canonical tokens, for producers that already deliver object members
//! in canonical order (see [`crate::cmp_utf16`]), such as the Postgres jsonb walker.

use crate::error::Result;
use crate::number::write_number;
use crate::sink::Sink;
use crate::string::write_string;

/// Writes JSON tokens with the separators RFC 8785 wants (no white space). It only places
/// `,` and `:`; the caller is responsible for well-formed nesting and for member order and
/// uniqueness.
pub struct Emitter<S: Sink> {
    sink: S,
    /// A value was just completed at the current level: the next value or key needs a comma.
    comma: bool,
}

impl<S: Sink> Emitter<S> {
    pub fn new(sink: S) -> Self {
        Self { sink, comma: false }
    }

    pub fn into_sink(self) -> S {
        self.sink
    }

    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// An error once the sink is full ([`Sink::is_full`]): producers call it once per token so
    /// that an oversized output stops early.
    #[inline]
    pub fn check_room(&self) -> Result<()> {
        if self.sink.is_full() {
            return Err(crate::error::Error::sink_full());
        }
        Ok(())
    }

    #[inline]
    fn sep(&mut self) {
        if self.comma {
            self.sink.write_byte(b',');
        }
    }

    #[inline]
    pub fn begin_array(&mut self) {
        self.sep();
        self.sink.write_byte(b'[');
        self.comma = false;
    }

    #[inline]
    pub fn end_array(&mut self) {
        self.sink.write_byte(b']');
        self.comma = true;
    }

    #[inline]
    pub fn begin_object(&mut self) {
        self.sep();
        self.sink.write_byte(b'{');
        self.comma = false;
    }

    #[inline]
    pub fn end_object(&mut self) {
        self.sink.write_byte(b'}');
        self.comma = true;
    }

    /// A member name; the member's value must follow.
    #[inline]
    pub fn key(&mut self, name: &str) {
        self.key_utf8(name.as_bytes());
    }

    /// [`Emitter::key`] for a name given as bytes the caller vouches are UTF-8.
    #[inline]
    pub fn key_utf8(&mut self, name: &[u8]) {
        self.sep();
        write_string(name, &mut self.sink);
        self.sink.write_byte(b':');
        self.comma = false;
    }

    #[inline]
    pub fn string(&mut self, value: &str) {
        self.string_utf8(value.as_bytes());
    }

    /// [`Emitter::string`] for a value given as bytes the caller vouches are UTF-8.
    #[inline]
    pub fn string_utf8(&mut self, value: &[u8]) {
        self.sep();
        write_string(value, &mut self.sink);
        self.comma = true;
    }

    /// A number; NaN and infinities are an error (22003).
    #[inline]
    pub fn number(&mut self, value: f64) -> Result<()> {
        self.sep();
        write_number(value, &mut self.sink)?;
        self.comma = true;
        Ok(())
    }

    #[inline]
    pub fn bool(&mut self, value: bool) {
        self.sep();
        self.sink.write(if value { b"true" } else { b"false" });
        self.comma = true;
    }

    #[inline]
    pub fn null(&mut self) {
        self.sep();
        self.sink.write(b"null");
        self.comma = true;
    }
}
