"""The asyncio client: the same design as ``Client``; two tasks on the running loop stream and flush."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import time
from collections.abc import Awaitable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, overload

import httpx

from ._classify import Classify
from ._core import REFUSALS, ClientBase, F, IsFailure, T, call_limit, learn_whoami
from ._transport import AsyncTransport
from ._wire import Outcome, TransportError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._core import CallOptions, P


class AsyncClient(ClientBase):
    """The asyncio client. Use it from one event loop (``async with AsyncClient(url) as breakers``)."""

    def _start(self) -> None:
        self._transport = self._make_transport()
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = False
        self._closing: asyncio.Future[None] | None = None
        # The loop's events, made once it runs (_ensure_running); the core sets them through its hooks.
        self._idle: asyncio.Event | None = None
        self._wake: asyncio.Event | None = None
        self._space: asyncio.Event | None = None
        self._stream_waker: asyncio.Event | None = None
        self._core.room = lambda: self._space.set() if self._space is not None else None
        self._core.wake = lambda: self._wake.set() if self._wake is not None else None
        self._core.wake_stream = lambda: self._stream_waker.set() if self._stream_waker is not None else None

    @overload
    async def call(
        self,
        name: str,
        fn: Callable[[], Awaitable[T]],
        *,
        timeout: float | None = ...,
        deadline: float | None = ...,
        is_failure: IsFailure | None = ...,
        classify: Classify | None = ...,
    ) -> T: ...
    @overload
    async def call(
        self,
        name: str,
        fn: Callable[[], Awaitable[T]],
        *,
        fallback: Callable[[Exception], Awaitable[F]],
        timeout: float | None = ...,
        deadline: float | None = ...,
        is_failure: IsFailure | None = ...,
        classify: Classify | None = ...,
    ) -> T | F: ...
    @overload
    async def call(
        self,
        name: str,
        fn: Callable[[], Awaitable[T]],
        *,
        fallback: Callable[[Exception], F],
        timeout: float | None = ...,
        deadline: float | None = ...,
        is_failure: IsFailure | None = ...,
        classify: Classify | None = ...,
    ) -> T | F: ...

    async def call(
        self,
        name: str,
        fn: Callable[[], Awaitable[Any]],
        *,
        fallback: Callable[[Exception], Any] | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        is_failure: IsFailure | None = None,
        classify: Classify | None = None,
    ) -> Any:
        """Await ``fn()`` if the circuit admits a call, and record its outcome (see ``Client.call``)."""
        core = self._core
        limit = call_limit(name, timeout, deadline) if timeout is not None or deadline is not None else None
        await self._wait_for_room()
        with core.lock:
            local, refusal = core.begin_call(name)
        try:
            if not local:
                refusal = await self._refusal(name)
            if refusal is None:
                started = time.perf_counter()
                try:
                    result, error = await (fn() if limit is None else _with_timeout(fn, *limit)), None
                except Exception as exc:
                    result, error = None, exc
                except asyncio.CancelledError:
                    core.cancelled(name, started)  # the caller went away (a bare cancellation, wait_for)
                    raise
                value = core.settle(name, started, error, result, is_failure, fallback, classify)
                return await value if error is not None and inspect.isawaitable(value) else value
            if fallback is None:
                raise refusal
            return await _maybe_await(fallback(refusal))
        finally:
            core.calls_running -= 1
            if core.calls_running == 0 and self._idle is not None:
                self._idle.set()

    def protect(
        self, name: str, **options: Unpack[CallOptions]
    ) -> Callable[[Callable[P, Awaitable[T]]], Callable[P, Awaitable[T]]]:
        """Decorator for ``async def`` functions: every call goes through ``call(name, ...)`` with these options."""

        def decorate(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
            @functools.wraps(fn)
            async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
                result: T = await self.call(name, lambda: fn(*args, **kwargs), **options)
                return result

            return wrapper

        return decorate

    async def allowed(self, name: str) -> bool:
        """May a call go ahead now? In half-open a True holds a probe slot: report it with ``record``."""
        self._ensure_running()
        self._core.refuse_if_closing()
        with self._core.lock:
            decided = self._core.decide_locally(name)
        if decided is None:
            decided = await self._refusal(name) is None
        return decided

    async def record(self, name: str, success: bool, duration_ms: float | None = None) -> None:
        """Record the outcome of a call made without ``call()``; waits while the queue is full."""
        duration = self._core.checked_outcome(name, success, duration_ms)
        await self._wait_for_room()
        with self._core.lock:
            self._core.push(name, success, duration)

    async def ready(self, timeout: float = 10.0) -> bool:
        """Wait until the event stream is open; False if it was not within ``timeout`` seconds."""
        self._ensure_running()
        deadline = time.monotonic() + timeout
        while self._core.connection != "connected":
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

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
        return AsyncTransport(o.url, self._tokens, o.request_timeout, o.stream_idle_timeout, o.max_response_bytes)

    # -- internals --------------------------------------------------------------------------

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
                self._core.loop_failed("task")
                await asyncio.sleep(1.0)

    async def _wait_for_room(self) -> None:
        """Refuse a closing client's calls; wait while the queue is full (backpressure)."""
        core = self._core
        self._ensure_running()
        core.refuse_if_closing()
        while core.reachable and core.full and not self._stop and self._space is not None:
            self._space.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._space.wait(), 0.5)

    async def _refusal(self, name: str) -> Exception | None:
        """Ask circuitlog (or, offline, the local breaker) whether a call may go ahead: its refusal, or None."""
        try:
            await self._admit_remotely(name)
        except REFUSALS as refusal:
            return refusal
        return None

    async def _admit_remotely(self, name: str) -> None:
        core = self._core
        while True:
            with core.lock:
                lookup, mine = core.lookup(name, asyncio.Event)
            if lookup is None:
                return
            if not mine:
                # Concurrent lookups of one circuit share one request (see SharedLookup).
                await lookup.done.wait()  # bounded by that request's deadline
                if core.admitted_by(lookup):
                    return
                continue
            try:
                core.take_answer(name, lookup, await self._allowed(name))
            finally:
                core.end_lookup(name, lookup)
            return

    async def _allowed(self, name: str) -> Any:
        """``GET /allowed``'s answer, or the transport's error instead."""
        try:
            return await self._transport.allowed(name, self._core.caller)
        except TransportError as error:
            return error

    async def _sleep(self, seconds: float) -> None:
        self._stream_waker = asyncio.Event()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stream_waker.wait(), seconds)
        self._stream_waker = None

    async def _stream_loop(self) -> None:
        core = self._core
        while not self._stop:
            try:
                if core.ask_whoami:  # the default caller, before the stream opens (issue 30)
                    learn_whoami(core, await self._transport.whoami())
                res = await self._transport.open_stream(core.last_event_id)
            except TransportError as error:
                await self._sleep(core.stream_failed(error))
                continue
            parser = core.stream_started()
            try:
                async for chunk in res.aiter_bytes():
                    parser.push(chunk)
            except (httpx.HTTPError, OSError):
                pass  # reset, or idle past stream_idle_timeout: the stream has ended either way
            finally:
                await res.aclose()
            delay = core.stream_ended()
            if delay is not None:
                await self._sleep(delay)

    async def _wait_wake(self, timeout: float | None) -> None:
        assert self._wake is not None  # made by _ensure_running, which started this task
        self._wake.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    async def _flush_loop(self) -> None:
        core, o = self._core, self._core.options
        while not self._stop:
            now = time.monotonic()
            if not core.policy_wanted and (not core.items or now < core.retry_at):
                await self._wait_wake(core.retry_at - now if core.retry_at > now else None)
                continue
            deadline = time.monotonic() + o.flush_delay
            while core.items and len(core.items) < o.flush_at and not core.flush_now and not self._stop:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                await self._wait_wake(left)
            with core.lock:
                batch = core.take_batch() if core.items else []
                wanted = core.take_wanted()
            for name in wanted:
                with contextlib.suppress(TransportError):  # a failed refresh keeps the policy known so far
                    json = await self._transport.circuit(name)
                    with core.lock:
                        core.policy_fetched(name, json)
            if batch:
                await self._send(batch)

    async def _send(self, batch: list[Outcome]) -> None:
        error = await self._post(batch, with_at=True)
        if error is not None and self._core.clock_ahead(error):
            error = await self._post(batch, with_at=False)
        self._core.sent(batch, error)

    async def _post(self, batch: list[Outcome], with_at: bool) -> TransportError | None:
        try:
            await self._transport.post_outcomes(self._core.outcomes_body(batch, with_at))
        except TransportError as error:
            return error
        return None

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
            with core.lock:
                core.flush_now = True
                core.retry_at = 0.0
                core.wake()
            while core.pending > 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
        pending = core.pending
        self._stop = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._transport.aclose()
        error = core.close_error(pending)
        if error is not None:
            raise error

    def _after_fork(self) -> None:
        super()._after_fork()
        self._loop = None
        self._tasks = []
        self._transport = self._make_transport()


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def _with_timeout(fn: Callable[[], Awaitable[Any]], seconds: float, expired: Exception) -> Any:
    """Past the limit (the client's timeout, or the caller's deadline): cancelled, and fails with ``expired``."""
    task = asyncio.ensure_future(fn())
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        raise expired
    return task.result()
