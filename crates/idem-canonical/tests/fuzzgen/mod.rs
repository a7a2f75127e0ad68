//! Generators for tests/fuzz.rs: JSON values with exact decimal numbers, and spellings of
//! them as text (member order, white space, escapes and number forms chosen by a seed).

use proptest::prelude::*;

/// A number as an exact decimal: `±digits × 10^exp` (`digits` has no leading zero, or is "0").
#[derive(Clone, Debug)]
pub struct Dec {
    pub negative: bool,
    pub digits: String,
    pub exp: i32,
}

#[derive(Clone, Debug)]
pub enum Json {
    Null,
    Bool(bool),
    /// A double (written exactly, as its shortest decimal) times 10^shift.
    Num(f64, i32),
    Dec(Dec),
    Str(String),
    Arr(Vec<Json>),
    /// Member names are distinct.
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// Whether a number is beyond the largest double (the canonicalizer refuses it).
    pub fn has_huge_number(&self) -> bool {
        match self {
            Json::Num(..) | Json::Dec(_) => self.dec().is_some_and(|d| {
                !format!("{}e{}", d.digits, d.exp)
                    .parse::<f64>()
                    .is_ok_and(f64::is_finite)
            }),
            Json::Arr(items) => items.iter().any(Json::has_huge_number),
            Json::Obj(members) => members.iter().any(|(_, v)| v.has_huge_number()),
            _ => false,
        }
    }

    fn dec(&self) -> Option<Dec> {
        match self {
            Json::Dec(d) => Some(d.clone()),
            Json::Num(f, shift) => {
                // `{:e}` is the shortest round-trip form: d.ddde±x.
                let s = format!("{:e}", f.abs());
                let (mantissa, exp) = s.split_once('e')?;
                let frac = mantissa.split_once('.').map_or(0, |(_, f)| f.len()) as i32;
                let digits = mantissa.replace('.', "");
                Some(Dec {
                    negative: f.is_sign_negative(),
                    digits,
                    exp: exp.parse::<i32>().ok()? - frac + shift,
                })
            }
            _ => None,
        }
    }
}

fn char_strategy() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::char::range('a', 'e'),
        2 => any::<char>(),
        3 => prop::sample::select(vec![
            '\0', '\u{1}', '\u{8}', '\t', '\n', '\u{c}', '\r', '\u{1f}', ' ', '"', '\\', '/',
            '\u{7f}', '\u{80}', 'é', '\u{7ff}', '\u{800}', '\u{2028}', '\u{2029}', '\u{d7ff}',
            '\u{e000}', '\u{fb33}', '\u{fffd}', '\u{ffff}', '\u{10000}', '😂', '😁',
            '\u{10ffff}',
        ]),
    ]
}

pub fn string(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(char_strategy(), 0..max).prop_map(String::from_iter)
}

fn dec() -> impl Strategy<Value = Dec> {
    let digits = "[1-9][0-9]{0,40}|0";
    (any::<bool>(), digits, -420i32..420).prop_map(|(negative, digits, exp)| Dec {
        negative,
        digits,
        exp,
    })
}

fn number() -> impl Strategy<Value = Json> {
    let double = any::<f64>().prop_filter("finite", |f| f.is_finite());
    prop_oneof![
        3 => (-1000i32..1000).prop_map(|i| Json::Num(f64::from(i), 0)),
        3 => (double, -3i32..4).prop_map(|(f, shift)| Json::Num(f, shift)),
        2 => dec().prop_map(Json::Dec),
        1 => prop::sample::select(vec![
            5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 9007199254740992.0,
            9007199254740993.0, 1e21, 1e-7, 1e-6, 0.1, -0.0, 0.0, 333333333.3333333,
        ])
        .prop_map(|f| Json::Num(f, 0)),
    ]
}

pub fn json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        number(),
        string(24).prop_map(Json::Str),
    ];
    leaf.prop_recursive(6, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Json::Arr),
            prop::collection::btree_map(string(6), inner, 0..8)
                .prop_map(|m| Json::Obj(m.into_iter().collect())),
        ]
    })
}

/// How a value is written as text: every choice comes from this seed.
#[derive(Clone)]
pub struct Spelling {
    pub seed: u64,
}

