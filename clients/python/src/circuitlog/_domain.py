"""The breaker state machine, as pure functions over immutable data.

A port of circuitlog's ``src/domain/circuit.ts``, ``policy.ts`` and ``window.ts``: the local
breaker the client falls back on while circuitlog is unreachable. ``clients/spec/state-machine.json``
holds vectors that both the server's domain and this module must pass (tests/test_vectors.py),
so the two cannot drift apart. Times are epoch milliseconds; nothing here reads a clock.
"""

from __future__ import annotations

import calendar
import email.utils
import math
import random as _random
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Literal, Optional, Union

State = Literal["closed", "open", "half_open"]
Forced = Optional[Literal["open", "closed"]]


@dataclass(frozen=True)
class WindowPolicy:
    type: Literal["count", "time"]
    size: int
    minimum_calls: int | None = None
    failure_rate_threshold: float = 50
    slow_call_duration_ms: float | None = None
    slow_call_rate_threshold: float = 100


@dataclass(frozen=True)
class BackoffPolicy:
    multiplier: float = 2
    max_timeout_seconds: int = 300


@dataclass(frozen=True)
class ThrottlePolicy:
    """Soft throttling (the SRE book's client-side throttling): k and seconds of history."""

    k: float = 2
    window_seconds: int = 60


@dataclass(frozen=True)
class Policy:
    failure_threshold: int = 5
    timeout_seconds: int = 30
    half_open_max_calls: int = 1
    success_threshold: int = 1
    window: WindowPolicy | None = None
    backoff: BackoffPolicy | None = None
    forced_state: Forced = None
    throttle: ThrottlePolicy | None = None


@dataclass(frozen=True)
class CountWindow:
    outcomes: str = ""  # one character per outcome: '0' + 1 (failure) + 2 (slow)
    failures: int = 0
    slow_calls: int = 0


Bucket = tuple[int, int, int, int]  # (epoch second, calls, failures, slow calls)


@dataclass(frozen=True)
class TimeWindow:
    buckets: tuple[Bucket, ...] = ()


WindowState = Union[CountWindow, TimeWindow]


@dataclass(frozen=True)
class Circuit:
    policy: Policy
    state: State = "closed"
    failure_count: int = 0
    probe_leases: tuple[float, ...] = ()
    probe_successes: int = 0
    open_until: float | None = None
    open_timeout_seconds: int | None = None
    reopen_count: int = 0
    window_state: WindowState | None = None
    throttle_state: TimeWindow | None = None  # requests (calls) and non-accepts (failures) while closed
    half_open_at: float | None = None
    last_failure_at: float | None = None
    updated_at: float = 0


@dataclass(frozen=True)
class Transition:
    from_state: State
    to_state: State
    reason: str
    at: float


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_at: float = 0
    forced: bool = False
    throttled: float | None = None  # a soft-throttle refusal: the probability it was drawn against


ALLOWED = Verdict(True)


@dataclass(frozen=True)
class Step:
    circuit: Circuit
    transitions: tuple[Transition, ...] = ()
    verdict: Verdict = field(default=ALLOWED)


LateRule = Literal["circuitlog", "count_only"]


def minimum_calls(w: WindowPolicy) -> int:
    if w.minimum_calls is not None:
        return w.minimum_calls
    return w.size if w.type == "count" else 10


def next_open_timeout_seconds(p: Policy, previous_seconds: int) -> int:
    if p.backoff is None:
        return p.timeout_seconds
    grown = math.ceil(previous_seconds * p.backoff.multiplier)
    return min(grown, max(p.backoff.max_timeout_seconds, p.timeout_seconds))


def effective_timeout_seconds(c: Circuit) -> int:
    return c.open_timeout_seconds if c.open_timeout_seconds is not None else c.policy.timeout_seconds


def is_slow(w: WindowPolicy, duration_ms: float | None) -> bool:
    return w.slow_call_duration_ms is not None and duration_ms is not None and duration_ms >= w.slow_call_duration_ms


def _first_live_second(size: int, now: float) -> int:
    return math.floor(now / 1000) - size + 1


def add_outcome(w: WindowPolicy, state: WindowState | None, failure: bool, slow: bool, now: float) -> WindowState:
    if w.type == "count":
        s = state if isinstance(state, CountWindow) else CountWindow()
        outcomes, failures, slows = s.outcomes, s.failures, s.slow_calls
        if len(outcomes) >= w.size:
            drop = outcomes[: len(outcomes) - w.size + 1]
            for ch in drop:
                code = ord(ch) - 48
                failures -= code & 1
                slows -= (code & 2) >> 1
            outcomes = outcomes[len(drop) :]
        code = (1 if failure else 0) + (2 if slow else 0)
        return CountWindow(outcomes + chr(48 + code), failures + int(failure), slows + int(slow))
    start = _first_live_second(w.size, now)
    buckets = [b for b in (state.buckets if isinstance(state, TimeWindow) else ()) if b[0] >= start]
    second = math.floor(now / 1000)
    f, sl = int(failure), int(slow)
    if buckets and buckets[-1][0] >= second:  # a clock stepping back lands in the newest bucket
        last = buckets[-1]
        buckets[-1] = (last[0], last[1] + 1, last[2] + f, last[3] + sl)
    else:
        buckets.append((second, 1, f, sl))
    return TimeWindow(tuple(buckets))


