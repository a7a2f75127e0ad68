//! The SQL path: fixed statements with kept plans, their parameters and result rows;
//! `record_sql`, the record's statements and the seam's SQL implementation.
//!
//! Why not pgrx's `SpiClient`: its `update` assigns a transaction id up front, which would
//! make every replay a writing transaction, and its `select` reuses the caller's snapshot.
//! Here every statement runs read-write (`read_only = false`): under READ COMMITTED each one
//! takes a fresh snapshot, and no transaction id is assigned unless a row is written.
//!
//! Each statement is a `static Statement`; its plan is prepared on first use in a backend and
//! kept with `SPI_keepplan`. Postgres' plan cache re-analyses a kept plan when what it depends
//! on changes (e.g. the extension is dropped and created again), so a plan never goes stale.
//! Statements are fixed text: values are always bound as parameters.

pub mod record_sql;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CString;
use std::marker::PhantomData;

use pgrx::pg_sys::{self, Datum, Oid};

use crate::base::datum::text_datum;
use crate::base::errors::{self, IdemError, Result};

/// A fixed SQL statement and the types of its parameters.
pub struct Statement {
    pub sql: &'static str,
    pub args: &'static [Oid],
}

/// A parameter value; `None` is SQL NULL.
pub type Arg = Option<Datum>;

// Parameter types.
pub const TEXT: Oid = pg_sys::TEXTOID;
pub const INTERVAL: Oid = pg_sys::INTERVALOID;
pub const JSONB: Oid = pg_sys::JSONBOID;
pub const INT4: Oid = pg_sys::INT4OID;
pub const TIMESTAMPTZ: Oid = pg_sys::TIMESTAMPTZOID;

pub fn text_arg(bytes: &[u8]) -> Arg {
    Some(text_datum(bytes))
}

pub fn opt_text_arg(bytes: Option<&[u8]>) -> Arg {
    bytes.map(text_datum)
}

pub fn int4_arg(value: Option<i32>) -> Arg {
    value.map(Datum::from)
}

/// An open SPI connection; closed (`SPI_finish`) when dropped. Values read from [`Rows`]
/// live in SPI memory and are gone after that, unless copied out first.
pub struct Conn {
    _not_send: PhantomData<*mut ()>,
}

impl Conn {
    /// For statements on `idempotency.<table>`: the caller's USAGE on the schema and some
    /// privilege on the table are checked first, before any statement locks it
    /// (`access::require_table_access`).
    pub fn open_for(table: &core::ffi::CStr) -> Result<Conn> {
        crate::base::access::require_table_access(table)?;
        Conn::connect()
    }

    /// Every statement names schema `idempotency`: its USAGE is checked here, as name lookup
    /// would, because a kept plan is not looked up again for the next role (`access.rs`).
    pub fn open() -> Result<Conn> {
        crate::base::access::require_idempotency_usage()?;
        Conn::connect()
    }

    fn connect() -> Result<Conn> {
        // SAFETY: paired with SPI_finish in Drop.
        let code = unsafe { pg_sys::SPI_connect() };
        if code != pg_sys::SPI_OK_CONNECT as i32 {
            return Err(spi_error("SPI_connect", code));
        }
        Ok(Conn {
            _not_send: PhantomData,
        })
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The transaction is aborting: AtEOXact_SPI closes the connection.
            return;
        }
        // SAFETY: we connected in `open`. An error here would be a bug in SPI bookkeeping,
        // which Postgres reports itself at transaction end.
        unsafe {
            pg_sys::SPI_finish();
        }
    }
}

/// An SPI connection opened on first use (or given), closed when dropped.
#[derive(Default)]
pub struct LazyConn(Option<Conn>);

impl LazyConn {
    /// The connection, opened with `open` if there is none yet.
    pub fn get_with(&mut self, open: fn() -> Result<Conn>) -> Result<&Conn> {
        if self.0.is_none() {
            self.0 = Some(open()?);
        }
        self.0
            .as_ref()
            .ok_or_else(|| IdemError::new(errors::INTERNAL_ERROR, "no SPI connection"))
    }
}

fn spi_error(what: &str, code: i32) -> IdemError {
    IdemError::new(
        errors::INTERNAL_ERROR,
        format!("{what} failed with SPI code {code}"),
    )
}

/// The text of every statement prepared in this backend, for the search_path test.
#[cfg(any(test, feature = "pg_test"))]
pub fn prepared_statements() -> Vec<&'static str> {
    PREPARED.with(|p| p.borrow().clone())
}

thread_local! {
    #[cfg(any(test, feature = "pg_test"))]
    static PREPARED: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
    static KEPT: RefCell<HashMap<usize, pg_sys::SPIPlanPtr>> = RefCell::new(HashMap::new());
}

