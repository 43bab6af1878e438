"""Every vector of clients/spec/state-machine.json through the local breaker's state machine (circuitlog._domain), each
outcome of a kind counted as the client counts it (``counts_locally``); the cool-down and ramp vectors through the
client's view (``Core``), told every transition as ``/events/stream`` would."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from circuitlog import CircuitRampingError, DependencyThrottledError, TransitionEvent
from circuitlog import _domain as d
from circuitlog._classify import Classification, counts_locally
from circuitlog._core import Core, Options
from circuitlog._local import policy_from
from circuitlog._wire import Admitted

SPEC = Path(__file__).resolve().parents[2] / "spec" / "state-machine.json"
ALL_VECTORS: list[dict[str, Any]] = json.loads(SPEC.read_text())["vectors"]
# The `ended_at` (stale outcome) vectors are the server's rule for outcomes delivered late; a
# local breaker records each outcome as its call ends, so it never meets one (clients/spec/README.md). The
# `quorum` vectors are the server's too: a local breaker sees one caller, itself. The `cool_down` and `ramp` vectors
# are the server's state, which the client follows in its view (VIEW_VECTORS).
SERVER_ONLY = ("ended_at", "quorum", "cool_down", "ramp")
VECTORS: list[dict[str, Any]] = [v for v in ALL_VECTORS if not any(tag in v["tags"] for tag in SERVER_ONLY)]
VIEW_VECTORS: list[dict[str, Any]] = [v for v in ALL_VECTORS if "cool_down" in v["tags"] or "ramp" in v["tags"]]


def policy(wire: dict[str, Any]) -> d.Policy:
    p = policy_from(wire, d.Policy())
    assert (p.window is None) == (wire["window"] is None)
    return p


def observe(c: d.Circuit, step: d.Step, event: dict[str, Any], now: float) -> dict[str, Any]:
    w = c.policy.window
    leases = d.active_leases(c, now) if c.state == "half_open" else ()
    admitted = event["type"] == "admit"
    verdict = step.verdict if admitted else d.is_call_allowed(d.refresh(c, now).circuit, now)
    calls, failures, slow = d.window_figures(w, c.window_state, now) if w is not None else (0, 0, 0)
    got: dict[str, Any] = {}
    t = c.policy.throttle
    if t is not None:
        requests, accepts = d.throttle_counts(t, c.throttle_state, now)
        unforced_closed = c.state == "closed" and c.policy.forced_state is None
        probability = d.throttle_probability(t, c.throttle_state, now) if unforced_closed else 0
        got["throttle"] = {"requests": requests, "accepts": accepts, "probability": probability}
    return got | {
        "state": c.state,
        "failure_count": c.failure_count,
        "probe_successes": c.probe_successes,
        "probes_in_flight": len(leases),
        "reopen_count": c.reopen_count,
        "timeout_seconds": c.policy.timeout_seconds,
        "effective_timeout_seconds": d.effective_timeout_seconds(c),
        "open_until_ms": c.open_until,
        "window": None if w is None else {"calls": calls, "failures": failures, "slow_calls": slow},
        "transitions": [
            {"from": t.from_state, "to": t.to_state, "reason": t.reason, "at_ms": t.at} for t in step.transitions
        ],
        "verdict": {"allowed": True}
        if verdict.allowed
        else {"allowed": False, "retry_at_ms": verdict.retry_at, "forced": verdict.forced}
        | ({} if verdict.throttled is None else {"throttled": True}),
    }


def apply(c: d.Circuit, event: dict[str, Any], now: float, vector: dict[str, Any], json: dict[str, Any]) -> d.Step:
    kind = event["type"]
    if kind == "admit":
        draw = event.get("draw")

        def random() -> float:
            assert draw is not None, f"{vector['id']}: an admission drew a random number, but its event gives no draw"
            return float(draw)

        return d.admit(c, now, vector["probe_lease_ms"], random)
    if kind == "outcome":
        # As the client records a call: what its kind counts as for this client (a success, a failure or nothing).
        outcome = Classification(
            event.get("kind", "success" if event.get("success") else "failure"),
            retry_after_seconds=event.get("retry_after_seconds"),
            deadline_ms=event.get("deadline_ms"),
        )
        success = counts_locally(outcome, event.get("duration_ms"), json)
        if success is None:
            return d.Step(c, ())
        return d.record_outcome(
            c,
            success,
            now,
            duration_ms=event.get("duration_ms"),
            timeout_seconds=event.get("timeout_seconds"),
            late=vector["outcome_rule"],
        )
    if kind == "reset":
        return d.reset(c, now)
    if kind == "configure":
        return d.configure(c, policy(event["policy"]), now)
    raise AssertionError(f"unknown event {kind}")


def test_the_spec_has_at_least_150_vectors() -> None:
    assert len(ALL_VECTORS) >= 150


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_vector(vector: dict[str, Any]) -> None:
    c = d.Circuit(policy=policy(vector["policy"]), updated_at=vector["created_at_ms"])
    json = vector["policy"]
    for index, step in enumerate(vector["steps"]):
        now = step["at_ms"]
        if step["event"]["type"] == "configure":
            json = step["event"]["policy"]
        result = apply(c, step["event"], now, vector, json)
        c = result.circuit
        got = observe(c, result, step["event"], now)
        expected = {k: v for k, v in step["expect"].items() if k in got}
        assert {k: got[k] for k in expected} == expected, f"{vector['id']} step {index}: {step['event']}"


def test_local_breakers_meet_every_outcome_kind() -> None:
    kinds = {s["event"].get("kind") for v in VECTORS for s in v["steps"] if s["event"]["type"] == "outcome"}
    assert kinds - {None} == {"success", "failure", "rejected", "throttled", "caller_deadline", "cancelled"}


# -- the cool-down and ramp vectors through the client's view --------------------------------------------------------

ANONYMOUS = "spec-anonymous-client"  # the caller of a view for an admission that names none


def iso(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def stream_event(t: dict[str, Any], event_id: int) -> TransitionEvent:
    """A vector's transition as ``/events/stream`` sends it (times in ISO 8601), as the stream parser hands it on."""
    return TransitionEvent(
        str(event_id),
        "spec",
        t["from"],
        t["to"],
        t["reason"],
        iso(t["at_ms"]),
        callers=tuple(t.get("callers", ())),
        until=iso(t["until_ms"]) if "until_ms" in t else None,
        scope=t.get("scope"),
        ramp_until=iso(t["ramp_until_ms"]) if "ramp_until_ms" in t else None,
        retry_after_seconds=t.get("retry_after_seconds"),
    )


