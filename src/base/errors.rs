//! The SQLSTATEs this extension raises, and the one function that raises them.
//!
//! pgrx can only report codes from its closed `PgSqlErrorCode` enum (anything else becomes
//! `XX000`), so our own `P4xxx` codes go straight to Postgres' `errstart`/`errfinish`.
//! Every entry point returns its body's `Result` through [`OrRaise::or_raise`] (the C functions
//! through `args::c_function!`), so the error is raised from the outermost Rust frame, after
//! every Rust value has been dropped (tests/integration/security/error_guards.rs).

use core::ffi::{c_char, c_int};
use pgrx::pg_sys;

/// A five-character SQLSTATE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqlState(pub [u8; 5]);

impl SqlState {
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.0).unwrap_or("XX000")
    }

    /// Postgres' `PGUNSIXBIT`: the code from its packed form.
    pub fn unpack(packed: c_int) -> SqlState {
        let mut code = [0u8; 5];
        for (i, ch) in code.iter_mut().enumerate() {
            *ch = (((packed >> (6 * i)) & 0x3F) as u8).wrapping_add(b'0');
        }
        SqlState(code)
    }

    /// The packed form, as `errcode()` takes it.
    pub fn packed_code(&self) -> c_int {
        self.packed()
    }

    /// Postgres' `MAKE_SQLSTATE`.
    fn packed(&self) -> c_int {
        self.0.iter().enumerate().fold(0, |acc, (i, ch)| {
            acc | ((((*ch as c_int) - ('0' as c_int)) & 0x3F) << (6 * i))
        })
    }
}

// Input rules shared by every entry point.
pub const INVALID_SCOPE: SqlState = SqlState(*b"P4000");
pub const INVALID_KEY: SqlState = SqlState(*b"P4001");
pub const HASH_MISMATCH: SqlState = SqlState(*b"P4002");
pub const INVALID_REQUEST_HASH: SqlState = SqlState(*b"P4003");
pub const VALUE_TOO_LONG: SqlState = SqlState(*b"P4004");
// State transitions.
pub const COMPLETE_NOT_PROCESSING: SqlState = SqlState(*b"P4010");
pub const FAIL_NOT_PROCESSING: SqlState = SqlState(*b"P4011");
pub const STALE_ATTEMPT: SqlState = SqlState(*b"P4012");
pub const CHECKPOINT_NOT_PROCESSING: SqlState = SqlState(*b"P4013");
pub const CALL_IN_PROGRESS: SqlState = SqlState(*b"P4029");
pub const INBOX_HASH_MISMATCH: SqlState = SqlState(*b"P4050");
// Raised by idem_distribute (sql/citus.sql): Citus is not there, or not usable this way.
#[allow(
    dead_code,
    reason = "raised in SQL; listed with every code the extension raises"
)]
pub const CITUS_NOT_AVAILABLE: SqlState = SqlState(*b"P4060");
// Standard codes we raise ourselves, so they never carry a Rust backtrace.
pub const NULL_VALUE_NOT_ALLOWED: SqlState = SqlState(*b"22004");
pub const INVALID_PARAMETER_VALUE: SqlState = SqlState(*b"22023");
pub const NUMERIC_VALUE_OUT_OF_RANGE: SqlState = SqlState(*b"22003");
pub const DUPLICATE_JSON_KEY: SqlState = SqlState(*b"22030");
pub const INVALID_TEXT_REPRESENTATION: SqlState = SqlState(*b"22P02");
pub const UNTRANSLATABLE_CHARACTER: SqlState = SqlState(*b"22P05");
// JSON nested deeper than idem_canonical::MAX_DEPTH (also Postgres' own stack-depth check).
pub const STATEMENT_TOO_COMPLEX: SqlState = SqlState(*b"54001");
pub const PROGRAM_LIMIT_EXCEEDED: SqlState = SqlState(*b"54000");
/// A jsonb datum whose structure does not add up.
pub const DATA_CORRUPTED: SqlState = SqlState(*b"XX001");
pub const OBJECT_NOT_IN_PREREQUISITE_STATE: SqlState = SqlState(*b"55000");
pub const UNDEFINED_FUNCTION: SqlState = SqlState(*b"42883");
pub const INSUFFICIENT_PRIVILEGE: SqlState = SqlState(*b"42501");
pub const UNDEFINED_TABLE: SqlState = SqlState(*b"42P01");
pub const FEATURE_NOT_SUPPORTED: SqlState = SqlState(*b"0A000");
pub const INTERNAL_ERROR: SqlState = SqlState(*b"XX000");

/// An error on its way to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdemError {
    pub code: SqlState,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
}

pub type Result<T> = core::result::Result<T, IdemError>;

