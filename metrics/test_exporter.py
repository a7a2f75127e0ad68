"""The real Prometheus postgres exporter, with metrics/queries.yaml, against the test cluster
($DATABASE_URL, the library preloaded): the idempotency series are in its /metrics output."""

import os
import re
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest

QUERIES = Path(__file__).with_name("queries.yaml")
EXPORTER = shutil.which("prometheus-postgres-exporter") or "/usr/bin/prometheus-postgres-exporter"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def traffic():
    """One claim of each kind the series count, in scope exporter-<random>."""
    scope = f"exporter-{uuid.uuid4()}"
    url = os.environ["DATABASE_URL"]
    with psycopg.connect(url, autocommit=True) as c:
        h = "idem_hash('{\"a\": 1}'::jsonb)"
        c.execute(f"SELECT idem_claim(%s, 'done', {h})", [scope])
        c.execute("SELECT idem_complete(%s, 'done', '{}')", [scope])
        c.execute(f"SELECT idem_claim(%s, 'done', {h})", [scope])  # replay
        c.execute(f"SELECT idem_claim(%s, 'busy', {h})", [scope])
        c.execute(f"SELECT idem_claim(%s, 'busy', {h})", [scope])  # processing_active
        with pytest.raises(psycopg.Error) as mismatch:
            c.execute("SELECT idem_claim(%s, 'done', idem_hash('{\"a\": 2}'::jsonb))", [scope])
        assert mismatch.value.sqlstate == "P4002"
    return scope


@pytest.fixture(scope="module")
def scraped(traffic):
    port = free_port()
    env = dict(os.environ, DATA_SOURCE_NAME=os.environ["DATABASE_URL"] + "?sslmode=disable")
    proc = subprocess.Popen(
        [EXPORTER, f"--web.listen-address=127.0.0.1:{port}", f"--extend.query-path={QUERIES}",
         "--disable-default-metrics", "--disable-settings-metrics"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
                if "idem_claims_total" in text:
                    return text
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.terminate()
                pytest.fail(f"no idempotency series from the exporter; its log:\n{proc.communicate()[1]}")
            time.sleep(0.3)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)


def value(text: str, name: str, **labels) -> float:
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0])) if "{" in line else {}
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no series {name}{labels} in:\n" + "\n".join(
        l for l in text.splitlines() if l.startswith("idem")))


def test_claims_by_outcome(scraped):
    for outcome in ["new_claim", "replay_success", "processing_active", "processing_stale",
                    "retryable_failure", "final_failure"]:
        assert value(scraped, "idem_claims_total", outcome=outcome) >= 0
    assert value(scraped, "idem_claims_total", outcome="new_claim") >= 2
    assert value(scraped, "idem_claims_total", outcome="replay_success") >= 1
    assert "# TYPE idem_claims_total counter" in scraped


def test_counters(scraped):
    assert value(scraped, "idem_replays_total") >= 1
    assert value(scraped, "idem_conflicts_total") >= 1
    assert value(scraped, "idem_hash_mismatches_total") >= 1
    assert value(scraped, "idem_completions_total") >= 1
    for name in ["idem_stale_takeovers_total", "idem_reclaims_total", "idem_purges_total"]:
        assert value(scraped, name) >= 0


def test_records_and_oldest_processing_age(scraped, traffic):
    assert value(scraped, "idem_records_records", scope=traffic, status="succeeded") == 1
    assert value(scraped, "idem_records_records", scope=traffic, status="processing") == 1
    assert value(scraped, "idem_records_oldest_processing_age_seconds", scope=traffic, status="processing") >= 0
    assert "# TYPE idem_records_oldest_processing_age_seconds gauge" in scraped
