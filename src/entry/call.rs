//! `idem_call(scope, key, request, fn)`: the claim protocol in one call.
//!
//! It claims (scope, key) with the request's hash, exactly as `idem_claim` does, and then:
//! - `replay_success` / `final_failure`: returns what is stored; `fn` is not called;
//! - `processing_active`: raises `P4029` (someone else is running it right now);
//! - otherwise runs `fn(request)` in a subtransaction (csrc/call_guard.c). Success is recorded
//!   (`succeeded`) and returned. A transient error (see [`is_transient`]) is re-raised as it
//!   was, so nothing is recorded and the caller retries the whole transaction. Any other error
//!   rolls back only the subtransaction and is recorded as `failed_final` with its own
//!   SQLSTATE and message, and returned without raising: the record commits with the caller.

use core::ffi::CStr;

use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::prelude::*;

use crate::base::errors::{self, IdemError, OrRaise, Result, SqlState};
use crate::base::record::{Outcome, Status};
use crate::entry::claim::{self, ClaimArgs, Claimed};
use crate::spi::text_arg;
use crate::steps::args::{self, Signature, c_function, function_info_v1};
use crate::steps::change::{Target, change_attempt};
use crate::steps::input;
use crate::steps::result_row::CallSite;
use crate::steps::transition::Transition;

unsafe extern "C-unwind" {
    // csrc/call_guard.c
    fn idem_call_in_subxact(
        fn_oid: Oid,
        arg: Datum,
        isnull: *mut bool,
        errcxt: pg_sys::MemoryContext,
        err: *mut *mut pg_sys::ErrorData,
    ) -> Datum;
    // Declared here, not taken from pg_sys: pgrx's binding runs it under its FFI guard, which
    // would catch the error again and rewrite codes it does not know to XX000.
    fn ReThrowError(edata: *mut pg_sys::ErrorData) -> !;
}

// ---------------------------------------------------------------------------------------------
// Error classification

/// Is an error with this SQLSTATE transient: would the same transaction, retried, likely
/// succeed? Serialization failure, deadlock, lock not available, query canceled (e.g.
/// statement_timeout), connection exceptions (class 08) and insufficient resources (class 53).
pub fn is_transient(sqlstate: &[u8; 5]) -> bool {
    matches!(sqlstate, b"40001" | b"40P01" | b"55P03" | b"57014")
        || sqlstate.starts_with(b"08")
        || sqlstate.starts_with(b"53")
}

/// A SQLSTATE as given by a user: five digits or upper-case letters.
fn parse_sqlstate(text: &[u8]) -> Result<[u8; 5]> {
    match <[u8; 5]>::try_from(text) {
        Ok(code)
            if code
                .iter()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase()) =>
        {
            Ok(code)
        }
        _ => Err(IdemError::new(
            errors::INVALID_PARAMETER_VALUE,
            format!("{:?} is not a SQLSTATE", input::lossy(text)),
        )
        .hint("A SQLSTATE is five digits or upper-case letters, such as 40001.")),
    }
}

/// Postgres' `unpack_sql_state`.
fn unpack_sqlstate(packed: i32) -> [u8; 5] {
    let mut code = [b'0'; 5];
    for (i, ch) in code.iter_mut().enumerate() {
        *ch = (((packed >> (6 * i)) & 0x3F) as u8).wrapping_add(b'0');
    }
    code
}

/// `idem_retryable`'s arguments by position (sql/call.sql).
#[cfg_attr(not(feature = "pg_test"), allow(dead_code))]
pub(crate) const RETRYABLE_ARGS: Signature = Signature {
    name: "idem_retryable",
    args: &["text"],
};

fn retryable(fcinfo: pg_sys::FunctionCallInfo) -> Result<bool> {
    // SAFETY: called by Postgres as idem_retryable(text) (STRICT: never NULL).
    let text = unsafe { args::bytes(fcinfo, 0) }.unwrap_or_default();
    Ok(is_transient(&parse_sqlstate(text)?))
}

c_function!(idem_retryable, pg_finfo_idem_retryable, retryable);

// ---------------------------------------------------------------------------------------------
// The request hash

/// The hash `idem_call` claims with: `idem_hash(request)`, the RFC 8785 SHA-256.
fn request_hash(request: Datum) -> Result<String> {
    // SAFETY: a non-null jsonb argument of the current call.
    let digest = unsafe { crate::entry::canonical::hash_jsonb_datum(request)? };
    Ok(idem_canonical::to_hex(&digest))
}

