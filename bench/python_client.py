"""Measurements for the `python` section of `npm run bench` (bench/python.mjs runs this with .venv-python).

    python bench/python_client.py calls URL SECONDS   -> JSON: GET /allowed vs call() rates, added time per call
    python bench/python_client.py fleet URL SECONDS RATE -> JSON: calls made (half failing) at RATE calls/s
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import httpx

from circuitlog import Client

ROUNDS = 3


def noop() -> None:
    return None


def boom() -> None:
    raise RuntimeError("boom")


def allowed_round_trips(url: str, seconds: float) -> dict[str, float]:
    """Sequential GET /allowed on one keep-alive connection."""
    errors = 0
    count = 0
    with httpx.Client(base_url=url) as http:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            if http.get("/circuits/bench%2Fpy-closed/allowed").status_code != 200:
                errors += 1
            count += 1
    return {"rps": count / seconds, "count": count, "errors": errors}


def sequential_calls(client: Client, seconds: float) -> dict[str, float]:
    count = 0
    call = client.call
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(1000):
            call("bench/py-closed", noop)
        count += 1000
    return {"rps": count / seconds, "count": count}


def added_time(client: Client, samples: int) -> dict[str, float]:
    """Per-call time of client.call(noop) and of noop(), interleaved, in microseconds."""
    clock = time.perf_counter_ns
    call = client.call
    direct: list[int] = []
    via: list[int] = []
    for _ in range(samples):
        t = clock()
        noop()
        direct.append(clock() - t)
        t = clock()
        call("bench/py-closed", noop)
        via.append(clock() - t)
    d, c = statistics.median(direct) / 1000, statistics.median(via) / 1000
    via.sort()
    return {"direct_p50_us": d, "client_p50_us": c, "client_p99_us": via[int(len(via) * 0.99)] / 1000,
            "added_p50_us": c - d}


def calls(url: str, seconds: float) -> None:
    client = Client(url, max_queued_outcomes=100_000)
    assert client.ready(10), "no event stream"
    allowed_round_trips(url, 0.3)
    sequential_calls(client, 0.3)
    rounds: dict[str, list[dict[str, float]]] = {"allowed": [], "calls": []}
    for _ in range(ROUNDS):
        rounds["allowed"].append(allowed_round_trips(url, seconds / ROUNDS))
        rounds["calls"].append(sequential_calls(client, seconds / ROUNDS))
    added = added_time(client, 100_000)
    client.close()
    print(json.dumps({"rounds": rounds, "added": added, "stats": client.stats()}))


def fleet(url: str, seconds: float, rate: int) -> None:
    client = Client(url)
    assert client.ready(10), "no event stream"
    made = {"success": 0, "failure": 0}
    started = time.perf_counter()
    n = 0
    total = int(seconds * rate)
    while n < total:
        due = min(total, int((time.perf_counter() - started) * rate))
        while n < due:
            n += 1
            fails = n % 2 == 0
            made["failure" if fails else "success"] += 1
            client.call("bench/py-mixed", boom if fails else noop, fallback=lambda e: None)
        time.sleep(0.002)
    client.close()
    print(json.dumps({"made": made, "seconds": time.perf_counter() - started, "stats": client.stats()}))


def lag(url: str, samples: int) -> None:
    """From client A's call that trips `bench/py-lag` (threshold 1) to client B's transition callback, in ms."""
    import threading

    a, b = Client(url), Client(url)
    assert a.ready(10) and b.ready(10), "no event stream"
    seen = threading.Condition()
    last: list[tuple[str, float]] = []

    def on(e: object) -> None:
        with seen:
            last.append((getattr(e, "to_state", ""), time.perf_counter()))
            seen.notify_all()

    b.on_transition(lambda e: on(e) if e.circuit == "bench/py-lag" else None)
    b.call("bench/py-lag", noop)
    lags: list[float] = []
    for _ in range(samples):
        with seen:
            last.clear()
        t0 = time.perf_counter()
        a.call("bench/py-lag", boom, fallback=lambda e: None)
        with seen:
            seen.wait_for(lambda: any(to == "open" for to, _ in last), 10)
            lags.append((next(t for to, t in last if to == "open") - t0) * 1000)
            last.clear()
        httpx.post(f"{url}/circuits/bench%2Fpy-lag/reset")
        with seen:
            seen.wait_for(lambda: any(to == "closed" for to, _ in last), 10)
    a.close()
    b.close()
    lags.sort()
    print(json.dumps({"p50_ms": statistics.median(lags), "p99_ms": lags[int(len(lags) * 0.99)], "max_ms": lags[-1]}))


if __name__ == "__main__":
    if sys.argv[1] == "calls":
        calls(sys.argv[2], float(sys.argv[3]))
    elif sys.argv[1] == "lag":
        lag(sys.argv[2], int(sys.argv[3]))
    else:
        fleet(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))
