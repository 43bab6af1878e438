"""Soft throttling in the Python client: decided locally on closed circuits, and circuitlog's own refusal."""

from __future__ import annotations

import httpx
import pytest
from conftest import NEVER_TRIPS, Server

from circuitlog import CircuitOpenError, CircuitThrottledError, Client
from circuitlog._core import Core, Options
from circuitlog._wire import Refused, allowed_answer


def boom() -> None:
    raise RuntimeError("boom")


def throttled_circuit(server: Server, name: str) -> None:
    res = httpx.patch(
        f"{server.url}/circuits/{name}",
        json={"failure_threshold": NEVER_TRIPS, "throttle": {"k": 2, "window_seconds": 60}},
        headers={"content-type": "application/merge-patch+json"},
    )
    assert res.status_code in (200, 201), res.text


def test_refuses_locally_without_a_request_and_without_running_the_call(server: Server) -> None:
    throttled_circuit(server, "py-throttle")
    client = Client(server.url)
    try:
        assert client.ready(10)
        draw = [0.999]  # admit while the history is made
        client._core.random = lambda: draw[0]
        assert client.call("py-throttle", lambda: "ok") == "ok"  # the snapshot, with the policy
        for i in range(9):
            if i < 2:
                client.call("py-throttle", lambda: "ok")
            else:
                with pytest.raises(RuntimeError):
                    client.call("py-throttle", boom)
        # 10 outcomes, 3 successes: p = (10 - 2*3) / 11
        seen: list[str] = []
        client._transport.requests.event_hooks["request"].append(lambda r: seen.append(r.url.raw_path.decode()))
        draw[0] = 0.1
        ran: list[bool] = []
        with pytest.raises(CircuitThrottledError) as refused:
            client.call("py-throttle", lambda: ran.append(True))
        assert isinstance(refused.value, CircuitOpenError)
        assert (refused.value.code, refused.value.state, refused.value.local) == ("CIRCUIT_THROTTLED", "closed", True)
        assert refused.value.probability == pytest.approx(4 / 11)
        assert ran == [] and seen == []
        assert client.call("py-throttle", lambda: "ok", fallback=lambda e: type(e).__name__) == "CircuitThrottledError"
        assert client.allowed("py-throttle") is False
        assert client.stats()["throttled_locally"] == 3
        draw[0] = 0.99
        assert client.call("py-throttle", lambda: "ok") == "ok"
        assert client.state("py-throttle") == "closed"
    finally:
        client.close()


def test_never_throttles_a_healthy_dependency(server: Server) -> None:
    throttled_circuit(server, "py-healthy")
    client = Client(server.url)
    try:
        assert client.ready(10)
        client._core.random = lambda: 0.0
        for _ in range(50):
            assert client.call("py-healthy", lambda: "ok") == "ok"
        assert client.stats()["throttled_locally"] == 0
    finally:
        client.close()


def test_circuitlogs_circuit_throttled_answer_is_a_refusal_of_that_call_only() -> None:
    body = {"code": "CIRCUIT_THROTTLED", "state": "closed", "open_until": None, "throttle_probability": 0.25}
    answer = allowed_answer(503, {"retry-after": "1"}, body)
    assert isinstance(answer, Refused) and answer.throttled == 0.25 and answer.state == "closed"
    core = Core(Options(url="http://127.0.0.1:1"))
    generation, seq = core.before_ask("dep")
    with pytest.raises(CircuitThrottledError) as refused:
        core.answered("dep", answer, generation, seq)
    assert refused.value.local is False
    assert core.entries["dep"].refused_until == 0  # nothing kept: the next call asks again
    core.before_ask("dep")  # and is not refused from memory
