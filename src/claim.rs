//! The claim protocol: `idem_claim`, `idem_complete`, `idem_fail`, `idem_checkpoint`,
//! `idem_forget`. Everything a request's record goes through is in this file.
//!
//! How a claim never waits:
//! - it first reads the record with a plain snapshot read: a replay or a final failure is
//!   answered from that read alone (no row lock, no WAL);
//! - a new key is inserted only under a transaction-scoped *try* lock on
//!   `idem_lock_key(scope, key)`, so a second claimer of a key whose insert is not committed
//!   yet gets `processing_active` instead of waiting on the unique index;
//! - a takeover (expired lease, retryable failure, expired record) locks the row with
//!   `FOR UPDATE SKIP LOCKED`: a row someone else is changing is `processing_active`.

use core::ffi::CStr;

use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::prelude::*;
use pgrx::{PgMemoryContexts, PgTupleDesc};

use crate::args::{self, function_info_v1};
use crate::errors::{self, IdemError, OrRaise, Result};
use crate::input;
use crate::lookup::{self, Lookup, Record};
use crate::plans::{Arg, Conn, Rows, Statement};

/// `idem_outcome`, in the enum's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    NewClaim,
    ReplaySuccess,
    ProcessingActive,
    ProcessingStale,
    RetryableFailure,
    FinalFailure,
}

impl Outcome {
    pub const ALL: [Outcome; 6] = [
        Outcome::NewClaim,
        Outcome::ReplaySuccess,
        Outcome::ProcessingActive,
        Outcome::ProcessingStale,
        Outcome::RetryableFailure,
        Outcome::FinalFailure,
    ];

    pub fn label(self) -> &'static CStr {
        match self {
            Outcome::NewClaim => c"new_claim",
            Outcome::ReplaySuccess => c"replay_success",
            Outcome::ProcessingActive => c"processing_active",
            Outcome::ProcessingStale => c"processing_stale",
            Outcome::RetryableFailure => c"retryable_failure",
            Outcome::FinalFailure => c"final_failure",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Processing,
    Succeeded,
    FailedRetryable,
    FailedFinal,
}

/// In `idem_status` order, as [`lookup::STATUS_LABELS`].
const STATUSES: [Status; 4] = [
    Status::Processing,
    Status::Succeeded,
    Status::FailedRetryable,
    Status::FailedFinal,
];

impl Status {
    fn parse(label: &[u8]) -> Result<Self> {
        lookup::STATUS_LABELS
            .iter()
            .position(|known| known.to_bytes() == label)
            .map(|i| STATUSES[i])
            .ok_or_else(|| {
                IdemError::new(
                    errors::INTERNAL_ERROR,
                    format!("unknown idem_status {:?}", input::lossy(label)),
                )
            })
    }

