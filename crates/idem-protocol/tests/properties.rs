//! The protocol's invariants, over generated records, clocks, terms and intervals.

use idem_protocol::plain::{END_TIMESTAMP, Interval, MIN_TIMESTAMP, Plain, date};
use idem_protocol::{
    Clock, Diagnosis, Isolation, MAX_INTERVAL_MICROS, Outcome, ReadFacts, Record, Repr, Status,
    Terms, Transition, Verdict, WriteFacts, check_interval, diagnose, judge, may_change_directly,
    may_read, may_write, may_write_locked, reclaim_cutoff,
};
use proptest::prelude::*;

const DAY: i64 = 86_400_000_000;

fn status() -> impl Strategy<Value = Status> {
    prop::sample::select(Status::ALL.to_vec())
}

/// A lease or retention within the extension's bounds, with non-negative parts.
fn interval() -> impl Strategy<Value = Interval> {
    (0..=1200i32, 0..=36_500i32, 0..=100 * DAY)
        .prop_map(|(months, days, micros)| Interval {
            months,
            days,
            micros,
        })
        .prop_filter("bounded", |i| check_interval(i.compared_micros()).is_ok())
}

fn text() -> impl Strategy<Value = Option<u32>> {
    prop::option::of(0..100u32)
}

prop_compose! {
    fn record()(
        status in status(),
        attempt in prop_oneof![1..=5i32, Just(i32::MAX - 1), Just(i32::MAX)],
        texts in (text(), text(), text(), text(), text()),
        created in date(1990, 1, 1)..date(2100, 1, 1),
        ages in (0..DAY, 0..DAY, -DAY..400 * DAY),
        leased in any::<bool>(),
        lease in interval(),
        retention in interval(),
    ) -> Record<Plain> {
        let (claimed, updated, expires) = ages;
        Record {
            scope: 1,
            key: 2,
            request_hash: 3,
            status,
            attempt,
            response: texts.0,
            recovery_point: texts.1,
            failure_code: texts.2,
            failure_message: texts.3,
            claimed_by: texts.4,
            claimed_at: created + claimed,
            locked_until: leased
                .then_some(created + claimed + lease.compared_micros().min(1_000 * DAY as i128) as i64),
            lease,
            retention,
            created_at: created,
            updated_at: created + updated,
            expires_at: created + expires,
        }
    }
}

/// A clock near `record()`'s times: the call at or after the transaction's start.
fn clock() -> impl Strategy<Value = Clock> {
    (date(1989, 1, 1)..date(2102, 1, 1), 0..DAY).prop_map(|(txn, d)| Clock { txn, call: txn + d })
}

prop_compose! {
    fn terms()(lease in interval(), retention in interval(), by in text()) -> Terms<Plain> {
        Terms { scope: 1, key: 2, hash: 3, lease, retention, claimed_by: by }
    }
}

fn transition() -> impl Strategy<Value = Transition<Plain>> {
    prop_oneof![
        terms().prop_map(Transition::NewClaim),
        terms().prop_map(Transition::Reset),
        terms().prop_map(Transition::TakeOver),
        text().prop_map(|response| Transition::Complete { response }),
        (any::<bool>(), text(), text()).prop_map(|(retryable, code, message)| Transition::Fail {
            status: if retryable {
                Status::FailedRetryable
            } else {
                Status::FailedFinal
            },
            code,
            message,
        }),
        (text(), prop::option::of(interval())).prop_map(|(recovery_point, lease)| {
            Transition::Checkpoint {
                recovery_point,
                lease,
            }
        }),
    ]
}