// ---------------------------------------------------------------------------------------------
// idem_call

/// What the outermost frame does once everything else is dropped.
enum Finish {
    Row(Datum),
    /// Re-raise the callee's transient error, as it was.
    Rethrow(*mut pg_sys::ErrorData),
}

/// The row `idem_call` returns: (outcome, response, failure_code, failure_message, attempt).
struct Answer {
    outcome: Outcome,
    response: Option<Datum>,
    failure_code: Option<Datum>,
    failure_message: Option<Datum>,
    attempt: Option<i32>,
}

impl Answer {
    fn stored(claimed: &Claimed, outcome: Outcome) -> Self {
        Answer {
            outcome,
            response: claimed.response,
            failure_code: claimed.failure_code,
            failure_message: claimed.failure_message,
            attempt: claimed.attempt,
        }
    }

    /// Form the row in `target` (the caller's memory), copying values out of SPI memory.
    fn form(&self, site: &CallSite, target: pg_sys::MemoryContext) -> Datum {
        let values = [
            Some(site.outcome_datum(self.outcome)),
            self.response,
            self.failure_code,
            self.failure_message,
            self.attempt.map(Datum::from),
        ];
        site.form(&values, target)
    }
}

/// `idem_call`'s arguments by position (sql/call.sql).
#[cfg_attr(not(feature = "pg_test"), allow(dead_code))]
pub(crate) const CALL_ARGS: Signature = Signature {
    name: "idem_call",
    args: &[
        "text",
        "text",
        "jsonb",
        "regprocedure",
        "interval",
        "interval",
    ],
};

fn call(fcinfo: pg_sys::FunctionCallInfo) -> Result<Finish> {
    // SAFETY: called by Postgres as
    // idem_call(text, text, jsonb, regprocedure, interval, interval).
    let (scope, key, request, fn_oid, lease, retention, site) = unsafe {
        (
            input::scope(args::bytes(fcinfo, 0))?,
            input::key(args::bytes(fcinfo, 1))?,
            args::datum(fcinfo, 2).ok_or_else(|| {
                IdemError::new(errors::INVALID_REQUEST_HASH, "request must not be null")
            })?,
            args::datum(fcinfo, 3)
                .map(|d| Oid::from(d.value() as u32))
                .ok_or_else(|| {
                    IdemError::new(errors::NULL_VALUE_NOT_ALLOWED, "fn must not be null")
                })?,
            input::positive_interval("lease", args::interval(fcinfo, 4))?,
            input::positive_interval("retention", args::interval(fcinfo, 5))?,
            crate::steps::result_row::call_site(fcinfo)?,
        )
    };
    crate::entry::call_target::check_function(fn_oid)?;
    let hash = request_hash(request)?;
    // SAFETY: the memory context the caller expects the result in.
    let caller = unsafe { pg_sys::CurrentMemoryContext };

    let claim_args = ClaimArgs {
        scope,
        key,
        hash: hash.as_bytes(),
        lease,
        retention,
        claimed_by: None,
    };
    let (claimed, mut held) = claim::claim_held(&claim_args)?;
    crate::entry::metrics::count_claim(claimed.outcome);
    let outcome = claimed
        .outcome
        .ok_or_else(|| IdemError::new(errors::INTERNAL_ERROR, "claim produced no outcome"))?;
    match outcome {
        Outcome::ReplaySuccess | Outcome::FinalFailure => {
            return Ok(Finish::Row(
                Answer::stored(&claimed, outcome).form(site, caller),
            ));
        }
        Outcome::ProcessingActive => return Err(in_progress(scope, key)),
        Outcome::NewClaim | Outcome::ProcessingStale | Outcome::RetryableFailure => {}
    }
    let attempt = claimed.attempt;

    let mut isnull = true;
    let mut err: *mut pg_sys::ErrorData = core::ptr::null_mut();
    #[allow(
        ffi_unwind_calls,
        reason = "inside pg_guard_ffi_boundary: a Postgres error becomes a Rust panic"
    )]
    // SAFETY: calls fn(request) in a subtransaction; a caught error comes back in `err`, copied
    // into `caller` (it must outlive this SPI connection if re-raised). Errors outside the
    // call itself are turned into Rust panics by the guard (nothing here to unwind wrongly).
    let result = unsafe {
        pg_sys::ffi::pg_guard_ffi_boundary(|| {
            idem_call_in_subxact(fn_oid, request, &mut isnull, caller, &mut err)
        })
    };

    if err.is_null() {
        let response = (!isnull).then_some(result);
        fail_point!("call.after_callee");
        let complete = Transition::Complete { response };
        let target = Target {
            scope,
            key,
            attempt,
        };
        let Ok(changed) = change_attempt(&mut held.conn, target, &complete)? else {
            return Err(record_vanished(scope, key, "complete"));
        };
        crate::entry::metrics::count_write(changed.direct);
        crate::entry::metrics::count_completion();
        let answer = Answer {
            outcome,
            response,
            failure_code: None,
            failure_message: None,
            attempt,
        };
        return Ok(Finish::Row(answer.form(site, caller)));
    }

    // SAFETY: `err` is the ErrorData the guard copied.
    let (code, message) = unsafe {
        let message = if (*err).message.is_null() {
            &[][..]
        } else {
            CStr::from_ptr((*err).message).to_bytes()
        };
        (unpack_sqlstate((*err).sqlerrcode), message)
    };
    if is_transient(&code) {
        drop(held);
        return Ok(Finish::Rethrow(err));
    }
    let message = input::clip(message, input::MAX_TEXT_BYTES);
    let code_text = text_arg(SqlState(code).as_str().as_bytes());
    let message_text = text_arg(message);
    let fail = Transition::Fail {
        status: Status::FailedFinal,
        code: code_text,
        message: message_text,
    };
    let target = Target {
        scope,
        key,
        attempt,
    };
    let Ok(changed) = change_attempt(&mut held.conn, target, &fail)? else {
        return Err(record_vanished(scope, key, "fail"));
    };
    crate::entry::metrics::count_write(changed.direct);
    crate::entry::metrics::count_failure();
    let answer = Answer {
        outcome: Outcome::FinalFailure,
        response: None,
        failure_code: code_text,
        failure_message: message_text,
        attempt,
    };
    Ok(Finish::Row(answer.form(site, caller)))
}

