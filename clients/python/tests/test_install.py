"""`pip install ./clients/python` and `pip install "git+...#subdirectory=clients/python"`, in a fresh
virtual environment, as a user would: httpx is the only dependency, and the installed package calls the server."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

from conftest import REPO, Server

PACKAGE = REPO / "clients" / "python"
# httpx and what httpx itself needs; nothing else may come with the client.
ALLOWED = {
    "circuitlog",
    "httpx",
    "httpcore",
    "h11",
    "anyio",
    "idna",
    "sniffio",
    "certifi",
    "typing-extensions",
    "typing_extensions",
    "exceptiongroup",
    "pip",
    "setuptools",
}
SMOKE = """
import sys, circuitlog
with circuitlog.Client(sys.argv[1]) as c:
    assert c.ready(10)
    print(c.call("py/installed", lambda: "called"))
"""


def pip(python: Path, *args: str) -> None:
    env = {**os.environ, "PIP_RETRIES": os.environ.get("PIP_RETRIES", "1"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *args], check=True, env=env, timeout=300)


def test_installs_from_a_path_and_from_git_with_httpx_its_only_dependency(tmp_path: Path, server: Server) -> None:
    venv.create(tmp_path / "env", with_pip=True)
    python = tmp_path / "env" / "bin" / "python"
    pip(python, str(PACKAGE))
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True)
    names = {line.split("==")[0].lower() for line in listed.stdout.split()}
    assert "circuitlog" in names and "httpx" in names
    assert names <= {n.lower() for n in ALLOWED}, names - {n.lower() for n in ALLOWED}
    out = subprocess.run([str(python), "-c", SMOKE, server.url], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "called", out.stderr
    # From git, as `pip install "git+<repo>#subdirectory=clients/python"` (this checkout's HEAD).
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    pip(python, "--force-reinstall", "--no-deps", f"git+file://{REPO}@{head}#subdirectory=clients/python")
    shown = subprocess.run([str(python), "-m", "pip", "show", "-f", "circuitlog"], capture_output=True, text=True)
    assert "circuitlog/py.typed" in shown.stdout  # typed for its users
    out = subprocess.run([str(python), "-c", SMOKE, server.url], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "called", out.stderr
    assert sys.version_info >= (3, 9)
