"""circuitlog's HTTP wire format, shared by the sync and the async transport (no I/O here)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal, Optional, Union
from urllib.parse import quote

from ._local import Json, parse_time_ms

STATES = ("closed", "open", "half_open")
#: The longest a refusal is believed: a ``Retry-After`` or ``open_until`` past it is cut to it, so a
#: hostile or broken answer cannot make a retry time no ``datetime`` can hold (an OverflowError in
#: the fallback path), and the circuit is asked again within a day at the latest.
MAX_RETRY_MS = 24 * 60 * 60 * 1000  # 1 day


@dataclass(frozen=True)
class Admitted:
    state: str
    circuit: Json | None


@dataclass(frozen=True)
class Refused:
    state: str
    #: Epoch ms: ``open_until`` when open, else now + ``Retry-After``.
    retry_at: float
    #: ``Retry-After`` in ms: unlike ``retry_at``, free of any clock difference between hosts.
    retry_after_ms: float
    forced: bool
    #: A soft-throttle refusal (``CIRCUIT_THROTTLED``): the probability it was drawn against.
    throttled: float | None = None
    #: ``"caller"``: this client's caller alone is refused (isolated); ``retry_at`` is its own ``open_until``.
    scope: Literal["caller"] | None = None
    #: ``DEPENDENCY_THROTTLED`` (issue 29): the cool-down in force, (until epoch ms, scope).
    cool_down: tuple[float, Literal["circuit", "caller"]] | None = None
    #: ``CIRCUIT_RAMPING``: (the share admitted, percent; the ramp's end, epoch ms, if named).
    ramping: tuple[float, float | None] | None = None


Answer = Union[Admitted, Refused]


@dataclass(frozen=True)
class TransitionEvent:
    """One ``event: transition`` of ``/events/stream``: what ``on_transition`` callbacks get."""

    id: str
    circuit: str
    from_state: str
    to_state: str
    reason: str
    #: ISO 8601, as the server sent it.
    at: str
    #: The callers the event names (``caller_isolated``, ``caller_released``, ``trip_withheld``, a quorum's opening).
    callers: tuple[str, ...] = ()
    #: ``caller_isolated``: when the caller's open time ends; ``cool_down``: when it ends (ISO 8601), else None.
    until: str | None = None
    #: ``cool_down``, ``cool_down_ended``: whose (``circuit``: everyone's; ``caller``: the callers named).
    scope: Literal["circuit", "caller"] | None = None
    #: ``cool_down_ended``, and ``half_open -> closed``, under a policy that ramps: when the ramp ends (ISO 8601).
    ramp_until: str | None = None
    #: ``cool_down``: the seconds the dependency asked for.
    retry_after_seconds: float | None = None
    #: A transition of the circuit's shadow policy (issue 31): the circuit itself did not change.
    shadow: bool = False


@dataclass(frozen=True)
class ResetEvent:
    """``event: reset``: the server cannot replay from our ``Last-Event-ID``; resume at ``newest_id``."""

    reason: str
    newest_id: str | None


class TransportError(Exception):
    """``unreachable``: no answer or a 5xx (retry later). ``rejected``: a 4xx (retrying cannot help)."""

    def __init__(self, kind: str, message: str, status: int | None = None, problem: object = None):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.problem = problem


def circuit_path(name: str, suffix: str = "") -> str:
    return f"/circuits/{quote(name, safe='')}{suffix}"


def allowed_path(name: str, caller: str | None) -> str:
    """``GET /circuits/{name}/allowed``, naming the caller (percent-encoded as one query value) when given."""
    path = circuit_path(name, "/allowed")
    return path if caller is None else f"{path}?caller={quote(caller, safe='')}"


def parse_json(content: bytes) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return None


def _state(value: object, fallback: str) -> str:
    return value if isinstance(value, str) and value in STATES else fallback


def failure(status: int, body: object) -> TransportError:
    return TransportError("unreachable" if status >= 500 else "rejected", f"circuitlog answered {status}", status, body)


def allowed_answer(status: int, headers: Any, body: object) -> Answer:
    """The answer of ``GET /circuits/:name/allowed``; raises TransportError for anything else."""
    b = body if isinstance(body, dict) else {}
    if status == 200:
        circuit = b.get("circuit")
        return Admitted(_state(b.get("state"), "closed"), circuit if isinstance(circuit, dict) else None)
    code = b.get("code")
    if status == 503 and code == "CIRCUIT_THROTTLED":
        p = b.get("throttle_probability")
        probability = float(p) if isinstance(p, (int, float)) and not isinstance(p, bool) and 0 <= p < 1 else 0.0
        return Refused("closed", time.time() * 1000 + 1000, 1000, False, probability)
    if status == 503 and code in ("DEPENDENCY_THROTTLED", "CIRCUIT_RAMPING"):
        return _cool_or_ramp(code, headers, b)
    if status == 503 and code in ("CIRCUIT_OPEN", "CIRCUIT_FORCED_OPEN"):
        forced = code == "CIRCUIT_FORCED_OPEN"
        state = _state(b.get("state"), "open")
        try:
            after = float(headers.get("retry-after", "1"))
        except ValueError:
            after = 1.0
        now = time.time() * 1000
        after_ms = min((after if after >= 0 else 1.0) * 1000, MAX_RETRY_MS)  # NaN is not >= 0: 1 s
        until = parse_time_ms(b.get("open_until"))
        if until is not None:
            until = min(until, now + MAX_RETRY_MS)
        if b.get("scope") == "caller" and until is not None:
            # A caller's isolation has its own open_until, whatever the circuit's state.
            return Refused(state, until, after_ms, forced, scope="caller")
        retry_at = until if not forced and state == "open" and until is not None else now + after_ms
        return Refused(state, retry_at, after_ms, forced)
    raise failure(status, body)


def _cool_or_ramp(code: object, headers: Any, b: dict[str, Any]) -> Refused:
    """A ``dependency-throttled`` or ``circuit-ramping`` answer (issue 29)."""
    now = time.time() * 1000
    if code == "CIRCUIT_RAMPING":
        p = b.get("ramp_percent")
        percent = float(p) if isinstance(p, (int, float)) and not isinstance(p, bool) and 0 <= p <= 100 else 0.0
        until = parse_time_ms(b.get("ramp_until"))
        return Refused("closed", now + 1000, 1000, False, ramping=(percent, until))
    try:
        after = float(headers.get("retry-after", "1"))
    except ValueError:
        after = 1.0
    after_ms = min((after if after >= 0 else 1.0) * 1000, MAX_RETRY_MS)
    # Kept until cool_until, by this host's clock at most Retry-After from now (hosts' clocks differ).
    cool_until = min(parse_time_ms(b.get("cool_until")) or float("inf"), now + after_ms)
    scope: Literal["circuit", "caller"] = "caller" if b.get("scope") == "caller" else "circuit"
    return Refused(_state(b.get("state"), "closed"), cool_until, after_ms, False, cool_down=(cool_until, scope))


def is_problem(body: object) -> bool:
    return isinstance(body, dict) and isinstance(body.get("code"), str)


def parse_event(event: str, data: str, event_id: str | None) -> TransitionEvent | ResetEvent | None:
    try:
        d = json.loads(data)
    except ValueError:
        return None
    if not isinstance(d, dict):
        return None
    if event == "reset":
        newest = d.get("newest_id")
        return ResetEvent(str(d.get("reason", "")), None if newest is None else str(newest))
    if event != "transition" or event_id is None:
        return None
    if not isinstance(d.get("circuit"), str) or not isinstance(d.get("to"), str):
        return None
    callers = d.get("callers")
    until = d.get("until")
    scope = d.get("scope")
    ramp_until = d.get("ramp_until")
    retry_after = d.get("retry_after_seconds")
    return TransitionEvent(
        event_id,
        d["circuit"],
        _state(d.get("from"), "closed"),
        _state(d.get("to"), "closed"),
        str(d.get("reason", "")),
        str(d.get("at", "")),
        tuple(callers) if isinstance(callers, list) and all(isinstance(c, str) for c in callers) else (),
        until if isinstance(until, str) else None,
        scope if scope in ("circuit", "caller") else None,
        ramp_until if isinstance(ramp_until, str) else None,
        retry_after if isinstance(retry_after, (int, float)) and not isinstance(retry_after, bool) else None,
        d.get("shadow") is True,
    )


def rfc3339(epoch_s: float) -> str:
    """UTC, milliseconds, ``Z``: 2026-12-01T13:30:00.123Z."""
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# A queued outcome: (circuit, success or another kind's wire fields, duration in ms or None, epoch
# seconds when it happened). A plain success or failure goes as ``success``; another kind (issue 29)
# as ``kind`` with its detail and no ``success``.
Outcome = tuple[str, Union[bool, dict[str, object]], Optional[float], float]


def outcomes_body(batch: list[Outcome], with_at: bool = True, caller: str | None = None) -> bytes:
    """``POST /outcomes``'s body; each item names ``caller`` when given (the client's caller id)."""
    items = []
    for name, success, duration_ms, at in batch:
        item: dict[str, object] = {"circuit": name}
        if isinstance(success, bool):
            item["success"] = success
        else:
            item.update(success)
        if caller is not None:
            item["caller"] = caller
        if with_at:
            item["at"] = rfc3339(at)
        if duration_ms is not None:
            item["duration_ms"] = round(duration_ms, 3)
        items.append(item)
    return json.dumps({"outcomes": items}, separators=(",", ":")).encode()


def refused_circuits(error: TransportError) -> set[str] | None:
    """A 507 too-many-circuits: the circuits it refused (``refused_circuits``; empty if it names none); else None."""
    if error.status != 507:
        return None
    names = error.problem.get("refused_circuits") if isinstance(error.problem, dict) else None
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()


def only_at_refused(error: TransportError) -> bool:
    """A 422 whose every error is an item's ``at`` (this host's clock too far ahead of circuitlog's)."""
    p = error.problem
    errors = p.get("errors") if isinstance(p, dict) else None
    return (
        error.status == 422
        and isinstance(errors, list)
        and len(errors) > 0
        and all(isinstance(e, dict) and str(e.get("field", "")).endswith(".at") for e in errors)
    )
