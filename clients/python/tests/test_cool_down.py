"""Issue 29, the Python client's view: the dependency's cool-down (circuit and caller scope) and the shared
ramp, learnt from snapshots, events and circuitlog's answers, decided locally by the core (which both
``Client`` and ``AsyncClient`` use); the two new problems as client errors. A fake clock, injected draws."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import datetime, timezone
from typing import Any

import pytest
from fake_transport import AsyncFakeClient, FakeClient

from circuitlog import (
    CircuitOpenError,
    CircuitRampingError,
    DependencyThrottledError,
    TransitionEvent,
)
from circuitlog._core import Core, Options
from circuitlog._wire import Admitted, Refused, allowed_answer, parse_event

T0 = 1_893_456_000_000.0  # 2030-01-01T00:00:00Z, epoch ms
RAMP = {"seconds": 10, "start_percent": 10}


def iso(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat().replace("+00:00", "Z")


class View:
    """A core with its stream open, a clock the test moves, draws it decides, and one snapshot of ``svc``."""

    def __init__(self, circuit: dict[str, Any] | None) -> None:
        self.now = T0
        self.draw = 0.5
        self.core = Core(Options(url="http://127.0.0.1:1", caller="me"), clock_ms=lambda: self.now)
        self.core.random = lambda: self.draw
        self.ids = 0
        with self.core.lock:
            self.core.stream_opened()
            if circuit is not None:
                generation, seq = self.core.before_ask("svc")
                self.core.answered("svc", Admitted("closed", {"state": "closed", **circuit}), generation, seq)

    def call(self) -> Exception | None:
        """The refusal the view decides for one call, or None (admitted)."""
        with self.core.lock:
            local, refusal = self.core.begin_call("svc")
            self.core.calls_running -= 1
        assert local, "decided by the view"
        return refusal

    def event(self, reason: str, from_state: str = "closed", to_state: str = "closed", **fields: Any) -> None:
        self.ids += 1
        self.core.apply(TransitionEvent(str(self.ids), "svc", from_state, to_state, reason, iso(self.now), **fields))


def test_refuses_locally_during_a_circuit_wide_cool_down_a_snapshot_shows_then_admits() -> None:
    v = View({"cool_until": iso(T0 + 2_500), "cooling_callers": []})
    refusal = v.call()
    assert isinstance(refusal, DependencyThrottledError) and isinstance(refusal, CircuitOpenError)
    assert (refusal.code, refusal.scope, refusal.retry_after, refusal.local) == (
        "DEPENDENCY_THROTTLED",
        "circuit",
        3,
        True,
    )
    assert refusal.cool_until.timestamp() * 1000 == T0 + 2_500
    with v.core.lock:
        assert v.core.decide_locally("svc") is False
    v.now = T0 + 2_500
    assert v.call() is None


def test_refuses_this_caller_only_during_a_caller_scope_cool_down() -> None:
    def cooling(caller: str) -> dict[str, Any]:
        return {"cool_until": None, "cooling_callers": [{"caller": caller, "cool_until": iso(T0 + 10_000)}]}

    refusal = View(cooling("me")).call()
    assert isinstance(refusal, DependencyThrottledError)
    assert (refusal.scope, refusal.caller, refusal.retry_after) == ("caller", "me", 10)
    assert View(cooling("someone-else")).call() is None


def test_follows_the_cool_down_events_for_the_circuit_and_for_this_caller_only() -> None:
    v = View({})
    v.event("cool_down", scope="caller", callers=("other",), until=iso(T0 + 5_000))
    assert v.call() is None
    v.event("cool_down", scope="caller", callers=("me",), until=iso(T0 + 5_000))
    assert isinstance(v.call(), DependencyThrottledError)
    v.event("cool_down_ended", scope="caller", callers=("me",))
    assert v.call() is None
    v.event("cool_down", scope="circuit", until=iso(T0 + 3_000), retry_after_seconds=3)
    refusal = v.call()
    assert isinstance(refusal, DependencyThrottledError) and refusal.scope == "circuit"
    v.now = T0 + 3_000
    assert v.call() is None
    assert v.core.state("svc") == "closed"


def test_keeps_refusing_during_a_known_cool_down_while_circuitlog_is_unreachable() -> None:
    v = View({"cool_until": iso(T0 + 5_000)})
    with v.core.lock:
        v.core.set_link(False, False)  # offline
        with pytest.raises(DependencyThrottledError) as refused:
            v.core.lookup("svc", threading.Event)
        assert refused.value.local is True
        v.now = T0 + 5_000
        assert v.core.lookup("svc", threading.Event) == (None, False)  # the local breaker admits
    assert v.core.counts["offline_decisions"] == 1


def test_keeps_circuitlogs_dependency_throttled_answer_until_its_cool_until() -> None:
    body = {"code": "DEPENDENCY_THROTTLED", "circuit": "svc", "state": "closed", "scope": "caller"}
    body["cool_until"] = iso(datetime.now(timezone.utc).timestamp() * 1000 + 30_000)
    answer = allowed_answer(503, {"retry-after": "30"}, body)
    assert isinstance(answer, Refused) and answer.cool_down is not None and answer.cool_down[1] == "caller"
    v = View(None)
    v.now = answer.cool_down[0] - 30_000
    generation, seq = v.core.before_ask("svc")
    with pytest.raises(DependencyThrottledError) as refused:
        v.core.answered("svc", answer, generation, seq)
    assert (refused.value.local, refused.value.scope, refused.value.caller, refused.value.retry_after) == (
        False,
        "caller",
        "me",
        30,
    )
    with pytest.raises(DependencyThrottledError):
        v.core.before_ask("svc")  # kept: not asked again
    v.now = answer.cool_down[0]
    v.core.before_ask("svc")  # then asked


def test_admits_the_ramps_share_by_the_injected_draw_growing_linearly_to_100() -> None:
    v = View({"ramp": RAMP, "ramp_until": iso(T0 + 10_000)})
    v.draw = 0.05  # under 10 %
    assert v.call() is None
    v.draw = 0.5
    refusal = v.call()
    assert isinstance(refusal, CircuitRampingError) and isinstance(refusal, CircuitOpenError)
    assert (refusal.code, refusal.ramp_percent, refusal.retry_after, refusal.local) == ("CIRCUIT_RAMPING", 10, 1, True)
    v.now = T0 + 5_000  # 55 %
    assert v.call() is None
    v.draw = 0.56
    refusal = v.call()
    assert isinstance(refusal, CircuitRampingError) and refusal.ramp_percent == 55
    v.now, v.draw = T0 + 10_000, 0.999
    assert v.call() is None


def test_ramps_from_the_ramp_until_of_a_half_open_to_closed_transition() -> None:
    v = View({"ramp": RAMP, "ramp_until": None})
    assert v.call() is None
    v.event("probe_succeeded", "half_open", "closed", ramp_until=iso(T0 + 10_000))
    refusal = v.call()
    assert isinstance(refusal, CircuitRampingError) and refusal.ramp_percent == 10


def test_ramps_after_a_cool_down_ends_from_the_events_ramp_until_or_before_it_from_cool_until() -> None:
    v = View({"ramp": RAMP, "cool_until": iso(T0 + 2_000)})
    v.now = T0 + 2_000  # ended, no event yet: the ramp began at cool_until
    refusal = v.call()
    assert isinstance(refusal, CircuitRampingError) and refusal.ramp_percent == 10
    v.now = T0 + 7_000  # 55 %
    assert v.call() is None
    v.event("cool_down_ended", scope="circuit", ramp_until=iso(T0 + 17_000))  # the server's: it wins
    refusal = v.call()
    assert isinstance(refusal, CircuitRampingError) and refusal.ramp_percent == 10


def test_circuitlogs_circuit_ramping_answer_refuses_that_call_only() -> None:
    ramp_until = iso(T0 + 8_000)
    answer = allowed_answer(
        503, {"retry-after": "1"}, {"code": "CIRCUIT_RAMPING", "ramp_percent": 30, "ramp_until": ramp_until}
    )
    assert isinstance(answer, Refused) and answer.ramping == (30.0, T0 + 8_000)
    v = View(None)
    generation, seq = v.core.before_ask("svc")
    with pytest.raises(CircuitRampingError) as refused:
        v.core.answered("svc", answer, generation, seq)
    assert (refused.value.ramp_percent, refused.value.local) == (30, False)
    assert refused.value.ramp_until is not None and refused.value.ramp_until.timestamp() * 1000 == T0 + 8_000
    v.core.before_ask("svc")  # nothing kept


def test_reads_the_new_event_fields() -> None:
    until = iso(T0)
    data: dict[str, Any] = {"circuit": "svc", "from": "closed", "to": "closed", "reason": "cool_down", "at": until}
    data.update({"scope": "caller", "callers": ["me"], "until": until, "retry_after_seconds": 60})
    event = parse_event("transition", json.dumps(data), "7")
    assert isinstance(event, TransitionEvent)
    assert (event.scope, event.callers, event.until, event.retry_after_seconds) == ("caller", ("me",), until, 60)
    data = {"circuit": "svc", "from": "half_open", "to": "closed", "reason": "probe_succeeded", "ramp_until": until}
    event = parse_event("transition", json.dumps(data), "8")
    assert isinstance(event, TransitionEvent) and event.ramp_until == until and event.scope is None


def test_client_and_async_client_raise_the_refusal_or_hand_it_to_the_fallback() -> None:
    now = datetime.now(timezone.utc).timestamp() * 1000
    cooling = Refused("closed", now + 60_000, 60_000, False, cool_down=(now + 60_000, "circuit"))
    ramping = Refused("closed", now + 1_000, 1_000, False, ramping=(20.0, None))
    client = FakeClient("http://127.0.0.1:1", close_timeout=5)
    try:
        client.fake.answers["svc"] = cooling
        client.fake.answers["ramp"] = ramping
        with pytest.raises(DependencyThrottledError):
            client.call("svc", lambda: "ran")
        assert client.call("svc", lambda: "ran", fallback=lambda e: type(e).__name__) == "DependencyThrottledError"
        assert client.call("ramp", lambda: "ran", fallback=lambda e: getattr(e, "ramp_percent", None)) == 20.0
    finally:
        client.close()

    async def main() -> tuple[object, object]:
        aclient = AsyncFakeClient("http://127.0.0.1:1", close_timeout=5)
        try:
            aclient.fake.answers["svc"] = cooling
            aclient.fake.answers["ramp"] = ramping

            async def ran() -> str:
                return "ran"

            with pytest.raises(DependencyThrottledError):
                await aclient.call("svc", ran)
            return (
                await aclient.call("svc", ran, fallback=lambda e: type(e).__name__),
                await aclient.call("ramp", ran, fallback=lambda e: getattr(e, "code", None)),
            )
        finally:
            await aclient.close()

    assert asyncio.run(main()) == ("DependencyThrottledError", "CIRCUIT_RAMPING")
