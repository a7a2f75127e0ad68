"""FastAPI: a route class, so endpoints keep their own signature and return values.

    from psycopg_pool import AsyncConnectionPool
    from idempotency_http import Claim
    from idempotency_http.fastapi import Idempotency

    pool = AsyncConnectionPool(DATABASE_URL, max_size=4, open=False)
    idem = Idempotency(pool, service="payments-api")
    router = APIRouter(route_class=idem.route)

    @router.post("/payments", status_code=201)
    async def create(order: Order, claim: Claim = Depends(idem.claim)) -> Payment:
        await claim.conn.execute(...)      # in the claim's transaction
        return Payment(...)

The route class wraps FastAPI's own request handler: the claim comes first, then FastAPI
parses the body, runs the dependencies and the endpoint and turns its return value (dict,
model, Response, ``status_code=``) into the Response that is stored and sent. Routes of other
methods (GET, ...) are left as they are. OpenAPI shows the Idempotency-Key header and the
400/409/413/422 problem responses.

The default scope is the service, the principal (``request.user`` of Starlette's
AuthenticationMiddleware, or ``principal=``), the method, the route with its parameters' values
and the query string: a stored response never answers another resource, service or user.
"""

from __future__ import annotations

import inspect
from contextlib import asynccontextmanager
from typing import Any, Callable, Optional, Union, cast

from fastapi import Depends, Header, Request
from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.responses import Response

from .core import PROBLEM, Claim, HttpResponse, Settings, default_scope, identity_of, service_name
from .engine import AsyncEngine, AsyncPsycopgSession
from .sqlalchemy import AsyncSqlAlchemySession, is_engine

Scope = Union[None, str, Callable[[Request], Any]]
Principal = Optional[Callable[[Request], Any]]

_PROBLEM_SCHEMA = {
    "type": "object",
    "required": ["type", "title", "status"],
    "properties": {"type": {"type": "string", "format": "uri"}, "title": {"type": "string"},
                   "status": {"type": "integer"}, "detail": {"type": "string"}},
}


def _problem_doc(description: str, retry_after: bool = False) -> dict:
    doc: dict = {"description": description, "content": {PROBLEM: {"schema": _PROBLEM_SCHEMA}}}
    if retry_after:
        doc["headers"] = {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}}
    return doc


OPENAPI_RESPONSES = {
    400: _problem_doc("Idempotency-Key header missing or malformed, or a JSON body that is not JSON"),
    409: _problem_doc("A request with this Idempotency-Key is being processed", retry_after=True),
    413: _problem_doc("Request body is too large"),
    422: _problem_doc("Idempotency-Key was used for a different request (or the request is invalid)"),
}


def idempotent(*, scope: Scope = None, enabled: bool = True):
    """Per-endpoint options (the function is returned unchanged): its own ``scope``, or
    ``enabled=False`` to leave a POST route out."""

    def mark(endpoint):
        endpoint.__idempotency__ = {"scope": scope, "enabled": enabled}
        return endpoint

    return mark


class _IdempotentRoute(APIRoute):
    idempotency: "Idempotency"

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        idem = self.idempotency
        opts = getattr(endpoint, "__idempotency__", {})
        methods = {m.upper() for m in (kwargs.get("methods") or ["GET"])}
        self.claimed = frozenset() if not opts.get("enabled", True) else methods & frozenset(idem.settings.methods)
        self.scope_option = opts.get("scope") or idem.scope
        if self.claimed:
            header = _required_key if methods <= self.claimed else _optional_key
            kwargs["dependencies"] = [Depends(header), *(kwargs.get("dependencies") or [])]
            kwargs["responses"] = {**OPENAPI_RESPONSES, **(kwargs.get("responses") or {})}
        super().__init__(path, endpoint, **kwargs)
        if self.claimed:
            _refuse_sync_claim(self.dependant, path)

    def get_route_handler(self) -> Callable[[Request], Any]:
        original = super().get_route_handler()
        if not self.claimed:
            return original

        async def handler(request: Request) -> Response:
            if request.method.upper() not in self.claimed:
                return await original(request)
            return await self.idempotency.serve(request, original, self)

        return handler


def _refuse_sync_claim(dependant: Any, path: str) -> None:
    """A sync ``def`` endpoint or dependency runs in a worker thread, where the claim's async
    connection cannot be used: refuse it when the route is defined, not at its first request."""
    for dep in dependant.dependencies:
        if dep.call is Idempotency.claim:
            call = dependant.call
            is_async = (inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)
                        or inspect.iscoroutinefunction(getattr(call, "__call__", None)))
            if not is_async:
                raise TypeError(
                    f"{getattr(call, '__name__', call)!r} ({path}) is a sync def that depends on "
                    "idem.claim: its connection is async; make it `async def`, or leave the "
                    "claim out of a sync endpoint (docs/http-frameworks.md)")
        _refuse_sync_claim(dep, path)


async def _required_key(
        idempotency_key: str = Header(alias="Idempotency-Key", description=(
            "A unique key for this request (a UUID, bare or as an RFC 8941 string); "
            "a retry sends the same key and gets the stored response"))) -> None:
    """Only documents the header: the route class has checked it before FastAPI runs."""


async def _optional_key(
        idempotency_key: Optional[str] = Header(None, alias="Idempotency-Key", description=(
            "Required on the idempotent methods of this path"))) -> None:
    """Only documents the header."""


