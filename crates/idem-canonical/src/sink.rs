//! Where canonical text goes: a byte vector, or straight into a SHA-256 state.

use sha2::{Digest, Sha256};

/// A destination for canonical JSON text (UTF-8 bytes, written in small pieces).
pub trait Sink {
    fn write(&mut self, bytes: &[u8]);

    /// The sink refuses more text (it enforces a size limit): the writers of this crate then
    /// stop with [`crate::ErrorKind::TooLarge`] instead of producing the rest.
    #[inline]
    fn is_full(&self) -> bool {
        false
    }

    #[inline]
    fn write_byte(&mut self, b: u8) {
        self.write(&[b]);
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    #[inline]
    fn write_byte(&mut self, b: u8) {
        self.push(b);
    }
}

impl<S: Sink + ?Sized> Sink for &mut S {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        (**self).write(bytes);
    }

    #[inline]
    fn is_full(&self) -> bool {
        (**self).is_full()
    }

    #[inline]
    fn write_byte(&mut self, b: u8) {
        (**self).write_byte(b);
    }
}

impl Sink for Sha256 {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

/// Size of [`HashSink`]'s buffer: a multiple of SHA-256's 64-byte block.
const HASH_BUF: usize = 1024;

/// A SHA-256 sink that collects the many small pieces of canonical text in a buffer and
/// hands them to the hasher a kilobyte at a time (faster than one `update` per token).
pub struct HashSink {
    hasher: Sha256,
    len: usize,
    buf: [u8; HASH_BUF],
}

impl Default for HashSink {
    fn default() -> Self {
        Self::new()
    }
}

impl HashSink {
    pub fn new() -> Self {
        Self {
            hasher: Sha256::new(),
            len: 0,
            buf: [0; HASH_BUF],
        }
    }

    /// The SHA-256 of everything written.
    pub fn finish(mut self) -> [u8; 32] {
        self.hasher.update(&self.buf[..self.len]);
        self.hasher.finalize().into()
    }
}

impl Sink for HashSink {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        if end <= HASH_BUF {
            self.buf[self.len..end].copy_from_slice(bytes);
            self.len = end;
        } else {
            self.hasher.update(&self.buf[..self.len]);
            self.len = 0;
            if bytes.len() >= HASH_BUF {
                self.hasher.update(bytes);
            } else {
                self.buf[..bytes.len()].copy_from_slice(bytes);
                self.len = bytes.len();
            }
        }
    }

    #[inline]
    fn write_byte(&mut self, b: u8) {
        if self.len < HASH_BUF {
            self.buf[self.len] = b;
            self.len += 1;
        } else {
            self.write(&[b]);
        }
    }
}

/// Lowercase hexadecimal of a digest.
pub fn to_hex(digest: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(digest.len() * 2);
    for b in digest {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xF)]));
    }
    out
}
