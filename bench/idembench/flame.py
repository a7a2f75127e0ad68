"""Flame graphs and cost categories from the folded perf profiles (results/profiles/)."""

import glob
import json
import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from .data import NAMES, fmt_cost  # noqa: E402


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
