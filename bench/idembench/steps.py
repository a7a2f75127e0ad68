"""One measured step: reset the contender's table when the workload needs a known state,
CHECKPOINT, read the table's insert/update counters, run pgbench, read the counters again and
check them against the workload, and append the step's row to results.csv."""

import csv
import glob
import os
import subprocess
import time

from .cluster import cpu_delta, cpu_snapshot, load1
from .common import SCRIPTS, human
from .stats import parse_pgbench, percentile, read_latencies
from .workloads import FIELDS, TABLES, WORKLOADS


class Steps:
    """The step methods of [suite.Suite]: it provides self.a (arguments), self.cl (Cluster),
    self.work, self.csv_path, self.payload, self.size and the step counters."""

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
