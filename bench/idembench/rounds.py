"""The plan of a run: every cell (workload, clients, sync mode, table size) with its contenders
back to back, each round once, in an order that rotates from round to round and cell to cell
(A B C, B C A, ...), so that no contender is always first after the CHECKPOINT or last in a
drift of the machine's load. The report takes medians over the rounds."""

from .workloads import WORKLOADS


def plan(a):
    """Steps as (phase, workload, variant, clients, sync, size, duration, round)."""
    steps = []
    cell = 0
    for name in a.workloads:
        w = WORKLOADS[name]
        for sync in w.get("sync", a.sync):
            for c in a.clients:
                # The contenders of a cell run back to back (each round once); the order
                # rotates from round to round and cell to cell, so that none is always
                # first after the CHECKPOINT or last in a drift of the machine's load.
                variants = list(w["variants"])
                for rnd in range(1, a.rounds + 1):
                    shift = (cell + rnd - 1) % len(variants)
                    for v in variants[shift:] + variants[:shift]:
                        dur = a.duration
                        if w.get("holder") and v != "ext":
                            # The pattern waits for the holder: one short probe per sync mode.
                            if c != a.probe_clients or rnd > 1:
                                continue
                            dur = min(a.duration, a.probe_duration)
                        steps.append(("main", name, v, c, sync, 0, dur, rnd))
                cell += 1
    size_steps = []
    for size in a.sizes:
        if size == 0:
            continue
        for name in ("new", "replay"):
            for sync in a.sync:
                for c in a.size_clients:
                    variants = list(WORKLOADS[name]["variants"])
                    for rnd in range(1, a.rounds + 1):
                        shift = (cell + rnd - 1) % len(variants)
                        for v in variants[shift:] + variants[:shift]:
                            size_steps.append(("size", name, v, c, sync, size, a.size_duration, rnd))
                    cell += 1
    return steps, size_steps
