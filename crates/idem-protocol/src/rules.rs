//! When the extension's direct path (no SPI, no executor) may act, and the bounds that keep
//! its arithmetic in range. The facts come from Postgres (the extension's `direct/rules.rs`
//! reads them, in the order these rules ask, only as far as needed); the rules are here.

use crate::record::{Record, Repr};

/// The longest lease or retention, in microseconds as Postgres compares intervals (a month is
/// 30 days): 100 years. The table's CHECKs say the same, so that no stored interval can push a
/// timestamp computed from it (now() + retention) out of range.
pub const MAX_INTERVAL_MICROS: i128 = 1200 * 30 * 86_400 * 1_000_000;

/// What a lease or retention of `micros` (as compared) is refused for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutOfBounds {
    NotPositive,
    TooLong,
}

/// A lease or retention must be longer than zero and at most [`MAX_INTERVAL_MICROS`].
pub fn check_interval(micros: i128) -> Result<(), OutOfBounds> {
    if micros <= 0 {
        Err(OutOfBounds::NotPositive)
    } else if micros > MAX_INTERVAL_MICROS {
        Err(OutOfBounds::TooLong)
    } else {
        Ok(())
    }
}

/// What the direct read depends on, about the locked table.
pub trait ReadFacts {
    /// The first 17 columns and the primary key are as the extension created them.
    fn shape_readable(&self) -> bool;
    /// A Citus table: the rows are in shards, which only SQL reaches.
    fn distributed(&self) -> bool;
    /// Citus is assumed to distribute the table (it cannot be told for sure yet).
    fn citus_assumed(&self) -> bool;
    /// Row-level security applies to this user: SQL applies the policies.
    fn rls_applies(&self) -> bool;
}

/// May the table be read directly (after the privileges SQL would check were checked)?
pub fn may_read(t: &impl ReadFacts) -> bool {
    t.shape_readable() && !t.distributed() && !t.citus_assumed() && !t.rls_applies()
}

/// A transaction's isolation level, in Postgres's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isolation {
    ReadUncommitted,
    ReadCommitted,
    RepeatableRead,
    Serializable,
}

/// What a direct write depends on, before the write lock is taken.
pub trait WriteFacts {
    /// Exactly as created: columns, NOT NULLs, no defaults, the CHECKs, no triggers or rules.
    fn shape_writable(&self) -> bool;
    /// A read-only transaction (SQL raises 25006; also on a standby).
    fn read_only(&self) -> bool;
    fn isolation(&self) -> Isolation;
}

/// May this transaction write the table directly? Not if only the executor can run what the
/// table has, nor where SQL would raise an error (read-only) or a serialization failure
/// (REPEATABLE READ and stricter).
pub fn may_write(t: &impl WriteFacts) -> bool {
    t.shape_writable() && !t.read_only() && t.isolation() < Isolation::RepeatableRead
}

/// With the write lock held: `changed` (something about the table was invalidated since the
/// read, whose decisions are then void), `privileged` (the caller holds the privilege).
pub fn may_write_locked(changed: bool, privileged: impl FnOnce() -> bool) -> bool {
    !changed && privileged()
}

/// May `stored`, read directly, be updated directly by a transaction that began at `txn`? Not
/// if it was claimed after: SQL reports the row's `requests_times_check` violation.
pub fn may_update<R: Repr>(stored: &Record<R>, txn: i64) -> bool {
    txn >= stored.created_at
}

/// May a complete / fail / checkpoint by `attempt` write `stored` directly? Only the current
/// attempt ([`Record::is_current`]) and only what [`may_update`] allows; else SQL decides and
/// explains.
pub fn may_change_directly<R: Repr>(stored: &Record<R>, attempt: Option<i32>, txn: i64) -> bool {
    stored.is_current(attempt) && may_update(stored, txn)
}

/// Reclaim takes leases that ended before this: `grace_ms` milliseconds before `now`.
pub fn reclaim_cutoff(now: i64, grace_ms: i32) -> i64 {
    now.saturating_sub(i64::from(grace_ms) * 1000)
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
