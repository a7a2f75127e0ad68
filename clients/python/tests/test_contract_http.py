"""The contract (docs/http.md) through real servers, on FastAPI, Flask and Django alike:
keys, bodies, limits, methods, statuses, problem documents, replayed headers (scopes: test_scope.py)."""

import base64
import json
import socket
import threading
from pathlib import Path

import httpx
import pytest

from conftest import new_key

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "contract-vectors.json").read_text())
BASE = "https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header#"


def is_problem(r, status, slug):
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    doc = r.json()
    assert doc["type"] == BASE + slug and doc["status"] == status, doc
    return doc


def row(db, key):
    return db.execute("SELECT status::text, request_hash, failure_code FROM idempotency.requests "
                      "WHERE key = %s::text", [key]).fetchone()


def effects(db, key):
    return db.execute("SELECT count(*) FROM effects WHERE idem_key = %s::text", [key]).fetchone()[0]


def test_missing_key_is_400_required(server, db):
    doc = is_problem(server.post("/echo", body=b"{}"), 400, "key-required")
    assert doc["title"] == "Idempotency-Key header is required"


@pytest.mark.parametrize("value", ["a b", '"unterminated', "x" * 256, '"' + "y" * 256 + '"', "", '""',
                                   "a,b", '"a", "b"', '"abc";V=1'])
def test_malformed_key_is_400_malformed(server, db, value):
    doc = is_problem(server.post("/echo", key=value, body=b"{}"), 400, "key-malformed")
    assert doc["title"] == "Idempotency-Key header is malformed"
    assert doc["detail"]


def test_two_key_lines_are_malformed(server, db):
    r = httpx.post(server.url + "/echo", content=b"{}",
                   headers=[("content-type", "application/json"), ("idempotency-key", "a"),
                            ("idempotency-key", "b")])
    is_problem(r, 400, "key-malformed")


def test_bare_and_quoted_keys_are_the_same_key(server, db):
    key = new_key()
    first = server.post("/echo", key=key, body=b'{"a": 1}')
    assert first.status_code == 201, first.text
    assert "idempotent-replayed" not in first.headers
    again = server.post("/echo", key=f'"{key}";v=1', body=b'{"a":1}')
    assert again.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content
    assert effects(db, key) == 1


@pytest.mark.parametrize("vector", [v for v in VECTORS["fingerprints"] if "hash" in v], ids=lambda v: v["name"])
def test_every_body_is_fingerprinted_as_the_vectors_say(server, db, vector):
    key = new_key()
    body = base64.b64decode(vector["body_base64"])
    r = server.post("/echo", key=key, body=body, content_type=vector["content_type"])
    assert r.status_code == 201, r.text
    assert json.loads(r.content)["bytes"] == len(body)
    assert row(db, key)[1] == vector["hash"]
    again = server.post("/echo", key=key, body=body, content_type=vector["content_type"])
    assert again.headers["idempotent-replayed"] == "true"
    assert effects(db, key) == 1


@pytest.mark.parametrize("content_type,body,other", [
    ("text/plain", b"hello", b"hello!"),
    ("application/x-www-form-urlencoded", b"b=2&a=1", b"a=1&b=3"),
    ("application/octet-stream", bytes(range(256)), bytes(range(255))),
    ("multipart/form-data; boundary=B", b'--B\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--B--\r\n',
     b'--B\r\nContent-Disposition: form-data; name="a"\r\n\r\n2\r\n--B--\r\n'),
])
def test_non_json_bodies_replay_and_mismatch(server, db, content_type, body, other):
    key = new_key()
    assert server.post("/echo", key=key, body=body, content_type=content_type).status_code == 201
    again = server.post("/echo", key=key, body=body, content_type=content_type)
    assert again.headers["idempotent-replayed"] == "true"
    doc = is_problem(server.post("/echo", key=key, body=other, content_type=content_type), 422, "payload-mismatch")
    assert doc["title"] == "Idempotency-Key was used for a different request"
    assert effects(db, key) == 1


