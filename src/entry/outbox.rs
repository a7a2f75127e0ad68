//! The transactional outbox: `idem_outbox_put` enqueues a message in the caller's transaction;
//! publishers `idem_outbox_take` a leased batch, publish it, then `idem_outbox_ack` (or
//! `idem_outbox_nack`) it; `idem_outbox_purge` deletes old published rows.
//!
//! Leasing is `FOR UPDATE SKIP LOCKED` plus a `leased_until` deadline: a row another publisher
//! is taking right now is skipped, a leased row is not available until its lease ends, and a
//! row whose lease ran out without an ack is handed out again (a crashed publisher loses
//! nothing; delivery is at least once, so consumers deduplicate by `message_id`).

use pgrx::pg_sys::{self, Datum, Oid};

use crate::base::errors::{self, IdemError, Result};
use crate::base::settings::{self, OutboxDelivery};
use crate::entry::{outbox_cdc, outbox_size};
use crate::spi::{Conn, Rows, Statement, opt_text_arg, text_arg};
use crate::steps::args::{self, Signature, c_function};
use crate::steps::input;

const TEXT: Oid = pg_sys::TEXTOID;
const JSONB: Oid = pg_sys::JSONBOID;
const INT4: Oid = pg_sys::INT4OID;
const INT8: Oid = pg_sys::INT8OID;
const INTERVAL: Oid = pg_sys::INTERVALOID;
const TIMESTAMPTZ: Oid = pg_sys::TIMESTAMPTZOID;

static PUT: Statement = Statement {
    sql: "INSERT INTO idempotency.outbox \
          (topic, dedupe_key, payload, headers, available_at, created_at) \
          VALUES ($1, $2, $3, $4, COALESCE($5, pg_catalog.now()), pg_catalog.now()) \
          ON CONFLICT (topic, dedupe_key) DO NOTHING RETURNING id::pg_catalog.int8",
    args: &[TEXT, TEXT, JSONB, JSONB, TIMESTAMPTZ],
};

static BY_DEDUPE_KEY: Statement = Statement {
    sql: "SELECT id::pg_catalog.int8 FROM idempotency.outbox \
          WHERE topic OPERATOR(pg_catalog.=) $1 AND dedupe_key OPERATOR(pg_catalog.=) $2",
    args: &[TEXT, TEXT],
};

/// Oldest available first; rows another transaction has locked are skipped, not waited for.
static TAKE: Statement = Statement {
    sql: "WITH picked AS ( \
            SELECT id FROM idempotency.outbox \
            WHERE status OPERATOR(pg_catalog.=) 'pending' \
              AND available_at OPERATOR(pg_catalog.<=) pg_catalog.now() \
              AND (leased_until IS NULL OR leased_until OPERATOR(pg_catalog.<=) pg_catalog.now()) \
              AND ($3::pg_catalog.text IS NULL OR topic OPERATOR(pg_catalog.=) $3) \
            ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED), \
          taken AS ( \
            UPDATE idempotency.outbox AS o \
            SET leased_until = pg_catalog.now() OPERATOR(pg_catalog.+) $2, \
                attempts = CASE WHEN o.attempts OPERATOR(pg_catalog.<) 2147483647 \
                           THEN o.attempts OPERATOR(pg_catalog.+) 1 ELSE o.attempts END \
            FROM picked WHERE o.id OPERATOR(pg_catalog.=) picked.id \
            RETURNING o.id, o.message_id, o.topic, o.payload, o.headers, o.attempts) \
          SELECT id::pg_catalog.int8, message_id::pg_catalog.uuid, topic::pg_catalog.text, \
                 payload::pg_catalog.jsonb, headers::pg_catalog.jsonb, attempts::pg_catalog.int4 \
          FROM taken ORDER BY id",
    args: &[INT4, INTERVAL, TEXT],
};

static ACK: Statement = Statement {
    sql: "UPDATE idempotency.outbox \
          SET status = 'published', published_at = pg_catalog.now(), leased_until = NULL \
          WHERE id OPERATOR(pg_catalog.=) ANY ($1) AND status OPERATOR(pg_catalog.=) 'pending'",
    args: &[pg_sys::INT8ARRAYOID],
};

static NACK: Statement = Statement {
    sql: "UPDATE idempotency.outbox \
          SET last_error = $2, leased_until = NULL, \
              available_at = pg_catalog.now() OPERATOR(pg_catalog.+) $3 \
          WHERE id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'pending'",
    args: &[INT8, TEXT, INTERVAL],
};

