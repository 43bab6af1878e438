"""An incremental ``text/event-stream`` parser with bounds (WHATWG rules, enough for circuitlog).

https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation
A line longer than ``max_line_bytes`` or an event whose data exceeds ``max_event_bytes`` is
discarded whole (up to its blank line) and reported as ``oversized``: memory stays bounded
whatever the peer sends, and the caller knows it missed an event.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Callable

MAX_LINE_BYTES = 64 * 1024  # 64 KiB
MAX_EVENT_BYTES = 256 * 1024  # 256 KiB


@dataclass(frozen=True)
class SseMessage:
    event: str
    data: str
    #: The last ``id:`` seen so far (it persists across messages, as the spec says).
    id: str | None
    #: True when this event (or a line of it) was too large and discarded; ``data`` is then empty.
    oversized: bool = False


class SseParser:
    def __init__(
        self,
        on_message: Callable[[SseMessage], None],
        max_line_bytes: int = MAX_LINE_BYTES,
        max_event_bytes: int = MAX_EVENT_BYTES,
    ):
        self._on_message = on_message
        self._max_line = max_line_bytes
        self._max_event = max_event_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []
        self._data_size = 0
        self._last_id: str | None = None
        self._skipping = False  # discarding an oversized event until its blank line
        self._skip_line = False  # discarding the rest of an oversized line

    def push(self, chunk: bytes) -> None:
        """Feed bytes as they arrive; chunks may split lines and UTF-8 characters anywhere."""
        self._buffer += self._decoder.decode(chunk)
        buf = self._buffer
        start = 0
        n = len(buf)
        while start < n:
            cr = buf.find("\r", start)
            lf = buf.find("\n", start)
            if cr < 0 and lf < 0:
                break
            end = lf if cr < 0 or (0 <= lf < cr) else cr
            width = 1
            if buf[end] == "\r":
                if end == n - 1:
                    break  # may be the first half of '\r\n': wait for more
                if buf[end + 1] == "\n":
                    width = 2
            line = buf[start:end]
            start = end + width
            if self._skip_line:
                self._skip_line = False
                continue
            self._line(line)
        self._buffer = buf[start:]
        if len(self._buffer.encode("utf-8", "replace")) > self._max_line:
            self._buffer = ""
            self._skip_line = True
            self._oversize()

    def _oversize(self) -> None:
        if not self._skipping:
            self._skipping = True
            self._data = []
            self._data_size = 0

    def _line(self, line: str) -> None:
        if line == "":
            self._dispatch()
            return
        if line.startswith(":") or self._skipping:
            return  # a comment (the server's heartbeat), or part of an event being discarded
        if len(line) > self._max_line and len(line.encode("utf-8", "replace")) > self._max_line:
            self._oversize()
            return
        colon = line.find(":")
        name = line if colon < 0 else line[:colon]
        value = "" if colon < 0 else line[colon + 1 :]
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data_size += len(value) + 1
            if self._data_size > self._max_event:
                self._oversize()
                return
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._last_id = value

    def _dispatch(self) -> None:
        if self._skipping:
            self._on_message(SseMessage(self._event or "message", "", self._last_id, oversized=True))
        elif self._data:
            self._on_message(SseMessage(self._event or "message", "\n".join(self._data), self._last_id))
        self._event = ""
        self._data = []
        self._data_size = 0
        self._skipping = False
