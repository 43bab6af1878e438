"""What the sync and the async client share, without I/O: the local view, the link state,
the local breakers, the outcome buffer, the counters, and every decision around their I/O
(admitting a call, taking an answer, a batch's result, the stream's backoff).

``Client`` (threads) and ``AsyncClient`` (asyncio) only do the I/O and the waiting; each sets
the three wake-up hooks (``room``, ``wake``, ``wake_stream``) to its own primitives.

Every mutation happens under ``lock`` (a ``threading.Condition``), never held across I/O or
an ``await``. The hot path (a call on a circuit the view shows closed) reads without the lock:
attribute reads are atomic under the GIL and a stale read is no staler than the stream.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generic, Literal, Protocol, TypeVar, Union

import httpx

from . import _domain as d
from ._classify import CANCELLED, FAILURE, SUCCESS, Classification, Classify, counts_locally, verdict_of
from ._errors import (
    CallDeadlineError,
    CallTimeoutError,
    CircuitlogRequestError,
    CircuitlogUnavailableError,
    CircuitOpenError,
    CircuitRampingError,
    CircuitThrottledError,
    ClientClosedError,
    DependencyThrottledError,
)
from ._local import Json, LocalBreakers, cooling_in, parse_time_ms, ramp_share, throttle_from
from ._names import check_name, checked_caller, credential_caller, default_caller
from ._sse import SseMessage, SseParser
from ._token import TokenOption, TokenSource
from ._wire import (
    Admitted,
    Answer,
    Outcome,
    Refused,
    ResetEvent,
    TransitionEvent,
    TransportError,
    only_at_refused,
    outcomes_body,
    parse_event,
    refused_circuits,
)

if TYPE_CHECKING:
    import sys
    from typing import TypedDict

    if sys.version_info >= (3, 10):
        from typing import ParamSpec
    else:
        from typing_extensions import ParamSpec
    P = ParamSpec("P")  # a protected function's parameters (``protect``)

    class CallOptions(TypedDict, total=False):
        """``protect``'s options: those of ``call``."""

        fallback: Callable[[Exception], Any]
        timeout: float | None
        deadline: float | None
        is_failure: IsFailure | None
        classify: Classify | None


log = logging.getLogger("circuitlog")
T = TypeVar("T")  # what a protected call returns
F = TypeVar("F")  # what its fallback returns

Connection = Literal["connected", "syncing", "offline"]
TransitionCallback = Callable[[TransitionEvent], None]
#: ``is_failure(error, result)``: does this call count as a failure? (``error`` None: it returned ``result``)
IsFailure = Callable[[Union[BaseException, None], Any], bool]
#: What ``call`` hands its fallback (or raises) when no call may go ahead now.
REFUSALS = (CircuitOpenError, CircuitlogUnavailableError)

# How often a circuit's policy (which changes without a transition) is fetched again; sooner
# while circuitlog does not know the circuit yet (it is created by its first outcome).
POLICY_REFRESH_MS = 60_000  # 60 s
UNKNOWN_POLICY_REFRESH_MS = 1_000  # 1 s
REFUSED_WARNING_INTERVAL_S = 60.0  # s: at most one warning this often about outcomes a full table refused
THROTTLE_MAX_CIRCUITS = 10_000  # circuits with soft-throttle counts (each at most window_seconds buckets, 600 at most)
MIN_HEALTHY_STREAM_S = 1.0  # s: a stream that lasted this long is reopened at once when it ends
_FORCED_BY_REASON: dict[str, str | None] = {"forced_open": "open", "forced_closed": "closed", "force_cleared": None}


def backoff_delay(attempt: int, max_delay_s: float) -> float:
    """Exponential backoff with jitter: 0.1 s, 0.2 s, ... capped at ``max_delay_s``."""
    ceiling: float = min(max_delay_s, 0.1 * 2.0 ** min(attempt, 16))
    return ceiling / 2 + random.random() * ceiling / 2


@dataclass
class Options:
    url: str
    #: A token, or a callable asked before each request (a rotating token); see ``token_file``.
    token: TokenOption = None
    #: A file holding the token (a Kubernetes service-account token), re-read when it changes.
    token_file: str | None = None
    fail_open: bool = True
    flush_delay: float = 0.005  # 5 ms
    flush_at: int = 250
    max_batch: int = 1_000  # circuitlog's limit per POST /outcomes
    max_queued_outcomes: int = 10_000
    #: s: the deadline of one request, from sending it to the last byte of its answer (not per read).
    request_timeout: float = 2.0
    #: The largest answer read (a circuit's JSON is about 1 KiB); a longer one is dropped unread: no answer.
    max_response_bytes: int = 1024 * 1024  # 1 MiB, as the Node client
    reconnect_max_delay: float = 5.0  # s
    stream_idle_timeout: float = 45.0  # s: three missed heartbeats
    close_timeout: float = 10.0  # s
    local_defaults: d.Policy = field(default_factory=d.Policy)
    max_sse_line_bytes: int = 64 * 1024
    max_sse_event_bytes: int = 256 * 1024
    #: Who this client is to circuitlog, named on every outcome and admission. None: with a token (or
    #: token file), ``<id>/<hostname>/<pid>`` from ``GET /whoami``; without one, the host name.
    caller: str | None = None
    #: ``Client``: at most this many calls with a ``timeout`` run at once, each on a worker thread.
    timeout_workers: int = 32


