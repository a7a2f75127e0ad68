"""Django: a view decorator on Django's own database connection (psycopg 3 backend).

    # settings.py: DATABASES["default"] on django.db.backends.postgresql with psycopg 3
    from idempotency_http.django import Idempotency

    idem = Idempotency(scope=lambda request: f"{request.user.pk} {request.resolver_match.route}")

    @csrf_exempt
    @require_POST
    @idem.idempotent()
    def create_payment(request):
        Payment.objects.create(...)         # the ORM writes in the claim's transaction
        return JsonResponse({...}, status=201)

The claim, the view's writes (ORM or ``connection.cursor()``) and the stored response commit
in one ``transaction.atomic`` block of the ``using`` database; the view runs in a savepoint
inside it. Synchronous views only. A waiting duplicate ends its transaction between polls.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Union

from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.core.handlers.exception import response_for_exception
from django.db import connections, transaction
from django.http import Http404, HttpResponse as DjangoResponse

from .core import Claim, HttpResponse, Settings
from .engine import SyncEngine

Scope = Union[None, str, Callable[[Any], str]]
_DJANGO_4XX = (Http404, PermissionDenied, BadRequest, SuspiciousOperation)


class DjangoSession:
    """A Session over Django's connection ``using``: statements run through its cursor."""

    def __init__(self, using: str) -> None:
        self.using = using
        self.handle = connections[using]

    def one(self, stmt: Any, params: list):
        self.handle.ensure_connection()
        text = stmt if isinstance(stmt, str) else stmt.as_string(self.handle.connection)
        with self.handle.cursor() as cur:
            cur.execute(text, params)
            return cur.fetchone()

    def transaction(self):
        return transaction.atomic(using=self.using)

    def __enter__(self) -> "DjangoSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class Idempotency:
    """``using``: the database alias. ``scope``: None (``"<METHOD> <url route>"``), a string or
    a callable(request) -> str. Other keywords are :class:`idempotency_http.Settings` fields."""

    def __init__(self, *, using: str = "default", scope: Scope = None, **settings: Any) -> None:
        self.settings = Settings(**settings)
        self.engine = SyncEngine(self.settings, lambda: DjangoSession(using))
        self.scope = scope

    def _scope_of(self, request: Any, option: Scope) -> str:
        if option is None:
            match = getattr(request, "resolver_match", None)
            route = "/" + match.route if match is not None and match.route else request.path
            return f"{request.method.upper()} {route}"
        return option if isinstance(option, str) else option(request)

    def idempotent(self, *, scope: Scope = None) -> Callable:
        """Decorate a function view; ``request.idempotency`` is its :class:`Claim`."""

        def decorate(view: Callable) -> Callable:
            @functools.wraps(view)
            def wrapper(request: Any, *args: Any, **kwargs: Any):
                if request.method.upper() not in self.settings.methods:
                    return view(request, *args, **kwargs)
                return self._serve(request, scope if scope is not None else self.scope, view, args, kwargs)

            return wrapper

        return decorate

    def _serve(self, request: Any, scope: Scope, view: Callable, args, kwargs):
        length = request.META.get("CONTENT_LENGTH") or ""
        body: Optional[bytes] = None
        if not self.engine.too_large(int(length) if length.isdigit() else None):
            body = request.body
            if len(body) > self.settings.max_body_bytes:
                body = None
        key = request.headers.get("Idempotency-Key")
        prepared = self.engine.prepare(
            self._scope_of(request, scope), [] if key is None else [key],
            request.META.get("CONTENT_TYPE"), request.headers.get("Prefer"), body)
        if isinstance(prepared, HttpResponse):
            return _to_django(prepared)

        def call(claim: Claim) -> HttpResponse:
            request.idempotency = claim
            try:
                rv = view(request, *args, **kwargs)
            except _DJANGO_4XX as exc:  # Django's own answer (404 page, 403, 400)
                rv = response_for_exception(request, exc)
            body = None if getattr(rv, "streaming", False) else rv.content
            return HttpResponse(rv.status_code, list(rv.items()), body, native=rv)

        answer = self.engine.handle(prepared, call)
        return answer.native if answer.native is not None else _to_django(answer)


def _to_django(response: HttpResponse) -> DjangoResponse:
    out = DjangoResponse(response.body or b"", status=response.status)
    del out["Content-Type"]
    for name, value in response.headers:
        if name.lower() != "content-length":
            out[name] = value
    return out
