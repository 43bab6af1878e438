"""Circuit name rules, as circuitlog validates them (docs/api.md "Circuit names").

Checked before an outcome is queued: one bad name would make circuitlog reject a whole batch.
"""

from __future__ import annotations

import re

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
