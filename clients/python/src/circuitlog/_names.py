"""Circuit name and caller id rules, as circuitlog validates them (docs/api.md "Circuit names", "Callers").

A name is checked before an outcome is queued: one bad name would make circuitlog reject a whole
batch. The ``caller`` option is checked once, when the client is made.
"""

from __future__ import annotations

import os
import re
import socket

MAX_LENGTH = 200  # characters
# Segments of [A-Za-z0-9_.:~-] joined by single '/', none of them '.' or '..'.
_NAME = re.compile(r"(?!\.\.?(?:/|$))(?!.*/\.\.?(?:/|$))[A-Za-z0-9_.:~-]+(?:/[A-Za-z0-9_.:~-]+)*\Z")
_DOT_SEGMENT = re.compile(r"(?:^|/)\.\.?(?:/|$)")


def name_problem(name: object) -> str | None:
    """None when valid, else why not."""
    if not isinstance(name, str):
        return "must be a string"
    if len(name) > MAX_LENGTH:
        return f"must be at most {MAX_LENGTH} characters"
    if _NAME.match(name):
        return None
    if name == "":
        return "must not be empty"
    if _DOT_SEGMENT.search(name):
        return "must not have '.' or '..' segments"
    return "may hold only letters, digits and _ . : ~ -, in segments separated by single '/'"


def check_name(name: object) -> None:
    problem = name_problem(name)
    if problem is not None:
        raise ValueError(f"Invalid circuit name {name!r}: {problem}")


CALLER_MAX_LENGTH = 128  # characters
# Letters, digits, _ . : ~ - and '/' (src/domain/caller.ts; the default is the host name).
_CALLER = re.compile(r"[A-Za-z0-9_.:~\-/]{1,128}\Z")
_NOT_CALLER = re.compile(r"[^A-Za-z0-9_.:~-]")
CALLER_RULE = "1 to 128 characters: letters, digits, _ . : ~ - and '/'"


def caller_problem(caller: object) -> str | None:
    """None when ``caller`` is a valid caller id (circuitlog's rule), else why not."""
    if not isinstance(caller, str):
        return "must be a string"
    if _CALLER.match(caller):
        return None
    if caller == "":
        return "must not be empty"
    if len(caller) > CALLER_MAX_LENGTH:
        return f"must be at most {CALLER_MAX_LENGTH} characters"
    return "may hold only letters, digits, _ . : ~ - and '/'"


def default_caller(hostname: str | None = None) -> str:
    """The host name, each character a caller id may not hold replaced by '-', cut to the longest id.

    Every process on one host is one caller, so a quorum of three needs three hosts.
    """
    host = _NOT_CALLER.sub("-", socket.gethostname() if hostname is None else hostname) or "host"
    return host[:CALLER_MAX_LENGTH]


def checked_caller(caller: object) -> str:
    """The ``caller`` option: its default when None, else itself if valid; a ValueError naming the rule if not."""
    if caller is None:
        return default_caller()
    problem = caller_problem(caller)
    if problem is not None:
        raise ValueError(f"Invalid caller {caller!r}: {problem} (a caller id is {CALLER_RULE})")
    assert isinstance(caller, str)
    return caller


def credential_caller(
    credential: str, callers: list[str] | None, hostname: str | None = None, pid: int | None = None
) -> str | None:
    """The default caller of a client whose credential ``GET /whoami`` names (issue 30).

    ``<id>/<hostname>/<pid>`` when its caller patterns allow it (the default patterns ``<id>`` and
    ``<id>/*`` do), else ``<id>`` when they allow that; the host name when the server names no
    patterns (CIRCUITLOG_TOKEN, no credentials); None when neither fits (circuitlog then counts
    the outcomes as the credential's id).
    """
    if callers is None:
        return default_caller(hostname)
    patterns = callers

    def allowed(name: str) -> bool:
        return caller_problem(name) is None and any(
            name.startswith(p[:-1]) if p.endswith("*") else p == name for p in patterns
        )

    full = f"{credential}/{default_caller(hostname)}/{os.getpid() if pid is None else pid}"[:CALLER_MAX_LENGTH]
    if allowed(full):
        return full
    return credential if allowed(credential) else None
