"""Fixtures: the example service (examples/http/python/serve.sh) as a real server process
against the database in $DATABASE_URL (scripts/http-test.sh starts a throw-away cluster)."""

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[3]
SERVE = ROOT / "examples" / "http" / "python" / "serve.sh"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, db_url: str):
        self.db_url = db_url
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self):
        env = dict(os.environ, PORT=str(self.port), DATABASE_URL=self.db_url, IDEM_EXAMPLE_TEST_HOOKS="1")
        self.proc = subprocess.Popen([str(SERVE)], env=env, start_new_session=True)
        deadline = time.monotonic() + 300  # the first start installs packages
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve.sh exited with {self.proc.returncode}")
            try:
                httpx.get(self.url + "/openapi.json", timeout=1)
                return self
            except httpx.TransportError:
                time.sleep(0.2)
        raise RuntimeError("the example service did not start")

    def kill(self):
        """SIGKILL: no clean-up of any kind, as a crashed process."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)


@pytest.fixture(scope="session")
def db_url() -> str:
    url = os.environ.get("DATABASE_URL")
    if not url:
        pytest.fail("DATABASE_URL is not set: run scripts/http-test.sh")
    return url


@pytest.fixture(scope="session")
def server(db_url):
    srv = Server(db_url).start()
    yield srv
    srv.stop()


@pytest.fixture
def db(db_url):
    with psycopg.connect(db_url, autocommit=True) as conn:
        yield conn
