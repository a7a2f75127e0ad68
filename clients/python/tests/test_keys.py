"""The request side without a server: key parsing and the body fingerprints of
clients/contract-vectors.json, hashed by the adapter's own SQL on the test database."""

import base64
import json
from pathlib import Path

import pytest

from idempotency_http import KeyProblem, fingerprint_plan, parse_key, parse_prefer_wait
from idempotency_http.core import Statements
from idempotency_http.keys import BodyNotJson

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "contract-vectors.json").read_text())


@pytest.mark.parametrize("row", VECTORS["keys"], ids=lambda r: repr(r["header"])[:40])
def test_key_vectors(row):
    if row["key"] is None:
        with pytest.raises(KeyProblem) as err:
            parse_key([row["header"]])
        assert not err.value.required and str(err.value)
    else:
        assert parse_key([row["header"]]) == row["key"]


def test_missing_and_repeated_keys():
    with pytest.raises(KeyProblem) as err:
        parse_key([])
    assert err.value.required
    with pytest.raises(KeyProblem) as err:
        parse_key(["a", "a"])
    assert not err.value.required


@pytest.mark.parametrize("row", VECTORS["fingerprints"], ids=lambda r: r["name"])
def test_fingerprint_vectors(row, db):
    body = base64.b64decode(row["body_base64"])
    if "error" in row:
        with pytest.raises(BodyNotJson):
            fingerprint_plan(row["content_type"], body)
        return
    kind, value = fingerprint_plan(row["content_type"], body)
    if kind != "hash":
        value = db.execute(Statements("public").hash_statement(kind), [value]).fetchone()[0]
    assert value == row["hash"]


def test_prefer_wait():
    assert parse_prefer_wait("wait=5") == 5
    assert parse_prefer_wait("respond-async, wait=10") == 10
    assert parse_prefer_wait("return=minimal") is None
    assert parse_prefer_wait(None) is None
