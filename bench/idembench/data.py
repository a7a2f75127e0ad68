"""results.csv (and meta.json, loads.csv) read back for the report: one value per cell, the
median over its rounds; ratios and CPU costs; the contenders' names, colours and formats."""

import csv
import json
import os
import statistics
from collections import defaultdict

NAMES = {"ext": "extension", "ref": "reference PL/pgSQL", "floor": "floor (bare SQL)",
         "one": "idem_call (one statement)", "steps": "three statements"}
COLORS = {"ext": "tab:green", "ref": "tab:red", "floor": "tab:blue", "one": "tab:green",
          "steps": "tab:purple"}
TITLES = {
    "new": "new key: claim + complete, one transaction",
    "replay": "replay of a completed key",
    "active": "claim of a key whose committed claim has a live lease",
    "active_open": "claim of a key another session's open transaction is claiming",
    "mixed": "90% replay / 10% new",
    "hash": "hash a ~1 KB JSON body",
    "call": "idem_call vs claim + function + complete",
}
ORDER = ["new", "replay", "active", "active_open", "mixed", "hash", "call"]


def fnum(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def fmt_tps(x):
    return "–" if x is None else f"{x:,.0f}"


def fmt_ratio(x):
    if x is None:
        return "–"
    return f"{x:.2f}" if x < 100 else f"{x:,.0f}"


def fmt_cost(x):
    return "–" if x is None else f"{x:.0f}"


class Data:
    def __init__(self, results):
        self.dir = results
        with open(os.path.join(results, "results.csv")) as f:
            self.rows = list(csv.DictReader(f))
        for r in self.rows:
            for k in ("tps", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms",
                      "lat_avg_ms", "load1_start", "load1_end", "other_cores", "steal_cores",
                      "server_us_tx", "client_us_tx"):
                r[k] = fnum(r.get(k))
            for k in ("clients", "size", "duration_s"):
                r[k] = int(r[k]) if r.get(k) not in (None, "") else 0
        self.meta = {}
        p = os.path.join(results, "meta.json")
        if os.path.exists(p):
            with open(p) as f:
                self.meta = json.load(f)
        # Rounds (bench/suite.py --rounds): one row per (workload, variant, clients, sync, size)
        # with the medians of its rounds.
        self.raw = self.rows
        groups = defaultdict(list)
        for r in self.raw:
            groups[(r["workload"], r["variant"], r["clients"], r["sync"], r["size"])].append(r)
        self.rows, self.idx = [], {}
        for key, rs in groups.items():
            agg = dict(rs[-1])
            for k in ("tps", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms",
                      "lat_avg_ms", "load1_end", "other_cores", "server_us_tx", "client_us_tx"):
                vals = [x[k] for x in rs if x[k] is not None]
                agg[k] = statistics.median(vals) if vals else None
            tps = [x["tps"] for x in rs if x["tps"] is not None]
            agg["n"] = len(rs)
            agg["tps_min"], agg["tps_max"] = (min(tps), max(tps)) if tps else (None, None)
            agg["note"] = "; ".join(x["note"] for x in rs if x.get("note"))
            agg["check"] = "MISMATCH" if any(x.get("check") == "MISMATCH" for x in rs) else agg.get("check")
            self.rows.append(agg)
            self.idx[key] = agg
        self.rounds = max((r["n"] for r in self.rows), default=1)

    def get(self, w, v, c, s, size=0):
        return self.idx.get((w, v, c, s, size))

    def tps(self, w, v, c, s, size=0):
        r = self.get(w, v, c, s, size)
        return r["tps"] if r else None

    def ratio(self, w, a, b, c, s, size=0):
        x, y = self.tps(w, a, c, s, size), self.tps(w, b, c, s, size)
        if x is None or not y:
            return None
        return x / y

    def cost(self, w, v, c, s, size=0):
        r = self.get(w, v, c, s, size)
        return r["server_us_tx"] if r else None

    def cost_ratio(self, w, a, b, c, s, size=0):
        """Server CPU per transaction of b over a: the throughput ratio a/b where CPU is the limit."""
        x, y = self.cost(w, a, c, s, size), self.cost(w, b, c, s, size)
        if not x or y is None:
            return None
        return y / x

    def values(self, key, phase=None):
        return sorted({r[key] for r in self.rows if phase is None or r["phase"] == phase})


# ---------------------------------------------------------------------------------------------
# plots
