//! The canonicalizer's limits in a backend: cancellation and `statement_timeout`
//! (CHECK_FOR_INTERRUPTS through the pure crate's hook and every MiB of output), and the size
//! of a canonical text (54000 before anything absurd is allocated, never a Rust assertion).

use idem_canonical::Sink;
use pgrx::pg_sys;

use crate::base::errors::{self, IdemError};

/// Long canonicalizations honour cancellation and `statement_timeout`: the pure crate calls
/// this back every few thousand tokens or MiB scanned, and [`Guarded`] every MiB of output.
fn check_interrupts() {
    pg_sys::check_for_interrupts!();
}

/// Called from `_PG_init`.
pub fn init() {
    idem_canonical::set_interrupt_hook(check_interrupts);
}

/// The longest text value Postgres can hold: MaxAllocSize less the varlena header.
pub const MAX_TEXT: usize = 0x3FFF_FFFF - 4;

/// A canonical text is at most `EXPANSION` times as long as its input (json text or jsonb
/// container) plus [`SLACK`]: a control character in a jsonb string (1 byte) becomes `\u00xx`
/// (6); every other token shrinks or grows less (`1e20` -> 21 digits; the jsonb JEntry of
/// 4 bytes pays for quotes, commas and colons). Inputs below the bound skip the measuring pass.
const EXPANSION: usize = 6;
const SLACK: usize = 64;

/// Whether the canonical text of an input of `len` bytes could be longer than `limit`.
pub fn may_exceed(len: usize, limit: usize) -> bool {
    len.saturating_mul(EXPANSION).saturating_add(SLACK) > limit
}

/// Bytes handed to the inner sink at once (and between two interrupt checks).
const CHUNK: usize = 1 << 20;

/// A sink that checks for interrupts every MiB written and refuses text past `limit` bytes:
/// it reports itself full ([`Sink::is_full`]), the writers stop, and [`Guarded::outcome`]
/// turns that into 54000. Nothing past the limit reaches the inner sink.
pub struct Guarded<S> {
    inner: S,
    written: usize,
    limit: usize,
}

impl<S: Sink> Guarded<S> {
    pub fn new(inner: S, limit: usize) -> Self {
        Guarded {
            inner,
            written: 0,
            limit,
        }
    }

    /// Bytes written so far (meaningful when not full).
    pub fn written(&self) -> usize {
        self.written
    }

    pub fn into_inner(self) -> S {
        self.inner
    }

    /// The result of a writer that wrote into this sink: 54000 if the text did not fit,
    /// whatever the writer returned.
    pub fn outcome<T>(&self, result: errors::Result<T>) -> errors::Result<T> {
        if self.is_full() {
            return Err(IdemError::new(
                errors::PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "the canonical JSON text would be longer than {} bytes, the most a text value holds",
                    self.limit
                ),
            )
            .hint("idem_hash streams the canonical text and has no such limit."));
        }
        result
    }
}

impl<S: Sink> Sink for Guarded<S> {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for piece in bytes.chunks(CHUNK) {
            let before = self.written;
            self.written = before.saturating_add(piece.len());
            if self.written > self.limit {
                return;
            }
            if before / CHUNK != self.written / CHUNK {
                check_interrupts();
            }
            self.inner.write(piece);
        }
    }

    #[inline]
    fn is_full(&self) -> bool {
        self.written > self.limit
    }
}

/// A sink that keeps nothing: with [`Guarded`], it measures a canonical text.
pub struct Discard;

impl Sink for Discard {
    #[inline]
    fn write(&mut self, _bytes: &[u8]) {}
}
