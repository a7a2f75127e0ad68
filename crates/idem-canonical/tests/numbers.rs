//! Numbers against a JavaScript engine: data/es6-numbers.txt holds `<bits hex>,<toString>`
//! lines made by data/gen-es6-numbers.js (ES6 boundaries 1e21 and 1e-6/1e-7, subnormals,
//! 2^53 neighbours, the largest double, powers of ten and two, pseudo-random doubles).

const DATA: &str = include_str!("data/es6-numbers.txt");

fn cases() -> impl Iterator<Item = (f64, &'static str)> {
    DATA.lines().map(|line| {
        let (hex, text) = line.split_once(',').unwrap();
        (f64::from_bits(u64::from_str_radix(hex, 16).unwrap()), text)
    })
}

#[test]
fn formatting_matches_javascript() {
    let mut n = 0;
    for (value, expected) in cases() {
        assert_eq!(
            idem_canonical::format_number(value).unwrap(),
            expected,
            "{:016x}",
            value.to_bits()
        );
        n += 1;
    }
    assert!(n > 10_000, "{n} cases");
}

#[test]
fn javascript_text_parses_back_to_the_same_double() {
    for (value, text) in cases() {
        let parsed = idem_canonical::number_from_decimal_text(text).unwrap();
        // -0 prints as "0", which reads back as +0.
        let want = if value == 0.0 { 0.0f64 } else { value };
        assert_eq!(parsed.to_bits(), want.to_bits(), "{text}");
    }
}

#[test]
fn long_decimal_inputs_are_correctly_rounded() {
    // Halfway cases and long mantissas (Rust's parser is correctly rounded for any length).
    let cases = [
        ("9007199254740993", "9007199254740992"),
        (
            "9007199254740993.0000000000000000000001",
            "9007199254740994",
        ),
        ("12345678901234567890", "12345678901234567000"),
        ("-12345678901234567890.5e-3", "-12345678901234568"),
        (
            "0.30000000000000001665334536937734810635447502136230468750",
            "0.30000000000000004",
        ),
        (
            "0.30000000000000001665334536937734810635447502136230468749",
            "0.3",
        ),
        (
            "179769313486231570814527423731704356798070567525844996598917476803157260780028538760589558632766878171540458953514382464234321326889464182768467546703537516986049910576551282076245490090389328944075868508455133942304583236903222948165808559332123348274797826204144723168738177180919299881250404026184124858368",
            "1.7976931348623157e+308",
        ),
        ("4.9406564584124654e-324", "5e-324"),
        ("2.4703282292062328e-324", "5e-324"),
        ("2.4703282292062327e-324", "0"),
        ("1", "1"),
        ("1e0000000000000000000001", "10"),
    ];
    for (input, expected) in cases {
        let v = idem_canonical::number_from_decimal_text(input).unwrap();
        assert_eq!(
            idem_canonical::format_number(v).unwrap(),
            expected,
            "{input}"
        );
        let doc = format!("[{input}]");
        assert_eq!(
            idem_canonical::canonicalize_json_text(&doc).unwrap(),
            format!("[{expected}]")
        );
    }
}

#[test]
fn numbers_inside_documents() {
    let text: String = {
        let items: Vec<&str> = cases().map(|(_, t)| t).take(2000).collect();
        format!("[{}]", items.join(","))
    };
    assert_eq!(idem_canonical::canonicalize_json_text(&text).unwrap(), text);
}
