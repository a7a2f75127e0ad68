//! The modules of `src/` are the layers of the one table in docs/architecture.md: a module uses
//! only modules of the layers below it, or modules listed after it in its own layer. That rules
//! out import cycles, and keeps the map and the code from drifting apart: a module missing from
//! the table fails too. The table's last layer is the workspace's Postgres-free crates.
//!
//! Each layer names its folder (`N. folder/ module ...`): its modules are that folder's files,
//! so a file in another folder, or at the top of `src/`, is not in the table and fails.
//!
//! Every file is parsed with `syn`. What counts as a use of a module:
//! - every path of every `use` tree, grouped imports included (`use crate::{a, b::c}`);
//! - every path in the code (expressions, types, patterns, attributes' paths);
//! - every `a::b` sequence in the tokens of a macro call or an attribute's arguments, which
//!   `syn` does not parse (`format!("{}", crate::x::Y)`, `requires = [maintenance::f]`).
//!
//! Paths are resolved against the module they are written in (inline `mod`s included):
//! `crate::`, `self::`, `super::`, and a bare `a::` (a child module of the current one if there
//! is one, else the crate's top-level module or a listed crate of that name). `lib.rs` (the
//! root, which declares the modules) and the tests (`pg_tests`, `bin`) are not layers.
//! Needs no Postgres. The check's own tests, on planted sources: `planted.rs`; what it cannot
//! follow, refused outright (`lib.rs` only mods and entry glue; no `#[path]`, `include!`,
//! `#[macro_export]`): `glue.rs`; the README's length: `readme.rs`.
//! Also here, needing no server: the upgrade script is derived from sql/ (`upgrade_script.rs`);
//! every path a comment or doc names exists (`paths.rs`, `comments.rs`);
//! the portable edition holds bodies of the native declarations only (`one_declaration.rs`);
//! every test on the counted cluster takes its turn (`counted_turns.rs`).

mod comments;
mod counted_turns;
mod glue;
mod one_declaration;
mod paths;
mod planted;
mod readme;
mod upgrade_script;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// (layer, position in its layer) of every module or crate.
type Table = BTreeMap<String, (usize, usize)>;

/// The folder of each layer that names one (`N. folder/ ...`).
type Folders = BTreeMap<usize, String>;

fn repo_file(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The table: the lines `N. module module ...` (or `N. folder/ module ...`) of
/// docs/architecture.md.
fn parse_table(doc: &str) -> Table {
    parse_layers(doc).0
}

/// The table and the folder of each layer; a module outside its layer's folder panics.
fn parse_layers(doc: &str) -> (Table, Folders) {
    let mut table = Table::new();
    let mut folders = Folders::new();
    for line in doc.lines() {
        let Some((number, modules)) = line.split_once(". ") else {
            continue;
        };
        let Ok(layer) = number.parse::<usize>() else {
            continue;
        };
        let mut words = modules.split_whitespace().peekable();
        let folder = words
            .next_if(|w| w.ends_with('/'))
            .map(|w| w.trim_end_matches('/').to_string());
        let modules: Vec<&str> = words.collect();
        if !modules.iter().all(|m| {
            m.chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c == ':')
        }) {
            continue;
        }
        for (position, module) in modules.iter().enumerate() {
            if let Some(folder) = folder.as_deref().filter(|f| *f != "crates") {
                assert!(
                    *module == folder || module.starts_with(&format!("{folder}::")),
                    "{module} is listed in layer {layer}, whose folder is src/{folder}/"
                );
            }
            let previous = table.insert(module.to_string(), (layer, position));
            assert!(previous.is_none(), "{module} is listed twice");
        }
        if let Some(folder) = folder {
            folders.insert(layer, folder);
        }
    }
    (table, folders)
}

/// The file of module `name` in src/.
fn file_of(name: &str, modules: &BTreeMap<String, String>) -> String {
    let path = name.replace("::", "/");
    if modules.keys().any(|m| m.starts_with(&format!("{name}::"))) {
        format!("src/{path}/mod.rs")
    } else {
        format!("src/{path}.rs")
    }
}

