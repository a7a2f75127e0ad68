//! Changing the current attempt of a record (complete, fail, checkpoint): written once over
//! the seam (`store.rs`), which `seam::run` runs directly where the rules of `direct/` allow,
//! else through SQL, with the same [`Transition`] either way.

use crate::base::errors::Result;
use crate::base::record::Record;
pub use crate::base::store::Target;
use crate::base::store::{Step, Stop, Store};
use crate::spi::{Conn, LazyConn};
use crate::steps::seam;
pub use crate::steps::seam::Path;
use crate::steps::transition::{self, Clock, Transition};

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
    // A change answers with nothing read directly (`change_with`): its scan is closed on return.
    let mut direct = None;
    seam::run(path, &mut direct, conn, Conn::open, |store| {
        change_with(store, target, transition, clock)
    })
}

/// The change, on either way to the table.
fn change_with(
    store: &mut dyn Store,
    target: Target<'_>,
    transition: &Transition,
    clock: Clock,
) -> Step<core::result::Result<Changed, Option<Record>>> {
    let mut passes = 0;
    loop {
        if let Some(stored) = store.lock_current(target, clock.txn)? {
            let new = transition.apply(Some(&stored), clock)?;
            if store.update(&new)? {
                return Ok(Ok(Changed::of(&new, store.direct())));
            }
        }
        if store.direct() {
            // What the direct path reads lives in its scan, which is closed when the change
            // returns: SQL reads the record that explains a change not made.
            return Err(Stop::UseSql);
        }
        let now = store.find(target.scope, target.key)?;
        // The rotation of the generations layout moves a record (a DELETE and an INSERT)
        // under its row lock: a change that waited for that lock finds no row, while the
        // record is the current attempt still, in another generation. Lock it there.
        passes += 1;
        let moved = now.is_some_and(|r| r.is_current(target.attempt));
        if !moved || passes == 3 {
            return Ok(Err(now));
        }
    }
}
