"""A full circuit table (limits.max_circuits): outcomes for existing circuits are still recorded and trip them."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest
from conftest import Server

from circuitlog import AsyncClient, Client


def full_table(server_factory: Any) -> Server:
    """A server holding at most one circuit, `dep` (failure_threshold 5), already made."""
    s: Server = server_factory({"failure_threshold": 5})
    s.stop()
    s.config.write_text(json.dumps({"circuit_defaults": {"failure_threshold": 5}, "limits": {"max_circuits": 1}}))
    s.start()
    assert s.post("/circuits/dep/outcomes", {"success": True}).status_code == 200
    return s


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_50_failures_for_an_existing_circuit_mixed_with_new_names_open_it(
    server_factory: Any, flavour: str, caplog: pytest.LogCaptureFixture
) -> None:
    s = full_table(server_factory)
    if flavour == "sync":
        client = Client(s.url, close_timeout=5.0)
        for i in range(50):
            client.record("dep", False)
            client.record(f"new-{i}", False)
        client.close()  # every batch ends recorded or dropped: close() returns
        stats = client.stats()
    else:

        async def run() -> dict[str, object]:
            async with AsyncClient(s.url, close_timeout=5.0) as client:
                for i in range(50):
                    await client.record("dep", False)
                    await client.record(f"new-{i}", False)
            return client.stats()

        stats = asyncio.run(run())
    assert s.circuit("dep")["state"] == "open"
    assert stats["outcomes_acknowledged"] == 50
    assert stats["outcomes_rejected"] == 50
    assert stats["outcomes_pending"] == 0
    assert httpx.get(f"{s.url}/circuits/new-0").status_code == 404
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "table is full" in r.getMessage()]
    assert len(warnings) == 1  # one warning per interval, however many batches were refused


def test_a_507_drops_the_refused_items_and_requeues_the_rest_or_drops_a_batch_it_names_none_of() -> None:
    from circuitlog._core import Core, Options

    core = Core(Options(url="http://127.0.0.1:9"))
    batch = [("old", False, None, 0.0), ("new", False, None, 0.0), ("old", True, None, 0.0)]
    with core.lock:
        assert core.batch_refused(list(batch), {"new", "elsewhere"}) == 1
        assert list(core.items) == [batch[0], batch[2]]  # at the front, in order, for the next batch
        core.items.clear()
        assert core.batch_refused(list(batch), set()) == 3  # names none of them: it cannot succeed
    assert not core.items
    assert core.counts["outcomes_rejected"] == 4
