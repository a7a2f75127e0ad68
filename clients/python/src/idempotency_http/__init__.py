"""Idempotency-Key for HTTP APIs on the ``idempotency`` Postgres extension (psycopg 3).

The claim, the handler's own writes and the stored response commit in one transaction on one
connection. See README.md and docs/http.md in the repository for the contract.
"""

from .core import (
    Claim,
    HttpResponse,
    Idempotency,
    KeyError_ as IdempotencyKeyError,
    parse_key,
    parse_prefer_wait,
)

__all__ = [
    "Claim",
    "HttpResponse",
    "Idempotency",
    "IdempotencyKeyError",
    "parse_key",
    "parse_prefer_wait",
]
