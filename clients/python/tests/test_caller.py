"""Issue 17 in the Python client: its caller id, named on every outcome and admission, and its own
isolation honoured locally (sync and async). Against the real server process on loopback."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from datetime import datetime
from typing import Any

import pytest
from conftest import Server, wait_for

from circuitlog import AsyncClient, CircuitOpenError, Client, TransitionEvent
from circuitlog._core import Core, Entry, Options
from circuitlog._names import default_caller
from circuitlog._wire import Refused, allowed_answer, outcomes_body, parse_event

QUORUM = {"failure_threshold": 3, "timeout_seconds": 60, "quorum": {"min_callers": 2}}


class Boom(Exception):
    pass


def boom() -> None:
    raise Boom("boom")


async def aboom() -> None:
    raise Boom("boom")


def count(client: Client | AsyncClient, key: str) -> int:
    value = client.stats()[key]
    assert isinstance(value, int)
    return value


def refusal(fn: Any) -> CircuitOpenError:
    with pytest.raises(CircuitOpenError) as caught:
        fn()
    return caught.value


# -- the option ------------------------------------------------------------------------------


def test_defaults_to_the_host_name_made_a_valid_caller_id() -> None:
    host = "".join(c if c.isascii() and (c.isalnum() or c in "_.:~-") else "-" for c in socket.gethostname())
    assert default_caller() == host
    assert default_caller("web 7(eu)") == "web-7-eu-"
    assert default_caller("") == "host"
    assert default_caller("h" * 300) == "h" * 128
    client = Client("http://127.0.0.1:9", reconnect_max_delay=0.2, close_timeout=0.5)
    try:
        assert client.caller == default_caller()
    finally:
        client.close()
    assert AsyncClient("http://127.0.0.1:9").caller == default_caller()  # never started: nothing to close


@pytest.mark.parametrize("bad", ["", "has space", "é", "x" * 129, 42])
def test_refuses_an_invalid_caller_at_construction_naming_the_rule(bad: Any) -> None:
    for make in (Client, AsyncClient):
        with pytest.raises(ValueError, match=r"Invalid caller .*letters, digits, _ \. : ~ - and '/'"):
            make("http://127.0.0.1:9", caller=bad)


def test_takes_a_valid_explicit_caller_as_is() -> None:
    caller = "dc1/web-7:8080~a_b." + "x" * 100
    assert Core(Options(url="http://127.0.0.1:9", caller=caller)).caller == caller


def test_a_forked_child_with_the_default_is_the_same_caller_as_its_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    default, explicit = Core(Options(url="http://127.0.0.1:9")), Core(Options(url="http://127.0.0.1:9", caller="me"))
    default.entries["dep"] = entry = Entry()
    entry.isolate(time.time() * 1000 + 60_000)
    monkeypatch.setattr(os, "getpid", lambda: 4242)
    default.after_fork()
    explicit.after_fork()
    assert default.caller == default_caller()  # one host, one caller: the pid is no part of it
    assert entry.isolated  # so the server's isolation of this host still holds in the child
    assert explicit.caller == "me"


# -- the wire --------------------------------------------------------------------------------


def test_reads_a_caller_scope_refusal_and_the_isolation_events() -> None:
    body = {"code": "CIRCUIT_OPEN", "state": "closed", "scope": "caller", "open_until": "2026-12-01T13:30:00.000Z"}
    answer = allowed_answer(503, {"retry-after": "30"}, body)
    until = datetime.fromisoformat("2026-12-01T13:30:00+00:00").timestamp() * 1000
    assert answer == Refused("closed", until, 30_000, False, scope="caller")
    event = parse_event(
        "transition",
        '{"circuit":"dep","from":"closed","to":"closed","reason":"caller_isolated","callers":["a"],'
        '"until":"2026-12-01T13:30:00.000Z","at":"2026-12-01T13:29:00.000Z"}',
        "7",
    )
    assert isinstance(event, TransitionEvent)
    assert (event.callers, event.until) == (("a",), "2026-12-01T13:30:00.000Z")
    sent = outcomes_body([("dep", False, 1.5, 0.0)], caller="dc1/a")
    assert b'"caller":"dc1/a"' in sent


# -- against the server ----------------------------------------------------------------------


def test_names_its_caller_on_every_outcome_the_server_counts_it_toward_the_quorum(server_factory: Any) -> None:
    server: Server = server_factory(QUORUM)
    a, b = Client(server.url, caller="dc1/a"), Client(server.url, caller="dc1/b")
    try:
        assert a.ready(10) and b.ready(10)
        for c in (a, b, a):  # failures only: each client's batches are its own, in any order across clients
            with pytest.raises(Boom):
                c.call("dep", boom)
    finally:
        a.close()
        b.close()
    opened = [e for e in server.events("dep") if e["to"] == "open"]
    assert [e.get("callers") for e in opened] == [["dc1/a", "dc1/b"]]


def test_refuses_its_own_calls_locally_once_isolated_while_other_callers_decide_locally(server_factory: Any) -> None:
    server: Server = server_factory(QUORUM)
    bad, good = Client(server.url, caller="bad"), Client(server.url, caller="good")
    try:
        assert bad.ready(10) and good.ready(10)
        assert good.call("dep", lambda: "ok") == "ok"
        for _ in range(3):
            with pytest.raises(Boom):
                bad.call("dep", boom)
        wait_for(lambda: not bad.allowed("dep"), 5)  # the isolation reaches the client on its event stream
        checks = count(bad, "server_checks")
        ran: list[int] = []
        err = refusal(lambda: bad.call("dep", lambda: ran.append(1)))
        assert (err.scope, err.caller, err.state, err.code) == ("caller", "bad", "closed", "CIRCUIT_OPEN")
        until = server.circuit("dep")["isolated_callers"][0]["open_until"]
        assert err.retry_at == datetime.fromisoformat(until.replace("Z", "+00:00"))
        assert "isolated" in str(err) and "'bad'" in str(err)
        assert count(bad, "server_checks") == checks and ran == []  # refused here, no round trip
        assert bad.call("dep", lambda: "never", fallback=lambda e: getattr(e, "scope", "")) == "caller"

        local = count(good, "local_decisions")
        assert [good.call("dep", lambda i=i: i) for i in range(20)] == list(range(20))  # type: ignore[misc]
        assert count(good, "local_decisions") == local + 20  # the circuit stays closed for everyone else
        assert server.circuit("dep")["state"] == "closed"
    finally:
        bad.close()
        good.close()


def test_asks_for_its_probe_once_its_open_time_ends_and_a_success_releases_it(server_factory: Any) -> None:
    server: Server = server_factory({**QUORUM, "timeout_seconds": 1})
    bad = Client(server.url, caller="bad")
    try:
        assert bad.ready(10)
        for _ in range(3):
            with pytest.raises(Boom):
                bad.call("dep", boom)
        wait_for(lambda: not bad.allowed("dep"), 5)
        until = server.circuit("dep")["isolated_callers"][0]["open_until"]
        time.sleep(max(0.0, datetime.fromisoformat(until.replace("Z", "+00:00")).timestamp() - time.time()) + 0.05)
        assert bad.call("dep", lambda: "probe") == "probe"
        wait_for(lambda: server.circuit("dep")["isolated_callers"] == [], 5)

        def decided_locally() -> bool:
            local = count(bad, "local_decisions")
            bad.call("dep", lambda: 2)
            return count(bad, "local_decisions") == local + 1

        wait_for(decided_locally, 5)  # released by the caller_released event
    finally:
        bad.close()


def test_the_async_client_names_its_caller_and_honours_its_isolation(server_factory: Any) -> None:
    server: Server = server_factory(QUORUM)

    async def main() -> None:
        async with AsyncClient(server.url, caller="bad") as bad, AsyncClient(server.url, caller="good") as good:
            assert await bad.ready(10) and await good.ready(10)
            assert bad.caller == "bad"
            assert await good.call("dep", _ok) == "ok"  # its snapshot
            for _ in range(3):
                with pytest.raises(Boom):
                    await bad.call("dep", aboom)
            for _ in range(500):
                if not await bad.allowed("dep"):
                    break
                await asyncio.sleep(0.01)
            checks = count(bad, "server_checks")
            with pytest.raises(CircuitOpenError) as caught:
                await bad.call("dep", aboom)
            assert (caught.value.scope, caught.value.caller) == ("caller", "bad")
            assert count(bad, "server_checks") == checks
            local = count(good, "local_decisions")
            assert [await good.call("dep", _ok) for _ in range(20)] == ["ok"] * 20
            assert count(good, "local_decisions") == local + 20  # the circuit stays closed for everyone else

    asyncio.run(main())
    assert server.circuit("dep")["state"] == "closed"
    assert [i["caller"] for i in server.circuit("dep")["isolated_callers"]] == ["bad"]


async def _ok() -> str:
    return "ok"
