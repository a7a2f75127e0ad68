//! The crate's hooks for its host (security audit, issue #11, finding 8): the interrupt hook
//! is called in every loop that can run long (so a database can cancel), a hook that unwinds
//! leaves the crate usable, and a full sink stops the writers with `TooLarge` at once.
//! One test: the hook is process-wide and counts calls.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use idem_canonical::{
    ErrorKind, Sink, canonicalize_json_text, hash_json_text, set_interrupt_hook,
    write_value_canonical,
};

static CALLS: AtomicUsize = AtomicUsize::new(0);
static CANCEL: AtomicBool = AtomicBool::new(false);

fn hook() {
    CALLS.fetch_add(1, Ordering::Relaxed);
    if CANCEL.load(Ordering::Relaxed) {
        panic!("cancelled");
    }
}

fn calls_during(text: &str) -> usize {
    let before = CALLS.load(Ordering::Relaxed);
    hash_json_text(text).expect("valid JSON");
    CALLS.load(Ordering::Relaxed) - before
}

const MIB: usize = 1 << 20;

#[test]
fn hooks_and_limits() {
    set_interrupt_hook(hook);

    // Scans inside one token: a call per MiB at least.
    let cases = [
        ("white space", format!("[{}1]", " ".repeat(8 * MIB))),
        ("digits", format!("[1.{}]", "5".repeat(8 * MIB))),
        ("plain string", format!("\"{}\"", "x".repeat(8 * MIB))),
        ("escaped string", format!("\"{}\"", "\\n".repeat(4 * MIB))),
    ];
    for (what, text) in &cases {
        let calls = calls_during(text);
        assert!(calls >= 8, "{what}: {calls} calls");
    }
    // Many tokens: a call per 4096.
    let nulls = format!("[{}null]", "null,".repeat(1 << 20));
    assert!(calls_during(&nulls) >= (1 << 20) / 4096);
    // One wide object: its member collection and sort check too (n log n comparisons), far
    // more often than its ~2n tokens alone would.
    let n = 200_000;
    let wide: Vec<String> = (0..n).rev().map(|i| format!("\"k{i}\":{i}")).collect();
    let wide = format!("{{{}}}", wide.join(","));
    let calls = calls_during(&wide);
    assert!(calls >= 400, "wide object: {calls} calls");
    let value: serde_json::Value = serde_json::from_str(&wide).expect("serde_json");
    // (serde_json's map is already in order: the sort is quick there.)
    let before = CALLS.load(Ordering::Relaxed);
    idem_canonical::hash_value(&value).expect("value");
    let calls = CALLS.load(Ordering::Relaxed) - before;
    assert!(calls >= n / 4096, "value: {calls} calls");

    // A hook that unwinds (a cancelled statement) stops the work; the crate stays usable.
    CANCEL.store(true, Ordering::Relaxed);
    for text in [&nulls, &wide, &cases[0].1] {
        let cancelled = catch_unwind(AssertUnwindSafe(|| canonicalize_json_text(text)));
        assert!(cancelled.is_err(), "not cancelled");
    }
    CANCEL.store(false, Ordering::Relaxed);
    assert_eq!(
        canonicalize_json_text("{\"b\":1,\"a\":2}").as_deref(),
        Ok("{\"a\":2,\"b\":1}")
    );

    // A full sink stops the writers within one token of its limit.
    let doc = idem_canonical::Document::parse(&nulls).expect("parse");
    let mut capped = Capped {
        len: 0,
        limit: 1000,
    };
    let err = doc.write_canonical(&mut capped).map(drop).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge);
    assert_eq!(err.sqlstate(), "54000");
    assert!(capped.len <= 1000 + 8, "wrote {} bytes", capped.len);
    let mut capped = Capped {
        len: 0,
        limit: 1000,
    };
    let err = write_value_canonical(&value, &mut capped)
        .map(drop)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge);
    assert!(capped.len <= 1000 + 32, "wrote {} bytes", capped.len);
}

/// A sink that is full past `limit` bytes (and counts what it was given).
struct Capped {
    len: usize,
    limit: usize,
}

impl Sink for Capped {
    fn write(&mut self, bytes: &[u8]) {
        self.len += bytes.len();
    }

    fn is_full(&self) -> bool {
        self.len > self.limit
    }
}
