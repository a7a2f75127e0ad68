//! The claim path: `idem_claim`, every statement and decision a claim goes through.
//! Finishing an attempt (complete / fail / checkpoint / forget) is in `finish.rs`.
//!
//! How a claim never waits:
//! - it first reads the record with a plain snapshot read: a replay or a final failure is
//!   answered from that read alone (no row lock, no WAL);
//! - a new key is inserted only under a transaction-scoped *try* lock on
//!   `idem_lock_key(scope, key)`, so a second claimer of a key whose insert is not committed
//!   yet gets `processing_active` instead of waiting on the unique index; the insert goes
//!   straight to the table (`write.rs`) unless the table or transaction needs SQL;
//! - a takeover (expired lease, retryable failure, expired record) locks the row with
//!   `FOR UPDATE SKIP LOCKED`: a row someone else is changing is `processing_active`.

use core::ffi::CStr;

use pgrx::PgMemoryContexts;
use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::prelude::*;

use crate::args::{self, function_info_v1};
use crate::call_site::{CallSite, call_site};
use crate::errors::{self, IdemError, OrRaise, Result};
use crate::input;
use crate::lookup::{self, Lookup, Record};
use crate::plans::{Arg, Conn, LazyConn, Rows, Statement};
use crate::write::{Values, Writer, col};

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
pub(crate) enum Status {
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
    pub(crate) fn parse(label: &[u8]) -> Result<Self> {
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

    pub(crate) fn label(self) -> &'static str {
        lookup::STATUS_LABELS[self.index()].to_str().unwrap_or("?")
    }

    /// Position in `idem_status` (and [`lookup::Catalog::statuses`]).
    pub(crate) fn index(self) -> usize {
        STATUSES.iter().position(|s| *s == self).unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------------------------
// Statements. Fully qualified (tables, functions, operators, casts), values always bound.

pub(crate) const TEXT: Oid = pg_sys::TEXTOID;
pub(crate) const INTERVAL: Oid = pg_sys::INTERVALOID;
pub(crate) const JSONB: Oid = pg_sys::JSONBOID;
pub(crate) const INT4: Oid = pg_sys::INT4OID;
pub(crate) const TIMESTAMPTZ: Oid = pg_sys::TIMESTAMPTZOID;

/// The columns the claim path reads, in the order [`Row::read`] expects.
macro_rules! row_columns {
    () => {
        "status::pg_catalog.text, request_hash::pg_catalog.text, attempt::pg_catalog.int4, \
         response::pg_catalog.jsonb, recovery_point::pg_catalog.text, \
         failure_code::pg_catalog.text, failure_message::pg_catalog.text, \
         locked_until::pg_catalog.timestamptz, expires_at::pg_catalog.timestamptz"
    };
}
macro_rules! by_key {
    () => {
        " WHERE scope OPERATOR(pg_catalog.=) $1 AND key OPERATOR(pg_catalog.=) $2"
    };
}
pub(crate) use by_key;

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
           $7 OPERATOR(pg_catalog.+) $4, $4, $5, pg_catalog.now(), pg_catalog.now(), \
           pg_catalog.now() OPERATOR(pg_catalog.+) $5) \
          ON CONFLICT (scope, key) DO NOTHING \
          RETURNING attempt::pg_catalog.int4, locked_until::pg_catalog.timestamptz, expires_at::pg_catalog.timestamptz",
    args: &[TEXT, TEXT, TEXT, INTERVAL, INTERVAL, TEXT, TIMESTAMPTZ],
};

/// Take over an attempt that ended (expired lease or retryable failure): attempt + 1.
static TAKE_OVER: Statement = Statement {
    sql: concat!(
        "UPDATE idempotency.requests SET status = 'processing', \
         attempt = attempt OPERATOR(pg_catalog.+) 1, claimed_by = $6, claimed_at = pg_catalog.now(), \
         locked_until = $7 OPERATOR(pg_catalog.+) $4, lease = $4, retention = $5, \
         updated_at = pg_catalog.now(), expires_at = pg_catalog.now() OPERATOR(pg_catalog.+) $5",
        by_key!(),
        " AND request_hash OPERATOR(pg_catalog.=) $3",
        " RETURNING attempt::pg_catalog.int4, locked_until::pg_catalog.timestamptz, expires_at::pg_catalog.timestamptz"
    ),
    args: &[TEXT, TEXT, TEXT, INTERVAL, INTERVAL, TEXT, TIMESTAMPTZ],
};