def window_figures(w: WindowPolicy, state: WindowState | None, now: float) -> tuple[int, int, int]:
    """(calls, failures, slow calls) live in the window at ``now``."""
    if w.type == "count" and isinstance(state, CountWindow):
        return len(state.outcomes), state.failures, state.slow_calls
    if w.type == "time" and isinstance(state, TimeWindow):
        start = _first_live_second(w.size, now)
        live = [b for b in state.buckets if b[0] >= start]
        return sum(b[1] for b in live), sum(b[2] for b in live), sum(b[3] for b in live)
    return 0, 0, 0


def window_trip(w: WindowPolicy, calls: int, failures: int, slow_calls: int) -> str | None:
    if calls == 0 or calls < minimum_calls(w):
        return None
    if failures * 100 >= w.failure_rate_threshold * calls:
        return "failure_rate_exceeded"
    if w.slow_call_duration_ms is not None and slow_calls * 100 >= w.slow_call_rate_threshold * calls:
        return "slow_call_rate_exceeded"
    return None


THROTTLE_RETRY_AFTER_MS = 1000  # a throttled call may try again after 1 s


def _throttle_window(t: ThrottlePolicy) -> WindowPolicy:
    return WindowPolicy("time", t.window_seconds)


def throttle_counts(t: ThrottlePolicy, state: TimeWindow | None, now: float) -> tuple[int, int]:
    """(requests, accepts) of the throttle's window at ``now``."""
    calls, failures, _ = window_figures(_throttle_window(t), state, now)
    return calls, calls - failures


def throttle_probability(t: ThrottlePolicy, state: TimeWindow | None, now: float) -> float:
    """max(0, (requests - k * accepts) / (requests + 1)) over the window."""
    requests, accepts = throttle_counts(t, state, now)
    return max(0.0, (requests - t.k * accepts) / (requests + 1))


def count_request(t: ThrottlePolicy, state: TimeWindow | None, accepted: bool, now: float) -> TimeWindow:
    counted = add_outcome(_throttle_window(t), state, not accepted, False, now)
    assert isinstance(counted, TimeWindow)
    return counted


def refresh(c: Circuit, now: float) -> Step:
    """Open -> half-open once due, stamped at ``open_until``; an ``open_until`` beyond now + open time is pulled in."""
    if c.state != "open" or c.open_until is None:
        return Step(c)
    if now < c.open_until:
        latest = now + effective_timeout_seconds(c) * 1000
        return Step(c) if c.open_until <= latest else Step(replace(c, open_until=latest, updated_at=now))
    at = c.open_until
    opened = replace(
        c, state="half_open", half_open_at=at, probe_leases=(), probe_successes=0, window_state=None, updated_at=now
    )
    return Step(opened, (Transition("open", "half_open", "open_timeout_elapsed", at),))


def active_leases(c: Circuit, now: float) -> tuple[float, ...]:
    return tuple(t for t in c.probe_leases if t > now)


def is_call_allowed(c: Circuit, now: float) -> Verdict:
    forced = c.policy.forced_state
    if forced == "closed":
        return ALLOWED
    if forced == "open":
        return Verdict(False, now + effective_timeout_seconds(c) * 1000, forced=True)
    if c.state == "closed":
        return ALLOWED
    if c.state == "open":
        return Verdict(False, c.open_until if c.open_until is not None else now)
    leases = active_leases(c, now)
    if len(leases) < c.policy.half_open_max_calls:
        return ALLOWED
    return Verdict(False, min(leases))


def admit(c: Circuit, now: float, probe_lease_ms: float, random: Callable[[], float] = _random.random) -> Step:
    """Refresh, then decide; an admitted half-open call holds a probe slot until its outcome or lease end.

    A closed, unforced circuit with a throttle refuses with the throttle's probability, drawing
    from ``random`` only when that is above 0; the refusal counts as a request not accepted.
    """
    forced = c.policy.forced_state
    if (c.state == "closed") if forced is None else (forced == "closed"):
        t = c.policy.throttle
        if forced is not None or t is None:
            return Step(c)
        p = 0.0 if c.throttle_state is None else throttle_probability(t, c.throttle_state, now)
        if p <= 0 or random() >= p:
            return Step(c)
        counted = replace(c, throttle_state=count_request(t, c.throttle_state, False, now), updated_at=now)
        return Step(counted, (), Verdict(False, now + THROTTLE_RETRY_AFTER_MS, throttled=p))
    refreshed = refresh(c, now)
    r = refreshed.circuit
    verdict = is_call_allowed(r, now)
    if not verdict.allowed or r.state != "half_open" or r.policy.forced_state is not None:
        return Step(r, refreshed.transitions, verdict)
    leases = (*active_leases(r, now), now + probe_lease_ms)
    return Step(replace(r, probe_leases=leases, updated_at=now), refreshed.transitions, verdict)


