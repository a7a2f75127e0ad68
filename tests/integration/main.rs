//! The integration tests that need no cluster of their own: one binary (one link), grouped by
//! subject. They share a cluster per major (`common::cluster`, started once); each module works
//! in a database of its own (`own_database!`, a copy of a template that has the extension), or
//! makes its own databases. The portable edition's tests share a cluster with no library
//! loaded (`common::bare_cluster`), and the tests that compare `idem_metrics()` counters (the
//! cluster's) take turns on `common::counted_cluster`.
//!
//! Tests that change the cluster itself keep a binary and a cluster of their own: the worker
//! (tests/clusters/worker/), chaos and failover (restarts, SIGKILL), Citus, pg_tle.
//! Writing one: docs/developing.md, "Integration tests".

#[path = "../common/mod.rs"]
mod common;
#[path = "../fixtures/mod.rs"]
mod fixtures;

mod catalog;
mod claim;
mod consumers;
mod permutation;
mod portable;
mod security;
mod upkeep;
