//! Finishing an attempt: `idem_complete`, `idem_fail`, `idem_checkpoint`, and `idem_forget`.
//!
//! Each changes a record only while it is `processing` (and, when the caller gives its
//! `attempt`, only that attempt: fencing). When nothing changed, [`diagnose`] says why, or
//! accepts the call as a harmless repeat.

use pgrx::pg_sys::{self, Datum};
use pgrx::prelude::*;

use crate::args::{self, function_info_v1};
use crate::claim::{
    INT4, INTERVAL, JSONB, Status, TEXT, add_interval, by_key, datum_bytes, int4_arg, opt_text_arg,
    text_arg, text_datum,
};
use crate::errors::{self, IdemError, OrRaise, Result};
use crate::input;
use crate::lookup::Lookup;
use crate::plans::{Arg, Conn, LazyConn, Statement};
use crate::write::{Values, Writer, col};

/// The condition for changing an attempt: processing, and the caller's attempt if given.
macro_rules! current_attempt {
    ($attempt:literal) => {
        concat!(
            " AND status OPERATOR(pg_catalog.=) 'processing' AND (",
            $attempt,
            "::pg_catalog.int4 IS NULL OR attempt OPERATOR(pg_catalog.=) ",
            $attempt,
            ")"
        )
    };
}

pub(crate) static COMPLETE: Statement = Statement {
    sql: concat!(
        "UPDATE idempotency.requests SET status = 'succeeded', response = $3, locked_until = NULL, \
         failure_code = NULL, failure_message = NULL, updated_at = pg_catalog.now(), \
         expires_at = GREATEST(expires_at, pg_catalog.now() OPERATOR(pg_catalog.+) retention)",
        by_key!(),
        current_attempt!("$4"),
        " RETURNING attempt::pg_catalog.int4"
    ),
    args: &[TEXT, TEXT, JSONB, INT4],
};

macro_rules! fail_statement {
    ($status:literal) => {
        Statement {
            sql: concat!(
                "UPDATE idempotency.requests SET status = '",
                $status,
                "', failure_code = $3, failure_message = $4, locked_until = NULL, \
                 updated_at = pg_catalog.now(), \
                 expires_at = GREATEST(expires_at, pg_catalog.now() OPERATOR(pg_catalog.+) retention)",
                by_key!(),
                current_attempt!("$5"),
                " RETURNING attempt::pg_catalog.int4"
            ),
            args: &[TEXT, TEXT, TEXT, TEXT, INT4],
        }
    };
}
pub(crate) static FAIL_RETRYABLE: Statement = fail_statement!("failed_retryable");
pub(crate) static FAIL_FINAL: Statement = fail_statement!("failed_final");

static CHECKPOINT: Statement = Statement {
    sql: concat!(
        "UPDATE idempotency.requests SET recovery_point = COALESCE($3, recovery_point), \
         lease = COALESCE($5, lease), \
         locked_until = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) COALESCE($5, lease), \
         updated_at = pg_catalog.now()",
        by_key!(),
        current_attempt!("$4"),
        " RETURNING locked_until::pg_catalog.timestamptz"
    ),
    args: &[TEXT, TEXT, TEXT, INT4, INTERVAL],
};

/// Why a complete / fail / checkpoint changed nothing: the record as it is now.
static STATE: Statement = Statement {
    sql: concat!(
        "SELECT status::pg_catalog.text, attempt::pg_catalog.int4, NULL, \
         failure_code::pg_catalog.text, failure_message::pg_catalog.text \
         FROM idempotency.requests",
        by_key!()
    ),
    args: &[TEXT, TEXT],
};

/// Is `$3` the stored response? jsonb equality, NULL equal to NULL.
static SAME_RESPONSE: Statement = Statement {
    sql: concat!(
        "SELECT (response IS NULL AND $3::pg_catalog.jsonb IS NULL) \
         OR COALESCE(response OPERATOR(pg_catalog.=) $3, false) \
         FROM idempotency.requests",
        by_key!()
    ),
    args: &[TEXT, TEXT, JSONB],
};

static FORGET: Statement = Statement {
    sql: concat!("DELETE FROM idempotency.requests", by_key!()),
    args: &[TEXT, TEXT],
};

/// The record of a key as it is now, for explaining why nothing changed.
struct State {
    status: Status,
    attempt: i32,
    failure_code: Option<Datum>,
    failure_message: Option<Datum>,
}

