//! Lock-key vectors computed with an independent XXH3 implementation (Python `xxhash` 3.x,
//! `xxh3_64_intdigest(bytes, seed=0)`, reinterpreted as signed) over the documented layout.

use idem_canonical::{lock_key, lock_key_bytes, to_hex};

pub const VECTORS: &[(&str, &str, &str, i64)] = &[
    ("", "", "00000000", 5238470482016868669),
    (
        "",
        "order-42",
        "000000006f726465722d3432",
        7028550922732861026,
    ),
    (
        "payments",
        "order-42",
        "080000007061796d656e74736f726465722d3432",
        2530444658644277192,
    ),
    ("ab", "c", "02000000616263", 6998654949397998249),
    ("a", "bc", "01000000616263", -2443112935496209536),
    (
        "tenant:é",
        "clé-😂",
        "0900000074656e616e743ac3a9636cc3a92df09f9882",
        1773949486370118067,
    ),
];

#[test]
fn vectors() {
    for &(scope, key, bytes, expected) in VECTORS {
        assert_eq!(to_hex(&lock_key_bytes(scope, key).unwrap()), bytes);
        assert_eq!(lock_key(scope, key).unwrap(), expected, "{scope:?} {key:?}");
    }
    // Beyond the 256-byte stack buffer.
    let (scope, key) = ("s".repeat(40), "k".repeat(300));
    assert_eq!(lock_key(&scope, &key).unwrap(), -8142244442764676313);
}

/// Keys past the stack buffer are streamed into XXH3 a MiB at a time (no copy of a long key):
/// the same hash as one-shot XXH3 over the documented layout, at every size boundary.
#[test]
fn streamed_equals_one_shot() {
    let sizes = [
        (0, 253),
        (0, 300),
        (40, 2000),
        (1 << 20, 5),
        (3, (2 << 20) + 7),
    ];
    for (scope_len, key_len) in sizes {
        let scope = "s".repeat(scope_len);
        let key: String = (0..key_len)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let layout = lock_key_bytes(&scope, &key).unwrap();
        let one_shot = xxhash_rust::xxh3::xxh3_64(&layout) as i64;
        assert_eq!(
            lock_key(&scope, &key).unwrap(),
            one_shot,
            "{scope_len} {key_len}"
        );
    }
}