/// Start over on a record whose retention ended: as if it had been purged.
static RESET: Statement = Statement {
    sql: concat!(
        "UPDATE idempotency.requests SET request_hash = $3, status = 'processing', attempt = 1, \
         response = NULL, recovery_point = NULL, failure_code = NULL, failure_message = NULL, \
         claimed_by = $6, claimed_at = pg_catalog.now(), \
         locked_until = $7 OPERATOR(pg_catalog.+) $4, lease = $4, retention = $5, \
         created_at = pg_catalog.now(), updated_at = pg_catalog.now(), \
         expires_at = pg_catalog.now() OPERATOR(pg_catalog.+) $5",
        by_key!(),
        " RETURNING attempt::pg_catalog.int4, locked_until::pg_catalog.timestamptz, expires_at::pg_catalog.timestamptz"
    ),
    args: &[TEXT, TEXT, TEXT, INTERVAL, INTERVAL, TEXT, TIMESTAMPTZ],
};

// ---------------------------------------------------------------------------------------------
// Datum plumbing.

pub(crate) fn text_arg(bytes: &[u8]) -> Arg {
    Some(text_datum(bytes))
}

pub(crate) fn opt_text_arg(bytes: Option<&[u8]>) -> Arg {
    bytes.map(text_datum)
}

pub(crate) fn int4_arg(value: Option<i32>) -> Arg {
    value.map(Datum::from)
}

pub(crate) fn text_datum(bytes: &[u8]) -> Datum {
    // SAFETY: copies `bytes` into a new palloc'd text.
    unsafe {
        Datum::from(pg_sys::cstring_to_text_with_len(
            bytes.as_ptr().cast(),
            bytes.len() as _,
        ))
    }
}

/// Bytes of a text datum (detoasted if needed).
pub(crate) unsafe fn datum_bytes<'a>(datum: Datum) -> &'a [u8] {
    unsafe { <&[u8]>::from_datum(datum, false).unwrap_or_default() }
}

/// A record as the claim path reads it. Pass-by-reference columns stay datums (in the scanned
/// buffer or SPI memory) until the result row is formed.
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

pub(crate) struct ClaimArgs<'a> {
    pub(crate) scope: &'a [u8],
    pub(crate) key: &'a [u8],
    pub(crate) hash: &'a [u8],
    /// Checked intervals (see `input::positive_interval`), as datums.
    pub(crate) lease: Datum,
    pub(crate) retention: Datum,
    pub(crate) claimed_by: Option<&'a [u8]>,
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

    fn statement_args(&self, clock: Clock) -> [Arg; 7] {
        [
            text_arg(self.scope),
            text_arg(self.key),
            text_arg(self.hash),
            Some(self.lease),
            Some(self.retention),
            opt_text_arg(self.claimed_by),
            Some(Datum::from(clock.lease_start)),
        ]
    }

    fn key_args(&self) -> [Arg; 2] {
        [text_arg(self.scope), text_arg(self.key)]
    }
}