/// Every module of `modules` the table does not list, as "src/<folder>/<file>.rs is in no
/// layer's folder": a file moved to another folder, or put at the top of src/.
fn misplaced(table: &Table, folders: &Folders, modules: &BTreeMap<String, String>) -> Vec<String> {
    let names: Vec<String> = folders
        .values()
        .filter(|f| *f != "crates")
        .map(|f| format!("src/{f}/"))
        .collect();
    modules
        .keys()
        .filter(|name| !table.contains_key(*name))
        .map(|name| {
            format!(
                "{} (module {name}) is not in the layer table: each file sits in the folder of \
                 its layer ({})",
                file_of(name, modules),
                names.join(" ")
            )
        })
        .collect()
}

/// Every module of src/ (but the root `lib`, `pg_tests` and the bin) and its source.
fn src_modules() -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = BTreeMap::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src").flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(&root).expect("under src");
            let first = rel.components().next().expect("a name");
            if ["pg_tests", "bin"].iter().any(|s| first.as_os_str() == *s) {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || rel == Path::new("lib.rs") {
                continue;
            }
            let name = rel
                .with_extension("")
                .to_string_lossy()
                .trim_end_matches("/mod")
                .replace('/', "::");
            found.insert(name, std::fs::read_to_string(&path).expect("read"));
        }
    }
    found
}

/// Collects the modules a file uses, resolving each path in the module it is written in.
struct Uses<'a> {
    /// Modules and crates of the table.
    known: &'a BTreeSet<String>,
    /// The module being read: the file's, then any inline `mod`s.
    module: Vec<String>,
    found: BTreeSet<String>,
}

impl Uses<'_> {
    /// The absolute path `segments` names, if it can name a module of ours.
    fn resolve(&self, segments: &[String], leading_colon: bool) -> Option<Vec<String>> {
        let (first, rest) = segments.split_first()?;
        if leading_colon {
            return Some(segments.to_vec());
        }
        match first.as_str() {
            "crate" => Some(rest.to_vec()),
            "self" => Some([&self.module[..], rest].concat()),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                let base = self.module.len().checked_sub(ups)?;
                Some([&self.module[..base], &segments[ups..]].concat())
            }
            _ => {
                let child = [&self.module[..], segments].concat();
                if self
                    .module_of(&child)
                    .is_some_and(|m| m.len() > self.module.len())
                {
                    Some(child)
                } else {
                    Some(segments.to_vec())
                }
            }
        }
    }

    /// The longest prefix of `path` that is a known module.
    fn module_of(&self, path: &[String]) -> Option<Vec<String>> {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|p| self.known.contains(&p.join("::")))
    }

    fn add(&mut self, segments: &[String], leading_colon: bool) {
        if let Some(module) = self
            .resolve(segments, leading_colon)
            .and_then(|p| self.module_of(&p))
        {
            self.found.insert(module.join("::"));
        }
    }

    fn use_tree(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>, leading: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix, leading);
                prefix.pop();
            }
            syn::UseTree::Name(n) if n.ident == "self" => self.add(prefix, leading),
            syn::UseTree::Name(n) => {
                self.add(&[&prefix[..], &[n.ident.to_string()]].concat(), leading)
            }
            syn::UseTree::Rename(r) => {
                self.add(&[&prefix[..], &[r.ident.to_string()]].concat(), leading)
            }
            syn::UseTree::Glob(_) => self.add(prefix, leading),
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    self.use_tree(item, prefix, leading);
                }
            }
        }
    }

    /// Every `a::b::c` (or `::a::b`) sequence in `tokens`, groups included.
    fn scan(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let colons = |i: usize| {
            matches!((tokens.get(i), tokens.get(i + 1)),
                (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                    if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':')
        };
        let mut i = 0;
        while i < tokens.len() {
            if let TokenTree::Group(g) = &tokens[i] {
                self.scan(g.stream());
                i += 1;
                continue;
            }
            let leading = colons(i)
                && !matches!(
                    i.checked_sub(1).map(|p| &tokens[p]),
                    Some(TokenTree::Ident(_))
                );
            let mut j = if leading { i + 2 } else { i };
            let mut segments = Vec::new();
            while let Some(TokenTree::Ident(ident)) = tokens.get(j) {
                segments.push(ident.to_string());
                if !colons(j + 1) {
                    j += 1;
                    break;
                }
                j += 3;
            }
            if segments.len() >= 2 || (leading && !segments.is_empty()) {
                self.add(&segments, leading);
            }
            i = j.max(i + 1);
        }
    }
}

