"""Forking (gunicorn, multiprocessing): the child starts its own stream and sends only its own outcomes."""

from __future__ import annotations

import os

from conftest import Server

from circuitlog import Client


def test_a_forked_child_streams_on_its_own_and_nothing_is_counted_twice(server: Server) -> None:
    client = Client(server.url, flush_delay=2.0, flush_at=1_000)  # the parent's outcomes are still queued at fork
    assert client.ready(10)
    for _ in range(10):
        client.call("py/fork", lambda: None)
    assert client.stats()["outcomes_pending"] == 10
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            assert client.stats()["outcomes_pending"] == 0  # the parent delivers its own
            for _ in range(5):
                client.call("py/fork", lambda: None)
            assert client.ready(10)  # its own stream
            client.close()
            code = 0 if client.stats()["outcomes_acknowledged"] == 5 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    client.close()
    assert client.stats()["outcomes_acknowledged"] == 10
    import httpx

    text = httpx.get(f"{server.url}/metrics").text
    assert 'circuitlog_outcomes_total{circuit="py/fork",kind="success",outcome="success"} 15' in text
