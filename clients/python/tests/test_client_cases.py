"""Every case of clients/spec/client-cases.json, driven against the real server (format: clients/spec/README.md)."""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, ClassVar

import pytest
from conftest import Server

from circuitlog import CallTimeoutError, CircuitlogUnavailableError, CircuitOpenError, Client

SPEC = Path(__file__).resolve().parents[2] / "spec" / "client-cases.json"
CASES: list[dict[str, Any]] = json.loads(SPEC.read_text())["cases"]
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}
MS_OPTIONS = {
    "flush_delay_ms": "flush_delay",
    "request_timeout_ms": "request_timeout",
    "reconnect_max_delay_ms": "reconnect_max_delay",
    "stream_idle_timeout_ms": "stream_idle_timeout",
    "close_timeout_ms": "close_timeout",
}


class CountingProxy(BaseHTTPRequestHandler):
    """Forwards every request to the server, streaming answers (the event stream passes), and logs `METHOD path`.

    The path is logged without its query; the query is kept beside it, parsed (`expect_requests` `query`).
    """

    protocol_version = "HTTP/1.1"
    upstream: ClassVar[tuple[str, int]] = ("127.0.0.1", 0)
    log: ClassVar[list[tuple[str, dict[str, list[str]]]]] = []

    def _forward(self) -> None:
        path, _, query = self.path.partition("?")
        CountingProxy.log.append((f"{self.command} {path}", urllib.parse.parse_qs(query, keep_blank_values=True)))
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            res = conn.getresponse()
        except OSError:
            self.send_response(502)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        self.send_response(res.status)
        for k, v in res.getheaders():
            if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                self.send_header(k, v)
        if res.status in (204, 304):  # no body, so no chunked framing either (RFC 9112 section 6.3)
            self.end_headers()
            conn.close()
            return
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        try:
            while chunk := res.read1(65536):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (OSError, http.client.HTTPException, ValueError):  # either side went away mid-answer
            self.close_connection = True
        finally:
            conn.close()

    do_GET = do_POST = do_PATCH = _forward

    def log_message(self, *args: Any) -> None:
        pass


