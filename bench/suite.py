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

import argparse
import csv
import glob
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(BENCH, "scripts")

TABLES = {
    "ext": "idempotency.requests",
    "ref": "ref.requests",
    "floor": "floor.requests",
    "one": "idempotency.requests",
    "steps": "idempotency.requests",
}

# variant -> pgbench -f arguments (script[@weight]).
WORKLOADS = {
    "new": {
        "title": "new key: claim + complete in one transaction",
        "variants": {v: [f"new.{v}.sql"] for v in ("ext", "ref", "floor")},
        "reset": True,
        "expect": "new",
    },
    "replay": {
        "title": "replay of a completed key",
        "variants": {v: [f"replay.{v}.sql"] for v in ("ext", "ref", "floor")},
        "reset": False,
        "expect": "read",
    },
    "active": {
        "title": "claim while another worker's committed claim holds the key (live lease)",
        "variants": {v: [f"active.{v}.sql"] for v in ("ext", "ref", "floor")},
        "reset": False,
        "expect": "read",
    },
    "active_open": {
        "title": "claim while another session's claim of the key is not committed yet",
        "variants": {v: [f"active_open.{v}.sql"] for v in ("ext", "ref", "floor")},
        "reset": True,
        "expect": "held",
        "holder": True,
    },
    "mixed": {
        "title": "mixed: 90% replay, 10% new (claim + complete)",
        "variants": {v: [f"replay.{v}.sql@9", f"new.{v}.sql@1"] for v in ("ext", "ref", "floor")},
        "reset": True,
        "expect": "mixed",
    },
    "hash": {
        "title": "hash a ~1 KB JSON request body",
        "variants": {v: [f"hash.{v}.sql"] for v in ("ext", "ref", "floor")},
        "reset": False,
        "expect": "none",
        "payload": True,
        "sync": ["on"],
    },
    "call": {
        "title": "idem_call (one statement) against claim + function + complete as three statements",
        "variants": {"one": ["call.one.sql"], "steps": ["call.steps.sql"]},
        "reset": True,
        "expect": "new",
        "requires": "idem_call",
    },
}

FIELDS = [
    "step", "round", "phase", "workload", "variant", "clients", "sync", "size", "rows_at_start",
    "duration_s", "tps", "transactions", "failed", "lat_avg_ms", "p50_ms", "p90_ms", "p95_ms",
    "p99_ms", "p999_ms", "max_ms", "server_us_tx", "client_us_tx", "ins", "upd", "check",
    "load1_start", "load1_end", "other_cores", "steal_cores", "seed", "started_at", "note",
]


def log(msg):
    print(msg, flush=True)


class Cluster:
    def __init__(self, a):
        self.bindir = a.bindir
        self.host = a.host
        self.port = str(a.port)
        self.db = a.db
        self.datadir = a.datadir

    def conn_args(self):
        return ["-h", self.host, "-p", self.port, "-U", "postgres"]

    def psql(self, sql, db=None, capture=True, extra=(), env=None, check=True):
        cmd = [os.path.join(self.bindir, "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
               *self.conn_args(), "-d", db or self.db, *extra]
        if sql is not None:
            cmd += ["-c", sql]
        r = subprocess.run(cmd, capture_output=capture, text=True, env=env)
        if check and r.returncode != 0:
            raise RuntimeError(f"psql failed ({r.returncode}): {sql}\n{r.stderr}")
        return (r.stdout or "").strip()

    def postmaster_pid(self):
        with open(os.path.join(self.datadir, "postmaster.pid")) as f:
            return int(f.readline())


# ---------------------------------------------------------------------------------------------
# CPU accounting: how much CPU did processes other than this cluster and our own children use?

HZ = os.sysconf("SC_CLK_TCK")


def proc_stat_fields(pid):
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    return s[s.rindex(")") + 2:].split()  # fields from 3 (state) on


def cpu_snapshot(cluster):
    with open("/proc/stat") as f:
        cpu = [int(x) for x in f.readline().split()[1:]]
    busy = cpu[0] + cpu[1] + cpu[2] + cpu[5] + cpu[6]  # user nice system irq softirq
    steal = cpu[7] if len(cpu) > 7 else 0
    server = 0
    try:
        pm = cluster.postmaster_pid()
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                f = proc_stat_fields(d)
            except OSError:
                continue
            if int(f[1]) == pm:
                server += int(f[11]) + int(f[12])  # a live backend or auxiliary process
        f = proc_stat_fields(pm)  # after the children: one reaped meanwhile is counted here
        server += sum(int(x) for x in f[11:15])  # utime stime cutime cstime (reaped children)
    except OSError:
        pass
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)  # pgbench (and psql) after they exit
    client = round((ru.ru_utime + ru.ru_stime) * HZ)
    return time.monotonic(), busy, steal, server, client


