"""Without CREATE EXTENSION (the portable edition's plain script: no pg_extension row) and
without schema=, the adapter finds the schema holding the functions; when functions of those
names are in two schemas it refuses, naming schema=. Real servers, a database of their own."""

import subprocess
from urllib.parse import urlparse, urlunparse

import psycopg
import pytest

from conftest import FRAMEWORKS, ROOT, Server, new_key


@pytest.fixture(scope="module")
def plain_url(db_url):
    url = urlunparse(urlparse(db_url)._replace(path="/http_plain_script"))
    script = subprocess.run(["bash", str(ROOT / "scripts" / "portable.sh")], check=True,
                            capture_output=True, text=True).stdout
    with psycopg.connect(db_url, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS http_plain_script WITH (FORCE)")
        admin.execute("CREATE DATABASE http_plain_script")
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(script)  # the plain script, as psql -f would run it
    yield url
    with psycopg.connect(db_url, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS http_plain_script WITH (FORCE)")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_plain_script_is_found_and_two_candidates_are_refused(framework, plain_url):
    with psycopg.connect(plain_url, autocommit=True) as db:
        assert db.execute("SELECT count(*) FROM pg_extension WHERE extname = 'idempotency'").fetchone()[0] == 0
        db.execute("DROP SCHEMA IF EXISTS decoy CASCADE")
        srv = Server(framework, plain_url, IDEM_EXAMPLE_SCHEMA="").start()
        try:
            key = new_key()
            assert srv.post("/echo", key=key, body=b"{}").status_code == 201
            assert srv.post("/echo", key=key, body=b"{}").headers["idempotent-replayed"] == "true"
        finally:
            srv.stop()
        db.execute("CREATE SCHEMA decoy")
        db.execute("CREATE FUNCTION decoy.idem_claim(text, text, text) RETURNS int LANGUAGE sql AS 'SELECT 1'")
        db.execute("CREATE FUNCTION decoy.idem_http_replay(int) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb'")
        srv = Server(framework, plain_url, IDEM_EXAMPLE_SCHEMA="").start()
        try:
            r = srv.post("/echo", key=new_key(), body=b"{}")
            assert r.status_code == 500
        finally:
            srv.stop()
            db.execute("DROP SCHEMA decoy CASCADE")
        log = srv.stderr()
        line = next((l for l in log.splitlines() if "several schemas" in l), log[-3000:])
        assert "decoy" in line and "public" in line and "pass schema=" in line, line
