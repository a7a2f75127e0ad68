//! The entry points (the top layer): every SQL function the extension defines (the hot ones as C
//! functions, the others as `#[pg_extern]`s), the SQL files in install order (`schema`), and the
//! background worker that does the upkeep (`worker`, `maintenance_worker`, `as_owner`).

pub mod as_owner;
pub mod call;
pub mod call_target;
pub mod canonical;
pub mod claim;
pub mod claim_wait;
pub mod finish;
pub mod inbox;
pub mod lock_key;
pub mod maintenance;
pub mod maintenance_worker;
pub mod metrics;
pub mod outbox;
pub mod outbox_cdc;
pub mod outbox_size;
pub mod schema;
pub mod versions;
pub mod worker;
