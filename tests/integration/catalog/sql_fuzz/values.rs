//! The fuzzer's arguments: random and hostile values for each parameter type.

use rand::Rng;
use rand::rngs::StdRng;

use super::Function;

/// One argument: a value as text (cast to the parameter's type in SQL), or raw bytes (SQL_ASCII
/// databases only), or NULL.
#[derive(Clone)]
pub(super) enum Arg {
    Null,
    Text(String),
    Bytes(Vec<u8>),
}

impl Arg {
    pub(super) fn show(&self) -> String {
        match self {
            Arg::Null => "NULL".into(),
            Arg::Text(t) if t.len() > 80 => {
                let cut: String = t.chars().take(60).collect();
                format!("'{cut}…' ({} bytes)", t.len())
            }
            Arg::Text(t) => format!("'{t}'"),
            Arg::Bytes(b) if b.len() > 40 => {
                format!("bytes {:02x?}… ({} bytes)", &b[..20], b.len())
            }
            Arg::Bytes(b) => format!("bytes {b:02x?}"),
        }
    }
}

pub(super) struct Gen {
    pub(super) rng: StdRng,
    pub(super) ascii_db: bool,
    pub(super) huge: bool,
    /// The scope and key of the last claim, and whether this call finishes it (so that
    /// completes, fails and checkpoints meet a `processing` record, not only missing ones).
    pub(super) last: Option<(String, String)>,
    pub(super) finish_last: bool,
}

const SCOPES: &[&str] = &["s", "t", "tenant/a", "ü"];
const KEYS: &[&str] = &["k1", "k2", "k3", "order-7"];

