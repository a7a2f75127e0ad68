//! The advisory-lock key layout: a stable contract shared with clients in other languages.
//!
//! `XXH3-64(seed 0)` over `u32_le(len(scope_utf8)) ‖ scope_utf8 ‖ key_utf8`, the 64-bit
//! result reinterpreted as a signed (two's complement) `i64`, i.e. a Postgres `bigint`.
//! The length prefix keeps `("ab", "c")` and `("a", "bc")` apart. Do not change this layout.

use xxhash_rust::xxh3::{Xxh3, xxh3_64};

use crate::error::{Error, ErrorKind, Result};

/// The bytes the lock key hashes (exposed for documentation and tests). `scope` and `key`
/// are UTF-8 (`&str`, or bytes the caller vouches for).
pub fn lock_key_bytes(scope: impl AsRef<[u8]>, key: impl AsRef<[u8]>) -> Result<Vec<u8>> {
    let (scope, key) = (scope.as_ref(), key.as_ref());
    let len = u32::try_from(scope.len())
        .map_err(|_| Error::new(ErrorKind::TooLarge, "lock scope longer than 4 GiB"))?;
    let mut bytes = Vec::with_capacity(4 + scope.len() + key.len());
    bytes.extend_from_slice(&len.to_le_bytes());
    bytes.extend_from_slice(scope);
    bytes.extend_from_slice(key);
    Ok(bytes)
}

/// The advisory-lock key of `(scope, key)`; use `""` as the scope for the one-argument form.
pub fn lock_key(scope: impl AsRef<[u8]>, key: impl AsRef<[u8]>) -> Result<i64> {
    let (scope, key) = (scope.as_ref(), key.as_ref());
    // Small inputs (the usual case) are laid out on the stack.
    const STACK: usize = 256;
    let total = 4 + scope.len() + key.len();
    if total <= STACK {
        let mut buf = [0u8; STACK];
        // `total <= STACK` bounds scope.len(), so the cast cannot truncate.
        buf[..4].copy_from_slice(&(scope.len() as u32).to_le_bytes());
        buf[4..4 + scope.len()].copy_from_slice(scope);
        buf[4 + scope.len()..total].copy_from_slice(key);
        return Ok(xxh3_64(&buf[..total]) as i64);
    }
    // Large inputs are streamed rather than copied (a key can be as long as a text value);
    // XXH3's streaming and one-shot forms give the same hash.
    let len = u32::try_from(scope.len())
        .map_err(|_| Error::new(ErrorKind::TooLarge, "lock scope longer than 4 GiB"))?;
    let mut hasher = Xxh3::new();
    hasher.update(&len.to_le_bytes());
    for part in [scope, key] {
        for piece in part.chunks(crate::interrupt::BYTES) {
            crate::interrupt::check();
            hasher.update(piece);
        }
    }
    Ok(hasher.digest() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        assert_eq!(lock_key_bytes("", "k").unwrap(), b"\0\0\0\0k");
        assert_eq!(lock_key_bytes("ab", "c").unwrap(), b"\x02\0\0\0abc");
        assert_eq!(lock_key_bytes("é", "").unwrap(), b"\x02\0\0\0\xc3\xa9");
    }

    #[test]
    fn stack_and_heap_paths_agree() {
        for (scope, key) in [
            ("", ""),
            ("s", "k"),
            ("x".repeat(300).as_str(), "k"),
            ("s", "y".repeat(252).as_str()),
            ("s", "y".repeat(251).as_str()),
        ] {
            let expected = xxh3_64(&lock_key_bytes(scope, key).unwrap()) as i64;
            assert_eq!(lock_key(scope, key).unwrap(), expected);
        }
        assert_ne!(lock_key("ab", "c").unwrap(), lock_key("a", "bc").unwrap());
    }
}
