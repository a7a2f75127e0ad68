//! Randomized differential tests (deterministic seed): generated documents are canonicalized
//! and compared with the serde_json::Value path, checked for idempotence, and mutated byte by
//! byte to make sure malformed input gives an error, never a panic, and that whatever
//! serde_json accepts we accept with the same result.

use idem_canonical::{ErrorKind, canonicalize_json_text, canonicalize_value};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const PIECES: &[&str] = &[
    "a",
    "b",
    "é",
    "€",
    "😂",
    "\u{e000}",
    "\u{ffff}",
    "\\n",
    "\\\"",
    "\\\\",
    "\\u0000",
    "\\u001f",
    "\\ud83d\\ude02",
    "\\u00e9",
    "\\/",
    "\u{7f}",
    "\u{2028}",
    " ",
    "10",
    "1",
];

fn gen_string(rng: &mut Rng, out: &mut String) {
    out.push('"');
    for _ in 0..rng.below(4) {
        out.push_str(PIECES[rng.below(PIECES.len() as u64) as usize]);
    }
    out.push('"');
}

fn gen_number(rng: &mut Rng, out: &mut String) {
    match rng.below(5) {
        0 => out.push_str(&rng.below(1000).to_string()),
        1 => out.push_str(&format!("-{}.{:02}", rng.below(100000), rng.below(100))),
        2 => out.push_str(&format!(
            "{}e{}",
            rng.below(99) + 1,
            rng.below(600) as i64 - 320
        )),
        3 => out.push_str(&format!("{}", f64::from_bits(rng.next() >> 2))),
        _ => out.push_str(&format!("{}", rng.next())),
    }
}

fn gen_value(rng: &mut Rng, depth: u32, out: &mut String) {
    let ws = |rng: &mut Rng, out: &mut String| {
        if rng.below(4) == 0 {
            out.push_str(" \n\t\r"[..rng.below(4) as usize + 1].as_ref());
        }
    };
    ws(rng, out);
    match if depth > 4 {
        rng.below(5)
    } else {
        rng.below(7)
    } {
        0 => out.push_str("null"),
        1 => out.push_str(if rng.below(2) == 0 { "true" } else { "false" }),
        2 => gen_number(rng, out),
        3 | 4 => gen_string(rng, out),
        5 => {
            out.push('[');
            for i in 0..rng.below(5) {
                if i > 0 {
                    out.push(',');
                }
                gen_value(rng, depth + 1, out);
            }
            out.push(']');
        }
        _ => {
            out.push('{');
            let mut names = std::collections::HashSet::new();
            let mut first = true;
            for _ in 0..rng.below(6) {
                let mut name = String::new();
                gen_string(rng, &mut name);
                let decoded: String = serde_json::from_str(&name).unwrap();
                if !names.insert(decoded) {
                    continue;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                ws(rng, out);
                out.push_str(&name);
                ws(rng, out);
                out.push(':');
                gen_value(rng, depth + 1, out);
            }
            out.push('}');
        }
    }
    ws(rng, out);
}

#[test]
fn generated_documents_agree_with_serde_json() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for _ in 0..5000 {
        let mut text = String::new();
        gen_value(&mut rng, 0, &mut text);
        let ours = canonicalize_json_text(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(ours, canonicalize_value(&value).unwrap(), "{text}");
        assert_eq!(
            canonicalize_json_text(&ours).unwrap(),
            ours,
            "idempotent: {text}"
        );
    }
}

#[test]
fn mutated_documents_never_panic() {
    let mut rng = Rng(0x0bad_cafe_f00d_0001);
    const BYTES: &[u8] = b"{}[]\",:\\u0123456789abcdefABCDEF-+.eEtrufalsn \n";
    let mut accepted = 0;
    for _ in 0..20000 {
        let mut text = String::new();
        gen_value(&mut rng, 0, &mut text);
        let mut bytes = text.into_bytes();
        for _ in 0..rng.below(3) + 1 {
            if bytes.is_empty() {
                break;
            }
            let at = rng.below(bytes.len() as u64) as usize;
            match rng.below(3) {
                0 => bytes[at] = BYTES[rng.below(BYTES.len() as u64) as usize],
                1 => {
                    bytes.remove(at);
                }
                _ => bytes.insert(at, BYTES[rng.below(BYTES.len() as u64) as usize]),
            }
        }
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        let ours = canonicalize_json_text(&text);
        match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(value) => {
                // serde_json keeps the last of duplicate names; we refuse them.
                match ours {
                    Ok(ours) => {
                        accepted += 1;
                        assert_eq!(ours, canonicalize_value(&value).unwrap(), "{text}");
                    }
                    Err(e) => assert_eq!(e.kind(), ErrorKind::DuplicateKey, "{text}: {e}"),
                }
            }
            Err(serde_err) => {
                let e = match ours {
                    Ok(o) => panic!("{text:?} accepted as {o:?}, serde_json: {serde_err}"),
                    Err(e) => e,
                };
                let msg = serde_err.to_string();
                let ok = match e.kind() {
                    ErrorKind::NumberOutOfRange => msg.contains("out of range"),
                    // serde_json calls some lone surrogates a bad hex escape.
                    ErrorKind::Untranslatable => {
                        msg.contains("surrogate") || msg.contains("hex escape")
                    }
                    ErrorKind::Syntax => !msg.contains("out of range"),
                    _ => false,
                };
                assert!(ok, "{text:?}: ours {e}, serde_json {serde_err}");
            }
        }
    }
    assert!(accepted > 1000, "{accepted}");
}
