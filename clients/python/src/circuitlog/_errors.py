"""Errors the client raises; each has a stable string ``code``, like circuitlog's problems."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Literal


class CircuitlogError(Exception):
    """Base class of every error this package raises."""

    code: str = "CIRCUITLOG_ERROR"


class CircuitOpenError(CircuitlogError):
    """The circuit refused the call: open, half-open with every probe slot taken, or forced open.

    With ``scope == "caller"`` only this client's caller is refused: circuitlog isolated it after
    failures of its own (a circuit with a ``quorum``), and the circuit still serves other callers.
    """

    def __init__(
        self,
        circuit: str,
        state: str,
        retry_at_ms: float,
        *,
        forced: bool = False,
        local: bool = False,
        caller: str | None = None,
    ):
        self.code = "CIRCUIT_FORCED_OPEN" if forced else "CIRCUIT_OPEN"
        self.circuit = circuit
        self.state = state
        #: When a call may be admitted again (for a forced-open circuit: when to ask again), UTC.
        self.retry_at = datetime.fromtimestamp(retry_at_ms / 1000, tz=timezone.utc)
        #: True when the client's own breaker refused, while circuitlog was unreachable.
        self.local = local
        #: ``"caller"``: this client's caller alone is isolated; ``"circuit"``: the circuit refuses everyone.
        self.scope: Literal["circuit", "caller"] = "circuit" if caller is None else "caller"
        #: With scope ``"caller"``: the caller id refused (this client's ``caller``), else None.
        self.caller = caller
        if forced:
            message = f"Circuit '{circuit}' is forced open."
        elif caller is not None:
            message = (
                f"Caller '{caller}' is isolated from circuit '{circuit}' after failures of its own; "
                f"retry at {self.retry_at.isoformat()}."
            )
        else:
            what = "open" if state == "open" else "half-open with every probe slot taken"
            message = f"Circuit '{circuit}' is {what}; retry at {self.retry_at.isoformat()}."
        super().__init__(message)


class CircuitThrottledError(CircuitOpenError):
    """The circuit is closed, but its soft throttle refused this call (the ``throttle`` policy).

    A ``CircuitOpenError``, so code that handles refusals handles this one too; the next call may well be admitted.
    """

    def __init__(self, circuit: str, probability: float, retry_at_ms: float, *, local: bool = False):
        super().__init__(circuit, "closed", retry_at_ms, local=local)
        self.code = "CIRCUIT_THROTTLED"
        #: The refusal probability the call was drawn against.
        self.probability = probability
        self.args = (
            f"Circuit '{circuit}' is throttled: {round(probability * 100, 1)}% of calls are refused "
            "while its dependency accepts too few.",
        )


class CircuitlogUnavailableError(CircuitlogError):
    """circuitlog could not be reached and ``fail_open`` is False, or ``close()`` could not deliver everything."""

    code = "CIRCUITLOG_UNAVAILABLE"


class CallTimeoutError(CircuitlogError, TimeoutError):
    """The protected call ran past its ``timeout`` (recorded as a failure)."""

    code = "CALL_TIMEOUT"

    def __init__(self, circuit: str, timeout: float):
        self.circuit = circuit
        self.timeout = timeout
        super().__init__(f"Call on circuit '{circuit}' took longer than {timeout} s.")


class CircuitlogRequestError(CircuitlogError):
    """circuitlog answered a 4xx (a wrong token): a configuration error, raised even with a fallback."""

    code = "CIRCUITLOG_REJECTED"

    def __init__(self, status: int, problem: object):
        self.status = status
        self.problem = problem
        detail = problem.get("detail") if isinstance(problem, dict) else None
        super().__init__(f"circuitlog answered {status}" + (f": {detail}" if detail else ""))


class ClientClosedError(CircuitlogError, RuntimeError):
    """The client was closed; it accepts no new calls."""

    code = "CLIENT_CLOSED"


class CallDeadlineError(CircuitlogError, TimeoutError):
    """The caller's own ``deadline`` passed before the call ended (recorded as ``caller_deadline``)."""

    code = "CALL_DEADLINE"

    def __init__(self, circuit: str, deadline: float):
        self.circuit = circuit
        self.deadline = deadline
        #: The deadline in ms, as the outcome reports it.
        self.deadline_ms = max(1, round(deadline * 1000))
        super().__init__(f"Call on circuit '{circuit}' passed its caller's deadline of {deadline} s.")


class DependencyThrottledError(CircuitOpenError):
    """The dependency asked for less load (a 429, or a 503 with ``Retry-After``) and the circuit is cooling
    down (issue 29): circuitlog's ``dependency-throttled`` answer, or this client's view of it.

    ``scope == "circuit"``: every caller waits; ``"caller"``: this client's caller alone. The circuit
    stays closed; calls are admitted again at ``cool_until``.
    """

    def __init__(
        self,
        circuit: str,
        cool_until_ms: float,
        now_ms: float,
        *,
        scope: Literal["circuit", "caller"] = "circuit",
        caller: str | None = None,
        local: bool = False,
        state: str = "closed",
    ):
        super().__init__(circuit, state, cool_until_ms, local=local, caller=caller if scope == "caller" else None)
        self.code = "DEPENDENCY_THROTTLED"
        #: When the cool-down ends, UTC (``retry_at`` too).
        self.cool_until = self.retry_at
        #: Whole seconds until then, rounded up (the answer's ``Retry-After``).
        self.retry_after = max(0, math.ceil((cool_until_ms - now_ms) / 1000))
        whom = f" from caller '{caller}'" if scope == "caller" else ""
        self.args = (
            f"The dependency of circuit '{circuit}' asked for less load{whom}; "
            f"calls resume at {self.cool_until.isoformat()}.",
        )


class CircuitRampingError(CircuitOpenError):
    """The circuit is ramping up after it closed or a cool-down ended (policy ``ramp``, issue 29), and this
    call was above the share admitted now. Like a throttled call, the next one may be admitted."""

    def __init__(
        self, circuit: str, ramp_percent: float, ramp_until_ms: float | None, now_ms: float, *, local: bool = False
    ):
        super().__init__(circuit, "closed", now_ms + 1000, local=local)
        self.code = "CIRCUIT_RAMPING"
        #: The percent of calls admitted when this one was refused.
        self.ramp_percent = ramp_percent
        #: Seconds before asking again (the answer's ``Retry-After: 1``).
        self.retry_after = 1
        #: When the ramp reaches 100 %, UTC, if known.
        self.ramp_until = (
            None if ramp_until_ms is None else datetime.fromtimestamp(ramp_until_ms / 1000, tz=timezone.utc)
        )
        self.args = (f"Circuit '{circuit}' is ramping up: {round(ramp_percent, 1)}% of calls are admitted now.",)
