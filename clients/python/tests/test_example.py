"""examples/flaky_service.py, run as a user would, against the real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import Server

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "flaky_service.py"


def run(server: Server, **env: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        env={**os.environ, "CIRCUITLOG_URL": server.url, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_answers_every_request_from_users_api_or_its_cache_and_its_outcomes_reach_circuitlog(
    server_factory: Any,
) -> None:
    s = server_factory({"failure_threshold": 1_000_000_000})
    lines = run(s, REQUESTS="40", INTERVAL_MS="5", FAILURE_RATE="0.3", SLOW_RATE="0.1")
    summary = lines[-1]
    assert summary["event"] == "summary"
    assert sum(summary["answered"].values()) == 40
    assert summary["answered"]["users-api"] > 0
    assert summary["client"]["outcomes_pending"] == 0
    c = s.circuit("users-api/get")
    assert summary["client"]["outcomes_acknowledged"] == 40 + 1  # and the one charge
    assert c["state"] == "closed"


def test_stops_calling_a_failing_users_api_once_the_circuit_opens(server_factory: Any) -> None:
    s = server_factory({"failure_threshold": 3, "timeout_seconds": 60})
    lines = run(s, REQUESTS="30", FAILURE_RATE="1", SLOW_RATE="0")
    summary = lines[-1]
    # Calls decided locally before the stream carries the opening still run (the staleness of a
    # local decision); after it, none reach users-api.
    assert 3 <= summary["calls_to_users_api"] <= 10
    assert lines[-2] == {"event": "answer", "user": "4", "source": "error", "error": "CircuitOpenError"}
    assert {"event": "circuit", "from": "closed", "to": "open", "reason": "failure_threshold_reached"} in lines
    assert s.circuit("users-api/get")["state"] == "open"


def test_the_async_example_runs(server: Server) -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE.parent / "async_service.py")],
        env={**os.environ, "CIRCUITLOG_URL": server.url},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "basket 9.99, apple 9.99, allowed True"
    assert server.circuit("prices/get")["state"] == "closed"
