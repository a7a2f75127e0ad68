//! Property-based fuzzing of the canonicalizer (issue #16, part 3), on stable Rust with
//! proptest. Each property runs twice: with a fixed seed (reproducible in CI) and with a
//! random one (printed on failure; `IDEM_FUZZ_SEED=<hex>` replays it). `IDEM_FUZZ_CASES`
//! sets the cases per run (default 200); docs/fuzzing.md has the long-run command.
//!
//! Properties: no panic on any input (a typed error or a text); the canonical text is JSON
//! (serde_json reads it) and canonicalizes to itself; one value spelled in different ways
//! (member order, white space, escapes, number spellings) gives one text and one hash; the
//! result equals `serde_json_canonicalizer` (an independent RFC 8785 implementation) fed
//! the same value with every number as a double; the text is at most 6 bytes per input byte
//! (+64), the bound the extension relies on to measure before allocating.

mod fuzzgen;

use fuzzgen::{Json, Spelling, json, render, spelling};
use idem_canonical::{ErrorKind, canonicalize_json_text, canonicalize_value, hash_json_text};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use sha2::{Digest, Sha256};

const FIXED_SEED: [u8; 32] = *b"idem-canonical fuzz fixed seed!!";

fn cases() -> u32 {
    std::env::var("IDEM_FUZZ_CASES")
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(200)
}

fn random_seed() -> [u8; 32] {
    if let Ok(hex) = std::env::var("IDEM_FUZZ_SEED") {
        let mut seed = [0u8; 32];
        for (i, b) in seed.iter_mut().enumerate() {
            *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2).unwrap_or("00"), 16).unwrap_or(0);
        }
        return seed;
    }
    let mut seed = [0u8; 32];
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    seed[..16].copy_from_slice(&nanos.to_le_bytes());
    seed[16..24].copy_from_slice(&rng.next_u64().to_le_bytes());
    seed[24..].copy_from_slice(&u64::from(std::process::id()).to_le_bytes());
    seed
}

fn config_cases(fraction: u32) -> u32 {
    (cases() / fraction).max(2)
}

/// Runs `test` on `strategy` with the fixed seed, then with a random one.
fn fuzz<S: Strategy>(name: &str, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    fuzz_some(name, 1, strategy, test);
}

/// [`fuzz`] with `1/fraction` of the cases (for the expensive properties).
fn fuzz_some<S: Strategy>(
    name: &str,
    fraction: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    for seed in [FIXED_SEED, random_seed()] {
        let config = Config {
            cases: config_cases(fraction),
            failure_persistence: None,
            max_shrink_iters: 2000,
            ..Config::default()
        };
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed);
        let hex: String = seed.iter().map(|b| format!("{b:02x}")).collect();
        let started = std::time::Instant::now();
        if let Err(e) = TestRunner::new_with_rng(config, rng).run(&strategy, &test) {
            panic!("{name}: {e}\nreplay with IDEM_FUZZ_SEED={hex}");
        }
        // Shown with --nocapture: what a long run did.
        eprintln!(
            "{name}: {} cases, seed {hex}, {:?}",
            config_cases(fraction),
            started.elapsed()
        );
    }
}

/// The reference: serde_json_canonicalizer on `text` read by serde_json, each number made a
/// double first (RFC 8785 numbers are doubles; the crate would print big integers exactly).
fn reference(text: &str) -> Option<String> {
    fn doubles(v: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match v {
            Value::Number(n) => n
                .as_f64()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .unwrap_or(Value::Null),
            Value::Array(a) => Value::Array(a.into_iter().map(doubles).collect()),
            Value::Object(o) => {
                Value::Object(o.into_iter().map(|(k, v)| (k, doubles(v))).collect())
            }
            other => other,
        }
    }
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    serde_json_canonicalizer::to_string(&doubles(value)).ok()
}

/// Every property of one successful canonicalization of `input` (text `out`).
fn check_output(input: &str, out: &str) -> Result<(), TestCaseError> {
    let parsed: serde_json::Value = serde_json::from_str(out)
        .map_err(|e| TestCaseError::fail(format!("output is not JSON ({e}): {out}")))?;
    prop_assert_eq!(
        canonicalize_json_text(out),
        Ok(out.to_owned()),
        "not a fixpoint"
    );
    prop_assert_eq!(
        canonicalize_value(&parsed),
        Ok(out.to_owned()),
        "value path"
    );
    let digest: [u8; 32] = Sha256::digest(out.as_bytes()).into();
    prop_assert_eq!(
        hash_json_text(input),
        Ok(digest),
        "hash is not SHA-256 of the text"
    );
    prop_assert!(out.len() <= 6 * input.len() + 64, "expansion bound");
    match reference(input) {
        Some(expected) => prop_assert_eq!(out, expected.as_str(), "reference"),
        None => prop_assert!(false, "serde_json refuses what we accept: {}", input),
    }
    Ok(())
}

