//! The one description of an `idempotency.requests` record: its columns (as in
//! sql/bootstrap.sql, which the #[pg_test] `record::columns_match_the_catalog` compares with the
//! catalog), `Status`, `Outcome`, and [`Record`], the row every reader and writer uses.
//!
//! A record's values are datums: pass-by-reference columns point wherever they were read
//! (a scanned buffer, SPI memory or the caller's arguments) until a result row copies them.

use core::ffi::CStr;

use pgrx::pg_sys::{self, Datum, Oid};

use crate::errors::{self, IdemError, Result};

/// `idem_status`, in the enum's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Processing,
    Succeeded,
    FailedRetryable,
    FailedFinal,
}

impl Status {
    pub const ALL: [Status; 4] = [
        Status::Processing,
        Status::Succeeded,
        Status::FailedRetryable,
        Status::FailedFinal,
    ];

    pub fn label(self) -> &'static CStr {
        match self {
            Status::Processing => c"processing",
            Status::Succeeded => c"succeeded",
            Status::FailedRetryable => c"failed_retryable",
            Status::FailedFinal => c"failed_final",
        }
    }

    /// Position in `idem_status` (and in `direct::Catalog::statuses`).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The status whose label is `label` (SQL reads `status::text`).
    pub fn parse(label: &[u8]) -> Result<Self> {
        Status::ALL
            .into_iter()
            .find(|s| s.label().to_bytes() == label)
            .ok_or_else(|| IdemError::new(errors::INTERNAL_ERROR, "unknown idem_status label"))
    }

    /// The status whose label OID is `oid` in `oids` (in [`Status::ALL`] order).
    pub fn of_oid(oid: Oid, oids: &[Oid; 4]) -> Result<Self> {
        oids.iter()
            .position(|o| *o == oid)
            .map(|i| Status::ALL[i])
            .ok_or_else(|| IdemError::new(errors::INTERNAL_ERROR, "unknown idem_status value"))
    }
}

/// `idem_outcome`, in the enum's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    NewClaim,
    ReplaySuccess,
    ProcessingActive,
    ProcessingStale,
    RetryableFailure,
    FinalFailure,
}

impl Outcome {
    pub const ALL: [Outcome; 6] = [
        Outcome::NewClaim,
        Outcome::ReplaySuccess,
        Outcome::ProcessingActive,
        Outcome::ProcessingStale,
        Outcome::RetryableFailure,
        Outcome::FinalFailure,
    ];

    pub fn label(self) -> &'static CStr {
        match self {
            Outcome::NewClaim => c"new_claim",
            Outcome::ReplaySuccess => c"replay_success",
            Outcome::ProcessingActive => c"processing_active",
            Outcome::ProcessingStale => c"processing_stale",
            Outcome::RetryableFailure => c"retryable_failure",
            Outcome::FinalFailure => c"final_failure",
        }
    }
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

/// One record. Timestamps are `timestamptz` microseconds; the rest are datums.
#[derive(Clone, Copy, Debug)]
pub struct Record {
    pub scope: Datum,
    pub key: Datum,
    pub request_hash: Datum,
    pub status: Status,
    pub attempt: i32,
    pub response: Option<Datum>,
    pub recovery_point: Option<Datum>,
    pub failure_code: Option<Datum>,
    pub failure_message: Option<Datum>,
    pub claimed_by: Option<Datum>,
    pub claimed_at: i64,
    pub locked_until: Option<i64>,
    pub lease: Datum,
    pub retention: Datum,
    pub created_at: i64,
    pub updated_at: i64,
    pub expires_at: i64,
}

fn null_column(index: usize) -> IdemError {
    IdemError::new(
        errors::INTERNAL_ERROR,
        format!("column {} is null", COLUMNS[index].0.to_string_lossy()),
    )
}

impl Record {
    /// The record in `values`; `status` reads the status column (an enum OID directly, its
    /// label through SQL).
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
    pub fn to_values(self, status_datum: impl FnOnce(Status) -> Datum) -> Values {
        let mut values: Values = [None; NATTS];
        values[col::SCOPE] = Some(self.scope);
        values[col::KEY] = Some(self.key);
        values[col::REQUEST_HASH] = Some(self.request_hash);
        values[col::STATUS] = Some(status_datum(self.status));
        values[col::ATTEMPT] = Some(Datum::from(self.attempt));
        values[col::RESPONSE] = self.response;
        values[col::RECOVERY_POINT] = self.recovery_point;
        values[col::FAILURE_CODE] = self.failure_code;
        values[col::FAILURE_MESSAGE] = self.failure_message;
        values[col::CLAIMED_BY] = self.claimed_by;
        values[col::CLAIMED_AT] = Some(Datum::from(self.claimed_at));
        values[col::LOCKED_UNTIL] = self.locked_until.map(Datum::from);
        values[col::LEASE] = Some(self.lease);
        values[col::RETENTION] = Some(self.retention);
        values[col::CREATED_AT] = Some(Datum::from(self.created_at));
        values[col::UPDATED_AT] = Some(Datum::from(self.updated_at));
        values[col::EXPIRES_AT] = Some(Datum::from(self.expires_at));
        values
    }

    /// Is `hash` the stored request's hash?
    pub fn hash_matches(&self, hash: &[u8]) -> bool {
        // SAFETY: request_hash is a text datum.
        unsafe { crate::datum::datum_bytes(self.request_hash) == hash }
    }

    /// Is this the attempt a complete / fail / checkpoint may change: processing, and the
    /// caller's `attempt` if given (fencing)?
    pub fn is_current(&self, attempt: Option<i32>) -> bool {
        self.status == Status::Processing && attempt.is_none_or(|given| given == self.attempt)
    }
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
