"""circuitlog down: fail-open behind the local breaker, a bounded offline queue, and the server's truth winning."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import wait_for

from circuitlog import CircuitlogUnavailableError, CircuitOpenError, Client


def boom() -> None:
    raise RuntimeError("boom")


def test_keeps_working_while_down_cuts_a_failing_dependency_off_locally_and_resyncs(server_factory: Any) -> None:
    s = server_factory()
    s.patch("py/dep", {"failure_threshold": 3, "timeout_seconds": 60})  # the local breaker takes this policy
    client = Client(s.url, max_queued_outcomes=50, reconnect_max_delay=0.2, request_timeout=0.5)
    assert client.ready(10)
    assert client.call("py/dep", lambda: "ok") == "ok"  # snapshot: closed, with its policy
    assert client.call("py/healthy", lambda: "ok") == "ok"
    wait_for(lambda: client.stats()["outcomes_pending"] == 0)
    s.stop()
    wait_for(lambda: client.connection == "offline")
    assert client.call("py/healthy", lambda: "still ok") == "still ok"  # fail-open
    for _ in range(3):
        with pytest.raises(RuntimeError):
            client.call("py/dep", boom)
    with pytest.raises(CircuitOpenError) as refused:
        client.call("py/dep", lambda: "never")  # the local breaker cut it off after 3 failures
    assert refused.value.local is True
    assert client.state("py/dep") == "open"
    for _ in range(100):  # past the bound: the oldest are dropped
        client.call("py/healthy", lambda: None)
    assert client.stats()["outcomes_dropped"] == 1 + 3 + 100 - 50
    s.start()
    wait_for(lambda: client.connection == "connected", timeout=15)
    wait_for(lambda: client.stats()["outcomes_pending"] == 0, timeout=15)
    # The server's state wins: it saw only the outcomes within the bound, and is closed.
    assert s.circuit("py/healthy")["state"] == "closed"
    assert client.call("py/dep", lambda: "back") == "back"
    assert client.state("py/dep") == "closed"
    client.close()
    healthy = s.circuit("py/healthy")
    assert healthy["failure_count"] == 0
    assert client.stats()["outcomes_acknowledged"] == 2 + 50 + 1


def test_refuses_while_down_when_fail_open_is_false(server_factory: Any) -> None:
    s = server_factory()
    client = Client(s.url, fail_open=False, reconnect_max_delay=0.2, request_timeout=0.5)
    assert client.ready(10)
    s.stop()
    wait_for(lambda: client.connection == "offline")
    with pytest.raises(CircuitlogUnavailableError):
        client.call("py/strict", lambda: "never")
    assert client.call("py/strict", lambda: "never", fallback=lambda e: "fallback") == "fallback"
    client.close()


def test_close_gives_up_after_close_timeout_naming_what_was_not_delivered(server_factory: Any) -> None:
    s = server_factory()
    client = Client(s.url, reconnect_max_delay=0.2, request_timeout=0.3, close_timeout=0.5)
    assert client.ready(10)
    s.stop()
    wait_for(lambda: client.connection == "offline")
    for _ in range(5):
        client.call("py/undelivered", lambda: None)
    with pytest.raises(CircuitlogUnavailableError, match="5 outcome"):
        client.close()


def test_calls_wait_for_room_while_the_queue_is_full(server_factory: Any) -> None:
    s = server_factory()
    with Client(s.url, max_queued_outcomes=10, flush_at=10, max_batch=10) as client:
        assert client.ready(10)
        for _ in range(500):
            client.call("py/backpressure", lambda: None)
        assert client.stats()["outcomes_dropped"] == 0
    text = __import__("httpx").get(f"{s.url}/metrics").text
    assert 'circuitlog_outcomes_total{circuit="py/backpressure",kind="success",outcome="success"} 500' in text
