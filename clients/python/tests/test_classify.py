"""Issue 29, the Python client: what ``call()`` records as an outcome's kind (``classify``, ``is_failure``,
the default table over httpx answers and errors, the caller's ``deadline``, an asyncio cancellation), what
the local breaker counts, and ``_domain.py``'s mirror of ``src/domain/outcome-kind.ts``. Fake transports."""

from __future__ import annotations

import asyncio
import functools
import threading
from datetime import datetime, timezone
from email.utils import format_datetime
from typing import Any

import httpx
import pytest
from fake_transport import AsyncFakeClient, FakeClient

from circuitlog import CallDeadlineError, CallTimeoutError, Classification
from circuitlog import _domain as d
from circuitlog._classify import counts_locally
from circuitlog._wire import outcomes_body

NOW = 1_893_456_000_000.0  # 2030-01-01T00:00:00Z, epoch ms


def answer(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers, request=httpx.Request("GET", "http://127.0.0.1/x"))


@pytest.fixture
def client() -> Any:
    c = FakeClient("http://127.0.0.1:1", close_timeout=5)
    c._core.clock_ms = lambda: NOW
    yield c
    c.close()


# -- the mirror of outcome-kind.ts --------------------------------------------------------------


def test_kind_of_status_follows_the_table() -> None:
    table = {200: "success", 302: "success", 404: "rejected", 422: "rejected", 408: "failure", 500: "failure"}
    table.update({501: "rejected", 505: "rejected", 502: "failure", 503: "failure", 429: "throttled"})
    for status, kind in table.items():
        assert d.kind_of_status(status, None, NOW) == (kind, None), status
    assert d.kind_of_status(503, "5", NOW) == ("throttled", 5)
    assert d.kind_of_status(429, "junk", NOW) == ("throttled", None)


def test_retry_after_reads_seconds_and_an_http_date_rounded_up_never_below_zero() -> None:
    in_90s = format_datetime(datetime.fromtimestamp((NOW + 90_000) / 1000, tz=timezone.utc), usegmt=True)
    assert d.retry_after_seconds(" 120 ", NOW) == 120
    assert d.retry_after_seconds(in_90s, NOW + 500) == 90  # 89.5 s, rounded up
    assert d.retry_after_seconds("Tue, 01 Jan 2008 00:00:00 GMT", NOW) == 0
    for junk in (None, "", "1.5", "-1", "soon", "2030-01-01T00:00:00Z", "Wed, 99 Oct 2015 07:28:00 GMT"):
        assert d.retry_after_seconds(junk, NOW) is None, junk


def test_ramp_percent_is_linear_from_its_start_to_100_and_the_draw_admits_under_it() -> None:
    until = NOW + 10_000
    assert d.ramp_percent(until, 10, 10, NOW) == 10
    assert d.ramp_percent(until, 10, 10, NOW + 5_000) == 55
    assert d.ramp_percent(until, 10, 10, until) == 100
    assert d.ramp_percent(None, 10, 10, NOW) == 100
    assert d.ramp_admits(55, 0.54) and not d.ramp_admits(55, 0.55) and d.ramp_admits(100, 0.999)


# -- the default classification -------------------------------------------------------------------


def test_records_httpx_answers_by_the_table(client: FakeClient) -> None:
    answers = [answer(200), answer(404), answer(501), answer(500), answer(429, **{"retry-after": "7"}), answer(429)]
    for res in answers:
        assert client.call("svc", functools.partial(lambda r: r, res)) is res
    assert client.fake.wait_for(6) == [
        {"success": True},
        {"kind": "rejected"},
        {"kind": "rejected"},
        {"success": False},
        {"kind": "throttled", "retry_after_seconds": 7},
        {"kind": "throttled"},
    ]


def test_records_an_http_status_error_by_its_response_and_a_503_date_by_the_clients_clock(client: FakeClient) -> None:
    in_30s = format_datetime(datetime.fromtimestamp((NOW + 30_000) / 1000, tz=timezone.utc), usegmt=True)

    def raising(error: Exception) -> None:
        raise error

    for res in (answer(503, **{"retry-after": in_30s}), answer(403)):
        with pytest.raises(httpx.HTTPStatusError):
            client.call("svc", res.raise_for_status)
    with pytest.raises(httpx.ConnectError):
        client.call("svc", functools.partial(raising, httpx.ConnectError("refused")))
    assert client.fake.wait_for(3) == [
        {"kind": "throttled", "retry_after_seconds": 30},
        {"kind": "rejected"},
        {"success": False},
    ]


def test_records_the_callers_deadline_as_caller_deadline_and_the_clients_timeout_as_failure(
    client: FakeClient,
) -> None:
    release = threading.Event()
    try:
        with pytest.raises(CallDeadlineError) as passed:
            client.call("svc", release.wait, deadline=0.05)
        assert passed.value.deadline_ms == 50 and isinstance(passed.value, TimeoutError)
        with pytest.raises(CallTimeoutError):
            client.call("svc", release.wait, timeout=0.05, deadline=0.5)  # the shorter one decides
        with pytest.raises(CallDeadlineError):
            client.call("svc", release.wait, timeout=0.5, deadline=0.05, classify=lambda e, r: None)
    finally:
        release.set()
    assert client.fake.wait_for(3) == [
        {"kind": "caller_deadline", "deadline_ms": 50},
        {"success": False},
        {"kind": "caller_deadline", "deadline_ms": 50},
    ]


