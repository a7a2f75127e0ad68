//! idem_purge and idem_reclaim by hand against concurrent claims (the worker: tests/worker/),
//! and the generations layout with its rotation (generations/).

mod generations;
mod sessions;
