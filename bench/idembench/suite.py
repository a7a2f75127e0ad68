"""The Suite: plan the run (rounds), then the hash micro-benchmark, the main matrix, the
profiles and the table-size series; and bench/suite.py's command line."""

import argparse
import csv
import os
import shutil
import sys
import time

from .cluster import Cluster
from .common import BENCH, human, log, parse_size
from .phases import Phases
from .profiles import Profiling
from .rounds import plan
from .steps import Steps
from .workloads import FIELDS, WORKLOADS


class Suite(Steps, Phases, Profiling):
    def __init__(self, a):
        self.a = a
        self.cl = Cluster(a)
        self.results = a.results
        self.work = a.work
        os.makedirs(self.results, exist_ok=True)
        os.makedirs(os.path.join(self.work, "pgbench"), exist_ok=True)
        self.csv_path = os.path.join(self.results, "results.csv")
        self.step_no = 0
        self.total = 0
        self.t_start = time.monotonic()
        self.done_time = 0.0
        self.size = 0
        with open(os.path.join(BENCH, "payload.json")) as f:
            self.payload = f.read().strip()
        if not a.append or not os.path.exists(self.csv_path):
            with open(self.csv_path, "w", newline="") as f:
                csv.DictWriter(f, FIELDS).writeheader()

    def plan(self):
        """Steps as (phase, workload, variant, clients, sync, size, duration, round)."""
        return plan(self.a)

    def run(self):
        a = self.a
        steps, size_steps = self.plan()
        if "call" in a.workloads and not self.has_function("idem_call"):
            log("call: idem_call does not exist in this build: workload skipped "
                "(it runs by itself once idem_call is merged)")
            with open(os.path.join(self.results, "skipped.txt"), "a") as f:
                f.write("call: idem_call does not exist in this build of the extension\n")
            steps = [s for s in steps if s[1] != "call"]
        self.total = len(steps) + len(size_steps)
        log(f"{len(steps)} main steps + {len(size_steps)} table-size steps; "
            f"clients {a.clients}, sync {a.sync}, T={a.duration}s")
        self.cl.psql("CREATE TABLE IF NOT EXISTS bench.filled (x bigint)")
        if a.hash_rows > 0:
            self.hash_micro()
        for s in steps:
            self.step(*s)
        if a.profile:
            log("profiles (perf record -e cpu-clock --call-graph dwarf)")
            for spec in a.profile_steps:
                name, variant, c, sync = spec.split(":")
                if name not in a.workloads:
                    continue
                try:
                    self.profile(name, variant, int(c), sync, a.profile_duration)
                except Exception as e:  # a profile is a bonus: never lose the run for it
                    log(f" profile failed: {e}")
        by_size = {}
        for s in size_steps:
            by_size.setdefault(s[5], []).append(s)
        for size in sorted(by_size):
            log(f"table size {human(size)}: loading")
            self.load_size(size)
            for s in by_size[size]:
                self.step(*s)
        log(f"suite done in {(time.monotonic() - self.t_start) / 60:.1f} min")


def main(description):
    """bench/suite.py's command line; `description` is its first docstring line."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--bindir", required=True)
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--datadir", required=True)
    ap.add_argument("--db", default="bench")
    ap.add_argument("--work", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--duration", type=int, default=12)
    ap.add_argument("--size-duration", type=int, default=12)
    ap.add_argument("--probe-duration", type=int, default=5)
    ap.add_argument("--probe-clients", type=int, default=4)
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--size-clients", default="4")
    ap.add_argument("--sizes", default="0,1M,10M")
    ap.add_argument("--sync", default="on,off")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every cell this often (order rotating); the report takes medians")
    ap.add_argument("--threads", type=int, default=2, help="pgbench -j at most this")
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--hash-rows", type=int, default=100000)
    ap.add_argument("--hash-rounds", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--profile-duration", type=int, default=10)
    ap.add_argument("--profile-steps",
                    default="replay:ext:4:off,replay:floor:4:off,replay:ref:4:off,"
                            "new:ext:4:off,new:floor:4:off,new:ref:4:off")
    ap.add_argument("--append", action="store_true")
    a = ap.parse_args()
    a.clients = [int(x) for x in a.clients.split(",") if x]
    a.size_clients = [int(x) for x in a.size_clients.split(",") if x]
    a.sizes = [parse_size(x) for x in a.sizes.split(",") if x]
    a.sync = [x for x in a.sync.split(",") if x]
    a.workloads = [x for x in a.workloads.split(",") if x]
    a.profile_steps = [x for x in a.profile_steps.split(",") if x]
    for w in a.workloads:
        if w not in WORKLOADS:
            sys.exit(f"unknown workload {w}; known: {', '.join(WORKLOADS)}")
    if a.profile and not shutil.which("perf"):
        log("perf not found: no profiles")
        a.profile = False
    Suite(a).run()
