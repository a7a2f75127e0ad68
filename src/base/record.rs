//! The one description of an `idempotency.requests` record: its columns (as in
//! sql/bootstrap.sql, which the #[pg_test] `record::columns_match_the_catalog` compares with the
//! catalog), and [`Record`], the row every reader and writer uses: the protocol's record
//! (`idem_protocol`, which also holds `Status` and `Outcome`) over datums ([`Pg`]).
//!
//! A record's values are datums: pass-by-reference columns point wherever they were read
//! (a scanned buffer, SPI memory or the caller's arguments) until a result row copies them.

use core::ffi::CStr;

use pgrx::pg_sys::{self, Datum, Oid};

use crate::base::errors::{self, IdemError, Result};

pub use idem_protocol::{Outcome, Status};

/// The status whose label is `label` (SQL reads `status::text`).
pub fn parse_status(label: &[u8]) -> Result<Status> {
    Status::parse(label)
        .ok_or_else(|| IdemError::new(errors::INTERNAL_ERROR, "unknown idem_status label"))
}

/// The status whose label OID is `oid` in `oids` (in [`Status::ALL`] order).
pub fn status_of_oid(oid: Oid, oids: &[Oid; 4]) -> Result<Status> {
    oids.iter()
        .position(|o| *o == oid)
        .map(|i| Status::ALL[i])
        .ok_or_else(|| IdemError::new(errors::INTERNAL_ERROR, "unknown idem_status value"))
}

/// A column's type: built-in, or the extension's `idem_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Text,
    Status,
    Int4,
    Jsonb,
    Timestamptz,
    Interval,
}

impl Ty {
    pub fn oid(self, status_type: Oid) -> Oid {
        match self {
            Ty::Text => pg_sys::TEXTOID,
            Ty::Status => status_type,
            Ty::Int4 => pg_sys::INT4OID,
            Ty::Jsonb => pg_sys::JSONBOID,
            Ty::Timestamptz => pg_sys::TIMESTAMPTZOID,
            Ty::Interval => pg_sys::INTERVALOID,
        }
    }
}

/// The columns of sql/bootstrap.sql, in order: name, type, NOT NULL.
pub const COLUMNS: [(&CStr, Ty, bool); 17] = [
    (c"scope", Ty::Text, true),
    (c"key", Ty::Text, true),
    (c"request_hash", Ty::Text, true),
    (c"status", Ty::Status, true),
    (c"attempt", Ty::Int4, true),
    (c"response", Ty::Jsonb, false),
    (c"recovery_point", Ty::Text, false),
    (c"failure_code", Ty::Text, false),
    (c"failure_message", Ty::Text, false),
    (c"claimed_by", Ty::Text, false),
    (c"claimed_at", Ty::Timestamptz, true),
    (c"locked_until", Ty::Timestamptz, false),
    (c"lease", Ty::Interval, true),
    (c"retention", Ty::Interval, true),
    (c"created_at", Ty::Timestamptz, true),
    (c"updated_at", Ty::Timestamptz, true),
    (c"expires_at", Ty::Timestamptz, true),
];

pub const NATTS: usize = COLUMNS.len();

/// Column positions (0-based) in [`COLUMNS`].
pub mod col {
    pub const SCOPE: usize = 0;
    pub const KEY: usize = 1;
    pub const REQUEST_HASH: usize = 2;
    pub const STATUS: usize = 3;
    pub const ATTEMPT: usize = 4;
    pub const RESPONSE: usize = 5;
    pub const RECOVERY_POINT: usize = 6;
    pub const FAILURE_CODE: usize = 7;
    pub const FAILURE_MESSAGE: usize = 8;
    pub const CLAIMED_BY: usize = 9;
    pub const CLAIMED_AT: usize = 10;
    pub const LOCKED_UNTIL: usize = 11;
    pub const LEASE: usize = 12;
    pub const RETENTION: usize = 13;
    pub const CREATED_AT: usize = 14;
    pub const UPDATED_AT: usize = 15;
    pub const EXPIRES_AT: usize = 16;
}

/// A row as written or read: one value per column, `None` for NULL.
pub type Values = [Option<Datum>; NATTS];

/// How the extension holds a record's values for the protocol (`idem_protocol::Repr`): as
/// datums, where they were read, so that reading a record copies nothing.
#[derive(Clone, Copy, Debug)]
pub struct Pg;

impl idem_protocol::Repr for Pg {
    type Text = Datum;
    type Json = Datum;
    type Interval = Datum;
    type Error = IdemError;

    fn add(at: i64, by: Datum) -> Result<i64> {
        add_interval(at, by)
    }
}

/// One record. Timestamps are `timestamptz` microseconds; the rest are datums.
pub type Record = idem_protocol::Record<Pg>;

