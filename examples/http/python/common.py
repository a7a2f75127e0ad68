"""What the three example apps (FastAPI, Flask, Django) share: the tables, the settings and a
run counter. The apps serve the same routes, so one test suite runs against each."""

import os
import threading

import psycopg

DATABASE_URL = os.environ["DATABASE_URL"]
#: the contract's settings for the examples: the tests' extra replayed header, a pool of 4;
#: IDEM_EXAMPLE_* variables change the others (clients/python/tests/test_settings.py)
SETTINGS: dict = {"replay_headers": ["x-extra"], "max_wait": 10.0}
if os.environ.get("IDEM_EXAMPLE_METHODS"):
    SETTINGS["methods"] = os.environ["IDEM_EXAMPLE_METHODS"].split(",")
if os.environ.get("IDEM_EXAMPLE_MAX_WAIT"):
    SETTINGS["max_wait"] = float(os.environ["IDEM_EXAMPLE_MAX_WAIT"])
if os.environ.get("IDEM_EXAMPLE_MAX_WAITERS"):
    SETTINGS["max_waiters"] = int(os.environ["IDEM_EXAMPLE_MAX_WAITERS"])
if os.environ.get("IDEM_EXAMPLE_PROBLEM_BASE"):
    SETTINGS["problem_base"] = os.environ["IDEM_EXAMPLE_PROBLEM_BASE"]
if os.environ.get("IDEM_EXAMPLE_RETRY_404"):
    from idempotency_http import default_statuses

    SETTINGS["statuses"] = lambda status: "retry" if status == 404 else default_statuses(status)
if os.environ.get("IDEM_EXAMPLE_SCHEMA"):
    # the portable edition's plain script has no pg_extension row to find the schema by
    SETTINGS["schema"] = os.environ["IDEM_EXAMPLE_SCHEMA"]
POOL_SIZE = int(os.environ.get("IDEM_EXAMPLE_POOL", "4"))
#: IDEM_EXAMPLE_NO_PREPARE=1: the handlers' own statements are never prepared (behind a transaction
#: pooler, clients/python/tests/test_poolers.py; an app would rather set prepare_threshold=None, docs/http.md)
PREPARE = False if os.environ.get("IDEM_EXAMPLE_NO_PREPARE") else None
#: and the SQLAlchemy engines' connections prepare nothing either (the ORM's INSERTs)
ENGINE_OPTIONS: dict = {"pool_size": POOL_SIZE}
if PREPARE is False:
    ENGINE_OPTIONS["connect_args"] = {"prepare_threshold": None}
#: the apps' own authentication (a demo token table): the adapter takes the principal from the
#: framework's authenticated user, never from a client header such as X-Tenant
USERS = {"alice-token": "alice", "bob-token": "bob"}


def user_of(authorization, scheme: str = "bearer") -> "str | None":
    """The user a token names (``Authorization: Bearer <token>``), or None."""
    given, _, token = (authorization or "").partition(" ")
    return USERS.get(token) if given.lower() == scheme else None

_runs: dict = {}
_lock = threading.Lock()
#: values read at /runs/<name> instead of a count: the app registers "waiters" (its adapter's
#: waiting duplicates), which the tests wait on instead of sleeping
GAUGES: dict = {}


def count_run(name: str) -> None:
    """Handler runs that leave no row (their writes are rolled back), counted in the process."""
    with _lock:
        _runs[name] = _runs.get(name, 0) + 1


def runs(name: str) -> int:
    if name in GAUGES:
        return GAUGES[name]()
    with _lock:
        return _runs.get(name, 0)


#: /slow?lock=N: the handler waits for advisory lock N (held by the test) instead of sleeping
PAUSE = "SELECT pg_catalog.pg_advisory_xact_lock(%s::pg_catalog.int8)::pg_catalog.text"


def big(size: int) -> str:
    return "x" * size


def create_tables() -> None:
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS payments (id bigserial PRIMARY KEY, idem_key text, "
                     "order_id text, amount numeric, tenant text)")
        conn.execute("CREATE TABLE IF NOT EXISTS effects (id bigserial PRIMARY KEY, route text, "
                     "idem_key text, body_len int)")


INSERT_PAYMENT = ("INSERT INTO payments (idem_key, order_id, amount, tenant) "
                  "VALUES (%s::text, %s::text, %s::text::numeric, %s::text) RETURNING id, amount::text")
INSERT_EFFECT = ("INSERT INTO effects (route, idem_key, body_len) VALUES (%s::text, %s::text, %s::int4) "
                 "RETURNING id")
