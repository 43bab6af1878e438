"""The in-process breakers used while circuitlog is unreachable.

The state machine of ``_domain`` (the server's, checked by the shared vectors), seeded with
each circuit's last known policy and state, and thrown away once the client is in touch
again: the server's state wins.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Literal

if TYPE_CHECKING:
    from typing_extensions import TypeGuard

from . import _domain as d

Json = dict[str, Any]
# The defaults of a policy's members are written once, in ``_domain``'s dataclasses.
_BACKOFF, _THROTTLE = d.BackoffPolicy(), d.ThrottlePolicy()


def _positive(value: object, fallback: float, integer: bool = True) -> Any:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    if ok and integer and not float(value).is_integer():  # type: ignore[arg-type]
        ok = False
    return value if ok else fallback


def _window_from(w: object) -> d.WindowPolicy | None:
    if not isinstance(w, dict) or w.get("type") not in ("count", "time") or not isinstance(w.get("size"), int):
        return None
    mc, slow = w.get("minimum_calls"), w.get("slow_call_duration_ms")
    return d.WindowPolicy(
        type=w["type"],
        size=w["size"],
        minimum_calls=mc if isinstance(mc, int) and not isinstance(mc, bool) else None,
        failure_rate_threshold=_positive(
            w.get("failure_rate_threshold"), d.WindowPolicy.failure_rate_threshold, integer=False
        ),
        slow_call_duration_ms=slow if isinstance(slow, (int, float)) and not isinstance(slow, bool) else None,
        slow_call_rate_threshold=_positive(
            w.get("slow_call_rate_threshold"), d.WindowPolicy.slow_call_rate_threshold, integer=False
        ),
    )


def _backoff_from(b: object, timeout_seconds: int) -> d.BackoffPolicy | None:
    if not isinstance(b, dict):
        return None
    return d.BackoffPolicy(
        multiplier=_positive(b.get("multiplier"), _BACKOFF.multiplier, integer=False),
        max_timeout_seconds=_positive(b.get("max_timeout_seconds"), max(_BACKOFF.max_timeout_seconds, timeout_seconds)),
    )


def throttle_from(t: object) -> d.ThrottlePolicy | None:
    """``throttle`` of a circuit's JSON: None when absent or not an object; a member out of range takes its default."""
    if not isinstance(t, dict):
        return None
    k, w = t.get("k"), t.get("window_seconds")
    return d.ThrottlePolicy(
        k=float(k) if isinstance(k, (int, float)) and not isinstance(k, bool) and 1 <= k <= 100 else _THROTTLE.k,
        window_seconds=w
        if isinstance(w, int) and not isinstance(w, bool) and 1 <= w <= 600
        else _THROTTLE.window_seconds,
    )


def policy_from(json: Json | None, defaults: d.Policy) -> d.Policy:
    """The domain policy from a circuit's JSON (docs/api.md), field by field, defaults where missing or malformed."""
    j = json or {}
    timeout = _positive(j.get("timeout_seconds"), defaults.timeout_seconds)
    forced = j.get("forced_state")
    return d.Policy(
        failure_threshold=_positive(j.get("failure_threshold"), defaults.failure_threshold),
        timeout_seconds=timeout,
        half_open_max_calls=_positive(j.get("half_open_max_calls"), defaults.half_open_max_calls),
        success_threshold=_positive(j.get("success_threshold"), defaults.success_threshold),
        window=defaults.window if "window" not in j else _window_from(j["window"]),
        backoff=defaults.backoff if "backoff" not in j else _backoff_from(j["backoff"], timeout),
        forced_state=forced if forced in ("open", "closed") else None,
        throttle=defaults.throttle if "throttle" not in j else throttle_from(j["throttle"]),
    )


