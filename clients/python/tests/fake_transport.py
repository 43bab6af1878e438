"""Scriptable transports for unit tests: no sockets, every outcome body recorded (issue 29's client side
is built before the server knows kinds, so these stand in for it)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx

from circuitlog import AsyncClient, Client
from circuitlog._local import Json
from circuitlog._wire import Admitted, Answer, TransportError


class FakeTransport:
    """``GET /allowed`` answers from ``answers`` (default: admitted, closed, unknown circuit); the stream is
    refused (every call asks); each ``POST /outcomes`` body's items land in ``outcomes``."""

    def __init__(self) -> None:
        self.answers: dict[str, Answer] = {}
        self.circuits: dict[str, Json] = {}
        self.outcomes: list[dict[str, Any]] = []
        self.posted = threading.Event()

    def allowed(self, name: str, caller: str | None = None) -> Answer:
        return self.answers.get(name, Admitted("closed", None))

    def circuit(self, name: str) -> Json | None:
        return self.circuits.get(name)

    def post_outcomes(self, body: bytes) -> None:
        self.outcomes.extend(json.loads(body)["outcomes"])
        self.posted.set()

    def open_stream(self, last_event_id: str | None) -> httpx.Response:
        raise TransportError("rejected", "no stream in this test", 503)

    def close(self) -> None:
        pass

    def wait_for(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The first ``count`` outcomes' kind fields (success, kind, retry_after_seconds, deadline_ms)."""
        while len(self.outcomes) < count:
            self.posted.clear()
            if len(self.outcomes) < count and not self.posted.wait(timeout):
                raise AssertionError(f"{len(self.outcomes)} outcome(s) posted, {count} expected")
        keys = ("success", "kind", "retry_after_seconds", "deadline_ms")
        return [{k: o[k] for k in keys if k in o} for o in self.outcomes[:count]]


class AsyncFakeTransport(FakeTransport):
    def __init__(self) -> None:
        super().__init__()
        self.async_posted: asyncio.Event | None = None

    async def allowed(self, name: str, caller: str | None = None) -> Answer:  # type: ignore[override]
        return FakeTransport.allowed(self, name, caller)

    async def circuit(self, name: str) -> Json | None:  # type: ignore[override]
        return FakeTransport.circuit(self, name)

    async def post_outcomes(self, body: bytes) -> None:  # type: ignore[override]
        FakeTransport.post_outcomes(self, body)
        if self.async_posted is not None:
            self.async_posted.set()

    async def open_stream(self, last_event_id: str | None) -> httpx.Response:  # type: ignore[override]
        await asyncio.sleep(0)
        return FakeTransport.open_stream(self, last_event_id)

    async def aclose(self) -> None:
        pass

    async def wait_for_async(self, count: int) -> list[dict[str, Any]]:
        while len(self.outcomes) < count:
            self.async_posted = asyncio.Event()
            await asyncio.wait_for(self.async_posted.wait(), 10.0)
        return self.wait_for(count, timeout=0)


class FakeClient(Client):
    """A ``Client`` on a ``FakeTransport``."""

    def _make_transport(self) -> Any:
        self.fake = FakeTransport()
        return self.fake


class AsyncFakeClient(AsyncClient):
    def _make_transport(self) -> Any:
        self.fake = AsyncFakeTransport()
        return self.fake