impl Statement {
    fn plan(&'static self, _conn: &Conn) -> Result<pg_sys::SPIPlanPtr> {
        let id = self as *const Statement as usize;
        if let Some(plan) = KEPT.with(|kept| kept.borrow().get(&id).copied()) {
            return Ok(plan);
        }
        let sql = CString::new(self.sql)
            .map_err(|_| IdemError::new(errors::INTERNAL_ERROR, "statement text contains NUL"))?;
        let mut types = self.args.to_vec();
        // SAFETY: a connected SPI; the plan is kept (moved out of SPI memory) before use.
        let plan =
            unsafe { pg_sys::SPI_prepare(sql.as_ptr(), types.len() as i32, types.as_mut_ptr()) };
        if plan.is_null() {
            // SAFETY: reads SPI's result code after SPI_prepare.
            let code = unsafe { pg_sys::SPI_result };
            return Err(spi_error("SPI_prepare", code));
        }
        // SAFETY: `plan` came from SPI_prepare just now.
        let code = unsafe { pg_sys::SPI_keepplan(plan) };
        if code != 0 {
            return Err(spi_error("SPI_keepplan", code));
        }
        KEPT.with(|kept| kept.borrow_mut().insert(id, plan));
        #[cfg(any(test, feature = "pg_test"))]
        PREPARED.with(|p| p.borrow_mut().push(self.sql));
        Ok(plan)
    }

    /// Run the statement with `args` (one per declared parameter) and return its rows.
    pub fn run<'c>(&'static self, conn: &'c Conn, args: &[Arg]) -> Result<Rows<'c>> {
        if args.len() != self.args.len() {
            return Err(IdemError::new(
                errors::INTERNAL_ERROR,
                format!(
                    "statement takes {} parameters, got {}",
                    self.args.len(),
                    args.len()
                ),
            ));
        }
        let plan = self.plan(conn)?;
        let (mut values, nulls) = values_and_nulls(args);
        // SAFETY: a kept plan, values and nulls of the plan's arity.
        let code = unsafe {
            pg_sys::SPI_execute_plan(plan, values.as_mut_ptr(), nulls.as_ptr(), false, 0)
        };
        if code < 0 {
            return Err(spi_error("SPI_execute_plan", code));
        }
        // SAFETY: SPI's globals describe the statement that just ran.
        let (table, processed) = unsafe { (pg_sys::SPI_tuptable, pg_sys::SPI_processed) };
        Ok(Rows {
            table,
            processed,
            _conn: PhantomData,
        })
    }
}

/// `args` as SPI takes them: the values, and ' ' or 'n' (NULL) for each.
fn values_and_nulls(args: &[Arg]) -> (Vec<Datum>, Vec<core::ffi::c_char>) {
    let values = args.iter().map(|a| a.unwrap_or(Datum::from(0))).collect();
    let nulls = args
        .iter()
        .map(|a| if a.is_some() { b' ' } else { b'n' } as core::ffi::c_char)
        .collect();
    (values, nulls)
}

/// Run `sql`, text that changes from call to call (a Citus shard's name), with `args` of
/// `types`: planned each time, never kept. Its names must be as qualified as a [`Statement`]'s.
pub fn run_text<'c>(
    _conn: &'c Conn,
    sql: &str,
    types: &[pg_sys::Oid],
    args: &[Arg],
) -> Result<Rows<'c>> {
    let text = CString::new(sql)
        .map_err(|_| IdemError::new(errors::INTERNAL_ERROR, "statement text contains NUL"))?;
    let mut types = types.to_vec();
    let (mut values, nulls) = values_and_nulls(args);
    // SAFETY: a connected SPI (the borrowed Conn); types, values and nulls of one arity.
    let code = unsafe {
        pg_sys::SPI_execute_with_args(
            text.as_ptr(),
            types.len() as i32,
            types.as_mut_ptr(),
            values.as_mut_ptr(),
            nulls.as_ptr(),
            false,
            0,
        )
    };
    if code < 0 {
        return Err(spi_error("SPI_execute_with_args", code));
    }
    // SAFETY: SPI's globals describe the statement that just ran.
    let (table, processed) = unsafe { (pg_sys::SPI_tuptable, pg_sys::SPI_processed) };
    Ok(Rows {
        table,
        processed,
        _conn: PhantomData,
    })
}

/// What a statement returned (or, without RETURNING, how many rows it touched).
pub struct Rows<'c> {
    table: *mut pg_sys::SPITupleTable,
    processed: u64,
    _conn: PhantomData<&'c Conn>,
}

impl Rows<'_> {
    pub fn len(&self) -> usize {
        self.processed as usize
    }

    pub fn is_empty(&self) -> bool {
        self.processed == 0
    }

    /// Column `col` (1-based) of row `row` (0-based); `None` for NULL.
    pub fn get(&self, row: usize, col: usize) -> Result<Option<Datum>> {
        if self.table.is_null() || row >= self.len() {
            return Err(IdemError::new(
                errors::INTERNAL_ERROR,
                format!("no row {row} in the result"),
            ));
        }
        // SAFETY: `table` is SPI's result for this statement and `row` is in range.
        unsafe {
            let table = &*self.table;
            let tuple = *table.vals.add(row);
            let mut isnull = false;
            let value = pg_sys::SPI_getbinval(tuple, table.tupdesc, col as i32, &mut isnull);
            if pg_sys::SPI_result == pg_sys::SPI_ERROR_NOATTRIBUTE {
                return Err(IdemError::new(
                    errors::INTERNAL_ERROR,
                    format!("no column {col} in the result"),
                ));
            }
            Ok((!isnull).then_some(value))
        }
    }

    /// A column that must not be NULL.
    pub fn required(&self, row: usize, col: usize) -> Result<Datum> {
        self.get(row, col)?
            .ok_or_else(|| IdemError::new(errors::INTERNAL_ERROR, format!("column {col} is null")))
    }
}