impl Gen {
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.rng.random_range(0..items.len())]
    }

    fn repeat(&mut self, unit: &str, bytes: usize) -> String {
        unit.repeat(bytes / unit.len().max(1) + 1)[..bytes].to_string()
    }

    fn text(&mut self, name: &str) -> Arg {
        // The layout's switches (kind, step) mostly valid, so that they get past their checks.
        let pool_hit = matches!(name, "kind" | "step") || self.rng.random_bool(0.55);
        if pool_hit {
            let v = match name {
                "scope" | "consumer" | "stream" | "topic" => self.pick(SCOPES),
                "key" | "message_id" | "entity" | "dedupe_key" => self.pick(KEYS),
                "request_hash" | "message_hash" => self.pick(&["h1", "h2", "sha256:00"]),
                "sqlstate" => self.pick(&[
                    "40001", "40P01", "P4002", "XX000", "0800", "080000", "08006", "57014",
                    "p4002", "ab_de",
                ]),
                "profile" => self.pick(&[
                    "app",
                    "publisher",
                    "monitor",
                    "admin",
                    "",
                    "APP",
                    "app; drop",
                ]),
                "claimed_by" => self.pick(&["worker-1", "w2"]),
                "kind" => self.pick(&["generations", "flat", "daily"]),
                "step" => self.pick(&["switch", "rotate", "x"]),
                _ => self.pick(&["x", "42", "{}", "worker", "timeout"]),
            };
            return Arg::Text(v.to_string());
        }
        let hostile = match self.rng.random_range(0..16) {
            0 => String::new(),
            1 => " \t\n\r ".into(),
            2 => self.repeat("a", 255),
            3 => self.repeat("b", 256),
            4 => self.repeat("é", 256), // 2-byte characters around the byte limits
            5 => self.repeat("m", 8192),
            6 => self.repeat("n", 8193),
            7 => self.repeat("q", 1 << 20),
            8 => "'; DROP TABLE idempotency.requests; --".into(),
            9 => "%s%n%x\\\\\"'".into(),
            10 => "\u{2028}\u{feff}\u{10ffff}🦀".into(),
            11 => "e\u{301}".into(),
            12 if self.huge && self.rng.random_bool(0.02) => self.repeat("z", 100 << 20),
            13 if self.ascii_db => {
                let raw: &[&[u8]] = &[
                    b"\xff\xfe",
                    b"\xc3",
                    b"\xed\xa0\x80",
                    b"a\x80b",
                    b"\xf4\x90\x80\x80",
                ];
                return Arg::Bytes(raw[self.rng.random_range(0..raw.len())].to_vec());
            }
            14 => "\\u0000".into(),
            _ => format!("{}", self.rng.random::<u64>()),
        };
        Arg::Text(hostile)
    }

    fn nested(&mut self, depth: usize, object: bool) -> String {
        let (open, close) = if object { ("{\"a\":", "}") } else { ("[", "]") };
        format!("{}1{}", open.repeat(depth), close.repeat(depth))
    }

    fn json(&mut self, name: &str) -> Arg {
        if name == "headers" && self.rng.random_bool(0.5) {
            let v = self.pick(&[
                "{}",
                "{\"retry-after\":\"1\"}",
                "{\"a\":1}",
                "[]",
                "\"x\"",
                "{\"bad\\nname\":\"v\"}",
                "{\"x\":\"a\\r\\nb\"}",
            ]);
            return Arg::Text(v.into());
        }
        let v = match self.rng.random_range(0..24) {
            0 => "{}".into(),
            1 => "[]".into(),
            2 => "null".into(),
            3 => "\"\"".into(),
            4 => "{\"b\":2,\"a\":[1,2.50,-0,1e2]}".into(),
            5 => "1e308".into(),
            6 => "1e400".into(),
            7 => "-1e-400".into(),
            8 => "123456789012345678901234567890.5".into(),
            9 => "\"\\ud800\"".into(),
            10 => "\"\\u0000\"".into(),
            11 => "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u2028\\ud83e\\udd80\"".into(),
            12 => "{\"a\":1,\"a\":2}".into(),
            13 => self.nested(100, false),
            14 => self.nested(1000, true),
            15 => self.nested(6000, false),
            16 => self.nested(20000, false),
            17 => {
                let object = self.rng.random_bool(0.5);
                self.nested(200_000, object)
            }
            18 => format!("\"{}\"", self.repeat("j", 1 << 20)),
            19 => format!("[{}]", vec!["0.1"; 50_000].join(",")),
            20 => format!(
                "{{{}}}",
                (0..3000)
                    .map(|i| format!("\"k{i:05}\":{i}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            21 => "{\"status\":200,\"headers\":{},\"body\":\"ok\"}".into(),
            22 => "not json".into(),
            _ => "[1,\"two\",{\"3\":[true,false,null]}]".into(),
        };
        Arg::Text(v)
    }

    /// A well-formed value of `ty` for an argument called `name`, from small pools, so that
    /// calls get past the input rules and meet each other's records.
    fn valid(&mut self, name: &str, ty: &str) -> Arg {
        let v: String = match (name, ty) {
            (_, "text") => return self.pooled_text(name),
            ("headers", _) => "{}".into(),
            // Finishing the last claim: an HTTP response, which idem_http_fail needs (idem_complete
            // takes any document); else as often as not.
            ("response", _) if self.finish_last || self.rng.random_bool(0.5) => self
                .pick(&[
                    "{\"status\":500,\"headers\":{},\"body\":\"down\"}",
                    "{\"status\":409,\"headers\":{\"content-type\":\"text/plain\"},\"body\":null}",
                ])
                .into(),
            (_, "jsonb" | "json") => self
                .pick(&[
                    "{}",
                    "{\"amount\":10,\"currency\":\"EUR\"}",
                    "[1,2]",
                    "{\"b\":2,\"a\":1}",
                ])
                .into(),
            // NULL: the current attempt, which is what most callers pass.
            ("attempt", _) if self.rng.random_bool(0.7) => return Arg::Null,
            ("attempt", _) => self.pick(&["1", "2"]).into(),
            ("status", _) => self.pick(&["200", "201", "404", "500"]).into(),
            (_, "integer") => self.pick(&["1", "10", "100"]).into(),
            (_, "bigint") => self.pick(&["1", "2", "3", "5", "8"]).into(),
            (_, "bigint[]") => self.pick(&["{1,2,3}", "{4}", "{}"]).into(),
            (_, "boolean") => self.pick(&["true", "false"]).into(),
            ("wait", _) => self.pick(&["0", "5 ms"]).into(),
            ("lock_wait", _) => self.pick(&["1 min", "10 ms", "0"]).into(),
            ("lease", _) => self
                .pick(&["30 s", "1 min", "10 ms", "1 microsecond"])
                .into(),
            (_, "interval") => self.pick(&["1 day", "1 min", "0", "10 ms"]).into(),
            (_, "timestamp with time zone") => self.pick(&["now", "2026-11-23 12:00+00"]).into(),
            (_, "regprocedure") => self
                .pick(&[
                    "fuzz.effect(jsonb)",
                    "fuzz.fails(jsonb)",
                    "fuzz.retryable(jsonb)",
                    "fuzz.returns_null(jsonb)",
                ])
                .into(),
            (_, "regrole") => "fuzz_app".into(),
            (_, "text[]") => "{amount}".into(),
            _ => return self.arg(name, ty),
        };
        Arg::Text(v)
    }

    fn pooled_text(&mut self, name: &str) -> Arg {
        if let (true, Some((scope, key))) = (self.finish_last, &self.last) {
            match name {
                "scope" => return Arg::Text(scope.clone()),
                "key" => return Arg::Text(key.clone()),
                _ => {}
            }
        }
        let v = match name {
            "scope" | "consumer" | "stream" | "topic" => self.pick(SCOPES),
            "key" | "message_id" | "entity" | "dedupe_key" => self.pick(KEYS),
            "request_hash" | "message_hash" => self.pick(&["h1", "h2"]),
            "sqlstate" => self.pick(&["40001", "40P01", "P4002", "XX000", "08006", "57014"]),
            "profile" => self.pick(&["app", "publisher", "monitor", "upkeep"]),
            "claimed_by" => self.pick(&["worker-1", "w2"]),
            "code" => self.pick(&["E_CARD", "timeout"]),
            _ => self.pick(&["x", "step-2", "down"]),
        };
        Arg::Text(v.to_string())
    }

    /// The arguments of one call: all well-formed, or well-formed but one, or all random.
    pub(super) fn args(&mut self, f: &Function) -> Vec<Arg> {
        let n = f.args.len();
        let mode = self.rng.random_range(0..10);
        let odd = if n > 0 {
            self.rng.random_range(0..n)
        } else {
            0
        };
        f.args
            .iter()
            .enumerate()
            .map(|(i, (name, ty))| match mode {
                0..=3 => self.valid(name, ty),
                4..=8 if i != odd => self.valid(name, ty),
                _ => self.arg(name, ty),
            })
            .collect()
    }

    fn arg(&mut self, name: &str, ty: &str) -> Arg {
        if self.rng.random_bool(0.12) {
            return Arg::Null;
        }
        let v: String = match ty {
            "text" => return self.text(name),
            "jsonb" | "json" => return self.json(name),
            "integer" => self
                .pick(&[
                    "0",
                    "1",
                    "2",
                    "3",
                    "-1",
                    "100",
                    "1000",
                    "2147483647",
                    "-2147483648",
                    "2147483648",
                    "x",
                ])
                .into(),
            "bigint" => self
                .pick(&[
                    "0",
                    "1",
                    "-1",
                    "2",
                    "9223372036854775807",
                    "-9223372036854775808",
                    "9223372036854775808",
                ])
                .into(),
            "bigint[]" => match self.rng.random_range(0..8) {
                0 => "{}".into(),
                1 => "{1,2,3}".into(),
                2 => "{NULL}".into(),
                3 => "{-1,9223372036854775807}".into(),
                4 => "{{1,2},{3,4}}".into(),
                5 => "[5:6]={1,2}".into(),
                6 => format!(
                    "{{{}}}",
                    (1..20_000)
                        .map(|i| i.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                _ => "{x}".into(),
            },
            "boolean" => self.pick(&["true", "false", "maybe"]).into(),
            "interval" if name == "wait" => self
                .pick(&["0", "1 ms", "15 ms", "-1 ms", "-infinity"])
                .into(),
            "interval" => self
                .pick(&[
                    "1 microsecond",
                    "10 ms",
                    "30 s",
                    "1 day",
                    "0",
                    "-1 s",
                    "-178000000 years",
                    "178000000 years",
                    "infinity",
                    "-infinity",
                    "1 mon -30 days",
                    "1 mon -31 days",
                    "P1Y2M3DT4H5M6S",
                    "2147483647 days",
                    "oops",
                ])
                .into(),
            "timestamp with time zone" => self
                .pick(&[
                    "now",
                    "infinity",
                    "-infinity",
                    "epoch",
                    "4713-01-01 00:00 BC",
                    "294276-12-31 23:59:59+00",
                    "2026-11-23 12:00+00",
                    "garbage",
                ])
                .into(),
            "regprocedure" => self
                .pick(&[
                    "fuzz.effect(jsonb)",
                    "fuzz.fails(jsonb)",
                    "fuzz.retryable(jsonb)",
                    "fuzz.returns_null(jsonb)",
                    "fuzz.wrong(integer)",
                    "fuzz.setof(jsonb)",
                    "fuzz.definer(jsonb)",
                    "0",
                    "4294967295",
                    "pg_catalog.jsonb_typeof(jsonb)",
                    "nosuch(jsonb)",
                    "fuzz.effect",
                ])
                .into(),
            "regrole" => self
                .pick(&[
                    "fuzz_app",
                    "fuzz_other",
                    "postgres",
                    "nosuch",
                    "0",
                    "\"fuzz_app\"",
                ])
                .into(),
            "idempotency.idem_claim_result" | "idem_claim_result" => self
                .pick(&[
                    "(new_claim,1,,,,,,)",
                    "(replay_success,1,\"{\"\"status\"\":201,\"\"body\"\":\"\"x\"\"}\",,,,,)",
                    "(replay_success,1,\"{\"\"status\"\":99}\",,,,,)",
                    "(replay_failure,2,\"{}\",,P0001,boom,,)",
                    "(processing_active,3,,,,,\"2026-11-23 12:00+00\",)",
                    "(hash_mismatch,1,,,,,,)",
                    "(,,,,,,,)",
                    "(replay_success,1,\"[1,2]\",,,,,)",
                    "(1,2)",
                ])
                .into(),
            _ => self.pick(&["", "0", "x"]).into(),
        };
        Arg::Text(v)
    }
}
