//! The maintenance worker, on a cluster of its own (`common::worker_cluster`: the worker visits
//! every database): its rounds, its security, and its rotation in the generations layout.

mod generations;
mod rounds;
mod security;