def options_from(url: str, kwargs: dict[str, Any]) -> Options:
    """Both clients' keyword options; ``local_defaults`` may be a ``Policy`` or a dict of its fields."""
    defaults = kwargs.pop("local_defaults", None)
    o = Options(url=url, **kwargs)
    if defaults is not None:
        o.local_defaults = defaults if isinstance(defaults, d.Policy) else d.Policy(**defaults)
    o.flush_at = min(o.flush_at, o.max_batch)
    return o


def call_limit(name: str, timeout: float | None, deadline: float | None) -> tuple[float, Exception] | None:
    """The limit a call runs under and the error past it: the client's ``timeout`` (a failure) or the
    caller's ``deadline`` (``caller_deadline``), whichever is shorter; None for neither."""
    if deadline is not None and not (
        isinstance(deadline, (int, float)) and not isinstance(deadline, bool) and 0 < deadline < float("inf")
    ):
        raise TypeError("call(): deadline must be a finite number of seconds > 0")
    if deadline is not None and (timeout is None or deadline < timeout):
        return deadline, CallDeadlineError(name, deadline)
    return None if timeout is None else (timeout, CallTimeoutError(name, timeout))


class _Forkable(Protocol):
    def _after_fork(self) -> None: ...


_forkable: weakref.WeakSet[_Forkable] = weakref.WeakSet()


def on_fork(client: _Forkable) -> None:
    """In a forked child, ``client._after_fork()`` runs (nothing of the parent's threads, tasks or sockets is used)."""
    _forkable.add(client)


def _after_fork_in_child() -> None:
    for client in list(_forkable):
        client._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Settable(Protocol):
    def set(self) -> None: ...


E = TypeVar("E", bound=_Settable)


class SharedLookup(Generic[E]):
    """A ``GET /allowed`` in flight, shared by every concurrent lookup of its circuit.

    A closed answer admits every call that waited for it; anything else is asked again: a
    refusal is then kept (and raised from the view), while a probe lease or a throttle verdict
    belongs to one call only. ``done``: a ``threading.Event`` (``Client``) or an
    ``asyncio.Event`` (``AsyncClient``), set once the answer is in the view (or none came).
    ``generation`` and ``seq``: what the answer must not overwrite (``Core.before_ask``).
    """

    __slots__ = ("answer", "done", "generation", "seq")

    def __init__(self, done: E, generation: int, seq: int):
        self.answer: Answer | None = None
        self.done = done
        self.generation, self.seq = generation, seq

    @property
    def admits_all(self) -> bool:
        return isinstance(self.answer, Admitted) and self.answer.state == "closed"


class Entry:
    """A circuit in the local view: a snapshot (its first GET /allowed) kept current by the stream."""

    __slots__ = (
        "cool_scope",
        "cool_until",
        "event_seq",
        "forced",
        "generation",
        "isolated",
        "isolated_until",
        "json",
        "local_ok",
        "policy_due_at",
        "ramp_until",
        "refused_until",
        "retry_at",
        "state",
    )

    def __init__(self) -> None:
        self.state = "closed"
        self.forced: str | None = None
        self.json: Json | None = None
        self.policy_due_at = 0.0
        self.generation = -1  # stream generation of the snapshot; -1: taken with no stream open
        self.event_seq = 0  # bumped by every stream event, so an older snapshot cannot overwrite it
        self.refused_until = 0.0  # epoch ms until which circuitlog's last refusal stands
        self.retry_at = 0.0
        #: This client's caller is isolated from the circuit: calls are asked of circuitlog until it is released.
        self.isolated = False
        self.isolated_until = 0.0  # epoch ms until which the isolation refuses calls without asking
        self.local_ok = True
        #: Epoch ms until which the dependency's cool-down refuses this client's calls (issue 29; 0: none known).
        self.cool_until = 0.0
        self.cool_scope: Literal["circuit", "caller"] = "circuit"
        #: Epoch ms when the circuit's ramp ends (None: none known); its share comes from the policy's ``ramp``.
        self.ramp_until: float | None = None

    def update(self) -> None:
        self.local_ok = self.forced == "closed" or (
            self.forced is None and self.state == "closed" and not self.isolated
        )

    def learn(self, json: Json, caller: str | None) -> None:
        """A snapshot's cool-down (the circuit's, or ``caller``'s) and ramp replace what was known."""
        self.cool_until, self.cool_scope = cooling_in(json, caller)
        if "ramp_until" in json:
            self.ramp_until = parse_time_ms(json.get("ramp_until"))

    def cool_or_ramp(self, event: TransitionEvent, caller: str | None) -> None:
        """Issue 29's events: a cool-down for everyone or ``caller`` begins or ends; a ramp begins."""
        mine = event.scope == "circuit" or caller in event.callers
        if event.reason == "cool_down" and mine:
            until = parse_time_ms(event.until)
            if until is not None:
                self.cool_until, self.cool_scope = until, ("caller" if event.scope == "caller" else "circuit")
        elif event.reason == "cool_down_ended" and mine:
            self.cool_until = 0.0
        elif event.reason == "manual_reset":
            # An operator reset ends every cool-down and the ramp at circuitlog (the domain's ``reset``).
            self.cool_until, self.ramp_until = 0.0, None
        if event.ramp_until is not None and (mine if event.reason == "cool_down_ended" else event.to_state == "closed"):
            until = parse_time_ms(event.ramp_until)
            if until is not None:
                self.ramp_until = until

    def isolate(self, until_ms: float | None) -> None:
        """Isolated until ``until_ms`` (epoch ms; then one probe is asked for), or released (None)."""
        self.isolated = until_ms is not None
        self.isolated_until = 0.0 if until_ms is None else until_ms
        self.update()

    @property
    def effective_state(self) -> str:
        return self.forced or self.state


