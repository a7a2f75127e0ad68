"""The round-trip benchmark of the HTTP adapters (a benchmark, not a test): per framework, the
example app's POST /plain/payments (the insert in its own transaction, no adapter) side by side
with POST /payments (the same insert through the adapter), new keys and replays, in CPU per
request: the app's process plus the cluster's backends (live ones, and the exited ones the
postmaster reaped). Run by bench/http-roundtrips.sh, which says what it needs."""

import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
DB = os.environ["DATABASE_URL"]
N = int(os.environ.get("IDEM_BENCH_N", "1000"))
ROUNDS = int(os.environ.get("IDEM_BENCH_ROUNDS", "3"))
TICK = os.sysconf("SC_CLK_TCK")
BODY = json.dumps({"order_id": "o-1", "amount": 12.5}).encode()
FRAMEWORKS = os.environ.get("IDEM_BENCH_FRAMEWORKS", "fastapi,flask,django,express").split(",")


def cpu(pid: int, children: bool = False) -> float:
    """Seconds of CPU of a process (and, children=True, of its reaped children)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    t = int(f[11]) + int(f[12]) + ((int(f[13]) + int(f[14])) if children else 0)
    return t / TICK


def cluster_cpu(postmaster: int) -> float:
    """The postmaster, its live children, and its exited ones (reaped: cutime, cstime)."""
    total = cpu(postmaster, children=True)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            f = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(f[1]) == postmaster:
            total += (int(f[11]) + int(f[12])) / TICK
    return total


def postmaster_pid() -> int:
    with psycopg.connect(DB) as c:
        backend = c.execute("SELECT pg_catalog.pg_backend_pid()").fetchone()[0]
    return int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])


def start(framework: str, port: int) -> subprocess.Popen:
    # Django: one server thread keeping its connection (werkzeug's thread per request would
    # open a connection per request, and the fork and login would dwarf what is measured)
    env = dict(os.environ, PORT=str(port), IDEMPOTENCY_SERVICE="bench", IDEM_EXAMPLE_CONN_MAX_AGE="600",
               IDEM_EXAMPLE_THREADED="0")
    if framework == "express":
        cmd = [str(ROOT / "examples/http/node/serve.sh")]
    else:
        cmd = [str(ROOT / "examples/http/python/serve.sh")]
        env["FRAMEWORK"] = framework
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    deadline = time.monotonic() + 600  # a first run installs the examples' dependencies
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{framework} exited with {proc.returncode}")
        try:
            httpx.post(f"http://127.0.0.1:{port}/plain/payments", content=BODY,
                       headers={"content-type": "application/json"}, timeout=2)
            return proc
        except httpx.TransportError:
            time.sleep(0.3)
    raise RuntimeError(f"{framework} did not start")


def run(client, url, mode, n, replay_key):
    headers = {"content-type": "application/json"}
    path = "/plain/payments" if mode == "plain" else "/payments"
    for _ in range(n):
        if mode != "plain":
            headers["idempotency-key"] = replay_key if mode == "replay" else f"b-{uuid.uuid4()}"
        r = client.post(url + path, content=BODY, headers=headers)
        assert r.status_code == 201, (mode, r.status_code, r.text)
        if mode == "replay":
            assert r.headers.get("idempotent-replayed") == "true"
        elif mode == "new":
            assert "idempotent-replayed" not in r.headers


def bench(framework: str, port: int, postmaster: int) -> dict:
    proc = start(framework, port)
    url = f"http://127.0.0.1:{port}"
    out = {m: {"app": [], "db": []} for m in ("plain", "new", "replay")}
    try:
        with httpx.Client(timeout=30) as client:
            replay_key = f"b-{uuid.uuid4()}"
            seed = client.post(url + "/payments", content=BODY,
                               headers={"content-type": "application/json", "idempotency-key": replay_key})
            assert seed.status_code == 201, seed.text
            for mode in ("plain", "new", "replay"):  # warm-up (and the replayed record)
                run(client, url, mode, 200, replay_key)
            for _ in range(ROUNDS):
                for mode in ("plain", "new", "replay"):
                    a0, d0 = cpu(proc.pid), cluster_cpu(postmaster)
                    run(client, url, mode, N, replay_key)
                    out[mode]["app"].append((cpu(proc.pid) - a0) / N)
                    out[mode]["db"].append((cluster_cpu(postmaster) - d0) / N)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    return {m: {k: statistics.median(v) for k, v in d.items()} for m, d in out.items()}


def main():
    postmaster = postmaster_pid()
    port = int(os.environ.get("IDEM_BENCH_PORT", "58100"))
    rows = []
    for i, fw in enumerate(FRAMEWORKS):
        r = bench(fw, port + i, postmaster)
        plain = r["plain"]["app"] + r["plain"]["db"]
        cells = [fw]
        for mode in ("plain", "new", "replay"):
            app, db = r[mode]["app"] * 1e6, r[mode]["db"] * 1e6
            ratio = "" if mode == "plain" else f" = **{(app + db) / (plain * 1e6):.2f}x**"
            cells.append(f"{app + db:.0f} µs ({app:.0f} + {db:.0f}){ratio}")
        rows.append("| " + " | ".join(cells) + " |")
        print(rows[-1], file=sys.stderr, flush=True)
    print(f"CPU per request, app + backends (median of {ROUNDS} rounds of {N} sequential requests each):\n")
    print("| framework | plain insert | new key | replay |")
    print("|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