def test_form_field_order_and_escapes_do_not_matter(server, db):
    key = new_key()
    form = "application/x-www-form-urlencoded"
    assert server.post("/echo", key=key, body=b"b=2&a=x+y", content_type=form).status_code == 201
    assert server.post("/echo", key=key, body=b"a=x%20y&b=2", content_type=form).headers["idempotent-replayed"] == "true"


def test_an_empty_body_is_its_own_case(server, db):
    key = new_key()
    assert server.post("/echo", key=key, body=b"", content_type=None).status_code == 201
    assert row(db, key)[1] == VECTORS["fingerprints"][0]["hash"]
    assert server.post("/echo", key=key, body=b"", content_type="application/json").headers["idempotent-replayed"] == "true"
    is_problem(server.post("/echo", key=key, body=b"null"), 422, "payload-mismatch")


@pytest.mark.parametrize("body", [b"{a", b'{"a": NaN}', b'"\xff"', b'{"a": "\\u0000"}',
                                  b"[" * 129 + b"]" * 129, b'{"a":' * 3000 + b"1" + b"}" * 3000,
                                  b"[" * 100_000 + b"]" * 100_000],
                         ids=["broken", "NaN", "not-utf8", "nul", "deep-129", "deep-3000", "deep-100000"])
def test_a_json_body_that_is_not_json_is_400_and_claims_nothing(server, db, body):
    key = new_key()
    doc = is_problem(server.post("/echo", key=key, body=body), 400, "body-not-json")
    assert doc["title"] == "Request body is not valid JSON"
    assert row(db, key) is None and effects(db, key) == 0


def test_json_128_deep_is_taken_as_idem_hash_takes_it(server, db):
    """128 levels is idem_hash's limit in both editions (129 is 400 above, not a 500 from 54001)."""
    key = new_key()
    assert server.post("/echo", key=key, body=b"[" * 128 + b"]" * 128).status_code == 201
    assert row(db, key) is not None


def test_an_endless_chunked_body_is_413_after_the_limit(server, db):
    """Read up to max_body_bytes and no further: a server that read the whole body first would
    never answer this one."""
    key, stop = new_key(), threading.Event()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=20)
    sock.sendall(f"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
                 f"Idempotency-Key: {key}\r\nTransfer-Encoding: chunked\r\n\r\n".encode())

    def feed():
        chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
        try:
            while not stop.is_set():
                sock.sendall(chunk)
        except OSError:
            pass  # the server answered and closed

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        head = sock.recv(4096).split(b"\r\n", 1)[0]
    finally:
        stop.set()
        sock.close()
    if server.framework == "django":
        # WSGI Django reads no body without Content-Length (an empty one): it never reads on.
        assert head.startswith(b"HTTP/1.1 ") and int(head.split()[1]) in (201, 413)
    else:
        assert head.split()[1] == b"413", head
        assert row(db, key) is None and effects(db, key) == 0


def test_a_body_over_the_limit_is_413_and_runs_nothing(server, db):
    key = new_key()
    doc = is_problem(server.post("/echo", key=key, body=b"x" * (1024 * 1024 + 1), content_type="text/plain"),
                     413, "body-too-large")
    assert doc["title"] == "Request body is too large"
    assert row(db, key) is None and effects(db, key) == 0
    assert server.post("/echo", key=key, body=b"x" * (1024 * 1024), content_type="text/plain").status_code == 201


def test_a_large_error_response_is_stored_without_its_body(server, db):
    key, before = new_key(), server.runs("error-big")
    first = server.post("/error-big?size=9000", key=key)
    assert first.status_code == 400 and len(first.content) == 9000
    assert "idempotent-body-omitted" not in first.headers
    assert row(db, key)[0] == "failed_final"
    again = server.post("/error-big?size=9000", key=key)
    assert again.status_code == 400 and again.content == b""
    assert again.headers["idempotent-body-omitted"] == "true"
    assert again.headers["idempotent-replayed"] == "true"
    assert server.runs("error-big") == before + 1
    small = new_key()
    assert server.post("/error-big?size=7000", key=small).status_code == 400
    kept = server.post("/error-big?size=7000", key=small)
    assert len(kept.content) == 7000 and "idempotent-body-omitted" not in kept.headers


