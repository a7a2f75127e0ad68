//! A [`Repr`] of plain values, for tests and tools: texts and responses are numbers standing
//! for them, intervals are Postgres's (months, days, microseconds), added as Postgres adds
//! them in UTC.

use crate::record::{Record, Repr};
use crate::state::Status;
use crate::transition::Error;

/// Postgres's `interval`: months, days and microseconds, each with its own sign.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    pub months: i32,
    pub days: i32,
    pub micros: i64,
}

impl Interval {
    pub const fn micros(micros: i64) -> Interval {
        Interval {
            months: 0,
            days: 0,
            micros,
        }
    }

    /// Its length as Postgres compares intervals (a month is 30 days, a day 24 hours).
    pub fn compared_micros(self) -> i128 {
        const DAY: i128 = 86_400_000_000;
        (i128::from(self.months) * 30 + i128::from(self.days)) * DAY + i128::from(self.micros)
    }
}

/// Why [`Plain`] refused: the protocol's error, or a time out of Postgres's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlainError {
    Protocol(Error),
    OutOfRange,
}

impl From<Error> for PlainError {
    fn from(e: Error) -> Self {
        PlainError::Protocol(e)
    }
}

/// Plain values: a text or response is a number naming it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plain;

/// The first `timestamptz` Postgres accepts (4714-11-24 BC), in microseconds since 2000.
pub const MIN_TIMESTAMP: i64 = -211_813_488_000_000_000;
/// The first `timestamptz` past Postgres's range (294277-01-01).
pub const END_TIMESTAMP: i64 = 9_223_371_331_200_000_000;
const DAY: i64 = 86_400_000_000;
/// 2000-01-01 in days since 1970-01-01.
const EPOCH_2000: i64 = 10_957;

impl Repr for Plain {
    type Text = u32;
    type Json = u32;
    type Interval = Interval;
    type Error = PlainError;

    /// As `timestamptz_pl_interval` in UTC: months (the day clamped to the month's end), then
    /// days, then microseconds; an error whenever a step leaves the range.
    fn add(at: i64, by: Interval) -> Result<i64, PlainError> {
        let valid = |t: i128| {
            i64::try_from(t)
                .ok()
                .filter(|t| (MIN_TIMESTAMP..END_TIMESTAMP).contains(t))
                .ok_or(PlainError::OutOfRange)
        };
        let mut t = at;
        if by.months != 0 {
            let (days, time) = (t.div_euclid(DAY), t.rem_euclid(DAY));
            let (y, m, d) = civil_from_days(days + EPOCH_2000);
            let months = y * 12 + (m - 1) + i64::from(by.months);
            let (y, m) = (months.div_euclid(12), months.rem_euclid(12) + 1);
            let d = d.min(days_in_month(y, m));
            let days = i128::from(days_from_civil(y, m, d) - EPOCH_2000);
            t = valid(days * i128::from(DAY) + i128::from(time))?;
        }
        if by.days != 0 {
            t = valid(i128::from(t) + i128::from(by.days) * i128::from(DAY))?;
        }
        valid(i128::from(t) + i128::from(by.micros))
    }
}

fn days_in_month(y: i64, m: i64) -> i64 {
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Microseconds since 2000-01-01 UTC of a date at midnight (for tests).
pub fn date(y: i64, m: i64, d: i64) -> i64 {
    (days_from_civil(y, m, d) - EPOCH_2000) * DAY
}

/// A record of key 2 in scope 1, request hash 3, claimed by 4 at `date(2026, 1, 1)`, lease
/// one minute, retention one day: a starting point for tests.
pub fn sample(status: Status, attempt: i32) -> Record<Plain> {
    let at = date(2026, 1, 1);
    let processing = status == Status::Processing;
    Record {
        scope: 1,
        key: 2,
        request_hash: 3,
        status,
        attempt,
        response: (status == Status::Succeeded).then_some(10),
        recovery_point: Some(11),
        failure_code: (!processing && status != Status::Succeeded).then_some(12),
        failure_message: (!processing && status != Status::Succeeded).then_some(13),
        claimed_by: Some(4),
        claimed_at: at,
        locked_until: processing.then_some(at + 60_000_000),
        lease: Interval::micros(60_000_000),
        retention: Interval {
            months: 0,
            days: 1,
            micros: 0,
        },
        created_at: at,
        updated_at: at,
        expires_at: at + DAY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn months(n: i32) -> Interval {
        Interval {
            months: n,
            days: 0,
            micros: 0,
        }
    }

    #[test]
    fn adds_as_postgres_does_in_utc() {
        assert_eq!(date(2000, 1, 1), 0);
        assert_eq!(
            Plain::add(date(2000, 1, 31), months(1)),
            Ok(date(2000, 2, 29))
        );
        assert_eq!(
            Plain::add(date(2001, 1, 31), months(1)),
            Ok(date(2001, 2, 28))
        );
        assert_eq!(
            Plain::add(date(2001, 3, 31), months(-1)),
            Ok(date(2001, 2, 28))
        );
        assert_eq!(
            Plain::add(date(1999, 12, 15), months(14)),
            Ok(date(2001, 2, 15))
        );
        assert_eq!(
            Plain::add(date(2001, 2, 15), months(-14)),
            Ok(date(1999, 12, 15))
        );
        let day = Interval {
            months: 0,
            days: 1,
            micros: 5,
        };
        assert_eq!(
            Plain::add(date(2024, 2, 28), day),
            Ok(date(2024, 2, 29) + 5)
        );
        assert_eq!(
            Plain::add(date(-4713, 11, 24), Interval::micros(0)),
            Ok(MIN_TIMESTAMP)
        );
        assert_eq!(date(294_277, 1, 1), END_TIMESTAMP);
        assert_eq!(
            Plain::add(END_TIMESTAMP - 1, Interval::micros(1)),
            Err(PlainError::OutOfRange)
        );
        assert_eq!(
            Plain::add(MIN_TIMESTAMP, Interval::micros(-1)),
            Err(PlainError::OutOfRange)
        );
        assert_eq!(Plain::add(0, months(i32::MAX)), Err(PlainError::OutOfRange));
        assert_eq!(
            Plain::add(i64::MAX, Interval::micros(i64::MAX)),
            Err(PlainError::OutOfRange)
        );
    }

    #[test]
    fn intervals_compare_with_thirty_day_months() {
        let i = Interval {
            months: 1,
            days: -1,
            micros: 1,
        };
        assert_eq!(i.compared_micros(), 29 * 86_400_000_000 + 1);
    }
}
