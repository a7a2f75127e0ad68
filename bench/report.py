#!/usr/bin/env python3
"""Writes results/report.md and the PNG plots from results.csv (bench/suite.py's output)."""

import argparse
import csv
import glob
import json
import os
import statistics
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from suite import human  # noqa: E402  (bench/ is on sys.path: the script's folder)

BENCH = os.path.dirname(os.path.abspath(__file__))

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

def plot_throughput(d, out):
    workloads = [w for w in ORDER if any(r["workload"] == w for r in d.rows) and w != "call"]
    syncs = d.values("sync", "main")
    if not workloads:
        return None
    fig, axes = plt.subplots(len(syncs), len(workloads), figsize=(3.3 * len(workloads), 3.2 * len(syncs)),
                             squeeze=False)
    for i, s in enumerate(syncs):
        for j, w in enumerate(workloads):
            ax = axes[i][j]
            drawn = False
            for v in ("ext", "ref", "floor"):
                pts = sorted((r["clients"], r["tps"]) for r in d.rows if r["phase"] == "main"
                             and r["workload"] == w and r["variant"] == v and r["sync"] == s
                             and r["tps"] is not None)
                if pts:
                    drawn = True
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=COLORS[v],
                            label=NAMES[v])
            if not drawn:
                ax.axis("off")
                ax.text(.5, .5, f"{w}: no sync={s} series\n(it commits nothing)", ha="center",
                        va="center", fontsize=8, transform=ax.transAxes)
                continue
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{w}, sync={s}", fontsize=9)
            ax.set_xlabel("clients", fontsize=8)
            if j == 0:
                ax.set_ylabel("transactions/s", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(True, which="both", alpha=.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "throughput.png"), dpi=110)
    plt.close(fig)
    return "throughput.png"


def plot_ratios(d, out):
    syncs = d.values("sync", "main")
    clients = d.values("clients", "main")
    workloads = [w for w in ORDER if w not in ("call", "active_open")
                 and any(r["workload"] == w for r in d.rows)]
    if not workloads:
        return None
    fig, axes = plt.subplots(1, len(syncs), figsize=(7 * len(syncs), 4), squeeze=False)
    for i, s in enumerate(syncs):
        ax = axes[0][i]
        labels, xr, xf = [], [], []
        for w in workloads:
            for c in clients:
                labels.append(f"{w}\nc={c}")
                xr.append(d.ratio(w, "ext", "ref", c, s) or 0)
                xf.append(d.ratio(w, "ext", "floor", c, s) or 0)
        x = range(len(labels))
        ax.bar([k - .2 for k in x], xr, .4, color="tab:red", label="extension / reference")
        ax.bar([k + .2 for k in x], xf, .4, color="tab:blue", label="extension / floor")
        ax.axhline(1, color="black", lw=.8)
        ax.set_yscale("log")
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, fontsize=6)
        ax.set_title(f"throughput ratios, synchronous_commit={s}", fontsize=9)
        ax.grid(True, axis="y", which="both", alpha=.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ratios.png"), dpi=110)
    plt.close(fig)
    return "ratios.png"


def size_series(d):
    """(workload, variant, clients, sync) -> [(size, tps)], size 0 from the main matrix."""
    series = defaultdict(list)
    size_clients = {r["clients"] for r in d.rows if r["phase"] == "size"}
    for r in d.rows:
        if r["workload"] not in ("new", "replay") or r["tps"] is None:
            continue
        if r["phase"] == "size" or (r["phase"] == "main" and r["clients"] in size_clients):
            series[(r["workload"], r["variant"], r["clients"], r["sync"])].append((r["size"], r["tps"]))
    return {k: sorted(v) for k, v in series.items()}


def plot_sizes(d, out):
    series = size_series(d)
    if not any(len(v) > 1 for v in series.values()):
        return None
    syncs = sorted({k[3] for k in series})
    fig, axes = plt.subplots(1, len(syncs), figsize=(6.5 * len(syncs), 4.2), squeeze=False)
    for i, s in enumerate(syncs):
        ax = axes[0][i]
        for (w, v, c, sy), pts in sorted(series.items()):
            if sy != s or len(pts) < 2:
                continue
            xs = [max(p[0], 1e4) for p in pts]  # 0 rows drawn at the fixtures' 10^4
            ax.plot(xs, [p[1] for p in pts], "o-" if w == "replay" else "s--", color=COLORS[v],
                    label=f"{w}, {NAMES[v]}, c={c}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("rows already in the table (0 drawn at 10k: the fixtures)", fontsize=8)
        ax.set_ylabel("transactions/s", fontsize=8)
        ax.set_title(f"throughput against table size, synchronous_commit={s}", fontsize=9)
        ax.grid(True, which="both", alpha=.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "table_size.png"), dpi=110)
    plt.close(fig)
    return "table_size.png"


def plot_latency(d, out, clients=4):
    syncs = d.values("sync", "main")
    workloads = [w for w in ORDER if w not in ("call",) and any(r["workload"] == w for r in d.rows)]
    if not workloads:
        return None
    fig, axes = plt.subplots(1, len(syncs), figsize=(7 * len(syncs), 4), squeeze=False)
    for i, s in enumerate(syncs):
        ax = axes[0][i]
        labels = []
        k = 0
        for w in workloads:
            for v in ("ext", "ref", "floor"):
                r = d.get(w, v, clients, s)
                if not r or r["p50_ms"] is None:
                    continue
                labels.append(f"{w}\n{v}")
                ax.bar(k, r["p99_ms"], .8, color=COLORS[v], alpha=.35)
                ax.bar(k, r["p50_ms"], .8, color=COLORS[v])
                k += 1
        ax.set_yscale("log")
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=6)
        ax.set_ylabel("ms (solid: p50, pale: p99)", fontsize=8)
        ax.set_title(f"latency at {clients} clients, synchronous_commit={s}", fontsize=9)
        ax.grid(True, axis="y", which="both", alpha=.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "latency.png"), dpi=110)
    plt.close(fig)
    return "latency.png"


