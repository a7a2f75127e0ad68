"""The running cluster (run-all.sh starts it) reached through psql, and CPU accounting: how
much CPU this cluster, our pgbench clients and every other process used during a step."""

import os
import resource
import subprocess
import time


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
