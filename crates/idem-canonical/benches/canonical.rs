//! Canonicalize / hash ~1 KB order-like documents (the same shape as bench/hash_vs_sha256.sql).
//! Run: cargo bench -p idem-canonical

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sha2::{Digest, Sha256};

/// An order document like the SQL benchmark's, ~1 KB, keys in a non-canonical order.
pub fn order(i: u64) -> String {
    let items: Vec<String> = (0..4)
        .map(|j| {
            format!(
                r#"{{"sku":"SKU-{:05}","name":"Widget {} – série {}","qty":{},"unit_price":{}.{:02},"discount":0.{},"tags":["blue","large","gift"]}}"#,
                (i * 7 + j) % 100_000,
                j,
                i % 13,
                1 + (i + j) % 5,
                (i * 31 + j) % 500,
                (i + j) % 100,
                (i + j) % 3
            )
        })
        .collect();
    format!(
        r#"{{"order_id":"ord_{i:012}","created_at":"2026-11-22T10:{:02}:{:02}Z","customer":{{"id":{},"email":"customer{}@example.com","name":"Zoë O'Brien","vip":{}}},"items":[{}],"shipping":{{"method":"express","address":{{"street":"{} Rue de l'Église","city":"Zürich","zip":"80{:02}","country":"CH"}},"cost":9.9}},"currency":"EUR","total":{}.{:02},"coupon":null,"notes":"Leave at the door\nRing twice","trace_id":"{:016x}"}}"#,
        i % 60,
        (i * 7) % 60,
        100_000 + i,
        i,
        i.is_multiple_of(2),
        items.join(","),
        i % 200,
        i % 100,
        100 + i % 900,
        i % 100,
        i.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    )
}

fn bench(c: &mut Criterion) {
    let docs: Vec<String> = (0..256).map(order).collect();
    let bytes: usize = docs.iter().map(String::len).sum();
    println!(
        "{} documents, {} bytes on average",
        docs.len(),
        bytes / docs.len()
    );
    let mut group = c.benchmark_group("order-1KB");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("sha256(raw text) [baseline]", |b| {
        b.iter(|| {
            for d in &docs {
                black_box(Sha256::digest(d.as_bytes()));
            }
        })
    });
    group.bench_function("canonicalize_json_text", |b| {
        b.iter(|| {
            for d in &docs {
                black_box(idem_canonical::canonicalize_json_text(d).unwrap());
            }
        })
    });
    group.bench_function("hash_json_text", |b| {
        b.iter(|| {
            for d in &docs {
                black_box(idem_canonical::hash_json_text(d).unwrap());
            }
        })
    });
    let values: Vec<serde_json::Value> = docs
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    group.bench_function("hash_value (serde_json::Value)", |b| {
        b.iter(|| {
            for v in &values {
                black_box(idem_canonical::hash_value(v).unwrap());
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
