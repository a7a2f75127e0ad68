//! Injection points for tests that must make a race happen every time (tests/integration/claim/race.rs).
//! Compiled only with the `pg_test` feature (what `cargo pgrx test` builds and installs): a
//! release build has neither this code nor the setting, and a placeholder of that name set in
//! one does nothing.
//!
//! `idempotency_test.pause_before_key_lock` (an int, 0 = off): a claim of a key its first read
//! did not find takes and releases a shared `pg_advisory_lock(<value>)` before it tries the
//! key's lock. A test holds that advisory lock in another session, so the claim stops between
//! its first read and its try-lock for as long as the test wants, while the test commits
//! something the first read could not see. The name is outside the reserved `idempotency.`
//! prefix so that the settings reference (tests/integration/catalog/reference.rs) stays the product's own.
//!
//! `idempotency_test.fail_at` (`POINT:SQLSTATE`, empty = off): the [`fail_point`] named POINT
//! returns an error with that SQLSTATE, from deep inside a call where scans, writers and SPI
//! connections are alive (tests/integration/security/error_guards.rs: each is dropped before the error is raised).

use std::ffi::CString;

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting, pg_sys};

use crate::base::errors::{IdemError, Result, SqlState};

static PAUSE_BEFORE_KEY_LOCK: GucSetting<i32> = GucSetting::<i32>::new(0);
static FAIL_AT: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// Define the settings. Called from `_PG_init` in test builds only.
pub fn init() {
    GucRegistry::define_int_guc(
        c"idempotency_test.pause_before_key_lock",
        c"Test builds only: advisory lock key a new-key claim waits on before its key lock.",
        c"0: no pause.",
        &PAUSE_BEFORE_KEY_LOCK,
        0,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"idempotency_test.fail_at",
        c"Test builds only: POINT:SQLSTATE, the fail point that returns an error.",
        c"Empty: none.",
        &FAIL_AT,
        GucContext::Userset,
        GucFlags::default(),
    );
}

/// The error `idempotency_test.fail_at` asks for at `point`, if it names it.
pub fn fail_point(point: &str) -> Result<()> {
    let Some(setting) = FAIL_AT.get() else {
        return Ok(());
    };
    let setting = setting.to_string_lossy();
    match setting.split_once(':') {
        Some((at, code)) if at == point => match <[u8; 5]>::try_from(code.as_bytes()) {
            Ok(code) => Err(IdemError::new(
                SqlState(code),
                format!("injected at {point}"),
            )),
            Err(_) => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Between a claim's first read and its key lock: wait while another session holds
/// `pg_advisory_lock(key)` (shared, taken and released here, so several claims can pass).
pub fn before_key_lock() {
    let key = PAUSE_BEFORE_KEY_LOCK.get();
    if key == 0 {
        return;
    }
    // SAFETY: the lock tag pg_advisory_lock(bigint) uses (SET_LOCKTAG_INT64, class 1), taken
    // as a session lock (it waits, and is interruptible like any lock wait), then released.
    unsafe {
        let key = key as u64;
        let tag = pg_sys::LOCKTAG {
            locktag_field1: pg_sys::MyDatabaseId.into(),
            locktag_field2: (key >> 32) as u32,
            locktag_field3: key as u32,
            locktag_field4: 1,
            locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
            locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
        };
        let mode = pg_sys::ShareLock as pg_sys::LOCKMODE;
        pg_sys::LockAcquire(&tag, mode, true, false);
        pg_sys::LockRelease(&tag, mode, true);
    }
}
