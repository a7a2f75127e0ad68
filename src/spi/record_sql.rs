//! The SQL form of reading and writing a record: fixed statements over every column of
//! `idempotency.requests`, fully qualified (tables, functions, operators, casts). A write binds
//! the values a `Transition` computed, so SQL computes nothing the direct path does not, and
//! Citus, which rejects STABLE functions of columns in an UPDATE, routes each statement to the
//! one shard of its key.

use crate::base::datum::{datum_bytes, text_datum};
use crate::base::errors::{self, IdemError, Result};
use crate::base::record::{self, NATTS, Record, Status, Values};
use crate::base::store::{Step, Store, Target};
use crate::spi::{
    Arg, Conn, INT4, INTERVAL, JSONB, Rows, Statement, TEXT, TIMESTAMPTZ, int4_arg, opt_text_arg,
    text_arg,
};

/// `WHERE` one key ($1, $2).
macro_rules! by_key {
    () => {
        " WHERE scope OPERATOR(pg_catalog.=) $1 AND key OPERATOR(pg_catalog.=) $2"
    };
}
pub(crate) use by_key;

/// Every column, in [`crate::base::record::COLUMNS`] order (`status` as its label).
macro_rules! all_columns {
    () => {
        "scope::pg_catalog.text, key::pg_catalog.text, request_hash::pg_catalog.text, \
         status::pg_catalog.text, attempt::pg_catalog.int4, response::pg_catalog.jsonb, \
         recovery_point::pg_catalog.text, failure_code::pg_catalog.text, \
         failure_message::pg_catalog.text, claimed_by::pg_catalog.text, \
         claimed_at::pg_catalog.timestamptz, locked_until::pg_catalog.timestamptz, \
         lease::pg_catalog.interval, retention::pg_catalog.interval, \
         created_at::pg_catalog.timestamptz, updated_at::pg_catalog.timestamptz, \
         expires_at::pg_catalog.timestamptz"
    };
}

/// The parameter types of a whole record ($1..$17; the status is passed as its label, and
/// the statements write it as a literal, since its type lives in the extension's schema).
pub const RECORD_ARGS: [pgrx::pg_sys::Oid; NATTS] = [
    TEXT,
    TEXT,
    TEXT,
    TEXT,
    INT4,
    JSONB,
    TEXT,
    TEXT,
    TEXT,
    TEXT,
    TIMESTAMPTZ,
    TIMESTAMPTZ,
    INTERVAL,
    INTERVAL,
    TIMESTAMPTZ,
    TIMESTAMPTZ,
    TIMESTAMPTZ,
];

static FIND: Statement = Statement {
    sql: concat!(
        "SELECT ",
        all_columns!(),
        " FROM idempotency.requests",
        by_key!()
    ),
    args: &[TEXT, TEXT],
};

/// For a claim: the row, locked, unless someone else is changing it.
static LOCK_FOR_CLAIM: Statement = Statement {
    sql: concat!(
        "SELECT ",
        all_columns!(),
        " FROM idempotency.requests",
        by_key!(),
        " FOR UPDATE SKIP LOCKED"
    ),
    args: &[TEXT, TEXT],
};

/// For a complete / fail / checkpoint: the row, locked, if it is the current attempt
/// ([`Record::is_current`]); re-checked on the newest version, as UPDATE would.
static LOCK_CURRENT: Statement = Statement {
    sql: concat!(
        "SELECT ",
        all_columns!(),
        " FROM idempotency.requests",
        by_key!(),
        " AND status OPERATOR(pg_catalog.=) 'processing' \
         AND ($3::pg_catalog.int4 IS NULL OR attempt OPERATOR(pg_catalog.=) $3) FOR UPDATE"
    ),
    args: &[TEXT, TEXT, INT4],
};

/// A new record into `$table` names only the columns a new claim sets, so that a default the
/// table's owner added to another column applies, as for any INSERT ($4 and $6..$9 are not
/// used). `$conflict` is the table's `(scope, key)`; a generation's is bare, so that the
/// insert needs INSERT there and nothing else (sql/layout.sql refuses the other unique
/// indexes it would also cover).
macro_rules! insert_into {
    ($table:literal, $conflict:literal) => {
        Statement {
            sql: concat!(
                "INSERT INTO ",
                $table,
                " (scope, key, request_hash, status, attempt, claimed_by, claimed_at, \
                 locked_until, lease, retention, created_at, updated_at, expires_at) VALUES \
                 ($1, $2, $3, 'processing', $5, $10, $11, $12, $13, $14, $15, $16, $17) \
                 ON CONFLICT ",
                $conflict,
                " DO NOTHING"
            ),
            args: &RECORD_ARGS,
        }
    };
}

