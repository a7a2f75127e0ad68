//! Each state change of a record, described once in `idem_protocol::Transition`: it maps the
//! stored record (none for a new key) to the new one. The direct path writes that record's
//! columns (`direct::Writer`); the SQL path binds the same values as parameters
//! (`record_sql.rs`). SQL computes nothing, so the two cannot disagree (the #[pg_test]s of
//! `pg_tests/transitions.rs` run each transition both ways and compare the rows column by
//! column). Here: the extension's side of it, over datums.

use pgrx::pg_sys::{self, Datum};

use crate::base::datum::text_datum;
use crate::base::record::{Pg, Record};

pub use idem_protocol::Clock;

/// A change of one record, its values datums.
pub type Transition = idem_protocol::Transition<Pg>;

/// What a claim asks for: the key, the request's hash and the attempt's terms.
pub struct ClaimArgs<'a> {
    pub scope: &'a [u8],
    pub key: &'a [u8],
    pub hash: &'a [u8],
    /// Checked intervals (see `input::positive_interval`), as datums.
    pub lease: Datum,
    pub retention: Datum,
    pub claimed_by: Option<&'a [u8]>,
}

impl ClaimArgs<'_> {
    /// The claim's terms as the protocol takes them (each text copied into a new datum; only
    /// when a claim writes).
    pub fn terms(&self) -> idem_protocol::Terms<Pg> {
        idem_protocol::Terms {
            scope: text_datum(self.scope),
            key: text_datum(self.key),
            hash: text_datum(self.hash),
            lease: self.lease,
            retention: self.retention,
            claimed_by: self.claimed_by.map(text_datum),
        }
    }

    /// The terms of a takeover of `stored`: its scope, key and hash are the stored ones (the
    /// verdict checked the hash), so only `claimed_by` is copied.
    pub fn takeover_terms(&self, stored: &Record) -> idem_protocol::Terms<Pg> {
        idem_protocol::Terms {
            scope: stored.scope,
            key: stored.key,
            hash: stored.request_hash,
            lease: self.lease,
            retention: self.retention,
            claimed_by: self.claimed_by.map(text_datum),
        }
    }
}

/// The clock now: the transaction's start and the current time.
pub fn now() -> Clock {
    // SAFETY: the transaction's start time and the current time.
    unsafe {
        Clock {
            txn: pg_sys::GetCurrentTransactionStartTimestamp(),
            call: pg_sys::GetCurrentTimestamp(),
        }
    }
}