def circuit_json(policy: dict[str, Any], expect: dict[str, Any] | None) -> dict[str, Any]:
    """The circuit's JSON as ``GET /circuits/{name}`` shows it after a step (``None``: just created)."""
    e = expect or {"state": "closed", "cool_until_ms": None, "cooling_callers": [], "ramp_until_ms": None}
    return {
        **policy,
        "state": e["state"],
        "cool_until": None if e["cool_until_ms"] is None else iso(e["cool_until_ms"]),
        "cooling_callers": [
            {"caller": c["caller"], "cool_until": iso(c["cool_until_ms"])} for c in e["cooling_callers"]
        ],
        "ramp_until": None if e["ramp_until_ms"] is None else iso(e["ramp_until_ms"]),
    }


def wanted(verdict: dict[str, Any]) -> dict[str, Any]:
    """The decision a view must make for ``verdict`` (a closed circuit refuses only by a cool-down or the ramp)."""
    if verdict["allowed"]:
        return {"allowed": True}
    if "cool_down" in verdict:
        return {"allowed": False, "cool_down": verdict["cool_down"], "retry_at_ms": verdict["retry_at_ms"]}
    assert "ramp_percent" in verdict, f"a closed circuit refused without a cool-down or a ramp: {verdict}"
    return {"allowed": False, "ramp_percent": verdict["ramp_percent"]}


def decided(refusal: Exception | None) -> dict[str, Any]:
    if refusal is None:
        return {"allowed": True}
    if isinstance(refusal, DependencyThrottledError):
        until = round(refusal.cool_until.timestamp() * 1000)
        return {"allowed": False, "cool_down": refusal.scope, "retry_at_ms": until}
    if isinstance(refusal, CircuitRampingError):
        return {"allowed": False, "ramp_percent": refusal.ramp_percent}
    raise refusal


def run_on_view(vector: dict[str, Any]) -> list[tuple[int, dict[str, Any] | None]]:
    """(step, the view's decision, or None where it asks circuitlog) for every admission of the vector: one view per
    caller the vector names, each told every step's transitions after the step (the stream lags the change), and
    the circuit's JSON after every ``configure`` (as the client's policy refresh would fetch it)."""
    now = [float(vector["created_at_ms"])]
    random: list[float | None] = [None]

    def draw() -> float:
        value = random[0]
        assert value is not None, f"{vector['id']}: the view drew a random number, but the event gives none"
        return value

    callers = {ANONYMOUS} | {s["event"]["caller"] for s in vector["steps"] if "caller" in s["event"]}
    cores: dict[str, Core] = {}
    for caller in callers:
        core = Core(Options(url="http://127.0.0.1:1", caller=caller), clock_ms=lambda: now[0])
        core.random = draw
        with core.lock:
            core.stream_opened()
            generation, seq = core.before_ask("spec")
            core.answered("spec", Admitted("closed", circuit_json(vector["policy"], None)), generation, seq)
            core.entries["spec"].policy_due_at = float("inf")
        cores[caller] = core
    decisions: list[tuple[int, dict[str, Any] | None]] = []
    ids = 0
    for index, step in enumerate(vector["steps"]):
        event = step["event"]
        now[0] = float(step["at_ms"])
        if event["type"] == "admit":
            random[0] = event.get("random")
            core = cores[event.get("caller", ANONYMOUS)]
            with core.lock:
                local, refusal = core.begin_call("spec")
                core.calls_running -= 1
            decisions.append((index, decided(refusal) if local else None))
        for core in cores.values():
            with core.lock:
                if event["type"] == "configure":
                    core.policy_fetched("spec", circuit_json(event["policy"], step["expect"]))
                    core.entries["spec"].policy_due_at = float("inf")
                for t in step["expect"]["transitions"]:
                    ids += 1
                    core.apply(stream_event(t, ids))
    return decisions


@pytest.mark.parametrize("vector", VIEW_VECTORS, ids=[v["id"] for v in VIEW_VECTORS])
def test_view_vector(vector: dict[str, Any]) -> None:
    for index, decision in run_on_view(vector):
        if decision is not None:
            assert decision == wanted(vector["steps"][index]["expect"]["verdict"]), f"{vector['id']} step {index}"


def test_the_view_decides_every_admission_on_a_closed_unforced_circuit() -> None:
    made = 0
    for vector in VIEW_VECTORS:
        forced: list[bool] = []
        force = vector["policy"]["forced_state"] is not None
        for step in vector["steps"]:
            if step["event"]["type"] == "configure":
                force = step["event"]["policy"]["forced_state"] is not None
            forced.append(force)
        for index, decision in run_on_view(vector):
            closed = vector["steps"][index]["expect"]["state"] == "closed"
            assert decision is not None or not closed or forced[index], f"{vector['id']} step {index}: asked circuitlog"
            made += decision is not None
    assert made >= 40