#[test]
fn generated_values_agree_with_the_reference() {
    fuzz("generated", (json(), spelling()), |(value, how)| {
        let text = render(&value, &how);
        match canonicalize_json_text(&text) {
            Ok(out) => check_output(&text, &out),
            // Numbers beyond the doubles are refused alike, whatever their spelling.
            Err(e) if e.kind() == ErrorKind::NumberOutOfRange => {
                prop_assert!(value.has_huge_number(), "{e}: {text}");
                prop_assert!(reference(&text).is_none());
                Ok(())
            }
            Err(e) => Err(TestCaseError::fail(format!("{e}: {text}"))),
        }
    });
}

#[test]
fn spellings_of_one_value_are_equal() {
    fuzz(
        "spellings",
        (json(), spelling(), spelling()),
        |(value, a, b)| {
            let (ta, tb) = (render(&value, &a), render(&value, &b));
            let kind = |e: idem_canonical::Error| e.kind();
            let ca = canonicalize_json_text(&ta).map_err(kind);
            let cb = canonicalize_json_text(&tb).map_err(kind);
            prop_assert_eq!(&ca, &cb, "{} vs {}", ta, tb);
            prop_assert_eq!(
                hash_json_text(&ta).map_err(kind),
                hash_json_text(&tb).map_err(kind)
            );
            Ok(())
        },
    );
}

/// Valid documents with bytes replaced, inserted or cut, and lone surrogates planted: never a
/// panic; a text only if it passes every check; an error only where serde_json errs too
/// (or on a duplicate name, which serde_json keeps and RFC 8785 refuses).
#[test]
fn mutated_documents_never_panic() {
    let edit = (any::<prop::sample::Index>(), 0usize..6, any::<u8>());
    fuzz(
        "mutated",
        (json(), spelling(), prop::collection::vec(edit, 1..4)),
        |(value, how, edits)| {
            let mut bytes = render(&value, &how).into_bytes();
            for (at, op, byte) in edits {
                let i = at.index(bytes.len() + 1);
                match op {
                    0 if i < bytes.len() => bytes[i] = byte,
                    1 => bytes.insert(i, byte),
                    2 if i < bytes.len() => drop(bytes.remove(i)),
                    3 => bytes.truncate(i),
                    4 => splice(
                        &mut bytes,
                        i,
                        [&b"\\ud800"[..], b"\\udc00", b"\\ud800\\u0041"],
                    ),
                    _ => splice(
                        &mut bytes,
                        i,
                        [&b"{\"a\":1,\"a\":1}"[..], b"[", b"\"", b"1e999"],
                    ),
                }
            }
            let Ok(text) = std::str::from_utf8(&bytes) else {
                let err = idem_canonical::hash_json_bytes(&bytes).unwrap_err();
                prop_assert_eq!(err.kind(), ErrorKind::Untranslatable);
                return Ok(());
            };
            match canonicalize_json_text(text) {
                Ok(out) => check_output(text, &out),
                Err(e) if e.kind() == ErrorKind::DuplicateKey => Ok(()),
                Err(e) => {
                    prop_assert!(
                        reference(text).is_none(),
                        "{} but serde_json accepts: {}",
                        e,
                        text
                    );
                    prop_assert_eq!(hash_json_text(text).unwrap_err().kind(), e.kind());
                    Ok(())
                }
            }
        },
    );
}

fn splice<const N: usize>(bytes: &mut Vec<u8>, at: usize, choices: [&[u8]; N]) {
    let piece = choices[at % N];
    bytes.splice(at..at, piece.iter().copied());
}

/// Deep nesting, with a scalar or an empty container at the bottom: up to the limit the
/// canonical text, beyond it 54001.
#[test]
fn deep_nesting() {
    let shape = (
        1usize..2 * idem_canonical::MAX_DEPTH,
        any::<bool>(),
        prop::sample::select(vec!["1", "[]", "{}", "\"x\""]),
    );
    fuzz_some("deep", 10, shape, |(depth, objects, leaf)| {
        let (open, close) = if objects {
            ("{\"k\": ", "}")
        } else {
            ("[ ", "]")
        };
        let text = format!("{}{leaf}{}", open.repeat(depth), close.repeat(depth));
        let got = canonicalize_json_text(&text);
        if depth + usize::from(leaf.len() == 2) > idem_canonical::MAX_DEPTH {
            prop_assert_eq!(got.map_err(|e| e.sqlstate()), Err("54001"));
        } else {
            prop_assert_eq!(got, Ok(text.replace(' ', "")));
        }
        Ok(())
    });
}

/// A few values chosen to be large: long strings of every escape, many members.
#[test]
fn big_values() {
    let big = (0usize..100_000, 0usize..3_000, spelling());
    fuzz_some("big", 25, big, |(len, members, how)| {
        let s: String = "a\u{0}\u{1f}\"\\/\u{7f}\u{2028}é😂"
            .chars()
            .cycle()
            .take(len)
            .collect();
        let mut object: Vec<(String, Json)> = (0..members)
            .map(|i| (format!("k{i}"), Json::Num(i as f64, 0)))
            .collect();
        object.push(("s".into(), Json::Str(s)));
        let text = render(&Json::Obj(object), &how);
        let out = canonicalize_json_text(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        check_output(&text, &out)
    });
}

impl std::fmt::Debug for Spelling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Spelling({:?})", self.seed)
    }
}
