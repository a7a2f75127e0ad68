//! The seam between the protocol and the table: one interface (find, lock, insert, update),
//! two implementations: `direct::Direct` (the table AM, no SPI) and `record_sql::Sql` (fixed
//! statements on SPI). Which one a call uses is decided in one place, `seam::run`; the claim
//! loop (`claim.rs`) and the change of an attempt (`change.rs`) are written once, over this.
//!
//! The direct implementation may decline any step ([`Stop::UseSql`], having written nothing):
//! `seam::run` then runs the same step, from where it was, through SQL.

use crate::base::errors::IdemError;
use crate::base::record::Record;

/// Why a step of a [`Store`] did not happen.
pub enum Stop {
    /// The direct path leaves this step to SQL (`direct/rules.rs` says when); nothing was written.
    UseSql,
    /// The step failed: the error the call reports.
    Failed(IdemError),
}

impl From<IdemError> for Stop {
    fn from(error: IdemError) -> Self {
        Stop::Failed(error)
    }
}

/// What a step of a [`Store`] gives.
pub type Step<T> = core::result::Result<T, Stop>;

/// The attempt a change is for: the current one of (scope, key), and only `attempt` if given
/// (fencing).
#[derive(Clone, Copy)]
pub struct Target<'a> {
    pub scope: &'a [u8],
    pub key: &'a [u8],
    pub attempt: Option<i32>,
}

/// The reads and writes of `idempotency.requests` the protocol makes, one key at a time.
pub trait Store {
    /// Written without SQL (for metrics and tests).
    fn direct(&self) -> bool;

    /// The record of (scope, key) as a READ COMMITTED statement sees it now.
    fn find(&mut self, scope: &[u8], key: &[u8]) -> Step<Option<Record>>;

    /// For a claim: the record of (scope, key), locked; `None` also when someone else holds its
    /// row lock (a claim never waits).
    fn lock_for_claim(&mut self, scope: &[u8], key: &[u8]) -> Step<Option<Record>>;

    /// For a complete / fail / checkpoint: the record of `target`, locked, if it is the current
    /// attempt (`Record::is_current`). The direct path also needs it claimed at or before `txn`,
    /// the start of this transaction (`idem_protocol::may_change_directly`); SQL ignores `txn`.
    fn lock_current(&mut self, target: Target<'_>, txn: i64) -> Step<Option<Record>>;

    /// Before the key's lock is tried for a new record: what the insert needs (the direct path
    /// opens the table for writing, with its privilege check).
    fn prepare_insert(&mut self) -> Step<()>;

    /// The key's lock is someone else's: under row-level security, the policy's 42501 for a
    /// new record of the key comes first, as it would for any key the caller may not write.
    fn check_insert_policy(
        &mut self,
        scope: &[u8],
        key: &[u8],
        hash: &[u8],
        claimed_by: Option<&[u8]>,
    ) -> Step<()>;

    /// With the key's lock held: insert the record `new` makes, unless (scope, key) has a
    /// record by now. `Ok`: the record written; `Err`: the key's record as it is now (`None`:
    /// it vanished again).
    fn insert(
        &mut self,
        scope: &[u8],
        key: &[u8],
        new: &mut dyn FnMut() -> crate::base::errors::Result<Record>,
    ) -> Step<core::result::Result<Record, Option<Record>>>;

    /// Write `new` over the record last locked (or, directly, the one `lock_current` read);
    /// `false`: someone changed it first, nothing was written.
    fn update(&mut self, new: &Record) -> Step<bool>;
}
