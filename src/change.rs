//! Changing the current attempt of a record (complete, fail, checkpoint): directly where the
//! rules of `direct/` allow, else through SQL, with the same [`Transition`] either way.

use pgrx::pg_sys;

use crate::datum::text_datum;
use crate::direct::{Lookup, Writer};
use crate::errors::Result;
use crate::record::{self, Record};
use crate::record_sql;
use crate::spi::{Conn, LazyConn};
use crate::transition::{self, Clock, Transition};

/// What a change wrote.
#[derive(Clone, Copy, Debug)]
pub struct Changed {
    pub locked_until: Option<i64>,
    /// Written by the direct path (else by SQL).
    pub direct: bool,
}

impl Changed {
    fn of(record: &Record, direct: bool) -> Changed {
        Changed {
            locked_until: record.locked_until,
            direct,
        }
    }
}

/// The attempt a change is for: the current one of (scope, key), and only `attempt` if given
/// (fencing).
#[derive(Clone, Copy)]
pub struct Target<'a> {
    pub scope: &'a [u8],
    pub key: &'a [u8],
    pub attempt: Option<i32>,
}

/// Which ways a change may take (tests force SQL to compare the two).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Path {
    DirectOrSql,
    #[cfg(any(test, feature = "pg_test"))]
    Sql,
}

/// Apply `transition` to `target`, now. `Err`: nothing changed, with the record as it is now
/// (read on `conn`; `None`: no record), to explain why.
pub fn change_attempt(
    conn: &mut LazyConn,
    target: Target<'_>,
    transition: &Transition,
) -> Result<core::result::Result<Changed, Option<Record>>> {
    change_attempt_at(
        conn,
        target,
        transition,
        Path::DirectOrSql,
        transition::now(),
    )
}

/// [`change_attempt`] at `clock`, taking `path`.
pub fn change_attempt_at(
    conn: &mut LazyConn,
    target: Target<'_>,
    transition: &Transition,
    path: Path,
    clock: Clock,
) -> Result<core::result::Result<Changed, Option<Record>>> {
    if path == Path::DirectOrSql
        && let Some(changed) = directly(target, transition, clock)?
    {
        return Ok(Ok(changed));
    }
    through_sql(conn.get()?, target, transition, clock)
}

/// The change without SQL; `None`: nothing was written, SQL decides (see `direct/rules.rs`).
fn directly(target: Target<'_>, transition: &Transition, clock: Clock) -> Result<Option<Changed>> {
    let Some(mut lookup) = Lookup::open()? else {
        return Ok(None);
    };
    let Some(stored) = lookup.find(text_datum(target.scope), text_datum(target.key))? else {
        return Ok(None);
    };
    // A repeat or a fenced call needs no executor state: SQL explains it.
    if !idem_protocol::may_change_directly(&stored, target.attempt, clock.txn) {
        return Ok(None);
    }
    let Some(mut writer) = Writer::open(&lookup, pg_sys::ACL_UPDATE) else {
        return Ok(None);
    };
    fail_point!("change.direct");
    let new = transition.apply(Some(&stored), clock)?;
    let values = record::to_values(&new, |status| lookup.catalog.status_datum(status));
    let (tid, snapshot) = lookup.found();
    Ok(writer
        .update(tid, snapshot, &values)
        .then(|| Changed::of(&new, true)))
}

fn through_sql(
    conn: &Conn,
    target: Target<'_>,
    transition: &Transition,
    clock: Clock,
) -> Result<core::result::Result<Changed, Option<Record>>> {
    let Target {
        scope,
        key,
        attempt,
    } = target;
    if let Some(stored) = record_sql::lock_current(conn, scope, key, attempt)? {
        fail_point!("change.sql");
        let new = transition.apply(Some(&stored), clock)?;
        if record_sql::update(conn, &new)? {
            return Ok(Ok(Changed::of(&new, false)));
        }
    }
    Ok(Err(record_sql::find(conn, scope, key)?))
}
