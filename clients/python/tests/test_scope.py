"""The default scope through real servers, on each framework: a stored response never answers
another resource (route parameters, query string), another service (a second server with another
IDEMPOTENCY_SERVICE) or another principal (the framework's authenticated user, never a client
header); a scope given as a string replaces the default whole."""

import json

import pytest

from conftest import FRAMEWORKS, Server, new_key

ALICE = {"authorization": "Bearer alice-token"}
BOB = {"authorization": "Bearer bob-token"}
ROUTES = {"fastapi": "/accounts/{account_id}/transfer", "flask": "/accounts/<int:account_id>/transfer",
          "django": "/accounts/<int:account_id>/transfer"}


def fresh(r):
    return r.status_code == 201 and "idempotent-replayed" not in r.headers


def replay(r):
    return r.status_code == 201 and r.headers.get("idempotent-replayed") == "true"


def scopes(db, key):
    rows = db.execute("SELECT scope FROM idempotency.requests WHERE key = %s::text ORDER BY scope", [key]).fetchall()
    return [r[0] for r in rows]


def effects(db, key):
    return db.execute("SELECT count(*) FROM effects WHERE idem_key = %s::text", [key]).fetchone()[0]


@pytest.fixture(scope="module", params=FRAMEWORKS)
def pair(request, db_url):
    """The same app twice on one database: service "examples" (the default of the tests) and "billing"."""
    one = Server(request.param, db_url).start()
    two = Server(request.param, db_url, IDEMPOTENCY_SERVICE="billing").start()
    yield one, two
    one.stop()
    two.stop()


def test_another_resource_runs_anew(pair, db):
    srv, _ = pair
    key = new_key()
    assert fresh(srv.post("/accounts/1/transfer", key=key, headers=ALICE))
    two = srv.post("/accounts/2/transfer", key=key, headers=ALICE)
    assert fresh(two), "account 2 must not get account 1's stored response"
    assert two.json()["account"] == 2
    assert replay(srv.post("/accounts/1/transfer", key=key, headers=ALICE))
    assert replay(srv.post("/accounts/2/transfer", key=key, headers=ALICE))
    assert effects(db, key) == 2
    stored = [json.loads(s) for s in scopes(db, key)]
    assert [s[:4] for s in stored] == [["examples", "alice", "POST", ROUTES[srv.framework]]] * 2
    assert sorted(str(s[4]["account_id"]) for s in stored) == ["1", "2"]


def test_the_query_string_is_part_of_the_resource_in_any_order(pair, db):
    srv, _ = pair
    key = new_key()
    assert fresh(srv.post("/accounts/1/transfer?b=x&a=1", key=key))
    assert replay(srv.post("/accounts/1/transfer?a=1&b=x", key=key))
    assert fresh(srv.post("/accounts/1/transfer?a=2&b=x", key=key))
    assert effects(db, key) == 2
    assert sorted(json.loads(s)[5] for s in scopes(db, key)) == ["a=1&b=x", "a=2&b=x"]


def test_another_service_never_shares_records(pair, db):
    srv, billing = pair
    key = new_key()
    assert fresh(srv.post("/accounts/1/transfer", key=key, headers=ALICE))
    other = billing.post("/accounts/1/transfer", key=key, headers=ALICE)
    assert fresh(other), "another service must not get this one's stored response"
    assert replay(billing.post("/accounts/1/transfer", key=key, headers=ALICE))
    assert effects(db, key) == 2
    assert sorted(json.loads(s)[0] for s in scopes(db, key)) == ["billing", "examples"]


def test_the_principal_is_the_authenticated_user_not_a_header(pair, db):
    srv, _ = pair
    key, body = new_key(), b'{"order_id": "o-t", "amount": 1}'
    alice = srv.post("/tenant/payments", key=key, body=body, headers={**ALICE, "x-tenant": "acme"})
    assert fresh(alice) and alice.json()["tenant"] == "alice"
    bob = srv.post("/tenant/payments", key=key, body=body, headers={**BOB, "x-tenant": "acme"})
    assert fresh(bob) and bob.json()["tenant"] == "bob", "bob must not get alice's stored response"
    anonymous = srv.post("/tenant/payments", key=key, body=body, headers={"x-tenant": "acme"})
    assert fresh(anonymous), "an anonymous caller must not get alice's stored response"
    again = srv.post("/tenant/payments", key=key, body=body, headers={**ALICE, "x-tenant": "globex"})
    assert replay(again) and again.content == alice.content
    assert db.execute("SELECT count(*) FROM payments WHERE idem_key = %s::text", [key]).fetchone()[0] == 3
    assert sorted(str(json.loads(s)[1]) for s in scopes(db, key)) == ["None", "alice", "bob"]


def test_a_scope_string_replaces_the_default(pair, db):
    srv, billing = pair
    key = new_key()
    assert fresh(srv.post("/custom-scope", key=key, headers=ALICE))
    assert replay(billing.post("/custom-scope", key=key, headers=BOB))  # the app chose to share
    assert scopes(db, key) == ["custom"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_without_a_configured_service_the_app_names_it(framework, db_url, db):
    srv = Server(framework, db_url, IDEMPOTENCY_SERVICE="").start()
    try:
        key = new_key()
        assert fresh(srv.post("/accounts/3/transfer", key=key))
    finally:
        srv.stop()
    assert [json.loads(s)[0] for s in scopes(db, key)] == [f"{framework}_app"]


def test_fastapi_a_mounted_app_is_another_resource(pair, db):
    srv, _ = pair
    if srv.framework != "fastapi":
        pytest.skip("app.mount: FastAPI's example")
    key = new_key()
    assert fresh(srv.post("/accounts/1/transfer", key=key))
    assert fresh(srv.post("/v2/accounts/1/transfer", key=key)), "/v2 must not get the root app's response"
    assert sorted(json.loads(s)[3] for s in scopes(db, key)) == [
        "/accounts/{account_id}/transfer", "/v2/accounts/{account_id}/transfer"]
