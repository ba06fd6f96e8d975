"""The invocation's deadline, per thread: AWS calls (attempts, retries, socket timeouts) never outlive it.

The batch runner binds the Lambda context to each thread that processes records; :func:`seconds_left` is the
remaining time minus :data:`RESERVE_SECONDS` (kept to answer). Threads without a context have no deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

# Time kept at the end of an invocation to finish the batch (logs, metrics, the response).
RESERVE_SECONDS = 0.5
# A socket timeout is never set below this (0 would mean "non-blocking" to the socket module).
MIN_SOCKET_TIMEOUT = 0.05

_local = threading.local()


def bind(context: Any) -> Callable[[], int] | None:
    """Bind ``context`` (its ``get_remaining_time_in_millis``) to this thread; returns the previous one."""
    previous = getattr(_local, "remaining", None)
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    _local.remaining = remaining if callable(remaining) else None
    return previous


def restore(previous: Callable[[], int] | None) -> None:
    _local.remaining = previous


def seconds_left() -> float | None:
    """Seconds this thread's AWS calls may still take, or None when the thread has no deadline."""
    remaining = getattr(_local, "remaining", None)
    if remaining is None:
        return None
    try:
        return float(remaining()) / 1000.0 - RESERVE_SECONDS
    except Exception:  # a context whose clock fails gives no deadline rather than a failed record
        return None


def socket_timeouts(connect: Any, read: Any) -> tuple[Any, Any]:
    """``(connect, read)`` timeouts of a request on this thread: the static ones, cut to the time left."""
    left = seconds_left()
    if left is None:
        return connect, read
    left = max(left, MIN_SOCKET_TIMEOUT)
    return (
        min(connect, left) if isinstance(connect, (int, float)) else left,
        min(read, left) if isinstance(read, (int, float)) else left,
    )


_timeout_class: Any = None


def _deadline_timeout_class() -> Any:
    """A urllib3 ``Timeout`` whose per-request copy (``clone``, which urllib3 takes for every request) is
    shortened to the calling thread's deadline. Built on first use: urllib3 comes with botocore."""
    global _timeout_class
    if _timeout_class is None:
        from urllib3.util.timeout import Timeout

        class DeadlineTimeout(Timeout):  # type: ignore[misc, valid-type]
            def clone(self) -> Timeout:
                connect, read = socket_timeouts(self._connect, self._read)
                return Timeout(connect=connect, read=read, total=self.total)

        _timeout_class = DeadlineTimeout
    return _timeout_class


def install_deadline_timeouts(client: Any) -> bool:
    """Make ``client``'s socket timeouts follow the calling thread's deadline, through botocore's urllib3
    session (``_endpoint.http_session``). Returns False and changes nothing when those internals differ:
    the client keeps its static timeouts, which the runtime's retries still bound by the deadline.
    """
    try:
        from urllib3.util.timeout import Timeout

        session = client._endpoint.http_session
        static = session._timeout
        manager = session._manager
        if not isinstance(static, Timeout) or manager.connection_pool_kw.get("timeout") is not static:
            return False
        timeout = _deadline_timeout_class()(connect=static._connect, read=static._read, total=static.total)
        session._timeout = timeout
        manager.connection_pool_kw["timeout"] = timeout
        return True
    except Exception:
        return False
