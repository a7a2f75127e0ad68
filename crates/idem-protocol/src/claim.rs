//! What a claim makes of the record of its key.

use crate::record::{Clock, Record, Repr};
use crate::state::{Outcome, Status};

/// What a record means for a new claim of its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Answered from the record as it is; nothing is written.
    Answer(Outcome),
    /// The attempt ended (lease ran out, or a retryable failure): the claim takes the key
    /// over as the next attempt ([`crate::Transition::TakeOver`]).
    TakeOver(Outcome),
    /// Retention ended: the key is free again ([`crate::Transition::Reset`]).
    Reset,
}

/// The key's record is another request's (its stored hash differs): the claim is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OtherRequest;

/// The verdict on `row` for a claim at `clock` whose request is the stored one if
/// `same_request()` (asked only when it matters). Leases are judged by the clock at the call,
/// expiry by the same: a processing record never expires.
pub fn judge<R: Repr>(
    row: &Record<R>,
    same_request: impl FnOnce() -> bool,
    clock: Clock,
) -> Result<Verdict, OtherRequest> {
    let now = clock.call;
    if row.status != Status::Processing && row.expires_at < now {
        return Ok(Verdict::Reset);
    }
    if !same_request() {
        return Err(OtherRequest);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plain::sample;

    const MIN: i64 = 60_000_000;

    fn at(row: &Record<crate::plain::Plain>, offset: i64) -> Clock {
        Clock {
            txn: row.claimed_at - 3_600_000_000,
            call: row.claimed_at + offset,
        }
    }

    #[test]
    fn finished_records_are_answered_until_they_expire() {
        let ok = sample(Status::Succeeded, 1);
        assert_eq!(
            judge(&ok, || true, at(&ok, 0)),
            Ok(Verdict::Answer(Outcome::ReplaySuccess))
        );
        let last = ok.expires_at - ok.claimed_at;
        assert_eq!(
            judge(&ok, || true, at(&ok, last)),
            Ok(Verdict::Answer(Outcome::ReplaySuccess))
        );
        assert_eq!(judge(&ok, || true, at(&ok, last + 1)), Ok(Verdict::Reset));
        let fin = sample(Status::FailedFinal, 2);
        assert_eq!(
            judge(&fin, || true, at(&fin, 0)),
            Ok(Verdict::Answer(Outcome::FinalFailure))
        );
        assert_eq!(judge(&fin, || true, at(&fin, last + 1)), Ok(Verdict::Reset));
        let retry = sample(Status::FailedRetryable, 2);
        assert_eq!(
            judge(&retry, || true, at(&retry, 0)),
            Ok(Verdict::TakeOver(Outcome::RetryableFailure))
        );
        assert_eq!(
            judge(&retry, || true, at(&retry, last + 1)),
            Ok(Verdict::Reset)
        );
    }

    #[test]
    fn leases_are_judged_by_the_clock_at_the_call() {
        let p = sample(Status::Processing, 1);
        let end = p.locked_until.unwrap() - p.claimed_at;
        assert_eq!(
            judge(&p, || true, at(&p, 0)),
            Ok(Verdict::Answer(Outcome::ProcessingActive))
        );
        assert_eq!(
            judge(&p, || true, at(&p, end)),
            Ok(Verdict::Answer(Outcome::ProcessingActive))
        );
        assert_eq!(
            judge(&p, || true, at(&p, end + 1)),
            Ok(Verdict::TakeOver(Outcome::ProcessingStale))
        );
        // The transaction began before the lease ended; the call is after: stale.
        let clock = Clock {
            txn: p.locked_until.unwrap() - 1,
            call: p.locked_until.unwrap() + 1,
        };
        assert_eq!(
            judge(&p, || true, clock),
            Ok(Verdict::TakeOver(Outcome::ProcessingStale))
        );
        let clock = Clock {
            txn: p.locked_until.unwrap() + 1,
            call: p.locked_until.unwrap() - 1,
        };
        assert_eq!(
            judge(&p, || true, clock),
            Ok(Verdict::Answer(Outcome::ProcessingActive))
        );
    }

    #[test]
    fn a_processing_record_never_expires() {
        let p = sample(Status::Processing, 1);
        let late = p.expires_at - p.claimed_at + MIN;
        assert_eq!(
            judge(&p, || true, at(&p, late)),
            Ok(Verdict::TakeOver(Outcome::ProcessingStale))
        );
        assert_eq!(judge(&p, || false, at(&p, late)), Err(OtherRequest));
        let mut unleased = p;
        unleased.locked_until = None;
        assert_eq!(
            judge(&unleased, || true, at(&p, late)),
            Ok(Verdict::Answer(Outcome::ProcessingActive))
        );
    }

    #[test]
    fn another_request_is_refused_unless_the_record_expired() {
        for status in Status::ALL {
            let row = sample(status, 1);
            assert_eq!(
                judge(&row, || false, at(&row, 0)),
                Err(OtherRequest),
                "{status:?}"
            );
        }
        let ok = sample(Status::Succeeded, 1);
        let mut asked = false;
        let expired = at(&ok, ok.expires_at - ok.claimed_at + 1);
        assert_eq!(
            judge(
                &ok,
                || {
                    asked = true;
                    false
                },
                expired
            ),
            Ok(Verdict::Reset)
        );
        assert!(!asked, "an expired record's hash is not compared");
    }
}