/// By generation of the generations layout (sql/layout.sql); 0 is the table itself: the flat
/// layout's one table.
static INSERT: [Statement; 4] = [
    insert_into!("idempotency.requests", "(scope, key)"),
    insert_into!("idempotency.requests_g1", ""),
    insert_into!("idempotency.requests_g2", ""),
    insert_into!("idempotency.requests_g3", ""),
];

/// The generation a new record goes into, read under the key's lock (sql/layout.sql).
static CLAIM_GENERATION: Statement = Statement {
    sql: "SELECT idempotency.layout_claim_generation()",
    args: &[],
};

/// Whether `idempotency.requests` is in the generations layout: `idempotency.layout` exists
/// only then (told from the catalog as it is now, not as a snapshot saw it).
pub fn generations_layout() -> bool {
    // SAFETY: catalog lookups by name.
    unsafe {
        let nsp = pgrx::pg_sys::get_namespace_oid(c"idempotency".as_ptr(), true);
        nsp != pgrx::pg_sys::InvalidOid
            && pgrx::pg_sys::get_relname_relid(c"layout".as_ptr(), nsp) != pgrx::pg_sys::InvalidOid
    }
}

/// The generation a new record of a claim goes into: 0 in the flat layout.
fn claim_generation(conn: &Conn) -> Result<usize> {
    if !generations_layout() {
        return Ok(0);
    }
    let rows = CLAIM_GENERATION.run(conn, &[])?;
    // An int2; NULL only without idempotency.layout, which a switch back to flat cannot drop
    // while this claim holds its lock on the table: taken as the flat layout all the same.
    let generation = rows.get(0, 1)?.map(|d| d.value() as i16);
    match generation {
        None => Ok(0),
        Some(g @ 0..=3) => Ok(g as usize),
        Some(g) => Err(IdemError::new(
            errors::INTERNAL_ERROR,
            format!("idempotency.layout names generation {g}"),
        )),
    }
}

/// Every column but the key, for a row the caller has locked; one statement per status.
macro_rules! update_to {
    ($status:literal) => {
        Statement {
            sql: concat!(
                "UPDATE idempotency.requests SET request_hash = $3, status = '",
                $status,
                "', attempt = $5, response = $6, recovery_point = $7, failure_code = $8, \
                 failure_message = $9, claimed_by = $10, claimed_at = $11, locked_until = $12, \
                 lease = $13, retention = $14, created_at = $15, updated_at = $16, \
                 expires_at = $17",
                by_key!()
            ),
            args: &RECORD_ARGS,
        }
    };
}
static UPDATE: [Statement; 4] = [
    update_to!("processing"),
    update_to!("succeeded"),
    update_to!("failed_retryable"),
    update_to!("failed_final"),
];

/// The record in row `row` of a statement that selected [`all_columns!`].
fn read(rows: &Rows<'_>, row: usize) -> Result<Option<Record>> {
    if rows.is_empty() {
        return Ok(None);
    }
    let mut values: Values = [None; NATTS];
    for (i, value) in values.iter_mut().enumerate() {
        *value = rows.get(row, i + 1)?;
    }
    // SAFETY: the status column is selected as text.
    let record = record::from_values(&values, |d| record::parse_status(unsafe { datum_bytes(d) }))?;
    Ok(Some(record))
}

fn key_args(scope: &[u8], key: &[u8]) -> [Arg; 2] {
    [text_arg(scope), text_arg(key)]
}

fn record_args(record: &Record) -> Values {
    record::to_values(record, |status| text_datum(status.label().to_bytes()))
}

/// The record of (scope, key) as a READ COMMITTED statement sees it now.
pub fn find(conn: &Conn, scope: &[u8], key: &[u8]) -> Result<Option<Record>> {
    read(&FIND.run(conn, &key_args(scope, key))?, 0)
}

/// The record of (scope, key), locked; `None` also when someone else holds its row lock.
pub fn lock_for_claim(conn: &Conn, scope: &[u8], key: &[u8]) -> Result<Option<Record>> {
    read(&LOCK_FOR_CLAIM.run(conn, &key_args(scope, key))?, 0)
}

