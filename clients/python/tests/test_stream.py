"""The event stream: SSE parsing with bounds, `event: reset`, Last-Event-ID, and the `at` of each outcome."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

from conftest import Server, wait_for

from circuitlog import Client
from circuitlog._sse import SseMessage, SseParser


def parse(chunks: list[bytes], **bounds: int) -> list[SseMessage]:
    out: list[SseMessage] = []
    p = SseParser(out.append, **bounds)
    for c in chunks:
        p.push(c)
    return out


def test_parses_events_split_anywhere_with_any_line_ending() -> None:
    raw = 'event: transition\r\nid: 7\r\ndata: {"a":"é"}\r\n\r\n: heartbeat\n\nevent: reset\rdata: {}\r\r\n'.encode()
    for size in (1, 2, 3, 7, len(raw)):
        got = parse([raw[i : i + size] for i in range(0, len(raw), size)])
        assert [(m.event, m.data, m.id) for m in got] == [("transition", '{"a":"é"}', "7"), ("reset", "{}", "7")]


def test_discards_an_oversized_line_or_event_and_says_so() -> None:
    long_line = b"data: " + b"x" * 2000 + b"\n\n"
    big_event = b"".join(b"data: " + b"y" * 100 + b"\n" for _ in range(30)) + b"\n"
    ok = b"event: transition\nid: 9\ndata: {}\n\n"
    got = parse([long_line[:700], long_line[700:], big_event, ok], max_line_bytes=1024, max_event_bytes=1024)
    assert [(m.oversized, m.data) for m in got] == [(True, ""), (True, ""), (False, "{}")]
    assert got[2].id == "9"


def test_memory_stays_bounded_on_a_stream_without_newlines() -> None:
    p = SseParser(lambda m: None, max_line_bytes=1024)
    for _ in range(1000):
        p.push(b"z" * 1000)
        assert len(p._buffer) <= 1024 + 1000


class FakeStream(BaseHTTPRequestHandler):
    """/events/stream sends `event: reset`, then a transition; /circuits/x/allowed answers closed."""

    seen_ids: ClassVar[list[str | None]] = []
    allowed_calls = 0

    def do_GET(self) -> None:
        if self.path == "/events/stream":
            FakeStream.seen_ids.append(self.headers.get("last-event-id"))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            if len(FakeStream.seen_ids) == 1:
                self.wfile.write(b'event: reset\ndata: {"reason":"history_pruned","newest_id":"500"}\n\n')
                self.wfile.flush()
                time.sleep(0.3)
                self.wfile.write(
                    b'event: transition\nid: 501\ndata: {"circuit":"f/x","from":"closed","to":"open",'
                    b'"reason":"failure_threshold_reached","at":"2026-12-01T00:00:00.000Z"}\n\n'
                )
                self.wfile.flush()
                time.sleep(0.3)
                return  # the stream ends; the client reconnects with Last-Event-ID 501
            time.sleep(2)
            return
        FakeStream.allowed_calls += 1
        body = json.dumps({"allowed": True, "state": "closed", "circuit": None}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_reset_event_resyncs_every_circuit_and_resumes_at_newest_id() -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeStream)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        client = Client(f"http://127.0.0.1:{httpd.server_port}", close_timeout=0.5)
        assert client.ready(5)
        seen: list[str] = []
        client.on_transition(lambda e: seen.append(e.id))
        wait_for(lambda: len(FakeStream.seen_ids) >= 2, timeout=5)
        assert FakeStream.seen_ids[:2] == [None, "501"]
        assert seen == ["501"]
        client._transport.outcomes.close()  # nothing to deliver to this fake
        client._core.items.clear()
        client.close()
    finally:
        httpd.shutdown()


def test_each_outcome_carries_the_time_it_happened(server: Server) -> None:
    bodies: list[bytes] = []
    client = Client(server.url, flush_delay=0.3)
    client._transport.outcomes.event_hooks["request"].append(lambda r: bodies.append(r.read()))
    assert client.ready(10)
    before = time.time()
    client.call("py/at", lambda: None)
    client.close()
    item = json.loads(bodies[0])["outcomes"][0]
    at = datetime.fromisoformat(item["at"].replace("Z", "+00:00")).timestamp()
    assert item["at"].endswith("Z")
    assert before - 0.01 <= at <= before + 0.2  # when the call ended, not when the batch left (0.3 s later)


def test_a_reset_makes_every_circuit_snapshot_again() -> None:
    from circuitlog._core import Core, Entry, Options
    from circuitlog._wire import ResetEvent

    core = Core(Options(url="http://127.0.0.1:9"))
    with core.lock:
        core.stream_opened()
    entry = core.entries.setdefault("a", Entry())
    entry.generation = core.generation
    assert entry.generation == core.trusted_generation  # decided locally
    core.apply(ResetEvent("history_pruned", "500"))
    assert entry.generation != core.trusted_generation  # asks circuitlog on its next call
    assert core.last_event_id == "500"


def test_outcomes_from_a_clock_far_ahead_are_still_counted(server: Server) -> None:
    client = Client(server.url)
    client._core.wall = lambda: time.time() + 3600  # this host's clock runs an hour ahead
    assert client.ready(10)
    for _ in range(3):
        client.call("py/ahead", lambda: None, is_failure=lambda e, r: True)
    client.close()
    assert client.stats()["outcomes_acknowledged"] == 3
    assert client.stats()["outcomes_rejected"] == 0
    assert server.circuit("py/ahead")["failure_count"] == 3


def test_reconnect_backoff_doubles_with_jitter_and_is_capped() -> None:
    from circuitlog._core import backoff_delay

    for attempt in range(40):
        ceiling = min(5.0, 0.1 * 2**attempt)
        for _ in range(20):
            assert ceiling / 2 <= backoff_delay(attempt, 5.0) <= ceiling
    assert max(backoff_delay(30, 5.0) for _ in range(200)) <= 5.0
