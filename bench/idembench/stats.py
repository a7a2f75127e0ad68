"""pgbench's output and per-transaction logs: tps, transactions, failures, latency
percentiles."""

import glob
import os
import re


def percentile(sorted_vals, q):
    if not sorted_vals:
        return None
    k = min(len(sorted_vals) - 1, max(0, int(round(q * (len(sorted_vals) - 1)))))
    return sorted_vals[k]


def read_latencies(prefix):
    lat = []
    for path in glob.glob(prefix + ".[0-9]*"):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[2].isdigit():
                    lat.append(int(parts[2]))
        os.unlink(path)
    lat.sort()
    return lat


def parse_pgbench(out):
    def grab(pattern, conv=float):
        m = re.search(pattern, out)
        return conv(m.group(1)) if m else None

    res = {
        "tps": grab(r"tps = ([\d.]+) \(without initial connection time\)"),
        "transactions": grab(r"number of transactions actually processed: (\d+)", int),
        "failed": grab(r"number of failed transactions: (\d+)", int) or 0,
        "lat_avg_ms": grab(r"latency average = ([\d.]+) ms"),
        "scripts": {},
    }
    for m in re.finditer(r"SQL script \d+: (\S+)\n - weight: \d+ .*\n - (\d+) transactions", out):
        res["scripts"][os.path.basename(m.group(1))] = int(m.group(2))
    return res
