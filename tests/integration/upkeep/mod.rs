//! idem_purge and idem_reclaim by hand against concurrent claims (the worker:
//! tests/clusters/worker/), the generations layout with its rotation (generations/), and the units and cuts both editions
//! must read alike (units.rs).

mod cases;
mod generations;
mod lock_first;
mod sessions;
mod units;
