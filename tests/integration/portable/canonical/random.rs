//! Random JSON documents for the corpus: the UTF-16 order's corners, escapes, numbers.

use rand::Rng;
use rand::rngs::StdRng;

/// A JSON text: random structure, names and strings from pools that hit the UTF-16 order's
/// corners, escapes in several spellings, numbers across the double range.
pub fn random_doc(rng: &mut StdRng, depth: u32, out: &mut String) {
    let kind = if depth >= 4 {
        rng.random_range(0..4)
    } else {
        rng.random_range(0..7)
    };
    match kind {
        0 => out.push_str(["null", "true", "false"][rng.random_range(0..3)]),
        1 | 2 => random_number(rng, out),
        3 => random_string(rng, out),
        4 => {
            out.push('[');
            for i in 0..rng.random_range(0..5) {
                if i > 0 {
                    out.push_str(if rng.random_bool(0.5) { "," } else { " , " });
                }
                random_doc(rng, depth + 1, out);
            }
            out.push(']');
        }
        _ => {
            out.push('{');
            let mut names = std::collections::HashSet::new();
            for _ in 0..rng.random_range(0..7) {
                let Some(name) = fresh_name(rng, &mut names) else {
                    continue;
                };
                if names.len() > 1 {
                    out.push(',');
                }
                out.push_str(&name);
                out.push_str(if rng.random_bool(0.5) { ":" } else { " : " });
                random_doc(rng, depth + 1, out);
            }
            out.push('}');
        }
    }
}

fn random_number(rng: &mut StdRng, out: &mut String) {
    if rng.random_bool(0.5) {
        out.push('-');
    }
    match rng.random_range(0..4) {
        0 => out.push_str(&rng.random_range(0..100_000u64).to_string()),
        1 => out.push_str(&format!(
            "{}",
            rng.random::<f64>() * 10f64.powi(rng.random_range(-8..22))
        )),
        2 => out.push_str(&format!(
            "{:e}",
            f64::from_bits(rng.random_range(0..0x7FEF_FFFF_FFFF_FFFFu64))
        )),
        _ => {
            let digits: String = (0..rng.random_range(1..30))
                .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
                .collect();
            let digits = digits.trim_start_matches('0');
            out.push_str(if digits.is_empty() { "0" } else { digits });
            if rng.random_bool(0.5) {
                out.push_str(&format!(".{}", rng.random_range(0..1_000_000u32)));
            }
            out.push_str(&format!("e{}", rng.random_range(-340..300)));
        }
    }
}

/// Characters that hit the corners: escapes, controls, U+007F, U+2028, the last before the
/// surrogates, U+E000..U+FFFF, and characters above U+FFFF up to U+10FFFF.
const CHARS: &str =
    "abZ0 \"\\/\u{1}\n\u{1f}\u{7f}éß€\u{2028}\u{d7ff}\u{e000}\u{fffd}\u{ffff}\u{10000}😂\u{10ffff}";

pub fn any_char(rng: &mut StdRng) -> char {
    let n = CHARS.chars().count();
    CHARS.chars().nth(rng.random_range(0..n)).expect("char")
}

/// A random member name (a JSON string) that `seen` does not hold yet, now added to it.
pub fn fresh_name(
    rng: &mut StdRng,
    seen: &mut std::collections::HashSet<String>,
) -> Option<String> {
    let mut name = String::new();
    random_string(rng, &mut name);
    let decoded: serde_json::Value = serde_json::from_str(&name).expect("name");
    seen.insert(decoded.as_str().expect("str").to_string())
        .then_some(name)
}

fn random_string(rng: &mut StdRng, out: &mut String) {
    out.push('"');
    for _ in 0..rng.random_range(0..6) {
        let c = any_char(rng);
        let escape = rng.random_bool(0.3);
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || escape => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{:04X}", u));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
