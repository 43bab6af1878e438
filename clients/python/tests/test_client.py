"""The sync Client against the real server."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from conftest import Server, wait_for

from circuitlog import CallTimeoutError, CircuitlogRequestError, CircuitOpenError, Client, ClientClosedError


def boom() -> None:
    raise RuntimeError("boom")


def connect(server: Server, **options: Any) -> Client:
    client = Client(server.url, **options)
    assert client.ready(10), "event stream did not open"
    return client


def count_requests(client: Client) -> list[str]:
    """Every request this client's transport sends for calls (GET /allowed, GET /circuits/x)."""
    seen: list[str] = []
    client._transport.requests.event_hooks["request"].append(lambda r: seen.append(r.url.raw_path.decode()))
    return seen


def test_decides_closed_circuit_calls_locally_and_every_outcome_reaches_the_server(server: Server) -> None:
    client = connect(server)
    sent = count_requests(client)
    for _ in range(200):
        with pytest.raises(RuntimeError, match="boom"):
            client.call("py/local", boom)
    assert client.stats()["server_checks"] == 1
    assert client.stats()["local_decisions"] == 199
    assert client.caller is not None  # no token: the host name, known at once
    assert sent == [f"/circuits/py%2Flocal/allowed?caller={quote(client.caller, safe='')}"]  # its caller named
    client.close()
    assert server.circuit("py/local")["failure_count"] == 200


def test_returns_the_result_and_passes_a_fallback_the_error(server: Server) -> None:
    with connect(server) as client:
        assert client.call("py/result", lambda: 42) == 42
        seen: list[Exception] = []

        def fallback(e: Exception) -> str:
            seen.append(e)
            return "cached"

        assert client.call("py/result", boom, fallback=fallback) == "cached"
        assert isinstance(seen[0], RuntimeError)
    assert server.circuit("py/result")["failure_count"] == 1


def test_a_slow_call_times_out_and_counts_as_a_failure(server: Server) -> None:
    with connect(server) as client:
        started = time.monotonic()
        with pytest.raises(CallTimeoutError):
            client.call("py/timeout", lambda: time.sleep(2), timeout=0.1)
        assert time.monotonic() - started < 1.5
        assert client.call("py/timeout", lambda: time.sleep(2), timeout=0.1, fallback=lambda e: type(e).__name__) == (
            "CallTimeoutError"
        )
    assert server.circuit("py/timeout")["failure_count"] == 2


def test_is_failure_decides_what_is_recorded(server: Server) -> None:
    with connect(server) as client:
        assert client.call("py/classify", lambda: 503, is_failure=lambda e, r: r == 503) == 503
    assert server.circuit("py/classify")["failure_count"] == 1


def test_refuses_on_client_b_within_1_s_a_circuit_client_a_tripped(server: Server) -> None:
    server.patch("py/trip", {"failure_threshold": 1, "timeout_seconds": 60})
    a, b = connect(server), connect(server)
    b.call("py/trip", lambda: "ok")  # b learns the circuit (closed)
    with pytest.raises(RuntimeError):
        a.call("py/trip", boom)
    tripped = time.monotonic()
    wait_for(lambda: b.state("py/trip") == "open", timeout=1.0, interval=0.005)
    assert time.monotonic() - tripped < 1.0
    with pytest.raises(CircuitOpenError) as refused:
        b.call("py/trip", lambda: "never")
    assert refused.value.retry_at.timestamp() > time.time() + 50
    assert b.call("py/trip", lambda: "never", fallback=lambda e: "fallback") == "fallback"
    a.close()
    b.close()


def test_lets_exactly_half_open_max_calls_probes_through_across_3_clients(server: Server) -> None:
    server.patch("py/probe", {"failure_threshold": 1, "timeout_seconds": 1, "half_open_max_calls": 2})
    clients = [connect(server) for _ in range(3)]
    for c in clients:
        assert c.allowed("py/probe")
    with pytest.raises(RuntimeError):
        clients[0].call("py/probe", boom)
    wait_for(lambda: all(c.state("py/probe") == "open" for c in clients))
    wait_for(lambda: server.circuit("py/probe")["state"] == "half_open", interval=0.1)
    gate = threading.Event()
    probes: list[int] = []
    results: list[str] = []

    def probe() -> str:
        probes.append(1)
        gate.wait(10)
        return "probed"

    def run(c: Client) -> None:
        try:
            results.append(c.call("py/probe", probe))
        except CircuitOpenError:
            results.append("refused")

    threads = [threading.Thread(target=run, args=(c,)) for c in clients * 2]
    for t in threads:
        t.start()
    wait_for(lambda: results.count("refused") == 4)
    assert len(probes) == 2
    gate.set()
    for t in threads:
        t.join()
    assert sorted(results) == ["probed", "probed", "refused", "refused", "refused", "refused"]
    for c in clients:
        c.close()
    assert server.circuit("py/probe")["state"] == "closed"


