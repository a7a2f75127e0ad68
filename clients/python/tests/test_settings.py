"""The configurable parts of the contract, on each framework: methods, max_waiters,
problem_base, statuses; and replay_headers refused at setup for never-replayed names."""

import threading
import time

import httpx
import psycopg
import pytest

from conftest import FRAMEWORKS, Server, new_key, scope_of
from idempotency_http import Settings

BODY = b'{"order_id": "o-1", "amount": 1}'


def test_never_replayed_headers_are_refused_at_setup():
    for name in ["Set-Cookie", "authorization", "refresh", "date"]:
        with pytest.raises(ValueError):
            Settings(replay_headers=[name])
    with pytest.raises(ValueError):
        Settings(replay_headers=["bad name"])
    assert Settings(replay_headers=["X-Trace"]).replay_headers == ("x-trace",)


@pytest.fixture(scope="module", params=FRAMEWORKS)
def tuned(request, db_url):
    srv = Server(request.param, db_url, IDEM_EXAMPLE_METHODS="POST,PUT", IDEM_EXAMPLE_MAX_WAITERS="2",
                 IDEM_EXAMPLE_PROBLEM_BASE="https://errors.example/idempotency/",
                 IDEM_EXAMPLE_RETRY_404="1").start()
    yield srv
    srv.stop()


def test_configured_methods_and_problem_base(tuned, db):
    key = new_key()
    r = httpx.put(tuned.url + "/echo", content=b"{}", headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["type"] == "https://errors.example/idempotency/key-required"
    assert httpx.put(tuned.url + "/echo", content=b"{}", headers={"idempotency-key": key}).status_code == 201
    again = httpx.put(tuned.url + "/echo", content=b"{}", headers={"idempotency-key": key})
    assert again.headers["idempotent-replayed"] == "true"
    # PATCH is no longer claimed: even a malformed key is ignored
    r = httpx.patch(tuned.url + "/echo", headers={"idempotency-key": "bad key"})
    assert r.status_code in (201, 405) and "idempotent-replayed" not in r.headers


def test_a_statuses_callable_changes_what_is_final(tuned, db):
    key, before = new_key(), tuned.runs("status-404")
    assert tuned.post("/status/404", key=key).status_code == 404
    again = tuned.post("/status/404", key=key)
    assert again.status_code == 404 and "idempotent-replayed" not in again.headers
    assert tuned.runs("status-404") == before + 2


def test_past_max_waiters_a_duplicate_gets_409_at_once(tuned, db_url):
    key = new_key()
    holder = psycopg.connect(db_url)
    holder.execute("SELECT * FROM public.idem_claim(%s::text, %s::text, public.idem_hash(%s::jsonb))",
                   [scope_of("/payments"), key, BODY.decode()])
    try:
        waiting = [threading.Thread(target=tuned.post, args=("/payments",),
                                    kwargs={"key": key, "body": BODY, "headers": {"prefer": "wait=3"}})
                   for _ in range(2)]
        for t in waiting:
            t.start()
        time.sleep(0.5)
        started = time.monotonic()
        r = tuned.post("/payments", key=key, body=BODY, headers={"prefer": "wait=3"})
        assert r.status_code == 409 and time.monotonic() - started < 1
        assert r.json()["type"] == "https://errors.example/idempotency/too-many-waiters"
        assert r.headers["retry-after"] == "1"
        for t in waiting:
            t.join()
    finally:
        holder.rollback()
        holder.close()