def client_options(case: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in case.get("options", {}).items():
        if key in MS_OPTIONS:
            out[MS_OPTIONS[key]] = value / 1000
        else:
            out[key] = value
    return out


def outcome_of(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "value", fn()
    except CallTimeoutError:
        return "timeout", None
    except CircuitOpenError as refusal:
        return "circuit_open", refusal.scope
    except CircuitlogUnavailableError:
        return "unavailable", None
    except FnError:
        return "fn_error", None


class FnError(Exception):
    """The error a `fail` function raises."""


def make_fn(step: dict[str, Any]) -> Callable[[], str]:
    kind = step["fn"]

    def fn() -> str:
        if kind == "fail":
            raise FnError("fail")
        if kind == "sleep":
            time.sleep(step["sleep_ms"] / 1000)
        return "ok"

    return fn


def matches(got: Any, want: Any) -> bool:
    """`got` includes `want`: objects member by member (recursively), arrays element by element (same length)."""
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and matches(got[k], v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(matches, got, want))
    return bool(got == want)


def query_matches(query: dict[str, list[str]], want: dict[str, str | None]) -> bool:
    """Each wanted parameter has that value (None: is absent)."""
    return all((k not in query) if v is None else query.get(k) == [v] for k, v in want.items())


def poll(predicate: Callable[[], bool], within_ms: float, what: str) -> None:
    deadline = time.monotonic() + within_ms / 1000
    while not predicate():
        assert time.monotonic() < deadline, f"not within {within_ms} ms: {what}"
        time.sleep(0.005)


class Runner:
    def __init__(self, case: dict[str, Any], server: Server, url: str):
        self.case = case
        self.server = server
        callers: list[str | None] = case.get("callers") or [None] * case["clients"]
        self.clients = [Client(url, caller=callers[i], **client_options(case)) for i in range(case["clients"])]
        for c in self.clients:
            assert c.ready(10), "client did not connect"

    def targets(self, step: dict[str, Any]) -> list[Client]:
        return [self.clients[i] for i in step.get("clients", [step.get("client", 0)])]

    def each(self, step: dict[str, Any], fn: Callable[[Client], Any], concurrent: bool) -> list[Any]:
        targets = self.targets(step)
        if not concurrent:
            return [fn(c) for c in targets]
        with ThreadPoolExecutor(len(targets)) as pool:
            return list(pool.map(fn, targets))

    def run(self, step: dict[str, Any]) -> None:
        op = step["op"]
        getattr(self, "op_" + op)(step)

    def op_call(self, step: dict[str, Any]) -> None:
        for c in self.targets(step):
            for _ in range(step.get("repeat", 1)):
                kind = self.call_once(c, step)
                assert kind == step["expect"], f"call on {step['circuit']}: {kind} (expected {step['expect']})"

    def call_once(self, c: Client, step: dict[str, Any]) -> str:
        fn = make_fn(step)
        timeout = step["timeout_ms"] / 1000 if "timeout_ms" in step else None
        if "fallback" in step:
            value: str = step["fallback"]
            kind, got = outcome_of(lambda: c.call(step["circuit"], fn, fallback=lambda e: value, timeout=timeout))
            return "fallback" if kind == "value" and got == value else kind
        kind, got = outcome_of(lambda: c.call(step["circuit"], fn, timeout=timeout))
        if kind == "circuit_open" and "scope" in step and got != step["scope"]:
            return f"circuit_open (scope {got})"
        return "ok" if kind == "value" and got == "ok" else kind

    def op_allowed(self, step: dict[str, Any]) -> None:
        repeat, concurrent = step.get("repeat", 1), step.get("concurrent", False)
        asks = [(c, step["circuit"]) for c in self.targets(step) for _ in range(repeat)]
        if concurrent:
            barrier = threading.Barrier(len(asks))

            def ask(a: tuple[Client, str]) -> bool:
                barrier.wait()
                return a[0].allowed(a[1])

            with ThreadPoolExecutor(len(asks)) as pool:
                answers = list(pool.map(ask, asks))
        else:
            answers = [c.allowed(name) for c, name in asks]
        if "expect_true" in step:
            assert answers.count(True) == step["expect_true"], answers
        else:
            assert all(a == step["expect"] for a in answers), answers

    def op_record(self, step: dict[str, Any]) -> None:
        def record(c: Client) -> None:
            for _ in range(step.get("repeat", 1)):
                c.record(step["circuit"], success=step["success"])

        self.each(step, record, step.get("concurrent", False))

    def op_close(self, step: dict[str, Any]) -> None:
        self.each(step, lambda c: c.close(), True)

    def op_wait_state(self, step: dict[str, Any]) -> None:
        for c in self.targets(step):
            poll(partial(lambda c: c.state(step["circuit"]) == step["state"], c), step["within_ms"], "state")

    def op_expect_state(self, step: dict[str, Any]) -> None:
        for c in self.targets(step):
            assert c.state(step["circuit"]) == step["state"]

    def op_wait_connection(self, step: dict[str, Any]) -> None:
        for c in self.targets(step):
            poll(partial(lambda c: c.connection == step["state"], c), step["within_ms"], "connection")

    def op_wait_acknowledged(self, step: dict[str, Any]) -> None:
        for c in self.targets(step):
            poll(partial(lambda c: c.stats()["outcomes_pending"] == 0, c), step["within_ms"], "all acknowledged")

    def op_wait_allowed(self, step: dict[str, Any]) -> None:
        for c in self.targets(step):
            poll(partial(lambda c: c.allowed(step["circuit"]) == step["expect"], c), step["within_ms"], "allowed")

    def op_expect_server(self, step: dict[str, Any]) -> None:
        got = self.server.circuit(step["circuit"])
        assert matches(got, step["fields"]), {k: got.get(k) for k in step["fields"]}

    def op_expect_event(self, step: dict[str, Any]) -> None:
        events = self.server.events(step["circuit"])
        assert any(matches(e, step["fields"]) for e in events), events

    def op_expect_requests(self, step: dict[str, Any]) -> None:
        line, want = f"{step['method']} {step['path']}", step.get("query", {})
        n = sum(1 for logged, query in CountingProxy.log if logged == line and query_matches(query, want))
        assert step.get("at_least", 0) <= n <= step.get("at_most", n), f"{n} x {step['method']} {step['path']}"

    def op_patch(self, step: dict[str, Any]) -> None:
        self.server.patch(step["circuit"], step["body"])

    def op_stop_server(self, step: dict[str, Any]) -> None:
        self.server.stop()

    def op_start_server(self, step: dict[str, Any]) -> None:
        self.server.start()

    def op_sleep(self, step: dict[str, Any]) -> None:
        time.sleep(step["ms"] / 1000)

    def close(self) -> None:
        for c in self.clients:
            with contextlib.suppress(CircuitlogUnavailableError):  # a case that ends with the server down
                c.close()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_client_case(case: dict[str, Any], server_factory: Any) -> None:
    server: Server = server_factory(case["server"]["circuit_defaults"])
    url = server.url
    proxy = None
    if case.get("count_requests"):
        CountingProxy.upstream = ("127.0.0.1", server.port)
        CountingProxy.log = []
        proxy = ThreadingHTTPServer(("127.0.0.1", 0), CountingProxy)
        proxy.daemon_threads = True
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{proxy.server_port}"
    runner = Runner(case, server, url)
    try:
        for index, step in enumerate(case["steps"]):
            try:
                runner.run(step)
            except AssertionError as e:
                raise AssertionError(f"{case['id']} step {index} ({step['op']}): {e}") from e
    finally:
        runner.close()
        if proxy is not None:
            proxy.shutdown()
        server.stop()


def test_the_spec_has_cases() -> None:
    assert len(CASES) >= 10
