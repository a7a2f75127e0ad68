"""SQLAlchemy through the real examples: Flask on an Engine (an ORM Session; Flask-SQLAlchemy's
db.Model on its db.engine) and FastAPI on an AsyncEngine (an AsyncSession; SQLModel's), each
bound to claim.conn, write in the claim's transaction, so their rows commit with the stored
response (and are replayed, not written again) and are rolled back with a final 4xx or an
exception; a server killed (SIGKILL) after the ORM write, before the claim's commit, leaves
neither the row nor a claim, and the retry runs once."""

import random
import threading
import time

import httpx
import psycopg
import pytest

from conftest import Server, new_key

pytest.importorskip("sqlalchemy")


#: (framework, the route's prefix and its rows' route label): plain SQLAlchemy, then its add-ons
FORMS = [("flask", "orm"), ("flask", "fsa"), ("fastapi", "orm"), ("fastapi", "sqlmodel")]
REQUIRES = {"fsa": "flask_sqlalchemy", "sqlmodel": "sqlmodel"}


@pytest.fixture(scope="module", params=["flask", "fastapi"])
def orm_app(request, db_url):
    srv = Server(request.param, db_url).start()
    yield srv
    srv.stop()


@pytest.fixture(params=[f"{fw}-{form}" for fw, form in FORMS])
def orm_server(request, orm_app):
    framework, form = request.param.split("-")
    if framework != orm_app.framework:
        pytest.skip("the other framework's form")
    if form in REQUIRES:
        pytest.importorskip(REQUIRES[form])
    orm_app.form = form
    return orm_app


def rows(db, key, form):
    return db.execute("SELECT count(*) FROM effects WHERE route = %s::text AND idem_key = %s::text",
                      [form, key]).fetchone()[0]


def test_orm_writes_commit_with_the_claim_and_are_replayed(orm_server, db):
    key, form = new_key(), orm_server.form
    first = orm_server.post(f"/{form}/effects/201", key=key, body=b'{"a": 1}')
    assert first.status_code == 201, first.text
    again = orm_server.post(f"/{form}/effects/201", key=key, body=b'{"a": 1}')
    assert again.headers["idempotent-replayed"] == "true" and again.content == first.content
    assert rows(db, key, form) == 1
    assert db.execute("SELECT status::text FROM idempotency.requests WHERE key = %s::text",
                      [key]).fetchone()[0] == "succeeded"


def test_orm_writes_are_undone_with_a_final_4xx_or_an_exception(orm_server, db):
    key, form = new_key(), orm_server.form
    assert orm_server.post(f"/{form}/effects/404", key=key).status_code == 404
    assert orm_server.post(f"/{form}/effects/404", key=key).headers["idempotent-replayed"] == "true"
    assert rows(db, key, form) == 0
    boom = new_key()
    assert orm_server.post(f"/{form}/effects/201?raise=1", key=boom).status_code == 500
    assert rows(db, boom, form) == 0
    assert orm_server.post(f"/{form}/effects/201", key=boom).status_code == 201  # retryable: runs again
    assert rows(db, boom, form) == 1


def advisory_waiter(db, lock):
    """The pid of the backend waiting for advisory lock `lock`, or None."""
    row = db.execute("SELECT pid FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND NOT granted "
                     "AND classid = 0 AND objid = %s::pg_catalog.int8::pg_catalog.oid AND objsubid = 1",
                     [lock]).fetchone()
    return row and row[0]


@pytest.mark.parametrize("framework", ["flask", "fastapi"])  # a sync Session, an AsyncSession
def test_a_crash_before_the_commit_leaves_nothing(framework, db_url, db):
    key, lock = new_key(), random.randrange(1, 2**31)
    with psycopg.connect(db_url, autocommit=True) as gate:
        gate.execute("SELECT pg_catalog.pg_advisory_lock(%s::pg_catalog.int8)", [lock])
        victim = Server(framework, db_url).start()
        lost = {}
        try:
            def doomed():
                try:
                    lost["answer"] = victim.post(f"/orm/effects/201?lock={lock}", key=key, body=b'{"a": 1}')
                except httpx.TransportError as exc:
                    lost["error"] = exc

            hung = threading.Thread(target=doomed)
            hung.start()
            deadline = time.monotonic() + 120  # a failsafe: the wait is on pg_locks
            while (pid := advisory_waiter(db, lock)) is None:
                assert time.monotonic() < deadline, "the handler never reached the lock"
                time.sleep(0.05)
            victim.kill()  # SIGKILL: the ORM row is written, the claim's transaction is open
            hung.join()
            assert "error" in lost, lost
        finally:
            victim.stop()
        # Released, the backend finishes its statement, finds its client gone and rolls back.
        gate.execute("SELECT pg_catalog.pg_advisory_unlock(%s::pg_catalog.int8)", [lock])
    deadline = time.monotonic() + 120
    while db.execute("SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE pid = %s::int4 "
                     "AND xact_start IS NOT NULL", [pid]).fetchone()[0]:
        assert time.monotonic() < deadline, "the killed server's transaction never ended"
        time.sleep(0.05)
    assert rows(db, key, "orm") == 0
    assert db.execute("SELECT count(*) FROM idempotency.requests WHERE key = %s::text", [key]).fetchone()[0] == 0
    survivor = Server(framework, db_url).start()
    try:
        first = survivor.post("/orm/effects/201", key=key, body=b'{"a": 1}')
        assert first.status_code == 201 and "idempotent-replayed" not in first.headers, first.text
        again = survivor.post("/orm/effects/201", key=key, body=b'{"a": 1}')
        assert again.headers["idempotent-replayed"] == "true" and again.content == first.content
    finally:
        survivor.stop()
    assert rows(db, key, "orm") == 1
