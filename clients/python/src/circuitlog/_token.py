"""Where the client's bearer token comes from (issue 30): a fixed string, a callable asked before
each request (a rotating token: cache in it if asking is costly), or a file re-read when it
changes (a Kubernetes projected service-account token, rotated on disk): its modification time
is looked at at most once per second, and the file read again only when that changed. A file
that cannot be read later keeps the last token read; one missing at start is an error.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Generator
from typing import Callable, Union

import httpx

#: A token, or a callable giving one (``Client`` and ``AsyncClient`` both call it, synchronously).
TokenOption = Union[str, Callable[[], str], None]

#: s: how often a token file's modification time is looked at, at most.
TOKEN_FILE_CHECK = 1.0


class TokenSource:
    """The ``Authorization`` header of each request, from a token, a callable or a file."""

    def __init__(self, token: TokenOption, token_file: str | None, clock: Callable[[], float] = time.monotonic) -> None:
        if token is not None and token_file is not None:
            raise ValueError("give token or token_file, not both")
        if token is not None and not isinstance(token, str) and not callable(token):
            raise TypeError("token must be a string or a callable returning one")
        self._token = token
        self._file = token_file
        self._clock = clock
        self._lock = threading.Lock()
        self._mtime = 0.0
        self._read = ""
        self._checked = clock()
        if token_file is not None:
            self._mtime, self._read = self._read_file(token_file)  # missing at start: raises OSError

    @property
    def configured(self) -> bool:
        return self._token is not None or self._file is not None

    @staticmethod
    def _read_file(path: str) -> tuple[float, str]:
        mtime = os.stat(path).st_mtime
        with open(path, encoding="utf-8") as f:
            return mtime, f.read().strip()

    def token(self) -> str | None:
        """The token to send now, or None."""
        if self._file is not None:
            return self._from_file(self._file)
        if callable(self._token):
            return self._token()
        return self._token

    def _from_file(self, path: str) -> str:
        with self._lock:
            now = self._clock()
            if now - self._checked >= TOKEN_FILE_CHECK:
                self._checked = now
                try:
                    if os.stat(path).st_mtime != self._mtime:
                        self._mtime, self._read = self._read_file(path)
                except OSError:
                    pass  # being replaced, or gone for a moment: the last token read is still the best guess
            return self._read

    def headers(self) -> dict[str, str]:
        token = self.token()
        return {"authorization": f"Bearer {token}"} if token else {}


class BearerAuth(httpx.Auth):
    """httpx's per-request hook: each request (sync or async) carries the token of the moment."""

    def __init__(self, source: TokenSource) -> None:
        self.source = source

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers.update(self.source.headers())
        yield request
