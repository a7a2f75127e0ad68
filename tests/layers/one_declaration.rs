//! One declaration for both editions (issue 35, part 1): a function the native extension
//! declares in sql/ is declared nowhere in portable/, which holds its body only
//! (`BODY <symbol> ...`, put into the declaration by scripts/portable.sh). Every C symbol of
//! sql/ has exactly one body, every body belongs to a C symbol and pins its search_path
//! (idem_call's aside). Needs no server.

use std::collections::BTreeMap;

/// The released and upgrade scripts are history, not declarations.
fn is_source(name: &str) -> bool {
    name.ends_with(".sql") && !name.starts_with("idempotency--")
}

fn dir(name: &str) -> Vec<(String, String)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
    let mut out: Vec<_> = std::fs::read_dir(path)
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| is_source(f))
        .map(|f| {
            let rel = format!("{name}/{f}");
            let text = super::repo_file(&rel);
            (rel, text)
        })
        .collect();
    out.sort();
    out
}

/// The name of the function a `CREATE [OR REPLACE] FUNCTION` or `ALTER FUNCTION` line
/// declares or changes, in any case.
fn declared(line: &str) -> Option<String> {
    let words: Vec<String> = line.split_whitespace().map(str::to_lowercase).collect();
    let at = match words.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["create", "function", ..] | ["alter", "function", ..] => 2,
        ["create", "or", "replace", "function", ..] => 4,
        _ => return None,
    };
    let name = words.get(at)?.split('(').next()?;
    Some(
        name.rsplit('.')
            .next()
            .unwrap_or(name)
            .trim_matches('"')
            .to_string(),
    )
}

/// What breaks the rule in these files: each a line for a reader.
fn problems(sql: &[(String, String)], portable: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (file, text) in sql.iter().chain(portable) {
        if text.contains('\r') {
            out.push(format!("{file}: a carriage return"));
        }
    }
    let mut names = BTreeMap::new();
    let mut symbols: BTreeMap<String, usize> = BTreeMap::new();
    for (file, text) in sql {
        for line in text.lines() {
            if let Some(name) = declared(line) {
                names.insert(name, file.clone());
            }
            // portable.sh splices bodies into exactly `LANGUAGE c`.
            let lower = line.to_lowercase();
            if lower.contains("language c") && !line.contains("LANGUAGE c") {
                out.push(format!("{file}: {line}: write LANGUAGE c"));
            }
            if let Some(symbol) = line
                .strip_prefix("AS 'MODULE_PATHNAME', '")
                .and_then(|s| s.strip_suffix("';"))
            {
                symbols.insert(symbol.to_string(), 0);
            }
        }
    }
    for (file, text) in portable {
        for line in text.lines() {
            if let Some(name) = declared(line).filter(|n| names.contains_key(n)) {
                out.push(format!(
                    "{file} declares {name}, which {} declares: keep only its BODY",
                    names[&name]
                ));
            }
            // A body without the pin would resolve its names through the caller's path; only
            // idem_call's hands that path to its callee, as the native idem_call does.
            if line.starts_with("BODY ")
                && !line.contains(" SET search_path = pg_catalog, pg_temp AS ")
                && !line.starts_with("BODY idem_call ")
            {
                out.push(format!(
                    "{file}: {line}: no SET search_path = pg_catalog, pg_temp"
                ));
            }
            if let Some(symbol) = line.strip_prefix("BODY ").and_then(|s| s.split(' ').next()) {
                match symbols.get_mut(symbol) {
                    Some(n) => *n += 1,
                    None => out.push(format!("{file}: BODY {symbol} is no C symbol of sql/")),
                }
            }
        }
    }
    for (symbol, n) in symbols {
        if n != 1 {
            out.push(format!("C symbol {symbol} has {n} portable bodies"));
        }
    }
    out
}

#[test]
fn the_portable_edition_holds_bodies_of_the_native_declarations() {
    let (sql, portable) = (dir("sql"), dir("portable"));
    let bodies = portable
        .iter()
        .flat_map(|(_, t)| t.lines())
        .filter(|l| l.starts_with("BODY "))
        .count();
    assert!(
        bodies >= 20,
        "only {bodies} bodies found: the parser lost them"
    );
    let found = problems(&sql, &portable);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn a_second_declaration_or_a_lost_body_fails() {
    let sql = [(
        "sql/a.sql".to_string(),
        "CREATE FUNCTION @extschema@.f(a pg_catalog.int4)\nRETURNS pg_catalog.int4\n\
         LANGUAGE c STRICT\nAS 'MODULE_PATHNAME', 'f_wrapper';\n"
            .to_string(),
    )];
    let body = "BODY f_wrapper LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $fn$\nSELECT $1\n$fn$;\n";
    let ok = [("portable/a.sql".to_string(), body.to_string())];
    assert!(problems(&sql, &ok).is_empty());
    let copied = format!("CREATE FUNCTION @extschema@.f(a pg_catalog.int4) RETURNS int\n{body}");
    assert_eq!(
        problems(&sql, &[("portable/a.sql".to_string(), copied)]),
        ["portable/a.sql declares f, which sql/a.sql declares: keep only its BODY"]
    );
    assert_eq!(
        problems(&sql, &[]),
        ["C symbol f_wrapper has 0 portable bodies"]
    );
    let unpinned = body.replace(" SET search_path = pg_catalog, pg_temp", "");
    assert_eq!(
        problems(&sql, &[("portable/a.sql".to_string(), unpinned)]),
        [
            "portable/a.sql: BODY f_wrapper LANGUAGE sql AS $fn$: no SET search_path = pg_catalog, pg_temp"
        ]
    );
    let altered = format!("{body}alter function @extschema@.f(int) reset search_path;\n");
    assert_eq!(
        problems(&sql, &[("portable/a.sql".to_string(), altered)]),
        ["portable/a.sql declares f, which sql/a.sql declares: keep only its BODY"]
    );
    let crlf = body.replace("$fn$;", "$fn$;\r");
    assert_eq!(
        problems(&sql, &[("portable/a.sql".to_string(), crlf)]),
        ["portable/a.sql: a carriage return"]
    );
    let stray = body.replace("f_wrapper", "g_wrapper");
    assert_eq!(
        problems(&sql, &[("portable/a.sql".to_string(), stray)]),
        [
            "portable/a.sql: BODY g_wrapper is no C symbol of sql/",
            "C symbol f_wrapper has 0 portable bodies"
        ]
    );
}
