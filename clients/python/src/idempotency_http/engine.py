"""One request through the contract, synchronously (Flask, Django) or asynchronously (FastAPI).

    claim (in a transaction) -> replay | 409 | wait | run the handler in a savepoint, then
    complete / final failure / retryable failure, commit.

A duplicate that waits (Prefer: wait=N) never keeps a connection or a transaction while it
sleeps: it claims without waiting, rolls back, gives the connection back, sleeps 50..500 ms and
tries again until its deadline.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Any, Awaitable, Callable, ContextManager, Optional, Sequence

from .core import (Claim, HttpResponse, Settings, Statements, interval, replayed,
                   stored_parts)
from .keys import BodyNotJson, KeyProblem, fingerprint_plan, parse_key

log = logging.getLogger("idempotency_http")


class _Answer(Exception):
    """Leaves the transaction (rolled back) with a response."""

    def __init__(self, response: HttpResponse):
        super().__init__(response.status)
        self.response = response


class _Again(Exception):
    """The key is in flight and the request may still wait: roll back, sleep, claim again."""


class _Undo(Exception):
    """Rolls the handler's savepoint back, keeping its response."""

    def __init__(self, response: HttpResponse, verdict: str):
        super().__init__(response.status)
        self.response, self.verdict = response, verdict


class _Request:
    """What the engine needs of a request, after the framework layer read its body."""

    def __init__(self, settings: Settings, scope: str, key_values: Sequence[str],
                 content_type: Optional[str], prefer: Optional[str], body: bytes):
        self.scope = scope
        self.key = parse_key(key_values)
        self.plan = fingerprint_plan(content_type, body)
        self.wait = settings.wait_for(prefer)


class _Base:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.statements: Optional[Statements] = (
            Statements(settings.schema) if settings.schema else None)
        self.waiters = 0
        self._lock = threading.Lock()

    def prepare(self, scope: str, key_values: Sequence[str], content_type: Optional[str],
                prefer: Optional[str], body: Optional[bytes]):
        """A _Request, or the problem that answers the request at once."""
        s = self.settings
        try:
            if body is None:
                parse_key(key_values)  # a missing key is said before a large body
                return s.problem("body-too-large", f"The request body is over {s.max_body_bytes} bytes.")
            return _Request(s, scope, key_values, content_type, prefer, body)
        except KeyProblem as exc:
            slug = "key-required" if exc.required else "key-malformed"
            return s.problem(slug, str(exc)[:1].upper() + str(exc)[1:] + ".")
        except BodyNotJson as exc:
            return s.problem("body-not-json", str(exc)[:1].upper() + str(exc)[1:] + ".")

    @property
    def st(self) -> Statements:
        assert self.statements is not None, "the schema is looked up before the first statement"
        return self.statements

    def too_large(self, content_length: Optional[int]) -> bool:
        return content_length is not None and content_length > self.settings.max_body_bytes

    def claim_call(self, req: _Request):
        """The claim statement and its parameters; the body's hash is computed in it."""
        s, (kind, value) = self.settings, req.plan
        return self.st.claims[kind], [list(s.replay_headers), req.scope, req.key, value,
                                      interval(s.lease), interval(s.retention)]

    def claim_refused(self, req: _Request, exc: BaseException) -> Optional[HttpResponse]:
        """The problem for a claim Postgres refused because of the request, or None."""
        code = _sqlstate(exc)
        if code == "P4002":
            return self.settings.problem(
                "payload-mismatch", "This Idempotency-Key was used for a request with another body.")
        # what jsonb input raises: bad syntax, \u0000, nesting past the stack (as the Node adapter)
        if req.plan[0] != "hash" and code in ("22P02", "22P05", "54001"):
            return self.settings.problem("body-not-json", "The body is not JSON that Postgres accepts.")
        return None

    def on_claim(self, row, deadline: float, registered: bool) -> Optional[HttpResponse]:
        """The answer, or None to run the handler; raises _Again to wait (counted as a waiter)."""
        outcome, _attempt, stored = row
        if stored is not None:
            return replayed(stored)
        if outcome != "processing_active":
            return None
        if time.monotonic() >= deadline:
            return self.settings.in_flight(
                "A request with this Idempotency-Key is being processed; retry later.")
        if not registered:
            with self._lock:
                if self.waiters >= self.settings.max_waiters:
                    return self.settings.in_flight(
                        "Too many requests of this process are waiting; retry later.",
                        "too-many-waiters")
                self.waiters += 1
        raise _Again()

    def unregister(self) -> None:
        with self._lock:
            self.waiters -= 1

    def verdict_of(self, response: HttpResponse) -> str:
        verdict = self.settings.statuses(response.status)
        if verdict not in ("complete", "fail", "retry"):
            raise ValueError(f"statuses({response.status}) gave {verdict!r}")
        if verdict == "fail" and response.status < 400:
            raise ValueError("a final failure needs an error status (400-599)")
        return verdict

    def finish_statement(self, req: _Request, attempt: int, response: HttpResponse, verdict: str):
        st, keep = self.st, list(self.settings.replay_headers)
        if verdict == "retry":
            return st.fail_retryable, [req.scope, req.key, f"http_{response.status}",
                                       f"the handler answered {response.status}", attempt]
        headers, body = stored_parts(response, self.settings, verdict, keep)
        stmt = st.complete if verdict == "complete" else st.http_fail
        return stmt, [req.scope, req.key, response.status, json.dumps(headers), body, keep, attempt]

    def crashed(self, req: _Request, attempt: int, exc: BaseException):
        log.error("idempotency_http: the handler raised (scope %r, key %r)", req.scope, req.key,
                  exc_info=exc)
        problem = self.settings.problem(
            "internal-error", "The request failed; it may be retried with the same Idempotency-Key.")
        return problem, (self.st.fail_retryable,
                         [req.scope, req.key, "handler_error", f"the handler raised {type(exc).__name__}", attempt])


