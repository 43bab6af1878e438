"""The asyncio client in a few lines: protect an async call, with a timeout and a fallback.

python clients/python/examples/async_service.py   # CIRCUITLOG_URL (http://127.0.0.1:8080)
"""

from __future__ import annotations

import asyncio
import os

from circuitlog import AsyncClient, CircuitOpenError


async def fetch_price(item: str) -> float:
    await asyncio.sleep(0.01)  # a remote call
    return 9.99


async def main() -> None:
    async with AsyncClient(os.environ.get("CIRCUITLOG_URL", "http://127.0.0.1:8080")) as breakers:

        @breakers.protect("prices/get", timeout=0.5, fallback=lambda err: -1.0)
        async def price(item: str) -> float:
            return await fetch_price(item)

        try:
            total = await breakers.call("prices/total", lambda: fetch_price("basket"), timeout=2.0)
        except CircuitOpenError as refused:
            print(f"prices/total is open until {refused.retry_at.isoformat()}")
            return
        print(f"basket {total}, apple {await price('apple')}, allowed {await breakers.allowed('prices/get')}")
    # Leaving the block closed the client: every outcome is acknowledged.


if __name__ == "__main__":
    asyncio.run(main())
