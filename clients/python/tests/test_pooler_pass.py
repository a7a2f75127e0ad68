"""The PgBouncer pass of scripts/http-test.sh (IDEM_HTTP_POOLER): the apps' transactions did go
through that pooler, in transaction mode, over several server connections (its admin console;
the script makes postgres an admin user). Skipped in the direct pass."""

import psycopg
import pytest

from conftest import POOLER

pytestmark = pytest.mark.skipif(POOLER is None, reason="the direct pass: no pooler")


def show(what: str) -> list:
    # the admin console speaks the simple query protocol only: a client-side binding cursor
    with psycopg.connect(f"postgresql://postgres@{POOLER}/pgbouncer", autocommit=True,
                         cursor_factory=psycopg.ClientCursor) as admin:
        cur = admin.execute(f"SHOW {what}")
        names = [d.name for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]


def test_the_apps_went_through_pgbouncer_in_transaction_mode(db_url):
    database = db_url.rsplit("/", 1)[1]
    config = {row["key"]: row["value"] for row in show("CONFIG")}
    assert config["pool_mode"] == "transaction"
    stats = {row["database"]: row for row in show("STATS")}
    assert stats[database]["total_xact_count"] > 300, stats.get(database)
    servers = [row for row in show("SERVERS") if row["database"] == database]
    assert len(servers) > 1, servers  # one client's transactions rotate over several sessions
