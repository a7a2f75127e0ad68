#!/usr/bin/env python3
"""The benchmark matrix of bench/run-all.sh.

Runs pgbench steps against an already running cluster (run-all.sh starts it) and appends one
row per step to results.csv: transactions per second, latency percentiles (from pgbench's
per-transaction log), failed transactions, the load average and the CPU other processes used
while the step ran. Also runs bench/hash_vs_sha256.sql once and, with --profile, records perf
profiles (folded stacks) of chosen steps. Standard library only.

Each step is: reset the contender's table when the workload needs a known state, CHECKPOINT,
read the table's insert/update counters, run pgbench, read the counters again and check them
against the workload (a "new" step must insert and update exactly one row per transaction, a
replay must write nothing). A mismatch is recorded in the step's note.
"""

# The code is in bench/idembench/ (one module a concern; its __init__ lists them). This file
# stays the command line bench/run-all.sh calls, with the same arguments.
from idembench.suite import main  # bench/ is on sys.path: the script's folder

if __name__ == "__main__":
    main(__doc__.split("\n")[0])
