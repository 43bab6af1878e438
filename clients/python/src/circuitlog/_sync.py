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
from typing import TYPE_CHECKING, Any, Callable, overload

import httpx

from ._classify import Classify
from ._core import REFUSALS, ClientBase, F, IsFailure, SharedLookup, T, call_limit, learn_whoami, log
from ._errors import CircuitlogUnavailableError
from ._transport import SyncTransport, shutdown_socket
from ._wire import Answer, Outcome, TransportError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._core import CallOptions, P

_clients: weakref.WeakSet[Client] = weakref.WeakSet()  # closed at interpreter exit


class Client(ClientBase):
    """A circuitlog client. Calls on circuits the local view shows closed are decided here;
    open and half-open ones are asked of circuitlog; outcomes go in batches to ``POST /outcomes``.
    """

    def _start(self) -> None:
        self._transport = self._make_transport()
        self._executor: ThreadPoolExecutor | None = None
        self._stop = False
        self._wake_stream = threading.Event()
        self._core.wake_stream = self._wake_stream.set
        self._response: httpx.Response | None = None
        self._threads: list[threading.Thread] = []
        self._pid = -1
        self._close_error: Exception | None = None
        self._closed = threading.Event()
        _clients.add(self)
        self._ensure_running()

    # -- public API -------------------------------------------------------------------------

    @overload
    def call(
        self,
        name: str,
        fn: Callable[[], T],
        *,
        timeout: float | None = ...,
        deadline: float | None = ...,
        is_failure: IsFailure | None = ...,
        classify: Classify | None = ...,
    ) -> T: ...
    @overload
    def call(
        self,
        name: str,
        fn: Callable[[], T],
        *,
        fallback: Callable[[Exception], F],
        timeout: float | None = ...,
        deadline: float | None = ...,
        is_failure: IsFailure | None = ...,
        classify: Classify | None = ...,
    ) -> T | F: ...

    def call(
        self,
        name: str,
        fn: Callable[[], Any],
        *,
        fallback: Callable[[Exception], Any] | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        is_failure: IsFailure | None = None,
        classify: Classify | None = None,
    ) -> Any:
        """Run ``fn()`` if the circuit admits a call, and record its outcome.

        Without a fallback, ``fn``'s own error is re-raised; a refusal raises ``CircuitOpenError``,
        or ``CircuitlogUnavailableError`` when circuitlog is unreachable and ``fail_open`` is False.
        """
        core = self._core
        limit = call_limit(name, timeout, deadline) if timeout is not None or deadline is not None else None
        with core.lock:
            if core.closing or (core.reachable and len(core.items) >= core.options.max_queued_outcomes):
                self._wait_for_room()  # the hot path stays inline: a call decided here costs a few µs in all
            local, refusal = core.begin_call(name)
        try:
            if not local:
                refusal = self._refusal(name)
            if refusal is not None:
                if fallback is None:
                    raise refusal
                return fallback(refusal)
            error: Exception | None = None
            result: Any = None
            started = time.perf_counter()
            try:
                result = fn() if limit is None else self._with_timeout(fn, *limit)
            except Exception as exc:
                error = exc
            return core.settle(name, started, error, result, is_failure, fallback, classify)
        finally:
            with core.lock:
                core.calls_running -= 1
                if core.calls_running == 0 and core.closing:
                    core.lock.notify_all()

    def protect(self, name: str, **options: Unpack[CallOptions]) -> Callable[[Callable[P, T]], Callable[P, T]]:
        """Decorator: every call of the function goes through ``call(name, ...)`` with these options."""

        def decorate(fn: Callable[P, T]) -> Callable[P, T]:
            @functools.wraps(fn)
            def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
                result: T = self.call(name, lambda: fn(*args, **kwargs), **options)
                return result

            return wrapper

        return decorate

    def allowed(self, name: str) -> bool:
        """May a call go ahead now? In half-open a True holds a probe slot: report it with ``record``."""
        with self._core.lock:
            self._core.refuse_if_closing()
            decided = self._core.decide_locally(name)
        return decided if decided is not None else self._refusal(name) is None

    def record(self, name: str, success: bool, duration_ms: float | None = None) -> None:
        """Record the outcome of a call made without ``call()``; waits while the queue is full."""
        duration = self._core.checked_outcome(name, success, duration_ms)
        self._ensure_running()
        with self._core.lock:
            self._wait_for_room()
            self._core.push(name, success, duration)

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
            core.flush_now = True
            core.retry_at = 0.0
            core.lock.notify_all()
            while core.pending > 0 and time.monotonic() < deadline and self._pid == os.getpid():
                core.lock.wait(max(0.0, deadline - time.monotonic()))
            pending = core.pending
            self._stop = True
            core.lock.notify_all()
        self._shutdown()
        self._close_error = core.close_error(pending)
        self._closed.set()
        if self._close_error is not None:
            raise self._close_error

    def __enter__(self) -> Client:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _make_transport(self) -> SyncTransport:
        o = self._core.options
        return SyncTransport(o.url, self._tokens, o.request_timeout, o.stream_idle_timeout, o.max_response_bytes)

    # -- calls ------------------------------------------------------------------------------

    def _wait_for_room(self) -> None:
        """Under lock: refuse a closing client's calls; wait while the queue is full (backpressure)."""
        core = self._core
        core.refuse_if_closing()
        while core.reachable and core.full and not self._stop:
            core.lock.wait(0.5)

    def _refusal(self, name: str) -> Exception | None:
        """Ask circuitlog (or, offline, the local breaker) whether a call may go ahead: its refusal, or None."""
        try:
            self._admit_remotely(name)
        except REFUSALS as refusal:
            return refusal
        return None

    def _admit_remotely(self, name: str) -> None:
        core = self._core
        self._ensure_running()
        while True:
            with core.lock:
                lookup, mine = core.lookup(name, threading.Event)
            if lookup is None:
                return
            if mine:
                return self._ask(name, lookup)
            # Concurrent lookups of one circuit share one request (see SharedLookup).
            lookup.done.wait()  # bounded by that request's deadline
            if core.admitted_by(lookup):
                return

    def _ask(self, name: str, mine: SharedLookup[threading.Event]) -> None:
        answer: Answer | TransportError
        try:
            try:
                answer = self._transport.allowed(name, self._core.caller)
            except TransportError as error:
                answer = error
            self._core.take_answer(name, mine, answer)
        finally:
            self._core.end_lookup(name, mine)

    def _with_timeout(self, fn: Callable[[], Any], seconds: float, expired: Exception) -> Any:
        # Python cannot stop a thread: past the limit (the client's timeout, or the caller's deadline)
        # the call fails with ``expired`` and its late result is ignored.
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                self._core.options.timeout_workers, thread_name_prefix="circuitlog-call"
            )
        future = self._executor.submit(fn)
        try:
            return future.result(seconds)
        except FutureTimeout:
            future.cancel()
            raise expired from None

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
                self._core.loop_failed("thread")
                time.sleep(1.0)

    def _after_fork(self) -> None:
        """In a forked child: nothing of the parent's threads or sockets is used; a new stream starts on next use."""
        super()._after_fork()
        self._wake_stream = threading.Event()
        self._core.wake_stream = self._wake_stream.set
        self._closed = threading.Event()
        self._response = None
        self._executor = None
        self._threads = []
        self._transport = self._make_transport()  # the parent's sockets stay the parent's

    def _stream_loop(self) -> None:
        core = self._core
        while not self._stop:
            try:
                if core.ask_whoami:  # the default caller, before the stream opens (issue 30)
                    learn_whoami(core, self._transport.whoami())
                res = self._transport.open_stream(core.last_event_id)
            except TransportError as error:
                if not self._stop:
                    self._sleep(core.stream_failed(error))
                continue
            self._response = res
            parser = core.stream_started()
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
            delay = core.stream_ended()
            if delay is not None:
                self._sleep(delay)

    def _sleep(self, seconds: float) -> None:
        self._wake_stream.wait(seconds)
        self._wake_stream.clear()

    def _flush_loop(self) -> None:
        core, o = self._core, self._core.options
        while True:
            with core.lock:
                while (
                    not self._stop and not core.policy_wanted and (not core.items or time.monotonic() < core.retry_at)
                ):
                    wait = core.retry_at - time.monotonic()
                    core.lock.wait(wait if wait > 0 else None)
                if self._stop:
                    return
                deadline = time.monotonic() + o.flush_delay
                while (
                    core.items
                    and len(core.items) < o.flush_at
                    and not core.flush_now
                    and not self._stop
                    and time.monotonic() < deadline
                ):
                    core.lock.wait(deadline - time.monotonic())
                batch = core.take_batch() if core.items else []
                wanted = core.take_wanted()
            for name in wanted:
                try:
                    json = self._transport.circuit(name)
                except TransportError:
                    continue  # a failed refresh keeps the policy known so far; calls are not affected
                with core.lock:
                    core.policy_fetched(name, json)
            if batch:
                self._send(batch)

    def _send(self, batch: list[Outcome]) -> None:
        error = self._post(batch, with_at=True)
        if error is not None and self._core.clock_ahead(error):
            error = self._post(batch, with_at=False)
        self._core.sent(batch, error)

    def _post(self, batch: list[Outcome], with_at: bool) -> TransportError | None:
        try:
            self._transport.post_outcomes(self._core.outcomes_body(batch, with_at))
        except TransportError as error:
            return error
        return None

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


def _close_at_exit() -> None:
    """At interpreter exit, deliver what clients that were never closed still hold (each within its close_timeout)."""
    for client in list(_clients):
        if not client._core.closing and client._pid == os.getpid():
            try:
                client.close()
            except CircuitlogUnavailableError as error:
                log.warning("circuitlog: at exit: %s", error)


atexit.register(_close_at_exit)