fn in_progress(scope: &[u8], key: &[u8]) -> IdemError {
    IdemError::new(
        errors::CALL_IN_PROGRESS,
        format!(
            "idempotency key {:?} in scope {:?} is being processed by another call",
            input::lossy(key),
            input::lossy(scope)
        ),
    )
    .detail("Its claim has a live lease, or was made by a transaction that has not committed yet.")
    .hint("Retry after a short delay.")
}

/// `fn` itself changed or removed the record idem_call had claimed.
fn record_vanished(scope: &[u8], key: &[u8], what: &str) -> IdemError {
    let code = if what == "complete" {
        errors::COMPLETE_NOT_PROCESSING
    } else {
        errors::FAIL_NOT_PROCESSING
    };
    IdemError::new(
        code,
        format!(
            "idem_call could not {what} scope {:?}, key {:?}: the record is no longer processing",
            input::lossy(scope),
            input::lossy(key)
        ),
    )
    .hint("The called function must not complete, fail or forget its own idempotency key.")
}

function_info_v1!(pg_finfo_idem_call);
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idem_call(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    match call(fcinfo).or_raise() {
        Finish::Row(row) => row,
        #[allow(
            ffi_unwind_calls,
            reason = "the ERROR longjmps on purpose, from the outermost frame"
        )]
        // SAFETY: every Rust value of `call` is gone; like errors::raise, this longjmps from
        // the outermost frame. ReThrowError copies the error into ErrorContext.
        Finish::Rethrow(edata) => unsafe { ReThrowError(edata) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_sqlstates() {
        for code in [
            b"40001", b"40P01", b"55P03", b"57014", b"08006", b"08000", b"53100", b"53200",
        ] {
            assert!(is_transient(code), "{code:?}");
        }
        for code in [
            b"23505", b"22023", b"P0001", b"AB123", b"40002", b"XX000", b"57P01",
        ] {
            assert!(!is_transient(code), "{code:?}");
        }
    }

    #[test]
    fn sqlstates_round_trip() {
        let pack = |code: &[u8; 5]| {
            code.iter().enumerate().fold(0i32, |acc, (i, c)| {
                acc | (((*c as i32 - '0' as i32) & 0x3F) << (6 * i))
            })
        };
        for code in [b"40001", b"AB123", b"P4050", b"XX000"] {
            assert_eq!(&unpack_sqlstate(pack(code)), code);
        }
        assert!(parse_sqlstate(b"4000").is_err());
        assert!(parse_sqlstate(b"4000a").is_err());
        assert_eq!(parse_sqlstate(b"40P01"), Ok(*b"40P01"));
    }
}
