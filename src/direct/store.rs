//! The direct path as a [`Store`]: reads through [`Lookup`], writes through [`Writer`]. It
//! declines ([`Stop::UseSql`], having written nothing) whatever `direct/rules.rs` leaves to SQL;
//! a claim's row lock (`FOR UPDATE SKIP LOCKED`), which only SQL takes; a change of a record
//! that is missing or not the current attempt (`idem_protocol::may_change_directly`), which SQL
//! explains; and an update that found the row changed since it was read.

use pgrx::pg_sys;

use crate::base::datum::text_datum;
use crate::base::errors::{self, IdemError, Result};
use crate::base::record::{self, Record};
use crate::base::store::{Step, Stop, Store, Target};
use crate::direct::lookup::Lookup;
use crate::direct::writer::Writer;

/// The table opened for the direct path: its scan, and a writer from the step that opens it
/// (`prepare_insert`, `lock_current`) to the write, which closes it.
pub struct Direct {
    // Dropped in this order: the writer, then the scan.
    writer: Option<Writer>,
    lookup: Lookup,
}

impl Direct {
    /// The table opened for reading, or `Ok(None)` when every step goes through SQL
    /// ([`Lookup::open`]).
    pub fn open() -> Result<Option<Direct>> {
        Ok(Lookup::open()?.map(|lookup| Direct {
            writer: None,
            lookup,
        }))
    }

    fn find_datums(&mut self, scope: &[u8], key: &[u8]) -> Result<Option<Record>> {
        self.lookup.find(text_datum(scope), text_datum(key))
    }

    /// The table opened for writes with `privilege`, or [`Stop::UseSql`].
    fn open_writer(&mut self, privilege: u32) -> Step<()> {
        self.writer = Some(Writer::open(&self.lookup, privilege).ok_or(Stop::UseSql)?);
        Ok(())
    }

    fn values(&self, new: &Record) -> record::Values {
        record::to_values(new, |status| self.lookup.catalog.status_datum(status))
    }
}

impl Store for Direct {
    fn direct(&self) -> bool {
        true
    }

    fn find(&mut self, scope: &[u8], key: &[u8]) -> Step<Option<Record>> {
        Ok(self.find_datums(scope, key)?)
    }

    fn lock_for_claim(&mut self, _scope: &[u8], _key: &[u8]) -> Step<Option<Record>> {
        Err(Stop::UseSql)
    }

    fn lock_current(&mut self, target: Target<'_>, txn: i64) -> Step<Option<Record>> {
        let Some(stored) = self.find_datums(target.scope, target.key)? else {
            return Err(Stop::UseSql);
        };
        // A repeat or a fenced call needs no executor state: SQL explains it.
        if !idem_protocol::may_change_directly(&stored, target.attempt, txn) {
            return Err(Stop::UseSql);
        }
        self.open_writer(pg_sys::ACL_UPDATE)?;
        fail_point!("change.direct");
        Ok(Some(stored))
    }

    fn prepare_insert(&mut self) -> Step<()> {
        self.open_writer(pg_sys::ACL_INSERT)?;
        #[cfg(feature = "pg_test")]
        crate::base::test_points::before_key_lock();
        Ok(())
    }

    fn check_insert_policy(
        &mut self,
        _scope: &[u8],
        _key: &[u8],
        _hash: &[u8],
        _claimed_by: Option<&[u8]>,
    ) -> Step<()> {
        // Row-level security sends every read to SQL (`rules::may_read`): no policy applies
        // here. The key is someone else's: nothing will be written.
        self.writer = None;
        Ok(())
    }

    fn insert(
        &mut self,
        scope: &[u8],
        key: &[u8],
        new: &mut dyn FnMut() -> Result<Record>,
    ) -> Step<core::result::Result<Record, Option<Record>>> {
        // The writer is closed when this returns, as the write is done or not needed.
        let mut writer = self.writer.take().ok_or_else(no_writer)?;
        // Whoever inserts this key holds its lock until they commit, so a read with a snapshot
        // taken now sees every record of it there will be until we commit.
        self.lookup.refresh();
        if let Some(found) = self.find_datums(scope, key)? {
            return Ok(Err(Some(found)));
        }
        fail_point!("claim.direct");
        let new = new()?;
        writer.insert(&self.values(&new))?;
        Ok(Ok(new))
    }

    fn update(&mut self, new: &Record) -> Step<bool> {
        let mut writer = self.writer.take().ok_or_else(no_writer)?;
        let values = self.values(new);
        let (tid, snapshot) = self.lookup.found();
        // Someone changed the row since it was read: SQL reads it again, as UPDATE would.
        if writer.update(tid, snapshot, &values) {
            Ok(true)
        } else {
            Err(Stop::UseSql)
        }
    }
}

fn no_writer() -> IdemError {
    IdemError::new(errors::INTERNAL_ERROR, "a direct write without a writer")
}
