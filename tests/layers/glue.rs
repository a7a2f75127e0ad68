//! What the layer check cannot follow is refused outright (issue 35, part 4). `lib.rs` holds
//! only `mod` items and the entry glue; under `src/`, no `#[path]` (a module from anywhere),
//! no `include!` (code pasted in unparsed) and no `#[macro_export]` (a macro reached from the
//! crate root, past its layer). `include_str!`/`include_bytes!` stay allowed: they bring data
//! (pg_tests' JSON vectors), never code or paths.
//!
//! The entry glue: `use pgrx::...` (no rename: an alias would be reachable as `crate::alias`),
//! `pg_module_magic!`, `_PG_init`, `idem_version` (depends on nothing), the `#[cfg(test)]`
//! inline `mod pg_test` pgrx requires, and `macro_rules! fail_point`, which must sit at the root
//! to be in scope in every module, and may name nothing but `crate::base` (the lowest layer).

use std::path::Path;

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// Every refusal in `source`, the file `file` (relative to `src/`).
pub fn refusals(file: &str, source: &str) -> Vec<String> {
    let tokens: TokenStream = source.parse().unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut found = Vec::new();
    scan(file, tokens, &mut found);
    if file == "lib.rs" {
        root_items(source, &mut found);
    }
    found
}

/// `include!`, `#[path]`, `#[macro_export]` anywhere in the tokens, macro bodies included.
fn scan(file: &str, tokens: TokenStream, found: &mut Vec<String>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, token) in tokens.iter().enumerate() {
        match token {
            TokenTree::Ident(id) if id == "include" => {
                if matches!(tokens.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == '!') {
                    found.push(format!("{file}: include!"));
                }
            }
            TokenTree::Punct(p) if p.as_char() == '#' => {
                let mut next = i + 1;
                if matches!(tokens.get(next), Some(TokenTree::Punct(p)) if p.as_char() == '!') {
                    next += 1;
                }
                if let Some(TokenTree::Group(g)) = tokens.get(next)
                    && g.delimiter() == Delimiter::Bracket
                    && let Some(TokenTree::Ident(id)) = g.stream().into_iter().next()
                    && (id == "path" || id == "macro_export")
                {
                    found.push(format!("{file}: #[{id}]"));
                }
            }
            TokenTree::Group(g) => scan(file, g.stream(), found),
            _ => {}
        }
    }
}

/// The items of `lib.rs` that are neither a `mod` nor the entry glue.
fn root_items(source: &str, found: &mut Vec<String>) {
    let file = syn::parse_file(source).unwrap_or_else(|e| panic!("lib.rs: {e}"));
    for item in &file.items {
        let refused = match item {
            syn::Item::Mod(m) => m.content.is_some() && m.ident != "pg_test",
            syn::Item::Use(u) => !pgrx_without_rename(&u.tree, true),
            syn::Item::Macro(m) => match m.mac.path.segments.last() {
                Some(s) if s.ident == "pg_module_magic" => false,
                Some(s) if s.ident == "macro_rules" => {
                    m.ident.as_ref().is_none_or(|i| i != "fail_point")
                        || !only_base(m.mac.tokens.clone())
                }
                _ => true,
            },
            syn::Item::Fn(f) => f.sig.ident != "_PG_init" && f.sig.ident != "idem_version",
            _ => true,
        };
        if refused {
            found.push(format!("lib.rs: not a mod or entry glue: {}", kind(item)));
        }
    }
}

fn kind(item: &syn::Item) -> String {
    match item {
        syn::Item::Mod(m) => format!("inline mod {}", m.ident),
        syn::Item::Use(_) => "a use other than pgrx's, or a rename".into(),
        syn::Item::Macro(m) => match &m.ident {
            Some(name) => format!("macro_rules! {name}"),
            None => "a macro call".into(),
        },
        syn::Item::Fn(f) => format!("fn {}", f.sig.ident),
        _ => "an item".into(),
    }
}

/// A `use` tree starting at `pgrx`, renaming nothing.
fn pgrx_without_rename(tree: &syn::UseTree, first: bool) -> bool {
    match tree {
        syn::UseTree::Path(p) => {
            (!first || p.ident == "pgrx") && pgrx_without_rename(&p.tree, false)
        }
        syn::UseTree::Name(_) | syn::UseTree::Glob(_) => !first,
        syn::UseTree::Rename(_) => false,
        syn::UseTree::Group(g) => g.items.iter().all(|t| pgrx_without_rename(t, first)),
    }
}

/// Every `crate::` in `tokens` is followed by `base`.
fn only_base(tokens: TokenStream) -> bool {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    tokens.iter().enumerate().all(|(i, t)| match t {
        TokenTree::Ident(id) if id == "crate" => {
            matches!(tokens.get(i + 3), Some(TokenTree::Ident(next)) if next == "base")
        }
        TokenTree::Group(g) => only_base(g.stream()),
        _ => true,
    })
}

#[test]
fn the_real_tree_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut dirs = vec![root.clone()];
    let mut found = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(&root).expect("under src");
                let source = std::fs::read_to_string(&path).expect("read");
                found.extend(refusals(&rel.to_string_lossy(), &source));
            }
        }
    }
    assert!(
        found.is_empty(),
        "refused under src/:\n{}",
        found.join("\n")
    );
}

const GLUE: &str =
    "use pgrx::prelude::*;\nmod base;\nmod entry;\n::pgrx::pg_module_magic!(name, version);\n";

#[test]
fn a_macro_rules_in_lib_rs_is_refused() {
    let planted = format!("{GLUE}macro_rules! up {{ () => {{ crate::entry::claim::f() }} }}\n");
    assert_eq!(refusals("lib.rs", &planted).len(), 1);
    let renamed_fail_point =
        format!("{GLUE}macro_rules! fail_point {{ () => {{ crate::entry::claim::f() }} }}\n");
    assert_eq!(refusals("lib.rs", &renamed_fail_point).len(), 1);
    assert!(refusals("lib.rs", GLUE).is_empty());
}

#[test]
fn a_macro_export_is_refused() {
    let planted = "#[macro_export]\nmacro_rules! up { () => { $crate::entry::claim::f() } }\n";
    assert_eq!(
        refusals("base/x.rs", planted),
        vec!["base/x.rs: #[macro_export]"]
    );
}

#[test]
fn a_use_alias_in_lib_rs_is_refused() {
    for planted in [
        "use crate::entry::claim as alias;",
        "use entry::claim;",
        "use pgrx::prelude as p;",
    ] {
        assert_eq!(
            refusals("lib.rs", &format!("{GLUE}{planted}\n")).len(),
            1,
            "{planted}"
        );
    }
}

#[test]
fn a_path_attribute_is_refused() {
    let planted = "#[path = \"../../outside/up.rs\"]\nmod up;\n";
    assert_eq!(refusals("base/x.rs", planted), vec!["base/x.rs: #[path]"]);
    assert_eq!(refusals("lib.rs", &format!("{GLUE}{planted}")).len(), 1);
}

#[test]
fn an_include_is_refused() {
    let planted = "fn f() { include!(\"../../outside/up.rs\"); }\n";
    assert_eq!(refusals("base/x.rs", planted), vec!["base/x.rs: include!"]);
    let in_a_macro = "m! { include!(\"up.rs\") }\n";
    assert_eq!(
        refusals("base/x.rs", in_a_macro),
        vec!["base/x.rs: include!"]
    );
}