impl IdemError {
    pub fn new(code: SqlState, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            detail: None,
            hint: None,
        }
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl From<pgrx::spi::SpiError> for IdemError {
    fn from(err: pgrx::spi::SpiError) -> Self {
        IdemError::new(INTERNAL_ERROR, format!("idempotency: SPI failed: {err}"))
    }
}

/// A transition the protocol refused to compute (`idem_protocol::Transition::apply`).
impl From<idem_protocol::Error> for IdemError {
    fn from(err: idem_protocol::Error) -> Self {
        match err {
            // As SQL's `attempt + 1` would: past int4, an error, never a repeated number.
            idem_protocol::Error::AttemptOutOfRange => {
                IdemError::new(NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range")
            }
            idem_protocol::Error::NoRecord => IdemError::new(
                INTERNAL_ERROR,
                "a transition of a record that does not exist",
            ),
        }
    }
}

/// The error the extension raises for a canonicalizer error.
pub fn canonical_error(err: idem_canonical::Error) -> IdemError {
    let code = match err.kind() {
        idem_canonical::ErrorKind::DuplicateKey => DUPLICATE_JSON_KEY,
        idem_canonical::ErrorKind::NumberOutOfRange => NUMERIC_VALUE_OUT_OF_RANGE,
        idem_canonical::ErrorKind::Syntax => INVALID_TEXT_REPRESENTATION,
        idem_canonical::ErrorKind::Untranslatable => UNTRANSLATABLE_CHARACTER,
        idem_canonical::ErrorKind::TooLarge => PROGRAM_LIMIT_EXCEEDED,
        idem_canonical::ErrorKind::TooDeep => STATEMENT_TOO_COMPLEX,
    };
    // (portable/canonical.sql raises the same texts)
    let hint = match err.kind() {
        idem_canonical::ErrorKind::DuplicateKey => Some(
            "RFC 8785 canonical JSON requires unique member names; cast to jsonb to keep the last one."
                .to_owned(),
        ),
        idem_canonical::ErrorKind::NumberOutOfRange => Some(
            "RFC 8785 numbers are IEEE 754 doubles; send such values as strings.".to_owned(),
        ),
        idem_canonical::ErrorKind::TooDeep => Some(format!(
            "Canonical JSON takes at most {} nested arrays and objects; send a deeper part as a JSON string.",
            idem_canonical::MAX_DEPTH
        )),
        _ => None,
    };
    let e = IdemError::new(code, err.message().to_owned());
    match hint {
        Some(h) => e.hint(h),
        None => e,
    }
}

pub trait OrRaise<T> {
    /// The value, or the error raised as a Postgres ERROR.
    fn or_raise(self) -> T;
}

impl<T> OrRaise<T> for Result<T> {
    #[inline]
    fn or_raise(self) -> T {
        match self {
            Ok(value) => value,
            Err(err) => raise(err),
        }
    }
}

unsafe extern "C-unwind" {
    fn errstart(elevel: c_int, domain: *const c_char) -> bool;
    fn errcode(sqlerrcode: c_int) -> c_int;
    fn errmsg(fmt: *const c_char, ...) -> c_int;
    fn errdetail(fmt: *const c_char, ...) -> c_int;
    fn errhint(fmt: *const c_char, ...) -> c_int;
    fn errfinish(filename: *const c_char, lineno: c_int, funcname: *const c_char);
}

/// A palloc'd, NUL-terminated copy (cut at the first NUL), freed with the memory context.
fn palloc_cstr(text: &str) -> *mut c_char {
    let bytes = text.as_bytes();
    let len = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    // SAFETY: pnstrdup copies at most `len` bytes and terminates the copy.
    unsafe { pg_sys::pnstrdup(bytes.as_ptr().cast(), len as _) }
}

/// Raise `err` as an ERROR with its own SQLSTATE. Does not return: `errfinish` longjmps.
///
/// Precondition (why it is this shape): the longjmp skips Rust destructors, so all text is
/// copied to palloc'd memory and `err` is dropped before `errstart`; callers raise only from
/// the outermost frame of a `#[pg_extern]`, where nothing else with a destructor is alive.
#[allow(
    ffi_unwind_calls,
    reason = "the ERROR longjmps on purpose, from the outermost frame (see above)"
)]
pub fn raise(err: IdemError) -> ! {
    let code = err.code.packed();
    let message = palloc_cstr(&err.message);
    let detail = err
        .detail
        .as_deref()
        .map_or(core::ptr::null_mut(), palloc_cstr);
    let hint = err
        .hint
        .as_deref()
        .map_or(core::ptr::null_mut(), palloc_cstr);
    drop(err);
    // SAFETY: Postgres' own ereport sequence; every pointer is palloc'd or static.
    // pgrx names elog.h's ERROR `PGERROR`; it is 20 on PG13 and 21 from PG14: never hardcode it.
    unsafe {
        if errstart(pg_sys::PGERROR as c_int, core::ptr::null()) {
            errcode(code);
            errmsg(c"%s".as_ptr(), message);
            if !detail.is_null() {
                errdetail(c"%s".as_ptr(), detail);
            }
            if !hint.is_null() {
                errhint(c"%s".as_ptr(), hint);
            }
            errfinish(c"idempotency".as_ptr(), 0, c"idempotency".as_ptr());
        }
    }
    unreachable!("errfinish returned for an ERROR")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn make_sqlstate_matches_postgres() {
        // MAKE_SQLSTATE packs each character's (ch - '0') & 0x3F in 6 bits, first char lowest.
        let unique_violation = 2 | (3 << 6) | (5 << 12) | (5 << 24);
        assert_eq!(SqlState(*b"23505").packed(), unique_violation);
        let p = ('P' as c_int - '0' as c_int) & 0x3F;
        assert_eq!(SqlState(*b"P4002").packed(), p | (4 << 6) | (2 << 24));
    }

    #[test]
    fn unpack_inverts_pack() {
        for code in [*b"23505", *b"P4002", *b"42P01", *b"55P03", *b"XX000"] {
            assert_eq!(SqlState::unpack(SqlState(code).packed()), SqlState(code));
        }
    }
}
