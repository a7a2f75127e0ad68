//! RFC 8785 reference vectors (tests/vectors/jcs in the repository; see its
//! SOURCE.md): input -> output byte for byte, and the hash = SHA-256 of the expected bytes.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/jcs")
}

#[test]
fn reference_vectors_byte_for_byte() {
    let dir = vectors_dir();
    let mut names: Vec<String> = std::fs::read_dir(dir.join("input"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 6, "{names:?}");
    for name in names {
        let input = std::fs::read_to_string(dir.join("input").join(&name)).unwrap();
        let expected = std::fs::read(dir.join("output").join(&name)).unwrap();
        let hex_name = name.replace(".json", ".txt");
        let hex: String = std::fs::read_to_string(dir.join("outhex").join(hex_name))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(
            idem_canonical::to_hex(&expected),
            hex,
            "{name}: outhex agrees with output"
        );

        let got = idem_canonical::canonicalize_json_text(&input).unwrap();
        assert_eq!(got.as_bytes(), &expected[..], "{name}");

        let digest: [u8; 32] = Sha256::digest(&expected).into();
        assert_eq!(
            idem_canonical::hash_json_text(&input).unwrap(),
            digest,
            "{name}"
        );
        assert_eq!(
            idem_canonical::hash_json_bytes(input.as_bytes()).unwrap(),
            digest
        );

        // The serde_json::Value path agrees (no vector has duplicate names).
        let value: serde_json::Value = serde_json::from_str(&input).unwrap();
        assert_eq!(
            idem_canonical::canonicalize_value(&value)
                .unwrap()
                .as_bytes(),
            &expected[..]
        );
        assert_eq!(idem_canonical::hash_value(&value).unwrap(), digest);
    }
}
