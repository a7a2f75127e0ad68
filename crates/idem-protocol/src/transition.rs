//! Each state change of a record, described once: a [`Transition`] maps the stored record
//! (none for a new key) to the new one. The extension writes that record as it is, directly or
//! through SQL; SQL computes nothing, so the two paths cannot disagree.

use crate::record::{Clock, Record, Repr};
use crate::state::Status;

/// What a claim asks for: the key, the request's hash and the attempt's terms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Terms<R: Repr> {
    pub scope: R::Text,
    pub key: R::Text,
    pub hash: R::Text,
    /// Checked: longer than zero, at most [`crate::MAX_INTERVAL_MICROS`].
    pub lease: R::Interval,
    pub retention: R::Interval,
    pub claimed_by: Option<R::Text>,
}

/// Why a transition could not be computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// A takeover of attempt `i32::MAX`: as SQL's `attempt + 1` would, an error, never a
    /// repeated attempt number.
    AttemptOutOfRange,
    /// A change of an existing record was given none.
    NoRecord,
}

/// A change of one record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Transition<R: Repr> {
    /// A key with no record: attempt 1.
    NewClaim(Terms<R>),
    /// A record whose retention ended: started over as if it had been purged.
    Reset(Terms<R>),
    /// An ended attempt (expired lease or retryable failure) claimed again: attempt + 1.
    TakeOver(Terms<R>),
    Complete {
        response: Option<R::Json>,
    },
    /// `status` is `FailedRetryable` or `FailedFinal`.
    Fail {
        status: Status,
        code: Option<R::Text>,
        message: Option<R::Text>,
    },
    /// A new recovery point and/or lease (`None`: keep the stored one); the lease restarts.
    Checkpoint {
        recovery_point: Option<R::Text>,
        lease: Option<R::Interval>,
    },
}

impl<R: Repr> Transition<R> {
    /// The record after this change of `stored` (`None` only for a new claim or a reset).
    pub fn apply(&self, stored: Option<&Record<R>>, clock: Clock) -> Result<Record<R>, R::Error> {
        match (self, stored) {
            (Transition::NewClaim(terms) | Transition::Reset(terms), _) => fresh(terms, clock),
            (Transition::TakeOver(terms), Some(s)) => Ok(Record {
                status: Status::Processing,
                attempt: s.attempt.checked_add(1).ok_or(Error::AttemptOutOfRange)?,
                claimed_by: terms.claimed_by,
                claimed_at: clock.txn,
                locked_until: Some(R::add(clock.call, terms.lease)?),
                lease: terms.lease,
                retention: terms.retention,
                updated_at: clock.txn,
                expires_at: R::add(clock.txn, terms.retention)?,
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
                    locked_until: Some(R::add(clock.call, lease)?),
                    updated_at: clock.txn,
                    ..*s
                })
            }
            (_, None) => Err(Error::NoRecord.into()),
        }
    }
}

/// A record's first attempt (a new key, or one whose retention ended).
fn fresh<R: Repr>(terms: &Terms<R>, clock: Clock) -> Result<Record<R>, R::Error> {
    Ok(Record {
        scope: terms.scope,
        key: terms.key,
        request_hash: terms.hash,
        status: Status::Processing,
        attempt: 1,
        response: None,
        recovery_point: None,
        failure_code: None,
        failure_message: None,
        claimed_by: terms.claimed_by,
        claimed_at: clock.txn,
        locked_until: Some(R::add(clock.call, terms.lease)?),
        lease: terms.lease,
        retention: terms.retention,
        created_at: clock.txn,
        updated_at: clock.txn,
        expires_at: R::add(clock.txn, terms.retention)?,
    })
}

/// An attempt that ends: no lease, kept at least `retention` from now.
fn ended<R: Repr>(s: &Record<R>, clock: Clock) -> Result<Record<R>, R::Error> {
    Ok(Record {
        locked_until: None,
        updated_at: clock.txn,
        expires_at: s.expires_at.max(R::add(clock.txn, s.retention)?),
        ..*s
    })
}

#[cfg(test)]
#[path = "transition_tests.rs"]
mod tests;
