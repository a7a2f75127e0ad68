"""Header parsing (no server needed)."""

import pytest

from idempotency_http import IdempotencyKeyError, parse_key, parse_prefer_wait


def test_sf_string_key():
    assert parse_key('"8e03978e-40d5-43e8-bc93-6894a57f9324"') == "8e03978e-40d5-43e8-bc93-6894a57f9324"
    assert parse_key('"a \\"quoted\\" key"') == 'a "quoted" key'


@pytest.mark.parametrize("value", [None, "", "token", '"unterminated', '""', ":Ynl0ZXM=:", "1", '"' + "x" * 256 + '"'])
def test_bad_keys(value):
    with pytest.raises(IdempotencyKeyError):
        parse_key(value)


def test_prefer_wait():
    assert parse_prefer_wait("wait=5") == 5
    assert parse_prefer_wait("respond-async, wait=10") == 10
    assert parse_prefer_wait("return=minimal") is None
    assert parse_prefer_wait(None) is None
