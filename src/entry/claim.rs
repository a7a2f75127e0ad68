//! The claim path: `idem_claim`, every decision a claim makes, in order, written once over the
//! seam (`store.rs`: find, lock, insert, update; `seam.rs` picks the direct path or SQL). The
//! key's lock is in `lock_key.rs`; finishing an attempt (complete / fail / checkpoint / forget)
//! in `finish.rs`.
//!
//! How a claim never waits:
//! - it first reads the record with a plain snapshot read: a replay or a final failure is
//!   answered from that read alone (no row lock, no WAL);
//! - a new key is inserted only under a transaction-scoped *try* lock of (scope, key) in the
//!   claim's own advisory-lock class, so a second claimer of a key whose insert is not committed
//!   yet gets `processing_active` instead of waiting on the unique index; the insert goes
//!   straight to the table (`direct/writer.rs`) unless the table or transaction needs SQL;
//! - a takeover (expired lease, retryable failure, expired record) locks the row with
//!   `FOR UPDATE SKIP LOCKED`: a row someone else is changing is `processing_active`.

use pgrx::pg_sys::{self, Datum};

use crate::base::errors::{self, IdemError, Result};
use crate::base::record::{self, Outcome, Record};
use crate::base::store::{Step, Store};
use crate::direct::Direct;
use crate::spi::{Conn, LazyConn};
use crate::steps::args::{self, Signature, c_function};
use crate::steps::input;
use crate::steps::result_row::call_site;
use crate::steps::seam::{self, Path};
pub use crate::steps::transition::ClaimArgs;
use crate::steps::transition::{self, Clock, Transition};
use idem_protocol::Verdict;

/// `idem_claim`'s arguments by position (sql/claim.sql).
pub(crate) const CLAIM_ARGS: Signature = Signature {
    name: "idem_claim",
    args: &[
        "text", "text", "text", "interval", "interval", "text", "interval",
    ],
};

// `wait` is read by claim_wait.rs at its own position.
const _: () = assert!(CLAIM_ARGS.is(crate::entry::claim_wait::WAIT_ARG, "interval"));

/// The arguments of an `idem_claim` call, checked.
///
/// # Safety
/// `fcinfo` is a call of `idem_claim` as declared in sql/claim.sql.
unsafe fn read_args<'a>(fcinfo: pg_sys::FunctionCallInfo) -> Result<ClaimArgs<'a>> {
    // SAFETY: the caller's promise.
    unsafe {
        Ok(ClaimArgs {
            scope: input::scope(args::bytes(fcinfo, 0))?,
            key: input::key(args::bytes(fcinfo, 1))?,
            hash: input::request_hash(args::bytes(fcinfo, 2))?,
            lease: input::positive_interval("lease", args::interval(fcinfo, 3))?,
            retention: input::positive_interval("retention", args::interval(fcinfo, 4))?,
            claimed_by: input::optional(
                "claimed_by",
                args::bytes(fcinfo, 5),
                input::MAX_NAME_BYTES,
            )?,
        })
    }
}

/// The row `idem_claim` returns, with pass-by-reference values still where they were read.
#[derive(Default)]
pub(crate) struct Claimed {
    pub(crate) outcome: Option<Outcome>,
    pub(crate) attempt: Option<i32>,
    pub(crate) response: Option<Datum>,
    recovery_point: Option<Datum>,
    pub(crate) failure_code: Option<Datum>,
    pub(crate) failure_message: Option<Datum>,
    pub(crate) locked_until: Option<i64>,
    pub(crate) expires_at: Option<i64>,
    /// This call wrote the record without SQL.
    #[cfg_attr(
        not(feature = "pg_test"),
        allow(dead_code, reason = "read by the tests")
    )]
    pub(crate) direct: bool,
}

impl Claimed {
    /// Someone else's claim we cannot see yet (not committed): nothing to report but that.
    fn unseen_active() -> Self {
        Claimed {
            outcome: Some(Outcome::ProcessingActive),
            ..Default::default()
        }
    }

    /// An answer read from a record, without changing it.
    fn from_row(outcome: Outcome, row: &Record) -> Self {
        Claimed {
            outcome: Some(outcome),
            attempt: Some(row.attempt),
            response: if outcome == Outcome::ReplaySuccess {
                row.response
            } else {
                None
            },
            recovery_point: row.recovery_point,
            failure_code: row.failure_code,
            failure_message: row.failure_message,
            locked_until: row.locked_until,
            expires_at: Some(row.expires_at),
            direct: false,
        }
    }

    /// A claim this call made: `new` is the record it wrote (`direct`: without SQL).
    fn made(outcome: Outcome, new: &Record, direct: bool) -> Self {
        Claimed {
            response: None,
            direct,
            ..Claimed::from_row(outcome, new)
        }
    }

    /// The values of `idem_claim`'s result row, in its column order.
    fn columns(&self, outcome: Datum) -> [Option<Datum>; 8] {
        [
            Some(outcome),
            self.attempt.map(Datum::from),
            self.response,
            self.recovery_point,
            self.failure_code,
            self.failure_message,
            self.locked_until.map(Datum::from),
            self.expires_at.map(Datum::from),
        ]
    }
}

