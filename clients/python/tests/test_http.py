"""The Python adapter through real HTTP: a real server process, real concurrent requests."""

import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest

from conftest import Server

BODY = '{"order_id": "o-1", "amount": 12.5}'
RESPACED = '{ "amount":12.5,\n  "order_id" :"o-1" }'


def new_key() -> str:
    return f"py-{uuid.uuid4()}"


def post(server, key=None, body=BODY, headers=None, timeout=30.0):
    h = {"content-type": "application/json"}
    if key is not None:
        h["idempotency-key"] = f'"{key}"'
    h.update(headers or {})
    return httpx.post(server.url + "/payments", content=body, headers=h, timeout=timeout)


def rows(db, key) -> int:
    return db.execute("SELECT count(*) FROM payments WHERE idem_key = %s", [key]).fetchone()[0]


def test_missing_key_is_400_problem(server, db):
    r = post(server)
    assert r.status_code == 400
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["status"] == 400


def test_key_must_be_an_sf_string(server):
    r = httpx.post(server.url + "/payments", content=BODY, headers={"idempotency-key": "bare-token"})
    assert r.status_code == 400
    assert r.headers["content-type"] == "application/problem+json"


def test_created_then_byte_identical_replay(server, db):
    key = new_key()
    first = post(server, key)
    assert first.status_code == 201, first.text
    doc = first.json()
    assert doc["order_id"] == "o-1" and doc["amount"] == "12.5"
    assert first.headers["location"] == f"/payments/{doc['payment_id']}"
    assert "idempotent-replayed" not in first.headers
    again = post(server, key, body=RESPACED)
    assert again.status_code == 201
    assert again.content == first.content
    assert again.headers["location"] == first.headers["location"]
    assert again.headers["content-type"] == first.headers["content-type"]
    assert again.headers["idempotent-replayed"] == "true"
    assert rows(db, key) == 1


def test_changed_body_is_422(server, db):
    key = new_key()
    assert post(server, key).status_code == 201
    r = post(server, key, body='{"order_id": "o-1", "amount": 13}')
    assert r.status_code == 422
    assert r.headers["content-type"] == "application/problem+json"
    assert rows(db, key) == 1


def hold(db_url, key, body=BODY):
    """Another session claims the key and keeps its transaction open."""
    conn = psycopg.connect(db_url)
    conn.execute("SELECT * FROM idem_claim('payments', %s, idem_hash(%s::jsonb))", [key, body])
    return conn


def test_409_while_another_session_holds_the_key(server, db, db_url):
    key = new_key()
    holder = hold(db_url, key)
    try:
        r = post(server, key)
        assert r.status_code == 409
        assert r.headers["retry-after"] == "1"
        assert r.headers["content-type"] == "application/problem+json"
    finally:
        holder.rollback()
        holder.close()
    assert rows(db, key) == 0


def test_wait_turns_409_into_the_replay(server, db):
    key = new_key()
    results = {}
    first = threading.Thread(target=lambda: results.__setitem__(
        "first", post(server, key, headers={"x-test-sleep-after-insert": "2"})))
    first.start()
    time.sleep(0.7)  # the first request holds the key (inserted, not committed)
    assert post(server, key).status_code == 409
    started = time.monotonic()
    waited = post(server, key, body=RESPACED, headers={"prefer": "wait=15"})
    elapsed = time.monotonic() - started
    first.join()
    assert results["first"].status_code == 201
    assert waited.status_code == 201, waited.text
    assert waited.headers["idempotent-replayed"] == "true"
    assert waited.content == results["first"].content
    assert elapsed < 10
    assert rows(db, key) == 1


def test_wait_takes_over_when_the_holder_rolls_back(server, db, db_url):
    key = new_key()
    holder = hold(db_url, key)
    threading.Timer(1.0, holder.rollback).start()
    r = post(server, key, headers={"prefer": "wait=15"})
    holder.close()
    assert r.status_code == 201, r.text
    assert "idempotent-replayed" not in r.headers
    assert rows(db, key) == 1


def test_wait_runs_out_with_409(server, db_url):
    key = new_key()
    holder = hold(db_url, key)
    try:
        started = time.monotonic()
        r = post(server, key, headers={"prefer": "wait=1"})
        assert r.status_code == 409
        assert 0.9 <= time.monotonic() - started < 5
    finally:
        holder.rollback()
        holder.close()


def test_fifty_concurrent_requests_one_row(server, db):
    key = new_key()
    with ThreadPoolExecutor(50) as pool:
        responses = list(pool.map(lambda _: post(server, key, timeout=60), range(50)))
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {201, 409}, statuses
    fresh = [r for r in responses if r.status_code == 201 and "idempotent-replayed" not in r.headers]
    assert len(fresh) == 1
    assert all(r.content == fresh[0].content for r in responses if r.status_code == 201)
    assert rows(db, key) == 1


def test_killed_mid_request_then_retry_gives_one_row(db, db_url):
    key = new_key()
    victim = Server(db_url).start()
    try:
        outcome = {}

        def doomed():
            try:
                outcome["answer"] = post(victim, key, headers={"x-test-sleep-after-insert": "30"})
            except httpx.TransportError as exc:
                outcome["lost"] = exc

        hung = threading.Thread(target=doomed)
        hung.start()
        # Wait until the insert is done and the transaction is open (between effect and commit).
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            n = db.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' "
                           "AND query LIKE 'INSERT INTO payments%%'").fetchone()[0]
            if n:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the request never reached its insert")
        victim.kill()
        hung.join()
        assert "lost" in outcome, outcome
    finally:
        victim.stop()
    survivor = Server(db_url).start()
    try:
        for _ in range(100):  # the killed request's session ends when Postgres notices
            r = post(survivor, key)
            if r.status_code != 409:
                break
            time.sleep(float(r.headers["retry-after"]) / 10)
        assert r.status_code == 201, r.text
        assert "idempotent-replayed" not in r.headers
        assert post(survivor, key).headers["idempotent-replayed"] == "true"
    finally:
        survivor.stop()
    assert rows(db, key) == 1


def test_handler_error_fails_retryably_and_a_retry_succeeds(server, db):
    key = new_key()
    r = post(server, key, body='{"order_id": "o-err", "amount": "not a number"}')
    assert r.status_code == 500
    state = db.execute("SELECT status::text, failure_code FROM idempotency.requests "
                       "WHERE scope = 'payments' AND key = %s", [key]).fetchone()
    assert state[0] == "failed_retryable"
    assert rows(db, key) == 0


def test_final_client_error_is_replayed(server, db):
    key = new_key()
    r = post(server, key, body='{"order_id": "o-2"}')
    assert r.status_code == 400
    again = post(server, key, body='{"order_id":"o-2"}')
    assert again.status_code == 400
    assert again.content == r.content
    assert again.headers["idempotent-replayed"] == "true"
    state = db.execute("SELECT status::text FROM idempotency.requests WHERE scope = 'payments' AND key = %s",
                       [key]).fetchone()
    assert state[0] == "failed_final"