fn state(conn: &Conn, scope: &[u8], key: &[u8]) -> Result<Option<State>> {
    let rows = STATE.run(conn, &[text_arg(scope), text_arg(key)])?;
    if rows.is_empty() {
        return Ok(None);
    }
    // SAFETY: column 1 is text.
    let status = Status::parse(unsafe { datum_bytes(rows.required(0, 1)?) })?;
    Ok(Some(State {
        status,
        attempt: rows.required(0, 2)?.value() as i32,
        failure_code: rows.get(0, 4)?,
        failure_message: rows.get(0, 5)?,
    }))
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
    found: Option<&State>,
) -> IdemError {
    let detail = match found {
        None => "There is no record of this key (never claimed, forgotten or purged).".to_string(),
        Some(state) => format!(
            "The record is {} (attempt {}).",
            state.status.label(),
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

/// Explain why an update by attempt changed nothing, or `Ok(None)` for "a repeat; fine".
fn diagnose(
    found: Option<State>,
    attempt: Option<i32>,
    code: errors::SqlState,
    what: &str,
    scope: &[u8],
    key: &[u8],
    is_repeat: impl FnOnce(&State) -> Result<bool>,
) -> Result<()> {
    if let (Some(state), Some(given)) = (&found, attempt)
        && state.attempt != given
    {
        return Err(stale_attempt(scope, key, given, state.attempt));
    }
    match &found {
        Some(state) if is_repeat(state)? => Ok(()),
        _ => Err(not_processing(code, what, scope, key, found.as_ref())),
    }
}

/// How a processing attempt ends: the record's new status and outcome columns.
pub(crate) struct Ending {
    pub(crate) status: Status,
    pub(crate) response: Option<Datum>,
    pub(crate) failure_code: Option<Datum>,
    pub(crate) failure_message: Option<Datum>,
}

/// End the current attempt of (scope, key) without SQL (see `write.rs`). `false`: nothing was
/// written; the caller goes through SQL, which also explains a record that is not processing.
fn finish_directly(scope: &[u8], key: &[u8], attempt: Option<i32>, ending: Ending) -> Result<bool> {
    let Some(mut lookup) = Lookup::open()? else {
        return Ok(false);
    };
    let Some(record) = lookup.find(text_datum(scope), text_datum(key))? else {
        return Ok(false);
    };
    if record.status != Status::Processing.index()
        || attempt.is_some_and(|given| given != record.attempt)
    {
        return Ok(false);
    }
    // Only now: a repeat or a fenced call needs no executor state.
    let Some(mut writer) = Writer::open(&lookup, pg_sys::ACL_UPDATE) else {
        return Ok(false);
    };
    let (slot, snapshot) = lookup.found();
    // SAFETY: reads the stored row's 17 columns from the slot that holds it.
    let (mut values, tid) = unsafe {
        if ((*slot).tts_nvalid as usize) < 17 {
            pg_sys::slot_getsomeattrs_int(slot, 17);
        }
        let mut values: Values = [None; 17];
        for (i, value) in values.iter_mut().enumerate() {
            if !*(*slot).tts_isnull.add(i) {
                *value = Some(*(*slot).tts_values.add(i));
            }
        }
        (values, (*slot).tts_tid)
    };
    // SAFETY: reads the transaction's start time (SQL's now()).
    let now = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() };
    let (Some(created_at), Some(retention), Some(expires_at)) = (
        values[col::CREATED_AT],
        values[col::RETENTION],
        values[col::EXPIRES_AT],
    ) else {
        return Ok(false);
    };
    if now < created_at.value() as i64 {
        // Claimed after this transaction began: SQL reports requests_times_check.
        return Ok(false);
    }
    let expires_at = (expires_at.value() as i64).max(add_interval(now, retention));
    values[col::STATUS] = Some(Datum::from(lookup.catalog.statuses[ending.status.index()]));
    values[col::RESPONSE] = ending.response;
    values[col::FAILURE_CODE] = ending.failure_code;
    values[col::FAILURE_MESSAGE] = ending.failure_message;
    values[col::LOCKED_UNTIL] = None;
    values[col::UPDATED_AT] = Some(Datum::from(now));
    values[col::EXPIRES_AT] = Some(Datum::from(expires_at));
    Ok(writer.update(tid, snapshot, &values))
}

/// End the current attempt of (scope, key): directly where possible, else with `statement`
/// (its parameters `args`) on `conn`. `false`: nothing changed (not processing, another
/// attempt, or no record).
pub(crate) fn end_attempt(
    conn: &mut LazyConn,
    scope: &[u8],
    key: &[u8],
    attempt: Option<i32>,
    ending: Ending,
    statement: &'static Statement,
    args: &[Arg],
) -> Result<bool> {
    if finish_directly(scope, key, attempt, ending)? {
        crate::metrics::count_write(true);
        return Ok(true);
    }
    if crate::citus::requests_distributed()? {
        // Citus cannot run `now() + retention` on a column: the same update with the values
        // computed after the row is locked (src/citus.rs).
        let distributed = if core::ptr::eq(statement, &COMPLETE) {
            &crate::citus::COMPLETE
        } else if core::ptr::eq(statement, &FAIL_RETRYABLE) {
            &crate::citus::FAIL_RETRYABLE
        } else if core::ptr::eq(statement, &FAIL_FINAL) {
            &crate::citus::FAIL_FINAL
        } else {
            return Err(IdemError::new(
                errors::INTERNAL_ERROR,
                "end_attempt: no distributed form of this statement",
            ));
        };
        if !crate::citus::end_attempt(conn.get()?, scope, key, distributed, args)? {
            return Ok(false);
        }
        crate::metrics::count_write(false);
        return Ok(true);
    }
    if statement.run(conn.get()?, args)?.is_empty() {
        return Ok(false);
    }
    crate::metrics::count_write(false);
    Ok(true)
}

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
    let ending = Ending {
        status: Status::Succeeded,
        response,
        failure_code: None,
        failure_message: None,
    };
    let mut conn = LazyConn::default();
    let args = [text_arg(scope), text_arg(key), response, int4_arg(attempt)];
    if end_attempt(&mut conn, scope, key, attempt, ending, &COMPLETE, &args)? {
        crate::metrics::count_completion();
        return Ok(());
    }
    let conn = conn.get()?;
    let found = state(conn, scope, key)?;
    let why = errors::COMPLETE_NOT_PROCESSING;
    diagnose(found, attempt, why, "complete", scope, key, |state| {
        if state.status != Status::Succeeded {
            return Ok(false);
        }
        // A repeat with an identical response is a no-op.
        let same = SAME_RESPONSE.run(&conn, &[text_arg(scope), text_arg(key), response])?;
        Ok(!same.is_empty() && same.get(0, 1)?.is_some_and(|d| d.value() != 0))
    })
}

function_info_v1!(pg_finfo_idem_complete);
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idem_complete(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    complete(fcinfo).or_raise();
    Datum::from(0)
}

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
    let target = if retryable {
        Status::FailedRetryable
    } else {
        Status::FailedFinal
    };
    let statement = if retryable {
        &FAIL_RETRYABLE
    } else {
        &FAIL_FINAL
    };
    let ending = Ending {
        status: target,
        response: None,
        failure_code: opt_text_arg(code),
        failure_message: opt_text_arg(message),
    };
    let mut conn = LazyConn::default();
    let args = [
        text_arg(scope),
        text_arg(key),
        opt_text_arg(code),
        opt_text_arg(message),
        int4_arg(attempt),
    ];
    if end_attempt(&mut conn, scope, key, attempt, ending, statement, &args)? {
        crate::metrics::count_failure();
        return Ok(());
    }
    let found = state(conn.get()?, scope, key)?;
    diagnose(
        found,
        attempt,
        errors::FAIL_NOT_PROCESSING,
        "fail",
        scope,
        key,
        |state| {
            // A repeat of the same failure is a no-op.
            // SAFETY: failure_code and failure_message are text datums.
            let same = |stored: Option<Datum>, given: Option<&[u8]>| {
                stored.map(|d| unsafe { datum_bytes(d) }) == given
            };
            Ok(state.status == target
                && same(state.failure_code, code)
                && same(state.failure_message, message))
        },
    )
}

