//! The one error type of the crate, with a SQLSTATE-style classification so that callers
//! (the Postgres extension) can map it without matching on messages.

use core::fmt;

/// What went wrong, coarse enough to pick an error code from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// An object has two members with the same name (after unescaping).
    DuplicateKey,
    /// A number is outside the range of an IEEE-754 double (e.g. `1e400`).
    NumberOutOfRange,
    /// The input is not JSON text (RFC 8259).
    Syntax,
    /// A string holds a code point UTF-8 cannot carry (a lone surrogate such as `\ud800`),
    /// or the input bytes are not UTF-8.
    Untranslatable,
    /// The input exceeds a structural limit of this crate (4 GiB of text, or of a lock scope),
    /// or the canonical text exceeds the limit of the sink it is written to.
    TooLarge,
    /// Arrays and objects nested deeper than [`crate::MAX_DEPTH`].
    TooDeep,
}

impl ErrorKind {
    /// The SQLSTATE Postgres uses for this class of problem.
    pub const fn sqlstate(self) -> &'static str {
        match self {
            ErrorKind::DuplicateKey => "22030",
            ErrorKind::NumberOutOfRange => "22003",
            ErrorKind::Syntax => "22P02",
            ErrorKind::Untranslatable => "22P05",
            ErrorKind::TooLarge => "54000",
            ErrorKind::TooDeep => "54001",
        }
    }
}

/// An error with a human-readable message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

/// Longest excerpt of user data quoted in a message.
const EXCERPT: usize = 64;

fn excerpt(text: &str) -> String {
    if text.len() <= EXCERPT {
        return text.to_owned();
    }
    let mut end = EXCERPT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// Shorthand for `self.kind().sqlstate()`.
    pub fn sqlstate(&self) -> &'static str {
        self.kind.sqlstate()
    }

    pub(crate) fn duplicate_key(key: &str) -> Self {
        Self::new(
            ErrorKind::DuplicateKey,
            format!("duplicate JSON object key \"{}\"", excerpt(key)),
        )
    }

    pub(crate) fn out_of_range(number: &str) -> Self {
        Self::new(
            ErrorKind::NumberOutOfRange,
            format!(
                "JSON number {} is out of range for an IEEE 754 double",
                excerpt(number)
            ),
        )
    }

    pub(crate) fn syntax(offset: usize, what: &str) -> Self {
        Self::new(
            ErrorKind::Syntax,
            format!("invalid JSON text at byte {offset}: {what}"),
        )
    }

    pub(crate) fn sink_full() -> Self {
        Self::new(
            ErrorKind::TooLarge,
            "the canonical JSON text exceeds the size limit of its destination",
        )
    }

    /// Nesting beyond [`crate::MAX_DEPTH`] (54001).
    pub fn too_deep() -> Self {
        Self::new(
            ErrorKind::TooDeep,
            format!(
                "JSON value nested deeper than {} levels of arrays and objects",
                crate::MAX_DEPTH
            ),
        )
    }

    pub(crate) fn lone_surrogate(offset: usize, unit: u32) -> Self {
        Self::new(
            ErrorKind::Untranslatable,
            format!(
                "JSON string escape \\u{unit:04x} at byte {offset} is a lone surrogate, which UTF-8 cannot represent"
            ),
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = core::result::Result<T, Error>;
