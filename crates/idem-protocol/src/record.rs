//! A record of `idempotency.requests` as the protocol sees it, and the times a change uses.

use core::fmt::Debug;

use crate::state::Status;
use crate::transition::Error;

/// How the caller holds the values the protocol carries but does not look into, and how it
/// adds an interval to a time (Postgres does it in the session's time zone).
pub trait Repr: Copy + Debug {
    /// scope, key, request hash, claimed_by, recovery point, failure code and message.
    type Text: Copy + Debug + PartialEq;
    /// The response.
    type Json: Copy + Debug + PartialEq;
    /// A lease or retention.
    type Interval: Copy + Debug + PartialEq;
    /// The caller's error, which the protocol's own errors convert into.
    type Error: From<Error>;

    /// `at + by` (timestamptz + interval), or an error if out of range.
    fn add(at: i64, by: Self::Interval) -> Result<i64, Self::Error>;
}

/// The times a change works with, in `timestamptz` microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    /// The transaction's start (SQL's `now()`): the record's own timestamps.
    pub txn: i64,
    /// The moment of the call (`clock_timestamp()`): leases start then, so that a claim made
    /// late in a long transaction does not get a lease that has already ended.
    pub call: i64,
}

/// One record: the 17 columns of `idempotency.requests`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Record<R: Repr> {
    pub scope: R::Text,
    pub key: R::Text,
    pub request_hash: R::Text,
    pub status: Status,
    pub attempt: i32,
    pub response: Option<R::Json>,
    pub recovery_point: Option<R::Text>,
    pub failure_code: Option<R::Text>,
    pub failure_message: Option<R::Text>,
    pub claimed_by: Option<R::Text>,
    pub claimed_at: i64,
    pub locked_until: Option<i64>,
    pub lease: R::Interval,
    pub retention: R::Interval,
    pub created_at: i64,
    pub updated_at: i64,
    pub expires_at: i64,
}

impl<R: Repr> Record<R> {
    /// Is this the attempt a complete / fail / checkpoint may change: processing, and the
    /// caller's `attempt` if given (fencing)?
    pub fn is_current(&self, attempt: Option<i32>) -> bool {
        self.status == Status::Processing && attempt.is_none_or(|given| given == self.attempt)
    }
}

#[cfg(test)]
mod tests {
    use crate::plain::{Interval, sample};
    use crate::state::Status;

    #[test]
    fn current_means_processing_and_the_given_attempt() {
        let mut r = sample(Status::Processing, 3);
        assert!(r.is_current(None));
        assert!(r.is_current(Some(3)));
        assert!(!r.is_current(Some(2)));
        assert!(!r.is_current(Some(4)));
        for status in [
            Status::Succeeded,
            Status::FailedRetryable,
            Status::FailedFinal,
        ] {
            r.status = status;
            assert!(!r.is_current(None));
            assert!(!r.is_current(Some(3)));
        }
        assert_eq!(r.lease, Interval::micros(60_000_000));
    }
}
