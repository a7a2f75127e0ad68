"""The report's PNG plots: throughput, ratios, table-size series and latency."""

import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .data import COLORS, NAMES, ORDER  # noqa: E402


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
