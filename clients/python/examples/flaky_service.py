"""A small service that protects a flaky dependency with the circuitlog Python client.

    npm start                                        # circuitlog on http://127.0.0.1:8080
    python clients/python/examples/flaky_service.py  # prints one JSON line per answer, then a summary

get_user() asks a "users-api" that fails or hangs now and then (here: in the same process, on
loopback). Each call goes through the circuit ``users-api/get``: a slow answer times out after
300 ms, a failure or a refusal is answered from the last good copy. Every instance of this
service shares the circuit through circuitlog, so when one trips it, the others stop calling too.

Env: CIRCUITLOG_URL (http://127.0.0.1:8080), CIRCUITLOG_TOKEN, REQUESTS (50), INTERVAL_MS (50: pause
between requests), FAILURE_RATE (0.3: share of users-api calls that fail), SLOW_RATE (0.1: share that hang 1 s).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from circuitlog import CircuitOpenError, Client, TransitionEvent

FAILURE_RATE = float(os.environ.get("FAILURE_RATE", "0.3"))
SLOW_RATE = float(os.environ.get("SLOW_RATE", "0.1"))
calls_to_users_api = 0


class UsersApi(BaseHTTPRequestHandler):
    """The flaky dependency."""

    def do_GET(self) -> None:
        global calls_to_users_api
        calls_to_users_api += 1
        roll = random.random()
        if roll < FAILURE_RATE:
            self.send_response(500)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        if roll < FAILURE_RATE + SLOW_RATE:
            time.sleep(1)
        user_id = self.path.rsplit("/", 1)[-1]
        body = json.dumps({"id": user_id, "name": f"user {user_id}"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def main() -> None:
    users_api = ThreadingHTTPServer(("127.0.0.1", 0), UsersApi)
    threading.Thread(target=users_api.serve_forever, daemon=True).start()
    http = httpx.Client(base_url=f"http://127.0.0.1:{users_api.server_port}")

    def on_transition(e: TransitionEvent) -> None:
        print(json.dumps({"event": "circuit", "from": e.from_state, "to": e.to_state, "reason": e.reason}), flush=True)

    breakers = Client(
        os.environ.get("CIRCUITLOG_URL", "http://127.0.0.1:8080"),
        token=os.environ.get("CIRCUITLOG_TOKEN"),
        on_transition=on_transition,
    )
    cache: dict[str, dict[str, Any]] = {}  # the last good answer per user: the fallback

    def fetch_user(user_id: str) -> dict[str, Any]:
        res = http.get(f"/users/{user_id}")
        res.raise_for_status()
        user: dict[str, Any] = res.json()
        return user

    def cached(user_id: str, error: Exception) -> dict[str, Any]:
        if user_id not in cache:
            raise error  # nothing to fall back to: let the caller see why
        why = "circuit open" if isinstance(error, CircuitOpenError) else type(error).__name__
        return {**cache[user_id], "stale": True, "why": why}

    @breakers.protect("payments/charge", timeout=3.0)
    def charge(order: str) -> str:
        return f"charged {order}"

    def get_user(user_id: str) -> dict[str, Any]:
        user = breakers.call(
            "users-api/get", lambda: fetch_user(user_id), fallback=lambda err: cached(user_id, err), timeout=0.3
        )
        if not user.get("stale"):
            cache[user_id] = user
        return user

    answered = {"users-api": 0, "cache": 0, "error": 0}
    breakers.ready(5)
    print(json.dumps({"event": "charge", "result": charge("order-1")}), flush=True)
    for i in range(int(os.environ.get("REQUESTS", "50"))):
        user_id = str(i % 5)
        try:
            user = get_user(user_id)
            source = "cache" if user.get("stale") else "users-api"
        except Exception as error:  # no cached copy yet
            source, user = "error", {"error": type(error).__name__}
        answered[source] += 1
        print(json.dumps({"event": "answer", "user": user_id, "source": source, **user}), flush=True)
        time.sleep(int(os.environ.get("INTERVAL_MS", "50")) / 1000)
    breakers.close()  # returns once circuitlog has every outcome
    summary = {
        "event": "summary",
        "answered": answered,
        "calls_to_users_api": calls_to_users_api,
        "client": breakers.stats(),
    }
    print(json.dumps(summary), flush=True)
    users_api.shutdown()


if __name__ == "__main__":
    main()