static PURGE: Statement = Statement {
    sql: "WITH doomed AS (SELECT id FROM idempotency.outbox \
            WHERE status OPERATOR(pg_catalog.=) 'published' \
              AND published_at OPERATOR(pg_catalog.<) $2 \
            ORDER BY published_at LIMIT $1 FOR UPDATE SKIP LOCKED) \
          DELETE FROM idempotency.outbox AS o USING doomed \
          WHERE o.id OPERATOR(pg_catalog.=) doomed.id",
    args: &[INT4, TIMESTAMPTZ],
};

fn null_error(what: &str) -> IdemError {
    IdemError::new(
        errors::NULL_VALUE_NOT_ALLOWED,
        format!("{what} must not be null"),
    )
}

/// Is this jsonb datum an object (not an array or a scalar)?
fn is_object(value: Datum) -> bool {
    // SAFETY: a jsonb datum; the root container's header says what it holds.
    unsafe {
        let jsonb = pg_sys::pg_detoast_datum(value.cast_mut_ptr()) as *const pg_sys::Jsonb;
        (*jsonb).root.header & pg_sys::JB_FOBJECT != 0
    }
}

// ---------------------------------------------------------------------------------------------
// idem_outbox_put

/// `idem_outbox_put`'s arguments by position (sql/outbox.sql).
#[cfg_attr(not(feature = "pg_test"), allow(dead_code))]
pub(crate) const PUT_ARGS: Signature = Signature {
    name: "idem_outbox_put",
    args: &["text", "jsonb", "text", "jsonb", "timestamptz"],
};

/// The put's checks of its first four arguments (topic, payload, dedupe_key, headers): names,
/// a null payload, headers an object, the size cap. `idempotency.outbox_put_check` runs them again
/// inside the signing function, so that no direct call signs what a put would refuse.
///
/// # Safety
/// `fcinfo` is a call whose first four arguments are text, jsonb, text, jsonb.
#[allow(clippy::type_complexity)]
unsafe fn checked<'a>(
    fcinfo: pg_sys::FunctionCallInfo,
) -> Result<(&'a [u8], Datum, Option<&'a [u8]>, Option<Datum>)> {
    // SAFETY: the caller's promise on the arguments' types.
    let (topic, payload, dedupe_key, headers) = unsafe {
        (
            input::name("topic", errors::INVALID_SCOPE, args::bytes(fcinfo, 0))?,
            args::datum(fcinfo, 1).ok_or_else(|| null_error("payload"))?,
            match args::bytes(fcinfo, 2) {
                None => None,
                some => Some(input::name("dedupe_key", errors::INVALID_KEY, some)?),
            },
            args::datum(fcinfo, 3),
        )
    };
    if headers.is_some_and(|h| !is_object(h)) {
        return Err(IdemError::new(
            errors::INVALID_PARAMETER_VALUE,
            "headers must be a JSON object",
        ));
    }
    outbox_size::check(payload, headers)?;
    Ok((topic, payload, dedupe_key, headers))
}

fn put(fcinfo: pg_sys::FunctionCallInfo) -> Result<i64> {
    // SAFETY: called by Postgres as idem_outbox_put(text, jsonb, text, jsonb, timestamptz).
    let (topic, payload, dedupe_key, headers) = unsafe { checked(fcinfo)? };
    // SAFETY: argument 4 is the timestamptz.
    let available_at = unsafe { args::datum(fcinfo, 4) };
    let conn = Conn::open_for(c"outbox")?;
    let insert = match outbox_cdc::delivery(available_at)? {
        OutboxDelivery::Poll => &PUT,
        OutboxDelivery::CdcTable => &outbox_cdc::PUT_PUBLISHED,
        OutboxDelivery::CdcMessage => {
            return outbox_cdc::emit(&conn, topic, dedupe_key, payload, headers);
        }
    };
    let row = [
        text_arg(topic),
        opt_text_arg(dedupe_key),
        Some(payload),
        headers,
        available_at,
    ];
    // Each pass inserts, or finds the row its dedupe key names, or saw that row purged.
    for _ in 0..3 {
        let inserted = insert.run(&conn, &row)?;
        if !inserted.is_empty() {
            return Ok(inserted.required(0, 1)?.value() as i64);
        }
        let Some(key) = dedupe_key else { break };
        let existing = BY_DEDUPE_KEY.run(&conn, &[text_arg(topic), text_arg(key)])?;
        if !existing.is_empty() {
            return Ok(existing.required(0, 1)?.value() as i64);
        }
    }
    Err(IdemError::new(
        errors::INTERNAL_ERROR,
        "idem_outbox_put neither inserted nor found the message",
    ))
}

