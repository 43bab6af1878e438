"""The real circuitlog (``node dist/main.js``) on a temp database and a loopback port: no mocks."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]
# CIRCUITLOG_SERVER_DIST: run the suite against another build of the server (e.g. a branch under review).
DIST = Path(os.environ.get("CIRCUITLOG_SERVER_DIST") or REPO / "dist" / "main.js")
NEVER_TRIPS = 1_000_000_000


def _build() -> None:
    if not DIST.exists():
        tsc = REPO / "node_modules" / "typescript" / "bin" / "tsc"
        subprocess.run(["node", str(tsc), "-p", "tsconfig.build.json"], cwd=REPO, check=True)


def _die_with_parent() -> None:
    """Linux: the server gets SIGKILL when the thread that started it dies (a killed pytest leaves no server).

    So start servers from the test's main thread only.
    """
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Server:
    """One circuitlog process; ``stop()`` kills it, ``start()`` starts it again on the same port and database."""

    def __init__(self, directory: Path, defaults: dict[str, Any], env: dict[str, str]):
        self.dir = directory
        self.env = env
        self.port = 0
        config = directory / "circuitlog.json"
        config.write_text(json.dumps({"circuit_defaults": defaults}))
        self.config = config
        self.proc: subprocess.Popen[str] | None = None
        self.logs: list[dict[str, Any]] = []
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> None:
        env = {
            **os.environ,
            "PORT": str(self.port),
            "HOST": "127.0.0.1",
            "CIRCUITLOG_DB": str(self.dir / "db.sqlite"),
            "CIRCUITLOG_CONFIG": str(self.config),
            "CIRCUITLOG_LOG_LEVEL": "info",
            **self.env,
        }
        stderr = open(self.dir / "stderr.log", "a")  # noqa: SIM115 (a file, never a pipe nobody reads)
        proc = subprocess.Popen(
            ["node", str(DIST)], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
        stderr.close()
        self.proc = proc
        listening = threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                self.logs.append(entry)
                if entry.get("event") == "listening" and isinstance(entry.get("port"), int):
                    self.port = entry["port"]
                    listening.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not listening.wait(0.05) and proc.poll() is None and time.monotonic() < deadline:
            pass
        if not listening.is_set():
            proc.kill()
            err = (self.dir / "stderr.log").read_text()
            raise RuntimeError(f"circuitlog did not start in {timeout} s: {err}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    # -- plain HTTP, for the test's own view of the truth --------------------------------------

    def circuit(self, name: str) -> dict[str, Any]:
        res = httpx.get(f"{self.url}/circuits/{urllib.parse.quote(name, safe='')}")
        assert res.status_code == 200, res.text
        body: dict[str, Any] = res.json()
        return body

    def events(self, name: str) -> list[dict[str, Any]]:
        res = httpx.get(f"{self.url}/circuits/{urllib.parse.quote(name, safe='')}/events")
        assert res.status_code == 200, res.text
        events: list[dict[str, Any]] = res.json()["events"]
        return events

    def patch(self, name: str, policy: dict[str, Any]) -> None:
        res = httpx.patch(
            f"{self.url}/circuits/{urllib.parse.quote(name, safe='')}",
            json=policy,
            headers={"content-type": "application/merge-patch+json"},
        )
        assert res.status_code in (200, 201), res.text

    def post(self, path: str, body: Any = None) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", json=body)


@pytest.fixture(scope="session")
def server_factory() -> Iterator[Any]:
    _build()
    started: list[Server] = []
    dirs: list[str] = []

    def make(defaults: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> Server:
        d = tempfile.mkdtemp(prefix="circuitlog-py-")
        dirs.append(d)
        s = Server(Path(d), defaults or {"failure_threshold": NEVER_TRIPS}, env or {})
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def server(server_factory: Any) -> Server:
    """Shared by the tests that give each of their circuits its own name and policy."""
    s: Server = server_factory({"failure_threshold": NEVER_TRIPS})
    return s


def wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    assert predicate(), f"condition not met within {timeout} s"
