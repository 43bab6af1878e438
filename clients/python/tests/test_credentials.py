"""Issue 30 in the Python client: the default caller ``<id>/<hostname>/<pid>`` from ``GET /whoami``,
and a token from a callable or a file re-read when it changes (sync and async). Against the real
server process with a credentials file, on loopback."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import Server, wait_for

from circuitlog import AsyncClient, Client
from circuitlog import _token as token_module
from circuitlog._names import credential_caller, default_caller
from circuitlog._token import TokenSource

TOKEN_A = "token-a-0123456789abcdef0123456789"
TOKEN_B = "token-b-0123456789abcdef0123456789"
OPS = "token-ops-0123456789abcdef0123456789"
POLICY = {"failure_threshold": 3, "timeout_seconds": 60, "quorum": {"min_callers": 2}}


class Boom(Exception):
    pass


def boom() -> None:
    raise Boom("boom")


async def aboom() -> None:
    raise Boom("boom")


def write_credentials(path: Path, credential: str, token: str) -> None:
    def entry(id_: str, tok: str, scopes: list[str]) -> dict[str, Any]:
        return {"id": id_, "token_sha256": hashlib.sha256(tok.encode()).hexdigest(), "scopes": scopes}

    body = {"credentials": [entry(credential, token, ["report", "read"]), entry("ops", OPS, ["admin"])]}
    path.with_suffix(".next").write_text(json.dumps(body))
    path.with_suffix(".next").replace(path)


def serve(server_factory: Any, tmp_path: Path, credential: str = "checkout", token: str = TOKEN_A) -> Server:
    credentials = tmp_path / "credentials.json"
    write_credentials(credentials, credential, token)
    server: Server = server_factory(POLICY, {"CIRCUITLOG_CREDENTIALS": str(credentials)})
    return server


def circuit(server: Server, name: str) -> dict[str, Any]:
    res = httpx.get(
        f"{server.url}/circuits/{urllib.parse.quote(name, safe='')}", headers={"authorization": f"Bearer {OPS}"}
    )
    assert res.status_code == 200, res.text
    body: dict[str, Any] = res.json()
    return body


def expected_caller(credential: str = "checkout") -> str:
    return f"{credential}/{default_caller()}/{os.getpid()}"


def test_defaults_its_caller_to_id_hostname_pid_from_whoami(server_factory: Any, tmp_path: Path) -> None:
    server = serve(server_factory, tmp_path)
    client = Client(server.url, token=TOKEN_A)
    assert client.ready(10)
    assert client.caller == expected_caller()
    for _ in range(3):
        with pytest.raises(Boom):
            client.call("dep", boom)
    client.close()
    assert client.stats()["outcomes_rejected"] == 0
    # Its own three failures isolate it alone (the quorum of 2 withholds the trip).
    body = circuit(server, "dep")
    assert body["state"] == "closed"
    assert [e["caller"] for e in body["isolated_callers"]] == [expected_caller()]


def test_the_async_client_asks_a_token_callable_and_whoami(server_factory: Any, tmp_path: Path) -> None:
    server = serve(server_factory, tmp_path)
    asked: list[int] = []

    def provider() -> str:
        asked.append(1)
        return TOKEN_A

    async def main() -> None:
        client = AsyncClient(server.url, token=provider)
        assert await client.ready(10)
        assert client.caller == expected_caller()
        with pytest.raises(Boom):
            await client.call("adep", aboom)
        await client.close()
        assert client.stats()["outcomes_rejected"] == 0

    asyncio.run(main())
    assert len(asked) >= 3  # whoami, the stream, the batch
    assert circuit(server, "adep")["failure_count"] == 1


def test_re_reads_a_rotated_token_file(server_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = serve(server_factory, tmp_path)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN_A + "\n")
    client = Client(server.url, token_file=str(token_file))
    assert client.ready(10)
    with pytest.raises(Boom):
        client.call("rotated", boom)
    # The server now knows the credential by its new token only; then the file is rotated.
    write_credentials(tmp_path / "credentials.json", "checkout", TOKEN_B)
    wait_for(
        lambda: httpx.get(f"{server.url}/whoami", headers={"authorization": f"Bearer {TOKEN_A}"}).status_code == 401
    )
    token_file.write_text(TOKEN_B + "\n")
    later = token_file.stat().st_mtime + 5
    os.utime(token_file, (later, later))
    monkeypatch.setattr(token_module, "TOKEN_FILE_CHECK", 0.0)  # no second's wait for the next look
    with pytest.raises(Boom):
        client.call("rotated", boom)
    client.close()
    assert client.stats()["outcomes_rejected"] == 0
    assert circuit(server, "rotated")["failure_count"] == 2


def test_token_file_is_looked_at_once_a_second_and_read_again_only_when_changed(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one\n")
    now = [0.0]
    source = TokenSource(None, str(path), clock=lambda: now[0])
    assert source.headers() == {"authorization": "Bearer one"}
    path.write_text("two")
    later = path.stat().st_mtime + 5
    os.utime(path, (later, later))
    now[0] = 0.999
    assert source.token() == "one"
    now[0] = 1.0
    assert source.token() == "two"
    path.unlink()
    now[0] = 5.0
    assert source.token() == "two"  # gone for a moment: the last token read
    with pytest.raises(OSError):
        TokenSource(None, str(path))
    with pytest.raises(ValueError):
        TokenSource("x", str(path))
    assert TokenSource(None, None).headers() == {}
    assert TokenSource(lambda: "c", None).token() == "c"


def test_credential_caller_rules() -> None:
    assert credential_caller("token", None, "web-1", 42) == "web-1"
    assert credential_caller("checkout", ["checkout", "checkout/*"], "web 1", 42) == "checkout/web-1/42"
    assert credential_caller("checkout", ["checkout"], "web-1", 42) == "checkout"
    assert credential_caller("checkout", ["shared/*"], "web-1", 42) is None
    explicit = Client("http://127.0.0.1:9", token="x", caller="me")
    assert explicit.caller == "me"
    explicit.close()
