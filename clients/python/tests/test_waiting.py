"""Duplicates in flight: 409, Prefer: wait (polling without a pooled connection), 20 concurrent
duplicates, the latency of an unrelated key while duplicates wait (pool of 4), a killed server."""

import os
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest

from conftest import FRAMEWORKS, Server, new_key, scope_of

BODY = b'{"order_id": "o-1", "amount": 12.5}'


def hold(db_url, key, scope=scope_of("/payments"), body=BODY.decode()):
    """Another session claims the key and keeps its transaction open."""
    conn = psycopg.connect(db_url)
    conn.execute("SELECT * FROM public.idem_claim(%s::text, %s::text, public.idem_hash(%s::jsonb))",
                 [scope, key, body])
    return conn


def payments(db, key):
    return db.execute("SELECT count(*) FROM payments WHERE idem_key = %s::text", [key]).fetchone()[0]



def test_409_while_another_session_holds_the_key(server, db, db_url):
    key = new_key()
    holder = hold(db_url, key)
    try:
        r = server.post("/payments", key=key, body=BODY)
        assert r.status_code == 409 and r.headers["retry-after"] == "1"
        assert r.json()["type"].endswith("#in-flight")
    finally:
        holder.rollback()
        holder.close()
    assert payments(db, key) == 0


def test_wait_turns_409_into_the_replay(server, db):
    key, results = new_key(), {}
    first = threading.Thread(target=lambda: results.__setitem__(
        "first", server.post("/payments", key=key, body=BODY, headers={"x-test-sleep-after-insert": "2"})))
    first.start()
    time.sleep(0.7)
    assert server.post("/payments", key=key, body=BODY).status_code == 409
    started = time.monotonic()
    waited = server.post("/payments", key=key, body=BODY, headers={"prefer": "wait=15"})
    elapsed = time.monotonic() - started
    first.join()
    assert results["first"].status_code == 201
    assert waited.status_code == 201 and waited.headers["idempotent-replayed"] == "true"
    assert waited.content == results["first"].content
    assert elapsed < 5
    assert payments(db, key) == 1


def test_wait_takes_over_when_the_holder_rolls_back(server, db, db_url):
    key = new_key()
    holder = hold(db_url, key)
    threading.Timer(1.0, holder.rollback).start()
    r = server.post("/payments", key=key, body=BODY, headers={"prefer": "wait=15"})
    holder.close()
    assert r.status_code == 201, r.text
    assert "idempotent-replayed" not in r.headers
    assert payments(db, key) == 1


def test_wait_runs_out_with_409_and_is_capped(server, db_url):
    key = new_key()
    holder = hold(db_url, key)
    try:
        started = time.monotonic()
        r = server.post("/payments", key=key, body=BODY, headers={"prefer": "wait=1"})
        assert r.status_code == 409
        assert 0.9 <= time.monotonic() - started < 3
        started = time.monotonic()
        r = server.post("/payments", key=key, body=BODY, headers={"prefer": "wait=3600"}, timeout=60)
        assert r.status_code == 409
        assert 9.5 <= time.monotonic() - started < 14  # max_wait: 10 s
    finally:
        holder.rollback()
        holder.close()


#: a failsafe only: the tests below wait on observable state (lock waits in pg_locks, the app's
#: count of waiting duplicates), never on a sleep; this bounds a test that would otherwise hang
FAILSAFE = 120.0


@pytest.fixture(scope="module", params=FRAMEWORKS)
def patient(request, db_url):
    """An example app whose duplicates may wait up to FAILSAFE (max_wait), so that a loaded
    machine turns no waiter into a 409."""
    srv = Server(request.param, db_url, IDEM_EXAMPLE_MAX_WAIT=str(FAILSAFE)).start()
    yield srv
    srv.stop()


def until(what, check, timeout=FAILSAFE):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.02)


def lock_waiters(db, lock):
    """Sessions waiting for advisory lock `lock` (a small int8: classid 0, objid lock)."""
    return db.execute("SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND NOT granted "
                      "AND classid = 0 AND objid = %s::int8::oid AND objsubid = 1", [lock]).fetchone()[0]


