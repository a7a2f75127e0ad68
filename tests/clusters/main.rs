//! The integration tests that change a cluster as a whole, each on clusters of its own (the
//! others share one: tests/integration/): one binary, so that they run side by side.
//! - the maintenance worker (`common::worker_cluster`: the worker visits every database);
//! - chaos and failover (SIGKILL, immediate restarts, a standby promoted: faults/);
//! - Citus (IDEM_CITUS=1) and pg_tle (IDEM_PGTLE=1), on Postgres builds of their own.

#[path = "../common/mod.rs"]
mod common;
mod faults;

mod chaos;
mod citus;
mod failover;
mod portable_pg_tle;
mod worker;