c_function!(idem_outbox_put, pg_finfo_idem_outbox_put, put);

/// `idempotency.outbox_put_check(topic, payload, dedupe_key, headers)` (sql/cdc_sign.sql): the put's
/// argument checks, raised as the put raises them; the portable edition's is portable/cdc.sql.
fn put_check(fcinfo: pg_sys::FunctionCallInfo) -> Result<()> {
    // SAFETY: called by Postgres as outbox_put_check(text, jsonb, text, jsonb).
    unsafe { checked(fcinfo) }.map(|_| ())
}

c_function!(
    outbox_put_check_wrapper,
    pg_finfo_outbox_put_check_wrapper,
    put_check
);

// ---------------------------------------------------------------------------------------------
// idem_outbox_take

/// Hand `rows` back as the function's result set (materialize mode), copied out of SPI memory.
///
/// # Safety
/// `fcinfo` is a call of a set-returning function whose result row has `rows`' columns.
unsafe fn materialize(fcinfo: pg_sys::FunctionCallInfo, rows: &Rows<'_>) -> Result<Datum> {
    // SAFETY: `fcinfo` is a live call (the caller's contract); `resultinfo` is checked to be a
    // ReturnSetInfo that accepts materialize mode before it is used, and the tuple descriptor
    // and store are made in the per-query context that outlives the result set. Each row has
    // `natts` values, the columns of the caller's contract.
    unsafe {
        let rsinfo = (*fcinfo).resultinfo as *mut pg_sys::ReturnSetInfo;
        if rsinfo.is_null()
            || (*rsinfo).type_ != pg_sys::NodeTag::T_ReturnSetInfo
            || (*rsinfo).allowedModes & pg_sys::SetFunctionReturnMode::SFRM_Materialize as i32 == 0
        {
            return Err(IdemError::new(
                errors::FEATURE_NOT_SUPPORTED,
                "set-valued function called in context that cannot accept a set",
            ));
        }
        let mut tupdesc: pg_sys::TupleDesc = core::ptr::null_mut();
        let kind = pg_sys::get_call_result_type(fcinfo, core::ptr::null_mut(), &mut tupdesc);
        if kind != pg_sys::TypeFuncClass::TYPEFUNC_COMPOSITE || tupdesc.is_null() {
            return Err(IdemError::new(
                errors::INTERNAL_ERROR,
                "the function must return rows",
            ));
        }
        let natts = (*tupdesc).natts as usize;
        let random = (*rsinfo).allowedModes
            & pg_sys::SetFunctionReturnMode::SFRM_Materialize_Random as i32
            != 0;
        // The result set lives as long as the query.
        let per_query = (*(*rsinfo).econtext).ecxt_per_query_memory;
        let old = pg_sys::MemoryContextSwitchTo(per_query);
        let tupdesc = pg_sys::CreateTupleDescCopy(tupdesc);
        let store = pg_sys::tuplestore_begin_heap(random, false, pg_sys::work_mem);
        pg_sys::MemoryContextSwitchTo(old);

        let mut values = vec![Datum::from(0); natts];
        let mut nulls = vec![true; natts];
        for row in 0..rows.len() {
            for col in 0..natts {
                let value = rows.get(row, col + 1)?;
                values[col] = value.unwrap_or(Datum::from(0));
                nulls[col] = value.is_none();
            }
            // Copies the values into the tuplestore's memory.
            pg_sys::tuplestore_putvalues(store, tupdesc, values.as_mut_ptr(), nulls.as_mut_ptr());
        }
        (*rsinfo).returnMode = pg_sys::SetFunctionReturnMode::SFRM_Materialize;
        (*rsinfo).setResult = store;
        (*rsinfo).setDesc = tupdesc;
        Ok(Datum::from(0))
    }
}

/// `idem_outbox_take`'s arguments by position (sql/outbox.sql).
#[cfg_attr(not(feature = "pg_test"), allow(dead_code))]
pub(crate) const TAKE_ARGS: Signature = Signature {
    name: "idem_outbox_take",
    args: &["int4", "interval", "text"],
};

