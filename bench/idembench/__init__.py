"""The benchmark suite's code, by concern (bench/suite.py and bench/report.py are its entry points).

Running the matrix (bench/suite.py):
  common     paths, logging, sizes as text (1M, 100k)
  workloads  the contenders' tables, the workloads and their pgbench scripts, the CSV columns
  cluster    the running cluster (psql) and CPU accounting from /proc
  stats      pgbench's output and per-transaction logs: tps, failures, latency percentiles
  rounds     the plan: cells, rounds and the rotating (ABBA...) order of contenders
  steps      one measured step: reset, CHECKPOINT, pgbench, the write-count check, a CSV row
  phases     table-size loading and the hash micro-benchmark
  profiles   perf record of chosen steps, folded stacks
  suite      the Suite (plan, then run every phase) and the command line

The report (bench/report.py):
  data       results.csv read back: medians over rounds, ratios, costs; names and formats
  plots      the PNG plots (throughput, ratios, latency, table size)
  flame      flame graphs and cost categories from the folded profiles
  report     report.md and the command line
"""
