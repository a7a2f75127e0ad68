//! Containers of 4 kB and more, which the portable idem_canonical(jsonb) takes a level at a time
//! (`_idem_jcs_rows`): lists of records written name by name (the same names; names missing
//! from some records; a name that the first 8 records do not have, which sends the list down the
//! general path; nested containers under a name, batched when the first 8 records hold one
//! there and called one by one when they do not; lists of records inside records), lists of
//! anything, large objects, and lists where some items take the fast path and others do not.
//! Names come from a pool that hits the UTF-16 order's corners and escapes; values are the
//! random corpus's. Every document must give the native bytes, as jsonb, as json and hashed.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::compare;
use super::random::{fresh_name, random_doc};

const NAMES: &[&str] = &[
    r#""""#,
    r#""a""#,
    r#""aa""#,
    r#""a b""#,
    r#""B""#,
    r#""amount""#,
    r#""customer_email""#,
    r#""\u00e9""#,
    r#""\uE000""#,
    r#""\uD83D\uDE00""#,
    r#""\uFFFF""#,
    r#""q\"q""#,
    r#""\\""#,
    r#""\n""#,
];

/// A record: `names` (JSON strings) with random values; a value is a container with
/// probability `nested`.
fn record(rng: &mut StdRng, names: &[&str], nested: f64, out: &mut String) {
    out.push('{');
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(name);
        out.push_str(": ");
        if rng.random_bool(nested) {
            random_doc(rng, 2, out);
        } else {
            random_doc(rng, 4, out);
        }
    }
    out.push('}');
}

/// At least 4 kB of items made by `item`, as a JSON array.
fn list(rng: &mut StdRng, mut item: impl FnMut(&mut StdRng, usize, &mut String)) -> String {
    let mut out = String::from("[");
    let mut i = 0;
    while out.len() < 4096 || i < 9 {
        if i > 0 {
            out.push_str(", ");
        }
        item(rng, i, &mut out);
        i += 1;
    }
    out.push(']');
    out
}

fn pick<'a>(rng: &mut StdRng, k: usize) -> Vec<&'a str> {
    let mut names: Vec<&str> = NAMES.to_vec();
    for i in 0..names.len() {
        names.swap(i, rng.random_range(i..NAMES.len()));
    }
    names.truncate(k);
    names
}

#[test]
fn lists_of_records_and_large_containers() {
    let mut rng = StdRng::seed_from_u64(0x4B1D5);
    let mut cases: Vec<String> = Vec::new();
    for _ in 0..12 {
        // The same names in every record, with nested values now and then.
        let k = rng.random_range(1..9);
        let names = pick(&mut rng, k);
        let nested = [0.0, 0.1, 0.5][rng.random_range(0..3)];
        cases.push(list(&mut rng, |rng, _, out| {
            record(rng, &names, nested, out)
        }));
        // Some names missing from some records.
        cases.push(list(&mut rng, |rng, _, out| {
            let some: Vec<&str> = names
                .iter()
                .copied()
                .filter(|_| rng.random_bool(0.7))
                .collect();
            record(rng, &some, nested, out)
        }));
        // A name that none of the first 8 records has: the general path.
        let extra = pick(&mut rng, NAMES.len());
        cases.push(list(&mut rng, |rng, i, out| {
            let mut these = names.clone();
            if i >= 8 && rng.random_bool(0.2) {
                these.extend(extra.iter().filter(|n| !names.contains(n)).take(1));
            }
            record(rng, &these, nested, out)
        }));
        // A container under a name only after the first 8 records (called one by one), and
        // lists of records inside records.
        cases.push(list(&mut rng, |rng, i, out| {
            out.push_str(r#"{"id": "#);
            out.push_str(&i.to_string());
            out.push_str(r#", "late": "#);
            if i >= 8 && i % 3 == 0 {
                random_doc(rng, 1, out);
            } else {
                out.push_str("1.50");
            }
            out.push_str(r#", "lines": ["#);
            for j in 0..rng.random_range(0..4) {
                if j > 0 {
                    out.push_str(", ");
                }
                record(rng, &names, 0.2, out);
            }
            out.push_str("]}");
        }));
        // Lists of anything, and large objects.
        cases.push(list(&mut rng, |rng, _, out| random_doc(rng, 1, out)));
        let mut object = String::from("{");
        let mut seen = std::collections::HashSet::new();
        while object.len() < 4096 {
            let Some(name) = fresh_name(&mut rng, &mut seen) else {
                continue;
            };
            if seen.len() > 1 {
                object.push_str(", ");
            }
            object.push_str(&name);
            object.push_str(": ");
            random_doc(&mut rng, 1, &mut object);
        }
        object.push('}');
        cases.push(object);
        // Items the fast path takes (chains, single members) among items it does not.
        cases.push(list(&mut rng, |rng, i, out| {
            match (i + rng.random_range(0..2)) % 4 {
                0 => out.push_str(r#"[[[1, "a"]], {"a": {"b": [2.5]}}]"#),
                1 => out.push_str(r#"{"k": [{"a": 1}, [[[[1e2]]]]]}"#),
                2 => out.push_str(r#"[{"bb": 1, "a": 2}, 1.50]"#),
                _ => random_doc(rng, 2, out),
            }
        }));
    }
    // Numbers beyond the doubles: the error names the first in output order, also when a
    // nested column's (made first, by one call) comes later in the text.
    for (first, later) in [("1e400", "-2e400"), ("-3e999", "4e400")] {
        cases.push(list(&mut rng, |_, i, out| {
            let (a, x) = match i {
                3 => (first, "1"),
                5 => ("1", later),
                _ => ("1", "2"),
            };
            out.push_str(&format!(
                r#"{{"a": {a}, "n": {{"x": {x}, "y": [1.50]}}, "pad": "{i:040}"}}"#
            ));
        }));
    }
    for case in &cases {
        assert!(case.len() >= 4096, "a case under 4 kB: {case}");
    }
    let n = compare("{s}.idem_canonical($1::jsonb)", &cases);
    compare("{s}.idem_canonical($1::json)", &cases);
    compare("{s}.idem_hash($1::jsonb)", &cases);
    eprintln!("lists_of_records_and_large_containers: {n} documents");
}
