//! Direct or SQL, decided here and nowhere else. A step of the protocol (a claim, a change of
//! an attempt) is written once, over [`Store`]; [`run`] gives it the direct path where the
//! table and the transaction allow (`direct/rules.rs`), and SQL where they do not or where the
//! direct path declines a step.

use crate::base::errors::{self, IdemError, Result};
use crate::base::store::{Step, Stop, Store};
use crate::direct::Direct;
use crate::spi::record_sql::Sql;
use crate::spi::{Conn, LazyConn};

/// Which ways a step may take (tests force SQL to compare the two).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Path {
    DirectOrSql,
    #[cfg(any(test, feature = "pg_test"))]
    Sql,
}

/// Run `step` on the direct path, opened into `direct` (which must be `None`: every step reads
/// with a snapshot of its own), and through SQL (on `conn`, opened with `open_sql` if it is
/// not) when the direct path is closed to this call or declines. `step` may run twice: it keeps what it learnt (a record it read) outside,
/// so that SQL goes on from there. What was read directly points into `direct`, and what was
/// read through SQL into `conn`: the caller keeps both while it uses the answer.
pub fn run<T>(
    path: Path,
    direct: &mut Option<Direct>,
    conn: &mut LazyConn,
    open_sql: fn() -> Result<Conn>,
    mut step: impl FnMut(&mut dyn Store) -> Step<T>,
) -> Result<T> {
    if path == Path::DirectOrSql {
        debug_assert!(direct.is_none(), "a Direct from another step");
        *direct = Direct::open()?;
        if let Some(store) = direct.as_mut() {
            match step(store) {
                Ok(done) => return Ok(done),
                Err(Stop::Failed(error)) => return Err(error),
                Err(Stop::UseSql) => {}
            }
        }
    }
    let conn = conn.get_with(open_sql)?;
    step(&mut Sql(conn)).map_err(|stop| match stop {
        Stop::Failed(error) => error,
        Stop::UseSql => IdemError::new(errors::INTERNAL_ERROR, "the SQL path declined a step"),
    })
}