def test_refuses_a_deadline_that_is_no_positive_number(client: FakeClient) -> None:
    for bad in (0, -1.0, float("nan"), True):
        with pytest.raises(TypeError):
            client.call("svc", lambda: 1, deadline=bad)


# -- classify and is_failure --------------------------------------------------------------------


def test_classify_wins_over_is_failure_and_none_falls_back(client: FakeClient) -> None:
    def fails(e: BaseException | None, r: Any) -> bool:
        return True

    client.call("svc", lambda: 1, classify=lambda e, r: "rejected", is_failure=fails)
    client.call("svc", lambda: 1, classify=lambda e, r: Classification("throttled", retry_after_seconds=2.5))
    client.call("svc", lambda: 1, classify=lambda e, r: Classification("caller_deadline", deadline_ms=40))
    client.call("svc", lambda: 1, classify=lambda e, r: None, is_failure=fails)
    client.call("svc", lambda: answer(404), classify=lambda e, r: None)
    assert client.fake.wait_for(5) == [
        {"kind": "rejected"},
        {"kind": "throttled", "retry_after_seconds": 3},
        {"kind": "caller_deadline", "deadline_ms": 40},
        {"success": False},
        {"kind": "rejected"},
    ]


def test_an_unknown_kind_or_misplaced_detail_raises_a_type_error_and_records_a_failure(client: FakeClient) -> None:
    bad: list[Any] = [
        lambda e, r: "nope",
        lambda e, r: Classification("rejected", retry_after_seconds=3),
        lambda e, r: Classification("caller_deadline", deadline_ms=-1),
    ]
    for classify in bad:
        with pytest.raises(TypeError):
            client.call("svc", lambda: 1, classify=classify)
    assert client.fake.wait_for(3) == [{"success": False}] * 3


def test_the_wire_sends_a_kind_without_success() -> None:
    body = outcomes_body([("svc", {"kind": "throttled", "retry_after_seconds": 3}, 1.5, NOW / 1000)], caller="h")
    assert body.startswith(b'{"outcomes":[{"circuit":"svc","kind":"throttled","retry_after_seconds":3,')
    assert b'"success"' not in body


# -- asyncio ----------------------------------------------------------------------------------------


def test_async_deadline_classify_and_a_bare_cancellation() -> None:
    async def main() -> list[dict[str, Any]]:
        client = AsyncFakeClient("http://127.0.0.1:1", close_timeout=5)
        try:
            never = asyncio.Event()
            with pytest.raises(CallDeadlineError):
                await client.call("svc", never.wait, deadline=0.05)
            await client.call("svc", lambda: asyncio.sleep(0, answer(429, **{"retry-after": "4"})))
            await client.call("svc", lambda: asyncio.sleep(0, 1), classify=lambda e, r: "rejected")
            started = asyncio.Event()

            async def waits() -> None:
                started.set()
                await never.wait()

            task = asyncio.ensure_future(client.call("svc", waits))
            await started.wait()
            task.cancel()  # as asyncio.wait_for does past its timeout: the caller went away
            with pytest.raises(asyncio.CancelledError):
                await task
            return await client.fake.wait_for_async(4)
        finally:
            await client.close()

    assert asyncio.run(main()) == [
        {"kind": "caller_deadline", "deadline_ms": 50},
        {"kind": "throttled", "retry_after_seconds": 4},
        {"kind": "rejected"},
        {"kind": "cancelled"},
    ]


# -- what this client's own accounting counts -----------------------------------------------------


def test_counts_locally_by_count_as_min_deadline_and_slow_calls() -> None:
    policy: dict[str, Any] = {
        "min_deadline_ms": 100,
        "window": {"type": "count", "size": 10, "slow_call_duration_ms": 80},
    }
    assert counts_locally(Classification("rejected"), 1, policy) is True
    assert counts_locally(Classification("cancelled"), 1, policy) is None
    assert counts_locally(Classification("throttled"), 1, policy) is None
    assert counts_locally(Classification("caller_deadline", deadline_ms=50), 10, policy) is None
    assert counts_locally(Classification("caller_deadline", deadline_ms=50), 90, policy) is True  # a slow call
    assert counts_locally(Classification("caller_deadline", deadline_ms=100), 10, policy) is False
    assert counts_locally(Classification("caller_deadline", deadline_ms=5_000), 10, {"min_deadline_ms": None}) is None
    assert counts_locally(Classification("caller_deadline", deadline_ms=1_000), 10, None) is False  # default 1 s
    assert counts_locally(Classification("rejected"), 1, {"count_as": {"rejected": "failure"}}) is False
    assert counts_locally(Classification("failure"), 1, {"count_as": {"failure": "ignore"}}) is None