def test_sums_10000_outcomes_from_4_clients_exactly(server: Server) -> None:
    clients = [connect(server) for _ in range(4)]

    def run(c: Client, index: int) -> None:
        for i in range(2_500):
            if i % 2 == 0:
                c.call("py/exact", lambda: None)
            else:
                c.call("py/exact", boom, fallback=lambda e: None)

    threads = [threading.Thread(target=run, args=(c, i)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
        assert c.stats()["outcomes_pending"] == 0
    assert sum(int(str(c.stats()["outcomes_acknowledged"])) for c in clients) == 10_000
    text = httpx.get(f"{server.url}/metrics").text
    counts = {
        outcome: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("circuitlog_outcomes_total{") and 'circuit="py/exact"' in line
        for outcome in ("success", "failure")
        if f'kind="{outcome}"' in line
    }
    assert counts == {"success": 5_000, "failure": 5_000}


def test_is_safe_to_share_between_threads(server: Server) -> None:
    with connect(server) as client:
        errors: list[BaseException] = []

        def run() -> None:
            try:
                for _ in range(500):
                    client.call("py/threads", lambda: None)
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=run) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        stats = client.stats()
        # Threads that start before the first snapshot has landed each ask circuitlog once.
        assert int(str(stats["local_decisions"])) + int(str(stats["server_checks"])) == 4_000
        assert 1 <= int(str(stats["server_checks"])) <= 8
    wait_for(lambda: server.circuit("py/threads")["state"] == "closed")


def test_close_returns_once_every_outcome_is_acknowledged(server: Server) -> None:
    client = connect(server, flush_delay=5.0, flush_at=1_000)  # nothing would go before close()
    for _ in range(300):
        client.call("py/close", boom, fallback=lambda e: None)
    assert client.stats()["outcomes_pending"] == 300
    client.close()
    assert client.stats()["outcomes_acknowledged"] == 300
    assert server.circuit("py/close")["failure_count"] == 300
    with pytest.raises(ClientClosedError):
        client.call("py/close", lambda: None)


def test_protect_decorates_a_function(server: Server) -> None:
    with connect(server) as client:

        @client.protect("py/protect", timeout=3.0)
        def charge(amount: int, *, currency: str = "EUR") -> str:
            return f"{amount} {currency}"

        assert charge(5, currency="USD") == "5 USD"
        assert charge.__name__ == "charge"
    wait_for(lambda: server.circuit("py/protect")["state"] == "closed")


def test_on_transition_reports_every_transition(server: Server) -> None:
    server.patch("py/events", {"failure_threshold": 1, "timeout_seconds": 60})
    seen: list[tuple[str, str, str]] = []
    with connect(server, on_transition=lambda e: seen.append((e.circuit, e.from_state, e.to_state))) as client:
        client.call("py/events", boom, fallback=lambda e: None)
        wait_for(lambda: ("py/events", "closed", "open") in seen)
        assert client.state("py/events") == "open"
        server.post("/circuits/py%2Fevents/reset")
        wait_for(lambda: ("py/events", "open", "closed") in seen)
        assert client.call("py/events", lambda: "again") == "again"


def test_a_forced_open_circuit_is_refused_with_its_code(server: Server) -> None:
    server.patch("py/forced", {"forced_state": "open"})
    with connect(server) as client:
        with pytest.raises(CircuitOpenError) as refused:
            client.call("py/forced", lambda: None)
        assert refused.value.code == "CIRCUIT_FORCED_OPEN"
        assert client.state("py/forced") == "open"


def test_a_bad_name_is_refused_before_anything_is_sent(server: Server) -> None:
    with connect(server) as client:
        with pytest.raises(ValueError, match="Invalid circuit name"):
            client.call("../etc", lambda: None)
        with pytest.raises(ValueError):
            client.record("a//b", success=True)


def test_a_wrong_token_is_a_configuration_error(server_factory: Any) -> None:
    s = server_factory(env={"CIRCUITLOG_TOKEN": "right-token-0123456789"})
    client = Client(s.url, token="wrong-token-0123456789")
    with pytest.raises(CircuitlogRequestError) as rejected:
        client.call("py/token", lambda: None, fallback=lambda e: "not used")
    assert rejected.value.status == 401
    client.close()
    with Client(s.url, token="right-token-0123456789") as good:
        assert good.ready(10)
        assert good.call("py/token", lambda: "ok") == "ok"


def test_a_script_that_never_calls_close_still_delivers_at_exit(server: Server) -> None:
    script = (
        "import sys, circuitlog\n"
        "c = circuitlog.Client(sys.argv[1], flush_delay=30)\n"
        "assert c.ready(10)\n"
        "for _ in range(7):\n"
        "    c.call('py/atexit', lambda: None, is_failure=lambda e, r: True)\n"
    )
    subprocess.run([sys.executable, "-c", script, server.url], check=True, timeout=60)
    assert server.circuit("py/atexit")["failure_count"] == 7