def isolation_in(json: Json | None, caller: str | None) -> float | None:
    """This caller's isolation as a circuit's JSON lists it (``isolated_callers``): its open_until, or None."""
    listed = (json or {}).get("isolated_callers")
    if caller is None or not isinstance(listed, list):
        return None
    for item in listed:
        if isinstance(item, dict) and item.get("caller") == caller:
            return parse_time_ms(item.get("open_until")) or 0.0
    return None


class Core:
    def __init__(self, options: Options, clock_ms: Callable[[], float] | None = None):
        self.options = options
        #: This client's caller id (option ``caller``), sent on every outcome and admission; None while
        #: unknown (a token and no ``caller``: asked of ``GET /whoami``; meanwhile outcomes name none,
        #: and circuitlog counts a named credential's as its id).
        self.caller: str | None = (
            None
            if options.caller is None and (options.token is not None or options.token_file is not None)
            else checked_caller(options.caller)
        )
        #: ``GET /whoami`` is still to be asked (before the stream opens, until it answers).
        self.ask_whoami = self.caller is None
        self.clock_ms = clock_ms or (lambda: time.time() * 1000)
        #: Epoch seconds for each outcome's ``at`` (replaceable in tests: a host clock running ahead).
        self.wall: Callable[[], float] = time.time
        self.lock = threading.Condition(threading.Lock())
        self.entries: dict[str, Entry] = {}
        self.generation = 0
        #: ``generation`` while the stream is open and circuitlog answers, else -2: entries match only then.
        self.trusted_generation = -2
        self.stream_up = False
        self.reachable = True  # until a request fails, assume circuitlog answers
        self.local = LocalBreakers(self.clock_ms, options.local_defaults)
        #: Uniform numbers in [0, 1) for soft throttling's draws (replaceable in tests).
        self.random: Callable[[], float] = random.random
        #: Soft-throttle counts per circuit closed in the view: (window_seconds, counts); bounded below.
        self.throttles: dict[str, tuple[int, d.TimeWindow | None]] = {}
        self.items: deque[Outcome] = deque()
        self.in_flight = 0  # outcomes in the batch being sent
        self.calls_running = 0
        self.closing = False
        self.last_event_id: str | None = None
        self.counts = {
            "local_decisions": 0,
            "server_checks": 0,
            "offline_decisions": 0,
            "throttled_locally": 0,
            "outcomes_acknowledged": 0,
            "outcomes_dropped": 0,
            "outcomes_rejected": 0,
            "events_discarded": 0,
        }
        self.refused_warned_at = -REFUSED_WARNING_INTERVAL_S  # monotonic s of the last such warning
        self.refused_unreported = 0  # outcomes a full table refused since that warning
        self.listeners: list[TransitionCallback] = []
        self.connection_listeners: list[Callable[[Connection], None]] = []
        self.lookups: dict[str, SharedLookup[Any]] = {}  # the GET /allowed in flight per circuit
        self.policy_wanted: set[str] = set()  # circuits whose policy the flusher fetches next
        self.retry_at = 0.0  # monotonic s of the next batch retry
        self.flush_now = False  # close(): send what is queued without waiting for a fuller batch
        self.stream_attempt = 0  # reconnections since the stream last lasted (its backoff)
        self.send_attempt = 0  # failed sends since the last delivered batch (their backoff)
        self.stream_opened_at = 0.0  # monotonic s
        #: Wake-up hooks, each called under ``lock``: callers waiting for room in the queue may go on;
        #: the flusher has work; the stream should stop waiting and reconnect now. ``Client`` waits on
        #: ``lock`` itself (the default); ``AsyncClient`` sets events.
        self.room: Callable[[], None] = self._notify
        self.wake: Callable[[], None] = self._notify
        self.wake_stream: Callable[[], None] = lambda: None

    def _notify(self) -> None:
        self.lock.notify_all()

    # -- link state -------------------------------------------------------------------------

    @property
    def connection(self) -> Connection:
        return "offline" if not self.reachable else "connected" if self.stream_up else "syncing"

    def set_link(self, stream_up: bool, reachable: bool) -> Connection | None:
        """Record the link; returns the new connection state when it changed (call under lock)."""
        before = self.connection
        self.stream_up, self.reachable = stream_up, reachable
        self.trusted_generation = self.generation if stream_up and reachable else -2
        after = self.connection
        if after == before:
            return None
        if before == "offline":
            self.local.clear()  # back in touch: the server's state wins
        self.room()  # calls waiting for room go on (offline: the queue is a bounded buffer)
        return after

    def link(self, stream_up: bool, reachable: bool) -> None:
        """Record the link (takes the lock) and tell the connection listeners when it changed."""
        with self.lock:
            changed = self.set_link(stream_up, reachable)
        self.emit_connection(changed)

    def stream_opened(self) -> Connection | None:
        self.generation += 1  # every snapshot taken before this is re-taken on its next use
        return self.set_link(True, True)

    def resync(self) -> None:
        """Every circuit is snapshotted again on its next use (a reset event, a discarded event)."""
        self.generation += 1
        if self.trusted_generation >= 0:
            self.trusted_generation = self.generation
        for entry in self.entries.values():
            entry.refused_until = 0

    # -- the stream -------------------------------------------------------------------------

    def apply(self, event: TransitionEvent | ResetEvent) -> None:
        if isinstance(event, ResetEvent):
            self.resync()
            if event.newest_id is not None:
                self.last_event_id = event.newest_id
            return
        self.last_event_id = event.id
        if event.shadow:
            return  # a shadow policy's event (issue 31): the circuit itself did not change
        entry = self.entries.get(event.circuit)
        if entry is None:
            return
        if event.from_state != event.to_state:
            self.throttles.pop(event.circuit, None)  # counts start empty at a state change, as the server's
        entry.state = event.to_state
        entry.event_seq += 1
        entry.refused_until = 0
        if event.reason in _FORCED_BY_REASON:
            entry.forced = _FORCED_BY_REASON[event.reason]
        if self.caller in event.callers and event.reason == "caller_isolated":
            entry.isolate(parse_time_ms(event.until) or 0.0)
        elif self.caller in event.callers and event.reason == "caller_released":
            entry.isolate(None)
        entry.cool_or_ramp(event, self.caller)
        entry.update()

    def emit(self, event: TransitionEvent) -> None:
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:
                log.exception("circuitlog: an on_transition callback raised")

    def emit_connection(self, state: Connection | None) -> None:
        if state is None:
            return
        for listener in list(self.connection_listeners):
            try:
                listener(state)
            except Exception:
                log.exception("circuitlog: a connection callback raised")

    # -- decisions --------------------------------------------------------------------------

    def before_ask(self, name: str) -> tuple[int, int]:
        """Under lock: raise a refusal still standing, else note what the answer must not overwrite."""
        if name not in self.entries:
            check_name(name)
        entry = self.entries.setdefault(name, Entry())
        # A cool-down the view knows stands without asking, even while circuitlog is unreachable.
        cooling = self.cooling(name, entry, local=not self.reachable)
        if cooling is not None:
            raise cooling
        if entry.generation == self.trusted_generation and entry.refused_until > self.clock_ms():
            raise CircuitOpenError(name, entry.effective_state, entry.retry_at, forced=entry.forced == "open")
        # Isolated by circuitlog (this caller alone): refused here until its open time ends, then asked (one probe).
        if self.reachable and entry.isolated and entry.isolated_until > self.clock_ms() and entry.forced is None:
            raise CircuitOpenError(name, entry.effective_state, entry.isolated_until, caller=self.caller)
        return (self.generation if self.stream_up else -1), entry.event_seq

    def answered(self, name: str, answer: Answer, generation: int, seq: int) -> None:
        """Under lock: take circuitlog's answer into the view; raises CircuitOpenError on a refusal."""
        self.counts["server_checks"] += 1
        entry = self.entries.setdefault(name, Entry())
        now = self.clock_ms()
        if entry.event_seq == seq:  # no stream event since we asked: this answer is the newest
            entry.state = answer.state
            if isinstance(answer, Admitted):
                fs = (answer.circuit or {}).get("forced_state")
                entry.forced = fs if fs in ("open", "closed") else None
            else:
                entry.forced = "open" if answer.forced else None
            entry.update()
        if isinstance(answer, Admitted):
            if answer.circuit is not None:
                entry.json = answer.circuit
                # Still listed while its probe runs; released by caller_released (or the next snapshot).
                entry.isolate(isolation_in(answer.circuit, self.caller))
                entry.learn(answer.circuit, self.caller)
            entry.policy_due_at = now + (UNKNOWN_POLICY_REFRESH_MS if entry.json is None else POLICY_REFRESH_MS)
        entry.generation = generation if self.stream_up and self.generation == generation else -1
        if isinstance(answer, Refused) and answer.cool_down is not None:
            entry.cool_until, entry.cool_scope = answer.cool_down  # refused here until then, without asking
            raise DependencyThrottledError(
                name, entry.cool_until, now, scope=entry.cool_scope, caller=self.caller, state=answer.state
            )
        if isinstance(answer, Refused) and answer.ramping is not None:
            percent, ramp_until = answer.ramping  # refused alone: the next call may be admitted
            if ramp_until is not None:
                entry.ramp_until = ramp_until
            raise CircuitRampingError(name, percent, ramp_until, now)
        if isinstance(answer, Refused) and answer.throttled is not None:
            # A throttled call is refused alone: the next one may be admitted, so nothing is kept.
            raise CircuitThrottledError(name, answer.throttled, answer.retry_at)
        if isinstance(answer, Refused) and answer.scope == "caller":
            # Kept until its open_until, by this host's clock at most Retry-After from now (hosts' clocks differ).
            entry.isolate(min(answer.retry_at, now + answer.retry_after_ms))
            raise CircuitOpenError(name, answer.state, answer.retry_at, caller=self.caller)
        if isinstance(answer, Refused):
            entry.retry_at = answer.retry_at
            # Kept until retry_at, by this host's clock at most Retry-After from now (hosts' clocks differ).
            entry.refused_until = float("inf") if answer.forced else min(answer.retry_at, now + answer.retry_after_ms)
            raise CircuitOpenError(name, answer.state, answer.retry_at, forced=answer.forced)

    def admit_offline(self, name: str) -> None:
        """Under lock: the local breaker decides; raises on refusal."""
        if not self.options.fail_open:
            raise CircuitlogUnavailableError(
                f"circuitlog is unreachable and fail_open is False: call on '{name}' refused"
            )
        self.counts["offline_decisions"] += 1
        entry = self.entries.get(name)
        verdict = self.local.admit(name, *self._known(entry))
        if verdict.throttled is not None:
            raise CircuitThrottledError(name, verdict.throttled, verdict.retry_at, local=True)
        if not verdict.allowed:
            raise CircuitOpenError(name, self.local.state(name) or "open", verdict.retry_at, local=True)

    def _known(self, entry: Entry | None) -> tuple[str | None, Json | None]:
        return (None, None) if entry is None else (entry.effective_state, entry.json)

    def policy_fetched(self, name: str, json: Json | None) -> None:
        entry = self.entries.get(name)
        if entry is None:
            return
        if json is not None:
            entry.json = json
            entry.learn(json, self.caller)
        entry.policy_due_at = self.clock_ms() + (UNKNOWN_POLICY_REFRESH_MS if json is None else POLICY_REFRESH_MS)

    def state(self, name: str) -> str | None:
        if not self.reachable:
            local = self.local.state(name)
            if local is not None:
                return local
        entry = self.entries.get(name)
        return None if entry is None else entry.effective_state

    # -- outcomes ---------------------------------------------------------------------------

    def cooling(self, name: str, entry: Entry, local: bool) -> DependencyThrottledError | None:
        """The cool-down in force for this client (the circuit's, or its caller's), as the error to raise."""
        now = self.clock_ms()
        if entry.cool_until <= now or entry.forced is not None:
            return None
        if local:
            self.counts["throttled_locally"] += 1
        return DependencyThrottledError(
            name,
            entry.cool_until,
            now,
            scope=entry.cool_scope,
            caller=self.caller,
            local=local,
            state=entry.effective_state,
        )

    def throttle_locally(self, name: str, entry: Entry) -> CircuitOpenError | None:
        """Under lock, on a circuit closed in the view (not forced): the dependency's cool-down, the ramp's
        draw (issue 29), then the soft throttle over this client's own calls.

        Requests are the calls run (counted when their outcome is pushed) plus the ones refused here;
        accepts are the successes (docs/api.md "Soft throttling"). The refusal to raise, or None.
        """
        if entry.forced is not None:
            return None
        if entry.cool_until:
            cooling = self.cooling(name, entry, local=True)
            if cooling is not None:
                return cooling
        if entry.json is not None and entry.json.get("ramp") is not None:
            now = self.clock_ms()
            # Only a circuit-wide cool-down ends into the ramp (a caller's own ends without one).
            ended = entry.cool_until if entry.cool_scope == "circuit" else 0.0
            share = ramp_share(entry.json, entry.ramp_until, ended, now)
            if share is not None and not d.ramp_admits(share[0], self.random()):
                self.counts["throttled_locally"] += 1
                return CircuitRampingError(name, share[0], share[1], now, local=True)
        t = throttle_from((entry.json or {}).get("throttle")) if entry.forced is None else None
        if t is None:
            return None
        now = self.clock_ms()
        counts = self._throttle_counts(name, t)
        p = 0.0 if counts is None else d.throttle_probability(t, counts, now)
        if p <= 0 or self.random() >= p:
            return None
        self.throttles[name] = (t.window_seconds, d.count_request(t, counts, False, now))
        self.counts["throttled_locally"] += 1
        return CircuitThrottledError(name, p, now + d.THROTTLE_RETRY_AFTER_MS, local=True)

    def _throttle_counts(self, name: str, t: d.ThrottlePolicy) -> d.TimeWindow | None:
        kept = self.throttles.pop(name, None)  # re-inserted by the caller: the most recently used last
        counts = kept[1] if kept is not None and kept[0] == t.window_seconds else None
        if len(self.throttles) >= THROTTLE_MAX_CIRCUITS:
            del self.throttles[next(iter(self.throttles))]  # the least recently used goes first
        self.throttles[name] = (t.window_seconds, counts)
        return counts

    def push(self, name: str, outcome: bool | Classification, duration_ms: float | None) -> bool:
        """Under lock: queue an outcome (a success, or a kind); wakes the flusher (True) when it has work."""
        entry = self.entries.get(name)
        success: bool | None
        wire: bool | dict[str, object]
        if isinstance(outcome, bool):
            success, wire = outcome, outcome
        elif (outcome is SUCCESS or outcome is FAILURE) and (entry is None or "count_as" not in (entry.json or ())):
            success = wire = outcome is SUCCESS  # the common case, without a call
        else:
            # What this client's own accounting sees: a success, a failure, or nothing (a cancellation,
            # a short deadline, a cool-down); on the wire a plain success or failure stays ``success``.
            success = counts_locally(outcome, duration_ms, entry.json if entry is not None else None)
            kind = outcome.kind
            wire = kind == "success" if kind in ("success", "failure") else outcome.wire()
        if (
            success is not None
            and self.reachable
            and entry is not None
            and entry.forced is None
            and entry.state == "closed"
        ):
            t = throttle_from((entry.json or {}).get("throttle"))
            if t is not None:
                now = self.clock_ms()
                self.throttles[name] = (
                    t.window_seconds,
                    d.count_request(t, self._throttle_counts(name, t), success, now),
                )
        if not self.reachable:
            if success is not None:
                self.local.record(name, success, duration_ms, *self._known(entry))
            while len(self.items) >= self.options.max_queued_outcomes:
                self.items.popleft()  # offline: a bounded buffer, the oldest go first
                self.counts["outcomes_dropped"] += 1
        self.items.append((name, wire, duration_ms, self.wall()))
        n = len(self.items)
        if n == 1 or n == self.options.flush_at:
            self.wake()
            return True
        return False

    @property
    def full(self) -> bool:
        return len(self.items) >= self.options.max_queued_outcomes

    @property
    def pending(self) -> int:
        return len(self.items) + self.in_flight

    def take_batch(self) -> list[Outcome]:
        n = min(len(self.items), self.options.max_batch)
        batch = [self.items.popleft() for _ in range(n)]
        self.in_flight = len(batch)
        self.room()  # for calls waiting on a full queue
        return batch

    def batch_refused(self, batch: list[Outcome], refused: set[str]) -> int:
        """Under lock: a full circuit table (507) refused the items for ``refused``: drop and count them,
        and put the rest back at the front, to be sent at once (nothing of the batch was written).

        A 507 naming none of the batch's circuits cannot succeed either: the whole batch is dropped.
        So every 507 drops at least one item. Returns how many were dropped.
        """
        rest = [item for item in batch if item[0] not in refused]
        if len(rest) == len(batch):
            rest = []
        dropped = len(batch) - len(rest)
        self.in_flight = 0
        self.counts["outcomes_rejected"] += dropped
        self.items.extendleft(reversed(rest))
        self.room()
        return dropped

    def warn_refused(self, dropped: int, error: Exception) -> None:
        """One warning per REFUSED_WARNING_INTERVAL_S at most, with the items dropped since the last."""
        self.refused_unreported += dropped
        now = time.monotonic()
        if now - self.refused_warned_at < REFUSED_WARNING_INTERVAL_S:
            return
        log.warning(
            "circuitlog: %d outcome(s) dropped: circuitlog's circuit table is full (limits.max_circuits): %s",
            self.refused_unreported,
            error,
        )
        self.refused_warned_at, self.refused_unreported = now, 0

    def batch_done(self, batch: list[Outcome], result: Literal["delivered", "rejected", "failed"]) -> None:
        self.in_flight = 0
        if result == "delivered":
            self.counts["outcomes_acknowledged"] += len(batch)
        elif result == "rejected":
            self.counts["outcomes_rejected"] += len(batch)
        else:
            # Not delivered: back to the front, before anything recorded after it.
            self.items.extendleft(reversed(batch))
            if not self.reachable:
                while len(self.items) > self.options.max_queued_outcomes:
                    self.items.popleft()
                    self.counts["outcomes_dropped"] += 1
        self.room()

    # -- around the clients' I/O -------------------------------------------------------------

    def refuse_if_closing(self) -> None:
        if self.closing:
            raise ClientClosedError("circuitlog client is closed")

    def begin_call(self, name: str) -> tuple[bool, Exception | None]:
        """Under lock: a call starts. (Decided by the view?, the local throttle's refusal or None);
        a view decision whose policy is due asks the flusher to fetch it again."""
        self.calls_running += 1
        e = self.entries.get(name)
        if e is None or not (e.local_ok and e.generation == self.trusted_generation):
            return False, None
        self.counts["local_decisions"] += 1
        if self.clock_ms() >= e.policy_due_at:
            e.policy_due_at = self.clock_ms() + 1_000  # no second fetch while this one runs
            self.policy_wanted.add(name)
        return True, self.throttle_locally(name, e)

    def decide_locally(self, name: str) -> bool | None:
        """Under lock: ``allowed()`` as the view decides it (the local throttle included); None: ask circuitlog."""
        e = self.entries.get(name)
        if e is None or not (e.local_ok and e.generation == self.trusted_generation):
            return None
        self.counts["local_decisions"] += 1
        return self.throttle_locally(name, e) is None

    def take_wanted(self) -> set[str]:
        """Under lock: the circuits whose policy to fetch now."""
        wanted, self.policy_wanted = self.policy_wanted, set()
        return wanted

    def checked_outcome(self, name: str, success: object, duration_ms: object) -> float | None:
        """``record()``'s arguments checked (a name not yet in the view, too); the duration as a float."""
        if name not in self.entries:
            check_name(name)
        if not isinstance(success, bool):
            raise TypeError("record(): success must be a bool")
        if duration_ms is None:
            return None
        if not (isinstance(duration_ms, (int, float)) and 0 <= duration_ms < float("inf")):
            raise TypeError("record(): duration_ms must be a finite number >= 0")
        return float(duration_ms)

    def settle(
        self,
        name: str,
        started: float,
        error: Exception | None,
        result: Any,
        is_failure: IsFailure | None,
        fallback: Callable[[Exception], Any] | None,
        classify: Classify | None = None,
    ) -> Any:
        """A call ended (``started``: its ``time.perf_counter()``): queue its outcome, then return its
        result, or ``fallback(error)`` (which ``AsyncClient`` may await), or raise its error (or the
        classifier's). What is recorded: ``_classify.verdict_of``."""
        duration_ms = (time.perf_counter() - started) * 1000
        verdict: Classification
        if error is None and is_failure is None and classify is None and not isinstance(result, httpx.Response):
            verdict, classifier_error = SUCCESS, None  # the common case, without a call to classify
        else:
            verdict, classifier_error = verdict_of(error, result, classify, is_failure, self.clock_ms())
        with self.lock:
            self.push(name, verdict, duration_ms)
        if classifier_error is not None:
            raise classifier_error
        if error is None:
            return result
        if fallback is not None:
            return fallback(error)
        raise error

    def cancelled(self, name: str, started: float) -> None:
        """``AsyncClient``: the call's task was cancelled (the caller went away): recorded as ``cancelled``."""
        with self.lock:
            self.push(name, CANCELLED, (time.perf_counter() - started) * 1000)

    def lookup(self, name: str, new_done: Callable[[], E]) -> tuple[SharedLookup[E] | None, bool]:
        """Under lock: a call the view could not decide. (None, _): decided here (offline: by the local
        breaker; or by a snapshot a lookup left since); raises a refusal still standing. Else (the
        lookup, mine): ``mine`` asks circuitlog (then ``take_answer``, ``end_lookup``); the rest wait on its ``done``.
        """
        generation, seq = self.before_ask(name)
        if not self.reachable:
            self.admit_offline(name)
            return None, False
        entry = self.entries[name]
        if entry.local_ok and entry.generation == self.trusted_generation:
            self.counts["local_decisions"] += 1  # a lookup that ended since this call began left a snapshot
            return None, False
        shared: SharedLookup[E] | None = self.lookups.get(name)
        if shared is not None:
            return shared, False
        mine = self.lookups[name] = SharedLookup(new_done(), generation, seq)
        return mine, True

    def admitted_by(self, shared: SharedLookup[Any]) -> bool:
        """After waiting on another call's lookup: True if its answer admits this call too, else ask again."""
        if not shared.admits_all:
            return False
        with self.lock:
            self.counts["server_checks"] += 1  # decided by circuitlog's answer, shared
        return True

    def take_answer(self, name: str, mine: SharedLookup[Any], answer: Answer | TransportError) -> None:
        """circuitlog's answer to ``mine`` (or the error instead) into the view and the link; raises a refusal."""
        if isinstance(answer, TransportError):
            if answer.kind == "rejected":
                raise CircuitlogRequestError(answer.status or 0, answer.problem) from answer
            self.link(self.stream_up, False)
            with self.lock:
                self.wake_stream()
                self.admit_offline(name)
            return
        self.link(self.stream_up, True)
        with self.lock:
            mine.answer = answer
            self.answered(name, answer, mine.generation, mine.seq)

    def end_lookup(self, name: str, mine: SharedLookup[Any]) -> None:
        with self.lock:
            self.lookups.pop(name, None)
        mine.done.set()

    def stream_started(self) -> SseParser:
        """The event stream opened: the link is up, a batch waiting to retry goes now; the parser for its bytes."""
        self.stream_opened_at = time.monotonic()
        with self.lock:
            changed = self.stream_opened()
            self.retry_at = 0.0
            self.wake()
            self.room()
        self.emit_connection(changed)
        o = self.options
        return SseParser(self.on_message, o.max_sse_line_bytes, o.max_sse_event_bytes)

    def stream_failed(self, error: TransportError) -> float:
        """The stream did not open: the link as the error says; the wait (s) before trying again."""
        self.link(False, self.reachable if error.kind == "rejected" else False)
        return self._stream_backoff()

    def stream_ended(self) -> float | None:
        """The stream ended: None to reopen it at once (it had lasted), else the wait (s) before trying again."""
        self.link(False, self.reachable)
        if time.monotonic() - self.stream_opened_at >= MIN_HEALTHY_STREAM_S:
            self.stream_attempt = 0
            return None  # after a drop, try again at once, unless it keeps ending as soon as it opens
        return self._stream_backoff()

    def _stream_backoff(self) -> float:
        delay = backoff_delay(self.stream_attempt, self.options.reconnect_max_delay)
        self.stream_attempt += 1
        return delay

    def on_message(self, message: SseMessage) -> None:
        """One event of the stream: into the view, then to the listeners (on the stream's thread or task)."""
        if message.oversized:
            with self.lock:
                self.counts["events_discarded"] += 1
                self.resync()  # an event was missed: every circuit is snapshotted again
            log.warning("circuitlog: discarded an oversized stream event")
            return
        event = parse_event(message.event, message.data, message.id)
        if event is None:
            return
        with self.lock:
            self.apply(event)
        if not isinstance(event, ResetEvent):
            self.emit(event)

    def outcomes_body(self, batch: list[Outcome], with_at: bool) -> bytes:
        return outcomes_body(batch, with_at=with_at, caller=self.caller)

    @staticmethod
    def clock_ahead(error: TransportError) -> bool:
        """Did circuitlog refuse a batch only for its items' ``at``? Then it goes again without them."""
        if not only_at_refused(error):
            return False
        # This host's clock runs ahead of circuitlog's: send the batch as of now instead.
        log.warning("circuitlog: outcome times refused (clock ahead of circuitlog's?); sent without them")
        return True

    def sent(self, batch: list[Outcome], error: TransportError | None) -> None:
        """A batch's ``POST /outcomes`` ended: acknowledged, or refused in part (a full table), or in
        whole (a 4xx), or not delivered: back in the queue, retried after a backoff (``retry_at``)."""
        if error is None:
            with self.lock:
                self.batch_done(batch, "delivered")
                self.send_attempt = 0
            self.link(self.stream_up, True)
            return
        refused = refused_circuits(error)
        if refused is not None:
            with self.lock:
                self.warn_refused(self.batch_refused(batch, refused), error)
            return  # circuitlog is up and took nothing: the rest goes again at once
        if error.kind == "rejected":
            with self.lock:
                self.batch_done(batch, "rejected")
            log.error("circuitlog: a batch of %d outcomes was refused: %s", len(batch), error)
            return
        with self.lock:
            changed = self.set_link(self.stream_up, False)
            self.batch_done(batch, "failed")
            self.wake_stream()
            self.retry_at = time.monotonic() + backoff_delay(self.send_attempt, self.options.reconnect_max_delay)
            self.send_attempt += 1
        self.emit_connection(changed)

    def loop_failed(self, what: str) -> None:
        """A background loop raised (a bug): logged; nothing is trusted until resynced; it starts again."""
        log.exception("circuitlog: background %s failed; restarting it", what)
        self.link(False, self.reachable)
        self.stream_attempt = self.send_attempt = 0

    def close_error(self, pending: int) -> CircuitlogUnavailableError | None:
        """``close()``'s error when ``pending`` outcomes were not acknowledged within ``close_timeout``."""
        if pending == 0:
            return None
        return CircuitlogUnavailableError(
            f"close(): {pending} outcome(s) not acknowledged by circuitlog within {self.options.close_timeout} s"
        )

    def stats(self) -> dict[str, object]:
        return {
            "connection": self.connection,
            **self.counts,
            "outcomes_pending": self.pending,
            "last_event_id": self.last_event_id,
        }

    def after_fork(self) -> None:
        """In a forked child: fresh lock, no stream, nothing queued (the parent delivers its own)."""
        self.lock = threading.Condition(threading.Lock())
        self.items.clear()
        self.in_flight = 0
        self.calls_running = 0
        self.lookups = {}
        self.generation += 1
        self.stream_up = False
        self.trusted_generation = -2
        self.stream_attempt = self.send_attempt = 0


