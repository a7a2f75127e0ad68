"""The Django example in one file: the same routes as fastapi_app.py, on Django's own
psycopg 3 connection, served by werkzeug's threaded WSGI server (PORT)."""

import json
import os
import sys
import time
from urllib.parse import urlparse

import django
from django.conf import settings

url = urlparse(os.environ["DATABASE_URL"])
settings.configure(
    DEBUG=False, ROOT_URLCONF=__name__, ALLOWED_HOSTS=["127.0.0.1", "localhost"], SECRET_KEY="example",
    MIDDLEWARE=[f"{__name__}.token_user"],
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "rest_framework"],
    REST_FRAMEWORK={"DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
                    "DEFAULT_AUTHENTICATION_CLASSES": [], "DEFAULT_PERMISSION_CLASSES": []},
    DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": url.path.lstrip("/"),
                           "USER": url.username or "", "PASSWORD": url.password or "",
                           "HOST": url.hostname or "", "PORT": str(url.port or ""),
                           # a connection per request unless set (bench/http-roundtrips.sh keeps them)
                           "CONN_MAX_AGE": int(os.environ.get("IDEM_EXAMPLE_CONN_MAX_AGE", "0"))}},
    LOGGING_CONFIG=None)
django.setup()

from django.contrib.auth.models import AnonymousUser  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.http import Http404, HttpResponse, JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.http import require_http_methods  # noqa: E402

from rest_framework import viewsets  # noqa: E402
from rest_framework.authentication import BaseAuthentication  # noqa: E402
from rest_framework.decorators import api_view, authentication_classes  # noqa: E402
from rest_framework.response import Response  # noqa: E402
from rest_framework.views import APIView  # noqa: E402

import common  # noqa: E402
from idempotency_http.django import Idempotency  # noqa: E402

common.create_tables()
idem = Idempotency(**common.SETTINGS)
common.GAUGES["waiters"] = lambda: idem.engine.waiters


class DemoUser:
    """An authenticated user of the demo token table."""

    is_authenticated = True

    def __init__(self, name):
        self.pk = self.username = name


def token_user(get_response):
    """The app's authentication middleware: request.user, which the default scope names."""

    def middleware(request):
        name = common.user_of(request.headers.get("Authorization"))
        request.user = DemoUser(name) if name else AnonymousUser()
        return get_response(request)

    return middleware


class TokenAuth(BaseAuthentication):
    """REST framework's own authentication (``Authorization: Token <token>``, which the Django
    middleware above does not know): its views authenticate for themselves."""

    def authenticate(self, request):
        name = common.user_of(request.headers.get("Authorization"), "token")
        return (DemoUser(name), None) if name else None


def one(query, params):
    with connection.cursor() as cur:
        cur.execute(query, params)
        return cur.fetchone()


@require_http_methods(["POST"])
@idem.idempotent()
def create_payment(request):
    try:
        body = json.loads(request.body or b"null")
    except ValueError:
        body = None
    body = body if isinstance(body, dict) else {}
    if body.get("order_id") is None or body.get("amount") is None:
        return JsonResponse({"type": "about:blank", "title": "order_id and amount are required", "status": 400},
                            status=400, content_type="application/problem+json")
    pid, amount = one(common.INSERT_PAYMENT, [request.idempotency.key, str(body["order_id"]), str(body["amount"]), None])
    if request.headers.get("x-test-sleep-after-insert"):
        time.sleep(float(request.headers["x-test-sleep-after-insert"]))
    response = JsonResponse({"payment_id": pid, "order_id": str(body["order_id"]), "amount": amount}, status=201)
    response["Location"] = f"/payments/{pid}"
    return response


@idem.idempotent()
def echo(request):
    eid = None
    if request.method == "POST":
        (eid,) = one(common.INSERT_EFFECT, ["echo", request.idempotency.key, len(request.body)])
    return JsonResponse({"effect_id": eid, "bytes": len(request.body), "method": request.method}, status=201)


@idem.idempotent()
def slow(request):
    (eid,) = one(common.INSERT_EFFECT, ["slow", request.idempotency.key, 0])
    if request.GET.get("lock"):
        one(common.PAUSE, [int(request.GET["lock"])])
    else:
        time.sleep(float(request.GET.get("seconds", "1")))
    return JsonResponse({"effect_id": eid}, status=201)


@idem.idempotent()
def error_big(request):
    common.count_run("error-big")
    return HttpResponse(common.big(int(request.GET["size"])), status=int(request.GET.get("status", "400")),
                        content_type="text/plain")


