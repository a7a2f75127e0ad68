"""Fixtures: the example apps (examples/http/python) as real server processes (uvicorn for
FastAPI, werkzeug's threaded WSGI server for Flask and Django) against the database in
$DATABASE_URL (scripts/http-test.sh starts a throw-away cluster and installs the adapter from
its wheel). IDEM_HTTP_APP_PORT: the first port to give the servers (default: any free port).
IDEM_HTTP_POOLER=host:port: the apps connect through that pooler instead (the script's PgBouncer in
transaction mode, its second pass); the tests' own checks (db, db_url) stay direct."""

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import httpx
import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[3]
APPS = ROOT / "examples" / "http" / "python"
FRAMEWORKS = ["fastapi", "flask", "django"]
#: the example apps' service name (IDEMPOTENCY_SERVICE), unless a test gives another
SERVICE = "examples"
_first_port = int(os.environ.get("IDEM_HTTP_APP_PORT", "0"))
_ports = itertools.count(_first_port)
#: the pooler the apps go through (scripts/http-test.sh, the PgBouncer pass), or None
POOLER = os.environ.get("IDEM_HTTP_POOLER") or None


def app_url(url: str) -> str:
    """The URL an app connects with: through POOLER when set, to the same database and user."""
    if not POOLER:
        return url
    parts = urlparse(url)
    user = parts.netloc.rpartition("@")[0]
    return urlunparse(parts._replace(netloc=f"{user}@{POOLER}" if user else POOLER))



def free_port() -> int:
    # Without IDEM_HTTP_APP_PORT, every port is the kernel's pick (counting up from 0 gave
    # ports 1, 2, 3, ... from the second server on, the same in every pytest run).
    if _first_port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    return next(_ports)


class Server:
    def __init__(self, framework: str, db_url: str, **env):
        self.framework = framework
        self.db_url = app_url(db_url)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = env
        self.proc = None

    def command(self):
        if self.framework == "fastapi":
            return [sys.executable, "-m", "uvicorn", "fastapi_app:app", "--host", "127.0.0.1",
                    "--port", str(self.port), "--log-level", "warning"]
        return [sys.executable, f"{self.framework}_app.py"]

    def start(self, tries: int = 3):
        env = dict(os.environ, PORT=str(self.port), DATABASE_URL=self.db_url, IDEMPOTENCY_SERVICE=SERVICE)
        env.update(self.env)
        env.pop("PYTHONPATH", None)  # the adapter comes from the venv (the wheel), not the source
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.command(), cwd=APPS, env=env, start_new_session=True,
                                     stderr=self.log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                err = self.log.read().decode(errors="replace")[-3000:]
                if tries > 1 and "Address already in use" in err:
                    self.port = free_port()
                    self.url = f"http://127.0.0.1:{self.port}"
                    return self.start(tries - 1)
                raise RuntimeError(f"{self.framework} app exited with {self.proc.returncode}:\n{err}")
            try:
                httpx.get(self.url + "/runs/start", timeout=1)
            except httpx.TransportError:
                time.sleep(0.2)
                continue
            # An answer proves a server on the port, not that it is this one: another process
            # may hold the port (this one then exits with "Address already in use", above).
            if self.listening():
                return self
            time.sleep(0.2)
        raise RuntimeError(f"the {self.framework} app did not start")

    def listening(self) -> bool:
        """Does this server's process hold the socket that listens on its port? (Linux: the
        socket's inode in /proc/net/tcp among the process's descriptors; elsewhere, yes.)"""
        try:
            lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
        except OSError:
            return True
        port = f":{self.port:04X}"
        inodes = {f"socket:[{f[9]}]" for f in (line.split() for line in lines)
                  if f[1].endswith(port) and f[3] == "0A"}
        fds = Path(f"/proc/{self.proc.pid}/fd")
        try:
            return any(os.readlink(fd) in inodes for fd in fds.iterdir())
        except OSError:
            return False

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def runs(self, name: str) -> int:
        return httpx.get(f"{self.url}/runs/{name}").json()["runs"]

    def post(self, path, key=None, body=b"", content_type="application/json", headers=None, timeout=30.0, **kw):
        h = {}
        if content_type is not None:
            h["content-type"] = content_type
        if key is not None:
            h["idempotency-key"] = key
        h.update(headers or {})
        return httpx.post(self.url + path, content=body, headers=h, timeout=timeout, **kw)

    def kill(self):
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="session")
def db_url() -> str:
    url = os.environ.get("DATABASE_URL")
    if not url:
        pytest.fail("DATABASE_URL is not set: run scripts/http-test.sh")
    return url


@pytest.fixture(scope="session", params=FRAMEWORKS)
def server(request, db_url):
    srv = Server(request.param, db_url).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def fastapi_server(db_url):
    srv = Server("fastapi", db_url).start()
    yield srv
    srv.stop()


@pytest.fixture
def db(db_url):
    with psycopg.connect(db_url, autocommit=True) as conn:
        yield conn


def new_key() -> str:
    return f"k-{uuid.uuid4()}"


def scope_of(route: str, principal=None, params=None, query: str = "", service: str = SERVICE,
             method: str = "POST") -> str:
    """The default scope the adapter gives a request (docs/http.md, Scope), written out here."""
    return json.dumps([service, principal, method, route, params or {}, query],
                      separators=(",", ":"), sort_keys=True, ensure_ascii=False)