def cpu_delta(a, b):
    """(other processes' cores, steal cores, server CPU seconds, client CPU seconds)"""
    wall = b[0] - a[0]
    if wall <= 0:
        return None, None, None, None
    server, client = (b[3] - a[3]) / HZ, (b[4] - a[4]) / HZ
    other = (b[1] - a[1]) / HZ - server - client
    return max(0.0, other / wall), (b[2] - a[2]) / HZ / wall, server, client


def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


# ---------------------------------------------------------------------------------------------
# pgbench

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


class Suite:
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

    # -- planning -----------------------------------------------------------------------------

    def plan(self):
        """Steps as (phase, workload, variant, clients, sync, size, duration, round)."""
        a = self.a
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

    # -- one step ------------------------------------------------------------------------------

    def table_counters(self, table):
        out = self.cl.psql(
            f"SELECT n_tup_ins, n_tup_upd FROM pg_stat_user_tables WHERE relid = '{table}'::regclass")
        ins, upd = out.split("|")
        return int(ins), int(upd)

    def prepare_table(self, table, reset):
        sql = []
        if reset and self.size == 0:
            sql.append(f"SELECT bench.reset('{table}')")
        sql += ["CHECKPOINT", "SELECT pg_stat_force_next_flush()"]
        cmd = []
        for s in sql:
            cmd += ["-c", s]
        self.cl.psql(None, extra=cmd)
        return self.table_counters(table)

    def start_holder(self, variant, hold):
        cmd = [os.path.join(self.cl.bindir, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
               "-v", f"hold={hold}", *self.cl.conn_args(), "-d", self.cl.db,
               "-f", os.path.join(SCRIPTS, f"active_open.holder.{variant}.sql")]
        env = dict(os.environ, PGAPPNAME="bench-holder")
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env=env)
        for _ in range(200):
            n = self.cl.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                             "'bench-holder' AND query LIKE 'SELECT pg_sleep%' AND state = 'active'")
            if n == "1":
                return p
            time.sleep(0.05)
        p.kill()
        raise RuntimeError("the holder session did not start")

    def run_pgbench(self, files, clients, sync, duration, seed, tag, extra_env=None, on_start=None):
        prefix = os.path.join(self.work, "pgbench", tag)
        for old in glob.glob(prefix + ".[0-9]*"):
            os.unlink(old)
        cmd = [os.path.join(self.cl.bindir, "pgbench"), "-n", "-M", "prepared",
               *self.cl.conn_args(), "-c", str(clients), "-j", str(min(clients, self.a.threads)),
               "-T", str(duration), f"--random-seed={seed}", "-l", f"--log-prefix={prefix}"]
        for f in files:
            cmd += ["-f", os.path.join(SCRIPTS, f)]
        if any(f.startswith("hash.") for f in files):
            cmd += ["-D", f"payload={self.payload}"]
        cmd.append(self.cl.db)
        env = dict(os.environ, PGOPTIONS=f"-c synchronous_commit={sync}", PGAPPNAME="pgbench")
        if extra_env:
            env.update(extra_env)
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=env, cwd=self.work)
        if on_start:
            on_start()
        out, _ = p.communicate()
        with open(prefix + ".out", "w") as f:  # kept in WORK for a look at a step afterwards
            f.write(" ".join(cmd) + "\n" + out)
        lat = read_latencies(prefix)
        return p.returncode, out, lat

    def step(self, phase, name, variant, clients, sync, size, duration, rnd=1):
        w = WORKLOADS[name]
        self.step_no += 1
        seed = self.a.seed + self.step_no
        table = TABLES[variant]
        label = (f"[{self.step_no:3d}/{self.total}] {name:<11} {variant:<5} c={clients:<2} "
                 f"sync={sync:<3} size={human(size):<4} T={duration}s"
                 + (f" r{rnd}" if self.a.rounds > 1 else ""))
        print(label + " ...", end="", flush=True)
        t0 = time.monotonic()
        row = {k: "" for k in FIELDS}
        row.update(step=self.step_no, round=rnd, phase=phase, workload=name, variant=variant,
                   clients=clients, sync=sync, size=size, duration_s=duration, seed=seed,
                   started_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
        notes = []
        try:
            before = self.prepare_table(table, w.get("reset"))
            row["rows_at_start"] = self.cl.psql(f"SELECT count(*) FROM {table}") \
                if size == 0 else self.cl.psql(
                    f"SELECT reltuples::bigint FROM pg_class WHERE oid = '{table}'::regclass")
            holder = None
            if w.get("holder"):
                holder = self.start_holder(variant, duration + 1)
            snap0 = cpu_snapshot(self.cl)
            row["load1_start"] = load1()
            rc, out, lat = self.run_pgbench(w["variants"][variant], clients, sync, duration, seed,
                                            f"step{self.step_no}")
            self.wait_backends_gone()
            snap1 = cpu_snapshot(self.cl)
            row["load1_end"] = load1()
            if holder:
                _, err = holder.communicate(timeout=duration + 60)
                if holder.returncode != 0:
                    notes.append("holder failed: " + err.strip()[:200])
            oc, st, server_s, client_s = cpu_delta(snap0, snap1)
            row["other_cores"] = f"{oc:.2f}" if oc is not None else ""
            row["steal_cores"] = f"{st:.2f}" if st is not None else ""
            res = parse_pgbench(out)
            if res["transactions"] and server_s is not None:
                row["server_us_tx"] = f"{server_s / res['transactions'] * 1e6:.1f}"
                row["client_us_tx"] = f"{client_s / res['transactions'] * 1e6:.1f}"
            if rc != 0 or res["tps"] is None:
                notes.append("pgbench failed: " + " | ".join(out.strip().splitlines()[-3:])[:300])
            row["tps"] = f"{res['tps']:.1f}" if res["tps"] is not None else ""
            row["transactions"] = res["transactions"] if res["transactions"] is not None else ""
            row["failed"] = res["failed"]
            row["lat_avg_ms"] = res["lat_avg_ms"] if res["lat_avg_ms"] is not None else ""
            for key, q in (("p50_ms", .5), ("p90_ms", .9), ("p95_ms", .95), ("p99_ms", .99),
                           ("p999_ms", .999), ("max_ms", 1.0)):
                v = percentile(lat, q)
                row[key] = f"{v / 1000:.3f}" if v is not None else ""
            if w["expect"] != "none":
                res["clients"] = clients
                ok, ins, upd = self.check(table, before, w["expect"], res, variant)
                row["ins"], row["upd"] = ins, upd
                row["check"] = "ok" if ok else "MISMATCH"
                if not ok:
                    notes.append(f"unexpected writes for {w['expect']}: ins={ins} upd={upd}")
            else:
                row["check"] = "n/a"
        except Exception as e:  # a broken step is recorded, the suite goes on
            notes.append(f"error: {e}".replace("\n", " ")[:300])
        row["note"] = "; ".join(notes)
        with open(self.csv_path, "a", newline="") as f:
            csv.DictWriter(f, FIELDS).writerow(row)
        self.done_time += time.monotonic() - t0
        eta = self.done_time / self.step_no * (self.total - self.step_no)
        if row["tps"]:
            msg = (f" {float(row['tps']):>8.0f} tps  p50 {row['p50_ms']} p99 {row['p99_ms']} ms  "
                   f"server {row['server_us_tx']} µs/tx  load {row['load1_end']}  "
                   f"others {row['other_cores']} cores  {row['check']}")
        else:
            msg = " FAILED"
        print(f"{msg}  (eta {eta / 60:.0f} min){'  ' + row['note'] if row['note'] else ''}",
              flush=True)
        return row

    def wait_backends_gone(self):
        """pgbench has exited; let its backends finish exiting so their CPU time is reaped."""
        for _ in range(50):
            if self.cl.psql("SELECT count(*) FROM pg_stat_activity "
                            "WHERE application_name = 'pgbench'") == "0":
                break
            time.sleep(0.05)
        time.sleep(0.1)

    def check(self, table, before, expect, res, variant):
        n = res["transactions"] or 0
        if expect == "new":
            want = (n, n)
        elif expect == "read":
            want = (0, 0)
        elif expect == "held":
            want = None  # the holder inserts (and commits) its one row
        elif expect == "mixed":
            new = sum(c for s, c in res["scripts"].items() if s.startswith("new."))
            want = (new, new)
        else:
            want = None
        # When -T runs out, pgbench may drop a transaction the server still commits: up to one
        # per client more than pgbench counted.
        slack = res.get("clients", 0)
        deadline = time.monotonic() + 5
        while True:
            after = self.table_counters(table)
            ins, upd = after[0] - before[0], after[1] - before[1]
            if want is None:
                ok = ins <= 1 and upd == 0
            elif want == (0, 0):
                ok = (ins, upd) == want
            else:
                ok = ins == upd and want[0] <= ins <= want[0] + slack
            if ok or time.monotonic() > deadline:
                return ok, ins, upd
            time.sleep(0.2)

    # -- phases --------------------------------------------------------------------------------

    def has_function(self, name):
        return self.cl.psql(f"SELECT count(*) FROM pg_proc WHERE proname = '{name}'") != "0"

    def load_size(self, size):
        """Grow every table to `size` filler rows (ids 100001..100000+size), in chunks."""
        have = int(self.cl.psql("SELECT coalesce(max(x), 0) FROM bench.filled") or 0)
        if size <= have:
            self.size = size
            return
        chunk = 1_000_000
        t0 = time.monotonic()
        lo = have + 1
        while lo <= size:
            # One chunk into the three tables at once (a psql each), then the next chunk.
            hi = min(size, lo + chunk - 1)
            t1 = time.monotonic()
            procs = [subprocess.Popen(
                [os.path.join(self.cl.bindir, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
                 *self.cl.conn_args(), "-d", self.cl.db, "-c", "SET synchronous_commit = off",
                 "-c", f"SELECT bench.fill('{table}', {100000 + lo}, {100000 + hi})"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                for table in ("idempotency.requests", "ref.requests", "floor.requests")]
            for p in procs:
                _, err = p.communicate()
                if p.returncode != 0:
                    raise RuntimeError(f"loading failed: {err.strip()}")
            log(f"  load rows {human(lo)}..{human(hi)} into the three tables: "
                f"{time.monotonic() - t1:.1f}s")
            lo = hi + 1
        t1 = time.monotonic()
        self.cl.psql(None, extra=["-c", "VACUUM ANALYZE idempotency.requests",
                                  "-c", "VACUUM ANALYZE ref.requests",
                                  "-c", "VACUUM ANALYZE floor.requests", "-c", "CHECKPOINT"])
        self.cl.psql(f"INSERT INTO bench.filled VALUES ({size})")
        took = time.monotonic() - t0
        sizes = self.cl.psql(
            "SELECT string_agg(format('%s %s', c, pg_size_pretty(pg_total_relation_size(c))), ', ') "
            "FROM unnest(array['idempotency.requests', 'ref.requests', 'floor.requests']::regclass[]) c")
        log(f"  loaded {human(size)} rows per table in {took:.0f}s (vacuum+checkpoint "
            f"{time.monotonic() - t1:.0f}s): {sizes}")
        with open(os.path.join(self.results, "loads.csv"), "a") as f:
            f.write(f"{size},{took:.1f},{sizes}\n")
        self.size = size

    def hash_micro(self):
        a = self.a
        log(f"hash_vs_sha256.sql: rows={a.hash_rows} rounds={a.hash_rounds} (one backend)")
        t0 = time.monotonic()
        out = self.cl.psql(None, capture=True, extra=[
            "-P", "pager=off", "-v", f"rows={a.hash_rows}", "-v", f"rounds={a.hash_rounds}",
            "-f", os.path.join(BENCH, "hash_vs_sha256.sql")], check=False)
        # -At output: rows of a|b|c; keep it raw, the report renders it.
        with open(os.path.join(self.results, "hash_vs_sha256.txt"), "w") as f:
            f.write(out + "\n")
        log(f"  done in {time.monotonic() - t0:.0f}s")

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


def human(n):
    n = int(n)
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def parse_size(s):
    s = s.strip().lower()
    mult = 1
    if s.endswith("m"):
        mult, s = 1_000_000, s[:-1]
    elif s.endswith("k"):
        mult, s = 1000, s[:-1]
    return int(float(s) * mult)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
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


if __name__ == "__main__":
    main()