def test_a_large_success_is_stored_without_its_body(server, db):
    key, size = new_key(), 1024 * 1024 + 10
    first = server.post(f"/ok-big?size={size}", key=key)
    assert first.status_code == 200 and len(first.content) == size
    again = server.post(f"/ok-big?size={size}", key=key)
    assert again.status_code == 200 and again.content == b""
    assert again.headers["idempotent-body-omitted"] == "true"
    assert effects(db, key) == 1


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_unclaimed_methods_ignore_the_key(server, db, method):
    key = new_key()
    for _ in range(2):
        r = httpx.request(method, server.url + "/echo", headers={"idempotency-key": key})
        assert r.status_code == 201 and "idempotent-replayed" not in r.headers
        assert r.json()["method"] == method
    r = httpx.request(method, server.url + "/echo", headers={"idempotency-key": "bad key"})
    assert r.status_code == 201
    assert row(db, key) is None


@pytest.mark.parametrize("code,final", [(404, True), (422, True), (409, False), (429, False), (503, False)])
def test_statuses_final_or_retryable(server, db, code, final):
    key, name = new_key(), f"status-{code}"
    before = server.runs(name)
    assert server.post(f"/status/{code}", key=key).status_code == code
    again = server.post(f"/status/{code}", key=key)
    assert again.status_code == code
    assert (again.headers.get("idempotent-replayed") == "true") is final
    assert server.runs(name) == before + (1 if final else 2)
    assert row(db, key)[0] == ("failed_final" if final else "failed_retryable")


def test_a_handler_exception_is_a_500_problem_without_its_text(server, db):
    key, before = new_key(), server.runs("boom")
    for _ in range(2):
        r = server.post("/boom", key=key)
        doc = is_problem(r, 500, "internal-error")
        assert doc["title"] == "Internal Server Error"
        assert "hunter2" not in r.text and "secret" not in r.text and "RuntimeError" not in r.text
    assert server.runs("boom") == before + 2  # retryable: it ran again
    assert row(db, key)[0] == "failed_retryable" and effects(db, key) == 0


def test_replayed_headers_allow_list_plus_configured(server, db):
    key = new_key()
    first = server.post("/headers", key=key)
    assert first.status_code == 201
    assert first.headers["set-cookie"] == "session=secret"  # the first answer is the handler's own
    again = server.post("/headers", key=key)
    assert again.headers["location"] == "/things/1" and again.headers["x-extra"] == "kept"
    for name in ["set-cookie", "refresh", "x-other"]:
        assert name not in again.headers, name
    assert again.content == first.content


def test_payment_created_then_byte_identical_replay(server, db):
    key = new_key()
    first = server.post("/payments", key=key, body=b'{"order_id": "o-1", "amount": 12.5}')
    assert first.status_code == 201, first.text
    assert first.headers["location"] == f"/payments/{first.json()['payment_id']}"
    again = server.post("/payments", key=key, body=b'{ "amount":12.50,\n "order_id" :"o-1" }')
    assert again.status_code == 201 and again.content == first.content
    assert again.headers["location"] == first.headers["location"]
    assert again.headers["content-type"] == first.headers["content-type"]
    is_problem(server.post("/payments", key=key, body=b'{"order_id": "o-1", "amount": 13}'), 422, "payload-mismatch")
    assert db.execute("SELECT count(*) FROM payments WHERE idem_key = %s::text", [key]).fetchone()[0] == 1


def test_final_client_error_is_replayed(server, db):
    key = new_key()
    r = server.post("/payments", key=key, body=b'{"order_id": "o-2"}')
    assert r.status_code == 400
    again = server.post("/payments", key=key, body=b'{"order_id":"o-2"}')
    assert again.status_code == 400 and again.content == r.content
    assert again.headers["idempotent-replayed"] == "true"


def test_a_database_error_in_the_handler_is_retryable(server, db):
    key = new_key()
    is_problem(server.post("/payments", key=key, body=b'{"order_id": "o", "amount": "not a number"}'),
               500, "internal-error")
    assert row(db, key)[0] == "failed_retryable"