def record_outcome(
    c: Circuit,
    success: bool,
    now: float,
    duration_ms: float | None = None,
    timeout_seconds: int | None = None,
    late: LateRule = "circuitlog",
) -> Step:
    first = refresh(c, now)
    r = first.circuit
    if r.state == "closed":
        second = _while_closed(r, success, duration_ms, timeout_seconds, now)
    elif r.state == "half_open":
        second = _while_half_open(r, success, timeout_seconds, now)
    else:
        second = _while_open(r, success, duration_ms, timeout_seconds, late, now)
    return Step(second.circuit, first.transitions + second.transitions)


def _counted(c: Circuit, success: bool, duration_ms: float | None, now: float, failure_count: int) -> Circuit:
    w = c.policy.window
    window_state = (
        c.window_state if w is None else add_outcome(w, c.window_state, not success, is_slow(w, duration_ms), now)
    )
    t = c.policy.throttle
    throttle_state = (
        count_request(t, c.throttle_state, success, now) if t is not None and c.state == "closed" else c.throttle_state
    )
    return replace(
        c,
        failure_count=failure_count,
        window_state=window_state,
        throttle_state=throttle_state,
        last_failure_at=c.last_failure_at if success else now,
        updated_at=now,
    )


def _while_closed(
    c: Circuit, success: bool, duration_ms: float | None, timeout_seconds: int | None, now: float
) -> Step:
    w = c.policy.window
    if success and c.failure_count == 0 and w is None and c.policy.throttle is None:
        return Step(c)
    n = _counted(c, success, duration_ms, now, 0 if success else c.failure_count + 1)
    # circuitlog's per-failure open time applies to the opening this failure causes, and only to it.
    if not success and n.failure_count >= c.policy.failure_threshold:
        return _open(n, now, "failure_threshold_reached", timeout_seconds)
    if w is not None:
        trip = window_trip(w, *window_figures(w, n.window_state, now))
        if trip is not None:
            return _open(n, now, trip, timeout_seconds)
    return Step(n)


def _while_half_open(c: Circuit, success: bool, timeout_seconds: int | None, now: float) -> Step:
    if not success:
        seconds = (
            timeout_seconds
            if timeout_seconds is not None
            else next_open_timeout_seconds(c.policy, effective_timeout_seconds(c))
        )
        reopened = replace(c, failure_count=c.failure_count + 1, last_failure_at=now, reopen_count=c.reopen_count + 1)
        return _open(reopened, now, "probe_failed", seconds)
    successes = c.probe_successes + 1
    if successes >= c.policy.success_threshold:
        return _close(c, now, "probe_succeeded")
    # This probe has reported: its slot (the oldest lease) is free for the next one.
    return Step(replace(c, probe_successes=successes, probe_leases=active_leases(c, now)[1:], updated_at=now))


def _while_open(
    c: Circuit, success: bool, duration_ms: float | None, timeout_seconds: int | None, late: LateRule, now: float
) -> Step:
    if late == "count_only":
        count = c.failure_count if success else c.failure_count + 1
        return Step(_counted(c, success, duration_ms, now, count))
    if success:
        return _close(c, now, "success_recorded")
    seconds = timeout_seconds if timeout_seconds is not None else effective_timeout_seconds(c)
    return Step(
        replace(
            c,
            failure_count=c.failure_count + 1,
            open_timeout_seconds=seconds,
            open_until=now + seconds * 1000,
            last_failure_at=now,
            updated_at=now,
        )
    )


def reset(c: Circuit, now: float) -> Step:
    if (
        c.state == "closed"
        and c.failure_count == 0
        and not c.probe_leases
        and c.window_state is None
        and c.throttle_state is None
    ):
        return Step(c)
    return _close(c, now, "manual_reset")


