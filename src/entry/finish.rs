//! Finishing an attempt: `idem_complete`, `idem_fail`, `idem_checkpoint`, and `idem_forget`.
//!
//! Each changes a record only while it is `processing` (and, when the caller gives its
//! `attempt`, only that attempt: fencing). When nothing changed, [`diagnose`] says why, or
//! accepts the call as a harmless repeat; both decisions are `idem_protocol`'s (`diagnose`,
//! `is_repeat`), only the comparison of the values is here.

use pgrx::pg_sys::{self, Datum};

use crate::base::datum::datum_bytes;
use crate::base::errors::{self, IdemError, Result};
use crate::base::record::{Record, Status};
use crate::spi::record_sql::by_key;
use crate::spi::{Conn, LazyConn, Statement, TEXT, opt_text_arg, text_arg};
use crate::steps::args::{self, Signature, c_function};
use crate::steps::change::{Target, change_attempt};
use crate::steps::input;
use crate::steps::transition::Transition;
use idem_protocol::{Diagnosis, Finish, is_repeat};

static FORGET: Statement = Statement {
    sql: concat!("DELETE FROM idempotency.requests", by_key!()),
    args: &[TEXT, TEXT],
};

/// Is `given` the stored response? jsonb equality, NULL equal to NULL.
fn same_response(stored: Option<Datum>, given: Option<Datum>) -> bool {
    match (stored, given) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            // SAFETY: the built-in jsonb equality on two jsonb datums.
            unsafe { pgrx::direct_function_call::<bool>(pg_sys::jsonb_eq, &[Some(a), Some(b)]) }
                .unwrap_or(false)
        }
        _ => false,
    }
}

fn record_name(scope: &[u8], key: &[u8]) -> String {
    format!(
        "scope {:?}, key {:?}",
        input::lossy(scope),
        input::lossy(key)
    )
}

fn stale_attempt(scope: &[u8], key: &[u8], given: i32, current: i32) -> IdemError {
    IdemError::new(
        errors::STALE_ATTEMPT,
        format!(
            "attempt {given} of {} is no longer the current attempt",
            record_name(scope, key)
        ),
    )
    .detail(format!(
        "The current attempt is {current}: another claim took the key over."
    ))
    .hint("Stop this attempt; its lease ran out and its work is someone else's now.")
}

fn not_processing(
    code: errors::SqlState,
    what: &str,
    scope: &[u8],
    key: &[u8],
    found: Option<&Record>,
) -> IdemError {
    let detail = match found {
        None => "There is no record of this key (never claimed, forgotten or purged).".to_string(),
        Some(state) => format!(
            "The record is {} (attempt {}).",
            state.status.label().to_string_lossy(),
            state.attempt
        ),
    };
    IdemError::new(
        code,
        format!(
            "cannot {what} {}: it is not processing",
            record_name(scope, key)
        ),
    )
    .detail(detail)
    .hint(
        "Call idem_claim first; only a processing claim can be completed, failed or checkpointed.",
    )
}

/// Explain why an update by attempt changed nothing (`idem_protocol::diagnose`), or `Ok(())`
/// for "a repeat; fine".
fn diagnose(
    found: Option<Record>,
    attempt: Option<i32>,
    code: errors::SqlState,
    what: &str,
    scope: &[u8],
    key: &[u8],
    is_repeat: impl FnOnce(&Record) -> Result<bool>,
) -> Result<()> {
    match idem_protocol::diagnose(found.as_ref(), attempt, is_repeat)? {
        Diagnosis::Repeat => Ok(()),
        Diagnosis::Stale { given, current } => Err(stale_attempt(scope, key, given, current)),
        Diagnosis::NotProcessing => Err(not_processing(code, what, scope, key, found.as_ref())),
    }
}

/// `idem_complete`'s arguments by position (sql/claim.sql).
#[cfg_attr(not(feature = "pg_test"), allow(dead_code))]
pub(crate) const COMPLETE_ARGS: Signature = Signature {
    name: "idem_complete",
    args: &["text", "text", "jsonb", "int4"],
};

fn complete(fcinfo: pg_sys::FunctionCallInfo) -> Result<()> {
    // SAFETY: called by Postgres as idem_complete(text, text, jsonb, int4).
    let (scope, key, response, attempt) = unsafe {
        (
            input::scope(args::bytes(fcinfo, 0))?,
            input::key(args::bytes(fcinfo, 1))?,
            args::datum(fcinfo, 2),
            args::int4(fcinfo, 3),
        )
    };
    let mut conn = LazyConn::default();
    let complete = Transition::Complete { response };
    let target = Target {
        scope,
        key,
        attempt,
    };
    let found = match change_attempt(&mut conn, target, &complete)? {
        Ok(changed) => {
            crate::entry::metrics::count_write(changed.direct);
            crate::entry::metrics::count_completion();
            return Ok(());
        }
        Err(found) => found,
    };
    let why = errors::COMPLETE_NOT_PROCESSING;
    diagnose(found, attempt, why, "complete", scope, key, |state| {
        let same = same_response(state.response, response);
        Ok(is_repeat(Finish::Complete, state.status, same))
    })
}

c_function!(idem_complete, pg_finfo_idem_complete, complete);

/// `idem_fail`'s arguments by position (sql/claim.sql).
#[cfg_attr(not(feature = "pg_test"), allow(dead_code))]
pub(crate) const FAIL_ARGS: Signature = Signature {
    name: "idem_fail",
    args: &["text", "text", "bool", "text", "text", "int4"],
};

