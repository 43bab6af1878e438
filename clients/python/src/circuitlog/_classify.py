"""What a call's outcome was (issue 29, docs/client.md "Why a call failed"): the caller's own
``classify``, else ``is_failure``, else what the client sees itself: an ``httpx.Response`` or an
``httpx.HTTPStatusError`` by ``kind_of_status`` (the table the server and the proxy use), the
client's ``deadline`` (``caller_deadline``), an asyncio cancellation (``cancelled``), a raised
error (``failure``) or a result (``success``). No I/O here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Union

import httpx

from . import _domain as d
from ._errors import CallDeadlineError, CallTimeoutError


@dataclass(frozen=True)
class Classification:
    """An outcome's kind and its detail: ``retry_after_seconds`` only with ``throttled``, ``deadline_ms``
    only with ``caller_deadline``. What ``classify`` may return (or a bare kind string, or None)."""

    kind: d.OutcomeKind
    #: Seconds the dependency asked for, rounded up to a whole second.
    retry_after_seconds: float | None = None
    #: The caller's deadline in ms, rounded to a whole ms (at least 1).
    deadline_ms: float | None = None

    def __post_init__(self) -> None:
        if not d.is_outcome_kind(self.kind):
            raise TypeError(f"unknown outcome kind: {self.kind!r}")
        r, m = self.retry_after_seconds, self.deadline_ms
        if r is not None:
            if self.kind != "throttled" or not _number(r) or r < 0:
                raise TypeError("retry_after_seconds must be a number >= 0, and only with kind 'throttled'")
            object.__setattr__(self, "retry_after_seconds", math.ceil(r))
        if m is not None:
            if self.kind != "caller_deadline" or not _number(m) or m <= 0:
                raise TypeError("deadline_ms must be a number > 0, and only with kind 'caller_deadline'")
            object.__setattr__(self, "deadline_ms", max(1, round(m)))

    def wire(self) -> dict[str, object]:
        """The outcome's fields on the wire: a plain success or failure as ``success`` (as every server
        takes it), any other kind as ``kind`` with its detail and no ``success``."""
        if self.kind in ("success", "failure"):
            return {"success": self.kind == "success"}
        fields: dict[str, object] = {"kind": self.kind}
        if self.retry_after_seconds is not None:
            fields["retry_after_seconds"] = self.retry_after_seconds
        if self.deadline_ms is not None:
            fields["deadline_ms"] = self.deadline_ms
        return fields


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


SUCCESS = Classification("success")
FAILURE = Classification("failure")
CANCELLED = Classification("cancelled")

#: ``classify(error, result)``: a kind, a ``Classification``, or None for the default.
Classify = Callable[[Union[BaseException, None], Any], Union[str, Classification, None]]
IsFailure = Callable[[Union[BaseException, None], Any], bool]


def verdict_of(
    error: BaseException | None,
    result: Any,
    classify: Classify | None,
    is_failure: IsFailure | None,
    now: float,
) -> tuple[Classification, Exception | None]:
    """(what to record, the error ``classify`` or ``is_failure`` raised). ``classify`` wins over
    ``is_failure``, either over the default; the client's own ``timeout`` is a failure whatever they say."""
    if isinstance(error, CallTimeoutError):
        return FAILURE, None
    if classify is not None:
        try:
            c = classify(error, None if error is not None else result)
            if c is not None:
                return (c if isinstance(c, Classification) else Classification(c)), None  # type: ignore[arg-type]
        except Exception as exc:
            return FAILURE, exc
    if is_failure is not None:
        try:
            failed = bool(is_failure(error, None if error is not None else result))
        except Exception as exc:
            return FAILURE, exc
        return (FAILURE if failed else SUCCESS), None
    return default_verdict(error, result, now), None


def default_verdict(error: BaseException | None, result: Any, now: float) -> Classification:
    """What the client classifies without help (the table in docs/client.md)."""
    if error is None:
        return by_status(result, now) if isinstance(result, httpx.Response) else SUCCESS
    if isinstance(error, CallDeadlineError):
        return Classification("caller_deadline", deadline_ms=error.deadline_ms)
    if isinstance(error, httpx.HTTPStatusError):
        return by_status(error.response, now)
    return FAILURE


def by_status(response: httpx.Response, now: float) -> Classification:
    kind, retry_after = d.kind_of_status(response.status_code, response.headers.get("retry-after"), now)
    if kind == "success":
        return SUCCESS
    if kind == "failure":
        return FAILURE
    return Classification(kind, retry_after_seconds=retry_after)


MIN_DEADLINE_MS = 1_000  # the policy's default min_deadline_ms (1 s)


def counts_locally(c: Classification, duration_ms: float | None, json: dict[str, Any] | None) -> bool | None:
    """What an outcome counts as for this client's own accounting (the local breaker, the soft throttle's
    counts): True a success, False a failure, None nothing. ``count_as`` overrides first; a
    ``caller_deadline`` is a failure when the caller gave at least ``min_deadline_ms``, a slow call when it
    ran past ``slow_call_duration_ms``; ``throttled`` is the server's cool-down, never a count."""
    j = json or {}
    count_as = j.get("count_as")
    override = count_as.get(c.kind) if isinstance(count_as, dict) else None
    if override in ("success", "failure", "ignore"):
        return None if override == "ignore" else override == "success"
    if c.kind in ("success", "rejected"):
        return True
    if c.kind == "failure":
        return False
    if c.kind != "caller_deadline":
        return None
    least = j.get("min_deadline_ms", MIN_DEADLINE_MS)
    if _number(least) and c.deadline_ms is not None and c.deadline_ms >= least:
        return False
    window = j.get("window")
    slow = window.get("slow_call_duration_ms") if isinstance(window, dict) else None
    if isinstance(slow, (int, float)) and duration_ms is not None and duration_ms >= slow:
        return True
    return None
