"""boto3 clients, created once per execution environment on first use (boto3 is imported only then)."""

from __future__ import annotations

import threading
from typing import Any

from idempotent_runtime import __version__
from idempotent_runtime.deadline import install_deadline_timeouts

USER_AGENT = f"idempotent-runtime/{__version__}"
CONNECT_TIMEOUT = 3
READ_TIMEOUT = 10


class LazyClient:
    """Callable returning one shared low-level client; botocore clients are thread-safe once created."""

    def __init__(
        self,
        service: str,
        client: Any = None,
        *,
        max_pool_connections: int = 10,
        parameter_validation: bool = False,
    ) -> None:
        self.service = service
        self._client = client
        self._pool = max_pool_connections
        self._validate = parameter_validation
        self._lock = threading.Lock()

    @property
    def created(self) -> bool:
        return self._client is not None

    def __call__(self) -> Any:
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = create_client(
                        self.service, max_pool_connections=self._pool, parameter_validation=self._validate
                    )
                client = self._client
        return client


def create_client(service: str, *, max_pool_connections: int = 10, parameter_validation: bool = False) -> Any:
    """A boto3 client configured as the runtime's own (inject it into build_handler to measure or test
    with the same settings): botocore's retries off (the runtime retries within the invocation's time) and
    socket timeouts following the thread's deadline. The garbage collector is paused while it is built
    (a full collection there costs ~20 ms of cold start) and what exists then is frozen (``gc.freeze``).
    """
    import gc

    paused = gc.isenabled()
    gc.disable()
    try:
        client = _create_client(service, max_pool_connections, parameter_validation)
    finally:
        if paused:
            gc.enable()
    gc.freeze()
    return client


def _create_client(service: str, max_pool_connections: int, parameter_validation: bool) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(
        # Requests the runtime builds itself are valid by construction: client-side validation is skipped
        # for them (about a sixth of botocore's CPU per call); transaction mode, which sends the
        # processor's own entries, turns it on.
        parameter_validation=parameter_validation,
        # A fixed User-Agent: botocore otherwise rebuilds and sanitises a long one on every request
        # (about a quarter of its CPU per call).
        user_agent=USER_AGENT,
        retries={"mode": "standard", "total_max_attempts": 1},
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=READ_TIMEOUT,
        tcp_keepalive=True,
        max_pool_connections=max_pool_connections,
    )
    client = boto3.client(service, config=config)
    install_deadline_timeouts(client)
    return client