impl<'ast> Visit<'ast> for Uses<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        for attr in &m.attrs {
            self.visit_attribute(attr);
        }
        if let Some((_, items)) = &m.content {
            self.module.push(m.ident.to_string());
            for item in items {
                self.visit_item(item);
            }
            self.module.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        for attr in &u.attrs {
            self.visit_attribute(attr);
        }
        self.use_tree(&u.tree, &mut Vec::new(), u.leading_colon.is_some());
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() >= 2 || p.leading_colon.is_some() {
            self.add(&segments, p.leading_colon.is_some());
        }
        visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.scan(m.tokens.clone());
    }

    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        self.visit_path(a.path());
        match &a.meta {
            syn::Meta::List(list) => self.scan(list.tokens.clone()),
            syn::Meta::NameValue(nv) => self.visit_expr(&nv.value),
            syn::Meta::Path(_) => {}
        }
    }
}

/// The modules `source` (module `name`) uses, other than itself.
fn uses(name: &str, source: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let file = syn::parse_file(source).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut collector = Uses {
        known,
        module: name.split("::").map(String::from).collect(),
        found: BTreeSet::new(),
    };
    collector.visit_file(&file);
    collector.found.remove(name);
    collector.found
}

/// Every use up the layers among `modules` (name, source), as "a (layer 5) uses b (layer 1)";
/// `Err` if a module is not in `table`.
fn violations(table: &Table, modules: &BTreeMap<String, String>) -> Vec<String> {
    let known: BTreeSet<String> = table.keys().cloned().collect();
    let mut upward = Vec::new();
    for (name, source) in modules {
        let (layer, position) = table[name];
        for used in uses(name, source, &known) {
            let (their_layer, their_position) = table[&used];
            let below = their_layer > layer || (their_layer == layer && their_position > position);
            if !below {
                upward.push(format!(
                    "{name} (layer {layer}) uses {used} (layer {their_layer})"
                ));
            }
        }
    }
    upward
}

#[test]
fn modules_use_only_the_layers_below() {
    let (table, folders) = parse_layers(&repo_file("docs/architecture.md"));
    assert!(
        table.len() > 20,
        "the layer table of docs/architecture.md: {table:?}"
    );
    let layers: BTreeSet<usize> = table.values().map(|(layer, _)| *layer).collect();
    assert_eq!(
        layers,
        folders.keys().copied().collect(),
        "every layer names its folder"
    );
    let modules = src_modules();
    let misplaced = misplaced(&table, &folders, &modules);
    assert!(misplaced.is_empty(), "{}", misplaced.join("\n"));
    // A listed name that is not a module of src/ is a crate of the workspace (crates/<name>).
    let crates: BTreeSet<String> = table
        .keys()
        .filter(|name| !modules.contains_key(*name))
        .cloned()
        .collect();
    for name in &crates {
        let manifest = format!("crates/{}/Cargo.toml", name.replace('_', "-"));
        assert!(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(&manifest)
                .exists(),
            "{name} is in the layer table but is neither a module of src/ nor {manifest}"
        );
    }
    let bottom = table.values().map(|(layer, _)| *layer).max();
    for name in &crates {
        assert_eq!(
            Some(table[name].0),
            bottom,
            "the crates are the lowest layer: {name}"
        );
    }
    let upward = violations(&table, &modules);
    assert!(
        upward.is_empty(),
        "imports up the layers:\n{}",
        upward.join("\n")
    );
}