/// The record of (scope, key), locked, if it is the current attempt (`attempt`, if given).
pub fn lock_current(
    conn: &Conn,
    scope: &[u8],
    key: &[u8],
    attempt: Option<i32>,
) -> Result<Option<Record>> {
    let args = [text_arg(scope), text_arg(key), int4_arg(attempt)];
    read(&LOCK_CURRENT.run(conn, &args)?, 0)
}

/// Insert a new (processing) record; `false` if its key has a record already.
pub fn insert(conn: &Conn, record: &Record) -> Result<bool> {
    let unnamed = [record.response, record.recovery_point, record.failure_code];
    if record.status != Status::Processing
        || unnamed
            .iter()
            .chain([&record.failure_message])
            .any(Option::is_some)
    {
        return Err(IdemError::new(
            errors::INTERNAL_ERROR,
            "a new record is processing, with no outcome yet",
        ));
    }
    let statement = &INSERT[claim_generation(conn)?];
    Ok(!statement.run(conn, &record_args(record))?.is_empty())
}

/// sql/claim.sql's probe: raises the policy's 42501 for a new row of the key, or returns.
static POLICY_PROBE: Statement = Statement {
    sql: "SELECT idempotency.claim_policy_probe($1, $2, $3, $4)",
    args: &[TEXT, TEXT, TEXT, TEXT],
};

/// Under row-level security, ask the table's policies about a new record of (scope, key) as
/// the caller would insert it: Postgres' own 42501 when they refuse. A claim asks this before
/// another transaction's hold on the key may answer, so that the answer for a key another
/// tenant is inserting is the answer for any key the caller may not write.
pub fn check_insert_policy(
    conn: &Conn,
    scope: &[u8],
    key: &[u8],
    hash: &[u8],
    claimed_by: Option<&[u8]>,
) -> Result<()> {
    if !crate::base::access::row_security_applies_to_requests() {
        return Ok(());
    }
    let args = [
        text_arg(scope),
        text_arg(key),
        text_arg(hash),
        opt_text_arg(claimed_by),
    ];
    POLICY_PROBE.run(conn, &args)?;
    Ok(())
}

/// Write `record` over the stored one of its key, which the caller has locked.
pub fn update(conn: &Conn, record: &Record) -> Result<bool> {
    let statement = &UPDATE[record.status.index()];
    Ok(!statement.run(conn, &record_args(record))?.is_empty())
}

/// The SQL path as a [`Store`]: each step one of the statements above, on `conn`.
pub struct Sql<'c>(pub &'c Conn);

impl Store for Sql<'_> {
    fn direct(&self) -> bool {
        false
    }

    fn find(&mut self, scope: &[u8], key: &[u8]) -> Step<Option<Record>> {
        Ok(find(self.0, scope, key)?)
    }

    fn lock_for_claim(&mut self, scope: &[u8], key: &[u8]) -> Step<Option<Record>> {
        let locked = lock_for_claim(self.0, scope, key)?;
        if locked.is_some() {
            fail_point!("claim.sql");
        }
        Ok(locked)
    }

    fn lock_current(&mut self, target: Target<'_>, _txn: i64) -> Step<Option<Record>> {
        // The statement's WHERE restates `Record::is_current`, so that it locks no other row;
        // the crate's answer on the row it returns decides. `txn` is the direct path's concern.
        let locked = lock_current(self.0, target.scope, target.key, target.attempt)?
            .filter(|r| r.is_current(target.attempt));
        if locked.is_some() {
            fail_point!("change.sql");
        }
        Ok(locked)
    }

    fn prepare_insert(&mut self) -> Step<()> {
        Ok(())
    }

    fn check_insert_policy(
        &mut self,
        scope: &[u8],
        key: &[u8],
        hash: &[u8],
        claimed_by: Option<&[u8]>,
    ) -> Step<()> {
        Ok(check_insert_policy(self.0, scope, key, hash, claimed_by)?)
    }

    fn insert(
        &mut self,
        scope: &[u8],
        key: &[u8],
        new: &mut dyn FnMut() -> Result<Record>,
    ) -> Step<core::result::Result<Record, Option<Record>>> {
        let new = new()?;
        if insert(self.0, &new)? {
            return Ok(Ok(new));
        }
        // Inserted and committed by someone since our read.
        Ok(Err(find(self.0, scope, key)?))
    }

    fn update(&mut self, new: &Record) -> Step<bool> {
        Ok(update(self.0, new)?)
    }
}
