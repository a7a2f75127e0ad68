"""Behind a transaction pooler: a real PgBouncer (pool_mode = transaction, two server
connections) started on loopback in front of the test database, and a few hundred requests
through each framework. psycopg 3 prepares a statement it has run 5 times on a connection; the
next transaction may run on another server connection, where the prepared name is missing
(500s). The adapter's statements are never prepared; the example handlers' own statements are
kept unprepared by IDEM_EXAMPLE_NO_PREPARE, so only the adapter's are under test."""

import os
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

import psycopg
import pytest

from conftest import FRAMEWORKS, Server, free_port, new_key

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


@pytest.fixture(scope="module")
def bouncer_url(db_url):
    if not os.path.exists(PGBOUNCER):
        pytest.skip("pgbouncer is not installed (Debian package pgbouncer; scripts/http-test.sh installs it)")
    db = urlparse(db_url)
    user, port = db.username or "postgres", free_port()
    work = Path(tempfile.mkdtemp(prefix="idem-pgbouncer-"))
    (work / "users.txt").write_text(f'"{user}" ""\n')
    (work / "pgbouncer.ini").write_text(f"""[databases]
* = host={db.hostname} port={db.port or 5432}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {work}/users.txt
pool_mode = transaction
default_pool_size = 2
max_client_conn = 200
ignore_startup_parameters = extra_float_digits,options
logfile = {work}/pgbouncer.log
log_connections = 0
log_disconnections = 0
pidfile = {work}/pgbouncer.pid
""")
    command = [PGBOUNCER, str(work / "pgbouncer.ini")]
    if os.geteuid() == 0:  # pgbouncer refuses to run as root
        shutil.chown(work, "postgres")
        command = ["runuser", "-u", "postgres", "--", *command]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # it logs to logfile
    url = f"postgresql://{user}@127.0.0.1:{port}{db.path}"
    deadline = time.monotonic() + 20
    while True:
        try:
            psycopg.connect(url, connect_timeout=2).close()
            break
        except psycopg.OperationalError:
            if proc.poll() is not None or time.monotonic() > deadline:
                log = work / "pgbouncer.log"
                raise RuntimeError(f"pgbouncer did not start: {log.read_text() if log.exists() else ''}")
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_hundreds_of_requests_through_pgbouncer_in_transaction_mode(framework, bouncer_url, db):
    srv = Server(framework, bouncer_url, IDEM_EXAMPLE_NO_PREPARE="1", IDEM_EXAMPLE_POOL="4").start()
    try:
        keys = [new_key() for _ in range(200)]
        with ThreadPoolExecutor(8) as pool:
            first = list(pool.map(lambda k: srv.post("/echo", key=k, body=b'{"n": 1}'), keys))
            again = list(pool.map(lambda k: srv.post("/echo", key=k, body=b'{"n": 1}'), keys[:100]))
    finally:
        srv.stop()
    bad = [(r.status_code, r.text[:200]) for r in first + again if r.status_code != 201]
    assert not bad, f"{len(bad)} of 300 failed, e.g. {bad[0]}\n{srv.stderr()[-2000:]}"
    assert all(r.headers.get("idempotent-replayed") == "true" for r in again)
    effects = db.execute("SELECT count(*) FROM effects WHERE idem_key = ANY(%s::text[])", [keys]).fetchone()[0]
    assert effects == 200