    fn label(self) -> &'static str {
        match self {
            Status::Processing => "processing",
            Status::Succeeded => "succeeded",
            Status::FailedRetryable => "failed_retryable",
            Status::FailedFinal => "failed_final",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Statements. Fully qualified (tables, functions, operators, casts), values always bound.

const TEXT: Oid = pg_sys::TEXTOID;
const INTERVAL: Oid = pg_sys::INTERVALOID;
const JSONB: Oid = pg_sys::JSONBOID;
const INT4: Oid = pg_sys::INT4OID;

/// The columns the claim path reads, in the order [`Row::read`] expects.
macro_rules! row_columns {
    () => {
        "status::pg_catalog.text, request_hash, attempt, response, recovery_point, \
         failure_code, failure_message, locked_until, expires_at"
    };
}
macro_rules! by_key {
    () => {
        " WHERE scope OPERATOR(pg_catalog.=) $1 AND key OPERATOR(pg_catalog.=) $2"
    };
}

static LOOKUP: Statement = Statement {
    sql: concat!(
        "SELECT ",
        row_columns!(),
        " FROM idempotency.requests",
        by_key!()
    ),
    args: &[TEXT, TEXT],
};

static LOCK_ROW: Statement = Statement {
    sql: concat!(
        "SELECT ",
        row_columns!(),
        " FROM idempotency.requests",
        by_key!(),
        " FOR UPDATE SKIP LOCKED"
    ),
    args: &[TEXT, TEXT],
};

static INSERT: Statement = Statement {
    sql: "INSERT INTO idempotency.requests AS r \
          (scope, key, request_hash, status, attempt, claimed_by, claimed_at, locked_until, \
           lease, retention, created_at, updated_at, expires_at) \
          VALUES ($1, $2, $3, 'processing', 1, $6, pg_catalog.now(), \
           pg_catalog.now() OPERATOR(pg_catalog.+) $4, $4, $5, pg_catalog.now(), pg_catalog.now(), \
           pg_catalog.now() OPERATOR(pg_catalog.+) $5) \
          ON CONFLICT (scope, key) DO NOTHING \
          RETURNING attempt, locked_until, expires_at",
    args: &[TEXT, TEXT, TEXT, INTERVAL, INTERVAL, TEXT],
};

/// Take over an attempt that ended (expired lease or retryable failure): attempt + 1.
static TAKE_OVER: Statement = Statement {
    sql: concat!(
        "UPDATE idempotency.requests SET status = 'processing', \
         attempt = attempt OPERATOR(pg_catalog.+) 1, claimed_by = $6, claimed_at = pg_catalog.now(), \
         locked_until = pg_catalog.now() OPERATOR(pg_catalog.+) $4, lease = $4, retention = $5, \
         updated_at = pg_catalog.now(), expires_at = pg_catalog.now() OPERATOR(pg_catalog.+) $5",
        by_key!(),
        " AND request_hash OPERATOR(pg_catalog.=) $3",
        " RETURNING attempt, locked_until, expires_at"
    ),
    args: &[TEXT, TEXT, TEXT, INTERVAL, INTERVAL, TEXT],
};

/// Start over on a record whose retention ended: as if it had been purged.
static RESET: Statement = Statement {
    sql: concat!(
        "UPDATE idempotency.requests SET request_hash = $3, status = 'processing', attempt = 1, \
         response = NULL, recovery_point = NULL, failure_code = NULL, failure_message = NULL, \
         claimed_by = $6, claimed_at = pg_catalog.now(), \
         locked_until = pg_catalog.now() OPERATOR(pg_catalog.+) $4, lease = $4, retention = $5, \
         created_at = pg_catalog.now(), updated_at = pg_catalog.now(), \
         expires_at = pg_catalog.now() OPERATOR(pg_catalog.+) $5",
        by_key!(),
        " RETURNING attempt, locked_until, expires_at"
    ),
    args: &[TEXT, TEXT, TEXT, INTERVAL, INTERVAL, TEXT],
};

/// The condition for changing an attempt: processing, and the caller's attempt if given.
macro_rules! current_attempt {
    ($attempt:literal) => {
        concat!(
            " AND status = 'processing' AND (",
            $attempt,
            "::pg_catalog.int4 IS NULL OR attempt OPERATOR(pg_catalog.=) ",
            $attempt,
            ")"
        )
    };
}

static COMPLETE: Statement = Statement {
    sql: concat!(
        "UPDATE idempotency.requests SET status = 'succeeded', response = $3, locked_until = NULL, \
         failure_code = NULL, failure_message = NULL, updated_at = pg_catalog.now(), \
         expires_at = GREATEST(expires_at, pg_catalog.now() OPERATOR(pg_catalog.+) retention)",
        by_key!(),
        current_attempt!("$4"),
        " RETURNING attempt"
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
                " RETURNING attempt"
            ),
            args: &[TEXT, TEXT, TEXT, TEXT, INT4],
        }
    };
}
static FAIL_RETRYABLE: Statement = fail_statement!("failed_retryable");
static FAIL_FINAL: Statement = fail_statement!("failed_final");

static CHECKPOINT: Statement = Statement {
    sql: concat!(
        "UPDATE idempotency.requests SET recovery_point = COALESCE($3, recovery_point), \
         lease = COALESCE($5, lease), \
         locked_until = pg_catalog.now() OPERATOR(pg_catalog.+) COALESCE($5, lease), \
         updated_at = pg_catalog.now()",
        by_key!(),
        current_attempt!("$4"),
        " RETURNING locked_until"
    ),
    args: &[TEXT, TEXT, TEXT, INT4, INTERVAL],
};

/// Why a complete / fail / checkpoint changed nothing: the record as it is now.
static STATE: Statement = Statement {
    sql: concat!(
        "SELECT status::pg_catalog.text, attempt, NULL, failure_code, failure_message \
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

// ---------------------------------------------------------------------------------------------
// Datum plumbing.

fn text_arg(bytes: &[u8]) -> Arg {
    Some(text_datum(bytes))
}

fn opt_text_arg(bytes: Option<&[u8]>) -> Arg {
    bytes.map(text_datum)
}

fn int4_arg(value: Option<i32>) -> Arg {
    value.map(Datum::from)
}

fn text_datum(bytes: &[u8]) -> Datum {
    // SAFETY: copies `bytes` into a new palloc'd text.
    unsafe {
        Datum::from(pg_sys::cstring_to_text_with_len(
            bytes.as_ptr().cast(),
            bytes.len() as _,
        ))
    }
}

/// Bytes of a text datum (detoasted if needed).
unsafe fn datum_bytes<'a>(datum: Datum) -> &'a [u8] {
    unsafe { <&[u8]>::from_datum(datum, false).unwrap_or_default() }
}

/// A record as the claim path reads it. Pass-by-reference columns stay datums in SPI
/// memory until the result row is formed.
struct Row {
    status: Status,
    request_hash: Datum,
    attempt: i32,
    response: Option<Datum>,
    recovery_point: Option<Datum>,
    failure_code: Option<Datum>,
    failure_message: Option<Datum>,
    locked_until: Option<i64>,
    expires_at: i64,
}

impl Row {
    fn read(rows: Rows<'_>) -> Result<Option<Row>> {
        if rows.is_empty() {
            return Ok(None);
        }
        // SAFETY: column 1 is text.
        let status = Status::parse(unsafe { datum_bytes(rows.required(0, 1)?) })?;
        Ok(Some(Row {
            status,
            request_hash: rows.required(0, 2)?,
            attempt: rows.required(0, 3)?.value() as i32,
            response: rows.get(0, 4)?,
            recovery_point: rows.get(0, 5)?,
            failure_code: rows.get(0, 6)?,
            failure_message: rows.get(0, 7)?,
            locked_until: rows.get(0, 8)?.map(|d| d.value() as i64),
            expires_at: rows.required(0, 9)?.value() as i64,
        }))
    }

    fn from(record: Record) -> Row {
        Row {
            status: STATUSES[record.status],
            request_hash: record.request_hash,
            attempt: record.attempt,
            response: record.response,
            recovery_point: record.recovery_point,
            failure_code: record.failure_code,
            failure_message: record.failure_message,
            locked_until: record.locked_until,
            expires_at: record.expires_at,
        }
    }

    fn hash_matches(&self, hash: &[u8]) -> bool {
        // SAFETY: request_hash is a text datum.
        unsafe { datum_bytes(self.request_hash) == hash }
    }
}

// ---------------------------------------------------------------------------------------------
// idem_claim

struct ClaimArgs<'a> {
    scope: &'a [u8],
    key: &'a [u8],
    hash: &'a [u8],
    lease: Datum,
    retention: Datum,
    claimed_by: Option<&'a [u8]>,
}

impl<'a> ClaimArgs<'a> {
    /// # Safety
    /// `fcinfo` is a call of `idem_claim` as declared in sql/claim.sql.
    unsafe fn read(fcinfo: pg_sys::FunctionCallInfo) -> Result<Self> {
        unsafe {
            Ok(ClaimArgs {
                scope: input::scope(args::bytes(fcinfo, 0))?,
                key: input::key(args::bytes(fcinfo, 1))?,
                hash: input::request_hash(args::bytes(fcinfo, 2))?,
                lease: input::positive_interval("lease", args::interval(fcinfo, 3))?,
                retention: input::positive_interval("retention", args::interval(fcinfo, 4))?,
                claimed_by: input::optional(
                    "claimed_by",
                    args::bytes(fcinfo, 5),
                    input::MAX_NAME_BYTES,
                )?,
            })
        }
    }

    fn statement_args(&self) -> [Arg; 6] {
        [
            text_arg(self.scope),
            text_arg(self.key),
            text_arg(self.hash),
            Some(self.lease),
            Some(self.retention),
            opt_text_arg(self.claimed_by),
        ]
    }

    fn key_args(&self) -> [Arg; 2] {
        [text_arg(self.scope), text_arg(self.key)]
    }
}

/// The row `idem_claim` returns, with pass-by-reference values still in SPI memory.
#[derive(Default)]
struct Claimed {
    outcome: Option<Outcome>,
    attempt: Option<i32>,
    response: Option<Datum>,
    recovery_point: Option<Datum>,
    failure_code: Option<Datum>,
    failure_message: Option<Datum>,
    locked_until: Option<i64>,
    expires_at: Option<i64>,
}

impl Claimed {
    /// Someone else's claim we cannot see yet (not committed): nothing to report but that.
    fn unseen_active() -> Self {
        Claimed {
            outcome: Some(Outcome::ProcessingActive),
            ..Default::default()
        }
    }

    /// An answer read from a record, without changing it.
    fn from_row(outcome: Outcome, row: &Row) -> Self {
        Claimed {
            outcome: Some(outcome),
            attempt: Some(row.attempt),
            response: if outcome == Outcome::ReplaySuccess {
                row.response
            } else {
                None
            },
            recovery_point: row.recovery_point,
            failure_code: row.failure_code,
            failure_message: row.failure_message,
            locked_until: row.locked_until,
            expires_at: Some(row.expires_at),
        }
    }

    /// A claim this call made: attempt, lease end and expiry from the statement's RETURNING.
    fn made(outcome: Outcome, previous: Option<&Row>, returning: Rows<'_>) -> Result<Self> {
        Ok(Claimed {
            outcome: Some(outcome),
            attempt: Some(returning.required(0, 1)?.value() as i32),
            response: None,
            recovery_point: previous.and_then(|r| r.recovery_point),
            failure_code: previous.and_then(|r| r.failure_code),
            failure_message: previous.and_then(|r| r.failure_message),
            locked_until: Some(returning.required(0, 2)?.value() as i64),
            expires_at: Some(returning.required(0, 3)?.value() as i64),
        })
    }
}

/// What a record means for a new claim of its key.
enum Verdict {
    Answer(Outcome),
    TakeOver(Outcome),
    /// Retention ended: the key is free again.
    Reset,
}

fn judge(row: &Row, args: &ClaimArgs<'_>, now: i64) -> Result<Verdict> {
    if row.status != Status::Processing && row.expires_at < now {
        return Ok(Verdict::Reset);
    }
    if !row.hash_matches(args.hash) {
        // SAFETY: request_hash is a text datum.
        let stored = input::lossy(unsafe { datum_bytes(row.request_hash) }).into_owned();
        return Err(IdemError::new(
            errors::HASH_MISMATCH,
            format!(
                "idempotency key {:?} in scope {:?} was used for a different request",
                input::lossy(args.key),
                input::lossy(args.scope)
            ),
        )
        .detail(format!("Stored request hash: {stored}. This request's hash: {}.", input::lossy(args.hash)))
        .hint("Reuse an idempotency key only to retry the same request; use a new key for a new request."));
    }
    Ok(match row.status {
        Status::Succeeded => Verdict::Answer(Outcome::ReplaySuccess),
        Status::FailedFinal => Verdict::Answer(Outcome::FinalFailure),
        Status::FailedRetryable => Verdict::TakeOver(Outcome::RetryableFailure),
        Status::Processing if row.locked_until.is_some_and(|until| until < now) => {
            Verdict::TakeOver(Outcome::ProcessingStale)
        }
        Status::Processing => Verdict::Answer(Outcome::ProcessingActive),
    })
}

fn try_lock_key(args: &ClaimArgs<'_>) -> Result<bool> {
    let key = crate::lock_key::lock_key_for(args.scope, args.key)?;
    // SAFETY: calls the built-in pg_try_advisory_xact_lock(bigint).
    let locked = unsafe {
        pgrx::direct_function_call::<bool>(
            pg_sys::pg_try_advisory_xact_lock_int8,
            &[key.into_datum()],
        )
    };
    Ok(locked == Some(true))
}

/// The claim's decisions from a first read of the record (`row`) on, writing through SPI.
fn claim_in(conn: &Conn, args: &ClaimArgs<'_>, mut row: Option<Row>, now: i64) -> Result<Claimed> {
    // Each pass either answers or saw the record vanish/appear under it; three are plenty.
    for _ in 0..3 {
        let Some(seen) = row else {
            if !try_lock_key(args)? {
                return Ok(Claimed::unseen_active());
            }
            let inserted = INSERT.run(conn, &args.statement_args())?;
            if !inserted.is_empty() {
                return Claimed::made(Outcome::NewClaim, None, inserted);
            }
            // Inserted and committed by someone since our read: look again.
            row = Row::read(LOOKUP.run(conn, &args.key_args())?)?;
            continue;
        };
        if let Verdict::Answer(outcome) = judge(&seen, args, now)? {
            return Ok(Claimed::from_row(outcome, &seen));
        }
        let Some(locked) = Row::read(LOCK_ROW.run(conn, &args.key_args())?)? else {
            // Locked by a transaction that is changing it, or just deleted.
            row = Row::read(LOOKUP.run(conn, &args.key_args())?)?;
            match &row {
                Some(busy) => return Ok(Claimed::from_row(Outcome::ProcessingActive, busy)),
                None => continue,
            }
        };
        // The locked version is the newest: judge it again.
        return match judge(&locked, args, now)? {
            Verdict::Answer(outcome) => Ok(Claimed::from_row(outcome, &locked)),
            Verdict::TakeOver(outcome) => {
                let updated = TAKE_OVER.run(conn, &args.statement_args())?;
                Claimed::made(outcome, Some(&locked), updated)
            }
            Verdict::Reset => {
                let updated = RESET.run(conn, &args.statement_args())?;
                Claimed::made(Outcome::NewClaim, None, updated)
            }
        };
    }
    Ok(Claimed::unseen_active())
}

/// Per call site: the blessed result descriptor and the `idem_outcome` label OIDs.
struct CallSite {
    tupdesc: pg_sys::TupleDesc,
    outcomes: [Oid; 6],
}

/// # Safety
/// `fcinfo` is a call of a function returning a row whose first column is `idem_outcome`.
unsafe fn call_site(fcinfo: pg_sys::FunctionCallInfo) -> Result<&'static CallSite> {
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if !(*flinfo).fn_extra.is_null() {
            return Ok(&*((*flinfo).fn_extra as *const CallSite));
        }
        let site =
            PgMemoryContexts::For((*flinfo).fn_mcxt).switch_to(|_| -> Result<*mut CallSite> {
                let mut tupdesc: pg_sys::TupleDesc = core::ptr::null_mut();
                let kind =
                    pg_sys::get_call_result_type(fcinfo, core::ptr::null_mut(), &mut tupdesc);
                if kind != pg_sys::TypeFuncClass::TYPEFUNC_COMPOSITE || tupdesc.is_null() {
                    return Err(IdemError::new(
                        errors::INTERNAL_ERROR,
                        "idem_claim must return a row",
                    ));
                }
                let tupdesc = pg_sys::BlessTupleDesc(tupdesc);
                let outcome_type = PgTupleDesc::from_pg_unchecked(tupdesc)
                    .get(0)
                    .map(|attr| attr.atttypid)
                    .ok_or_else(|| {
                        IdemError::new(errors::INTERNAL_ERROR, "idem_claim result has no columns")
                    })?;
                let mut outcomes = [pg_sys::InvalidOid; 6];
                for (slot, outcome) in outcomes.iter_mut().zip(Outcome::ALL) {
                    *slot = enum_label_oid(outcome_type, outcome.label())?;
                }
                let site = pg_sys::palloc(core::mem::size_of::<CallSite>()) as *mut CallSite;
                site.write(CallSite { tupdesc, outcomes });
                Ok(site)
            })?;
        (*flinfo).fn_extra = site.cast();
        Ok(&*site)
    }
}

