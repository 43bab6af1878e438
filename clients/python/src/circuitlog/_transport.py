"""HTTP to circuitlog with httpx: a sync and an async transport with the same four requests."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, NamedTuple

import httpx

from ._local import Json
from ._token import BearerAuth, TokenSource
from ._wire import Answer, TransportError, allowed_answer, allowed_path, circuit_path, failure, is_problem, parse_json

_UNREACHABLE = (httpx.TransportError,)


def _auth(token: TokenSource | str | None) -> BearerAuth:
    return BearerAuth(token if isinstance(token, TokenSource) else TokenSource(token, None))


def whoami_answer(status: int, body: object) -> tuple[str, list[str] | None] | None:
    """``GET /whoami`` (issue 30): the credential's id and caller patterns; None from a server without the route."""
    if status == 404:
        return None
    if status != 200 or not isinstance(body, dict) or not isinstance(body.get("id"), str):
        raise failure(status, body)
    callers = body.get("callers")
    patterns = [c for c in callers if isinstance(c, str)] if isinstance(callers, list) else None
    return body["id"], patterns


def _base(url: str) -> str:
    return url.rstrip("/")


class _Answer(NamedTuple):
    """An answer read whole, within the request's deadline and the size bound."""

    status_code: int
    headers: httpx.Headers
    content: bytes


def _too_long(res: httpx.Response, max_bytes: int) -> TransportError | None:
    length = res.headers.get("content-length", "")
    if length.isdigit() and int(length) > max_bytes:
        return TransportError("unreachable", f"circuitlog's answer is over max_response_bytes ({length} bytes)")
    return None


def _take(body: bytearray, chunk: bytes, max_bytes: int, deadline: float) -> None:
    body += chunk
    if len(body) > max_bytes:
        raise TransportError("unreachable", f"circuitlog's answer is over max_response_bytes ({max_bytes} bytes)")
    if time.monotonic() > deadline:
        raise TransportError("unreachable", "circuitlog's answer did not end within request_timeout")


def _read_sync(chunks: Iterator[bytes], max_bytes: int, deadline: float) -> bytes:
    body = bytearray()
    for chunk in chunks:  # each chunk as it arrives: a trickle is checked against the deadline byte by byte
        _take(body, chunk, max_bytes, deadline)
    return bytes(body)


async def _read_async(chunks: AsyncIterator[bytes], max_bytes: int, deadline: float) -> bytes:
    body = bytearray()
    async for chunk in chunks:
        _take(body, chunk, max_bytes, deadline)
    return bytes(body)


def _circuit(res: _Answer) -> Json | None:
    body = parse_json(res.content)
    if res.status_code == 200 and isinstance(body, dict):
        return body
    if res.status_code == 404:
        return None
    raise failure(res.status_code, body)


# The per-item states of the answer are not used: a 204 without them (RFC 7240) is cheaper.
_OUTCOMES_HEADERS = {"content-type": "application/json", "prefer": "return=minimal"}


def _check_outcomes(res: _Answer) -> None:
    if res.status_code not in (204, 200):  # 200: a server that ignores the preference
        raise failure(res.status_code, parse_json(res.content))


def _stream_refused(res_status: int, body: object) -> TransportError:
    # A problem document means circuitlog is up and refused the stream (too many open, bad
    # token): the client keeps asking it per call rather than going offline.
    if is_problem(body):
        return TransportError("rejected", f"stream refused: {res_status}", res_status, body)
    return failure(res_status, body)


