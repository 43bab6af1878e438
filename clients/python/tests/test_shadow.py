"""Issue 31: a shadow policy's events on the stream never change the client's view."""

from __future__ import annotations

import json
from typing import Any

from circuitlog._core import Core, Options
from circuitlog._wire import Admitted, TransitionEvent, parse_event


def test_reads_the_shadow_mark() -> None:
    data: dict[str, Any] = {"circuit": "svc", "from": "closed", "to": "open", "reason": "failure_threshold_reached"}
    event = parse_event("transition", json.dumps({**data, "shadow": True}), "7")
    assert isinstance(event, TransitionEvent) and event.shadow is True
    event = parse_event("transition", json.dumps(data), "8")
    assert isinstance(event, TransitionEvent) and event.shadow is False


def test_a_shadow_event_leaves_the_view_deciding_locally() -> None:
    core = Core(Options(url="http://127.0.0.1:1"))
    with core.lock:
        core.stream_opened()
        generation, seq = core.before_ask("svc")
        core.answered("svc", Admitted("closed", {"state": "closed"}), generation, seq)
        assert core.decide_locally("svc") is True
        event = parse_event(
            "transition",
            json.dumps(
                {
                    "circuit": "svc",
                    "from": "closed",
                    "to": "open",
                    "reason": "failure_threshold_reached",
                    "at": "x",
                    "shadow": True,
                }
            ),
            "9",
        )
        assert isinstance(event, TransitionEvent)
        core.apply(event)
        assert core.last_event_id == "9"
        assert core.decide_locally("svc") is True
        assert core.entries["svc"].state == "closed"
