"""circuitlog: one line to protect a call, decided in-process, one truth shared by every process.

    from circuitlog import Client, CircuitOpenError
    breakers = Client("http://127.0.0.1:8080", token=os.environ.get("CIRCUITLOG_TOKEN"))
    user = breakers.call("users-api/get", lambda: fetch_user(id), fallback=lambda err: cached(id), timeout=2.0)

See docs/client.md ("Python") in the circuitlog repository.
"""

from ._async import AsyncClient
from ._classify import Classification
from ._core import Connection
from ._domain import BackoffPolicy, Policy, WindowPolicy
from ._errors import (
    CallDeadlineError,
    CallTimeoutError,
    CircuitlogError,
    CircuitlogRequestError,
    CircuitlogUnavailableError,
    CircuitOpenError,
    CircuitRampingError,
    CircuitThrottledError,
    ClientClosedError,
    DependencyThrottledError,
)
from ._sync import Client
from ._wire import TransitionEvent

__all__ = [
    "AsyncClient",
    "BackoffPolicy",
    "CallDeadlineError",
    "CallTimeoutError",
    "CircuitOpenError",
    "CircuitRampingError",
    "CircuitThrottledError",
    "CircuitlogError",
    "CircuitlogRequestError",
    "CircuitlogUnavailableError",
    "Classification",
    "Client",
    "ClientClosedError",
    "Connection",
    "DependencyThrottledError",
    "Policy",
    "TransitionEvent",
    "WindowPolicy",
]
__version__ = "0.1.0"
