"""SQLAlchemy through the real examples: Flask on an Engine (an ORM Session) and FastAPI on an
AsyncEngine (an AsyncSession), each bound to claim.conn, write in the claim's transaction, so
their rows commit with the stored response (and are replayed, not written again) and are rolled
back with a final 4xx or an exception."""

import pytest

from conftest import Server, new_key

pytest.importorskip("sqlalchemy")


@pytest.fixture(scope="module", params=["flask", "fastapi"])
def orm_server(request, db_url):
    srv = Server(request.param, db_url).start()
    yield srv
    srv.stop()


def rows(db, key):
    return db.execute("SELECT count(*) FROM effects WHERE route = 'orm' AND idem_key = %s::text", [key]).fetchone()[0]


def test_orm_writes_commit_with_the_claim_and_are_replayed(orm_server, db):
    key = new_key()
    first = orm_server.post("/orm/effects/201", key=key, body=b'{"a": 1}')
    assert first.status_code == 201, first.text
    again = orm_server.post("/orm/effects/201", key=key, body=b'{"a": 1}')
    assert again.headers["idempotent-replayed"] == "true" and again.content == first.content
    assert rows(db, key) == 1
    assert db.execute("SELECT status::text FROM idempotency.requests WHERE key = %s::text",
                      [key]).fetchone()[0] == "succeeded"


def test_orm_writes_are_undone_with_a_final_4xx_or_an_exception(orm_server, db):
    key = new_key()
    assert orm_server.post("/orm/effects/404", key=key).status_code == 404
    assert orm_server.post("/orm/effects/404", key=key).headers["idempotent-replayed"] == "true"
    assert rows(db, key) == 0
    boom = new_key()
    assert orm_server.post("/orm/effects/201?raise=1", key=boom).status_code == 500
    assert rows(db, boom) == 0
    assert orm_server.post("/orm/effects/201", key=boom).status_code == 201  # retryable: runs again
    assert rows(db, boom) == 1
