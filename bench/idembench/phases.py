"""Phases of a run besides the main matrix: growing the tables to a size, and the hash
micro-benchmark (bench/hash_vs_sha256.sql)."""

import os
import subprocess
import time

from .common import BENCH, human, log


class Phases:
    """Methods of [suite.Suite] (self.a, self.cl, self.results, self.size)."""

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
