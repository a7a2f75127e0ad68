//! The outbox for change data capture (docs/cdc.md), chosen by `idempotency.outbox_delivery`:
//! - `cdc_table`: `idem_outbox_put` writes its row already published. A CDC connector
//!   (Debezium's outbox event router) streams the insert; no publisher takes it; upkeep purges
//!   it like any published row, and its dedupe_key deduplicates until then.
//! - `cdc_message`: no row. A transactional logical-decoding message (prefix
//!   `idempotency.outbox`) is decoded only if the transaction commits, and leaves nothing to
//!   purge; deduplication is the consumer's (`idem_inbox_accept` by `message_id`).
//!
//! Both need `wal_level = logical` (without it the message would vanish unseen) and INSERT on
//! the outbox, as a polled put does. `cdc_message` writes no row for the table's row-level
//! security policies to check, so under them it is refused (0A000): tenants use `cdc_table`.
//!
//! A message's content, keyed id and signature come from `idempotency.cdc_message`
//! (sql/cdc.sql, shared by both editions), which needs the per-database secret only the tables'
//! owner reads; `cdc_hmac` below is its HMAC-SHA256, which the portable edition writes in SQL.

use hmac::{Hmac, Mac};
use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::prelude::*;
use sha2::Sha256;

use crate::base::access;
use crate::base::errors::{self, IdemError, Result};
use crate::base::settings::{self, OutboxDelivery};
use crate::spi::{Conn, Statement, opt_text_arg, text_arg};
use crate::steps::args::{self, c_function};

const TEXT: Oid = pg_sys::TEXTOID;
const JSONB: Oid = pg_sys::JSONBOID;
const TIMESTAMPTZ: Oid = pg_sys::TIMESTAMPTZOID;

/// `cdc_table`: the same row as a polled put, but published at once.
pub(crate) static PUT_PUBLISHED: Statement = Statement {
    sql: "INSERT INTO idempotency.outbox \
          (topic, dedupe_key, payload, headers, available_at, created_at, status, published_at) \
          VALUES ($1, $2, $3, $4, COALESCE($5, pg_catalog.now()), pg_catalog.now(), \
                  'published'::pg_catalog.text, pg_catalog.now()) \
          ON CONFLICT (topic, dedupe_key) DO NOTHING RETURNING id::pg_catalog.int8",
    args: &[TEXT, TEXT, JSONB, JSONB, TIMESTAMPTZ],
};

/// `cdc_message`: the message's WAL position (as a number) is what the put returns. Its
/// content (with its keyed message_id and signature) is made by `idempotency.cdc_message`, a
/// SECURITY DEFINER function of sql/cdc.sql: the secret stays with the tables' owner.
static EMIT: Statement = Statement {
    sql: "SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_logical_emit_message(true, \
            'idempotency.outbox'::pg_catalog.text, idempotency.cdc_message($1, $2, $3, $4)), \
            '0/0'::pg_catalog.pg_lsn)::pg_catalog.int8",
    args: &[TEXT, TEXT, JSONB, JSONB],
};

