//! `idem_lock_key`: a stable 64-bit advisory lock key for a (scope, key).
//!
//! Layout (a public contract; clients in any language compute the same key):
//! XXH3-64, seed 0, over `u32_le(len(scope)) || scope || key` (UTF-8 bytes), as a signed bigint.

use xxhash_rust::xxh3::Xxh3;

/// The lock key of `(scope, key)` given as bytes.
pub fn lock_key_bytes(scope: &[u8], key: &[u8]) -> i64 {
    let mut hasher = Xxh3::new();
    hasher.update(&(scope.len() as u32).to_le_bytes());
    hasher.update(scope);
    hasher.update(key);
    hasher.digest() as i64
}
