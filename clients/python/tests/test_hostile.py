"""Both flavours against hostile loopback servers: a deadline per request, a bounded answer, sane retry times."""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from conftest import wait_for

from circuitlog import AsyncClient, CircuitOpenError, Client

Allowed = Callable[[BaseHTTPRequestHandler], None]
DAY_S = 24 * 60 * 60


class Hostile(BaseHTTPRequestHandler):
    """A quiet `/events/stream`, `/outcomes` taken, and `/circuits/.../allowed` answered by `allowed`."""

    allowed: Allowed

    def do_GET(self) -> None:
        if self.path.startswith("/events/stream"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b": open\n\n")
            self.wfile.flush()
            while not getattr(self.server, "stopping", False):
                time.sleep(0.05)
            return
        if self.path.split("?")[0].endswith("/allowed"):
            return type(self).allowed(self)
        self.send_error(404)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hostile() -> Iterator[Callable[[Allowed], str]]:
    servers: list[ThreadingHTTPServer] = []

    def start(allowed: Allowed) -> str:
        handler = type("Handler", (Hostile,), {"allowed": staticmethod(allowed)})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_port}"

    yield start
    for httpd in servers:
        httpd.stopping = True  # type: ignore[attr-defined]
        httpd.shutdown()
        httpd.server_close()


def call_both(url: str, fallback: Any = None, **options: Any) -> list[Any]:
    """One call on circuit `svc` through a `Client` and one through an `AsyncClient`: what each returned."""
    results: list[Any] = []
    with Client(url, close_timeout=0.5, reconnect_max_delay=0.2, **options) as client:
        assert client.ready(5)
        results.append(client.call("svc", lambda: "ran", fallback=fallback))

    async def ran() -> str:
        return "ran"

    async def run_async() -> None:
        async with AsyncClient(url, close_timeout=0.5, reconnect_max_delay=0.2, **options) as client:
            assert await client.ready(5)
            results.append(await client.call("svc", ran, fallback=fallback))

    asyncio.run(run_async())
    return results


def test_a_trickled_answer_ends_at_the_request_timeout_not_when_the_trickle_ends(hostile: Any) -> None:
    progress: list[tuple[int, bool]] = []  # per answer: bytes written, and whether the client left first

    def trickle(h: BaseHTTPRequestHandler) -> None:
        body = b'{"allowed":true,"state":"closed","circuit":null}'.ljust(300)
        h.send_response(200)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(body)))
        h.end_headers()
        for i in range(len(body)):  # one byte every 100 ms: 30 s in all, each read well within the timeout
            try:
                h.wfile.write(body[i : i + 1])
                h.wfile.flush()
            except OSError:
                progress.append((i, True))
                return
            time.sleep(0.1)
        progress.append((len(body), False))

    url = hostile(trickle)
    assert call_both(url, request_timeout=0.5) == ["ran", "ran"]  # no answer in time: fail-open
    wait_for(lambda: len(progress) >= 2, timeout=10)
    assert all(left for _, left in progress)  # each client dropped its request mid-trickle


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "close-delimited"])
def test_an_answer_over_max_response_bytes_is_refused_without_reading_it_all(hostile: Any, declared: bool) -> None:
    written: list[int] = []
    offered = 256 * 1024 * 1024

    def flood(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("content-type", "application/json")
        if declared:
            h.send_header("content-length", str(offered))
        h.end_headers()
        sent, chunk = 0, b"x" * (64 * 1024)
        try:
            while sent < offered:
                h.wfile.write(chunk)
                sent += len(chunk)
        except OSError:
            pass
        written.append(sent)

    url = hostile(flood)
    assert call_both(url) == ["ran", "ran"]  # an answer too long is no answer: fail-open
    wait_for(lambda: len(written) >= 2, timeout=30)
    # 1 MiB (max_response_bytes) read at most, plus what the sockets' buffers held when it was dropped.
    assert max(written) < 16 * 1024 * 1024


@pytest.mark.parametrize(
    ("code", "state", "retry_after", "open_until"),
    [
        ("CIRCUIT_FORCED_OPEN", "open", "1e20", None),
        ("CIRCUIT_OPEN", "open", "1e400", "9999-12-31T23:59:59.999Z"),
        ("CIRCUIT_OPEN", "half_open", str(2**63), None),
    ],
)
def test_a_huge_retry_after_or_open_until_is_clamped_to_a_day_and_the_fallback_runs(
    hostile: Any, code: str, state: str, retry_after: str, open_until: str | None
) -> None:
    def refuse(h: BaseHTTPRequestHandler) -> None:
        body = json.dumps({"code": code, "state": state, "open_until": open_until, "circuit": "svc"}).encode()
        h.send_response(503)
        h.send_header("content-type", "application/problem+json")
        h.send_header("retry-after", retry_after)
        h.send_header("content-length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    url = hostile(refuse)
    before = datetime.now(timezone.utc)
    refusals = call_both(url, fallback=lambda error: error)
    for refusal in refusals:
        assert isinstance(refusal, CircuitOpenError)
        assert before < refusal.retry_at
        assert (refusal.retry_at - datetime.now(timezone.utc)).total_seconds() <= DAY_S


class Counting:
    """Answers every `/allowed` with `answer`, holding the first until `client` runs `calls` calls; counts them."""

    def __init__(self, answer: dict[str, Any], calls: int):
        self.body = json.dumps(answer).encode()
        self.calls = calls
        self.allowed = 0
        self.client: Client | AsyncClient | None = None

    def __call__(self, h: BaseHTTPRequestHandler) -> None:
        self.allowed += 1
        if self.allowed == 1:  # every call has begun (and, but for sharing, sent its own request) before it is answered
            wait_for(lambda: self.client is not None and self.client._core.calls_running >= self.calls)
        h.send_response(200)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(self.body)))
        h.end_headers()
        h.wfile.write(self.body)


def run_concurrently(counting: Counting, url: str, flavour: str) -> list[Any]:
    n = counting.calls
    if flavour == "sync":
        with Client(url, close_timeout=0.5) as client:
            assert client.ready(5)
            counting.client = client
            with ThreadPoolExecutor(n) as pool:
                return list(pool.map(lambda i: client.call("new-circuit", lambda: i), range(n)))

    async def run() -> list[Any]:
        async with AsyncClient(url, close_timeout=0.5) as client:
            assert await client.ready(5)
            counting.client = client

            async def one(i: int) -> int:
                return i

            calls = (client.call("new-circuit", functools.partial(one, i)) for i in range(n))
            return list(await asyncio.gather(*calls))

    return asyncio.run(run())


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_200_concurrent_first_calls_on_a_circuit_send_one_get_allowed(hostile: Any, flavour: str) -> None:
    counting = Counting({"allowed": True, "state": "closed", "circuit": None}, 200)
    assert run_concurrently(counting, hostile(counting), flavour) == list(range(200))
    assert counting.allowed == 1


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_half_open_lookups_are_never_shared_each_call_asks_for_its_own_probe(hostile: Any, flavour: str) -> None:
    counting = Counting({"allowed": True, "state": "half_open", "circuit": None}, 5)
    assert run_concurrently(counting, hostile(counting), flavour) == list(range(5))
    assert counting.allowed == 5
