"""HTTP to circuitlog with httpx: a sync and an async transport with the same four requests."""

from __future__ import annotations

import contextlib
import socket
from typing import Any

import httpx

from ._local import Json
from ._wire import Answer, TransportError, allowed_answer, allowed_path, circuit_path, failure, is_problem, parse_json

_UNREACHABLE = (httpx.TransportError,)


def _headers(token: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"} if token else {}


def _base(url: str) -> str:
    return url.rstrip("/")


def _circuit(res: httpx.Response) -> Json | None:
    body = parse_json(res.content)
    if res.status_code == 200 and isinstance(body, dict):
        return body
    if res.status_code == 404:
        return None
    raise failure(res.status_code, body)


# The per-item states of the answer are not used: a 204 without them (RFC 7240) is cheaper.
_OUTCOMES_HEADERS = {"content-type": "application/json", "prefer": "return=minimal"}


def _check_outcomes(res: httpx.Response) -> None:
    if res.status_code not in (204, 200):  # 200: a server that ignores the preference
        raise failure(res.status_code, parse_json(res.content))


def _stream_refused(res_status: int, body: object) -> TransportError:
    # A problem document means circuitlog is up and refused the stream (too many open, bad
    # token): the client keeps asking it per call rather than going offline.
    if is_problem(body):
        return TransportError("rejected", f"stream refused: {res_status}", res_status, body)
    return failure(res_status, body)


def stream_headers(token: str | None, last_event_id: str | None) -> dict[str, str]:
    h = {**_headers(token), "accept": "text/event-stream"}
    if last_event_id is not None:
        h["last-event-id"] = last_event_id
    return h


def shutdown_socket(response: httpx.Response) -> None:
    """Unblock a read in another thread: closing a socket does not, shutting it down does."""
    stream = response.extensions.get("network_stream")
    sock: Any = stream.get_extra_info("socket") if stream is not None else None
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class SyncTransport:
    def __init__(self, url: str, token: str | None, timeout: float, stream_idle_timeout: float):
        base, headers = _base(url), _headers(token)
        self.token = token
        self.base = base
        t = httpx.Timeout(timeout)
        self.requests = httpx.Client(base_url=base, headers=headers, timeout=t)
        # Batches go on a connection of their own, in the order recorded.
        self.outcomes = httpx.Client(base_url=base, headers=headers, timeout=t, limits=httpx.Limits(max_connections=1))
        self.streams = httpx.Client(base_url=base, timeout=httpx.Timeout(timeout, read=stream_idle_timeout))

    def allowed(self, name: str, caller: str | None = None) -> Answer:
        path = allowed_path(name, caller)
        try:
            try:
                res = self.requests.get(path)
            except (httpx.RemoteProtocolError, httpx.ReadError):
                res = self.requests.get(path)  # a GET is safe to repeat, once, on a dropped kept-alive socket
        except _UNREACHABLE as e:
            raise TransportError("unreachable", f"circuitlog unreachable ({type(e).__name__})") from e
        return allowed_answer(res.status_code, res.headers, parse_json(res.content))

    def circuit(self, name: str) -> Json | None:
        try:
            res = self.requests.get(circuit_path(name))
        except _UNREACHABLE as e:
            raise TransportError("unreachable", f"circuitlog unreachable ({type(e).__name__})") from e
        return _circuit(res)

    def post_outcomes(self, body: bytes) -> None:
        try:
            res = self.outcomes.post("/outcomes", content=body, headers=_OUTCOMES_HEADERS)
        except _UNREACHABLE as e:
            raise TransportError("unreachable", f"circuitlog unreachable ({type(e).__name__})") from e
        _check_outcomes(res)

    def open_stream(self, last_event_id: str | None) -> httpx.Response:
        """``GET /events/stream``: the open response (status 200), to be read and closed by the caller."""
        req = self.streams.build_request("GET", "/events/stream", headers=stream_headers(self.token, last_event_id))
        try:
            res = self.streams.send(req, stream=True)
        except _UNREACHABLE as e:
            raise TransportError("unreachable", f"circuitlog unreachable ({type(e).__name__})") from e
        if res.status_code != 200:
            try:
                body = parse_json(res.read())
            except _UNREACHABLE:
                body = None
            res.close()
            raise _stream_refused(res.status_code, body)
        return res

    def close(self) -> None:
        for c in (self.requests, self.outcomes, self.streams):
            c.close()


class AsyncTransport:
    def __init__(self, url: str, token: str | None, timeout: float, stream_idle_timeout: float):
        base, headers = _base(url), _headers(token)
        self.token = token
        t = httpx.Timeout(timeout)
        self.requests = httpx.AsyncClient(base_url=base, headers=headers, timeout=t)
        self.outcomes = httpx.AsyncClient(
            base_url=base, headers=headers, timeout=t, limits=httpx.Limits(max_connections=1)
        )
        self.streams = httpx.AsyncClient(base_url=base, timeout=httpx.Timeout(timeout, read=stream_idle_timeout))

    async def allowed(self, name: str, caller: str | None = None) -> Answer:
        path = allowed_path(name, caller)
        try:
            try:
                res = await self.requests.get(path)
            except (httpx.RemoteProtocolError, httpx.ReadError):
                res = await self.requests.get(path)
        except _UNREACHABLE as e:
            raise TransportError("unreachable", f"circuitlog unreachable ({type(e).__name__})") from e
        return allowed_answer(res.status_code, res.headers, parse_json(res.content))

    async def circuit(self, name: str) -> Json | None:
        try:
            res = await self.requests.get(circuit_path(name))
        except _UNREACHABLE as e:
            raise TransportError("unreachable", f"circuitlog unreachable ({type(e).__name__})") from e
        return _circuit(res)

    async def post_outcomes(self, body: bytes) -> None:
        try:
            res = await self.outcomes.post("/outcomes", content=body, headers=_OUTCOMES_HEADERS)
        except _UNREACHABLE as e:
            raise TransportError("unreachable", f"circuitlog unreachable ({type(e).__name__})") from e
        _check_outcomes(res)

    async def open_stream(self, last_event_id: str | None) -> httpx.Response:
        req = self.streams.build_request("GET", "/events/stream", headers=stream_headers(self.token, last_event_id))
        try:
            res = await self.streams.send(req, stream=True)
        except _UNREACHABLE as e:
            raise TransportError("unreachable", f"circuitlog unreachable ({type(e).__name__})") from e
        if res.status_code != 200:
            try:
                body = parse_json(await res.aread())
            except _UNREACHABLE:
                body = None
            await res.aclose()
            raise _stream_refused(res.status_code, body)
        return res

    async def aclose(self) -> None:
        for c in (self.requests, self.outcomes, self.streams):
            await c.aclose()