# ---------------------------------------------------------------------------------------------
# profiles

ROOTS = ("PostgresMain",)


def read_folded(path):
    stacks = []
    with open(path) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            for root in ROOTS:
                if root in frames:
                    frames = frames[frames.index(root):]
                    break
            stacks.append((frames, int(n)))
    return stacks


def frame_totals(stacks):
    incl, self_ = defaultdict(int), defaultdict(int)
    for frames, n in stacks:
        for f in set(frames):
            incl[f] += n
        self_[frames[-1]] += n
    return incl, self_


def flame(stacks, title, path):
    total = sum(n for _, n in stacks)
    if not total:
        return
    tree = {}
    for frames, n in stacks:
        node = tree
        for f in frames[:48]:
            e = node.setdefault(f, [0, {}])
            e[0] += n
            node = e[1]
    depth = [0]

    def walk(node, x, level, draw):
        for name, (n, kids) in sorted(node.items()):
            w = n / total
            if w >= .002:
                draw(name, x, level, w)
                depth[0] = max(depth[0], level)
                walk(kids, x, level + 1, draw)
            x += w

    rects = []
    walk(tree, 0.0, 0, lambda *a: rects.append(a))
    height = min(depth[0] + 1, 48)
    fig, ax = plt.subplots(figsize=(18, 0.24 * height + 1.2))
    for name, x, level, w in rects:
        if "::" in name or name.startswith(("idem_", "pgrx")):
            color = "#7fc97f"
        elif name.endswith("_[k]"):
            color = "#bbbbbb"
        elif name.startswith(("[postgres", "[plpgsql")):
            color = "#fdc086"
        elif name.startswith("[") or "libc" in name or name.startswith("__"):
            color = "#a6cee3"
        else:
            color = "#fdc086"
        ax.add_patch(Rectangle((x, level), w, .95, facecolor=color, edgecolor="white", lw=.3))
        if w > .025:
            label = name if len(name) * .0042 < w else name[: max(1, int(w / .0042) - 1)] + "…"
            ax.text(x + .002, level + .45, label, fontsize=5.5, va="center", clip_on=True)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, height)
    ax.set_yticks([])
    ax.set_xticks([0, .25, .5, .75, 1])
    ax.set_xticklabels(["0", "25%", "50%", "75%", "100% of backend CPU samples"], fontsize=7)
    ax.set_title(title + "  (green: the extension, orange: postgres, blue: libc, grey: kernel)",
                 fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# Where the backend's time goes, by the first rule whose frame is on the stack (most specific
# first). Static functions of the stripped postgres binary have no names, so the executor's own
# run-time code lands in the enclosing category: under SPI for the extension and the reference,
# under the client statement for the floor.
CATEGORIES = [
    ("row writes: heap, index entries, WAL records",
     ("heap_insert", "heap_update", "heap_lock_tuple", "heap_delete", "ExecInsertIndexTuples",
      "ExecCheckIndexConstraints", "RelationGetBufferForTuple", "XLogInsert")),
    ("index scans (reads)", ("index_getnext_slot", "index_beginscan", "index_rescan", "index_endscan")),
    ("extension: set-up of the direct read (relations, scan, snapshot)",
     ("idempotency::lookup::",)),
    ("extension: set-up of the direct write (executor state, indexes)",
     ("idempotency::write::",)),
    ("extension: result row type and enum OIDs (cached per backend)",
     ("idempotency::call_site::", "idempotency::claim::call_site", "idempotency::claim::enum_label_oid",
      "get_call_result_type", "BlessTupleDesc")),
    ("extension: advisory try-lock", ("pg_try_advisory_xact_lock_int8",)),
    ("CHECK constraints (ExecConstraints parses them for every statement)", ("ExecConstraints",)),
    ("executor start (plan initialisation)", ("standard_ExecutorStart",)),
    ("executor end", ("standard_ExecutorEnd", "standard_ExecutorFinish")),
    ("SPI: plan cache check, snapshots, executor run (static code)",
     ("SPI_execute_plan", "SPI_execute_plan_with_paramlist", "SPI_execute_plan_extended",
      "SPI_connect", "SPI_connect_ext", "SPI_finish")),
    ("PL/pgSQL interpreter", ("plpgsql_call_handler",)),
    ("extension: other (arguments, result row, pgrx guards)",
     ("idem_claim", "idem_complete", "idem_hash", "idem_call")),
    ("commit", ("CommitTransactionCommand",)),
    ("client statement: bind, plan cache, portal, executor run (static code)",
     ("PortalRun", "PortalStart", "GetCachedPlan", "CreatePortal", "PortalDrop",
      "FetchPreparedStatement")),
    ("client socket: wait and receive", ("pq_getbyte", "secure_read", "pq_getmessage")),
    ("client socket: send", ("secure_write", "pq_flush", "socket_flush")),
]


def categorize(stacks):
    out = defaultdict(int)
    for frames, n in stacks:
        fs = set(frames)
        for name, keys in CATEGORIES:
            if any((k in fs) if not k.endswith("::") else any(f.startswith(k) for f in frames)
                   for k in keys):
                out[name] += n
                break
        else:
            out["other"] += n
    return out


def category_tables(d, md, loaded):
    """One table per profiled workload: share of backend CPU per category, per contender."""
    by_w = defaultdict(list)
    for tag, m, stacks in loaded:
        by_w[(m["workload"], m["clients"], m["sync"])].append((m["variant"], stacks))
    for (w, c, s), items in sorted(by_w.items()):
        items.sort(key=lambda x: ("ext", "ref", "floor").index(x[0]) if x[0] in ("ext", "ref", "floor") else 9)
        cats = {v: categorize(st) for v, st in items}
        tots = {v: sum(n for _, n in st) for v, st in items}
        cost = {v: d.cost(w, v, c, s) for v, _ in items}
        md.append(f"**Where the time goes: {w}, {c} clients, synchronous_commit={s}.** Share of "
                  "backend CPU samples and, in brackets, µs per transaction (the share times the "
                  "server CPU per transaction of the unprofiled step):\n")
        md.append("| | " + " | ".join(NAMES.get(v, v) for v, _ in items) + " |")
        md.append("|---|" + "---:|" * len(items))
        names = [n for n, _ in CATEGORIES] + ["other"]
        for name in names:
            if not any(cats[v].get(name) for v, _ in items):
                continue
            cells = []
            for v, _ in items:
                share = cats[v].get(name, 0) / tots[v] if tots[v] else 0
                us = f" ({share * cost[v]:.0f})" if cost[v] else ""
                cells.append(f"{100 * share:.1f}%{us}" if share else "–")
            md.append(f"| {name} | " + " | ".join(cells) + " |")
        md.append("| **server CPU µs/tx (unprofiled step)** | " +
                  " | ".join(fmt_cost(cost[v]) for v, _ in items) + " |")
        md.append("")


GENERIC = {"PostgresMain", "exec_execute_message", "PortalRun", "PortalRunSelect",
           "PortalRunMulti", "PortalRunUtility", "ProcessQuery", "standard_ExecutorRun",
           "[postgres]", "ExecutorRun"}


def profile_section(d, md):
    prof_dir = os.path.join(d.dir, "profiles")
    metas = sorted(glob.glob(os.path.join(prof_dir, "*.json")))
    if not metas:
        return
    md.append("## Profiles\n")
    md.append("`perf record -e cpu-clock -F 499 --call-graph dwarf` of the pgbench backends "
              "(postgres processes only) during one step at 4 clients, `synchronous_commit=off` "
              "so that CPU, not the WAL flush, is what is measured. The hardware counters are "
              "not available in this VM (`perf stat -e instructions` says *not supported*), so "
              "samples are timer-based. \"CPU µs/tx\" is backend CPU per transaction "
              "(samples / rate / transactions in the window). Frames `[postgres]` are static "
              "functions of the stripped Debian binary.\n")
    summary = []
    loaded = []
    for mp in metas:
        with open(mp) as f:
            m = json.load(f)
        tag = os.path.basename(mp)[:-5]
        stacks = read_folded(os.path.join(prof_dir, tag + ".folded"))
        total = sum(n for _, n in stacks)
        if not total:
            continue
        secs = m.get("perf_secs") or 0
        cpu_us = (total / m["hz"]) / (m["tps"] * secs) * 1e6 if m.get("tps") and secs else None
        flame(stacks, f"{tag}: {m.get('tps') or 0:,.0f} tps", os.path.join(prof_dir, tag + ".png"))
        incl, self_ = frame_totals(stacks)
        summary.append((tag, m, total, cpu_us))
        loaded.append((tag, m, stacks))
        md.append(f"### {tag}\n")
        md.append((f"Recorded {m['started']}; " if m.get("started") else "")
                  + f"{m.get('tps') or 0:,.0f} tps; {total} samples"
                  + (f"; **{cpu_us:.1f} CPU µs/tx** in the backend" if cpu_us else "") + ".\n")
        md.append(f"![flame graph](profiles/{tag}.png)\n")
        md.append("| inclusive | function | | self | function |\n|---:|---|---|---:|---|")
        top_incl = [(f, n) for f, n in sorted(incl.items(), key=lambda kv: -kv[1])
                    if f not in GENERIC][:18]
        top_self = sorted(self_.items(), key=lambda kv: -kv[1])[:18]
        for i in range(max(len(top_incl), len(top_self))):
            a = top_incl[i] if i < len(top_incl) else ("", 0)
            b = top_self[i] if i < len(top_self) else ("", 0)
            md.append(f"| {100 * a[1] / total:.1f}% | `{a[0]}` | | {100 * b[1] / total:.1f}% | `{b[0]}` |"
                      if a[0] else f"| | | | {100 * b[1] / total:.1f}% | `{b[0]}` |")
        md.append("")
    if loaded:
        category_tables(d, md, loaded)
    if summary:
        md.append("Backend CPU per transaction, from the profiles (perf's own overhead included):\n")
        md.append("| profile | tps | CPU µs/tx |\n|---|---:|---:|")
        for tag, m, total, cpu_us in summary:
            md.append(f"| {tag} | {m.get('tps') or 0:,.0f} | {cpu_us:.1f} |" if cpu_us
                      else f"| {tag} | {m.get('tps') or 0:,.0f} | – |")
        md.append("")


# ---------------------------------------------------------------------------------------------
# the report

def targets(d):
    """[(target, where, measured ratio, CPU-cost ratio, threshold, met)]"""
    out = []
    syncs = d.values("sync", "main")
    specs = [("replay: extension ≥ 3× reference", "replay", "ref", 3.0),
             ("replay: extension ≥ 0.8× floor SELECT (aim 0.9)", "replay", "floor", 0.8),
             ("new: extension ≥ 0.9× floor INSERT+UPDATE", "new", "floor", 0.9),
             ("new: extension ≥ 0.95× reference", "new", "ref", 0.95)]
    for title, w, other, th in specs:
        for s in syncs:
            for c in (4, 16):
                r = d.ratio(w, "ext", other, c, s)
                if r is not None:
                    out.append((title, f"c={c} sync={s}", r, d.cost_ratio(w, "ext", other, c, s), th))
    series = size_series(d)
    for (w, v, c, s), pts in sorted(series.items()):
        if v != "ext" or len(pts) < 2 or pts[0][0] != 0:
            continue
        big = max(pts)
        if big[0] < 10_000_000:
            continue
        c0, c1 = d.cost(w, v, c, s, 0), d.cost(w, v, c, s, big[0])
        out.append((f"{w}: extension at {human(big[0])} rows ≥ 0.7× at 0 rows", f"c={c} sync={s}",
                    big[1] / pts[0][1], (c0 / c1) if c0 and c1 else None, 0.7))
    return [(t, wh, v, cr, th, v >= th) for t, wh, v, cr, th in out]


def main_tables(d, md):
    syncs = d.values("sync", "main")
    clients = d.values("clients", "main")
    for w in ORDER:
        rows = [r for r in d.rows if r["phase"] == "main" and r["workload"] == w]
        if not rows or w == "call":
            continue
        md.append(f"### {w}: {TITLES[w]}\n")
        md.append("| sync | clients | extension tps | reference tps | floor tps | ext/ref | ext/floor "
                  "| p50 / p99 ms ext | ref | floor | server CPU µs/tx ext / ref / floor |")
        md.append("|---|---:|---:|---:|---:|---:|---:|---|---|---|---|")
        for s in syncs:
            for c in clients:
                if not any(d.get(w, v, c, s) for v in ("ext", "ref", "floor")):
                    continue

                def lat(v):
                    r = d.get(w, v, c, s)
                    if not r or r["p50_ms"] is None:
                        return "–"
                    return f"{r['p50_ms']:.2f} / {r['p99_ms']:.2f}"
                md.append(f"| {s} | {c} | {fmt_tps(d.tps(w, 'ext', c, s))} | {fmt_tps(d.tps(w, 'ref', c, s))} "
                          f"| {fmt_tps(d.tps(w, 'floor', c, s))} | {fmt_ratio(d.ratio(w, 'ext', 'ref', c, s))} "
                          f"| {fmt_ratio(d.ratio(w, 'ext', 'floor', c, s))} | {lat('ext')} | {lat('ref')} | {lat('floor')} "
                          f"| {' / '.join(fmt_cost(d.cost(w, v, c, s)) for v in ('ext', 'ref', 'floor'))} |")
        md.append("")


def write_report(d, images):
    m = d.meta
    md = ["# Benchmark report: the extension, the PL/pgSQL reference and the bare-SQL floor\n"]
    main_rows = [r for r in d.raw if r["tps"] is not None]
    loads = [r["load1_end"] for r in main_rows if r["load1_end"] is not None]
    others = [r["other_cores"] for r in main_rows if r["other_cores"] is not None]
    started, finished = m.get("started", "?"), m.get("finished", "?")
    md.append(f"Generated by `bench/run-all.sh{' ' + ' '.join(m.get('args', [])) if m.get('args') else ''}` "
              f"from `{m.get('branch', '?')}` at {m.get('commit', '?')}{' (with local changes)' if m.get('dirty') else ''}, "
              f"{started} to {finished}.\n")
    md.append("| machine | |\n|---|---|")
    md.append(f"| CPU | {m.get('nproc', '?')} × {m.get('cpu', '?')} |")
    md.append(f"| memory | {m.get('mem_gb', '?')} GB |")
    md.append(f"| kernel | {m.get('kernel', '?')} |")
    md.append(f"| Postgres | {m.get('postgres', '?')}, shared_buffers 1GB, fsync on, max_wal_size 8GB, "
              "a CHECKPOINT before every step |")
    if loads:
        md.append(f"| load average (1 min) | before {m.get('load_before', '?')}; during the steps: "
                  f"median {statistics.median(loads):.1f}, min {min(loads):.1f}, max {max(loads):.1f}; "
                  f"after {m.get('load_after', '?')} |")
    if others:
        md.append(f"| CPU used by other processes during the steps | median {statistics.median(others):.2f} "
                  f"cores, max {max(others):.2f} (of {m.get('nproc', '?')}; from /proc/stat minus this "
                  "cluster and pgbench) |")
    md.append("")
    if m.get("quick"):
        md.append("**Quick mode: short steps and small sizes, for checking the suite, not for numbers.**\n")
    if others and statistics.median(others) > 0.3:
        md.append(f"**The machine was shared:** other processes used a median {statistics.median(others):.2f} "
                  "of the cores during the steps, so absolute numbers are low and noisy. The three "
                  "contenders of a row ran back to back, under about the same load; compare ratios, "
                  "not absolute throughput.\n")

    tg = targets(d)
    if tg:
        md.append("## Targets\n")
        md.append("| target | where | throughput ratio | status | server CPU-cost ratio |\n|---|---|---:|---|---:|")
        for t, wh, v, cr, th, ok in tg:
            md.append(f"| {t} | {wh} | {v:.2f} | {'met' if ok else '**missed**'} | {fmt_ratio(cr)} |")
        md.append("")
        md.append("*Throughput ratio* is what the target is about. *Server CPU-cost ratio* is the "
                  "other side's server CPU per transaction over the extension's (the cluster's "
                  "processes, measured from /proc): the throughput ratio to expect where the "
                  "server's CPU is the limit; it moves much less than throughput when other "
                  "processes compete for the cores. With `synchronous_commit=on`, the WAL flush, "
                  "not the CPU, limits writing workloads.\n")
        missed = [x for x in tg if not x[5]]
        if missed:
            md.append(f"{len(missed)} of {len(tg)} missed; see *Analysis* for why.\n")
        else:
            md.append(f"All {len(tg)} met.\n")

    md.append("## Results\n")
    if d.rounds > 1:
        md.append(f"Every cell ran {d.rounds} times (contender order rotating); the tables give "
                  "medians, and the spread of each contender's throughput is in results.csv.\n")
    md.append("Transactions per second (pgbench `-M prepared`, unix socket, -j ≤ 2) and latency "
              "percentiles from pgbench's per-transaction log; ratios are throughput ratios "
              "from the same run. Size 0 means only the fixtures are in the table (10,000 "
              "replay keys and 1,000 active keys).\n")
    for img in ("throughput.png", "ratios.png", "latency.png"):
        if img in images:
            md.append(f"![{img}]({img})\n")
    main_tables(d, md)

    ao = [r for r in d.rows if r["workload"] == "active_open" and r["variant"] != "ext"]
    if ao:
        md.append("In *active_open* the reference and the floor cannot answer: their `INSERT ... ON "
                  "CONFLICT DO NOTHING` waits for the holder's transaction (held for the whole step "
                  "plus one second) and every client is stuck until it ends; they ran once per sync mode "
                  "as a short probe (" + ", ".join(
                      f"{r['variant']} c={r['clients']} sync={r['sync']}: {r['transactions']} transactions in "
                      f"{r['duration_s']} s, p50 {r['p50_ms']} ms" for r in ao if r["tps"] is not None)
                  + "). The extension answers `processing_active` at once.\n")

    call_rows = [r for r in d.rows if r["workload"] == "call"]
    md.append("### call: idem_call against the same three steps as separate statements\n")
    skipped = os.path.join(d.dir, "skipped.txt")
    if call_rows:
        md.append("| sync | clients | idem_call tps | three statements tps | ratio |\n|---|---:|---:|---:|---:|")
        for s in d.values("sync", "main"):
            for c in d.values("clients", "main"):
                if d.get("call", "one", c, s) or d.get("call", "steps", c, s):
                    md.append(f"| {s} | {c} | {fmt_tps(d.tps('call', 'one', c, s))} | "
                              f"{fmt_tps(d.tps('call', 'steps', c, s))} | "
                              f"{fmt_ratio(d.ratio('call', 'one', 'steps', c, s))} |")
        md.append("")
    elif os.path.exists(skipped):
        md.append("Skipped: `idem_call` does not exist in this build (it is being built on another "
                  "branch). The workload runs by itself once it is merged: `bench/scripts/call.one.sql` "
                  "against `call.steps.sql`.\n")

    series = size_series(d)
    if any(len(v) > 1 for v in series.values()):
        md.append("## Table size\n")
        if "table_size.png" in images:
            md.append("![table_size.png](table_size.png)\n")
        sizes = sorted({p[0] for v in series.values() for p in v})
        md.append("| workload | contender | clients | sync | " + " | ".join(f"{human(s)} rows" for s in sizes)
                  + " | largest / 0 |")
        md.append("|---|---|---:|---|" + "---:|" * len(sizes) + "---:|")
        for (w, v, c, s), pts in sorted(series.items()):
            by = dict(pts)
            ratio = (by[max(by)] / by[0]) if 0 in by and by[0] and len(by) > 1 else None
            md.append(f"| {w} | {NAMES[v]} | {c} | {s} | " + " | ".join(fmt_tps(by.get(z)) for z in sizes)
                      + f" | {fmt_ratio(ratio)} |")
        md.append("")
        lp = os.path.join(d.dir, "loads.csv")
        if os.path.exists(lp):
            md.append("Loading (INSERT ... SELECT generate_series into each of the three tables, then "
                      "VACUUM ANALYZE and CHECKPOINT):\n")
            with open(lp) as f:
                for line in f:
                    size, took, sizes_ = line.rstrip("\n").split(",", 2)
                    md.append(f"- {human(size)} rows per table: {float(took):.0f} s; {sizes_}")
            md.append("")

    hv = os.path.join(d.dir, "hash_vs_sha256.txt")
    if os.path.exists(hv):
        lines = [ln for ln in open(hv).read().splitlines() if ln.count("|") >= 5]
        if lines:
            md.append("## Hash micro-benchmark (bench/hash_vs_sha256.sql)\n")
            md.append("In one backend, over a table of ~1 KB order documents (jsonb), rounds "
                      "alternating; median per variant:\n")
            md.append("| variant | median ms | best ms | ns/doc | ratio to sha256(doc::text) | "
                      "excluding the scan |\n|---|---:|---:|---:|---:|---:|")
            for ln in lines:
                md.append("| " + " | ".join(ln.split("|")) + " |")
            md.append("")

    profile_section(d, md)

    # The analysis is written by hand in docs/benchmarks.md (section "## Analysis"), from the
    # profiles of a full run; it is carried here so that the report explains its misses.
    docs = os.path.join(os.path.dirname(BENCH), "docs", "benchmarks.md")
    if os.path.exists(docs):
        text = open(docs).read()
        start = text.find("\n## Analysis")
        if start >= 0:
            end = text.find("\n## ", start + 5)
            md.append(text[start + 1:end if end >= 0 else len(text)].rstrip() + "\n")
            md.append("*(From docs/benchmarks.md, written from the profiles and runs it names; "
                      "the figures above are this run's.)*\n")

    md.append("## Method\n")
    md.append("""- One throw-away cluster (`initdb` under `/var/tmp`, unix socket, private port), the
  extension in `shared_preload_libraries`; `synchronous_commit` is set per pgbench session
  (`PGOPTIONS`), so both series run on the same cluster and data.
- Three tables of one shape: `idempotency.requests` (extension), `ref.requests` and
  `floor.requests` (`LIKE idempotency.requests INCLUDING ALL`: same constraints and indexes).
- Keys are spread over the whole primary key; new keys are random 13-18 digit numbers,
  a different `--random-seed` per step. Replays pick one of 10,000 completed keys, *active* one
  of 1,000 committed claims with a live lease.
- Steps that write (new, mixed, active_open, call) at size 0 start from a table reset to its
  fixtures; every step starts after a `CHECKPOINT`. The three contenders of a row run back to
  back. After each step the table's insert/update counters are checked against the workload
  (column `check` of results.csv): a new key must insert and update exactly one row per
  transaction, a replay must write nothing.
- Latency percentiles come from pgbench's per-transaction log. pgbench 15 reuses one clock
  reading for the clients of a thread, so below ~0.1 ms they are coarse (in the hash floor,
  most transactions log 0 µs); results.csv also has the exact average (`lat_avg_ms`).
- Scripts: `bench/scripts/<workload>.<contender>.sql`; the reference: `bench/reference_plpgsql.sql`;
  schema and fixtures: `bench/setup.sql`.
""")
    bad = [r for r in d.raw if r.get("note") or r.get("check") == "MISMATCH"]
    if bad:
        md.append("## Notes on steps\n")
        for r in bad:
            md.append(f"- step {r['step']} {r['workload']} {r['variant']} c={r['clients']} sync={r['sync']} "
                      f"size={human(r['size'])}: {r.get('note') or ''} {'(check: ' + r['check'] + ')' if r.get('check') == 'MISMATCH' else ''}")
        md.append("")
    with open(os.path.join(d.dir, "report.md"), "w") as f:
        f.write("\n".join(md))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", default=os.path.join(BENCH, "results"))
    a = ap.parse_args()
    d = Data(a.results)
    images = [x for x in (plot_throughput(d, a.results), plot_ratios(d, a.results),
                          plot_latency(d, a.results), plot_sizes(d, a.results)) if x]
    write_report(d, images)
    print(os.path.join(a.results, "report.md"))


if __name__ == "__main__":
    main()
