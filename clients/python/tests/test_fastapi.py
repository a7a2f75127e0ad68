"""FastAPI the FastAPI way: endpoints keep their signature (Pydantic body, Depends, Header),
return dicts, models or Responses with status_code=, and OpenAPI documents the contract."""

import httpx

from conftest import new_key

ORDER = b'{"order_id": "o-9", "amount": 3.5}'


def test_a_model_return_with_status_code_is_stored_and_replayed(fastapi_server, db):
    key = new_key()
    first = fastapi_server.post("/fa/model", key=key, body=ORDER, headers={"x-request-id": "r-1"})
    assert first.status_code == 201, first.text
    doc = first.json()
    assert doc["order_id"] == "o-9" and doc["amount"] == "3.5"
    tenant = db.execute("SELECT tenant FROM payments WHERE idem_key = %s::text", [key]).fetchone()[0]
    assert tenant == "r-1"  # Header() reached the endpoint
    again = fastapi_server.post("/fa/model", key=key, body=b'{"amount": 3.50, "order_id": "o-9"}')
    assert again.status_code == 201 and again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"


def test_a_dict_return_is_stored_and_replayed(fastapi_server, db):
    key = new_key()
    first = fastapi_server.post("/fa/dict", key=key, body=ORDER)
    assert first.status_code == 200, first.text
    assert set(first.json()) == {"payment_id"}
    again = fastapi_server.post("/fa/dict", key=key, body=ORDER)
    assert again.content == first.content and again.headers["idempotent-replayed"] == "true"


def test_a_validation_error_is_fastapis_422_and_final(fastapi_server, db):
    key = new_key()
    r = fastapi_server.post("/fa/model", key=key, body=b'{"order_id": "o"}')
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "amount"]
    again = fastapi_server.post("/fa/model", key=key, body=b'{"order_id": "o"}')
    assert again.status_code == 422 and again.headers["idempotent-replayed"] == "true"


def test_http_exception_goes_through_the_apps_handler(fastapi_server, db):
    key, before = new_key(), fastapi_server.runs("fa-http-exception")
    r = fastapi_server.post("/fa/http-exception", key=key)
    assert r.status_code == 404 and r.json() == {"detail": "no such order"}
    again = fastapi_server.post("/fa/http-exception", key=key)
    assert again.status_code == 404 and again.headers["idempotent-replayed"] == "true"
    assert fastapi_server.runs("fa-http-exception") == before + 1


def test_a_streaming_response_is_sent_whole_and_replayed_without_its_body(fastapi_server, db):
    key = new_key()
    first = fastapi_server.post("/fa/stream", key=key)
    assert first.status_code == 200 and first.text.count("chunk") == 3
    again = fastapi_server.post("/fa/stream", key=key)
    assert again.status_code == 200 and again.content == b""
    assert again.headers["idempotent-body-omitted"] == "true"
    assert again.headers["content-type"].startswith("text/plain")
    assert db.execute("SELECT count(*) FROM effects WHERE idem_key = %s::text", [key]).fetchone()[0] == 1


def test_openapi_shows_the_body_the_header_and_the_problems(fastapi_server):
    spec = httpx.get(fastapi_server.url + "/openapi.json").json()
    op = spec["paths"]["/fa/model"]["post"]
    params = {p["name"]: p for p in op["parameters"]}
    assert params["Idempotency-Key"]["in"] == "header" and params["Idempotency-Key"]["required"] is True
    assert "x-request-id" in params  # the endpoint's own Header() is still there
    assert "$ref" in op["requestBody"]["content"]["application/json"]["schema"]  # the Pydantic model
    for code in ["400", "409", "413", "422"]:
        assert "application/problem+json" in op["responses"][code]["content"], code
    assert "201" in op["responses"]
    get = spec["paths"]["/runs/{name}"]["get"]
    assert all(p["name"] != "Idempotency-Key" for p in get.get("parameters", []))
    assert "409" not in get["responses"]