def configure(c: Circuit, policy: Policy, now: float) -> Step:
    """A new policy from the next call on; a changed window starts empty; a force change is an event.

    The throttle's counts are kept while it stays on over the same window_seconds (a new k applies to them).
    """
    if policy == c.policy:
        return Step(c)
    old, new = c.policy.throttle, policy.throttle
    same_throttle_window = old is not None and new is not None and old.window_seconds == new.window_seconds
    n = replace(
        c,
        policy=policy,
        window_state=c.window_state if c.policy.window == policy.window else None,
        throttle_state=c.throttle_state if same_throttle_window else None,
        updated_at=now,
    )
    if c.policy.forced_state == policy.forced_state:
        return Step(n)
    reason = {"open": "forced_open", "closed": "forced_closed"}.get(policy.forced_state or "", "force_cleared")
    return Step(n, (Transition(c.state, n.state, reason, now),))


def _open(c: Circuit, now: float, reason: str, seconds: int | None = None) -> Step:
    secs = c.policy.timeout_seconds if seconds is None else seconds
    opened = replace(
        c,
        state="open",
        open_timeout_seconds=secs,
        open_until=now + secs * 1000,
        reopen_count=c.reopen_count if c.state == "half_open" else 0,
        probe_leases=(),
        probe_successes=0,
        window_state=None,
        throttle_state=None,
        half_open_at=c.half_open_at if c.state == "half_open" else None,
        updated_at=now,
    )
    return Step(opened, (Transition(c.state, "open", reason, now),))


def _close(c: Circuit, now: float, reason: str) -> Step:
    closed = replace(
        c,
        state="closed",
        failure_count=0,
        open_until=None,
        open_timeout_seconds=None,
        reopen_count=0,
        half_open_at=None,
        probe_leases=(),
        probe_successes=0,
        window_state=None,
        throttle_state=None,
        updated_at=now,
    )
    if c.state == "closed":
        return Step(closed)
    return Step(closed, (Transition(c.state, "closed", reason, now),))


# -- outcome kinds (mirrors src/domain/outcome-kind.ts and outcome-rules.ts, issue 29) -------------

#: The kinds an outcome may carry; ``success: true|false`` alone means ``success`` / ``failure``.
OUTCOME_KINDS = ("success", "failure", "rejected", "throttled", "caller_deadline", "cancelled")
OutcomeKind = Literal["success", "failure", "rejected", "throttled", "caller_deadline", "cancelled"]


def is_outcome_kind(value: object) -> bool:
    return isinstance(value, str) and value in OUTCOME_KINDS


def kind_of_status(status: int, retry_after: str | None, now: float) -> tuple[OutcomeKind, int | None]:
    """The kind of a dependency's HTTP answer and, when throttled, the seconds it asked for (None: none named).

    429, and 503 with a ``Retry-After``, are ``throttled``; other 5xx except 501 and 505 are
    ``failure`` (those two are ``rejected``); 408 is a ``failure``; other 4xx ``rejected``; else ``success``.
    """
    if status == 429 or (status == 503 and retry_after is not None and retry_after != ""):
        return "throttled", retry_after_seconds(retry_after, now)
    if status in (501, 505):
        return "rejected", None
    if status >= 500 or status == 408:
        return "failure", None
    if status >= 400:
        return "rejected", None
    return "success", None


_DELAY_SECONDS = re.compile(r"^\d{1,10}$")
_HTTP_DATE = re.compile(r"^[A-Za-z]{3,9}, ")


def retry_after_seconds(value: str | None, now: float) -> int | None:
    """A ``Retry-After`` in seconds from ``now`` (epoch ms), RFC 9110 section 10.2.3: delay-seconds or an
    HTTP-date, rounded up, never below 0; None when absent or neither form."""
    if value is None:
        return None
    v = value.strip()
    if _DELAY_SECONDS.match(v):
        return int(v)
    if not _HTTP_DATE.match(v):
        return None
    t = email.utils.parsedate_tz(v)
    if t is None or not 1 <= t[2] <= 31:
        return None
    # As JavaScript's Date.parse reads it (the TypeScript side's rule): a day past the month's end
    # rolls over (31 Feb is 3 Mar), which calendar.timegm does too. An HTTP-date is GMT (RFC 9110
    # section 5.6.7): no zone is +0000.
    at_s = calendar.timegm((t[0], t[1], t[2], t[3], t[4], t[5])) - (t[9] or 0)
    return max(0, math.ceil((at_s * 1000 - now) / 1000))


def ramp_percent(ramp_until: float | None, seconds: float, start_percent: float, now: float) -> float:
    """The percent of calls a ramping circuit admits at ``now``: linear from ``start_percent`` to 100 at
    ``ramp_until`` (epoch ms) over ``seconds``; 100 when not ramping."""
    if ramp_until is None or now >= ramp_until or seconds <= 0:
        return 100.0
    began = ramp_until - seconds * 1000
    if now <= began:
        return float(start_percent)
    return start_percent + ((100 - start_percent) * (now - began)) / (seconds * 1000)


def ramp_admits(percent: float, random: float) -> bool:
    """One call admitted while ramping: a draw in [0, 1) under the share."""
    return percent >= 100 or random * 100 < percent