/// `timestamp + interval`, as SQL's `+` computes it (in the session's time zone).
pub fn add_interval(timestamp: i64, interval: Datum) -> Result<i64> {
    // SAFETY: the built-in timestamptz_pl_interval on a timestamptz and an interval datum.
    unsafe {
        pgrx::direct_function_call::<i64>(
            pg_sys::timestamptz_pl_interval,
            &[Some(Datum::from(timestamp)), Some(interval)],
        )
    }
    .ok_or_else(|| IdemError::new(errors::INTERNAL_ERROR, "timestamp + interval is null"))
}

fn null_column(index: usize) -> IdemError {
    IdemError::new(
        errors::INTERNAL_ERROR,
        format!("column {} is null", COLUMNS[index].0.to_string_lossy()),
    )
}

/// The record in `values`; `status` reads the status column (an enum OID directly, its label
/// through SQL).
pub fn from_values(
    values: &Values,
    status: impl FnOnce(Datum) -> Result<Status>,
) -> Result<Record> {
    let required = |i: usize| values[i].ok_or_else(|| null_column(i));
    let time = |i: usize| required(i).map(|d| d.value() as i64);
    Ok(Record {
        scope: required(col::SCOPE)?,
        key: required(col::KEY)?,
        request_hash: required(col::REQUEST_HASH)?,
        status: status(required(col::STATUS)?)?,
        attempt: required(col::ATTEMPT)?.value() as i32,
        response: values[col::RESPONSE],
        recovery_point: values[col::RECOVERY_POINT],
        failure_code: values[col::FAILURE_CODE],
        failure_message: values[col::FAILURE_MESSAGE],
        claimed_by: values[col::CLAIMED_BY],
        claimed_at: time(col::CLAIMED_AT)?,
        locked_until: values[col::LOCKED_UNTIL].map(|d| d.value() as i64),
        lease: required(col::LEASE)?,
        retention: required(col::RETENTION)?,
        created_at: time(col::CREATED_AT)?,
        updated_at: time(col::UPDATED_AT)?,
        expires_at: time(col::EXPIRES_AT)?,
    })
}

/// The record as column values, with `status` given as the datum `status_datum` makes.
pub fn to_values(r: &Record, status_datum: impl FnOnce(Status) -> Datum) -> Values {
    let mut values: Values = [None; NATTS];
    values[col::SCOPE] = Some(r.scope);
    values[col::KEY] = Some(r.key);
    values[col::REQUEST_HASH] = Some(r.request_hash);
    values[col::STATUS] = Some(status_datum(r.status));
    values[col::ATTEMPT] = Some(Datum::from(r.attempt));
    values[col::RESPONSE] = r.response;
    values[col::RECOVERY_POINT] = r.recovery_point;
    values[col::FAILURE_CODE] = r.failure_code;
    values[col::FAILURE_MESSAGE] = r.failure_message;
    values[col::CLAIMED_BY] = r.claimed_by;
    values[col::CLAIMED_AT] = Some(Datum::from(r.claimed_at));
    values[col::LOCKED_UNTIL] = r.locked_until.map(Datum::from);
    values[col::LEASE] = Some(r.lease);
    values[col::RETENTION] = Some(r.retention);
    values[col::CREATED_AT] = Some(Datum::from(r.created_at));
    values[col::UPDATED_AT] = Some(Datum::from(r.updated_at));
    values[col::EXPIRES_AT] = Some(Datum::from(r.expires_at));
    values
}

/// Is `hash` the stored request's hash?
pub fn hash_matches(record: &Record, hash: &[u8]) -> bool {
    // SAFETY: request_hash is a text datum.
    unsafe { crate::base::datum::datum_bytes(record.request_hash) == hash }
}

/// The OID of `label` in the enum type `enum_type`.
pub fn enum_label_oid(enum_type: Oid, label: &CStr) -> Result<Oid> {
    // SAFETY: a syscache lookup by (enum type, label); the tuple is released before returning.
    unsafe {
        let tuple = pg_sys::SearchSysCache(
            pg_sys::SysCacheIdentifier::ENUMTYPOIDNAME as _,
            Datum::from(enum_type),
            Datum::from(label.as_ptr()),
            Datum::from(0),
            Datum::from(0),
        );
        if tuple.is_null() {
            return Err(IdemError::new(
                errors::INTERNAL_ERROR,
                format!("enum type {enum_type:?} has no label {label:?}"),
            ));
        }
        let oid = (*(pg_sys::GETSTRUCT(tuple) as pg_sys::Form_pg_enum)).oid;
        pg_sys::ReleaseSysCache(tuple);
        Ok(oid)
    }
}