fn add(at: i64, by: Interval) -> i64 {
    Plain::add(at, by).expect("in range")
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// A finish by an attempt that is not the current one is never written directly, and a
    /// finish of a record that is not processing neither.
    #[test]
    fn a_fenced_attempt_never_writes(r in record(), given in prop::option::of(0..=6i32), txn in clock()) {
        let fenced = r.status != Status::Processing || given.is_some_and(|g| g != r.attempt);
        if fenced {
            prop_assert!(!may_change_directly(&r, given, txn.txn));
        } else {
            prop_assert_eq!(may_change_directly(&r, given, txn.txn), txn.txn >= r.created_at);
        }
    }

    /// No transition leaves a record processing without a lease, and every other state has none
    /// after a transition that ends the attempt.
    #[test]
    fn no_transition_leaves_processing_without_a_lease(r in record(), t in transition(), c in clock()) {
        let r = Record { status: Status::Processing, ..r };
        if let Ok(new) = t.apply(Some(&r), c) {
            if new.status == Status::Processing {
                prop_assert!(new.locked_until.is_some_and(|until| until >= c.call));
            } else {
                prop_assert_eq!(new.locked_until, None);
            }
        }
    }

    /// Leases start at the call's clock, not the transaction's start.
    #[test]
    fn leases_start_at_the_call(r in record(), t in transition(), c in clock()) {
        if let Ok(new) = t.apply(Some(&r), c) {
            match t {
                Transition::NewClaim(terms) | Transition::Reset(terms) | Transition::TakeOver(terms) => {
                    prop_assert_eq!(new.locked_until, Some(add(c.call, terms.lease)));
                    prop_assert_eq!(new.claimed_at, c.txn);
                }
                Transition::Checkpoint { lease, recovery_point } => {
                    prop_assert_eq!(new.locked_until, Some(add(c.call, lease.unwrap_or(r.lease))));
                    // A checkpoint without a recovery point keeps the stored one.
                    prop_assert_eq!(new.recovery_point, recovery_point.or(r.recovery_point));
                }
                _ => {}
            }
            prop_assert_eq!(new.updated_at, c.txn);
        }
    }

    /// `replay_success` is answered only from a succeeded record still within its retention,
    /// and another request is never answered nor taken over.
    #[test]
    fn replay_success_only_from_succeeded(r in record(), same in any::<bool>(), c in clock()) {
        match judge(&r, || same, c) {
            Ok(Verdict::Answer(Outcome::ReplaySuccess)) => {
                prop_assert_eq!(r.status, Status::Succeeded);
                prop_assert!(r.expires_at >= c.call && same);
            }
            Ok(Verdict::Reset) => {
                prop_assert!(r.status != Status::Processing && r.expires_at < c.call);
            }
            Ok(verdict) => prop_assert!(same, "{:?}", verdict),
            Err(_) => prop_assert!(!same),
        }
    }

    /// A takeover is only of an ended attempt: a retryable failure or a lease that ended.
    #[test]
    fn only_ended_attempts_are_taken_over(r in record(), c in clock()) {
        match judge(&r, || true, c) {
            Ok(Verdict::TakeOver(Outcome::RetryableFailure)) => {
                prop_assert_eq!(r.status, Status::FailedRetryable)
            }
            Ok(Verdict::TakeOver(Outcome::ProcessingStale)) => {
                prop_assert_eq!(r.status, Status::Processing);
                prop_assert!(r.locked_until.is_some_and(|u| u < c.call));
            }
            Ok(Verdict::TakeOver(other)) => prop_assert!(false, "takeover as {:?}", other),
            Ok(Verdict::Answer(Outcome::ProcessingActive)) => {
                prop_assert!(r.status == Status::Processing && r.locked_until.is_none_or(|u| u >= c.call))
            }
            _ => {}
        }
    }

    /// Attempts only grow: every change keeps or raises the attempt, a takeover by one; only
    /// a reset (a record whose retention ended, never a processing one) starts over at 1.
    #[test]
    fn attempts_only_grow(r in record(), t in transition(), c in clock(), terms in terms()) {
        if let Ok(new) = t.apply(Some(&r), c) {
            match t {
                Transition::NewClaim(_) | Transition::Reset(_) => prop_assert_eq!(new.attempt, 1),
                Transition::TakeOver(_) => prop_assert_eq!(new.attempt, r.attempt + 1),
                _ => prop_assert_eq!(new.attempt, r.attempt),
            }
        } else if let Transition::TakeOver(_) = t {
            prop_assert_eq!(r.attempt, i32::MAX);
        }
        // What a claim does to an existing record never lowers its attempt unless it resets it.
        let next = match judge(&r, || true, c) {
            Ok(Verdict::TakeOver(_)) => Transition::TakeOver(terms).apply(Some(&r), c).ok(),
            Ok(Verdict::Reset) => {
                prop_assert!(r.status != Status::Processing);
                None
            }
            _ => None,
        };
        if let Some(new) = next {
            prop_assert!(new.attempt > r.attempt);
        }
    }

    /// A takeover keeps the record for its own retention from now, not the old attempt's.
    #[test]
    fn a_takeovers_expiry_follows_its_own_retention(r in record(), terms in terms(), c in clock()) {
        if let Ok(new) = Transition::TakeOver(terms).apply(Some(&r), c) {
            prop_assert_eq!(new.expires_at, add(c.txn, terms.retention));
            prop_assert_eq!(new.retention, terms.retention);
            prop_assert_eq!(new.lease, terms.lease);
            prop_assert_eq!(new.claimed_by, terms.claimed_by);
            prop_assert_eq!(new.request_hash, r.request_hash);
        }
    }

    /// Ending an attempt keeps the record at least its retention from now, never less than
    /// it was kept before.
    #[test]
    fn finishing_never_shortens_expiry(r in record(), t in transition(), c in clock()) {
        if matches!(t, Transition::Complete { .. } | Transition::Fail { .. }) {
            let new = t.apply(Some(&r), c).expect("in range");
            prop_assert_eq!(new.expires_at, r.expires_at.max(add(c.txn, r.retention)));
        }
    }

    /// A reset keeps nothing of the old request: it is the new claim of a key with no record.
    #[test]
    fn a_reset_is_a_new_claim(r in record(), terms in terms(), c in clock()) {
        prop_assert_eq!(
            Transition::Reset(terms).apply(Some(&r), c),
            Transition::NewClaim(terms).apply(None, c)
        );
    }

    /// For leases and retentions within the bounds, expiry and lease ends stay in range from
    /// any time up to the year 200000; any interval at all gives a time in range or an error.
    #[test]
    fn expiry_never_overflows_for_bounded_intervals(
        at in date(1, 1, 1)..date(200_000, 1, 1),
        by in interval(),
        wild in (any::<i32>(), any::<i32>(), any::<i64>()),
        anywhere in any::<i64>(),
    ) {
        let end = add(at, by);
        // Calendar months are up to 31 days where the bound counts 30.
        prop_assert!(end >= at && (end - at) as i128 <= MAX_INTERVAL_MICROS * 31 / 30);
        let wild = Interval { months: wild.0, days: wild.1, micros: wild.2 };
        if let Ok(t) = Plain::add(anywhere, wild) {
            prop_assert!((MIN_TIMESTAMP..END_TIMESTAMP).contains(&t));
        }
    }

    /// A finish that changed nothing is stale exactly when the caller's attempt is not the
    /// record's; a repeat is accepted only of a record that exists.
    #[test]
    fn a_stale_attempt_is_always_told(
        r in prop::option::of(record()),
        given in prop::option::of(0..=6i32),
        repeat in any::<bool>(),
    ) {
        let d = diagnose(r.as_ref(), given, |_| Ok::<_, ()>(repeat)).unwrap();
        match (r, given) {
            (Some(r), Some(g)) if g != r.attempt => {
                prop_assert_eq!(d, Diagnosis::Stale { given: g, current: r.attempt })
            }
            (Some(_), _) if repeat => prop_assert_eq!(d, Diagnosis::Repeat),
            _ => prop_assert_eq!(d, Diagnosis::NotProcessing),
        }
    }

    /// A lease is judged by the clock at the call, however long ago the transaction began.
    #[test]
    fn leases_are_judged_by_the_calls_clock(r in record(), before in 0..DAY, after in 0..DAY) {
        let until = r.created_at + DAY;
        let r = Record { status: Status::Processing, locked_until: Some(until), ..r };
        let c = Clock { txn: until - before, call: until - before + after };
        let verdict = judge(&r, || true, c).unwrap();
        if until < c.call {
            prop_assert_eq!(verdict, Verdict::TakeOver(Outcome::ProcessingStale));
        } else {
            prop_assert_eq!(verdict, Verdict::Answer(Outcome::ProcessingActive));
        }
    }

    /// The direct path never acts where SQL would refuse or decide otherwise: it reads only a
    /// table as created, not distributed, without row-level security; it writes only such a
    /// table, outside read-only transactions, under READ COMMITTED or weaker, with the
    /// privilege, and only if nothing changed since the read.
    #[test]
    fn the_direct_path_acts_only_where_sql_would_do_the_same(
        facts in any::<[bool; 4]>(),
        level in 0..4usize,
        changed in any::<bool>(),
        privileged in any::<bool>(),
    ) {
        let f = Facts(facts, [
            Isolation::ReadUncommitted,
            Isolation::ReadCommitted,
            Isolation::RepeatableRead,
            Isolation::Serializable,
        ][level]);
        let [shape, distributed, assumed, rls] = facts;
        prop_assert_eq!(may_read(&f), shape && !distributed && !assumed && !rls);
        let [writable, read_only, ..] = facts;
        prop_assert_eq!(may_write(&f), writable && !read_only && level <= 1);
        prop_assert_eq!(may_write_locked(changed, || privileged), !changed && privileged);
    }

    /// Reclaim takes only leases that ended the whole grace (milliseconds) before now.
    #[test]
    fn the_reclaim_cutoff_is_the_grace_before_now(
        now in date(1990, 1, 1)..date(2100, 1, 1),
        grace in 0..=i32::MAX,
    ) {
        prop_assert_eq!(now - reclaim_cutoff(now, grace), i64::from(grace) * 1000);
    }
}

/// Facts about a table, made up: [shape, second, third, fourth] and the isolation level.
struct Facts([bool; 4], Isolation);

impl ReadFacts for Facts {
    fn shape_readable(&self) -> bool {
        self.0[0]
    }
    fn distributed(&self) -> bool {
        self.0[1]
    }
    fn citus_assumed(&self) -> bool {
        self.0[2]
    }
    fn rls_applies(&self) -> bool {
        self.0[3]
    }
}

impl WriteFacts for Facts {
    fn shape_writable(&self) -> bool {
        self.0[0]
    }
    fn read_only(&self) -> bool {
        self.0[1]
    }
    fn isolation(&self) -> Isolation {
        self.1
    }
}
