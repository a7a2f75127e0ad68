"""FastAPI / Starlette integration: a decorator for route handlers.

    from idempotency_http import Idempotency
    from idempotency_http.fastapi import idempotent

    idem = Idempotency(max_wait=10)

    @app.post("/payments")
    @idempotent(idem, connection=pool.connection, scope="payments")
    async def create_payment(request: Request, claim: Claim) -> Response:
        await claim.conn.execute("INSERT ...")       # same transaction as the claim
        return JSONResponse({...}, status_code=201, headers={"Location": ...})

``connection`` is a zero-argument callable returning an async context manager that yields a
psycopg ``AsyncConnection`` (``psycopg_pool.AsyncConnectionPool.connection`` is one). No
middleware and no connection of its own: the claim runs on the connection the handler writes
with. The decorated endpoint takes only the ``Request`` (FastAPI sees that signature).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Awaitable, Callable, Optional

from starlette.requests import Request
from starlette.responses import Response

from .core import Claim, HttpResponse, Idempotency


def _scope_of(request: Request) -> str:
    route = request.scope.get("route")
    path = getattr(route, "path", None) or request.url.path
    return f"{request.method} {path}"


def _to_starlette(response: HttpResponse) -> Response:
    out = Response(content=response.body, status_code=response.status)
    for name, value in response.headers:
        if name.lower() != "content-length":  # Response sets it from the body
            out.headers.append(name, value)
    return out


def _from_starlette(response: Response) -> HttpResponse:
    body = getattr(response, "body", None)
    if body is None:
        raise TypeError("a streaming response cannot be stored for replay")
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers]
    return HttpResponse(response.status_code, headers, bytes(body))


def idempotent(idem: Idempotency, *, connection: Callable[[], Any], scope: Optional[str] = None,
               tenant: Optional[Callable[[Request], Optional[str]]] = None):
    """Decorate ``async def handler(request, claim) -> Response``.

    ``scope``: the claim's scope (default: ``"<METHOD> <route path>"``); ``tenant``: a function
    of the request whose value, when not None, prefixes the scope (``"<tenant>/<scope>"``), so
    tenants never share keys.
    """

    def decorate(handler: Callable[[Request, Claim], Awaitable[Response]]):
        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            route_scope = scope or _scope_of(request)
            owner = tenant(request) if tenant else None
            full_scope = f"{owner}/{route_scope}" if owner is not None else route_scope
            body = await request.body()

            async def run(claim: Claim) -> HttpResponse:
                return _from_starlette(await handler(request, claim))

            async with connection() as conn:
                answer = await idem.handle(
                    conn, scope=full_scope, key_header=request.headers.get("idempotency-key"),
                    body=body, handler=run, wait=idem.wait_for(request.headers.get("prefer")))
            return _to_starlette(answer)

        # FastAPI reads the signature: the endpoint takes the request only.
        endpoint.__signature__ = inspect.Signature(
            [inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)])
        del endpoint.__wrapped__
        return endpoint

    return decorate