function_info_v1!(pg_finfo_idem_fail);
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idem_fail(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    fail(fcinfo).or_raise();
    Datum::from(0)
}

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
    let conn = Conn::open()?;
    if crate::citus::requests_distributed()? {
        let args = (opt_text_arg(recovery_point), int4_arg(attempt));
        if let Some(locked_until) =
            crate::citus::checkpoint(&conn, scope, key, args.0, args.1, lease)?
        {
            return Ok(locked_until);
        }
    } else {
        let changed = CHECKPOINT.run(
            &conn,
            &[
                text_arg(scope),
                text_arg(key),
                opt_text_arg(recovery_point),
                int4_arg(attempt),
                lease,
            ],
        )?;
        if !changed.is_empty() {
            // timestamptz is pass-by-value: safe to return past SPI_finish.
            return changed.required(0, 1);
        }
    }
    let found = state(&conn, scope, key)?;
    let why = errors::CHECKPOINT_NOT_PROCESSING;
    diagnose(found, attempt, why, "checkpoint", scope, key, |_| Ok(false))?;
    Err(IdemError::new(
        errors::INTERNAL_ERROR,
        "checkpoint changed nothing",
    ))
}

function_info_v1!(pg_finfo_idem_checkpoint);
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idem_checkpoint(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    checkpoint(fcinfo).or_raise()
}

fn forget(fcinfo: pg_sys::FunctionCallInfo) -> Result<bool> {
    // SAFETY: called by Postgres as idem_forget(text, text).
    let (scope, key) = unsafe {
        (
            input::scope(args::bytes(fcinfo, 0))?,
            input::key(args::bytes(fcinfo, 1))?,
        )
    };
    let conn = Conn::open()?;
    Ok(!FORGET
        .run(&conn, &[text_arg(scope), text_arg(key)])?
        .is_empty())
}

function_info_v1!(pg_finfo_idem_forget);
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idem_forget(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    Datum::from(forget(fcinfo).or_raise())
}