fn fail(fcinfo: pg_sys::FunctionCallInfo) -> Result<()> {
    // SAFETY: called by Postgres as idem_fail(text, text, bool, text, text, int4).
    let (scope, key, retryable, code, message, attempt) = unsafe {
        (
            input::scope(args::bytes(fcinfo, 0))?,
            input::key(args::bytes(fcinfo, 1))?,
            args::boolean(fcinfo, 2).ok_or_else(|| {
                IdemError::new(errors::NULL_VALUE_NOT_ALLOWED, "retryable must not be null")
            })?,
            input::optional("code", args::bytes(fcinfo, 3), input::MAX_NAME_BYTES)?,
            input::optional("message", args::bytes(fcinfo, 4), input::MAX_TEXT_BYTES)?,
            args::int4(fcinfo, 5),
        )
    };
    let status = if retryable {
        Status::FailedRetryable
    } else {
        Status::FailedFinal
    };
    let fail = Transition::Fail {
        status,
        code: opt_text_arg(code),
        message: opt_text_arg(message),
    };
    let mut conn = LazyConn::default();
    let target = Target {
        scope,
        key,
        attempt,
    };
    let found = match change_attempt(&mut conn, target, &fail)? {
        Ok(changed) => {
            crate::entry::metrics::count_write(changed.direct);
            crate::entry::metrics::count_failure();
            return Ok(());
        }
        Err(found) => found,
    };
    let why = errors::FAIL_NOT_PROCESSING;
    diagnose(found, attempt, why, "fail", scope, key, |state| {
        let same = |stored: Option<Datum>, given: Option<&[u8]>| {
            // SAFETY: failure_code and failure_message are text datums.
            stored.map(|d| unsafe { datum_bytes(d) }) == given
        };
        let same = same(state.failure_code, code) && same(state.failure_message, message);
        Ok(is_repeat(Finish::Fail(status), state.status, same))
    })
}

c_function!(idem_fail, pg_finfo_idem_fail, fail);

/// `idem_checkpoint`'s arguments by position (sql/claim.sql).
#[cfg_attr(not(feature = "pg_test"), allow(dead_code))]
pub(crate) const CHECKPOINT_ARGS: Signature = Signature {
    name: "idem_checkpoint",
    args: &["text", "text", "text", "int4", "interval"],
};

fn checkpoint(fcinfo: pg_sys::FunctionCallInfo) -> Result<Datum> {
    // SAFETY: called by Postgres as idem_checkpoint(text, text, text, int4, interval).
    let (scope, key, recovery_point, attempt, lease) = unsafe {
        let lease = match args::interval(fcinfo, 4) {
            None => None,
            some => Some(input::positive_interval("lease", some)?),
        };
        (
            input::scope(args::bytes(fcinfo, 0))?,
            input::key(args::bytes(fcinfo, 1))?,
            input::optional(
                "recovery_point",
                args::bytes(fcinfo, 2),
                input::MAX_TEXT_BYTES,
            )?,
            args::int4(fcinfo, 3),
            lease,
        )
    };
    let mut conn = LazyConn::default();
    let checkpoint = Transition::Checkpoint {
        recovery_point: opt_text_arg(recovery_point),
        lease,
    };
    let target = Target {
        scope,
        key,
        attempt,
    };
    let found = match change_attempt(&mut conn, target, &checkpoint)? {
        Ok(changed) => {
            return changed
                .locked_until
                .map(Datum::from)
                .ok_or_else(|| IdemError::new(errors::INTERNAL_ERROR, "checkpoint left no lease"));
        }
        Err(found) => found,
    };
    let why = errors::CHECKPOINT_NOT_PROCESSING;
    diagnose(found, attempt, why, "checkpoint", scope, key, |state| {
        Ok(is_repeat(Finish::Checkpoint, state.status, false))
    })?;
    Err(IdemError::new(
        errors::INTERNAL_ERROR,
        "checkpoint changed nothing",
    ))
}

c_function!(idem_checkpoint, pg_finfo_idem_checkpoint, checkpoint);

/// `idem_forget`'s arguments by position (sql/claim.sql).
#[cfg_attr(not(feature = "pg_test"), allow(dead_code))]
pub(crate) const FORGET_ARGS: Signature = Signature {
    name: "idem_forget",
    args: &["text", "text"],
};

fn forget(fcinfo: pg_sys::FunctionCallInfo) -> Result<bool> {
    // SAFETY: called by Postgres as idem_forget(text, text).
    let (scope, key) = unsafe {
        (
            input::scope(args::bytes(fcinfo, 0))?,
            input::key(args::bytes(fcinfo, 1))?,
        )
    };
    let conn = Conn::open_for(c"requests")?;
    // A rotation of the generations layout may move the record (a DELETE and an INSERT) while
    // this waits for its row lock: then it deletes nothing, and tries again where it went.
    for _ in 0..3 {
        if !FORGET
            .run(&conn, &[text_arg(scope), text_arg(key)])?
            .is_empty()
        {
            return Ok(true);
        }
        if crate::spi::record_sql::find(&conn, scope, key)?.is_none() {
            return Ok(false);
        }
    }
    Ok(false)
}

c_function!(idem_forget, pg_finfo_idem_forget, forget);
