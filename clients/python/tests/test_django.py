"""Django specifics through a real server: REST framework views (@api_view, APIView, a viewset)
are rendered before they are stored and scoped by the user their own authenticators find; an
async view is refused when decorated."""

import json

import pytest

from conftest import Server, new_key

DRF_TOKEN = {"authorization": "Token alice-token"}  # known to DRF's TokenAuth, not to the Django middleware


@pytest.fixture(scope="module")
def django_server(db_url):
    srv = Server("django", db_url).start()
    yield srv
    srv.stop()


@pytest.mark.parametrize("kind", ["function", "apiview", "viewset"])
def test_rest_framework_views_are_rendered_stored_and_replayed(django_server, db, kind):
    key, body = new_key(), b'{"amount": 5, "to": "acct-2"}'
    first = django_server.post(f"/drf/{kind}", key=key, body=body, headers=DRF_TOKEN)
    assert first.status_code == 201, first.text
    doc = first.json()
    assert doc["kind"] == kind and doc["data"] == {"amount": 5, "to": "acct-2"} and doc["user"] == "alice"
    assert first.headers["content-type"] == "application/json"
    again = django_server.post(f"/drf/{kind}", key=key, body=b'{"to":"acct-2","amount":5}', headers=DRF_TOKEN)
    assert again.status_code == 201 and again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content and again.headers["location"] == first.headers["location"]
    assert db.execute("SELECT count(*) FROM effects WHERE idem_key = %s::text", [key]).fetchone()[0] == 1
    (scope,) = db.execute("SELECT scope FROM idempotency.requests WHERE key = %s::text", [key]).fetchone()
    assert json.loads(scope)[1:4] == ["alice", "POST", f"/drf/{kind}"]


def test_rest_framework_principal_is_its_authenticated_user(django_server, db):
    key, body = new_key(), b'{"amount": 1}'
    alice = django_server.post("/drf/apiview", key=key, body=body, headers=DRF_TOKEN)
    bob = django_server.post("/drf/apiview", key=key, body=body, headers={"authorization": "Token bob-token"})
    anonymous = django_server.post("/drf/apiview", key=key, body=body)
    for r in (alice, bob, anonymous):
        assert r.status_code == 201 and "idempotent-replayed" not in r.headers
    assert [alice.json()["user"], bob.json()["user"], anonymous.json()["user"]] == ["alice", "bob", None]


def test_an_async_view_is_refused_when_decorated():
    from idempotency_http.django import Idempotency

    async def create(request):
        return None

    with pytest.raises(TypeError, match="async view"):
        Idempotency(service="test").idempotent()(create)
