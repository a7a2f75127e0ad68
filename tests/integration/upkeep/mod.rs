//! idem_purge and idem_reclaim by hand against concurrent claims (the worker: tests/worker/).

mod sessions;
