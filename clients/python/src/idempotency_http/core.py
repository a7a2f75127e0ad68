"""Framework-neutral core: header parsing, the claim, outcome mapping, completion.

One request runs in one transaction on the caller's psycopg ``AsyncConnection``:

    claim (idem_claim with idem_hash of the payload)
    -> new claim: the handler runs in a savepoint on the same connection, then
       2xx/3xx: idem_complete with the response (idem_http_response form), commit;
       final 4xx: the handler's writes are undone, idem_http_fail keeps the error response;
       5xx, 408/409/425/429 or an exception: the handler's writes are undone,
       idem_fail(retryable => true); the key can be retried;
    -> replay_success / final_failure: the stored response, plus Idempotent-Replayed: true;
    -> processing_active: 409 problem+json with Retry-After;
    -> P4002 (same key, other payload): 422 problem+json.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional

import http_sf
import psycopg
from psycopg import sql

PROBLEM = "application/problem+json"
#: Statuses that end an attempt as a retryable failure although they are 4xx.
RETRYABLE_4XX = frozenset({408, 409, 425, 429})
_PREFER_WAIT = re.compile(r"(?:^|[,;\s])wait\s*=\s*\"?(\d+)\"?", re.IGNORECASE)


class KeyError_(ValueError):
    """The Idempotency-Key header is missing or is not an RFC 8941 sf-string."""


def parse_key(value: Optional[str]) -> str:
    """The key from an ``Idempotency-Key`` header value (an RFC 8941 sf-string, e.g. ``"abc"``)."""
    if value is None or value.strip() == "":
        raise KeyError_("the Idempotency-Key header is required")
    try:
        item = http_sf.parse(value.encode("ascii"), tltype="item")
    except (UnicodeEncodeError, http_sf.StructuredFieldError, ValueError) as exc:
        raise KeyError_(f"Idempotency-Key must be an RFC 8941 string such as \"8e03978e\": {exc}") from exc
    key = item[0] if isinstance(item, tuple) else item
    if type(key) is not str:  # Token and DisplayString are str subclasses
        raise KeyError_('Idempotency-Key must be an RFC 8941 string (in double quotes), such as "8e03978e"')
    if key == "" or len(key.encode()) > 255:
        raise KeyError_("Idempotency-Key must be 1 to 255 bytes long")
    return key


def parse_prefer_wait(value: Optional[str]) -> Optional[float]:
    """Seconds from an RFC 7240 ``Prefer: wait=N`` header, or None."""
    if not value:
        return None
    match = _PREFER_WAIT.search(value)
    return float(match.group(1)) if match else None


@dataclass
class HttpResponse:
    """A response in framework-neutral form: what is sent, and what is stored."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    @classmethod
    def problem(cls, status: int, title: str, detail: str, extra_headers=()) -> "HttpResponse":
        doc = {"type": "about:blank", "title": title, "status": status, "detail": detail}
        return cls(status, [("content-type", PROBLEM), *extra_headers], json.dumps(doc).encode())

    @classmethod
    def from_stored(cls, stored: dict) -> "HttpResponse":
        headers = [(name, value) for name, value in (stored.get("headers") or {}).items()]
        body = stored.get("body")
        headers.append(("idempotent-replayed", "true"))
        return cls(int(stored["status"]), headers, b"" if body is None else body.encode())


@dataclass
class Claim:
    """What the handler gets: the connection to write with (inside the claim's transaction)."""

    conn: psycopg.AsyncConnection
    scope: str
    key: str
    payload: Any
    outcome: str
    attempt: int
    recovery_point: Optional[str]


class _Undo(Exception):
    """Rolls the handler's savepoint back while keeping its response."""

    def __init__(self, response: HttpResponse):
        super().__init__(response.status)
        self.response = response


def _reject(constant: str):
    raise ValueError(f"{constant} is not JSON")


def _interval(seconds: float) -> str:
    return f"{seconds:.3f} seconds"


