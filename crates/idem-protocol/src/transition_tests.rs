//! What each transition writes, column by column.

use super::*;
use crate::plain::{Interval, Plain, PlainError, date, sample};

const SEC: i64 = 1_000_000;

fn clock() -> Clock {
    Clock {
        txn: date(2026, 3, 1),
        call: date(2026, 3, 1) + 7 * SEC,
    }
}

fn terms() -> Terms<Plain> {
    Terms {
        scope: 21,
        key: 22,
        hash: 23,
        lease: Interval::micros(30 * SEC),
        retention: Interval {
            months: 1,
            days: 0,
            micros: 0,
        },
        claimed_by: Some(24),
    }
}

#[test]
fn a_new_claim_is_attempt_one_with_nothing_but_its_terms() {
    let c = clock();
    for t in [Transition::NewClaim(terms()), Transition::Reset(terms())] {
        let old = [sample(Status::Succeeded, 9), sample(Status::FailedFinal, 9)];
        for stored in [None, Some(old[0]), Some(old[1])] {
            let new = t.apply(stored.as_ref(), c).unwrap();
            let expected = Record {
                scope: 21,
                key: 22,
                request_hash: 23,
                status: Status::Processing,
                attempt: 1,
                response: None,
                recovery_point: None,
                failure_code: None,
                failure_message: None,
                claimed_by: Some(24),
                claimed_at: c.txn,
                locked_until: Some(c.call + 30 * SEC),
                lease: terms().lease,
                retention: terms().retention,
                created_at: c.txn,
                updated_at: c.txn,
                expires_at: date(2026, 4, 1),
            };
            assert_eq!(new, expected, "{t:?} of {stored:?}");
        }
    }
}

#[test]
fn a_takeover_is_the_next_attempt_on_its_own_terms() {
    let c = clock();
    let old = sample(Status::FailedRetryable, 4);
    let anonymous = Terms {
        claimed_by: None,
        ..terms()
    };
    let new = Transition::TakeOver(anonymous)
        .apply(Some(&old), c)
        .unwrap();
    let expected = Record {
        status: Status::Processing,
        attempt: 5,
        claimed_by: None,
        claimed_at: c.txn,
        locked_until: Some(c.call + 30 * SEC),
        lease: terms().lease,
        retention: terms().retention,
        updated_at: c.txn,
        expires_at: date(2026, 4, 1),
        ..old
    };
    assert_eq!(new, expected);
    // The stored request, recovery point and creation stay: it is the same request.
    assert_eq!(
        (new.request_hash, new.recovery_point, new.created_at),
        (3, Some(11), old.created_at)
    );
    let last = sample(Status::Processing, i32::MAX);
    assert_eq!(
        Transition::TakeOver(terms()).apply(Some(&last), c),
        Err(PlainError::Protocol(Error::AttemptOutOfRange))
    );
}

#[test]
fn finishing_ends_the_lease_and_keeps_the_record_at_least_its_retention() {
    let c = clock();
    let p = sample(Status::Processing, 2);
    let complete = Transition::Complete { response: Some(50) };
    let new = complete.apply(Some(&p), c).unwrap();
    let expected = Record {
        status: Status::Succeeded,
        response: Some(50),
        failure_code: None,
        failure_message: None,
        locked_until: None,
        updated_at: c.txn,
        expires_at: c.txn + 86_400 * SEC,
        ..p
    };
    assert_eq!(new, expected);
    for status in [Status::FailedRetryable, Status::FailedFinal] {
        let fail = Transition::Fail {
            status,
            code: Some(60),
            message: None,
        };
        let new = fail.apply(Some(&p), c).unwrap();
        let expected = Record {
            status,
            failure_code: Some(60),
            failure_message: None,
            locked_until: None,
            updated_at: c.txn,
            expires_at: c.txn + 86_400 * SEC,
            ..p
        };
        assert_eq!(new, expected);
    }
    // A later expiry is kept, never shortened.
    let far = Record {
        expires_at: date(2030, 1, 1),
        ..p
    };
    assert_eq!(
        complete.apply(Some(&far), c).unwrap().expires_at,
        date(2030, 1, 1)
    );
}

#[test]
fn a_checkpoint_renews_the_lease_from_the_clock() {
    let c = clock();
    let p = sample(Status::Processing, 2);
    let keep = Transition::Checkpoint {
        recovery_point: None,
        lease: None,
    };
    let new = keep.apply(Some(&p), c).unwrap();
    let expected = Record {
        locked_until: Some(c.call + 60 * SEC),
        updated_at: c.txn,
        ..p
    };
    assert_eq!(new, expected);
    let both = Transition::Checkpoint {
        recovery_point: Some(70),
        lease: Some(Interval::micros(5 * SEC)),
    };
    let new = both.apply(Some(&p), c).unwrap();
    let expected = Record {
        recovery_point: Some(70),
        lease: Interval::micros(5 * SEC),
        locked_until: Some(c.call + 5 * SEC),
        updated_at: c.txn,
        ..p
    };
    assert_eq!(new, expected);
}

#[test]
fn a_change_of_no_record_is_an_error() {
    let t = [
        Transition::TakeOver(terms()),
        Transition::Complete { response: None },
        Transition::Fail {
            status: Status::FailedFinal,
            code: None,
            message: None,
        },
        Transition::Checkpoint {
            recovery_point: None,
            lease: None,
        },
    ];
    for t in t {
        assert_eq!(
            t.apply(None, clock()),
            Err(PlainError::Protocol(Error::NoRecord))
        );
    }
}

#[test]
fn times_out_of_range_are_errors() {
    let c = Clock {
        txn: crate::plain::END_TIMESTAMP - 1,
        call: crate::plain::END_TIMESTAMP - 1,
    };
    let p = sample(Status::Processing, 1);
    assert_eq!(
        Transition::NewClaim(terms()).apply(None, c),
        Err(PlainError::OutOfRange)
    );
    let complete = Transition::Complete { response: None };
    assert_eq!(complete.apply(Some(&p), c), Err(PlainError::OutOfRange));
}