def learn_whoami(core: Core, answer: tuple[str, list[str] | None] | None) -> None:
    """``GET /whoami``'s answer (None: a server without it) decides the default caller (issue 30)."""
    with core.lock:
        core.caller = default_caller() if answer is None else credential_caller(answer[0], answer[1])
        core.ask_whoami = False


class ClientBase:
    """What ``Client`` and ``AsyncClient`` have alike: their core, what the view believes, callbacks, stats."""

    def __init__(
        self,
        url: str,
        *,
        token: TokenOption = None,
        fail_open: bool = True,
        caller: str | None = None,
        on_transition: TransitionCallback | None = None,
        **options: Any,
    ) -> None:
        self._core = Core(options_from(url, {"token": token, "fail_open": fail_open, "caller": caller, **options}))
        #: The token of each request: fixed, a callable, or a file re-read when it changes.
        self._tokens = TokenSource(self._core.options.token, self._core.options.token_file)
        if on_transition is not None:
            self._core.listeners.append(on_transition)
        self._start()
        on_fork(self)

    def _start(self) -> None:
        """The client's own part of ``__init__``: its transport, its wake-ups, its threads or tasks."""
        raise NotImplementedError

    def _after_fork(self) -> None:
        self._core.after_fork()

    def state(self, name: str) -> str | None:
        """The state this client believes now (a forced state shows as that state); None if unknown."""
        with self._core.lock:
            return self._core.state(name)

    def on_transition(self, callback: TransitionCallback) -> Callable[[], None]:
        """Call ``callback`` for every transition (``Client``: on the stream's thread; ``AsyncClient``: on the
        loop); returns an unsubscribe function."""
        self._core.listeners.append(callback)
        return lambda: self._core.listeners.remove(callback) if callback in self._core.listeners else None

    def on_connection(self, callback: Callable[[Connection], None]) -> Callable[[], None]:
        self._core.connection_listeners.append(callback)
        return lambda: self._core.connection_listeners.remove(callback)

    @property
    def caller(self) -> str | None:
        """This client's caller id: option ``caller``; default the host name, or with a token
        ``<id>/<hostname>/<pid>`` once ``GET /whoami`` answered (None until then)."""
        return self._core.caller

    @property
    def connection(self) -> Connection:
        """``connected`` (stream open), ``syncing`` (every call asks circuitlog), ``offline`` (local breakers)."""
        return self._core.connection

    def stats(self) -> dict[str, object]:
        with self._core.lock:
            return self._core.stats()