@pytest.mark.parametrize("prefer", [None, f"wait={FAILSAFE:.0f}"])
def test_twenty_concurrent_duplicates_one_effect(patient, db, prefer):
    keys = [new_key() for _ in range(3)]
    headers = {"prefer": prefer} if prefer else {}
    jobs = [k for k in keys for _ in range(20)]
    with ThreadPoolExecutor(60) as pool:
        responses = list(pool.map(lambda k: (k, patient.post("/payments", key=k, body=BODY, headers=headers,
                                                              timeout=FAILSAFE + 30)), jobs))
    for key in keys:
        mine = [r for k, r in responses if k == key]
        statuses = {r.status_code for r in mine}
        assert statuses <= ({201} if prefer else {201, 409}), statuses
        fresh = [r for r in mine if r.status_code == 201 and "idempotent-replayed" not in r.headers]
        assert len(fresh) == 1
        assert all(r.content == fresh[0].content for r in mine if r.status_code == 201)
        assert payments(db, key) == 1


@pytest.mark.parametrize("waiters", [0, 5, 20])
def test_waiters_do_not_starve_the_pool(patient, db, db_url, waiters):
    """A slow key holds one of the pool's 4 connections (its handler waits for an advisory lock
    the test holds); its duplicates wait (Prefer: wait); 5 unrelated new keys sent at once must
    all be answered while the slow key still waits for the lock (a waiter that kept a pooled
    connection would leave them queued behind it, until the failsafe)."""
    slow_key, lock = new_key(), int.from_bytes(os.urandom(3), "big") + 1
    gate = psycopg.connect(db_url, autocommit=True)
    gate.execute("SELECT pg_catalog.pg_advisory_lock(%s::int8)", [lock])
    path, wait = f"/slow?lock={lock}", {"prefer": f"wait={FAILSAFE:.0f}"}
    pool = ThreadPoolExecutor(waiters + 6)
    try:
        first = pool.submit(patient.post, path, key=slow_key, timeout=FAILSAFE + 30)
        until("the slow key's handler to wait for the lock", lambda: lock_waiters(db, lock) == 1)
        dups = [pool.submit(patient.post, path, key=slow_key, headers=wait, timeout=FAILSAFE + 30)
                for _ in range(waiters)]
        until(f"{waiters} duplicates to wait", lambda: patient.runs("waiters") == waiters)

        def unrelated(_):
            started = time.monotonic()
            r = patient.post("/payments", key=new_key(), body=BODY, timeout=FAILSAFE)
            assert r.status_code == 201, r.text
            return time.monotonic() - started

        latencies = list(pool.map(unrelated, range(5)))
        # answered while the slow key still waits: its handler is blocked and its duplicates wait
        assert lock_waiters(db, lock) == 1 and not first.done()
        assert patient.runs("waiters") == waiters
        gate.execute("SELECT pg_catalog.pg_advisory_unlock(%s::int8)", [lock])
        results = [first.result()] + [d.result() for d in dups]
    finally:
        gate.close()  # on failure too: the blocked handler goes on, the threads end
        pool.shutdown()
    median = statistics.median(latencies)
    figure = (f"pool latency, {patient.framework}: {waiters} waiters, 5 unrelated keys at once took "
              f"{median * 1000:.0f} ms (median), {max(latencies) * 1000:.0f} ms at most")
    print(figure)
    if os.environ.get("IDEM_HTTP_FIGURES"):
        with open(os.environ["IDEM_HTTP_FIGURES"], "a") as out:
            out.write(figure + "\n")
    assert all(r.status_code == 201 for r in results), [r.status_code for r in results]
    assert sum("idempotent-replayed" not in r.headers for r in results) == 1
    assert db.execute("SELECT count(*) FROM effects WHERE idem_key = %s::text", [slow_key]).fetchone()[0] == 1


def test_killed_mid_request_then_retry_gives_one_row(db, db_url):
    key = new_key()
    victim = Server("fastapi", db_url).start()
    try:
        outcome = {}

        def doomed():
            try:
                outcome["answer"] = victim.post("/payments", key=key, body=BODY,
                                                headers={"x-test-sleep-after-insert": "30"})
            except httpx.TransportError as exc:
                outcome["lost"] = exc

        hung = threading.Thread(target=doomed)
        hung.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if db.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' "
                          "AND query LIKE 'INSERT INTO payments%%'").fetchone()[0]:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the request never reached its insert")
        victim.kill()
        hung.join()
        assert "lost" in outcome, outcome
    finally:
        victim.stop()
    survivor = Server("fastapi", db_url).start()
    try:
        for _ in range(100):
            r = survivor.post("/payments", key=key, body=BODY)
            if r.status_code != 409:
                break
            time.sleep(0.1)
        assert r.status_code == 201, r.text
        assert "idempotent-replayed" not in r.headers
        assert survivor.post("/payments", key=key, body=BODY).headers["idempotent-replayed"] == "true"
    finally:
        survivor.stop()
    assert payments(db, key) == 1
