//! Prepared SPI plans, kept for the life of the backend.
//!
//! Each statement is a `static Statement`; its plan is prepared on first use in a backend and
//! kept with `SPI_keepplan`. Postgres' plan cache re-analyses a kept plan when what it depends
//! on changes (e.g. the extension is dropped and created again), so a plan never goes stale.
//! Statements are fixed text: values are always bound as parameters.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use pgrx::PgOid;
use pgrx::datum::DatumWithOid;
use pgrx::pg_sys;
use pgrx::spi::{OwnedPreparedStatement, SpiClient, SpiTupleTable};

use crate::errors::Result;

/// A fixed SQL statement and the types of its parameters.
pub struct Statement {
    pub sql: &'static str,
    pub args: &'static [pg_sys::Oid],
}

thread_local! {
    static KEPT: RefCell<HashMap<usize, Rc<OwnedPreparedStatement>>> = RefCell::new(HashMap::new());
}

impl Statement {
    fn id(&'static self) -> usize {
        self as *const Statement as usize
    }

    fn plan(&'static self, client: &SpiClient<'_>) -> Result<Rc<OwnedPreparedStatement>> {
        if let Some(plan) = KEPT.with(|kept| kept.borrow().get(&self.id()).cloned()) {
            return Ok(plan);
        }
        let args: Vec<PgOid> = self.args.iter().map(|oid| PgOid::from(*oid)).collect();
        let plan = Rc::new(client.prepare_mut(self.sql, &args)?.keep());
        KEPT.with(|kept| kept.borrow_mut().insert(self.id(), Rc::clone(&plan)));
        Ok(plan)
    }

    /// Run the statement and return its rows. Always with a fresh snapshot (read-write SPI),
    /// so under READ COMMITTED each statement sees what committed just before it.
    pub fn run<'conn>(
        &'static self,
        client: &mut SpiClient<'conn>,
        args: &[DatumWithOid<'_>],
    ) -> Result<SpiTupleTable<'conn>> {
        let plan = self.plan(client)?;
        Ok(client.update(&**plan, None, args)?)
    }
}