pub(crate) fn enum_label_oid(enum_type: Oid, label: &CStr) -> Result<Oid> {
    // SAFETY: a syscache lookup by (enum type, label); the tuple is released before returning.
    unsafe {
        let tuple = pg_sys::SearchSysCache(
            pg_sys::SysCacheIdentifier::ENUMTYPOIDNAME as _,
            Datum::from(enum_type),
            Datum::from(label.as_ptr()),
            Datum::from(0),
            Datum::from(0),
        );
        if tuple.is_null() {
            return Err(IdemError::new(
                errors::INTERNAL_ERROR,
                format!("idem_outcome has no label {label:?}"),
            ));
        }
        let oid = (*(pg_sys::GETSTRUCT(tuple) as pg_sys::Form_pg_enum)).oid;
        pg_sys::ReleaseSysCache(tuple);
        Ok(oid)
    }
}

/// Form the result row in `target` (the caller's memory), copying values out of SPI memory.
fn form_row(site: &CallSite, claimed: &Claimed, target: pg_sys::MemoryContext) -> Result<Datum> {
    let outcome = claimed
        .outcome
        .ok_or_else(|| IdemError::new(errors::INTERNAL_ERROR, "claim produced no outcome"))?;
    let index = Outcome::ALL.iter().position(|o| *o == outcome).unwrap_or(0);
    let values: [Option<Datum>; 8] = [
        Some(Datum::from(site.outcomes[index])),
        claimed.attempt.map(Datum::from),
        claimed.response,
        claimed.recovery_point,
        claimed.failure_code,
        claimed.failure_message,
        claimed.locked_until.map(Datum::from),
        claimed.expires_at.map(Datum::from),
    ];
    let mut datums = [Datum::from(0); 8];
    let mut nulls = [true; 8];
    for (i, value) in values.iter().enumerate() {
        if let Some(v) = value {
            datums[i] = *v;
            nulls[i] = false;
        }
    }
    // SAFETY: the descriptor has 8 columns of these types; heap_form_tuple copies the values,
    // and HeapTupleHeaderGetDatum flattens any toasted response.
    unsafe {
        Ok(PgMemoryContexts::For(target).switch_to(|_| {
            let tuple =
                pg_sys::heap_form_tuple(site.tupdesc, datums.as_mut_ptr(), nulls.as_mut_ptr());
            pg_sys::HeapTupleHeaderGetDatum((*tuple).t_data)
        }))
    }
}

