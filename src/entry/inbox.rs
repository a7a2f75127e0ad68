//! The inbox: `idem_inbox_accept` (has this consumer seen this message?) and
//! `idem_inbox_purge`.
//!
//! A delivery is a plain `INSERT ... ON CONFLICT DO NOTHING`: a new message costs one
//! statement. A second delivery of a message whose first delivery is not committed yet waits
//! for that transaction (the unique index makes it): then it is a duplicate (`false`) if the
//! first committed, or the first delivery (`true`) if it rolled back. A row past `expires_at`
//! counts as absent, exactly as if it had been purged.

use pgrx::pg_sys::{self, Datum};

use crate::base::datum::datum_bytes;
use crate::base::errors::{self, IdemError, Result};
use crate::spi::text_arg;
use crate::spi::{Conn, Statement};
use crate::steps::args::{self, Signature, c_function};
use crate::steps::input;

const TEXT: pg_sys::Oid = pg_sys::TEXTOID;
const INTERVAL: pg_sys::Oid = pg_sys::INTERVALOID;
const INT4: pg_sys::Oid = pg_sys::INT4OID;

macro_rules! by_message {
    () => {
        " WHERE consumer OPERATOR(pg_catalog.=) $1 AND message_id OPERATOR(pg_catalog.=) $2"
    };
}

static INSERT: Statement = Statement {
    sql: "INSERT INTO idempotency.inbox (consumer, message_id, message_hash, processed_at, expires_at) \
          VALUES ($1, $2, $3, pg_catalog.now(), pg_catalog.now() OPERATOR(pg_catalog.+) $4) \
          ON CONFLICT (consumer, message_id) DO NOTHING RETURNING true",
    args: &[TEXT, TEXT, TEXT, INTERVAL],
};

static LOOKUP: Statement = Statement {
    sql: concat!(
        "SELECT message_hash::pg_catalog.text, expires_at OPERATOR(pg_catalog.<) pg_catalog.now() \
         FROM idempotency.inbox",
        by_message!()
    ),
    args: &[TEXT, TEXT],
};

/// Accept a message again whose row expired: as if the row had been purged.
static RENEW: Statement = Statement {
    sql: concat!(
        "UPDATE idempotency.inbox SET message_hash = $3, processed_at = pg_catalog.now(), \
         expires_at = pg_catalog.now() OPERATOR(pg_catalog.+) $4",
        by_message!(),
        " AND expires_at OPERATOR(pg_catalog.<) pg_catalog.now() RETURNING true"
    ),
    args: &[TEXT, TEXT, TEXT, INTERVAL],
};

static PURGE: Statement = Statement {
    sql: "WITH doomed AS (SELECT consumer, message_id FROM idempotency.inbox \
            WHERE expires_at OPERATOR(pg_catalog.<) pg_catalog.now() \
            ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED) \
          DELETE FROM idempotency.inbox AS i USING doomed \
          WHERE i.consumer OPERATOR(pg_catalog.=) doomed.consumer \
            AND i.message_id OPERATOR(pg_catalog.=) doomed.message_id",
    args: &[INT4],
};

fn hash_mismatch(consumer: &[u8], message_id: &[u8], stored: &[u8], given: &[u8]) -> IdemError {
    IdemError::new(
        errors::INBOX_HASH_MISMATCH,
        format!(
            "message {:?} of consumer {:?} was delivered before with different content",
            input::lossy(message_id),
            input::lossy(consumer)
        ),
    )
    .detail(format!(
        "Stored message hash: {}. This delivery's hash: {}.",
        input::lossy(stored),
        input::lossy(given)
    ))
    .hint("A message id must name one message: give changed content a new message id.")
}

/// `idem_inbox_accept`'s arguments by position (sql/inbox.sql).
#[cfg_attr(not(feature = "pg_test"), allow(dead_code))]
pub(crate) const ACCEPT_ARGS: Signature = Signature {
    name: "idem_inbox_accept",
    args: &["text", "text", "text", "interval"],
};

fn accept(fcinfo: pg_sys::FunctionCallInfo) -> Result<bool> {
    // SAFETY: called by Postgres as idem_inbox_accept(text, text, text, interval).
    let (consumer, message_id, hash, retention) = unsafe {
        (
            input::name("consumer", errors::INVALID_SCOPE, args::bytes(fcinfo, 0))?,
            input::name("message_id", errors::INVALID_KEY, args::bytes(fcinfo, 1))?,
            input::name(
                "message_hash",
                errors::INVALID_REQUEST_HASH,
                args::bytes(fcinfo, 2),
            )?,
            input::positive_interval("retention", args::interval(fcinfo, 3))?,
        )
    };
    let row = [
        text_arg(consumer),
        text_arg(message_id),
        text_arg(hash),
        Some(retention),
    ];
    let key = [text_arg(consumer), text_arg(message_id)];
    let conn = Conn::open_for(c"inbox")?;
    // Each pass either answers or saw the row vanish (purged) under it; three are plenty.
    for _ in 0..3 {
        if !INSERT.run(&conn, &row)?.is_empty() {
            return Ok(true);
        }
        let found = LOOKUP.run(&conn, &key)?;
        if found.is_empty() {
            continue;
        }
        let expired = found.required(0, 2)?.value() != 0;
        if expired {
            if !RENEW.run(&conn, &row)?.is_empty() {
                return Ok(true);
            }
            continue;
        }
        // SAFETY: column 1 is text.
        let stored = unsafe { datum_bytes(found.required(0, 1)?) };
        if stored == hash {
            return Ok(false);
        }
        return Err(hash_mismatch(consumer, message_id, stored, hash));
    }
    Err(IdemError::new(
        errors::INTERNAL_ERROR,
        "the inbox row kept changing under idem_inbox_accept",
    ))
}

c_function!(idem_inbox_accept, pg_finfo_idem_inbox_accept, accept);

/// Delete at most `batch` inbox rows past their retention.
pub fn purge_batch(conn: &Conn, batch: i32) -> Result<i64> {
    Ok(PURGE.run(conn, &[Some(Datum::from(batch))])?.len() as i64)
}

/// `idem_inbox_purge`'s arguments by position (sql/inbox.sql).
#[cfg_attr(not(feature = "pg_test"), allow(dead_code))]
pub(crate) const PURGE_ARGS: Signature = Signature {
    name: "idem_inbox_purge",
    args: &["int4"],
};

fn purge(fcinfo: pg_sys::FunctionCallInfo) -> Result<i64> {
    // SAFETY: called by Postgres as idem_inbox_purge(int4).
    let batch = input::batch("batch", unsafe { args::int4(fcinfo, 0) })?;
    purge_batch(&Conn::open_for(c"inbox")?, batch)
}

c_function!(idem_inbox_purge, pg_finfo_idem_inbox_purge, purge);
