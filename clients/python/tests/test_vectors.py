"""Every vector of clients/spec/state-machine.json through the local breaker's state machine (circuitlog._domain)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from circuitlog import _domain as d
from circuitlog._local import policy_from

SPEC = Path(__file__).resolve().parents[2] / "spec" / "state-machine.json"
ALL_VECTORS: list[dict[str, Any]] = json.loads(SPEC.read_text())["vectors"]
# The `ended_at` (stale outcome) vectors are the server's rule for outcomes delivered late; a
# local breaker records each outcome as its call ends, so it never meets one (clients/spec/README.md). The
# `quorum` vectors are the server's too: a local breaker sees one caller, itself.
VECTORS: list[dict[str, Any]] = [v for v in ALL_VECTORS if "ended_at" not in v["tags"] and "quorum" not in v["tags"]]


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


def apply(c: d.Circuit, event: dict[str, Any], now: float, vector: dict[str, Any]) -> d.Step:
    kind = event["type"]
    if kind == "admit":
        draw = event.get("draw")

        def random() -> float:
            assert draw is not None, f"{vector['id']}: an admission drew a random number, but its event gives no draw"
            return float(draw)

        return d.admit(c, now, vector["probe_lease_ms"], random)
    if kind == "outcome":
        return d.record_outcome(
            c,
            event["success"],
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
    for index, step in enumerate(vector["steps"]):
        now = step["at_ms"]
        result = apply(c, step["event"], now, vector)
        c = result.circuit
        got = observe(c, result, step["event"], now)
        expected = {k: v for k, v in step["expect"].items() if k in got}
        assert {k: got[k] for k in expected} == expected, f"{vector['id']} step {index}: {step['event']}"
