"""The synchronous client: safe to share between threads; two daemon threads stream and flush."""

from __future__ import annotations

import atexit
import functools
import os
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, TypeVar, Union, overload

import httpx

from . import _domain as d
from ._core import Connection, Core, Options, SharedLookup, TransitionCallback, backoff_delay, log
from ._errors import CallTimeoutError, CircuitlogRequestError, CircuitlogUnavailableError, CircuitOpenError
from ._errors import ClientClosedError as _Closed
from ._names import check_name
from ._sse import SseMessage, SseParser
from ._transport import SyncTransport, shutdown_socket
from ._wire import ResetEvent, TransportError, only_at_refused, outcomes_body, parse_event, refused_circuits

if TYPE_CHECKING:
    import sys

    if sys.version_info >= (3, 10):
        from typing import ParamSpec
    else:
        from typing_extensions import ParamSpec
    P = ParamSpec("P")

T = TypeVar("T")
F = TypeVar("F")
IsFailure = Callable[[Union[BaseException, None], Any], bool]
_MIN_HEALTHY_STREAM_S = 1.0
_REFUSALS = (CircuitOpenError, CircuitlogUnavailableError)
_clients: weakref.WeakSet[Client] = weakref.WeakSet()


def options_from(url: str, kwargs: dict[str, Any]) -> Options:
    defaults = kwargs.pop("local_defaults", None)
    o = Options(url=url, **kwargs)
    if defaults is not None:
        o.local_defaults = defaults if isinstance(defaults, d.Policy) else d.Policy(**defaults)
    o.flush_at = min(o.flush_at, o.max_batch)
    return o


