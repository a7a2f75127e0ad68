//! What the upkeep decides. The extension's SQL (`src/entry/maintenance.rs`), its Citus path
//! (`src/steps/citus.rs`) and the portable edition (`portable/upkeep.sql`) each state these
//! in their own language, inside one statement per batch; `tests/integration/upkeep/cases.rs`
//! runs one table of cases through these functions and through both editions.

use crate::record::{Record, Repr};
use crate::rules::MAX_INTERVAL_MICROS;
use crate::state::Status;

/// Does the reclaim take `r`: processing, with a lease that ended before `cutoff`
/// ([`crate::reclaim_cutoff`])? It becomes `failed_retryable` (`lease_expired`), its lease
/// cleared and its recovery point kept, so that the next claim takes over.
pub fn reclaimable<R: Repr>(r: &Record<R>, cutoff: i64) -> bool {
    r.status == Status::Processing && r.locked_until.is_some_and(|until| until < cutoff)
}

/// The expiry of a record reclaimed at `now`: its retention (bounded) from now, never earlier
/// than it was, so that the takeover it waits for finds it.
pub fn reclaimed_expiry(expires_at: i64, now: i64, retention_micros: i128) -> i64 {
    let kept = i64::try_from(retention_micros.min(MAX_INTERVAL_MICROS)).unwrap_or(i64::MAX);
    expires_at.max(now.saturating_add(kept))
}

/// Does the purge delete `r` at `now`: finished and past its expiry? A processing record is
/// never deleted, however old: the reclaim ends it first.
pub fn purgeable<R: Repr>(r: &Record<R>, now: i64) -> bool {
    r.status != Status::Processing && r.expires_at < now
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plain::sample;

    const HOUR: i64 = 3_600_000_000;

    #[test]
    fn only_a_processing_record_whose_lease_ended_is_reclaimed() {
        let mut r = sample(Status::Processing, 1);
        let now = r.claimed_at + 2 * HOUR;
        r.locked_until = Some(now - HOUR);
        assert!(reclaimable(&r, now));
        assert!(!reclaimable(&r, now - HOUR), "ended exactly at the cutoff");
        r.locked_until = Some(now + HOUR);
        assert!(!reclaimable(&r, now));
        for status in [
            Status::Succeeded,
            Status::FailedRetryable,
            Status::FailedFinal,
        ] {
            let mut done = sample(status, 1);
            done.locked_until = Some(now - HOUR);
            assert!(!reclaimable(&done, now), "{status:?}");
        }
    }

    #[test]
    fn a_reclaimed_record_is_kept_its_bounded_retention_and_never_less() {
        assert_eq!(reclaimed_expiry(0, 10, 5), 15);
        assert_eq!(reclaimed_expiry(100, 10, 5), 100);
        assert_eq!(
            reclaimed_expiry(0, 0, i128::MAX),
            i64::try_from(MAX_INTERVAL_MICROS).expect("fits")
        );
        assert_eq!(reclaimed_expiry(0, i64::MAX - 1, 5), i64::MAX);
    }

    #[test]
    fn only_a_finished_record_past_its_expiry_is_purged() {
        for status in [
            Status::Succeeded,
            Status::FailedRetryable,
            Status::FailedFinal,
        ] {
            let r = sample(status, 1);
            assert!(purgeable(&r, r.expires_at + 1), "{status:?}");
            assert!(!purgeable(&r, r.expires_at), "{status:?} at its expiry");
        }
        let r = sample(Status::Processing, 1);
        assert!(!purgeable(&r, r.expires_at + 100 * HOUR));
    }
}
