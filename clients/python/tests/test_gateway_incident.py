"""Issue 29's gateway incident replayed through the Python client, on the real server before a real
loopback dependency answering in 150 ms: 5 calls with ``deadline=0.05``, then 400 calls from another
caller with ``deadline=2``. The Node client's replay is test/client/gateway-incident.test.ts."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from conftest import Server, wait_for

from circuitlog import CallDeadlineError, CircuitOpenError, Client


class _Slow(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(0.15)
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    # socketserver's listen backlog is 5: 40 callers connecting at once overflowed it, and a SYN
    # retried after 1 s and 3 s made calls miss their 2 s deadline.
    request_queue_size = 128
    daemon_threads = True


@pytest.fixture
def dependency() -> Iterator[str]:
    httpd = _Server(("127.0.0.1", 0), _Slow)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


# One connection pool for every call (httpx.get would build a TLS context per call: CPU, not waiting).
_http = httpx.Client(timeout=10, limits=httpx.Limits(max_connections=64, max_keepalive_connections=64))


def _call(client: Client, circuit: str, url: str, deadline: float) -> str:
    try:
        client.call(circuit, lambda: _http.get(url).raise_for_status(), deadline=deadline)
        return "ok"
    except CircuitOpenError:
        return "refused"
    except CallDeadlineError:
        return "deadline"


def test_five_short_deadlines_then_400_calls_refuse_nothing_and_a_fair_min_deadline_opens(
    server_factory: Any, dependency: str
) -> None:
    server: Server = server_factory({"failure_threshold": 5})
    short = Client(server.url, caller="short")
    web = Client(server.url, caller="web", timeout_workers=64)  # 40 calls at once, none queued
    try:
        assert short.ready(10) and web.ready(10)
        assert [_call(short, "llm", dependency, 0.05) for _ in range(5)] == ["deadline"] * 5
        with ThreadPoolExecutor(max_workers=40) as pool:
            rest = list(pool.map(lambda _: _call(web, "llm", dependency, 2.0), range(400)))
        assert [r for r in rest if r != "ok"] == []
        short.close()
        web.close()
        after = server.circuit("llm")
        assert (after["state"], after["failure_count"]) == ("closed", 0)
        assert server.events("llm") == []

        # The same five calls where the policy says 40 ms was a fair chance: the dependency's failures.
        server.patch("fair", {"min_deadline_ms": 40})
        fair = Client(server.url, caller="short")
        try:
            assert fair.ready(10)
            assert [_call(fair, "fair", dependency, 0.05) for _ in range(5)] == ["deadline"] * 5
            wait_for(lambda: fair.state("fair") == "open")
            assert server.circuit("fair")["state"] == "open"
            assert _call(fair, "fair", dependency, 2.0) == "refused"
        finally:
            fair.close()
    finally:
        short.close()
        web.close()