def parse_time_ms(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000
    except ValueError:
        return None


class LocalBreakers:
    """One local circuit per name; not thread-safe on its own (the client holds its lock)."""

    def __init__(self, clock_ms: Callable[[], float], defaults: d.Policy, probe_lease_ms: float = 10_000):
        self._clock = clock_ms
        self._defaults = defaults
        self._lease_ms = probe_lease_ms  # 10 s: a local probe's lease, as the server's default
        self._circuits: dict[str, d.Circuit] = {}

    def admit(self, name: str, state: str | None, json: Json | None) -> d.Verdict:
        now = self._clock()
        step = d.admit(self._get(name, state, json, now), now, self._lease_ms)
        self._circuits[name] = step.circuit
        return step.verdict

    def record(self, name: str, success: bool, duration_ms: float | None, state: str | None, json: Json | None) -> None:
        """An outcome arriving while the local circuit is open changes no state (circuitlog's batch rule)."""
        now = self._clock()
        c = self._get(name, state, json, now)
        self._circuits[name] = d.record_outcome(c, success, now, duration_ms=duration_ms, late="count_only").circuit

    def state(self, name: str) -> str | None:
        c = self._circuits.get(name)
        return None if c is None else c.state

    def clear(self) -> None:
        self._circuits.clear()

    def _get(self, name: str, state: str | None, json: Json | None, now: float) -> d.Circuit:
        existing = self._circuits.get(name)
        if existing is not None:
            return existing
        c = d.Circuit(policy=policy_from(json, self._defaults), updated_at=now)
        if state == "half_open":
            return d.Circuit(policy=c.policy, state="half_open", half_open_at=now, updated_at=now)
        if state != "open":
            return c
        # Last known open: stays open locally until its known open_until (else its timeout from now).
        until = parse_time_ms((json or {}).get("open_until"))
        return d.Circuit(
            policy=c.policy,
            state="open",
            open_until=until if until is not None else now + c.policy.timeout_seconds * 1000,
            updated_at=now,
        )


# -- issue 29: the dependency's cool-down and the shared ramp, as a circuit's JSON shows them --------


def cooling_in(json: Json, caller: str | None) -> tuple[float, Literal["circuit", "caller"]]:
    """(until epoch ms, 0 for none; whose): the circuit's ``cool_until`` or this caller's entry of
    ``cooling_callers``, whichever ends later."""
    circuit_wide = parse_time_ms(json.get("cool_until"))
    mine: float | None = None
    listed = json.get("cooling_callers")
    if caller is not None and isinstance(listed, list):
        for item in listed:
            if isinstance(item, dict) and item.get("caller") == caller:
                mine = parse_time_ms(item.get("cool_until"))
    if mine is not None and (circuit_wide is None or mine > circuit_wide):
        return mine, "caller"
    return circuit_wide or 0.0, "circuit"


def ramp_from(r: object) -> tuple[float, float] | None:
    """A circuit JSON's ``ramp`` (``{seconds, start_percent}``) as (seconds, start percent), read
    leniently: anything unusable is no ramp."""
    if not isinstance(r, dict):
        return None
    seconds, start = r.get("seconds"), r.get("start_percent", 10)
    if not (_number(seconds) and _number(start)) or not (1 <= seconds <= 3600) or not (1 <= start <= 100):
        return None
    return float(seconds), float(start)


def _number(v: object) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def ramp_share(
    json: Json | None, ramp_until: float | None, cool_until: float, now: float
) -> tuple[float, float | None] | None:
    """The ramp's share now (percent, its end) on a circuit whose policy ramps; None at 100 %. A cool-down
    ends into the ramp: known from ``cool_until`` before the event that names the ramp's end arrives."""
    ramp = ramp_from((json or {}).get("ramp"))
    if ramp is None:
        return None
    seconds, start = ramp
    until = ramp_until
    if 0 < cool_until <= now:
        until = max(until or 0.0, cool_until + seconds * 1000)
    percent = d.ramp_percent(until, seconds, start, now)
    return None if percent >= 100 else (percent, until)
