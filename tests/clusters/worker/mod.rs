//! The maintenance worker, on a cluster of its own (`common::worker_cluster`: the worker visits
//! every database): its rounds, and its security.

mod rounds;
mod security;
