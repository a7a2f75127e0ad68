//! The idempotency protocol's decisions, free of Postgres: what a record's states are, what a
//! claim makes of a record, what each state change writes, when an attempt is current, what
//! the upkeep reclaims and purges, when the extension's direct path may act, and why a finish
//! changed nothing (a repeat, a stale attempt, no processing record). The extension (`src/`) reads and writes; every decision it acts on is made here, once, for both of its
//! paths (direct and SQL), and tested by `cargo test -p idem-protocol`.
//!
//! Values the protocol only carries (texts, the response, intervals) are the caller's own
//! types ([`Repr`]): Postgres datums in the extension, so that nothing is copied or allocated
//! on the hot path; plain values in the tests ([`plain::Plain`]).

mod claim;
mod finish;
pub mod plain;
mod record;
mod rules;
mod state;
mod transition;
mod upkeep;

pub use claim::{OtherRequest, Verdict, judge};
pub use finish::{Diagnosis, Finish, diagnose, is_repeat};
pub use record::{Clock, Record, Repr};
pub use rules::{
    Isolation, MAX_INTERVAL_MICROS, OutOfBounds, ReadFacts, WriteFacts, check_interval,
    may_change_directly, may_read, may_update, may_write, may_write_locked, reclaim_cutoff,
};
pub use state::{Outcome, Status};
pub use transition::{Error, Terms, Transition};
pub use upkeep::{purgeable, reclaimable, reclaimed_expiry};
