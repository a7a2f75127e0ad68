"""Django: a view decorator on Django's own database connection (psycopg 3 backend).

    # settings.py: DATABASES["default"] on django.db.backends.postgresql with psycopg 3
    from idempotency_http.django import Idempotency

    idem = Idempotency(service="payments-api")

    @csrf_exempt
    @require_POST
    @idem.idempotent()
    def create_payment(request):
        Payment.objects.create(...)         # the ORM writes in the claim's transaction
        return JsonResponse({...}, status=201)

The claim, the view's writes (ORM or ``connection.cursor()``) and the stored response commit
in one ``transaction.atomic`` block of the ``using`` database; the view runs in a savepoint
inside it. Synchronous views only (an async view is refused when decorated). A waiting
duplicate ends its transaction between polls. Django REST framework views (``@api_view``,
``APIView.as_view()``, viewsets) are decorated whole: their response is rendered before it is
stored, and their authenticators name the principal.

The default scope is the service, the principal (the authenticated ``request.user``, or
``principal=``), the method, the URL pattern with its arguments and the query string.
"""

from __future__ import annotations

import functools
import io
from typing import Any, Callable, Optional, Union

from asgiref.sync import iscoroutinefunction
from django.conf import settings as django_settings

from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.core.handlers.exception import response_for_exception
from django.db import connections, transaction
from django.http import Http404, HttpResponse as DjangoResponse

from .core import Claim, HttpResponse, Settings, default_scope, identity_of, service_name
from .engine import SyncEngine

Scope = Union[None, str, Callable[[Any], str]]
Principal = Optional[Callable[[Any], Optional[str]]]
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
            with self.handle.wrap_database_errors:
                cur.cursor.execute(text, params, prepare=False)  # never prepared: docs/http.md, poolers
            return cur.fetchone()

    def transaction(self):
        return transaction.atomic(using=self.using)

    def __enter__(self) -> "DjangoSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class Idempotency:
    """``using``: the database alias. ``scope``: None (the default scope), or a string or a
    callable(request) -> str that replaces it whole. ``principal``: a callable(request) -> str
    or None; by default the authenticated ``request.user`` (for a REST framework view, the user
    its authenticators find). ``service`` (a Settings field) defaults to $IDEMPOTENCY_SERVICE,
    else ``settings.ROOT_URLCONF``. Other keywords are :class:`idempotency_http.Settings` fields."""

    def __init__(self, *, using: str = "default", scope: Scope = None, principal: Principal = None,
                 **settings: Any) -> None:
        self.settings = Settings(**settings)
        self.engine = SyncEngine(self.settings, lambda: DjangoSession(using))
        self.scope = scope
        self.principal = principal

    def _scope_of(self, request: Any, option: Scope, view: Callable) -> str:
        if option is None:
            match = getattr(request, "resolver_match", None)
            route, params = request.path, {}
            if match is not None and match.route:
                route, params = "/" + match.route, dict(match.kwargs)
                if match.args:
                    params["*"] = list(match.args)
            service = service_name(self.settings.service, lambda: str(django_settings.ROOT_URLCONF))
            return default_scope(service, self._principal(request, view), request.method, route,
                                 params, request.META.get("QUERY_STRING", ""))
        return option if isinstance(option, str) else option(request)

    def _principal(self, request: Any, view: Callable) -> Optional[str]:
        if self.principal is not None:
            value = self.principal(request)
            return None if value is None else str(value)
        cls = getattr(view, "cls", None)  # APIView.as_view(), @api_view, viewsets
        if cls is not None and hasattr(cls, "get_authenticators"):
            return identity_of(_drf_user(view, request))
        return identity_of(getattr(request, "user", None))

    def idempotent(self, *, scope: Scope = None) -> Callable:
        """Decorate a function view; ``request.idempotency`` is its :class:`Claim`."""

        def decorate(view: Callable) -> Callable:
            if iscoroutinefunction(view):
                raise TypeError(f"idempotent(): {getattr(view, '__name__', view)} is an async view; "
                                "the adapter runs on Django's synchronous connection: use a sync view")

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
            body = _read_body(request, self.settings.max_body_bytes)
        key = request.headers.get("Idempotency-Key")
        prepared = self.engine.prepare(
            self._scope_of(request, scope, view), [] if key is None else [key],
            request.META.get("CONTENT_TYPE"), request.headers.get("Prefer"), body)
        if isinstance(prepared, HttpResponse):
            return _to_django(prepared)

        def call(claim: Claim) -> HttpResponse:
            request.idempotency = claim
            try:
                rv = view(request, *args, **kwargs)
            except _DJANGO_4XX as exc:  # Django's own answer (404 page, 403, 400)
                rv = response_for_exception(request, exc)
            if callable(getattr(rv, "render", None)) and not getattr(rv, "is_rendered", True):
                rv.render()  # a REST framework Response or a TemplateResponse: render before reading
            body = None if getattr(rv, "streaming", False) else rv.content
            return HttpResponse(rv.status_code, list(rv.items()), body, native=rv)

        answer = self.engine.handle(prepared, call)
        return answer.native if answer.native is not None else _to_django(answer)


def _read_body(request: Any, limit: int) -> Optional[bytes]:
    """The body, or None past ``limit``: read at most limit + 1 bytes, then kept where
    ``request.body``, ``request.POST`` and ``request.read()`` find it."""
    if hasattr(request, "_body"):
        return request._body if len(request._body) <= limit else None
    data = request.read(limit + 1)
    if len(data) > limit:
        return None
    request._body, request._stream = data, io.BytesIO(data)
    return data


def _drf_user(view: Callable, request: Any) -> Any:
    """The user a REST framework view's own authenticators find (None if they refuse)."""
    from rest_framework.exceptions import APIException
    from rest_framework.request import Request

    instance = view.cls(**getattr(view, "initkwargs", {}))
    try:
        return Request(request, authenticators=instance.get_authenticators()).user
    except APIException:
        return None


def _to_django(response: HttpResponse) -> DjangoResponse:
    out = DjangoResponse(response.body or b"", status=response.status)
    del out["Content-Type"]
    for name, value in response.headers:
        if name.lower() != "content-length":
            out[name] = value
    return out