/// What `row` means for this claim (`idem_protocol::judge`); another request's key is refused.
fn judge(row: &Record, args: &ClaimArgs<'_>, clock: Clock) -> Result<Verdict> {
    idem_protocol::judge(row, || record::hash_matches(row, args.hash), clock).map_err(|_| {
        crate::entry::metrics::count_hash_mismatch();
        // The stored hash is not shown: it is another caller's (maybe another tenant's), and
        // it would let this one test guesses of that request offline.
        IdemError::new(
            errors::HASH_MISMATCH,
            format!(
                "idempotency key {:?} in scope {:?} was used for a different request",
                input::lossy(args.key),
                input::lossy(args.scope)
            ),
        )
        .detail(format!("This request's hash: {}. The stored request's hash differs.", input::lossy(args.hash)))
        .hint("Reuse an idempotency key only to retry the same request; use a new key for a new request.")
    })
}

fn try_lock_key(args: &ClaimArgs<'_>) -> Result<bool> {
    crate::entry::lock_key::try_claim_lock(args.scope, args.key)
}

/// The claim's decisions, on either way to the table (`seam::run` picks it). `seen` is the
/// record the last read found (`None`: not read yet); it outlives a pass on the direct path
/// that SQL takes over, which goes on from it.
fn claim_with(
    store: &mut dyn Store,
    args: &ClaimArgs<'_>,
    clock: Clock,
    seen: &mut Option<Option<Record>>,
) -> Step<Claimed> {
    // Each pass either answers or saw the record vanish/appear under it; three are plenty.
    for _ in 0..3 {
        let row = match *seen {
            Some(row) => row,
            None => *seen.insert(store.find(args.scope, args.key)?),
        };
        let Some(row) = row else {
            // The direct path opens the table for writing here, its privilege checked before
            // the key's lock is tried.
            store.prepare_insert()?;
            if !try_lock_key(args)? {
                store.check_insert_policy(args.scope, args.key, args.hash, args.claimed_by)?;
                return Ok(Claimed::unseen_active());
            }
            let mut new = || Transition::NewClaim(args.terms()).apply(None, clock);
            match store.insert(args.scope, args.key, &mut new)? {
                Ok(new) => {
                    crate::entry::metrics::count_write(store.direct());
                    return Ok(Claimed::made(Outcome::NewClaim, &new, store.direct()));
                }
                // Inserted and committed by someone since our read: decide on it.
                Err(now) => *seen = Some(now),
            }
            continue;
        };
        // Replays, final failures and live leases are answered from that read alone.
        if let Verdict::Answer(outcome) = judge(&row, args, clock)? {
            return Ok(Claimed::from_row(outcome, &row));
        }
        let Some(locked) = store.lock_for_claim(args.scope, args.key)? else {
            // Locked by a transaction that is changing it, or just deleted.
            let now = *seen.insert(store.find(args.scope, args.key)?);
            match now {
                Some(busy) => return Ok(Claimed::from_row(Outcome::ProcessingActive, &busy)),
                None => continue,
            }
        };
        // The locked version is the newest: judge it again.
        let (outcome, transition) = match judge(&locked, args, clock)? {
            Verdict::Answer(outcome) => return Ok(Claimed::from_row(outcome, &locked)),
            Verdict::TakeOver(outcome) => {
                (outcome, Transition::TakeOver(args.takeover_terms(&locked)))
            }
            Verdict::Reset => (Outcome::NewClaim, Transition::Reset(args.terms())),
        };
        let new = transition.apply(Some(&locked), clock)?;
        if !store.update(&new)? {
            return Err(IdemError::new(errors::INTERNAL_ERROR, "a locked record vanished").into());
        }
        crate::entry::metrics::count_write(store.direct());
        return Ok(Claimed::made(outcome, &new, store.direct()));
    }
    Ok(Claimed::unseen_active())
}

/// What a claim keeps open while its answer is used: the answer's values point into them.
#[derive(Default)]
pub(crate) struct Held {
    // Dropped in this order: SPI first, then the direct path's scan.
    /// The claim's SPI connection if it opened one; later statements may use it.
    pub(crate) conn: LazyConn,
    direct: Option<Direct>,
}

/// Claim `args`: the answer, with what must stay open while it is used.
pub(crate) fn claim_held(args: &ClaimArgs<'_>) -> Result<(Claimed, Held)> {
    claim_at(args, Path::DirectOrSql, transition::now())
}

/// [`claim_held`] at `clock`, taking `path`.
pub(crate) fn claim_at(args: &ClaimArgs<'_>, path: Path, clock: Clock) -> Result<(Claimed, Held)> {
    let mut held = Held::default();
    let mut seen = None;
    let claimed = seam::run(
        path,
        &mut held.direct,
        &mut held.conn,
        || Conn::open_for(c"requests"),
        |store| claim_with(store, args, clock, &mut seen),
    )?;
    Ok((claimed, held))
}

fn claim(fcinfo: pg_sys::FunctionCallInfo) -> Result<Datum> {
    // SAFETY: called by Postgres as idem_claim.
    let (args, site, wait) = unsafe {
        (
            read_args(fcinfo)?,
            call_site(fcinfo)?,
            crate::entry::claim_wait::wait_arg(fcinfo)?,
        )
    };
    // SAFETY: the memory context the caller expects the result in.
    let caller = unsafe { pg_sys::CurrentMemoryContext };
    crate::entry::claim_wait::wait_while_active(wait, || {
        claim_held(&args).map(|(claimed, _held)| claimed.outcome)
    })?;
    let (claimed, _held) = claim_held(&args)?;
    crate::entry::metrics::count_claim(claimed.outcome);
    let outcome = claimed
        .outcome
        .ok_or_else(|| IdemError::new(errors::INTERNAL_ERROR, "claim produced no outcome"))?;
    Ok(site.form(&claimed.columns(site.outcome_datum(outcome)), caller))
}

c_function!(idem_claim, pg_finfo_idem_claim, claim);