def _sqlstate(exc: BaseException) -> str:
    """The SQLSTATE of a psycopg error, also when Django wrapped it (as its __cause__)."""
    for err in (exc, exc.__cause__):
        code = getattr(err, "sqlstate", None)
        if code:
            return code
    return ""


class SyncEngine(_Base):
    """``session()``: a context manager yielding a session (PsycopgSession, or the Django
    layer's DjangoSession): ``one(statement, params)``, ``transaction()``, ``handle``."""

    def __init__(self, settings: Settings, session: Callable[[], ContextManager[Any]]):
        super().__init__(settings)
        self.session = session

    def handle(self, req: _Request, call: Callable[[Claim], HttpResponse]) -> HttpResponse:
        deadline, delay, registered = time.monotonic() + req.wait, 0.05, False
        try:
            while True:
                try:
                    with self.session() as sess:
                        return self._once(sess, req, deadline, registered, call)
                except _Again:
                    registered = True
                except _Answer as answer:
                    return answer.response
                time.sleep(max(0.0, min(delay, deadline - time.monotonic())))
                delay = min(delay * 2, 0.5)
        finally:
            if registered:
                self.unregister()

    def _once(self, sess, req: _Request, deadline: float, registered: bool, call) -> HttpResponse:
        if self.statements is None:
            with sess.transaction():
                row = sess.one(Statements.FIND_SCHEMA, []) or sess.one(Statements.FIND_PLAIN, [])
                self.statements = Statements.found(row)
        with sess.transaction():
            try:
                row = sess.one(*self.claim_call(req))
            except Exception as exc:  # the transaction is aborted: _Answer rolls it back
                refused = self.claim_refused(req, exc)
                if refused is None:
                    raise
                raise _Answer(refused) from None
            answer = self.on_claim(row, deadline, registered)
            if answer is not None:
                return answer
            attempt = row[1]
            claim = Claim(sess.handle, req.scope, req.key, row[0], attempt)
            try:
                with sess.transaction():  # a savepoint: undone unless the response is stored as complete
                    response = call(claim)
                    verdict = self.verdict_of(response)
                    if verdict != "complete":
                        raise _Undo(response, verdict)
            except _Undo as undo:
                response, verdict = undo.response, undo.verdict
            except Exception as exc:
                response, (stmt, params) = self.crashed(req, attempt, exc)
                sess.one(stmt, params)
                return response
            sess.one(*self.finish_statement(req, attempt, response, verdict))
            return response


class AsyncEngine(_Base):
    """``session()``: an async context manager yielding an async session (AsyncPsycopgSession,
    or idempotency_http.sqlalchemy's AsyncSqlAlchemySession): ``await one(statement, params)``,
    ``transaction()`` (an async context manager), ``handle``."""

    def __init__(self, settings: Settings, session: Callable[[], Any]):
        super().__init__(settings)
        self.session = session

    async def handle(self, req: _Request, call: Callable[[Claim], Awaitable[HttpResponse]]) -> HttpResponse:
        deadline, delay, registered = time.monotonic() + req.wait, 0.05, False
        try:
            while True:
                try:
                    async with self.session() as sess:
                        return await self._once(sess, req, deadline, registered, call)
                except _Again:
                    registered = True
                except _Answer as answer:
                    return answer.response
                await asyncio.sleep(max(0.0, min(delay, deadline - time.monotonic())))
                delay = min(delay * 2, 0.5)
        finally:
            if registered:
                self.unregister()

    async def _once(self, sess, req: _Request, deadline: float, registered: bool, call) -> HttpResponse:
        if self.statements is None:
            async with sess.transaction():
                row = (await sess.one(Statements.FIND_SCHEMA, [])
                       or await sess.one(Statements.FIND_PLAIN, []))
                self.statements = Statements.found(row)
        async with sess.transaction():
            try:
                row = await sess.one(*self.claim_call(req))
            except Exception as exc:  # the transaction is aborted: _Answer rolls it back
                refused = self.claim_refused(req, exc)
                if refused is None:
                    raise
                raise _Answer(refused) from None
            answer = self.on_claim(row, deadline, registered)
            if answer is not None:
                return answer
            attempt = row[1]
            claim = Claim(sess.handle, req.scope, req.key, row[0], attempt)
            try:
                async with sess.transaction():  # a savepoint: undone unless stored as complete
                    response = await call(claim)
                    verdict = self.verdict_of(response)
                    if verdict != "complete":
                        raise _Undo(response, verdict)
            except _Undo as undo:
                response, verdict = undo.response, undo.verdict
            except Exception as exc:
                response, (stmt, params) = self.crashed(req, attempt, exc)
                await sess.one(stmt, params)
                return response
            await sess.one(*self.finish_statement(req, attempt, response, verdict))
            return response


class AsyncPsycopgSession:
    """A session over a psycopg AsyncConnection: ``one``, ``transaction``, ``handle``."""

    def __init__(self, conn):
        self.handle = conn

    async def one(self, stmt, params):
        cur = await self.handle.execute(stmt, params, prepare=False)  # transaction poolers: docs/http.md
        return await cur.fetchone()

    def transaction(self):
        return self.handle.transaction()


class PsycopgSession:
    """A Session over a sync psycopg connection: ``one``, ``transaction``, ``handle``."""

    def __init__(self, conn):
        self.handle = conn

    def one(self, stmt, params):
        # never prepared: a transaction pooler (PgBouncer, Supabase, RDS Proxy) hands each
        # transaction another server session, where a prepared name is missing or taken
        return self.handle.execute(stmt, params, prepare=False).fetchone()

    def transaction(self):
        return self.handle.transaction()
