"""Flask: a view decorator on a psycopg ``ConnectionPool`` (synchronous psycopg 3).

    from psycopg_pool import ConnectionPool
    from idempotency_http.flask import Idempotency

    pool = ConnectionPool(DATABASE_URL, max_size=4)
    idem = Idempotency(pool, service="payments-api")

    @app.post("/payments")
    @idem.idempotent()
    def create_payment():
        idem.claim.conn.execute(...)        # in the claim's transaction
        return {"id": 7}, 201

The view keeps its signature and returns whatever Flask accepts; GET, HEAD, OPTIONS (and
methods not in ``methods``) run the view as it is. The default scope is the service, the
principal (``g.user``, or Flask-Login's ``current_user``, or ``principal=``), the method, the
URL rule with its arguments and the query string.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Union

from flask import Response, current_app, g, request
from werkzeug.exceptions import HTTPException

from .core import Claim, HttpResponse, Settings, default_scope, identity_of, service_name
from .engine import PsycopgSession, SyncEngine
from .sqlalchemy import SqlAlchemySession, is_engine

Scope = Union[None, str, Callable[[Any], str]]
Principal = Optional[Callable[[Any], Optional[str]]]


class Idempotency:
    """``pool``: a psycopg_pool ConnectionPool (or a callable giving a context manager that
    yields a psycopg Connection), or a SQLAlchemy Engine (``idempotency_http.sqlalchemy``).
    ``scope``: None (the default scope), or a string or a callable(request) -> str that
    replaces it whole. ``principal``: a callable(request) -> str
    or None; by default the authenticated user (``g.user``, else Flask-Login's ``current_user``).
    Other keywords are :class:`idempotency_http.Settings` fields (``service``, ...)."""

    def __init__(self, pool: Any, *, scope: Scope = None, principal: Principal = None,
                 **settings: Any) -> None:
        self.principal = principal
        self.settings = Settings(**settings)
        self.scope = scope
        if is_engine(pool):  # SQLAlchemy: claim.conn is a Connection an ORM Session binds to
            self.engine = SyncEngine(self.settings, lambda: SqlAlchemySession(pool))
            return
        connection = pool.connection if hasattr(pool, "connection") else pool

        class _Session:
            def __enter__(s):
                s.cm = connection()
                return PsycopgSession(s.cm.__enter__())

            def __exit__(s, *exc):
                return s.cm.__exit__(*exc)

        self.engine = SyncEngine(self.settings, _Session)

    @property
    def claim(self) -> Claim:
        """The claim of the current request (its ``conn`` is in the claim's transaction)."""
        claim = g.get("idempotency")
        if claim is None:
            raise RuntimeError("no idempotent request is running here")
        return claim

    def _scope_of(self, option: Scope) -> str:
        if option is None:
            rule = request.url_rule.rule if request.url_rule is not None else request.path
            rule = request.script_root + rule  # the rule under its mount point, if any
            service = service_name(self.settings.service, lambda: current_app.import_name)
            return default_scope(service, self._principal(), request.method, rule,
                                 request.view_args, request.query_string.decode("latin-1"))
        return option if isinstance(option, str) else option(request)

    def _principal(self) -> Optional[str]:
        if self.principal is not None:
            value = self.principal(request)
            return None if value is None else str(value)
        if "user" in g:  # the app's own login sets g.user (Flask's tutorial does)
            return identity_of(g.user)
        manager = getattr(current_app, "login_manager", None)
        if manager is not None:  # Flask-Login
            from flask_login import current_user

            return identity_of(current_user._get_current_object())
        return None

    def idempotent(self, *, scope: Scope = None) -> Callable:
        """Decorate a view (under ``@app.post`` / ``@app.route``)."""

        def decorate(view: Callable) -> Callable:
            @functools.wraps(view)
            def wrapper(*args: Any, **kwargs: Any):
                if request.method.upper() not in self.settings.methods:
                    return view(*args, **kwargs)
                return self._serve(scope if scope is not None else self.scope, view, args, kwargs)

            return wrapper

        return decorate

    def _serve(self, scope: Scope, view: Callable, args, kwargs) -> Response:
        body: Optional[bytes] = None
        if not self.engine.too_large(request.content_length):
            body = _read_body(self.settings.max_body_bytes)
        prepared = self.engine.prepare(
            self._scope_of(scope), request.headers.getlist("Idempotency-Key"),
            request.headers.get("Content-Type"), request.headers.get("Prefer"), body)
        if isinstance(prepared, HttpResponse):
            return _to_flask(prepared)

        def call(claim: Claim) -> HttpResponse:
            g.idempotency = claim
            try:
                rv = current_app.make_response(view(*args, **kwargs))
            except HTTPException as exc:  # abort(404) and friends: Flask's own answer
                rv = current_app.make_response(current_app.handle_http_exception(exc))
            finally:
                g.pop("idempotency", None)
            body = None if rv.is_streamed else rv.get_data()
            return HttpResponse(rv.status_code, list(rv.headers.items()), body, native=rv)

        answer = self.engine.handle(prepared, call)
        return answer.native if answer.native is not None else _to_flask(answer)


def _read_body(limit: int) -> Optional[bytes]:
    """The body, or None past ``limit``: read a chunk at a time (a chunked body too), never
    more than one chunk past the limit, then kept where get_data(), form and json find it."""
    chunks, size = [], 0
    while True:
        chunk = request.stream.read(64 * 1024)
        if not chunk:
            break
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    body = b"".join(chunks)
    request._cached_data = body
    return body


def _to_flask(response: HttpResponse) -> Response:
    out = Response(response.body or b"", status=response.status)
    out.headers.clear()
    for name, value in response.headers:
        if name.lower() != "content-length":
            out.headers.add(name, value)
    return out
