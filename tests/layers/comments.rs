//! The comments of a source file, for the path check (`paths.rs`): `//` and `/* */` (Rust, C,
//! JavaScript), `--` and `/* */` (SQL), `#` (shell, TOML, Python) and Python's docstrings, each
//! outside the language's strings. A doc (`*.md`) is read whole.

use std::path::Path;

#[derive(Clone, Copy, PartialEq)]
pub enum Lang {
    Doc,
    Rust,
    /// C and JavaScript: `//`, `/* */`, and '', "" and `` strings.
    C,
    Sql,
    /// Shell: `#` at the start of a word.
    Hash,
    Python,
}

pub fn lang(path: &Path) -> Option<Lang> {
    let ext = path.extension().and_then(|e| e.to_str());
    Some(match ext {
        Some("md") => Lang::Doc,
        Some("rs") => Lang::Rust,
        Some("js" | "mjs" | "ts" | "c" | "h") => Lang::C,
        Some("sql") => Lang::Sql,
        Some("sh" | "toml") => Lang::Hash,
        Some("py") => Lang::Python,
        None if path
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|p| p == ".ci") =>
        {
            Lang::Hash
        }
        _ => return None,
    })
}

#[derive(Clone, Copy, PartialEq)]
enum State {
    Code,
    Line,
    Block,
    Str(char),
    /// A Rust raw string closed by `"` and this many `#`.
    Raw(usize),
    /// A Python triple-quoted string: a docstring, read as a comment.
    Triple(char),
}

/// `text` with everything but its comments blanked (lines kept, so line numbers hold).
pub fn comments(lang: Lang, text: &str) -> String {
    if lang == Lang::Doc {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    let at = |i: usize, s: &str| {
        s.chars()
            .enumerate()
            .all(|(k, c)| chars.get(i + k) == Some(&c))
    };
    let mut out = String::with_capacity(text.len());
    let mut state = State::Code;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let mut step = 1;
        if c == '\n' {
            if state == State::Line
                || (matches!(state, State::Str(_)) && matches!(lang, Lang::Hash | Lang::Python))
            {
                state = State::Code;
            }
            out.push('\n');
            i += 1;
            continue;
        }
        let comment = matches!(state, State::Line | State::Block | State::Triple(_));
        match state {
            State::Code => {
                let word_start = i == 0 || chars[i - 1].is_whitespace();
                let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
                match lang {
                    Lang::Rust | Lang::C | Lang::Sql if at(i, "/*") => state = State::Block,
                    Lang::Rust | Lang::C if at(i, "//") => state = State::Line,
                    Lang::Sql if at(i, "--") => state = State::Line,
                    Lang::Hash | Lang::Python
                        if c == '#' && (word_start || lang == Lang::Python) =>
                    {
                        state = State::Line
                    }
                    Lang::Python if at(i, "\"\"\"") || at(i, "'''") => {
                        state = State::Triple(c);
                        step = 3;
                    }
                    Lang::Rust if (c == 'r' || at(i, "br")) && !ident_before => {
                        let start = if c == 'r' { i + 1 } else { i + 2 };
                        let hashes = chars[start..].iter().take_while(|h| **h == '#').count();
                        if chars.get(start + hashes) == Some(&'"') {
                            state = State::Raw(hashes);
                            step = start + hashes + 1 - i;
                        }
                    }
                    // A char literal ('"', '\'') or a lifetime ('a).
                    Lang::Rust if c == '\'' => {
                        if chars.get(i + 1) == Some(&'\\') {
                            step =
                                2 + chars[i + 2..].iter().take_while(|q| **q != '\'').count() + 1;
                        } else if chars.get(i + 2) == Some(&'\'') {
                            step = 3;
                        }
                    }
                    Lang::Rust if c == '"' => state = State::Str('"'),
                    Lang::C if matches!(c, '"' | '\'' | '`') => state = State::Str(c),
                    Lang::Sql | Lang::Hash | Lang::Python if matches!(c, '"' | '\'') => {
                        state = State::Str(c)
                    }
                    _ => {}
                }
            }
            State::Line => {}
            State::Block if at(i, "*/") => state = State::Code,
            State::Block => {}
            State::Str(_) if c == '\\' && lang != Lang::Sql => step = 2,
            State::Str(q) if c == q => state = State::Code,
            State::Str(_) => {}
            State::Raw(n) if c == '"' && chars[i + 1..].iter().take(n).all(|h| *h == '#') => {
                if chars.len() >= i + 1 + n {
                    state = State::Code;
                    step = 1 + n;
                }
            }
            State::Raw(_) => {}
            State::Triple(q) if at(i, &q.to_string().repeat(3)) => {
                state = State::Code;
                step = 3;
            }
            State::Triple(_) => {}
        }
        let keep = comment || matches!(state, State::Line | State::Block | State::Triple(_));
        for &c in &chars[i..(i + step).min(chars.len())] {
            out.push(if keep || c == '\n' { c } else { ' ' });
        }
        i += step;
    }
    out
}