pub fn spelling() -> impl Strategy<Value = Spelling> {
    any::<u64>().prop_map(|seed| Spelling { seed })
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

pub fn render(value: &Json, how: &Spelling) -> String {
    let mut out = String::new();
    let mut rng = Rng(how.seed);
    write_value(value, &mut rng, &mut out);
    ws(&mut rng, &mut out);
    out
}

fn ws(rng: &mut Rng, out: &mut String) {
    for _ in 0..rng.below(4).saturating_sub(1) {
        out.push([' ', '\t', '\n', '\r'][rng.below(4) as usize]);
    }
}

fn write_value(value: &Json, rng: &mut Rng, out: &mut String) {
    ws(rng, out);
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Num(..) | Json::Dec(_) => match value.dec() {
            Some(d) => write_dec(&d, rng, out),
            None => out.push('0'),
        },
        Json::Str(s) => write_str(s, rng, out),
        Json::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    ws(rng, out);
                    out.push(',');
                }
                write_value(item, rng, out);
            }
            ws(rng, out);
            out.push(']');
        }
        Json::Obj(members) => {
            let mut order: Vec<&(String, Json)> = members.iter().collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i as u64 + 1) as usize);
            }
            out.push('{');
            for (i, (name, item)) in order.into_iter().enumerate() {
                if i > 0 {
                    ws(rng, out);
                    out.push(',');
                }
                ws(rng, out);
                write_str(name, rng, out);
                ws(rng, out);
                out.push(':');
                write_value(item, rng, out);
            }
            ws(rng, out);
            out.push('}');
        }
    }
}

/// One of the many spellings of the exact decimal `d`.
fn write_dec(d: &Dec, rng: &mut Rng, out: &mut String) {
    if d.negative {
        out.push('-');
    }
    if d.digits.chars().all(|c| c == '0') {
        let zeros = ["0", "0.0", "0e0", "0E+2", "0.000e-5", "0e-400"];
        out.push_str(zeros[rng.below(zeros.len() as u64) as usize]);
        return;
    }
    // Trailing zeros moved between the digits and the exponent.
    let zeros = rng.below(3) as usize;
    let digits = format!("{}{}", d.digits, "0".repeat(zeros));
    let exp = i64::from(d.exp) - zeros as i64;
    let marker = if rng.below(2) == 0 { "e" } else { "E" };
    match rng.below(3) {
        // Plain decimal, when the exponent is modest.
        0 if (-30..=30).contains(&exp) => {
            if exp >= 0 {
                out.push_str(&digits);
                out.push_str(&"0".repeat(exp as usize));
            } else {
                let frac = (-exp) as usize;
                if digits.len() > frac {
                    let (int, f) = digits.split_at(digits.len() - frac);
                    out.push_str(&format!("{int}.{f}"));
                } else {
                    out.push_str(&format!("0.{}{digits}", "0".repeat(frac - digits.len())));
                }
            }
        }
        // A decimal point after the first k digits, exponent adjusted.
        1 => {
            let k = 1 + rng.below(digits.len() as u64) as usize;
            let (int, f) = digits.split_at(k);
            let e = exp + f.len() as i64;
            let sign = if e >= 0 && rng.below(2) == 0 { "+" } else { "" };
            if f.is_empty() {
                out.push_str(&format!("{int}{marker}{sign}{e}"));
            } else {
                out.push_str(&format!("{int}.{f}{marker}{sign}{e}"));
            }
        }
        _ => {
            let sign = if exp >= 0 && rng.below(2) == 0 {
                "+"
            } else {
                ""
            };
            out.push_str(&format!("{digits}{marker}{sign}{exp}"));
        }
    }
}

fn write_str(s: &str, rng: &mut Rng, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '/' => Some("\\/"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            _ => None,
        };
        let must_escape = c < ' ' || c == '"' || c == '\\';
        let upper = rng.below(2) == 0;
        match rng.below(3) {
            0 if !must_escape => out.push(c),
            1 if short.is_some() => out.push_str(short.unwrap_or_default()),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    if upper {
                        out.push_str(&format!("\\u{unit:04X}"));
                    } else {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
            }
        }
    }
    out.push('"');
}