/// The row `idem_claim` returns, with pass-by-reference values still where they were read.
#[derive(Default)]
pub(crate) struct Claimed {
    pub(crate) outcome: Option<Outcome>,
    pub(crate) attempt: Option<i32>,
    pub(crate) response: Option<Datum>,
    recovery_point: Option<Datum>,
    pub(crate) failure_code: Option<Datum>,
    pub(crate) failure_message: Option<Datum>,
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

/// The times a claim works with.
#[derive(Clone, Copy)]
pub(crate) struct Clock {
    /// The transaction's start (SQL's `now()`): the record's own timestamps.
    txn: i64,
    /// The moment of the claim: leases start, and are judged, by the clock, so that a claim
    /// made late in a long transaction does not get a lease that has already ended.
    lease_start: i64,
}

impl Clock {
    fn now() -> Clock {
        // SAFETY: the transaction's start time and the current time.
        unsafe {
            Clock {
                txn: pg_sys::GetCurrentTransactionStartTimestamp(),
                lease_start: pg_sys::GetCurrentTimestamp(),
            }
        }
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
        crate::metrics::count_hash_mismatch();
        // The stored hash is not shown: it is another caller's (maybe another tenant's), and
        // it would let this one test guesses of that request offline.
        return Err(IdemError::new(
            errors::HASH_MISMATCH,
            format!(
                "idempotency key {:?} in scope {:?} was used for a different request",
                input::lossy(args.key),
                input::lossy(args.scope)
            ),
        )
        .detail(format!("This request's hash: {}. The stored request's hash differs.", input::lossy(args.hash)))
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
    crate::lock_key::try_claim_lock(args.scope, args.key)
}

/// `timestamp + interval`, as SQL's `+` computes it (in the session's time zone).
pub(crate) fn add_interval(timestamp: i64, interval: Datum) -> i64 {
    // SAFETY: the built-in timestamptz_pl_interval on a timestamptz and an interval datum.
    unsafe {
        pgrx::direct_function_call::<i64>(
            pg_sys::timestamptz_pl_interval,
            &[Some(Datum::from(timestamp)), Some(interval)],
        )
    }
    .unwrap_or(timestamp)
}

/// What a claim of a key with no record did when it tried to write directly.
enum NewKey {
    Claimed(Claimed),
    /// A record appeared before the key's lock was ours: decide on it.
    Found(Row),
    /// The direct write is not possible here: go through SQL.
    UseSql,
}

/// Insert a new record for a key the first read did not find, without SQL (see `write.rs`).
fn claim_new_key(lookup: &mut Lookup, args: &ClaimArgs<'_>, clock: Clock) -> Result<NewKey> {
    let Some(mut writer) = Writer::open(lookup, pg_sys::ACL_INSERT) else {
        return Ok(NewKey::UseSql);
    };
    #[cfg(feature = "pg_test")]
    crate::test_points::before_key_lock();
    if !try_lock_key(args)? {
        return Ok(NewKey::Claimed(Claimed::unseen_active()));
    }
    // Whoever inserts this key holds its lock until they commit, so a read with a snapshot
    // taken now sees every record of it there will be until we commit.
    lookup.refresh();
    if let Some(record) = lookup.find(text_datum(args.scope), text_datum(args.key))? {
        return Ok(NewKey::Found(Row::from(record)));
    }
    let now = clock.txn;
    let locked_until = add_interval(clock.lease_start, args.lease);
    let expires_at = add_interval(now, args.retention);
    let mut values: Values = [None; 17];
    values[col::SCOPE] = text_arg(args.scope);
    values[col::KEY] = text_arg(args.key);
    values[col::REQUEST_HASH] = text_arg(args.hash);
    values[col::STATUS] = Some(Datum::from(
        lookup.catalog.statuses[Status::Processing.index()],
    ));
    values[col::ATTEMPT] = Some(Datum::from(1_i32));
    values[col::CLAIMED_BY] = opt_text_arg(args.claimed_by);
    values[col::CLAIMED_AT] = Some(Datum::from(now));
    values[col::LOCKED_UNTIL] = Some(Datum::from(locked_until));
    values[col::LEASE] = Some(args.lease);
    values[col::RETENTION] = Some(args.retention);
    values[col::CREATED_AT] = Some(Datum::from(now));
    values[col::UPDATED_AT] = Some(Datum::from(now));
    values[col::EXPIRES_AT] = Some(Datum::from(expires_at));
    writer.insert(&values)?;
    crate::metrics::count_write(true);
    Ok(NewKey::Claimed(Claimed {
        outcome: Some(Outcome::NewClaim),
        attempt: Some(1),
        locked_until: Some(locked_until),
        expires_at: Some(expires_at),
        ..Default::default()
    }))
}

/// The claim's decisions from a first read of the record (`row`) on, writing through SPI.
fn claim_in(
    conn: &Conn,
    args: &ClaimArgs<'_>,
    mut row: Option<Row>,
    clock: Clock,
) -> Result<Claimed> {
    let now = clock.lease_start;
    // Each pass either answers or saw the record vanish/appear under it; three are plenty.
    for _ in 0..3 {
        let Some(seen) = row else {
            if !try_lock_key(args)? {
                return Ok(Claimed::unseen_active());
            }
            let inserted = INSERT.run(conn, &args.statement_args(clock))?;
            if !inserted.is_empty() {
                crate::metrics::count_write(false);
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
                let updated = TAKE_OVER.run(conn, &args.statement_args(clock))?;
                crate::metrics::count_write(false);
                Claimed::made(outcome, Some(&locked), updated)
            }
            Verdict::Reset => {
                let updated = RESET.run(conn, &args.statement_args(clock))?;
                crate::metrics::count_write(false);
                Claimed::made(Outcome::NewClaim, None, updated)
            }
        };
    }
    Ok(Claimed::unseen_active())
}

/// Form the result row in `target` (the caller's memory), copying the values.
fn form_row(site: &CallSite, claimed: &Claimed, target: pg_sys::MemoryContext) -> Result<Datum> {
    let outcome = claimed
        .outcome
        .ok_or_else(|| IdemError::new(errors::INTERNAL_ERROR, "claim produced no outcome"))?;
    let values: [Option<Datum>; 8] = [
        Some(site.outcome_datum(outcome)),
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

/// What a claim keeps open while its answer is used: the answer's values point into them.
pub(crate) struct Held {
    // Dropped in this order: SPI first, then the index scan.
    /// The claim's SPI connection if it opened one; later statements may use it.
    pub(crate) conn: LazyConn,
    _lookup: Option<Lookup>,
}

/// Claim `args`: the answer, with what must stay open while it is used.
pub(crate) fn claim_held(args: &ClaimArgs<'_>) -> Result<(Claimed, Held)> {
    let clock = Clock::now();
    let now = clock.lease_start;
    // The first read goes straight through the index; `seen` is None when it must use SQL.
    let mut lookup = Lookup::open()?;
    let mut seen = match lookup.as_mut() {
        Some(direct) => Some(
            direct
                .find(text_datum(args.scope), text_datum(args.key))?
                .map(Row::from),
        ),
        None => None,
    };
    // Replays, final failures and live leases are answered from that read alone.
    if let Some(Some(row)) = &seen
        && let Verdict::Answer(outcome) = judge(row, args, now)?
    {
        let claimed = Claimed::from_row(outcome, row);
        return Ok((
            claimed,
            Held {
                conn: LazyConn::default(),
                _lookup: lookup,
            },
        ));
    }
    // A new key is inserted directly where the table allows it.
    if let (Some(None), Some(direct)) = (&seen, lookup.as_mut()) {
        match claim_new_key(direct, args, clock)? {
            NewKey::Claimed(claimed) => {
                return Ok((
                    claimed,
                    Held {
                        conn: LazyConn::default(),
                        _lookup: lookup,
                    },
                ));
            }
            NewKey::Found(row) => seen = Some(Some(row)),
            NewKey::UseSql => {}
        }
    }
    let conn = Conn::open()?;
    let first = match seen {
        Some(row) => row,
        None => Row::read(LOOKUP.run(&conn, &args.key_args())?)?,
    };
    let claimed = claim_in(&conn, args, first, clock)?;
    Ok((
        claimed,
        Held {
            conn: LazyConn::with(conn),
            _lookup: lookup,
        },
    ))
}

fn claim(fcinfo: pg_sys::FunctionCallInfo) -> Result<Datum> {
    // SAFETY: called by Postgres as idem_claim.
    let (args, site) = unsafe { (ClaimArgs::read(fcinfo)?, call_site(fcinfo)?) };
    // SAFETY: the memory context the caller expects the result in.
    let caller = unsafe { pg_sys::CurrentMemoryContext };
    // SAFETY: called by Postgres as idem_claim.
    let wait = unsafe { crate::claim_wait::wait_arg(fcinfo)? };
    let (claimed, _held) = crate::claim_wait::claim_waiting(&args, wait)?;
    crate::metrics::count_claim(claimed.outcome);
    form_row(site, &claimed, caller)
}

function_info_v1!(pg_finfo_idem_claim);
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idem_claim(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    claim(fcinfo).or_raise()
}

extension_sql_file!(
    "../sql/claim.sql",
    name = "claim_functions",
    requires = ["bootstrap"]
);
