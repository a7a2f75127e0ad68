//! What the fuzzer counted: calls, successes, errors by SQLSTATE and by function, and which
//! functions no call got through.

use super::Edition;
use std::collections::BTreeMap;

#[derive(Default)]
pub(super) struct Tally {
    pub(super) calls: u64,
    pub(super) ok: u64,
    pub(super) errors: BTreeMap<String, u64>,
    pub(super) per_function: BTreeMap<String, (u64, u64)>,
}

impl Tally {
    pub(super) fn add(&mut self, t: Tally) {
        (self.calls, self.ok) = (self.calls + t.calls, self.ok + t.ok);
        for (k, v) in t.errors {
            *self.errors.entry(k).or_default() += v;
        }
        for (k, (a, b)) in t.per_function {
            let e = self.per_function.entry(k).or_default();
            (e.0, e.1) = (e.0 + a, e.1 + b);
        }
    }
}

/// The functions no call got through, but those that cannot succeed here: idem_distribute only
/// on a Citus coordinator (tests/clusters/citus.rs; here P4060, which the SQLSTATE check
/// enforces); layout_bounded, whose six arguments are each drawn bad or NULL often (idem_set_layout
/// and idem_rotate, which must, go through it); the portable idem_metrics (always 55000) and
/// idem_schedule_upkeep (needs pg_cron; docs/managed.md).
pub(super) fn untouched(total: &Tally, edition: Edition) -> Vec<&String> {
    let never = |f: &str| {
        f.ends_with(".idem_distribute")
            || f.ends_with(".layout_bounded")
            || (edition == Edition::Portable
                && (f.ends_with(".idem_metrics") || f.ends_with(".idem_schedule_upkeep")))
    };
    let out = total.per_function.iter();
    out.filter(|(f, (ok, _))| *ok == 0 && !never(f))
        .map(|(f, _)| f)
        .collect()
}
