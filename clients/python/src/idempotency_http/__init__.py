"""Idempotency-Key for HTTP APIs on the ``idempotency`` Postgres extension (psycopg 3).

The claim, the handler's own writes and the stored response commit in one transaction on one
connection. Framework layers: ``idempotency_http.fastapi``, ``.flask``, ``.django``.
The contract: docs/http.md in the repository.
"""

from .core import (DEFAULT_PROBLEM_BASE, NEVER_REPLAYED, PROBLEMS, Claim, HttpResponse, Settings,
                   default_statuses)
from .keys import KeyProblem, essence, fingerprint_plan, parse_key, parse_prefer_wait

__version__ = "0.2.0"

__all__ = [
    "DEFAULT_PROBLEM_BASE",
    "NEVER_REPLAYED",
    "PROBLEMS",
    "Claim",
    "HttpResponse",
    "KeyProblem",
    "Settings",
    "default_statuses",
    "essence",
    "fingerprint_plan",
    "parse_key",
    "parse_prefer_wait",
]
