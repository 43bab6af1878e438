"""The asyncio client: the same design as ``Client``; two tasks on the running loop stream and flush."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import time
import weakref
from collections.abc import Awaitable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, TypeVar, overload

import httpx

from ._core import Connection, Core, SharedLookup, TransitionCallback, backoff_delay, log
from ._errors import CallTimeoutError, CircuitlogRequestError, CircuitlogUnavailableError, CircuitOpenError
from ._errors import ClientClosedError as _Closed
from ._names import check_name
from ._sse import SseMessage, SseParser
from ._sync import IsFailure, classify, options_from
from ._transport import AsyncTransport
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
_REFUSALS = (CircuitOpenError, CircuitlogUnavailableError)
_clients: weakref.WeakSet[AsyncClient] = weakref.WeakSet()


class AsyncClient:
    """The asyncio client. Use it from one event loop (``async with AsyncClient(url) as breakers``)."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        fail_open: bool = True,
        caller: str | None = None,
        on_transition: TransitionCallback | None = None,
        **options: Any,
    ) -> None:
        self._core = Core(options_from(url, {"token": token, "fail_open": fail_open, "caller": caller, **options}))
        self._transport = self._make_transport()
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = False
        self._retry_at = 0.0
        self._flush_now = False
        self._policy_wanted: set[str] = set()
        self._lookups: dict[str, SharedLookup[asyncio.Event]] = {}  # the GET /allowed in flight per circuit
        self._closing: asyncio.Future[None] | None = None
        if on_transition is not None:
            self._core.listeners.append(on_transition)
        _clients.add(self)

    @overload
    async def call(
        self,
        name: str,
        fn: Callable[[], Awaitable[T]],
        *,
        timeout: float | None = ...,
        is_failure: IsFailure | None = ...,
    ) -> T: ...
    @overload
    async def call(
        self,
        name: str,
        fn: Callable[[], Awaitable[T]],
        *,
        fallback: Callable[[Exception], Awaitable[F]],
        timeout: float | None = ...,
        is_failure: IsFailure | None = ...,
    ) -> T | F: ...
    @overload
    async def call(
        self,
        name: str,
        fn: Callable[[], Awaitable[T]],
        *,
        fallback: Callable[[Exception], F],
        timeout: float | None = ...,
        is_failure: IsFailure | None = ...,
    ) -> T | F: ...

    async def call(
        self,
        name: str,
        fn: Callable[[], Awaitable[Any]],
        *,
        fallback: Callable[[Exception], Any] | None = None,
        timeout: float | None = None,
        is_failure: IsFailure | None = None,
    ) -> Any:
        """Await ``fn()`` if the circuit admits a call, and record its outcome (see ``Client.call``)."""
        core = self._core
        self._ensure_running()
        if core.closing:
            raise _Closed("circuitlog client is closed")
        while core.reachable and core.full and not self._stop:
            await self._wait_for_space()
        with core.lock:
            e = core.entries.get(name)
            local = e is not None and e.local_ok and e.generation == core.trusted_generation
            core.calls_running += 1
            throttled = None
            if local:
                core.counts["local_decisions"] += 1
                if e is not None and core.clock_ms() >= e.policy_due_at:
                    e.policy_due_at = core.clock_ms() + 1_000
                    self._policy_wanted.add(name)
                throttled = None if e is None else core.throttle_locally(name, e)
        try:
            if throttled is not None:
                if fallback is not None:
                    return await _maybe_await(fallback(throttled))
                raise throttled
            if not local:
                try:
                    await self._admit_remotely(name)
                except _REFUSALS as refusal:
                    if fallback is not None:
                        return await _maybe_await(fallback(refusal))
                    raise
            return await self._run(name, fn, fallback, timeout, is_failure)
        finally:
            core.calls_running -= 1
            if core.calls_running == 0 and self._idle is not None:
                self._idle.set()

    def protect(
        self,
        name: str,
        *,
        fallback: Callable[[Exception], Any] | None = None,
        timeout: float | None = None,
        is_failure: IsFailure | None = None,
    ) -> Callable[[Callable[P, Awaitable[T]]], Callable[P, Awaitable[T]]]:
        """Decorator for ``async def`` functions: every call goes through ``call(name, ...)``."""

        def decorate(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
            @functools.wraps(fn)
            async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
                run: Callable[[], Awaitable[T]] = lambda: fn(*args, **kwargs)  # noqa: E731
                if fallback is None:
                    return await self.call(name, run, timeout=timeout, is_failure=is_failure)
                return await self.call(name, run, fallback=fallback, timeout=timeout, is_failure=is_failure)

            return wrapper

        return decorate

    async def allowed(self, name: str) -> bool:
        """May a call go ahead now? In half-open a True holds a probe slot: report it with ``record``."""
        core = self._core
        self._ensure_running()
        if core.closing:
            raise _Closed("circuitlog client is closed")
        e = core.entries.get(name)
        if e is not None and e.local_ok and e.generation == core.trusted_generation:
            with core.lock:
                core.counts["local_decisions"] += 1
                return core.throttle_locally(name, e) is None
        try:
            await self._admit_remotely(name)
            return True
        except _REFUSALS:
            return False

    async def record(self, name: str, success: bool, duration_ms: float | None = None) -> None:
        """Record the outcome of a call made without ``call()``; waits while the queue is full."""
        core = self._core
        if name not in core.entries:
            check_name(name)
        if not isinstance(success, bool):
            raise TypeError("record(): success must be a bool")
        if duration_ms is not None and not (isinstance(duration_ms, (int, float)) and 0 <= duration_ms < float("inf")):
            raise TypeError("record(): duration_ms must be a finite number >= 0")
        self._ensure_running()
        if core.closing:
            raise _Closed("circuitlog client is closed")
        while core.reachable and core.full and not self._stop:
            await self._wait_for_space()
        self._push(name, success, None if duration_ms is None else float(duration_ms))

    def state(self, name: str) -> str | None:
        with self._core.lock:
            return self._core.state(name)

    def on_transition(self, callback: TransitionCallback) -> Callable[[], None]:
        """Call ``callback`` (on the loop) for every transition; returns an unsubscribe function."""
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
        return self._core.connection

    async def ready(self, timeout: float = 10.0) -> bool:
        """Wait until the event stream is open; False if it was not within ``timeout`` seconds."""
        self._ensure_running()
        deadline = time.monotonic() + timeout
        while self._core.connection != "connected":
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    def stats(self) -> dict[str, object]:
        with self._core.lock:
            return self._core.stats()

    async def close(self) -> None:
        """Refuse new calls, wait for running ones, return once circuitlog acknowledged every outcome.

        Raises ``CircuitlogUnavailableError`` naming how many were not, after ``close_timeout``.
        """
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._shutdown())
        await asyncio.shield(self._closing)

    async def __aenter__(self) -> AsyncClient:
        self._ensure_running()
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    def _make_transport(self) -> AsyncTransport:
        o = self._core.options
        return AsyncTransport(o.url, o.token, o.request_timeout, o.stream_idle_timeout, o.max_response_bytes)

    # -- internals --------------------------------------------------------------------------

    _idle: asyncio.Event | None = None
    _wake: asyncio.Event
    _space: asyncio.Event

    def _ensure_running(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is loop or self._stop:
            return
        self._loop = loop
        self._wake, self._space, self._idle = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self._tasks = [
            loop.create_task(self._guarded(self._stream_loop)),
            loop.create_task(self._guarded(self._flush_loop)),
        ]

    async def _guarded(self, loop: Callable[[], Awaitable[None]]) -> None:
        """Run a background loop; a bug in it is logged and the loop starts again, rather than silently ending."""
        while not self._stop:
            try:
                await loop()
                return
            except Exception:
                log.exception("circuitlog: background task failed; restarting it")
                self._link(False, self._core.reachable)  # trust nothing until resynced
                await asyncio.sleep(1.0)

    async def _wait_for_space(self) -> None:
        self._space.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._space.wait(), 0.5)

    def _push(self, name: str, success: bool, duration_ms: float | None) -> None:
        with self._core.lock:
            wake = self._core.push(name, success, duration_ms)
        if wake:
            self._wake.set()

    def _link(self, stream_up: bool, reachable: bool) -> None:
        with self._core.lock:
            changed = self._core.set_link(stream_up, reachable)
        if changed is not None:
            self._space.set()
            self._core.emit_connection(changed)

    async def _admit_remotely(self, name: str) -> None:
        core = self._core
        while True:
            with core.lock:
                generation, seq = core.before_ask(name)
                if not core.reachable:
                    core.admit_offline(name)
                    return
            shared = self._lookups.get(name)
            if shared is None:
                break
            # Concurrent lookups of one circuit share one request (see SharedLookup).
            await shared.done.wait()  # bounded by that request's deadline
            if shared.admits_all:
                with core.lock:
                    core.counts["server_checks"] += 1  # decided by circuitlog's answer, shared
                return
        mine = self._lookups[name] = SharedLookup(asyncio.Event())
        try:
            await self._ask(name, generation, seq, mine)
        finally:
            self._lookups.pop(name, None)
            mine.done.set()

    async def _ask(self, name: str, generation: int, seq: int, mine: SharedLookup[asyncio.Event]) -> None:
        core = self._core
        try:
            answer = await self._transport.allowed(name, core.caller)
        except TransportError as error:
            if error.kind == "rejected":
                raise CircuitlogRequestError(error.status or 0, error.problem) from error
            self._link(core.stream_up, False)
            self._stream_wake()
            with core.lock:
                core.admit_offline(name)
            return
        self._link(core.stream_up, True)
        with core.lock:
            mine.answer = answer
            core.answered(name, answer, generation, seq)

    async def _run(
        self,
        name: str,
        fn: Callable[[], Awaitable[Any]],
        fallback: Callable[[Exception], Any] | None,
        timeout: float | None,
        is_failure: IsFailure | None,
    ) -> Any:
        error: Exception | None = None
        result: Any = None
        started = time.perf_counter()
        try:
            result = await (fn() if timeout is None else _with_timeout(name, fn, timeout))
        except Exception as exc:
            error = exc
        duration_ms = (time.perf_counter() - started) * 1000
        failed, classifier_error = classify(error, result, is_failure)
        self._push(name, not failed, duration_ms)
        if classifier_error is not None:
            raise classifier_error
        if error is None:
            return result
        if fallback is not None:
            return await _maybe_await(fallback(error))
        raise error

    _stream_waker: asyncio.Event | None = None

    def _stream_wake(self) -> None:
        if self._stream_waker is not None:
            self._stream_waker.set()

    async def _sleep(self, seconds: float) -> None:
        self._stream_waker = asyncio.Event()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stream_waker.wait(), seconds)
        self._stream_waker = None

    async def _stream_loop(self) -> None:
        core, o = self._core, self._core.options
        attempt = 0
        while not self._stop:
            try:
                res = await self._transport.open_stream(core.last_event_id)
            except TransportError as error:
                self._link(False, core.reachable if error.kind == "rejected" else False)
                await self._sleep(backoff_delay(attempt, o.reconnect_max_delay))
                attempt += 1
                continue
            opened = time.monotonic()
            with core.lock:
                changed = core.stream_opened()
            self._retry_at = 0.0
            self._wake.set()
            self._space.set()
            core.emit_connection(changed)
            parser = SseParser(self._on_message, o.max_sse_line_bytes, o.max_sse_event_bytes)
            try:
                async for chunk in res.aiter_bytes():
                    parser.push(chunk)
            except (httpx.HTTPError, OSError):
                pass  # reset, or idle past stream_idle_timeout: the stream has ended either way
            finally:
                await res.aclose()
            self._link(False, core.reachable)
            if time.monotonic() - opened >= 1.0:
                attempt = 0
                continue
            await self._sleep(backoff_delay(attempt, o.reconnect_max_delay))
            attempt += 1

    def _on_message(self, message: SseMessage) -> None:
        core = self._core
        if message.oversized:
            with core.lock:
                core.counts["events_discarded"] += 1
                core.resync()
            log.warning("circuitlog: discarded an oversized stream event")
            return
        event = parse_event(message.event, message.data, message.id)
        if event is None:
            return
        with core.lock:
            core.apply(event)
        if not isinstance(event, ResetEvent):
            core.emit(event)

    async def _wait_wake(self, timeout: float | None) -> None:
        self._wake.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    async def _flush_loop(self) -> None:
        core, o = self._core, self._core.options
        attempt = 0
        while not self._stop:
            now = time.monotonic()
            if not self._policy_wanted and (not core.items or now < self._retry_at):
                await self._wait_wake(self._retry_at - now if self._retry_at > now else None)
                continue
            deadline = time.monotonic() + o.flush_delay
            while core.items and len(core.items) < o.flush_at and not self._flush_now and not self._stop:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                await self._wait_wake(left)
            with core.lock:
                batch = core.take_batch() if core.items else []
            self._space.set()
            wanted, self._policy_wanted = self._policy_wanted, set()
            for name in wanted:
                await self._fetch_policy(name)
            if batch:
                attempt = await self._send(batch, attempt)

    async def _send(self, batch: list[Any], attempt: int) -> int:
        core = self._core
        try:
            try:
                await self._transport.post_outcomes(outcomes_body(batch, caller=core.caller))
            except TransportError as error:
                if not only_at_refused(error):
                    raise
                # This host's clock runs ahead of circuitlog's: send the batch as of now instead.
                log.warning("circuitlog: outcome times refused (clock ahead of circuitlog's?); sent without them")
                await self._transport.post_outcomes(outcomes_body(batch, with_at=False, caller=core.caller))
        except TransportError as error:
            refused = refused_circuits(error)
            if refused is not None:
                with core.lock:
                    core.warn_refused(core.batch_refused(batch, refused), error)
                self._space.set()
                return attempt  # circuitlog is up and took nothing: the rest goes again at once
            if error.kind == "rejected":
                with core.lock:
                    core.batch_done(batch, "rejected")
                log.error("circuitlog: a batch of %d outcomes was refused: %s", len(batch), error)
                return attempt
            with core.lock:
                core.batch_done(batch, "failed")
            self._link(core.stream_up, False)
            self._stream_wake()
            self._retry_at = time.monotonic() + backoff_delay(attempt, core.options.reconnect_max_delay)
            return attempt + 1
        with core.lock:
            core.batch_done(batch, "delivered")
        self._space.set()
        self._link(core.stream_up, True)
        return 0

    async def _fetch_policy(self, name: str) -> None:
        try:
            json = await self._transport.circuit(name)
        except TransportError:
            return
        with self._core.lock:
            self._core.policy_fetched(name, json)

    async def _shutdown(self) -> None:
        core = self._core
        core.closing = True
        deadline = time.monotonic() + core.options.close_timeout
        if self._loop is not None:
            while core.calls_running > 0 and time.monotonic() < deadline and self._idle is not None:
                self._idle.clear()
                try:
                    await asyncio.wait_for(self._idle.wait(), max(0.0, deadline - time.monotonic()))
                except asyncio.TimeoutError:
                    break
            self._flush_now = True
            self._retry_at = 0.0
            self._wake.set()
            while core.pending > 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
        pending = core.pending
        self._stop = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._transport.aclose()
        if pending > 0:
            raise CircuitlogUnavailableError(
                f"close(): {pending} outcome(s) not acknowledged by circuitlog within {core.options.close_timeout} s"
            )

    def _after_fork(self) -> None:
        self._core.after_fork()
        self._loop = None
        self._tasks = []
        self._lookups = {}
        self._transport = self._make_transport()


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def _with_timeout(name: str, fn: Callable[[], Awaitable[Any]], timeout: float) -> Any:
    task = asyncio.ensure_future(fn())
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()  # past the deadline the call is cancelled and fails
        raise CallTimeoutError(name, timeout)
    return task.result()


def after_fork_in_child() -> None:
    for client in list(_clients):
        client._after_fork()