class Idempotency:
    """The contract for FastAPI apps on a psycopg ``AsyncConnectionPool``.

    ``pool``: an AsyncConnectionPool, or any zero-argument callable giving an async context
    manager that yields an AsyncConnection, or a SQLAlchemy AsyncEngine (psycopg driver).
    ``scope``: None (the default scope: service,
    principal, method, route and its parameters, query), or a string or a callable(request) -> str
    (sync or async) that replaces it whole. ``principal``: a callable(request) -> str or None (sync
    or async); by default the authenticated ``request.user``. ``service``: see Settings. Other
    keywords are :class:`idempotency_http.Settings` fields (methods, max_body_bytes, ...).
    """

    def __init__(self, pool: Any, *, scope: Scope = None, principal: Principal = None,
                 **settings: Any) -> None:
        self.settings = Settings(**settings)
        if is_engine(pool):  # SQLAlchemy AsyncEngine: claim.conn is an AsyncConnection
            if not hasattr(pool, "sync_engine"):
                raise TypeError("FastAPI needs a SQLAlchemy AsyncEngine (create_async_engine), not an Engine")
            self.engine = AsyncEngine(self.settings, lambda: AsyncSqlAlchemySession(pool))
        else:
            connection = pool.connection if hasattr(pool, "connection") else pool

            @asynccontextmanager
            async def session():
                async with connection() as conn:
                    yield AsyncPsycopgSession(conn)

            self.engine = AsyncEngine(self.settings, session)
        self.scope = scope
        self.principal = principal
        #: ``APIRouter(route_class=idem.route)`` or ``app.router.route_class = idem.route``
        self.route = type("IdempotentRoute", (_IdempotentRoute,), {"idempotency": self})

    @staticmethod
    def claim(request: Request) -> Claim:
        """Dependency: the claim of this request (its ``conn`` is in the claim's transaction)."""
        claim = getattr(request.state, "idempotency", None)
        if claim is None:
            raise RuntimeError("this route is not idempotent: use route_class=idem.route on its router")
        return claim

    async def _scope_of(self, request: Request, route: _IdempotentRoute) -> str:
        option = route.scope_option
        if option is None:
            service = service_name(self.settings.service, lambda: _app_name(request, route))
            mount = request.scope.get("root_path", "")  # the route under its mount (app.mount)
            return default_scope(service, await self._principal_of(request), request.method,
                                 mount + route.path, request.path_params, request.url.query)
        if isinstance(option, str):
            return option
        value = option(request)
        return await value if inspect.isawaitable(value) else value

    async def _principal_of(self, request: Request) -> Optional[str]:
        if self.principal is None:  # AuthenticationMiddleware's user; never a client header
            return identity_of(request.scope.get("user"))
        value = self.principal(request)
        value = await value if inspect.isawaitable(value) else value
        return None if value is None else str(value)

    async def serve(self, request: Request, original: Callable[[Request], Any],
                    route: _IdempotentRoute) -> Response:
        length = request.headers.get("content-length")
        body = None
        if not self.engine.too_large(int(length) if length and length.isdigit() else None):
            body = await _read_body(request, self.settings.max_body_bytes)
        prepared = self.engine.prepare(
            await self._scope_of(request, route), request.headers.getlist("idempotency-key"),
            request.headers.get("content-type"), request.headers.get("prefer"), body)
        if isinstance(prepared, HttpResponse):
            return _to_starlette(prepared)

        async def call(claim: Claim) -> HttpResponse:
            request.state.idempotency = claim
            try:
                response = await original(request)
            except (HTTPException, RequestValidationError) as exc:
                response = await _app_handler(request, exc)
            return _from_starlette(response)

        answer = await self.engine.handle(prepared, call)
        return answer.native if answer.native is not None else _to_starlette(answer)


def _app_name(request: Request, route: APIRoute) -> str:
    """The app's title, unless it is FastAPI's default; then the endpoint's module."""
    title = getattr(request.app, "title", None)
    return title if title and title != "FastAPI" else route.endpoint.__module__


async def _read_body(request: Request, limit: int) -> Optional[bytes]:
    """The body, or None past ``limit``; kept on the request for FastAPI to parse."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    body = b"".join(chunks)
    request._body = body  # Starlette's cache: request.body()/json()/form() read it from here
    return body


async def _app_handler(request: Request, exc: Exception) -> Response:
    """The app's own handler for HTTPException / RequestValidationError (or FastAPI's)."""
    handlers = getattr(request.app, "exception_handlers", {})
    for cls in type(exc).__mro__:
        if cls in handlers:
            result = handlers[cls](request, exc)
            return await result if inspect.isawaitable(result) else result
    if isinstance(exc, RequestValidationError):
        return await request_validation_exception_handler(request, exc)
    return await http_exception_handler(request, cast(HTTPException, exc))


def _from_starlette(response: Response) -> HttpResponse:
    body = getattr(response, "body", None)  # None: a streaming or file response, not stored
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers]
    return HttpResponse(response.status_code, headers, None if body is None else bytes(body), native=response)


def _to_starlette(response: HttpResponse) -> Response:
    out = Response(content=response.body or b"", status_code=response.status)
    for name, value in response.headers:
        if name.lower() != "content-length":
            out.headers.append(name, value)
    return out
