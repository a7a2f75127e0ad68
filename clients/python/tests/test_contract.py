"""The stored-response contract in SQL (sql/http.sql), on the test database: shape, allow-list,
errors with their SQLSTATEs, and what idem_http_replay sends again."""

import json
import uuid

import psycopg
import pytest


def one(db, query, *params):
    return db.execute(query, params).fetchone()[0]


def sqlstate_of(db, query, *params) -> str:
    with pytest.raises(psycopg.Error) as err:
        db.execute(query, params)
    return err.value.sqlstate


def test_shape_and_allow_list(db):
    doc = one(db, "SELECT idem_http_response(201, %s::jsonb, %s)",
              json.dumps({"Location": "/p/1", "Content-Type": "application/json", "Set-Cookie": "s=1",
                          "X-Custom": "no", "ETag": '"v1"'}), '{"a": 1}')
    assert doc == {"status": 201, "body": '{"a": 1}',
                   "headers": {"location": "/p/1", "content-type": "application/json", "etag": '"v1"'}}
    assert one(db, "SELECT idem_http_response(204)") == {"status": 204, "headers": {}, "body": None}
    assert "location" in one(db, "SELECT idem_http_headers()")


@pytest.mark.parametrize("query", [
    "SELECT idem_http_response(99)",
    "SELECT idem_http_response(600)",
    "SELECT idem_http_response(200, '[]')",
    "SELECT idem_http_response(200, '{\"location\": 1}')",
    "SELECT idem_http_response(200, '{\"location\": \"/a\\r\\nSet-Cookie: x=1\"}')",
])
def test_bad_responses_are_22023(db, query):
    assert sqlstate_of(db, query) == "22023"


def test_a_null_status_is_22004(db):
    assert sqlstate_of(db, "SELECT idem_http_response(NULL)") == "22004"


def test_fail_keeps_an_error_response_and_replay_returns_it(db):
    scope, key = "contract", str(uuid.uuid4())
    h = "idem_hash('{\"x\": 1}'::jsonb)"
    with db.transaction():
        db.execute(f"SELECT idem_claim(%s, %s, {h})", [scope, key])
        assert sqlstate_of(db, "SELECT idem_http_fail(%s, %s, idem_http_response(201))", scope, key) == "22023"
    with db.transaction():
        db.execute(f"SELECT idem_claim(%s, %s, {h})", [scope, key])
        db.execute("SELECT idem_http_fail(%s, %s, idem_http_response(402, '{\"content-type\": \"application/problem+json\"}', '{\"title\": \"no\"}'))",
                   [scope, key])
    row = db.execute(f"SELECT c.outcome::text, idem_http_replay(c) FROM idem_claim(%s, %s, {h}) AS c",
                     [scope, key]).fetchone()
    assert row == ("final_failure", {"status": 402, "headers": {"content-type": "application/problem+json"},
                                     "body": '{"title": "no"}'})


def test_replay_of_non_http_records(db):
    scope, key, other = "contract", str(uuid.uuid4()), str(uuid.uuid4())
    h = "idem_hash('{}'::jsonb)"
    db.execute(f"SELECT idem_claim(%s, %s, {h})", [scope, key])
    db.execute("SELECT idem_complete(%s, %s, '{\"plain\": true}')", [scope, key])
    stored = one(db, f"SELECT idem_http_replay(c) FROM idem_claim(%s, %s, {h}) AS c", scope, key)
    assert stored == {"status": 200, "headers": {"content-type": "application/json"}, "body": '{"plain": true}'}
    db.execute(f"SELECT idem_claim(%s, %s, {h})", [scope, other])
    db.execute("SELECT idem_fail(%s, %s, false, 'card_declined', 'declined')", [scope, other])
    stored = one(db, f"SELECT idem_http_replay(c) FROM idem_claim(%s, %s, {h}) AS c", scope, other)
    assert stored["status"] == 500
    assert json.loads(stored["body"]) == {"type": "about:blank", "title": "Internal Server Error", "status": 500}
    new = one(db, f"SELECT idem_http_replay(c) FROM idem_claim(%s, %s, {h}) AS c", scope, str(uuid.uuid4()))
    assert new is None


def test_keep_adds_names_but_never_the_never_list(db):
    doc = one(db, "SELECT idem_http_response(201, %s::jsonb, NULL::text, ARRAY['X-Trace', 'set-cookie']::text[])",
              json.dumps({"X-Trace": "t", "Set-Cookie": "s=1", "Location": "/a"}))
    assert doc["headers"] == {"x-trace": "t", "location": "/a"}


def test_helpers_ignore_the_callers_search_path(db):
    db.execute("CREATE SCHEMA IF NOT EXISTS evil")
    db.execute("CREATE OR REPLACE FUNCTION evil.lower(text) RETURNS text LANGUAGE sql AS $$ SELECT 'location' $$")
    try:
        db.execute("SET search_path = evil, public")
        doc = one(db, "SELECT public.idem_http_response(200, '{\"X-Other\": \"v\"}')")
        assert doc["headers"] == {}
    finally:
        db.execute("RESET search_path")
        db.execute("DROP SCHEMA evil CASCADE")
