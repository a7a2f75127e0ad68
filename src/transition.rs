//! Each state change of a record, described once: a [`Transition`] maps the stored record (none
//! for a new key) to the new one. The direct path writes that record's columns
//! (`direct::Writer`); the SQL path binds the same values as parameters (`record_sql.rs`). SQL
//! computes nothing, so the two cannot disagree (the #[pg_test]s of `pg_tests/transitions.rs`
//! run each transition both ways and compare the rows column by column).

use pgrx::pg_sys::{self, Datum};

use crate::datum::text_datum;
use crate::errors::{self, IdemError, Result};
use crate::record::{Record, Status};

/// What a claim asks for: the key, the request's hash and the attempt's terms.
pub struct ClaimArgs<'a> {
    pub scope: &'a [u8],
    pub key: &'a [u8],
    pub hash: &'a [u8],
    /// Checked intervals (see `input::positive_interval`), as datums.
    pub lease: Datum,
    pub retention: Datum,
    pub claimed_by: Option<&'a [u8]>,
}

/// The times a change works with.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// The transaction's start (SQL's `now()`): the record's own timestamps.
    pub txn: i64,
    /// The moment of the call (`clock_timestamp()`): leases start then, so that a claim made
    /// late in a long transaction does not get a lease that has already ended.
    pub call: i64,
}

impl Clock {
    pub fn now() -> Clock {
        // SAFETY: the transaction's start time and the current time.
        unsafe {
            Clock {
                txn: pg_sys::GetCurrentTransactionStartTimestamp(),
                call: pg_sys::GetCurrentTimestamp(),
            }
        }
    }
}

/// `timestamp + interval`, as SQL's `+` computes it (in the session's time zone).
pub fn add_interval(timestamp: i64, interval: Datum) -> Result<i64> {
    // SAFETY: the built-in timestamptz_pl_interval on a timestamptz and an interval datum.
    unsafe {
        pgrx::direct_function_call::<i64>(
            pg_sys::timestamptz_pl_interval,
            &[Some(Datum::from(timestamp)), Some(interval)],
        )
    }
    .ok_or_else(|| IdemError::new(errors::INTERNAL_ERROR, "timestamp + interval is null"))
}

/// A change of one record.
pub enum Transition<'a> {
    /// A key with no record: attempt 1.
    NewClaim(&'a ClaimArgs<'a>),
    /// A record whose retention ended: started over as if it had been purged.
    Reset(&'a ClaimArgs<'a>),
    /// An ended attempt (expired lease or retryable failure) claimed again: attempt + 1.
    TakeOver(&'a ClaimArgs<'a>),
    Complete {
        response: Option<Datum>,
    },
    /// `status` is `FailedRetryable` or `FailedFinal`.
    Fail {
        status: Status,
        code: Option<Datum>,
        message: Option<Datum>,
    },
    /// A new recovery point and/or lease (`None`: keep the stored one); the lease restarts.
    Checkpoint {
        recovery_point: Option<Datum>,
        lease: Option<Datum>,
    },
}

impl Transition<'_> {
    /// The record after this change of `stored` (`None` only for a new claim).
    pub fn apply(&self, stored: Option<&Record>, clock: Clock) -> Result<Record> {
        match (self, stored) {
            (Transition::NewClaim(args) | Transition::Reset(args), _) => fresh(args, clock),
            (Transition::TakeOver(args), Some(s)) => Ok(Record {
                status: Status::Processing,
                // As SQL's `attempt + 1` would: past int4, an error, never a repeated number.
                attempt: s.attempt.checked_add(1).ok_or_else(|| {
                    IdemError::new(errors::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range")
                })?,
                claimed_by: args.claimed_by.map(text_datum),
                claimed_at: clock.txn,
                locked_until: Some(add_interval(clock.call, args.lease)?),
                lease: args.lease,
                retention: args.retention,
                updated_at: clock.txn,
                expires_at: add_interval(clock.txn, args.retention)?,
                ..*s
            }),
            (Transition::Complete { response }, Some(s)) => Ok(Record {
                status: Status::Succeeded,
                response: *response,
                failure_code: None,
                failure_message: None,
                ..ended(s, clock)?
            }),
            (
                Transition::Fail {
                    status,
                    code,
                    message,
                },
                Some(s),
            ) => Ok(Record {
                status: *status,
                failure_code: *code,
                failure_message: *message,
                ..ended(s, clock)?
            }),
            (
                Transition::Checkpoint {
                    recovery_point,
                    lease,
                },
                Some(s),
            ) => {
                let lease = lease.unwrap_or(s.lease);
                Ok(Record {
                    recovery_point: recovery_point.or(s.recovery_point),
                    lease,
                    locked_until: Some(add_interval(clock.call, lease)?),
                    updated_at: clock.txn,
                    ..*s
                })
            }
            (_, None) => Err(IdemError::new(
                errors::INTERNAL_ERROR,
                "a transition of a record that does not exist",
            )),
        }
    }
}

/// A record's first attempt (a new key, or one whose retention ended).
fn fresh(args: &ClaimArgs<'_>, clock: Clock) -> Result<Record> {
    Ok(Record {
        scope: text_datum(args.scope),
        key: text_datum(args.key),
        request_hash: text_datum(args.hash),
        status: Status::Processing,
        attempt: 1,
        response: None,
        recovery_point: None,
        failure_code: None,
        failure_message: None,
        claimed_by: args.claimed_by.map(text_datum),
        claimed_at: clock.txn,
        locked_until: Some(add_interval(clock.call, args.lease)?),
        lease: args.lease,
        retention: args.retention,
        created_at: clock.txn,
        updated_at: clock.txn,
        expires_at: add_interval(clock.txn, args.retention)?,
    })
}

/// An attempt that ends: no lease, kept at least `retention` from now.
fn ended(s: &Record, clock: Clock) -> Result<Record> {
    Ok(Record {
        locked_until: None,
        updated_at: clock.txn,
        expires_at: s.expires_at.max(add_interval(clock.txn, s.retention)?),
        ..*s
    })
}
