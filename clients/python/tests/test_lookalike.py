"""Look-alike functions on the app's search_path are never called (issue 25 item 1): a role
that may create functions in the extension's schema plants text overloads there, and a schema
first on the app's search_path holds copies with the real signatures. Every request kind runs
through each framework; the planted functions record every call they get."""

from urllib.parse import urlparse, urlunparse

import psycopg
import pytest

from conftest import FRAMEWORKS, Server, new_key

R = "public.idem_claim_result"
PLANTED = [
    ("public", "idem_claim(scope text, key text, request_hash text, lease text, retention text)", R),
    ("public", "idem_hash(text)", "text"),
    ("public", "idem_canonical(text)", "text"),
    ("public", "idem_http_response(int4, text, text)", "jsonb"),
    ("public", "idem_http_response(int4, text, text, text[])", "jsonb"),
    ("public", "idem_http_response(int4, text, text, text)", "jsonb"),
    ("public", "idem_complete(text, text, text, int4)", "void"),
    ("public", "idem_http_fail(text, text, text, int4)", "void"),
    ("public", "idem_fail(text, text, boolean, text, text, text)", "void"),
    ("public", f"idem_http_replay({R}, text)", "jsonb"),
    ("evil", "idem_claim(scope text, key text, request_hash text, lease interval, retention interval)", R),
    ("evil", "idem_hash(jsonb)", "text"),
    ("evil", "idem_canonical(jsonb)", "text"),
    ("evil", "idem_http_response(int4, jsonb, text, text[])", "jsonb"),
    ("evil", "idem_complete(text, text, jsonb, int4)", "void"),
    ("evil", "idem_http_fail(text, text, jsonb, int4)", "void"),
    ("evil", "idem_fail(text, text, boolean, text, text, int4)", "void"),
    ("evil", f"idem_http_replay({R}, text[])", "jsonb"),
]


@pytest.fixture(scope="module")
def trap_url(db_url):
    parts = urlparse(db_url)
    url = urlunparse(parts._replace(path="/http_lookalike"))
    with psycopg.connect(db_url, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS http_lookalike WITH (FORCE)")
        admin.execute("CREATE DATABASE http_lookalike")
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("CREATE EXTENSION idempotency")
        db.execute("DO $$ BEGIN CREATE ROLE planter; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
        db.execute("CREATE TABLE public.lookalike_calls (name text)")
        db.execute("GRANT INSERT ON public.lookalike_calls TO PUBLIC")
        db.execute("GRANT CREATE ON SCHEMA public TO planter")
        db.execute("CREATE SCHEMA evil AUTHORIZATION planter")
        db.execute("ALTER DATABASE http_lookalike SET search_path = evil, public")
        db.execute("SET ROLE planter")
        for schema, signature, returns in PLANTED:
            name = signature.split("(")[0]
            value = "" if returns == "void" else f"SELECT NULL::{returns}"
            db.execute(f"CREATE FUNCTION {schema}.{signature} RETURNS {returns} LANGUAGE sql AS $f$ "
                       f"INSERT INTO public.lookalike_calls VALUES ('{schema}.{name}'); {value} $f$")
        db.execute("RESET ROLE")
    with psycopg.connect(url, autocommit=True) as db:
        # The trap works: an untyped, unqualified call picks a planted function.
        db.execute("SELECT idem_hash(%s)", ['{"a": 1}'])
        assert db.execute("SELECT count(*) FROM public.lookalike_calls").fetchone()[0] == 1
        db.execute("TRUNCATE public.lookalike_calls")
    return url


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_planted_functions_are_never_called(trap_url, framework):
    srv = Server(framework, trap_url).start()
    try:
        key, body = new_key(), b'{"order_id": "o-1", "amount": 1}'
        assert srv.post("/payments", key=key, body=body).status_code == 201
        assert srv.post("/payments", key=key, body=body).headers["idempotent-replayed"] == "true"
        assert srv.post("/payments", key=key, body=b'{"order_id": "o-2", "amount": 1}').status_code == 422
        form = "application/x-www-form-urlencoded"
        assert srv.post("/echo", key=new_key(), body=b"a=1", content_type=form).status_code == 201
        assert srv.post("/echo", key=new_key(), body=b"text", content_type="text/plain").status_code == 201
        final = new_key()
        assert srv.post("/status/404", key=final).status_code == 404
        assert srv.post("/status/404", key=final).headers["idempotent-replayed"] == "true"
        assert srv.post("/boom", key=new_key()).status_code == 500
        headers = new_key()
        srv.post("/headers", key=headers)
        assert srv.post("/headers", key=headers).headers["x-extra"] == "kept"
        with psycopg.connect(trap_url, autocommit=True) as db:
            assert db.execute("SELECT array_agg(name) FROM public.lookalike_calls").fetchone()[0] is None
            assert db.execute("SELECT count(*) FROM idempotency.requests WHERE key = %s::text",
                              [final]).fetchone()[0] == 1
        assert "writable by planter" in srv.stderr()  # the adapter warns about the schema
    finally:
        srv.stop()
