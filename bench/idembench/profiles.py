"""perf record of chosen steps' pgbench backends, folded to stacks for the report's flame
graphs."""

import json
import os
import re
import signal
import subprocess
import time

from .common import log
from .stats import parse_pgbench
from .workloads import TABLES, WORKLOADS


class Profiling:
    """The profile method of [suite.Suite] (uses Steps.prepare_table and Steps.run_pgbench)."""

    def profile(self, name, variant, clients, sync, duration):
        """perf record (cpu-clock, DWARF call graphs) of the pgbench backends of one step."""
        w = WORKLOADS[name]
        tag = f"{name}.{variant}.c{clients}.sync-{sync}"
        out_dir = os.path.join(self.results, "profiles")
        os.makedirs(out_dir, exist_ok=True)
        data = os.path.join(self.work, f"perf-{tag}.data")
        table = TABLES[variant]
        self.prepare_table(table, w.get("reset"))
        perf = {}

        def attach():
            pids = ""
            for _ in range(100):
                time.sleep(0.1)
                pids = self.cl.psql("SELECT string_agg(pid::text, ',') FROM pg_stat_activity "
                                    "WHERE application_name = 'pgbench'")
                if pids and len(pids.split(",")) == clients:
                    break
            time.sleep(0.5)
            # No workload command: perf samples the backends until it gets SIGINT (below),
            # which is also how it ends cleanly if they exit first.
            perf["p"] = subprocess.Popen(
                ["perf", "record", "-q", "-F", "499", "-e", "cpu-clock", "--call-graph",
                 "dwarf,16384", "-p", pids, "-o", data],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            perf["t0"] = time.monotonic()
            time.sleep(max(2, duration - 3))
            perf["secs"] = time.monotonic() - perf["t0"]
            perf["p"].send_signal(signal.SIGINT)

        print(f"  profile {tag} ...", end="", flush=True)
        rc, out, _ = self.run_pgbench(w["variants"][variant], clients, sync, duration,
                                      self.a.seed, f"prof-{tag}", on_start=attach)
        p = perf.get("p")
        if p is None:
            log(" perf did not start")
            return
        _, err = p.communicate()
        res = parse_pgbench(out)
        if not os.path.exists(data) or os.path.getsize(data) == 0:
            log(f" perf record failed ({p.returncode}): {err.strip()[:300]}")
            return
        folded = os.path.join(out_dir, f"{tag}.folded")
        samples = fold_perf(data, folded)
        os.unlink(data)
        with open(os.path.join(out_dir, f"{tag}.json"), "w") as f:
            json.dump({"workload": name, "variant": variant, "clients": clients, "sync": sync,
                       "tps": res["tps"], "samples": samples, "hz": 499,
                       "perf_secs": round(perf["secs"], 2),
                       "started": time.strftime("%Y-%m-%dT%H:%M:%S")}, f)
        log(f" {res['tps'] or 0:.0f} tps, {samples} samples")


def fold_perf(data, folded):
    """perf script -> folded stacks ("root;...;leaf count"), postgres processes only."""
    p = subprocess.Popen(["perf", "script", "-i", data, "--no-inline"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, errors="replace")
    counts = {}
    total = 0
    frames = None
    comm_ok = False

    def flush():
        nonlocal total
        if frames is not None and comm_ok and frames:
            key = ";".join(reversed(frames))
            counts[key] = counts.get(key, 0) + 1
            total += 1

    for line in p.stdout:
        if not line.strip():
            flush()
            frames = None
            continue
        if not line[0].isspace():
            flush()
            comm_ok = line.startswith("postgres")
            frames = []
            continue
        if frames is None:
            continue
        parts = line.strip().split(" ", 1)
        if len(parts) < 2:
            continue
        rest = parts[1]
        m = re.match(r"(.*) \(([^)]*)\)$", rest)
        sym, dso = (m.group(1), m.group(2)) if m else (rest, "")
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
        if sym == "[unknown]":
            sym = f"[{os.path.basename(dso)}]"
        elif dso.startswith("[kernel"):
            sym += "_[k]"
        sym = sym.replace(";", ":")
        frames.append(sym)
    flush()
    p.wait()
    with open(folded, "w") as f:
        for k, v in sorted(counts.items(), key=lambda kv: -kv[1]):
            f.write(f"{k} {v}\n")
    return total