@idem.idempotent()
def ok_big(request):
    size = int(request.GET["size"])
    (eid,) = one(common.INSERT_EFFECT, ["ok-big", request.idempotency.key, size])
    response = HttpResponse(common.big(size), content_type="text/plain")
    response["X-Effect"] = str(eid)
    return response


@idem.idempotent()
def boom(request):
    common.count_run("boom")
    one(common.INSERT_EFFECT, ["boom", request.idempotency.key, 0])
    raise RuntimeError("secret-internal-text password=hunter2")


@idem.idempotent()
def headers(request):
    response = JsonResponse({"ok": True}, status=201)
    for name, value in [("Set-Cookie", "session=secret"), ("Refresh", "0; url=https://evil.example"),
                        ("X-Extra", "kept"), ("X-Other", "dropped"), ("Location", "/things/1")]:
        response[name] = value
    return response


@idem.idempotent()
def status(request, code):
    common.count_run(f"status-{code}")
    return JsonResponse({"status": code}, status=code)


@idem.idempotent()
def tenant_payment(request):
    body = json.loads(request.body)
    user = request.user.pk if request.user.is_authenticated else None
    pid, _ = one(common.INSERT_PAYMENT, [request.idempotency.key, body["order_id"], str(body["amount"]), user])
    return JsonResponse({"payment_id": pid, "tenant": user}, status=201)


@idem.idempotent()
def transfer(request, account_id):
    (eid,) = one(common.INSERT_EFFECT, [f"transfer-{account_id}", request.idempotency.key, 0])
    return JsonResponse({"effect_id": eid, "account": account_id}, status=201)


@idem.idempotent(scope="custom")
def custom_scope(request):
    (eid,) = one(common.INSERT_EFFECT, ["custom-scope", request.idempotency.key, 0])
    return JsonResponse({"effect_id": eid}, status=201)


def drf_effect(request, kind):
    """A REST framework handler's work: request.data parsed by DRF, the user its authenticators found."""
    (eid,) = one(common.INSERT_EFFECT, [f"drf-{kind}", request.idempotency.key, len(request.body)])
    user = request.user.pk if request.user.is_authenticated else None
    return Response({"effect_id": eid, "kind": kind, "data": request.data, "user": user}, status=201,
                    headers={"Location": f"/drf/{eid}"})


@idem.idempotent()
@api_view(["POST"])
@authentication_classes([TokenAuth])
def drf_function(request):
    return drf_effect(request, "function")


class DrfView(APIView):
    authentication_classes = [TokenAuth]

    def post(self, request):
        return drf_effect(request, "apiview")


class DrfViewSet(viewsets.ViewSet):
    authentication_classes = [TokenAuth]

    def create(self, request):
        return drf_effect(request, "viewset")


@require_http_methods(["POST"])
def plain_payment(request):
    """The same insert without the adapter, in its own transaction (bench/http-roundtrips.sh)."""
    body = json.loads(request.body)
    with transaction.atomic():
        pid, amount = one(common.INSERT_PAYMENT, [None, str(body["order_id"]), str(body["amount"]), None])
    response = JsonResponse({"payment_id": pid, "order_id": str(body["order_id"]), "amount": amount}, status=201)
    response["Location"] = f"/payments/{pid}"
    return response


@idem.idempotent()
def django_404(request):
    common.count_run("django-404")
    raise Http404("no such order")


def runs(request, name):
    return JsonResponse({"runs": common.runs(name)})


urlpatterns = [
    path("payments", create_payment), path("plain/payments", plain_payment), path("echo", echo), path("slow", slow),
    path("error-big", error_big), path("ok-big", ok_big), path("boom", boom), path("headers", headers),
    path("status/<int:code>", status), path("tenant/payments", tenant_payment),
    path("django/404", django_404), path("runs/<str:name>", runs),
    path("accounts/<int:account_id>/transfer", transfer), path("custom-scope", custom_scope),
    path("drf/function", drf_function), path("drf/apiview", idem.idempotent()(DrfView.as_view())),
    path("drf/viewset", idem.idempotent()(DrfViewSet.as_view({"post": "create"}))),
]

if __name__ == "__main__":
    from django.core.wsgi import get_wsgi_application
    import logging

    from werkzeug.serving import run_simple

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request

    sys.stdout.flush()
    # a thread per request, each with its own connection; IDEM_EXAMPLE_THREADED=0: one thread,
    # whose connection CONN_MAX_AGE keeps (bench/http-roundtrips.sh)
    run_simple("127.0.0.1", int(os.environ["PORT"]), get_wsgi_application(),
               threaded=os.environ.get("IDEM_EXAMPLE_THREADED", "1") != "0")