fn claim(fcinfo: pg_sys::FunctionCallInfo) -> Result<Datum> {
    // SAFETY: called by Postgres as idem_claim.
    let (args, site) = unsafe { (ClaimArgs::read(fcinfo)?, call_site(fcinfo)?) };
    // SAFETY: the memory context the caller expects the result in.
    let caller = unsafe { pg_sys::CurrentMemoryContext };
    // SAFETY: reads the transaction's start time.
    let now = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() };
    // The first read goes straight through the index; `seen` is None when it must use SQL.
    let mut lookup = Lookup::open()?;
    let seen = match lookup.as_mut() {
        Some(direct) => Some(
            direct
                .find(text_datum(args.scope), text_datum(args.key))?
                .map(Row::from),
        ),
        None => None,
    };
    // Replays, final failures and live leases are answered from that read alone.
    if let Some(Some(row)) = &seen
        && let Verdict::Answer(outcome) = judge(row, &args, now)?
    {
        let claimed = Claimed::from_row(outcome, row);
        crate::metrics::count_claim(claimed.outcome);
        return form_row(site, &claimed, caller);
    }
    let conn = Conn::open()?;
    let first = match seen {
        Some(row) => row,
        None => Row::read(LOOKUP.run(&conn, &args.key_args())?)?,
    };
    let claimed = claim_in(&conn, &args, first, now)?;
    crate::metrics::count_claim(claimed.outcome);
    form_row(site, &claimed, caller)
}

function_info_v1!(pg_finfo_idem_claim);
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idem_claim(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    claim(fcinfo).or_raise()
}

// ---------------------------------------------------------------------------------------------
// idem_complete / idem_fail / idem_checkpoint

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
    let conn = Conn::open()?;
    let changed = COMPLETE.run(
        &conn,
        &[text_arg(scope), text_arg(key), response, int4_arg(attempt)],
    )?;
    if !changed.is_empty() {
        crate::metrics::count_completion();
        return Ok(());
    }
    let found = state(&conn, scope, key)?;
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
    let conn = Conn::open()?;
    let changed = statement.run(
        &conn,
        &[
            text_arg(scope),
            text_arg(key),
            opt_text_arg(code),
            opt_text_arg(message),
            int4_arg(attempt),
        ],
    )?;
    if !changed.is_empty() {
        crate::metrics::count_failure();
        return Ok(());
    }
    let found = state(&conn, scope, key)?;
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

extension_sql_file!(
    "../sql/claim.sql",
    name = "claim_functions",
    requires = ["bootstrap"]
);
