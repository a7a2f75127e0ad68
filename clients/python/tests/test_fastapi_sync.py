"""FastAPI sync ``def`` endpoints: one without the claim is idempotent through the real example
(uvicorn); a sync endpoint or dependency that depends on idem.claim, whose connection is async,
is refused when the route is defined, not at its first request."""

import httpx
import pytest

from conftest import Server, new_key

pytest.importorskip("fastapi")
from fastapi import APIRouter, Depends  # noqa: E402

from idempotency_http import Claim  # noqa: E402
from idempotency_http.fastapi import Idempotency  # noqa: E402


@pytest.fixture(scope="module")
def fastapi_server(db_url):
    srv = Server("fastapi", db_url).start()
    yield srv
    srv.stop()


def test_a_sync_endpoint_runs_once_and_is_replayed(fastapi_server):
    key = new_key()
    body = b'{"order_id": "o-1", "amount": 5}'
    first = fastapi_server.post("/fa/sync", key=key, body=body)
    assert first.status_code == 201, first.text
    again = fastapi_server.post("/fa/sync", key=key, body=body)
    assert again.headers["idempotent-replayed"] == "true" and again.content == first.content
    assert httpx.get(fastapi_server.url + "/runs/fa-sync").json()["runs"] == 1


def _idem():
    async def no_pool():  # never called: the routes are only defined
        raise AssertionError

    return Idempotency(no_pool)


def test_a_sync_endpoint_on_the_claim_is_refused_when_defined():
    idem = _idem()
    router = APIRouter(route_class=idem.route)
    with pytest.raises(TypeError, match="sync def that depends on idem.claim"):
        @router.post("/sync-claim")
        def sync_claim(claim: Claim = Depends(idem.claim)):
            return {}


def test_a_sync_dependency_on_the_claim_is_refused_when_defined():
    idem = _idem()
    router = APIRouter(route_class=idem.route)

    def repo(claim: Claim = Depends(idem.claim)):
        return claim

    with pytest.raises(TypeError, match="'repo'"):
        @router.post("/sync-dep")
        async def uses_repo(r=Depends(repo)):
            return {}


def test_async_endpoints_and_dependencies_on_the_claim_are_accepted():
    idem = _idem()
    router = APIRouter(route_class=idem.route)

    async def repo(claim: Claim = Depends(idem.claim)):
        return claim

    @router.post("/async-dep")
    async def uses_repo(r=Depends(repo), claim: Claim = Depends(idem.claim)):
        return {}

    @router.get("/sync-get")  # not a claimed method: left as it is
    def sync_get(claim: Claim = Depends(idem.claim)):
        return {}