/// HMAC-SHA256 (RFC 2104) of `message` under `key`: sql/cdc.sql declares it
/// (`idempotency.cdc_hmac`) for its message ids and signatures. The portable edition's SQL one
/// (portable/cdc.sql) must give the same bytes.
#[pg_extern(immutable, strict, parallel_safe, sql = false)]
fn cdc_hmac(key: &[u8], message: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length (a long one is hashed first): this never fails.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

/// The secret (sql/cdc.sql): the oldest row, as the caller may read it (the definer functions
/// of sql/cdc_sign.sql run this as the tables' owner).
static SECRET: Statement = Statement {
    sql: "SELECT s.secret FROM idempotency.cdc_secret AS s ORDER BY s.created_at, s.secret LIMIT 1",
    args: &[],
};

/// `idempotency.cdc_sign(message)`: HMAC-SHA256 of `message` under the secret, read here, so
/// that the secret is never an argument a log could show (auto_explain's parameters, issue 32's
/// review, F5). NULL without a secret. The portable edition's is SQL (portable/cdc.sql).
fn sign(fcinfo: pg_sys::FunctionCallInfo) -> Result<Datum> {
    // SAFETY: called by Postgres as cdc_sign(bytea), STRICT: the argument is not null.
    let message = unsafe { args::bytes(fcinfo, 0) }.unwrap_or_default();
    let key: Option<Vec<u8>> = {
        let conn = Conn::open()?;
        let rows = SECRET.run(&conn, &[])?;
        match if rows.is_empty() {
            None
        } else {
            rows.get(0, 1)?
        } {
            // SAFETY: a bytea datum of the result, copied out before SPI's memory goes.
            Some(d) => unsafe { Vec::<u8>::from_datum(d, false) },
            None => None,
        }
    };
    match key {
        // Made after SPI_finish, in the caller's memory.
        Some(key) => Ok(cdc_hmac(&key, message)
            .into_datum()
            .unwrap_or(Datum::from(0))),
        None => {
            // SAFETY: a live call; NULL is the answer.
            unsafe { (*fcinfo).isnull = true };
            Ok(Datum::from(0))
        }
    }
}

c_function!(cdc_sign_wrapper, pg_finfo_cdc_sign_wrapper, sign);

/// The delivery in force, after checking that a CDC delivery can work here, in this order:
/// INSERT on the outbox, the server decodes logical changes, the message is not one for later
/// (a stream has no "available at"), and for `cdc_message` no row-level security applies.
pub fn delivery(available_at: Option<Datum>) -> Result<OutboxDelivery> {
    let delivery = settings::OUTBOX_DELIVERY.get();
    if delivery == OutboxDelivery::Poll {
        return Ok(delivery);
    }
    let (_, outbox) = access::idempotency_table(c"outbox");
    if outbox != pg_sys::InvalidOid {
        access::require_any_table_privilege(outbox, pg_sys::ACL_INSERT as pg_sys::AclMode)?;
    }
    // SAFETY: reads a server global, set at start-up.
    let logical = unsafe { pg_sys::wal_level } as u32 >= pg_sys::WalLevel::WAL_LEVEL_LOGICAL;
    if !logical {
        return Err(IdemError::new(
            errors::OBJECT_NOT_IN_PREREQUISITE_STATE,
            "idempotency.outbox_delivery streams through logical decoding, but wal_level is not logical",
        )
        .hint("Set wal_level = logical and restart, or set idempotency.outbox_delivery = poll."));
    }
    // SAFETY: the current transaction's start, what now() returns.
    let now = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() };
    if available_at.is_some_and(|at| at.value() as i64 > now) {
        return Err(IdemError::new(
            errors::FEATURE_NOT_SUPPORTED,
            "a message for later (available_at after now()) cannot be streamed",
        )
        .hint("Put it with idempotency.outbox_delivery = poll, or send it when it is due."));
    }
    // No row means nothing for the outbox's policies to check.
    if delivery == OutboxDelivery::CdcMessage && access::row_security_applies(outbox) {
        return Err(IdemError::new(
            errors::FEATURE_NOT_SUPPORTED,
            "idempotency.outbox_delivery = cdc_message cannot apply idempotency.outbox's row-level security policies",
        )
        .hint("Use idempotency.outbox_delivery = cdc_table: its rows are checked by the policies."));
    }
    Ok(delivery)
}

/// Emit the message (after [`delivery`]); its WAL position is returned.
pub fn emit(
    conn: &Conn,
    topic: &[u8],
    dedupe_key: Option<&[u8]>,
    payload: Datum,
    headers: Option<Datum>,
) -> Result<i64> {
    let args = [
        text_arg(topic),
        opt_text_arg(dedupe_key),
        Some(payload),
        headers,
    ];
    Ok(EMIT.run(conn, &args)?.required(0, 1)?.value() as i64)
}