class Idempotency:
    """Settings shared by the routes of an app.

    ``wait``: seconds a duplicate waits for an in-flight holder by default (0: answer 409 at
    once); ``max_wait``: the most a client may ask for with ``Prefer: wait=N``.
    ``schema``: where the extension's functions are, if not on the connection's search_path.
    """

    def __init__(self, *, lease: float = 300.0, retention: float = 86400.0, wait: float = 0.0,
                 max_wait: float = 0.0, retry_after: int = 1, schema: Optional[str] = None):
        self.lease = lease
        self.retention = retention
        self.wait = wait
        self.max_wait = max(max_wait, wait)
        self.retry_after = retry_after
        self.schema = schema

    def _fn(self, name: str) -> sql.Composable:
        return sql.Identifier(self.schema, name) if self.schema else sql.Identifier(name)

    def wait_for(self, prefer: Optional[str]) -> float:
        asked = parse_prefer_wait(prefer)
        return self.wait if asked is None else min(asked, self.max_wait)

    async def handle(self, conn: psycopg.AsyncConnection, *, scope: str, key_header: Optional[str],
                     body: bytes, handler: Callable[[Claim], Awaitable[HttpResponse]],
                     wait: float = 0.0) -> HttpResponse:
        """Run one request: claim, handler, completion; the answer to send."""
        try:
            key = parse_key(key_header)
        except KeyError_ as exc:
            return HttpResponse.problem(400, "Idempotency-Key required", str(exc))
        try:
            payload = json.loads(body.decode("utf-8"), parse_constant=_reject) if body.strip() else None
        except ValueError as exc:  # UnicodeDecodeError too
            return HttpResponse.problem(400, "Body is not JSON", str(exc))
        try:
            return await self._run(conn, scope, key, body, payload, handler, wait)
        except psycopg.Error as exc:
            if exc.sqlstate == "P4002":
                return HttpResponse.problem(
                    422, "Idempotency-Key reused",
                    "This Idempotency-Key was used for a request with a different payload.")
            raise

    async def _run(self, conn, scope, key, body, payload, handler, wait) -> HttpResponse:
        text = body.decode() if body.strip() else "null"
        failure: Optional[BaseException] = None
        async with conn.transaction():
            claim_sql = sql.SQL(
                "SELECT c.outcome::pg_catalog.text, c.attempt, c.recovery_point, {replay}(c) "
                "FROM {claim}(%s, %s, {hash}(%s::pg_catalog.jsonb), lease => %s::pg_catalog.interval, "
                "retention => %s::pg_catalog.interval{wait}) AS c"
            ).format(replay=self._fn("idem_http_replay"), claim=self._fn("idem_claim"),
                     hash=self._fn("idem_hash"),
                     wait=sql.SQL(", wait => %s::pg_catalog.interval") if wait > 0 else sql.SQL(""))
            params = [scope, key, text, _interval(self.lease), _interval(self.retention)]
            if wait > 0:
                params.append(_interval(wait))
            cur = await conn.execute(claim_sql, params)
            outcome, attempt, recovery_point, stored = await cur.fetchone()
            if stored is not None:
                return HttpResponse.from_stored(stored)
            if outcome == "processing_active":
                return HttpResponse.problem(
                    409, "Request in progress",
                    "A request with this Idempotency-Key is being processed; retry later.",
                    [("retry-after", str(self.retry_after))])
            claim = Claim(conn, scope, key, payload, outcome, attempt, recovery_point)
            try:
                async with conn.transaction():  # a savepoint: undone on failure
                    response = await handler(claim)
                    if response.status >= 400:
                        raise _Undo(response)
            except _Undo as undo:
                response = undo.response
                if response.status >= 500 or response.status in RETRYABLE_4XX:
                    await self._fail_retryable(conn, scope, key, attempt, f"http_{response.status}",
                                               f"the handler answered {response.status}")
                else:
                    await conn.execute(
                        sql.SQL("SELECT {fail}(%s, %s, {resp}(%s, %s::pg_catalog.jsonb, %s), %s)").format(
                            fail=self._fn("idem_http_fail"), resp=self._fn("idem_http_response")),
                        [scope, key, response.status, _headers_json(response), _body_text(response), attempt])
                return response
            except Exception as exc:  # the handler raised: this attempt failed, retryably
                await self._fail_retryable(conn, scope, key, attempt, type(exc).__name__, str(exc))
                failure = exc
            else:
                await conn.execute(
                    sql.SQL("SELECT {complete}(%s, %s, {resp}(%s, %s::pg_catalog.jsonb, %s), %s)").format(
                        complete=self._fn("idem_complete"), resp=self._fn("idem_http_response")),
                    [scope, key, response.status, _headers_json(response), _body_text(response), attempt])
                return response
        # Only here when the handler raised: the failure is committed; let the app report it.
        raise failure

    async def _fail_retryable(self, conn, scope, key, attempt, code, message):
        await conn.execute(
            sql.SQL("SELECT {fail}(%s, %s, true, %s, %s, %s)").format(fail=self._fn("idem_fail")),
            [scope, key, code[:255], message.encode()[:8000].decode(errors="ignore"), attempt])


def _headers_json(response: HttpResponse) -> str:
    merged: dict[str, str] = {}
    for name, value in response.headers:
        name = name.lower()
        merged[name] = f"{merged[name]}, {value}" if name in merged else value
    return json.dumps(merged)


def _body_text(response: HttpResponse) -> Optional[str]:
    if not response.body:
        return None
    try:
        return response.body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TypeError("only UTF-8 text responses can be stored for replay") from exc
