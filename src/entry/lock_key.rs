//! `idem_lock_key`: the advisory-lock key of an idempotency key.
//!
//! The layout is a stable, documented contract (docs/hashing.md) implemented once, in
//! `idem_canonical::lock_key`: XXH3-64 (seed 0) over `u32_le(len(scope)) ‖ scope ‖ key`
//! (UTF-8 bytes), reinterpreted as a signed bigint. Nothing else may change it.

use pgrx::prelude::*;

use crate::base::datum::{ServerEncoding, TextBytes};
use crate::base::errors::canonical_error;
use crate::base::errors::{self, OrRaise};

/// The lock key of `(scope, key)` given as text in the server encoding.
pub fn lock_key_for(scope: &[u8], key: &[u8]) -> errors::Result<i64> {
    let encoding = ServerEncoding::current();
    let scope = encoding.to_utf8(scope)?;
    let key = encoding.to_utf8(key)?;
    idem_canonical::lock_key(scope, key).map_err(canonical_error)
}

/// The advisory-lock class of the claim's own key locks (`objsubid` in `pg_locks`). SQL's
/// `pg_advisory_*` functions use 1 (bigint) and 2 (two int4s), so no call of theirs can take
/// or hold a claim's lock, whatever the key: only a claim of the same (scope, key) can.
pub const CLAIM_LOCK_CLASS: u16 = 0x4944;

/// Try to take, until the transaction ends, the lock a claim of a new key holds on
/// `(scope, key)`: `idem_lock_key(scope, key)` in class [`CLAIM_LOCK_CLASS`]. `false`: another
/// transaction holds it. Each held lock takes a slot of the shared lock table
/// (`max_locks_per_transaction`); running out is Postgres' own 53200.
pub fn try_claim_lock(scope: &[u8], key: &[u8]) -> errors::Result<bool> {
    let key = lock_key_for(scope, key)? as u64;
    // SAFETY: SET_LOCKTAG_ADVISORY's fields, then a non-blocking, transaction-scoped
    // ExclusiveLock, as pg_try_advisory_xact_lock takes it.
    unsafe {
        let tag = pgrx::pg_sys::LOCKTAG {
            locktag_field1: pgrx::pg_sys::MyDatabaseId.into(),
            locktag_field2: (key >> 32) as u32,
            locktag_field3: key as u32,
            locktag_field4: CLAIM_LOCK_CLASS,
            locktag_type: pgrx::pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
            locktag_lockmethodid: pgrx::pg_sys::USER_LOCKMETHOD as u8,
        };
        let result = pgrx::pg_sys::LockAcquire(
            &tag,
            pgrx::pg_sys::ExclusiveLock as pgrx::pg_sys::LOCKMODE,
            false,
            true,
        );
        Ok(result != pgrx::pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL)
    }
}

/// The 64-bit hash of (scope, key) for the application's own advisory locks (sql/canonical.sql
/// declares it). Since 0.2.0 a
/// claim no longer takes this lock (see [`CLAIM_LOCK_CLASS`]).
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn idem_lock_key_scoped(scope: TextBytes<'_>, key: TextBytes<'_>) -> i64 {
    lock_key_for(scope.bytes(), key.bytes()).or_raise()
}

/// The one-argument form: the scope is the empty string.
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn idem_lock_key(key: TextBytes<'_>) -> i64 {
    lock_key_for(b"", key.bytes()).or_raise()
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// Derived from the layout with an independent XXH3 (Python `xxhash`), as in
    /// crates/idem-canonical/tests/lock_key.rs and docs/hashing.md.
    const VECTORS: &[(&str, &str, i64)] = &[
        ("", "", 5238470482016868669),
        ("", "order-42", 7028550922732861026),
        ("payments", "order-42", 2530444658644277192),
        ("ab", "c", 6998654949397998249),
        ("a", "bc", -2443112935496209536),
        ("tenant:é", "clé-😂", 1773949486370118067),
    ];

    #[pg_test]
    fn lock_key_vectors() {
        for &(scope, key, expected) in VECTORS {
            let got = Spi::get_one::<i64>(&format!("SELECT idem_lock_key('{scope}', '{key}')"));
            assert_eq!(got, Ok(Some(expected)), "{scope:?} {key:?}");
            if scope.is_empty() {
                let got = Spi::get_one::<i64>(&format!("SELECT idem_lock_key('{key}')"));
                assert_eq!(got, Ok(Some(expected)), "{key:?}");
            }
        }
        let got = Spi::get_one::<i64>("SELECT idem_lock_key(repeat('s', 40), repeat('k', 300))");
        assert_eq!(got, Ok(Some(-8142244442764676313)));
    }

    /// A claim of a new key holds `idem_lock_key(scope, key)` in its own class (objsubid
    /// 0x4944), not in the class `pg_advisory_xact_lock(bigint)` uses (1).
    #[pg_test]
    fn a_new_claim_holds_its_key_lock_in_the_claim_class() {
        Spi::run("SELECT idem_claim('lk-class', 'order-42', 'h')").unwrap();
        let held = Spi::get_one::<String>(
            "SELECT string_agg(objsubid::text, ',') FROM pg_locks
             WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
               AND ((classid::int8 << 32) | objid::int8) = idem_lock_key('lk-class', 'order-42')",
        );
        assert_eq!(
            held,
            Ok(Some(crate::entry::lock_key::CLAIM_LOCK_CLASS.to_string()))
        );
        assert_eq!(crate::entry::lock_key::CLAIM_LOCK_CLASS, 0x4944);
    }
}
