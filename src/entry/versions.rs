//! Ordered updates: `idem_advance(stream, entity, version)` applies per-entity versioned
//! events that may arrive late or twice. One upsert: the row of (stream, entity) holds the
//! last applied version and only moves forward. Two transactions advancing one entity take
//! turns on its row, so the later one compares against the earlier one's committed version.

use pgrx::pg_sys;

use crate::base::errors::{self, IdemError, Result};
use crate::spi::text_arg;
use crate::spi::{Conn, Statement};
use crate::steps::args::{self, Signature, c_function};
use crate::steps::input;

static ADVANCE: Statement = Statement {
    sql: "INSERT INTO idempotency.versions AS v (stream, entity, version, updated_at) \
          VALUES ($1, $2, $3, pg_catalog.now()) \
          ON CONFLICT (stream, entity) DO UPDATE \
          SET version = excluded.version, updated_at = excluded.updated_at \
          WHERE v.version OPERATOR(pg_catalog.<) excluded.version \
          RETURNING true",
    args: &[pg_sys::TEXTOID, pg_sys::TEXTOID, pg_sys::INT8OID],
};

/// `idem_advance`'s arguments by position (sql/inbox.sql).
#[cfg_attr(not(feature = "pg_test"), allow(dead_code))]
pub(crate) const ADVANCE_ARGS: Signature = Signature {
    name: "idem_advance",
    args: &["text", "text", "int8"],
};

fn advance(fcinfo: pg_sys::FunctionCallInfo) -> Result<bool> {
    // SAFETY: called by Postgres as idem_advance(text, text, int8).
    let (stream, entity, version) = unsafe {
        (
            input::name("stream", errors::INVALID_SCOPE, args::bytes(fcinfo, 0))?,
            input::name("entity", errors::INVALID_KEY, args::bytes(fcinfo, 1))?,
            args::datum(fcinfo, 2).ok_or_else(|| {
                IdemError::new(errors::NULL_VALUE_NOT_ALLOWED, "version must not be null")
            })?,
        )
    };
    let conn = Conn::open_for(c"versions")?;
    let applied = ADVANCE.run(&conn, &[text_arg(stream), text_arg(entity), Some(version)])?;
    Ok(!applied.is_empty())
}

c_function!(idem_advance, pg_finfo_idem_advance, advance);
