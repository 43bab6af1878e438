"""The asyncio AsyncClient against the real server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import Server

from circuitlog import AsyncClient, CallTimeoutError, CircuitOpenError


async def boom() -> None:
    raise RuntimeError("boom")


async def ok() -> str:
    return "ok"


async def until(predicate: Any, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    assert predicate()


def test_decides_locally_and_delivers_every_outcome(server: Server) -> None:
    async def main() -> dict[str, object]:
        async with AsyncClient(server.url) as breakers:
            assert await breakers.ready(10)
            for _ in range(100):
                with pytest.raises(RuntimeError):
                    await breakers.call("pya/local", boom)
            assert await breakers.call("pya/local", ok) == "ok"
        return breakers.stats()  # after close()

    stats = asyncio.run(main())
    assert stats["server_checks"] == 1
    assert stats["local_decisions"] == 100
    assert stats["outcomes_pending"] == 0
    assert server.circuit("pya/local")["failure_count"] == 0  # the last success reset the count
    assert stats["outcomes_acknowledged"] == 101


def test_times_out_cancels_the_call_and_uses_the_fallback(server: Server) -> None:
    cancelled: list[bool] = []

    async def slow() -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "late"

    async def main() -> None:
        async with AsyncClient(server.url) as breakers:
            with pytest.raises(CallTimeoutError):
                await breakers.call("pya/timeout", slow, timeout=0.05)
            assert await breakers.call("pya/timeout", slow, timeout=0.05, fallback=lambda e: "cached") == "cached"

            async def async_fallback(e: Exception) -> str:
                return "async cached"

            async def fails() -> str:
                raise RuntimeError("boom")

            assert await breakers.call("pya/timeout", fails, fallback=async_fallback) == "async cached"

    asyncio.run(main())
    assert cancelled == [True, True]
    assert server.circuit("pya/timeout")["failure_count"] == 3


def test_refuses_a_circuit_another_client_tripped(server: Server) -> None:
    server.patch("pya/trip", {"failure_threshold": 1, "timeout_seconds": 60})

    async def main() -> None:
        async with AsyncClient(server.url) as a, AsyncClient(server.url) as b:
            assert await a.ready(10) and await b.ready(10)
            assert await b.call("pya/trip", ok) == "ok"
            with pytest.raises(RuntimeError):
                await a.call("pya/trip", boom)
            await until(lambda: b.state("pya/trip") == "open", timeout=1.0)
            with pytest.raises(CircuitOpenError):
                await b.call("pya/trip", ok)
            assert not await b.allowed("pya/trip")

    asyncio.run(main())


def test_protect_and_record(server: Server) -> None:
    async def main() -> None:
        async with AsyncClient(server.url) as breakers:

            @breakers.protect("pya/protect", timeout=1.0)
            async def fetch(user: int) -> dict[str, int]:
                return {"id": user}

            assert await fetch(7) == {"id": 7}
            for _ in range(4):
                await breakers.record("pya/protect", success=False, duration_ms=12.5)

    asyncio.run(main())
    assert server.circuit("pya/protect")["failure_count"] == 4


def test_keeps_working_while_down_behind_the_local_breaker_and_resyncs(server_factory: Any) -> None:
    s = server_factory()
    s.patch("pya/dep", {"failure_threshold": 2, "timeout_seconds": 60})

    async def main() -> dict[str, object]:
        async with AsyncClient(s.url, reconnect_max_delay=0.2, request_timeout=0.5) as breakers:
            assert await breakers.ready(10)
            assert await breakers.call("pya/dep", ok) == "ok"
            await until(lambda: breakers.stats()["outcomes_pending"] == 0)
            s.stop()
            await until(lambda: breakers.connection == "offline")
            for _ in range(2):
                with pytest.raises(RuntimeError):
                    await breakers.call("pya/dep", boom)
            with pytest.raises(CircuitOpenError) as refused:
                await breakers.call("pya/dep", ok)
            assert refused.value.local
            s.start()  # from the main thread (the server dies with the thread that started it)
            await until(lambda: breakers.connection == "connected", timeout=15)
            await until(lambda: breakers.stats()["outcomes_pending"] == 0, timeout=15)
            # The server counted the two failures: with its threshold 2 it is open too, and its state wins.
            assert await breakers.call("pya/dep", ok, fallback=lambda e: type(e).__name__) == "CircuitOpenError"
        return breakers.stats()

    stats = asyncio.run(main())
    assert stats["outcomes_acknowledged"] == 3
    assert s.circuit("pya/dep")["state"] == "open"
