//! The claim path: `idem_claim`, every decision a claim makes, in order. The reads and writes
//! it decides on are in `direct/` (lookup, writer) and `record_sql.rs`; the key's lock in
//! `lock_key.rs`; finishing an attempt (complete / fail / checkpoint / forget) in `finish.rs`.
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

use crate::args::{self, Signature, c_function};
use crate::datum::text_datum;
use crate::direct::{Lookup, Writer};
use crate::errors::{self, IdemError, Result};
use crate::input;
use crate::record::{self, Outcome, Record};
use crate::record_sql;
use crate::result_row::call_site;
use crate::spi::{Conn, LazyConn};
pub use crate::transition::ClaimArgs;
use crate::transition::{self, Clock, Transition};
use idem_protocol::Verdict;

/// `idem_claim`'s arguments by position (sql/claim.sql).
pub(crate) const CLAIM_ARGS: Signature = Signature {
    name: "idem_claim",
    args: &[
        "text", "text", "text", "interval", "interval", "text", "interval",
    ],
};

// `wait` is read by claim_wait.rs at its own position.
const _: () = assert!(CLAIM_ARGS.is(crate::claim_wait::WAIT_ARG, "interval"));

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
    locked_until: Option<i64>,
    expires_at: Option<i64>,
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
        }
    }

    /// A claim this call made: `new` is the record it wrote.
    fn made(outcome: Outcome, new: &Record) -> Self {
        Claimed {
            response: None,
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
        crate::metrics::count_hash_mismatch();
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
    crate::lock_key::try_claim_lock(args.scope, args.key)
}

/// What a claim of a key with no record did when it tried to write directly.
enum NewKey {
    Claimed(Claimed),
    /// A record appeared before the key's lock was ours: decide on it.
    Found(Record),
    /// The direct write is not possible here: go through SQL.
    UseSql,
}

/// Insert a new record for a key the first read did not find, without SQL (`direct/rules.rs`
/// says when SQL takes over).
fn claim_new_key(lookup: &mut Lookup, args: &ClaimArgs<'_>, clock: Clock) -> Result<NewKey> {
    let Some(mut writer) = Writer::open(lookup, pg_sys::ACL_INSERT) else {
        return Ok(NewKey::UseSql);
    };
    #[cfg(feature = "pg_test")]
    crate::test_points::before_key_lock();
    if !try_lock_key(args)? {
        return Ok(NewKey::Claimed(Claimed::unseen_active()));
    }
    // Whoever inserts this key holds its lock until they commit, so a read with a snapshot
    // taken now sees every record of it there will be until we commit.
    lookup.refresh();
    if let Some(record) = lookup.find(text_datum(args.scope), text_datum(args.key))? {
        return Ok(NewKey::Found(record));
    }
    fail_point!("claim.direct");
    let new = Transition::NewClaim(args.terms()).apply(None, clock)?;
    writer.insert(&record::to_values(&new, |status| {
        lookup.catalog.status_datum(status)
    }))?;
    crate::metrics::count_write(true);
    Ok(NewKey::Claimed(Claimed::made(Outcome::NewClaim, &new)))
}

/// The claim's decisions from a first read of the record (`row`) on, writing through SPI.
fn claim_in(
    conn: &Conn,
    args: &ClaimArgs<'_>,
    mut row: Option<Record>,
    clock: Clock,
) -> Result<Claimed> {
    // Each pass either answers or saw the record vanish/appear under it; three are plenty.
    for _ in 0..3 {
        let Some(seen) = row else {
            if !try_lock_key(args)? {
                // The policy answers before another transaction's hold on the key may: under
                // row-level security, a key another tenant is inserting is refused like any.
                record_sql::check_insert_policy(
                    conn,
                    args.scope,
                    args.key,
                    args.hash,
                    args.claimed_by,
                )?;
                return Ok(Claimed::unseen_active());
            }
            let new = Transition::NewClaim(args.terms()).apply(None, clock)?;
            if record_sql::insert(conn, &new)? {
                crate::metrics::count_write(false);
                return Ok(Claimed::made(Outcome::NewClaim, &new));
            }
            // Inserted and committed by someone since our read: look again.
            row = record_sql::find(conn, args.scope, args.key)?;
            continue;
        };
        if let Verdict::Answer(outcome) = judge(&seen, args, clock)? {
            return Ok(Claimed::from_row(outcome, &seen));
        }
        let Some(locked) = record_sql::lock_for_claim(conn, args.scope, args.key)? else {
            // Locked by a transaction that is changing it, or just deleted.
            row = record_sql::find(conn, args.scope, args.key)?;
            match &row {
                Some(busy) => return Ok(Claimed::from_row(Outcome::ProcessingActive, busy)),
                None => continue,
            }
        };
        fail_point!("claim.sql");
        // The locked version is the newest: judge it again.
        let (outcome, transition) = match judge(&locked, args, clock)? {
            Verdict::Answer(outcome) => return Ok(Claimed::from_row(outcome, &locked)),
            Verdict::TakeOver(outcome) => {
                (outcome, Transition::TakeOver(args.takeover_terms(&locked)))
            }
            Verdict::Reset => (Outcome::NewClaim, Transition::Reset(args.terms())),
        };
        let new = transition.apply(Some(&locked), clock)?;
        if !record_sql::update(conn, &new)? {
            return Err(IdemError::new(
                errors::INTERNAL_ERROR,
                "a locked record vanished",
            ));
        }
        crate::metrics::count_write(false);
        return Ok(Claimed::made(outcome, &new));
    }
    Ok(Claimed::unseen_active())
}

/// What a claim keeps open while its answer is used: the answer's values point into them.
pub(crate) struct Held {
    // Dropped in this order: SPI first, then the index scan.
    /// The claim's SPI connection if it opened one; later statements may use it.
    pub(crate) conn: LazyConn,
    _lookup: Option<Lookup>,
}

/// Claim `args`: the answer, with what must stay open while it is used.
pub(crate) fn claim_held(args: &ClaimArgs<'_>) -> Result<(Claimed, Held)> {
    let clock = transition::now();
    // The first read goes straight through the index; `seen` is None when it must use SQL.
    let mut lookup = Lookup::open()?;
    let mut seen = match lookup.as_mut() {
        Some(direct) => Some(direct.find(text_datum(args.scope), text_datum(args.key))?),
        None => None,
    };
    // Replays, final failures and live leases are answered from that read alone.
    if let Some(Some(row)) = &seen
        && let Verdict::Answer(outcome) = judge(row, args, clock)?
    {
        let claimed = Claimed::from_row(outcome, row);
        return Ok((
            claimed,
            Held {
                conn: LazyConn::default(),
                _lookup: lookup,
            },
        ));
    }
    // A new key is inserted directly where the table allows it.
    if let (Some(None), Some(direct)) = (&seen, lookup.as_mut()) {
        match claim_new_key(direct, args, clock)? {
            NewKey::Claimed(claimed) => {
                return Ok((
                    claimed,
                    Held {
                        conn: LazyConn::default(),
                        _lookup: lookup,
                    },
                ));
            }
            NewKey::Found(row) => seen = Some(Some(row)),
            NewKey::UseSql => {}
        }
    }
    let conn = Conn::open_for(c"requests")?;
    let first = match seen {
        Some(row) => row,
        None => record_sql::find(&conn, args.scope, args.key)?,
    };
    let claimed = claim_in(&conn, args, first, clock)?;
    Ok((
        claimed,
        Held {
            conn: LazyConn::with(conn),
            _lookup: lookup,
        },
    ))
}

fn claim(fcinfo: pg_sys::FunctionCallInfo) -> Result<Datum> {
    // SAFETY: called by Postgres as idem_claim.
    let (args, site, wait) = unsafe {
        (
            read_args(fcinfo)?,
            call_site(fcinfo)?,
            crate::claim_wait::wait_arg(fcinfo)?,
        )
    };
    // SAFETY: the memory context the caller expects the result in.
    let caller = unsafe { pg_sys::CurrentMemoryContext };
    crate::claim_wait::wait_while_active(wait, || {
        claim_held(&args).map(|(claimed, _held)| claimed.outcome)
    })?;
    let (claimed, _held) = claim_held(&args)?;
    crate::metrics::count_claim(claimed.outcome);
    let outcome = claimed
        .outcome
        .ok_or_else(|| IdemError::new(errors::INTERNAL_ERROR, "claim produced no outcome"))?;
    Ok(site.form(&claimed.columns(site.outcome_datum(outcome)), caller))
}

c_function!(idem_claim, pg_finfo_idem_claim, claim);