class Client:
    """A circuitlog client. Calls on circuits the local view shows closed are decided here;
    open and half-open ones are asked of circuitlog; outcomes go in batches to ``POST /outcomes``.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        fail_open: bool = True,
        caller: str | None = None,
        on_transition: TransitionCallback | None = None,
        timeout_workers: int = 32,
        **options: Any,
    ) -> None:
        self._core = Core(options_from(url, {"token": token, "fail_open": fail_open, "caller": caller, **options}))
        self._transport = self._make_transport()
        self._timeout_workers = timeout_workers
        self._executor: ThreadPoolExecutor | None = None
        self._stop = False
        self._retry_at = 0.0  # monotonic time of the next batch retry
        self._flush_now = False
        self._wake_stream = threading.Event()
        self._response: httpx.Response | None = None
        self._threads: list[threading.Thread] = []
        self._pid = -1
        self._policy_wanted: set[str] = set()
        self._lookups: dict[str, SharedLookup[threading.Event]] = {}  # the GET /allowed in flight per circuit
        self._close_error: Exception | None = None
        self._closed = threading.Event()
        if on_transition is not None:
            self._core.listeners.append(on_transition)
        _clients.add(self)
        self._ensure_running()

    # -- public API -------------------------------------------------------------------------

    @overload
    def call(
        self, name: str, fn: Callable[[], T], *, timeout: float | None = ..., is_failure: IsFailure | None = ...
    ) -> T: ...
    @overload
    def call(
        self,
        name: str,
        fn: Callable[[], T],
        *,
        fallback: Callable[[Exception], F],
        timeout: float | None = ...,
        is_failure: IsFailure | None = ...,
    ) -> T | F: ...

    def call(
        self,
        name: str,
        fn: Callable[[], Any],
        *,
        fallback: Callable[[Exception], Any] | None = None,
        timeout: float | None = None,
        is_failure: IsFailure | None = None,
    ) -> Any:
        """Run ``fn()`` if the circuit admits a call, and record its outcome.

        Without a fallback, ``fn``'s own error is re-raised; a refusal raises ``CircuitOpenError``,
        or ``CircuitlogUnavailableError`` when circuitlog is unreachable and ``fail_open`` is False.
        """
        core = self._core
        with core.lock:
            if core.closing:
                raise _Closed("circuitlog client is closed")
            while core.reachable and len(core.items) >= core.options.max_queued_outcomes and not self._stop:
                core.lock.wait(0.5)  # backpressure: wait for room
            e = core.entries.get(name)
            local = e is not None and e.local_ok and e.generation == core.trusted_generation
            core.calls_running += 1
            throttled = None
            if local:
                core.counts["local_decisions"] += 1
                if e is not None and core.clock_ms() >= e.policy_due_at:
                    self._want_policy(name)
                throttled = None if e is None else core.throttle_locally(name, e)
        try:
            if throttled is not None:
                if fallback is not None:
                    return fallback(throttled)
                raise throttled
            if not local:
                try:
                    self._admit_remotely(name)
                except _REFUSALS as refusal:
                    if fallback is not None:
                        return fallback(refusal)
                    raise
            return self._run(name, fn, fallback, timeout, is_failure)
        finally:
            with core.lock:
                core.calls_running -= 1
                if core.calls_running == 0 and core.closing:
                    core.lock.notify_all()

    def protect(
        self,
        name: str,
        *,
        fallback: Callable[[Exception], Any] | None = None,
        timeout: float | None = None,
        is_failure: IsFailure | None = None,
    ) -> Callable[[Callable[P, T]], Callable[P, T]]:
        """Decorator: every call of the function goes through ``call(name, ...)``."""

        def decorate(fn: Callable[P, T]) -> Callable[P, T]:
            @functools.wraps(fn)
            def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
                run: Callable[[], T] = lambda: fn(*args, **kwargs)  # noqa: E731
                if fallback is None:
                    return self.call(name, run, timeout=timeout, is_failure=is_failure)
                return self.call(name, run, fallback=fallback, timeout=timeout, is_failure=is_failure)

            return wrapper

        return decorate

    def allowed(self, name: str) -> bool:
        """May a call go ahead now? In half-open a True holds a probe slot: report it with ``record``."""
        core = self._core
        with core.lock:
            if core.closing:
                raise _Closed("circuitlog client is closed")
            e = core.entries.get(name)
            if e is not None and e.local_ok and e.generation == core.trusted_generation:
                core.counts["local_decisions"] += 1
                return core.throttle_locally(name, e) is None
        try:
            self._admit_remotely(name)
            return True
        except _REFUSALS:
            return False

    def record(self, name: str, success: bool, duration_ms: float | None = None) -> None:
        """Record the outcome of a call made without ``call()``; waits while the queue is full."""
        core = self._core
        if name not in core.entries:
            check_name(name)
        if not isinstance(success, bool):
            raise TypeError("record(): success must be a bool")
        if duration_ms is not None and not (isinstance(duration_ms, (int, float)) and 0 <= duration_ms < float("inf")):
            raise TypeError("record(): duration_ms must be a finite number >= 0")
        self._ensure_running()
        with core.lock:
            if core.closing:
                raise _Closed("circuitlog client is closed")
            while core.reachable and core.full and not self._stop:
                core.lock.wait(0.5)
            if core.push(name, success, None if duration_ms is None else float(duration_ms)):
                core.lock.notify_all()

    def state(self, name: str) -> str | None:
        """The state this client believes now (a forced state shows as that state); None if unknown."""
        with self._core.lock:
            return self._core.state(name)

    def on_transition(self, callback: TransitionCallback) -> Callable[[], None]:
        """Call ``callback`` (on the stream's thread) for every transition; returns an unsubscribe function."""
        self._core.listeners.append(callback)
        return lambda: self._core.listeners.remove(callback) if callback in self._core.listeners else None

    def on_connection(self, callback: Callable[[Connection], None]) -> Callable[[], None]:
        self._core.connection_listeners.append(callback)
        return lambda: self._core.connection_listeners.remove(callback)

    @property
    def caller(self) -> str:
        """This client's caller id (option ``caller``, default: the host name): on each outcome and admission."""
        return self._core.caller

    @property
    def connection(self) -> Connection:
        """``connected`` (stream open), ``syncing`` (every call asks circuitlog), ``offline`` (local breakers)."""
        return self._core.connection

    def ready(self, timeout: float = 10.0) -> bool:
        """Wait until the event stream is open; False if it was not within ``timeout`` seconds."""
        self._ensure_running()
        deadline = time.monotonic() + timeout
        with self._core.lock:
            while self._core.connection != "connected":
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._core.lock.wait(left)
        return True

    def stats(self) -> dict[str, object]:
        with self._core.lock:
            return self._core.stats()

    def close(self) -> None:
        """Refuse new calls, wait for running ones, return once circuitlog acknowledged every outcome.

        Raises ``CircuitlogUnavailableError`` naming how many were not, after ``close_timeout``.
        """
        core = self._core
        with core.lock:
            first = not core.closing
            core.closing = True
        if not first:
            self._closed.wait()
            if self._close_error is not None:
                raise self._close_error
            return
        deadline = time.monotonic() + core.options.close_timeout
        with core.lock:
            while core.calls_running > 0 and time.monotonic() < deadline:
                core.lock.wait(deadline - time.monotonic())
            self._flush_now = True
            self._retry_at = 0.0
            core.lock.notify_all()
            while core.pending > 0 and time.monotonic() < deadline and self._pid == os.getpid():
                core.lock.wait(max(0.0, deadline - time.monotonic()))
            pending = core.pending
            self._stop = True
            core.lock.notify_all()
        self._shutdown()
        if pending > 0:
            self._close_error = CircuitlogUnavailableError(
                f"close(): {pending} outcome(s) not acknowledged by circuitlog within {core.options.close_timeout} s"
            )
        self._closed.set()
        if self._close_error is not None:
            raise self._close_error

    def __enter__(self) -> Client:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _make_transport(self) -> SyncTransport:
        o = self._core.options
        return SyncTransport(o.url, o.token, o.request_timeout, o.stream_idle_timeout, o.max_response_bytes)

    # -- calls ------------------------------------------------------------------------------

    def _admit_remotely(self, name: str) -> None:
        core = self._core
        self._ensure_running()
        while True:
            with core.lock:
                generation, seq = core.before_ask(name)
                if not core.reachable:
                    core.admit_offline(name)
                    return
                entry = core.entries[name]
                if entry.local_ok and entry.generation == core.trusted_generation:
                    core.counts["local_decisions"] += 1  # a lookup that ended since this call began left a snapshot
                    return
                shared = self._lookups.get(name)
                if shared is None:
                    mine = self._lookups[name] = SharedLookup(threading.Event())
            if shared is None:
                break
            # Concurrent lookups of one circuit share one request (see SharedLookup).
            shared.done.wait()  # bounded by that request's deadline
            if shared.admits_all:
                with core.lock:
                    core.counts["server_checks"] += 1  # decided by circuitlog's answer, shared
                return
        try:
            self._ask(name, generation, seq, mine)
        finally:
            with core.lock:
                self._lookups.pop(name, None)
            mine.done.set()

    def _ask(self, name: str, generation: int, seq: int, mine: SharedLookup[threading.Event]) -> None:
        core = self._core
        try:
            answer = self._transport.allowed(name, core.caller)
        except TransportError as error:
            if error.kind == "rejected":
                raise CircuitlogRequestError(error.status or 0, error.problem) from error
            with core.lock:
                changed = core.set_link(core.stream_up, False)
                self._wake_stream.set()
            core.emit_connection(changed)
            with core.lock:
                core.admit_offline(name)
            return
        with core.lock:
            changed = core.set_link(core.stream_up, True)
        core.emit_connection(changed)
        with core.lock:
            mine.answer = answer
            core.answered(name, answer, generation, seq)

    def _run(
        self,
        name: str,
        fn: Callable[[], Any],
        fallback: Callable[[Exception], Any] | None,
        timeout: float | None,
        is_failure: IsFailure | None,
    ) -> Any:
        error: Exception | None = None
        result: Any = None
        started = time.perf_counter()
        try:
            result = fn() if timeout is None else self._with_timeout(name, fn, timeout)
        except Exception as exc:
            error = exc
        duration_ms = (time.perf_counter() - started) * 1000
        failed, classifier_error = classify(error, result, is_failure)
        core = self._core
        with core.lock:
            if core.push(name, not failed, duration_ms):
                core.lock.notify_all()
        if classifier_error is not None:
            raise classifier_error
        if error is None:
            return result
        if fallback is not None:
            return fallback(error)
        raise error

    def _with_timeout(self, name: str, fn: Callable[[], Any], timeout: float) -> Any:
        # Python cannot stop a thread: past the deadline the call fails and its late result is ignored.
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._timeout_workers, thread_name_prefix="circuitlog-call")
        future = self._executor.submit(fn)
        try:
            return future.result(timeout)
        except FutureTimeout:
            future.cancel()
            raise CallTimeoutError(name, timeout) from None

    def _want_policy(self, name: str) -> None:
        entry = self._core.entries[name]
        entry.policy_due_at = self._core.clock_ms() + 1_000  # no second fetch while this one runs
        self._policy_wanted.add(name)

    # -- background threads -----------------------------------------------------------------

    def _ensure_running(self) -> None:
        pid = os.getpid()
        if self._pid == pid:
            return
        with self._core.lock:
            if self._pid == pid or self._stop:
                return
            self._pid = pid
            self._threads = [
                threading.Thread(
                    target=self._guarded, args=(self._stream_loop,), name="circuitlog-stream", daemon=True
                ),
                threading.Thread(target=self._guarded, args=(self._flush_loop,), name="circuitlog-flush", daemon=True),
            ]
        for t in self._threads:
            t.start()

    def _guarded(self, loop: Callable[[], None]) -> None:
        """Run a background loop; a bug in it is logged and the loop starts again, rather than silently ending."""
        while not self._stop:
            try:
                loop()
                return
            except Exception:
                log.exception("circuitlog: background thread failed; restarting it")
                with self._core.lock:
                    changed = self._core.set_link(False, self._core.reachable)  # trust nothing until resynced
                self._core.emit_connection(changed)
                time.sleep(1.0)

    def _after_fork(self) -> None:
        """In a forked child: nothing of the parent's threads or sockets is used; a new stream starts on next use."""
        self._core.after_fork()
        self._lookups = {}
        self._wake_stream = threading.Event()
        self._closed = threading.Event()
        self._response = None
        self._executor = None
        self._threads = []
        self._transport = self._make_transport()  # the parent's sockets stay the parent's

    def _stream_loop(self) -> None:
        core, o = self._core, self._core.options
        attempt = 0
        while not self._stop:
            try:
                res = self._transport.open_stream(core.last_event_id)
            except TransportError as error:
                if self._stop:
                    break
                with core.lock:
                    changed = core.set_link(False, core.reachable if error.kind == "rejected" else False)
                core.emit_connection(changed)
                self._sleep(backoff_delay(attempt, o.reconnect_max_delay))
                attempt += 1
                continue
            self._response = res
            opened = time.monotonic()
            with core.lock:
                changed = core.stream_opened()
                self._retry_at = 0.0
                core.lock.notify_all()
            core.emit_connection(changed)
            parser = SseParser(self._on_message, o.max_sse_line_bytes, o.max_sse_event_bytes)
            try:
                for chunk in res.iter_bytes():
                    parser.push(chunk)
            except (httpx.HTTPError, OSError):
                pass  # reset, or idle past stream_idle_timeout: the stream has ended either way
            finally:
                res.close()
                self._response = None
            if self._stop:
                break
            with core.lock:
                changed = core.set_link(False, core.reachable)
            core.emit_connection(changed)
            if time.monotonic() - opened >= _MIN_HEALTHY_STREAM_S:
                attempt = 0
                continue  # after a drop, try again at once, unless it keeps ending as soon as it opens
            self._sleep(backoff_delay(attempt, o.reconnect_max_delay))
            attempt += 1

    def _sleep(self, seconds: float) -> None:
        self._wake_stream.wait(seconds)
        self._wake_stream.clear()

    def _on_message(self, message: SseMessage) -> None:
        core = self._core
        if message.oversized:
            with core.lock:
                core.counts["events_discarded"] += 1
                core.resync()  # an event was missed: every circuit is snapshotted again
            log.warning("circuitlog: discarded an oversized stream event")
            return
        event = parse_event(message.event, message.data, message.id)
        if event is None:
            return
        with core.lock:
            core.apply(event)
        if not isinstance(event, ResetEvent):
            core.emit(event)

    def _flush_loop(self) -> None:
        core, o = self._core, self._core.options
        attempt = 0
        while True:
            with core.lock:
                while (
                    not self._stop and not self._policy_wanted and (not core.items or time.monotonic() < self._retry_at)
                ):
                    wait = self._retry_at - time.monotonic()
                    core.lock.wait(wait if wait > 0 else None)
                if self._stop:
                    return
                deadline = time.monotonic() + o.flush_delay
                while (
                    core.items
                    and len(core.items) < o.flush_at
                    and not self._flush_now
                    and not self._stop
                    and time.monotonic() < deadline
                ):
                    core.lock.wait(deadline - time.monotonic())
                batch = core.take_batch() if core.items else []
                wanted, self._policy_wanted = self._policy_wanted, set()
            for name in wanted:
                self._fetch_policy(name)
            if batch:
                attempt = self._send(batch, attempt)

    def _send(self, batch: list[Any], attempt: int) -> int:
        core = self._core
        try:
            try:
                self._transport.post_outcomes(outcomes_body(batch, caller=core.caller))
            except TransportError as error:
                if not only_at_refused(error):
                    raise
                # This host's clock runs ahead of circuitlog's: send the batch as of now instead.
                log.warning("circuitlog: outcome times refused (clock ahead of circuitlog's?); sent without them")
                self._transport.post_outcomes(outcomes_body(batch, with_at=False, caller=core.caller))
        except TransportError as error:
            refused = refused_circuits(error)
            if refused is not None:
                with core.lock:
                    core.warn_refused(core.batch_refused(batch, refused), error)
                return attempt  # circuitlog is up and took nothing: the rest goes again at once
            with core.lock:
                if error.kind == "rejected":
                    core.batch_done(batch, "rejected")
                    log.error("circuitlog: a batch of %d outcomes was refused: %s", len(batch), error)
                    return attempt
                changed = core.set_link(core.stream_up, False)
                core.batch_done(batch, "failed")
                self._wake_stream.set()
                self._retry_at = time.monotonic() + backoff_delay(attempt, core.options.reconnect_max_delay)
            core.emit_connection(changed)
            return attempt + 1
        with core.lock:
            core.batch_done(batch, "delivered")
            changed = core.set_link(core.stream_up, True)
        core.emit_connection(changed)
        return 0

    def _fetch_policy(self, name: str) -> None:
        try:
            json = self._transport.circuit(name)
        except TransportError:
            return  # a failed refresh keeps the policy known so far; calls are not affected
        with self._core.lock:
            self._core.policy_fetched(name, json)

    def _shutdown(self) -> None:
        self._wake_stream.set()
        res = self._response
        if res is not None:
            shutdown_socket(res)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(2.0)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        self._transport.close()


def classify(error: BaseException | None, result: Any, is_failure: IsFailure | None) -> tuple[bool, Exception | None]:
    """(failed, error raised by is_failure). A timed-out call is a failure whatever ``is_failure`` says."""
    if isinstance(error, CallTimeoutError):
        return True, None
    if is_failure is None:
        return error is not None, None
    try:
        return bool(is_failure(error, None if error is not None else result)), None
    except Exception as exc:
        return True, exc


def _close_at_exit() -> None:
    """At interpreter exit, deliver what clients that were never closed still hold (each within its close_timeout)."""
    for client in list(_clients):
        if not client._core.closing and client._pid == os.getpid():
            try:
                client.close()
            except CircuitlogUnavailableError as error:
                log.warning("circuitlog: at exit: %s", error)


atexit.register(_close_at_exit)


def _after_fork_in_child() -> None:
    for client in list(_clients):
        client._after_fork()
    from . import _async

    _async.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