fn take(fcinfo: pg_sys::FunctionCallInfo) -> Result<Datum> {
    // SAFETY: called by Postgres as idem_outbox_take(int4, interval, text).
    let (batch, lease, topic) = unsafe {
        (
            input::batch("batch", args::int4(fcinfo, 0))?,
            input::positive_interval("lease", args::interval(fcinfo, 1))?,
            args::bytes(fcinfo, 2),
        )
    };
    let conn = Conn::open_for(c"outbox")?;
    let taken = TAKE.run(
        &conn,
        &[Some(Datum::from(batch)), Some(lease), opt_text_arg(topic)],
    )?;
    // SAFETY: idem_outbox_take returns TABLE(id, message_id, topic, payload, headers, attempts),
    // the columns of TAKE.
    unsafe { materialize(fcinfo, &taken) }
}

c_function!(idem_outbox_take, pg_finfo_idem_outbox_take, take);

// ---------------------------------------------------------------------------------------------
// idem_outbox_ack / idem_outbox_nack / idem_outbox_purge

/// `idem_outbox_ack`'s arguments by position (sql/outbox.sql).
#[cfg_attr(not(feature = "pg_test"), allow(dead_code))]
pub(crate) const ACK_ARGS: Signature = Signature {
    name: "idem_outbox_ack",
    args: &["int8[]"],
};

fn ack(fcinfo: pg_sys::FunctionCallInfo) -> Result<i64> {
    // SAFETY: called by Postgres as idem_outbox_ack(int8[]) (STRICT: never NULL).
    let ids = unsafe { args::datum(fcinfo, 0) }.ok_or_else(|| null_error("ids"))?;
    let conn = Conn::open_for(c"outbox")?;
    Ok(ACK.run(&conn, &[Some(ids)])?.len() as i64)
}

c_function!(idem_outbox_ack, pg_finfo_idem_outbox_ack, ack);

/// `idem_outbox_nack`'s arguments by position (sql/outbox.sql).
#[cfg_attr(not(feature = "pg_test"), allow(dead_code))]
pub(crate) const NACK_ARGS: Signature = Signature {
    name: "idem_outbox_nack",
    args: &["int8", "text", "interval"],
};

fn nack(fcinfo: pg_sys::FunctionCallInfo) -> Result<()> {
    // SAFETY: called by Postgres as idem_outbox_nack(int8, text, interval).
    let (id, error, retry_after) = unsafe {
        (
            args::datum(fcinfo, 0).ok_or_else(|| null_error("id"))?,
            args::bytes(fcinfo, 1),
            input::non_negative_interval("retry_after", args::interval(fcinfo, 2))?,
        )
    };
    let error = error.map(|e| input::clip(e, input::MAX_TEXT_BYTES));
    let conn = Conn::open_for(c"outbox")?;
    // A row that is published (another publisher acked it) or gone is left alone.
    NACK.run(&conn, &[Some(id), opt_text_arg(error), Some(retry_after)])?;
    Ok(())
}

c_function!(idem_outbox_nack, pg_finfo_idem_outbox_nack, nack);

/// Delete at most `batch` published messages older than `idempotency.outbox_retention`.
pub fn purge_batch(conn: &Conn, batch: i32) -> Result<i64> {
    // SAFETY: reads the transaction's start time (what now() returns).
    let now = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() };
    let retention = i64::from(settings::OUTBOX_RETENTION.get()) * 1_000_000;
    let cutoff = now.saturating_sub(retention);
    let args = [Some(Datum::from(batch)), Some(Datum::from(cutoff))];
    Ok(PURGE.run(conn, &args)?.len() as i64)
}

/// `idem_outbox_purge`'s arguments by position (sql/outbox.sql).
#[cfg_attr(not(feature = "pg_test"), allow(dead_code))]
pub(crate) const PURGE_ARGS: Signature = Signature {
    name: "idem_outbox_purge",
    args: &["int4"],
};

fn purge(fcinfo: pg_sys::FunctionCallInfo) -> Result<i64> {
    // SAFETY: called by Postgres as idem_outbox_purge(int4).
    let batch = input::batch("batch", unsafe { args::int4(fcinfo, 0) })?;
    purge_batch(&Conn::open_for(c"outbox")?, batch)
}

c_function!(idem_outbox_purge, pg_finfo_idem_outbox_purge, purge);