def stream_headers(last_event_id: str | None) -> dict[str, str]:
    h = {"accept": "text/event-stream"}
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
    def __init__(
        self,
        url: str,
        token: TokenSource | str | None,
        timeout: float,
        stream_idle_timeout: float,
        max_response_bytes: int,
    ):
        base, auth = _base(url), _auth(token)
        self.base = base
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        t = httpx.Timeout(timeout)
        self.requests = httpx.Client(base_url=base, auth=auth, timeout=t)
        # Batches go on a connection of their own, in the order recorded.
        self.outcomes = httpx.Client(base_url=base, auth=auth, timeout=t, limits=httpx.Limits(max_connections=1))
        self.streams = httpx.Client(base_url=base, auth=auth, timeout=httpx.Timeout(timeout, read=stream_idle_timeout))

    def _send(self, client: httpx.Client, request: httpx.Request, deadline: float) -> _Answer:
        res = client.send(request, stream=True)
        try:
            too_long = _too_long(res, self.max_response_bytes)
            if too_long is not None:
                raise too_long
            content = _read_sync(res.iter_bytes(), self.max_response_bytes, deadline)
            return _Answer(res.status_code, res.headers, content)
        finally:
            res.close()

    def _request(self, client: httpx.Client, method: str, path: str, *, repeat: bool = False, **kw: Any) -> _Answer:
        """One request, ended by its deadline (``request_timeout`` from now, not per read) and the size bound."""
        deadline = time.monotonic() + self.timeout
        try:
            try:
                return self._send(client, client.build_request(method, path, **kw), deadline)
            except (httpx.RemoteProtocolError, httpx.ReadError):
                if not repeat:
                    raise
                # A GET is safe to repeat, once, on a dropped kept-alive socket.
                return self._send(client, client.build_request(method, path, **kw), deadline)
        except _UNREACHABLE as e:
            raise TransportError("unreachable", f"circuitlog unreachable ({type(e).__name__})") from e

    def allowed(self, name: str, caller: str | None = None) -> Answer:
        res = self._request(self.requests, "GET", allowed_path(name, caller), repeat=True)
        return allowed_answer(res.status_code, res.headers, parse_json(res.content))

    def circuit(self, name: str) -> Json | None:
        return _circuit(self._request(self.requests, "GET", circuit_path(name)))

    def whoami(self) -> tuple[str, list[str] | None] | None:
        res = self._request(self.requests, "GET", "/whoami", repeat=True)
        return whoami_answer(res.status_code, parse_json(res.content))

    def post_outcomes(self, body: bytes) -> None:
        _check_outcomes(self._request(self.outcomes, "POST", "/outcomes", content=body, headers=_OUTCOMES_HEADERS))

    def open_stream(self, last_event_id: str | None) -> httpx.Response:
        """``GET /events/stream``: the open response (status 200), to be read and closed by the caller."""
        req = self.streams.build_request("GET", "/events/stream", headers=stream_headers(last_event_id))
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
    def __init__(
        self,
        url: str,
        token: TokenSource | str | None,
        timeout: float,
        stream_idle_timeout: float,
        max_response_bytes: int,
    ):
        base, auth = _base(url), _auth(token)
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        t = httpx.Timeout(timeout)
        self.requests = httpx.AsyncClient(base_url=base, auth=auth, timeout=t)
        self.outcomes = httpx.AsyncClient(base_url=base, auth=auth, timeout=t, limits=httpx.Limits(max_connections=1))
        self.streams = httpx.AsyncClient(
            base_url=base, auth=auth, timeout=httpx.Timeout(timeout, read=stream_idle_timeout)
        )

    async def _send(self, client: httpx.AsyncClient, request: httpx.Request, deadline: float) -> _Answer:
        res = await client.send(request, stream=True)
        try:
            too_long = _too_long(res, self.max_response_bytes)
            if too_long is not None:
                raise too_long
            content = await _read_async(res.aiter_bytes(), self.max_response_bytes, deadline)
            return _Answer(res.status_code, res.headers, content)
        finally:
            await res.aclose()

    async def _attempts(self, client: httpx.AsyncClient, method: str, path: str, repeat: bool, **kw: Any) -> _Answer:
        deadline = time.monotonic() + self.timeout
        try:
            return await self._send(client, client.build_request(method, path, **kw), deadline)
        except (httpx.RemoteProtocolError, httpx.ReadError):
            if not repeat:
                raise
            return await self._send(client, client.build_request(method, path, **kw), deadline)

    async def _request(
        self, client: httpx.AsyncClient, method: str, path: str, *, repeat: bool = False, **kw: Any
    ) -> _Answer:
        """One request, ended by its deadline (``request_timeout`` from now, head and body) and the size bound."""
        try:
            return await asyncio.wait_for(self._attempts(client, method, path, repeat, **kw), self.timeout)
        except asyncio.TimeoutError:
            raise TransportError("unreachable", "circuitlog's answer did not end within request_timeout") from None
        except _UNREACHABLE as e:
            raise TransportError("unreachable", f"circuitlog unreachable ({type(e).__name__})") from e

    async def allowed(self, name: str, caller: str | None = None) -> Answer:
        res = await self._request(self.requests, "GET", allowed_path(name, caller), repeat=True)
        return allowed_answer(res.status_code, res.headers, parse_json(res.content))

    async def circuit(self, name: str) -> Json | None:
        return _circuit(await self._request(self.requests, "GET", circuit_path(name)))

    async def whoami(self) -> tuple[str, list[str] | None] | None:
        res = await self._request(self.requests, "GET", "/whoami", repeat=True)
        return whoami_answer(res.status_code, parse_json(res.content))

    async def post_outcomes(self, body: bytes) -> None:
        res = await self._request(self.outcomes, "POST", "/outcomes", content=body, headers=_OUTCOMES_HEADERS)
        _check_outcomes(res)

    async def open_stream(self, last_event_id: str | None) -> httpx.Response:
        req = self.streams.build_request("GET", "/events/stream", headers=stream_headers(last_event_id))
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
